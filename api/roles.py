"""Roles, and the settings file that grants them to certificate principals.

The role map is a TOML file of ``[[principal]]`` entries. Each entry names exactly one
matcher and the roles it grants::

    [[principal]]
    san_uri = "spiffe://sealtrail.dev/role/officer"   # a URI subjectAltName of the certificate
    roles = ["officer"]

    [[principal]]
    subject = "CN=payments-engine,O=Example Bank"     # the RFC 4514 subject, as `certs show` prints it
    roles = ["scorer"]

    [[principal]]
    fingerprint_sha256 = "9f86d0...0a08"              # SHA-256 of the DER certificate (hex, ':' allowed)
    roles = ["admin"]

Matching: a principal gets the union of the roles of **every** entry that matches it; there is
no precedence and no deny. No match means no roles. Matching assumes the certificate was
already verified (TLS handshake or :func:`audit.decide.principal.verify_chain`); a local CLI principal
(no certificate) matches nothing. Unknown keys, unknown roles, an entry with no or several
matchers, or an empty role list are refused, naming the entry and field.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509

from audit.decide.principal import Principal
from wasm_rules.language import check_toml_nesting

__all__ = ["MATCHERS", "ROLES", "RoleEntry", "RoleMap", "RoleMapError", "normalise_subject", "role_map_toml"]

ROLES = ("scorer", "officer", "approver", "regulator", "admin")
MATCHERS = ("san_uri", "subject", "fingerprint_sha256")
_HEX64 = re.compile(r"[0-9a-f]{64}")


class RoleMapError(ValueError):
    """The role map file is unreadable or breaks the format; the message names where."""


def normalise_subject(subject: str) -> str:
    """The RFC 4514 form cryptography prints (dotted OIDs become names, escapes are canonical).
    Strict RFC 4514: upper-case attribute types, no spaces around separators."""
    return x509.Name.from_rfc4514_string(subject).rfc4514_string()


@dataclass(frozen=True)
class RoleEntry:
    matcher: str  # one of MATCHERS
    value: str  # normalised: subject as RFC 4514, fingerprint as lower-case hex without ':'
    roles: frozenset[str]

    def matches(self, p: Principal) -> bool:
        if p.is_local:
            return False
        if self.matcher == "san_uri":
            return self.value in p.san_uris
        if self.matcher == "subject":
            return self.value == p.subject
        return self.value == p.fingerprint_sha256


def _entry(i: int, raw: Any) -> RoleEntry:
    where = f"principal entry {i + 1}"
    if not isinstance(raw, dict):
        raise RoleMapError(f"{where}: expected a table, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {*MATCHERS, "roles"})
    if unknown:
        allowed = ", ".join((*MATCHERS, "roles"))
        raise RoleMapError(f"{where}: unknown field {unknown[0]!r} (allowed: {allowed})")
    given = [m for m in MATCHERS if m in raw]
    if len(given) != 1:
        raise RoleMapError(f"{where}: needs exactly one of {', '.join(MATCHERS)}"
                           + (f", got {', '.join(given)}" if given else ""))
    matcher = given[0]
    value = raw[matcher]
    if not isinstance(value, str) or not value:
        raise RoleMapError(f"{where}: field {matcher!r} must be a non-empty string")
    if matcher == "subject":
        try:
            value = normalise_subject(value)
        except ValueError as exc:
            raise RoleMapError(f"{where}: field 'subject' is not an RFC 4514 name {value!r} (write it as "
                               "'sealtrail certs show' prints it: 'CN=...,O=...', no spaces after commas)"
                               ) from exc
    elif matcher == "fingerprint_sha256":
        value = value.replace(":", "").lower()
        if not _HEX64.fullmatch(value):
            raise RoleMapError(f"{where}: field 'fingerprint_sha256' must be 64 hex digits")
    roles = raw.get("roles")
    if not isinstance(roles, list) or not roles or not all(isinstance(r, str) for r in roles):
        raise RoleMapError(f"{where}: field 'roles' must be a non-empty list of role names")
    bad = [r for r in roles if r not in ROLES]
    if bad:
        raise RoleMapError(f"{where}: field 'roles': unknown role {bad[0]!r} (known: {', '.join(ROLES)})")
    return RoleEntry(matcher, value, frozenset(roles))


@dataclass(frozen=True)
class RoleMap:
    """Principal -> roles, as the settings file grants them."""

    entries: tuple[RoleEntry, ...]

    @classmethod
    def from_toml(cls, text: str) -> RoleMap:
        try:
            check_toml_nesting(text, RoleMapError)  # before tomllib, which recurses per level
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise RoleMapError(f"not valid TOML: {exc}") from exc
        unknown = sorted(set(doc) - {"principal"})
        if unknown:
            raise RoleMapError(f"unknown top-level key {unknown[0]!r} (expected [[principal]] entries)")
        raw = doc.get("principal", [])
        if not isinstance(raw, list):
            raise RoleMapError("'principal' must be an array of tables ([[principal]])")
        return cls(tuple(_entry(i, e) for i, e in enumerate(raw)))

    @classmethod
    def load(cls, path: Path) -> RoleMap:
        """Parse a role map file; :class:`RoleMapError` names the file and the fault."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RoleMapError(f"{path}: cannot read role map: {exc}") from exc
        try:
            return cls.from_toml(text)
        except RoleMapError as exc:
            raise RoleMapError(f"{path}: {exc}") from exc

    def roles_for(self, principal: Principal) -> frozenset[str]:
        """The union of the roles of every matching entry (empty when none matches)."""
        roles: set[str] = set()
        for e in self.entries:
            if e.matches(principal):
                roles |= e.roles
        return frozenset(roles)


def role_map_toml(grants: Iterable[tuple[str, str, Iterable[str]]]) -> str:
    """Render ``(matcher, value, roles)`` triples as a role map file (what ``certs dev`` writes)."""
    lines = ["# sealtrail role map: each [[principal]] entry grants roles to the certificates it",
             "# matches (exactly one of san_uri, subject, fingerprint_sha256). A principal gets the",
             "# union of the roles of every matching entry; no match, no roles.", ""]
    for matcher, value, roles in grants:
        if matcher not in MATCHERS:
            raise ValueError(f"unknown matcher {matcher!r}")
        role_list = ", ".join(f'"{r}"' for r in roles)
        lines += ["[[principal]]", f'{matcher} = "{_toml_escape(value)}"', f"roles = [{role_list}]", ""]
    return "\n".join(lines)


def _toml_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')
