"""FIN messages as SWIFT interfaces write them to files: white space and line breaks (LF or CRLF)
between and around the blocks, a ``{S:}`` trailer, DOS-PCC files (each message framed by SOH 0x01
and ETX 0x03, padded with spaces to 512-byte sectors). Each is read as the same payment as the
plain message; what is really out of order or unframed is still refused, naming the problem."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from inference.messages import MessageError, Transaction, detect_format, parse_messages
from inference.messages.mt import parse_mt

VEC = Path(__file__).parents[2] / "vectors" / "messages" / "mt"
PLAIN = [(VEC / n).read_bytes() for n in ("mt103_50a_59a.fin", "mt202cov.fin", "mt103_50f_dob.fin")]


def payment(t: Transaction | MessageError) -> dict[str, object]:
    """What the payment says: every field but the hash of the raw bytes (which differ by framing)."""
    assert isinstance(t, Transaction), str(t)
    return {k: v for k, v in dataclasses.asdict(t).items() if k != "raw_sha256"}


def _spaced(msg: bytes, sep: bytes) -> bytes:
    """``msg`` with ``sep`` between its top-level blocks and around the whole message."""
    out, depth = bytearray(sep), 0
    text = msg.strip()
    i = 0
    while i < len(text):
        c = text[i:i + 1]
        if text.startswith(b"\n-}", i):  # the end of block 4
            out += b"\n-}"
            depth -= 1
            i += 3
            if depth == 0:
                out += sep
            continue
        out += c
        depth += {b"{": 1, b"}": -1}.get(c, 0)
        if c == b"}" and depth == 0:
            out += sep
        i += 1
    return bytes(out)


@pytest.mark.parametrize("sep", [b"\n", b"\r\n", b"\r\n\r\n", b" ", b"\t\n "])
@pytest.mark.parametrize("plain", PLAIN, ids=["mt103", "mt202cov", "mt103_50f"])
def test_white_space_between_and_around_blocks_reads_the_same_payment(plain: bytes, sep: bytes) -> None:
    spaced = _spaced(plain, sep)
    assert spaced != plain
    (want,) = parse_mt(plain)
    (got,) = parse_mt(spaced)
    assert payment(got) == payment(want)


@pytest.mark.parametrize("plain", PLAIN, ids=["mt103", "mt202cov", "mt103_50f"])
def test_a_trailer_block_is_read_past(plain: bytes) -> None:
    five = b"" if b"{5:" in plain else b"{5:{CHK:123456789ABC}}"
    trailed = plain.rstrip() + five + b"{S:{SAC:}{COP:P}}\r\n"
    (want,) = parse_mt(plain)
    (got,) = parse_mt(trailed)
    assert payment(got) == payment(want)


def _dos_pcc(*messages: bytes) -> bytes:
    out = bytearray()
    for m in messages:
        frame = b"\x01" + m.replace(b"\n", b"\r\n") + b"\x03"
        out += frame + b" " * (-len(frame) % 512)
    return bytes(out)


def test_a_dos_pcc_file_reads_each_framed_message() -> None:
    data = _dos_pcc(*PLAIN)
    assert len(data) % 512 == 0
    assert detect_format(data) == "mt"
    got = parse_messages(data)
    assert [payment(t) for t in got] == [payment(next(parse_mt(p))) for p in PLAIN]


def test_a_dos_pcc_frame_without_its_end_is_refused_naming_the_message() -> None:
    data = _dos_pcc(PLAIN[0]) + b"\x01" + PLAIN[1]  # the second frame never closes
    first, second = parse_mt(data)
    assert isinstance(first, Transaction)
    assert isinstance(second, MessageError)
    assert "message 2" in str(second) and "ETX" in str(second)


def test_text_between_dos_pcc_frames_is_refused() -> None:
    data = _dos_pcc(PLAIN[0]) + b"stray" + _dos_pcc(PLAIN[1])
    got = list(parse_mt(data))
    assert any(isinstance(t, MessageError) and "outside" in str(t) for t in got)


def test_blocks_truly_out_of_order_are_still_refused() -> None:
    plain = PLAIN[0].decode()
    b1_end = plain.index("}") + 1
    b2_end = plain.index("}", b1_end) + 1
    swapped = (plain[b1_end:b2_end] + "\n" + plain[:b1_end] + "\n" + plain[b2_end:]).encode()
    (got,) = parse_mt(swapped)
    assert isinstance(got, MessageError)
    assert "order" in str(got)
