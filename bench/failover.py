"""The failover drill: a primary and a hot standby on this machine, acknowledged decision traffic, the
primary killed mid-traffic, the standby promoted, and what was lost and how long it took, measured.

Each drill (synchronous, then asynchronous replication) starts two throwaway PostgreSQL clusters
(``tests.pg_cluster``: a primary ``site_a`` and a standby ``site_b`` made by ``pg_basebackup -R -S``),
initialises a ledger on the primary, opens the scoring path's Python entry point on it
(``audit.scoring.open_runtime``) and a second runtime on the standby: the warm standby decider, whose
idle catch-up (``Pipeline.catch_up``, every ``CATCH_UP_IDLE_S``) follows the replicated log. Several
threads then decide single payments through the primary's runtime; an acknowledgement is a
``decide`` call that returned a decision. After ``--seconds`` of steady traffic (the latency
figures), the asynchronous drill freezes the primary's WAL sender (SIGSTOP) for ``--freeze``
seconds while the traffic goes on, so that the standby lags; then the primary is killed
(``pg_ctl stop -m immediate``; a frozen WAL sender is made to exit at the same moment, before it can
send another byte) and the standby promoted as ``sealtrail standby promote`` does it
(``api.cli.standby.promote_database``: ``pg_promote``, then a sealed ``ledger.epoch``). The threads
move to the warm standby decider. Then:

- recovery point: every acknowledged decision missing from the promoted ledger (by trace id), and
  the seconds of traffic they span (kill time minus the earliest lost acknowledgement);
- recovery time: from the kill to the first decision the warm standby decider acknowledged on the
  promoted primary (promotion and epoch included); its same-run baseline is a cold start there
  (``open_runtime`` rebuilding the state from the log, then one decision);
- ``ledger.verify.verify_ledger`` on the promoted ledger, the warm decider's state digest against
  the cold rebuild's, and fencing: the old primary re-made a standby of the new one
  (``pg_basebackup -R``), and its runtime's next decision refused (``FencedError``);
- the watchers: a follower beside the standby (``ledger.follow``, over the primary's and the
  standby's databases, its state in a directory) and one witness (``ledger.witness``, its own key
  and state file, asked as ``sealtrail ledger cosign`` asks it). Just before the kill the primary
  signs a checkpoint, the witness cosigns it and the follower accepts it; after the promotion the
  new primary signs one and both are asked again. With no acknowledged decision lost they accept it;
  a lossy failover's new history does not extend what they saw, and they say so (the witness
  refuses to cosign, the follower alarms), which is how the loss is noticed outside the drill.

Latency: p50/p99 of the acknowledged calls during the steady phase; the asynchronous drill's is
the synchronous one's same-run baseline. Run from the repository root:
``python -m bench.failover [--seconds 8] [--freeze 3] [--threads 4] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.failover")

import argparse
import hashlib
import logging
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from api.cli.standby import promote_database
from api.config import Settings
from api.ops import initialise
from audit.decide.runtime import Runtime
from audit.decide.types import Submission
from audit.scoring import open_runtime
from audit.state import snapshot as velocity_snapshot
from bench.machine import host_info
from bench.pipeline import workload
from bench.report import Row, format_table, percentile, write_json
from ledger import NoteVerifier, database
from ledger.cosign import WitnessEndpoint, collect
from ledger.cosignature import Cosigner
from ledger.errors import LedgerError
from ledger.fencing import FencedError
from ledger.follow import FollowState, follow_round
from ledger.follow_io import DbPrimary, DbReplica
from ledger.verify import verify_ledger
from ledger.witness import LogPolicy, Witness
from tests import pg_cluster

__all__ = ["DrillResult", "Traffic", "drill", "main", "state_digest"]

Mode = Literal["sync", "async"]
PRIMARY, STANDBY = "site_a", "site_b"
AFTER_PROMOTION_S = 1.0  # traffic kept up on the promoted primary after its first acknowledgement
FIRST_ACK_LIMIT_S = 60.0


@dataclass(frozen=True)
class Ack:
    """One acknowledged decision: its trace id, who decided it, when the call began and returned."""

    trace_id: str
    site: str
    sent: float  # time.monotonic()
    answered: float


class Traffic:
    """``threads`` threads deciding single payments (``Runtime.decide``) through the runtime of the
    moment; a call that fails is retried with the same payment once ``switch`` names the next
    runtime (a new decision: the failed call acknowledged nothing)."""

    def __init__(self, subs: Sequence[Submission], threads: int) -> None:
        self._subs = list(subs)
        self._next = 0
        self._threads = threads
        self._lock = threading.Condition()
        self._target: tuple[str, Runtime] | None = None
        self._generation = 0
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        self.acks: list[Ack] = []
        self.errors: dict[str, int] = {}

    def switch(self, site: str, rt: Runtime | None) -> None:
        """Send the next calls to ``rt`` (None: hold them until a runtime is named)."""
        with self._lock:
            self._target = None if rt is None else (site, rt)
            self._generation += 1
            self._lock.notify_all()

    def start(self, site: str, rt: Runtime) -> Traffic:
        self.switch(site, rt)
        self._workers = [threading.Thread(target=self._run, name=f"traffic-{i}", daemon=True)
                         for i in range(self._threads)]
        for t in self._workers:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        for t in self._workers:
            t.join(timeout=60)

    def first_ack(self, site: str, after: float, timeout_s: float = FIRST_ACK_LIMIT_S) -> Ack:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                got = [a for a in self.acks if a.site == site and a.answered >= after]
            if got:
                return min(got, key=lambda a: a.answered)
            time.sleep(0.001)
        raise RuntimeError(f"no decision acknowledged by {site} within {timeout_s} s; errors {self.errors}")

    def _take(self) -> Submission:
        with self._lock:
            sub = self._subs[self._next % len(self._subs)]
            self._next += 1
        return sub

    def _run(self) -> None:
        sub = self._take()
        while not self._stop.is_set():
            with self._lock:
                while self._target is None and not self._stop.is_set():
                    self._lock.wait()
                if self._stop.is_set():
                    return
                assert self._target is not None
                (site, rt), generation = self._target, self._generation
            sent = time.monotonic()
            try:
                (d,) = rt.decide([sub], timeout_s=30)
            except Exception as exc:  # the primary went away: wait for the next runtime, then retry
                with self._lock:
                    key = f"{site}: {type(exc).__name__}"
                    self.errors[key] = self.errors.get(key, 0) + 1
                    while self._generation == generation and not self._stop.is_set():
                        self._lock.wait()
                continue
            answered = time.monotonic()
            with self._lock:
                self.acks.append(Ack(d.trace_id, site, sent, answered))
            sub = self._take()


@dataclass
class DrillResult:
    """What one drill measured (seconds unless named otherwise)."""

    mode: Mode
    threads: int
    steady_s: float
    steady_decisions: int
    steady_per_s: float
    p50_ms: float
    p99_ms: float
    frozen_s: float  # how long the WAL sender was frozen before the kill (async only)
    standby_lag_bytes_at_kill: int | None  # the primary's WAL the standby had not flushed, at the kill
    acknowledged_by_primary: int
    lost: int  # acknowledged, and missing from the promoted ledger
    lost_span_s: float  # the kill minus the earliest lost acknowledgement (0: none lost)
    sealed_unacknowledged: int  # in the promoted ledger, but the caller got an error
    promote_s: float  # pg_promote + the sealed epoch
    recovery_s: float  # the kill to the first acknowledgement by the warm standby decider
    acknowledged_by_standby: int
    verified_size: int  # entries verify_ledger checked on the promoted ledger
    warm_state_matches_cold: bool
    cold_start_s: float  # open_runtime on the promoted primary and one decision: the warm path's baseline
    fenced: str  # what the old primary's runtime was told when it tried to decide again
    witness_before: str  # the witness on the primary's last checkpoint before the kill
    witness_after: str  # ... and on the promoted primary's first checkpoint
    follower_after: str  # the follower's round on the promoted primary: accepted, or its alarms
    errors: dict[str, int] = field(default_factory=dict)


def state_digest(rt: Runtime) -> str:
    """SHA-256 over the runtime's feature state (keyed bytes) and its account-risk fingerprint."""
    h = hashlib.sha256(velocity_snapshot.keyed_state_bytes(rt.engine, rt.pipeline.extractor))
    h.update(repr(rt.pipeline.account_risk.fingerprint()).encode())
    return h.hexdigest()


def sealed_trace_ids(url: str) -> set[str]:
    engine = database.open_engine(url)
    try:
        with engine.connect() as conn:
            return {str(t) for (t,) in conn.exec_driver_sql(
                "SELECT trace_id FROM ledger_entries WHERE kind = 'decision'")}
    finally:
        engine.dispose()


@contextmanager
def _pair(mode: Mode) -> Iterator[tuple[pg_cluster.Cluster, pg_cluster.Cluster]]:
    with pg_cluster.Cluster.create(replication=True, name=PRIMARY) as primary:
        standby = primary.standby(STANDBY)
        if mode == "sync":
            primary.set_synchronous(STANDBY)
        primary.wait_streaming(STANDBY, sync=mode == "sync")
        yield primary, standby


def _settings(url: str, root: Path, name: str) -> Settings:
    return Settings.model_validate({"db": url, "keys": root / "keys",
                                    "velocity_snapshot": root / f"{name}.velocity"})


class Watchers:
    """The follower beside the standby and one witness, both pinned to the log's genesis key."""

    def __init__(self, root: Path, origin: str, verifier: NoteVerifier) -> None:
        self.witness = Witness(Cosigner.generate("drill.example/witness"), [LogPolicy(origin, (verifier,))],
                               root / "witness.db")
        self.endpoint = WitnessEndpoint("https://witness.drill.example", self.witness.cosigner.verifier)
        self.verifier = verifier
        self.state: FollowState | None = None

    def cosign(self, rt: Runtime) -> str:
        """The log's newest checkpoint (signed now) as the witness answered it."""
        rt.ledger.checkpoint()
        (o,) = collect(rt.ledger.engine, [self.endpoint], self.witness.post)
        return (f"cosigned size {o.size}" if o.ok else
                f"{'ALARM' if o.alarm else 'refused'} at size {o.size}: {o.detail}")

    def follow(self, primary_url: str, standby_url: str) -> str:
        """One follower round: the primary's newest checkpoint against the last accepted one and the
        standby's records."""
        pe, se = database.open_engine(primary_url), database.open_engine(standby_url)
        try:
            r = follow_round(self.state, DbPrimary(pe), DbReplica(se), [self.verifier], now=time.time(),
                             stall_after=300.0)
        finally:
            pe.dispose()
            se.dispose()
        if r.state is not None:
            self.state = r.state
        if r.alarms:
            return "ALARM " + "; ".join(f"{a.kind}: {a.detail}" for a in r.alarms)
        return f"accepted size {r.state.accepted.checkpoint.size if r.state else None}, lag {r.lag}"

    def close(self) -> None:
        self.witness.close()


def _kill(primary: pg_cluster.Cluster, frozen: int | None) -> None:
    """``pg_ctl stop -m immediate``. A frozen WAL sender is first sent SIGQUIT (pending while it is
    stopped), then continued: it runs its SIGQUIT handler (exit at once) before any other code, so it
    sends nothing more, whether the postmaster's own SIGQUIT reaches it first or not."""
    if frozen is None:
        primary.stop(mode="immediate")
        return
    os.kill(frozen, signal.SIGQUIT)
    stopping = threading.Thread(target=primary.stop, kwargs={"mode": "immediate"})
    stopping.start()
    pg_cluster.Cluster.thaw(frozen)
    stopping.join()


def drill(mode: Mode, subs: Sequence[Submission], root: Path, *, seconds: float = 8.0, freeze_s: float = 3.0,
          threads: int = 4) -> DrillResult:
    """One drill on a fresh primary and standby (see the module's docstring)."""
    with _pair(mode) as (primary, standby):
        sa, sb = _settings(primary.url, root, "a"), _settings(standby.url, root, "b")
        initialise(sa)
        ra = open_runtime(sa, operator="failover-drill")
        try:
            # model registered and rules bootstrapped before the standby opens (it cannot write)
            warmup = {d.trace_id for d in ra.decide(list(subs[:32]), timeout_s=60)}
            primary.wait_streaming(STANDBY, caught_up=True)
            rb = open_runtime(sb, operator="failover-drill")  # the warm standby decider
            try:
                return _run(mode, subs[32:], primary, standby, ra, rb, sb, root, seconds, freeze_s, threads,
                            warmup)
            finally:
                rb.close()
        finally:
            ra.close()


def _run(mode: Mode, subs: Sequence[Submission], primary: pg_cluster.Cluster, standby: pg_cluster.Cluster,
         ra: Runtime, rb: Runtime, sb: Settings, root: Path, seconds: float, freeze_s: float,
         threads: int, warmup: set[str]) -> DrillResult:
    traffic = Traffic(subs, threads).start(PRIMARY, ra)
    t_steady = time.monotonic()
    time.sleep(seconds)
    steady = [a for a in traffic.acks[:] if a.sent >= t_steady]
    steady_end = time.monotonic()
    frozen = None
    frozen_s = 0.0
    if mode == "async":
        frozen = primary.walsender_pid(STANDBY)
        pg_cluster.Cluster.freeze(frozen)
        t_frozen = time.monotonic()
        time.sleep(freeze_s)
        frozen_s = time.monotonic() - t_frozen
    lag = next((r.flush_lag_bytes for r in primary.replication() if r.name == STANDBY), None)
    engine = database.open_engine(primary.url)
    try:
        verifier = NoteVerifier.from_vkey(doc_vkey(engine))
    finally:
        engine.dispose()
    watchers = Watchers(root, ra.ledger.origin, verifier)
    witness_before = watchers.cosign(ra)  # the witness and the follower see the primary's last checkpoint
    watchers.follow(primary.url, standby.url)
    t_kill = time.monotonic()
    traffic.switch(PRIMARY, None)  # new calls wait for the promoted primary (those in flight finish)
    _kill(primary, frozen)
    promote_database(sb)
    promote_s = time.monotonic() - t_kill
    traffic.switch(STANDBY, rb)
    first = traffic.first_ack(STANDBY, t_kill)
    time.sleep(AFTER_PROMOTION_S)
    traffic.stop()
    witness_after = watchers.cosign(rb)  # the promoted primary's first checkpoint, shown to both
    follower_after = watchers.follow(standby.url, standby.url)
    watchers.close()

    acks = traffic.acks
    sealed = sealed_trace_ids(standby.url)
    by_primary = [a for a in acks if a.site == PRIMARY]
    lost = [a for a in by_primary if a.trace_id not in sealed]
    acked = {a.trace_id for a in acks} | warmup
    engine = database.open_engine(standby.url)
    try:
        verifier = NoteVerifier.from_vkey(doc_vkey(engine))
        report = verify_ledger(engine, [verifier])
    finally:
        engine.dispose()

    t_cold = time.monotonic()
    with open_runtime(_settings(standby.url, root, "cold"), operator="failover-drill") as rc:
        cold_matches = state_digest(rc) == state_digest(rb)
        rc.decide([subs[0]], timeout_s=60)
        cold_s = time.monotonic() - t_cold

    primary.follow(standby, slot=PRIMARY)  # the old primary comes back only as a standby of the new one
    try:
        ra.decide([subs[1]], timeout_s=30)
        fenced = "NOT REFUSED: the old primary's runtime decided"
    except FencedError as exc:
        fenced = f"FencedError ({exc.reason}): {exc}"
    except LedgerError as exc:
        fenced = f"{type(exc).__name__}: {exc}"
    latencies = [(a.answered - a.sent) * 1e3 for a in steady]
    return DrillResult(
        mode=mode, threads=threads, steady_s=round(steady_end - t_steady, 3), steady_decisions=len(steady),
        steady_per_s=round(len(steady) / (steady_end - t_steady), 1),
        p50_ms=round(percentile(latencies, 50), 2), p99_ms=round(percentile(latencies, 99), 2),
        frozen_s=round(frozen_s, 3), standby_lag_bytes_at_kill=lag, acknowledged_by_primary=len(by_primary),
        lost=len(lost), lost_span_s=round(t_kill - min(a.answered for a in lost), 3) if lost else 0.0,
        sealed_unacknowledged=len(sealed - acked), promote_s=round(promote_s, 3),
        recovery_s=round(first.answered - t_kill, 3),
        acknowledged_by_standby=sum(a.site == STANDBY for a in acks), verified_size=report.size,
        warm_state_matches_cold=cold_matches, cold_start_s=round(cold_s, 3), fenced=fenced,
        witness_before=witness_before, witness_after=witness_after, follower_after=follower_after,
        errors=dict(traffic.errors))


def doc_vkey(engine: Any) -> str:
    """The ledger's first signing key (its genesis record's), to pin when verifying."""
    from ledger import store

    with engine.connect() as conn:
        keys = store.key_history(conn)
    return keys[0][0]


def _rows(sync: DrillResult, asyn: DrillResult) -> list[Row]:
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b else "-"

    return [
        Row("p99 decision latency (steady)", f"sync {sync.p99_ms:.1f} ms", f"async {asyn.p99_ms:.1f} ms",
            ratio(sync.p99_ms, asyn.p99_ms)),
        Row("p50 decision latency (steady)", f"sync {sync.p50_ms:.1f} ms", f"async {asyn.p50_ms:.1f} ms",
            ratio(sync.p50_ms, asyn.p50_ms)),
        Row("decisions/s (steady)", f"sync {sync.steady_per_s:,.0f}", f"async {asyn.steady_per_s:,.0f}",
            ratio(sync.steady_per_s, asyn.steady_per_s)),
        Row("acknowledged, lost (sync)", f"{sync.lost} of {sync.acknowledged_by_primary}", "", "", "0",
            "yes" if sync.lost == 0 else "NO"),
        Row("acknowledged, lost (async, frozen sender)", f"{asyn.lost} of {asyn.acknowledged_by_primary}",
            "", "", "measured", ""),
        *(Row(f"recovery time, warm standby ({r.mode})", f"{r.recovery_s:.2f} s",
              f"cold start {r.cold_start_s:.2f} s", ratio(r.recovery_s, r.cold_start_s))
          for r in (sync, asyn)),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="steady traffic before the kill (latency)")
    ap.add_argument("--freeze", type=float, default=3.0, help="async: seconds the WAL sender is frozen")
    ap.add_argument("--threads", type=int, default=4, help="threads deciding single payments")
    ap.add_argument("--payments", type=int, default=20_000, help="simulated payments, cycled")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    reason = pg_cluster.unavailable()
    if reason:
        print(f"cannot start PostgreSQL clusters here: {reason}")
        return 2
    logging.basicConfig(level=logging.ERROR)  # the dead primary's runtime logs every failed catch-up
    host = host_info()
    bin_dir = pg_cluster.bindir()
    print(f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, {host['os']}, "
          f"Python {host['python']}")
    print(f"PostgreSQL: {bin_dir} (two throwaway clusters on 127.0.0.1, fsync on, streaming replication)")
    print(f"run at {datetime.now(UTC).isoformat(timespec='seconds')}; {args.threads} threads deciding single "
          f"payments through audit.scoring.open_runtime; steady {args.seconds:g} s; async freeze "
          f"{args.freeze:g} s")
    subs = workload(args.payments)
    results: dict[str, DrillResult] = {}
    modes: tuple[Mode, ...] = ("sync", "async")
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix=f"sealtrail-failover-{mode}-") as tmp:
            r = drill(mode, subs, Path(tmp), seconds=args.seconds, freeze_s=args.freeze, threads=args.threads)
        results[mode] = r
        print(f"\n{mode}: " + ", ".join(f"{k}={v}" for k, v in asdict(r).items()))
    sync, asyn = results["sync"], results["async"]
    print("\n" + format_table(_rows(sync, asyn), "measured"))
    print(f"\nsynchronous: {sync.lost} of {sync.acknowledged_by_primary} acknowledged decisions lost across "
          f"the kill and promotion; the warm standby decided {sync.recovery_s:.2f} s after the kill "
          f"(promotion and epoch {sync.promote_s:.2f} s); a cold start there took {sync.cold_start_s:.2f} s.")
    print(f"asynchronous, WAL sender frozen {asyn.frozen_s:.1f} s ({asyn.standby_lag_bytes_at_kill} bytes "
          f"behind at the kill): {asyn.lost} acknowledged decisions lost, the last {asyn.lost_span_s:.2f} s "
          f"of traffic; recovery {asyn.recovery_s:.2f} s.")
    print(f"p99 latency: synchronous {sync.p99_ms:.1f} ms, asynchronous {asyn.p99_ms:.1f} ms "
          f"({sync.p99_ms / asyn.p99_ms:.2f}x).")
    ok = (sync.lost == 0 and sync.warm_state_matches_cold and asyn.warm_state_matches_cold
          and sync.fenced.startswith("FencedError") and asyn.fenced.startswith("FencedError"))
    print(f"ledger verified after promotion: {sync.verified_size} and {asyn.verified_size} entries; warm "
          f"state = cold rebuild: {sync.warm_state_matches_cold}/{asyn.warm_state_matches_cold}")
    print(f"the old primary, re-made a standby, its runtime deciding again: {sync.fenced}")
    for r in (sync, asyn):
        print(f"{r.mode}: witness before the kill: {r.witness_before}; on the promoted primary: "
              f"{r.witness_after}; follower there: {r.follower_after}")
    ok = ok and sync.witness_after.startswith("cosigned") and not sync.follower_after.startswith("ALARM")
    if asyn.lost:  # a lossy failover must not pass unnoticed by the watchers
        ok = ok and not asyn.witness_after.startswith("cosigned") and asyn.follower_after.startswith("ALARM")
    if args.json:
        write_json(args.json, {"machine": host, "results": {k: asdict(v) for k, v in results.items()}})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
