"""Screening in the decision: each batch is screened against the lists in force, the record (version 5)
names the list versions and hits, the shipped pack blocks identifier and BIC matches and holds strong name
matches, a list sealed while deciding is picked up without a failed batch, and replay refuses a record
whose screening columns are not those its hits give."""

from __future__ import annotations

from datetime import UTC, date, datetime

import orjson
import pytest
from sqlalchemy import select

from audit.bundle.replay import Replayer
from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.decide.record import DECISION_SCHEMA
from audit.decide.types import ActiveRules, Decision, Submission
from audit.query.index import TraceIndex
from audit.screening.lists import seal_list, withdraw_list
from audit.screening.screener import Screener
from inference.backends import load_backend
from inference.model import ModelFiles
from inference.schema import FEATURE_NAMES, FEATURE_SCHEMA, SCREENING_NAMES
from ledger import store
from ledger.append import Ledger
from wasm_rules import Sandbox

PRINCIPAL = {"subject": "CN=sealtrail-scorer,O=sealtrail dev", "sans": [], "issuer": "CN=sealtrail dev CA",
             "fingerprint_sha256": "ab" * 32, "serial": "01"}
OPERATOR = Principal.local("list-admin")
AT = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
HEADER = b"entry_id,kind,name,aliases,dob,countries,identifiers,bics,programmes\n"
LIST = HEADER + (
    b"B-1,individual,Aleksandr KOVALEV,Alexander Kovalyov,1961-04-02,RU,Passport:7201234567:RU,,RU-EXIT\n"
    b"B-2,entity,Tehran Imports Company,,,IR,,TEHRIRTH,IR-EXIT\n"
    b"B-3,entity,Sevmorneftegaz Trading LLC,,,RU,,,RU-EXIT\n")
MT103 = ("{{1:F01COBADEFFAXXX1234123456}}{{2:I103CHASUS33XXXXN}}"
         "{{3:{{121:3f2504e0-4f89-41d3-9a0c-0305e82c33{n:02d}}}}}{{4:\n") + """:20:PAY-2026-000{n:02d}
:23B:CRED
:32A:261201EUR2500,
:50F:{orig_id}
1/MUELLER HANS PETER
2/FRIEDRICHSTRASSE 123
3/DE/10117 BERLIN
:52A:COBADEFF
:57A:{bank}
:59F:/DE89370400440532013000
1/{bene}
2/HAUPTSTRASSE 5
3/DE/80331 MUENCHEN
:70:{text}
:71A:OUR
-}}{{5:{{CHK:A1B2C3D4E5F6}}}}"""


def message(n: int, bene: str = "ACME TRADING GMBH", *, orig_id: str = "NIDN/DE/T22000129",
            bank: str = "DEUTDEFF", text: str = "/RFB/INV-2026-991") -> Submission:
    raw = MT103.format(n=n, bene=bene, orig_id=orig_id, bank=bank, text=text).encode()
    (sub,) = Submission.parse(raw, "mt", PRINCIPAL, AT)
    assert isinstance(sub, Submission), sub
    return sub


def seal(ledger: Ledger, data: bytes = LIST, name: str = "bank-exits") -> int:
    return seal_list(ledger, data, "internal-csv", name, OPERATOR, "exit list", source="internal",
                     published=date(2026, 11, 30)).seq


def pipeline(ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes, screener: Screener | None) -> Pipeline:
    files = ModelFiles.open()
    return Pipeline(ledger, load_backend("numpy", files.weights_path),
                    ActiveRules.of(sandbox.load(pack_wasm)), screener=screener, index=TraceIndex())


def record(ledger: Ledger, d: Decision) -> dict:  # type: ignore[type-arg]
    with ledger.engine.connect() as conn:
        raw = conn.execute(select(store.entries.c.record).where(store.entries.c.seq == d.seq)).scalar_one()
    body = orjson.loads(raw)["record"]
    assert isinstance(body, dict)
    return body


def column(body: dict, name: str) -> int | None:  # type: ignore[type-arg]
    value = body["features"]["scaled"][FEATURE_NAMES.index(name)]
    assert value is None or isinstance(value, int)
    return value


def fired(d: Decision) -> list[str]:
    return [h.id for h in d.fired]


@pytest.mark.requirement("OFAC-501.601-records", "FATF-R16-sanctions")
def test_listed_names_identifiers_and_bics_decide_and_the_record_names_the_list(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    seq = seal(ledger)
    screener = Screener(ledger.engine)
    screener.refresh()
    pipe = pipeline(ledger, sandbox, pack_wasm, screener)
    subs = [message(1),
            message(2, "KOVALEV ALEKSANDR"),  # reordered
            message(3, "Александр Ковалев"),  # Cyrillic
            message(4, orig_id="CCPT/RU/7201234567"),  # the listed passport
            message(5, bank="TEHRIRTHXXX"),  # the listed bank's BIC
            message(6, text="/RFB/goods for SEVMORNEFTEGAZ TRADING")]  # a listed name in :70:
    ds = pipe.decide(subs)
    bodies = [record(ledger, d) for d in ds]
    for body in bodies:
        assert body["schema"] == DECISION_SCHEMA == "sealtrail.decision/6"
        assert body["features"]["schema"] == FEATURE_SCHEMA == "sealtrail.features/7"
        (ref,) = body["screening"]["lists"]
        assert (ref["name"], ref["seq"], ref["published"]) == ("bank-exits", seq, "2026-11-30")
        assert column(body, "screen_lists") == 1
        assert "screening" in body["latency_us"]
    plain, reordered, cyrillic, passport, bic, text = zip(ds, bodies, strict=True)
    assert plain[0].decision == "ALLOW" and plain[1]["screening"]["hits"] == []
    assert column(plain[1], "screen_best_score") == 0
    for d, body in (reordered, cyrillic):
        assert "SANCTIONS_NAME_STRONG" in fired(d) and d.decision in ("HOLD", "BLOCK")
        (hit,) = body["screening"]["hits"]
        assert (hit["where"], hit["entry_id"], hit["basis"]) == ("beneficiary", "B-1", "name")
        assert hit["score"] >= 920 and column(body, "screen_party_score") == hit["score"]
    assert passport[0].decision == "BLOCK" and "SANCTIONS_IDENTIFIER_MATCH" in fired(passport[0])
    assert {(h["entry_id"], h["basis"]) for h in passport[1]["screening"]["hits"]} == {("B-1", "identifier")}
    assert bic[0].decision == "BLOCK" and "SANCTIONS_BIC_MATCH" in fired(bic[0])
    (hit,) = bic[1]["screening"]["hits"]
    assert (hit["where"], hit["entry_id"], hit["matched"]) == ("agent.account_with.bic", "B-2", "TEHRIRTH")
    assert "SANCTIONS_NAME_STRONG" in fired(text[0])
    (hit,) = text[1]["screening"]["hits"]
    assert (hit["where"], hit["entry_id"], hit["basis"]) == ("remittance", "B-3", "text")
    # the payment's own words stay in its purgeable payload: the record quotes only the list
    assert all("text" not in h for b in bodies for h in b["screening"]["hits"])
    assert b"KOVALEV ALEKSANDR" not in orjson.dumps(reordered[1])


def test_without_lists_the_payment_is_not_screened_and_the_record_says_so(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    for screener in (None, Screener(ledger.engine)):
        (d,) = pipeline(ledger, sandbox, pack_wasm, screener).decide([message(1, "KOVALEV ALEKSANDR")])
        body = record(ledger, d)
        assert body["screening"] == {"lists": [], "hits": [], "findings": []}
        assert column(body, "screen_lists") == 0
        assert all(column(body, n) is None for n in SCREENING_NAMES[1:])  # NaN: not screened
        assert not any(f.startswith("SANCTIONS_") for f in fired(d))


@pytest.mark.requirement("FATF-R16-sanctions")
def test_a_list_sealed_while_deciding_is_used_from_a_later_batch_and_a_withdrawn_one_no_more(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    now = [0.0]
    screener = Screener(ledger.engine, clock=lambda: now[0], check_every_s=1.0)
    pipe = pipeline(ledger, sandbox, pack_wasm, screener)
    (d,) = pipe.decide([message(1, "KOVALEV ALEKSANDR")])
    assert record(ledger, d)["screening"]["lists"] == []
    seal(ledger)
    (d,) = pipe.decide([message(2, "KOVALEV ALEKSANDR")])  # within check_every_s: not looked for yet
    assert record(ledger, d)["screening"]["lists"] == []
    now[0] = 5.0
    pipe.decide([message(3)])  # the look starts the build beside this batch
    screener.wait_built(30)
    (d,) = pipe.decide([message(4, "KOVALEV ALEKSANDR")])
    assert d.decision == "HOLD"
    assert [x["name"] for x in record(ledger, d)["screening"]["lists"]] == ["bank-exits"]
    withdraw_list(ledger, "bank-exits", OPERATOR, "superseded by the OFAC list")
    now[0] = 10.0
    pipe.decide([message(5)])
    screener.wait_built(30)
    (d,) = pipe.decide([message(6, "KOVALEV ALEKSANDR")])
    assert record(ledger, d)["screening"]["lists"] == [] and screener.builds == 2


def test_a_list_older_than_its_freshness_is_a_finding_on_the_decision(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    seal(ledger)  # published 2026-11-30, used on 2026-12-01
    for days, stale in ((1, False), (0, False), (None, False)):
        screener = Screener(ledger.engine, max_age_days=days)
        screener.refresh()
        (d,) = pipeline(ledger, sandbox, pack_wasm, screener).decide([message(1)])
        assert bool(record(ledger, d)["screening"]["findings"]) is stale
    late = Submission.parse(message(1).raw, "mt", PRINCIPAL, datetime(2027, 1, 15, tzinfo=UTC))[0]
    assert isinstance(late, Submission)
    screener = Screener(ledger.engine, max_age_days=30)
    screener.refresh()
    (d,) = pipeline(ledger, sandbox, pack_wasm, screener).decide([late])
    (finding,) = record(ledger, d)["screening"]["findings"]
    assert "bank-exits" in finding and "46 days old" in finding and "30 days" in finding
    with pytest.raises(ValueError, match="screening_max_age_days"):
        Screener(ledger.engine, max_age_days=-1)


def test_replay_refuses_screening_columns_the_stated_hits_do_not_give(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    seal(ledger)
    screener = Screener(ledger.engine)
    screener.refresh()
    ds = pipeline(ledger, sandbox, pack_wasm, screener).decide([message(1), message(2, "KOVALEV ALEKSANDR")])
    bodies = [record(ledger, d) for d in ds]
    files = ModelFiles.open()
    module = {bodies[0]["rules"]["module_sha256"]: pack_wasm}
    weights = {files.model_sha256: files.weights_path.read_bytes()}

    def replay(body: dict, seq: int) -> list[str]:  # type: ignore[type-arg]
        r = Replayer(sandbox, module.__getitem__, weights.__getitem__)
        return [f"{e.kind}: {e}" for e in r.add(seq, "t", body) + r.flush()]

    assert replay(bodies[0], 1) == [] and replay(bodies[1], 2) == []
    dropped = {**bodies[1], "screening": {**bodies[1]["screening"], "hits": []}}  # a hit left out
    (err,) = replay(dropped, 2)
    assert err.startswith("replay.screening") and "screen_best_score" in err
    raised = orjson.loads(orjson.dumps(bodies[0]))
    raised["screening"]["hits"] = bodies[1]["screening"]["hits"]  # a hit the columns do not show
    (err,) = replay(raised, 1)
    assert err.startswith("replay.screening")
    garbled = {**bodies[0], "screening": {"lists": "bank-exits"}}
    (err,) = replay(garbled, 1)
    assert err.startswith("replay.screening") and "cannot be read" in err
