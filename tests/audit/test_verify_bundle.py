"""The offline bundle verifier: a valid bundle verifies; every way of tampering with one is caught."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from audit.bundle_errors import BundleError
from audit.verify_bundle import verify_bundle
from ledger import NoteSigner
from tests.audit.bundle_fixture import make_source, write_bundle
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


def test_a_valid_bundle_verifies(db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    src = make_source(make_ledger(db, signer), signer, sandbox)
    path = write_bundle(src, tmp_path / "b.zip")
    try:
        report = verify_bundle(path, [signer.verifier], sandbox=sandbox)
    except BundleError as exc:
        for f in exc.failures:
            print(f)
        raise
    print(report)
