"""``sealtrail keys rotate`` while servers decide: they pick the new key up without a restart.

The rotation is a ledger record endorsed by the old key, and the new key is installed in the key
file (the old one moves to ``keys/retired/``). A running process notices at its next commit that
the ledger's active key is no longer the one it holds, checks that the rotation records chain the
new key to its own, loads the new key from the key file and carries on: no failed request, and
never a signature by the retired key after its retirement is sealed. While the key store cannot
give it the ledger's key, a process answers 503 at once, without replaying its velocity windows
for every batch. A checkpoint held from before a rotation verifies after it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from typer.testing import CliRunner

from api import ops
from api.cli import app
from api.config import Settings
from audit.decide.principal import Principal
from audit.decide.runtime import open_runtime
from audit.decide.types import Submission
from inference.simulate import SimConfig, simulate
from ledger import KeyFileError, Record, database, store
from ledger.checkpoint import SignedCheckpoint
from ledger.keys import load_signer, rotate_key_file
from ledger.note import NoteVerifier, parse_note
from tests.api.server_proc import ServerProcess, prepare, start
from tests.api.test_crash_safety import messages
from tests.conftest import Db

JSON = {"content-type": "application/json"}
WAIT_S = 90.0


def sealtrail(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process, configured by its arguments only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEALTRAIL_")}
    return subprocess.run([sys.executable, "-m", "api.cli", *args], capture_output=True, text=True,
                          env=env, timeout=WAIT_S, check=False)


def signed_by(note: str) -> set[str]:
    """Key ids (hex) of the signature lines of a signed note."""
    return {s.key_id.hex() for s in parse_note(note)[1]}


def key_id(vkey: str) -> str:
    return NoteVerifier.from_vkey(vkey).key_id.hex()


# -- a checkpoint held from before a rotation, from the command line ------------------------------


def cli_json(*args: str, code: int = 0) -> Any:
    """``sealtrail ARGS --json`` in this process: the exit code checked, the JSON document back."""
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == code, res.output
    return json.loads(res.stdout)


def append(s: Settings, n: int) -> None:
    lg = ops.open_ledger(s)
    try:
        lg.append_many([Record("test.event", {"n": i}) for i in range(n)])
    finally:
        lg.engine.dispose()


def test_a_checkpoint_held_from_before_a_rotation_verifies_from_the_cli(db: Db, tmp_path: Path) -> None:
    s = Settings(db=db.url, keys=tmp_path / "keys")
    ops.initialise(s)
    where = ("--db", db.url, "--keys", str(s.keys))
    append(s, 5)
    held = tmp_path / "held.note"
    held.write_text(cli_json("ledger", "checkpoint", *where)["note"], encoding="utf-8")
    rotated = cli_json("keys", "rotate", *where)
    append(s, 5)
    # was: exit 1, "no signature by a trusted key" (unless the retired key was pinned by hand)
    doc = cli_json("ledger", "verify", *where, "--checkpoint", str(held))
    assert doc["keys"] == [rotated["old_vkey"], rotated["new_vkey"]]
    # the retired key (a copy from keys/retired/) signs the log's newest size: refused, even pinned
    latest = cli_json("ledger", "checkpoint", *where)["note"]
    assert SignedCheckpoint.parse_unverified(latest).checkpoint.size > rotated["seq"] + 1
    retired = load_signer(Path(rotated["retired_file"]))
    forged = tmp_path / "forged.note"
    forged.write_text(SignedCheckpoint.parse_unverified(latest).checkpoint.sign([retired]).note,
                      encoding="utf-8")
    doc = cli_json("ledger", "verify", *where, "--checkpoint", str(forged),
                   "--trusted-key", rotated["old_vkey"], code=1)
    assert doc["error"] == "forged checkpoint" and rotated["new_vkey"] in doc["message"]


# -- a key store that cannot give the ledger's key: fail fast, no replay per batch ----------------


def subs(seed: int, n: int) -> list[Submission]:
    principal = Principal.local("test").to_json()
    out = []
    for sim in simulate(SimConfig(seed=seed, n_normal=n, n_accounts=100, days=3))[:n]:
        (sub,) = Submission.parse(sim.transaction.canonical_bytes(), "json", principal, sim.at)
        assert isinstance(sub, Submission)
        out.append(sub)
    return out


def test_an_unusable_key_fails_fast_and_does_not_replay_the_windows(db: Db, tmp_path: Path) -> None:
    s = Settings(db=db.url, keys=tmp_path / "keys")
    ops.initialise(s)
    batches = [subs(seed, 20) for seed in range(51, 57)]
    rt = open_runtime(s)
    try:
        rt.decide(batches[0], timeout_s=60)
        # the ledger is rotated with a copy of the key file kept elsewhere: this key store never
        # gets the new key
        elsewhere = tmp_path / "elsewhere" / "signing.key"
        elsewhere.parent.mkdir(mode=0o700)
        shutil.copy(s.key_file, elsewhere)
        lg = database.open_ledger(database.open_engine(db.url), elsewhere)
        rotate_key_file(lg, elsewhere)
        lg.engine.dispose()
        size = rt.ledger.size()
        with pytest.raises(KeyFileError, match="no key file holds the ledger's active signing key"):
            rt.decide(batches[1], timeout_s=60)
        assert rt.pipeline.velocity_stale  # that batch's windows advanced; its commit never happened
        for batch in batches[2:5]:
            with pytest.raises(KeyFileError):
                rt.decide(batch, timeout_s=60)
        assert rt.pipeline.sealed_at_rebuild == 0  # not one replay while the key was unusable
        assert rt.ledger.size() == size
        shutil.copy(elsewhere, s.key_file)  # the operator installs the new key
        got = rt.decide(batches[5], timeout_s=60)
        assert len(got) == 20 and (rt.pipeline.sealed_at_rebuild, rt.pipeline.rolled_back) == (0, 4)  # undone
    finally:
        rt.close()


# -- two servers, a steady load, two rotations ---------------------------------------------------

RATE = 220.0  # requests per second in total the load is paced to: 200/s with a margin
SECONDS = 30.0
THREADS = 8
ROTATE_AT = (8.0, 18.0)  # seconds into the load


@dataclass
class Load:
    servers: list[ServerProcess]
    deadline: float
    answered: Counter[int] = field(default_factory=Counter)  # 200s by server
    failures: list[str] = field(default_factory=list)
    newest: dict[int, tuple[int, str]] = field(default_factory=dict)  # server -> (seq, trace id)
    cond: threading.Condition = field(default_factory=threading.Condition)

    def past(self, seq: int) -> bool:
        """Both servers answered a decision sealed after ``seq`` (call holding ``cond``)."""
        return all(self.newest.get(i, (-1, ""))[0] > seq for i in range(len(self.servers)))


def load_thread(load: Load, w: int, pool: list[dict[str, Any]], start_at: float) -> None:
    """One client of one server, paced to RATE / THREADS requests a second until the deadline."""
    server = w % len(load.servers)
    rng = random.Random(w)
    interval = THREADS / RATE
    next_at = start_at + w * interval / THREADS
    n = 0
    with load.servers[server].client("scorer") as client:
        while (now := time.monotonic()) < load.deadline:
            if now < next_at:
                time.sleep(next_at - now)  # pacing, not synchronisation
            next_at += interval
            body = orjson.dumps({**rng.choice(pool), "reference": f"ROT{w}-{n:06d}"})
            n += 1
            try:
                res = client.post("/v1/decisions", content=body, headers=JSON)
            except httpx.HTTPError as exc:
                with load.cond:
                    load.failures.append(f"server {server}: {type(exc).__name__}: {exc}")
                continue
            with load.cond:
                if res.status_code != 200:
                    load.failures.append(f"server {server}: HTTP {res.status_code}: {res.text[:300]}")
                    continue
                doc = res.json()
                load.answered[server] += 1
                load.newest[server] = max(load.newest.get(server, (-1, "")),
                                          (doc["ledger"]["seq"], doc["trace_id"]))
                load.cond.notify_all()


@pytest.mark.slow
def test_two_servers_under_load_pick_up_two_rotations_without_a_failed_request(db: Db,
                                                                               tmp_path: Path) -> None:
    """Two ``sealtrail serve`` on one ledger, 8 client threads paced to 220 decisions/s in total
    for 30 s, ``sealtrail keys rotate`` at 8 s and 18 s: every answer is a 200, both servers
    sign with each new key (never the retired one), and ``ledger verify`` passes, a checkpoint
    held from before the rotations included.

    Measured on the 2-core development machine (both servers, the 8 client threads and the
    rotations sharing the two cores, SQLite): the paced rate holds (5,987 decisions in 30 s at
    200/s paced); unpaced, the same clients reach about 325/s. The test prints the rate it
    reached; it asserts no rate (timing belongs in bench/), only that no request failed."""
    files = prepare(tmp_path, db.url)
    where = ("--db", files.db, "--keys", str(files.keys), "--json")
    held = tmp_path / "held.note"
    held.write_text(json.loads(sealtrail("ledger", "checkpoint", *where).stdout)["note"], encoding="utf-8")
    first_key = json.loads(sealtrail("keys", "show", *where).stdout)["active"]
    pool = messages(3000)
    servers = [start(files, log_name="serve-a"), start(files, log_name="serve-b")]
    rotations: list[dict[str, Any]] = []
    proofs: list[tuple[int, str]] = []  # (rotation index, checkpoint note a server proved against)
    try:
        t0 = time.monotonic()
        load = Load(servers, t0 + SECONDS)
        threads = [threading.Thread(target=load_thread, args=(load, w, pool, t0), daemon=True)
                   for w in range(THREADS)]
        for t in threads:
            t.start()
        for k, at in enumerate(ROTATE_AT):
            time.sleep(max(0.0, t0 + at - time.monotonic()))
            res = sealtrail("keys", "rotate", *where)
            assert res.returncode == 0, res.stdout + res.stderr
            rot = json.loads(res.stdout)
            rotations.append(rot)
            with load.cond:
                moved = load.cond.wait_for(lambda rot=rot: load.past(rot["seq"]), timeout=WAIT_S)
                newest = dict(load.newest)
            assert moved, f"rotation {k}: {newest}, failures {load.failures[:5]}"
            for i, server in enumerate(servers):  # each server proves a decision sealed since
                with server.client("officer") as officer:
                    got = officer.get(f"/v1/traces/{newest[i][1]}")
                assert got.status_code == 200, got.text
                proofs.append((k, got.json()["proof"]["checkpoint"]))
        for t in threads:
            t.join(timeout=WAIT_S)
        elapsed = time.monotonic() - t0
        assert not any(t.is_alive() for t in threads)
        for server in servers:
            assert server.stop() == 0, server.stderr()
    finally:
        for server in servers:
            if server.proc.poll() is None:
                server.kill()
    total = sum(load.answered.values())
    print(f"\n{total} decisions in {elapsed:.1f} s: {total / elapsed:.0f}/s over two servers "
          f"({dict(load.answered)}), {len(load.failures)} failed; {os.cpu_count()} cores")
    assert load.failures == [], load.failures[:10]
    assert all(load.answered[i] > 0 for i in range(len(servers)))

    # After each rotation, every checkpoint is signed by the key active at its size: the new key
    # alone, save the rotation's own checkpoint, co-signed by the old and the new key.
    keys = [(1, key_id(first_key))] + [(r["seq"] + 1, key_id(r["new_vkey"])) for r in rotations]
    assert [r["old_vkey"] for r in rotations] == [first_key, rotations[0]["new_vkey"]]

    def expected(size: int) -> set[str]:
        want = {next(k for f, k in reversed(keys) if f <= size)}
        want |= {key_id(r["old_vkey"]) for r in rotations if size == r["seq"] + 1}
        return want

    engine = store.connect(files.db)
    try:
        with engine.connect() as conn:
            stored = [(int(s), str(n)) for s, n in conn.exec_driver_sql(
                "SELECT size, note FROM ledger_checkpoints ORDER BY size")]
    finally:
        engine.dispose()
    for size, note in stored:
        assert signed_by(note) == expected(size), f"checkpoint at size {size}"
    for k, rot in enumerate(rotations):
        end = rotations[k + 1]["seq"] if k + 1 < len(rotations) else None
        after = [s for s, _ in stored if s > rot["seq"] + 1 and (end is None or s <= end)]
        assert after, f"no checkpoint signed by the servers after rotation {k}"
    for k, note in proofs:  # what each server proved against, right after rotation k
        assert signed_by(note) == {key_id(rotations[k]["new_vkey"])}

    res = sealtrail("ledger", "verify", *where, "--checkpoint", str(held))
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["keys"] == [first_key, *(r["new_vkey"] for r in rotations)]
