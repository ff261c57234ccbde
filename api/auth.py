"""Who is asking: the X.509 principal of a request, and the roles the role map grants it.

By default the principal is the verified peer certificate of the request's own TLS
connection (``api.server`` puts it in the ASGI TLS extension); its extendedKeyUsage must name
clientAuth. Behind a TLS-terminating proxy (nginx, Envoy) the certificate may come in a header
instead, but only when that is enabled, only from the configured proxy addresses, only on a
connection that presented no certificate of its own (a peer certificate always wins: a header
never overrides it), and the forwarded chain is verified again against the client CA. A header
from anywhere else is refused, not ignored. Of Envoy's ``X-Forwarded-Client-Cert`` only the last
element counts: the one the trusted proxy appended; earlier ones are whatever reached that proxy.
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from api.roles import RoleMap
from api.server import TLS_PEER_DER
from audit.decide.principal import ChainVerifier, Principal
from audit.errors import PrincipalError

__all__ = ["CALLER_SCOPE_KEY", "AuthError", "Authenticator", "Caller", "ProxyTrust", "parse_forwarded_certs",
           "split_xfcc"]

# Where api.limits leaves the caller it authenticated, so that the route does not do it again.
CALLER_SCOPE_KEY = "sealtrail.caller"


class AuthError(Exception):
    """The request names no acceptable principal (401) or lacks the role (403)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Caller:
    principal: Principal
    roles: frozenset[str]
    via: str  # "tls" | "proxy"


@dataclass(frozen=True)
class ProxyTrust:
    """Accept ``header`` only from ``networks``; re-verify what it carries with ``verifier``."""

    header: str
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    verifier: ChainVerifier

    @classmethod
    def of(cls, header: str, addresses: Sequence[str], ca_pem: bytes) -> ProxyTrust:
        if not addresses:
            raise ValueError("a proxy certificate header needs trusted_proxies (addresses or CIDRs)")
        try:
            nets = tuple(ipaddress.ip_network(a, strict=False) for a in addresses)
        except ValueError as exc:
            raise ValueError(f"trusted_proxies: {exc}") from exc
        return cls(header.lower(), nets, ChainVerifier.from_pems([ca_pem]))

    def trusts(self, host: str | None) -> bool:
        if host is None:
            return False
        try:
            addr = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(addr in n for n in self.networks)


def _pem_ders(text: str) -> list[bytes]:
    certs = x509.load_pem_x509_certificates(text.encode())
    return [c.public_bytes(Encoding.DER) for c in certs]


def split_xfcc(value: str) -> list[dict[str, str]]:
    """The elements of an ``X-Forwarded-Client-Cert`` value, in order, each as its ``key=value``
    pairs (quotes and backslash escapes removed). Commas and semicolons inside a quoted value
    (``Subject="CN=a,O=b"``) split nothing. Raises ``ValueError`` on an unclosed quote."""
    elements: list[dict[str, str]] = []
    pairs: dict[str, str] = {}
    token: list[str] = []
    quoted = escaped = False

    def end_pair() -> None:
        text = "".join(token).strip()
        token.clear()
        if text:
            key, _, val = text.partition("=")
            pairs[key.strip()] = val

    for ch in value:
        if escaped:
            token.append(ch)
            escaped = False
        elif quoted and ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif quoted:
            token.append(ch)
        elif ch == ";":
            end_pair()
        elif ch == ",":
            end_pair()
            elements.append(dict(pairs))
            pairs.clear()
        else:
            token.append(ch)
    if quoted or escaped:
        raise ValueError("an unclosed quote in the XFCC value")
    end_pair()
    elements.append(dict(pairs))
    return elements


def parse_forwarded_certs(value: str) -> tuple[bytes, list[bytes]]:
    """The leaf and intermediates (DER) in a proxy header: Envoy's XFCC (``Cert="..."``,
    ``Chain="..."``, URL-encoded PEM), of which only the LAST element is read (Envoy appends its
    own element after whatever the request already carried, so earlier ones may be the client's
    own writing), or a bare URL-encoded PEM (nginx ``$ssl_client_escaped_cert``).
    Raises ``ValueError`` if unreadable."""
    value = value.strip()
    if not value:
        raise ValueError("the header is empty")
    if unquote(value).startswith("-----BEGIN"):
        ders = _pem_ders(unquote(value))
        if not ders:
            raise ValueError("no certificate in the header")
        return ders[0], ders[1:]
    last = split_xfcc(value)[-1]  # never an earlier element: no fallback to what the client wrote
    if "Cert" in last:
        leaf = _pem_ders(unquote(last["Cert"]))
        chain = _pem_ders(unquote(last["Chain"])) if "Chain" in last else []
        if not leaf:
            raise ValueError("XFCC Cert= holds no certificate")
        rest = [d for d in (*leaf[1:], *chain) if d != leaf[0]]
        return leaf[0], rest
    raise ValueError("neither a URL-encoded PEM certificate nor an XFCC value whose last element has Cert=")


class Authenticator:
    """Principal and roles of a request; certificates parsed once each (small LRU)."""

    def __init__(self, roles: RoleMap, proxy: ProxyTrust | None = None, *, cache: int = 4096) -> None:
        self.roles = roles
        self.proxy = proxy
        self._cache: OrderedDict[bytes, Caller] = OrderedDict()
        self._cache_size = cache

    def _remember(self, key: bytes, caller: Caller) -> Caller:
        self._cache[key] = caller
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return caller

    def caller(self, scope: Mapping[str, Any], headers: Mapping[str, str],
               now: datetime | None = None) -> Caller:
        """The caller of one request, or ``AuthError`` (401). A caller ``api.limits`` already
        authenticated for this very request (``scope[CALLER_SCOPE_KEY]``) is returned as it is."""
        known = scope.get(CALLER_SCOPE_KEY)
        if isinstance(known, Caller):
            return known
        tls = (scope.get("extensions") or {}).get("tls")
        der = tls.get(TLS_PEER_DER) if tls else None
        proxy = self.proxy
        forwarded = headers.get(proxy.header) if proxy is not None else None
        if forwarded is not None and proxy is not None:
            if not proxy.trusts(_host(scope)):
                # Refused, even beside a TLS certificate of the caller's own, so that nobody
                # believes the header was used.
                raise AuthError(401, "untrusted_proxy", f"header {proxy.header} came from "
                                f"{_host(scope)}, which is not a trusted proxy")
            getlist = getattr(headers, "getlist", None)
            count = len(getlist(proxy.header)) if callable(getlist) else 1
            if count > 1:  # which one would the proxy have written? Neither is taken.
                raise AuthError(401, "bad_forwarded_certificate",
                                f"header {proxy.header} appears {count} times; a proxy sends it once")
        if der:
            # The connection's own certificate always wins: a header never overrides it, not even
            # from a trusted proxy's address (a client there can write any header it likes).
            return self._direct(der)
        if forwarded is not None and proxy is not None:
            return self._forwarded(forwarded, now or datetime.now(UTC))
        raise AuthError(401, "no_certificate", "no client certificate: connect with mutual TLS"
                        + (f" or through a trusted proxy setting {proxy.header}" if proxy else ""))

    def _direct(self, der: bytes) -> Caller:
        hit = self._cache.get(der)
        if hit is not None:
            self._cache.move_to_end(der)
            return hit
        try:
            p = Principal.client_from_der(der)  # extendedKeyUsage must name clientAuth
        except PrincipalError as exc:
            raise AuthError(401, exc.reason, str(exc)) from exc
        return self._remember(der, Caller(p, self.roles.roles_for(p), "tls"))

    def _forwarded(self, value: str, now: datetime) -> Caller:
        assert self.proxy is not None
        try:
            leaf, rest = parse_forwarded_certs(value)
        except ValueError as exc:
            raise AuthError(401, "bad_forwarded_certificate",
                            f"header {self.proxy.header}: {exc}") from exc
        try:
            p = self.proxy.verifier.verify(leaf, rest, now)  # verified on every request: time moves
        except PrincipalError as exc:
            raise AuthError(401, exc.reason, f"forwarded certificate refused: {exc}") from exc
        return Caller(p, self.roles.roles_for(p), "proxy")


def _host(scope: Mapping[str, Any]) -> str | None:
    client = scope.get("client")
    return client[0] if client else None
