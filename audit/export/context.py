"""A bundle's context: the entries and files that say how its decisions were made.

For the rulesets and models the exported decisions name, the sanctions lists they were screened
against, and the purges that emptied their payloads: the governance entries (who proposed,
approved, activated), the ``model.registered`` entries, the ``sanctions_list`` entries, the
``screening.clearance`` entries of the clearances that cleared a hit and the
``ledger.payload_purge`` entries, which go into ``records.jsonl`` so that they are proved like the
decisions; and the files ``rules/<sha>.{wasm,toml,json}``, ``models/<sha>/{weights.npz,card.json}``
and ``lists/<sha>`` (a list's bytes as loaded, its record's payload). Also the previous export,
from its ledger record.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, select

from audit.errors import ExportUnavailableError
from audit.export.select import EntryRow
from audit.governance.models import MODEL_REGISTERED
from audit.governance.state import BOOTSTRAPPED, KINDS, PROPOSED
from audit.screening.clearance_state import CLEARANCE_KIND
from audit.screening.lists import LIST_KIND
from inference.errors import ModelError
from inference.model import CARD_NAME, ModelFiles, shipped_model_dir
from ledger import store
from ledger.jcs import canonical_bytes

__all__ = ["Context", "gather_context", "previous_export"]

_COLS = "seq, kind, record, leaf_hash, chain_hash, trace_id"


@dataclass
class Context:
    entries: list[EntryRow] = field(default_factory=list)
    files: list[tuple[str, bytes]] = field(default_factory=list)
    purge_reasons: dict[int, str] = field(default_factory=dict)


def _rows(conn: Connection, where: str, args: tuple[Any, ...] = ()) -> list[tuple[EntryRow, dict[str, Any]]]:
    got = conn.exec_driver_sql(f"SELECT {_COLS} FROM ledger_entries WHERE {where} ORDER BY seq", args)
    return [(EntryRow(int(s), k, bytes(r), bytes(lh), bytes(ch), t), orjson.loads(bytes(r)))
            for s, k, r, lh, ch, t in got]


def _rules(conn: Connection, named: Mapping[str, str], ctx: Context) -> None:
    p = store.param(conn)
    rows = _rows(conn, f"kind IN ({', '.join([p] * len(KINDS))})", tuple(KINDS))
    for rid, module_sha in sorted(named.items()):
        mine = [(row, env) for row, env in rows if env["record"].get("id") == rid]
        origin = next((env["record"] for _, env in mine if env["kind"] in (PROPOSED, BOOTSTRAPPED)), None)
        if origin is None:
            raise ExportUnavailableError(f"ruleset {rid} named by exported decisions has no "
                                         "ruleset.proposed or ruleset.bootstrapped record")
        try:
            module = base64.b64decode(origin["module"], validate=True)
        except (binascii.Error, ValueError, KeyError) as exc:
            raise ExportUnavailableError(f"ruleset {rid}: the recorded module is unreadable: {exc}") from exc
        got = hashlib.sha256(module).hexdigest()
        if got != module_sha or origin.get("module_sha256") != module_sha:
            raise ExportUnavailableError(f"ruleset {rid}: decisions name module {module_sha}, its record "
                                         f"holds {got} (ledger damage)")
        ctx.entries += [row for row, _ in mine]
        ctx.files += [(f"rules/{module_sha}.wasm", module),
                      (f"rules/{module_sha}.toml", str(origin["source"]).encode()),
                      (f"rules/{module_sha}.json", canonical_bytes(
                          {"entries": [row.seq for row, _ in mine], "id": rid, "module_sha256": module_sha}))]


def _model_dirs(extra: Iterable[Path]) -> dict[str, ModelFiles]:
    found: dict[str, ModelFiles] = {}
    for d in (shipped_model_dir(), *extra):
        try:
            m = ModelFiles.open(d)
        except ModelError:
            continue
        found.setdefault(m.model_sha256, m)
    return found


def _models(conn: Connection, named: set[str], model_dirs: Iterable[Path], ctx: Context) -> None:
    dirs = _model_dirs(model_dirs)
    registered = {env["record"]["model_sha256"]: row
                  for row, env in _rows(conn, f"kind = {store.param(conn)}", (MODEL_REGISTERED,))}
    for sha in sorted(named):
        m = dirs.get(sha)
        if m is None:
            raise ExportUnavailableError(f"model {sha} named by exported decisions is in no model "
                                         "directory given (the shipped one and --model-dir)")
        weights = m.weights_path.read_bytes()
        if hashlib.sha256(weights).hexdigest() != sha:  # changed since ModelFiles.open checked it
            raise ExportUnavailableError(f"model file {m.weights_path} no longer hashes to {sha}")
        ctx.files += [(f"models/{sha}/weights.npz", weights),
                      (f"models/{sha}/card.json", (m.directory / CARD_NAME).read_bytes())]
        if sha in registered:
            ctx.entries.append(registered[sha])


def _purges(conn: Connection, seqs: set[int], ctx: Context) -> None:
    ordered = sorted(seqs)
    p = store.param(conn)
    for i in range(0, len(ordered), 500):
        chunk = ordered[i:i + 500]
        for row, env in _rows(conn, f"seq IN ({', '.join([p] * len(chunk))})", tuple(chunk)):
            if row.kind != "ledger.payload_purge":
                raise ExportUnavailableError(f"payload purge_seq {row.seq} is a {row.kind} entry (damage)")
            ctx.entries.append(row)
            ctx.purge_reasons[row.seq] = str(env["record"].get("reason", ""))
    missing = seqs - set(ctx.purge_reasons)
    if missing:
        raise ExportUnavailableError(f"purge record {min(missing)} is missing (ledger damage)")


def _lists(conn: Connection, seqs: set[int], upto: int, ctx: Context) -> None:
    """The list records the decisions name, with their bytes, and every other list record sealed
    before seq ``upto`` (the last exported decision's, plus one), so that the verifier knows which
    lists were in force at each decision."""
    ordered = sorted(seqs)
    p = store.param(conn)
    found: set[int] = set()
    for i in range(0, len(ordered), 500):
        chunk = ordered[i:i + 500]
        for row, env in _rows(conn, f"seq IN ({', '.join([p] * len(chunk))})", tuple(chunk)):
            if row.kind != LIST_KIND:
                raise ExportUnavailableError(f"decisions name list seq {row.seq}, a {row.kind} entry "
                                             "(damage)")
            sha = str(env.get("payload_sha256"))
            got = conn.execute(select(store.payloads.c.data).where(store.payloads.c.sha256 == sha)).first()
            if got is None or got[0] is None:
                raise ExportUnavailableError(f"the bytes of list {env['record'].get('name')!r} sealed at "
                                             f"seq {row.seq} are not in the payload store: the decisions "
                                             "screened against it cannot be screened again")
            data = bytes(got[0])
            if hashlib.sha256(data).hexdigest() != sha:
                raise ExportUnavailableError(f"the stored bytes of list seq {row.seq} do not hash to {sha} "
                                             "(damage)")
            ctx.entries.append(row)
            if not any(name == f"lists/{sha}" for name, _ in ctx.files):  # the same bytes loaded again
                ctx.files.append((f"lists/{sha}", data))
            found.add(row.seq)
    missing = seqs - found
    if missing:
        raise ExportUnavailableError(f"list record {min(missing)} named by exported decisions is missing "
                                     "(ledger damage)")
    if seqs:  # every other list record before the last decision, without its bytes: what was in force
        p = store.param(conn)
        for row, _ in _rows(conn, f"kind = {p} AND seq < {p}", (LIST_KIND, upto)):
            if row.seq not in found:
                ctx.entries.append(row)


def _clearances(conn: Connection, seqs: set[int], ctx: Context) -> None:
    """Every record of the clearances proposed at ``seqs``: the proposals and their steps."""
    if not seqs:
        return
    found = set()
    for row, env in _rows(conn, f"kind = {store.param(conn)}", (CLEARANCE_KIND,)):
        target = env["record"].get("clearance")  # a step names its proposal by seq, an int, as ``fold`` reads
        if row.seq in seqs or (type(target) is int and target in seqs):
            ctx.entries.append(row)
            found.add(row.seq)
    missing = seqs - found
    if missing:
        raise ExportUnavailableError(f"clearance {min(missing)} named by exported decisions is missing "
                                     "(ledger damage)")


def gather_context(conn: Connection, rulesets: Mapping[str, str], models: set[str], purge_seqs: set[int],
                   model_dirs: Iterable[Path] = (), list_seqs: set[int] | None = None,
                   clearance_seqs: set[int] | None = None, lists_upto: int = 0) -> Context:
    """Entries and files for ``rulesets`` ("id@version" -> module SHA-256), ``models``, the
    purges at ``purge_seqs``, the sanctions lists sealed at ``list_seqs`` (and every other list
    record before seq ``lists_upto``) and the good-guy
    clearances proposed at ``clearance_seqs``; ``ExportUnavailableError`` if one cannot be had."""
    ctx = Context()
    _rules(conn, rulesets, ctx)
    _models(conn, models, model_dirs, ctx)
    _purges(conn, purge_seqs, ctx)
    _lists(conn, list_seqs or set(), lists_upto, ctx)
    _clearances(conn, clearance_seqs or set(), ctx)
    return ctx


def previous_export(conn: Connection) -> dict[str, Any] | None:
    """``{bundle_id, checkpoint_size, checkpoint_root}`` of the latest ``export.created`` record."""
    rec = conn.exec_driver_sql("SELECT record FROM ledger_entries WHERE kind = 'export.created' "
                               "ORDER BY seq DESC LIMIT 1").scalar()
    if rec is None:
        return None
    b = orjson.loads(bytes(rec))["record"]
    return {"bundle_id": b["bundle_id"], "checkpoint_size": int(b["checkpoint"]["size"]),
            "checkpoint_root": b["checkpoint"]["root"]}
