"""The sanctions screening part of ``sealtrail demo``: sample lists sealed, crafted payments decided.

Before the simulated run the demo seals the sample lists shipped in ``demo_lists/`` (one file in
each official format: OFAC SDN, UN, EU, UK, and a bank's own CSV with fictitious entries), as the
local operator, so every simulated payment is screened against them. A list already in force under
its demo name with the same bytes is not sealed again, so a re-run adds no list record. The lists
carry ``demo-`` names: they never replace a real list loaded under its usual name.

After the run, ``PAYMENTS`` are decided through the same runtime as SWIFT MT103 messages, each made
to show one way a party meets a listed entry: the listed name as listed, in Cyrillic, surname
first, inside the remittance text (``:70:``), a party identifier and an agent BIC equal to listed
ones; and an unlisted name beside them. Their outcomes and screening hits are read back from the
sealed records, as an officer or examiner would see them.

Then the good-guy flow (``clear_and_pay_again``): the local operator proposes a clearance for the
held payment of the listed name as listed (its beneficiary is not the listed person), an officer
with a certificate approves it (four-eyes), and ``FOLLOW_UPS`` are decided: the same customer's
next payment, no longer held, its record naming the clearance, and a payment of the same name to
another account, still held. The crafted payments' beneficiary accounts are drawn from the seed, so
each run's listed-name payment is to a customer no earlier run cleared.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from audit.decide.principal import Principal
    from audit.decide.types import Decision, Submission
    from ledger.append import Ledger

__all__ = ["APPROVAL_RATIONALE", "CLEARANCE_DAYS", "CLEARANCE_RATIONALE", "CLEARED_CASE", "FOLLOW_UPS",
           "LISTS", "LISTS_DIR", "LISTS_RATIONALE", "PAYMENTS", "DemoList", "DemoPayment",
           "clear_and_pay_again", "crafted_submissions", "payment_results", "seal_demo_lists",
           "simulated_screening"]

LISTS_DIR = Path(__file__).parent / "demo_lists"
LISTS_RATIONALE = "demo: sample lists in each official format"
INTERNAL_PUBLISHED = date(2026, 12, 1)  # the bank's CSV does not state its date: the day it was written
CLEARED_CASE = "listed_name"  # the held payment whose beneficiary the demo's officers clear
CLEARANCE_DAYS = 90
CLEARANCE_RATIONALE = "demo: the customer was born 1984 in Porto, passport seen: not the listed person"
APPROVAL_RATIONALE = "demo: second officer, KYC file and passport copy checked"


@dataclass(frozen=True)
class DemoList:
    """One sample list file and how it is sealed: its demo name, format and source."""

    name: str
    file: str
    format: str
    source: str | None = None  # for the formats that do not state it (classic OFAC XML, the bank's CSV)
    published: date | None = None  # for the bank's CSV, which states no date


LISTS = (
    DemoList("demo-ofac-sdn", "ofac_sdn.xml", "ofac-xml", source="ofac-sdn"),
    DemoList("demo-un", "un_consolidated.xml", "un-xml"),
    DemoList("demo-eu", "eu_fsf.xml", "eu-xml"),
    DemoList("demo-uk", "uk_sanctions_list.xml", "uk-xml"),
    DemoList("demo-bank-internal", "bank_internal.csv", "internal-csv", source="internal",
             published=INTERNAL_PUBLISHED),
)


@dataclass(frozen=True)
class DemoPayment:
    """One crafted payment: what it shows (``case``, ``shows``) and the MT103 fields it varies."""

    case: str
    shows: str
    originator: str = "HOFFMANN KLAUS"
    originator_id: str = "NIDN/DE/T22000129"
    beneficiary: str = "ACME TRADING GMBH"
    account_with: str = "DEUTDEFF"  # :57A:, the beneficiary's bank
    remittance: str = "/RFB/INV-2026-991"
    account: int | None = None  # which of the run's beneficiary accounts (None: its own, by position)


PAYMENTS = (
    DemoPayment("unlisted", "a name on no list", originator="BRAUN SABINE",
                originator_id="NIDN/DE/T22000137", beneficiary="NORDWIND LOGISTIK GMBH"),
    DemoPayment("listed_name", "a listed name, as listed", originator="KELLER JONAS",
                originator_id="NIDN/DE/T22000145", beneficiary="Mohammad Reza NAQDI"),
    DemoPayment("cyrillic", "the same name in Cyrillic", originator="WAGNER ANNA",
                originator_id="NIDN/DE/T22000153", beneficiary="Мохаммад Реза Накди"),
    DemoPayment("surname_first", "the same name, surname first", originator="SCHULZ PETER",
                originator_id="NIDN/DE/T22000161", beneficiary="NAQDI Mohammad Reza"),
    DemoPayment("remittance_text", "a listed name in the remittance text",
                originator="FISCHER LENA", originator_id="NIDN/DE/T22000179",
                remittance="/RFB/FX VIA HAJI KHAIRULLAH HAJI SATTAR MONEY EXCHANGE"),
    DemoPayment("party_identifier", "a listed passport number (originator)",
                originator="PETROU ANDREAS", originator_id="CCPT/CY/DX4417305"),
    DemoPayment("agent_bic", "a listed BIC (beneficiary's bank)",
                originator="MEYER TOBIAS", originator_id="NIDN/DE/T22000187", account_with="SLTDKYKY"),
)
_CLEARED_ACCOUNT = next(n for n, p in enumerate(PAYMENTS) if p.case == CLEARED_CASE)
# decided once the clearance of CLEARED_CASE's beneficiary is approved: that customer again (its
# account), and the same name at an account of its own
FOLLOW_UPS = (
    DemoPayment("cleared_customer", "the same customer's next payment", originator="KELLER JONAS",
                originator_id="NIDN/DE/T22000145", beneficiary="Mohammad Reza NAQDI",
                remittance="/RFB/INV-2026-1007", account=_CLEARED_ACCOUNT),
    DemoPayment("other_account", "another account of that name", originator="KRAUSE MARTIN",
                originator_id="NIDN/DE/T22000195", beneficiary="Mohammad Reza NAQDI"),
)

_MT103 = """{{1:F01COBADEFFAXXX0000000000}}{{2:I103DEUTDEFFXXXXN}}{{3:{{121:{uetr}}}}}{{4:
:20:{reference}
:23B:CRED
:32A:{value_date}EUR{amount},
:50F:{originator_id}
1/{originator}
2/FRIEDRICHSTRASSE 123
3/DE/10117 BERLIN
:52A:COBADEFF
:57A:{account_with}
:59F:/{iban}
1/{beneficiary}
2/HAUPTSTRASSE 5
3/DE/80331 MUENCHEN
:70:{remittance}
:71A:OUR
-}}{{5:{{CHK:A1B2C3D4E5F6}}}}"""


def seal_demo_lists(ledger: Ledger, operator: Principal) -> list[dict[str, Any]]:
    """Seal each sample list not already in force with the same bytes under its demo name; each
    sample list as in force afterwards, with ``sealed_now`` saying whether this call sealed it."""
    import hashlib

    from audit.screening.lists import lists_in_force, seal_list

    before = {x.name: x for x in lists_in_force(ledger.engine)}
    out = []
    for spec in LISTS:
        data = (LISTS_DIR / spec.file).read_bytes()
        have = before.get(spec.name)
        fresh = have is None or have.sha256 != hashlib.sha256(data).hexdigest()
        load = have if have is not None and not fresh else seal_list(
            ledger, data, spec.format, spec.name, operator, LISTS_RATIONALE,
            source=spec.source, published=spec.published)  # type: ignore[arg-type]
        out.append({"name": load.name, "file": spec.file, "format": load.format, "source": load.source,
                    "published": load.published, "entries": load.entries, "sha256": load.sha256,
                    "seq": load.seq, "sealed_now": fresh})
    return out


def _submissions(payments: Sequence[DemoPayment], principal: dict[str, Any], at: datetime, seed: int,
                 stream: str, first: int) -> list[Submission]:
    """``payments`` as MT103 submissions; the n-th (from ``first``) pays the run's account n unless it
    names one. UETRs come from ``stream`` of ``seed``, the accounts from one stream for the run."""
    from schwifty import IBAN

    from audit.decide.types import Submission

    rng = random.Random(f"demo-{stream}/{seed}")
    accounts = random.Random(f"demo-accounts/{seed}").randrange(10**7) * 100  # this run's customers
    subs = []
    for n, p in enumerate(payments, start=first):
        uetr = uuid.UUID(int=rng.getrandbits(128), version=4)
        account = accounts + (n if p.account is None else p.account)
        iban = IBAN.generate("DE", bank_code="37040044", account_code=f"{account:010d}")
        raw = _MT103.format(uetr=uetr, reference=f"DEMO{uetr.hex[:12].upper()}",
                            value_date=at.strftime("%y%m%d"), amount=2500 + 125 * n,
                            originator_id=p.originator_id, originator=p.originator,
                            account_with=p.account_with, iban=iban.compact, beneficiary=p.beneficiary,
                            remittance=p.remittance)
        (sub,) = Submission.parse(raw.encode(), "mt", principal, at)
        if not isinstance(sub, Submission):  # written to parse: a refusal is a bug in PAYMENTS
            raise ValueError(f"demo payment {p.case} refused: {sub}")
        subs.append(sub)
    return subs


def crafted_submissions(principal: dict[str, Any], at: datetime, seed: int) -> list[Submission]:
    """``PAYMENTS`` as MT103 submissions received at ``at`` from ``principal``; their UETRs,
    references and beneficiary accounts are drawn from ``seed`` (a re-run on a longer ledger sends
    new payments, to customers no earlier run cleared)."""
    return _submissions(PAYMENTS, principal, at, seed, "crafted", 0)


def _is_sanctions(rule: str) -> bool:
    return rule.startswith("SANCTIONS_")


def payment_results(engine: Engine, decisions: Sequence[Decision],
                    payments: Sequence[DemoPayment] = PAYMENTS) -> list[dict[str, Any]]:
    """What each of ``payments`` was decided, as its sealed record states: the outcome, the rules
    fired (``sanctions_rule``: the first sanctions rule among them, else None), the screening hits,
    best first (where in the payment, list, entry, the listed name, identifier or BIC matched, score
    0-1000 and basis) and the name hits a good-guy clearance cleared (``cleared``, each with its
    ``clearance_seq``)."""
    from audit.query.traces import get_trace
    from audit.screening.evidence import evidence_from_json
    from inference.screening.screen import Hit

    def hit(h: Hit) -> dict[str, Any]:
        return {"where": h.where, "list": h.list_name, "entry_id": h.entry_id, "matched": h.matched,
                "score": h.score, "basis": h.basis}

    out = []
    for p, d in zip(payments, decisions, strict=True):
        detail = get_trace(engine, d.trace_id)
        if detail is None:  # the service answered only once the record was durable
            raise LookupError(f"demo payment {p.case}: trace {d.trace_id} is not in the ledger")
        ev = evidence_from_json(detail.body["screening"])
        rules = [h.id for h in d.fired]
        out.append({"case": p.case, "shows": p.shows, "trace_id": d.trace_id, "seq": d.seq,
                    "decision": d.decision, "sanctions_rule": next(filter(_is_sanctions, rules), None),
                    "rules": rules, "hits": [hit(h) for h in ev.hits],
                    "cleared": [{**hit(h), "clearance_seq": seq} for h, seq in ev.cleared]})
    return out


def clear_and_pay_again(ledger: Ledger, refresh: Callable[[], object],
                        decide: Callable[[list[Submission]], list[Decision]],
                        payments: Sequence[Mapping[str, Any]], operator: Principal, officer: Principal,
                        scorer: dict[str, Any], at: datetime,
                        seed: int) -> tuple[dict[str, Any], list[Decision]]:
    """The good-guy flow on the crafted ``payments`` (``payment_results``): ``operator`` proposes
    clearing the beneficiary of ``CLEARED_CASE``'s held payment of its name hit until ``CLEARANCE_DAYS``
    after ``at``, ``officer`` approves it, ``refresh`` puts it in force, and ``FOLLOW_UPS`` are decided
    as ``scorer`` sends them. The clearance (``Clearance.to_json``) with the approval's rationale and
    the follow-ups' results under ``payments``, and their decisions."""
    from audit.screening.clearance import approve_clearance, propose_clearance

    held = next(x for x in payments if x["case"] == CLEARED_CASE)
    hit = next(h for h in held["hits"] if h["basis"] == "name" and h["where"] == "beneficiary")
    c = propose_clearance(ledger, held["trace_id"], hit["where"], hit["list"], hit["entry_id"],
                          at.date() + timedelta(days=CLEARANCE_DAYS), operator, CLEARANCE_RATIONALE,
                          today=at.date())
    c = approve_clearance(ledger, c.seq, officer, APPROVAL_RATIONALE)
    refresh()  # in force for the next batch, not within the second the screener takes to notice
    decisions = decide(_submissions(FOLLOW_UPS, scorer, at, seed, "cleared", len(PAYMENTS)))
    return ({**c.to_json(), "approval_rationale": APPROVAL_RATIONALE,
             "payments": payment_results(ledger.engine, decisions, FOLLOW_UPS)}, decisions)


def simulated_screening(decisions: Sequence[Decision]) -> dict[str, Any]:
    """How the simulated run's decisions fared against the lists: how many fired a sanctions rule,
    by rule (the simulator's parties are on no list, so these are false alarms)."""
    by_rule = Counter(r for d in decisions for r in {h.id for h in d.fired} if _is_sanctions(r))
    return {"decisions": len(decisions),
            "sanctions_alerts": sum(any(_is_sanctions(h.id) for h in d.fired) for d in decisions),
            "by_rule": dict(sorted(by_rule.items()))}
