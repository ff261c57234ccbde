"""What every ``sealtrail`` command shares: output (human text, or one JSON object with
``--json``), the options backed by ``Settings``, and the one place errors become exit codes.

The contract (docs/cli.md): exit 0 success or verified; 1 a verification failure or a refused
input; 2 a usage or configuration error. With ``--json`` a command prints exactly one JSON
object on stdout, ``"ok": true`` or ``"ok": false``, on success and on failure alike; errors
also go to stderr as one line. An error nobody foresaw is an *internal error*: exit 2, one line
naming an incident id and the file its traceback was written to, never a traceback on screen.

Nothing heavy is imported here (only typer, rich, orjson and the settings class): every
command module imports this one, and ``sealtrail --help`` should not load the database layer.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import orjson
import typer
from rich.console import Console
from typer.core import TyperGroup

from api.config import Settings

if TYPE_CHECKING:
    from sqlalchemy import Engine

__all__ = ["FORMATS", "CliError", "ContractGroup", "DbOpt", "Failure", "JsonOpt", "KeysOpt", "classify",
           "emit", "emit_failed", "engine", "env_note", "err", "fail", "out", "parse_time",
           "read_message_file", "setting_default", "setting_option", "settings", "setup_errors"]

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
ENV_PREFIX = "SEALTRAIL_"

try:  # typer 0.2x vendors click, and click's usage errors with it
    from typer._click.exceptions import ClickException
except ImportError:  # an older typer, on click itself
    from click.exceptions import ClickException  # type: ignore[assignment]


# --------------------------------------------------------------------------- options


def setting_default(name: str) -> str:
    """How ``--help`` shows the default of the ``Settings`` field ``name``."""
    info = Settings.model_fields[name]
    value = info.get_default(call_default_factory=True)
    if value is None or value == []:
        return "none"
    return f"./{value}" if isinstance(value, Path) and not value.is_absolute() else str(value)


def env_note(var: str) -> str:
    """``[env var: VAR]`` for a help text (escaped: the help is Rich markup, where it is a tag)."""
    return f"\\[env var: {var}]"


def setting_option(name: str, *decls: str, help: str, envvar: bool = True, **kw: Any) -> Any:
    """A ``typer.Option`` for the ``Settings`` field ``name``: ``--help`` shows its environment
    variable and its default, both taken from ``Settings``, so the two never disagree.

    ``envvar=False`` only shows the variable without letting click read it (a list, which
    ``Settings`` reads as JSON and click would split on spaces); ``Settings`` reads it then."""
    var = ENV_PREFIX + name.upper()
    if envvar:
        kw |= {"envvar": var, "show_envvar": True}
    else:
        help = f"{help} {env_note(var)}"
    return typer.Option(*decls, help=help, show_default=setting_default(name), **kw)


JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON object (with \"ok\") on stdout")]
DbOpt = Annotated[str | None, setting_option("db", "--db", help="ledger database URL (SQLAlchemy)")]
KeysOpt = Annotated[Path | None, setting_option("keys", "--keys", help="directory of signing.key (0600)")]


def settings(db: str | None, keys: Path | None, **more: Any) -> Settings:
    """``Settings`` from the environment, with the options given on the command line on top."""
    overrides = {k: v for k, v in {"db": db, "keys": keys, **more}.items() if v is not None}
    return Settings(**overrides)


# --format values: inference.messages.FORMATS (a test holds them equal; not imported, so --help stays light)
FORMATS = ("auto", "mt", "mt103", "mt202", "pacs008", "pacs009", "pacs004", "pain001", "iso20022", "json")
FORMAT_HELP = " | ".join(FORMATS)


def engine(db: str | None, keys: Path | None) -> Engine:
    """The ledger database of ``--db``/``--keys`` for reading, its schema checked current (a
    database of another revision is a configuration error, exit 2)."""
    from api import ops

    eng = ops.engine_for(settings(db, keys))
    try:
        ops.require_schema(eng)
    except Exception:
        eng.dispose()
        raise
    return eng


def read_message_file(path: Path) -> bytes:
    """The bytes of a message file, read no further than one byte past ``MAX_FILE_BYTES`` (so
    ``parse_messages`` refuses a larger file by its size without holding it in memory)."""
    from inference.messages import MAX_FILE_BYTES

    with path.open("rb") as f:
        return f.read(MAX_FILE_BYTES + 1)


def parse_time(text: str | None, name: str) -> datetime | None:
    """A time option, parsed exactly as the console's forms parse times (ISO 8601; one without
    an offset is UTC). ``QueryError`` naming ``name`` if it is no time."""
    if text is None:
        return None
    # imported here: api.console loads the whole console (~0.8 s) and only commands with a
    # time option need its parser
    from api.console.forms import form_time

    return form_time(text, name)


# --------------------------------------------------------------------------- output


@dataclass
class _Run:
    """One invocation: did the caller ask for JSON, and has the JSON object been written."""

    as_json: bool = False
    written: bool = False


_run = _Run()


def _write_json(doc: dict[str, Any], *, indent: bool) -> None:
    if _run.written:  # one object per run, whatever happens after the first
        return
    _run.written = True
    option = orjson.OPT_INDENT_2 if indent else 0
    sys.stdout.write(orjson.dumps(doc, option=option | orjson.OPT_NON_STR_KEYS).decode() + "\n")
    sys.stdout.flush()


def emit(doc: dict[str, Any], as_json: bool, human: Callable[[], None]) -> None:
    """Print a result: ``human()``, or ``doc`` as JSON with ``"ok"`` (true unless it says)."""
    if as_json:
        _write_json({"ok": True, **doc}, indent=True)
    else:
        human()


def emit_failed(doc: dict[str, Any], as_json: bool, human: Callable[[], None], code: int = 1) -> NoReturn:
    """Print a result that is a failure (refused messages, failed cases, a bundle that does not
    verify) and exit ``code``: ``human()``, or ``doc`` as JSON (``ok``: false, ``error``,
    ``message``) with the message on stderr too."""
    if as_json:
        _write_json({**doc, "ok": False}, indent=True)
        err.print(f"error: {_one_line(str(doc.get('message', 'failed')))}", markup=False)
    else:
        human()
    raise typer.Exit(code)


# --------------------------------------------------------------------------- errors


class CliError(Exception):
    """A refusal the CLI makes itself (an option value, a file it cannot use): ``code`` is the
    exit code, ``error`` the JSON ``error`` key, ``extra`` more JSON keys (``field``, ...)."""

    def __init__(self, message: str, *, code: int = 1, error: str = "refused",
                 details: Sequence[str] = (), **extra: Any) -> None:
        super().__init__(message)
        self.code, self.error, self.extra, self.details = code, error, extra, tuple(details)


@dataclass(frozen=True)
class Failure:
    """What an error means for the caller: exit code, JSON ``error`` key, message, more keys."""

    code: int
    error: str
    message: str
    extra: dict[str, Any] = field(default_factory=dict)
    details: tuple[str, ...] = ()  # more lines for stderr, after the error line


def setup_errors() -> tuple[type[Exception], ...]:
    """Errors of opening a runtime that are configuration, not input (exit 2)."""
    from audit.errors import GovernanceError, ModelRegistryError, PrincipalError
    from inference.errors import InferenceError
    from wasm_rules import RuleError

    return GovernanceError, ModelRegistryError, InferenceError, RuleError, PrincipalError


def classify(exc: BaseException) -> Failure | None:
    """The contract's reading of a known error (``None``: nobody foresaw it, an internal error).

    Refused input and "does not verify" exit 1; configuration (database, key, model, settings,
    files) exits 2. Commands that know better (a ``RuleError`` while opening the runtime is
    configuration, not input) call ``fail(exc, as_json, code)`` themselves."""
    # imported here: only an error pays for loading every layer's exception tree
    from sqlalchemy.exc import SQLAlchemyError

    from audit.errors import (
        AuditError,
        BundleError,
        ExportUnavailableError,
        GovernanceError,
        ModelRegistryError,
        QueryError,
    )
    from inference.errors import InferenceError
    from inference.messages import MessageError
    from ledger.errors import (
        DamageError,
        EntryNotFoundError,
        LedgerError,
        LegalHoldError,
        RecordError,
        RefusedError,
        VerificationError,
    )
    from wasm_rules import RuleError

    text = str(exc)
    if isinstance(exc, CliError):
        return Failure(exc.code, exc.error, text, exc.extra, exc.details)
    if isinstance(exc, DamageError):
        return Failure(1, exc.kind, text, {"seq": exc.seq})
    if isinstance(exc, BundleError):
        return Failure(1, exc.kind, text, {"failures": [f.to_json() for f in exc.failures]})
    if isinstance(exc, QueryError):
        return Failure(1, type(exc).__name__, text, {"field": exc.field})
    refused = (VerificationError, RecordError, LegalHoldError, EntryNotFoundError, RefusedError, RuleError,
               MessageError)
    if isinstance(exc, refused):
        return Failure(1, type(exc).__name__, text)
    if isinstance(exc, AuditError) and not isinstance(exc, GovernanceError | ModelRegistryError |
                                                       ExportUnavailableError):
        return Failure(1, type(exc).__name__, text)  # a principal, an annotation: refused input
    configuration = (LedgerError, AuditError, InferenceError, SQLAlchemyError, OSError, ValueError)
    if isinstance(exc, configuration):  # ValueError: pydantic's refusal of a setting, among others
        return Failure(2, type(exc).__name__, text)
    return None


def _report(f: Failure) -> NoReturn:
    if _run.as_json:
        _write_json({"ok": False, "error": f.error, "message": f.message, **f.extra}, indent=False)
    err.print(f"error: {_one_line(f.message)}", markup=False)
    for line in f.details:
        err.print(f"  {line}", markup=False)
    raise typer.Exit(f.code)


def _one_line(text: str) -> str:
    """A message on one line (a library's multi-line message joined with "; ")."""
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


def fail(exc: BaseException, as_json: bool = False, code: int | None = None) -> NoReturn:
    """Stop the command with ``exc`` as the contract says (``code`` overrides the exit code)."""
    _run.as_json = _run.as_json or as_json
    try:
        known = classify(exc)
    except Exception:  # a layer that cannot even be imported: say so, as an internal error
        known = None
    f = known or _internal(exc)
    if code is not None:
        f = Failure(code, f.error, f.message, f.extra, f.details)
    _report(f)


def _internal(exc: BaseException) -> Failure:
    """An error nobody foresaw: a short incident id, and the traceback in a private file."""
    incident = uuid.uuid4().hex[:12]
    message = f"internal error ({type(exc).__name__}: {exc}); incident {incident}"
    extra: dict[str, Any] = {"incident": incident, "exception": type(exc).__name__}
    try:
        fd, name = tempfile.mkstemp(prefix=f"sealtrail-incident-{incident}-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp: mode 0600 (it may name accounts)
            f.write(f"sealtrail {' '.join(sys.argv[1:])}\n")
            f.write("".join(traceback.format_exception(exc)))
        message += f", traceback in {name}; please report it"
        extra["traceback_file"] = name
    except OSError:
        message += "; please report it"
    return Failure(2, "internal", message, extra)


class ContractGroup(TyperGroup):
    """The root command group: runs a command and keeps the contract whatever happens.

    Usage errors (click's: no such option, a bad value, a missing argument) exit 2 and, with
    ``--json``, print ``{"ok": false, "error": "usage", ...}``; known errors exit as ``classify``
    says; anything else is an internal error. ``--json`` is read from the arguments before
    parsing, so a usage error is answered in JSON too."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             windows_expand_args: bool = True, **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        _run.as_json, _run.written = "--json" in argv, False
        try:
            try:
                rv = super().main(argv, prog_name, complete_var, standalone_mode=False,
                                  windows_expand_args=windows_expand_args, **extra)
            except ClickException as exc:  # a usage error
                _usage(exc)
            except typer.Abort:
                fail(CliError("aborted", code=1, error="aborted"))
            except Exception as exc:
                fail(exc)
        except typer.Exit as exc:
            rv = exc.exit_code
        code = rv if isinstance(rv, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def _usage(exc: ClickException) -> NoReturn:
    if _run.as_json:
        doc: dict[str, Any] = {"ok": False, "error": "usage", "message": exc.format_message()}
        param = getattr(exc, "param", None)
        if param is not None and getattr(param, "opts", None):
            doc["field"] = param.opts[0]
        _write_json(doc, indent=False)
    from typer import rich_utils

    rich_utils.rich_format_error(exc)
    raise typer.Exit(exc.exit_code)
