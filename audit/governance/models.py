"""The model registry as ledger records: a model scores only once a ``model.registered`` record
names its SHA-256 (the SHA-256 of ``weights.npz``, the identity decision records carry).

The record (body ``sealtrail.model.registered/1``) keeps the whole model card, so an examiner
sees what was trained on what, with which metrics, and who put it into service. Registering
is idempotent per SHA-256: the same model with the same card returns the first registration
and writes nothing; the same SHA-256 with a different card is refused (two conflicting
descriptions of one model must not both stand), except a card that only adds the precision bounds
measured since (``score_precision``, ``inference.precision``): the first registration stands and
is returned. The "active" model is the latest registered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import DBAPIError

from audit.decide.principal import Principal
from audit.errors import ModelConflictError, ModelRegistryError, UnregisteredModelError
from inference.backends import available_backends
from inference.model import ModelFiles
from inference.precision import SECTION as PRECISION_SECTION
from ledger import LedgerUnavailableError, Receipt, Record, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes

__all__ = [
    "MODEL_REGISTERED", "MODEL_SCHEMA", "RegisteredModel", "active_model", "register_model",
    "registered_models", "require_registered"
]

MODEL_REGISTERED = "model.registered"
MODEL_SCHEMA = "sealtrail.model.registered/1"


@dataclass(frozen=True)
class RegisteredModel:
    seq: int
    recorded_at: str
    model_sha256: str
    name: str
    version: str  # the card's "version" if it has one, else the first 12 hex of the SHA-256
    backends: tuple[str, ...]  # backends that could run it where it was registered
    card: Mapping[str, Any]
    subject: str  # who registered it
    fingerprint_sha256: str


def _of(seq: int, env: Mapping[str, Any]) -> RegisteredModel:
    b = env["record"]
    return RegisteredModel(seq, str(env["recorded_at"]), str(b["model_sha256"]), str(b["name"]),
                           str(b["version"]), tuple(b["backends"]), b["card"],
                           str(b["principal"]["subject"]), str(b["principal"]["fingerprint_sha256"]))


def _read(conn: Connection, below: int | None = None) -> list[RegisteredModel]:
    e = store.entries
    q = select(e.c.seq, e.c.record).where(e.c.kind == MODEL_REGISTERED)
    if below is not None:
        q = q.where(e.c.seq < below)
    return [_of(int(seq), orjson.loads(bytes(rec))) for seq, rec in conn.execute(q.order_by(e.c.seq))]


def registered_models(engine: Engine) -> list[RegisteredModel]:
    """Every registered model, oldest first."""
    try:
        with engine.connect() as conn:
            return _read(conn)
    except DBAPIError as exc:
        raise LedgerUnavailableError(f"cannot read model records: {exc.orig}") from exc


def active_model(engine: Engine) -> RegisteredModel | None:
    """The latest registered model (None if none is)."""
    models = registered_models(engine)
    return models[-1] if models else None


def require_registered(engine: Engine, model_sha256: str) -> RegisteredModel:
    """The registration of ``model_sha256``; ``UnregisteredModelError`` if there is none.
    The service calls this before a backend may score."""
    for m in registered_models(engine):
        if m.model_sha256 == model_sha256:
            return m
    raise UnregisteredModelError(f"model {model_sha256} is not registered; register it "
                                 "(model.registered record) before it may score")


def _same_card(registered: Mapping[str, Any], card: Mapping[str, Any]) -> bool:
    """Whether ``card`` describes the model as its registration did: the same card, or that card
    with the precision bounds measured since (``inference.precision``, a section it lacked) added."""
    if dict(registered) == dict(card):
        return True
    return (PRECISION_SECTION not in registered and PRECISION_SECTION in card
            and dict(registered) == {k: v for k, v in card.items() if k != PRECISION_SECTION})


def _existing(models: Sequence[RegisteredModel], sha: str, card: Mapping[str, Any]) -> RegisteredModel | None:
    for m in models:
        if m.model_sha256 == sha:
            if not _same_card(m.card, card):
                raise ModelConflictError(f"model {sha} was registered at seq {m.seq} with a "
                                         "different card; the first registration stands")
            return m
    return None


def register_model(ledger: Ledger, files: ModelFiles, principal: Principal, *,
                   backends: Sequence[str] | None = None,
                   probe: Callable[[], dict[str, str | None]] = available_backends) -> RegisteredModel:
    """Record ``files`` (checked against its card by ``ModelFiles.open``) as registered.

    Idempotent: an already registered SHA-256 with the same card returns that registration and
    writes nothing. ``backends`` defaults to those ``probe`` finds usable here."""
    sha, card = files.model_sha256, files.card
    found = _existing(registered_models(ledger.engine), sha, card)
    if found is not None:
        return found
    names = sorted(backends if backends is not None else (n for n, why in probe().items() if why is None))
    body = {"schema": MODEL_SCHEMA, "model_sha256": sha,
            "name": str(card.get("name", files.directory.name)),
            "version": str(card.get("version", sha[:12])), "backends": names, "card": card,
            "principal": principal.to_json()}

    def under_lock(conn: Connection, receipts: list[Receipt]) -> None:
        if _existing(_read(conn, below=receipts[0].seq), sha, card) is not None:
            raise _AlreadyThere  # a concurrent registration won; return it below

    record = Record.from_canonical_body(MODEL_REGISTERED, canonical_bytes(body))
    try:
        (receipt,) = ledger.append_many([record], alongside=under_lock)
    except _AlreadyThere:
        return require_registered(ledger.engine, sha)
    return _of(receipt.seq, {"recorded_at": receipt.recorded_at, "record": body})


class _AlreadyThere(ModelRegistryError):
    pass
