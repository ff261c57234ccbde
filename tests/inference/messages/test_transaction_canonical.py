"""The Transaction's canonical bytes are RFC 8785 (checked against the rfc8785 package)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.messages import Identifier, Party, Transaction, parse_messages
from inference.simulate import SimConfig, simulate

VEC = Path(__file__).parents[2] / "vectors" / "messages"


def test_simulated_and_parsed_transactions_match_rfc8785() -> None:
    txs: list[Transaction] = [s.transaction for s in simulate(SimConfig(seed=4, n_normal=500, n_accounts=120,
                                                                        days=3))]
    for f in sorted((VEC / "mt").glob("*.fin")) + sorted((VEC / "pacs008").glob("*.xml")):
        txs += [t for t in parse_messages(f.read_bytes()) if isinstance(t, Transaction)]
    assert len(txs) > 500
    for tx in txs:
        assert tx.canonical_bytes() == rfc8785.dumps(tx.to_json())


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(), st.lists(st.text(), max_size=3))
def test_any_text_in_any_field_matches_rfc8785(name: str, value: str, lines: list[str]) -> None:
    base = simulate(SimConfig(seed=4, n_normal=100, n_accounts=100, days=3))[0].transaction
    try:
        want = rfc8785.dumps(replace(base, reference=value).to_json())
    except Exception:  # a lone surrogate: neither encoder may accept it
        return
    party = Party(name=name, address_lines=tuple(lines), identifiers=(Identifier("OTHR", value),))
    tx = replace(base, reference=value, originator=party, remittance=name)
    try:
        expected = rfc8785.dumps(tx.to_json())
    except Exception:
        return
    assert tx.canonical_bytes() == expected
    assert want  # the reference itself encodes
