"""FIN with the message type named by the caller (format ``mt103`` / ``mt202``): a text block without
its headers is read as that type's text block, sender and receiver unknown (``HEADERS_MISSING``);
what is unreadable in it is refused as in any message; with ``auto`` or ``mt`` it stays refused,
since nothing states its type; a header naming another type than the one stated is refused."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from inference.messages import FORMATS, MessageError, Transaction, parse_messages
from inference.messages.mt import parse_mt

VEC = Path(__file__).parents[2] / "vectors" / "messages" / "mt"
MT103 = (VEC / "mt103_50a_59a.fin").read_bytes()
MT202 = (VEC / "mt202.fin").read_bytes()
MT202COV = (VEC / "mt202cov.fin").read_bytes()


def text_block(msg: bytes) -> bytes:
    """The fields of ``msg``'s block 4 alone, as a text block is written without its headers."""
    m = re.search(rb"\{4:\n(.*?\n)-\}", msg, re.S)
    assert m is not None
    return m.group(1)


def decided(data: bytes, fmt: str) -> Transaction:
    (got,) = parse_messages(data, fmt)  # type: ignore[arg-type]
    assert isinstance(got, Transaction), str(got)
    return got


def refused(data: bytes, fmt: str) -> MessageError:
    (got,) = parse_messages(data, fmt)  # type: ignore[arg-type]
    assert isinstance(got, MessageError), f"decided: {got}"
    return got


def payment(t: Transaction) -> dict[str, object]:
    """What the payment says apart from the headers: no raw hash, sender, receiver or findings."""
    out = {k: v for k, v in dataclasses.asdict(t).items() if k not in ("raw_sha256", "findings", "agents")}
    out["agents"] = [a for a in t.agents if a.role not in ("sender", "receiver")]
    return out


def test_the_stated_formats_are_offered() -> None:
    assert {"mt103", "mt202"} <= set(FORMATS)


@pytest.mark.parametrize("shape", [b"%s", b"{4:\n%s-}", b"\r\n%s-\r\n"], ids=["fields", "block4", "dash"])
def test_an_mt103_text_block_reads_as_the_same_payment_with_headers_missing(shape: bytes) -> None:
    bare = shape % text_block(MT103)
    got = decided(bare, "mt103")
    want = decided(MT103, "auto")
    assert payment(got) == payment(want)
    assert [f.code for f in got.findings] == ["HEADERS_MISSING"]
    assert {a.role: a.bic for a in got.agents if a.role in ("sender", "receiver")} == {"sender": None,
                                                                                       "receiver": None}


@pytest.mark.parametrize("fmt", ["auto", "mt"])
def test_without_a_stated_type_a_text_block_stays_refused(fmt: str) -> None:
    err = refused(text_block(MT103), fmt)
    assert err.field == "block 2"
    assert "not stated" in str(err) and "mt103" in str(err)


def test_a_message_with_headers_reads_as_without_the_stated_type() -> None:
    assert decided(MT103, "mt103") == decided(MT103, "auto")
    assert decided(MT202COV, "mt202") == decided(MT202COV, "auto")


@pytest.mark.parametrize("data, fmt, names", [(MT202, "mt103", "MT202"), (MT103, "mt202", "MT103")])
def test_a_header_naming_another_type_than_stated_is_refused(data: bytes, fmt: str, names: str) -> None:
    err = refused(data, fmt)
    assert err.field == "block 2"
    assert names in str(err)


def test_an_mt202_text_block_and_a_cover_one_with_its_user_header() -> None:
    got = decided(text_block(MT202), "mt202")
    assert got.message_type == "MT202"
    assert payment(got) == {**payment(decided(MT202, "auto")), "uetr": None}  # the UETR was block 3's
    cov = decided(b"{3:{119:COV}}{4:\n" + text_block(MT202COV) + b"-}", "mt202")
    assert cov.message_type == "MT202COV"
    assert cov.originator.name == "SMITH JOHN"
    assert [f.code for f in cov.findings] == ["HEADERS_MISSING"]


def test_a_bare_mt202_with_customer_fields_but_no_cov_is_refused() -> None:
    assert refused(text_block(MT202COV), "mt202").field == ":50a:"


def test_a_bare_mt202_without_an_ordering_institution_is_refused() -> None:
    fields = re.sub(rb":52A:[^\n]*\n", b"", text_block(MT202))
    assert refused(fields, "mt202").field == ":52a:"


@pytest.mark.parametrize("edit, field", [
    ((b":32A:261130CHF", b":32A:261130XYZ"), ":32A:"),  # not an ISO 4217 currency
    ((b":32A:261130", b":32A:261332"), ":32A:"),  # not a date
    ((b":59A:", b":70:"), ":59a:"),  # no beneficiary
    ((b":50A:", b":70:"), ":50a:"),  # no ordering customer
    ((b":20:FR-INTRA-44\n", b":20:FR-INTRA-44\n:20:SECOND\n"), ":20:"),  # two references
    ((b":71A:BEN\n", b":71A:BEN\n:32A:261130CHF1,00\n"), ":32A:"),  # two amounts
])
def test_what_is_unreadable_in_a_text_block_is_refused(edit: tuple[bytes, bytes], field: str) -> None:
    bare = text_block(MT103)
    assert edit[0] in bare
    assert refused(bare.replace(*edit), "mt103").field == field


def test_each_message_of_a_file_must_be_of_the_stated_type() -> None:
    got = parse_messages(MT103 + b"\n$" + text_block(MT103) + b"$" + MT202, "mt103")
    assert [type(g).__name__ for g in got] == ["Transaction", "Transaction", "MessageError"]
    assert isinstance(got[2], MessageError) and got[2].field == "block 2"


def test_a_partial_header_is_not_a_text_block() -> None:
    partial = b"{1:F01BNPAFRPPAXXX0000000000}{4:\n" + text_block(MT103) + b"-}"
    assert refused(partial, "mt103").field == "block 2"


def test_only_the_types_read_can_be_stated() -> None:
    with pytest.raises(ValueError, match="101"):
        list(parse_mt(MT103, stated="101"))
