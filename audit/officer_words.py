"""Officers' words and identities as sealed records state them, checked: the note or rationale
an officer writes, and the principal that wrote it.

Shared by annotations, case events, list loads and clearances (``audit.annotations``,
``audit.cases.events``, ``audit.screening``). It imports
nothing that needs a database: the offline bundle verifier re-checks case events with it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

from audit.decide.principal import Principal
from audit.errors import AnnotationError

__all__ = ["checked_text", "principal_json", "signed_act"]

_PRINCIPAL_KEYS = {"subject": str, "sans": list, "issuer": str, "fingerprint_sha256": str, "serial": str}
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): they make a
# note display in another order than it is sealed in (the "Trojan Source" reordering).
_ESCAPED_CONTROL = re.compile(r"\\(?:[01][0-9a-fA-F]|7[fF])")
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def principal_json(principal: Principal | Mapping[str, Any], *, spki: bool = False) -> dict[str, Any]:
    """A principal as sealed records state it, checked (officer records: annotations, case events):
    the fingerprint is a SHA-256 in lower-case hex, or empty for the local CLI principal. With
    ``spki``, the SHA-256 of the certificate's public key (``spki_sha256``) is kept where known,
    as governance records keep it, so four-eyes knows one key under two certificates."""
    if isinstance(principal, Principal):
        out = principal.to_json()
        if spki and principal.spki_sha256:
            out["spki_sha256"] = principal.spki_sha256
        return out
    keyed = spki and isinstance(principal, Mapping) and "spki_sha256" in principal
    extra = {"spki_sha256"} if keyed else set()
    if not isinstance(principal, Mapping) or set(principal) != set(_PRINCIPAL_KEYS) | extra or not all(
            isinstance(principal[k], t) for k, t in _PRINCIPAL_KEYS.items()):
        raise AnnotationError("principal", "must be a Principal or its to_json() "
                                           f"({', '.join(_PRINCIPAL_KEYS)})")
    for key in ("subject", "issuer"):  # shown to people and sealed for years, as a note is; a name
        # has no line breaks, and no escaped control byte either (RFC 4514 "\\0a")
        bad = _unsafe(principal[key], lines=False)
        escaped = _ESCAPED_CONTROL.search(principal[key])
        if bad is None and escaped is not None:
            bad = f"escaped control byte {escaped.group(0)}"
        if bad is not None:
            raise AnnotationError("principal", f"{key} holds the {bad}")
    for key in ("fingerprint_sha256", *extra):
        value = principal[key]
        if not (value == "" and key == "fingerprint_sha256") and not (
                isinstance(value, str) and _SHA256.fullmatch(value)):
            raise AnnotationError("principal", f"{key} must be a SHA-256 in lower-case hex")
    return dict(principal)


def _unsafe(value: str, *, lines: bool = True) -> str | None:
    """What makes ``value`` unsafe to seal and show (a control character, newline and tab allowed
    where ``lines``, or a bidirectional control that shows it in another order than it is sealed
    in), or None."""
    allowed = "\n\t" if lines else ""
    bad = next((c for c in value if (ord(c) < 0x20 and c not in allowed) or 0x7F <= ord(c) < 0xA0
                or c in _BIDI_CONTROLS), None)
    if bad is None:
        return None
    what = "bidirectional control" if bad in _BIDI_CONTROLS else "control character"
    return f"{what} U+{ord(bad):04X} at {value.index(bad)}"


def checked_text(value: object, name: str, most: int) -> str:
    """Officer's words as sealed: non-empty, at most ``most`` characters, no control or bidi codes."""
    if not isinstance(value, str) or not "".join(
            c for c in value if not c.isspace() and unicodedata.category(c) != "Cf"):
        raise AnnotationError(name, "must be non-empty text (a visible character at least)")
    if len(value) > most:
        raise AnnotationError(name, f"is {len(value):,} characters, more than {most:,}")
    bad = _unsafe(value)
    if bad is not None:  # sealed for years and read by people and parsers: no NUL, escapes, C1
        # codes, nor a bidi control that shows the note in another order than it is sealed in
        raise AnnotationError(name, f"holds the {bad}")
    return value


def signed_act(principal: Principal | Mapping[str, Any], rationale: object,
               error: Callable[[str, str], Exception], most: int = 2000) -> tuple[dict[str, Any], str]:
    """The principal (with its key's SHA-256, for four-eyes) and the rationale an operator's or an
    officer's sealed act states (a list load, a clearance step), checked; a refusal is raised as
    ``error(field, message)``, naming ``principal`` or ``rationale``."""
    try:
        who = principal_json(principal, spki=True)
    except AnnotationError as exc:
        raise error("principal", exc.message) from None
    try:
        why = checked_text(rationale, "rationale", most)
    except AnnotationError as exc:
        raise error("rationale", exc.message) from None
    return who, why
