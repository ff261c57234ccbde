"""The account-risk state as a Merkle tree, and the ``state.account-risk`` record that seals its root.

Account risk (``audit.decide.account_risk``) is a sum that only decays: there is no window to
start from, so without a snapshot a process rebuilds it from every decision record of the log.
A sealed snapshot lets a restart load the state of one seq and apply only the records after it.

The tree: RFC 6962 / 9162 hashing, the ledger's own (``ledger.merkle``), over one leaf per account
held, in byte order of the keyed account ids. A leaf, ``sealtrail.account-risk-leaf/1``, is the
JSON text (no spaces, keys sorted, integers in full)::

    {"account": "<32 hex>", "hour": H, "milli": M}

the account's risk in milli-points as of whole UTC hour ``H`` (hours since the epoch), before
decay: what ``AccountRiskState`` holds for it. What is not per account is stated beside the root.

The record's body, ``sealtrail.account-risk-snapshot/1``, RFC 8785::

    {"account_key_id": "<16 hex>" | null,  # the account secret the accounts are keyed under
     "accounts": N,                         # leaves of the tree
     "applied": n,                          # decisions applied to the state since the log began
     "covers_seq": S,                       # the state after the entry at S (the first S + 1 entries)
     "decider": "<host>/<pid>/<8 hex>",     # the process that sealed it
     "hour": H | null,                      # the newest effective hour applied
     "leaf": "sealtrail.account-risk-leaf/1",
     "policy": {...},                       # the sweep's policy: the account_risk.policy of a record
     "root": "<64 hex>",
     "schema": "sealtrail.account-risk-snapshot/1",
     "swept_day": D | null}                 # the UTC day of the last sweep

``policy`` matters because the daily sweep, which drops the accounts that read as none, uses the
deciding process's policy: a state rebuilt under another policy may have dropped other accounts.
A snapshot is therefore used only by a process deciding under the same policy.

The state file a decider writes beside its velocity snapshot holds ``to_bytes()``: one JSON object
``{"account_key_id", "accounts": [["<32 hex>", milli, hour], ...], "applied", "format":
"sealtrail.account-risk-state/1", "hour", "swept_day"}``, accounts in key order.

Pure (no database, no clock): the runtime and ``ledger verify`` make and read these with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from audit.decide.account_risk import AccountRiskError, AccountRiskPolicy, AccountRiskState
from audit.errors import StateSnapshotError
from ledger.merkle import EMPTY_ROOT, leaf_hash, root_of

__all__ = ["RISK_LEAF_FORMAT", "RISK_SNAPSHOT_KIND", "RISK_SNAPSHOT_SCHEMA", "RISK_STATE_FORMAT", "RiskState",
           "SealedRiskSnapshot", "parse_risk_snapshot", "risk_snapshot_body"]

RISK_SNAPSHOT_KIND = "state.account-risk"
RISK_SNAPSHOT_SCHEMA = "sealtrail.account-risk-snapshot/1"
RISK_LEAF_FORMAT = "sealtrail.account-risk-leaf/1"
RISK_STATE_FORMAT = "sealtrail.account-risk-state/1"
_KEYS = frozenset({"account_key_id", "accounts", "applied", "covers_seq", "decider", "hour", "leaf", "policy",
                   "root", "schema", "swept_day"})
_STATE_KEYS = frozenset({"account_key_id", "accounts", "applied", "format", "hour", "swept_day"})
_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DECIDER = re.compile(r"[\x21-\x7e]{1,200}")


def _int(v: object) -> bool:
    return type(v) is int


def _hour(v: object) -> bool:
    return v is None or type(v) is int


@dataclass(frozen=True)
class RiskState:
    """What a committed ``AccountRiskState`` holds, as plain values."""

    account_key_id: str | None
    hour: int | None
    swept_day: int | None
    applied: int
    accounts: dict[str, tuple[int, int]] = field(repr=False)  # keyed account -> (milli, hour)

    @classmethod
    def of(cls, state: AccountRiskState) -> RiskState:
        """The committed part of ``state``, copied (take it between batches)."""
        return cls(*state.committed())

    def into(self, policy: AccountRiskPolicy) -> AccountRiskState:
        """A live state holding these values, deciding under ``policy``."""
        return AccountRiskState.of(policy, self.account_key_id, self.hour, self.swept_day, self.applied,
                                   self.accounts)

    def leaves(self) -> list[bytes]:
        """The tree's leaves, in key order (integers and hex only: built as the canonical text)."""
        return [b'{"account":"' + k.encode() + b'","hour":' + str(h).encode() + b',"milli":'
                + str(m).encode() + b"}" for k, (m, h) in sorted(self.accounts.items())]

    def root(self) -> bytes:
        """The tree's root, hashed once (a start checks it against the sealed record twice)."""
        got: bytes | None = self.__dict__.get("_root")
        if got is None:
            hashes = [leaf_hash(leaf) for leaf in self.leaves()]
            got = root_of(hashes) if hashes else EMPTY_ROOT
            object.__setattr__(self, "_root", got)
        return got

    def to_bytes(self) -> bytes:
        """The state file's body (``RISK_STATE_FORMAT``)."""
        return orjson.dumps({"account_key_id": self.account_key_id, "applied": self.applied,
                             "accounts": [[k, m, h] for k, (m, h) in sorted(self.accounts.items())],
                             "format": RISK_STATE_FORMAT, "hour": self.hour, "swept_day": self.swept_day})

    @classmethod
    def from_bytes(cls, data: bytes) -> RiskState:
        """The state ``to_bytes`` wrote; ``StateSnapshotError`` naming what does not follow the format."""
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise StateSnapshotError(f"the account-risk state is not JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("format") != RISK_STATE_FORMAT or doc.keys() != _STATE_KEYS:
            raise StateSnapshotError(f"the account-risk state is not a {RISK_STATE_FORMAT} object")
        kid, hour, day, applied, rows = (doc["account_key_id"], doc["hour"], doc["swept_day"], doc["applied"],
                                         doc["accounts"])
        if not (kid is None or (type(kid) is str and _HEX16.fullmatch(kid))):
            raise StateSnapshotError("the account-risk state's account_key_id is not 16 hex digits")
        if not (_hour(hour) and _hour(day) and _int(applied) and applied >= 0):
            raise StateSnapshotError("the account-risk state's hour, swept_day or applied is not an integer")
        if type(rows) is not list:
            raise StateSnapshotError("the account-risk state's accounts is not a list")
        accounts: dict[str, tuple[int, int]] = {}
        last = ""
        for i, row in enumerate(rows):
            if (type(row) is not list or len(row) != 3 or type(row[0]) is not str
                    or not _HEX32.fullmatch(row[0]) or not _int(row[1]) or row[1] < 0 or not _int(row[2])):
                raise StateSnapshotError(f"the account-risk state's account {i} is not [32 hex, milli, hour]")
            if row[0] <= last:
                raise StateSnapshotError(f"the account-risk state's account {i} is out of key order or "
                                         "repeated")
            last = row[0]
            accounts[row[0]] = (row[1], row[2])
        return cls(kid, hour, day, applied, accounts)


@dataclass(frozen=True)
class SealedRiskSnapshot:
    """A parsed ``state.account-risk`` record sealed at ``seq``."""

    seq: int
    covers_seq: int
    root: bytes
    accounts: int
    account_key_id: str | None
    hour: int | None
    swept_day: int | None
    applied: int
    policy: AccountRiskPolicy
    decider: str

    def matches(self, state: RiskState, policy: AccountRiskPolicy) -> str | None:
        """What differs between this record and ``state`` held under ``policy`` (None: it is the
        sealed state)."""
        if policy != self.policy:
            return f"policy {policy.to_json()}, sealed under {self.policy.to_json()}"
        if state.account_key_id != self.account_key_id:
            return f"accounts keyed under {state.account_key_id}, sealed under {self.account_key_id}"
        if (state.hour, state.swept_day, state.applied) != (self.hour, self.swept_day, self.applied):
            return (f"hour {state.hour}, swept day {state.swept_day}, {state.applied} decisions applied; "
                    f"sealed as {self.hour}, {self.swept_day}, {self.applied}")
        if len(state.accounts) != self.accounts:
            return f"{len(state.accounts)} accounts, sealed with {self.accounts}"
        got = state.root()
        if got != self.root:
            return f"root {got.hex()}, sealed as {self.root.hex()}"
        return None


def risk_snapshot_body(state: RiskState, policy: AccountRiskPolicy, covers_seq: int,
                       decider: str) -> dict[str, Any]:
    """The body of the record that seals ``state`` (held under ``policy``) as the state after
    ``covers_seq``."""
    if type(covers_seq) is not int or covers_seq < 0:
        raise StateSnapshotError(f"a snapshot covers a seq >= 0, not {covers_seq!r}")
    if not _DECIDER.fullmatch(decider) or '"' in decider or "\\" in decider:
        raise StateSnapshotError(f"decider {decider!r} is not printable ASCII without spaces or quotes")
    return {"account_key_id": state.account_key_id, "accounts": len(state.accounts), "applied": state.applied,
            "covers_seq": covers_seq, "decider": decider, "hour": state.hour, "leaf": RISK_LEAF_FORMAT,
            "policy": policy.to_json(), "root": state.root().hex(), "schema": RISK_SNAPSHOT_SCHEMA,
            "swept_day": state.swept_day}


def parse_risk_snapshot(seq: int, body: object) -> SealedRiskSnapshot:
    """The account-risk snapshot sealed at ``seq`` with body ``body`` (parsed JSON);
    ``StateSnapshotError`` naming what does not follow the schema."""
    where = f"account-risk snapshot at seq {seq}"
    if not isinstance(body, dict) or body.get("schema") != RISK_SNAPSHOT_SCHEMA:
        raise StateSnapshotError(f"{where}: schema is not {RISK_SNAPSHOT_SCHEMA}")
    if body.keys() != _KEYS:
        raise StateSnapshotError(f"{where}: fields {sorted(body)} are not the schema's")
    covers, root, n, applied = body["covers_seq"], body["root"], body["accounts"], body["applied"]
    if not _int(covers) or not 0 <= covers < seq:
        raise StateSnapshotError(f"{where}: covers_seq {covers!r} is not a seq before it")
    if type(root) is not str or not _HEX64.fullmatch(root):
        raise StateSnapshotError(f"{where}: root is not 64 hex digits")
    if not _int(n) or n < 0 or not _int(applied) or applied < 0:
        raise StateSnapshotError(f"{where}: accounts and applied are counts")
    kid, decider, hour, day = body["account_key_id"], body["decider"], body["hour"], body["swept_day"]
    if not (kid is None or (type(kid) is str and _HEX16.fullmatch(kid))):
        raise StateSnapshotError(f"{where}: account_key_id is not 16 hex digits")
    if type(decider) is not str or not _DECIDER.fullmatch(decider):
        raise StateSnapshotError(f"{where}: decider is not printable ASCII without spaces")
    if not (_hour(hour) and _hour(day)):
        raise StateSnapshotError(f"{where}: hour and swept_day are integers or null")
    if body["leaf"] != RISK_LEAF_FORMAT:
        raise StateSnapshotError(f"{where}: leaf {body['leaf']!r} is not one this release reads")
    try:
        policy = AccountRiskPolicy.from_json(body["policy"])
    except AccountRiskError as exc:
        raise StateSnapshotError(f"{where}: {exc}") from None
    return SealedRiskSnapshot(seq, covers, bytes.fromhex(root), n, kid, hour, day, applied, policy, decider)
