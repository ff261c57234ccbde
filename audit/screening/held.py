"""Held payments screened again when the lists change, and every new hit recorded.

A payment held for an officer (its alert's payment state ``HELD``, ``audit.cases``) waits, perhaps
for days, while the lists it was screened against are updated. ``rescreen_held`` screens each such
payment again against the lists in force now (with the good-guy clearances in force), and for each
listed entry found that the decision's record does not name (a name added to a list since, an entry
whose names changed), seals an annotation of that decision (``NOTE``, ``audit.annotations``) that
says so: the list and its version, the entry, the listed name or identifier matched, the score and
where in the payment. A hit an earlier run annotated in the same words (same list version, score
and place) is not annotated again. The annotation travels with the decision into export bundles
and shows on its trace. The decision itself is not changed (records are append-only); the officer
working the alert reads the annotation.

Which payments are held is read from the alert view (a derived table the ledger verifies); a payment
whose payload was purged cannot be screened again and is counted.

Each payment is screened under ``HELD_BUDGET_FACTOR`` times the deciding budget
(``inference.screening.screen``): a payment held because its screening stopped at the decision's
budget is screened much further here, yet a list load is never stalled for minutes by one text of
thousands of listed words. One that stops even so is listed in the report (``in_part``) and its
decision annotated once with where screening stopped; the hits found before are annotated as ever.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import select

from audit.annotations import MAX_NOTE, annotate
from audit.cases.state import Payment
from audit.cases.store import catch_up
from audit.cases.tables import alerts
from audit.decide.account_secret import load_keyer
from audit.decide.principal import Principal
from audit.decide.record import SCREENED_SCHEMAS
from audit.query.index import trace_annotations
from audit.screening.clearance import party_of
from audit.screening.screener import Screener
from inference.messages import MessageError, Transaction, parse_messages, transaction_schema_of
from inference.screening.screen import Hit, screen
from ledger import store
from ledger.append import Ledger

__all__ = ["HELD_BUDGET_FACTOR", "HeldReport", "rescreen_held"]

HELD_BUDGET_FACTOR = 16  # a held payment is screened again under this many times the deciding budget


@dataclass
class HeldReport:
    """What screening the held payments again found."""

    held: int = 0  # payments held when it ran
    screened: int = 0
    purged: int = 0  # not screened: the payment's bytes were purged
    annotated: list[dict[str, Any]] = field(default_factory=list)  # {seq, trace_id, annotation_seqs, hits}
    in_part: list[dict[str, Any]] = field(default_factory=list)  # {seq, trace_id, stopped, budget}

    def to_json(self) -> dict[str, Any]:
        return {"held": self.held, "screened": self.screened, "purged": self.purged,
                "annotated": self.annotated, "in_part": self.in_part}


def _note(h: Hit, sha: str) -> str:
    return (f"screened again after a list update: {h.basis} hit of entry {h.entry_id} of list "
            f"{h.list_name} (version {sha[:12]}), '{h.matched}', score {h.score}, at {h.where}; the "
            "decision's record does not name it")


def _in_part_note(where: str, budget: int) -> str:
    return (f"screened again after a list update in part only: screening stopped in {where} at its budget "
            f"of {budget:,} units (a free text of very many listed words); no hit after it was looked for")


def _notes(sentences: list[str]) -> list[str]:
    """The sentences joined by "; " into as few notes as fit ``MAX_NOTE`` each, none cut."""
    out = [""]
    for s in sentences:
        if out[-1] and len(out[-1]) + 2 + len(s) > MAX_NOTE:
            out.append("")
        out[-1] = f"{out[-1]}; {s}" if out[-1] else s
    return out


def _annotated(ledger: Ledger, seq: int) -> str:
    """The notes of the annotations of decision ``seq``, joined (what earlier runs said of it)."""
    e = store.entries
    with ledger.engine.connect() as conn:
        seqs = list(conn.execute(select(trace_annotations.c.seq).where(trace_annotations.c.target_seq == seq))
                    .scalars())
        rows = conn.execute(select(e.c.record).where(e.c.seq.in_(seqs))).scalars().all() if seqs else []
    return "\n".join(str(orjson.loads(r)["record"].get("note", "")) for r in rows)


def rescreen_held(ledger: Ledger, principal: Principal | Mapping[str, Any], *,
                  screener: Screener | None = None) -> HeldReport:
    """Screen every held payment again against the lists in force; annotate each decision meeting an
    entry its record does not name (see the module's text). ``screener``: a deciding process's own
    (brought up to the log here, so the list just loaded is parsed and indexed once, not again
    beside it); by default one of its own."""
    report = HeldReport()
    catch_up(ledger.engine)  # the alert view as the ledger has it now
    if screener is None:
        screener = Screener(ledger.engine, background=False)
    screener.refresh(wait=True)
    in_force = screener.in_force
    if in_force.index is None:
        return report
    e, p = store.entries, store.payloads
    with ledger.engine.connect() as conn:
        held = [int(s) for s in conn.execute(select(alerts.c.seq).where(alerts.c.payment == Payment.HELD)
                                             .order_by(alerts.c.seq)).scalars()]
    report.held = len(held)
    budget = screener.budget * HELD_BUDGET_FACTOR
    keyer = None
    day = datetime.now(UTC).date()
    for seq in held:
        with ledger.engine.connect() as conn:
            row = conn.execute(select(e.c.record).where(e.c.seq == seq)).scalar_one()
            env = orjson.loads(row)
            sha = env.get("payload_sha256")
            data = None if sha is None else conn.execute(select(p.c.data).where(p.c.sha256 == sha)).scalar()
        body = env["record"]
        if data is None:
            report.purged += 1
            continue
        inp = body["input"]
        try:
            parsed = parse_messages(bytes(data), inp["format"])
            schema = transaction_schema_of(inp.get("parser"))
        except (MessageError, KeyError, ValueError):
            continue
        tx = next((t for t in parsed if isinstance(t, Transaction) and t.sha256_of(schema) == inp[
            "transaction_sha256"]), None)
        if tx is None:
            continue
        report.screened += 1
        known: set[tuple[str, str]] = set()
        if body.get("schema") in SCREENED_SCHEMAS:
            scr = body["screening"]
            known = {(h["list"], h["entry_id"]) for h in [*scr["hits"], *scr.get("cleared", ())]}
        new: list[Hit] = []
        got = screen(tx, in_force.index, budget=budget)
        for h in got.hits:
            if (h.list_name, h.entry_id) in known:
                continue
            party = party_of(tx, h.where) if h.basis == "name" else None
            if party is not None and party.account and in_force.cleared:
                keyer = keyer or load_keyer(ledger.engine)
                key = (keyer.key(party.account), h.list_name, h.entry_id)
                if any(c.clears(day) for c in in_force.cleared.get(key, ())):
                    continue
            known.add((h.list_name, h.entry_id))
            new.append(h)
        said = _annotated(ledger, seq)
        new = [h for h in new if _note(h, h.list_sha256) not in said]  # said once, by an earlier run
        sentences = [_note(h, h.list_sha256) for h in new]
        if got.stopped is not None:
            report.in_part.append({"seq": seq, "trace_id": env["trace_id"], "stopped": got.stopped,
                                   "budget": budget})
            if _in_part_note(got.stopped, budget) not in said:
                sentences.append(_in_part_note(got.stopped, budget))
        if not sentences:
            continue
        parts = _notes(sentences)  # each within an annotation's size
        seqs = [annotate(ledger, str(env["trace_id"]), principal, "NOTE", part).seq for part in parts]
        hits = [{k: v for k, v in h.to_json().items() if k != "text"} for h in new]  # not the payment's words
        report.annotated.append({"seq": seq, "trace_id": env["trace_id"], "annotation_seqs": seqs,
                                 "hits": hits})
    return report
