"""Hostile cases for the decision state on disk: the velocity snapshot names no account in clear
(an erasure order must not leave a copy behind), an old clear snapshot is converted rather than
trusted or crashed on, and a snapshot under another key than the ledger's state key is rebuilt
from the ledger, never trusted."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import orjson
import pytest
from sqlalchemy import inspect, text

from audit.decide.account_secret import load_state_key
from audit.decide.runtime import Runtime
from audit.decide.types import Submission
from audit.state import snapshot as velocity_snapshot
from audit.state.replay import replay_decisions
from audit.state.snapshot import KEY_FILE_NAME
from inference.features import FeatureExtractor
from inference.schema import FEATURE_NAMES
from inference.state_store import features_state_bytes, read_features_state
from inference.velocity import VelocityState, key_id
from ledger import database
from tests.audit.test_runtime import Settings, features_next, settings, subs
from tests.conftest import Db

PAYLOADS = "ledger_payloads"


def identifiers(batch: list[Submission]) -> set[str]:
    """Every account identifier the batch names (IBANs and account numbers, both parties)."""
    out: set[str] = set()
    for s in batch:
        for party in (s.transaction.originator, s.transaction.beneficiary):
            out.update(v for v in (party.iban, party.account) if v and len(v) >= 8)
    return out


def clear_in_files(folder: Path, names: set[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = f.read_bytes()
        hits = [n for n in names if n.encode() in data]
        if hits:
            found[f.name] = hits
    return found


def clear_in_tables(url: str, names: set[str]) -> dict[str, list[str]]:
    """Identifiers found in any table but the payload store (which erasure empties)."""
    engine = database.open_engine(url)
    found: dict[str, list[str]] = {}
    try:
        with engine.connect() as conn:
            for table in inspect(conn).get_table_names():
                if table == PAYLOADS:
                    continue
                dump = repr(conn.execute(text(f'SELECT * FROM "{table}"')).all())
                hits = [n for n in names if n in dump]
                if hits:
                    found[table] = hits
    finally:
        engine.dispose()
    return found


def probe_equal(s: Settings, tmp: Path, probe: list[Submission]) -> Runtime[Settings]:
    """Open ``s`` (from its snapshot) beside a process replaying the ledger from scratch; the
    probe's feature rows must be the same. Returns the runtime opened from ``s``, still open."""
    resumed = Runtime.open(s)
    fresh = Runtime.open(Settings(db=s.db, keys=s.keys, velocity_snapshot=tmp / "replay-only" / "none"))
    try:
        a, b = features_next(resumed, probe), features_next(fresh, probe)
        np.testing.assert_array_equal(a, b)
        assert np.nanmax(a[:, FEATURE_NAMES.index("orig_count_7d")]) > 1  # the probe's accounts have history
    finally:
        fresh.close()
    return resumed


def test_the_snapshot_names_no_account_in_clear_and_restarts_to_the_same_features(db: Db,
                                                                                  tmp_path: Path) -> None:
    s = settings(db, tmp_path)
    batch, probe = subs(41, 300), subs(41, 300)[:40]
    names = identifiers(batch)
    assert len(names) > 50
    rt = Runtime.open(s)
    try:
        rt.service.decide(batch, timeout_s=60)
    finally:
        rt.close()
    assert clear_in_files(s.keys, names) == {}  # signing key, snapshot: no account
    head = orjson.loads(s.velocity_snapshot_file.read_bytes().partition(b"\n")[0])
    assert head["schema"] == "sealtrail.velocity-snapshot/4"
    assert not (s.keys / KEY_FILE_NAME).exists()  # keyed under the ledger's state key: no key file
    assert clear_in_tables(s.db, names) == {}  # outside the payload store, none either
    resumed = probe_equal(s, tmp_path, probe)
    try:
        assert resumed.velocity_from_snapshot and resumed.replay.replayed == 0
        assert not any(n.encode() in resumed.pipeline.extractor.state.snapshot() for n in names)
        assert not any(n.encode() in resumed.pipeline.extractor.graph.state_bytes() for n in names)
    finally:
        resumed.close()
    assert clear_in_files(s.keys, names) == {}  # saved again at the stop: still keyed


def test_a_snapshot_written_in_clear_is_deleted_at_once_and_the_state_replayed(
        db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = settings(db, tmp_path)
    batch, probe = subs(42, 300), subs(42, 300)[:40]
    names = identifiers(batch)
    rt = Runtime.open(s)
    try:
        rt.service.decide(batch, timeout_s=60)
    finally:
        rt.close()
    # the file as a release before keyed snapshots wrote it: the same head, accounts in clear
    head = orjson.loads(s.velocity_snapshot_file.read_bytes().partition(b"\n")[0])
    clear = FeatureExtractor()
    replay_decisions(database.open_engine(s.db), clear, 0)
    s.velocity_snapshot_file.write_bytes(orjson.dumps({**head, "schema": "sealtrail.velocity-snapshot/1"})
                                         + b"\n" + clear.state.snapshot())
    assert clear_in_files(s.keys, names)  # the old file does name them
    with caplog.at_level(logging.WARNING, logger="audit.state.snapshot"):
        resumed = probe_equal(s, tmp_path, probe)
    try:  # it holds no transaction graph: the state is replayed, the same features all the same
        assert not resumed.velocity_from_snapshot and resumed.replay.replayed == 300
        assert "held accounts in clear: deleted" in caplog.text
        assert clear_in_files(s.keys, names) == {}  # deleted at the start, not only at the next stop
    finally:
        resumed.close()


@pytest.mark.parametrize("under", ["an earlier release's velocity.key", "another ledger's state key"])
def test_a_snapshot_under_another_key_than_the_ledgers_is_rebuilt_never_trusted(
        db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture, under: str) -> None:
    s = settings(db, tmp_path)
    batch, probe = subs(43, 200), subs(43, 200)[:40]
    rt = Runtime.open(s)
    try:
        rt.service.decide(batch, timeout_s=60)
    finally:
        rt.close()
    engine = database.open_engine(s.db)
    old_file = s.keys / KEY_FILE_NAME
    other = velocity_snapshot.load_key(old_file) if under.endswith("velocity.key") else bytes(32)
    assert other != load_state_key(engine)
    foreign = FeatureExtractor(state=VelocityState(other))
    replay_decisions(engine, foreign, 0)
    line = s.velocity_snapshot_file.read_bytes().partition(b"\n")[0]
    s.velocity_snapshot_file.write_bytes(line + b"\n" + features_state_bytes(foreign))
    with caplog.at_level(logging.WARNING):
        resumed = probe_equal(s, tmp_path, probe)  # never a crash, and the same features
    try:
        assert not resumed.velocity_from_snapshot and resumed.replay.replayed == len(batch)
        assert resumed.replay.from_deltas == len(batch)
        assert "hashed under key" in caplog.text
    finally:
        resumed.close()
    saved = s.velocity_snapshot_file.read_bytes().partition(b"\n")[2]  # saved again at the stop, keyed right
    assert read_features_state(saved, load_state_key(engine))[0].key_id == key_id(load_state_key(engine))
