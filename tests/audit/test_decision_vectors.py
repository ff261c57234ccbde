"""One test vector per decision record version: version 3 (explanations) re-encodes to its bytes,
replays and recomputes its reason codes from the model and module kept beside it; version 2
(account risk) re-encodes to its bytes, holds together and rebuilds to the values it states;
version 1 records (from the bundle vectors) still read, add no account risk and index with null
account-risk columns."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
import rfc8785

from audit.bundle.replay import Replayer
from audit.decide.account_risk import (
    AccountRiskError,
    AccountRiskPolicy,
    AccountRiskState,
    check_account_risk,
)
from audit.decide.explanation import Explanation
from audit.decide.record import (
    DECISION_SCHEMA,
    DECISION_SCHEMA_V1,
    DECISION_SCHEMA_V2,
    DECISION_SCHEMA_V3,
    DECISION_SCHEMA_V4,
    DECISION_SCHEMA_V5,
    DECISION_SCHEMA_V6,
    DECISION_SCHEMA_V7,
    features_from_body,
)
from audit.query.index import record_rows
from audit.state.account_risk_replay import apply_records
from inference.features import features_sha256
from inference.schema import FEATURE_SCHEMAS, feature_digits
from ledger.jcs import canonical_bytes
from wasm_rules import Sandbox

VECTORS = Path(__file__).parents[1] / "vectors"


def _v2() -> list[tuple[bytes, dict[str, Any]]]:
    lines = (VECTORS / "decision-v2" / "records.jsonl").read_bytes().splitlines()
    return [(line, orjson.loads(line)) for line in lines]


def _v1() -> list[dict[str, Any]]:
    with zipfile.ZipFile(VECTORS / "bundle-v4" / "bundle.zip") as z:
        envs = [orjson.loads(x) for x in z.read("records.jsonl").splitlines()]
    return [e for e in envs if e["kind"] == "decision"]


def test_version_2_records_re_encode_to_their_bytes() -> None:
    for line, body in _v2():
        assert body["schema"] == DECISION_SCHEMA_V2
        assert canonical_bytes(body) == line == rfc8785.dumps(body)


def test_version_2_records_hold_together_and_the_second_alerts_though_allowed() -> None:
    risks = [check_account_risk(body) for _, body in _v2()]
    assert [r.alerts for r in risks] == [(), ("originator",), ()]
    assert [b["decision"] for _, b in _v2()] == ["ALLOW"] * 3


def test_a_rebuild_from_the_version_2_vector_states_what_the_records_state() -> None:
    state = AccountRiskState(AccountRiskPolicy(threshold_milli=9000))
    report = apply_records(state, [(i, b) for i, (_, b) in enumerate(_v2())])
    assert (report.applied, report.mismatched, report.unreadable) == (3, 0, 0)
    orig = _v2()[-1][1]["account_risk"]["originator"]
    assert state.risk(orig["account"]) == orig["after_milli"] == 13_500


def test_an_altered_version_2_record_fails_its_own_check() -> None:
    body = _v2()[1][1]
    body["account_risk"]["alerts"] = []
    with pytest.raises(AccountRiskError, match="alerts"):
        check_account_risk(body)


def test_version_1_records_still_read_and_add_no_account_risk() -> None:
    envs = _v1()
    assert envs and {e["record"]["schema"] for e in envs} == {DECISION_SCHEMA_V1}
    state = AccountRiskState()
    report = apply_records(state, list(enumerate(e["record"] for e in envs)))
    assert (report.applied, report.without_risk, len(state)) == (0, len(envs), 0)
    row, _ = record_rows(7, envs[0])
    assert row[-2:] == (None, None)


def _v3() -> list[tuple[bytes, dict[str, Any]]]:
    lines = (VECTORS / "decision-v3" / "records.jsonl").read_bytes().splitlines()
    return [(line, orjson.loads(line)) for line in lines]


def _v3_replayer(sandbox: Sandbox) -> Replayer:
    here = VECTORS / "decision-v3"
    module, weights = (here / "pack.wasm").read_bytes(), (here / "weights.npz").read_bytes()
    return Replayer(sandbox, lambda sha: module, lambda sha: weights)


def test_version_3_records_re_encode_to_their_bytes_and_state_their_reasons() -> None:
    got = _v3()
    for line, body in got:
        assert body["schema"] == DECISION_SCHEMA_V3 == "sealtrail.decision/3"
        assert canonical_bytes(body) == line == rfc8785.dumps(body)
        check_account_risk(body)  # version 3 is version 2 and an explanation
    said = [Explanation.from_json(b["explanation"]) for _, b in got]
    assert [s.reasons is not None and len(s.reasons) > 0 for s in said] == [True] * 3 + [False] * 2
    assert all(r.text and r.contribution_milli >= 20 for s in said[:3] for r in s.reasons or ())


def test_version_3_records_replay_and_their_explanations_recompute(sandbox: Sandbox) -> None:
    rp = _v3_replayer(sandbox)
    errs = [e for i, (_, b) in enumerate(_v3()) for e in rp.add(i + 1, f"t{i}", b)] + rp.flush()
    assert errs == [] and (rp.replayed, rp.rescored, rp.explained) == (5, 5, 3)


def test_an_altered_reason_in_the_version_3_vector_is_named(sandbox: Sandbox) -> None:
    rp = _v3_replayer(sandbox)
    body = _v3()[0][1]
    body["explanation"]["reasons"][0]["text"] = "an ordinary payment"
    errs = rp.add(1, "t0", body) + rp.flush()
    assert [e.kind for e in errs] == ["replay.explanation"] and "an ordinary payment" in errs[0].detail


def test_version_2_and_3_records_rebuild_account_risk_alike() -> None:
    state = AccountRiskState()
    report = apply_records(state, [(i, b) for i, (_, b) in enumerate(_v3())])
    assert (report.applied, report.without_risk, report.unreadable) == (5, 0, 0)


def _v4() -> list[tuple[bytes, dict[str, Any]]]:
    lines = (VECTORS / "decision-v4" / "records.jsonl").read_bytes().splitlines()
    return [(line, orjson.loads(line)) for line in lines]


def _v4_replayer(sandbox: Sandbox) -> Replayer:
    here = VECTORS / "decision-v4"
    module, weights = (here / "pack.wasm").read_bytes(), (here / "weights.npz").read_bytes()
    return Replayer(sandbox, lambda sha: module, lambda sha: weights)


def _floats(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for v in value.values() for f in _floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in _floats(v)]
    return []


def test_version_4_records_hold_no_float_and_re_encode_to_their_bytes() -> None:
    got = _v4()
    for line, body in got:
        assert body["schema"] == DECISION_SCHEMA_V4 == "sealtrail.decision/4"
        assert _floats(body) == []  # every number parses back as an integer
        assert canonical_bytes(body) == line == rfc8785.dumps(body)
        assert "score" not in body and "values" not in body["features"]
        check_account_risk(body)  # its points from score_ppm
    said = [Explanation.from_json(b["explanation"]) for _, b in got]
    assert [s.reasons is not None and len(s.reasons) > 0 for s in said] == [True] * 3 + [False] * 2


def test_version_4_values_are_the_integers_over_their_digits_and_hash_as_recorded() -> None:
    for _, body in _v4():
        values, score = features_from_body(body)
        f = body["features"]
        assert f["digits"] == list(feature_digits(f["schema"]))
        assert values == [s / 10**d for s, d in zip(f["scaled"], f["digits"], strict=True)]
        assert features_sha256(np.array(values)) == f["sha256"]
        assert score == body["score_ppm"] / 1_000_000


def test_version_4_records_replay_and_their_explanations_recompute(sandbox: Sandbox) -> None:
    rp = _v4_replayer(sandbox)
    errs = [e for i, (_, b) in enumerate(_v4()) for e in rp.add(i + 1, f"t{i}", b)] + rp.flush()
    assert errs == [] and (rp.replayed, rp.rescored, rp.explained) == (5, 5, 3)


@pytest.mark.parametrize(("field", "value", "kind"), [
    ("scaled", 1, "replay.features_sha256"),  # another integer: the values no longer hash as recorded
    ("scaled", 0.5, "replay.body"),  # a float where an integer belongs
    ("digits", 3, "replay.body"),  # digits that are not the schema's
    ("score_ppm", 1_000_001, "replay.body"),  # beyond 10**6
])
def test_an_altered_number_in_the_version_4_vector_is_named(sandbox: Sandbox, field: str, value: object,
                                                            kind: str) -> None:
    body = _v4()[0][1]
    if field == "score_ppm":
        body["score_ppm"] = value
    else:
        body["features"][field][0] = value
    rp = _v4_replayer(sandbox)
    errs = rp.add(1, "t0", body) + rp.flush()
    assert kind in [e.kind for e in errs]


def test_a_version_4_record_indexes_its_score_as_the_value_it_stands_for() -> None:
    body = _v4()[0][1]
    row, _ = record_rows(3, {"trace_id": "t", "recorded_at": body["at"], "record": body})
    assert body["score_ppm"] / 1_000_000 in row


def _v5() -> list[tuple[bytes, dict[str, Any]]]:
    lines = (VECTORS / "decision-v5" / "records.jsonl").read_bytes().splitlines()
    return [(line, orjson.loads(line)) for line in lines]


def _v5_replayer(sandbox: Sandbox) -> Replayer:
    here = VECTORS / "decision-v5"
    module, weights = (here / "pack.wasm").read_bytes(), (here / "weights.npz").read_bytes()
    return Replayer(sandbox, lambda sha: module, lambda sha: weights)


def test_version_5_records_re_encode_replay_and_name_the_list_they_were_screened_against(
        sandbox: Sandbox) -> None:
    got = _v5()
    list_sha = hashlib.sha256((VECTORS / "decision-v5" / "list.csv").read_bytes()).hexdigest()
    for line, body in got:
        assert body["schema"] == DECISION_SCHEMA_V5 == "sealtrail.decision/5"
        assert body["features"]["schema"] == "sealtrail.features/5" and _floats(body) == []
        assert canonical_bytes(body) == line == rfc8785.dumps(body)
        assert body["screening"]["lists"] == [{"name": "bank-exits", "published": "2026-11-30", "seq": 1,
                                               "sha256": list_sha}]
    assert [(b["decision"], [h["basis"] for h in b["screening"]["hits"]]) for _, b in got] == [
        ("ALLOW", []), ("HOLD", ["name"]), ("HOLD", ["name"]), ("BLOCK", ["identifier"]), ("BLOCK", ["bic"]),
        ("HOLD", ["text"])]
    rp = _v5_replayer(sandbox)
    errs = [e for i, (_, b) in enumerate(got) for e in rp.add(i + 1, f"t{i}", b)] + rp.flush()
    assert errs == [] and rp.replayed == 6


def test_a_version_5_hit_removed_or_a_screening_column_changed_is_named(sandbox: Sandbox) -> None:
    body = _v5()[1][1]
    body["screening"]["hits"] = []
    rp = _v5_replayer(sandbox)
    assert "replay.screening" in [e.kind for e in rp.add(1, "t0", body) + rp.flush()]
    body = _v5()[0][1]
    body["features"]["scaled"][-1] = 1  # screen_hits 1 with no hit stated
    rp = _v5_replayer(sandbox)
    assert "replay.screening" in [e.kind for e in rp.add(1, "t0", body) + rp.flush()]


def _v6() -> list[tuple[bytes, dict[str, Any]]]:
    lines = (VECTORS / "decision-v6" / "records.jsonl").read_bytes().splitlines()
    return [(line, orjson.loads(line)) for line in lines]


def _v6_replayer(sandbox: Sandbox, card: bytes | None = None, *, given: bool = True) -> Replayer:
    here = VECTORS / "decision-v6"
    module, weights = (here / "pack.wasm").read_bytes(), (here / "weights.npz").read_bytes()
    card = (here / "card.json").read_bytes() if card is None else card
    return Replayer(sandbox, lambda sha: module, lambda sha: weights,
                    fetch_card=(lambda sha: card) if given else None)


def _replay(rp: Replayer, bodies: list[dict[str, Any]]) -> list[Any]:
    return [e for i, b in enumerate(bodies) for e in rp.add(i + 1, f"t{i}", b)] + rp.flush()


def test_version_6_records_state_their_precision_re_encode_and_replay(sandbox: Sandbox) -> None:
    got = _v6()
    v5 = [b for _, b in _v5()]
    for (line, body), old in zip(got, v5, strict=True):
        assert body["schema"] == DECISION_SCHEMA == DECISION_SCHEMA_V6 == "sealtrail.decision/6"
        assert canonical_bytes(body) == line == rfc8785.dumps(body) and _floats(body) == []
        # version 5 and model.precision: nothing else in the layout moved
        assert set(body) == set(old) and set(body["model"]) == {"sha256", "backend", "precision"}
        assert body["model"]["backend"] == "numpy" and body["decision"] == old["decision"]
    assert [b["model"]["precision"] for _, b in got] == ["fp32"] * 3 + ["fp16"] * 3
    rp = _v6_replayer(sandbox)
    assert _replay(rp, [b for _, b in got]) == [] and rp.replayed == rp.rescored == 6


def test_a_version_6_precision_without_a_bound_in_the_card_fails_naming_it(sandbox: Sandbox) -> None:
    bodies = [b for _, b in _v6()]
    card = orjson.loads((VECTORS / "decision-v6" / "card.json").read_bytes())
    del card["score_precision"]["max_abs_diff"]["fp16"]
    for rp in (_v6_replayer(sandbox, orjson.dumps(card)), _v6_replayer(sandbox, given=False),
               _v6_replayer(sandbox, b"not json")):
        errs = _replay(rp, bodies)
        assert [(e.kind, e.seq) for e in errs] == [("replay.precision", s) for s in (4, 5, 6)]
        assert all("precision fp16 on numpy" in str(e) and "42106ee7fee2" in str(e) for e in errs)
    # at the reference's precision no bound is needed: fp32 replays with no card at all
    rp = _v6_replayer(sandbox, given=False)
    assert _replay(rp, bodies[:3]) == []


def _off(body: dict[str, Any], by: int) -> dict[str, Any]:
    """``body`` with its score moved ``by`` millionths."""
    return {**body, "score_ppm": body["score_ppm"] + by}


def test_the_tolerance_is_the_cards_bound_for_the_precision_and_never_below_1e_4(sandbox: Sandbox) -> None:
    got = [b for _, b in _v6()]
    v5 = [b for _, b in _v5()]
    card = orjson.loads((VECTORS / "decision-v6" / "card.json").read_bytes())
    bound = card["score_precision"]["max_abs_diff"]["fp16"]["numpy"]
    assert bound > 1e-3
    # versions 5 and 6 at fp32: 1e-4, as ever (the score 200 ppm off fails, 50 holds)
    for body in (v5[0], got[0]):
        assert _replay(_v6_replayer(sandbox), [_off(body, 50)]) == []
        errs = _replay(_v6_replayer(sandbox), [_off(body, 200)])
        assert [e.kind for e in errs] == ["replay.score"] and "> 0.0001" in str(errs[0])
    # fp16: the card's bound plus 1e-6
    inside = round(bound * 1e6) - 40  # the recorded fp16 scores lie within 30 ppm of the reference
    assert _replay(_v6_replayer(sandbox), [_off(got[4], inside)]) == []
    errs = _replay(_v6_replayer(sandbox), [_off(got[4], round(bound * 1e6) + 40)])
    assert [e.kind for e in errs] == ["replay.score"]
    assert "computed at fp16 on numpy" in str(errs[0]) and f"> {bound + 1e-6:.3g}" in str(errs[0])
    # a smaller bound than 1e-4 does not tighten the fixed tolerance
    card["score_precision"]["max_abs_diff"]["fp16"]["numpy"] = 1e-7
    assert _replay(_v6_replayer(sandbox, orjson.dumps(card)), [_off(got[4], 50)]) == []


def test_precision_is_stated_in_version_6_only(sandbox: Sandbox) -> None:
    v5 = _v5()[0][1]
    v5["model"] = {**v5["model"], "precision": "fp16"}
    v6 = [b for _, b in _v6()]
    missing = {**v6[0], "model": {k: v for k, v in v6[0]["model"].items() if k != "precision"}}
    empty = {**v6[0], "model": {**v6[0]["model"], "precision": ""}}
    number = {**v6[0], "model": {**v6[0]["model"], "precision": 16}}
    for body in (v5, missing, empty, number):
        errs = _replay(_v6_replayer(sandbox), [body])
        assert [e.kind for e in errs] == ["replay.precision"], body["model"]


def _v7() -> list[tuple[bytes, dict[str, Any]]]:
    lines = (VECTORS / "decision-v7" / "records.jsonl").read_bytes().splitlines()
    return [(line, orjson.loads(line)) for line in lines]


def _v7_replayer(sandbox: Sandbox) -> Replayer:
    here = VECTORS / "decision-v7"
    module, weights = (here / "pack.wasm").read_bytes(), (here / "weights.npz").read_bytes()
    return Replayer(sandbox, lambda sha: module, lambda sha: weights)


def test_version_7_records_state_where_screening_stopped_re_encode_and_replay(sandbox: Sandbox) -> None:
    (line6, v6), (line7, v7) = _v7()
    assert (v6["schema"], v7["schema"]) == (DECISION_SCHEMA_V6, DECISION_SCHEMA_V7)
    for line, body in ((line6, v6), (line7, v7)):
        assert canonical_bytes(body) == line == rfc8785.dumps(body) and _floats(body) == []
    # version 6 and screening.stopped / screening.budget: nothing else in the layout moved
    assert set(v7) == set(v6) and set(v7["model"]) == set(v6["model"])
    assert set(v7["screening"]) - set(v6["screening"]) == {"stopped", "budget"}
    assert (v7["screening"]["stopped"], v7["screening"]["budget"]) == ("remittance", 760)
    assert v7["decision"] == "HOLD" and [f["id"] for f in v7["fired"]] == ["SANCTIONS_SCREENING_INCOMPLETE"]
    scaled = dict(zip(FEATURE_SCHEMAS["sealtrail.features/5"], v7["features"]["scaled"], strict=True))
    assert scaled["screen_lists"] is not None and scaled["screen_best_score"] is None
    rp = _v7_replayer(sandbox)
    assert _replay(rp, [v6, v7]) == [] and rp.replayed == rp.rescored == 2


def test_where_screening_stopped_is_stated_in_version_7_only(sandbox: Sandbox) -> None:
    (_, v6), (_, v7) = _v7()
    unsaid = {**v7, "screening": {k: v for k, v in v7["screening"].items() if k not in ("stopped", "budget")}}
    said = {**v6, "screening": {**v6["screening"], "stopped": "remittance", "budget": 760}}
    relabelled = {**v7, "schema": DECISION_SCHEMA_V6}
    half = {**v7, "screening": {k: v for k, v in v7["screening"].items() if k != "stopped"}}
    zero = {**v7, "screening": {**v7["screening"], "budget": 0}}
    for body in (unsaid, said, relabelled, half, zero):
        errs = _replay(_v7_replayer(sandbox), [body])
        assert "replay.screening" in [e.kind for e in errs], body["screening"]
    # stopped, the scores are not known: a record stating one anyway is named
    known = {**v7, "features": {**v7["features"], "scaled": list(v7["features"]["scaled"])}}
    names = FEATURE_SCHEMAS["sealtrail.features/5"]
    known["features"]["scaled"][names.index("screen_best_score")] = 0
    errs = _replay(_v7_replayer(sandbox), [known])
    assert "replay.screening" in [e.kind for e in errs]
