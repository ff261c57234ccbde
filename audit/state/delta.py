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

Version 3 (``sealtrail.state-delta/3``, what is sealed now) adds ``"account_risk"``: what each
decision brought to the account-risk state (``audit.decide.account_risk``), so that a decider
catches its account risk up from the deltas as it does its feature state, without reading a
decision record::

    "account_risk": {"account_key_id": "<16 hex>",
                     "entries": [["<32 hex>" | null, "<32 hex>" | null, <points_milli>], ...],
                     "policy": {<the sealtrail.account-risk/1 policy, as records state it>}}

``account_risk.entries[i]`` is the decision at ``first_seq + i``'s originator and beneficiary as
its record's ``account_risk`` names them (keyed under the ledger's account secret, named by
``account_key_id``: not the state key of ``entries``) and the points it added to each; its event
hour is its entry's time, in whole hours. These are inputs (points follow from the decision's
score, outcome and ``fail_safe`` under the policy), never the accumulated risk. ``ledger verify``
requires each to name its decision record's accounts, key id and policy, with the points its
score, outcome and ``fail_safe`` give. Version 1 and 2 deltas read as before:
catch-up reads the account-risk fields of their decisions' records.

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

from audit.decide.account_risk import AccountRisk, AccountRiskError, AccountRiskPolicy
from audit.errors import StateDeltaError
from inference.features import StateDelta
from ledger.jcs import Jcs

__all__ = ["DELTA_KIND", "DELTA_SCHEMA", "DELTA_SCHEMAS", "DELTA_SCHEMA_V1", "DELTA_SCHEMA_V2", "Delta",
           "RiskEntry", "RiskPart", "decider_name", "delta_body", "entries_bytes", "parse_delta",
           "risk_bytes"]

DELTA_KIND = "state.delta"
DELTA_SCHEMA = "sealtrail.state-delta/3"
DELTA_SCHEMA_V1 = "sealtrail.state-delta/1"
DELTA_SCHEMA_V2 = "sealtrail.state-delta/2"
DELTA_SCHEMAS = (DELTA_SCHEMA_V1, DELTA_SCHEMA_V2, DELTA_SCHEMA)
_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_KEYS = frozenset({"decider", "entries", "first_seq", "schema", "state_key_id"})
_KEYS_V2 = _KEYS | {"state_from"}
_KEYS_V3 = _KEYS_V2 | {"account_risk"}
_RISK_KEYS = frozenset({"account_key_id", "entries", "policy"})

RiskEntry = tuple[str | None, str | None, int]  # a decision's originator, beneficiary (keyed), points
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


def risk_bytes(results: Sequence[AccountRisk]) -> bytes:
    """The canonical ``account_risk`` part of a version 3 delta for a batch's decisions (their
    ``AccountRisk``, in order; one policy and key id, as a batch is assessed under one)."""
    if not results:
        raise StateDeltaError("a state delta speaks for one decision at least")
    first = results[0]
    parts = []
    for r in results:
        if r.policy != first.policy or r.account_key_id != first.account_key_id:
            raise StateDeltaError("a batch's decisions are assessed under one account-risk policy and key")
        o = b"null" if r.originator is None else b'"' + r.originator.account.encode() + b'"'
        b = b"null" if r.beneficiary is None else b'"' + r.beneficiary.account.encode() + b'"'
        parts.append(b"[" + o + b"," + b + b"," + str(int(r.points_milli)).encode() + b"]")
    return (b'{"account_key_id":"' + first.account_key_id.encode() + b'","entries":[' + b",".join(parts)
            + b'],"policy":' + first.policy.jcs + b"}")


def delta_body(state_key_id: str, first_seq: int, entries: bytes, decider: str,
               state_from: int | None = None, account_risk: bytes | None = None) -> Jcs:
    """The canonical body of a delta whose ``entries`` (from ``entries_bytes``) speak for the
    decisions from ``first_seq`` on, sealed by ``decider`` whose state was caught up from
    ``state_from`` (None: not known): version 3 with ``account_risk`` (from ``risk_bytes``), else
    version 2."""
    if not _HEX16.fullmatch(state_key_id):
        raise StateDeltaError(f"state key id {state_key_id!r} is not 16 hex digits")
    if not _DECIDER.fullmatch(decider) or "\\" in decider or '"' in decider:
        raise StateDeltaError(f"decider {decider!r} is not printable ASCII without spaces or quotes")
    if state_from is not None and (type(state_from) is not int or not 0 <= state_from <= first_seq):
        raise StateDeltaError(f"state_from {state_from!r} is not a seq at or before the delta's first "
                              "decision")
    origin = b"null" if state_from is None else str(state_from).encode()
    risk = b"" if account_risk is None else b'{"account_risk":' + account_risk + b","
    schema = DELTA_SCHEMA_V2 if account_risk is None else DELTA_SCHEMA
    return Jcs((risk or b"{") + b'"decider":"' + decider.encode() + b'","entries":' + entries
               + b',"first_seq":' + str(int(first_seq)).encode()
               + b',"schema":"' + schema.encode() + b'","state_from":' + origin
               + b',"state_key_id":"' + state_key_id.encode() + b'"}')


@dataclass(frozen=True)
class RiskPart:
    """A version 3 delta's ``account_risk``: ``entries[i]`` is the decision at ``first_seq + i``'s."""

    account_key_id: str
    policy: AccountRiskPolicy
    entries: tuple[RiskEntry, ...]


@dataclass(frozen=True)
class Delta:
    """A parsed delta sealed at ``seq``: ``entries[i]`` is the decision at ``first_seq + i``'s."""

    seq: int
    first_seq: int
    state_key_id: str
    entries: tuple[StateDelta, ...]
    decider: str = ""
    state_from: int | None = None  # the sealing decider's state origin (version 2; None: not known)
    version: int = 3
    account_risk: RiskPart | None = None  # what its decisions brought to account risk (version 3)

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
    version = DELTA_SCHEMAS.index(body["schema"]) + 1
    if body.keys() != (_KEYS, _KEYS_V2, _KEYS_V3)[version - 1]:
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
    risk = _risk_part(where, body["account_risk"], len(entries)) if version == 3 else None
    return Delta(seq, first, kid, tuple(entries), decider, origin, version, risk)


def _side(v: object) -> bool:
    return v is None or (type(v) is str and len(v) == 32 and _HEX32.fullmatch(v) is not None)


def _risk_part(where: str, doc: object, n: int) -> RiskPart:
    if not isinstance(doc, dict) or doc.keys() != _RISK_KEYS:
        raise StateDeltaError(f"{where}: account_risk is not {{account_key_id, entries, policy}}")
    kid, raw = doc["account_key_id"], doc["entries"]
    if type(kid) is not str or not _HEX16.fullmatch(kid):
        raise StateDeltaError(f"{where}: account_risk.account_key_id is not 16 hex digits")
    try:
        policy = AccountRiskPolicy.from_json(doc["policy"])
    except AccountRiskError as exc:
        raise StateDeltaError(f"{where}: {exc}") from None
    if type(raw) is not list or len(raw) != n:
        raise StateDeltaError(f"{where}: account_risk.entries is not a list of one entry per decision ({n})")
    out: list[RiskEntry] = []
    most = policy.most_milli
    for i, e in enumerate(raw):
        if (type(e) is not list or len(e) != 3 or not _side(e[0]) or not _side(e[1])
                or type(e[2]) is not int or e[2] < 0):
            raise StateDeltaError(f"{where}: account_risk entry {i} is not [originator, beneficiary, points]")
        if e[2] > most:  # (also keeps every stated number inside what any JSON reader holds exactly)
            raise StateDeltaError(f"{where}: account_risk entry {i} states {e[2]} milli-points, more than "
                                  f"one decision adds under its policy ({most})")
        out.append((e[0], e[1], e[2]))
    return RiskPart(kid, policy, tuple(out))
