"""``sealtrail score FILE...``: offline scoring into the ledger, through the serving pipeline.

The same path as ``POST /v1/decisions/batch``: each file is parsed by the API's own
``parse_submissions`` (a JSON array: one submission, one payload per element), then decided
in batches by the ``DecisionService`` of a ``Runtime``; each batch's decisions are printed once
its commit returns (they are sealed before they are printed).
The recorded principal is the local operator (``Principal.local``: empty fingerprint, SAN
``local:cli``), so a record says plainly that no certificate stood behind it.

All or nothing at the edge: every file is read and parsed before the runtime opens, so one
refused message (exit 1, naming the file, the message index and the field) decides nothing. The
refusal itself is sealed (a ``refusal`` record whose payload is the file's bytes: a message
refused, an empty file, one whose format cannot be detected; a file over the size cap is sealed
unread, without payload) and its ``trace_id`` printed; where the ledger cannot be opened or
written, the file is refused all the same, without ``trace_id``, saying why.
Exit 2: missing or unmigrated database, missing key.

Not all or nothing once deciding starts: each batch is its own commit. If a later batch fails
(the ledger refuses the commit, say), the output still lists every decision sealed before it
(``--json``: ``decisions``, with ``"ok": false``), then the error, how many were sealed, the last
seq, and the first message without a decision (``resume_at``), so that a re-run submits only
what was not decided instead of deciding the sealed payments twice. A payment decided before (the
same idempotency key: its UETR, else its reference, with the same content) is not decided again:
its row is the existing decision, marked ``already_decided`` (``(already decided)`` in the table),
and the summary counts them, so re-running a file after a failure decides only what was missing.

The pipeline's layers are imported in the command body so that ``sealtrail --help`` does not
load them.
"""

from __future__ import annotations

import contextlib
import getpass
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import orjson
import typer

from api.cli.common import (
    FORMAT_HELP,
    FORMATS,
    CliError,
    DbOpt,
    Failure,
    JsonOpt,
    KeysOpt,
    classify,
    emit,
    fail,
    out,
    settings,
    setup_errors,
)

if TYPE_CHECKING:
    from api.config import Settings
    from audit.decide.refusal import Refusal
    from audit.decide.types import Decision, Submission

__all__ = ["FileRefusedError", "decision_row", "read_file", "score"]

BATCH_TIMEOUT_S = 600.0  # offline batches are not held to the interactive queue deadline

class FileRefusedError(Exception):
    """A file none of whose messages may be decided; ``errors`` name ``[index].field``."""

    def __init__(self, path: Path, detail: str, errors: Sequence[dict[str, str]],
                 refusal: Refusal | None = None) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.errors = list(errors)
        self.refusal = refusal  # what to seal (None: refused for what no refusal record covers)


@dataclass(frozen=True)
class ScoredFile:
    path: Path
    submissions: list[Submission]


def read_file(path: Path, fmt: str, principal: dict[str, Any]) -> ScoredFile:
    """Every message of ``path`` as a submission, or ``FileRefusedError`` for the whole file."""
    from audit.decide.refusal import empty_body, refusal_of, too_large, undetected
    from audit.decide.submissions import parse_submissions
    from audit.errors import SubmissionRefusedError
    from inference.messages import MAX_FILE_BYTES, MessageError, detect_format

    with path.open("rb") as f:
        raw = f.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise FileRefusedError(path, f"more than {MAX_FILE_BYTES:,} bytes",
                               [{"field": "file", "message": "too large"}],
                               too_large(None, MAX_FILE_BYTES, fmt=fmt, principal=principal, batch=True,
                                         via=_VIA))
    if not raw.strip():
        raise FileRefusedError(path, "the file is empty", [{"field": "file", "message": "empty"}],
                               empty_body(raw, fmt=fmt, principal=principal, batch=True, via=_VIA,
                                          max_items=None))
    try:
        kind = detect_format(raw) if fmt == "auto" else fmt
    except MessageError as exc:
        raise FileRefusedError(path, str(exc), [{"field": "format", "message": exc.reason}],
                               undetected(exc, raw, principal=principal, batch=True, via=_VIA)) from exc
    batch = not _one_json_object(raw, kind)
    try:
        subs = parse_submissions(raw, kind, principal, batch=batch, max_items=None)
    except SubmissionRefusedError as exc:
        refusal = refusal_of(exc, raw, fmt=kind, principal=principal, batch=batch, via=_VIA, max_items=None)
        raise FileRefusedError(path, str(exc), [f.to_json() for f in exc.faults], refusal) from exc
    return ScoredFile(path, subs)


def _one_json_object(raw: bytes, kind: str) -> bool:
    """A JSON file holding one transaction object (not an array, not ``{"transactions": ...}``)."""
    if kind != "json":
        return False
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False  # parse_submissions names the error
    return isinstance(doc, dict) and set(doc) != {"transactions"}


def decision_row(d: Decision, sub: Submission) -> dict[str, Any]:
    """What ``score`` prints per transaction (``--json``: one element of ``decisions``)."""
    return {"trace_id": d.trace_id, "seq": d.seq, "reference": sub.transaction.reference,
            "decision": d.decision, "score": d.score, "fired": [h.id for h in d.fired],
            "fail_safe": d.fail_safe, "leaf_hash": d.leaf_hash, "recorded_at": d.recorded_at,
            "already_decided": d.replayed,
            "account_risk": None if d.account_risk is None else d.account_risk.to_json(),
            "explanation": None if d.explanation is None else d.explanation.to_json()}


_VIA = "sealtrail score"


def _seal(s: Settings, exc: FileRefusedError) -> tuple[str | None, str]:
    """Seal the refusal of ``exc`` in the ledger of ``s``: its trace id (None where it could not
    be sealed) and a line that says what became of it."""
    if exc.refusal is None:
        return None, "refused; nothing was decided or recorded"
    from api import ops
    from audit.decide.refusal_seal import seal_refusal

    try:
        engine = ops.engine_for(s)
        try:
            ops.require_schema(engine)
            tid = seal_refusal(ops.open_ledger(s, engine), exc.refusal).trace_id
        finally:
            engine.dispose()
    except Exception as err:  # the refusal stands; only its record is missing, and that is said
        return None, f"refused; nothing was decided; the refusal could not be sealed: {err}"
    return tid, f"refused; nothing was decided; the refusal is sealed as trace {tid}"


def _refused(exc: FileRefusedError, trace_id: str | None = None,
             said: str = "refused; nothing was decided or recorded") -> NoReturn:
    extra = {} if trace_id is None else {"trace_id": trace_id}
    raise CliError(str(exc), code=1, error="message_refused", file=str(exc.path), errors=exc.errors,
                   details=[said, *(f"{e['field']}: {e['message']}" for e in exc.errors[:20])],
                   **extra) from exc


def score(
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, readable=True,
                                                help="payment message files (FIN, pacs.008 XML, JSON)")],
    fmt: Annotated[str, typer.Option("--format",
                                     help=FORMAT_HELP)] = "auto",
    priority: Annotated[str, typer.Option(help="lane: P0 | P1 | P2")] = "P1",
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Decide and seal every transaction in FILE... (offline, as the local operator)."""
    from api import ops
    from audit.decide.principal import Principal
    from audit.decide.runtime import Runtime
    from inference.batcher import Priority
    from wasm_rules import OUTCOMES

    if fmt not in FORMATS:
        raise CliError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}", code=2, error="usage",
                       field="--format")
    try:
        lane = Priority.parse(priority)
    except ValueError as exc:
        raise CliError(f"--priority: {exc}", code=2, error="usage", field="--priority") from exc
    s = settings(db, keys)
    operator = getpass.getuser()
    principal = Principal.local(operator).to_json()
    try:
        parsed = [read_file(p, fmt, principal) for p in files]
    except FileRefusedError as exc:
        _refused(exc, *_seal(s, exc))
    try:
        rt = Runtime.open(s, operator=operator)
    except setup_errors() as exc:
        fail(exc, as_json, code=2)
    sealed = _Sealed(as_json)
    try:
        for f in parsed:
            for i in range(0, len(f.submissions), s.max_batch):
                chunk = f.submissions[i:i + s.max_batch]
                # One chunk is one batch and one commit (the service's max_batch is s.max_batch and
                # a chunk is queued under one lock): it is sealed whole or not at all.
                sealed.in_flight = len(chunk)
                got = rt.service.decide(chunk, lane, timeout_s=BATCH_TIMEOUT_S)
                sealed.add([{"file": str(f.path), "index": i + k, **decision_row(d, sub)}
                            for k, (d, sub) in enumerate(zip(got, chunk, strict=True))])
    except (Exception, KeyboardInterrupt) as exc:
        with contextlib.suppress(Exception):
            rt.close()
        _failed_midway(exc, sealed, parsed, principal, as_json)
    finally:
        rt.close()  # a second call does nothing; a clean stop seals the state (state.snapshot)
    size = ops.ledger_size(s)
    rows = sealed.rows
    counts = Counter(r["decision"] for r in rows)
    outcomes = {o: counts.get(o, 0) for o in OUTCOMES}
    before = sum(1 for r in rows if r["already_decided"])
    doc = {"ok": True, "count": len(rows), "already_decided": before, "files": len(parsed),
           "outcomes": outcomes, "ledger_size": size, "principal": principal, "decisions": rows}
    emit(doc, as_json, lambda: _summary(len(rows), outcomes, len(parsed), size, before))


_HEADER = f"{'seq':>8}  {'trace_id':<36}  {'decision':<8}  {'score':>6}  {'reference':<16}  fired"


class _Sealed:
    """The decisions sealed so far, in order. Without ``--json`` each batch's rows are printed
    (and flushed) as soon as its commit returns, so whatever stops the run later, every sealed
    decision is already on the screen or in the pipe."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.rows: list[dict[str, Any]] = []  # in the order of the files and their messages
        self.in_flight = 0  # messages of the batch being decided (0: none)
        if not as_json:
            out.print(_HEADER, markup=False)

    def add(self, rows: list[dict[str, Any]]) -> None:
        """A batch is sealed: these are its decisions."""
        self.rows += rows
        self.in_flight = 0
        if self.as_json:
            return
        for r in rows:
            sc = "-" if r["score"] is None else f"{r['score']:.4f}"
            fired = ",".join(r["fired"]) or "-"
            if r["fail_safe"]:
                fired += f"  (fail-safe: {r['fail_safe']})"
            if r.get("already_decided"):
                fired += "  (already decided)"
            out.print(f"{r['seq']:>8}  {r['trace_id']:<36}  {r['decision']:<8}  {sc:>6}  "
                      f"{r['reference'] or '-':<16}  {fired}", markup=False)
        out.file.flush()


def _failed_midway(exc: BaseException, sealed: _Sealed, parsed: list[ScoredFile], principal: dict[str, Any],
                   as_json: bool) -> NoReturn:
    """A batch failed after others were sealed: the error, after every sealed decision (listed
    above, or in ``decisions``), with how many were sealed, the last seq and where to resume.
    The exit code is the one the error has anywhere else (a ledger that cannot commit: 2); an
    error nobody foresaw is an internal error with its incident file, as anywhere else."""
    from api.cli.common import _internal  # the contract's own incident file, for the unforeseen
    from ledger.errors import LedgerUnavailableError
    from wasm_rules import OUTCOMES

    known: Failure | None = Failure(1, "aborted", "aborted") if isinstance(exc, KeyboardInterrupt) else None
    if known is None:
        try:
            known = classify(exc)
        except Exception:  # a layer that cannot even be imported: an internal error
            known = None
    failure = known or _internal(exc)
    rows = sealed.rows
    last = rows[-1]["seq"] if rows else None
    # A ledger that refused the commit wrote nothing of the batch (fail-closed); after any
    # other failure the batch in flight may have been sealed without its decisions reaching us.
    in_doubt = sealed.in_flight > 0 and not isinstance(exc, LedgerUnavailableError)
    undecided = sum(len(f.submissions) for f in parsed) - len(rows)
    resume: dict[str, Any] | None = None
    skip = len(rows)  # the sealed decisions are the first messages, in order
    for f in parsed:
        if skip < len(f.submissions):
            resume = {"file": str(f.path), "index": skip}
            break
        skip -= len(f.submissions)
    counts = Counter(r["decision"] for r in rows)
    summary = {"count": len(rows), "last_seq": last, "undecided": undecided, "resume_at": resume,
               "in_doubt": in_doubt, "files": len(parsed),
               "outcomes": {o: counts.get(o, 0) for o in OUTCOMES}, "principal": principal, "decisions": rows}
    where = ("" if not rows else '; each is in "decisions"' if as_json else "; each is listed above")
    lines = [f"{len(rows)} decision(s) were sealed before the failure"
             + ("" if last is None else f", the last at seq {last}") + where]
    before = sum(1 for r in rows if r["already_decided"])
    if before:
        lines.append(f"{before} of them were already decided before this run (not decided again)")
    if resume is not None:
        lines.append(f"{undecided} message(s) from {resume['file']} [{resume['index']}] on have no "
                     "decision: re-submit them (a sealed payment submitted again gets its existing decision)")
    if in_doubt:
        lines.append(f"the failed batch of {sealed.in_flight} message(s) may have been sealed all the same: "
                     "look for its decisions (sealtrail traces query) before re-submitting it")
    raise CliError(failure.message, code=failure.code, error=failure.error,
                   details=[*failure.details, *lines], **{**failure.extra, **summary}) from exc


def _summary(count: int, outcomes: dict[str, int], files: int, size: int, before: int = 0) -> None:
    summary = "  ".join(f"{k} {v}" for k, v in outcomes.items())
    already = f"; {before} of them already decided before (not decided again)" if before else ""
    out.print(f"{count} decided from {files} file(s): {summary}; ledger size {size}{already}", markup=False)
