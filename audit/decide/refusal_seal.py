"""Sealing a refused request: its ``refusal`` record and the summary that speaks for it, in one commit.

A refusal is sealed in a commit of its own (it decides nothing, so it needs none of the batch
machinery), and like every commit of decisions that commit ends with a ``decision.summary``
(``sealtrail.decision.summary/2``, ``audit.decide.summary``) whose one entry says "the entry
before me is a refusal of this kind". The summary links to the newest summary of the log, read
under the sequencer lock (``Ledger.append_many(tail=...)``), exactly as the pipeline links the
summary of a batch: a refusal and a batch committing at the same time each link to whichever
summary the other sealed first, and the chain stays one line. That is what lets an export bundle
prove that it left no refusal of its window out (``audit.bundle.completeness``).
"""

from __future__ import annotations

from sqlalchemy import Connection

from audit.decide.account_secret import read_keyer
from audit.decide.refusal import Refusal
from audit.decide.summary import SUMMARY_KIND, refusal_entries, summary_body
from ledger import Receipt, Record, store
from ledger.append import Ledger, Tail

__all__ = ["seal_refusal"]


def _summary_tail(kind: str) -> Tail:
    entries = refusal_entries([kind])

    def make(conn: Connection, seq: int) -> Record:
        key_id = read_keyer(conn).key_id  # the ledger's one secret: the same id every summary names
        prev = store.last_of_kind(conn, SUMMARY_KIND)
        return Record.from_jcs(SUMMARY_KIND, summary_body(key_id, entries, prev))
    return make


def seal_refusal(ledger: Ledger, refusal: Refusal) -> Receipt:
    """Seal one refused request (DESIGN.md invariant 12): its ``refusal`` record (the request's
    bytes as its payload, where they were read) and, last in the same commit, the summary that
    speaks for it; durable when this returns. The receipt is the refusal's. ``LedgerError``
    (``LedgerUnavailableError`` most often) if it cannot be sealed: callers still refuse the
    request, without a trace id."""
    receipt, _summary = ledger.append_many([refusal.record()], tail=_summary_tail(refusal.kind))
    return receipt
