"""Who is asking: the X.509 principal of a request, and the roles the role map grants it.

By default the principal is the verified peer certificate of the request's own TLS
connection (``api.server`` puts it in the ASGI TLS extension). Behind a TLS-terminating proxy
(nginx, Envoy) the certificate may come in a header instead, but only when that is enabled,
only from the configured proxy addresses, and the forwarded chain is verified again against
the client CA: a header from anywhere else is refused, not ignored.
"""

from __future__ import annotations

import ipaddress
import re
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

__all__ = ["AuthError", "Authenticator", "Caller", "ProxyTrust", "parse_forwarded_certs"]

_XFCC_FIELD = re.compile(r'(By|Hash|Cert|Chain|Subject|URI|DNS)=("(?:[^"\\]|\\.)*"|[^;,]*)')


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


def parse_forwarded_certs(value: str) -> tuple[bytes, list[bytes]]:
    """The leaf and intermediates (DER) in a proxy header: Envoy's XFCC (``Cert="..."``,
    ``Chain="..."``, URL-encoded PEM; the first element, the one closest to us) or a bare
    URL-encoded PEM (nginx ``$ssl_client_escaped_cert``). Raises ``ValueError`` if unreadable."""
    value = value.strip()
    if not value:
        raise ValueError("the header is empty")
    if unquote(value).startswith("-----BEGIN"):
        ders = _pem_ders(unquote(value))
        if not ders:
            raise ValueError("no certificate in the header")
        return ders[0], ders[1:]
    first = value.split(",", 1)[0]  # XFCC: comma-separated elements, one per proxy hop
    fields = {k: v.strip('"') for k, v in _XFCC_FIELD.findall(first)}
    if "Cert" in fields:
        leaf = _pem_ders(unquote(fields["Cert"]))
        chain = _pem_ders(unquote(fields["Chain"])) if "Chain" in fields else []
        if not leaf:
            raise ValueError("XFCC Cert= holds no certificate")
        rest = [d for d in (*leaf[1:], *chain) if d != leaf[0]]
        return leaf[0], rest
    raise ValueError("neither a URL-encoded PEM certificate nor an XFCC element with Cert=")


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
        tls = (scope.get("extensions") or {}).get("tls")
        der = tls.get(TLS_PEER_DER) if tls else None
        forwarded = headers.get(self.proxy.header) if self.proxy is not None else None
        if der:
            # A TLS client's own certificate wins; a proxy header on a direct connection is refused
            # so that nobody believes it was used.
            if forwarded is not None and not (self.proxy and self.proxy.trusts(_host(scope))):
                raise AuthError(401, "untrusted_proxy",
                                f"header {self.proxy.header if self.proxy else ''} came from "
                                f"{_host(scope)}, which is not a trusted proxy")
            if forwarded is None:
                return self._direct(der)
        if forwarded is not None and self.proxy is not None:
            if not self.proxy.trusts(_host(scope)):
                raise AuthError(401, "untrusted_proxy", f"header {self.proxy.header} came from "
                                f"{_host(scope)}, which is not a trusted proxy")
            return self._forwarded(forwarded, now or datetime.now(UTC))
        if der:
            return self._direct(der)
        raise AuthError(401, "no_certificate", "no client certificate: connect with mutual TLS"
                        + (f" or through a trusted proxy setting {self.proxy.header}" if self.proxy else ""))

    def _direct(self, der: bytes) -> Caller:
        hit = self._cache.get(der)
        if hit is not None:
            self._cache.move_to_end(der)
            return hit
        try:
            p = Principal.from_der(der)
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
