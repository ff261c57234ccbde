"""/healthz says not-ready while the signing key cannot be used, and ready once it is back."""

from __future__ import annotations

import shutil
from pathlib import Path

from ledger import database
from ledger.keys import rotate_key_file
from tests.api.test_hostile_transport import JSON, App, _problem, served, txs
from tests.conftest import Db

__all__ = ["served"]  # the fixture, imported so pytest finds it here


def test_healthz_is_unready_while_the_signing_key_is_unusable(served: App, db: Db, tmp_path: Path) -> None:
    first, second, third = txs(3, seed=61)
    admin, scorer = served.headers("admin"), served.headers("scorer", **JSON)
    assert served.client.post("/v1/decisions", content=first, headers=scorer).status_code == 200
    # the ledger is rotated from a copy of the key kept elsewhere: this server's key store never
    # gets the new key
    key_file = served.runtime.settings.key_file
    elsewhere = tmp_path / "elsewhere" / "signing.key"
    elsewhere.parent.mkdir(mode=0o700)
    shutil.copy(key_file, elsewhere)
    other = database.open_ledger(database.open_engine(db.url), elsewhere)
    rotate_key_file(other, elsewhere)
    other.engine.dispose()
    refused = served.client.post("/v1/decisions", content=second, headers=scorer)
    _problem(refused, 503, "signing_key_unavailable")
    body = _problem(served.client.get("/healthz", headers=admin), 503, "signing_key_unavailable")
    assert str(tmp_path) not in str(body)  # the key's path stays in the server log
    shutil.copy(elsewhere, key_file)  # the operator installs the new key: the next commit signs with it
    assert served.client.post("/v1/decisions", content=third, headers=scorer).status_code == 200
    assert served.client.get("/healthz", headers=admin).status_code == 200
