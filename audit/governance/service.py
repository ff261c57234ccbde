"""Rule governance as ledger records (DESIGN.md invariant 8): proposed -> approved -> active.

Each step is a sealed record (``ruleset.proposed``, ``ruleset.approved``, ``ruleset.activated``;
``ruleset.bootstrapped`` for the operator's first install of the shipped pack, which says
plainly that nobody approved it). The state is derived from those records, never kept in a
mutable table. A proposal carries the TOML source and the compiled module itself, so replay
years later runs exactly the bytes that decided. Approval needs a principal other than the
proposer (four-eyes: not the same certificate, not the same subject DN as RFC 4518 compares
names, not the same public key: ``audit.governance.state.same_person``); only
an approved (or bootstrapped) module can become active, and scoring loads only the active one.

Each transition is checked twice: before compiling (a clean refusal, nothing computed), and
again inside the sealing transaction under the ledger's sequencer lock, on the log as it was
just before the new record (``append_many(alongside=...)``, whose failure writes nothing),
so two replicas racing to approve or activate cannot both succeed.

This module is the service (and the one read of the records); the pure derivation of state
lives in ``audit.governance.state``, building a proposal in ``audit.governance.proposal``, and
the refusals in ``audit.errors``. Everything public is re-exported from here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, select
from sqlalchemy.exc import DBAPIError

import wasm_rules
from audit.decide.principal import Principal
from audit.decide.types import ActiveRules
from audit.errors import (
    DuplicateRulesetError,
    FourEyesError,
    GovernanceRecordError,
    ModuleIntegrityError,
    NoActiveRulesetError,
    StateError,
    UnknownRulesetError,
)
from audit.governance.proposal import build_proposal, refused
from audit.governance.state import (
    ACTIVATED,
    APPROVED,
    BOOTSTRAPPED,
    KINDS,
    PROPOSED,
    Ledgered,
    RulesetView,
    Step,
    derive,
    known,
    same_person,
)
from ledger import LedgerUnavailableError, Receipt, Record, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from wasm_rules import RuleError, Sandbox, parse_ruleset

__all__ = [
    "ACTIVATED", "APPROVED", "BOOTSTRAPPED", "DEFAULT_PACK", "KINDS", "PROPOSED", "Governance",
    "RulesetView", "Step", "recorded_principal", "same_person"
]

DEFAULT_PACK = Path(wasm_rules.__file__).parent / "packs" / "aml_core.toml"
BOOTSTRAP_NOTE = ("operator install of the shipped default pack at init; NOT four-eyes approved "
                  "(no second principal reviewed it)")


def recorded_principal(principal: Principal) -> dict[str, Any]:
    """A principal as governance records keep it: ``Principal.to_json()`` and, for a certificate,
    ``spki_sha256`` (SHA-256 of its SubjectPublicKeyInfo), so four-eyes also knows one key
    presented under two certificates."""
    out = principal.to_json()
    if principal.spki_sha256:
        out["spki_sha256"] = principal.spki_sha256
    return out


def _read(conn: Connection, below: int | None = None) -> list[tuple[int, dict[str, Any]]]:
    """The governance records (only those before seq ``below``, if given) in seq order."""
    e = store.entries
    q = select(e.c.seq, e.c.record).where(e.c.kind.in_(KINDS))
    if below is not None:
        q = q.where(e.c.seq < below)
    return [(int(seq), orjson.loads(bytes(rec))) for seq, rec in conn.execute(q.order_by(e.c.seq))]


class Governance:
    """Proposes, approves and activates rulesets in one ledger; reads state from its records."""

    def __init__(self, ledger: Ledger, *, sandbox: Sandbox | None = None) -> None:
        self.ledger = ledger
        self._sandbox = sandbox  # runs proposals' cases; a short-lived one when None

    def _rows(self) -> list[tuple[int, dict[str, Any]]]:
        try:
            with self.ledger.engine.connect() as conn:
                return _read(conn)
        except DBAPIError as exc:
            raise LedgerUnavailableError(f"cannot read governance records: {exc.orig}") from exc

    def _state(self) -> Ledgered:
        return derive(self._rows())

    def _append(self, rows: list[tuple[int, dict[str, Any]]], kind: str, body: dict[str, Any],
                check: Callable[[Ledgered], None]) -> RulesetView:
        """Seal one record if ``check`` (which the caller already ran on ``rows``, outside the
        lock) still passes on the log as it is under the sequencer lock; the view of its ruleset.

        The recheck runs as ``alongside``: after the entry is inserted, in the same
        transaction, reading only entries before it; a refusal rolls everything back. It must
        not raise a ``LookupError`` (the ledger reports those as damage), hence our own tree.

        The view answered is derived in memory from ``rows`` and the record just sealed, not
        read back: once the record is durable, nothing that can fail (a read, a lost
        connection) stands between it and the caller's answer, so a sealed step is never
        reported as failed (and retried into a 409)."""
        record = Record.from_canonical_body(kind, canonical_bytes(body))

        def under_lock(conn: Connection, receipts: list[Receipt]) -> None:
            check(derive(_read(conn, below=receipts[0].seq)))

        (receipt,) = self.ledger.append_many([record], alongside=under_lock)
        sealed = {"kind": kind, "recorded_at": receipt.recorded_at, "record": body}
        return derive([*rows, (receipt.seq, sealed)]).views[str(body["id"])]

    def list(self) -> list[RulesetView]:
        """Every ruleset ever proposed, in the order proposed."""
        return list(self._state().views.values())

    def get(self, ruleset: str) -> RulesetView:
        view = self._state().views.get(ruleset)
        if view is None:
            raise UnknownRulesetError(f"no ruleset {ruleset} was ever proposed")
        return view

    def active(self) -> RulesetView | None:
        s = self._state()
        return None if s.active is None else s.views[s.active]

    def propose(self, toml_text: str, principal: Principal, comment: str | None = None, *,
                cases: str | None = None) -> RulesetView:
        """Compile ``toml_text``, run its ``cases`` (JSONL) if given, and record the proposal."""
        try:
            head = parse_ruleset(toml_text)
        except RuleError as exc:
            raise refused(exc) from exc
        rid = f"{head.id}@{head.version}"

        def fresh(s: Ledgered) -> None:
            if rid in s.views:
                raise DuplicateRulesetError(f"ruleset {rid} was already proposed (seq "
                                            f"{s.views[rid].proposed.seq}); give it a new version")
        rows = self._rows()
        fresh(derive(rows))
        built = build_proposal(toml_text, cases, self._sandbox)
        body = {"schema": "sealtrail.ruleset.proposed/1", **built.body,
                "proposer": recorded_principal(principal), "comment": comment}
        return self._append(rows, PROPOSED, body, fresh)

    def approve(self, ruleset: str, principal: Principal, comment: str | None = None, *,
                module_sha256: str | None = None) -> RulesetView:
        """Record a second principal's approval; ``module_sha256``, if given, must be the proposal's."""
        who = recorded_principal(principal)

        def check(s: Ledgered) -> None:
            v = known(s, ruleset, module_sha256)
            if v.bootstrapped:
                raise StateError(f"ruleset {ruleset} was bootstrapped by the operator; approve a "
                                 "proposal of it under a new version instead")
            if v.approved is not None:
                raise StateError(f"ruleset {ruleset} is already approved (seq {v.approved.seq})")
            if same_person(s.proposers[ruleset], who):
                raise FourEyesError(f"{principal.subject} proposed ruleset {ruleset} and cannot "
                                    "approve it: a second principal must (four-eyes)")
        rows = self._rows()
        s = derive(rows)
        check(s)
        return self._append(rows, APPROVED, {"schema": "sealtrail.ruleset.approved/1", "id": ruleset,
                                             "module_sha256": s.views[ruleset].module_sha256,
                                             "approver": who, "comment": comment}, check)

    def activate(self, ruleset: str, principal: Principal, comment: str | None = None, *,
                 module_sha256: str | None = None) -> RulesetView:
        """Make an approved ruleset the one that scores (a retired approved one may return)."""
        def check(s: Ledgered) -> None:
            v = known(s, ruleset, module_sha256)
            if v.approved is None and not v.bootstrapped:
                raise StateError(f"ruleset {ruleset} is not approved; only an approved ruleset "
                                 "can become active")
            if s.active == ruleset:
                raise StateError(f"ruleset {ruleset} is already active")
        rows = self._rows()
        s = derive(rows)
        check(s)
        return self._append(rows, ACTIVATED, {"schema": "sealtrail.ruleset.activated/1", "id": ruleset,
                                              "module_sha256": s.views[ruleset].module_sha256,
                                              "activator": recorded_principal(principal),
                                              "previous_active": s.active, "comment": comment}, check)

    def bootstrap_default(self, pack_path: Path | None = None, *, principal: Principal,
                          cases_path: Path | None = None) -> RulesetView | None:
        """Install the shipped pack as active at init, if no ruleset was ever active; returns
        None (writing nothing) otherwise. Runs the pack's ``<name>_cases.jsonl`` when present."""
        pack = pack_path if pack_path is not None else DEFAULT_PACK
        if cases_path is None:
            beside = pack.with_name(f"{pack.stem}_cases.jsonl")
            cases_path = beside if beside.exists() else None
        rows = self._rows()
        if derive(rows).ever_active:
            return None
        built = build_proposal(pack.read_text(encoding="utf-8"),
                       None if cases_path is None else cases_path.read_text(encoding="utf-8"),
                       self._sandbox)
        rid = str(built.body["id"])

        def first(s: Ledgered) -> None:
            if s.ever_active:
                raise StateError("a ruleset was already active; bootstrap happens only once")
            if rid in s.views:
                raise DuplicateRulesetError(f"ruleset {rid} was already proposed")
        try:
            return self._append(rows, BOOTSTRAPPED, {"schema": "sealtrail.ruleset.bootstrapped/1",
                                                     **built.body, "operator": recorded_principal(principal),
                                                     "four_eyes": False, "note": BOOTSTRAP_NOTE}, first)
        except StateError:
            return None  # another replica bootstrapped meanwhile

    def proposal(self, ruleset: str) -> dict[str, Any]:
        """The body of the ruleset's proposal (or bootstrap) record: its TOML source, description,
        module and cases summary, as sealed; read by the seq its view names."""
        view = self.get(ruleset)
        e = store.entries
        with self.ledger.engine.connect() as conn:
            raw = conn.execute(select(e.c.record).where(e.c.seq == view.proposed.seq)).scalar()
        if raw is None:
            raise GovernanceRecordError(f"ledger entry {view.proposed.seq} ({view.id}) is missing")
        body: dict[str, Any] = orjson.loads(bytes(raw))["record"]
        if body.get("id") != view.id:
            raise GovernanceRecordError(f"ledger entry {view.proposed.seq} is not the proposal of {view.id}")
        return body

    def module_bytes(self, ruleset: str) -> bytes:
        """The compiled module recorded with the proposal, checked against its SHA-256."""
        with self.ledger.engine.connect() as conn:
            for seq, env in _read(conn):
                body = env["record"]
                if env["kind"] in (PROPOSED, BOOTSTRAPPED) and body["id"] == ruleset:
                    try:
                        data = base64.b64decode(body["module"], validate=True)
                    except (binascii.Error, ValueError) as exc:
                        raise ModuleIntegrityError(f"entry {seq}: module is not base64: {exc}") from exc
                    got = hashlib.sha256(data).hexdigest()
                    if got != body["module_sha256"]:
                        raise ModuleIntegrityError(f"entry {seq}: module hashes to {got}, the record "
                                                   f"says {body['module_sha256']}")
                    return data
        raise UnknownRulesetError(f"no ruleset {ruleset} was ever proposed")

    def load_active(self, sandbox: Sandbox) -> ActiveRules:
        """The active module, loaded into ``sandbox`` for the pipeline (start-up, after activate)."""
        view = self.active()
        if view is None:
            raise NoActiveRulesetError("no ruleset is active (bootstrap the default pack or "
                                       "activate an approved one)")
        try:
            module = sandbox.load(self.module_bytes(view.id))
        except RuleError as exc:
            raise ModuleIntegrityError(f"the sandbox refuses the module of {view.id}: {exc}") from exc
        m = module.manifest
        if (m.ruleset_id, m.version) != (view.ruleset_id, view.version):
            module.close()
            raise ModuleIntegrityError(f"module of {view.id} declares {m.ruleset_id}@{m.version}")
        return ActiveRules.of(module)
