"""Decision summaries: the sealed record that lets a bundle prove its selection is complete.

Every commit of decisions seals, right after them and in the same transaction, one
``decision.summary`` entry (``sealtrail.decision.summary/2``, below; ``/1`` before refusals were
summarised) that says, for each of the
``len(decisions)`` entries immediately before it, what a bundle's filters select on: the outcome,
the ids of the rules that fired, and the decision's accounts as keyed hashes. Summaries form one
chain: each names the seq and leaf hash of the summary before it (``prev``; null for the first),
read under the sequencer lock, so no summary can be left out between two that a bundle carries.
All entries of one commit share one ``recorded_at``, which never decreases along the log
(``ledger.append``): the summaries just outside a time window bracket every decision inside it.

The version 1 body, RFC 8785::

    {"account_key_id": "<16 hex>",
     "decisions": [{"accounts": ["<32 hex>", ...], "decision": "ALLOW", "rules": ["R1", ...]}, ...],
     "prev": {"leaf_hash": "<hex>", "seq": N} | null,
     "schema": "sealtrail.decision.summary/1"}

``accounts`` are HMAC-SHA256 (first 16 bytes, hex, sorted, distinct) under the ledger's account
secret (``audit.decide.account_secret``) of each normalised account the transaction names
(originator and beneficiary): a bundle carries other customers' summaries, and a plain hash of an
account number can be reversed by trying them all. ``account_key_id`` names the secret.

Version 2 (``sealtrail.decision.summary/2``, what is sealed now) speaks for refusals too: its
list is named ``entries`` and an entry is either a decision's ``{accounts, decision, rules}`` (as
in version 1) or ``{"refusal": "<kind>"}``, for a ``refusal`` record (``audit.decide.refusal``).
A refusal is sealed in a commit of its own whose last entry is a version 2 summary with that one
entry (``audit.decide.refusal_seal``), in the same chain as the summaries of decisions, so a
bundle proves that it holds every refusal of its window as it does every decision. A version 2
summary also tells that its writer summarised refusals: a refusal sealed after one and spoken for
by none is a fault; before the first one, a refusal of a version that summarised none::

    {"account_key_id": "<16 hex>",
     "entries": [{"refusal": "message_refused"}],
     "prev": {"leaf_hash": "<hex>", "seq": N},
     "schema": "sealtrail.decision.summary/2"}

Version 1 summaries (decision entries only, under ``decisions``) are read as before.

This module is pure (no database, no clock): the pipeline and the exporter build summaries with
it, the offline bundle verifier and ``ledger verify`` read them with it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from audit.errors import SummaryError
from inference.messages.fields import iban_or_none
from ledger.jcs import Jcs, canonical_bytes
from ledger.records import Record

__all__ = ["SUMMARY_KIND", "SUMMARY_SCHEMA", "SUMMARY_SCHEMAS", "SUMMARY_SCHEMA_V1", "AccountKeyer",
           "Summary", "SummaryEntry", "SummaryError", "entries_jcs", "entry_matches", "normal_account",
           "parse_summary", "refusal_entries", "summary_body", "tail"]

SUMMARY_KIND = "decision.summary"
SUMMARY_SCHEMA_V1 = "sealtrail.decision.summary/1"
SUMMARY_SCHEMA = "sealtrail.decision.summary/2"  # what is sealed
SUMMARY_SCHEMAS = (SUMMARY_SCHEMA_V1, SUMMARY_SCHEMA)  # every version read
_REFUSAL_KIND = re.compile(r"[a-z][a-z_]{0,63}")
_ACCOUNT_DOMAIN = b"sealtrail.summary-account/1\n"
_KEY_ID_DOMAIN = b"sealtrail.summary-account-key/1\n"
_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEXES = re.compile(r"[0-9a-f]*")
_ENTRY_KEYS = frozenset({"accounts", "decision", "rules"})
_HEX64 = re.compile(r"[0-9a-f]{64}")
_OUTCOMES = ("ALLOW", "REVIEW", "HOLD", "BLOCK")


def normal_account(account: str) -> str:
    """An account as every keyed or hashed form of it sees it: its IBAN if valid, else upper
    case without spaces (the query index's ``account_key`` normalises the same way)."""
    return iban_or_none(account) or account.replace(" ", "").upper()


class AccountKeyer:
    """Keyed hashes of accounts under one 32-byte secret (remembered per account, bounded)."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) != 32:
            raise ValueError(f"an account secret is 32 bytes, not {len(secret)}")
        self._secret = secret
        self.key_id = hashlib.sha256(_KEY_ID_DOMAIN + secret).hexdigest()[:16]
        self._seen: dict[str, str] = {}

    def key(self, account: str) -> str:
        got = self._seen.get(account)
        if got is None:
            mac = hmac.new(self._secret, _ACCOUNT_DOMAIN + normal_account(account).encode(), hashlib.sha256)
            got = mac.hexdigest()[:32]
            if len(self._seen) >= 65536:
                self._seen.clear()
            self._seen[account] = got
        return got

    def keys(self, accounts: Iterable[str | None]) -> list[str]:
        """The sorted distinct keys of the accounts given (None and empty ones skipped)."""
        return sorted({self.key(a) for a in accounts if a})


def entries_jcs(decisions: Sequence[str], rules: Sequence[Jcs], accounts: Sequence[Sequence[str]]) -> Jcs:
    """The canonical ``decisions`` array: ``rules[i]`` is the canonical array of rule ids of
    decision ``i`` (made by ``ledger.jcs``), ``accounts[i]`` its sorted keys (hex)."""
    parts: list[bytes] = []
    for d, r, a in zip(decisions, rules, accounts, strict=True):
        if d not in _OUTCOMES:
            raise SummaryError(f"decision {d!r} is not one of {_OUTCOMES}")
        acc = ",".join(f'"{k}"' for k in a)
        parts.append(b'{"accounts":[' + acc.encode() + b'],"decision":"' + d.encode() + b'","rules":' + r
                     + b"}")
    return Jcs(b"[" + b",".join(parts) + b"]")


def refusal_entries(kinds: Sequence[str]) -> Jcs:
    """The canonical ``entries`` array of refusals of these kinds (one entry each)."""
    for k in kinds:
        if not _REFUSAL_KIND.fullmatch(k):
            raise SummaryError(f"refusal kind {k!r} is not a lower-case code")
    return Jcs(b"[" + b",".join(b'{"refusal":"' + k.encode() + b'"}' for k in kinds) + b"]")


def summary_body(key_id: str, entries: Jcs, prev: tuple[int, bytes] | None) -> Jcs:
    """The canonical summary body (version 2), given its canonical ``entries`` array (decision
    entries from ``entries_jcs``, or refusal entries from ``refusal_entries``) and the (seq, leaf
    hash) of the summary before it."""
    link = b"null" if prev is None else canonical_bytes({"leaf_hash": prev[1].hex(), "seq": prev[0]})
    return Jcs(b'{"account_key_id":"' + key_id.encode() + b'","entries":' + entries + b',"prev":' + link
               + b',"schema":"' + SUMMARY_SCHEMA.encode() + b'"}')


def tail(key_id: str, entries: Jcs,
         last: Callable[[Any], tuple[int, bytes] | None]) -> Callable[[Any, int], Record]:
    """The ledger ``tail`` that seals a summary of ``entries`` linked to the newest summary;
    ``last(conn)`` reads that one's (seq, leaf hash) under the sequencer lock."""
    def make(conn: Any, seq: int) -> Record:
        return Record.from_jcs(SUMMARY_KIND, summary_body(key_id, entries, last(conn)))
    return make


class SummaryEntry(NamedTuple):
    """A decision's entry, or (``refusal`` set: its kind) a refusal's, whose other fields are empty."""

    decision: str
    rules: tuple[str, ...]
    accounts: frozenset[str]
    refusal: str | None = None


@dataclass(frozen=True)
class Summary:
    """A parsed summary sealed at ``seq``: ``entries[i]`` speaks for seq ``first_seq + i``."""

    seq: int
    account_key_id: str
    entries: tuple[SummaryEntry, ...]
    prev: tuple[int, str] | None  # (seq, leaf hash hex) of the summary before, None for the first
    version: int = 1  # 2: its writer summarised refusals too

    @property
    def first_seq(self) -> int:
        return self.seq - len(self.entries)


def parse_summary(seq: int, body: object) -> Summary:
    """The summary sealed at ``seq`` with record body ``body`` (parsed JSON); ``SummaryError``
    naming what is wrong if it does not follow the schema."""
    where = f"summary at seq {seq}"
    if not isinstance(body, dict) or body.get("schema") not in SUMMARY_SCHEMAS:
        raise SummaryError(f"{where}: schema is not one of {', '.join(SUMMARY_SCHEMAS)}")
    version = SUMMARY_SCHEMAS.index(body["schema"]) + 1
    name = "decisions" if version == 1 else "entries"
    if set(body) != {"account_key_id", name, "prev", "schema"}:
        raise SummaryError(f"{where}: fields {sorted(body)} are not the schema's")
    kid = body["account_key_id"]
    if not isinstance(kid, str) or not _HEX16.fullmatch(kid):
        raise SummaryError(f"{where}: account_key_id is not 16 hex digits")
    raw = body[name]
    if not isinstance(raw, list) or len(raw) > seq:
        raise SummaryError(f"{where}: {name} is not a list of at most {seq} entries")
    entries: list[SummaryEntry] = []
    push, hexes, keys = entries.append, _HEXES.fullmatch, _ENTRY_KEYS
    for i, e in enumerate(raw):  # ~1 us an entry: a summary speaks for up to a batch of 1,024
        if version >= 2 and type(e) is dict and e.keys() == {"refusal"}:
            kind = e["refusal"]
            if type(kind) is not str or not _REFUSAL_KIND.fullmatch(kind):
                raise SummaryError(f"{where}: entry {i} (seq {seq - len(raw) + i}) is malformed")
            push(SummaryEntry("", (), frozenset(), kind))
            continue
        try:
            rules, accounts = e["rules"], e["accounts"]
            ok = (type(e) is dict and e.keys() == keys and e["decision"] in _OUTCOMES
                  and type(rules) is list and all(type(r) is str for r in rules)
                  and type(accounts) is list and all(type(a) is str and len(a) == 32 for a in accounts)
                  and hexes("".join(accounts)) is not None)
        except (TypeError, KeyError):
            ok = False
        if not ok:
            raise SummaryError(f"{where}: entry {i} (seq {seq - len(raw) + i}) is malformed")
        push(SummaryEntry(e["decision"], tuple(rules), frozenset(accounts)))
    prev = body["prev"]
    link: tuple[int, str] | None = None
    if prev is not None:
        if (not isinstance(prev, dict) or set(prev) != {"leaf_hash", "seq"}
                or not isinstance(prev["seq"], int) or isinstance(prev["seq"], bool)
                or not 0 < prev["seq"] < seq - len(raw)
                or not isinstance(prev["leaf_hash"], str) or not _HEX64.fullmatch(prev["leaf_hash"])):
            raise SummaryError(f"{where}: prev is not {{leaf_hash, seq}} of an earlier entry")
        link = (prev["seq"], prev["leaf_hash"])
    return Summary(seq, kid, tuple(entries), link, version)


def entry_matches(entry: SummaryEntry, *, decision: str | None, rule: str | None,
                  account_key: str | None) -> bool:
    """Whether a summarised decision passes a bundle's filters other than time (all given must
    hold): ``account_key`` is the filter account keyed under the summary's own secret. A
    refusal's entry is no decision: it passes none."""
    return (entry.refusal is None
            and (decision is None or entry.decision == decision)
            and (rule is None or rule in entry.rules)
            and (account_key is None or account_key in entry.accounts))
