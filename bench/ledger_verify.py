"""Full verification of a built SQLite ledger against a bare fetch of the same columns."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.dbs import sqlite_path
from bench.report import Row, verdict
from bench.workload import BUILD_BATCH, build_ledger
from ledger import NoteSigner, Record
from ledger.append import Ledger
from ledger.verify import verify_ledger

TARGET_VERIFY_RATE = 500_000.0


@dataclass(frozen=True)
class VerifyResult:
    """Full verification of an ``entries``-long SQLite ledger against a bare fetch."""

    entries: int
    build_seconds: float
    fetch_seconds: float
    verify_seconds_1: float
    verify_seconds_default: float
    db_bytes: int

    def figures(self) -> dict[str, Any]:
        """Seconds, rates and ratios to the bare fetch, JSON-ready."""
        return {
            **asdict(self),
            "rate_1": self.entries / self.verify_seconds_1,
            "rate_default": self.entries / self.verify_seconds_default,
            "fetch_rate": self.entries / self.fetch_seconds,
            "ratio_1": self.verify_seconds_1 / self.fetch_seconds,
            "ratio_default": self.verify_seconds_default / self.fetch_seconds,
        }


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


# -- the derived tables: the trace index checked against the sealed decisions --------------------


def _raw_index_select_seconds(engine: Engine) -> float:
    """Seconds to read, with no checking, what ``verify_index`` reads: every decision and annotation
    entry, every index row (ordered by seq, as verify streams them) and the decisions' payloads."""
    started = time.perf_counter()
    with engine.connect() as conn, conn.begin():
        shas: list[str] = []
        for _seq, rec in conn.exec_driver_sql(
                "SELECT seq, record FROM ledger_entries WHERE kind = 'decision' ORDER BY seq"):
            shas.append(bytes(rec)[37:101].decode())  # the envelope's payload_sha256, at its fixed place
        for sql in ("SELECT * FROM audit_traces ORDER BY seq",
                    "SELECT seq, rule_id FROM audit_trace_rules ORDER BY seq, rule_id",
                    "SELECT seq, account_key FROM audit_trace_accounts ORDER BY seq, account_key",
                    "SELECT seq, record FROM ledger_entries WHERE kind = 'annotation' ORDER BY seq",
                    "SELECT seq, target_seq FROM audit_annotations ORDER BY seq, target_seq"):
            for _row in conn.exec_driver_sql(sql):
                pass
        p = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        for i in range(0, len(shas), 500):
            chunk = shas[i:i + 500]
            conn.exec_driver_sql(f"SELECT sha256, data FROM ledger_payloads WHERE sha256 IN "
                                 f"({', '.join([p] * len(chunk))})", tuple(chunk)).all()
    return time.perf_counter() - started


def measure_index_verify(backend: str, root: Path, admin: Any, decisions: int) -> dict[str, Any]:
    """Decide ``decisions`` simulated payments through the pipeline with its trace index (the
    server's path), then time ``audit.query.verify.verify_index`` against a raw SELECT of the same
    rows, in the same run (best of three each)."""
    import migrations
    from audit.decide.pipeline import Pipeline
    from audit.decide.types import ActiveRules
    from audit.query.index import TraceIndex
    from audit.query.verify import verify_index
    from bench.dbs import fresh_db
    from bench.pipeline import PACK, workload
    from inference.backends import load_backend
    from inference.model import ModelFiles
    from ledger.append import CheckpointPolicy
    from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

    subs = workload(decisions)
    wasm = compile_ruleset(parse_ruleset(PACK.read_text()))
    files = ModelFiles.open()
    with fresh_db(backend, root, admin) as engine, Sandbox() as sandbox:
        migrations.upgrade(engine)
        ledger = Ledger.create(engine, NoteSigner.generate("bench.sealtrail/log"), "bench.sealtrail/log",
                               policy=CheckpointPolicy(every_entries=100_000, every_seconds=3600))
        pipe = Pipeline(ledger, load_backend("numpy", files.weights_path), ActiveRules.of(sandbox.load(wasm)),
                        index=TraceIndex())
        for i in range(0, len(subs), 1024):
            pipe.decide(subs[i:i + 1024])
        _raw_index_select_seconds(engine)  # warm the cache for both
        raw = min(_raw_index_select_seconds(engine) for _ in range(3))
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            report = verify_index(engine)
            runs.append(time.perf_counter() - started)
        took = min(runs)
        rows = sum(report.rows.values())
    return {"backend": backend, "decisions": report.decisions, "index_rows": rows, "verify_seconds": took,
            "raw_select_seconds": raw, "ratio": took / raw, "decisions_per_s": report.decisions / took}


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m bench.ledger_verify [--decisions N] [--skip-postgres] [--json PATH]``: the
    derived-table check's cost (``ledger verify``'s second half) as a ratio to a raw SELECT."""
    import argparse
    import tempfile

    from bench.dbs import backends, connect_postgres
    from bench.machine import host_info, probe_ms
    from bench.report import format_table, write_json

    ap = argparse.ArgumentParser(prog="python -m bench.ledger_verify", description=main.__doc__)
    ap.add_argument("--decisions", type=int, default=50_000)
    ap.add_argument("--skip-postgres", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    host = host_info()
    admin, pg = connect_postgres(args.skip_postgres)
    print(f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, Python {host['python']}; "
          f"PostgreSQL {pg.get('server_version')}")
    before = probe_ms()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends(admin):
            r = measure_index_verify(backend, Path(tmp), admin, args.decisions)
            results.append(r)
            print(f"{backend}: verify_index {r['decisions']:,} decisions ({r['index_rows']:,} index rows) in "
                  f"{r['verify_seconds']:.2f} s = {r['decisions_per_s']:,.0f} decisions/s; raw SELECT of the "
                  f"same rows {r['raw_select_seconds']:.2f} s; ratio {r['ratio']:.1f}x")
    rows = [Row(f"{r['backend']}, {r['decisions']:,} decisions", f"{r['decisions_per_s']:,.0f} decisions/s",
                f"raw SELECT {r['raw_select_seconds']:.2f} s", f"{r['ratio']:.1f}x") for r in results]
    print("\n" + format_table(rows, "trace index verification"))
    after = probe_ms()
    print(f"\nCPU probe: {before:.1f} ms before, {after:.1f} ms after")
    if args.json:
        write_json(args.json, {"machine": host, "postgresql": pg, "results": results})


if __name__ == "__main__":
    main()
