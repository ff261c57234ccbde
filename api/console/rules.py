"""The console's rule governance pages: rulesets and their status, propose (compile errors
inline), approve (four-eyes: the button is not shown to the proposer, the server refuses it
anyway), activate, each ruleset's test cases re-run with pass/fail, and how each rule performs
once its alerts are worked.

Every step calls ``audit.governance.service`` as ``/v1/rulesets`` does, under the same operations of
the role matrix; the page only decides which buttons a caller is shown. The performance tables are
``audit.cases.performance``'s rows, as ``/v1/performance/rules`` answers them, shown to the roles of
``performance.read`` only (an admin sees the rulesets, not how their alerts were closed); the CSV
link is that endpoint's.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from api.access import may
from api.auth import Caller
from api.console.forms import read_form
from api.console.render import page_caller, render
from api.console.rules_data import (
    CaseRun,
    approval,
    compile_errors,
    run_cases,
    shipped_cases,
)
from api.deps import RuntimeDep
from api.problems import Problem
from api.routes.rulesets import MAX_SOURCE
from audit.cases.performance import Performance, rule_performance
from audit.decide.runtime import Runtime
from audit.errors import CasesFailedError, DuplicateRulesetError, RulesetRefusedError
from audit.governance import service as gov
from wasm_rules import RuleError

__all__ = ["CSV_LINKS", "router", "ruleset_url"]

router = APIRouter(prefix="/console")
MAX_COMMENT = 10_000
_HEX64 = re.compile(r"[0-9a-f]{64}")
CSV_LINKS = {"rules": "/v1/performance/rules?format=csv", "models": "/v1/performance/models?format=csv"}


def ruleset_url(ruleset: str) -> str:
    """The console page of a ruleset (its id holds '@' and a free-form version: encoded)."""
    return f"/console/rules/{quote(ruleset, safe='')}"


def _comment(form: dict[str, str]) -> str | None:
    text = form.get("comment", "").strip()
    if len(text) > MAX_COMMENT:
        raise Problem(422, "invalid_request", f"comment over {MAX_COMMENT:,} characters",
                      [{"field": "comment", "message": "too long"}])
    return text or None


def _module(form: dict[str, str]) -> str | None:
    sha = form.get("module_sha256", "").strip()
    if sha and not _HEX64.fullmatch(sha):
        raise Problem(422, "invalid_request", "module_sha256 is not 64 lower-case hex digits",
                      [{"field": "module_sha256", "message": "not a SHA-256"}])
    return sha or None


def _performance(rt: Runtime, caller: Caller) -> list[Performance] | None:
    """Every rule's row (by rule, then ruleset), or None for a caller who may not read them."""
    return rule_performance(rt.engine) if may("performance.read", caller.roles) else None


@router.get("/rules")
def rules_list(request: Request, rt: RuntimeDep) -> Response:
    caller = page_caller(request, "rulesets.list")
    views = rt.governance.list()
    return render(request, "rules.html", caller, rulesets=views, url=ruleset_url,
                  performance=_performance(rt, caller), csv=CSV_LINKS)


def _prefill(rt: Runtime) -> tuple[str, str]:
    """(source, where it came from): the active ruleset's recorded TOML, else the shipped pack."""
    active = rt.governance.active()
    if active is not None:
        source = rt.governance.proposal(active.id).get("source")
        if isinstance(source, str) and source:
            return source, (f"the source of the active ruleset {active.id}, as recorded in the ledger "
                            f"(entry {active.proposed.seq}); give it a new version before proposing it")
    return gov.DEFAULT_PACK.read_text(encoding="utf-8"), (
        f"the shipped pack wasm_rules/packs/{gov.DEFAULT_PACK.name} (no active ruleset's source could be "
        "read from the ledger)")


@router.get("/rules/new")
def rules_new(request: Request, rt: RuntimeDep) -> Response:
    caller = page_caller(request, "rulesets.propose")
    source, origin = _prefill(rt)
    return render(request, "propose.html", caller, source=source, origin=origin, cases="", comment="",
                  errors=[], problem=None)


@router.post("/rules")
async def rules_propose(request: Request, rt: RuntimeDep) -> Response:
    caller = page_caller(request, "rulesets.propose")
    form = await read_form(request)
    source, cases = form.get("source", ""), form.get("cases", "")
    comment = form.get("comment", "")

    def again(status: int, problem: str, errors: list[dict[str, object]]) -> Response:
        return render(request, "propose.html", caller, status, source=source, origin=None, cases=cases,
                      comment=comment, errors=errors, problem=problem)

    if not source.strip():
        return again(422, "The ruleset source is empty.",
                     [{"rule": None, "line": None, "where": "source", "column": None,
                       "message": "paste or load a TOML"}])
    if len(source.encode()) > MAX_SOURCE:
        return again(422, f"The source is over {MAX_SOURCE:,} bytes.", [])
    try:
        view = await run_in_threadpool(rt.governance.propose, source, caller.principal, _comment(form),
                                       cases=cases if cases.strip() else None)
    except CasesFailedError as exc:
        return again(422, f"{len(exc.failures)} test case(s) fail; nothing was recorded.",
                     compile_errors(exc, source))
    except RulesetRefusedError as exc:
        return again(422, "The ruleset was refused; nothing was recorded.", compile_errors(exc, source))
    except DuplicateRulesetError as exc:
        return again(409, "This id and version were proposed before; nothing was recorded.",
                     compile_errors(exc, source))
    return RedirectResponse(ruleset_url(view.id), status_code=303)


def _show(request: Request, rt: Runtime, ruleset: str, status: int = 200, *, cases_text: str | None = None,
          run: CaseRun | None = None, cases_error: str | None = None) -> Response:
    caller = page_caller(request, "rulesets.list")
    view = rt.governance.get(ruleset)
    body = rt.governance.proposal(view.id)
    shipped = shipped_cases(view)
    if cases_text is None:
        cases_text = shipped[1] if shipped is not None else ""
    ok = approval(caller, view, may("rulesets.approve", caller.roles))
    can_activate = (may("rulesets.activate", caller.roles) and view.status in ("approved", "retired")
                    and (view.approved is not None or view.bootstrapped))
    rows = _performance(rt, caller)
    performance = None if rows is None else {p.key: p for p in rows if p.group == view.id}
    return render(request, "ruleset.html", caller, status, view=view, body=body, url=ruleset_url(view.id),
                  approval=ok, can_activate=can_activate, shipped=shipped, cases_text=cases_text, run=run,
                  cases_error=cases_error, performance=performance, csv=CSV_LINKS)


@router.get("/rules/{ruleset:path}")
def rules_show(request: Request, rt: RuntimeDep, ruleset: str) -> Response:
    return _show(request, rt, ruleset)


@router.post("/rules/{ruleset:path}/approve")
async def rules_approve(request: Request, rt: RuntimeDep, ruleset: str) -> Response:
    caller = page_caller(request, "rulesets.approve")
    form = await read_form(request)
    await run_in_threadpool(rt.governance.approve, ruleset, caller.principal, _comment(form),
                            module_sha256=_module(form))
    return RedirectResponse(ruleset_url(ruleset), status_code=303)


@router.post("/rules/{ruleset:path}/activate")
async def rules_activate(request: Request, rt: RuntimeDep, ruleset: str) -> Response:
    caller = page_caller(request, "rulesets.activate")
    form = await read_form(request)
    await run_in_threadpool(rt.governance.activate, ruleset, caller.principal, _comment(form),
                            module_sha256=_module(form))
    await run_in_threadpool(rt.reload_rules)
    return RedirectResponse(ruleset_url(ruleset), status_code=303)


@router.post("/rules/{ruleset:path}/cases")
async def rules_cases(request: Request, rt: RuntimeDep, ruleset: str) -> Response:
    """Run pasted cases on this ruleset's recorded module; shows the results, records nothing."""
    page_caller(request, "rulesets.list")
    form = await read_form(request)
    text = form.get("cases", "")
    view = await run_in_threadpool(rt.governance.get, ruleset)
    module = await run_in_threadpool(rt.governance.module_bytes, ruleset)
    recorded = None if view.cases is None else str(view.cases.get("sha256"))
    try:
        run = await run_in_threadpool(run_cases, module, text, recorded)
    except RuleError as exc:
        message = str(exc)
        return await run_in_threadpool(lambda: _show(request, rt, ruleset, 422, cases_text=text,
                                                     cases_error=message))
    return await run_in_threadpool(lambda: _show(request, rt, ruleset, cases_text=text, run=run))
