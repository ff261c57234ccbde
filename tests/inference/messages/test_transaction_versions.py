"""The canonical transaction's versions: version 1 hashes sealed before version 2 existed are found
again by the parsers of today (replay, completeness and state rebuilds rely on it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference.messages import PARSER, Finding, Transaction, parse_messages, transaction_schema_of

ROOT = Path(__file__).resolve().parents[2]
V1 = json.loads((ROOT / "vectors/messages/transaction-v1-sha256.json").read_text())


@pytest.mark.parametrize("path", sorted(V1))
def test_version_1_hashes_are_made_again(path: str) -> None:
    """tests/vectors/messages/transaction-v1-sha256.json holds the SHA-256 the version 1 parsers gave
    each vector message: today's parsers give the same version 1 form."""
    got = [t for t in parse_messages((ROOT.parent / path).read_bytes()) if isinstance(t, Transaction)]
    assert [t.sha256_of("sealtrail.transaction/1") for t in got] == V1[path]
    assert all(t.sha256_of("sealtrail.transaction/2") == t.sha256 for t in got)


def test_version_2_adds_findings_and_parties() -> None:
    (tx,) = parse_messages((ROOT / "vectors/messages/mt/mt202cov.fin").read_bytes())
    assert isinstance(tx, Transaction)
    v1, v2 = tx.to_json(1), tx.to_json()
    assert v1["schema"] == "sealtrail.transaction/1" and v2["schema"] == "sealtrail.transaction/2"
    assert set(v2) - set(v1) == {"findings", "ultimate_originator", "ultimate_beneficiary",
                                 "initiating_party", "original"}
    assert {k: v for k, v in v2.items() if k in v1 and k != "schema"} == {
        k: v for k, v in v1.items() if k != "schema"}
    # a finding changes the version 2 hash only
    from dataclasses import replace
    flagged = replace(tx, findings=(Finding("LINE_TOO_LONG", ":70:", "line 1 is 40 characters"),))
    assert flagged.sha256 != tx.sha256
    assert flagged.sha256_of("sealtrail.transaction/1") == tx.sha256_of("sealtrail.transaction/1")


def test_parser_versions_name_their_schema() -> None:
    assert transaction_schema_of(None) == "sealtrail.transaction/1"
    assert transaction_schema_of(PARSER) == "sealtrail.transaction/2"
    with pytest.raises(ValueError, match="unknown parser version"):
        transaction_schema_of("sealtrail.messages/9")
    with pytest.raises(ValueError, match="unknown transaction schema"):
        Transaction.sha256_of(None, "sealtrail.transaction/9")  # type: ignore[arg-type]
