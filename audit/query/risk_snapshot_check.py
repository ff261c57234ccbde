"""The sealed account-risk snapshots checked by ``ledger verify``.

A ``state.account-risk`` (``audit.state.risk_snapshot_body``) claims the Merkle root of the account
risk after ``covers_seq``, swept under its policy. Every one is parsed and checked against its
place in the log (it follows the seq it covers; its accounts are keyed under the ledger's account
secret). With ``roots``, each claim is recomputed: an empty state under the snapshot's policy
applies every decision record up to ``covers_seq`` (``audit.state.account_risk_replay``), and its
tree's root, counts, hour and sweep day are compared with the record. Snapshots that share a
policy are recomputed in one pass over the log, so the cost is one rebuild per policy the
deciders ran under: what every start paid before account risk was snapshotted.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson
from sqlalchemy import Engine

from audit.decide.account_risk import AccountRiskPolicy, AccountRiskState
from audit.errors import StateSnapshotError
from audit.state.account_risk_replay import apply_records, risk_bodies
from audit.state.risk_snapshot import risk_snapshot_pages
from audit.state.risk_snapshot_body import RiskState, SealedRiskSnapshot, parse_risk_snapshot

__all__ = ["TABLE", "RiskSnapshotCheck", "check_risk_snapshots"]

TABLE = "state.account-risk"

Fail = Callable[[str, int, str], None]


class RiskSnapshotCheck:
    """What ``check_risk_snapshots`` checked: records parsed, and roots recomputed."""

    def __init__(self) -> None:
        self.snapshots = 0
        self.recomputed = 0


def check_risk_snapshots(engine: Engine, account_key_id: str | None, fail: Fail, *,
                         roots: bool) -> RiskSnapshotCheck:
    """Check every sealed account-risk snapshot (and with ``roots``, recompute its root); each
    finding goes to ``fail(TABLE, seq, what)``. ``account_key_id``: the ledger's account secret's
    (None: the ledger holds none yet, nothing to compare)."""
    done = RiskSnapshotCheck()
    runs: dict[AccountRiskPolicy, list[SealedRiskSnapshot]] = {}
    for page in risk_snapshot_pages(engine):
        for seq, rec in page:
            done.snapshots += 1
            try:
                s = parse_risk_snapshot(seq, orjson.loads(rec).get("record"))
            except (StateSnapshotError, orjson.JSONDecodeError, AttributeError) as exc:
                fail(TABLE, seq, f"the account-risk snapshot does not parse: {exc}")
                continue
            if None not in (s.account_key_id, account_key_id) and s.account_key_id != account_key_id:
                fail(TABLE, seq, f"accounts keyed under {s.account_key_id}, the ledger's account secret is "
                                 f"{account_key_id}")
                continue
            runs.setdefault(s.policy, []).append(s)
    if not roots:
        return done
    for policy, snaps in runs.items():
        state = AccountRiskState(policy)
        pos = 0
        for s in sorted(snaps, key=lambda x: (x.covers_seq, x.seq)):
            if s.covers_seq + 1 > pos:
                apply_records(state, risk_bodies(engine, pos, s.covers_seq + 1))
                pos = s.covers_seq + 1
            done.recomputed += 1
            diff = s.matches(RiskState.of(state), policy)
            if diff is not None:
                fail(TABLE, s.seq, f"account risk rebuilt from the log to seq {s.covers_seq} has {diff}")
    return done
