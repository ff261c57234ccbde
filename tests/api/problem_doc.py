"""What every API test checks of a refusal: an RFC 9457 problem document of the expected status and
kind, naming the field at fault where there is one."""

from __future__ import annotations

from typing import Any

__all__ = ["PROBLEM", "problem"]

PROBLEM = "application/problem+json"


def problem(r: Any, status: int, kind: str, field: str | None = None) -> dict[str, Any]:
    """The problem document of response ``r``, checked: ``status``, ``urn:sealtrail:problem:<kind>``
    and, when given, ``field`` among its errors."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM, r.text
    body: dict[str, Any] = r.json()
    assert body["type"] == f"urn:sealtrail:problem:{kind}", body
    if field is not None:
        assert field in [e["field"] for e in body.get("errors", [])], body
    return body
