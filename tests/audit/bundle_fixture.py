"""Bundles for the verifier's tests, written to docs/bundle-format.md straight from a real ledger.

``make_source`` fills a ledger the way production does (default pack bootstrapped, the shipped
model registered, pipeline decisions, an annotation, one payload purged); ``write_bundle`` reads
that ledger back and writes a spec-conforming bundle of all its decisions with their annotations
and context entries (independently of ``audit.export.create``, so the verifier is tested against a
second reading of the spec). ``rewrite`` copies a bundle with members replaced, added or dropped,
optionally re-hashing the manifest and re-signing it: the raw material of the tamper tests.
``synthetic_bundle`` writes a big bundle (1,000,000 records) for the scale check, replicating
real decision bodies under fresh trace ids.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson
from sqlalchemy import select

from audit.annotations import annotate
from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.governance.models import register_model
from audit.governance.service import Governance
from audit.query.index import TraceIndex
from inference.backends import load_backend
from inference.model import ModelFiles
from ledger import NoteSigner, store
from ledger.append import Ledger
from ledger.checkpoint import Checkpoint
from ledger.jcs import canonical_bytes
from ledger.merkle import CompactRange, root_of
from ledger.multiproof import encode_nodes, frontier
from ledger.note import sign_note
from ledger.records import Record, new_trace_ids, seal
from ledger.retention import purge_payloads
from wasm_rules import Sandbox

OPERATOR = Principal.local("operator")
OFFICER = Principal.local("officer")
GOVERNANCE = ("ruleset.proposed", "ruleset.bootstrapped", "ruleset.approved", "ruleset.activated")


@dataclass
class Source:
    ledger: Ledger
    signer: NoteSigner
    decisions: list[Any]


def make_source(ledger: Ledger, signer: NoteSigner, sandbox: Sandbox, n: int = 60) -> Source:
    """Bootstrap the default pack, register the shipped model, decide ``n`` simulated payments,
    annotate one decision and purge the payload of another."""
    from tests.audit.test_pipeline import submissions  # the pipeline tests' simulated traffic

    gov = Governance(ledger, sandbox=sandbox)
    gov.bootstrap_default(principal=OPERATOR)
    files = ModelFiles.open()
    register_model(ledger, files, OPERATOR, backends=["numpy"])
    pipe = Pipeline(ledger, load_backend("numpy", files.weights_path), gov.load_active(sandbox),
                    index=TraceIndex())
    decisions = pipe.decide(submissions(n))
    annotate(ledger, decisions[3].trace_id, OFFICER, "NOTE", "looked at it")
    env = orjson.loads(_entry(ledger, decisions[5].seq))
    purge_payloads(ledger, [env["payload_sha256"]], "erasure order 42")
    ledger.checkpoint()
    return Source(ledger, signer, decisions)


def created_bundle(source: Source, out: Path) -> Path:
    """The bundle ``audit.export.create.create_bundle`` writes of every decision of ``source``."""
    from audit.export.create import ExportFilters, create_bundle

    filters = ExportFilters.of("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z")
    create_bundle(source.ledger.engine, source.ledger, source.signer, out, filters, OFFICER)
    return out


def _entry(ledger: Ledger, seq: int) -> bytes:
    e = store.entries
    with ledger.engine.connect() as conn:
        return bytes(conn.execute(select(e.c.record).where(e.c.seq == seq)).scalar_one())


def _all(ledger: Ledger) -> list[tuple[int, str, bytes, bytes, bytes, str]]:
    e = store.entries
    with ledger.engine.connect() as conn:
        rows = conn.execute(select(e.c.seq, e.c.kind, e.c.record, e.c.leaf_hash, e.c.chain_hash, e.c.trace_id)
                            .order_by(e.c.seq)).all()
    return [(int(s), str(k), bytes(r), bytes(lf), bytes(c), str(t)) for s, k, r, lf, c, t in rows]


def _payloads(ledger: Ledger) -> dict[str, bytes | None]:
    p = store.payloads
    with ledger.engine.connect() as conn:
        rows = conn.execute(select(p.c.sha256, p.c.data)).all()
    return {str(s): (None if d is None else bytes(d)) for s, d in rows}


def write_bundle(source: Source, out: Path, *, manifest_signer: NoteSigner | None = None,
                 checkpoint_signer: NoteSigner | None = None) -> Path:
    """A bundle of every decision of ``source`` with its annotations and context entries."""
    ledger, signer = source.ledger, source.signer
    rows = _all(ledger)
    envs = {s: orjson.loads(r) for s, _, r, _, _, _ in rows}
    decisions = {s for s, k, *_ in rows if k == "decision"}
    rulesets = {f"{envs[s]['record']['rules']['ruleset_id']}@{envs[s]['record']['rules']['version']}"
                for s in decisions}
    models = {envs[s]["record"]["model"]["sha256"] for s in decisions}
    pays = {envs[s].get("payload_sha256") for s in decisions}
    picked = []
    for s, k, *_ in rows:
        b = envs[s]["record"]
        if (k == "decision" or (k == "annotation" and b["refers_to"]["seq"] in decisions)
                or (k in GOVERNANCE and b["id"] in rulesets)
                or (k == "model.registered" and b["model_sha256"] in models)
                or (k == "ledger.payload_purge" and pays & set(b["payloads"]))):
            picked.append(s)
    size = len(rows)
    leaves = [lf for _, _, _, lf, _, _ in rows]
    root = root_of(leaves)
    files: dict[str, bytes] = {}
    by_seq = {r[0]: r for r in rows}
    files["records.jsonl"] = b"".join(by_seq[s][2] + b"\n" for s in picked)
    files["index.jsonl"] = b"".join(canonical_bytes({
        "chain_hash": by_seq[s][4].hex(), "kind": by_seq[s][1], "leaf_hash": by_seq[s][3].hex(), "seq": s,
        "trace_id": by_seq[s][5]}) + b"\n" for s in picked)
    stored = _payloads(ledger)
    purged_by = {p: s for s in picked if by_seq[s][1] == "ledger.payload_purge"
                 for p in envs[s]["record"]["payloads"]}
    lines, seen = [], set()
    for s in picked:
        sha = envs[s].get("payload_sha256")
        if sha is None or sha in seen:
            continue
        seen.add(sha)
        data = stored[sha]
        if data is None:
            lines.append(canonical_bytes({"purge_seq": purged_by[sha], "sha256": sha, "state": "purged"}))
        else:
            lines.append(canonical_bytes({"data": data.decode(), "encoding": "utf-8", "sha256": sha,
                                          "state": "present"}))
    files["payloads.jsonl"] = b"".join(x + b"\n" for x in lines)
    files["records.csv"] = b"seq,trace_id\r\n" + b"".join(f"{s},{by_seq[s][5]}\r\n".encode() for s in picked)
    cp = Checkpoint(ledger.origin, size, root).sign([checkpoint_signer or signer])
    files["checkpoint.txt"] = cp.note.encode()
    files["proofs/nodes.bin"] = encode_nodes((lo, hi, root_of(leaves[lo:hi]))
                                             for lo, hi in frontier(size, picked))
    for s in picked:
        k, b = by_seq[s][1], envs[s]["record"]
        if k in ("ruleset.proposed", "ruleset.bootstrapped"):
            sha = b["module_sha256"]
            files[f"rules/{sha}.wasm"] = base64.b64decode(b["module"])
            files[f"rules/{sha}.toml"] = b["source"].encode()
            gov = [x for x in picked if by_seq[x][1] in GOVERNANCE and envs[x]["record"]["id"] == b["id"]]
            files[f"rules/{sha}.json"] = canonical_bytes({"entries": gov, "id": b["id"],
                                                          "module_sha256": sha})
    mf = ModelFiles.open()
    for sha in models:
        assert sha == mf.model_sha256
        files[f"models/{sha}/weights.npz"] = mf.weights_path.read_bytes()
        files[f"models/{sha}/card.json"] = (mf.directory / "card.json").read_bytes()
    files["report.html"] = b"<!doctype html><title>bundle</title><p>%d decisions</p>" % len(decisions)
    files["VERIFY.md"] = b"# How to verify\n\nsealtrail export verify FILE.zip --trusted-key VKEY\n"
    by_decision = {o: 0 for o in ("ALLOW", "REVIEW", "HOLD", "BLOCK")}
    for s in decisions:
        by_decision[envs[s]["record"]["decision"]] += 1
    n_ann = sum(1 for s in picked if by_seq[s][1] == "annotation")
    manifest = {
        "schema": "sealtrail.bundle/1", "bundle_id": new_trace_ids(1)[0],
        "created_at": "2026-12-03T09:00:00.000000Z", "creator": OFFICER.to_json(),
        "filters": {"from": "2000-01-01T00:00:00.000000Z", "to": "2100-01-01T00:00:00.000000Z",
                    "account": None, "decision": None, "rule": None},
        "log": {"origin": ledger.origin, "verifier_keys": [signer.verifier.vkey]},
        "checkpoint": {"size": size, "root": base64.b64encode(root).decode(), "file": "checkpoint.txt"},
        "previous": None,
        "counts": {"records": len(picked), "decisions": len(decisions), "annotations": n_ann,
                   "context": len(picked) - len(decisions) - n_ann,
                   "payloads_present": sum(b'"present"' in x for x in lines),
                   "payloads_purged": sum(b'"purged"' in x for x in lines), "by_decision": by_decision},
        "range": {"first_seq": picked[0], "last_seq": picked[-1],
                  "contiguous": picked[-1] - picked[0] + 1 == len(picked)},
        "rules": sorted({envs[s]["record"]["rules"]["module_sha256"] for s in decisions}),
        "models": sorted(models),
    }
    return _write(out, files, manifest, manifest_signer or signer)


def _write(out: Path, files: Mapping[str, bytes], manifest: dict[str, Any], signer: NoteSigner) -> Path:
    manifest = {**manifest, "files": {n: hashlib.sha256(d).hexdigest() for n, d in sorted(files.items())}}
    mbytes = canonical_bytes(manifest)
    sig = sign_note(f"sealtrail bundle manifest v1\n{manifest['bundle_id']}\n"
                    f"{hashlib.sha256(mbytes).hexdigest()}\n", [signer])
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("manifest.json", mbytes)
        z.writestr("manifest.sig", sig)
    return out


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def rewrite(src: Path, dst: Path, *, change: Mapping[str, bytes | None] | None = None,
            edit: Callable[[dict[str, bytes]], None] | None = None, rehash: bool = False,
            resign: NoteSigner | None = None) -> Path:
    """Copy ``src`` with members replaced (``None`` drops one); ``rehash`` recomputes
    ``manifest.files`` (signed by ``resign``, or keeping the old, now wrong, signature)."""
    m = members(src)
    for name, data in (change or {}).items():
        if data is None:
            m.pop(name, None)
        else:
            m[name] = data
    if edit is not None:
        edit(m)
    if rehash or resign is not None:
        manifest = orjson.loads(m.pop("manifest.json"))
        old_sig = m.pop("manifest.sig")
        if rehash:
            manifest.pop("files")
        files = {n: d for n, d in m.items()}
        if resign is not None:
            manifest.pop("files", None)
            return _write(dst, files, manifest, resign)
        manifest["files"] = {n: hashlib.sha256(d).hexdigest() for n, d in sorted(files.items())}
        m["manifest.json"] = canonical_bytes(manifest)
        m["manifest.sig"] = old_sig
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in m.items():
            z.writestr(name, data)
    return dst


def lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1]


def joined(parts: list[bytes]) -> bytes:
    return b"".join(p + b"\n" for p in parts)


# --- a big bundle for the scale check -----------------------------------------------------------


def synthetic_bundle(source: Source, out: Path, n: int) -> Path:
    """``n`` decisions (bodies of ``source``'s decisions, cycled, under fresh trace ids, each with
    its own payload) after the context entries of ``source``: a contiguous export of seqs
    ``1 .. size - 1`` of a tree whose leaf 0 is ``source``'s genesis."""
    rows = _all(source.ledger)
    context = [(k, r) for _, k, r, _, _, _ in rows if k in GOVERNANCE or k == "model.registered"]
    stored = {k: v for k, v in _payloads(source.ledger).items() if v is not None}
    bodies: list[tuple[bytes, bytes, str]] = []
    for _, k, r, _, _, _ in rows:
        env = orjson.loads(r)
        if k == "decision" and env.get("payload_sha256") in stored:
            bodies.append((canonical_bytes(env["record"]), stored[env["payload_sha256"]],
                           env["record"]["decision"]))
    size = 1 + len(context) + n
    cr = CompactRange()
    cr.append(rows[0][3])
    chain = rows[0][4]
    counts = {"ALLOW": 0, "REVIEW": 0, "HOLD": 0, "BLOCK": 0}
    gov_seqs: list[int] = []
    names = ("records.jsonl", "index.jsonl", "payloads.jsonl")
    tmp = {name: out.with_name(f"{out.name}.{name}") for name in names}
    hs = {name: hashlib.sha256() for name in names}
    outs = {name: tmp[name].open("wb") for name in names}
    try:
        buf: dict[str, list[bytes]] = {name: [] for name in names}
        tids: Iterator[str] = iter(())
        for seq in range(1, size):
            payload = None
            if seq <= len(context):
                kind, rec = context[seq - 1]
                tid = orjson.loads(rec)["trace_id"]
                if kind != "model.registered":
                    gov_seqs.append(seq)
            else:
                i = seq - 1 - len(context)
                if i % 4096 == 0:
                    tids = iter(new_trace_ids(4096))
                body, raw, decision = bodies[i % len(bodies)]
                payload = raw + f" {i}".encode()
                tid, rec, _ = seal(Record.from_canonical_body("decision", body, payload=payload),
                                   "2026-12-01T00:00:00.000000Z", next(tids))
                kind = "decision"
                counts[decision] += 1
            leaf = hashlib.sha256(b"\x00" + rec).digest()
            chain = hashlib.sha256(chain + leaf).digest()
            cr.append(leaf)
            buf["records.jsonl"].append(rec + b"\n")
            buf["index.jsonl"].append(canonical_bytes({
                "chain_hash": chain.hex(), "kind": kind, "leaf_hash": leaf.hex(), "seq": seq,
                "trace_id": tid}) + b"\n")
            if payload is not None:
                buf["payloads.jsonl"].append(
                    b'{"data":%s,"encoding":"utf-8","sha256":"%s","state":"present"}\n'
                    % (orjson.dumps(payload.decode()), hashlib.sha256(payload).hexdigest().encode()))
            if len(buf["records.jsonl"]) >= 4096:
                _flush(buf, hs, outs)
        _flush(buf, hs, outs)
    finally:
        for f in outs.values():
            f.close()
    mf = ModelFiles.open()
    module_sha = orjson.loads(bodies[0][0])["rules"]["module_sha256"]
    root = cr.root()
    signer = source.signer
    files = _context_files(source, module_sha, gov_seqs, mf)
    files["checkpoint.txt"] = Checkpoint(source.ledger.origin, size, root).sign([signer]).note.encode()
    files["proofs/nodes.bin"] = encode_nodes([(0, 1, rows[0][3])])
    hashes = {name: h.hexdigest() for name, h in hs.items()}
    hashes.update({name: hashlib.sha256(data).hexdigest() for name, data in files.items()})
    manifest = {
        "schema": "sealtrail.bundle/1", "bundle_id": new_trace_ids(1)[0],
        "created_at": "2026-12-03T09:00:00.000000Z", "creator": OFFICER.to_json(),
        "filters": {"from": "2000-01-01T00:00:00.000000Z", "to": "2100-01-01T00:00:00.000000Z",
                    "account": None, "decision": None, "rule": None},
        "log": {"origin": source.ledger.origin, "verifier_keys": [signer.verifier.vkey]},
        "checkpoint": {"size": size, "root": base64.b64encode(root).decode(), "file": "checkpoint.txt"},
        "previous": None,
        "counts": {"records": size - 1, "decisions": n, "annotations": 0, "context": len(context),
                   "payloads_present": n, "payloads_purged": 0, "by_decision": counts},
        "range": {"first_seq": 1, "last_seq": size - 1, "contiguous": True},
        "rules": [module_sha], "models": [mf.model_sha256], "files": dict(sorted(hashes.items())),
    }
    mbytes = canonical_bytes(manifest)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1, allowZip64=True) as z:
        for name in names:
            z.write(tmp[name], name)
            tmp[name].unlink()
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("manifest.json", mbytes)
        z.writestr("manifest.sig", sign_note(f"sealtrail bundle manifest v1\n{manifest['bundle_id']}\n"
                                             f"{hashlib.sha256(mbytes).hexdigest()}\n", [signer]))
    return out


def _flush(buf: dict[str, list[bytes]], hs: dict[str, Any], outs: Mapping[str, IO[bytes]]) -> None:
    for name, parts in buf.items():
        data = b"".join(parts)
        hs[name].update(data)
        outs[name].write(data)
        parts.clear()


def _context_files(source: Source, module_sha: str, gov_seqs: list[int], mf: ModelFiles) -> dict[str, bytes]:
    rows = _all(source.ledger)
    files: dict[str, bytes] = {}
    for _s, k, r, *_ in rows:
        if k in ("ruleset.proposed", "ruleset.bootstrapped"):
            b = orjson.loads(r)["record"]
            if b["module_sha256"] == module_sha:
                files[f"rules/{module_sha}.wasm"] = base64.b64decode(b["module"])
                files[f"rules/{module_sha}.toml"] = b["source"].encode()
                files[f"rules/{module_sha}.json"] = canonical_bytes(
                    {"entries": gov_seqs, "id": b["id"], "module_sha256": module_sha})
    files[f"models/{mf.model_sha256}/weights.npz"] = mf.weights_path.read_bytes()
    files[f"models/{mf.model_sha256}/card.json"] = (mf.directory / "card.json").read_bytes()
    files["report.html"] = b"<!doctype html><title>big</title>"
    files["VERIFY.md"] = b"# verify\n"
    return files


def now_fixed() -> datetime:
    return datetime(2026, 12, 3, 9, 0, tzinfo=UTC)

