"""SWIFT FIN MT103, MT202 and MT202COV (blocks 1-5) into ``Transaction``; RJE and DOS-PCC files too.

Strict by design: a message the parser is not sure of is refused with the field and the
reason, never guessed at. Block 4 is checked against the SWIFT X character set.
Two-digit years are 20YY (FIN value dates). The framing is read as SWIFT interfaces write it:
white space and line breaks (LF or CRLF) between and around the blocks, a ``{S:}`` trailer, a
byte-order mark, RJE files ('$' between messages) and DOS-PCC files (each message between SOH
0x01 and ETX 0x03, padded with spaces to 512-byte sectors).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from datetime import date
from decimal import Decimal

from inference.messages import fields
from inference.messages.errors import MessageError
from inference.messages.fields import amount, bic, currency_exponent, uetr
from inference.messages.mt_fields import (
    agent,
    beneficiary_customer,
    institution_party,
    ordering_customer,
)
from inference.messages.transaction import R16, Agent, Identifier, Party, Transaction

__all__ = ["MAX_MESSAGE_BYTES", "parse_mt", "split_rje"]

MAX_MESSAGE_BYTES = 12_000  # FIN text block is at most 10,000 characters
_X = re.compile(r"[A-Za-z0-9/\-?:().,'+ \n]*")
_BLOCK1 = re.compile(r"F01([A-Z0-9]{12})(\d{4})(\d{6})")
_BLOCK2_IN = re.compile(r"I(\d{3})([A-Z0-9]{12})([NUS]?)(\d{0,4})")
_BLOCK2_OUT = re.compile(r"O(\d{3})(\d{4})(\d{6}[A-Z0-9]{12}\d{4}\d{6})(\d{6})(\d{4})([NUS]?)")
_FIELD = re.compile(r"^:(\d{2}[A-Z]?):", re.M)
_AGENTS = (("52", "ordering_institution"), ("53", "senders_correspondent"),
           ("54", "receivers_correspondent"), ("55", "third_reimbursement"),
           ("56", "intermediary"), ("57", "account_with"))
_REQUIRED = {"103": ("20", "23B", "32A", "50", "59", "71A"), "202": ("20", "21", "32A", "58")}
_LETTERED = frozenset({"50", "51", "52", "53", "54", "55", "56", "57", "58", "59"})
_ALLOWED = {  # the fields of each message (letters of options checked by the field parsers)
    "103": frozenset({"13C", "20", "23B", "23E", "26T", "32A", "33B", "36", "50", "51", "52",
                      "53", "54", "55", "56", "57", "59", "70", "71A", "71F", "71G", "72", "77B",
                      "77T"}),
    "202": frozenset({"13C", "20", "21", "32A", "52", "53", "54", "56", "57", "58", "72"}),
}
_COV_B = frozenset({"50", "52", "56", "57", "59", "70", "72", "33B"})
_REPEATABLE = frozenset({"13C", "23E", "71F"})


_SOH, _ETX = b"\x01", b"\x03"
_BLANK = b"\r\n \t"


def split_rje(data: bytes) -> list[bytes]:
    """The messages of a file: a DOS-PCC file (SOH ... ETX frames), an RJE file ('$' between
    messages) or a single FIN message. A DOS-PCC frame without its ETX, or text outside the
    frames, is returned as a part of its own starting with SOH: ``parse_mt`` refuses it."""
    head = data.lstrip(b"\xef\xbb\xbf" + _BLANK)
    if head.startswith(_SOH):
        return _frames(head)
    parts = [p.strip(_BLANK) for p in data.split(b"$")]
    return [p for p in parts if p] or [data]


def _frames(data: bytes) -> list[bytes]:
    out: list[bytes] = []
    for chunk in data.split(_SOH)[1:]:
        body, etx, rest = chunk.partition(_ETX)
        out.append(body if etx else _SOH + body)  # no ETX: kept with its SOH, to be refused
        if rest.strip(_BLANK):
            out.append(_SOH + b"outside" + rest[:16])
    return out


_WELL_FORMED = re.compile(
    r"\{1:([^{}]*)\}\{2:([^{}]*)\}(?:\{3:((?:\{[^{}]*\})*)\})?\{4:\n(.*?\n)-\}"
    r"(?:\{5:((?:\{[^{}]*\})*)\})?(?:\{S:(?:\{[^{}]*\})*\})?\s*\Z", re.S)


def _blocks(text: str) -> dict[str, str]:
    """Blocks 1-5 of one message: one regular expression for the usual well-formed case, the
    slower scan below when it fails (white space between blocks, a trailer), which also says
    what is wrong where something is."""
    m = _WELL_FORMED.match(text)
    if m is not None:
        found = dict(zip("12345", m.groups(), strict=True))
        return {k: v for k, v in found.items() if v is not None}
    blocks = _scan_blocks(text)
    order = list(blocks)
    if order != sorted(order, key=_ORDER.index):
        raise MessageError(f"blocks are not in the order 1, 2, 3, 4, 5 (found {', '.join(order)})",
                           field="header")
    blocks.pop("S", None)
    return blocks


_ORDER = "12345S"
_BLOCK_START = re.compile(r"\{([1-5S]):")


def _scan_blocks(text: str) -> dict[str, str]:
    """Top-level ``{n:...}`` blocks with balanced braces, white space between them skipped;
    block 4 ends at '\\n-}'."""
    blocks: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        if text[pos] in " \t\r\n":
            pos += 1
            continue
        m = _BLOCK_START.match(text, pos)
        if m is None:
            raise MessageError(f"unexpected text {text[pos:pos + 12]!r} outside the blocks",
                               field="header")
        key = m.group(1)
        if key in blocks:
            raise MessageError(f"block {key} appears twice", field=f"block {key}")
        start = m.end()
        if key == "4":
            end = text.find("\n-}", start)
            if end < 0:
                raise MessageError("text block is truncated (no closing '-}')", field="block 4")
            blocks[key] = text[start:end + 1]
            pos = end + 3
            continue
        depth, i = 1, start
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:
            raise MessageError("block is truncated (unbalanced braces)", field=f"block {key}")
        blocks[key] = text[start:i - 1]
        pos = i
    for needed in ("1", "2", "4"):
        if needed not in blocks:
            raise MessageError("is missing", field=f"block {needed}")
    return blocks


def _fields(block4: str) -> list[tuple[str, str]]:
    body = block4.lstrip("\n")
    bad = _X.fullmatch(body)
    if bad is None:
        ch = next(c for c in body if not _X.fullmatch(c))
        raise MessageError(f"character {ch!r} is outside the SWIFT X character set",
                           field="block 4")
    starts = list(_FIELD.finditer(body))
    if not starts or starts[0].start() != 0:
        raise MessageError("does not start with a field tag", field="block 4")
    out = []
    for m, nxt in zip(starts, [*starts[1:], None], strict=True):
        value = body[m.end(): nxt.start() if nxt else len(body)].rstrip("\n")
        out.append((m.group(1), value))
    return out


_YYMMDD = re.compile(r"\d{6}")
_MONEY = re.compile(r"([A-Z]{3})(.+)")
_REF = re.compile(r"[^\n]{1,16}")


def _date(text: str, tag: str) -> date:
    if not _YYMMDD.fullmatch(text):
        raise MessageError(f"date {text!r} is not YYMMDD", field=tag)
    try:
        return date(2000 + int(text[:2]), int(text[2:4]), int(text[4:6]))
    except ValueError:
        raise MessageError(f"date {text!r} is not a calendar date", field=tag) from None


def _money(value: str, tag: str) -> tuple[str, Decimal]:
    m = _MONEY.fullmatch(value)
    if m is None:
        raise MessageError(f"{value!r} is not currency + amount", field=tag)
    currency_exponent(m.group(1), tag)
    return m.group(1), amount(m.group(2), m.group(1), tag, decimal_mark=",")


def _reference(value: str, tag: str) -> str:
    if not _REF.fullmatch(value) or value.startswith("/") or value.endswith("/") \
            or "//" in value:
        raise MessageError(f"reference {value!r} must be 1-16 characters, not start or end "
                           "with '/' nor contain '//'", field=tag)
    return value


def _text(value: str, tag: str, most: int) -> str:
    lines = value.split("\n")
    if len(lines) > most or any(len(ln) > 35 for ln in lines):
        raise MessageError(f"must be at most {most} lines of 35 characters", field=tag)
    return value


class _Message:
    def __init__(self, raw: bytes) -> None:
        if len(raw) > MAX_MESSAGE_BYTES:
            raise MessageError(f"message is {len(raw):,} bytes, more than {MAX_MESSAGE_BYTES:,}",
                               field="message")
        try:
            text = raw.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n")
        except UnicodeDecodeError as exc:
            raise MessageError(f"is not valid UTF-8 (byte {exc.start})", field="message") from None
        self.raw = raw
        self.blocks = _blocks(text)
        b1 = _BLOCK1.fullmatch(self.blocks["1"])
        if b1 is None:
            raise MessageError(f"basic header {self.blocks['1']!r} is malformed", field="block 1")
        b2 = _BLOCK2_IN.fullmatch(self.blocks["2"]) or _BLOCK2_OUT.fullmatch(self.blocks["2"])
        if b2 is None:
            raise MessageError(f"application header {self.blocks['2']!r} is malformed",
                               field="block 2")
        self.mt = b2.group(1)
        if self.mt not in _REQUIRED:
            raise MessageError(f"message type MT{self.mt} is not supported (MT103, MT202, "
                               "MT202COV)", field="block 2")
        # Input (I): block 1 is the sender's address, block 2 the receiver's. Output (O):
        # block 1 is the receiver's, and the sender's sits inside the input reference (MIR).
        lt = b1.group(1)
        if self.blocks["2"].startswith("I"):
            sender_lt, receiver_lt = lt, b2.group(2)
        else:
            sender_lt, receiver_lt = b2.group(3)[6:18], lt
        self.sender = bic(sender_lt[:8] + sender_lt[9:], "block 2" if sender_lt != lt else "block 1")
        self.receiver = bic(receiver_lt[:8] + receiver_lt[9:],
                            "block 2" if receiver_lt != lt else "block 1")
        self.user = dict(re.findall(r"\{(\d{3}):([^{}]*)\}", self.blocks.get("3", "")))
        self.cov = self.mt == "202" and self.user.get("119") == "COV"
        self.fields = _fields(self.blocks["4"])

    def first(self, number: str, *, after: str | None = None) -> tuple[str, str] | None:
        """(option letter, value) of the first field ``number`` (after tag ``after``)."""
        seen = after is None
        for tag, value in self.fields:
            if not seen:
                seen = tag[:2] == after
                continue
            if tag[:2] == number:
                return tag[2:], value
        return None


def _generic(tag: str) -> str:
    return tag[:2] if tag[:2] in _LETTERED else tag


def _check_sequence(fields: list[tuple[str, str]], allowed: frozenset[str],
                    required: tuple[str, ...], name: str) -> None:
    """Every tag allowed in this sequence, none repeated unless repeatable, the mandatory
    ones present: a message with two :32A: must not be screened on one and paid on the other."""
    seen: set[str] = set()
    for tag, _ in fields:
        g = _generic(tag)
        if g not in allowed:
            raise MessageError(f"is not a field of {name}", field=f":{tag}:")
        if g in seen and g not in _REPEATABLE:
            raise MessageError(f"appears twice in {name}", field=f":{tag}:")
        seen.add(g)
    for need in required:
        if need not in seen:
            letter = "a" if need in _LETTERED else ""
            raise MessageError(f"is mandatory in {name} and missing", field=f":{need}{letter}:")


def _assemble(msg: _Message) -> Transaction:
    seq_a = msg.fields
    split = None
    if msg.mt == "202":
        split = next((i for i, (t, _) in enumerate(msg.fields) if t[:2] == "50"), None)
        if split is not None and not msg.cov:
            raise MessageError("customer fields (:50a:) in an MT202 without {119:COV} in block 3",
                               field=":50a:")
        if msg.cov and split is None:
            raise MessageError("MT202COV needs the underlying customer sequence B (:50a:)",
                               field=":50a:")
        seq_a = msg.fields[:split] if split is not None else msg.fields
    name = "MT202COV sequence A" if msg.cov else f"MT{msg.mt}"
    _check_sequence(seq_a, _ALLOWED[msg.mt], _REQUIRED[msg.mt], name)
    if split is not None:
        _check_sequence(msg.fields[split:], _COV_B, ("50", "59"), "MT202COV sequence B")
    values = dict(seq_a)
    ref = _reference(values["20"], ":20:")
    d = values["32A"]
    value_date = _date(d[:6], ":32A:")
    currency, amt = _money(d[6:], ":32A:")
    rate = values.get("36")
    exchange_rate = fields.rate(rate, ":36:", decimal_mark=",") if rate is not None else None
    agents: list[Agent] = [Agent("sender", bic=msg.sender), Agent("receiver", bic=msg.receiver)]
    seq_a_tags = dict(seq_a)
    by_number: dict[str, tuple[str, str]] = {}
    for t, v in seq_a:
        by_number.setdefault(t[:2], (t, v))
    for number, role in _AGENTS:
        found = by_number.get(number)
        if found:
            agents.append(agent(role, number, found[0][2:], found[1]))
    if msg.mt == "103":
        o, b = by_number["50"], by_number["59"]
        originator = ordering_customer(o[0][2:], o[1])
        beneficiary = beneficiary_customer(b[0][2:], b[1])
        mtype = "MT103"
    else:
        o52, b58 = by_number.get("52"), by_number["58"]
        originator = institution_party(o52[0][2:], o52[1], "52") if o52 else Party(
            bic=msg.sender, identifiers=(Identifier("BIC", msg.sender),))
        beneficiary = institution_party(b58[0][2:], b58[1], "58")
        agents.append(Agent("beneficiary_institution", bic=beneficiary.bic,
                            account=beneficiary.account))
        mtype = "MT202"
        if msg.cov and split is not None:
            seq_b = msg.fields[split:]
            ob = next((t, v) for t, v in seq_b if t[:2] == "50")
            bb = next(((t, v) for t, v in seq_b if t[:2] == "59"), None)
            if bb is None:
                raise MessageError("MT202COV sequence B needs :59a:", field=":59a:")
            originator = ordering_customer(ob[0][2:], ob[1])
            beneficiary = beneficiary_customer(bb[0][2:], bb[1])
            seq_a_tags.update({k: v for k, v in seq_b if k in ("70", "72", "33B")})
            mtype = "MT202COV"
    instructed = seq_a_tags.get("33B")
    inst_ccy, inst_amt = _money(instructed, ":33B:") if instructed else (None, None)
    u = msg.user.get("121")
    charges = seq_a_tags.get("71A")
    if charges is not None and charges not in ("OUR", "SHA", "BEN"):
        raise MessageError(f"charges {charges!r} must be OUR, SHA or BEN", field=":71A:")
    op = seq_a_tags.get("23B")
    if op is not None and op not in ("CRED", "CRTS", "SPAY", "SPRI", "SSTD"):
        raise MessageError(f"bank operation code {op!r} is not CRED, CRTS, SPAY, SPRI or SSTD",
                           field=":23B:")
    remittance = seq_a_tags.get("70")
    s2r = seq_a_tags.get("72")
    return Transaction(
        message_type=mtype, reference=ref, amount=amt, currency=currency,
        value_date=value_date, originator=originator, beneficiary=beneficiary,
        raw_sha256=hashlib.sha256(msg.raw).hexdigest(),
        uetr=uetr(u, "block 3 {121:}") if u is not None else None,
        related_reference=_reference(seq_a_tags["21"], ":21:") if "21" in seq_a_tags else None,
        bank_operation_code=op, instructed_amount=inst_amt,
        instructed_currency=inst_ccy, exchange_rate=exchange_rate, agents=tuple(agents),
        remittance=_text(remittance, ":70:", 4) if remittance else None, charges=charges,
        sender_to_receiver=_text(s2r, ":72:", 6) if s2r else None,
        r16=R16.of(originator, beneficiary),
    )


def parse_mt(data: bytes) -> Iterator[Transaction | MessageError]:
    """Each message of ``data`` (one FIN message or an RJE file) as a Transaction, or the
    error that refused it, naming the message."""
    for n, raw in enumerate(split_rje(data), 1):
        label = f"message {n}"
        try:
            if raw.startswith(_SOH + b"outside"):
                raise MessageError(f"text {raw[8:24]!r} outside the SOH/ETX frames of a DOS-PCC file",
                                   field="file")
            if raw.startswith(_SOH):
                raise MessageError("DOS-PCC frame has no closing ETX (0x03)", field="file")
            msg = _Message(raw)
            label = f"message {n} (MT{msg.mt}{'COV' if msg.cov else ''})"
            yield _assemble(msg)
        except MessageError as exc:
            yield exc.located(label)
        except (KeyError, ValueError, IndexError, StopIteration) as exc:  # never hide the others
            yield MessageError(f"could not be read ({type(exc).__name__}: {exc})",
                               field="message", message=label)
