"""HTML form bodies (``application/x-www-form-urlencoded``), parsed strictly and bounded.

Written here rather than taking python-multipart: the console posts only small urlencoded
forms (a ruleset file is read into a textarea by the page's script), and the standard
library parses those.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import parse_qsl

from starlette.requests import Request

from api.problems import Problem
from audit.errors import QueryError

__all__ = ["MAX_FORM", "form_time", "read_form"]

MAX_FORM = 4 << 20  # a ruleset's TOML (1 MiB max) and its cases, percent-encoded


async def read_form(request: Request) -> dict[str, str]:
    """The form's fields (the last value of a repeated name wins); refused if not a form."""
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise Problem(415, "unsupported_media_type", "the console posts application/x-www-form-urlencoded",
                      [{"field": "Content-Type", "message": "unsupported media type"}])
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM:
        raise Problem(413, "too_large", f"form over {MAX_FORM:,} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():  # never more than MAX_FORM in memory, whatever is sent
        size += len(chunk)
        if size > MAX_FORM:
            raise Problem(413, "too_large", f"form over {MAX_FORM:,} bytes")
        chunks.append(chunk)
    body = b"".join(chunks)
    try:
        pairs = parse_qsl(body.decode("ascii"), keep_blank_values=True, strict_parsing=bool(body),
                          errors="strict", max_num_fields=64)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Problem(422, "invalid_request", f"form body: {exc}",
                      [{"field": "body", "message": str(exc)}]) from exc
    return {k: v.replace("\r\n", "\n") for k, v in pairs}


def form_time(text: str, name: str) -> datetime:
    """A form's ISO 8601 time; one without an offset (as ``datetime-local`` sends) is read as UTC.
    ``QueryError`` naming ``name`` if it is no time."""
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise QueryError(name, f"{text!r} is not an ISO 8601 time (e.g. 2026-12-03T09:30 or "
                               "2026-12-03T09:30:00Z)") from None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at
