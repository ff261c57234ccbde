"""The canonical ``Transaction``: what every message format becomes, and its canonical JSON.

Frozen dataclasses; amounts are ``Decimal`` with exactly the currency's ISO 4217 minor
units, never float. ``to_json()`` is the documented canonical form (docs/messages.md, "The Transaction");
``canonical_bytes()`` is its RFC 8785 serialisation, whose SHA-256 identifies the
transaction independently of the format it arrived in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from functools import cached_property
from typing import Any

import orjson

__all__ = ["R16", "TRANSACTION_SCHEMA", "Agent", "Identifier", "Party", "Transaction"]

TRANSACTION_SCHEMA = "sealtrail.transaction/1"


@dataclass(frozen=True)
class Identifier:
    """A party identifier: scheme (``NIDN`` national id, ``CUST`` customer id, ``CCPT``
    passport, ``ARNU`` alien registration, ``DRLC`` driving licence, ``EMPL`` employer,
    ``IBEI``, ``SOSE`` social security, ``TXID`` tax id, ``DOB``/``POB`` birth date/place,
    ``BIC``/``LEI`` for organisations, ``OTHR``), value, and issuing country if known."""

    scheme: str
    value: str
    country: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "value": self.value, "country": self.country}


@dataclass(frozen=True)
class Party:
    """Originator (ordering customer / debtor) or beneficiary (creditor)."""

    name: str | None = None
    account: str | None = None  # as given: IBAN, account number, or /proprietary
    iban: str | None = None  # set when ``account`` is a valid IBAN (normalised)
    bic: str | None = None  # parties identified by BIC (50A, 59A, 58A)
    address_lines: tuple[str, ...] = ()
    country: str | None = None  # ISO 3166-1 alpha-2
    identifiers: tuple[Identifier, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "account": self.account, "iban": self.iban, "bic": self.bic,
            "address_lines": list(self.address_lines), "country": self.country,
            "identifiers": [i.to_json() for i in self.identifiers],
        }


@dataclass(frozen=True)
class Agent:
    """A financial institution in the chain, by role (``sender``, ``receiver``,
    ``ordering_institution``, ``senders_correspondent``, ``receivers_correspondent``,
    ``third_reimbursement``, ``intermediary``, ``account_with``, ``beneficiary_institution``,
    ``instructing``, ``instructed``, ``debtor_agent``, ``creditor_agent``)."""

    role: str
    bic: str | None = None
    account: str | None = None
    name_address: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "bic": self.bic, "account": self.account,
                "name_address": list(self.name_address)}


@dataclass(frozen=True)
class R16:
    """Which FATF Recommendation 16 fields the message carried."""

    originator_name: bool
    originator_account: bool
    originator_address_or_id: bool  # address, national/customer id, or birth date and place
    beneficiary_name: bool
    beneficiary_account: bool

    @classmethod
    def of(cls, originator: Party, beneficiary: Party) -> R16:
        ids = {i.scheme for i in originator.identifiers}
        return cls(
            originator_name=bool(originator.name),
            originator_account=bool(originator.account),
            originator_address_or_id=bool(originator.address_lines)
            or bool(ids - {"DOB", "POB"}) or {"DOB", "POB"} <= ids,
            beneficiary_name=bool(beneficiary.name),
            beneficiary_account=bool(beneficiary.account),
        )

    @property
    def complete(self) -> bool:
        return all(self.to_json().values())

    def to_json(self) -> dict[str, bool]:
        return {
            "originator_name": self.originator_name,
            "originator_account": self.originator_account,
            "originator_address_or_id": self.originator_address_or_id,
            "beneficiary_name": self.beneficiary_name,
            "beneficiary_account": self.beneficiary_account,
        }


@dataclass(frozen=True)
class Transaction:
    message_type: str  # MT103, MT202, MT202COV, pacs.008.001.08, ..., json
    reference: str  # :20: / EndToEndId
    amount: Decimal  # interbank settlement amount (:32A: / IntrBkSttlmAmt)
    currency: str
    value_date: date
    originator: Party
    beneficiary: Party
    raw_sha256: str  # SHA-256 of the raw message bytes as received
    uetr: str | None = None
    related_reference: str | None = None  # :21: / InstrId
    bank_operation_code: str | None = None  # :23B:
    instructed_amount: Decimal | None = None  # :33B: / InstdAmt
    instructed_currency: str | None = None
    exchange_rate: Decimal | None = None  # :36: / XchgRate
    agents: tuple[Agent, ...] = ()
    remittance: str | None = None  # :70: / RmtInf
    charges: str | None = None  # :71A: OUR/SHA/BEN (pacs.008 ChrgBr: DEBT/SHAR/CRED)
    sender_to_receiver: str | None = None  # :72:
    r16: R16 = field(default=R16(False, False, False, False, False))

    def to_json(self) -> dict[str, Any]:
        """The canonical JSON form (documented in docs/messages.md)."""
        def dec(d: Decimal | None) -> str | None:
            return None if d is None else format(d, "f")

        return {
            "schema": TRANSACTION_SCHEMA,
            "message_type": self.message_type,
            "reference": self.reference,
            "related_reference": self.related_reference,
            "uetr": self.uetr,
            "bank_operation_code": self.bank_operation_code,
            "value_date": self.value_date.isoformat(),
            "amount": dec(self.amount),
            "currency": self.currency,
            "instructed_amount": dec(self.instructed_amount),
            "instructed_currency": self.instructed_currency,
            "exchange_rate": dec(self.exchange_rate),
            "originator": self.originator.to_json(),
            "beneficiary": self.beneficiary.to_json(),
            "agents": [a.to_json() for a in self.agents],
            "remittance": self.remittance,
            "charges": self.charges,
            "sender_to_receiver": self.sender_to_receiver,
            "r16": self.r16.to_json(),
            "raw_sha256": self.raw_sha256,
        }

    def canonical_bytes(self) -> bytes:
        """RFC 8785 bytes of ``to_json()``.

        orjson with sorted keys, not the rfc8785 package (~100 us a transaction): this form
        holds only ASCII keys, strings, booleans, nulls, lists and objects (amounts and rates
        are decimal strings, never numbers), and for those orjson's output is exactly JCS:
        the same escaping, and code-point key order equals UTF-16 order on ASCII.
        ``tests/inference/messages/test_transaction_canonical.py`` checks it against rfc8785.
        """
        return orjson.dumps(self.to_json(), option=orjson.OPT_SORT_KEYS)

    @cached_property
    def sha256(self) -> str:
        """SHA-256 hex of ``canonical_bytes()`` (computed once: the pipeline asks often)."""
        return hashlib.sha256(self.canonical_bytes()).hexdigest()
