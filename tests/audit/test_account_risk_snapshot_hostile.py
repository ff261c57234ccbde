"""Hostile tests of sealed account-risk snapshots: whatever lies beside the velocity snapshot and
whatever ``state.account-risk`` records the ledger holds, a start ends with the account risk a
rebuild of the whole log gives (or, where it trusted a sealed snapshot the log does not give,
``ledger verify --state-roots`` names that snapshot), and bad input is a logged fallback, never a
crash at start."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.decide.account_risk import AccountRisk, AccountRiskPolicy, SideRisk
from audit.decide.account_secret import load_keyer
from audit.decide.runtime import Runtime
from audit.errors import DerivedRowError
from audit.query.risk_snapshot_check import check_risk_snapshots
from audit.query.verify import verify_index
from audit.state.replay import decision_pages
from audit.state.risk_snapshot import RestoredRisk, restore_account_risk, risk_file, seal_risk, write_risk
from audit.state.risk_snapshot_body import RISK_SNAPSHOT_KIND, RiskState
from audit.state.snapshot import chain_at_size
from ledger import database
from ledger.append import CheckpointPolicy
from ledger.jcs import canonical_bytes
from ledger.records import Record
from tests.audit.test_account_risk_snapshot import Every, _every, _kinds, _rebuilt, _stop, forge
from tests.audit.test_runtime import subs
from tests.audit.test_state_snapshot_restart import _crash
from tests.conftest import Db

ORIGIN = "test.sealtrail/log"  # every ledger ``settings`` makes has this origin
SHORT = AccountRiskPolicy(half_life_hours=2)  # sweeps drop what the default policy keeps
LOGGER = "audit.state.risk_snapshot"


def _with(s: Every, *, half_life: int | None = None, every: int = 0, snapshot: Path | None = None) -> Every:
    return Every(db=s.db, keys=s.keys, velocity_snapshot=snapshot, state_snapshot_every=every,
                 account_risk_half_life_hours=half_life)


def _restore(url: str, path: Path | None, policy: AccountRiskPolicy | None = None) -> RestoredRisk:
    """What a start restores from ``path`` (the runtime's own call, without the rest of a start)."""
    engine = database.open_engine(url)
    try:
        return restore_account_risk(path, engine, ORIGIN, policy or AccountRiskPolicy())
    finally:
        engine.dispose()


def _split(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    head, _, body = path.read_bytes().partition(b"\n")
    return orjson.loads(head), orjson.loads(body)


def _join(path: Path, head: dict[str, Any], body: dict[str, Any]) -> None:
    path.write_bytes(orjson.dumps(head) + b"\n" + orjson.dumps(body))


def _verify_findings(url: str) -> list[tuple[str, int, str]]:
    """``ledger verify --state-roots``: its findings (none: it passed)."""
    engine = database.open_engine(url)
    try:
        try:
            verify_index(engine, state_roots=True)
        except DerivedRowError as exc:
            return list(exc.findings)
        return []
    finally:
        engine.dispose()


def _decided(db: Db, tmp: Path, seed: int, n: int) -> Every:
    """A ledger where ``n`` decisions were sealed and the state sealed at a clean stop."""
    s = _every(db, tmp, every=0)
    rt = Runtime.open(s)
    rt.service.decide(subs(seed, n), timeout_s=60)
    rt.close()
    assert len(_kinds(s.db, RISK_SNAPSHOT_KIND)) == 1 and risk_file(s.velocity_snapshot_file).exists()
    return s


# --- the head's hint ---------------------------------------------------------------------------------

@pytest.mark.parametrize("hint", [2**63 - 1, 2**64 - 1])
def test_a_head_whose_sealed_seq_is_beyond_any_seq_never_crashes_the_start(
        db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture, hint: int) -> None:
    s = _decided(db, tmp_path, 71, 40)
    path = risk_file(s.velocity_snapshot_file)
    head, body = _split(path)
    head["sealed_seq"] = hint  # a JSON integer orjson reads as an int (up to 2**64 - 1)
    _join(path, head, body)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        rt = Runtime.open(s)  # the hint is only where to look first: past the ledger, it is not used
    try:
        assert rt.pipeline.account_risk.fingerprint() == _rebuilt(s.db)
    finally:
        _stop(rt)


def test_a_hint_at_a_forged_twin_or_at_nothing_neither_misleads_nor_blocks_the_start(
        db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = _every(db, tmp_path, every=0)
    rt = Runtime.open(s)
    rt.service.decide(subs(72, 60), timeout_s=60)
    covered = rt.pipeline.covered
    assert covered is not None
    true_state = RiskState.of(rt.pipeline.account_risk)
    policy = rt.pipeline.account_risk.policy
    twin = seal_risk(rt.ledger, forge(true_state), policy, covered, "forger/1/0000000a")
    rt.close()  # the true state, sealed for the same seq right after the forged twin
    twin_seq, true_seq = _kinds(s.db, RISK_SNAPSHOT_KIND)
    assert twin_seq == twin.seq
    path = risk_file(s.velocity_snapshot_file)
    head, body = _split(path)
    assert (head["covers_seq"], head["sealed_seq"]) == (twin.covers_seq, true_seq)
    want = _rebuilt(s.db)
    feature_seal = _kinds(s.db, "state.snapshot")[-1]
    assert twin_seq < feature_seal < true_seq
    for hint in (twin_seq, feature_seal, 10**12, 2**62):  # the twin, another kind, nothing at all
        _join(path, {**head, "sealed_seq": hint}, body)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            got = _restore(s.db, path)
        assert got.sealed is not None and got.sealed.seq == true_seq, hint  # found past the wrong hint
        assert got.state.fingerprint() == want, hint
        assert "not used" not in caplog.text
    _join(path, {**head, "sealed_seq": twin_seq}, body)
    resumed = Runtime.open(s)  # the whole start, pointed at the twin
    try:
        assert resumed.account_risk_snapshot is not None and resumed.account_risk_snapshot.seq == true_seq
        assert resumed.pipeline.account_risk.fingerprint() == want
    finally:
        _stop(resumed)
    (finding,) = _verify_findings(s.db)
    assert finding[:2] == (RISK_SNAPSHOT_KIND, twin_seq) and "root" in finding[2]


def test_a_start_that_trusts_a_forged_sealed_snapshot_is_named_by_ledger_verify(db: Db,
                                                                                  tmp_path: Path) -> None:
    """The start trusts what the ledger seals: a forged ``state.account-risk`` with the file of its
    state is what ``ledger verify --state-roots`` exists to name."""
    s = _every(db, tmp_path, every=0)
    rt = Runtime.open(s)
    rt.service.decide(subs(73, 60), timeout_s=60)
    covered = rt.pipeline.covered
    assert covered is not None
    forged = forge(RiskState.of(rt.pipeline.account_risk))
    bad = seal_risk(rt.ledger, forged, rt.pipeline.account_risk.policy, covered, "forger/1/0000000b")
    write_risk(risk_file(s.velocity_snapshot_file), rt.ledger.engine, ORIGIN, forged, bad)
    _stop(rt)
    resumed = Runtime.open(s)
    try:
        held = resumed.pipeline.account_risk.fingerprint()
        used = resumed.account_risk_snapshot
    finally:
        _stop(resumed)
    findings = _verify_findings(s.db)
    if held != _rebuilt(s.db):  # a start that differs from the log ...
        assert used is not None  # ... did so from a sealed snapshot ...
        assert (RISK_SNAPSHOT_KIND, used.seq) in [f[:2] for f in findings]  # ... that verify names
    assert [f[:2] for f in findings] == [(RISK_SNAPSHOT_KIND, bad.seq)]


# --- files that are not this ledger's ----------------------------------------------------------------

def test_a_file_of_another_ledger_of_the_same_origin_is_refused_whole_or_under_this_ledgers_head(
        db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ours = _decided(db, tmp_path / "ours", 74, 50)
    other_db = Db(f"sqlite:///{tmp_path / 'other.db'}", "sqlite")
    theirs = _decided(other_db, tmp_path / "theirs", 74, 50)  # the same payments, another secret
    assert _rebuilt(ours.db) != _rebuilt(theirs.db)  # accounts keyed under another secret
    mine, their_file = risk_file(ours.velocity_snapshot_file), risk_file(theirs.velocity_snapshot_file)
    my_head, my_body = _split(mine)
    their_head, their_body = _split(their_file)
    cases: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
        "their file": (their_head, their_body, "does not hold the history"),
        "their state under our head": (my_head, their_body, "not the state the ledger vouches for"),
        "their state, our key id": (my_head, {**their_body, "account_key_id": my_body["account_key_id"]},
                                    "not the state the ledger vouches for"),
        "our state, their key id": (my_head, {**my_body, "account_key_id": their_body["account_key_id"]},
                                    "keyed under"),
    }
    want = _rebuilt(ours.db)
    for name, (head, body, said) in cases.items():
        _join(mine, head, body)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            got = _restore(ours.db, mine)
        assert got.sealed is None and said in caplog.text, name
        assert got.state.fingerprint() == want, name
    _join(mine, their_head, their_body)
    resumed = Runtime.open(ours)
    try:
        assert resumed.account_risk_snapshot is None
        assert resumed.pipeline.account_risk.fingerprint() == want
    finally:
        _stop(resumed)


def test_a_copied_ledger_trusts_a_snapshot_of_the_shared_history_and_refuses_one_sealed_after_the_fork(
        sqlite_db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    a = _decided(sqlite_db, tmp_path / "a", 75, 40)
    shared = risk_file(a.velocity_snapshot_file).read_bytes()  # sealed before the copy
    copy_path = tmp_path / "copy.db"
    copy_path.touch(0o600)
    _copy(Path(sqlite_db.url.removeprefix("sqlite:///")), copy_path)
    b = Every(db=f"sqlite:///{copy_path}", keys=a.keys,
              velocity_snapshot=tmp_path / "b" / "velocity.snapshot", state_snapshot_every=0)
    rt = Runtime.open(b)  # the copy goes on with other payments (same origin, same keys)
    rt.service.decide(subs(76, 30), timeout_s=60)
    _crash(rt)
    rt = Runtime.open(a)  # and the original with others again, sealed at its stop
    rt.service.decide(subs(77, 30), timeout_s=60)
    rt.close()
    after_fork = risk_file(a.velocity_snapshot_file).read_bytes()
    mine = risk_file(b.velocity_snapshot_file)
    mine.parent.mkdir(parents=True, exist_ok=True)
    want = _rebuilt(b.db)
    mine.write_bytes(shared)
    got = _restore(b.db, mine)
    assert got.sealed is not None and got.report.applied == 30  # the shared history's seal, then the tail
    assert got.state.fingerprint() == want
    mine.write_bytes(after_fork)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        got = _restore(b.db, mine)
    assert got.sealed is None and "does not hold the history" in caplog.text
    assert got.state.fingerprint() == want


def _copy(src: Path, dst: Path) -> None:
    """SQLite's online backup (the ledger runs in WAL mode: a file copy may miss the log)."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()


def test_a_ledger_restored_from_a_backup_taken_before_the_seal_refuses_the_file(
        sqlite_db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The file names a seal the ledger no longer holds (what a seal that never committed leaves)."""
    s = _every(sqlite_db, tmp_path, every=0)
    rt = Runtime.open(s)
    rt.service.decide(subs(91, 50), timeout_s=60)
    live = Path(sqlite_db.url.removeprefix("sqlite:///"))
    backup = tmp_path / "backup.db"
    _copy(live, backup)  # the ledger as it was before the stop's seals
    rt.close()
    assert len(_kinds(s.db, RISK_SNAPSHOT_KIND)) == 1
    _copy(backup, live)  # and restored from that backup
    assert _kinds(s.db, RISK_SNAPSHOT_KIND) == []
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        resumed = Runtime.open(s)
    try:
        assert resumed.account_risk_snapshot is None and "not the state the ledger vouches for" in caplog.text
        assert resumed.pipeline.account_risk.fingerprint() == _rebuilt(s.db)
    finally:
        _stop(resumed)


# --- damaged and hostile files -----------------------------------------------------------------------

Change = Callable[[dict[str, Any], dict[str, Any]], bytes]


def _bytes(head: dict[str, Any], body: dict[str, Any]) -> bytes:
    return orjson.dumps(head) + b"\n" + orjson.dumps(body)


def _head(**kw: Any) -> Change:
    return lambda h, b: _bytes({**h, **kw}, b)


def _body(**kw: Any) -> Change:
    return lambda h, b: _bytes(h, {**b, **kw})


def _account(i: int, milli: Any = None, hour: Any = None) -> Change:
    def change(h: dict[str, Any], b: dict[str, Any]) -> bytes:
        rows = [list(r) for r in b["accounts"]]
        rows[i] = [rows[i][0], rows[i][1] if milli is None else milli(rows[i][1]),
                   rows[i][2] if hour is None else hour(rows[i][2])]
        return _bytes(h, {**b, "accounts": rows})
    return change


HOSTILE: dict[str, Change] = {
    "empty file": lambda h, b: b"",
    "head only": lambda h, b: orjson.dumps(h),
    "head and newline": lambda h, b: orjson.dumps(h) + b"\n",
    "head cut short": lambda h, b: orjson.dumps(h)[:40],
    "state cut short": lambda h, b: _bytes(h, b)[:-1],
    "state cut in half": lambda h, b: _bytes(h, b)[: len(orjson.dumps(h)) + len(orjson.dumps(b)) // 2],
    "trailing bytes": lambda h, b: _bytes(h, b) + b"\x00garbage",
    "a second state": lambda h, b: _bytes(h, b) + b"\n" + orjson.dumps(b),
    "not UTF-8": lambda h, b: _bytes(h, b).replace(b'"format"', b'"\xff\xfeformat"'),
    "head is a list": lambda h, b: orjson.dumps(list(h.values())) + b"\n" + orjson.dumps(b),
    "head without chain": lambda h, b: _bytes({k: v for k, v in h.items() if k != "chain"}, b),
    "head with one more field": _head(extra=1),
    "head of another schema": _head(schema="sealtrail.account-risk-file/2"),
    "origin not a string": _head(origin=17),
    "chain of nothing": _head(chain=None),
    "chain of another seq": _head(chain="00" * 32),
    "covers_seq negative": _head(covers_seq=-1),
    "covers_seq past the log": _head(covers_seq=10**9),
    "covers_seq huge": _head(covers_seq=2**64 - 1),
    "covers_seq past the log, sealed after it": _head(covers_seq=10**9, sealed_seq=10**9 + 1),
    "covers_seq and sealed_seq huge": _head(covers_seq=2**64 - 2, sealed_seq=2**64 - 1),
    "covers_seq beyond 64 bits (a float)": lambda h, b: _bytes(h, b).replace(
        b'"covers_seq":' + str(h["covers_seq"]).encode(), b'"covers_seq":' + b"9" * 30),
    "covers_seq true": _head(covers_seq=True),
    "sealed_seq at covers_seq": lambda h, b: _bytes({**h, "sealed_seq": h["covers_seq"]}, b),
    "sealed_seq negative": _head(sealed_seq=-5),
    "sealed_seq a string": _head(sealed_seq="12"),
    "covers_seq one less": lambda h, b: _bytes({**h, "covers_seq": h["covers_seq"] - 1}, b),
    "state of another format": _body(format="sealtrail.account-risk-state/2"),
    "state without hour": lambda h, b: _bytes(h, {k: v for k, v in b.items() if k != "hour"}),
    "key id changed": _body(account_key_id="0" * 16),
    "key id null": _body(account_key_id=None),
    "hour negative": _body(hour=-7),
    "hour huge": _body(hour=2**64 - 1),
    "hour a float": _body(hour=1.0e5),
    "swept_day moved": lambda h, b: _bytes(h, {**b, "swept_day": b["swept_day"] - 1}),
    "applied one more": lambda h, b: _bytes(h, {**b, "applied": b["applied"] + 1}),
    "applied huge": _body(applied=2**64 - 1),
    "applied negative": _body(applied=-1),
    "an account's milli huge": _account(0, milli=lambda m: 2**64 - 1),
    "an account's milli negative": _account(0, milli=lambda m: -m),
    "an account's hour negative": _account(0, hour=lambda h: -h),
    "an account's hour huge": _account(0, hour=lambda h: 2**63),
    "an account's milli a float": _account(0, milli=lambda m: m + 0.5),
    "an account dropped": lambda h, b: _bytes(h, {**b, "accounts": b["accounts"][1:]}),
    "an account added": lambda h, b: _bytes(h, {**b, "accounts": [["0" * 32, 1, b["hour"]], *b["accounts"]]}),
    "accounts reversed": lambda h, b: _bytes(h, {**b, "accounts": b["accounts"][::-1]}),
    "accounts none": _body(accounts=[]),
    "accounts not a list": _body(accounts={}),
}


def test_every_damaged_or_hostile_file_is_a_logged_fallback_to_the_whole_log(
        db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = _decided(db, tmp_path, 78, 80)
    path = risk_file(s.velocity_snapshot_file)
    head, body = _split(path)
    assert len(body["accounts"]) > 2 and body["swept_day"] is not None and body["applied"] == 80
    want = _rebuilt(s.db)
    engine = database.open_engine(s.db)
    try:  # a head naming an earlier seq of this history with its chain: no seal of that seq has this root
        at = head["covers_seq"] - 2
        earlier = {"covers_seq": at, "chain": chain_at_size(engine, at + 1)}
    finally:
        engine.dispose()
    cases = {**HOSTILE, "an earlier seq with its chain": _head(**earlier)}
    wrong: list[str] = []
    for name, change in cases.items():
        path.write_bytes(change(head, body))
        caplog.clear()
        try:
            with caplog.at_level(logging.WARNING, logger=LOGGER):
                got = _restore(s.db, path)
        except Exception as exc:  # every crash is a finding, named below
            wrong.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if got.sealed is not None or got.report.applied != 80:
            wrong.append(f"{name}: started from the file")
        elif got.state.fingerprint() != want:
            wrong.append(f"{name}: a state the log does not give")
        elif f"account-risk snapshot {path} not used" not in caplog.text:
            wrong.append(f"{name}: no warning")
    assert wrong == []
    _join(path, head, body)  # as written: used, and the same state
    got = _restore(s.db, path)
    assert got.sealed is not None and got.report.applied == 0 and got.state.fingerprint() == want
    path.write_bytes(_bytes(head, body) + b"\n\t ")  # whitespace after the state is still the state
    got = _restore(s.db, path)
    assert got.state.fingerprint() == want


def test_an_unreadable_file_is_refused_naming_it_or_skipped_never_a_silent_other_state(
        db: Db, tmp_path: Path) -> None:
    s = _decided(db, tmp_path, 79, 30)
    path = risk_file(s.velocity_snapshot_file)
    path.unlink()
    path.mkdir()  # what is there cannot be read as a file
    try:
        got = _restore(s.db, path)
    except OSError as exc:
        assert str(path) in str(exc)  # a clear error naming the file
    else:
        assert got.sealed is None and got.state.fingerprint() == _rebuilt(s.db)


def test_either_file_alone_gives_the_state_of_the_whole_log(db: Db, tmp_path: Path) -> None:
    s = _decided(db, tmp_path, 80, 60)
    velocity, risk = s.velocity_snapshot_file, risk_file(s.velocity_snapshot_file)
    kept = velocity.read_bytes(), risk.read_bytes()
    want = _rebuilt(s.db)
    velocity.unlink()  # the account-risk file without the velocity snapshot
    rt = Runtime.open(s)
    try:
        assert not rt.velocity_from_snapshot
        assert rt.account_risk_snapshot is not None and rt.account_risk is not None
        assert rt.account_risk.applied == 0 and rt.pipeline.account_risk.fingerprint() == want
    finally:
        _stop(rt)
    velocity.write_bytes(kept[0])
    risk.unlink()  # the velocity snapshot without the account-risk file
    rt = Runtime.open(s)
    try:
        assert rt.velocity_from_snapshot
        assert rt.account_risk_snapshot is None and rt.account_risk is not None
        assert rt.account_risk.applied == 60 and rt.pipeline.account_risk.fingerprint() == want
        rt.service.decide(subs(92, 25), timeout_s=60)
    finally:
        rt.close()  # sealed again, and both files written
    assert risk.stat().st_mode & 0o077 == 0  # keyed accounts and their risk: the owner's alone
    risk.write_bytes(kept[1])  # the older file: killed between the seal and its write
    rt = Runtime.open(s)
    try:
        assert rt.account_risk_snapshot is not None and rt.account_risk is not None
        assert rt.account_risk.applied == 25  # a longer catch-up ...
        assert rt.pipeline.account_risk.fingerprint() == _rebuilt(s.db)  # ... never another state
    finally:
        _stop(rt)


def test_the_empty_state_sealed_on_a_fresh_ledger_is_a_start_like_any_other(db: Db, tmp_path: Path) -> None:
    s = _every(db, tmp_path, every=0)
    Runtime.open(s).close()  # nothing decided: the empty state (no key id, no hour) sealed
    (empty,) = _kinds(s.db, RISK_SNAPSHOT_KIND)
    body = _split(risk_file(s.velocity_snapshot_file))[1]
    assert (body["account_key_id"], body["hour"], body["accounts"], body["applied"]) == (None, None, [], 0)
    rt = Runtime.open(s)
    try:
        assert rt.account_risk_snapshot is not None and rt.account_risk_snapshot.seq == empty
        rt.service.decide(subs(93, 40), timeout_s=60)
    finally:
        _crash(rt)
    rt = Runtime.open(s)
    try:
        assert rt.account_risk_snapshot is not None and rt.account_risk_snapshot.seq == empty
        assert rt.account_risk is not None and rt.account_risk.applied == 40
        assert rt.pipeline.account_risk.fingerprint() == _rebuilt(s.db)
    finally:
        _stop(rt)
    assert _verify_findings(s.db) == []


# --- other deciders, other policies ------------------------------------------------------------------

def test_a_restart_applies_another_deciders_decisions_sealed_under_another_policy(
        db: Db, tmp_path: Path) -> None:
    s = _every(db, tmp_path, every=0)
    mine = _with(s)
    theirs = _with(s, half_life=SHORT.half_life_hours, snapshot=tmp_path / "theirs" / "velocity.snapshot")
    rt = Runtime.open(mine)
    rt.service.decide(subs(81, 60), timeout_s=60)
    rt.close()
    other = Runtime.open(theirs)  # another process, another policy, the same log
    other.service.decide(subs(82, 60), timeout_s=60)
    other.close()
    assert _rebuilt(s.db) != _rebuilt(s.db, SHORT)  # the policy's sweeps hold other accounts
    rt = Runtime.open(mine)
    try:
        assert rt.account_risk_snapshot is not None and rt.account_risk is not None
        assert rt.account_risk.applied == 60  # theirs, after our seal
        assert rt.pipeline.account_risk.fingerprint() == _rebuilt(s.db)
        rt.service.decide(subs(83, 20), timeout_s=60)
    finally:
        rt.close()
    other = Runtime.open(theirs)
    try:
        assert other.account_risk_snapshot is not None and other.account_risk is not None
        assert other.account_risk.applied == 20  # ours, after their seal
        assert other.pipeline.account_risk.fingerprint() == _rebuilt(s.db, SHORT)
    finally:
        other.close()
    assert len(_kinds(s.db, RISK_SNAPSHOT_KIND)) == 4
    engine = database.open_engine(s.db)
    try:
        derived = verify_index(engine, state_roots=True)  # both policies' seals are the log's
        assert (derived.account_risk_snapshots, derived.account_risk_roots_recomputed) == (4, 4)
    finally:
        engine.dispose()


def test_a_policy_change_and_back_never_starts_from_the_other_policys_snapshot(
        db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = _every(db, tmp_path, every=0)
    default, short = _with(s), _with(s, half_life=SHORT.half_life_hours)
    rt = Runtime.open(default)
    rt.service.decide(subs(84, 60), timeout_s=60)
    rt.close()
    (first,) = _kinds(s.db, RISK_SNAPSHOT_KIND)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        rt = Runtime.open(short)  # the policy changed: the file is not this policy's
    assert rt.account_risk_snapshot is None and "policy" in caplog.text
    assert rt.pipeline.account_risk.fingerprint() == _rebuilt(s.db, SHORT)
    rt.service.decide(subs(85, 30), timeout_s=60)
    _crash(rt)  # killed: the default policy's file is still there
    rt = Runtime.open(default)  # and back: the file of the default policy, the tail under the short one
    try:
        assert rt.account_risk_snapshot is not None and rt.account_risk_snapshot.seq == first
        assert rt.account_risk is not None and rt.account_risk.applied == 30
        assert rt.pipeline.account_risk.fingerprint() == _rebuilt(s.db)
    finally:
        _stop(rt)
    rt = Runtime.open(short)
    assert rt.account_risk_snapshot is None
    rt.close()  # the short policy's state sealed, its file written over the default's
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        rt = Runtime.open(default)
    try:
        assert rt.account_risk_snapshot is None and "policy" in caplog.text
        assert rt.pipeline.account_risk.fingerprint() == _rebuilt(s.db)
    finally:
        _stop(rt)
    assert _verify_findings(s.db) == []


# --- records of the log ------------------------------------------------------------------------------

def _odd_decisions(engine: Any, tag: int) -> list[Record]:
    """Of the last decision sealed: a version 1 copy (no account risk), one whose account risk
    states other values than the state gives (self-consistent), and one whose account risk cannot
    be read. Sealed without their payload."""
    last: dict[str, Any] | None = None
    for page in decision_pages(engine, 0):
        for _, env in page:
            last = env["record"]
    assert last is not None
    v1 = {k: v for k, v in last.items() if k != "account_risk"}
    v1["schema"] = "sealtrail.decision/1"
    risk = AccountRisk.from_json(last["account_risk"])
    o = risk.originator
    assert o is not None
    side = SideRisk(o.account, o.before_milli + 7 * tag, o.after_milli + 7 * tag)
    shifted = AccountRisk(risk.policy, risk.account_key_id, risk.points_milli, side, risk.beneficiary)
    forged = {**last, "account_risk": shifted.to_json()}
    unreadable = {**last, "account_risk": {"policy": risk.policy.to_json(), "alerts": "all"}}
    return [Record("decision", body) for body in (v1, forged, unreadable)]


def test_version_1_forged_and_unreadable_decisions_around_the_seal_give_the_state_of_the_whole_log(
        db: Db, tmp_path: Path) -> None:
    s = _every(db, tmp_path, every=0)
    rt = Runtime.open(s)
    rt.service.decide(subs(86, 40), timeout_s=60)
    rt.ledger.append_many(_odd_decisions(rt.ledger.engine, 1))  # before the seal: the live state catches up
    rt.service.decide(subs(87, 20), timeout_s=60)
    live = rt.pipeline.account_risk.fingerprint()
    rt.close()
    assert live == _rebuilt(s.db)  # what was sealed is the log's
    engine = database.open_engine(s.db)
    try:
        ledger = database.open_ledger(engine, s.key_file, CheckpointPolicy(1000, 60.0))
        ledger.append_many(_odd_decisions(engine, 2))  # and after it, by another writer
    finally:
        engine.dispose()
    want = _rebuilt(s.db)
    assert want != live  # the readable one after the seal counts
    got = _restore(s.db, risk_file(s.velocity_snapshot_file))
    assert got.sealed is not None
    r = got.report
    assert (r.applied, r.without_risk, r.unreadable, r.mismatched) == (1, 1, 1, 1)
    assert got.state.fingerprint() == want
    resumed = Runtime.open(s)
    try:
        assert resumed.account_risk_snapshot is not None
        assert resumed.pipeline.account_risk.fingerprint() == want
    finally:
        _stop(resumed)
    found: list[tuple[str, int, str]] = []
    engine = database.open_engine(s.db)
    try:
        kid = load_keyer(engine).key_id
        done = check_risk_snapshots(engine, kid, lambda t, q, w: found.append((t, q, w)), roots=True)
    finally:
        engine.dispose()
    assert found == [] and (done.snapshots, done.recomputed) == (1, 1)


def _bad_risk_records(good: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        "another schema": {**good, "schema": "sealtrail.account-risk-snapshot/9"},
        "no root": {k: v for k, v in good.items() if k != "root"},
        "covers a later seq": {**good, "covers_seq": 10**12},
        "covers a negative seq": {**good, "covers_seq": -1},
        "root of capitals": {**good, "root": good["root"].upper()},
        "a policy in text": {**good, "policy": {**good["policy"], "half_life_hours": "336"}},
        "a policy of no decay": {**good, "policy": {**good["policy"], "half_life_hours": 0}},
        "a policy of another id": {**good, "policy": {**good["policy"], "id": "sealtrail.account-risk/2"}},
        "accounts as text": {**good, "accounts": str(good["accounts"])},
        "hour a float": {**good, "hour": 1.5},
        "decider with a space": {**good, "decider": "a b"},
        "record not a snapshot at all": {"hello": "world"},
    }


def test_ledger_verify_names_every_malformed_account_risk_record_and_a_start_passes_them_over(
        db: Db, tmp_path: Path) -> None:
    s = _decided(db, tmp_path, 88, 40)
    (true_seq,) = _kinds(s.db, RISK_SNAPSHOT_KIND)
    engine = database.open_engine(s.db)
    try:
        with engine.connect() as conn:
            (raw,) = conn.exec_driver_sql(f"SELECT record FROM ledger_entries WHERE seq = {true_seq}").one()
        good = orjson.loads(raw)["record"]
        ledger = database.open_ledger(engine, s.key_file, CheckpointPolicy(1000, 60.0))
        bad = _bad_risk_records(good)
        receipts = ledger.append_many([Record.from_jcs(RISK_SNAPSHOT_KIND, canonical_bytes(b))
                                       for b in bad.values()])
    finally:
        engine.dispose()
    seqs = [r.seq for r in receipts]
    for roots in (False, True):
        engine = database.open_engine(s.db)
        try:
            with pytest.raises(DerivedRowError) as got:
                verify_index(engine, state_roots=roots)
        finally:
            engine.dispose()
        named = [f[1] for f in got.value.findings if f[0] == RISK_SNAPSHOT_KIND]
        assert named == seqs, roots  # each malformed one, once; never the true one
        assert all("does not parse" in f[2] for f in got.value.findings if f[0] == RISK_SNAPSHOT_KIND)
    path = risk_file(s.velocity_snapshot_file)
    head, body = _split(path)
    _join(path, {**head, "sealed_seq": seqs[0]}, body)  # the hint at a malformed one
    want = _rebuilt(s.db)
    rt = Runtime.open(s)
    try:
        assert rt.account_risk_snapshot is not None and rt.account_risk_snapshot.seq == true_seq
        assert rt.pipeline.account_risk.fingerprint() == want
    finally:
        _stop(rt)


# --- deciders at once --------------------------------------------------------------------------------

@dataclass
class _Run:
    rt: Runtime[Every]
    work: list[Any]
    error: BaseException | None = None

    def decide(self) -> None:
        try:
            for i in range(0, len(self.work), 5):
                self.rt.service.decide(self.work[i:i + 5], timeout_s=60)
        except BaseException as exc:  # reported by the test
            self.error = exc


def test_seals_taken_while_another_decider_commits_are_each_the_logs_state(db: Db, tmp_path: Path) -> None:
    s = _every(db, tmp_path, every=15)
    theirs = _with(s, every=15, snapshot=tmp_path / "b" / "velocity.snapshot")
    a, b = _Run(Runtime.open(s), subs(89, 150)), _Run(Runtime.open(theirs), subs(90, 150))
    threads = [threading.Thread(target=r.decide) for r in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert a.error is None and b.error is None
    assert a.rt.pipeline.caught_up > 0 and b.rt.pipeline.caught_up > 0  # each applied the other's commits
    _crash(a.rt)  # killed: its last periodic seal is its file
    time.sleep(0.3)  # b, idle, catches up with what a sealed last ...
    b.rt.close()  # ... and seals that state at its stop
    deciders = set()
    engine = database.open_engine(s.db)
    try:
        for page in decision_pages(engine, 0, None, RISK_SNAPSHOT_KIND):
            deciders |= {env["record"]["decider"] for _, env in page}
    finally:
        engine.dispose()
    assert len(deciders) == 2  # both sealed account risk while the other committed
    assert _verify_findings(s.db) == []  # every seal is the log's state
    want = _rebuilt(s.db)
    for settings_ in (s, theirs):
        rt = Runtime.open(settings_)
        try:
            assert rt.account_risk_snapshot is not None
            assert rt.pipeline.account_risk.fingerprint() == want
        finally:
            _stop(rt)


def test_a_twin_of_the_true_root_under_another_policy_neither_hides_it_nor_forces_a_rebuild(
        db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A ``state.account-risk`` of the very state (same seq, same root) claiming another policy is
    sealed before the true one: a start passes over it to the claim that fits, wherever the head's
    hint points, instead of refusing the file and rebuilding the whole log."""
    s = _every(db, tmp_path, every=0)
    rt = Runtime.open(s)
    rt.service.decide(subs(74, 60), timeout_s=60)
    covered = rt.pipeline.covered
    assert covered is not None
    twin = seal_risk(rt.ledger, RiskState.of(rt.pipeline.account_risk), SHORT, covered, "forger/1/0000000b")
    rt.close()
    twin_seq, true_seq = _kinds(s.db, RISK_SNAPSHOT_KIND)
    assert twin_seq == twin.seq < true_seq
    path = risk_file(s.velocity_snapshot_file)
    head, body = _split(path)
    assert head["covers_seq"] == twin.covers_seq
    want = _rebuilt(s.db)
    for hint in (twin_seq, true_seq, 10**12):
        _join(path, {**head, "sealed_seq": hint}, body)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            got = _restore(s.db, path)
        assert got.sealed is not None and got.sealed.seq == true_seq, hint
        assert got.state.fingerprint() == want, hint
        assert "not used" not in caplog.text, hint
    (finding,) = _verify_findings(s.db)  # the twin's root is not what its policy's rebuild gives
    assert finding[:2] == (RISK_SNAPSHOT_KIND, twin_seq)
