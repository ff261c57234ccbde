"""A lower-precision backend end to end: the numpy backend computing at float16 decides payments,
its records state ``fp16`` (``sealtrail.decision/6``), a bundle is exported, and its scores (further
from the reference than the fixed 1e-4) replay within the bound the model card states for fp16 on
numpy; the same bundle with that bound gone from its card fails, naming the precision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from audit.bundle.reader import Limits
from audit.bundle.replay import SCORE_TOLERANCE, Replayer
from audit.bundle.verify import verify_bundle
from audit.decide.pipeline import Pipeline
from audit.decide.record import DECISION_SCHEMA_V6, features_from_body
from audit.errors import BundleError, BundleFailed
from audit.export.create import ExportFilters, create_bundle
from audit.governance.models import register_model
from audit.governance.service import Governance
from audit.query.index import TraceIndex
from inference.backends import load_backend
from inference.model import ModelFiles, forward, load_npz
from inference.precision import SECTION
from inference.schema import model_columns
from ledger import NoteSigner
from ledger.append import Ledger
from tests.audit.bundle_fixture import OFFICER, OPERATOR, members, rewrite
from wasm_rules import Sandbox

pytestmark = pytest.mark.usefixtures("sqlite_only")


@pytest.fixture
def sqlite_only(db: Any) -> None:
    if db.dialect != "sqlite":
        pytest.skip("the bundle path is the same on both dialects; one is enough here")


def _decide_at_fp16(ledger: Ledger, sandbox: Sandbox, n: int = 120) -> None:
    from tests.audit.test_pipeline import submissions  # the pipeline tests' simulated traffic

    gov = Governance(ledger, sandbox=sandbox)
    gov.bootstrap_default(principal=OPERATOR)
    files = ModelFiles.open()
    register_model(ledger, files, OPERATOR, backends=["numpy"])
    with load_backend("numpy", files.weights_path, precision="fp16") as fp16:
        Pipeline(ledger, fp16, gov.load_active(sandbox), index=TraceIndex()).decide(submissions(n))
    ledger.checkpoint()


def _decisions(bundle: dict[str, bytes]) -> list[tuple[int, str, dict[str, Any]]]:
    out: list[tuple[int, str, dict[str, Any]]] = []
    for line in bundle["records.jsonl"].splitlines():
        env = orjson.loads(line)
        if env["kind"] == "decision":
            out.append((env["seq"] if "seq" in env else len(out), env["trace_id"], env["record"]))
    return out


def _bound_dropped(m: dict[str, bytes]) -> None:
    for name in [n for n in m if n.endswith("/card.json")]:
        card = orjson.loads(m[name])
        del card[SECTION]["max_abs_diff"]["fp16"]
        m[name] = orjson.dumps(card)


@pytest.fixture
def fp16_bundle(ledger: Ledger, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> Path:
    _decide_at_fp16(ledger, sandbox)
    out = tmp_path / "fp16.zip"
    create_bundle(ledger.engine, ledger, signer, out,
                  ExportFilters.of("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z"), OFFICER)
    return out


def _replayed(sandbox: Sandbox, bundle: dict[str, bytes]) -> list[BundleError]:
    """Replay every decision of ``bundle``'s members with its module, weights and card."""
    rp = Replayer(sandbox, lambda sha: bundle[f"rules/{sha}.wasm"],
                  lambda sha: bundle[f"models/{sha}/weights.npz"],
                  fetch_card=lambda sha: bundle[f"models/{sha}/card.json"])
    errs = [e for seq, tid, body in _decisions(bundle) for e in rp.add(seq, tid, body)] + rp.flush()
    assert rp.rescored > 0
    return errs


def test_fp16_scores_lie_beyond_1e_4_and_replay_within_the_cards_bound(fp16_bundle: Path,
                                                                      sandbox: Sandbox) -> None:
    bundle = members(fp16_bundle)
    decisions = _decisions(bundle)
    assert {b["schema"] for _, _, b in decisions} == {DECISION_SCHEMA_V6}
    assert {b["model"]["precision"] for _, _, b in decisions} == {"fp16"}
    model = load_npz(ModelFiles.open().weights_path.read_bytes())
    diffs = []
    for _, _, body in decisions:
        values, score = features_from_body(body)
        if score == score:
            width = model_columns(model.feature_names, body["features"]["schema"])
            diffs.append(abs(float(forward(model, np.array([values])[:, :width])[0]) - score))
    sha = decisions[0][2]["model"]["sha256"]
    bound = orjson.loads(bundle[f"models/{sha}/card.json"])[SECTION]["max_abs_diff"]["fp16"]["numpy"]
    assert max(diffs) > SCORE_TOLERANCE  # the fixed tolerance would reject these records
    assert max(diffs) <= bound
    assert _replayed(sandbox, bundle) == []
    _bound_dropped(bundle)
    errs = _replayed(sandbox, bundle)
    assert errs and {e.kind for e in errs} == {"replay.precision"}
    assert all("precision fp16 on numpy" in str(e) for e in errs)


def test_the_bundle_without_the_fp16_bound_fails_verification_naming_the_precision(
        fp16_bundle: Path, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    forged = rewrite(fp16_bundle, tmp_path / "unbound.zip", edit=_bound_dropped, resign=signer)
    with pytest.raises(BundleFailed) as caught:
        verify_bundle(forged, [signer.verifier], sandbox=sandbox, limits=Limits(max_failures=10_000))
    kinds = {e.kind for e in caught.value.failures}
    assert "replay.precision" in kinds
    named = [e for e in caught.value.failures if e.kind == "replay.precision"]
    assert all("precision fp16 on numpy" in str(e) for e in named)
    # the card no longer states the bounds the model's registration sealed
    assert "context.model" in kinds


def test_the_fp16_bundle_verifies_with_the_cards_bound(fp16_bundle: Path, signer: NoteSigner,
                                                     sandbox: Sandbox) -> None:
    report = verify_bundle(fp16_bundle, [signer.verifier], sandbox=sandbox)
    assert report.rescored == report.decisions > 0
