"""``sealtrail witness``: the witness as a small HTTP service over mutual TLS, and its config file.

The config (TOML, no secrets; paths relative to the file):

    name = "audit.bank.example/witness"    # the witness's key name (cosignature lines carry it)
    key = "witness.key"                    # its Ed25519 key, PRIVATE+KEY+name+id+base64(0x04||seed), 0600
    state = "witness.db"                   # what it cosigned and the evidence it kept (SQLite)

    [[log]]
    origin = "bank.example/aml"            # the log's checkpoint origin
    keys = ["bank.example/aml+1a2b3c4d+AQ..."]     # verifier keys trusted to sign its checkpoints
    revoked = { "bank.example/aml+0f0e0d0c+AQ..." = 120000 }  # vkey -> first tree size refused

Endpoints: ``POST /add-checkpoint`` (https://c2sp.org/tlog-witness), ``GET /logs/<origin>/checkpoint``
(the newest checkpoint cosigned, with this witness's cosignature), ``GET /evidence`` (the split views
and failed proofs it kept, JSON) and ``GET /healthz``. Every client must present a certificate from
the configured client CA (the log, an auditor); the checkpoint's own signature is what authorises a
cosignature.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ledger.cosign import WitnessEndpoint
from ledger.cosignature import Cosigner, CosignerVerifier
from ledger.errors import KeyFileError
from ledger.keys import read_private, write_private
from ledger.note import NoteVerifier
from ledger.witness import MAX_BODY_BYTES, LogPolicy, Witness

__all__ = ["ConfigError", "WitnessConfig", "WitnessList", "create_witness_app", "http_post", "init_witness",
           "load_config", "load_cosigner", "load_witness_list", "open_witness"]


class ConfigError(ValueError):
    """The witness config file is missing, unreadable or wrong; the message names the field."""


@dataclass(frozen=True)
class WitnessConfig:
    name: str
    key: Path
    state: Path
    logs: tuple[LogPolicy, ...]


def load_config(path: Path) -> WitnessConfig:
    """Read and check the witness config; ``ConfigError`` names what is wrong."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read witness config {path}: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"witness config {path} is not TOML: {exc}") from exc
    base = path.parent

    def string_at(d: dict[str, Any], key: str, where: str) -> str:
        v = d.get(key)
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{path}: {where}{key} must be a non-empty string")
        return v

    unknown = set(doc) - {"name", "key", "state", "log"}
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(sorted(unknown))}")
    logs_doc = doc.get("log", [])
    if not isinstance(logs_doc, list) or not logs_doc:
        raise ConfigError(f"{path}: at least one [[log]] is needed")
    logs: list[LogPolicy] = []
    for i, entry in enumerate(logs_doc):
        where = f"log[{i}]."
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: log[{i}] must be a table")
        origin = string_at(entry, "origin", where)
        keys_doc = entry.get("keys")
        if not isinstance(keys_doc, list) or not keys_doc or not all(isinstance(k, str) for k in keys_doc):
            raise ConfigError(f"{path}: {where}keys must be a non-empty list of verifier keys")
        try:
            keys = tuple(NoteVerifier.from_vkey(k) for k in keys_doc)
        except KeyFileError as exc:
            raise ConfigError(f"{path}: {where}keys: {exc}") from exc
        for k in keys:
            if k.name != origin:
                raise ConfigError(f"{path}: {where}keys: {k.vkey} is named {k.name!r}, not the log's origin")
        revoked_doc = entry.get("revoked", {})
        if not isinstance(revoked_doc, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in revoked_doc.values()):
            raise ConfigError(f"{path}: {where}revoked must map verifier keys to tree sizes (integers >= 0)")
        revoked: dict[str, int] = {}
        for vkey, from_size in revoked_doc.items():
            try:  # the canonical form, which the witness looks signatures' keys up by
                revoked[NoteVerifier.from_vkey(vkey).vkey] = from_size
            except KeyFileError as exc:
                raise ConfigError(f"{path}: {where}revoked: {exc}") from exc
        logs.append(LogPolicy(origin, keys, revoked))
    origins = [p.origin for p in logs]
    if len(set(origins)) != len(origins):
        raise ConfigError(f"{path}: two [[log]] tables have the same origin")
    return WitnessConfig(string_at(doc, "name", ""), base / string_at(doc, "key", ""),
                         base / string_at(doc, "state", ""), tuple(logs))


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes are TOML's: quotes, backslashes, controls)."""
    return json.dumps(text)


def init_witness(config: Path, name: str, log_keys: Sequence[NoteVerifier]) -> Cosigner:
    """Create a witness: its key (``witness.key``, 0600), its empty state file (``witness.db``) and its
    config at ``config``, witnessing the logs whose verifier keys are given (a key's name is its log's
    origin). Everything is checked before anything is written, and nothing is left behind when a
    step fails; an existing config, key or state file is refused (``ConfigError``)."""
    cosigner = Cosigner.generate(name)  # refuses a name with '+' or white space (KeyFileError)
    if not log_keys:
        raise ConfigError("at least one log key is needed")
    key_path, state_path = config.parent / "witness.key", config.parent / "witness.db"
    for p in (config, key_path, state_path):
        if p.exists() or p.is_symlink():
            raise ConfigError(f"{p} already exists; refusing to overwrite a witness's file")
    by_origin: dict[str, list[str]] = {}
    for k in log_keys:
        by_origin.setdefault(k.name, []).append(k.vkey)
    head = f'name = {_toml_string(name)}\nkey = "witness.key"\nstate = "witness.db"\n'
    logs = "".join(f"\n[[log]]\norigin = {_toml_string(origin)}\n"
                   f"keys = [{', '.join(map(_toml_string, vkeys))}]\n" for origin, vkeys in by_origin.items())
    text = head + logs
    config.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = config.with_name(f".{config.name}.new")
    made: list[Path] = [tmp]
    try:
        tmp.write_text(text, encoding="utf-8")
        cfg = load_config(tmp)  # what is written reads back as meant
        if cfg.name != name or {p.origin for p in cfg.logs} != set(by_origin):
            raise ConfigError(f"{config}: the config written does not read back as given")
        made.append(key_path)
        write_private(key_path, cosigner.skey, exclusive=True, what="a witness key")
        made.append(state_path)
        Witness(cosigner, cfg.logs, state_path).close()  # the state starts here, and only here
        os.replace(tmp, config)
    except BaseException:
        for p in made:
            for q in (p, p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm")):
                q.unlink(missing_ok=True)
        raise
    return cosigner


def load_cosigner(path: Path, name: str) -> Cosigner:
    """The witness key at ``path``, refused when others may read it or its name is not ``name``."""
    text = read_private(path, "witness key", "run 'sealtrail witness init'")
    try:
        cosigner = Cosigner.from_skey(text)
    except KeyFileError as exc:
        raise KeyFileError(f"{path}: {exc}") from exc
    if cosigner.name != name:
        raise KeyFileError(f"witness key {path} is named {cosigner.name!r}, the config says {name!r}")
    return cosigner


def open_witness(config: Path) -> Witness:
    """The witness ``config`` describes, its state file required (``WitnessStateError`` if gone)."""
    cfg = load_config(config)
    return Witness(load_cosigner(cfg.key, cfg.name), cfg.logs, cfg.state, create=False)


def create_witness_app(witness: Witness) -> Starlette:
    """The witness's HTTP face; blocking work runs in the thread pool, never on the event loop."""
    from starlette.concurrency import run_in_threadpool

    async def add_checkpoint(request: Request) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and not (declared.isascii() and declared.isdigit() and len(declared) < 12):
            return PlainTextResponse("content-length is not a number of bytes\n", status_code=400)
        if declared is not None and int(declared) > MAX_BODY_BYTES:
            return PlainTextResponse(f"request body over {MAX_BODY_BYTES} bytes\n", status_code=413)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return PlainTextResponse(f"request body over {MAX_BODY_BYTES} bytes\n", status_code=413)
        outcome = await run_in_threadpool(witness.add_checkpoint, bytes(body))
        return Response(outcome.body, status_code=outcome.status, media_type=outcome.content_type)

    async def latest(request: Request) -> Response:
        origin = request.path_params["origin"]
        note = await run_in_threadpool(witness.latest, origin)
        if note is None:
            return PlainTextResponse(f"no checkpoint of {origin!r} cosigned\n", status_code=404)
        return PlainTextResponse(note)

    async def evidence(request: Request) -> Response:
        rows = await run_in_threadpool(witness.evidence, request.query_params.get("origin"))
        return JSONResponse({"witness": witness.cosigner.verifier.vkey,
                             "evidence": [e.to_json() for e in rows]})

    async def healthz(request: Request) -> Response:
        del request
        return JSONResponse({"ok": True, "witness": witness.cosigner.verifier.vkey,
                             "logs": sorted(witness.logs)})

    return Starlette(routes=[
        Route("/add-checkpoint", add_checkpoint, methods=["POST"]),
        Route("/logs/{origin:path}/checkpoint", latest, methods=["GET"]),
        Route("/evidence", evidence, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ])


# --------------------------------------------------------------------------- the log's side


@dataclass(frozen=True)
class WitnessList:
    """The witnesses a log asks (``SEALTRAIL_WITNESSES_FILE``), the quorum, and the client's TLS."""

    endpoints: tuple[WitnessEndpoint, ...]
    min_witnesses: int
    client_cert: Path | None
    client_key: Path | None
    ca: Path | None
    timeout_s: float

    @property
    def verifiers(self) -> list[CosignerVerifier]:
        return [e.verifier for e in self.endpoints]


def load_witness_list(path: Path) -> WitnessList:
    """Read the log's witness list (TOML):

        min_witnesses = 1              # N: cosignatures a checkpoint needs to count as witnessed
        client_cert = "log.pem"        # the log's client certificate and key for mutual TLS
        client_key = "log.key"
        ca = "witness-ca.pem"          # CA the witnesses' server certificates chain to
        timeout_s = 5

        [[witness]]                    # M of them
        url = "https://audit.bank.example:8444"
        vkey = "audit.bank.example/witness+1a2b3c4d+BA..."
    """
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read witness list {path}: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"witness list {path} is not TOML: {exc}") from exc
    unknown = set(doc) - {"min_witnesses", "client_cert", "client_key", "ca", "timeout_s", "witness"}
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(sorted(unknown))}")
    items = doc.get("witness", [])
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{path}: at least one [[witness]] is needed")
    endpoints: list[WitnessEndpoint] = []
    for i, w in enumerate(items):
        if not isinstance(w, dict) or not isinstance(w.get("url"), str) or not isinstance(w.get("vkey"), str):
            raise ConfigError(f"{path}: witness[{i}] needs url and vkey strings")
        if not w["url"].startswith(("https://", "http://")):
            raise ConfigError(f"{path}: witness[{i}].url {w['url']!r} is not an http(s) URL")
        try:
            endpoints.append(WitnessEndpoint(w["url"], CosignerVerifier.from_vkey(w["vkey"])))
        except KeyFileError as exc:
            raise ConfigError(f"{path}: witness[{i}].vkey: {exc}") from exc
    if len({e.verifier for e in endpoints}) != len(endpoints):
        raise ConfigError(f"{path}: a witness key is listed twice")
    n = doc.get("min_witnesses", 1)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= len(endpoints):
        raise ConfigError(f"{path}: min_witnesses must be an integer from 1 to {len(endpoints)}, not {n!r}")
    timeout = doc.get("timeout_s", 5)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 0 < timeout <= 300:
        raise ConfigError(f"{path}: timeout_s must be a number of seconds in (0, 300]")

    def file(key: str) -> Path | None:
        v = doc.get(key)
        if v is None:
            return None
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{path}: {key} must be a path")
        return path.parent / v

    cert, key = file("client_cert"), file("client_key")
    if (cert is None) != (key is None):
        raise ConfigError(f"{path}: client_cert and client_key go together")
    return WitnessList(tuple(endpoints), n, cert, key, file("ca"), float(timeout))


@contextmanager
def http_post(wl: WitnessList) -> Iterator[Callable[[str, bytes], tuple[int, str, bytes]]]:
    """A ``ledger.cosign.Post`` over httpx with the list's mutual TLS, keep-alive while the block
    runs; the connections are closed on leaving it (a witness shutting down waits for them)."""
    import ssl

    import httpx

    ctx = ssl.create_default_context(cafile=str(wl.ca) if wl.ca else None)
    if wl.client_cert is not None and wl.client_key is not None:
        ctx.load_cert_chain(str(wl.client_cert), str(wl.client_key))

    with httpx.Client(verify=ctx, timeout=wl.timeout_s) as client:
        def post(url: str, body: bytes) -> tuple[int, str, bytes]:
            r = client.post(url, content=body, headers={"content-type": "text/plain"})
            return r.status_code, r.headers.get("content-type", ""), r.content

        yield post
