"""The deadline policy in force: the last sealed ``alert_policy`` record, or the built-in default.

``sealtrail cases policy show`` (and anything else that asks "which policy dates the next
alert?") reads it here, from the ledger's own entries, never from a derived table: one step
back along the ``(kind, seq)`` index. The alert view keeps each alert's own ``policy_seq``;
this is the policy an alert opened from now on is judged by (or, with ``before``, one opened
at that seq).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Engine, select

from audit.cases.events import parse_policy
from audit.cases.policy import DEFAULT_POLICY, POLICY_KIND, DeadlinePolicy
from audit.errors import CaseError
from ledger import store

__all__ = ["PolicyInForce", "policy_in_force"]


@dataclass(frozen=True)
class PolicyInForce:
    """A policy and the sealed record that put it in force (``seq`` 0 and no record: the
    built-in default, before any ``alert_policy`` record)."""

    policy: DeadlinePolicy
    seq: int
    trace_id: str | None = None
    recorded_at: str | None = None
    principal: dict[str, Any] | None = None
    rationale: str | None = None

    @property
    def built_in(self) -> bool:
        return self.seq == 0

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy.to_json(), "seq": self.seq, "built_in": self.built_in,
                "trace_id": self.trace_id, "recorded_at": self.recorded_at, "principal": self.principal,
                "rationale": self.rationale}


def policy_in_force(engine: Engine, *, before: int | None = None) -> PolicyInForce:
    """The policy of the last ``alert_policy`` record (before seq ``before``, if given), or
    :data:`DEFAULT_POLICY`. A sealed body that is not a policy raises ``CaseError`` naming its seq."""
    if before is not None and (type(before) is not int or before < 0):
        raise CaseError("before", "must be a seq")
    e = store.entries
    q = select(e.c.seq, e.c.record).where(e.c.kind == POLICY_KIND)
    if before is not None:
        q = q.where(e.c.seq < before)
    with engine.connect() as conn:
        row = conn.execute(q.order_by(e.c.seq.desc()).limit(1)).first()
    if row is None:
        return PolicyInForce(DEFAULT_POLICY, 0)
    env = orjson.loads(row.record)
    body = env.get("record")
    try:
        policy = parse_policy(body)
    except CaseError as exc:
        raise CaseError("policy", f"the alert_policy record at seq {row.seq} does not parse: {exc}") from exc
    assert isinstance(body, dict)  # parse_policy accepted it
    return PolicyInForce(policy, int(row.seq), str(env.get("trace_id")), str(env.get("recorded_at")),
                         dict(body["principal"]), str(body["rationale"]))
