"""The feature state as a Merkle tree over per-account leaves: what a ``state.snapshot`` seals.

A state snapshot commits to the whole feature state (velocity windows and transaction graph) at
one seq by one root: RFC 6962 / 9162 hashing, the ledger's own (``ledger.merkle``), over one leaf
per account, the leaves in the order of their keyed account ids (byte order of the 64 hex
digits). What is not per account (window lengths, graph settings, watermarks, counts) is stated
in the sealed record beside the root (``meta``). Root and ``meta`` together determine every bit
of the state: equal roots and equal ``meta``, equal state.

A leaf, ``sealtrail.state-leaf/2``, is the JSON text (no spaces, keys sorted, integers in full)::

    {"account": "<64 hex>",
     "graph": null | {"edges_in": [[µs, cents, "<originator>", edge], ...],
                      "edges_out": [[µs, cents, "<beneficiary>", edge], ...],
                      "flagged": 0 | 1},
     "velocity": null | {"last": µs, "order": n,
                         "received": [[µs, cents, "<originator>" | null], ...],
                         "sent": [[µs, cents, "<beneficiary>" | null], ...]}}

``velocity`` holds the account's events in the windows (time order), ``graph`` its node in the
transaction graph: the edges its sent and received lists keep (time order) and its flag.
``order`` is the account's place in the windows' sweep order (least recently touched first);
``edge`` is the edge's place among every edge the graph holds, in time order (ties in arrival
order). Those two say how the accounts interleave; the features of later payments depend on them
only at the edges of the windows and caps, but a root that left them out would not pin the state
down. The graph's own order of accounts (first seen) is not in a leaf: no value reads it, and it
depends on where a decider began. Every part of a leaf depends on the payments of the windows
alone, so two deciders that caught up from any seqs at or before the windows' start hold the same
root.

``sealtrail.state-leaf/1`` (snapshots sealed by earlier releases, from a ``sealtrail.graph/1``
state) also held, in ``graph``, the account's first-seen ``order``, its latest activity
(``last``) and the counts behind its usual number of counterparties (``ema_in``, ``ema_out``,
``p_in``, ``p_out``, ``period``, ``periods``; ``inference.graph.counted``). Those remember past
the window, so a leaf/1 root depends on where its state began (the record's ``from_seq``).

Every account and counterparty is a keyed identifier (``VelocityState.account_id`` under the
ledger's state key): a state held in clear is refused (``StateSnapshotError``), so no leaf, and
no bundle holding one, names an account in clear.

Pure: bytes in (``inference.state_store.features_state_bytes``), hashes out; no database, no clock.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from audit.errors import StateSnapshotError
from inference.graph import GRAPH_STATE_FORMAT, GRAPH_STATE_FORMAT_V1
from inference.state_store import FEATURE_STATE_FORMAT
from inference.velocity import VELOCITY_FORMAT_KEYED, WINDOWS_US
from ledger.errors import InclusionError
from ledger.merkle import EMPTY_ROOT, inclusion_ranges, leaf_hash, root_of, verify_inclusion

__all__ = ["LEAF_FORMAT", "LEAF_FORMATS", "LEAF_FORMAT_V1", "LEAF_GRAPH", "AccountProof", "StateTree",
           "state_tree", "verify_account"]

LEAF_FORMAT = "sealtrail.state-leaf/2"  # what a snapshot sealed now holds
LEAF_FORMAT_V1 = "sealtrail.state-leaf/1"
LEAF_FORMATS = (LEAF_FORMAT_V1, LEAF_FORMAT)  # what this release reads and recomputes
LEAF_GRAPH = {LEAF_FORMAT: GRAPH_STATE_FORMAT, LEAF_FORMAT_V1: GRAPH_STATE_FORMAT_V1}  # the graph of each
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _dumps(obj: Any) -> bytes:
    """JSON text without spaces, keys sorted, integers in full (beyond 64 bits too)."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # an integer past 64 bits: the same text from the standard library
        return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=True).encode()


def _account(v: object, what: str) -> str:
    if type(v) is not str or not _HEX64.fullmatch(v):
        raise StateSnapshotError(f"{what} {str(v)[:20]!r} is not a keyed account id (64 hex digits): a "
                                 "snapshot holds only a state keyed under the ledger's state key")
    return v


def _cp(v: object, what: str) -> str | None:
    return None if v is None else _account(v, what)


@dataclass(frozen=True)
class StateTree:
    """The leaves of one feature state, in keyed-id order, their root, and what is not per account."""

    accounts: tuple[str, ...]  # keyed ids, sorted
    leaves: tuple[bytes, ...]  # leaf bytes, same order
    meta: dict[str, Any]  # the non-per-account state, as the sealed record states it
    state_key_id: str
    leaf_format: str = LEAF_FORMAT

    @property
    def size(self) -> int:
        return len(self.leaves)

    @property
    def root(self) -> bytes:
        """RFC 6962 MTH over the leaves (the empty state: SHA-256 of nothing)."""
        return _root(self._hashes)

    @property
    def _hashes(self) -> list[bytes]:
        got: list[bytes] | None = self.__dict__.get("_leaf_hashes")
        if got is None:
            got = [leaf_hash(b) for b in self.leaves]
            object.__setattr__(self, "_leaf_hashes", got)
        return got

    def leaf(self, account: str) -> tuple[int, bytes]:
        """(index, leaf bytes) of ``account``; ``StateSnapshotError`` if the state does not hold it."""
        i = bisect_left(self.accounts, account)
        if i == len(self.accounts) or self.accounts[i] != account:
            raise StateSnapshotError(f"the state holds no account {account[:16]!r}... (not keyed under "
                                     "this state key, or no activity in its windows)")
        return i, self.leaves[i]

    def prove(self, account: str) -> AccountProof:
        """``account``'s leaf and its RFC 9162 inclusion proof against ``root``."""
        index, leaf = self.leaf(account)
        hashes = self._hashes
        path = tuple(_root(hashes[b:e]) for b, e in inclusion_ranges(index, len(hashes)))
        return AccountProof(account, index, len(hashes), leaf, path)


def _root(hashes: Sequence[bytes]) -> bytes:
    return root_of(hashes) if hashes else EMPTY_ROOT


@dataclass(frozen=True)
class AccountProof:
    """One account's state at a sealed snapshot: its leaf, where it sits and the path to the root."""

    account: str
    index: int
    size: int
    leaf: bytes
    path: tuple[bytes, ...]

    def to_json(self) -> dict[str, Any]:
        return {"account": self.account, "index": self.index, "size": self.size,
                "leaf": self.leaf.decode(), "path": [h.hex() for h in self.path]}


def verify_account(proof: AccountProof, root: bytes, size: int) -> dict[str, Any]:
    """The account's state (the parsed leaf) if ``proof`` leads to ``root`` of a tree of ``size``
    leaves and the leaf names ``proof.account``; ``StateSnapshotError`` otherwise."""
    if proof.size != size:
        raise StateSnapshotError(f"the proof is for a tree of {proof.size} accounts, the snapshot has {size}")
    try:
        verify_inclusion(proof.index, size, leaf_hash(proof.leaf), proof.path, root)
        doc = orjson.loads(proof.leaf)
    except (InclusionError, orjson.JSONDecodeError) as exc:
        raise StateSnapshotError(f"account {proof.account[:16]}...: {exc}") from None
    if not isinstance(doc, dict) or doc.get("account") != proof.account:
        raise StateSnapshotError(f"the leaf proven is not account {proof.account[:16]}...'s")
    return doc


def state_tree(data: bytes, state_key_id: str, leaf: str | None = None, *,
               counted_ok: bool = False) -> StateTree:
    """The tree of a ``sealtrail.feature-state/1`` document (``features_state_bytes``) whose
    accounts are keyed under ``state_key_id``, with leaves of the format ``leaf`` (None: the one
    the document's graph gives, leaf/1 from ``sealtrail.graph/1``); ``StateSnapshotError`` naming
    what is wrong. A leaf/1 tree needs a ``sealtrail.graph/1`` state (``CountedGraph``) and a
    leaf/2 tree a ``sealtrail.graph/2`` one, so the bytes a snapshot stands for are the ones its
    root commits to; ``counted_ok`` also makes a leaf/2 tree of a ``sealtrail.graph/1`` state (the
    counts left out), for a caller recomputing leaf/1 and leaf/2 snapshots with one
    ``CountedGraph`` catch-up."""
    if leaf is not None and leaf not in LEAF_FORMATS:
        raise StateSnapshotError(f"leaf format {leaf!r} is not one this release reads "
                                 f"({', '.join(LEAF_FORMATS)})")
    try:
        return _tree(data, state_key_id, leaf, counted_ok)
    except StateSnapshotError:
        raise
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise StateSnapshotError(f"the feature state is malformed: {exc!r}") from None


def _tree(data: bytes, state_key_id: str, leaf: str | None, counted_ok: bool) -> StateTree:
    line, _, rest = data.partition(b"\n")
    head = orjson.loads(line)
    if not isinstance(head, dict) or head.get("format") != FEATURE_STATE_FORMAT:
        raise StateSnapshotError(f"the feature state is not a {FEATURE_STATE_FORMAT} document")
    n = head["velocity"]
    if type(n) is not int or not 0 < n <= len(rest):
        raise StateSnapshotError("the feature state's velocity part has no valid length")
    vel, graph = orjson.loads(rest[:n]), orjson.loads(rest[n:])
    if vel.get("format") != VELOCITY_FORMAT_KEYED:
        raise StateSnapshotError("the velocity windows are not keyed: a snapshot holds keyed accounts only")
    if vel.get("key_id") != state_key_id:
        raise StateSnapshotError(f"the velocity windows are keyed under {vel.get('key_id')!r}, not "
                                 f"{state_key_id!r}")
    form = graph.get("format")
    if form not in (GRAPH_STATE_FORMAT, GRAPH_STATE_FORMAT_V1):
        raise StateSnapshotError(f"the graph is not a {GRAPH_STATE_FORMAT} (or {GRAPH_STATE_FORMAT_V1}) "
                                 "document")
    if leaf is None:
        leaf = LEAF_FORMAT_V1 if form == GRAPH_STATE_FORMAT_V1 else LEAF_FORMAT
    elif form != LEAF_GRAPH[leaf] and not (counted_ok and leaf == LEAF_FORMAT):
        raise StateSnapshotError(f"a {leaf} tree is made from a {LEAF_GRAPH[leaf]} state, not from {form}")
    per: dict[str, dict[str, Any]] = {}
    for order, (key, last, sent, received) in enumerate(vel["accounts"]):
        key = _account(key, "velocity account")
        if key in per:
            raise StateSnapshotError(f"velocity account {key[:16]}... is held twice")
        per[key] = {"velocity": {
            "last": last, "order": order,
            "received": [[t, c, _cp(cp, "counterparty")] for t, c, _near, cp in received],
            "sent": [[t, c, _cp(cp, "counterparty")] for t, c, _near, cp in sent]}}
    nodes: list[dict[str, Any]] = []
    v1 = form == GRAPH_STATE_FORMAT_V1
    for order, a in enumerate(graph["accounts"]):
        key = _account(a[0], "graph account")
        if len(a) != (9 if v1 else 2):
            raise StateSnapshotError(f"graph account {key[:16]}... is not a {form} row")
        node: dict[str, Any] = {"edges_in": [], "edges_out": [], "flagged": a[2] if v1 else a[1]}
        if leaf == LEAF_FORMAT_V1:
            last, _flag, period, p_out, p_in, periods, ema_out, ema_in = a[1:]
            node.update({"ema_in": ema_in, "ema_out": ema_out, "last": last, "order": order, "p_in": p_in,
                         "p_out": p_out, "period": period, "periods": periods})
        slot = per.setdefault(key, {})
        if "graph" in slot:
            raise StateSnapshotError(f"graph account {key[:16]}... is held twice")
        slot["graph"] = node
        nodes.append(node)
    keys = [a[0] for a in graph["accounts"]]
    for edge, (t, src, dst, cents, out_held, in_held) in enumerate(graph["edges"]):
        if out_held:
            nodes[src]["edges_out"].append([t, cents, keys[dst], edge])
        if in_held:
            nodes[dst]["edges_in"].append([t, cents, keys[src], edge])
    accounts = tuple(sorted(per))
    leaves = tuple(_dumps({"account": k, "graph": per[k].get("graph"), "velocity": per[k].get("velocity")})
                   for k in accounts)
    meta = {
        "graph": {"accounts": len(nodes), "config": graph["config"], "edges": len(graph["edges"]),
                  "format": LEAF_GRAPH[leaf], "watermark": graph["watermark"]},
        "velocity": {"accounts": len(vel["accounts"]), "format": VELOCITY_FORMAT_KEYED,
                     "next_sweep": vel["next_sweep"], "watermark": vel["watermark"],
                     "windows_us": list(WINDOWS_US)},
    }
    return StateTree(accounts, leaves, meta, state_key_id, leaf)
