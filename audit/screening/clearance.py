"""Good-guy clearances: an officer's sealed decision that a customer is not a listed person.

An officer who has looked at a name hit (a decision whose record shows the party and the entry)
proposes a clearance: "the beneficiary of that decision is not entry B-1 of list bank-exits, until
2027-06-30", with a rationale. A second officer approves it (four-eyes: not the same person,
``audit.governance.state.same_person``). From the approval on, and until the end of the stated
day (UTC), a name hit of that entry on a party whose account is that customer's is not a hit: the
decision record names it under ``screening.cleared`` with the clearance, and it does not raise the
screening columns, so the rules do not hold the payment for it. Either officer, or another, may
revoke it; an expired or revoked clearance clears nothing.

The customer is named by the keyed hash of its account (the ledger's account key,
``audit.decide.account_secret``), read from the decision's payload when the clearance is proposed:
no name or account is sealed in clear. Only a name hit can be cleared: an identifier or BIC equal
to a listed one is the listed party itself. A party without an account cannot be cleared.

Records of kind ``screening.clearance`` (body ``sealtrail.screening-clearance/1``), one per step:
``proposed`` (list, entry, the keyed account and key id, ``until``, the decision and place the
officer looked at, rationale, principal), ``approved`` and ``revoked`` (the proposal's seq,
rationale, principal). Which clearances are in force is a function of those records alone
(``clearances``, by ``audit.screening.clearance_state.fold``). An approval is taken by an officer
with a certificate: the local operator cannot be told apart from another (a user name proves
nothing), as for every four-eyes step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from typing import Any, Literal

import orjson
from sqlalchemy import Connection, Engine, select

from audit.decide.account_secret import load_keyer
from audit.decide.principal import Principal
from audit.decide.record import DECISION_KIND, SCREENED_SCHEMAS
from audit.errors import ClearanceError, ClearanceNotFoundError
from audit.governance.state import same_person
from audit.officer_words import signed_act
from audit.screening.clearance_state import CLEARANCE_KIND, CLEARANCE_SCHEMA, Clearance, fold, proposed
from inference.messages import MessageError, Transaction, parse_messages, transaction_schema_of
from inference.messages.transaction import Party
from ledger import Receipt, Record, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes

__all__ = ["CLEARANCE_KIND", "CLEARANCE_SCHEMA", "MAX_DAYS", "Clearance", "approve_clearance", "clearances",
           "party_of", "propose_clearance", "revoke_clearance"]

MAX_DAYS = 366  # a clearance is reviewed at least yearly: ``until`` at most this far ahead
PARTY_ROLES = ("originator", "beneficiary", "ultimate_originator", "ultimate_beneficiary", "initiating_party")
Action = Literal["proposed", "approved", "revoked"]


def party_of(tx: Transaction, where: str) -> Party | None:
    """The party a hit's ``where`` names (``beneficiary``, ``originator.address``, ...), or None."""
    role = where.split(".", 1)[0]
    if role not in PARTY_ROLES:
        return None
    got = getattr(tx, role, None)
    return got if isinstance(got, Party) else None


def _decision(engine: Engine, trace_id: object) -> tuple[int, dict[str, Any], bytes | None]:
    if not isinstance(trace_id, str) or not trace_id:
        raise ClearanceError("trace_id", "must be the trace id of the decision with the hit")
    e, p = store.entries, store.payloads
    with engine.connect() as conn:
        row = conn.execute(select(e.c.seq, e.c.kind, e.c.record)
                           .where(e.c.trace_id == trace_id.lower())).first()
        if row is None:
            raise ClearanceNotFoundError("trace_id", f"no trace {trace_id}")
        if row.kind != DECISION_KIND:
            raise ClearanceError("trace_id", f"trace {trace_id} is a {row.kind} record, not a decision")
        env = orjson.loads(row.record)
        sha = env.get("payload_sha256")
        data = None if sha is None else conn.execute(select(p.c.data).where(p.c.sha256 == sha)).scalar()
    return int(row.seq), env["record"], None if data is None else bytes(data)


def _when(until: object, today: date) -> date:
    if isinstance(until, str):
        try:
            until = date.fromisoformat(until)
        except ValueError:
            raise ClearanceError("until", f"{until!r} is not a date (YYYY-MM-DD)") from None
    if not isinstance(until, date):
        raise ClearanceError("until", "must be a date (YYYY-MM-DD)")
    if until < today:
        raise ClearanceError("until", f"{until.isoformat()} is in the past")
    if until > today + timedelta(days=MAX_DAYS):
        raise ClearanceError("until", f"{until.isoformat()} is more than {MAX_DAYS} days ahead: a clearance "
                                      "is reviewed at least yearly")
    return until


def propose_clearance(ledger: Ledger, trace_id: str, where: str, list_name: str, entry_id: str,
                      until: date | str, principal: Principal | Mapping[str, Any], rationale: str, *,
                      today: date | None = None) -> Clearance:
    """Seal a proposal that the party at ``where`` of decision ``trace_id`` is not entry ``entry_id``
    of list ``list_name``, until ``until``; refused (``ClearanceError`` naming the field, nothing
    sealed) unless that decision states that name hit there and its payload still names the party's
    account."""
    who, why = signed_act(principal, rationale, ClearanceError)
    today = today or date.today()
    until = _when(until, today)
    seq, body, data = _decision(ledger.engine, trace_id)
    if body.get("schema") not in SCREENED_SCHEMAS:
        raise ClearanceError("trace_id", f"decision {trace_id} was not screened ({body.get('schema')})")
    hits = [h for h in body["screening"]["hits"] if h["list"] == list_name and h["entry_id"] == entry_id
            and h["where"] == where]
    if not hits:
        raise ClearanceError("entry_id", f"decision {trace_id} has no hit of entry {entry_id!r} of list "
                                         f"{list_name!r} at {where!r}")
    if hits[0]["basis"] != "name":
        raise ClearanceError("entry_id", f"the hit at {where!r} is an exact {hits[0]['basis']} match: the "
                                         "party is the listed one, and such a hit is never cleared")
    if data is None:
        raise ClearanceError("trace_id", f"the payment of decision {trace_id} was purged: its party's "
                                         "account cannot be read")
    inp = body["input"]
    want = inp["transaction_sha256"]
    try:
        parsed = parse_messages(data, inp["format"])
        schema = transaction_schema_of(inp.get("parser"))
    except (MessageError, KeyError, ValueError) as exc:
        raise ClearanceError("trace_id", f"the payment of decision {trace_id} does not parse: "
                                         f"{exc}") from None
    tx = next((t for t in parsed if isinstance(t, Transaction) and t.sha256_of(schema) == want), None)
    party = None if tx is None else party_of(tx, where)
    if party is None or not party.account:
        raise ClearanceError("where", f"the party at {where!r} of decision {trace_id} has no account to "
                                      "clear it by")
    keyer = load_keyer(ledger.engine)
    rec = {"schema": CLEARANCE_SCHEMA, "action": "proposed", "list": list_name, "entry_id": entry_id,
           "account_key": keyer.key(party.account), "key_id": keyer.key_id, "until": until.isoformat(),
           "decision": {"trace_id": trace_id.lower(), "seq": seq, "where": where}, "principal": who,
           "rationale": why}
    (r,) = ledger.append_many([Record.from_canonical_body(CLEARANCE_KIND, canonical_bytes(rec))])
    return proposed(r.seq, rec, r.recorded_at)


def _step(ledger: Ledger, seq: object, action: Action, principal: Principal | Mapping[str, Any],
          rationale: str) -> Clearance:
    who, why = signed_act(principal, rationale, ClearanceError)
    if type(seq) is not int:
        raise ClearanceError("seq", "must be the seq of the clearance's proposal")
    _may(clearances(ledger.engine), seq, action, who)

    def still(conn: Connection, receipts: Sequence[Receipt]) -> None:
        # again under the sequencer lock, on the log as the step is sealed after it: another officer's
        # step sealed since the read above (an approval, a revocation) refuses this one, nothing written,
        # where it would otherwise be sealed and then ignored by ``fold``
        _may(_read(conn, receipts[0].seq), seq, action, who)
    rec = {"schema": CLEARANCE_SCHEMA, "action": action, "clearance": seq, "principal": who, "rationale": why}
    ledger.append_many([Record.from_canonical_body(CLEARANCE_KIND, canonical_bytes(rec))], alongside=still)
    return {x.seq: x for x in clearances(ledger.engine)}[seq]


def _may(now: Sequence[Clearance], seq: int, action: Action, who: Mapping[str, Any]) -> None:
    """``ClearanceError`` (or ``ClearanceNotFoundError``) unless ``who`` may take ``action`` on the
    clearance proposed at ``seq``, as the clearances ``now`` stand."""
    c = next((x for x in now if x.seq == seq), None)
    if c is None:
        raise ClearanceNotFoundError("seq", f"no clearance was proposed at seq {seq}")
    if c.revoked_seq is not None:
        raise ClearanceError("seq", f"clearance {seq} was revoked at seq {c.revoked_seq}")
    if action == "approved":
        if not who.get("fingerprint_sha256"):
            raise ClearanceError("principal", "an approval is a four-eyes step, taken by an officer with a "
                                              "certificate (HTTP API or console), not by the local operator")
        if c.approved_seq is not None:
            raise ClearanceError("seq", f"clearance {seq} was approved at seq {c.approved_seq}")
        if same_person(c.proposer, who):
            raise ClearanceError("principal", f"clearance {seq} was proposed by "
                                              f"{c.proposer.get('subject')!r}, who cannot approve it: a "
                                              "second officer must (four-eyes)")


def approve_clearance(ledger: Ledger, seq: int, principal: Principal | Mapping[str, Any],
                      rationale: str) -> Clearance:
    """Seal the approval of the clearance proposed at ``seq`` by a second officer; in force from now."""
    return _step(ledger, seq, "approved", principal, rationale)


def revoke_clearance(ledger: Ledger, seq: int, principal: Principal | Mapping[str, Any],
                     rationale: str) -> Clearance:
    """Seal that the clearance proposed at ``seq`` clears nothing from now on."""
    return _step(ledger, seq, "revoked", principal, rationale)


def clearances(engine: Engine, *, before: int | None = None) -> list[Clearance]:
    """Every clearance proposed (before seq ``before`` if given) and what became of it, oldest first."""
    with engine.connect() as conn:
        return _read(conn, before)


def _read(conn: Connection, before: int | None) -> list[Clearance]:
    e = store.entries
    q = select(e.c.seq, e.c.record).where(e.c.kind == CLEARANCE_KIND)
    if before is not None:
        q = q.where(e.c.seq < before)
    rows = conn.execute(q.order_by(e.c.seq)).all()
    recs = []
    for seq, raw in rows:
        env = orjson.loads(raw)
        body = env.get("record")
        if not isinstance(body, dict) or body.get("schema") != CLEARANCE_SCHEMA:
            raise ClearanceError("seq", f"record {seq} of kind {CLEARANCE_KIND} is not a {CLEARANCE_SCHEMA} "
                                        "body")
        recs.append((int(seq), body, str(env.get("recorded_at"))))
    try:
        return fold(recs)
    except (KeyError, TypeError, ValueError) as exc:
        raise ClearanceError("seq", f"a {CLEARANCE_KIND} proposal does not follow {CLEARANCE_SCHEMA}: "
                                    f"{exc}") from None
