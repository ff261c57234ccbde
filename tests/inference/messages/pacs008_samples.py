"""Shared by the pacs.008 tests: the sample vectors and small ways to change them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inference.messages.errors import MessageError
from inference.messages.pacs008 import parse_pacs008

__all__ = ["NS8", "TX1", "VEC", "VECTORS", "V", "drop", "read", "refuse", "sub"]

VEC = Path(__file__).parents[2] / "vectors" / "messages" / "pacs008"
VECTORS = sorted(p.name for p in VEC.glob("*.xml"))
NS8 = b"urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08"
TX1 = "CdtTrfTxInf[1]"
V = "usd_cross_border_intermediary.xml"


def read(name: str) -> bytes:
    return (VEC / name).read_bytes()


def refuse(data: bytes) -> MessageError:
    with pytest.raises(MessageError) as info:
        parse_pacs008(data)
    return info.value


def sub(name: str, old: str, new: str, count: int = 1) -> bytes:
    data = read(name).decode()
    assert data.count(old) >= count, old
    return data.replace(old, new, count).encode()


def drop(name: str, element: str) -> bytes:
    """The vector without its first ``element`` (and everything inside it)."""
    data = read(name).decode()
    out, n = re.subn(rf"\s*<{element}( [^>]*)?>.*?</{element}>", "", data, count=1, flags=re.S)
    assert n == 1, element
    return out.encode()
