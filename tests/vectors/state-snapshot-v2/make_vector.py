"""Writes the state-snapshot vector with ``sealtrail.state-leaf/2`` leaves: the
sealtrail.state-snapshot/1 body that seals the feature state after applying the state deltas of
the state-snapshot-v1 vector's ``deltas.jsonl`` (three commits of a pipeline over 151 simulated
payments) to an empty state under the vector's state key, caught up from seq 0, with one
account's leaf and inclusion proof (kept for the record, not run by the tests; run from the
repository root: .venv/bin/python tests/vectors/state-snapshot-v2/make_vector.py)."""

from __future__ import annotations

from pathlib import Path

import orjson

from audit.state.sealed import snapshot_body
from audit.state.tree import state_tree
from inference.features import FeatureExtractor
from inference.state_store import features_state_bytes
from inference.velocity import VelocityState, key_id
from ledger.jcs import canonical_bytes

HERE = Path(__file__).parent
DELTAS = HERE.parent / "state-snapshot-v1" / "deltas.jsonl"
DELTA_VECTOR = HERE.parent / "state-delta-v1" / "expected.json"
STATE_KEY = bytes.fromhex(orjson.loads(DELTA_VECTOR.read_bytes())["state_key"])
DECIDER = "vector/2/00000000"

deltas = [orjson.loads(line) for line in DELTAS.read_bytes().splitlines()]
extractor = FeatureExtractor(state=VelocityState(STATE_KEY))
for d in deltas:
    extractor.advance(tuple(e) for e in d["body"]["entries"])  # type: ignore[misc]
covers = deltas[-1]["seq"]
tree = state_tree(features_state_bytes(extractor), key_id(STATE_KEY))
account = tree.accounts[len(tree.accounts) // 3]
proof = tree.prove(account)
(HERE / "expected.json").write_bytes(orjson.dumps({
    "state_key": STATE_KEY.hex(),
    "covers_seq": covers,
    "decider": DECIDER,
    "root": tree.root.hex(),
    "body": orjson.loads(canonical_bytes(snapshot_body(tree, covers, 0, DECIDER))),
    "proof": proof.to_json(),
}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
