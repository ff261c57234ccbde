"""Standard Webhooks 1.0 for held-payment outcomes: the endpoint, the body, the signature.

A payment system that does not want to poll ``/v1/outcomes`` receives each released or rejected
payment as an HTTP POST (``audit.cases.delivery`` sends them). The message follows the Standard
Webhooks specification 1.0.0 (github.com/standard-webhooks/standard-webhooks,
spec/standard-webhooks.md), so a receiver verifies it with any of that project's libraries:

- headers ``webhook-id`` (``outcome_<seq>``: the same on every retry, the receiver's idempotency
  key), ``webhook-timestamp`` (the attempt, integer POSIX seconds) and ``webhook-signature``
  (``v1,<base64 HMAC-SHA256>`` of ``{id}.{timestamp}.{body}``, one per secret in force, space
  separated, so a secret is rotated without a gap);
- the body, compact JSON: ``{"type": "payment.outcome", "timestamp": <when the outcome was
  sealed>, "data": <the item GET /v1/outcomes answers for it>}``;
- secrets serialised ``whsec_<base64>``, 24 to 64 random bytes (the specification's bounds).

Everything here is pure: no clock, no network. Written here rather than taken from the
``standardwebhooks`` package: it is a few lines over ``hmac`` and the package pins nothing we
need; the tests verify our messages with that package, and with the specification's published
vector, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from audit.errors import WebhookConfigError

__all__ = ["EVENT_TYPE", "RETRY_SCHEDULE_S", "SECRET_PREFIX", "Endpoint", "WebhookConfigError", "body_of",
           "headers_of", "message_id", "new_secret", "parse_secret", "retry_delay", "sign"]

EVENT_TYPE = "payment.outcome"
SECRET_PREFIX = "whsec_"
_SECRET_BYTES = (24, 64)
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_FP = re.compile(r"[0-9a-f]{64}")

# Seconds to wait after the n-th failed attempt (n = 1, 2, ...): the specification's example
# schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h). After it, every 24 h for as
# long as the outcome is undelivered: an outcome is never dropped, the endpoint is reported
# failing instead (``sealtrail webhooks status``).
RETRY_SCHEDULE_S = (5, 300, 1_800, 7_200, 18_000, 36_000, 50_400, 72_000, 86_400)
MAX_DELAY_S = 86_400


@dataclass(frozen=True)
class Endpoint:
    """Where one payment system receives its outcomes.

    ``scorers``: the SHA-256 fingerprints of the scoring certificates whose payments' outcomes go
    there (a payment system sees its own payments' outcomes only, as in ``/v1/outcomes``).
    ``secrets``: the HMAC keys, the current one first; more than one while a secret is rotated.
    ``after``: the seq to start after when the endpoint is first seen (0: every outcome sealed).
    """

    name: str
    url: str
    scorers: tuple[str, ...]
    secrets: tuple[bytes, ...] = field(repr=False)  # never in a log line or a traceback
    after: int = 0
    timeout_s: float = 15.0

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise WebhookConfigError(f"endpoint name {self.name!r}: 1 to 64 of a-z, 0-9, '_' and '-', "
                                     "starting with a letter or digit")
        check_url(self.url)
        if not self.scorers or not all(_FP.fullmatch(f) for f in self.scorers):
            raise WebhookConfigError(f"endpoint {self.name}: scorers must list one or more certificate "
                                     "SHA-256 fingerprints (64 lowercase hex digits)")
        if len(set(self.scorers)) != len(self.scorers):
            raise WebhookConfigError(f"endpoint {self.name}: a scorer is listed twice")
        if not self.secrets or not all(_SECRET_BYTES[0] <= len(s) <= _SECRET_BYTES[1] for s in self.secrets):
            raise WebhookConfigError(f"endpoint {self.name}: one to a few secrets of 24 to 64 bytes each")
        if type(self.after) is not int or self.after < 0:
            raise WebhookConfigError(f"endpoint {self.name}: after must be a seq (0 or more)")
        if not 0 < self.timeout_s <= 120:
            raise WebhookConfigError(f"endpoint {self.name}: timeout_s must be in (0, 120] seconds")


def check_url(url: str) -> None:
    """An https URL, or http to a loopback address only (a receiver on the same machine): outcomes
    name payments, so they never cross a network in clear."""
    try:
        u = urlsplit(url)
        host = u.hostname
        u.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise WebhookConfigError(f"url {url!r} is not a URL: {exc}") from exc
    if not url.isascii() or not url.isprintable() or any(c.isspace() for c in url):
        raise WebhookConfigError(f"url {url!r} has a space, a control or a non-ASCII character "
                                 "(percent-encode it; an IDN host in its xn-- form)")
    if u.scheme not in ("https", "http") or not host:
        raise WebhookConfigError(f"url {url!r} is not an http(s) URL with a host")
    if u.username is not None or u.password is not None:
        raise WebhookConfigError(f"url {url!r} carries credentials: use the client certificate instead")
    if u.fragment:
        raise WebhookConfigError(f"url {url!r} has a fragment")
    if u.scheme == "http" and not _loopback(host):
        raise WebhookConfigError(f"url {url!r}: plain http only to a loopback address; use https")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_secret() -> str:
    """A fresh secret, 32 random bytes, serialised ``whsec_<base64>``."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def parse_secret(text: str, *, where: str) -> bytes:
    """The key a ``whsec_<base64>`` secret serialises; ``WebhookConfigError`` naming ``where``."""
    t = text.strip()
    if not t.startswith(SECRET_PREFIX):
        raise WebhookConfigError(f"{where}: a webhook secret starts with {SECRET_PREFIX!r} "
                                 "(make one with 'sealtrail webhooks secret FILE')")
    try:
        key = base64.b64decode(t[len(SECRET_PREFIX):], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WebhookConfigError(f"{where}: the secret is not base64") from exc
    if not _SECRET_BYTES[0] <= len(key) <= _SECRET_BYTES[1]:
        raise WebhookConfigError(f"{where}: the secret is {len(key)} bytes; 24 to 64 are needed")
    return key


def message_id(seq: int) -> str:
    """The ``webhook-id`` of the outcome sealed at ``seq``: the same on every attempt."""
    return f"outcome_{seq}"


def body_of(item: Mapping[str, Any]) -> bytes:
    """The message body for one outcome (an item of ``GET /v1/outcomes``), compact JSON."""
    return orjson.dumps({"type": EVENT_TYPE, "timestamp": item["recorded_at"], "data": dict(item)})


def sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256(key, "{msg_id}.{timestamp}.{body}")>``."""
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode("ascii") + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode("ascii")


def headers_of(keys: Sequence[bytes], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers of one attempt: id, timestamp, one signature per key."""
    return {"content-type": "application/json", "webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": " ".join(sign(k, msg_id, timestamp, body) for k in keys)}


def retry_delay(failures: int, jitter: float, retry_after_s: int | None = None) -> int:
    """Seconds before the next attempt after ``failures`` failed ones in a row: the schedule's
    step, spread by ``jitter`` (a fraction in [-0.1, 0.1], so endpoints that failed together do
    not retry together), or the receiver's ``Retry-After`` where it gave one; 1 s to 24 h."""
    if failures < 1:
        raise ValueError("failures counts from 1")
    if not -0.1 <= jitter <= 0.1:
        raise ValueError("jitter is a fraction in [-0.1, 0.1]")
    if retry_after_s is not None:
        return max(1, min(MAX_DELAY_S, retry_after_s))
    step = RETRY_SCHEDULE_S[min(failures, len(RETRY_SCHEDULE_S)) - 1]
    return max(1, min(MAX_DELAY_S, round(step * (1 + jitter))))
