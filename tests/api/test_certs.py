"""api.certs and ``sealtrail certs``: the dev PKI loads into ssl, passes OpenSSL and
cryptography path validation, and a real mutual-TLS handshake accepts a role certificate
while refusing one from another CA."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import ssl
import stat
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID
from typer.testing import CliRunner

from api.certs import DEV_P12_PASSWORD, DevPki, create_dev_pki, role_uri
from api.cli import app
from api.roles import ROLES, RoleMap
from audit.decide.principal import Principal, verify_chain
from audit.errors import PrincipalError

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
runner = CliRunner()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> DevPki:
    return create_dev_pki(tmp_path_factory.mktemp("pki"))


def der(path: Path) -> bytes:
    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(serialization.Encoding.DER)


def test_layout_and_key_modes(tmp_path: Path) -> None:
    pki = create_dev_pki(tmp_path / "dev", now=NOW)
    names = sorted(str(p.relative_to(tmp_path / "dev")) for p in (tmp_path / "dev").rglob("*") if p.is_file())
    assert names == sorted(["ca.key", "ca.pem", "server.key", "server.pem", "roles.toml", "other-ca/ca.key",
                            "other-ca/ca.pem", "other-ca/outsider.key", "other-ca/outsider.pem",
                            *(f"{r}.{ext}" for r in ROLES for ext in ("pem", "key", "p12"))])
    assert sorted(str(p.relative_to(tmp_path / "dev")) for p in pki.files) == names
    for f in pki.files:
        mode = stat.S_IMODE(f.stat().st_mode)
        assert mode == (0o600 if f.suffix in (".key", ".p12") else 0o644), f
    assert list(pki.clients) == list(ROLES)


def test_each_client_has_a_pkcs12_file_a_browser_imports(tmp_path: Path) -> None:
    pki = create_dev_pki(tmp_path / "dev", now=NOW)
    for role, issued in pki.clients.items():
        blob = (tmp_path / "dev" / f"{role}.p12").read_bytes()
        with pytest.raises(ValueError):
            pkcs12.load_key_and_certificates(blob, b"wrong password")
        key, cert, extra = pkcs12.load_key_and_certificates(blob, DEV_P12_PASSWORD)
        assert cert is not None and key is not None
        assert cert.public_bytes(serialization.Encoding.DER) == der(issued.cert_path)
        assert key.public_key() == cert.public_key()
        assert [c.public_bytes(serialization.Encoding.DER) for c in extra] == [der(pki.ca.cert_path)]


def test_certificates_say_what_they_are_for(tmp_path: Path) -> None:
    pki = create_dev_pki(tmp_path, now=NOW, days=10)
    ca = x509.load_pem_x509_certificate(pki.ca.cert_path.read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.not_valid_after_utc == NOW + timedelta(days=10)
    assert pki.server.principal.sans == ("DNS:localhost", "IP:127.0.0.1")
    server = x509.load_pem_x509_certificate(pki.server.cert_path.read_bytes())
    assert list(server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH]
    for role, c in pki.clients.items():
        p = Principal.from_der(der(c.cert_path))
        assert p == c.principal
        assert p.subject == f"CN=sealtrail-{role},O=sealtrail dev"
        assert p.sans == (f"URI:spiffe://sealtrail.dev/role/{role}",)
        assert p.issuer == "CN=sealtrail dev CA,O=sealtrail dev"
        assert p.fingerprint_sha256 == hashlib.sha256(der(c.cert_path)).hexdigest()
    assert pki.outsider.principal.san_uris == (role_uri("officer"),)  # claims officer ...
    assert pki.outsider.principal.issuer != pki.ca.principal.subject  # ... from another CA


def test_role_map_grants_each_role_certificate_its_role(pki: DevPki) -> None:
    roles = RoleMap.load(pki.roles_file)
    for role, c in pki.clients.items():
        assert roles.roles_for(c.principal) == {role}
    assert roles.roles_for(pki.server.principal) == frozenset()


def test_cryptography_verifier_accepts_roles_and_refuses_the_outsider(pki: DevPki) -> None:
    ca = [pki.ca.cert_path.read_bytes()]
    now = datetime.now(UTC)
    for c in pki.clients.values():
        assert verify_chain(der(c.cert_path), [], ca, now) == c.principal
    with pytest.raises(PrincipalError) as info:
        verify_chain(der(pki.outsider.cert_path), [], ca, now)
    assert info.value.reason == "unknown_ca"
    with pytest.raises(PrincipalError) as info:
        verify_chain(der(pki.server.cert_path), [], ca, now)
    assert info.value.reason == "not_client"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl binary")
def test_openssl_agrees(pki: DevPki) -> None:
    def verify(cert: Path, purpose: str) -> bool:
        res = subprocess.run(["openssl", "verify", "-purpose", purpose, "-CAfile", str(pki.ca.cert_path),
                              str(cert)], capture_output=True, text=True, timeout=30)
        return res.returncode == 0

    assert all(verify(c.cert_path, "sslclient") for c in pki.clients.values())
    assert verify(pki.server.cert_path, "sslserver")
    assert not verify(pki.server.cert_path, "sslclient")
    assert not verify(pki.clients["officer"].cert_path, "sslserver")
    assert not verify(pki.outsider.cert_path, "sslclient")


# --------------------------------------------------------------------------- a real handshake


def server_context(pki: DevPki) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.server.cert_path, pki.server.key_path)
    ctx.load_verify_locations(pki.ca.cert_path)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(pki: DevPki, cert: Path | None, key: Path | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca.cert_path))
    if cert is not None:
        ctx.load_cert_chain(cert, key)
    return ctx


def handshake(pki: DevPki, cert: Path | None, key: Path | None,
              host: str = "localhost") -> tuple[bytes | None, BaseException | None, BaseException | None]:
    """Connect a client to a server over a socket pair; returns (peer DER the server saw,
    server error, client error)."""
    s_sock, c_sock = socket.socketpair()
    for s in (s_sock, c_sock):
        s.settimeout(10)
    seen: list[bytes | None] = [None]
    server_error: list[BaseException | None] = [None]

    def serve() -> None:
        try:
            with server_context(pki).wrap_socket(s_sock, server_side=True) as tls:
                seen[0] = tls.getpeercert(binary_form=True)
                tls.sendall(b"ok")
        except (ssl.SSLError, OSError) as exc:
            server_error[0] = exc
        finally:
            s_sock.close()

    t = threading.Thread(target=serve)
    t.start()
    client_error: BaseException | None = None
    try:
        with client_context(pki, cert, key).wrap_socket(c_sock, server_hostname=host) as tls:
            if tls.recv(2) != b"ok":  # TLS 1.3: a refused client cert shows on the first read
                raise ConnectionError("server closed the connection")
    except (ssl.SSLError, OSError) as exc:
        client_error = exc
    finally:
        c_sock.close()
        t.join(timeout=20)
    assert not t.is_alive()
    return seen[0], server_error[0], client_error


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_mutual_tls_with_a_role_certificate(pki: DevPki, host: str) -> None:
    officer = pki.clients["officer"]
    peer, server_error, client_error = handshake(pki, officer.cert_path, officer.key_path, host)
    assert server_error is None and client_error is None
    assert peer is not None and Principal.from_der(peer) == officer.principal


def test_mutual_tls_refuses_another_cas_certificate(pki: DevPki) -> None:
    peer, server_error, client_error = handshake(pki, pki.outsider.cert_path, pki.outsider.key_path)
    assert peer is None
    assert isinstance(server_error, ssl.SSLError) and "certificate verify failed" in str(server_error)
    assert client_error is not None


def test_mutual_tls_refuses_a_client_without_certificate(pki: DevPki) -> None:
    peer, server_error, client_error = handshake(pki, None, None)
    assert peer is None and isinstance(server_error, ssl.SSLError) and client_error is not None


# --------------------------------------------------------------------------- overwrite, options


def test_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    first = create_dev_pki(tmp_path)
    before = {f: f.read_bytes() for f in first.files}
    with pytest.raises(FileExistsError, match=r"ca\.pem exists; refusing to overwrite"):
        create_dev_pki(tmp_path)
    (tmp_path / "ca.pem").unlink()
    with pytest.raises(FileExistsError, match=r"ca\.key exists"):  # any one file is enough
        create_dev_pki(tmp_path)
    assert {f: f.read_bytes() for f in first.files if f.exists()} == {
        f: b for f, b in before.items() if f.name != "ca.pem" or f.parent != tmp_path}
    first.ca.key_path.chmod(0o644)
    second = create_dev_pki(tmp_path, force=True)
    assert second.ca.principal.fingerprint_sha256 != first.ca.principal.fingerprint_sha256
    assert stat.S_IMODE(second.ca.key_path.stat().st_mode) == 0o600


def test_hosts_and_roles_options(tmp_path: Path) -> None:
    pki = create_dev_pki(tmp_path, hosts=["api.bank.test", "::1", "10.0.0.5"], roles=["scorer"])
    assert pki.server.principal.sans == ("DNS:api.bank.test", "IP:::1", "IP:10.0.0.5")
    assert list(pki.clients) == ["scorer"] and not (tmp_path / "officer.pem").exists()
    assert RoleMap.load(pki.roles_file).roles_for(pki.clients["scorer"].principal) == {"scorer"}
    bad: dict[str, Any]
    for bad in ({"hosts": ["bad host"]}, {"hosts": []}, {"roles": ["janitor"]}, {"days": 0}):
        with pytest.raises(ValueError):
            create_dev_pki(tmp_path / "x", **bad)
        assert not (tmp_path / "x").exists()


# --------------------------------------------------------------------------- the CLI


def test_cli_certs_dev_json_then_refuses_then_force(tmp_path: Path) -> None:
    out = tmp_path / "pki"
    res = runner.invoke(app, ["certs", "dev", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    officer = doc["clients"]["officer"]
    assert officer["fingerprint_sha256"] == hashlib.sha256(der(Path(officer["cert"]))).hexdigest()
    assert officer["sans"] == ["URI:spiffe://sealtrail.dev/role/officer"]
    assert Path(doc["roles_file"]).is_file() and Path(doc["outsider"]["cert"]).parent.name == "other-ca"

    res = runner.invoke(app, ["certs", "dev", "--out", str(out), "--json"])
    assert res.exit_code == 2
    assert json.loads(res.stdout)["error"] == "FileExistsError" and "--force" in res.stdout

    res = runner.invoke(app, ["certs", "dev", "--out", str(out), "--force", "--host", "api.test"])
    assert res.exit_code == 0, res.output
    assert "officer" in res.stdout and str(out / "officer.pem") in res.stdout
    assert Principal.from_pem((out / "server.pem").read_bytes()).sans == ("DNS:api.test",)


def test_cli_certs_dev_bad_host_is_a_usage_error(tmp_path: Path) -> None:
    res = runner.invoke(app, ["certs", "dev", "--out", str(tmp_path), "--host", "no such host"])
    assert res.exit_code == 2 and "not a DNS name or IP address" in res.output


def test_cli_certs_show(pki: DevPki, tmp_path: Path) -> None:
    args = ["certs", "show", "--roles", str(pki.roles_file), "--ca", str(pki.ca.cert_path), "--json"]
    res = runner.invoke(app, [*args, str(pki.clients["approver"].cert_path)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["roles"] == ["approver"] and doc["verified"] is True
    assert doc["fingerprint_sha256"] == pki.clients["approver"].principal.fingerprint_sha256

    res = runner.invoke(app, [*args, str(pki.outsider.cert_path)])
    assert res.exit_code == 1 and json.loads(res.stdout)["error"] == "PrincipalError"

    res = runner.invoke(app, ["certs", "show", "--roles", str(pki.roles_file), str(pki.outsider.cert_path)])
    assert res.exit_code == 0 and "unverified" in res.stdout  # roles shown, flagged as unchecked

    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    assert runner.invoke(app, ["certs", "show", str(junk)]).exit_code == 1
    bad_roles = tmp_path / "roles.toml"
    bad_roles.write_text("[[principal]]\nroles = ['officer']\n")
    res = runner.invoke(app, ["certs", "show", "--roles", str(bad_roles), str(pki.ca.cert_path)])
    assert res.exit_code == 2 and "principal entry 1" in res.output
