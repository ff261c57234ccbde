"""Benchmark of re-derivation: the verifier making a bundle's decisions again from their messages,
beside the pipeline that made them, on the same records.

A fresh SQLite ledger (``sealtrail init`` defaults, WAL, synchronous=FULL) is filled by the
runtime's own pipeline (``Runtime.open``: the server's deciding path, trace index included) with
``N`` simulated payments (``inference.simulate``, parsed before timing) in batches of 1,024; the
wall and CPU time of deciding them is the same-run baseline. Then one bundle of the whole window
is created (format 7: it carries the state deltas), and verified in a fresh process, where the
time spent re-deriving (``audit.bundle.rederive.Rederiver``: parsing each payload again, catching
the state up through the sealed deltas, computing and comparing the features) is measured apart
from the rest of the verification (proofs, replay of rules and model, screening). The ratio of
decisions re-derived a second to decisions decided a second is the figure; parsing is inside
the re-derivation and outside the pipeline's time (the pipeline is handed parsed submissions), so
the pipeline's rate with the parsing added is printed too. Also printed: the bundle's size and
the share of it the state lines take, the verifier's peak RSS and the size of the decision state
(the feature state's bytes). Run from the repository root:
``python -m bench.rederive [--quick] [--decisions N]``.
"""

from __future__ import annotations

import sys

if not __package__:
    sys.exit("run it as a module from the repository root: python -m bench.rederive")

import argparse
import json
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from bench import export as export_bench
from bench.export import create
from bench.machine import host_info

BATCH = 1024


def fill(db: Path, keys: Path, n: int) -> dict[str, Any]:
    """Decide ``n`` simulated payments into a fresh ledger at ``db``; the pipeline's figures."""
    from api import ops
    from api.config import Settings
    from audit.decide.principal import Principal
    from audit.decide.runtime import Runtime
    from audit.decide.types import Submission
    from inference.simulate import SimConfig, simulate
    from inference.state_store import features_state_bytes

    s = Settings.model_validate({"db": f"sqlite:///{db}", "keys": keys, "checkpoint_every": 1_000_000_000,
                                 "state_snapshot_every": 0})
    ops.initialise(s)
    who = Principal.local("bench").to_json()
    sims = simulate(SimConfig(seed=21, n_normal=n, days=max(7, n // 5000)))[:n]
    t0 = time.perf_counter()
    subs = []
    for sim in sims:
        (sub,) = Submission.parse(sim.transaction.canonical_bytes(), "json", who, sim.at)
        assert isinstance(sub, Submission)
        subs.append(sub)
    parse_s = time.perf_counter() - t0
    rt = Runtime.open(s, operator="bench")
    try:
        pipe = rt.pipeline
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(0, len(subs), BATCH):
            pipe.decide(subs[i:i + BATCH])
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        state = len(features_state_bytes(pipe.extractor))
    finally:
        rt.close()
    return {"decisions": len(subs), "decide_s": wall, "decide_cpu_s": cpu, "parse_s": parse_s,
            "state_bytes": state}


def child(args: list[str]) -> None:
    """One measurement in this fresh process; prints JSON."""
    what, db, keys, out = args
    t0 = time.perf_counter()
    doc: dict[str, Any] = {}
    if what == "create":
        doc = create(db, keys, out)
        with zipfile.ZipFile(out) as z:
            doc["state_bytes"] = sum(i.compress_size for i in z.infolist() if i.filename.startswith("state/"))
            doc["state_raw_bytes"] = sum(i.file_size for i in z.infolist() if i.filename.startswith("state/"))
    else:
        from audit.bundle import rederive
        from audit.bundle.verify import verify_bundle
        from ledger.keys import load_signer

        spent = [0.0]

        def timed(name: str) -> None:
            real = getattr(rederive.Rederiver, name)

            def wrapper(self: Any, *a: Any, **k: Any) -> Any:
                t = time.perf_counter()
                try:
                    return real(self, *a, **k)
                finally:
                    spent[0] += time.perf_counter() - t
            setattr(rederive.Rederiver, name, wrapper)

        for name in ("decision", "flush", "finish"):
            if hasattr(rederive.Rederiver, name):
                timed(name)
        report = verify_bundle(out, [load_signer(Path(keys) / "signing.key").verifier])
        doc = {"rederived": report.rederived, "not_rederived": report.not_rederived,
               "rederive_s": spent[0], "decisions": report.decisions}
    doc["seconds"] = time.perf_counter() - t0
    doc["rss_mib"] = export_bench.peak_rss_kib() / 1024
    print(json.dumps(doc))


def measure(what: str, *args: str) -> dict[str, Any]:
    return export_bench.measure(what, *args, module="bench.rederive")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="100,000 decisions (default 1,000,000)")
    ap.add_argument("--decisions", type=int, help="how many decisions (overrides --quick)")
    ap.add_argument("--dir", type=Path, help="where to put the ledger and bundle (default: a temp dir)")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child)
        return
    n = a.decisions or (100_000 if a.quick else 1_000_000)
    h = host_info()
    print(f"CPU:    {h['cpu']} ({h['cores']} cores)\nRAM:    {h['ram_gib']} GiB\nOS:     {h['os']}\n"
          f"Python: {h['python']}\nDB:     SQLite (WAL, synchronous=FULL); batches of {BATCH}")
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        d = Path(tmp)
        f = fill(d / "ledger.db", d / "keys", n)
        out = d / "bundle.zip"
        c = measure("create", str(d / "ledger.db"), str(d / "keys"), str(out))
        v = measure("verify", str(d / "ledger.db"), str(d / "keys"), str(out))
    decided = f["decisions"] / f["decide_s"]
    with_parse = f["decisions"] / (f["decide_s"] + f["parse_s"])
    rederived = v["rederived"] / v["rederive_s"] if v["rederive_s"] else 0.0
    print(f"pipeline      {f['decisions']:,} decisions in {f['decide_s']:.1f} s: {decided:,.0f}/s "
          f"({f['decide_cpu_s'] / f['decisions'] * 1e6:.0f} µs CPU each); with parsing {with_parse:,.0f}/s")
    print(f"re-derived    {v['rederived']:,} of {v['decisions']:,} in {v['rederive_s']:.1f} s: "
          f"{rederived:,.0f}/s -> {rederived / decided:.2f}x the pipeline "
          f"({rederived / with_parse:.2f}x with its parsing; target >= 0.8x)")
    if v["not_rederived"]:
        print(f"              not re-derived: {v['not_rederived']}")
    print(f"verify        {v['seconds']:.1f} s in all, peak RSS {v['rss_mib']:,.0f} MiB; decision state "
          f"{f['state_bytes'] / 2**20:,.0f} MiB (target: RSS <= state + 500 MiB)")
    print(f"bundle        {c['bytes'] / 2**20:,.1f} MiB, {c['records']:,} records; state lines "
          f"{c['state_bytes'] / 2**20:,.1f} MiB compressed ({c['state_raw_bytes'] / 2**20:,.1f} MiB raw, "
          f"{c['state_raw_bytes'] / f['decisions']:.0f} B a decision), {c['state_bytes'] / c['bytes']:.1%} "
          "of the bundle")


if __name__ == "__main__":
    main()
