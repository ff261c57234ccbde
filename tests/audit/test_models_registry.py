"""The model registry: a model scores only once a model.registered record names its SHA-256."""

from __future__ import annotations

import hashlib
import io
import shutil
from pathlib import Path

import numpy as np
import orjson
import pytest
from sqlalchemy import select

from audit.decide.principal import Principal
from audit.errors import ModelConflictError, UnregisteredModelError
from audit.governance.models import (
    MODEL_REGISTERED,
    MODEL_SCHEMA,
    active_model,
    register_model,
    registered_models,
    require_registered,
)
from inference.model import CARD_NAME, ModelFiles, shipped_model_dir
from inference.precision import SECTION as PRECISION_SECTION
from ledger import NoteSigner, store
from ledger.append import Ledger
from ledger.verify import verify_ledger

ADMIN = Principal.local("admin")


def retrained(tmp_path: Path) -> ModelFiles:
    """A second, different model: the shipped files with one weight nudged and a fresh card."""
    d = tmp_path / "model2"
    shutil.copytree(shipped_model_dir(), d)
    with np.load(d / "weights.npz") as z:
        arrays = {k: z[k].copy() for k in z.files}
    first = next(k for k, v in arrays.items() if v.dtype.kind == "f")
    arrays[first].flat[0] += 1e-3
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    (d / "weights.npz").write_bytes(buf.getvalue())
    card = orjson.loads((d / CARD_NAME).read_bytes())
    sha = hashlib.sha256(buf.getvalue()).hexdigest()
    card["files"]["weights.npz"] = card["model_sha256"] = sha
    (d / CARD_NAME).write_bytes(orjson.dumps(card))
    return ModelFiles.open(d)


def bodies(ledger: Ledger) -> list[dict]:  # type: ignore[type-arg]
    e = store.entries
    with ledger.engine.connect() as conn:
        return [orjson.loads(bytes(r))["record"] for r in conn.execute(
            select(e.c.record).where(e.c.kind == MODEL_REGISTERED).order_by(e.c.seq)).scalars()]


@pytest.mark.requirement("SR11-7-inventory")
def test_register_records_the_card_and_lookups_follow(ledger: Ledger, signer: NoteSigner,
                                                      tmp_path: Path) -> None:
    engine = ledger.engine
    files = ModelFiles.open()
    assert registered_models(engine) == [] and active_model(engine) is None
    with pytest.raises(UnregisteredModelError, match=files.model_sha256):
        require_registered(engine, files.model_sha256)

    m = register_model(ledger, files, ADMIN, backends=["onnxruntime", "numpy"])
    assert (m.model_sha256, m.name, m.backends) == (files.model_sha256, "aml_mlp", ("numpy", "onnxruntime"))
    assert m.version == files.model_sha256[:12]  # the shipped card carries no version of its own
    (body,) = bodies(ledger)
    assert body == {"schema": MODEL_SCHEMA, "model_sha256": files.model_sha256, "name": "aml_mlp",
                    "version": m.version, "backends": ["numpy", "onnxruntime"], "card": files.card,
                    "principal": ADMIN.to_json()}
    assert require_registered(engine, files.model_sha256) == m == active_model(engine)

    other = retrained(tmp_path)
    assert other.model_sha256 != files.model_sha256
    with pytest.raises(UnregisteredModelError):
        require_registered(engine, other.model_sha256)
    m2 = register_model(ledger, other, ADMIN, backends=["numpy"])
    assert active_model(engine) == m2 and [r.model_sha256 for r in registered_models(engine)] == [
        files.model_sha256, other.model_sha256]
    assert require_registered(engine, files.model_sha256) == m  # the older one stays registered
    verify_ledger(engine, [signer.verifier])


def test_registering_the_same_model_again_returns_the_first_and_writes_nothing(ledger: Ledger) -> None:
    files = ModelFiles.open()
    first = register_model(ledger, files, ADMIN, backends=["numpy"])
    size = ledger.size()
    again = register_model(ledger, files, Principal.local("someone-else"), backends=["numpy", "cupy"])
    assert again == first and ledger.size() == size


@pytest.mark.requirement("SR11-7-inventory")
def test_the_same_sha_with_another_card_is_refused(ledger: Ledger, tmp_path: Path) -> None:
    files = ModelFiles.open()
    register_model(ledger, files, ADMIN, backends=["numpy"])
    edited = ModelFiles(files.directory, {**files.card, "metrics": {"auc": 0.999}})
    size = ledger.size()
    with pytest.raises(ModelConflictError, match="different card"):
        register_model(ledger, edited, ADMIN, backends=["numpy"])
    assert ledger.size() == size


def test_a_card_that_only_adds_measured_precision_bounds_keeps_the_first_registration(ledger: Ledger) -> None:
    """A model registered before its card carried ``score_precision`` still starts once the card
    gains it; changing the bounds a registration sealed, or anything else, is still a conflict."""
    files = ModelFiles.open()
    bare = ModelFiles(files.directory, {k: v for k, v in files.card.items() if k != PRECISION_SECTION})
    first = register_model(ledger, bare, ADMIN, backends=["numpy"])
    size = ledger.size()
    assert register_model(ledger, files, ADMIN, backends=["numpy"]) == first and ledger.size() == size
    assert PRECISION_SECTION not in registered_models(ledger.engine)[0].card
    changed = ModelFiles(files.directory, {**files.card, "metrics": {"auc": 0.999}})
    with pytest.raises(ModelConflictError, match="different card"):
        register_model(ledger, changed, ADMIN, backends=["numpy"])


def test_bounds_a_registration_sealed_cannot_be_changed(ledger: Ledger) -> None:
    files = ModelFiles.open()
    register_model(ledger, files, ADMIN, backends=["numpy"])
    loosened = {**files.card[PRECISION_SECTION], "max_abs_diff": {"fp16": {"numpy": 0.5}}}
    for card in ({**files.card, PRECISION_SECTION: loosened},
                 {k: v for k, v in files.card.items() if k != PRECISION_SECTION}):
        with pytest.raises(ModelConflictError, match="different card"):
            register_model(ledger, ModelFiles(files.directory, card), ADMIN, backends=["numpy"])


def test_backends_default_to_those_usable_here(ledger: Ledger) -> None:
    m = register_model(ledger, ModelFiles.open(), ADMIN,
                       probe=lambda: {"numpy": None, "tensorrt": "no GPU", "onnxruntime": None})
    assert m.backends == ("numpy", "onnxruntime")


def test_a_concurrent_registration_wins_and_is_returned(ledger: Ledger) -> None:
    """Another replica registers between our check and our append: the recheck under the
    sequencer lock sees it, nothing of ours is written, and we get theirs."""
    files = ModelFiles.open()
    real = ledger.append_many

    def racing(records, **kw):  # type: ignore[no-untyped-def]
        ledger.append_many = real  # type: ignore[method-assign]
        register_model(ledger, files, Principal.local("other-replica"), backends=["numpy"])
        return real(records, **kw)

    ledger.append_many = racing  # type: ignore[method-assign]
    got = register_model(ledger, files, ADMIN, backends=["numpy"])
    assert got.subject == Principal.local("other-replica").subject
    assert len(bodies(ledger)) == 1
