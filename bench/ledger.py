"""Benchmark of the sealtrail ledger: durable appends, full verification, inclusion proofs.

Every figure is printed next to a baseline measured in the same run on the same machine.
Run from the repository root: ``python -m bench.ledger [--quick] [--skip-postgres]``.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file, bench/ledger.py would shadow the ledger package
    sys.exit("run it as a module from the repository root: python -m bench.ledger")

import argparse
import json
import math
import os
import platform
import random
import secrets
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import rfc8785
from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Index,
    LargeBinary,
    MetaData,
    String,
    Table,
    create_engine,
)
from sqlalchemy.exc import SQLAlchemyError

import migrations
from ledger import Ledger, NoteSigner, Record, store, verify_ledger
from ledger.append import CheckpointPolicy
from ledger.merkle import verify_inclusion
from ledger.proofs import inclusion_proof
from ledger.records import format_time, new_trace_ids, seal

T = TypeVar("T")

ORIGIN = "bench.sealtrail/log"
KIND = "bench.event"
SEAL_TIME = "2026-12-02T00:00:00.000000Z"
PG_ENV = "SEALTRAIL_BENCH_POSTGRES_URL"
PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
SEED = 20261202
POOL_SIZE = 4096
PROOF_SAMPLES = 2000
WARMUP_CALLS = 50
BUILD_BATCH = 1000
APPEND_POLICY = CheckpointPolicy(every_entries=1000, every_seconds=60.0)
BUILD_POLICY = CheckpointPolicy(every_entries=1000, every_seconds=3600.0)
RULES = ("velocity_24h", "high_risk_country", "structuring", "new_counterparty", "pep_match")

TARGET_APPEND_RATE = 60_000.0
TARGET_APPEND_RATIO = 1.5
TARGET_VERIFY_RATE = 500_000.0
TARGET_PROOF_MS = 2.0

# records appended per measurement: (backend, batch size) -> (default, --quick)
APPEND_COUNTS: dict[tuple[str, int], tuple[int, int]] = {
    ("sqlite", 1): (300, 100),
    ("sqlite", 100): (50_000, 10_000),
    ("sqlite", 1000): (100_000, 20_000),
    ("postgresql", 1): (1000, 300),
    ("postgresql", 100): (50_000, 10_000),
    ("postgresql", 1000): (100_000, 20_000),
}
BATCH_SIZES = (1, 100, 1000)


# -- results ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppendResult:
    """Appends/s of the ledger and of the plain-insert baseline for one batch size, per round."""

    backend: str
    batch: int
    records: int
    ledger_rates: tuple[float, ...]
    plain_rates: tuple[float, ...]

    @property
    def ledger_rate(self) -> float:
        """Median ledger appends/s over the rounds."""
        return statistics.median(self.ledger_rates)

    @property
    def plain_rate(self) -> float:
        """Median plain inserts/s over the rounds."""
        return statistics.median(self.plain_rates)

    @property
    def ratio(self) -> float:
        """How many times slower the ledger is than the plain insert."""
        return self.plain_rate / self.ledger_rate


@dataclass(frozen=True)
class VerifyResult:
    """Full verification of an ``entries``-long SQLite ledger against a bare fetch."""

    entries: int
    build_seconds: float
    fetch_seconds: float
    verify_seconds_1: float
    verify_seconds_default: float
    db_bytes: int


@dataclass(frozen=True)
class ProofResult:
    """Inclusion-proof latency against a primary-key lookup, in milliseconds."""

    size: int
    samples: int
    proof_median_ms: float
    proof_p99_ms: float
    lookup_median_ms: float
    lookup_p99_ms: float
    proof_hashes_mean: float


# -- workload -----------------------------------------------------------------------------


def decision_body(rng: random.Random) -> dict[str, Any]:
    """A decision-like JSON object of about 150 bytes once canonical."""
    return {
        "subject": f"cust_{rng.randrange(10**6):06d}",
        "decision": rng.choice(("allow", "review", "block")),
        "score": round(rng.random(), 4),
        "rules": rng.sample(RULES, k=rng.randint(0, 2)),
        "amount": {"currency": rng.choice(("EUR", "USD", "GBP")), "minor": rng.randrange(10**8)},
        "model": "aml-gbm-2026.11",
    }


def record_pool(size: int, seed: int) -> list[Record]:
    """``size`` distinct records, their canonical bodies built once, before any timing."""
    rng = random.Random(seed)
    bodies = [rfc8785.dumps(decision_body(rng)) for _ in range(size)]
    return [Record.from_canonical_body(KIND, body) for body in bodies]


def cycle(pool: Sequence[T], n: int) -> list[T]:
    """The first ``n`` items of ``pool`` repeated end to end."""
    return [pool[i % len(pool)] for i in range(n)]


def chunked(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` cut into consecutive lists of ``size`` (the last may be shorter)."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def envelopes(records: Sequence[Record]) -> list[tuple[str, bytes]]:
    """(kind, sealed envelope bytes) for the plain-insert baseline."""
    return [(r.kind, seal(r, SEAL_TIME)[1]) for r in records]


# -- machine ------------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ram_gib() -> float:
    """Total memory in GiB from /proc/meminfo (0 when unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def filesystem_of(path: Path) -> str:
    """File-system type and device of the mount holding ``path``, from /proc/mounts."""
    best = ("", "unknown", "?")
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    target = str(path.resolve())
    for line in mounts:
        device, point, fstype = line.split()[:3]
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best[0]):
            best = (point, fstype, device)
    return f"{best[1]} on {best[2]}"


def machine_info(sqlite_dir: Path, pg: dict[str, str]) -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count() or 1,
        "ram_gib": round(ram_gib(), 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "sqlite_files": f"{sqlite_dir} ({filesystem_of(sqlite_dir)})",
        "postgresql": pg,
    }


# -- databases ----------------------------------------------------------------------------


@contextmanager
def fresh_sqlite(root: Path) -> Iterator[Engine]:
    """A durable engine (WAL, synchronous=FULL) on a new database file, deleted afterwards."""
    path = root / f"bench_{secrets.token_hex(4)}.db"
    engine = store.connect(f"sqlite:///{path}", create_file=True)
    try:
        yield engine
    finally:
        engine.dispose()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def pg_admin(url: str) -> tuple[Engine | None, dict[str, str]]:
    """An autocommit engine on ``url`` and the server's settings, or None and why not."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            info = {
                name: str(conn.exec_driver_sql(f"SHOW {name}").scalar())
                for name in ("server_version", "fsync", "synchronous_commit", "wal_sync_method")
            }
    except SQLAlchemyError as exc:
        engine.dispose()
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return None, {"server_version": f"unreachable ({reason})"}
    return engine, info


@contextmanager
def fresh_pg_schema(admin: Engine) -> Iterator[Engine]:
    """A durable engine whose search_path is a new schema, dropped (CASCADE) afterwards."""
    schema = f"bench_{secrets.token_hex(6)}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    url = admin.url.update_query_dict({"options": f"-csearch_path={schema}"})
    engine = store.connect(url.render_as_string(hide_password=False))
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')


@contextmanager
def fresh_db(backend: str, root: Path, admin: Engine | None) -> Iterator[Engine]:
    """A fresh, empty database of ``backend`` kind."""
    if backend == "sqlite":
        with fresh_sqlite(root) as engine:
            yield engine
    else:
        assert admin is not None
        with fresh_pg_schema(admin) as engine:
            yield engine


def new_ledger(engine: Engine, policy: CheckpointPolicy) -> tuple[Ledger, NoteSigner]:
    """Migrate ``engine``'s database and write a new ledger's genesis."""
    migrations.upgrade(engine)
    signer = NoteSigner.generate(ORIGIN)
    return Ledger.create(engine, signer, ORIGIN, policy=policy), signer


def placeholder(engine: Engine) -> str:
    """The driver's parameter marker."""
    return "?" if engine.dialect.paramstyle == "qmark" else "%s"


# -- 1, 2: appends ------------------------------------------------------------------------


def plain_table() -> Table:
    """``ledger_entries`` without its two hash columns: same types, keys and indexes."""
    return Table(
        "bench_plain_entries",
        MetaData(),
        Column("seq", store.SeqType, primary_key=True, autoincrement=False),
        Column("kind", String(64), nullable=False),
        Column("record", LargeBinary, nullable=False),
        Column("recorded_at", String(27), nullable=False),
        Column("trace_id", String(36), nullable=False),
        Index("ix_bench_plain_trace_id", "trace_id", unique=True),
        Index("ix_bench_plain_kind_seq", "kind", "seq"),
    )


def plain_rows(batch: Sequence[tuple[str, bytes]], seq: int) -> list[tuple[Any, ...]]:
    """Row tuples for one batch, each with a fresh UUIDv7, as the sequencer builds them."""
    ts = format_time(datetime.now(UTC))
    ids = new_trace_ids(len(batch))  # the same generator the ledger uses
    return [(seq + i, kind, rec, ts, ids[i]) for i, (kind, rec) in enumerate(batch)]


def plain_commit(engine: Engine, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """One executemany in one transaction, opened the way the sequencer opens its own."""
    with engine.connect() as conn:
        conn.execution_options(sqlite_begin="IMMEDIATE")
        with conn.begin():
            conn.exec_driver_sql(sql, rows)


def plain_rate(engine: Engine, items: Sequence[tuple[str, bytes]], batch: int) -> float:
    """Plain inserts/s of ``items`` in batches of ``batch``, one transaction each."""
    table = plain_table()
    table.metadata.create_all(engine)
    cols = [c.name for c in table.columns]
    p = placeholder(engine)
    sql = f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join([p] * len(cols))})"
    batches = chunked(items, batch)
    started = time.perf_counter()
    seq = 0
    for chunk in batches:
        plain_commit(engine, sql, plain_rows(chunk, seq))
        seq += len(chunk)
    return len(items) / (time.perf_counter() - started)


def ledger_rate(engine: Engine, records: Sequence[Record], batch: int) -> float:
    """Durable ledger appends/s of ``records`` through ``append_many`` in batches of ``batch``."""
    led, _ = new_ledger(engine, APPEND_POLICY)
    batches = chunked(records, batch)
    started = time.perf_counter()
    for chunk in batches:
        led.append_many(chunk)
    return len(records) / (time.perf_counter() - started)


def append_round(
    backend: str, batch: int, records: Sequence[Record], root: Path, admin: Engine | None,
    ledger_first: bool,
) -> tuple[float, float]:
    """(ledger, plain) rates, each side on its own fresh database, in the order asked."""
    items = envelopes(records)
    rates: dict[bool, float] = {}
    for is_ledger in (ledger_first, not ledger_first):
        with fresh_db(backend, root, admin) as engine:
            if is_ledger:
                rates[True] = ledger_rate(engine, records, batch)
            else:
                rates[False] = plain_rate(engine, items, batch)
    return rates[True], rates[False]


def measure_appends(
    backend: str, batch: int, n: int, pool: Sequence[Record], root: Path,
    admin: Engine | None, rounds: int,
) -> AppendResult:
    """``rounds`` rounds of baseline and ledger on the same records, alternating who goes first."""
    records = cycle(pool, n)
    got = [append_round(backend, batch, records, root, admin, r % 2 == 1) for r in range(rounds)]
    return AppendResult(
        backend, batch, n, tuple(g[0] for g in got), tuple(g[1] for g in got)
    )


# -- 3: full verification -----------------------------------------------------------------


def build_ledger(
    engine: Engine, pool: Sequence[Record], n: int
) -> tuple[Ledger, NoteSigner, float]:
    """Append ``n`` records in batches of 1000 (a checkpoint each); seconds taken."""
    led, signer = new_ledger(engine, BUILD_POLICY)
    batches = chunked(cycle(pool, n), BUILD_BATCH)
    tty = sys.stderr.isatty()
    print(f"  building a {n:,}-entry SQLite ledger...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    for i, chunk in enumerate(batches, 1):
        led.append_many(chunk)
        if tty and (i % 100 == 0 or i == len(batches)):
            print(f"\r  built {min(i * BUILD_BATCH, n):,}", end="", file=sys.stderr, flush=True)
    if tty:
        print(file=sys.stderr)
    return led, signer, time.perf_counter() - started


def bare_fetch_seconds(path: Path) -> float:
    """Seconds to stream every entry's stored columns with sqlite3: any verifier's floor."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        started = time.perf_counter()
        sql = "SELECT seq, record, leaf_hash, chain_hash FROM ledger_entries ORDER BY seq"
        for _row in con.execute(sql):
            pass
        return time.perf_counter() - started
    finally:
        con.close()


def verify_seconds(engine: Engine, signer: NoteSigner, workers: int | None, size: int) -> float:
    """Wall seconds of a full ``verify_ledger`` pinned to ``signer``; checks it saw ``size``."""
    started = time.perf_counter()
    report = verify_ledger(engine, [signer.verifier], workers=workers)
    took = time.perf_counter() - started
    if report.size != size or report.unsealed_entries:
        raise RuntimeError(f"verified {report.size} entries, {report.unsealed_entries} unsealed")
    return took


def sqlite_path(engine: Engine) -> Path:
    """The database file behind a SQLite engine."""
    return Path(str(engine.url.database))


def measure_verify(
    engine: Engine, pool: Sequence[Record], n: int
) -> tuple[VerifyResult, Ledger, NoteSigner]:
    """Build the ledger, then time a bare fetch and verification with 1 and default workers."""
    led, signer, build = build_ledger(engine, pool, n)
    size = led.checkpoint().checkpoint.size
    path = sqlite_path(engine)
    bare_fetch_seconds(path)  # warm the page cache for everyone
    fetch = bare_fetch_seconds(path)
    one = verify_seconds(engine, signer, 1, size)
    default = verify_seconds(engine, signer, None, size)
    db_bytes = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    return VerifyResult(size, build, fetch, one, default, db_bytes), led, signer


# -- 4: inclusion proofs ------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def timed_ms(
    conn: Connection, indices: Sequence[int], size: int, lookup_sql: str | None
) -> tuple[list[float], list[list[bytes]]]:
    """Per-call ms of an inclusion proof (or, with ``lookup_sql``, a leaf lookup) per index."""
    times: list[float] = []
    proofs: list[list[bytes]] = []
    clock = time.perf_counter_ns
    for i in indices:
        started = clock()
        if lookup_sql is None:
            proofs.append(inclusion_proof(conn, i, size))
        else:
            conn.exec_driver_sql(lookup_sql, (i,)).scalar()
        times.append((clock() - started) / 1e6)
    return times, proofs


def check_proofs(
    conn: Connection, sql: str, indices: Sequence[int], proofs: Sequence[list[bytes]],
    size: int, root: bytes,
) -> None:
    """Verify every timed proof against the signed root (raises on the first bad one)."""
    for i, proof in zip(indices, proofs, strict=True):
        leaf = conn.exec_driver_sql(sql, (i,)).scalar()
        if leaf is None:
            raise RuntimeError(f"no entry at seq {i}")
        verify_inclusion(i, size, bytes(leaf), proof, root)


def measure_proofs(engine: Engine, led: Ledger, samples: int) -> ProofResult:
    """Median/p99 of inclusion proofs at random indices vs. a leaf-hash lookup, one connection."""
    signed = led.checkpoint().checkpoint
    size, root = signed.size, signed.root
    rng = random.Random(SEED + 1)
    indices = [rng.randrange(size) for _ in range(samples)]
    sql = f"SELECT leaf_hash FROM ledger_entries WHERE seq = {placeholder(engine)}"
    with engine.connect() as conn:
        timed_ms(conn, indices[:WARMUP_CALLS], size, None)
        timed_ms(conn, indices[:WARMUP_CALLS], size, sql)
        proof_ms, proofs = timed_ms(conn, indices, size, None)
        lookup_ms, _ = timed_ms(conn, indices, size, sql)
        check_proofs(conn, sql, indices, proofs, size, root)
    return ProofResult(
        size, samples,
        statistics.median(proof_ms), percentile(proof_ms, 99),
        statistics.median(lookup_ms), percentile(lookup_ms, 99),
        statistics.fmean(len(p) for p in proofs),
    )


# -- report -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One line of the summary table."""

    what: str
    ledger: str
    baseline: str
    ratio: str
    target: str = ""
    met: str = ""


def verdict(ok: bool) -> str:
    """How a target check reads in the table."""
    return "yes" if ok else "NO"


def append_row(r: AppendResult) -> Row:
    """The table line of one append measurement (targets only for SQLite, batch 1000)."""
    row = Row(
        f"append {r.backend} batch={r.batch} ({r.records:,} rec x{len(r.ledger_rates)})",
        f"{r.ledger_rate:,.0f} /s", f"plain insert {r.plain_rate:,.0f} /s", f"{r.ratio:.2f}x",
    )
    if r.backend != "sqlite" or r.batch != 1000:
        return row
    ok = r.ledger_rate >= TARGET_APPEND_RATE and r.ratio <= TARGET_APPEND_RATIO
    target = f">= {TARGET_APPEND_RATE:,.0f}/s, <= {TARGET_APPEND_RATIO}x"
    return Row(row.what, row.ledger, row.baseline, row.ratio, target, verdict(ok))


def verify_rows(v: VerifyResult) -> list[Row]:
    """Table lines of the build and of both verification runs."""
    rows = [Row(f"build {v.entries:,} (batch {BUILD_BATCH}, checkpoint/1000)",
                f"{v.entries / v.build_seconds:,.0f} /s", f"{v.build_seconds:.1f} s", "")]
    fetch = f"bare fetch {v.entries / v.fetch_seconds:,.0f} /s ({v.fetch_seconds:.2f} s)"
    for label, secs in (("1", v.verify_seconds_1), ("default", v.verify_seconds_default)):
        rate = v.entries / secs
        rows.append(Row(
            f"verify workers={label}", f"{rate:,.0f} /s ({secs:.2f} s)", fetch,
            f"{secs / v.fetch_seconds:.2f}x", f">= {TARGET_VERIFY_RATE:,.0f}/s",
            verdict(rate >= TARGET_VERIFY_RATE),
        ))
    return rows


def proof_rows(p: ProofResult) -> list[Row]:
    """Table lines of inclusion-proof latency."""
    return [
        Row(f"inclusion proof median (size {p.size:,})", f"{p.proof_median_ms:.3f} ms",
            f"pk lookup {p.lookup_median_ms:.3f} ms",
            f"{p.proof_median_ms / p.lookup_median_ms:.1f}x",
            f"<= {TARGET_PROOF_MS} ms", verdict(p.proof_median_ms <= TARGET_PROOF_MS)),
        Row(f"inclusion proof p99 ({p.samples} samples)", f"{p.proof_p99_ms:.3f} ms",
            f"pk lookup {p.lookup_p99_ms:.3f} ms", f"{p.proof_p99_ms / p.lookup_p99_ms:.1f}x"),
    ]


def format_table(rows: Sequence[Row]) -> str:
    """Rows as aligned plain text with a header."""
    header = Row("measurement", "ledger", "same-run baseline", "ratio", "target", "met")
    cells = [list(asdict(r).values()) for r in (header, *rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(cs, widths, strict=True)).rstrip() for cs in cells
    ]
    lines.insert(1, "-" * len(max(lines, key=len)))
    return "\n".join(lines)


def print_machine(machine: dict[str, Any]) -> None:
    """The machine header."""
    pg = machine["postgresql"]
    pg_text = ", ".join(f"{k}={v}" for k, v in pg.items() if k != "server_version")
    print(f"CPU:        {machine['cpu']} ({machine['cores']} cores)")
    print(f"RAM:        {machine['ram_gib']} GiB")
    print(f"OS:         {machine['os']}")
    print(f"Python:     {machine['python']}")
    print(f"SQLite:     {machine['sqlite']} (WAL, synchronous=FULL)")
    print(f"SQLite dir: {machine['sqlite_files']}")
    print(f"PostgreSQL: {pg['server_version']}" + (f"; {pg_text}" if pg_text else ""))


def workload(pool: Sequence[Record]) -> dict[str, Any]:
    """Sizes of the records appended."""
    bodies = [len(r.canonical_body()) for r in pool]
    sealed = [len(seal(r, SEAL_TIME)[1]) for r in pool]
    return {
        "kind": KIND,
        "distinct_bodies": len(pool),
        "body_bytes_mean": round(statistics.fmean(bodies), 1),
        "envelope_bytes_mean": round(statistics.fmean(sealed), 1),
        "append_policy": asdict(APPEND_POLICY),
        "build_policy": asdict(BUILD_POLICY),
    }


# -- main ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(prog="python -m bench.ledger", description=__doc__)
    ap.add_argument("--entries", type=int, default=None,
                    help="ledger size for verification and proofs (default 1,000,000)")
    ap.add_argument("--quick", action="store_true",
                    help="100,000 entries and shorter append runs")
    ap.add_argument("--skip-postgres", action="store_true", help="SQLite only")
    ap.add_argument("--rounds", type=int, default=3,
                    help="append rounds per measurement, fresh database each (median shown)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--dir", type=Path, default=None,
                    help="directory for the SQLite files (default: the system temp dir)")
    return ap.parse_args(argv)


def connect_postgres(skip: bool) -> tuple[Engine | None, dict[str, str]]:
    """The PostgreSQL admin engine, unless skipped or unreachable."""
    if skip:
        return None, {"server_version": "skipped (--skip-postgres)"}
    url = os.environ.get(PG_ENV, PG_DEFAULT)
    try:
        return pg_admin(url)
    except SQLAlchemyError as exc:  # a malformed URL or a missing driver
        return None, {"server_version": f"unusable URL ({exc})"}


def spread(rates: Sequence[float]) -> str:
    """Median and range of per-round rates."""
    text = f"{statistics.median(rates):>9,.0f}/s [{min(rates):,.0f}-{max(rates):,.0f}]"
    return text.ljust(30)


def run_appends(
    backends: Sequence[str], quick: bool, rounds: int, pool: Sequence[Record], root: Path,
    admin: Engine | None,
) -> list[AppendResult]:
    """Every append measurement, printed as it finishes."""
    results = []
    for backend in backends:
        for batch in BATCH_SIZES:
            n = APPEND_COUNTS[(backend, batch)][int(quick)]
            r = measure_appends(backend, batch, n, pool, root, admin, rounds)
            print(f"  {backend:<10} batch={batch:<5} ledger {spread(r.ledger_rates)}  "
                  f"plain {spread(r.plain_rates)}  {r.ratio:.2f}x", flush=True)
            results.append(r)
    return results


def figures_json(
    machine: dict[str, Any], load: dict[str, Any], appends: Sequence[AppendResult],
    verify: VerifyResult, proofs: ProofResult,
) -> dict[str, Any]:
    """All figures as one JSON-ready object."""
    return {
        "machine": machine,
        "workload": load,
        "appends": [
            {**asdict(a), "ledger_rate": a.ledger_rate, "plain_rate": a.plain_rate,
             "ratio": a.ratio}
            for a in appends
        ],
        "verify": {
            **asdict(verify),
            "rate_1": verify.entries / verify.verify_seconds_1,
            "rate_default": verify.entries / verify.verify_seconds_default,
            "fetch_rate": verify.entries / verify.fetch_seconds,
            "ratio_1": verify.verify_seconds_1 / verify.fetch_seconds,
            "ratio_default": verify.verify_seconds_default / verify.fetch_seconds,
        },
        "proofs": {**asdict(proofs), "ratio": proofs.proof_median_ms / proofs.lookup_median_ms},
        "targets": {
            "append_rate_sqlite_batch_1000": TARGET_APPEND_RATE,
            "append_ratio_max": TARGET_APPEND_RATIO,
            "verify_rate": TARGET_VERIFY_RATE,
            "proof_median_ms": TARGET_PROOF_MS,
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run every measurement, print the machine and the figures, optionally write JSON."""
    args = parse_args(argv)
    entries = args.entries or (100_000 if args.quick else 1_000_000)
    admin, pg = connect_postgres(args.skip_postgres)
    pool = record_pool(POOL_SIZE, SEED)
    load = workload(pool)
    with tempfile.TemporaryDirectory(prefix="sealtrail-bench-", dir=args.dir) as tmp:
        root = Path(tmp)
        machine = machine_info(root, pg)
        print_machine(machine)
        print(f"Records:    {KIND}, body {load['body_bytes_mean']} B, "
              f"envelope {load['envelope_bytes_mean']} B (mean)")
        print(f"Appends:    median of {args.rounds} rounds [min-max], fresh database each\n")
        backends = ["sqlite", "postgresql"] if admin is not None else ["sqlite"]
        try:
            appends = run_appends(backends, args.quick, args.rounds, pool, root, admin)
        finally:
            if admin is not None:
                admin.dispose()
        with fresh_sqlite(root) as engine:
            verify, led, _ = measure_verify(engine, pool, entries)
            proofs = measure_proofs(engine, led, PROOF_SAMPLES)
    rows = [*map(append_row, appends), *verify_rows(verify), *proof_rows(proofs)]
    print("\n" + format_table(rows))
    if args.json is not None:
        figures = figures_json(machine, load, appends, verify, proofs)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"\nfigures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
