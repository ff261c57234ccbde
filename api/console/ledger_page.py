"""The ledger health page (``GET /console/ledger``) and its "verify now" action.

Shows the tree size, the newest signed checkpoint (its note as stored), how long ago it was
signed and how many entries no checkpoint covers yet, and the verification key. "Verify now"
(``POST /console/ledger/verify``, ``ledger.verify``) runs ``api.ops.verify`` exactly as
``POST /v1/ledger/verify`` does (the pinned key from settings, else the local key) and shows
what was checked or the first damage found. The clock is this module's ``clock``.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse

from api import ops
from api.auth import Caller
from api.console.render import page_caller, render
from api.problems import Problem
from audit.decide.runtime import Runtime
from ledger.checkpoint import SignedCheckpoint

__all__ = ["LedgerHealth", "VerifyOutcome", "clock", "ledger_health", "ledger_page", "router", "since_text",
           "verify_now"]

router = APIRouter(prefix="/console")


def _utc_now() -> datetime:
    return datetime.now(UTC)


clock: Callable[[], datetime] = _utc_now  # the page's clock; tests replace it


@dataclass(frozen=True)
class LedgerHealth:
    """What the page shows about the log, read at one moment."""

    origin: str
    size: int
    checkpoint: SignedCheckpoint | None
    signed_at: datetime | None  # when the newest checkpoint was signed
    age: timedelta | None  # now - signed_at
    unsealed: int  # entries after the newest checkpoint: no signature covers them yet
    overdue: bool  # unsealed entries older than the checkpoint policy allows
    active_vkey: str
    trusted_key: str | None  # the key pinned in settings, if any
    every_entries: int
    every_seconds: float

    @property
    def root_b64(self) -> str:
        return "" if self.checkpoint is None else base64.b64encode(self.checkpoint.checkpoint.root).decode()

    @property
    def root_hex(self) -> str:
        return "" if self.checkpoint is None else self.checkpoint.checkpoint.root.hex()


@dataclass(frozen=True)
class VerifyOutcome:
    """The result of "verify now": the report's JSON, or the failure's kind, message and seq."""

    ok: bool
    report: dict[str, Any]


def since_text(age: timedelta) -> str:
    """A duration for people, to the second below an hour ("4 min 2 s", "3 h 5 min", "2 d 1 h")."""
    s = int(age.total_seconds())
    if s < 0:
        return "in the future (this server's clock is behind the ledger's)"
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def ledger_health(rt: Runtime, now: datetime) -> LedgerHealth:
    """The log's size, newest checkpoint and its age at ``now``."""
    size, signed_us = rt.ledger_state()
    latest = rt.ledger.latest_checkpoint()
    signed_at = None if signed_us is None else datetime.fromtimestamp(signed_us / 1e6, UTC)
    age = None if signed_at is None else now - signed_at
    covered = 0 if latest is None else latest.checkpoint.size
    unsealed = max(size - covered, 0)
    policy = rt.ledger.policy
    overdue = unsealed > 0 and (unsealed >= policy.every_entries or age is None
                                or age.total_seconds() > policy.every_seconds)
    s = rt.settings
    return LedgerHealth(rt.ledger.origin, size, latest, signed_at, age, unsealed, overdue,
                        rt.ledger.active_vkey, s.trusted_key, policy.every_entries, policy.every_seconds)


_verifying = threading.Lock()  # one full verification at a time per process: each reads the whole ledger


async def verify_now(rt: Runtime) -> VerifyOutcome:
    """``POST /v1/ledger/verify``'s work, on the threadpool: every leaf, chain, node and signature.
    A second click while one runs is refused (409), so clicks cannot pile up full-ledger scans."""
    if not _verifying.acquire(blocking=False):
        raise Problem(409, "verify_running", "a verification of the whole ledger is already running; "
                                             "try again when it has finished")
    try:
        doc = await run_in_threadpool(ops.verify_now, rt.settings)
    finally:
        _verifying.release()
    if doc["verified"]:
        return VerifyOutcome(True, doc)
    return VerifyOutcome(False, {**doc, "seq": doc.get("seq"), "detail": doc["message"]})


async def _page(request: Request, caller: Caller, result: VerifyOutcome | None) -> HTMLResponse:
    rt: Runtime = request.app.state.runtime
    health = await run_in_threadpool(ledger_health, rt, clock())
    return render(request, "ledger.html", caller, health=health, result=result, since_text=since_text)


@router.get("/ledger")
async def ledger_page(request: Request) -> HTMLResponse:
    """Size, the newest checkpoint and its age, unsealed entries, the key; "verify now" if allowed."""
    return await _page(request, page_caller(request, "ledger.checkpoint"), None)


@router.post("/ledger/verify")
async def verify_page(request: Request) -> HTMLResponse:
    """Verify the whole ledger now and show the result on the ledger page (403 without ledger.verify)."""
    caller = page_caller(request, "ledger.verify")
    rt: Runtime = request.app.state.runtime
    result = await verify_now(rt)
    return await _page(request, caller, result)
