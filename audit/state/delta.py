"""State deltas: what each commit of decisions advanced the feature state by, sealed with it.

The velocity windows and the transaction graph are a function of four inputs per decision, in
seq order: the originator's and the beneficiary's account as the state holds them, the event
time, and the amount in US cents (``inference.features.FeatureExtractor.extract(deltas=)``).
Every commit of decisions seals, after its ``decision.summary``, one ``state.delta`` record that
lists those inputs for each decision of the commit, in the same order. Any process of the same
ledger brings its state up to a seq by applying the deltas sealed up to it
(``FeatureExtractor.advance``), without reading a payload again: two processes that applied the
same prefix hold the same bits, and a payload purged or erased under retention no longer leaves
a hole in the state it fed.

Accounts are never in clear: they are the state's keyed identifiers, HMAC-SHA256 under the
ledger's state key (``audit.decide.account_secret.read_state_key``, derived from the account
secret every decider of the ledger reads), 64 hex digits; the record names the key by its id.
Amounts are integers (US cents) and times integers (µs since the epoch): no float is sealed.

The version 1 body, RFC 8785::

    {"decider": "<host>/<pid>/<8 hex>",
     "entries": [["<64 hex>" | null, "<64 hex>" | null, <µs>, <cents> | null], ...],
     "first_seq": N,
     "schema": "sealtrail.state-delta/1",
     "state_key_id": "<16 hex>"}

Version 2 (``sealtrail.state-delta/2``, what is sealed now) adds ``"state_from": F``: the seq the
sealing decider's feature state was caught up from, starting empty (``audit.state.replay.catch_up``
from ``F``; a state restored from a sealed snapshot keeps the snapshot's ``from_seq``), or ``null``
where the decider cannot vouch for its origin (a state a caller handed it). A decision's features
are a function of its state's origin and the deltas from there to it: with ``state_from`` sealed,
anyone holding the deltas from ``F`` on computes the state each decision was made on
(``audit.bundle.rederive``). The state forgets everything past its 30-day windows, so any origin
at or before a decision's window gives the same state (the ``sealtrail.graph/1`` graph of earlier
releases also kept counts that remembered further back; no feature read them). Version 1 deltas
read as before, origin unknown.

``decider`` names the process that sealed the commit (its host name, process id and a random
tag of its start, so a reused pid is told apart): with several deciders on one log, each commit
says which of them made it.

``entries[i]`` is the delta of the decision at seq ``first_seq + i``; the summary of those
decisions sits right before the delta, so a delta sealed at seq ``s`` has
``first_seq + len(entries) == s - 1``. A commit of refusals seals none (a refusal advances no
state).

This module is pure (no database, no clock): the pipeline seals deltas with it, state catch-up
and ``ledger verify`` read them with it.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from audit.errors import StateDeltaError
from inference.features import StateDelta
from ledger.jcs import Jcs

__all__ = ["DELTA_KIND", "DELTA_SCHEMA", "DELTA_SCHEMAS", "DELTA_SCHEMA_V1", "Delta", "decider_name",
           "delta_body", "entries_bytes", "parse_delta"]

DELTA_KIND = "state.delta"
DELTA_SCHEMA = "sealtrail.state-delta/2"
DELTA_SCHEMA_V1 = "sealtrail.state-delta/1"
DELTA_SCHEMAS = (DELTA_SCHEMA_V1, DELTA_SCHEMA)
_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_KEYS = frozenset({"decider", "entries", "first_seq", "schema", "state_key_id"})
_KEYS_V2 = _KEYS | {"state_from"}
_DECIDER = re.compile(r"[\x21-\x7e]{1,200}")  # printable ASCII, no space


def decider_name() -> str:
    """This process's name as a decider: host name (printable ASCII only), pid, a random tag."""
    host = "".join(c for c in socket.gethostname() if "!" <= c <= "~" and c not in '"\\/')[:100]
    return f"{host or 'host'}/{os.getpid()}/{secrets.token_hex(4)}"


def _id(value: str | None) -> bytes:
    if value is None:
        return b"null"
    if type(value) is not str or not _HEX64.fullmatch(value):
        raise StateDeltaError("a state delta names accounts by their keyed identifiers (64 hex digits) only: "
                              "the feature state is not keyed")
    return b'"' + value.encode() + b'"'


def _int(value: int | None, what: str) -> bytes:
    if value is None and what == "cents":
        return b"null"
    if type(value) is not int:
        raise StateDeltaError(f"a state delta's {what} is an integer, not {value!r}")
    return str(value).encode()


def entries_bytes(deltas: Sequence[StateDelta]) -> bytes:
    """The canonical ``entries`` array of ``deltas`` (made before the sequencer lock is taken)."""
    parts = [b"[" + _id(o) + b"," + _id(b) + b"," + _int(t, "time") + b"," + _int(c, "cents") + b"]"
             for o, b, t, c in deltas]
    return b"[" + b",".join(parts) + b"]"


def delta_body(state_key_id: str, first_seq: int, entries: bytes, decider: str,
               state_from: int | None = None) -> Jcs:
    """The canonical version 2 body of a delta whose ``entries`` (from ``entries_bytes``) speak
    for the decisions from ``first_seq`` on, sealed by ``decider`` whose state was caught up from
    ``state_from`` (None: not known)."""
    if not _HEX16.fullmatch(state_key_id):
        raise StateDeltaError(f"state key id {state_key_id!r} is not 16 hex digits")
    if not _DECIDER.fullmatch(decider) or "\\" in decider or '"' in decider:
        raise StateDeltaError(f"decider {decider!r} is not printable ASCII without spaces or quotes")
    if state_from is not None and (type(state_from) is not int or not 0 <= state_from <= first_seq):
        raise StateDeltaError(f"state_from {state_from!r} is not a seq at or before the delta's first "
                              "decision")
    origin = b"null" if state_from is None else str(state_from).encode()
    return Jcs(b'{"decider":"' + decider.encode() + b'","entries":' + entries + b',"first_seq":'
               + str(int(first_seq)).encode()
               + b',"schema":"' + DELTA_SCHEMA.encode() + b'","state_from":' + origin
               + b',"state_key_id":"' + state_key_id.encode() + b'"}')


@dataclass(frozen=True)
class Delta:
    """A parsed delta sealed at ``seq``: ``entries[i]`` is the decision at ``first_seq + i``'s."""

    seq: int
    first_seq: int
    state_key_id: str
    entries: tuple[StateDelta, ...]
    decider: str = ""
    state_from: int | None = None  # the sealing decider's state origin (version 2; None: not known)
    version: int = 2

    @property
    def seqs(self) -> range:
        return range(self.first_seq, self.first_seq + len(self.entries))


def _account(v: object) -> bool:
    return v is None or (type(v) is str and len(v) == 64 and _HEX64.fullmatch(v) is not None)


def parse_delta(seq: int, body: object) -> Delta:
    """The delta sealed at ``seq`` with record body ``body`` (parsed JSON); ``StateDeltaError``
    naming what is wrong if it does not follow the schema or does not sit right after the summary
    of the decisions it speaks for."""
    where = f"state delta at seq {seq}"
    if not isinstance(body, dict) or body.get("schema") not in DELTA_SCHEMAS:
        raise StateDeltaError(f"{where}: schema is not one of {', '.join(DELTA_SCHEMAS)}")
    version = 1 if body["schema"] == DELTA_SCHEMA_V1 else 2
    if body.keys() != (_KEYS if version == 1 else _KEYS_V2):
        raise StateDeltaError(f"{where}: fields {sorted(body)} are not the schema's")
    origin = body.get("state_from")
    kid, first, raw, decider = body["state_key_id"], body["first_seq"], body["entries"], body["decider"]
    if type(kid) is not str or not _HEX16.fullmatch(kid):
        raise StateDeltaError(f"{where}: state_key_id is not 16 hex digits")
    if type(decider) is not str or not _DECIDER.fullmatch(decider):
        raise StateDeltaError(f"{where}: decider is not printable ASCII without spaces")
    if type(raw) is not list or not raw:
        raise StateDeltaError(f"{where}: entries is not a non-empty list")
    if type(first) is not int or first < 1 or first + len(raw) != seq - 1:
        raise StateDeltaError(f"{where}: first_seq {first!r} with {len(raw)} entries does not end right "
                              "before the summary sealed before the delta")
    if origin is not None and (type(origin) is not int or not 0 <= origin <= first):
        raise StateDeltaError(f"{where}: state_from {origin!r} is not a seq at or before first_seq {first}")
    entries: list[StateDelta] = []
    push = entries.append
    for i, e in enumerate(raw):
        if (type(e) is not list or len(e) != 4 or not _account(e[0]) or not _account(e[1])
                or type(e[2]) is not int or not (e[3] is None or type(e[3]) is int)):
            raise StateDeltaError(f"{where}: entry {i} (seq {first + i}) is malformed")
        push((e[0], e[1], e[2], e[3]))
    return Delta(seq, first, kid, tuple(entries), decider, origin, version)
