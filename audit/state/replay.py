"""Rebuild the feature state from the ledger: the decisions of the last 30 days, replayed.

Each decision record names its event time (``at``), the message format and the canonical
transaction's SHA-256; its raw message sits in the payload store. Replaying those messages in
ledger order through ``FeatureExtractor.observe`` gives the same velocity windows and transaction
graph the pipeline had (integers throughout; see ``inference.velocity`` and ``inference.graph``:
every sealed value depends on the payments of its window alone). A decision whose payload was
purged or erased cannot be replayed: it is counted in the report and left out, which only matters
inside its 30-day window. A velocity snapshot (``inference.state_store``) saved with the ledger
size it covers makes a restart replay only the entries after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Engine, select

from audit.decide.record import DECISION_KIND
from inference.features import FeatureExtractor
from inference.messages import Transaction, parse_messages, transaction_schema_of
from ledger import store

__all__ = ["ReplayReport", "decision_pages", "replay_decisions", "window_start_seq"]

WINDOW = timedelta(days=30, hours=1)  # the graph's window (the longest), plus queueing slack
_PAGE = 2000


@dataclass(frozen=True)
class ReplayReport:
    replayed: int
    missing_payload: int
    from_seq: int
    to_seq: int  # exclusive


def window_start_seq(engine: Engine, now: datetime | None = None) -> int:
    """The first seq recorded within ``WINDOW`` of ``now`` (default: of the newest entry)."""
    e = store.entries
    with engine.connect() as conn:
        size = store.tail(conn)[0]
        if size == 0:
            return 0
        newest = conn.execute(select(e.c.recorded_at).where(e.c.seq == size - 1)).scalar_one()
        ref = now or datetime.fromisoformat(newest.replace("Z", "+00:00"))
        cutoff = (ref - WINDOW).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lo, hi = 0, size  # recorded_at never decreases with seq: binary search on the index
        while lo < hi:
            mid = (lo + hi) // 2
            at = conn.execute(select(e.c.recorded_at).where(e.c.seq == mid)).scalar_one()
            if at < cutoff:
                lo = mid + 1
            else:
                hi = mid
        return lo


def decision_pages(engine: Engine, from_seq: int) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    """The decision entries from ``from_seq`` on, in seq order, a page at a time: (seq, envelope)."""
    e = store.entries
    seq = from_seq
    while True:
        with engine.connect() as conn:
            rows = conn.execute(select(e.c.seq, e.c.record).where(e.c.kind == DECISION_KIND, e.c.seq >= seq)
                                .order_by(e.c.seq).limit(_PAGE)).all()
        if not rows:
            return
        yield [(int(s), orjson.loads(r)) for s, r in rows]
        seq = int(rows[-1][0]) + 1


def _decisions(engine: Engine, from_seq: int) -> Iterator[tuple[int, dict[str, Any], bytes | None]]:
    p = store.payloads
    for envs in decision_pages(engine, from_seq):
        wanted = {env["payload_sha256"] for _, env in envs if "payload_sha256" in env}
        with engine.connect() as conn:
            data = dict(conn.execute(select(p.c.sha256, p.c.data).where(p.c.sha256.in_(wanted))).all())
        for s, env in envs:
            yield s, env["record"], data.get(env.get("payload_sha256", ""))


def replay_decisions(engine: Engine, extractor: FeatureExtractor, from_seq: int,
                     progress: Callable[[int], None] | None = None) -> ReplayReport:
    """Feed every decision from ``from_seq`` on back through ``extractor`` (in ledger order)."""
    txs: list[Transaction] = []
    times: list[datetime] = []
    replayed = missing = 0
    last = from_seq
    # A FIN file or pacs.008 of 10,000 messages is one payload: parse it once, not once per decision.
    last_key: tuple[Any, Any, str] = (None, None, "")
    last_parsed: dict[str, Transaction] = {}
    for seq, body, raw in _decisions(engine, from_seq):
        last = seq + 1
        tx = None
        if raw is not None:
            want = body["input"]["transaction_sha256"]
            schema = transaction_schema_of(body["input"].get("parser"))
            key = (body.get("input", {}).get("raw_sha256"), body["input"]["format"], schema)
            if key != last_key:  # the decisions of one multi-message payload follow each other
                last_key = key
                last_parsed = {t.sha256_of(schema): t for t in parse_messages(raw, body["input"]["format"])
                               if isinstance(t, Transaction)}
            tx = last_parsed.get(want)
        if tx is None:
            missing += 1
            continue
        txs.append(tx)
        times.append(datetime.fromisoformat(body["at"].replace("Z", "+00:00")))
        if len(txs) >= _PAGE:
            extractor.observe(txs, times)
            replayed += len(txs)
            txs, times = [], []
            if progress is not None:
                progress(replayed)
    if txs:
        extractor.observe(txs, times)
        replayed += len(txs)
    return ReplayReport(replayed, missing, from_seq, last)
