"""Exports over HTTP and the CLI: officer/regulator create, list and download bundles (201 +
Location, the zip round-trips byte for byte), others get 403, refused filters name their
field; ``sealtrail export create`` writes the bundle and exits 0 / 1 / 2 as the contract says."""

from __future__ import annotations

import getpass
import hashlib
import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from api.config import Settings
from audit.decide.runtime import Runtime
from audit.export.create import EXPORT_KIND
from ledger.keys import load_signer
from ledger.note import open_note
from tests.api.test_cli_score import Cli, sim_array
from tests.api.test_fail_closed import in_process, txs
from tests.conftest import Db

JSON = {"content-type": "application/json"}
ALL = {"from": "2000-01-01T00:00:00Z", "to": "2100-01-01T00:00:00Z"}


@dataclass
class Served:
    client: TestClient
    runtime: Runtime
    settings: Settings

    def post(self, role: str, body: Any) -> Any:
        return self.client.post("/v1/exports", json=body, headers={"x-test-role": role})

    def get(self, role: str, path: str) -> Any:
        return self.client.get(path, headers={"x-test-role": role})


@pytest.fixture
def served(db: Db, tmp_path: Path) -> Iterator[Served]:
    with in_process(db, tmp_path, exports_dir=tmp_path / "exports") as (client, rt, s):
        for tx in txs(30):
            r = client.post("/v1/decisions", content=tx, headers={**JSON, "x-test-role": "scorer"})
            assert r.status_code == 200, r.text
        yield Served(client, rt, s)


@pytest.mark.requirement("SEC-17a4f-download", "FATF-R11-available")
def test_officer_creates_regulator_lists_and_downloads(served: Served) -> None:
    r = served.post("officer", ALL)
    assert r.status_code == 201, r.text
    doc = r.json()
    assert r.headers["location"] == f"/v1/exports/{doc['bundle_id']}"
    assert doc["counts"]["decisions"] == 30 and "file" not in doc
    listed = served.get("regulator", "/v1/exports").json()["items"]
    assert [i["bundle_id"] for i in listed] == [doc["bundle_id"]]
    assert listed[0]["creator"]["subject"] == "CN=sealtrail-officer,O=sealtrail dev"
    got = served.get("regulator", r.headers["location"])
    assert got.status_code == 200 and got.headers["content-type"] == "application/zip"
    on_disk = (served.settings.exports_dir / f"{doc['bundle_id']}.zip").read_bytes()
    assert got.content == on_disk
    with zipfile.ZipFile(io.BytesIO(got.content)) as z:
        manifest_bytes = z.read("manifest.json")
        sig = z.read("manifest.sig").decode()
        manifest = orjson.loads(manifest_bytes)
    assert hashlib.sha256(manifest_bytes).hexdigest() == doc["manifest_sha256"]
    assert manifest["creator"]["fingerprint_sha256"]  # the officer's certificate, not a local user
    open_note(sig, [load_signer(served.settings.key_file).verifier])


@pytest.mark.parametrize("role", ["scorer", "approver", "admin"])
def test_other_roles_get_403(served: Served, role: str) -> None:
    assert served.post(role, ALL).status_code == 403
    assert served.get(role, "/v1/exports").status_code == 403
    assert served.get(role, "/v1/exports/00000000-0000-7000-8000-000000000000").status_code == 403
    assert not served.settings.exports_dir.exists() or not any(served.settings.exports_dir.iterdir())


@pytest.mark.parametrize(("body", "field"), [
    ({**ALL, "decision": "MAYBE"}, "decision"),
    ({**ALL, "rule": "lower"}, "rule"),
    ({"from": "2026-01-01T00:00:00", "to": ALL["to"]}, "from"),
    ({"from": "2001-01-01T00:00:00Z", "to": "2001-01-02T00:00:00Z"}, "filters"),
])
def test_refused_filters_answer_422_naming_the_field(served: Served, body: dict[str, Any],
                                                     field: str) -> None:
    r = served.post("officer", body)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == field


def test_an_unknown_export_is_404(served: Served) -> None:
    assert served.get("officer", "/v1/exports/00000000-0000-7000-8000-000000000000").status_code == 404
    assert served.get("officer", "/v1/exports/not-a-uuid").status_code == 404


# -- the CLI ----------------------------------------------------------------------------------


@pytest.fixture
def scored(db: Db, tmp_path: Path) -> Cli:
    cli = Cli(db, tmp_path / "keys")
    cli("init")
    f = tmp_path / "batch.json"
    f.write_bytes(orjson.dumps(sim_array(40, seed=9)))
    cli("score", str(f))
    return cli


def test_cli_create_writes_the_bundle_and_prints_its_summary(scored: Cli, tmp_path: Path) -> None:
    out = tmp_path / "b.zip"
    doc = scored.json("export", "create", "--from", ALL["from"], "--to", ALL["to"], "--out", str(out))
    assert out.exists() and doc["file"] == str(out) and doc["counts"]["decisions"] == 40
    assert doc["creator"]["subject"] == f"CN=local:{getpass.getuser()}"
    human = scored("export", "create", "--from", ALL["from"], "--to", ALL["to"], "--decision", "ALLOW",
                   "--out", str(tmp_path / "c.zip")).stdout
    assert "bundle" in human and "checkpoint" in human and str(tmp_path / "c.zip") in human
    engine = scored.db.engine()
    with engine.connect() as conn:
        n = conn.exec_driver_sql(f"SELECT count(*) FROM ledger_entries WHERE kind = '{EXPORT_KIND}'").scalar()
    engine.dispose()
    assert n == 2


@pytest.mark.parametrize(("args", "option"), [
    (["--decision", "MAYBE"], "--decision"),
    (["--rule", "x y"], "--rule"),
    (["--to", "2000-01-01T00:00:00Z"], "--to"),  # before --from
])
def test_cli_refused_filters_exit_1_naming_the_option(scored: Cli, tmp_path: Path, args: list[str],
                                                      option: str) -> None:
    base = {"--from": ALL["from"], "--to": ALL["to"]}
    rest = dict(zip(args[::2], args[1::2], strict=True))
    argv = [x for k, v in {**base, **rest}.items() for x in (k, v)]
    doc = scored.json("export", "create", *argv, "--out", str(tmp_path / "x.zip"), code=1)
    assert doc["field"] == option and not (tmp_path / "x.zip").exists()


def test_cli_nothing_matched_exits_1_and_a_missing_option_exits_2(scored: Cli, tmp_path: Path) -> None:
    doc = scored.json("export", "create", "--from", "2001-01-01T00:00:00Z", "--to", "2001-01-02T00:00:00Z",
                      "--out", str(tmp_path / "x.zip"), code=1)
    assert doc["field"] == "filters"
    scored("export", "create", "--from", ALL["from"], "--out", str(tmp_path / "x.zip"), code=2)
    assert not (tmp_path / "x.zip").exists()
