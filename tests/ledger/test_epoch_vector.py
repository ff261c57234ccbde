"""The published ``ledger.epoch`` entry (tests/vectors/ledger-epoch-v1) reads as sealed: the same
bytes under RFC 8785, the same leaf hash, and the fence takes the same timeline from it."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import orjson
import pytest

from ledger.errors import LedgerError
from ledger.fencing import EPOCH_KIND, EPOCH_SCHEMA, _epoch_of
from ledger.jcs import canonical_bytes

VECTOR = json.loads((Path(__file__).parents[1] / "vectors" / "ledger-epoch-v1" / "vector.json").read_text())


def test_the_published_epoch_reads_as_sealed() -> None:
    entry = base64.b64decode(VECTOR["entry_b64"])
    env = orjson.loads(entry)
    assert canonical_bytes(env) == entry
    assert hashlib.sha256(b"\x00" + entry).hexdigest() == VECTOR["leaf_hash"]
    assert (env["kind"], env["record"]["schema"]) == (EPOCH_KIND, EPOCH_SCHEMA)
    epoch = _epoch_of(VECTOR["seq"], entry)
    assert (epoch.seq, epoch.timeline) == (VECTOR["expect"]["seq"], VECTOR["expect"]["timeline"])


def test_an_epoch_without_a_timeline_is_refused_naming_its_seq() -> None:
    env = orjson.loads(base64.b64decode(VECTOR["entry_b64"]))
    env["record"]["timeline"] = 0
    with pytest.raises(LedgerError, match=f"seq {VECTOR['seq']} states no timeline"):
        _epoch_of(VECTOR["seq"], canonical_bytes(env))
