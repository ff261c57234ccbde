"""SWIFT FIN MT103, MT202 and MT202COV (blocks 1-5) into ``Transaction``; RJE and DOS-PCC files too.

Read liberally, decided strictly: a message whose amount, currency, value date and parties can be
read is read, and each defect on the way becomes a finding on its Transaction
(``inference.messages.findings``: text outside the SWIFT X character set, lines too long, a field
not of the message type, a header BIC of no ISO 3166 country, an IBAN failing its check digits, a
code outside its list, a missing field the payment does not need). What cannot be read as one
payment is refused with the field and the reason, never guessed at: no or two :32A:, a party field
that cannot be read, an MT202 with customer fields but no {119:COV}, a message type other than
MT103, MT202 and MT202COV. Two-digit years are 20YY (FIN value dates). A message behind a SWIFT ACK
or NAK service message (``{1:F21...}{4:{177:...}{451:...}}``, as interfaces file what they sent) is
read with the service message's status kept as a finding (``SERVICE_ACK`` / ``SERVICE_NAK``). The
framing is read as SWIFT interfaces write it: white space and line breaks (LF or CRLF) between and
around the blocks, a ``{S:}`` trailer, a byte-order mark, RJE files ('$' between messages) and DOS-
PCC files (each message between SOH 0x01 and ETX 0x03, padded with spaces to 512-byte sectors).
A text block without its headers (its fields alone, or ``{4:...-}`` alone) states no message type and
is refused, unless the caller states the type (``parse_mt(data, stated="103")``): then it is read as
that type's text block, with sender and receiver unknown (the ``HEADERS_MISSING`` finding); a message
whose header names another type than the one stated is refused.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from datetime import date
from decimal import Decimal

from inference.messages import fields
from inference.messages.errors import MessageError
from inference.messages.fields import amount, bic_or_none, currency_exponent, uetr_or_none
from inference.messages.findings import Finding, collect, note
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
_BLOCK1_LOOSE = re.compile(r"[A-Z]\d{2}([A-Z0-9]{8,12}?)\d*")  # a logical terminal of 8-12, then digits
_BLOCK2_IN = re.compile(r"I(\d{3})([A-Z0-9]{12})([NUS]?)(\d{0,4})")
_BLOCK2_OUT = re.compile(r"O(\d{3})(\d{4})(\d{6}[A-Z0-9]{12}\d{4}\d{6})(\d{6})(\d{4})([NUS]?)")
_FIELD = re.compile(r"^:(\d{2}[A-Z]?):", re.M)
_AGENTS = (("52", "ordering_institution"), ("53", "senders_correspondent"),
           ("54", "receivers_correspondent"), ("55", "third_reimbursement"),
           ("56", "intermediary"), ("57", "account_with"))
_REQUIRED = {"103": ("32A", "50", "59"), "202": ("32A", "58")}  # without them no payment can be read
_EXPECTED = {"103": ("20", "23B", "71A"), "202": ("20", "21")}  # mandatory, but the payment reads without
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


def _blocks(text: str, bare_ok: bool = False) -> dict[str, str]:
    """Blocks 1-5 of one message: one regular expression for the usual well-formed case, the
    slower scan below when it fails (white space between blocks, a trailer), which also says
    what is wrong where something is. ``bare_ok``: a text block without headers (the caller
    stated the type) is returned as block 4 alone."""
    m = _WELL_FORMED.match(text)
    if m is not None:
        found = dict(zip("12345", m.groups(), strict=True))
        return {k: v for k, v in found.items() if v is not None}
    blocks = _scan_blocks(text, bare_ok)
    order = list(blocks)
    if order != sorted(order, key=_ORDER.index):
        raise MessageError(f"blocks are not in the order 1, 2, 3, 4, 5 (found {', '.join(order)})",
                           field="header")
    blocks.pop("S", None)
    return blocks


_SERVICE = re.compile(r"\s*\{1:F21([^{}]*)\}\{4:((?:\{[0-9]{3}:[^{}]*\})*)\}")
_SERVICE_TAG = re.compile(r"\{([0-9]{3}):([^{}]*)\}")


def _unwrap_service(text: str) -> str:
    """The message behind an ACK/NAK service message (``{1:F21...}{4:{177:...}{451:0|1}...}``), its
    status noted as a finding; a message that is not wrapped, as it is."""
    m = _SERVICE.match(text)
    if m is None:
        return text
    tags = dict(_SERVICE_TAG.findall(m.group(2)))
    rest = text[m.end():]
    if not rest.strip():
        raise MessageError("a service message (F21 ACK/NAK) without the message it acknowledges",
                           field="block 1")
    when = f" at {tags['177']}" if "177" in tags else ""
    mur = f", MUR {tags['108']}" if "108" in tags else ""
    if tags.get("451") == "1":
        note("SERVICE_NAK", "block 4 {451:}", f"NAK{when}, error code {tags.get('405', '(none)')}{mur}")
    else:
        note("SERVICE_ACK", "block 4 {451:}", f"ACK{when}{mur}")
    return rest


_ORDER = "12345S"
_BLOCK4_END = re.compile(r"\n[ \t]*-\}")
_INDENT = re.compile(r"^[ \t]+", re.M)
_BLOCK_START = re.compile(r"\{([1-5S]):")


def _scan_blocks(text: str, bare_ok: bool) -> dict[str, str]:
    """Top-level ``{n:...}`` blocks with balanced braces, white space between them skipped;
    block 4 ends at '\\n-}'. With ``bare_ok``, fields without any block, or block 4 without blocks
    1 and 2, are a text block alone."""
    blocks: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        if text[pos] in " \t\r\n":
            pos += 1
            continue
        m = _BLOCK_START.match(text, pos)
        if m is None:
            if not blocks and _FIELD.match(text, pos):
                if bare_ok:
                    return {"4": _bare_text(text[pos:])}
                raise MessageError("a text block without its headers: the message type is not stated "
                                   "(a caller who knows it names it: format mt103 or mt202)",
                                   field="block 2")
            if "4" in blocks and text[pos] in "{}" and not text[pos:].strip(" \t\r\n{}"):
                note("LAYOUT", "header", f"stray {text[pos:].strip()!r} after the last block")
                break
            raise MessageError(f"unexpected text {text[pos:pos + 12]!r} outside the blocks",
                               field="header")
        key = m.group(1)
        if key in blocks:
            raise MessageError(f"block {key} appears twice", field=f"block {key}")
        start = m.end()
        if key == "4":
            end_m = _BLOCK4_END.search(text, start)
            if end_m is None:
                raise MessageError("text block is truncated (no closing '-}')", field="block 4")
            blocks[key] = text[start:end_m.start() + 1]
            pos = end_m.end()
            continue
        depth, i = 1, start
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:
            raise MessageError("block is truncated (unbalanced braces)", field=f"block {key}")
        blocks[key] = text[start:i - 1]
        pos = i
    if bare_ok and "4" in blocks and "1" not in blocks and "2" not in blocks:
        return blocks
    for needed in ("2", "1", "4"):  # without block 2 the message type is not stated
        if needed not in blocks:
            raise MessageError("is missing", field=f"block {needed}")
    return blocks


def _bare_text(text: str) -> str:
    """The fields of a text block written without its braces, as block 4's content (a closing
    '-' line, if there, dropped)."""
    body = text.rstrip(" \t\n")
    return "\n" + (body[:-2] if body.endswith("\n-") else body) + "\n"


def _fields(block4: str) -> list[tuple[str, str]]:
    body = block4.lstrip("\n")
    if body[:1] in (" ", "\t") and body.lstrip(" \t").startswith(":"):  # every line indented alike
        body = _INDENT.sub("", body)
        note("LAYOUT", "block 4", "lines indented; read without the indentation")
    if _X.fullmatch(body) is None:
        odd = sorted({c for c in body if not _X.fullmatch(c)})
        note("NON_X_CHARACTER", "block 4", "characters outside the SWIFT X set: "
             + " ".join(f"U+{ord(c):04X}" for c in odd[:8]) + (" ..." if len(odd) > 8 else ""))
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
    if not value.strip():
        note("MANDATORY_FIELD_MISSING", tag, "the reference is empty; NONREF is used")
        return "NONREF"
    if not _REF.fullmatch(value) or value.startswith("/") or value.endswith("/") \
            or "//" in value:
        note("REFERENCE_FORMAT", tag, f"reference {value[:40]!r} must be 1-16 characters on one line, not "
                                      "start or end with '/' nor contain '//'")
    return value


def _text(value: str, tag: str, most: int) -> str:
    lines = value.split("\n")
    if len(lines) > most or any(len(ln) > 35 for ln in lines):
        note("LINE_TOO_LONG", tag, f"{len(lines)} lines, the longest {max(map(len, lines))} characters; "
                                   f"at most {most} lines of 35")
    return value


def _loose_block1(text: str) -> re.Match[str]:
    """A basic header of another layout (a logical terminal of 8 or 11 characters, no session): its
    address, noted; one with no address at all is refused."""
    m = _BLOCK1_LOOSE.fullmatch(text)
    if m is None:
        raise MessageError(f"basic header {text[:40]!r} is malformed", field="block 1")
    note("HEADER_FORMAT", "block 1", f"basic header {text[:40]!r} is not F01 + a 12-character logical "
                                     "terminal + session and sequence numbers")
    return m


class _Message:
    def __init__(self, raw: bytes, stated: str | None = None) -> None:
        if len(raw) > MAX_MESSAGE_BYTES:
            raise MessageError(f"message is {len(raw):,} bytes, more than {MAX_MESSAGE_BYTES:,}",
                               field="message")
        try:
            text = raw.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n")
        except UnicodeDecodeError as exc:
            raise MessageError(f"is not valid UTF-8 (byte {exc.start})", field="message") from None
        self.raw = raw
        text = _unwrap_service(text)
        self.blocks = _blocks(text, bare_ok=stated is not None)
        if stated is not None and "2" not in self.blocks:
            self._headerless(stated)
            return
        b1 = _BLOCK1.fullmatch(self.blocks["1"]) or _loose_block1(self.blocks["1"])
        b2 = _BLOCK2_IN.fullmatch(self.blocks["2"]) or _BLOCK2_OUT.fullmatch(self.blocks["2"])
        if b2 is None:
            raise MessageError(f"application header {self.blocks['2']!r} is malformed",
                               field="block 2")
        self.mt = b2.group(1)
        if stated is not None and self.mt != stated:
            raise MessageError(f"the application header names MT{self.mt}, not the MT{stated} stated",
                               field="block 2")
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
        self.sender = bic_or_none(_lt_bic(sender_lt), "block 2" if sender_lt != lt else "block 1")
        self.receiver = bic_or_none(_lt_bic(receiver_lt), "block 2" if receiver_lt != lt else "block 1")
        self.user = dict(re.findall(r"\{(\d{3}):([^{}]*)\}", self.blocks.get("3", "")))
        self.cov = self.mt == "202" and self.user.get("119") == "COV"
        self.fields = _fields(self.blocks["4"])

    def _headerless(self, stated: str) -> None:
        """A text block of the type the caller stated: no sender, receiver or user header."""
        note("HEADERS_MISSING", "block 1", f"a text block without basic and application headers, read "
                                           f"as MT{stated} as stated; sender and receiver unknown")
        self.mt, self.sender, self.receiver = stated, None, None
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


def _lt_bic(lt: str) -> str:
    """The BIC of a logical terminal address: BIC8 + terminal letter + branch (12), else as given."""
    return lt[:8] + lt[9:] if len(lt) == 12 else lt


def _generic(tag: str) -> str:
    return tag[:2] if tag[:2] in _LETTERED else tag


def _check_sequence(fields: list[tuple[str, str]], allowed: frozenset[str], required: tuple[str, ...],
                    expected: tuple[str, ...], name: str) -> list[tuple[str, str]]:
    """The fields of this sequence that belong to it (another one is a finding, and dropped); none
    repeated unless repeatable, the ``required`` ones present: a message with two :32A: must not be
    screened on one and paid on the other. A missing ``expected`` field is a finding."""
    seen: set[str] = set()
    kept = []
    for tag, value in fields:
        g = _generic(tag)
        if g not in allowed:
            note("FIELD_NOT_IN_MESSAGE", f":{tag}:", f"is not a field of {name}; ignored")
            continue
        if g in seen and g not in _REPEATABLE:
            raise MessageError(f"appears twice in {name}", field=f":{tag}:")
        seen.add(g)
        kept.append((tag, value))
    for need in (*required, *expected):
        if need not in seen:
            letter = "a" if need in _LETTERED else ""
            if need in required:
                raise MessageError(f"is mandatory in {name} and missing", field=f":{need}{letter}:")
            note("MANDATORY_FIELD_MISSING", f":{need}{letter}:", f"is mandatory in {name} and missing")
    return kept


def _assemble(msg: _Message, findings: list[Finding]) -> Transaction:
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
    seq_a = _check_sequence(seq_a, _ALLOWED[msg.mt], _REQUIRED[msg.mt], _EXPECTED[msg.mt], name)
    seq_b = None
    if split is not None:
        seq_b = _check_sequence(msg.fields[split:], _COV_B, ("50", "59"), (), "MT202COV sequence B")
    values = dict(seq_a)
    ref = _reference(values["20"], ":20:") if "20" in values else "NONREF"
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
        if o52 is None and msg.sender is None and "2" not in msg.blocks:
            raise MessageError("MT202 text block without headers or :52a:: no ordering institution "
                               "can be read", field=":52a:")
        originator = institution_party(o52[0][2:], o52[1], "52") if o52 else Party(
            bic=msg.sender, identifiers=(Identifier("BIC", msg.sender),) if msg.sender else ())
        beneficiary = institution_party(b58[0][2:], b58[1], "58")
        agents.append(Agent("beneficiary_institution", bic=beneficiary.bic,
                            account=beneficiary.account))
        mtype = "MT202"
        if msg.cov and seq_b is not None:
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
        note("CODE_NOT_IN_LIST", ":71A:", f"charges {charges[:20]!r} are not OUR, SHA or BEN")
    op = seq_a_tags.get("23B")
    if op is not None and op not in ("CRED", "CRTS", "SPAY", "SPRI", "SSTD"):
        note("CODE_NOT_IN_LIST", ":23B:", f"bank operation code {op[:20]!r} is not CRED, CRTS, SPAY, SPRI "
                                          "or SSTD")
    remittance = seq_a_tags.get("70")
    s2r = seq_a_tags.get("72")
    return Transaction(
        message_type=mtype, reference=ref, amount=amt, currency=currency,
        value_date=value_date, originator=originator, beneficiary=beneficiary,
        raw_sha256=hashlib.sha256(msg.raw).hexdigest(),
        uetr=uetr_or_none(u, "block 3 {121:}") if u is not None else None,
        related_reference=_reference(seq_a_tags["21"], ":21:") if "21" in seq_a_tags else None,
        bank_operation_code=op, instructed_amount=inst_amt,
        instructed_currency=inst_ccy, exchange_rate=exchange_rate, agents=tuple(agents),
        remittance=_text(remittance, ":70:", 4) if remittance else None, charges=charges,
        sender_to_receiver=_text(s2r, ":72:", 6) if s2r else None,
        r16=R16.of(originator, beneficiary), findings=tuple(findings),
    )


def parse_mt(data: bytes, stated: str | None = None) -> Iterator[Transaction | MessageError]:
    """Each message of ``data`` (one FIN message or an RJE file) as a Transaction, or the
    error that refused it, naming the message. ``stated``: the message type the caller names
    (``"103"`` or ``"202"``), which every message must be, and which a text block without headers
    is read as."""
    if stated is not None and stated not in _REQUIRED:
        raise ValueError(f"no FIN message type {stated!r} is read (103, 202)")
    for n, raw in enumerate(split_rje(data), 1):
        label = f"message {n}"
        try:
            if raw.startswith(_SOH + b"outside"):
                raise MessageError(f"text {raw[8:24]!r} outside the SOH/ETX frames of a DOS-PCC file",
                                   field="file")
            if raw.startswith(_SOH):
                raise MessageError("DOS-PCC frame has no closing ETX (0x03)", field="file")
            with collect() as found:
                msg = _Message(raw, stated)
                label = f"message {n} (MT{msg.mt}{'COV' if msg.cov else ''})"
                tx = _assemble(msg, found)
            yield tx
        except MessageError as exc:
            yield exc.located(label)
        except (KeyError, ValueError, IndexError, StopIteration) as exc:  # never hide the others
            yield MessageError(f"could not be read ({type(exc).__name__}: {exc})",
                               field="message", message=label)
