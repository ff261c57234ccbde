"""JSON payment messages: one object, or an array of objects, in the canonical
``Transaction.to_json()`` form -> ``Transaction``s.

The shape is checked by a pydantic schema (``TransactionIn``: unknown keys refused, strict
types, amounts and rates as decimal strings with '.' so they stay exact); the values by the
same field checks as every other format (currency and minor units, country, BIC, IBAN,
UETR, dates). ``message_type`` and ``raw_sha256`` in the input describe the message the
JSON was derived from: checked for shape, not carried. The Transaction says ``json`` and
hashes these bytes. ``r16`` and ``iban`` are derived; where given they must match. Errors
name the field as a JSONPath, e.g. ``$[2].originator.country``.

Text is refused where it holds a control character (C0, DEL, C1) or a lone surrogate, as the
SWIFT parser refuses every character outside its X set: a name or reference with a NUL or
an ESC in it would be screened, sealed and shown as something other than what it says. Only
``remittance`` and ``sender_to_receiver`` may hold line breaks (newline only), as MT fields
70 and 72 do.
"""

from __future__ import annotations

import hashlib
import json
import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, StringConstraints, ValidationError

from inference.messages import fields
from inference.messages.errors import MessageError
from inference.messages.findings import CODES, Finding
from inference.messages.transaction import (
    R16,
    TRANSACTION_SCHEMAS,
    Agent,
    Identifier,
    Original,
    Party,
    Transaction,
)

__all__ = ["MAX_JSON_BYTES", "AgentIn", "IdentifierIn", "PartyIn", "R16In", "TransactionIn", "loads_json",
           "parse_json", "transactions_of"]

MAX_JSON_BYTES = 1 << 20
_SCHEMAS = frozenset(TRANSACTION_SCHEMAS.values())
_RATE = re.compile(r"[0-9]{1,11}(?:\.[0-9]{1,10})?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_LINES = frozenset({"remittance", "sender_to_receiver"})  # free text of several lines (MT :70:, :72:)
_TEXT_DEPTH = 4  # levels of objects and arrays below a transaction's keys that may hold text
# What, in JSON text, can decode to a character _CONTROL matches: an escape of a C0 or C1 code,
# of DEL or of a surrogate, a short escape (\n, \t, ...), or a raw DEL or C1 code (raw C0 codes
# are not JSON). Its absence proves the decoded strings clean; its presence only asks to look.
_MAY_HOLD_CONTROLS = re.compile(rb"\\(?:[bfnrt]|u00(?:[0189][0-9a-fA-F]|7[fF])|u[dD][89a-fA-F])"
                                rb"|\x7f|\xc2[\x80-\x9f]")

Ref = Annotated[StrictStr, StringConstraints(min_length=1, max_length=35)]
Text = Annotated[StrictStr, StringConstraints(min_length=1, max_length=256)]
LongText = Annotated[StrictStr, StringConstraints(min_length=1)]  # bounded by MAX_JSON_BYTES
Account = Annotated[StrictStr, StringConstraints(min_length=1, max_length=70)]
Code = Annotated[StrictStr, StringConstraints(max_length=64)]  # checked by fields.*


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IdentifierIn(_Model):
    scheme: Annotated[StrictStr, StringConstraints(pattern=r"^[A-Z0-9]{1,4}$")]
    value: Text
    country: Code | None = None


class PartyIn(_Model):
    name: Text | None = None
    account: Account | None = None
    iban: Code | None = None  # derived from ``account``; must match where given
    bic: Code | None = None
    address_lines: tuple[Text, ...] = Field(default=(), max_length=20)
    country: Code | None = None
    identifiers: tuple[IdentifierIn, ...] = Field(default=(), max_length=100)


class AgentIn(_Model):
    role: Literal["sender", "receiver", "ordering_institution", "senders_correspondent",
                  "receivers_correspondent", "third_reimbursement", "intermediary", "account_with",
                  "beneficiary_institution", "instructing", "instructed", "debtor_agent", "creditor_agent"]
    bic: Code | None = None
    account: Account | None = None
    name_address: tuple[Text, ...] = Field(default=(), max_length=20)


class R16In(_Model):
    originator_name: StrictBool
    originator_account: StrictBool
    originator_address_or_id: StrictBool
    beneficiary_name: StrictBool
    beneficiary_account: StrictBool


class FindingIn(_Model):
    code: Annotated[StrictStr, StringConstraints(pattern=r"^[A-Z_]{1,32}$")]  # one of findings.CODES
    field: Text
    detail: Annotated[StrictStr, StringConstraints(max_length=200)]


class OriginalIn(_Model):
    uetr: Code | None = None
    end_to_end_id: Ref | None = None
    instruction_id: Ref | None = None
    reason: Annotated[StrictStr, StringConstraints(pattern=r"^[A-Z0-9]{1,4}$")] | None = None


class TransactionIn(_Model):
    """One transaction, as ``Transaction.to_json()`` writes it (schema 1 or 2); nulls may be left out."""

    schema_: Ref | None = Field(default=None, alias="schema")  # a TRANSACTION_SCHEMAS value where given
    message_type: Ref | None = None  # of the message this was derived from; not carried
    reference: Ref
    related_reference: Ref | None = None
    uetr: Code | None = None
    bank_operation_code: Annotated[StrictStr, StringConstraints(pattern=r"^[A-Z]{4}$")] | None = None
    value_date: Code
    amount: Code
    currency: Code
    instructed_amount: Code | None = None
    instructed_currency: Code | None = None
    exchange_rate: Code | None = None
    originator: PartyIn
    beneficiary: PartyIn
    agents: tuple[AgentIn, ...] = Field(default=(), max_length=20)
    remittance: LongText | None = None
    charges: Literal["OUR", "SHA", "BEN", "DEBT", "CRED", "SHAR", "SLEV"] | None = None
    sender_to_receiver: LongText | None = None
    r16: R16In | None = None  # derived from the parties; must match where given
    raw_sha256: Annotated[StrictStr, StringConstraints(pattern=r"^[0-9a-f]{64}$")] | None = None
    # sealtrail.transaction/2: carried as given (findings an upstream reader made of the original message)
    findings: tuple[FindingIn, ...] = Field(default=(), max_length=64)
    ultimate_originator: PartyIn | None = None
    ultimate_beneficiary: PartyIn | None = None
    initiating_party: PartyIn | None = None
    original: OriginalIn | None = None


def parse_json(data: bytes) -> list[Transaction]:
    """Every transaction in a JSON object or array of objects, or ``MessageError``."""
    doc = loads_json(data)
    return transactions_of(doc, hashlib.sha256(data).hexdigest(), text=data)


def loads_json(data: bytes, *, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """JSON text as Python values, refusing what JSON parsers disagree on: a duplicate key (no
    first- or last-wins), NaN/Infinity, text that is not UTF-8 or more than ``max_bytes``.
    ``MessageError`` at ``$`` (a duplicate at ``$..key``)."""
    if len(data) > max_bytes:
        raise MessageError(f"message is {len(data)} bytes; the limit is {max_bytes}", field="$")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageError(f"not UTF-8 (invalid byte at offset {exc.start})", field="$") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except _DuplicateKey as exc:
        raise MessageError(f"duplicate key {exc.key!r} (each key may appear once)",
                           field=f"$..{exc.key}") from None
    except ValueError as exc:
        raise MessageError(f"not JSON: {exc}", field="$") from None
    except RecursionError:
        raise MessageError("not JSON: nested too deeply", field="$") from None


def transactions_of(doc: Any, sha: str, *, text: bytes | None = None) -> list[Transaction]:
    """Every transaction in a decoded JSON message (``loads_json``) whose bytes hash to ``sha``.
    ``text``, the JSON ``doc`` was decoded from, spares the search for control characters when
    it holds none (most messages): nothing in it can decode to one."""
    plain = text is not None and _MAY_HOLD_CONTROLS.search(text) is None
    if isinstance(doc, dict):
        return [_transaction(doc, "$", sha, plain)]
    if not isinstance(doc, list):
        raise MessageError(f"expected an object or an array of objects, not {type(doc).__name__}",
                           field="$")
    if not doc:
        raise MessageError("an empty array holds no transaction", field="$")
    return [_transaction(item, f"$[{n}]", sha, plain) for n, item in enumerate(doc)]


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):  # rare: find the first repeated key for the error
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _transaction(item: object, p: str, sha: str, plain: bool = False) -> Transaction:
    if not isinstance(item, dict):
        raise MessageError(f"expected an object, not {type(item).__name__}", field=p)
    for key, value in () if plain else item.items():
        _refuse_controls(value, f"{p}.{key}", _CONTROL_BUT_NEWLINE if key in _LINES else _CONTROL)
    try:
        t = TransactionIn.model_validate(item)
    except ValidationError as exc:
        raise _error(exc, p) from None
    if t.schema_ is not None and t.schema_ not in _SCHEMAS:
        raise MessageError(f"schema {t.schema_!r} is not one of {sorted(_SCHEMAS)}", field=f"{p}.schema")
    for n, f in enumerate(t.findings):
        if f.code not in CODES:
            raise MessageError(f"finding code {f.code!r} is not one sealtrail defines",
                               field=f"{p}.findings[{n}].code")
    amount, currency = _amount(t.amount, t.currency, f"{p}.amount", f"{p}.currency")
    instructed, instructed_ccy = None, None
    if (t.instructed_amount is None) != (t.instructed_currency is None):
        raise MessageError("instructed_amount and instructed_currency go together",
                           field=f"{p}.instructed_amount")
    if t.instructed_amount is not None and t.instructed_currency is not None:
        instructed, instructed_ccy = _amount(t.instructed_amount, t.instructed_currency,
                                             f"{p}.instructed_amount", f"{p}.instructed_currency")
    rate = None
    if t.exchange_rate is not None:
        rate = fields.rate(t.exchange_rate, f"{p}.exchange_rate", decimal_mark=".")
    originator = _party(t.originator, f"{p}.originator")
    beneficiary = _party(t.beneficiary, f"{p}.beneficiary")
    r16 = R16.of(originator, beneficiary)
    if t.r16 is not None and t.r16.model_dump() != r16.to_json():
        raise MessageError(f"r16 {t.r16.model_dump()} does not match the parties ({r16.to_json()})",
                           field=f"{p}.r16")
    return Transaction(
        message_type="json", reference=t.reference, related_reference=t.related_reference,
        uetr=fields.uetr(t.uetr, f"{p}.uetr") if t.uetr is not None else None,
        bank_operation_code=t.bank_operation_code,
        value_date=fields.iso_date(t.value_date, f"{p}.value_date"),
        amount=amount, currency=currency, instructed_amount=instructed, instructed_currency=instructed_ccy,
        exchange_rate=rate, originator=originator, beneficiary=beneficiary,
        agents=tuple(_agent(a, f"{p}.agents[{n}]") for n, a in enumerate(t.agents)),
        remittance=t.remittance, charges=t.charges, sender_to_receiver=t.sender_to_receiver,
        raw_sha256=sha, r16=r16,
        findings=tuple(Finding(f.code, f.field, f.detail) for f in t.findings),
        ultimate_originator=_opt_party(t.ultimate_originator, f"{p}.ultimate_originator"),
        ultimate_beneficiary=_opt_party(t.ultimate_beneficiary, f"{p}.ultimate_beneficiary"),
        initiating_party=_opt_party(t.initiating_party, f"{p}.initiating_party"),
        original=None if t.original is None else Original(
            uetr=fields.uetr(t.original.uetr, f"{p}.original.uetr") if t.original.uetr is not None else None,
            end_to_end_id=t.original.end_to_end_id, instruction_id=t.original.instruction_id,
            reason=t.original.reason),
    )


def _opt_party(party: PartyIn | None, p: str) -> Party | None:
    return None if party is None else _party(party, p)


def _refuse_controls(value: object, p: str, bad: re.Pattern[str] = _CONTROL, depth: int = 0) -> None:
    """``MessageError`` at the first string under ``value`` holding a character ``bad`` matches.
    Text sits at most 3 levels below a transaction's keys (``originator.identifiers[0].value``);
    deeper values are left to the schema, which refuses them, so this never recurses far."""
    if isinstance(value, str):
        m = bad.search(value)
        if m is not None:
            c = ord(m.group())
            what = "a lone surrogate (not a character)" if 0xD800 <= c <= 0xDFFF else "a control character"
            raise MessageError(f"holds U+{c:04X}, {what}, at offset {m.start()}", field=p)
    elif depth >= _TEXT_DEPTH:
        return
    elif isinstance(value, dict):
        for key, v in value.items():
            _refuse_controls(v, f"{p}.{key}", depth=depth + 1)
    elif isinstance(value, list):
        for n, v in enumerate(value):
            _refuse_controls(v, f"{p}[{n}]", depth=depth + 1)


def _amount(text: str, ccy: str, where: str, ccy_where: str) -> tuple[Decimal, str]:
    fields.currency_exponent(ccy, ccy_where)
    return fields.amount(text, ccy, where, decimal_mark="."), ccy



def _party(party: PartyIn, p: str) -> Party:
    iban = fields.iban_or_none(party.account) if party.account is not None else None
    if party.iban is not None and party.iban != iban:
        raise MessageError(f"iban {party.iban!r} is not the valid IBAN form of account {party.account!r}",
                           field=f"{p}.iban")
    return Party(
        name=party.name, account=party.account, iban=iban,
        bic=fields.bic(party.bic, f"{p}.bic") if party.bic is not None else None,
        address_lines=party.address_lines,
        country=fields.country(party.country, f"{p}.country") if party.country is not None else None,
        identifiers=tuple(_identifier(i, f"{p}.identifiers[{n}]") for n, i in enumerate(party.identifiers)),
    )


def _identifier(ident: IdentifierIn, p: str) -> Identifier:
    value = ident.value
    if ident.scheme == "DOB":
        value = fields.iso_date(value, f"{p}.value").isoformat()
    elif ident.scheme == "BIC":
        value = fields.bic(value, f"{p}.value")
    elif ident.scheme == "LEI":
        value = fields.lei(value, f"{p}.value")
    country = fields.country(ident.country, f"{p}.country") if ident.country is not None else None
    return Identifier(ident.scheme, value, country)


def _agent(agent: AgentIn, p: str) -> Agent:
    return Agent(role=agent.role, bic=fields.bic(agent.bic, f"{p}.bic") if agent.bic is not None else None,
                 account=agent.account, name_address=agent.name_address)


def _error(exc: ValidationError, p: str) -> MessageError:
    """The first schema error, at its JSONPath."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = p + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"])
    reason = first["msg"]
    if first["type"] != "missing":
        reason += f" (got {_short(first['input'])})"
    if len(errors) > 1:
        reason += f"; and {len(errors) - 1} more error(s)"
    return MessageError(reason, field=where)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
