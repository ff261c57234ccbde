"""Idempotency keys: a payment submitted again returns the decision it already has.

A submission's key is the caller's (HTTP ``Idempotency-Key``), else derived from the message:
its UETR, else its own reference (MT ``:20:``, ISO 20022 ``EndToEndId``; never ``NOTPROVIDED``).
Keys are per principal (the certificate fingerprint the record seals). The record of a keyed
decision seals ``idempotency.key_sha256`` (``audit.decide.record.IdempotencyKey``), and the table
``audit_idempotency_keys`` holds, per (principal, key), the seq and transaction SHA-256 of the
first decision sealed under it: a derived table, checked against the records by ``ledger verify``.

``decide_keyed`` looks the keys up before a batch is prepared, so a repeated payment is normally
answered from the ledger (``Decision.replayed``) without touching the velocity windows; a key
already decided on *different* content is decided again, its record saying so (``finding``:
"idempotency key reused with different content: first decided at seq N"), never merged. The
same check runs again inside the sealing transaction, under the sequencer lock (``with_keys``,
the pipeline's ``alongside`` effect): if another writer sealed the key since the lookup, the
commit is refused (``audit.errors.IdempotencyRaceError``: nothing written; the pipeline takes
back what the batch added to the windows, as after any failed commit) and ``decide_keyed``
looks again.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

import orjson
from sqlalchemy.exc import DBAPIError

from audit.decide.account_risk import AccountRisk
from audit.decide.explanation import Explanation
from audit.decide.record import IdempotencyKey, RuleHit, body_score, states_explanation
from audit.decide.types import Decision, Submission
from audit.errors import DerivedRowError, IdempotencyRaceError
from ledger import LedgerUnavailableError, Receipt
from ledger.store import param

if TYPE_CHECKING:  # the offline verifier imports no database code through this module
    from sqlalchemy import Connection, Engine

    from inference.messages import Transaction

__all__ = ["HEADER_KEY", "TABLE", "decide_keyed", "derived_key", "header_key", "key_rows",
           "principal_fp", "with_keys"]

TABLE = "audit_idempotency_keys"
COLUMNS = ("principal_fp", "key_sha256", "seq", "request_sha256")
HEADER_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # visible ASCII, as the IETF draft's examples
_CHUNK = 500  # keys per IN (...) lookup
_RACE_TRIES = 5
_TRANSACTION_V1 = "sealtrail.transaction/1"

Effect = Callable[["Connection", list[Receipt]], None]


def _key(source: str, value: str) -> IdempotencyKey:
    return IdempotencyKey(hashlib.sha256(f"{source}:{value}".encode()).hexdigest(), source)


def derived_key(tx: Transaction) -> IdempotencyKey | None:
    """The key of a parsed message: its UETR, else its reference; None where it has neither."""
    if tx.uetr:
        return _key("uetr", tx.uetr.strip().lower())
    ref = tx.reference.strip()
    if ref and ref.upper() != "NOTPROVIDED":
        return _key("reference", ref)
    return None


def header_key(value: str) -> IdempotencyKey:
    """The key a caller sent; ``ValueError`` unless 1 to 255 visible ASCII characters."""
    if not HEADER_KEY.fullmatch(value):
        raise ValueError("Idempotency-Key must be 1 to 255 visible ASCII characters")
    return _key("header", value)


def principal_fp(principal: dict[str, Any]) -> str:
    """Whose key: the principal's certificate fingerprint as sealed ('' for offline runs)."""
    fp = principal.get("fingerprint_sha256")
    return fp if isinstance(fp, str) else ""


_Pair = tuple[str, str]  # (principal_fp, key_sha256)


def key_rows(conn: Connection, pairs: Iterable[_Pair]) -> dict[_Pair, tuple[int, str]]:
    """The table's (seq, request SHA-256) for each of ``pairs`` that it holds: seeks on the
    primary key ``(principal_fp, key_sha256)``, one statement per principal and chunk of keys
    (a batch usually has one principal), never a scan of the table."""
    by_principal: dict[str, set[str]] = {}
    for fp, key in pairs:
        by_principal.setdefault(fp, set()).add(key)
    p = param(conn)
    out: dict[_Pair, tuple[int, str]] = {}
    for fp, wanted in by_principal.items():
        keys = sorted(wanted)
        for i in range(0, len(keys), _CHUNK):
            part = keys[i:i + _CHUNK]
            sql = (f"SELECT key_sha256, seq, request_sha256 FROM {TABLE} "
                   f"WHERE principal_fp = {p} AND key_sha256 IN ({', '.join([p] * len(part))})")
            for key, seq, req in conn.exec_driver_sql(sql, (fp, *part)):
                out[(fp, str(key))] = (int(seq), str(req))
    return out


def with_keys(subs: Sequence[Submission], effect: Effect | None) -> Effect | None:
    """``effect`` preceded by the key check and insert of ``subs`` (run under the sequencer lock,
    in the sealing transaction); ``effect`` itself where no submission has a key."""
    keyed = [(i, s, s.idempotency) for i, s in enumerate(subs) if s.idempotency is not None]
    if not keyed:
        return effect

    def run(conn: Connection, receipts: list[Receipt]) -> None:
        rows: list[tuple[str, str, int, str]] = []
        mine: set[_Pair] = set()
        looked: list[tuple[_Pair, IdempotencyKey]] = []  # keys decided before, on other content
        for i, s, k in keyed:
            pair = (principal_fp(s.principal), k.key_sha256)
            if k.first_seq is not None:
                looked.append((pair, k))
            elif pair in mine:
                got = key_rows(conn, [pair]).get(pair)
                _raced(k.key_sha256, receipts[i].seq if got is None else got[0])
            else:
                mine.add(pair)
                rows.append((pair[0], pair[1], receipts[i].seq, s.transaction.sha256))
        if looked:
            have = key_rows(conn, [pair for pair, _ in looked])
            for pair, k in looked:
                got = have.get(pair)
                if got is None or got[0] != k.first_seq:
                    raise IdempotencyRaceError(f"idempotency key {k.key_sha256[:16]} is not at seq "
                                               f"{k.first_seq} as looked up; nothing written")
        if rows:  # a key another writer sealed since the lookup is not written: the count says so
            p = param(conn)
            written = conn.exec_driver_sql(f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES "
                                           f"({p}, {p}, {p}, {p}) ON CONFLICT DO NOTHING", rows).rowcount
            if written != len(rows):
                ours = {(fp, key): seq for fp, key, seq, _ in rows}
                have = key_rows(conn, ours)
                others = sorted((got[0], pair[1]) for pair, got in have.items() if got[0] != ours[pair])
                if not others:  # every key holds this batch's seq: the driver's count was wrong
                    raise IdempotencyRaceError(f"{len(rows) - written} of the batch's idempotency keys were "
                                               "not written, yet none is taken by another; nothing written")
                _raced(others[0][1], others[0][0])
        if effect is not None:
            effect(conn, receipts)

    return run


def _raced(key_sha256: str, at: int) -> NoReturn:
    raise IdempotencyRaceError(f"idempotency key {key_sha256[:16]} was decided at seq {at} meanwhile; "
                               "nothing written")


def _same_content(stored_sha256: str, tx: Transaction) -> bool:
    """Whether ``tx`` is the content a key was first decided on. The table keeps the transaction
    hash of the version that decided it: a retry that spans an upgrade of the transaction format
    is compared in the first decision's version (``sealtrail.transaction/1``'s form of ``tx``)."""
    return stored_sha256 == tx.sha256 or stored_sha256 == tx.sha256_of(_TRANSACTION_V1)


def decided_at(conn: Connection, seqs: Iterable[int]) -> dict[int, Decision]:
    """The sealed decisions at ``seqs``, as answered again (``replayed``)."""
    wanted = sorted(set(seqs))
    out: dict[int, Decision] = {}
    p = param(conn)
    for i in range(0, len(wanted), _CHUNK):
        part = wanted[i:i + _CHUNK]
        sql = (f"SELECT seq, record, leaf_hash FROM ledger_entries WHERE kind = 'decision' "
               f"AND seq IN ({', '.join([p] * len(part))})")
        for seq, rec, leaf in conn.exec_driver_sql(sql, tuple(part)):
            env = orjson.loads(bytes(rec))
            body = env["record"]
            out[int(seq)] = Decision(
                env["trace_id"], int(seq), bytes(leaf).hex(), env["recorded_at"], body["decision"],
                body_score(body), tuple(RuleHit(h["id"], h["outcome"], h["reason"]) for h in body["fired"]),
                body["fail_safe"], {}, replayed=True,
                account_risk=AccountRisk.from_json(body["account_risk"]) if "account_risk" in body else None,
                explanation=Explanation.from_json(body.get("explanation"))
                if states_explanation(body) else None)  # versions 3 and 4
    missing = set(wanted) - set(out)
    if missing:  # a key row at a seq that holds no decision: the table was tampered with
        raise DerivedRowError(TABLE, min(missing), "a key row at a seq that holds no decision (forged?); "
                              "run ledger verify")
    return out


def decide_keyed(decide: Callable[[list[Submission]], list[Decision]], engine: Callable[[], Engine],
                 subs: Sequence[Submission]) -> list[Decision]:
    """``decide(subs)`` with every keyed submission whose payment was already decided answered
    from the ledger (``replayed``) instead, in order. Within ``subs``, a payment given twice is
    decided once; the same key on different content waits for a following round, then is
    decided with the finding. ``engine()`` is the ledger's, asked for only when a key is there;
    ``LedgerUnavailableError`` (nothing decided) if the lookup cannot reach the database."""
    if all(getattr(s, "idempotency", None) is None for s in subs):  # (test doubles may lack the field)
        return decide(list(subs))
    out: list[Decision | None] = [None] * len(subs)
    todo = list(range(len(subs)))
    races = 0
    while todo:
        pairs = {i: (principal_fp(subs[i].principal), k.key_sha256)
                 for i in todo if (k := subs[i].idempotency) is not None}
        try:
            with engine().connect() as conn:
                have = key_rows(conn, pairs.values()) if pairs else {}
                replay = {i: have[pairs[i]][0] for i in pairs if pairs[i] in have
                          and _same_content(have[pairs[i]][1], subs[i].transaction)}
                answered = decided_at(conn, replay.values()) if replay else {}
        except DBAPIError as exc:  # the database down or gone away: nothing decided, a 503 to retry
            raise LedgerUnavailableError(f"cannot look up idempotency keys: {exc.orig}") from exc
        now: list[int] = []
        batch: list[Submission] = []
        later: list[int] = []
        same: dict[int, int] = {}  # a repeat within this round -> the submission decided for it
        first: dict[_Pair, int] = {}
        for i in todo:
            s, k = subs[i], subs[i].idempotency
            if i in replay:
                out[i] = answered[replay[i]]
                continue
            if k is not None:
                pair = pairs[i]
                if pair in have:  # decided before, on other content: decided again, and says so
                    s = replace(s, idempotency=replace(k, first_seq=have[pair][0]))
                elif pair in first:
                    j = first[pair]
                    if subs[j].transaction.sha256 == s.transaction.sha256:
                        same[i] = j
                    else:
                        later.append(i)  # decided next round, against the seq this round seals
                    continue
                else:
                    first[pair] = i
                    s = replace(s, idempotency=replace(k, first_seq=None))
            now.append(i)
            batch.append(s)
        try:
            decided = decide(batch) if batch else []
        except IdempotencyRaceError:
            races += 1
            if races >= _RACE_TRIES:
                raise
            continue  # sealed by another writer meanwhile: look again
        for i, d in zip(now, decided, strict=True):
            out[i] = d
        for i, j in same.items():
            once = out[j]
            assert once is not None
            out[i] = replace(once, replayed=True)
        todo = later
    return [d for d in out if d is not None]
