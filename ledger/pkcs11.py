"""Checkpoint signing keys kept in a PKCS#11 token (an HSM, or SoftHSM2 in tests): the private key
is generated inside the token, marked sensitive and non-extractable, and only ever asked to sign.

A key store is named by an RFC 7512 URI::

    pkcs11:token=<token label>;object=<key label>?module-path=/usr/lib/softhsm/libsofthsm2.so

optionally with ``serial=<token serial>`` in the path and ``pin-source=file:/path/to/pin`` (a 0600
file) in the query. A PIN in the URI itself (``pin-value``) is refused: the PIN comes from
``pin-source`` or is handed in (``SEALTRAIL_PKCS11_PIN``), never on a command line.

Labels: the first key of a log is ``<object>``; a rotation generates the new pair inside the token
as ``<object>-<key id hex>`` (the C2SP key id of the new verifier key), so the key of any verifier
key in the ledger's history is found by its label. Each key pair is an ``CKK_EC_EDWARDS`` pair on
Ed25519 (``CKM_EDDSA``, pure Ed25519 as RFC 8032 defines it, which the C2SP signed note needs).

python-pkcs11 is imported on first use, so ``ledger`` works without it (``pip install
'sealtrail[hsm]'``). One logged-in session per token is shared by the process (PKCS#11 login state
is the application's, not the session's), each use of it under a lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, unquote

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.errors import KeyFileError
from ledger.note import NoteSigner, NoteVerifier

if TYPE_CHECKING:
    from ledger.append import Ledger
    from ledger.keys import KeyRotation

__all__ = ["ED25519_OID", "Pkcs11Key", "Pkcs11KeyStore", "Pkcs11Uri", "rotated_label"]

ED25519_OID = "1.3.101.112"  # id-Ed25519 (RFC 8410): CKA_EC_PARAMS of an Ed25519 key pair
_PATH_ATTRS = {"token", "object", "serial", "type"}
_QUERY_ATTRS = {"module-path", "pin-source"}
T = TypeVar("T")


@dataclass(frozen=True)
class Pkcs11Uri:
    """The parts of an RFC 7512 ``pkcs11:`` URI that name a signing key."""

    module_path: str
    token: str
    object: str
    serial: str | None = None
    pin_source: Path | None = None

    @classmethod
    def parse(cls, uri: str) -> Pkcs11Uri:
        """Parse ``pkcs11:token=..;object=..?module-path=..[&pin-source=file:..]``; ``KeyFileError``
        naming what is missing or not understood."""
        if not uri.startswith("pkcs11:"):
            raise KeyFileError(f"key store {uri!r} is not a pkcs11: URI")
        path, _, query = uri[len("pkcs11:"):].partition("?")
        attrs: dict[str, str] = {}
        for part, allowed in ((path, _PATH_ATTRS), (query, _QUERY_ATTRS)):
            for item in part.split(";" if part is path else "&"):
                if not item:
                    continue
                name, eq, value = item.partition("=")
                if name == "pin-value":
                    raise KeyFileError("a PIN in the pkcs11: URI is refused: use pin-source=file:... or "
                                       "SEALTRAIL_PKCS11_PIN")
                if not eq or name not in allowed:
                    raise KeyFileError(f"pkcs11: URI attribute {name!r} is not understood here "
                                       f"(path: {sorted(_PATH_ATTRS)}, query: {sorted(_QUERY_ATTRS)})")
                if name in attrs:
                    raise KeyFileError(f"pkcs11: URI names {name!r} twice")
                attrs[name] = unquote(value, errors="strict")
        for needed in ("module-path", "token", "object"):
            if not attrs.get(needed):
                raise KeyFileError(f"pkcs11: URI {uri!r} has no {needed} (needs token=, object= and "
                                   "?module-path=)")
        if attrs.get("type", "private") != "private":
            raise KeyFileError("pkcs11: URI type must be 'private' (the signing key) or absent")
        pin_source = None
        if "pin-source" in attrs:
            src = attrs["pin-source"]
            if not src.startswith("file:"):
                raise KeyFileError(f"pin-source {src!r} is not a file: URI")
            pin_source = Path(src[len("file:"):].removeprefix("//"))
        return cls(attrs["module-path"], attrs["token"], attrs["object"], attrs.get("serial"), pin_source)

    def __str__(self) -> str:
        """The URI (never holding a PIN)."""
        path = f"token={quote(self.token, safe='')};object={quote(self.object, safe='')}"
        if self.serial:
            path += f";serial={quote(self.serial, safe='')}"
        query = f"module-path={quote(self.module_path, safe='/')}"
        if self.pin_source is not None:
            query += f"&pin-source=file:{quote(str(self.pin_source), safe='/')}"
        return f"pkcs11:{path}?{query}"

    def with_object(self, label: str) -> Pkcs11Uri:
        return Pkcs11Uri(self.module_path, self.token, label, self.serial, self.pin_source)


def rotated_label(base: str, verifier: NoteVerifier) -> str:
    """The label a rotation gives the new key pair: ``<base>-<key id hex>``."""
    return f"{base}-{verifier.key_id.hex()}"


def read_pin_file(path: Path) -> str:
    """The PIN in ``path`` (first line), refusing a file group or others may read."""
    from ledger.keys import read_private  # ledger.keys imports this module when a pkcs11: URI is used

    pin = read_private(path, "PIN file", "write the token's user PIN there, mode 0600",
                       encoding="utf-8").split("\n", 1)[0].rstrip("\r")
    if not pin:
        raise KeyFileError(f"PIN file {path} is empty")
    return pin


def _lib() -> ModuleType:
    try:
        import pkcs11
    except ImportError as exc:
        raise KeyFileError("a pkcs11: key store needs python-pkcs11 (pip install 'sealtrail[hsm]')") from exc
    return pkcs11


def _raw_public(ec_point: bytes, where: str) -> bytes:
    """CKA_EC_POINT of an Ed25519 key: DER OCTET STRING (04 20 || key) or, from some tokens, raw."""
    if len(ec_point) == 34 and ec_point[:2] == b"\x04\x20":
        return ec_point[2:]
    if len(ec_point) == 32:
        return ec_point
    raise KeyFileError(f"{where}: public key is not a 32-byte Ed25519 point")


class _Token:
    """One token's shared, logged-in session in this process, used under ``lock``."""

    def __init__(self, uri: Pkcs11Uri) -> None:
        self.uri = uri
        self.lock = threading.RLock()
        self._session: Any = None
        self._pin: str | None = None
        self._pid = os.getpid()

    def _where(self) -> str:
        return f"PKCS#11 token {self.uri.token!r} (module {self.uri.module_path})"

    def _open(self, pin: str) -> Any:
        p11 = _lib()
        if not Path(self.uri.module_path).is_file():
            raise KeyFileError(f"PKCS#11 module {self.uri.module_path} does not exist")
        try:
            lib = p11.lib(self.uri.module_path)
            if os.getpid() != self._pid:  # forked: PKCS#11 state does not survive a fork
                lib.reinitialize()
                self._pid = os.getpid()
            kwargs: dict[str, Any] = {"token_label": self.uri.token}
            if self.uri.serial:
                kwargs["token_serial"] = self.uri.serial.encode()
            token = lib.get_token(**kwargs)
            return token.open(user_pin=pin, rw=True)
        except p11.NoSuchToken as exc:
            raise KeyFileError(f"no PKCS#11 token labelled {self.uri.token!r}"
                               + (f" with serial {self.uri.serial}" if self.uri.serial else "")
                               + f" in module {self.uri.module_path} (is it initialised? is the "
                               "module's configuration, e.g. SOFTHSM2_CONF, the right one?)") from exc
        except p11.PinIncorrect as exc:
            raise KeyFileError(f"{self._where()} refused the PIN (CKR_PIN_INCORRECT)") from exc
        except p11.PinLenRange as exc:
            raise KeyFileError(f"{self._where()} refused the PIN: wrong length") from exc
        except p11.PKCS11Error as exc:
            raise KeyFileError(f"{self._where()}: cannot open a session: {type(exc).__name__} {exc}") from exc

    def _drop(self) -> None:
        session, self._session, self._pin = self._session, None, None
        if session is not None:
            with suppress(Exception):  # already broken: nothing more to learn from it
                session.close()

    @contextmanager
    def session(self, pin: str) -> Iterator[Any]:
        """The logged-in session (opened, or opened again after a fork or a broken session). A PIN
        other than the one this process logged in with is tried for real (log out, log in)."""
        with self.lock:
            if self._session is not None and (self._pin != pin or os.getpid() != self._pid):
                self._drop()
            if self._session is None:
                self._session = self._open(pin)
                self._pin = pin
            yield self._session

    def run(self, pin: str, op: Callable[[Any], T]) -> T:
        """``op(session)``; once more on a fresh session if the token dropped the old one."""
        p11 = _lib()
        retry = (p11.SessionHandleInvalid, p11.SessionClosed, p11.UserNotLoggedIn, p11.DeviceRemoved,
                 p11.TokenNotPresent)
        with self.lock:
            for attempt in (1, 2):
                try:
                    with self.session(pin) as s:
                        return op(s)
                except retry as exc:
                    self._drop()
                    if attempt == 2:
                        raise KeyFileError(f"{self._where()}: {type(exc).__name__}") from exc
            raise AssertionError("unreachable")


_TOKENS: dict[tuple[str, str, str | None], _Token] = {}
_TOKENS_LOCK = threading.Lock()


def _token(uri: Pkcs11Uri) -> _Token:
    key = (os.path.realpath(uri.module_path), uri.token, uri.serial)
    with _TOKENS_LOCK:
        tok = _TOKENS.get(key)
        if tok is None:
            tok = _TOKENS[key] = _Token(uri)
        return tok


def _find_pair(session: Any, label: str) -> tuple[Any, Any] | None:
    """(private, public) key objects labelled ``label``, or None if the token has no private key
    of that label; ``KeyFileError`` for one that is not a single Ed25519 pair."""
    p11 = _lib()
    privs = list(session.get_objects({p11.Attribute.CLASS: p11.ObjectClass.PRIVATE_KEY,
                                      p11.Attribute.LABEL: label}))
    if not privs:
        return None
    pubs = list(session.get_objects({p11.Attribute.CLASS: p11.ObjectClass.PUBLIC_KEY,
                                     p11.Attribute.LABEL: label}))
    if len(privs) > 1 or len(pubs) != 1:
        raise KeyFileError(f"the token holds {len(privs)} private and {len(pubs)} public keys labelled "
                           f"{label!r}: need exactly one pair")
    if privs[0][p11.Attribute.KEY_TYPE] != p11.KeyType.EC_EDWARDS:
        raise KeyFileError(f"the key labelled {label!r} is not an EdDSA (CKK_EC_EDWARDS) key")
    return privs[0], pubs[0]


class Pkcs11Key:
    """A ``SigningBackend`` whose Ed25519 private key stays in a PKCS#11 token (``CKM_EDDSA``).

    Each signature is checked against the public key before it is returned: a token that answers
    wrongly fails here, not in a checkpoint that no examiner could verify."""

    __slots__ = ("_pin", "_token", "label", "public_key", "uri")

    def __init__(self, uri: Pkcs11Uri, pin: str, public_key: bytes) -> None:
        self.uri = uri
        self.label = uri.object
        self._pin = pin
        self._token = _token(uri)
        self.public_key = public_key

    @property
    def location(self) -> str:
        return str(self.uri)

    def __repr__(self) -> str:
        return f"Pkcs11Key({self.location!r})"

    def sign(self, message: bytes) -> bytes:
        p11 = _lib()

        def op(session: Any) -> bytes:
            pair = _find_pair(session, self.label)
            if pair is None:
                raise KeyFileError(f"the token holds no private key labelled {self.label!r} any more")
            return bytes(pair[0].sign(message, mechanism=p11.Mechanism.EDDSA))

        try:
            sig = self._token.run(self._pin, op)
        except p11.PKCS11Error as exc:
            raise KeyFileError(f"{self.location}: signing failed: {type(exc).__name__} {exc}") from exc
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(sig, message)
        except (InvalidSignature, ValueError) as exc:
            raise KeyFileError(f"{self.location}: the token's signature does not verify under its "
                               "public key") from exc
        return sig


class Pkcs11KeyStore:
    """The ledger's signing keys in one PKCS#11 token (see the module's doc for labels)."""

    def __init__(self, uri: Pkcs11Uri | str, pin: str | None = None) -> None:
        self.uri = Pkcs11Uri.parse(uri) if isinstance(uri, str) else uri
        if pin is None:
            if self.uri.pin_source is None:
                raise KeyFileError(f"no PIN for {self.uri}: set SEALTRAIL_PKCS11_PIN or add "
                                   "pin-source=file:/path (a 0600 file) to the URI")
            pin = read_pin_file(self.uri.pin_source)
        if not pin:
            raise KeyFileError(f"empty PIN for {self.uri}")
        self._pin = pin
        self._token = _token(self.uri)

    @property
    def location(self) -> str:
        return str(self.uri)

    def __repr__(self) -> str:
        return f"Pkcs11KeyStore({self.location!r})"

    def _run(self, op: Callable[[Any], T]) -> T:
        p11 = _lib()
        try:
            return self._token.run(self._pin, op)
        except p11.PKCS11Error as exc:
            raise KeyFileError(f"{self.location}: {type(exc).__name__} {exc}") from exc

    def _public(self, label: str) -> bytes | None:
        p11 = _lib()

        def op(session: Any) -> bytes | None:
            pair = _find_pair(session, label)
            if pair is None:
                return None
            return _raw_public(bytes(pair[1][p11.Attribute.EC_POINT]), f"key {label!r}")

        return self._run(op)

    def exists(self) -> bool:
        """Whether the token holds the key pair the URI names."""
        return self._public(self.uri.object) is not None

    def load(self, name: str) -> NoteSigner:
        """The key pair the URI names, as a signer for the log named ``name``."""
        public = self._public(self.uri.object)
        if public is None:
            raise KeyFileError(f"the PKCS#11 token {self.uri.token!r} holds no Ed25519 private key "
                               f"labelled {self.uri.object!r} (run 'sealtrail init' to generate it)")
        return NoteSigner(name, Pkcs11Key(self.uri, self._pin, public))

    def signer(self, vkey: str) -> NoteSigner:
        """The signer of ``vkey`` (the ledger's active key): the pair labelled ``<object>-<key id>``
        or ``<object>``, whichever holds its public key; ``KeyFileError`` if none does."""
        verifier = NoteVerifier.from_vkey(vkey)
        seen: list[str] = []
        for label in (rotated_label(self.uri.object, verifier), self.uri.object):
            public = self._public(label)
            if public == verifier.public_key:
                return NoteSigner(verifier.name, Pkcs11Key(self.uri.with_object(label), self._pin, public))
            seen.append(f"{label!r}: " + ("absent" if public is None else "another key"))
        raise KeyFileError(f"the PKCS#11 token {self.uri.token!r} holds no key for the ledger's active "
                           f"signing key {vkey} ({'; '.join(seen)})")

    def generate(self, name: str, label: str | None = None) -> NoteSigner:
        """A new Ed25519 pair generated inside the token (sensitive, never extractable), labelled
        ``label`` (default: the URI's object); ``KeyFileError`` if that label is taken."""
        p11 = _lib()
        from pkcs11.util.ec import encode_named_curve_parameters

        chosen = label or self.uri.object
        A = p11.Attribute

        def op(session: Any) -> bytes:
            if _find_pair(session, chosen) is not None:
                raise KeyFileError(f"the token already holds a key labelled {chosen!r}; refusing to "
                                   "add another")
            params = session.create_domain_parameters(
                p11.KeyType.EC_EDWARDS, {A.EC_PARAMS: encode_named_curve_parameters(ED25519_OID)},
                local=True)
            pub, _ = params.generate_keypair(
                store=True, label=chosen,
                public_template={A.TOKEN: True, A.VERIFY: True, A.LABEL: chosen},
                private_template={A.TOKEN: True, A.PRIVATE: True, A.SIGN: True, A.SENSITIVE: True,
                                  A.EXTRACTABLE: False, A.LABEL: chosen})
            return _raw_public(bytes(pub[A.EC_POINT]), f"new key {chosen!r}")

        public = self._run(op)
        return NoteSigner(name, Pkcs11Key(self.uri.with_object(chosen), self._pin, public))

    def destroy(self, label: str) -> None:
        """Delete the key pair labelled ``label`` (a rotation the ledger refused)."""
        def op(session: Any) -> None:
            pair = _find_pair(session, label)
            if pair is not None:
                for obj in pair:
                    obj.destroy()

        self._run(op)

    def private_key_attributes(self, label: str) -> dict[str, bool]:
        """CKA_SENSITIVE, CKA_EXTRACTABLE, CKA_NEVER_EXTRACTABLE of the private key (for checks)."""
        p11 = _lib()
        A = p11.Attribute

        def op(session: Any) -> dict[str, bool]:
            pair = _find_pair(session, label)
            if pair is None:
                raise KeyFileError(f"no private key labelled {label!r}")
            return {"sensitive": bool(pair[0][A.SENSITIVE]), "extractable": bool(pair[0][A.EXTRACTABLE]),
                    "never_extractable": bool(pair[0][A.NEVER_EXTRACTABLE])}

        return self._run(op)

    def rotate(self, ledger: Ledger) -> KeyRotation:
        """Generate the new pair in the token as ``<object>-<key id>``, then seal the rotation (the
        ledger's current key endorses the new one). A rotation the ledger refuses (another process
        rotated first) deletes the new pair; a crash in between leaves an unused pair, never a ledger
        whose key nobody holds."""
        from ledger.keys import KeyRotation

        old_vkey = ledger.active_vkey
        name = NoteVerifier.from_vkey(old_vkey).name
        pending = f"{self.uri.object}-pending-{os.getpid()}"
        new = self.generate(name, pending)
        final = rotated_label(self.uri.object, new.verifier)

        def relabel(session: Any) -> None:
            p11 = _lib()
            pair = _find_pair(session, pending)
            assert pair is not None
            if _find_pair(session, final) is not None:
                raise KeyFileError(f"the token already holds a key labelled {final!r}")
            for obj in pair:
                obj[p11.Attribute.LABEL] = final

        try:
            self._run(relabel)
        except KeyFileError:
            self.destroy(pending)
            raise
        new = NoteSigner(name, Pkcs11Key(self.uri.with_object(final), self._pin, new.verifier.public_key))
        try:
            receipt = ledger.rotate_key(new)
        except KeyFileError:
            self.destroy(final)  # refused before anything was written
            raise
        return KeyRotation(receipt.seq, old_vkey, new.verifier.vkey, None, str(self.uri.with_object(final)))
