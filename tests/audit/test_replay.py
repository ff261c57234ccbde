"""Replay of recorded decisions (DESIGN.md invariant 6): real pipeline decisions reproduce, and
each way a record can disagree with its module or model is named with its seq and trace id."""

from __future__ import annotations

import base64
import copy
import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from sqlalchemy import select

from audit.bundle.replay import Replayer
from audit.decide.record import features_from_body
from audit.decide.types import ActiveRules
from audit.errors import BundleError, BundleTampered
from inference.model import MlpModel, ModelFiles, model_npz_bytes
from ledger import NoteSigner, store
from tests.audit.bundle_fixture import make_source
from tests.conftest import ORIGIN, Db, make_ledger
from wasm_rules import OUTCOMES, Sandbox, compile_ruleset, parse_ruleset

PACK = Path(__file__).parents[2] / "wasm_rules" / "packs" / "aml_core.toml"
Decision = tuple[int, str, dict[str, Any]]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, sandbox: Sandbox) -> tuple[list[Decision], bytes]:
    """The decisions of a real ledger (seq, trace id, body) and the module that made them."""
    signer = NoteSigner.generate(ORIGIN)
    db = Db(f"sqlite:///{tmp_path_factory.mktemp('replay') / 'ledger.db'}", "sqlite")
    src = make_source(make_ledger(db, signer), signer, sandbox, n=120)
    e = store.entries
    with src.ledger.engine.connect() as conn:
        rows = conn.execute(select(e.c.seq, e.c.kind, e.c.record).order_by(e.c.seq)).all()
    envs = [(int(s), orjson.loads(r)) for s, k, r in rows if k in ("decision", "ruleset.bootstrapped")]
    module = next(base64.b64decode(env["record"]["module"]) for _, env in envs if env["kind"] != "decision")
    return [(s, env["trace_id"], env["record"]) for s, env in envs if env["kind"] == "decision"], module


def replayer(sandbox: Sandbox, modules: dict[str, bytes], batch: int = 8192) -> Replayer:
    weights = ModelFiles.open().weights_path.read_bytes()

    def fetch_module(sha: str) -> bytes:
        if sha not in modules:
            raise BundleTampered("missing", kind="file.missing", file=f"rules/{sha}.wasm")
        return modules[sha]

    return Replayer(sandbox, fetch_module, lambda sha: weights, batch=batch)


def run(rp: Replayer, decisions: list[Decision]) -> list[BundleError]:
    out: list[BundleError] = []
    for seq, tid, body in decisions:
        out += rp.add(seq, tid, body)
    return out + rp.flush()


def _modules(module: bytes) -> dict[str, bytes]:
    return {hashlib.sha256(module).hexdigest(): module}


@pytest.mark.parametrize("batch", [7, 8192])
@pytest.mark.requirement("FATF-R11-reconstruct")
def test_real_decisions_replay_exactly_in_any_batching(world: tuple[list[Decision], bytes], sandbox: Sandbox,
                                                       batch: int) -> None:
    decisions, module = world
    rp = replayer(sandbox, _modules(module), batch)
    assert run(rp, decisions) == []
    assert rp.replayed == rp.rescored == len(decisions)
    assert {b["decision"] for _, _, b in decisions} - {"ALLOW"}, "some rule fired"


def test_a_module_with_another_threshold_gives_other_outcomes(world: tuple[list[Decision], bytes],
                                                               sandbox: Sandbox) -> None:
    decisions, _ = world
    other = compile_ruleset(parse_ruleset(PACK.read_text().replace("amount_usd < 1000", "amount_usd < 1")))
    sha = hashlib.sha256(other).hexdigest()
    named = [(s, t, {**b, "rules": {**b["rules"], "module_sha256": sha}}) for s, t, b in decisions]
    errs = run(replayer(sandbox, {sha: other}), named)
    assert errs and {e.kind for e in errs} == {"replay.outcome"}
    by_seq = {s: t for s, t, _ in decisions}
    assert all(e.seq in by_seq and e.trace_id == by_seq[e.seq] and e.file == "records.jsonl" for e in errs)
    assert [e.seq for e in errs] == sorted(e.seq for e in errs if e.seq is not None)


@pytest.mark.requirement("SR11-7-validation")
def test_another_model_gives_other_scores(world: tuple[list[Decision], bytes], sandbox: Sandbox) -> None:
    decisions, module = world
    weights = model_npz_bytes(MlpModel.init(np.random.default_rng(11)))
    rp = Replayer(sandbox, lambda sha: module, lambda sha: weights)
    errs = run(rp, decisions)
    assert {e.kind for e in errs} == {"replay.model"}  # the weights do not hash to the recorded SHA-256
    sha = hashlib.sha256(weights).hexdigest()
    named = [(s, t, {**b, "model": {**b["model"], "sha256": sha}}) for s, t, b in decisions]
    errs = run(Replayer(sandbox, lambda s: module, lambda s: weights), named)
    assert errs and {e.kind for e in errs} == {"replay.score"} and "numpy model" in errs[0].detail


def _edit(decisions: list[Decision], k: int, **changes: Any) -> list[Decision]:
    out = copy.deepcopy(decisions[k:k + 1])
    out[0][2].update(changes)
    return out


def test_fail_safe_records_are_checked_for_their_shape(world: tuple[list[Decision], bytes],
                                                       sandbox: Sandbox) -> None:
    decisions, module = world
    rp = replayer(sandbox, _modules(module))
    # a fail-safe HOLD the model scored states its reasons, as any HOLD does: one that has them
    held = next(k for k, (_, _, body) in enumerate(decisions) if body["explanation"] is not None)
    fine = _edit(decisions, held, fail_safe="SANDBOX_FAULT: TrapError: x", decision="HOLD", fired=[])
    fine += _edit(decisions, 1, fail_safe="DEADLINE_EXCEEDED", decision="HOLD", fired=[], score_ppm=None)
    # model and sandbox both failed in one batch: the pipeline records SANDBOX_FAULT, score null
    fine += _edit(decisions, 5, fail_safe="SANDBOX_FAULT: TrapError: x", decision="HOLD", fired=[],
                  score_ppm=None)
    assert run(rp, fine) == [] and rp.fail_safe == 3 and rp.replayed == 0 and rp.rescored == 1
    bad = _edit(decisions, 2, fail_safe="SANDBOX_FAULT: TrapError: x", decision="ALLOW", fired=[])
    bad += _edit(decisions, 3, score_ppm=None)  # a null score needs MODEL_ERROR or DEADLINE_EXCEEDED
    bad += _edit(decisions, 4, fail_safe="SOMETHING_ELSE")
    got = {(e.seq, e.kind) for e in run(rp, bad)}
    # the null score is named, and with it the rules give another outcome (the score is missing);
    # reasons recorded for a decision the model did not score are named too
    stated = {(bad[1][0], "replay.explanation")} if decisions[3][2]["explanation"] is not None else set()
    assert got == {(bad[0][0], "replay.fail_safe"), (bad[1][0], "replay.score"),
                   (bad[1][0], "replay.outcome"), (bad[2][0], "replay.fail_safe")} | stated


def test_a_model_error_record_replays_its_rules_on_a_missing_score(world: tuple[list[Decision], bytes],
                                                                   sandbox: Sandbox) -> None:
    decisions, module = world
    seq, tid, body = copy.deepcopy(decisions[0])
    mod = sandbox.load(module)
    rules = ActiveRules.of(mod)
    row = np.array([features_from_body(body)[0] + [math.nan]])
    res = mod.evaluate(row[:, rules.columns])
    fired = [{"id": r.id, "outcome": r.outcome, "reason": r.reason} for r in mod.manifest.rules
             if r.id in res.fired_rules(0, mod.manifest)]
    body.update(score_ppm=None, fail_safe="MODEL_ERROR: RuntimeError: device lost",
                decision=OUTCOMES[int(res.outcomes[0])], fired=fired)
    assert fired, "the pack holds a payment whose score is missing"
    rp = replayer(sandbox, _modules(module))
    assert run(rp, [(seq, tid, body)]) == [] and rp.replayed == 1 and rp.rescored == 0


def test_a_reason_that_is_not_the_modules_is_a_mismatch(world: tuple[list[Decision], bytes],
                                                        sandbox: Sandbox) -> None:
    decisions, module = world
    k = next(i for i, (_, _, b) in enumerate(decisions) if b["fired"])
    (seq, tid, body), = edited = copy.deepcopy(decisions[k:k + 1])
    body["fired"][0]["reason"] = "because I said so"
    (err,) = run(replayer(sandbox, _modules(module)), edited)
    assert (err.kind, err.seq, err.trace_id) == ("replay.outcome", seq, tid) and "reason" in err.detail


def test_feature_values_that_do_not_hash_to_the_recorded_sha256_are_named(world: tuple[list[Decision], bytes],
                                                                          sandbox: Sandbox) -> None:
    decisions, module = world
    (seq, _, body), = edited = copy.deepcopy(decisions[:1])
    body["features"]["sha256"] = "00" * 32
    (err,) = run(replayer(sandbox, _modules(module)), edited)
    assert (err.kind, err.seq) == ("replay.features_sha256", seq)


@pytest.mark.parametrize("change", [{"schema": "other/1"}, {"score_ppm": "500000"}, {"score_ppm": 1_000_001},
                                    {"score_ppm": 0.5}, {"features": {"scaled": [1]}}, {"rules": None}])
def test_a_body_that_cannot_be_replayed_is_named_not_raised(world: tuple[list[Decision], bytes],
                                                            sandbox: Sandbox, change: dict[str, Any]) -> None:
    decisions, module = world
    edited = _edit(decisions, 0, **change)
    (err,) = run(replayer(sandbox, _modules(module)), edited)
    assert (err.kind, err.seq) == ("replay.body", edited[0][0])


def test_a_value_that_is_not_a_number_fails_only_its_record(world: tuple[list[Decision], bytes],
                                                            sandbox: Sandbox) -> None:
    decisions, module = world
    edited = copy.deepcopy(decisions[:5])
    edited[2][2]["features"]["scaled"][0] = 1.5  # a float where an integer in fixed units belongs
    errs = run(replayer(sandbox, _modules(module)), edited)
    assert [(e.kind, e.seq) for e in errs] == [("replay.body", edited[2][0])]


def test_a_missing_module_fails_every_decision_naming_it(world: tuple[list[Decision], bytes],
                                                         sandbox: Sandbox) -> None:
    decisions, _ = world
    errs = run(replayer(sandbox, {}), decisions[:10])
    assert [e.kind for e in errs] == ["file.missing"] * 10
    assert [e.seq for e in errs] == [s for s, _, _ in decisions[:10]]
