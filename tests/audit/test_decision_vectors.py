"""One test vector per decision record version: version 3 (explanations) re-encodes to its bytes,
replays and recomputes its reason codes from the model and module kept beside it; version 2
(account risk) re-encodes to its bytes, holds together and rebuilds to the values it states;
version 1 records (from the bundle vectors) still read, add no account risk and index with null
account-risk columns."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
import rfc8785

from audit.bundle.replay import Replayer
from audit.decide.account_risk import (
    AccountRiskError,
    AccountRiskPolicy,
    AccountRiskState,
    check_account_risk,
)
from audit.decide.explanation import Explanation
from audit.decide.record import (
    DECISION_SCHEMA,
    DECISION_SCHEMA_V1,
    DECISION_SCHEMA_V2,
    DECISION_SCHEMA_V3,
    DECISION_SCHEMA_V4,
    features_from_body,
)
from audit.query.index import record_rows
from audit.state.account_risk_replay import apply_records
from inference.features import features_sha256
from inference.schema import feature_digits
from ledger.jcs import canonical_bytes
from wasm_rules import Sandbox

VECTORS = Path(__file__).parents[1] / "vectors"


def _v2() -> list[tuple[bytes, dict[str, Any]]]:
    lines = (VECTORS / "decision-v2" / "records.jsonl").read_bytes().splitlines()
    return [(line, orjson.loads(line)) for line in lines]


def _v1() -> list[dict[str, Any]]:
    with zipfile.ZipFile(VECTORS / "bundle-v4" / "bundle.zip") as z:
        envs = [orjson.loads(x) for x in z.read("records.jsonl").splitlines()]
    return [e for e in envs if e["kind"] == "decision"]


def test_version_2_records_re_encode_to_their_bytes() -> None:
    for line, body in _v2():
        assert body["schema"] == DECISION_SCHEMA_V2
        assert canonical_bytes(body) == line == rfc8785.dumps(body)


def test_version_2_records_hold_together_and_the_second_alerts_though_allowed() -> None:
    risks = [check_account_risk(body) for _, body in _v2()]
    assert [r.alerts for r in risks] == [(), ("originator",), ()]
    assert [b["decision"] for _, b in _v2()] == ["ALLOW"] * 3


def test_a_rebuild_from_the_version_2_vector_states_what_the_records_state() -> None:
    state = AccountRiskState(AccountRiskPolicy(threshold_milli=9000))
    report = apply_records(state, [(i, b) for i, (_, b) in enumerate(_v2())])
    assert (report.applied, report.mismatched, report.unreadable) == (3, 0, 0)
    orig = _v2()[-1][1]["account_risk"]["originator"]
    assert state.risk(orig["account"]) == orig["after_milli"] == 13_500


def test_an_altered_version_2_record_fails_its_own_check() -> None:
    body = _v2()[1][1]
    body["account_risk"]["alerts"] = []
    with pytest.raises(AccountRiskError, match="alerts"):
        check_account_risk(body)


def test_version_1_records_still_read_and_add_no_account_risk() -> None:
    envs = _v1()
    assert envs and {e["record"]["schema"] for e in envs} == {DECISION_SCHEMA_V1}
    state = AccountRiskState()
    report = apply_records(state, list(enumerate(e["record"] for e in envs)))
    assert (report.applied, report.without_risk, len(state)) == (0, len(envs), 0)
    row, _ = record_rows(7, envs[0])
    assert row[-2:] == (None, None)


def _v3() -> list[tuple[bytes, dict[str, Any]]]:
    lines = (VECTORS / "decision-v3" / "records.jsonl").read_bytes().splitlines()
    return [(line, orjson.loads(line)) for line in lines]


def _v3_replayer(sandbox: Sandbox) -> Replayer:
    here = VECTORS / "decision-v3"
    module, weights = (here / "pack.wasm").read_bytes(), (here / "weights.npz").read_bytes()
    return Replayer(sandbox, lambda sha: module, lambda sha: weights)


def test_version_3_records_re_encode_to_their_bytes_and_state_their_reasons() -> None:
    got = _v3()
    for line, body in got:
        assert body["schema"] == DECISION_SCHEMA_V3 == "sealtrail.decision/3"
        assert canonical_bytes(body) == line == rfc8785.dumps(body)
        check_account_risk(body)  # version 3 is version 2 and an explanation
    said = [Explanation.from_json(b["explanation"]) for _, b in got]
    assert [s.reasons is not None and len(s.reasons) > 0 for s in said] == [True] * 3 + [False] * 2
    assert all(r.text and r.contribution_milli >= 20 for s in said[:3] for r in s.reasons or ())


def test_version_3_records_replay_and_their_explanations_recompute(sandbox: Sandbox) -> None:
    rp = _v3_replayer(sandbox)
    errs = [e for i, (_, b) in enumerate(_v3()) for e in rp.add(i + 1, f"t{i}", b)] + rp.flush()
    assert errs == [] and (rp.replayed, rp.rescored, rp.explained) == (5, 5, 3)


def test_an_altered_reason_in_the_version_3_vector_is_named(sandbox: Sandbox) -> None:
    rp = _v3_replayer(sandbox)
    body = _v3()[0][1]
    body["explanation"]["reasons"][0]["text"] = "an ordinary payment"
    errs = rp.add(1, "t0", body) + rp.flush()
    assert [e.kind for e in errs] == ["replay.explanation"] and "an ordinary payment" in errs[0].detail


def test_version_2_and_3_records_rebuild_account_risk_alike() -> None:
    state = AccountRiskState()
    report = apply_records(state, [(i, b) for i, (_, b) in enumerate(_v3())])
    assert (report.applied, report.without_risk, report.unreadable) == (5, 0, 0)


def _v4() -> list[tuple[bytes, dict[str, Any]]]:
    lines = (VECTORS / "decision-v4" / "records.jsonl").read_bytes().splitlines()
    return [(line, orjson.loads(line)) for line in lines]


def _v4_replayer(sandbox: Sandbox) -> Replayer:
    here = VECTORS / "decision-v4"
    module, weights = (here / "pack.wasm").read_bytes(), (here / "weights.npz").read_bytes()
    return Replayer(sandbox, lambda sha: module, lambda sha: weights)


def _floats(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for v in value.values() for f in _floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in _floats(v)]
    return []


def test_version_4_records_hold_no_float_and_re_encode_to_their_bytes() -> None:
    got = _v4()
    for line, body in got:
        assert body["schema"] == DECISION_SCHEMA_V4 == "sealtrail.decision/4"
        assert _floats(body) == []  # every number parses back as an integer
        assert canonical_bytes(body) == line == rfc8785.dumps(body)
        assert "score" not in body and "values" not in body["features"]
        check_account_risk(body)  # its points from score_ppm
    said = [Explanation.from_json(b["explanation"]) for _, b in got]
    assert [s.reasons is not None and len(s.reasons) > 0 for s in said] == [True] * 3 + [False] * 2


def test_version_4_values_are_the_integers_over_their_digits_and_hash_as_recorded() -> None:
    for _, body in _v4():
        values, score = features_from_body(body)
        f = body["features"]
        assert f["digits"] == list(feature_digits(f["schema"]))
        assert values == [s / 10**d for s, d in zip(f["scaled"], f["digits"], strict=True)]
        assert features_sha256(np.array(values)) == f["sha256"]
        assert score == body["score_ppm"] / 1_000_000


def test_version_4_records_replay_and_their_explanations_recompute(sandbox: Sandbox) -> None:
    rp = _v4_replayer(sandbox)
    errs = [e for i, (_, b) in enumerate(_v4()) for e in rp.add(i + 1, f"t{i}", b)] + rp.flush()
    assert errs == [] and (rp.replayed, rp.rescored, rp.explained) == (5, 5, 3)


@pytest.mark.parametrize(("field", "value", "kind"), [
    ("scaled", 1, "replay.features_sha256"),  # another integer: the values no longer hash as recorded
    ("scaled", 0.5, "replay.body"),  # a float where an integer belongs
    ("digits", 3, "replay.body"),  # digits that are not the schema's
    ("score_ppm", 1_000_001, "replay.body"),  # beyond 10**6
])
def test_an_altered_number_in_the_version_4_vector_is_named(sandbox: Sandbox, field: str, value: object,
                                                            kind: str) -> None:
    body = _v4()[0][1]
    if field == "score_ppm":
        body["score_ppm"] = value
    else:
        body["features"][field][0] = value
    rp = _v4_replayer(sandbox)
    errs = rp.add(1, "t0", body) + rp.flush()
    assert kind in [e.kind for e in errs]


def test_a_version_4_record_indexes_its_score_as_the_value_it_stands_for() -> None:
    body = _v4()[0][1]
    row, _ = record_rows(3, {"trace_id": "t", "recorded_at": body["at"], "record": body})
    assert body["score_ppm"] / 1_000_000 in row


def _v5() -> list[tuple[bytes, dict[str, Any]]]:
    lines = (VECTORS / "decision-v5" / "records.jsonl").read_bytes().splitlines()
    return [(line, orjson.loads(line)) for line in lines]


def _v5_replayer(sandbox: Sandbox) -> Replayer:
    here = VECTORS / "decision-v5"
    module, weights = (here / "pack.wasm").read_bytes(), (here / "weights.npz").read_bytes()
    return Replayer(sandbox, lambda sha: module, lambda sha: weights)


def test_version_5_records_re_encode_replay_and_name_the_list_they_were_screened_against(
        sandbox: Sandbox) -> None:
    got = _v5()
    list_sha = hashlib.sha256((VECTORS / "decision-v5" / "list.csv").read_bytes()).hexdigest()
    for line, body in got:
        assert body["schema"] == DECISION_SCHEMA == "sealtrail.decision/5"
        assert body["features"]["schema"] == "sealtrail.features/5" and _floats(body) == []
        assert canonical_bytes(body) == line == rfc8785.dumps(body)
        assert body["screening"]["lists"] == [{"name": "bank-exits", "published": "2026-11-30", "seq": 1,
                                               "sha256": list_sha}]
    assert [(b["decision"], [h["basis"] for h in b["screening"]["hits"]]) for _, b in got] == [
        ("ALLOW", []), ("HOLD", ["name"]), ("HOLD", ["name"]), ("BLOCK", ["identifier"]), ("BLOCK", ["bic"]),
        ("HOLD", ["text"])]
    rp = _v5_replayer(sandbox)
    errs = [e for i, (_, b) in enumerate(got) for e in rp.add(i + 1, f"t{i}", b)] + rp.flush()
    assert errs == [] and rp.replayed == 6


def test_a_version_5_hit_removed_or_a_screening_column_changed_is_named(sandbox: Sandbox) -> None:
    body = _v5()[1][1]
    body["screening"]["hits"] = []
    rp = _v5_replayer(sandbox)
    assert "replay.screening" in [e.kind for e in rp.add(1, "t0", body) + rp.flush()]
    body = _v5()[0][1]
    body["features"]["scaled"][-1] = 1  # screen_hits 1 with no hit stated
    rp = _v5_replayer(sandbox)
    assert "replay.screening" in [e.kind for e in rp.add(1, "t0", body) + rp.flush()]
