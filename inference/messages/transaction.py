"""The canonical ``Transaction``: what every message format becomes, and its canonical JSON.

Frozen dataclasses; amounts are ``Decimal`` with exactly the currency's ISO 4217 minor
units, never float. ``to_json()`` is the documented canonical form (docs/messages.md, "The Transaction");
``canonical_bytes()`` is its RFC 8785 serialisation, whose SHA-256 identifies the
transaction independently of the format it arrived in.

Two versions of the form exist. ``sealtrail.transaction/2`` (made now) adds the data-quality
``findings``, the ultimate parties, the initiating party and, for a return, the payment it
returns; ``sealtrail.transaction/1`` is the form before them, still made on request
(``canonical_bytes(1)``) so that a decision sealed with a version 1 hash is found again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from functools import cached_property
from typing import Any

import orjson

from inference.messages.findings import Finding

__all__ = ["R16", "TRANSACTION_SCHEMA", "TRANSACTION_SCHEMAS", "Agent", "Identifier", "Original", "Party",
           "Transaction"]

TRANSACTION_SCHEMA = "sealtrail.transaction/2"
TRANSACTION_SCHEMAS = {1: "sealtrail.transaction/1", 2: TRANSACTION_SCHEMA}


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
class Original:
    """The payment a return (pacs.004) sends back: its UETR, end-to-end and instruction ids, and the
    return reason code (ISO 20022 ExternalReturnReason1Code, e.g. ``AC04`` closed account)."""

    uetr: str | None = None
    end_to_end_id: str | None = None
    instruction_id: str | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"uetr": self.uetr, "end_to_end_id": self.end_to_end_id,
                "instruction_id": self.instruction_id, "reason": self.reason}


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
    # transaction/2
    findings: tuple[Finding, ...] = ()
    ultimate_originator: Party | None = None  # UltmtDbtr
    ultimate_beneficiary: Party | None = None  # UltmtCdtr
    initiating_party: Party | None = None  # InitgPty (pain.001)
    original: Original | None = None  # the returned payment (pacs.004)

    def to_json(self, version: int = 2) -> dict[str, Any]:
        """The canonical JSON form (documented in docs/messages.md) of schema ``version``."""
        def dec(d: Decimal | None) -> str | None:
            return None if d is None else format(d, "f")

        def party(p: Party | None) -> dict[str, Any] | None:
            return None if p is None else p.to_json()

        out: dict[str, Any] = {
            "schema": TRANSACTION_SCHEMAS[version],
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
        if version >= 2:
            out["findings"] = [f.to_json() for f in self.findings]
            out["ultimate_originator"] = party(self.ultimate_originator)
            out["ultimate_beneficiary"] = party(self.ultimate_beneficiary)
            out["initiating_party"] = party(self.initiating_party)
            out["original"] = None if self.original is None else self.original.to_json()
        return out

    def canonical_bytes(self, version: int = 2) -> bytes:
        """RFC 8785 bytes of ``to_json()``.

        orjson with sorted keys, not the rfc8785 package (~100 us a transaction): this form
        holds only ASCII keys, strings, booleans, nulls, lists and objects (amounts and rates
        are decimal strings, never numbers), and for those orjson's output is exactly JCS:
        the same escaping, and code-point key order equals UTF-16 order on ASCII.
        ``tests/inference/messages/test_transaction_canonical.py`` checks it against rfc8785.
        """
        return orjson.dumps(self.to_json(version), option=orjson.OPT_SORT_KEYS)

    @cached_property
    def sha256(self) -> str:
        """SHA-256 hex of ``canonical_bytes()`` (computed once: the pipeline asks often)."""
        return hashlib.sha256(self.canonical_bytes()).hexdigest()

    def sha256_of(self, schema: str) -> str:
        """SHA-256 hex of the canonical form of ``schema`` (a ``TRANSACTION_SCHEMAS`` value), to find
        a transaction that a record sealed under an earlier version."""
        for version, name in TRANSACTION_SCHEMAS.items():
            if name == schema:
                if version == 2:
                    return self.sha256
                return hashlib.sha256(self.canonical_bytes(version)).hexdigest()
        raise ValueError(f"unknown transaction schema {schema!r}")
