"""goAML suspicious transaction reports (STR), drafted from frozen inputs into XML an FIU reads.

Pure: no storage, clock or network. Each input type checks its fields when built and raises
``ReportError`` naming the field; ``draft_report`` writes the document in the goAML element order,
byte for byte the same for the same draft (so its SHA-256 can be sealed), and validates it against
the shipped profile before returning it. docs/goaml.md describes the format, what is mandatory,
how foreign-currency amounts and amendments are written, and the differences from an FIU's schema.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar
from xml.etree.ElementTree import Element, SubElement, indent, tostring

import iso4217
import pycountry
from schwifty import BIC, IBAN
from schwifty.exceptions import SchwiftyException

from audit.cases.goaml.schema import ReportError, validate_report

__all__ = ["Account", "Address", "Entity", "Party", "Person", "ReportTransaction", "ReportingEntity", "Side",
           "StrDraft", "amendment_note", "draft_report"]

NARRATIVE_MAX = 8000  # goAML 5 free-text fields (reason, action, comments)
_CENT = Decimal("0.01")
_AMOUNT_MAX = Decimal("7900000000000000")
_LOOKUP = re.compile(r"[A-Za-z0-9_.\-]{1,25}")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Characters XML 1.0 cannot carry at all (C0 controls but tab, LF, CR; lone surrogates; U+FFFE/FFFF).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_LINE_BREAK = re.compile("[\r\n\t]")


# -- field checks: each raises ReportError(field, why) ------------------------------------------


def _text(field: str, value: object, max_len: int, *, multiline: bool = False) -> str:
    """Text that XML can carry, not blank, at most ``max_len`` characters. Multi-line text keeps its
    line breaks with CR LF and CR written as LF (as any XML parser would read them back)."""
    if not isinstance(value, str):
        raise ReportError(field, f"must be text, got {type(value).__name__}")
    if multiline:
        value = value.replace("\r\n", "\n").replace("\r", "\n")
    if (bad := _NOT_XML.search(value)) is not None:
        raise ReportError(field, f"holds character U+{ord(bad[0]):04X}, which XML cannot carry")
    if not multiline and _LINE_BREAK.search(value):
        raise ReportError(field, "must be one line (no tab, CR or LF)")
    if not value.strip():
        raise ReportError(field, "must not be empty")
    if len(value) > max_len:
        raise ReportError(field, f"is {len(value)} characters; at most {max_len}")
    return value


def _opt_text(field: str, value: object, max_len: int, *, multiline: bool = False) -> str | None:
    return None if value is None else _text(field, value, max_len, multiline=multiline)


def _currency(field: str, value: object) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Z]{3}", value):
        raise ReportError(field, f"{value!r} is not an ISO 4217 currency code (three capital letters)")
    try:
        iso4217.Currency(value)
    except ValueError:
        raise ReportError(field, f"{value!r} is not an ISO 4217 currency code") from None
    return value


def _country(field: str, value: object) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Z]{2}", value) \
            or pycountry.countries.get(alpha_2=value) is None:
        raise ReportError(field, f"{value!r} is not an ISO 3166-1 alpha-2 country code")
    return value


def _opt_country(field: str, value: object) -> str | None:
    return None if value is None else _country(field, value)


def _lookup(field: str, value: object) -> str:
    """A code from one of the FIU's lookup lists (funds, conduction, indicators): shape only."""
    if not isinstance(value, str) or not _LOOKUP.fullmatch(value):
        raise ReportError(field, f"{value!r} is not an FIU lookup code (1 to 25 of A-Z a-z 0-9 _ . -)")
    return value


def _utc(field: str, value: object) -> datetime:
    """An aware datetime as UTC, to the second (goAML writes whole seconds, no zone)."""
    if not isinstance(value, datetime):
        raise ReportError(field, f"must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ReportError(field, "is a naive datetime; give it a time zone (UTC)")
    utc = value.astimezone(UTC).replace(microsecond=0)
    if utc.year < 1900:
        raise ReportError(field, "is before 1900, which goAML does not accept")
    return utc


def _day(field: str, value: object) -> date:
    if isinstance(value, datetime) or not isinstance(value, date):
        raise ReportError(field, f"must be a date, got {type(value).__name__}")
    if value.year < 1900:
        raise ReportError(field, "is before 1900, which goAML does not accept")
    return value


def _amount(field: str, value: object) -> Decimal:
    """A positive exact amount with at most two decimal places (never rounded here)."""
    if isinstance(value, bool) or not isinstance(value, Decimal | int):
        raise ReportError(field, f"must be a Decimal, got {type(value).__name__} (floats are not exact)")
    amount = Decimal(value)
    if not amount.is_finite():
        raise ReportError(field, f"{amount} is not a finite amount")
    if amount <= 0:
        raise ReportError(field, f"{amount} must be positive")
    try:
        cents = amount.quantize(_CENT)
    except InvalidOperation:
        raise ReportError(field, f"{amount} is too large") from None
    if cents != amount:
        raise ReportError(field, f"{amount} has more than two decimal places; round it where the amount "
                          "is booked, not here")
    if cents > _AMOUNT_MAX:
        raise ReportError(field, f"{amount} exceeds goAML's largest amount ({_AMOUNT_MAX})")
    return cents


def _instance(field: str, value: object, kind: type | tuple[type, ...], what: str) -> None:
    if not isinstance(value, kind):
        raise ReportError(field, f"must be {what}, got {type(value).__name__}")


def _bool(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ReportError(field, f"must be True or False, got {type(value).__name__}")
    return value


@contextmanager
def _within(prefix: str) -> Iterator[None]:
    """Name errors raised inside as fields of ``prefix`` (``reporting_person.first_name``)."""
    try:
        yield
    except ReportError as exc:
        raise ReportError(f"{prefix}.{exc.field}", exc.why) from None


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)  # normalising a frozen dataclass's field in __post_init__


# -- the parties ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Address:
    """A postal address (goAML ``t_address``); ``address_type`` is the FIU's contact-type code."""

    address_type: str
    address: str
    city: str
    country_code: str
    town: str | None = None
    zip: str | None = None
    state: str | None = None

    def __post_init__(self) -> None:
        _lookup("address_type", self.address_type)
        _text("address", self.address, 100)
        _text("city", self.city, 255)
        _country("country_code", self.country_code)
        _opt_text("town", self.town, 255)
        _opt_text("zip", self.zip, 10)
        _opt_text("state", self.state, 255)


@dataclass(frozen=True, kw_only=True)
class Person:
    """A natural person (goAML ``t_person``): a party, an account's signatory, or the officer who
    files. ``gender`` is M, F or - (not stated); ``nationality`` and ``residence`` are ISO 3166-1
    alpha-2 codes; names are kept as given, non-ASCII letters included."""

    first_name: str
    last_name: str
    gender: str | None = None
    title: str | None = None
    middle_name: str | None = None
    birthdate: date | None = None
    id_number: str | None = None
    nationality: str | None = None
    residence: str | None = None
    email: str | None = None
    occupation: str | None = None

    def __post_init__(self) -> None:
        _text("first_name", self.first_name, 100)
        _text("last_name", self.last_name, 100)
        if self.gender is not None and self.gender not in ("M", "F", "-"):
            raise ReportError("gender", f"{self.gender!r} is not M, F or - (not stated)")
        _opt_text("title", self.title, 30)
        _opt_text("middle_name", self.middle_name, 100)
        if self.birthdate is not None:
            _day("birthdate", self.birthdate)
        _opt_text("id_number", self.id_number, 255)
        _opt_country("nationality", self.nationality)
        _opt_country("residence", self.residence)
        if self.email is not None and (not isinstance(self.email, str) or len(self.email) > 255
                                       or not _EMAIL.fullmatch(self.email)):
            raise ReportError("email", f"{self.email!r} is not an e-mail address")
        _opt_text("occupation", self.occupation, 255)


@dataclass(frozen=True, kw_only=True)
class Entity:
    """A legal person (goAML ``t_entity``)."""

    name: str
    incorporation_number: str | None = None
    business: str | None = None
    incorporation_country_code: str | None = None

    def __post_init__(self) -> None:
        _text("name", self.name, 255)
        _opt_text("incorporation_number", self.incorporation_number, 50)
        _opt_text("business", self.business, 255)
        _opt_country("incorporation_country_code", self.incorporation_country_code)


@dataclass(frozen=True, kw_only=True)
class Account:
    """An account (goAML ``t_account``) at an institution named by its BIC (``swift``) or, for
    one without, its national ``institution_code``: exactly one of the two. ``account`` is the
    number as the institution keeps it (the IBAN where that is all there is); ``iban`` is checked
    (country, length, check digits) and written compact, a BIC in capitals. ``holder`` is written
    as the account's entity or its primary signatory."""

    institution_name: str
    account: str
    swift: str | None = None
    institution_code: str | None = None
    branch: str | None = None
    currency_code: str | None = None
    account_name: str | None = None
    iban: str | None = None
    client_number: str | None = None
    holder: Person | Entity | None = None

    def __post_init__(self) -> None:
        _text("institution_name", self.institution_name, 255)
        _text("account", self.account, 255)
        if (self.swift is None) == (self.institution_code is None):
            raise ReportError("swift", "give exactly one of swift (the BIC) and institution_code")
        if self.swift is not None:
            if not isinstance(self.swift, str):
                raise ReportError("swift", f"must be text, got {type(self.swift).__name__}")
            try:
                _set(self, "swift", str(BIC(self.swift.strip())))
            except SchwiftyException as exc:
                raise ReportError("swift", f"{self.swift!r} is not a BIC: {exc}") from None
        _opt_text("institution_code", self.institution_code, 50)
        _opt_text("branch", self.branch, 255)
        if self.currency_code is not None:
            _currency("currency_code", self.currency_code)
        _opt_text("account_name", self.account_name, 255)
        if self.iban is not None:
            if not isinstance(self.iban, str):
                raise ReportError("iban", f"must be text, got {type(self.iban).__name__}")
            try:
                _set(self, "iban", IBAN(self.iban).compact)
            except SchwiftyException as exc:
                raise ReportError("iban", f"{self.iban!r} is not an IBAN: {exc}") from None
        _opt_text("client_number", self.client_number, 30)
        if self.holder is not None:
            _instance("holder", self.holder, (Person, Entity), "a Person or an Entity")


Party = Account | Person | Entity
"""What one side of a transaction names: an account, a person or an entity."""


@dataclass(frozen=True, kw_only=True)
class Side:
    """One side of a transaction: the party, its country (ISO 3166-1 alpha-2) and how the funds
    left or arrived (``funds_code``, from the FIU's funds-type list; ``funds_comment`` in words)."""

    party: Party
    country: str
    funds_code: str
    funds_comment: str | None = None

    def __post_init__(self) -> None:
        _instance("party", self.party, (Account, Person, Entity), "an Account, Person or Entity")
        _country("country", self.country)
        _lookup("funds_code", self.funds_code)
        _opt_text("funds_comment", self.funds_comment, 255)


@dataclass(frozen=True, kw_only=True)
class ReportTransaction:
    """One reported transaction. ``number`` is the sealtrail trace id (goAML ``transactionnumber``);
    ``date`` an aware datetime, written as UTC; ``amount`` in ``currency``, exact, positive, at most
    two decimal places. Where ``currency`` is not the report's local currency, ``amount_local`` is the
    amount the bank booked in local currency and must be given: nothing here converts. ``from_my_client``
    and ``to_my_client`` say whether that side is the reporting entity's own client."""

    number: str
    date: datetime
    amount: Decimal
    currency: str
    transmode_code: str
    from_: Side
    to: Side
    from_my_client: bool
    to_my_client: bool
    amount_local: Decimal | None = None
    purpose: str | None = None
    comment: str | None = None
    internal_ref_number: str | None = None
    location: str | None = None
    transmode_comment: str | None = None

    def __post_init__(self) -> None:
        _text("number", self.number, 100)
        _set(self, "date", _utc("date", self.date))
        _set(self, "amount", _amount("amount", self.amount))
        _currency("currency", self.currency)
        _lookup("transmode_code", self.transmode_code)
        _instance("from_", self.from_, Side, "a Side")
        _instance("to", self.to, Side, "a Side")
        _bool("from_my_client", self.from_my_client)
        _bool("to_my_client", self.to_my_client)
        if self.amount_local is not None:
            _set(self, "amount_local", _amount("amount_local", self.amount_local))
        _set(self, "purpose", _opt_text("purpose", self.purpose, NARRATIVE_MAX, multiline=True))
        _set(self, "comment", _opt_text("comment", self.comment, NARRATIVE_MAX, multiline=True))
        _opt_text("internal_ref_number", self.internal_ref_number, 100)
        _opt_text("location", self.location, 255)
        _opt_text("transmode_comment", self.transmode_comment, 50)


# -- the reporting entity -------------------------------------------------------------------------

_ENTITY_KEYS = ("rentity_id", "rentity_branch", "currency_code_local", "submission_code",
                "reporting_person", "location")


@dataclass(frozen=True, kw_only=True)
class ReportingEntity:
    """The bank as the FIU registered it: ``rentity_id`` (the FIU's number for it), an optional
    branch, the local currency (ISO 4217) its reports state amounts in, the officer who files, and
    ``submission_code`` E (electronic) or M (manual). Loaded from configuration: ``from_toml``."""

    rentity_id: int | str  # a digit string (as configuration may hold it) is kept as its int
    reporting_person: Person
    currency_code_local: str
    rentity_branch: str | None = None
    submission_code: str = "E"
    location: Address | None = None

    def __post_init__(self) -> None:
        rid: object = self.rentity_id
        if isinstance(rid, str) and re.fullmatch(r"[0-9]{1,10}", rid):
            rid = int(rid)
        if isinstance(rid, bool) or not isinstance(rid, int) or not 1 <= rid <= 2**31 - 1:
            raise ReportError("rentity_id", f"{self.rentity_id!r} is not the FIU's entity number "
                              "(a whole number from 1 to 2147483647)")
        _set(self, "rentity_id", rid)
        _instance("reporting_person", self.reporting_person, Person, "a Person")
        _currency("currency_code_local", self.currency_code_local)
        _opt_text("rentity_branch", self.rentity_branch, 255)
        if self.submission_code not in ("E", "M"):
            raise ReportError("submission_code",
                              f"{self.submission_code!r} is not E (electronic) or M (manual)")
        if self.location is not None:
            _instance("location", self.location, Address, "an Address")

    @classmethod
    def from_toml(cls, text: str) -> ReportingEntity:
        """The entity from a TOML document: top-level ``rentity_id``, ``currency_code_local``,
        optional ``rentity_branch`` and ``submission_code``, a ``[reporting_person]`` table (Person's
        fields) and an optional ``[location]`` table (Address's). Unknown keys are refused."""
        if not isinstance(text, str):
            raise ReportError("toml", f"expected text, got {type(text).__name__}")
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ReportError("toml", f"not TOML: {exc}") from None
        _known_keys("", doc, _ENTITY_KEYS)
        for key in ("rentity_id", "currency_code_local", "reporting_person"):
            if key not in doc:
                raise ReportError(key, "is missing")
        person = _table("reporting_person", doc["reporting_person"], Person)
        location = None if "location" not in doc else _table("location", doc["location"], Address)
        args = {k: v for k, v in doc.items() if k not in ("reporting_person", "location")}
        return cls(reporting_person=person, location=location, **args)


def _known_keys(prefix: str, table: Mapping[str, Any], known: Sequence[str]) -> None:
    for key in table:
        if key not in known:
            raise ReportError(f"{prefix}{key}", f"unknown key; expected one of {', '.join(known)}")


_T = TypeVar("_T", Person, Address)


def _table(name: str, value: object, cls: type[_T]) -> _T:
    if not isinstance(value, dict):
        raise ReportError(name, f"must be a table, got {type(value).__name__}")
    known = tuple(f.name for f in fields(cls))
    _known_keys(f"{name}.", value, known)
    with _within(name):
        try:
            return cls(**value)
        except TypeError as exc:  # a mandatory key missing
            missing = [f.name for f in fields(cls) if f.name not in value]
            raise ReportError(missing[0] if missing else name, f"is missing ({exc})") from None


# -- the draft ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StrDraft:
    """A suspicious transaction report as the compliance officer settled it: the transactions, the
    officer's narrative (``reason``), the action taken, the FIU's indicator codes (at least one),
    ``entity_reference`` (the sealtrail case id) and the submission time (aware; written as UTC).
    An amendment names the report it replaces: ``previous_sha256`` (the SHA-256 of the earlier
    document's bytes, as sealed) and, where the FIU gave it one, ``fiu_ref_number``."""

    entity: ReportingEntity
    transactions: tuple[ReportTransaction, ...]
    reason: str
    indicators: tuple[str, ...]
    entity_reference: str
    submission_date: datetime
    action: str | None = None
    fiu_ref_number: str | None = None
    previous_sha256: str | None = None

    def __post_init__(self) -> None:
        _instance("entity", self.entity, ReportingEntity, "a ReportingEntity")
        _set(self, "transactions", _sequence("transactions", self.transactions))
        if not self.transactions:
            raise ReportError("transactions", "an STR reports at least one transaction")
        local = self.entity.currency_code_local
        seen: dict[str, int] = {}
        for i, tx in enumerate(self.transactions):
            _instance(f"transactions[{i}]", tx, ReportTransaction, "a ReportTransaction")
            if tx.number in seen:
                raise ReportError(f"transactions[{i}].number",
                                  f"{tx.number!r} repeats transactions[{seen[tx.number]}]")
            seen[tx.number] = i
            if tx.currency == local and tx.amount_local is not None and tx.amount_local != tx.amount:
                raise ReportError(f"transactions[{i}].amount_local", f"{tx.amount_local} differs from the "
                                  f"amount {tx.amount} in the local currency {local}")
            if tx.currency != local and tx.amount_local is None:
                raise ReportError(f"transactions[{i}].amount_local", f"the transaction is in {tx.currency}, "
                                  f"not the local {local}: give the amount booked in local currency "
                                  "(nothing here converts)")
        _set(self, "indicators", _sequence("indicators", self.indicators))
        if not self.indicators:
            raise ReportError("indicators", "an STR names at least one indicator")
        for i, code in enumerate(self.indicators):
            _lookup(f"indicators[{i}]", code)
            if self.indicators.index(code) != i:
                raise ReportError(f"indicators[{i}]", f"{code!r} is named twice")
        _set(self, "reason", _text("reason", self.reason, NARRATIVE_MAX, multiline=True))
        _text("entity_reference", self.entity_reference, 255)
        _set(self, "submission_date", _utc("submission_date", self.submission_date))
        _set(self, "action", _opt_text("action", self.action, NARRATIVE_MAX, multiline=True))
        _opt_text("fiu_ref_number", self.fiu_ref_number, 255)
        if self.previous_sha256 is not None:
            if not isinstance(self.previous_sha256, str) or not _SHA256.fullmatch(self.previous_sha256):
                raise ReportError("previous_sha256", "must be a SHA-256 as 64 lower-case hex digits")
            if len(self.written_reason) > NARRATIVE_MAX:
                raise ReportError("reason", f"with the amendment note it is {len(self.written_reason)} "
                                  f"characters; at most {NARRATIVE_MAX}")

    @property
    def written_reason(self) -> str:
        """``reason`` as the document states it: after the amendment note, when this amends."""
        if self.previous_sha256 is None:
            return self.reason
        return f"{amendment_note(self.previous_sha256, self.fiu_ref_number)}\n\n{self.reason}"


def _sequence(field: str, value: object) -> tuple[Any, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ReportError(field, f"must be a tuple, got {type(value).__name__}")
    return tuple(value)


def amendment_note(previous_sha256: str, fiu_ref_number: str | None = None) -> str:
    """The sentence that opens the ``reason`` of a report amending an earlier one (docs/goaml.md)."""
    ref = f" (FIU reference {fiu_ref_number})" if fiu_ref_number else ""
    return f"Amends the earlier report{ref} whose document has SHA-256 {previous_sha256}."


# -- writing --------------------------------------------------------------------------------------


def draft_report(d: StrDraft) -> bytes:
    """The goAML STR document for ``d``: UTF-8 XML, the same bytes for the same draft, valid under
    the shipped profile (``ReportError`` naming the element otherwise)."""
    if not isinstance(d, StrDraft):
        raise ReportError("draft", f"must be a StrDraft, got {type(d).__name__}")
    root = Element("report")
    e = d.entity
    _leaf(root, "rentity_id", str(e.rentity_id))
    _leaf(root, "rentity_branch", e.rentity_branch)
    _leaf(root, "submission_code", e.submission_code)
    _leaf(root, "report_code", "STR")
    _leaf(root, "entity_reference", d.entity_reference)
    _leaf(root, "fiu_ref_number", d.fiu_ref_number)
    _leaf(root, "submission_date", _when(d.submission_date))
    _leaf(root, "currency_code_local", e.currency_code_local)
    _person(SubElement(root, "reporting_person"), e.reporting_person)
    if e.location is not None:
        _address(SubElement(root, "location"), e.location)
    _leaf(root, "reason", d.written_reason)
    _leaf(root, "action", d.action)
    for tx in d.transactions:
        _transaction(SubElement(root, "transaction"), tx, e.currency_code_local)
    indicators = SubElement(root, "report_indicators")
    for code in d.indicators:
        _leaf(indicators, "indicator", code)
    indent(root, space="  ")
    body = tostring(root, encoding="unicode").encode("utf-8")
    xml = b'<?xml version="1.0" encoding="UTF-8"?>\n' + body + b"\n"
    validate_report(xml)
    return xml


def _leaf(parent: Element, tag: str, text: str | None) -> None:
    if text is not None:
        SubElement(parent, tag).text = text


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def _money(amount: Decimal) -> str:
    return f"{amount.quantize(_CENT):f}"


def _transaction(el: Element, tx: ReportTransaction, local: str) -> None:
    _leaf(el, "transactionnumber", tx.number)
    _leaf(el, "internal_ref_number", tx.internal_ref_number)
    _leaf(el, "transaction_location", tx.location)
    _leaf(el, "transaction_description", tx.purpose)
    _leaf(el, "date_transaction", _when(tx.date))
    _leaf(el, "transmode_code", tx.transmode_code)
    _leaf(el, "transmode_comment", tx.transmode_comment)
    _leaf(el, "amount_local", _money(tx.amount if tx.currency == local else _given(tx.amount_local)))
    foreign = None if tx.currency == local else (tx.currency, tx.amount)
    _side(SubElement(el, "t_from_my_client" if tx.from_my_client else "t_from"), "from", tx.from_, foreign)
    _side(SubElement(el, "t_to_my_client" if tx.to_my_client else "t_to"), "to", tx.to, foreign)
    _leaf(el, "comments", tx.comment)


def _given(amount: Decimal | None) -> Decimal:
    if amount is None:  # StrDraft refuses this; a guard, not a path
        raise ReportError("amount_local", "is missing for a foreign-currency transaction")
    return amount


def _side(el: Element, prefix: str, side: Side, foreign: tuple[str, Decimal] | None) -> None:
    _leaf(el, f"{prefix}_funds_code", side.funds_code)
    _leaf(el, f"{prefix}_funds_comment", side.funds_comment)
    if foreign is not None:
        fc = SubElement(el, f"{prefix}_foreign_currency")
        _leaf(fc, "foreign_currency_code", foreign[0])
        _leaf(fc, "foreign_amount", _money(foreign[1]))
    party = side.party
    if isinstance(party, Account):
        _account(SubElement(el, f"{prefix}_account"), party)
    elif isinstance(party, Person):
        _person(SubElement(el, f"{prefix}_person"), party)
    else:
        _entity(SubElement(el, f"{prefix}_entity"), party)
    _leaf(el, f"{prefix}_country", side.country)


def _account(el: Element, a: Account) -> None:
    _leaf(el, "institution_name", a.institution_name)
    _leaf(el, "institution_code", a.institution_code)
    _leaf(el, "swift", a.swift)
    _leaf(el, "branch", a.branch)
    _leaf(el, "account", a.account)
    _leaf(el, "currency_code", a.currency_code)
    _leaf(el, "account_name", a.account_name)
    _leaf(el, "iban", a.iban)
    _leaf(el, "client_number", a.client_number)
    if isinstance(a.holder, Entity):
        _entity(SubElement(el, "t_entity"), a.holder)
    elif isinstance(a.holder, Person):
        signatory = SubElement(el, "signatory")
        _leaf(signatory, "is_primary", "true")
        _person(SubElement(signatory, "t_person"), a.holder)


def _person(el: Element, p: Person) -> None:
    _leaf(el, "gender", p.gender)
    _leaf(el, "title", p.title)
    _leaf(el, "first_name", p.first_name)
    _leaf(el, "middle_name", p.middle_name)
    _leaf(el, "last_name", p.last_name)
    _leaf(el, "birthdate", None if p.birthdate is None else f"{p.birthdate.isoformat()}T00:00:00")
    _leaf(el, "id_number", p.id_number)
    _leaf(el, "nationality1", p.nationality)
    _leaf(el, "residence", p.residence)
    _leaf(el, "email", p.email)
    _leaf(el, "occupation", p.occupation)


def _entity(el: Element, n: Entity) -> None:
    _leaf(el, "name", n.name)
    _leaf(el, "incorporation_number", n.incorporation_number)
    _leaf(el, "business", n.business)
    _leaf(el, "incorporation_country_code", n.incorporation_country_code)


def _address(el: Element, a: Address) -> None:
    _leaf(el, "address_type", a.address_type)
    _leaf(el, "address", a.address)
    _leaf(el, "town", a.town)
    _leaf(el, "city", a.city)
    _leaf(el, "zip", a.zip)
    _leaf(el, "country_code", a.country_code)
    _leaf(el, "state", a.state)
