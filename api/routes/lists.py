"""/v1/lists: the sanctions lists payments are screened against: loaded, read, compared, withdrawn.

A thin face over ``audit.screening.lists``. ``POST /v1/lists`` seals the request body (a list file
as published, or the bank's own CSV or JSON) as the version of a list in force from now on, only if
the whole file parses: a ``sanctions_list`` record naming the list, its format, publication date
and SHA-256, the caller's certificate and the rationale given, with the file as its payload.
``GET /v1/lists`` answers the lists in force, ``GET .../{name}/history`` every load and withdrawal
of one list, ``GET .../{name}/diff`` what changed between two of its sealed loads, entry by entry,
and ``POST .../{name}/withdraw`` seals that a list is no longer screened against. After a load,
every held payment is screened again and each that meets an entry its record does not name is
annotated (``audit.screening.held``; ``rescreened`` in the answer). Admins load and
withdraw; officers, regulators and admins read. A refused load or withdrawal seals nothing; its
problem names the field. docs/http-api.md documents the endpoints.

The load's arguments travel as query parameters, its rationale among them (a JSON body, where the
other sealed actions carry theirs, is taken here by the file): a query string carries any UTF-8
text percent-encoded, where a header could not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from typing import Annotated, Any, TypeVar, cast

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from api.auth import Caller
from api.bodies import json_model
from api.deps import RuntimeDep, allow
from api.limits import LIST_CAP
from api.openapi import body, examples, json_body, media, problems
from api.problems import Problem, audit_problem
from audit.errors import ListError
from audit.screening.held import rescreen_held
from audit.screening.lists import diff_loads, list_history, lists_in_force, seal_list, withdraw_list
from inference.screening.entries import SOURCES, Source
from inference.screening.lists import FORMATS

__all__ = ["MEDIA_TYPES", "WithdrawIn", "router"]

router = APIRouter(prefix="/v1/lists", tags=["sanctions lists"])

# What a list file may be sent as; the `format` parameter, not the media type, says how it is read.
MEDIA_TYPES = ("application/xml", "text/xml", "text/csv", "application/json", "application/octet-stream")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_RATIONALE = ("at most 2,000 characters, at least one visible; no control character but newline and tab, "
              "no bidirectional control")
_T = TypeVar("_T")
ListName = Annotated[str, Path(description="the list's name (`ofac-sdn`, `un`, `bank-exits`)")]


class WithdrawIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rationale: str = Field(description=f"why the list is no longer screened against, sealed with the "
                                       f"withdrawal ({_RATIONALE})")


def _problem(exc: ListError) -> Problem:
    """The problem of a refused list request, naming its field whatever its status (status and kind
    from the API's one mapping, ``api.problems.audit_problem``)."""
    status, kind, _ = audit_problem(exc)
    return Problem(status, kind, str(exc), [{"field": exc.field, "message": exc.message}])


async def _call(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn`` (blocking: the database, a list's parser) in the thread pool; a ``ListError`` as its problem."""
    try:
        return await run_in_threadpool(fn, *args, **kwargs)
    except ListError as exc:
        raise _problem(exc) from exc


def _media_type(request: Request) -> None:
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if ctype not in MEDIA_TYPES:
        raise Problem(415, "unsupported_media_type",
                      f"Content-Type {ctype or '(none)'} is not accepted for a list file; send one of "
                      f"{', '.join(MEDIA_TYPES)} (the format parameter says how the file is read)",
                      [{"field": "Content-Type", "message": "unsupported media type"}])


def _published(text: str | None) -> date | None:
    if text is None:
        return None
    try:
        if not _DATE.fullmatch(text):
            raise ValueError
        return date.fromisoformat(text)
    except ValueError:
        why = f"{text!r} is not a date (YYYY-MM-DD)"
        raise Problem(422, "invalid_request", f"published: {why}",
                      [{"field": "published", "message": why}]) from None


# -- OpenAPI examples ---------------------------------------------------------------------------

_SHA = "6c1f0e8a2b3d4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6"
_ADMIN = {"subject": "CN=Priya Raman,OU=Screening Operations,O=Example Bank",
          "sans": ["URI:spiffe://bank.example/role/admin"],
          "issuer": "CN=Example Bank Issuing CA,O=Example Bank",
          "fingerprint_sha256": "d2c4f6a8b0e1c3d5f7092a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d",
          "serial": "5e2b7d",
          "spki_sha256": "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"}
_LOADED: dict[str, Any] = {
    "seq": 42117, "name": "un", "source": "un", "format": "un-xml", "sha256": _SHA, "published": "2026-11-30",
    "entries": 1, "withdrawn": False, "recorded_at": "2026-12-03T10:02:11.004512Z", "principal": _ADMIN,
    "rationale": "UN Security Council list of 30 November 2026 (weekly update)."}
_WITHDRAWN: dict[str, Any] = {
    **_LOADED, "seq": 42260, "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "published": None, "entries": 0, "withdrawn": True, "recorded_at": "2026-12-04T08:15:40.228104Z",
    "rationale": examples.LIST_WITHDRAW["rationale"]}
_ENTRY: dict[str, Any] = {
    "entry_id": "TAi.154", "kind": "individual", "names": ["MALIK NOORZAI", "MALIK NOORZAY"],
    "weak_aliases": [], "programmes": ["Taliban"], "dobs": [], "countries": ["AF"], "identifiers": [],
    "bics": [], "places": [], "listed_on": "2011-10-04"}
_DIFF: dict[str, Any] = {
    "name": "un", "from_seq": 41877, "to_seq": 42117,
    "old_sha256": "9b74c9897bac770ffc029102a200c5de3f0e1a7c6d5b4a392817f6e5d4c3b2a1", "new_sha256": _SHA,
    "added": [_ENTRY], "removed": [],
    "changed": [{"entry_id": "QDi.087", "fields": ["names"],
                 "old": {**_ENTRY, "entry_id": "QDi.087", "names": ["ABDUL RAHMAN"]},
                 "new": {**_ENTRY, "entry_id": "QDi.087", "names": ["ABDUL RAHMAN", "ABD AL-RAHMAN"]}}]}


_RESCREENED: dict[str, Any] = {
    "held": 12, "screened": 12, "purged": 0,
    "annotated": [{"seq": 40881, "trace_id": "01938e11-52c0-7b1e-8d4f-2a6c9e0b7d31",
                   "annotation_seqs": [42118],
                   "hits": [{"where": "beneficiary", "list": "un", "list_sha256": _SHA, "entry_id": "TAi.154",
                             "matched": "MALIK NOORZAI", "score": 1000, "basis": "name"}]}],
    "in_part": []}


def _ok(status: int, example: Any) -> dict[int | str, dict[str, Any]]:
    return {status: {"content": {"application/json": {"example": example}}}}


_FILE = {"type": "string", "format": "binary", "maxLength": LIST_CAP,
         "description": "the list file exactly as published (or the bank's own CSV or JSON)"}
_JSON_LIST = {"type": "object",
              "description": "an `internal-json` list: `list` (its name), `published`, `entries`"}
_LOAD_DOC = body({
    "application/xml": media(_FILE, examples.LIST_UN_XML),
    "text/xml": media(_FILE, examples.LIST_UN_XML),
    "text/csv": media(_FILE, examples.LIST_CSV),
    "application/json": media(_JSON_LIST, examples.LIST_JSON),
    "application/octet-stream": media(_FILE, examples.LIST_CSV)},
    description="The list file, its bytes as published; `format` says how it is read (the examples: "
                "`un-xml` for XML, `internal-csv` for CSV with `published`, `internal-json` for JSON, "
                "loaded under the name it states, `bank-exits`)")
_NAME_422 = "`name` is not a list's name (1-64 characters: lower-case letters, digits, `.`, `_`, `-`)"


@router.get("", summary="The sanctions lists in force: the last sealed load of each list not withdrawn",
            responses=_ok(200, {"lists": [_LOADED]}))
async def list_lists(rt: RuntimeDep, caller: Annotated[Caller, allow("lists.read")]) -> dict[str, Any]:
    found = await _call(lists_in_force, rt.engine)
    return {"lists": [x.to_json() for x in found]}


@router.post("", status_code=201, openapi_extra=_LOAD_DOC,
             summary="Load a list file: sealed, with its bytes, as the version in force from now on",
             responses=_ok(201, _LOADED | {"rescreened": _RESCREENED}) | problems(413, 415, 422, 503, notes={
                 413: f"Body over {LIST_CAP:,} bytes (`limit_bytes`; a caller not allowed to load lists is "
                      "held to the default cap); nothing was read past it or sealed",
                 415: f"Content-Type is none of {', '.join(MEDIA_TYPES)}",
                 422: "Refused (`list_refused`, `invalid_request`, `empty_body`): `errors` names the field: "
                      "`name`, `format`, `source`, `published`, `rationale`, or `file` (the body does not "
                      "parse whole as `format`, or lists no entry: the detail names the element or line); "
                      "nothing was sealed"}))
async def load(
    request: Request,
    rt: RuntimeDep,
    caller: Annotated[Caller, allow("lists.load")],
    name: str = Query(description="the list's name (a later load of the same name replaces it): 1-64 "
                                  "characters, lower-case letters, digits, `.`, `_`, `-` (`ofac-sdn`, `un`, "
                                  "`bank-exits`); an `internal-json` file must state the same name"),
    fmt: str = Query(alias="format", json_schema_extra={"enum": list(FORMATS)},
                     description="how the file is read: the published format it is in"),
    rationale: str = Query(description=f"why it is loaded, sealed with the load ({_RATIONALE})"),
    source: str | None = Query(None, json_schema_extra={"enum": list(SOURCES)},
                               description="for `ofac-xml`, which does not say which OFAC list it is: "
                                           "`ofac-sdn` or `ofac-consolidated` (not needed when `name` is "
                                           "one of these); every other format states its own, and that is "
                                           "sealed"),
    published: str | None = Query(None, description="for `internal-csv`, which does not state one: its "
                                                    "publication date, YYYY-MM-DD; every other format "
                                                    "states its own, and that is sealed"),
) -> dict[str, Any]:
    _media_type(request)
    day = _published(published)
    data = await request.body()
    if not data:
        why = "the request body is empty: send the list file as it is published"
        raise Problem(422, "empty_body", why, [{"field": "file", "message": "empty"}])
    # seal_list checks the source against the sources it knows (ListError naming `source`)
    sealed = await _call(seal_list, rt.ledger, data, fmt, name, caller.principal, rationale,
                         source=cast("Source | None", source), published=day)
    held = await run_in_threadpool(rescreen_held, rt.ledger, caller.principal, screener=rt.screener)
    return sealed.to_json() | {"rescreened": held.to_json()}


@router.get("/{name}/history", summary="Every sealed load and withdrawal of a list, oldest first",
            responses=_ok(200, {"name": "un", "loads": [_LOADED, _WITHDRAWN]}) | problems(404, 422, notes={
                404: "No list of this name was ever loaded", 422: _NAME_422}))
async def history(rt: RuntimeDep, caller: Annotated[Caller, allow("lists.read")],
                  name: ListName) -> dict[str, Any]:
    found = await _call(list_history, rt.engine, name)
    return {"name": name, "loads": [x.to_json() for x in found]}


@router.get("/{name}/diff", summary="Entries added, removed and changed between two sealed loads of a list",
            responses=_ok(200, _DIFF) | problems(404, 422, notes={
                404: "No list of this name was ever loaded, it has fewer than two loads (`errors` names "
                     "`name`), or `from` or `to` is not the seq of one of its loads (withdrawals are none)",
                422: f"{_NAME_422}; or the sealed bytes of a load can no longer be read (purged): "
                     "`errors` names `seq`"}))
async def diff(
    rt: RuntimeDep,
    caller: Annotated[Caller, allow("lists.read")],
    name: ListName,
    old: int | None = Query(None, alias="from", ge=0,
                            description="the seq of the older load (default: the load before `to`)"),
    new: int | None = Query(None, alias="to", ge=0,
                            description="the seq of the newer load (default: the last load)"),
) -> dict[str, Any]:
    found = await _call(diff_loads, rt.engine, name, old=old, new=new)
    return found.to_json()


@router.post("/{name}/withdraw", summary="Withdraw a list: sealed; payments are screened against it no more",
             openapi_extra=json_body(WithdrawIn, examples.LIST_WITHDRAW),
             responses=_ok(200, _WITHDRAWN) | problems(404, 422, 503, notes={
                 404: "No list of this name is in force (never loaded, or withdrawn already)",
                 422: "Refused input: `errors` names the field (`name`, `rationale`); nothing was sealed"}))
async def withdraw(request: Request, rt: RuntimeDep, caller: Annotated[Caller, allow("lists.withdraw")],
                   name: ListName) -> dict[str, Any]:
    body_in: WithdrawIn = await json_model(request, WithdrawIn, optional=False)
    done = await _call(withdraw_list, rt.ledger, name, caller.principal, body_in.rationale)
    return done.to_json()
