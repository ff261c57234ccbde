"""Message bytes in, submissions out: the scoring path's input, refused whole or taken whole.

``parse_submissions`` turns one request's body (or one file) into the ``Submission``s the
pipeline decides, or refuses all of it with ``SubmissionRefusedError`` naming every refused
message (its index in a batch, the field, why, and how many in all): nothing of a refused request
is decided. Its callers seal the refusal itself (a ``refusal`` record, ``audit.decide.refusal``,
whose payload is the request's bytes) and an export bundle's verifier parses that payload here
again, requiring the same refusal. The HTTP API (``POST /v1/decisions``, ``/v1/decisions/batch``),
``sealtrail score``
and Python callers share it, so one body is refused for the same reasons everywhere.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import orjson

from audit.decide.record import IdempotencyKey
from audit.decide.types import Submission
from audit.errors import (
    OneMessageExpectedError,
    SubmissionFault,
    SubmissionRefusedError,
    TooManySubmissionsError,
)
from inference.messages import MAX_FILE_BYTES, MessageError
from inference.messages.json_message import MAX_JSON_BYTES, loads_json, transactions_of

__all__ = ["MAX_BATCH", "parse_submissions"]

MAX_BATCH = 10_000  # transactions one request may hold (the batch endpoint's cap)
_MAX_FAULTS = 100  # refused messages named one by one; the count says how many in all


def parse_submissions(raw: bytes, fmt: str, principal: dict[str, Any], *, batch: bool,
                      max_items: int | None = MAX_BATCH,
                      received_at: datetime | None = None,
                      idempotency_key: str | None = None, keyed: bool = True) -> list[Submission]:
    """The messages of ``raw`` (format ``fmt``: json | mt | pacs008 | auto) as
    submissions of ``principal`` (``Principal.to_json()``), or ``SubmissionRefusedError`` for all.

    ``batch``: a JSON body is an array (or ``{"transactions": [...]}``) whose every element is
    sealed as its own payload, and refusals name each message's index; a batch holding no
    transaction is refused (at ``body``); otherwise the body must hold exactly one transaction
    (``OneMessageExpectedError``). ``max_items`` caps the
    transactions (``TooManySubmissionsError``; None: no cap, for whole files scored offline).
    ``received_at`` is the event time the features use (default: now, UTC).
    Each submission carries its idempotency key (``audit.decide.idempotency``): the caller's
    ``idempotency_key`` (one transaction only: ``OneMessageExpectedError`` otherwise; ``ValueError``
    for a malformed key), else the one derived from its message (UETR, else its reference).
    ``keyed=False`` derives no keys (and imports no database code): the offline bundle verifier's
    replay of a sealed refusal, which needs only whether and why the body is refused."""
    if keyed:
        from audit.decide.idempotency import derived_key, header_key
    else:
        derived_key, header_key = _no_key, _no_header_key
    given = None if idempotency_key is None else header_key(idempotency_key)
    now = datetime.now(UTC) if received_at is None else received_at
    subs: list[Submission] = []
    errors: list[tuple[int, MessageError]] = []
    if fmt == "json" and batch:
        # Each element is sealed as its own payload (its compact JSON), so that a payload holds one
        # transaction and replay or erasure never has to touch the other 9,999. The body is decoded
        # once, duplicate keys refused anywhere in it; each element's transactions come from its
        # decoded value, hashed over the payload bytes, as parse_json(payload) would give them.
        try:
            doc = loads_json(raw, max_bytes=MAX_FILE_BYTES)
        except MessageError as exc:
            where = None if exc.field == "$" else exc.field or None
            raise SubmissionRefusedError(f"body refused: {exc.reason}",
                                         [SubmissionFault(None, where, exc.reason)]) from exc
        if isinstance(doc, dict) and set(doc) == {"transactions"}:
            doc = doc["transactions"]
        if not isinstance(doc, list):
            raise SubmissionRefusedError('a batch is a JSON array (or {"transactions": [...]})',
                                         [SubmissionFault(None, None, "expected an array")])
        if max_items is not None and len(doc) > max_items:
            raise _too_many(len(doc), max_items)
        dumps, sha256 = orjson.dumps, hashlib.sha256
        for i, el in enumerate(doc):
            try:
                item = dumps(el)
                if len(item) > MAX_JSON_BYTES:
                    raise MessageError(f"message is {len(item)} bytes; the limit is {MAX_JSON_BYTES}",
                                       field="$")
                for t in transactions_of(el, sha256(item).hexdigest(), text=item):
                    subs.append(Submission(item, t, "json", principal, now, idempotency=derived_key(t)))
            except MessageError as exc:
                errors.append((i, exc))
            except orjson.JSONEncodeError as exc:  # e.g. an integer beyond 64 bits
                errors.append((i, MessageError(f"not JSON: {exc}", field="$")))
    else:
        for i, p in enumerate(Submission.parse(raw, fmt, principal, now)):  # type: ignore[arg-type]
            if isinstance(p, MessageError):
                errors.append((i, p))
            else:
                subs.append(replace(p, idempotency=derived_key(p.transaction)))
    if errors:
        raise _refused(errors, batch)
    if batch and not subs:  # as the one-decision endpoint refuses a body that holds none
        raise SubmissionRefusedError("the batch holds no transaction; nothing was decided or recorded",
                                     [SubmissionFault(None, None, "no transactions (an empty batch)")])
    if not batch and len(subs) != 1:
        raise OneMessageExpectedError(
            f"the body holds {len(subs)} transactions; POST several to /v1/decisions/batch",
            [SubmissionFault(None, None, f"{len(subs)} transactions")])
    if max_items is not None and len(subs) > max_items:
        raise _too_many(len(subs), max_items)
    if given is not None:
        if len(subs) != 1:
            raise OneMessageExpectedError(
                f"an Idempotency-Key names one payment; the body holds {len(subs)} transactions",
                [SubmissionFault(None, "Idempotency-Key", f"{len(subs)} transactions")])
        return [replace(subs[0], idempotency=given)]
    return subs


def _refused(errors: list[tuple[int, MessageError]], batch: bool) -> SubmissionRefusedError:
    faults = [SubmissionFault(i if batch else None, e.field or None, e.reason)
              for i, e in errors[:_MAX_FAULTS]]
    detail = f"{len(errors)} message(s) refused; nothing was decided or recorded: " + \
        "; ".join(f"{f.where}: {f.message}" for f in faults[:5])
    return SubmissionRefusedError(detail, faults, total=len(errors))


def _no_key(tx: Any) -> None:
    return None


def _no_header_key(value: str) -> IdempotencyKey:
    return IdempotencyKey("", "header")


def _too_many(n: int, cap: int) -> TooManySubmissionsError:
    return TooManySubmissionsError(f"{n:,} transactions in one call; at most {cap:,}",
                                   [SubmissionFault(None, None, f"more than {cap} transactions")])
