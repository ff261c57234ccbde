"""The witness as a separate service over mutual TLS, and the log collecting its cosignatures:
``sealtrail witness init|serve|evidence`` and ``sealtrail ledger cosign``, with real processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import ssl
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from api.certs import create_dev_pki
from api.cli import app
from ledger import Record
from ledger.cosign import cosigned_note, newest_cosigned
from ledger.cosignature import Cosigner, CosignerVerifier, cosignatures
from ledger.database import open_engine, open_ledger

runner = CliRunner()
ORIGIN = "bank.example/aml"


def cli(*args: str, code: int = 0) -> dict[str, object]:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == code, res.output
    doc: dict[str, object] = json.loads(res.stdout)
    return doc


def copy_db(src: Path, dst: Path) -> None:
    """A consistent copy of a SQLite ledger (the online backup API)."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    b.close()
    a.close()


def tls_client(pki: Path, stem: Path | None) -> httpx.Client:
    """A client trusting the dev CA, presenting ``stem``.pem/.key (or no certificate)."""
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if stem is not None:
        ctx.load_cert_chain(str(stem.with_suffix(".pem")), str(stem.with_suffix(".key")))
    return httpx.Client(verify=ctx)


@dataclass
class Site:
    """One log (SQLite ledger + key directory)."""

    directory: Path

    @property
    def db(self) -> str:
        return f"sqlite:///{self.directory / 'ledger.db'}"

    @property
    def keys(self) -> Path:
        return self.directory / "keys"

    def init(self) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        doc = cli("init", "--db", self.db, "--keys", str(self.keys), "--origin", ORIGIN)
        return str(doc["vkey"])

    def append(self, n: int, tag: str = "") -> None:
        engine = open_engine(self.db)
        lg = open_ledger(engine, self.keys / "signing.key")
        lg.append_many([Record("test.event", {"n": i, "tag": tag}) for i in range(n)])
        lg.checkpoint()
        engine.dispose()


class WitnessProcess:
    def __init__(self, config: Path, pki: Path) -> None:
        self.config, self.pki = config, pki
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> None:
        exe = Path(sys.executable).parent / "sealtrail"
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "api.cli"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEALTRAIL_")}
        self.proc = subprocess.Popen(
            [*cmd, "witness", "serve", "--config", str(self.config), "--port", "0", "--json",
             "--tls-cert", str(self.pki / "server.pem"), "--tls-key", str(self.pki / "server.key"),
             "--client-ca", str(self.pki / "ca.pem")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        assert self.proc.stdout is not None
        lines = []
        for line in self.proc.stdout:
            lines.append(line)
            if line.startswith("}"):
                break
        doc = json.loads("".join(lines))
        assert doc["ok"] is True, doc
        self.url = str(doc["url"])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        self.proc = None


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Site, WitnessProcess, Path, str]]:
    pki = tmp_path / "pki"
    create_dev_pki(pki, roles=("admin", "regulator"))
    site = Site(tmp_path / "site")
    log_vkey = site.init()
    wdir = tmp_path / "witness"
    wdir.mkdir()
    config = wdir / "witness.toml"
    w_vkey = str(cli("witness", "init", "--config", str(config), "--name", "audit.bank.example/witness",
                     "--log-key", log_vkey)["vkey"])
    assert oct((wdir / "witness.key").stat().st_mode & 0o777) == "0o600"
    proc = WitnessProcess(config, pki)
    proc.start()
    wl = tmp_path / "witnesses.toml"
    wl.write_text(f'min_witnesses = 1\nclient_cert = "pki/admin.pem"\nclient_key = "pki/admin.key"\n'
                  f'ca = "pki/ca.pem"\n\n[[witness]]\nurl = "{proc.url}"\nvkey = "{w_vkey}"\n')
    try:
        yield site, proc, wl, w_vkey
    finally:
        proc.stop()


def test_log_collects_cosignatures_over_mutual_tls(world: tuple[Site, WitnessProcess, Path, str]) -> None:
    site, proc, wl, w_vkey = world
    site.append(10)
    first = cli("ledger", "cosign", "--db", site.db, "--keys", str(site.keys), "--witnesses", str(wl))
    assert first["cosigned"] == 1 and first["size"] == 11
    site.append(25)
    second = cli("ledger", "cosign", "--db", site.db, "--keys", str(site.keys), "--witnesses", str(wl))
    assert second["cosigned"] == 1 and second["size"] == 36
    again = cli("ledger", "cosign", "--db", site.db, "--keys", str(site.keys), "--witnesses", str(wl))
    assert "already cosigned" in json.dumps(again["witnesses"])
    engine = open_engine(site.db)
    with engine.connect() as conn:
        got = newest_cosigned(conn, 1)
        assert got is not None and got[0] == 36
        note = cosigned_note(conn, 11)
    engine.dispose()
    assert note is not None
    (cs,) = cosignatures(got[1], [CosignerVerifier.from_vkey(w_vkey)])
    assert cs.witness.vkey == w_vkey
    # the witness's monitoring view shows the same size, cosigned by it
    pki = wl.parent / "pki"
    with tls_client(pki, pki / "regulator") as client:
        r = client.get(f"{proc.url}/logs/{ORIGIN}/checkpoint")
        assert r.status_code == 200 and r.text.split("\n")[1] == "36"
        assert cosignatures(r.text, [CosignerVerifier.from_vkey(w_vkey)])
    # without a client certificate from the CA, no TLS session at all
    with tls_client(pki, None) as bare, pytest.raises(httpx.HTTPError):
        bare.get(f"{proc.url}/healthz")
    with tls_client(pki, pki / "other-ca" / "outsider") as outsider, pytest.raises(httpx.HTTPError):
        outsider.get(f"{proc.url}/healthz")


def test_split_view_is_an_alarm_with_evidence_across_a_witness_restart(
        world: tuple[Site, WitnessProcess, Path, str], tmp_path: Path) -> None:
    """A second log under the same origin and key (a copy of the key: a bank showing a second
    history, or a thief) cannot get its checkpoints cosigned: the witness refuses them, keeps both
    notes, and still does after a restart."""
    site, proc, wl, _ = world
    site.append(10, "honest")
    cli("ledger", "cosign", "--db", site.db, "--keys", str(site.keys), "--witnesses", str(wl))
    # the forked site starts from a copy of the database at size 11 and appends other records
    forked = Site(tmp_path / "forked")
    forked.directory.mkdir()  # a site of its own, never initialised: it is the copy
    shutil.copytree(site.keys, forked.keys)
    copy_db(site.directory / "ledger.db", forked.directory / "ledger.db")
    site.append(5, "honest")
    forked.append(5, "forked")  # size 16 on both, different roots
    cli("ledger", "cosign", "--db", site.db, "--keys", str(site.keys), "--witnesses", str(wl))
    proc.stop()
    proc.start()  # restarted: it knows the honest size-16 checkpoint from its state file only
    wl.write_text(wl.read_text().replace(wl.read_text().split('url = "')[1].split('"')[0], proc.url))
    alarm = cli("ledger", "cosign", "--db", forked.db, "--keys", str(forked.keys), "--witnesses", str(wl),
                code=1)
    assert alarm["error"] == "alarm" and "split view" in str(alarm["message"])
    ev = cli("witness", "evidence", "--config", str(proc.config), code=1)
    (item,) = ev["evidence"]  # type: ignore[misc]
    assert item["kind"] == "split-view" and item["size"] == 16
    assert item["submitted_note"] != item["cosigned_note"]
    # the honest log goes on being cosigned
    site.append(3, "honest")
    assert cli("ledger", "cosign", "--db", site.db, "--keys", str(site.keys), "--witnesses", str(wl))[
        "cosigned"] == 1


def test_a_witness_ahead_of_the_log_is_an_alarm(world: tuple[Site, WitnessProcess, Path, str],
                                                 tmp_path: Path) -> None:
    """The log restored from an old copy (or a lossy failover): the witness saw entries the log no
    longer has, and the log says so instead of retrying."""
    site, _, wl, _ = world
    old = tmp_path / "old.db"
    copy_db(site.directory / "ledger.db", old)
    site.append(20)
    cli("ledger", "cosign", "--db", site.db, "--keys", str(site.keys), "--witnesses", str(wl))
    alarm = cli("ledger", "cosign", "--db", f"sqlite:///{old}", "--keys", str(site.keys),
                "--witnesses", str(wl), code=1)
    assert "past this log's newest checkpoint" in str(alarm["message"])


def test_witness_config_errors_name_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "w.toml"
    bad.write_text('name = "w"\nkey = "k"\nstate = "s"\n[[log]]\norigin = "o"\nkeys = ["nope"]\n')
    doc = cli("witness", "evidence", "--config", str(bad), code=2)
    assert "log[0].keys" in str(doc["message"])
    wl = tmp_path / "wl.toml"
    wl.write_text('min_witnesses = 3\n[[witness]]\nurl = "https://x"\n'
                  'vkey = "w+00000000+BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"\n')
    doc = cli("ledger", "cosign", "--db", f"sqlite:///{tmp_path}/none.db", "--witnesses", str(wl), code=2)
    assert "witness[0].vkey" in str(doc["message"])
    doc = cli("witness", "serve", "--config", str(bad), code=2)
    assert "--client-ca are required" in str(doc["message"])


def test_an_export_is_witnessed_and_verify_checks_the_quorum(
        world: tuple[Site, WitnessProcess, Path, str], tmp_path: Path) -> None:
    """With SEALTRAIL_WITNESSES_FILE set, ``export create`` has the witness cosign the bundle's
    checkpoint (sealtrail.bundle/8); ``export verify --witness-key --min-witnesses`` holds it to that."""
    site, _, wl, w_vkey = world
    samples = sorted((Path(__file__).parents[1] / "vectors" / "messages" / "pacs008").glob("*.xml"))[:3]
    cli("score", *map(str, samples), "--db", site.db, "--keys", str(site.keys))
    log_vkey = str(cli("keys", "show", "--db", site.db, "--keys", str(site.keys))["active"])
    out = tmp_path / "witnessed.zip"
    res = runner.invoke(app, ["export", "create", "--from", "2000-01-01", "--to", "2100-01-01",
                              "--out", str(out), "--db", site.db, "--keys", str(site.keys), "--json"],
                        env={"SEALTRAIL_WITNESSES_FILE": str(wl)})
    assert res.exit_code == 0, res.output
    with zipfile.ZipFile(out) as z:
        manifest = json.loads(z.read("manifest.json"))
    assert manifest["schema"] == "sealtrail.bundle/9"
    assert [w["vkey"] for w in manifest["witnesses"]] == [w_vkey]
    stated = json.loads(zipfile.ZipFile(out).read("compliance.json"))["stated"]  # the settings, stated
    assert stated["retention"]["payload_retention_days"] == 3653
    assert stated["witnesses"]["configured"] == [w_vkey]
    ok = cli("export", "verify", str(out), "--trusted-key", log_vkey, "--witness-key", w_vkey,
             "--min-witnesses", "1")
    report = ok["report"]
    assert ok["verified"] is True and report["witnesses_pinned"] == 1 and report["witnesses"] == [w_vkey]
    stranger = Cosigner.generate("stranger.example/witness").verifier.vkey
    refused = cli("export", "verify", str(out), "--trusted-key", log_vkey, "--witness-key", stranger,
                  "--min-witnesses", "1", code=1)
    assert "witness.quorum" in json.dumps(refused)
    usage = cli("export", "verify", str(out), "--trusted-key", log_vkey, "--min-witnesses", "1", code=2)
    assert "--witness-key" in str(usage["message"])
