"""A development PKI for mutual TLS: one CA, a server certificate, a client certificate per role.

``create_dev_pki(out)`` writes (private keys 0600, certificates 0644)::

    ca.pem ca.key                 the dev CA (ECDSA P-256, pathLen 0)
    server.pem server.key         serverAuth; SAN DNS/IP for each host (localhost, 127.0.0.1)
    <role>.pem <role>.key         clientAuth; CN=sealtrail-<role>, O=sealtrail dev,
                                  SAN URI spiffe://sealtrail.dev/role/<role>
    roles.toml                    role map granting <role> to that SAN URI (api.roles)
    other-ca/ca.pem ca.key        a second, untrusted CA
    other-ca/outsider.pem .key    a client certificate from it that *claims* the officer SAN
                                  URI: a server trusting ca.pem must refuse it

Certificates carry basicConstraints, keyUsage (critical), extendedKeyUsage, SKI and AKI, so
both OpenSSL and ``cryptography.x509.verification`` accept the chains. For development and
tests only: the CA key lies next to the certificates, unencrypted.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from api.roles import ROLES, role_map_toml
from audit.decide.principal import Principal

__all__ = ["DEV_P12_PASSWORD", "ORGANISATION", "DevPki", "IssuedCert", "create_dev_pki", "role_uri"]

ORGANISATION = "sealtrail dev"
# <role>.p12 (certificate, key and CA) for importing into a browser to use the console; dev only
DEV_P12_PASSWORD = b"sealtrail-dev"
SKEW = timedelta(hours=1)  # certificates start this long before `now`: clocks differ


def role_uri(role: str) -> str:
    """The SAN URI a dev client certificate of ``role`` carries."""
    return f"spiffe://sealtrail.dev/role/{role}"


@dataclass(frozen=True)
class IssuedCert:
    """One certificate written to disk, with the facts a person checks."""

    cert_path: Path
    key_path: Path
    principal: Principal

    def to_json(self) -> dict[str, Any]:
        p = self.principal
        return {"cert": str(self.cert_path), "key": str(self.key_path), "subject": p.subject,
                "sans": list(p.sans), "issuer": p.issuer, "fingerprint_sha256": p.fingerprint_sha256,
                "not_after": p.not_after}


@dataclass(frozen=True)
class DevPki:
    """What ``create_dev_pki`` wrote."""

    directory: Path
    ca: IssuedCert
    server: IssuedCert
    clients: Mapping[str, IssuedCert]  # role -> certificate
    other_ca: IssuedCert
    outsider: IssuedCert
    roles_file: Path
    files: tuple[Path, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "ca": self.ca.to_json(), "server": self.server.to_json(),
                "clients": {r: c.to_json() for r, c in self.clients.items()},
                "other_ca": self.other_ca.to_json(), "outsider": self.outsider.to_json(),
                "roles_file": str(self.roles_file)}


@dataclass(frozen=True)
class _Pair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANISATION),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey,
             now: datetime, days: int) -> x509.CertificateBuilder:
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - SKEW).not_valid_after(now + timedelta(days=days))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))


def _new_ca(cn: str, now: datetime, days: int) -> _Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (_builder(_name(cn), _name(cn), key, now, days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return _Pair(cert, key)


def _issue(ca: _Pair, cn: str, sans: Sequence[x509.GeneralName], usage: x509.ObjectIdentifier,
           now: datetime, days: int) -> _Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (_builder(_name(cn), ca.cert.subject, key, now, days)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=False, crl_sign=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                           critical=False)
            .sign(ca.key, hashes.SHA256()))
    return _Pair(cert, key)


def _host_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not host or not host.isascii() or any(c.isspace() or c in "/:@" for c in host):
        raise ValueError(f"not a DNS name or IP address: {host!r}")
    return x509.DNSName(host.lower())


def _pem(pair: _Pair) -> tuple[bytes, bytes]:
    key = pair.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())
    return pair.cert.public_bytes(serialization.Encoding.PEM), key


def _p12(role: str, pair: _Pair, ca: x509.Certificate) -> bytes:
    """A PKCS#12 file a browser imports (Chrome, Firefox, Keychain): the role's key, certificate and CA."""
    return pkcs12.serialize_key_and_certificates(
        f"sealtrail-{role}".encode(), pair.key, pair.cert, [ca],
        serialization.BestAvailableEncryption(DEV_P12_PASSWORD))


def _write(path: Path, data: bytes, mode: int, force: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (0 if force else os.O_EXCL)
    fd = os.open(path, flags, mode)
    try:
        os.fchmod(fd, mode)  # an overwritten file keeps no looser mode
        os.write(fd, data)
    finally:
        os.close(fd)


def create_dev_pki(out_dir: Path, *, hosts: Iterable[str] = ("localhost", "127.0.0.1"),
                   roles: Iterable[str] = ROLES, now: datetime | None = None, days: int = 825,
                   force: bool = False) -> DevPki:
    """Create the dev CA, server and per-role client certificates under ``out_dir``.

    Refuses (``FileExistsError`` naming the file) to overwrite anything unless ``force``;
    nothing is written when it refuses.
    """
    roles = tuple(dict.fromkeys(roles))
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ValueError(f"unknown role {unknown[0]!r} (known: {', '.join(ROLES)})")
    host_names = [_host_name(h) for h in dict.fromkeys(hosts)]
    if not host_names:
        raise ValueError("the server certificate needs at least one host")
    if days < 1:
        raise ValueError("days must be at least 1")
    now = (now or datetime.now(UTC)).astimezone(UTC)

    ca = _new_ca("sealtrail dev CA", now, days)
    server = _issue(ca, "sealtrail-server", host_names, ExtendedKeyUsageOID.SERVER_AUTH, now, days)
    clients = {r: _issue(ca, f"sealtrail-{r}", [x509.UniformResourceIdentifier(role_uri(r))],
                         ExtendedKeyUsageOID.CLIENT_AUTH, now, days) for r in roles}
    other_ca = _new_ca("sealtrail other CA (untrusted)", now, days)
    outsider = _issue(other_ca, "sealtrail-outsider", [x509.UniformResourceIdentifier(role_uri("officer"))],
                      ExtendedKeyUsageOID.CLIENT_AUTH, now, days)

    other = out_dir / "other-ca"
    plan: dict[str, tuple[Path, _Pair]] = {
        "ca": (out_dir / "ca", ca), "server": (out_dir / "server", server),
        **{f"client:{r}": (out_dir / r, p) for r, p in clients.items()},
        "other_ca": (other / "ca", other_ca), "outsider": (other / "outsider", outsider),
    }
    roles_file = out_dir / "roles.toml"
    roles_text = role_map_toml(("san_uri", role_uri(r), [r]) for r in roles).encode()
    files = [p for stem, _ in plan.values() for p in (stem.with_suffix(".pem"), stem.with_suffix(".key"))]
    files += [out_dir / f"{r}.p12" for r in roles]
    files.append(roles_file)
    if not force:
        for f in files:
            if f.exists() or f.is_symlink():
                raise FileExistsError(f"{f} exists; refusing to overwrite it (use --force)")
    other.mkdir(parents=True, exist_ok=True)

    issued: dict[str, IssuedCert] = {}
    for label, (stem, pair) in plan.items():
        cert_pem, key_pem = _pem(pair)
        _write(stem.with_suffix(".key"), key_pem, 0o600, force)
        _write(stem.with_suffix(".pem"), cert_pem, 0o644, force)
        issued[label] = IssuedCert(stem.with_suffix(".pem"), stem.with_suffix(".key"),
                                   Principal.from_certificate(pair.cert))
    for r, pair in clients.items():
        _write(out_dir / f"{r}.p12", _p12(r, pair, ca.cert), 0o600, force)
    _write(roles_file, roles_text, 0o644, force)
    return DevPki(directory=out_dir, ca=issued["ca"], server=issued["server"],
                  clients={r: issued[f"client:{r}"] for r in roles}, other_ca=issued["other_ca"],
                  outsider=issued["outsider"], roles_file=roles_file, files=tuple(files))
