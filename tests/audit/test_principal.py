"""audit.decide.principal: parsing a certificate into the principal a record binds, and verifying a
forwarded client chain (proxy mode) against the trusted CA(s) at an injected time.

Certificates are built here with cryptography directly, independent of api.certs."""

from __future__ import annotations

import hashlib
import ipaddress
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

from audit.decide.principal import ChainVerifier, Principal, verify_chain
from audit.errors import PrincipalError

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
DER = serialization.Encoding.DER
PEM = serialization.Encoding.PEM


@dataclass
class Pair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def der(self) -> bytes:
        return self.cert.public_bytes(DER)

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(PEM)


def name(cn: str, org: str = "test org") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make(subject: x509.Name, issuer: Pair | None, *, ca: bool, path_length: int | None = None,
         eku: list[x509.ObjectIdentifier] | None = None, sans: list[x509.GeneralName] | None = None,
         start: datetime = NOW - timedelta(days=1), days: int = 30, serial: int | None = None) -> Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    signer_key = issuer.key if issuer else key
    issuer_name = issuer.cert.subject if issuer else subject
    issuer_pub = issuer.key.public_key() if issuer else key.public_key()
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name)
         .public_key(key.public_key()).serial_number(serial or x509.random_serial_number())
         .not_valid_before(start).not_valid_after(start + timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=path_length if ca else None), critical=True)
         .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                      key_encipherment=False, data_encipherment=False,
                                      key_agreement=False, key_cert_sign=ca, crl_sign=ca,
                                      encipher_only=False, decipher_only=False),
                        critical=True)
         .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
         .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_pub), critical=False))
    if eku:
        b = b.add_extension(x509.ExtendedKeyUsage(eku), critical=False)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Pair(b.sign(signer_key, hashes.SHA256()), key)


def root(cn: str = "Test Root CA") -> Pair:
    return make(name(cn), None, ca=True, days=3650, start=NOW - timedelta(days=365))


def client(issuer: Pair, cn: str = "svc-officer", **kw: object) -> Pair:
    kw.setdefault("eku", [ExtendedKeyUsageOID.CLIENT_AUTH])
    kw.setdefault("sans", [x509.UniformResourceIdentifier("spiffe://test/role/officer")])
    return make(name(cn), issuer, ca=False, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def ca() -> Pair:
    return root()


# --------------------------------------------------------------------------- parsing


def test_from_der_reads_every_field(ca: Pair) -> None:
    sans: list[x509.GeneralName] = [
        x509.UniformResourceIdentifier("spiffe://sealtrail.dev/role/officer"),
        x509.DNSName("host.example"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
        x509.RFC822Name("ops@example.com"),
        x509.DirectoryName(name("dir")),
        x509.RegisteredID(ObjectIdentifier("1.2.3.4")),
        x509.OtherName(ObjectIdentifier("1.3.6.1.4.1.311.20.2.3"), b"\x0c\x03abc"),
    ]
    leaf = client(ca, "officer, the first", sans=sans, serial=0x0ABC)
    p = Principal.from_der(leaf.der)
    assert p.subject == "CN=officer\\, the first,O=test org"  # RFC 4514: most specific first, escaped
    assert p.issuer == "CN=Test Root CA,O=test org"
    assert p.sans == ("URI:spiffe://sealtrail.dev/role/officer", "DNS:host.example", "IP:127.0.0.1", "IP:::1",
                      "email:ops@example.com", "dirName:CN=dir,O=test org", "RID:1.2.3.4",
                      "otherName:1.3.6.1.4.1.311.20.2.3;hex:0c03616263")
    assert p.fingerprint_sha256 == hashlib.sha256(leaf.cert.public_bytes(DER)).hexdigest()
    assert p.serial == "abc"
    assert p.not_before == "2025-05-31T12:00:00Z" and p.not_after == "2025-06-30T12:00:00Z"
    assert p.san_uris == ("spiffe://sealtrail.dev/role/officer",)
    assert not p.is_local


def test_from_pem_matches_from_der_and_accepts_text(ca: Pair) -> None:
    leaf = client(ca)
    assert Principal.from_pem(leaf.pem) == Principal.from_der(leaf.der)
    assert Principal.from_pem(leaf.pem.decode()) == Principal.from_der(leaf.der)


def test_to_json_has_the_record_keys_and_is_json(ca: Pair) -> None:
    doc = Principal.from_der(client(ca).der).to_json()
    assert list(doc) == ["subject", "sans", "issuer", "fingerprint_sha256", "serial"]
    assert json.loads(json.dumps(doc)) == doc and doc["sans"] == ["URI:spiffe://test/role/officer"]


def test_no_san_extension_gives_no_sans(ca: Pair) -> None:
    leaf = make(name("plain"), ca, ca=False, eku=[ExtendedKeyUsageOID.CLIENT_AUTH])
    assert Principal.from_der(leaf.der).sans == ()


@pytest.mark.parametrize("garbage", [b"", b"not a certificate", b"\x30\x82\x01\x00" + b"\x00" * 10,
                                     b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"])
def test_garbage_der_is_refused(garbage: bytes) -> None:
    with pytest.raises(PrincipalError) as info:
        Principal.from_der(garbage)
    assert info.value.reason == "malformed" and "DER X.509" in str(info.value)


def test_truncated_der_is_refused(ca: Pair) -> None:
    with pytest.raises(PrincipalError, match=r"not a DER X\.509 certificate"):
        Principal.from_der(client(ca).der[:-7])


def test_non_bytes_are_refused() -> None:
    with pytest.raises(PrincipalError, match="expected DER bytes, got str"):
        Principal.from_der("MIIB...")  # type: ignore[arg-type]


def test_pem_garbage_key_and_bundles_are_refused(ca: Pair) -> None:
    key_pem = ca.key.private_bytes(PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    for bad in (b"", b"hello", key_pem):
        with pytest.raises(PrincipalError, match=r"not a PEM X\.509 certificate"):
            Principal.from_pem(bad)
    with pytest.raises(PrincipalError, match="expected one PEM certificate, found 2"):
        Principal.from_pem(ca.pem + client(ca).pem)


def test_local_principal_says_nothing_was_verified() -> None:
    p = Principal.local("alice")
    assert p.to_json() == {"subject": "CN=local:alice", "sans": ["local:cli"], "issuer": "",
                           "fingerprint_sha256": "", "serial": ""}
    assert p.is_local and p.san_uris == ()
    assert Principal.local("a,b").subject == "CN=local:a\\,b"
    with pytest.raises(PrincipalError):
        Principal.local("")


# --------------------------------------------------------------------------- chain verification


def test_verify_chain_accepts_a_client_of_the_trusted_ca(ca: Pair) -> None:
    leaf = client(ca)
    assert verify_chain(leaf.der, [], [ca.pem], NOW) == Principal.from_der(leaf.der)
    assert verify_chain(leaf.der, [], [ca.pem.decode()], NOW).subject == "CN=svc-officer,O=test org"


def test_verify_chain_through_an_intermediate() -> None:
    top = make(name("Root"), None, ca=True, path_length=1, days=3650, start=NOW - timedelta(days=9))
    mid = make(name("Issuing CA"), top, ca=True, path_length=0, days=365, start=NOW - timedelta(days=9))
    leaf = client(mid)
    assert verify_chain(leaf.der, [mid.der], [top.pem], NOW).issuer == "CN=Issuing CA,O=test org"
    with pytest.raises(PrincipalError) as info:
        verify_chain(leaf.der, [], [top.pem], NOW)
    assert info.value.reason == "unknown_ca"


def test_a_bundle_of_several_cas_trusts_each(ca: Pair) -> None:
    other = root("Second CA")
    bundle = ca.pem + other.pem
    for issuer in (ca, other):
        verify_chain(client(issuer).der, [], [bundle], NOW)


def test_another_cas_client_is_refused(ca: Pair) -> None:
    stranger = root("Stranger CA")
    with pytest.raises(PrincipalError) as info:
        verify_chain(client(stranger).der, [], [ca.pem], NOW)
    assert info.value.reason == "unknown_ca" and "CN=Stranger CA" in str(info.value)


def test_a_ca_that_copies_the_trusted_name_is_refused(ca: Pair) -> None:
    impostor = root("Test Root CA")  # same subject name, different key
    with pytest.raises(PrincipalError) as info:
        verify_chain(client(impostor).der, [], [ca.pem], NOW)
    assert info.value.reason == "untrusted"


def test_expired_and_not_yet_valid_at_the_injected_time(ca: Pair) -> None:
    leaf = client(ca, start=NOW - timedelta(days=10), days=5)
    with pytest.raises(PrincipalError) as info:
        verify_chain(leaf.der, [], [ca.pem], NOW)
    assert info.value.reason == "expired" and "expired at 2025-05-27T12:00:00Z" in str(info.value)
    assert verify_chain(leaf.der, [], [ca.pem], NOW - timedelta(days=7)).serial  # valid back then
    with pytest.raises(PrincipalError) as info:
        verify_chain(leaf.der, [], [ca.pem], NOW - timedelta(days=11))
    assert info.value.reason == "not_yet_valid"


def test_the_verifier_checks_the_time_not_only_the_prechecks(ca: Pair) -> None:
    # the CA itself has expired while the leaf is still valid: only path validation sees it
    old_ca = make(name("Old CA"), None, ca=True, start=NOW - timedelta(days=100), days=50)
    leaf = client(old_ca, start=NOW - timedelta(days=60), days=90)
    with pytest.raises(PrincipalError) as info:
        verify_chain(leaf.der, [], [old_ca.pem], NOW)
    assert info.value.reason == "untrusted"
    verify_chain(leaf.der, [], [old_ca.pem], NOW - timedelta(days=55))


def test_a_server_only_certificate_is_not_a_client(ca: Pair) -> None:
    server = client(ca, "server", eku=[ExtendedKeyUsageOID.SERVER_AUTH], sans=[x509.DNSName("localhost")])
    with pytest.raises(PrincipalError) as info:
        verify_chain(server.der, [], [ca.pem], NOW)
    assert info.value.reason == "not_client" and "clientAuth" in str(info.value)


def test_a_ca_certificate_is_not_a_client(ca: Pair) -> None:
    with pytest.raises(PrincipalError) as info:
        verify_chain(ca.der, [], [ca.pem], NOW)
    assert info.value.reason == "untrusted"


def test_a_tampered_certificate_is_refused(ca: Pair) -> None:
    der = bytearray(client(ca, "svc-officer").der)
    at = der.find(b"svc-officer")
    der[at] ^= 0x01  # "svc" -> "rvc": still parses, the signature no longer matches
    with pytest.raises(PrincipalError) as info:
        verify_chain(bytes(der), [], [ca.pem], NOW)
    assert info.value.reason == "untrusted" and "signature" in str(info.value)


def test_garbage_in_the_chain_is_malformed(ca: Pair) -> None:
    for leaf, mids in ((b"junk", []), (client(ca).der, [b"junk"])):
        with pytest.raises(PrincipalError) as info:
            verify_chain(leaf, mids, [ca.pem], NOW)
        assert info.value.reason == "malformed"


def test_trust_anchors_must_be_cas(ca: Pair) -> None:
    with pytest.raises(PrincipalError) as info:
        verify_chain(client(ca).der, [], [], NOW)
    assert info.value.reason == "no_trust_anchor"
    with pytest.raises(PrincipalError) as info:
        ChainVerifier.from_pems([client(ca).pem])
    assert info.value.reason == "no_trust_anchor" and "not a CA" in str(info.value)
    with pytest.raises(PrincipalError) as info:
        ChainVerifier.from_pems([b"garbage"])
    assert info.value.reason == "malformed"


def test_the_verifier_is_reusable_and_wants_an_aware_clock(ca: Pair) -> None:
    v = ChainVerifier.from_pems([ca.pem])
    leaf = client(ca, start=NOW - timedelta(days=1), days=2)
    assert v.verify(leaf.der, [], NOW).fingerprint_sha256 == hashlib.sha256(leaf.der).hexdigest()
    with pytest.raises(PrincipalError):
        v.verify(leaf.der, [], NOW + timedelta(days=3))
    with pytest.raises(ValueError, match="timezone-aware"):
        v.verify(leaf.der, [], NOW.replace(tzinfo=None))
