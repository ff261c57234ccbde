"""api.auth: the principal comes from the TLS peer certificate, or from a proxy header only
when enabled, only from trusted addresses, and only after the chain verifies again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from starlette.datastructures import Headers

from api.auth import Authenticator, AuthError, ProxyTrust, parse_forwarded_certs, split_xfcc
from api.certs import DevPki, create_dev_pki, role_uri
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


def test_parse_forwarded_takes_the_last_xfcc_element_and_its_chain(pki: DevPki) -> None:
    # Envoy appends the element of the connection it verified after whatever the request carried.
    leaf, ca = pem(pki.clients["officer"].cert_path), pem(pki.ca.cert_path)
    value = (f'Cert="{quote(pem(pki.clients["admin"].cert_path))}",'
             f'By=spiffe://proxy;Cert="{quote(leaf)}";Chain="{quote(leaf + ca)}";Subject="CN=x,O=y"')
    got_leaf, rest = parse_forwarded_certs(value)
    assert got_leaf == der(pki.clients["officer"].cert_path) and rest == [der(pki.ca.cert_path)]


def test_split_xfcc_reads_quoted_commas_semicolons_and_escapes() -> None:
    value = 'By=spiffe://a;Hash=01;Subject="CN=a\\"b,O=c;d";URI=,DNS=x;Cert="%2D%2D"'
    assert split_xfcc(value) == [{"By": "spiffe://a", "Hash": "01", "Subject": 'CN=a"b,O=c;d', "URI": ""},
                                 {"DNS": "x", "Cert": "%2D%2D"}]
    with pytest.raises(ValueError, match="unclosed quote"):
        split_xfcc('Cert="abc')


# -- a client's own writing never names the caller ---------------------------------------------


def test_a_peer_certificate_wins_over_a_header_even_from_a_trusted_proxy_address(pki: DevPki) -> None:
    # The hostile case: a scorer on a trusted proxy's address, over mutual TLS with its own
    # certificate, sends the admin's (public) certificate in the header.
    for value in (quote(pem(pki.clients["admin"].cert_path)),
                  f'Cert="{quote(pem(pki.clients["admin"].cert_path))}"'):
        c = auth(pki).caller(scope(PROXY, der(pki.clients["scorer"].cert_path)), {HEADER: value})
        assert c.via == "tls" and c.roles == frozenset({"scorer"})


def test_xfcc_elements_a_client_wrote_before_the_proxys_are_not_read(pki: DevPki) -> None:
    admin, scorer = (quote(pem(pki.clients[r].cert_path)) for r in ("admin", "scorer"))
    c = auth(pki).caller(scope(PROXY), {HEADER: f'Cert="{admin}",By=spiffe://proxy;Cert="{scorer}"'})
    assert c.roles == frozenset({"scorer"})
    # The last element has no certificate: refused, never the client's element instead.
    with pytest.raises(AuthError) as e:
        auth(pki).caller(scope(PROXY), {HEADER: f'Cert="{admin}",By=spiffe://proxy;Hash=ab'})
    assert e.value.status == 401 and e.value.reason == "bad_forwarded_certificate"


def test_a_header_sent_twice_is_refused(pki: DevPki) -> None:
    admin, scorer = (quote(pem(pki.clients[r].cert_path)).encode() for r in ("admin", "scorer"))
    headers = Headers(raw=[(HEADER.encode(), admin), (HEADER.encode(), scorer)])
    with pytest.raises(AuthError) as e:
        auth(pki).caller(scope(PROXY), headers)
    assert e.value.reason == "bad_forwarded_certificate" and "2 times" in str(e.value)


# -- extendedKeyUsage: a client certificate must say clientAuth ----------------------------------


def issue_from_dev_ca(ca_pem: Path, ca_key_pem: Path, eku: list[x509.ObjectIdentifier] | None,
                      role: str = "admin") -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate (and its key) from the dev CA naming ``role``'s SAN, with extendedKeyUsage
    ``eku`` (None: no such extension): what a careless or hostile issuance would give."""
    ca_key = serialization.load_pem_private_key(ca_key_pem.read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca = x509.load_pem_x509_certificate(ca_pem.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    b = (x509.CertificateBuilder()
         .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"no-client-eku {role}")]))
         .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
         .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(role_uri(role))]), False)
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
         .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                      key_encipherment=False, data_encipherment=False, key_agreement=False,
                                      key_cert_sign=False, crl_sign=False, encipher_only=False,
                                      decipher_only=False), True)
         .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
         .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False))
    if eku is not None:
        b = b.add_extension(x509.ExtendedKeyUsage(eku), False)
    return b.sign(ca_key, hashes.SHA256()), key


def issue(pki: DevPki, eku: list[x509.ObjectIdentifier] | None) -> x509.Certificate:
    return issue_from_dev_ca(pki.ca.cert_path, pki.ca.key_path, eku)[0]


@pytest.mark.parametrize(("eku", "says"), [(None, "has no extendedKeyUsage"),
                                           ([ExtendedKeyUsageOID.SERVER_AUTH], "lacks clientAuth")])
def test_a_certificate_not_issued_for_client_auth_is_refused(
        pki: DevPki, eku: list[x509.ObjectIdentifier] | None, says: str) -> None:
    cert = issue(pki, eku)
    with pytest.raises(AuthError) as e:  # as the TLS connection's peer
        auth(pki, proxy=False).caller(scope("127.0.0.1", cert.public_bytes(Encoding.DER)), {})
    assert e.value.status == 401 and e.value.reason == "not_client" and says in str(e.value)
    with pytest.raises(AuthError) as e:  # forwarded by a trusted proxy
        auth(pki).caller(scope(PROXY), {HEADER: quote(cert.public_bytes(Encoding.PEM).decode())})
    assert e.value.status == 401 and e.value.reason == "not_client" and says in str(e.value)


def test_proxy_trust_needs_addresses_and_valid_ones(pki: DevPki) -> None:
    ca = pki.ca.cert_path.read_bytes()
    with pytest.raises(ValueError, match="trusted_proxies"):
        ProxyTrust.of(HEADER, [], ca)
    with pytest.raises(ValueError, match="trusted_proxies"):
        ProxyTrust.of(HEADER, ["not-an-address"], ca)
