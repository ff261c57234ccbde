"""The webhook endpoints file (``SEALTRAIL_WEBHOOKS_FILE``) and the HTTP client that posts to them.

The file (TOML; paths relative to it; the secrets live in their own owner-only files):

    timeout_s = 15                      # seconds a whole exchange may take (default 15)
    ca = "receivers-ca.pem"             # CA the receivers' server certificates chain to
                                        #   (default: the system's trust store)
    client_cert = "sealtrail-hooks.pem" # a client certificate for receivers that ask for one
    client_key = "sealtrail-hooks.key"

    [[endpoint]]
    name = "core-banking"               # the delivery state's key: keep it when the URL changes
    url = "https://payments.bank.example/hooks/sealtrail"
    scorers = ["3f1c...e9"]             # SHA-256 fingerprints of the scoring certificates whose
                                        #   payments' outcomes this receiver gets
    secret_file = "core-banking.whsec"  # whsec_..., made by 'sealtrail webhooks secret FILE'
    previous_secret_file = "core-banking.old.whsec"   # while rotating: both sign each message
    after = 0                           # first time only: start after this seq (0: every outcome)

The messages and their signatures are ``audit.cases.webhooks``'; the cursor, retries and lease
``audit.cases.delivery``'s (docs/webhooks.md).
"""

from __future__ import annotations

import ssl
import time
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit.cases.delivery import Answer, Post
from audit.cases.webhooks import Endpoint, WebhookConfigError, parse_secret
from ledger.errors import KeyFileError
from ledger.keys import read_private

if TYPE_CHECKING:
    import httpx

__all__ = ["WebhookList", "http_post", "load_webhooks"]

_TOP = {"timeout_s", "ca", "client_cert", "client_key", "endpoint"}
_ENDPOINT = {"name", "url", "scorers", "secret_file", "previous_secret_file", "after", "timeout_s"}


@dataclass(frozen=True)
class WebhookList:
    endpoints: tuple[Endpoint, ...]
    ca: Path | None
    client_cert: Path | None
    client_key: Path | None


_SECRET_FILE_BYTES = 1024  # a whsec_ secret of 64 bytes is 94 characters
_ERROR_BODY_BYTES = 1024  # of a failure's body read for its error text; the rest is never read


def _secret(path: Path, where: str) -> bytes:
    try:
        if path.stat().st_size > _SECRET_FILE_BYTES:
            raise WebhookConfigError(f"{where}: {path} is not a webhook secret "
                                     f"(over {_SECRET_FILE_BYTES} bytes)")
    except OSError:
        pass  # read_private names what is wrong with it
    try:
        text = read_private(path, "webhook secret", "make one with 'sealtrail webhooks secret FILE'")
    except KeyFileError as exc:
        raise WebhookConfigError(f"{where}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise WebhookConfigError(f"{where}: {path} is not a webhook secret (not ASCII)") from exc
    return parse_secret(text, where=f"{where} ({path})")


def load_webhooks(path: Path) -> WebhookList:
    """Read and check the endpoints file; ``WebhookConfigError`` names the setting at fault.
    Every secret file is read (and its mode checked) here, so a bad one stops the deliverer at
    start, not at its first message."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise WebhookConfigError(f"cannot read webhooks file {path}: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise WebhookConfigError(f"webhooks file {path} is not TOML: {exc}") from exc
    unknown = set(doc) - _TOP
    if unknown:
        raise WebhookConfigError(f"{path}: unknown setting(s) {', '.join(sorted(unknown))}")
    timeout = doc.get("timeout_s", 15)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 0 < timeout <= 120:
        raise WebhookConfigError(f"{path}: timeout_s must be a number of seconds in (0, 120]")

    def file(v: object, key: str) -> Path | None:
        if v is None:
            return None
        if not isinstance(v, str) or not v:
            raise WebhookConfigError(f"{path}: {key} must be a path")
        return path.parent / v

    items = doc.get("endpoint", [])
    if not isinstance(items, list) or not items:
        raise WebhookConfigError(f"{path}: at least one [[endpoint]] is needed")
    endpoints: list[Endpoint] = []
    for i, e in enumerate(items):
        where = f"{path}: endpoint[{i}]"
        if not isinstance(e, dict):
            raise WebhookConfigError(f"{where} is not a table")
        extra = set(e) - _ENDPOINT
        if extra:
            raise WebhookConfigError(f"{where}: unknown setting(s) {', '.join(sorted(extra))}")
        for key in ("name", "url", "secret_file"):
            if not isinstance(e.get(key), str):
                raise WebhookConfigError(f"{where}: {key} is required (a string)")
        scorers = e.get("scorers")
        if not isinstance(scorers, list) or not all(isinstance(s, str) for s in scorers):
            raise WebhookConfigError(f"{where}: scorers is required (a list of certificate fingerprints)")
        keys = [_secret(path.parent / e["secret_file"], f"{where}.secret_file")]
        previous = file(e.get("previous_secret_file"), f"endpoint[{i}].previous_secret_file")
        if previous is not None:
            keys.append(_secret(previous, f"{where}.previous_secret_file"))
        after = e.get("after", 0)
        t = e.get("timeout_s", timeout)
        if isinstance(after, bool) or isinstance(t, bool) or not isinstance(t, int | float):
            raise WebhookConfigError(f"{where}: after is a seq and timeout_s a number of seconds")
        try:
            endpoints.append(Endpoint(name=e["name"], url=e["url"], scorers=tuple(s.lower() for s in scorers),
                                      secrets=tuple(keys), after=after, timeout_s=float(t)))
        except WebhookConfigError as exc:
            raise WebhookConfigError(f"{where}: {exc}") from exc
    names = [ep.name for ep in endpoints]
    if len(set(names)) != len(names):
        raise WebhookConfigError(f"{path}: an endpoint name is used twice")
    cert = file(doc.get("client_cert"), "client_cert")
    client_key = file(doc.get("client_key"), "client_key")
    if (cert is None) != (client_key is None):
        raise WebhookConfigError(f"{path}: client_cert and client_key go together")
    if client_key is not None:  # a private key: refused where group or others may read it, as a secret is
        try:
            read_private(client_key, "webhook client key", "give the client certificate's key")
        except (KeyFileError, UnicodeDecodeError) as exc:
            raise WebhookConfigError(f"{path}: client_key: {exc}") from exc
    return WebhookList(tuple(endpoints), file(doc.get("ca"), "ca"), cert, client_key)


class _Deadline:
    """When the exchange in flight must be over (``time.monotonic()``; None: no exchange)."""

    at: float | None = None

    def left(self, timeout: float | None) -> float | None:
        """What is left of a socket operation's ``timeout`` before the deadline; raises
        ``httpcore.ReadTimeout`` once it has passed."""
        if self.at is None:
            return timeout
        left = self.at - time.monotonic()
        if left <= 0:
            import httpcore

            raise httpcore.ReadTimeout("the receiver did not answer within its timeout_s")
        return left if timeout is None else min(timeout, left)


def _deadline_transport(ctx: ssl.SSLContext, deadline: _Deadline) -> httpx.HTTPTransport:
    """httpx's transport over sockets whose every connect, read and write ends by ``deadline``.

    httpx's own timeouts bound each socket operation, so a receiver that sends its answer a byte
    at a time would hold the deliverer (and every endpoint after it) for as long as it liked;
    here the whole exchange has ``timeout_s``. httpx takes no network backend, so its pool is
    made again with one (the transport's ``_pool``: a test holds the behaviour if httpx changes)."""
    import httpcore
    import httpx

    left = deadline.left

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: httpcore.NetworkStream) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._inner.read(max_bytes, left(timeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._inner.write(buffer, left(timeout))

        def close(self) -> None:
            self._inner.close()

        def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                      timeout: float | None = None) -> httpcore.NetworkStream:
            return Stream(self._inner.start_tls(ssl_context, server_hostname, left(timeout)))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore.SyncBackend()

        def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                        local_address: str | None = None,
                        socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
            return Stream(self._inner.connect_tcp(host, port, left(timeout), local_address, socket_options))

        def connect_unix_socket(self, path: str, timeout: float | None = None,
                                socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
            return Stream(self._inner.connect_unix_socket(path, left(timeout), socket_options))

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    transport = httpx.HTTPTransport(verify=ctx, trust_env=False)
    limits = httpx.Limits()  # the transport's defaults, as it made its own pool
    transport._pool = httpcore.ConnectionPool(
        ssl_context=ctx, network_backend=Backend(), max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections, keepalive_expiry=limits.keepalive_expiry)
    return transport


@contextmanager
def http_post(wl: WebhookList) -> Iterator[Post]:
    """A ``Post`` over httpx: TLS to the list's CA (or the system's), the client certificate if
    set, no redirects followed, keep-alive while the block runs; an endpoint's ``timeout_s``
    bounds its whole exchange, from connecting to the last byte read."""
    import httpx

    ctx = ssl.create_default_context(cafile=str(wl.ca) if wl.ca else None)
    if wl.client_cert is not None and wl.client_key is not None:
        ctx.load_cert_chain(str(wl.client_cert), str(wl.client_key))
    deadline = _Deadline()
    transport = _deadline_transport(ctx, deadline)

    with httpx.Client(transport=transport, follow_redirects=False, trust_env=False) as client:
        def post(ep: Endpoint, body: bytes, headers: Mapping[str, str]) -> Answer:
            deadline.at = time.monotonic() + ep.timeout_s
            try:
                # streamed: a 2xx body is never read, a failure's only its first kilobyte, so a
                # receiver answering with an endless body neither holds the deliverer nor fills its memory
                with client.stream("POST", ep.url, content=body, headers=dict(headers),
                                   timeout=ep.timeout_s) as r:
                    if 200 <= r.status_code <= 299:
                        return Answer(r.status_code)
                    readable = (r.headers.get("content-type", "").startswith(("text/", "application/"))
                                and r.headers.get("content-encoding", "identity") == "identity")
                    raw = b""
                    if readable:
                        for chunk in r.iter_raw():
                            raw += chunk
                            if len(raw) >= _ERROR_BODY_BYTES:
                                break
                    text = raw[:_ERROR_BODY_BYTES].decode("utf-8", "replace")[:300].strip()
                    return Answer(r.status_code, r.headers.get("retry-after"), f"HTTP {r.status_code}" +
                                  (f": {text}" if text else ""))
            except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError) as exc:
                return Answer(None, error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            finally:
                deadline.at = None

        yield post
