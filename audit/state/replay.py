"""Rebuild the feature state from the ledger: the decisions of the last 30 days, replayed.

``catch_up`` is how a process brings its state up to a seq: every commit of decisions seals a
``state.delta`` (``audit.state.delta``) holding what each of its decisions advanced the state by,
and applying those in seq order (``FeatureExtractor.advance``) gives the state bit for bit,
without a payload read or parsed, erased payloads included. Decisions sealed before the ledger
held deltas (by an earlier release) are replayed from their messages, as follows.

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

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Engine, select

from audit.decide.record import DECISION_KIND
from audit.state.delta import DELTA_KIND, Delta, parse_delta
from inference.features import FeatureExtractor
from inference.messages import Transaction, parse_messages, transaction_schema_of
from ledger import store

__all__ = ["ReplayReport", "catch_up", "decision_pages", "delta_pages", "entry_pages", "ledger_size",
           "replay_decisions", "window_start_seq"]

WINDOW = timedelta(days=30, hours=1)  # the graph's window (the longest), plus queueing slack
_PAGE = 2000


@dataclass(frozen=True)
class ReplayReport:
    replayed: int
    missing_payload: int
    from_seq: int
    to_seq: int  # exclusive
    from_deltas: int = 0  # of ``replayed``, the decisions applied from sealed state deltas (no payload read)
    last_delta: int | None = None  # seq of the newest state delta the state now includes (None: none)
    foreign_deltas: int = 0  # deltas under another state key: their decisions replayed from payloads


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


def decision_pages(engine: Engine, from_seq: int, to_seq: int | None = None,
                   kind: str = DECISION_KIND) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    """The decision entries (or entries of ``kind``) from ``from_seq`` on (to ``to_seq``, exclusive),
    in seq order, a page at a time: (seq, envelope)."""
    for page in entry_pages(engine, kind, from_seq, to_seq):
        yield [(s, orjson.loads(r)) for s, r in page]


def entry_pages(engine: Engine, kind: str, from_seq: int = 0,
                to_seq: int | None = None) -> Iterator[list[tuple[int, bytes]]]:
    """The entries of ``kind`` from ``from_seq`` on (to ``to_seq``, exclusive), in seq order, a page
    at a time (the ``(kind, seq)`` index): (seq, envelope bytes)."""
    e = store.entries
    seq = from_seq
    while True:
        q = select(e.c.seq, e.c.record).where(e.c.kind == kind, e.c.seq >= seq)
        if to_seq is not None:
            q = q.where(e.c.seq < to_seq)
        with engine.connect() as conn:
            rows = conn.execute(q.order_by(e.c.seq).limit(_PAGE)).all()
        if not rows:
            return
        yield [(int(s), bytes(r)) for s, r in rows]
        seq = int(rows[-1][0]) + 1


def delta_pages(engine: Engine, from_seq: int, to_seq: int | None = None) -> Iterator[list[Delta]]:
    """The state deltas sealed from ``from_seq`` on (to ``to_seq``), parsed, a page at a time;
    ``StateDeltaError`` naming the first that does not follow its schema."""
    for envs in decision_pages(engine, from_seq, to_seq, DELTA_KIND):
        yield [parse_delta(s, env.get("record")) for s, env in envs]


def _decisions(engine: Engine, from_seq: int,
               to_seq: int | None = None) -> Iterator[tuple[int, dict[str, Any], bytes | None]]:
    p = store.payloads
    for envs in decision_pages(engine, from_seq, to_seq):
        wanted = {env["payload_sha256"] for _, env in envs if "payload_sha256" in env}
        with engine.connect() as conn:
            data = dict(conn.execute(select(p.c.sha256, p.c.data).where(p.c.sha256.in_(wanted))).all())
        for s, env in envs:
            yield s, env["record"], data.get(env.get("payload_sha256", ""))


def catch_up(engine: Engine, extractor: FeatureExtractor, from_seq: int, to_seq: int | None = None,
             progress: Callable[[int], None] | None = None,
             pages: Iterable[Sequence[Delta]] | None = None) -> ReplayReport:
    """Bring ``extractor`` from the state of the first ``from_seq`` entries to that of the first
    ``to_seq`` (default: every entry now): the sealed state deltas applied in seq order, and the
    decisions no delta speaks for (sealed before the ledger held deltas, or after it by a writer
    of an earlier release) replayed from their payloads.

    A delta keyed under another key than the extractor's state (one sealed before the ledger's
    account secret was lost and made again) is not applied: its decisions are replayed from their
    payloads like those of an earlier release (``foreign_deltas`` counts such deltas).

    ``pages``: the deltas sealed from ``from_seq`` to ``to_seq`` (``delta_pages``), where the caller
    has read them already (a decider reads them before it changes anything, and catches its
    account risk up from the same deltas)."""
    state_kid = extractor.state.key_id
    end = to_seq if to_seq is not None else ledger_size(engine)
    pos = from_seq  # every decision before pos is applied
    replayed = missing = applied = foreign = 0
    last_delta: int | None = None

    def gap(hi: int) -> None:  # the decisions in [pos, hi) that no delta speaks for, from their messages
        nonlocal replayed, missing
        if hi > pos:
            r = replay_decisions(engine, extractor, pos, hi)
            replayed += r.replayed
            missing += r.missing_payload

    after = from_seq - 1  # the seq after which the next delta's decisions may begin (its summary's)
    for page in (delta_pages(engine, from_seq, end) if pages is None else pages):
        for d in page:
            if d.state_key_id != state_kid:
                foreign += 1
                last_delta = d.seq  # its decisions: replayed from their payloads in the gap before the next
                continue
            if d.first_seq > after + 1:  # more than the summary and delta of the commit before
                gap(d.first_seq)
            skip = max(0, pos - d.first_seq)
            applied += extractor.advance(d.entries[skip:])
            pos = max(pos, d.first_seq + len(d.entries))
            after = last_delta = d.seq
            if progress is not None:
                progress(replayed + applied)
    gap(end)
    return ReplayReport(replayed + applied, missing, from_seq, end, applied, last_delta, foreign)


def ledger_size(engine: Engine) -> int:
    """How many entries the ledger holds now."""
    with engine.connect() as conn:
        return store.tail(conn)[0]


def replay_decisions(engine: Engine, extractor: FeatureExtractor, from_seq: int, to_seq: int | None = None,
                     progress: Callable[[int], None] | None = None) -> ReplayReport:
    """Feed every decision from ``from_seq`` on (to ``to_seq``, exclusive) back through ``extractor``
    (in ledger order), each parsed again from its payload."""
    txs: list[Transaction] = []
    times: list[datetime] = []
    replayed = missing = 0
    last = from_seq
    # A FIN file or pacs.008 of 10,000 messages is one payload: parse it once, not once per decision.
    last_key: tuple[Any, Any, str] = (None, None, "")
    last_parsed: dict[str, Transaction] = {}
    for seq, body, raw in _decisions(engine, from_seq, to_seq):
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
