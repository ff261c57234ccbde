"""api.roles: the role map file is parsed strictly, and a principal gets the union of the
roles of every entry that matches it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from api.roles import ROLES, RoleMap, RoleMapError, role_map_toml
from audit.decide.principal import Principal

FP = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


def principal(subject: str = "CN=payments-engine,O=Example Bank", uris: tuple[str, ...] = (),
              fingerprint: str = FP) -> Principal:
    return Principal(subject=subject, sans=(*(f"URI:{u}" for u in uris), "DNS:engine.bank.test"),
                     issuer="CN=Bank CA", fingerprint_sha256=fingerprint, serial="1",
                     not_before="2025-01-01T00:00:00Z", not_after="2026-01-01T00:00:00Z")


GOOD = f"""
[[principal]]
san_uri = "spiffe://bank.test/svc/engine"
roles = ["scorer"]

[[principal]]
subject = "2.5.4.3=payments-engine,O=Example Bank"   # a dotted OID is the same attribute
roles = ["scorer", "officer"]

[[principal]]
fingerprint_sha256 = "{":".join(FP[i:i + 2] for i in range(0, 64, 2)).upper()}"
roles = ["admin"]
"""


def test_every_matcher_and_the_union_of_matches() -> None:
    roles = RoleMap.from_toml(GOOD)
    assert [e.matcher for e in roles.entries] == ["san_uri", "subject", "fingerprint_sha256"]
    assert roles.entries[2].value == FP
    everything = principal(uris=("spiffe://bank.test/svc/engine",))
    assert roles.roles_for(everything) == {"scorer", "officer", "admin"}
    assert roles.roles_for(principal(fingerprint="00" * 32)) == {"scorer", "officer"}
    assert roles.roles_for(principal(subject="CN=other", uris=("spiffe://bank.test/svc/engine",),
                                     fingerprint="00" * 32)) == {"scorer"}


def test_no_match_no_roles() -> None:
    roles = RoleMap.from_toml(GOOD)
    assert roles.roles_for(principal(subject="CN=someone", fingerprint="11" * 32)) == frozenset()
    assert roles.roles_for(principal(subject="CN=payments-engine,O=Example Bank Ltd",
                                     fingerprint="11" * 32)) == frozenset()
    # a SAN URI that only starts with the granted one is another identity
    assert roles.roles_for(principal(subject="CN=x", uris=("spiffe://bank.test/svc/engine/2",),
                                     fingerprint="11" * 32)) == frozenset()
    # the DNS SAN of the same text is not a URI SAN
    dns_only = Principal(subject="CN=x", sans=("DNS:spiffe://bank.test/svc/engine",), issuer="CN=CA",
                         fingerprint_sha256="11" * 32, serial="1", not_before="", not_after="")
    assert roles.roles_for(dns_only) == frozenset()
    assert RoleMap.from_toml("").roles_for(principal()) == frozenset()


def test_a_local_principal_matches_nothing() -> None:
    roles = RoleMap.from_toml('[[principal]]\nsubject = "CN=local:alice"\nroles = ["admin"]\n')
    assert roles.roles_for(Principal.local("alice")) == frozenset()


@pytest.mark.parametrize(("text", "message"), [
    ('[[principal]]\nsan_uri = "x"\nroles = ["officer"]\ncomment = "hi"\n',
     "principal entry 1: unknown field 'comment'"),
    ('[[principal]]\nsan_uri = "x"\nroles = ["janitor"]\n',
     "principal entry 1: field 'roles': unknown role 'janitor'"),
    ('[[principal]]\nroles = ["officer"]\n', "principal entry 1: needs exactly one of san_uri, subject"),
    ('[[principal]]\nsan_uri = "x"\nsubject = "CN=x"\nroles = ["officer"]\n',
     "principal entry 1: needs exactly one of san_uri, subject, fingerprint_sha256, got san_uri, subject"),
    ('[[principal]]\nsan_uri = "x"\nroles = []\n',
     "principal entry 1: field 'roles' must be a non-empty list"),
    ('[[principal]]\nsan_uri = "x"\nroles = "officer"\n', "principal entry 1: field 'roles' must be"),
    ('[[principal]]\nsan_uri = "x"\n', "principal entry 1: field 'roles' must be"),
    ('[[principal]]\nsan_uri = "x"\nroles = [1]\n', "principal entry 1: field 'roles' must be"),
    ('[[principal]]\nsan_uri = ""\nroles = ["officer"]\n', "field 'san_uri' must be a non-empty string"),
    ('[[principal]]\nsan_uri = 3\nroles = ["officer"]\n', "field 'san_uri' must be a non-empty string"),
    ('[[principal]]\nfingerprint_sha256 = "abcd"\nroles = ["officer"]\n',
     "field 'fingerprint_sha256' must be 64 hex digits"),
    ('[[principal]]\nsubject = "no equals sign"\nroles = ["officer"]\n',
     "field 'subject' is not an RFC 4514 name"),
    ('[[principal]]\nsubject = "CN=x, O=y"\nroles = ["officer"]\n', "no spaces after commas"),
    ('[[principal]]\nsan_uri = "a"\nroles = ["officer"]\n[[principal]]\nsan_uri = "b"\nroles = ["boss"]\n',
     "principal entry 2: field 'roles': unknown role 'boss'"),
    ('[roles]\nofficer = "x"\n', "unknown top-level key 'roles'"),
    ('principal = "x"\n', "'principal' must be an array of tables"),
    ('[[principal]\n', "not valid TOML"),
])
def test_bad_files_are_refused_naming_entry_and_field(text: str, message: str) -> None:
    with pytest.raises(RoleMapError) as info:
        RoleMap.from_toml(text)
    assert message in str(info.value)


def test_load_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(RoleMapError, match=r"missing\.toml: cannot read role map"):
        RoleMap.load(tmp_path / "missing.toml")
    bad = tmp_path / "roles.toml"
    bad.write_text('[[principal]]\nsan_uri = "x"\nroles = ["root"]\n')
    with pytest.raises(RoleMapError, match=r"roles\.toml: principal entry 1: field 'roles'"):
        RoleMap.load(bad)
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(RoleMapError, match="cannot read role map"):
        RoleMap.load(bad)


def test_rendered_map_round_trips(tmp_path: Path) -> None:
    grants = [("san_uri", f"spiffe://x/{r}", [r]) for r in ROLES] + [
        ("subject", 'CN=quote \\" and \\\\ back,O=x', ["regulator", "officer"]),
        ("fingerprint_sha256", FP, ["admin"])]
    path = tmp_path / "roles.toml"
    path.write_text(role_map_toml(grants))
    roles = RoleMap.load(path)
    assert [(e.matcher, sorted(e.roles)) for e in roles.entries] == [(m, sorted(r)) for m, _, r in grants]
    assert roles.roles_for(principal(uris=("spiffe://x/approver",), fingerprint=FP)) == {"approver", "admin"}
    odd = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "x"),
                     x509.NameAttribute(NameOID.COMMON_NAME, 'quote " and \\ back')]).rfc4514_string()
    assert roles.roles_for(principal(subject=odd, fingerprint="00" * 32)) == {"regulator", "officer"}
    with pytest.raises(ValueError, match="unknown matcher"):
        role_map_toml([("issuer", "CN=x", ["admin"])])
