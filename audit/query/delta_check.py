"""The state deltas checked against the commits they speak for, by ``ledger verify``.

A ``state.delta`` (``audit.state.delta``) is sealed, so nobody rewrites it unseen; but every
decider of the ledger catches its feature state up from the deltas, so the walk of
``audit.query.verify`` checks that the sealing code wrote what it should: each delta follows its
commit's ``decision.summary`` and speaks for exactly that summary's decisions, its key id is the
ledger's state key's, each entry's time is its decision's event time (``at``), and after the
first delta no commit of decisions goes without one. Commits sealed before the first delta (by a
release that sealed none) are counted, not judged; so are deltas under another state key than
the ledger's now (sealed before its account secret was lost and made again: catch-up replays
their decisions from the payloads). The keyed accounts and the amounts are not
recomputed here (that needs every payload parsed and keyed again). A version 3 delta's
account-risk part is: each entry must name the accounts its decision record's ``account_risk``
states, under its key id and policy, and the points that the record's score, outcome and
``fail_safe`` give under that policy, as a rebuild from the records computes them (deciders catch
their account risk up from the delta, not from the records: a record whose stated points its
score does not give is named here, where the rebuild alone would only count it).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import orjson

from audit.decide.account_risk import AccountRiskError, AccountRiskPolicy, points_milli
from audit.decide.fixed_point import body_score
from audit.decide.summary import Summary
from audit.errors import StateDeltaError
from audit.state.delta import parse_delta
from inference.features import epoch_us

__all__ = ["TABLE", "DeltaWalk"]

TABLE = "state.delta"

Fail = Callable[[str, int, str], None]


class DeltaWalk:
    """Fed, in seq order per kind and a page at a time: decisions, summaries, then deltas."""

    def __init__(self, fail: Fail, state_key_id: str | None) -> None:
        self._fail = fail
        self._key_id = state_key_id  # None: the schema holds no secret (nothing to compare)
        self._at: dict[int, tuple[str, object]] = {}  # decision seq -> its event time and account_risk,
        # until its summary is seen
        self._commits: dict[int, tuple[int, list[tuple[str, object]] | None]] = {}  # summary seq -> (first
        # seq, [(at, account_risk)])
        self.started = False  # a delta was seen: from here on every commit of decisions has one
        self.deltas = 0
        self.without = 0  # commits of decisions sealed before the first delta
        self.other_key = 0  # deltas under another state key than the ledger's now

    def decision(self, seq: int, at: str, account_risk: object = None) -> None:
        self._at[seq] = (at, account_risk)

    def summary(self, s: Summary | None, seq: int) -> None:
        """The summary at ``seq`` (None: it did not parse; the summary walk reports that)."""
        if s is None or not s.entries or any(e.refusal is not None for e in s.entries):
            ats = None  # no decisions: no delta follows
        else:
            ats = [self._at.pop(s.first_seq + i, ("", None)) for i in range(len(s.entries))]
        for early in [k for k in self._at if k < seq]:
            del self._at[early]  # no summary speaks for it: the summary walk reports that
        for prior in [k for k in self._commits if k < seq]:
            self._missing(prior)
        if ats is not None:
            self._commits[seq] = (s.first_seq if s is not None else 0, ats)

    def delta(self, seq: int, record: bytes) -> None:
        self.deltas += 1
        fail = self._fail
        for prior in [k for k in self._commits if k < seq - 1]:
            self._missing(prior)
        if not self.started:
            self.without += len(self._commits)
            self._commits = {k: v for k, v in self._commits.items() if k == seq - 1}
            self.without -= len(self._commits)
            self.started = True
        try:
            d = parse_delta(seq, orjson.loads(record)["record"])
        except (StateDeltaError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
            fail(TABLE, seq, f"the state delta does not parse: {exc}")
            self._commits.pop(seq - 1, None)
            return
        commit = self._commits.pop(seq - 1, None)
        if commit is None:
            fail(TABLE, seq, "the state delta follows no summary of decisions")
            return
        first, ats = commit
        if (d.first_seq, len(d.entries)) != (first, len(ats or ())):
            fail(TABLE, seq, f"the state delta speaks for seqs {d.first_seq}.."
                             f"{d.first_seq + len(d.entries) - 1}; the summary before it for {first}.."
                             f"{first + len(ats or ()) - 1}")
            return
        if self._key_id is not None and d.state_key_id != self._key_id:
            self.other_key += 1
        for i, (entry, (at, _)) in enumerate(zip(d.entries, ats or (), strict=True)):
            if entry[2] != _us(at):
                fail(TABLE, seq, f"entry {i} is at {entry[2]} µs; the decision at seq {first + i} is at "
                                 f"{at!r}")
                break
        part = d.account_risk
        if part is None:
            return
        policy = part.policy.to_json()
        for i, (side, (_, stated)) in enumerate(zip(part.entries, ats or (), strict=True)):
            want = _risk_entry(stated)
            if want is None or want[:3] != side or want[3] != part.account_key_id or want[4] != policy:
                got = "no account_risk it can be read from" if want is None else str(list(want[:4]))
                if want is not None and want[5] != want[2]:
                    got += (f" (its record states {want[5]} points, not what its score, outcome and "
                            "fail_safe give)")
                fail(TABLE, seq, f"account_risk entry {i} {list(side)} (key {part.account_key_id}) is not "
                                 f"what the decision at seq {first + i} gives: {got}")
                break

    def _missing(self, summary_seq: int) -> None:
        del self._commits[summary_seq]
        if self.started:
            self._fail(TABLE, summary_seq, "a commit of decisions sealed after the first state delta without "
                                           "one (the deciders' state cannot be caught up past it)")
        else:
            self.without += 1

    def finish(self) -> None:
        for prior in list(self._commits):
            self._missing(prior)


def _risk_entry(fields: object) -> tuple[str | None, str | None, int, object, object, object] | None:
    """Of a decision record (its ``risk_fields``): (originator, beneficiary, the points its score,
    outcome and fail_safe give under its policy, key id, policy, the points its ``account_risk``
    states); None if it states no ``account_risk`` these can be read from."""
    if not isinstance(fields, dict) or not isinstance(stated := fields.get("account_risk"), dict):
        return None
    try:
        o, b = stated["originator"], stated["beneficiary"]
        fs = fields.get("fail_safe")
        points = points_milli(AccountRiskPolicy.from_json(stated["policy"]), body_score(fields),
                              str(fields["decision"]), fs if isinstance(fs, str) else None)
        return (None if o is None else o["account"], None if b is None else b["account"], points,
                stated["account_key_id"], stated["policy"], stated["points_milli"])
    except (AccountRiskError, KeyError, TypeError, ValueError):
        return None


def _us(at: str) -> int | None:
    try:
        return epoch_us(datetime.fromisoformat(at.replace("Z", "+00:00")))
    except (ValueError, TypeError, AttributeError):
        return None
