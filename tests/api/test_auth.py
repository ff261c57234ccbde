"""api.auth: the principal comes from the TLS peer certificate, or from a proxy header only
when enabled, only from trusted addresses, and only after the chain verifies again."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.serialization import Encoding

from api.auth import Authenticator, AuthError, ProxyTrust, parse_forwarded_certs
from api.certs import DevPki, create_dev_pki
from api.roles import RoleMap
from api.server import TLS_PEER_DER

HEADER = "x-client-cert"
PROXY = "192.0.2.10"  # documentation range: no traffic is sent, only the scope names it


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> DevPki:
    return create_dev_pki(tmp_path_factory.mktemp("pki"))


def pem(path: Path) -> str:
    return path.read_text()


def der(path: Path) -> bytes:
    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(Encoding.DER)


def auth(pki: DevPki, proxy: bool = True) -> Authenticator:
    trust = ProxyTrust.of(HEADER, [f"{PROXY}/32"], pki.ca.cert_path.read_bytes()) if proxy else None
    return Authenticator(RoleMap.load(pki.roles_file), trust)


def scope(host: str, peer: bytes | None = None) -> dict[str, object]:
    s: dict[str, object] = {"type": "http", "client": (host, 40000)}
    if peer is not None:
        s["extensions"] = {"tls": {TLS_PEER_DER: peer}}
    return s


def test_the_tls_peer_certificate_names_the_caller(pki: DevPki) -> None:
    c = auth(pki, proxy=False).caller(scope("127.0.0.1", der(pki.clients["officer"].cert_path)), {})
    assert c.via == "tls" and c.roles == frozenset({"officer"})
    cert = x509.load_pem_x509_certificate(pki.clients["officer"].cert_path.read_bytes())
    assert c.principal.fingerprint_sha256 == cert.fingerprint(hashes.SHA256()).hex()


def test_no_certificate_is_401(pki: DevPki) -> None:
    with pytest.raises(AuthError) as e:
        auth(pki, proxy=False).caller(scope("127.0.0.1"),
                                      {HEADER: quote(pem(pki.clients["admin"].cert_path))})
    assert e.value.status == 401 and e.value.reason == "no_certificate"


@pytest.mark.parametrize("form", ["nginx", "xfcc"])
def test_a_trusted_proxy_forwards_a_certificate_that_is_verified_again(pki: DevPki, form: str) -> None:
    cert = pem(pki.clients["regulator"].cert_path)
    value = quote(cert) if form == "nginx" else f'By=spiffe://proxy;Hash=ab;Cert="{quote(cert)}";URI=x'
    c = auth(pki).caller(scope(PROXY), {HEADER: value})
    assert c.via == "proxy" and c.roles == frozenset({"regulator"})


def test_a_proxy_header_from_an_untrusted_address_is_refused_not_ignored(pki: DevPki) -> None:
    value = quote(pem(pki.clients["admin"].cert_path))
    with pytest.raises(AuthError) as e:
        auth(pki).caller(scope("127.0.0.1"), {HEADER: value})
    assert e.value.status == 401 and e.value.reason == "untrusted_proxy"
    with pytest.raises(AuthError) as e:  # even beside a valid TLS certificate of its own
        auth(pki).caller(scope("127.0.0.1", der(pki.clients["scorer"].cert_path)), {HEADER: value})
    assert e.value.reason == "untrusted_proxy"


def test_a_forwarded_certificate_from_another_ca_is_refused(pki: DevPki) -> None:
    with pytest.raises(AuthError) as e:
        auth(pki).caller(scope(PROXY), {HEADER: quote(pem(pki.outsider.cert_path))})
    assert e.value.status == 401 and "refused" in str(e.value)


@pytest.mark.parametrize("value", ["", "garbage", "By=x;Hash=y",
                                   quote("-----BEGIN CERTIFICATE-----\nAAAA\n")])
def test_an_unreadable_forwarded_header_is_refused(pki: DevPki, value: str) -> None:
    with pytest.raises(AuthError) as e:
        auth(pki).caller(scope(PROXY), {HEADER: value})
    assert e.value.status == 401 and e.value.reason == "bad_forwarded_certificate"


def test_parse_forwarded_takes_the_first_xfcc_element_and_its_chain(pki: DevPki) -> None:
    leaf, ca = pem(pki.clients["officer"].cert_path), pem(pki.ca.cert_path)
    value = f'Cert="{quote(leaf)}";Chain="{quote(leaf + ca)}",Cert="{quote(pem(pki.outsider.cert_path))}"'
    got_leaf, rest = parse_forwarded_certs(value)
    assert got_leaf == der(pki.clients["officer"].cert_path) and rest == [der(pki.ca.cert_path)]


def test_proxy_trust_needs_addresses_and_valid_ones(pki: DevPki) -> None:
    ca = pki.ca.cert_path.read_bytes()
    with pytest.raises(ValueError, match="trusted_proxies"):
        ProxyTrust.of(HEADER, [], ca)
    with pytest.raises(ValueError, match="trusted_proxies"):
        ProxyTrust.of(HEADER, ["not-an-address"], ca)
