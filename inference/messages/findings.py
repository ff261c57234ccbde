"""Data-quality findings: what was wrong with a message that could still be read as a payment.

The parsers read liberally and decide strictly: a payment whose amount, currency, value date and
parties can be read is decided, and each defect met on the way (an IBAN failing its check digits,
a BIC of no ISO 3166 country, a text line too long, a wrapper's NAK) becomes a ``Finding`` on the
``Transaction``, part of its canonical form and hash. Only what cannot be read as a payment, or
reads two ways, is refused (``MessageError``).

A parser opens ``collect()`` around one message; the field checks it calls report with
``note(code, field, detail)`` into the innermost open collection (a context variable, so the
helpers keep their signatures and nested or concurrent parses never mix). ``CODES`` is the
catalogue documented in docs/messages.md; a code outside it is a programming error.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

__all__ = ["CODES", "MAX_FINDINGS", "Finding", "collect", "note"]

CODES: dict[str, str] = {
    "IBAN_CHECK_DIGITS": "an account given as an IBAN fails its country, length or check digits; kept as "
                         "an account number, not as an IBAN",
    "BIC_UNKNOWN_COUNTRY": "a BIC whose country code (characters 5-6) is not an ISO 3166 country; kept",
    "BIC_MALFORMED": "a BIC that is not 8 or 11 letters and digits of the BIC shape; dropped",
    "APPHDR_VERSION_MISMATCH": "the business application header names another message version than "
                               "the Document it carries",
    "MISSING_SETTLEMENT_INFO": "the group header has no settlement information (SttlmInf/SttlmMtd)",
    "NB_OF_TXS_MISMATCH": "NbOfTxs differs from the transactions the message holds",
    "CTRL_SUM_MISMATCH": "CtrlSum differs from the sum of the transactions' amounts",
    "MANDATORY_FIELD_MISSING": "a mandatory field is missing whose absence does not stop the payment "
                               "being read",
    "CODE_NOT_IN_LIST": "a coded value is outside its code list; kept as given",
    "NON_X_CHARACTER": "FIN text outside the SWIFT X character set; kept as given",
    "LINE_TOO_LONG": "a FIN text field has longer lines, or more lines, than its format allows; kept",
    "FIELD_NOT_IN_MESSAGE": "a FIN field that is not part of this message type; ignored",
    "OPTION_NOT_ALLOWED": "a FIN institution field in an option its message does not allow; its lines "
                          "kept as name and address",
    "REFERENCE_FORMAT": "a reference that starts or ends with '/', holds '//' or is longer than 16",
    "FIELD_TOO_LONG": "an ISO 20022 text value longer than its schema allows; kept",
    "COUNTRY_UNKNOWN": "a country code that is not ISO 3166-1 alpha-2; dropped",
    "LEI_CHECK_DIGITS": "an LEI failing its ISO 17442 format or check digits; kept as an other id",
    "UETR_INVALID": "a UETR that is not a lower-case version 4 UUID; dropped",
    "UNSTRUCTURED_ADDRESS": "an ISO 20022 postal address of address lines only (no town and country)",
    "SERVICE_ACK": "the message came behind a SWIFT ACK service message (451:0)",
    "SERVICE_NAK": "the message came behind a SWIFT NAK service message (451:1, reason in 405)",
    "LAYOUT": "stray characters or indentation around the FIN blocks or the lines of block 4, or line breaks "
              "and tabs inside an ISO 20022 text (read as single spaces), read past",
    "SETTLEMENT_DATE_CONFLICT": "a transaction's settlement date differs from its group header's; the "
                                "transaction's is used",
    "HEADER_FORMAT": "a FIN basic or application header not in its exact layout; its address read as far as "
                     "it goes",
    "DATE_FORMAT": "an ISO 20022 date given as a date-time; its date is used",
    "HEADERS_MISSING": "a FIN text block without its basic and application headers, read as the message "
                       "type the caller stated (format mt103 or mt202); sender and receiver unknown",
}
MAX_FINDINGS = 64  # per transaction; a message with more says so in the last one


@dataclass(frozen=True, slots=True)
class Finding:
    """One defect: its ``code`` (``CODES``), the ``field`` it was found in, and what was found."""

    code: str
    field: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "field": self.field, "detail": self.detail}


_open: ContextVar[list[Finding] | None] = ContextVar("sealtrail_findings", default=None)


class collect:
    """A fresh list the ``note`` calls inside the block append to. A class rather than a
    ``contextlib.contextmanager`` generator: it is entered once a message, and the generator's
    enter and exit cost several times more on the parsers' hot path."""

    __slots__ = ("_found", "_token")

    def __init__(self) -> None:
        self._found: list[Finding] = []

    def __enter__(self) -> list[Finding]:
        self._token = _open.set(self._found)
        return self._found

    def __exit__(self, *exc: object) -> None:
        _open.reset(self._token)


def note(code: str, field: str, detail: str) -> None:
    """Report a finding to the open collection (none open: the caller only checks a value)."""
    if code not in CODES:
        raise ValueError(f"unknown finding code {code!r}")
    found = _open.get()
    if found is None:
        return
    if len(found) < MAX_FINDINGS:
        found.append(Finding(code, field, detail[:200]))
