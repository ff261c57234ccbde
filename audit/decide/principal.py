"""Who asked: the X.509 principal a decision record binds (DESIGN.md invariant 3).

A :class:`Principal` is parsed from the DER certificate the TLS connection verified (mutual
TLS), or from a forwarded chain that :func:`verify_chain` verified again against the trusted
CA(s) (behind a TLS-terminating proxy). ``to_json()`` is what a record stores: subject and
issuer as RFC 4514 strings, the SANs in certificate order with OpenSSL-style type prefixes
(``URI:``, ``DNS:``, ``IP:``, ``email:``, ``dirName:``, ``RID:``, ``otherName:``), the SHA-256
fingerprint of the DER certificate (lower-case hex) and the serial number (lower-case hex).

:meth:`Principal.local` is the one principal without a certificate: offline CLI scoring by an
operator on the ledger's own machine. Its fingerprint, issuer and serial are empty strings and
its only SAN is ``local:cli``, so a record says plainly that nothing was verified.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import ClientVerifier, PolicyBuilder, Store
from cryptography.x509.verification import VerificationError as _X509VerificationError

from audit.errors import PrincipalError

__all__ = [
    "LOCAL_SAN", "ChainVerifier", "Principal", "require_client_auth", "verify_chain"
]

LOCAL_SAN = "local:cli"


def _time(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _san(name: x509.GeneralName) -> str:
    if isinstance(name, x509.UniformResourceIdentifier):
        return f"URI:{name.value}"
    if isinstance(name, x509.DNSName):
        return f"DNS:{name.value}"
    if isinstance(name, x509.IPAddress):
        return f"IP:{name.value}"
    if isinstance(name, x509.RFC822Name):
        return f"email:{name.value}"
    if isinstance(name, x509.DirectoryName):
        return f"dirName:{name.value.rfc4514_string()}"
    if isinstance(name, x509.RegisteredID):
        return f"RID:{name.value.dotted_string}"
    if isinstance(name, x509.OtherName):
        return f"otherName:{name.type_id.dotted_string};hex:{name.value.hex()}"
    raise PrincipalError("malformed", f"unsupported subjectAltName entry {name!r}")


def _spki_sha256(cert: x509.Certificate) -> str:
    """SHA-256 of the certificate's SubjectPublicKeyInfo; "" for a key type cryptography cannot load."""
    try:
        return hashlib.sha256(cert.public_key().public_bytes(
            Encoding.DER, PublicFormat.SubjectPublicKeyInfo)).hexdigest()
    except UnsupportedAlgorithm:
        return ""


def _sans(cert: x509.Certificate) -> tuple[str, ...]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return ()
    return tuple(_san(n) for n in ext.value)


@dataclass(frozen=True)
class Principal:
    """The identity behind one request, as its certificate states it."""

    subject: str  # RFC 4514
    sans: tuple[str, ...]  # "URI:spiffe://...", "DNS:host", "IP:127.0.0.1", "email:x@y", ...
    issuer: str  # RFC 4514
    fingerprint_sha256: str  # lower-case hex of SHA-256 over the DER certificate; "" for local
    serial: str  # lower-case hex; "" for local
    not_before: str  # ISO 8601 UTC ("...Z"); "" for local
    not_after: str
    spki_sha256: str = ""  # SHA-256 of the SubjectPublicKeyInfo (lower-case hex); "" for local

    @classmethod
    def from_certificate(cls, cert: x509.Certificate) -> Principal:
        """The principal a parsed certificate names (parsing only; nothing is verified)."""
        try:
            return cls(
                subject=cert.subject.rfc4514_string(),
                sans=_sans(cert),
                issuer=cert.issuer.rfc4514_string(),
                fingerprint_sha256=cert.fingerprint(hashes.SHA256()).hex(),
                serial=format(cert.serial_number, "x"),
                not_before=_time(cert.not_valid_before_utc),
                not_after=_time(cert.not_valid_after_utc),
                spki_sha256=_spki_sha256(cert),
            )
        except PrincipalError:
            raise
        except (ValueError, TypeError, x509.DuplicateExtension, x509.UnsupportedGeneralNameType) as exc:
            raise PrincipalError("malformed", f"certificate cannot be read: {exc}") from exc

    @classmethod
    def from_der(cls, der: bytes) -> Principal:
        """Parse one DER certificate, e.g. ``ssl.SSLSocket.getpeercert(binary_form=True)``."""
        return cls.from_certificate(_load_der(der))

    @classmethod
    def client_from_der(cls, der: bytes) -> Principal:
        """Parse the DER certificate a TLS client presented and refuse it (``not_client``) unless
        its extendedKeyUsage names clientAuth: a certificate issued for something else (a server,
        or for no stated purpose) does not name a caller."""
        cert = _load_der(der)
        principal = cls.from_certificate(cert)
        require_client_auth(cert, principal.subject or f"serial {principal.serial}")
        return principal

    @classmethod
    def from_pem(cls, pem: bytes | str) -> Principal:
        """Parse exactly one PEM certificate."""
        return cls.from_certificate(_load_one_pem(pem))

    @classmethod
    def local(cls, name: str) -> Principal:
        """The operator of an offline CLI run: no certificate, nothing verified (empty
        fingerprint, issuer and serial; SAN ``local:cli``)."""
        if not name:
            raise PrincipalError("malformed", "a local principal needs a user name")
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"local:{name}")])
        return cls(subject=subject.rfc4514_string(), sans=(LOCAL_SAN,), issuer="",
                   fingerprint_sha256="", serial="", not_before="", not_after="")

    @property
    def is_local(self) -> bool:
        """True when no certificate stands behind this principal."""
        return self.fingerprint_sha256 == ""

    @property
    def san_uris(self) -> tuple[str, ...]:
        return tuple(s[4:] for s in self.sans if s.startswith("URI:"))

    def to_json(self) -> dict[str, Any]:
        """The ``principal`` object of a decision record (stable keys)."""
        return {"subject": self.subject, "sans": list(self.sans), "issuer": self.issuer,
                "fingerprint_sha256": self.fingerprint_sha256, "serial": self.serial}


def require_client_auth(cert: x509.Certificate, who: str) -> None:
    """Raise ``PrincipalError("not_client")`` unless ``cert``'s extendedKeyUsage includes clientAuth.

    An absent extension is refused too: RFC 5280 reads it as "any purpose", and OpenSSL's
    handshake lets such a certificate through, but a client principal must be issued as one."""
    try:
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        raise PrincipalError("not_client", f"certificate {who} has no extendedKeyUsage; a client "
                                           "certificate must name clientAuth") from None
    except (ValueError, x509.DuplicateExtension) as exc:
        raise PrincipalError("malformed",
                             f"certificate {who}: extendedKeyUsage cannot be read: {exc}") from exc
    if ExtendedKeyUsageOID.CLIENT_AUTH not in eku:
        have = ", ".join(getattr(u, "_name", u.dotted_string) for u in eku) or "none"
        raise PrincipalError("not_client", f"certificate {who} is not for client authentication "
                                           f"(extendedKeyUsage lacks clientAuth; it names {have})")


def _load_der(der: bytes) -> x509.Certificate:
    if not isinstance(der, bytes | bytearray | memoryview):
        raise PrincipalError("malformed", f"expected DER bytes, got {type(der).__name__}")
    try:
        return x509.load_der_x509_certificate(bytes(der))
    except ValueError as exc:
        raise PrincipalError("malformed", f"not a DER X.509 certificate: {exc}") from exc


def _load_pems(pem: bytes | str) -> list[x509.Certificate]:
    data = pem.encode("ascii", "replace") if isinstance(pem, str) else pem
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise PrincipalError("malformed", f"not a PEM X.509 certificate: {exc}") from exc


def _load_one_pem(pem: bytes | str) -> x509.Certificate:
    certs = _load_pems(pem)
    if len(certs) != 1:
        raise PrincipalError("malformed", f"expected one PEM certificate, found {len(certs)}")
    return certs[0]


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


class ChainVerifier:
    """Verifies client certificate chains against fixed trust anchors (RFC 5280 path
    validation with the WebPKI profile of ``cryptography.x509.verification``, EKU clientAuth).
    Parse the CA bundle once; call :meth:`verify` per request with the current time."""

    def __init__(self, anchors: Iterable[x509.Certificate]) -> None:
        self.anchors = tuple(anchors)
        if not self.anchors:
            raise PrincipalError("no_trust_anchor", "no trusted CA certificate given")
        for ca in self.anchors:
            if not _is_ca(ca):
                raise PrincipalError("no_trust_anchor",
                                     f"trust anchor {ca.subject.rfc4514_string()} is not a CA certificate")
        self._store = Store(list(self.anchors))

    @classmethod
    def from_pems(cls, ca_pems: Sequence[bytes | str]) -> ChainVerifier:
        """Trust every certificate in the given PEM bundles."""
        return cls([c for pem in ca_pems for c in _load_pems(pem)])

    def _verifier(self, now: datetime) -> ClientVerifier:
        return PolicyBuilder().store(self._store).time(now).build_client_verifier()

    def verify(self, leaf_der: bytes, intermediates_der: Sequence[bytes], now: datetime) -> Principal:
        """The principal of ``leaf_der`` if it chains to a trust anchor at ``now`` (aware);
        raises :class:`PrincipalError` naming why not."""
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware")
        now = now.astimezone(UTC)
        leaf = _load_der(leaf_der)
        intermediates = [_load_der(d) for d in intermediates_der]
        principal = Principal.from_certificate(leaf)
        who = principal.subject or f"serial {principal.serial}"
        if now < leaf.not_valid_before_utc:
            raise PrincipalError("not_yet_valid", f"certificate {who} is not valid before "
                                                  f"{principal.not_before} (now {_time(now)})")
        if now > leaf.not_valid_after_utc:
            raise PrincipalError("expired", f"certificate {who} expired at {principal.not_after} "
                                            f"(now {_time(now)})")
        try:
            eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            eku = None  # refused below, once the chain is known to be ours
        if eku is not None:
            require_client_auth(leaf, who)
        known = {c.subject for c in (*self.anchors, *intermediates)}
        if leaf.issuer not in known:
            raise PrincipalError("unknown_ca", f"certificate {who} was issued by {principal.issuer}, "
                                               "which is not a trusted CA (nor a given intermediate)")
        try:
            self._verifier(now).verify(leaf, intermediates)
        except _X509VerificationError as exc:
            raise PrincipalError("untrusted", f"certificate {who} (issuer {principal.issuer}) "
                                              f"does not chain to a trusted CA: {exc}") from exc
        if eku is None:  # path validation accepts a leaf without the extension; a client must have it
            require_client_auth(leaf, who)
        return principal


def verify_chain(leaf_der: bytes, intermediates_der: Sequence[bytes],
                 ca_pems: Sequence[bytes | str], now: datetime) -> Principal:
    """Verify a forwarded client chain against the trusted CA(s) at ``now`` (one-shot form of
    :class:`ChainVerifier`); the principal of the leaf, or :class:`PrincipalError`."""
    return ChainVerifier.from_pems(ca_pems).verify(leaf_der, intermediates_der, now)
