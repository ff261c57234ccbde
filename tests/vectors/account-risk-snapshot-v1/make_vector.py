"""Writes the account-risk snapshot vector (kept for the record; the tests do not run it).

Run from the repository root: ``python tests/vectors/account-risk-snapshot-v1/make_vector.py``.
"""

from __future__ import annotations

import hashlib
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from audit.decide.account_risk import AccountRiskPolicy, AccountRiskState, RiskEvent, event_hour, points_milli
from audit.decide.record import DECISION_SCHEMA
from audit.state.risk_snapshot_body import RiskState, risk_snapshot_body
from ledger.jcs import canonical_bytes

HERE = Path(__file__).resolve().parent
KEY_ID = "5eed5eed5eed5eed"
DECIDER = "vector/1/00000000"


def main() -> None:
    rng = random.Random(20261206)
    policy = AccountRiskPolicy(half_life_hours=24)  # short: accounts are swept within the vector's days
    accounts = [hashlib.sha256(f"vector account {i}".encode()).hexdigest()[:32] for i in range(24)]
    state = AccountRiskState(policy)
    t = datetime(2026, 3, 1, tzinfo=UTC)
    lines = []
    for seq in range(1, 201):
        t += timedelta(minutes=rng.randrange(1, 240))
        o, b = rng.sample(accounts[:12] if seq <= 80 else accounts[12:], 2)  # the first twelve go quiet
        decision = rng.choice(("ALLOW",) * 7 + ("REVIEW", "HOLD", "BLOCK"))
        ppm = rng.randrange(0, 1_000_001)
        at = t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        points = points_milli(policy, ppm / 1e6, decision, None)
        pending = state.assess([RiskEvent(event_hour(at), o, b, points)], KEY_ID)
        state.commit(pending)
        body = {"account_risk": pending.results[0].to_json(), "at": at, "decision": decision,
                "fail_safe": None, "schema": DECISION_SCHEMA, "score_ppm": ppm}
        lines.append(orjson.dumps({"seq": seq, "body": body}))
    held = RiskState.of(state)
    body = risk_snapshot_body(held, policy, 200, DECIDER)
    (HERE / "records.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (HERE / "expected.json").write_bytes(orjson.dumps({
        "policy": policy.to_json(), "covers_seq": 200, "decider": DECIDER,
        "body": canonical_bytes(body).decode(), "root": body["root"], "accounts": len(held.accounts),
        "state_sha256": hashlib.sha256(held.to_bytes()).hexdigest(),
        "first_leaf": held.leaves()[0].decode()}, option=orjson.OPT_INDENT_2) + b"\n")


if __name__ == "__main__":
    main()
