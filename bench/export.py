"""Benchmark of export bundles: create (and verify, where ``audit.bundle.verify`` exists) at
100,000 and 1,000,000 decisions, wall time and peak RSS of each, on SQLite.

The ledger is filled fast: the pipeline decides 500 simulated payments (real bodies, real
governance and model records); then copies of those records, each with its own payload (the
raw message plus a unique run of JSON white space) and matching ``raw_sha256``/``at``, are
sealed through ``Ledger.append_many`` in batches of 1,024, each with its ``decision.summary``
as the pipeline seals it (so a bundle carries the summaries of a real ledger), and
``audit.query.index.catch_up`` indexes them. Create and verify each run in a fresh process
(peak RSS is that process's ``ru_maxrss``). The same-run baseline re-zips the bundle's own
members with ``zipfile`` at the same compression level: the ratio is what selecting, proving
and hashing cost on top of writing the bytes. Run from the repository root:
``python -m bench.export [--quick]``.
"""

from __future__ import annotations

import sys

if not __package__:
    sys.exit("run it as a module from the repository root: python -m bench.export")

import argparse
import hashlib
import importlib.util
import json
import resource
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import orjson

from bench.machine import host_info

ORIGIN = "bench.sealtrail/export"
FROM, TO = "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z"
BATCH = 1024  # the pipeline's largest batch: one summary each


def _ws(i: int) -> bytes:
    """A unique run of JSON white space for ``i`` (base 4 over space, tab, LF, CR)."""
    out = bytearray(b"\n")
    while True:
        out.append(b" \t\n\r"[i & 3])
        i >>= 2
        if not i:
            return bytes(out)


def fill(db: Path, keys: Path, n: int) -> float:
    """A ledger of ``n`` decisions at ``db``; returns the seconds it took."""
    from api import ops
    from api.config import Settings
    from audit.decide.account_secret import load_keyer, sealing_tail
    from audit.decide.principal import Principal
    from audit.decide.runtime import Runtime
    from audit.decide.summary import entries_jcs
    from audit.decide.types import Submission
    from audit.query.index import catch_up
    from inference.messages import Transaction, parse_messages
    from inference.simulate import SimConfig, simulate
    from ledger import Record
    from ledger.jcs import canonical_bytes

    t0 = time.perf_counter()
    s = Settings.model_validate({"db": f"sqlite:///{db}", "keys": keys, "checkpoint_every": 1_000_000_000})
    ops.initialise(s)
    rt = Runtime.open(s, operator="bench")
    who = Principal.local("bench").to_json()
    try:
        subs = []
        for sim in simulate(SimConfig(seed=4, n_normal=500, n_accounts=200, days=3))[:500]:
            (sub,) = Submission.parse(sim.transaction.canonical_bytes(), "json", who, sim.at)
            assert isinstance(sub, Submission)
            subs.append(sub)
        rt.service.decide(subs, timeout_s=120)
    finally:
        rt.close()
    ledger = ops.open_ledger(s)
    with ledger.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT e.record, p.data FROM ledger_entries e JOIN ledger_payloads p ON p.first_seq = e.seq "
            "WHERE e.kind = 'decision' ORDER BY e.seq").all()
    keyer = load_keyer(ledger.engine)
    templates = []
    for rec, data in rows:
        env = orjson.loads(bytes(rec))
        b = env["record"]
        body = canonical_bytes(b)  # the sealed body's exact bytes
        tx = next(t for t in parse_messages(bytes(data), b["input"]["format"])
                  if isinstance(t, Transaction) and t.sha256 == b["input"]["transaction_sha256"])
        templates.append((body, b["input"]["raw_sha256"].encode(), bytes(data), b["decision"],
                          canonical_bytes([h["id"] for h in b["fired"]]),
                          keyer.keys((tx.originator.account, tx.beneficiary.account))))
    done = len(templates)

    while done < n:
        k = min(BATCH, n - done)
        batch, picked = [], []
        for i in range(done, done + k):
            t = templates[i % len(templates)]
            body, raw_sha, data = t[:3]
            payload = data + _ws(i)
            new_sha = hashlib.sha256(payload).hexdigest().encode()
            batch.append(Record.from_canonical_body("decision", body.replace(raw_sha, new_sha),
                                                    payload=payload))
            picked.append(t)
        summary = entries_jcs([t[3] for t in picked], [t[4] for t in picked], [t[5] for t in picked])
        ledger.append_many(batch, tail=sealing_tail(keyer.key_id, summary))
        done += k
    ledger.checkpoint()
    catch_up(ledger.engine)
    ledger.engine.dispose()
    return time.perf_counter() - t0


def peak_rss_kib() -> int:
    """This process's peak RSS. ``ru_maxrss`` of a process started by fork and exec counts the
    parent's peak at the fork (Linux keeps the old memory map's high-water mark across exec),
    here the fill's; ``VmHWM`` is the high-water mark of this program's own memory map."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def create(db: str, keys: str, out: str) -> dict[str, Any]:
    """The bundle of every decision of the ledger at ``db`` written to ``out``: records and bytes."""
    from api import ops
    from api.config import Settings
    from audit.decide.principal import Principal
    from audit.export.create import ExportFilters, create_bundle
    from ledger.keys import load_signer

    s = Settings.model_validate({"db": f"sqlite:///{db}", "keys": Path(keys)})
    ledger = ops.open_ledger(s)
    summary = create_bundle(ledger.engine, ledger, load_signer(s.key_file), Path(out),
                            ExportFilters.of(FROM, TO), Principal.local("bench"))
    return {"records": summary.counts["records"], "bytes": summary.size_bytes}


def child(args: list[str]) -> None:
    """One measurement in this fresh process; prints JSON."""
    what, db, keys, out = args
    t0 = time.perf_counter()
    doc: dict[str, Any] = {}
    if what == "create":
        doc = create(db, keys, out)
    elif what == "verify":
        from audit.bundle.verify import verify_bundle
        from ledger.keys import load_signer

        verify_bundle(out, [load_signer(Path(keys) / "signing.key").verifier])
    else:  # baseline: the same member bytes, zipped with zipfile at the same level
        with zipfile.ZipFile(out) as src, \
                zipfile.ZipFile(db, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as dst:
            for name in src.namelist():
                with src.open(name) as r, dst.open(name, "w", force_zip64=True) as w:
                    while chunk := r.read(1 << 20):
                        w.write(chunk)
    doc["seconds"] = time.perf_counter() - t0
    doc["rss_mb"] = peak_rss_kib() / 1024
    print(json.dumps(doc))


def measure(what: str, *args: str, module: str = "bench.export") -> dict[str, Any]:
    """Run ``python -m module --child what args`` in a fresh process; the JSON it printed last."""
    res = subprocess.run([sys.executable, "-m", module, "--child", what, *args],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"{what} failed:\n{res.stderr[-4000:]}")
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="100,000 decisions only")
    ap.add_argument("--sizes", type=int, nargs="*", help="decision counts to run (overrides --quick)")
    ap.add_argument("--dir", type=Path, help="where to put the ledgers and bundles (default: a temp dir)")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child)
        return
    sizes = a.sizes or ([100_000] if a.quick else [100_000, 1_000_000])
    verify = importlib.util.find_spec("audit.bundle.verify") is not None
    h = host_info()
    print(f"CPU:    {h['cpu']} ({h['cores']} cores)\nRAM:    {h['ram_gib']} GiB\nOS:     {h['os']}\n"
          f"Python: {h['python']}\nDB:     SQLite (WAL, synchronous=FULL); compresslevel 1")
    print(f"{'records':>10}  {'fill s':>7}  {'create s':>8}  {'RSS MB':>7}  {'verify s':>8}  {'RSS MB':>7}  "
          f"{'zip s':>6}  {'create/zip':>10}  {'bundle MiB':>10}")
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        for n in sizes:
            d = Path(tmp) / str(n)
            d.mkdir()
            db = d / "ledger.db"
            filled = fill(db, d / "keys", n)
            out = d / "bundle.zip"
            c = measure("create", str(db), str(d / "keys"), str(out))
            v = measure("verify", str(db), str(d / "keys"), str(out)) if verify else None
            z = measure("zip", str(d / "plain.zip"), str(d / "keys"), str(out))
            vs = f"{'-':>8}  {'-':>7}" if v is None else f"{v['seconds']:8.1f}  {v['rss_mb']:7.0f}"
            print(f"{c['records']:>10}  {filled:7.1f}  {c['seconds']:8.1f}  {c['rss_mb']:7.0f}  "
                  f"{vs}  {z['seconds']:6.1f}  {c['seconds'] / z['seconds']:10.2f}  "
                  f"{c['bytes'] / 2**20:10.1f}", flush=True)

if __name__ == "__main__":
    main()
