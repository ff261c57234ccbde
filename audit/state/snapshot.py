"""Velocity windows saved at a clean stop, bound to the exact ledger prefix they cover.

Rebuilding the windows replays every decision of the last seven days (``velocity_replay``):
fine for thousands, too slow for millions. At a clean stop the service writes its state with
the ledger size it covers and the chain hash of the last covered entry; the next start restores
it and replays only what follows. The snapshot is trusted only if the chain hash still matches
(same ledger, same history) and is written only when the state is exactly the replay of that
prefix: every decision sealed since the windows were last rebuilt is one this process made. A
process killed without a clean stop leaves the old snapshot, which no longer matches or is
followed by a longer replay — never a wrong state.

File: one JSON line ``{"schema", "origin", "size", "chain"}`` then the
``VelocityState.snapshot()`` bytes, replaced atomically.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
from sqlalchemy import Engine

from audit.decide.record import DECISION_KIND
from audit.state.replay import ReplayReport, replay_decisions, window_start_seq
from inference.errors import FeatureError
from inference.features import FeatureExtractor
from inference.state_store import write_atomically
from inference.velocity import VelocityState
from ledger import store

__all__ = ["SNAPSHOT_SCHEMA", "Restored", "decisions_between", "ledger_size", "restore", "save"]

SNAPSHOT_SCHEMA = "sealtrail.velocity-snapshot/1"


@dataclass(frozen=True)
class Restored:
    extractor: FeatureExtractor
    from_snapshot: bool  # False: no usable snapshot, the windows were replayed in full
    covered: int  # ledger size the state is the replay of
    report: ReplayReport


def _chain(engine: Engine, size: int) -> str | None:
    if size == 0:
        return None
    with engine.connect() as conn:
        try:
            return store.chain_at(conn, size - 1).hex()
        except LookupError:
            return None


def ledger_size(engine: Engine) -> int:
    with engine.connect() as conn:
        return store.tail(conn)[0]


def decisions_between(engine: Engine, lo: int, hi: int) -> int:
    """How many decision entries sit at seq lo..hi-1."""
    with engine.connect() as conn:
        p = store.param(conn)
        n = conn.exec_driver_sql(
            f"SELECT COUNT(*) FROM ledger_entries WHERE kind = {p} AND seq >= {p} AND seq < {p}",
            (DECISION_KIND, lo, hi)).scalar_one()
    return int(n)


def save(path: Path, engine: Engine, origin: str, state: VelocityState, covered: int) -> None:
    """Write ``state`` as the replay of the first ``covered`` entries (the caller vouches)."""
    head = {"schema": SNAPSHOT_SCHEMA, "origin": origin, "size": covered, "chain": _chain(engine, covered)}
    write_atomically(path, orjson.dumps(head) + b"\n" + state.snapshot())


def _load(path: Path, engine: Engine, origin: str) -> tuple[VelocityState, int] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    line, _, body = data.partition(b"\n")
    try:
        head = orjson.loads(line)
        if (not isinstance(head, dict) or head.get("schema") != SNAPSHOT_SCHEMA
                or head.get("origin") != origin or not isinstance(head.get("size"), int)):
            return None
        size = head["size"]
        if size > ledger_size(engine) or head.get("chain") != _chain(engine, size):
            return None  # another ledger, or history this state does not describe
        return VelocityState.restore(body), size
    except (orjson.JSONDecodeError, FeatureError):
        return None  # unreadable: rebuild from the ledger rather than trust it


def restore(path: Path | None, engine: Engine, origin: str) -> Restored:
    """The windows as of now: the snapshot plus the decisions after it, else a full replay."""
    start = window_start_seq(engine)
    loaded = _load(path, engine, origin) if path is not None else None
    if loaded is not None and loaded[1] >= start:
        state, size = loaded
        extractor = FeatureExtractor(state=state)
        covered = ledger_size(engine)
        return Restored(extractor, True, covered, replay_decisions(engine, extractor, size))
    extractor = FeatureExtractor()
    covered = ledger_size(engine)
    return Restored(extractor, False, covered, replay_decisions(engine, extractor, start))
