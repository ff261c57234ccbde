"""The bundle verifier recomputes every version 3 record's reason codes from its features and model:
genuine records pass in any batching, and an explanation altered in any part is named."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

from audit.decide.explanation import check_explanation
from audit.decide.record import features_from_body
from inference.explain import MIN_CONTRIBUTION, REASONS, Reason, check_reasons, explain, reasons
from inference.model import ModelFiles, load_npz
from tests.audit.test_replay import Decision, _modules, replayer, run, world
from wasm_rules import Sandbox

__all__ = ["world"]  # the fixture, shared with test_replay


def _explained(decisions: list[Decision]) -> list[int]:
    return [k for k, (_, _, b) in enumerate(decisions) if b["explanation"] and b["explanation"]["reasons"]]


@pytest.mark.parametrize("batch", [5, 8192])
@pytest.mark.requirement("GDPR-22-human-review")
def test_recorded_reason_codes_are_recomputed_and_hold(world: tuple[list[Decision], bytes], sandbox: Sandbox,
                                                      batch: int) -> None:
    decisions, module = world
    assert {b["schema"] for _, _, b in decisions} == {"sealtrail.decision/6"}
    assert _explained(decisions), "the simulated laundering has reasons"
    rp = replayer(sandbox, _modules(module), batch=batch)
    assert run(rp, decisions) == []
    assert rp.explained == sum(b["explanation"] is not None for _, _, b in decisions) > 0


def _tamper(decisions: list[Decision], change: Any) -> list[Decision]:
    k = _explained(decisions)[0]
    out = copy.deepcopy(decisions[k:k + 1])
    change(out[0][2]["explanation"])
    return out


@pytest.mark.parametrize(("change", "named"), [
    (lambda e: e["reasons"][0].update(contribution_milli=e["reasons"][0]["contribution_milli"] + 40),
     "is recorded as"),
    (lambda e: e["reasons"][0].update(text="the sender is a trusted customer"), "reads"),
    (lambda e: e["reasons"][0].update(code="ROUND_AMOUNT"), ""),
    (lambda e: e["reasons"].pop(0), "is not among the reason codes"),
    (lambda e: e.update(method="sealtrail.integrated-gradients/0"), "method"),
])
def test_an_altered_explanation_is_named(world: tuple[list[Decision], bytes], sandbox: Sandbox,
                                         change: Any, named: str) -> None:
    decisions, module = world
    errs = run(replayer(sandbox, _modules(module)), _tamper(decisions, change))
    assert [e.kind for e in errs] == ["replay.explanation"] and named in errs[0].detail


def test_reasons_removed_from_a_held_payment_are_named(world: tuple[list[Decision], bytes],
                                                       sandbox: Sandbox) -> None:
    decisions, module = world
    k = _explained(decisions)[0]
    gone = copy.deepcopy(decisions[k:k + 1])
    gone[0][2]["explanation"] = None
    errs = run(replayer(sandbox, _modules(module)), gone)
    assert [e.kind for e in errs] == ["replay.explanation"] and "is null" in errs[0].detail


def test_attributions_computed_elsewhere_within_tolerance_pass_and_beyond_do_not(
        world: tuple[list[Decision], bytes]) -> None:
    """Another machine's float32 products may differ in the last bits: a recorded explanation passes
    against attributions moved by less than the tolerance, and not by more."""
    decisions, _ = world
    model = load_npz(ModelFiles.open().weights_path.read_bytes())
    _, _, body = decisions[_explained(decisions)[0]]
    row = np.array(features_from_body(body)[0])[:model.n_features]
    attr = explain(model, row[None])[0]
    recorded = reasons(model.feature_names, row, attr)
    assert recorded and check_reasons(model.feature_names, row, attr, recorded, 1e-4) is None
    # move the whole first group's sum by 0.9 tolerance, then by 20 tolerances
    columns = next(cols for code, cols, _ in REASONS if code == recorded[0].code)
    first = next(i for i, n in enumerate(model.feature_names) if n in columns)
    total = math.fsum(a for a, n in zip(attr, model.feature_names, strict=True) if n in columns)
    near, far = attr.copy(), attr.copy()
    # the group's sum moved to half a quantum and 0.9 tolerance from the recorded figure: it would
    # round otherwise, and another machine's sum may sit there
    near[first] += recorded[0].contribution_milli * 1e-3 + 0.0005 + 0.9e-4 - total
    far[first] += 0.002
    assert check_reasons(model.feature_names, row, near, recorded, 1e-4) is None
    assert "is recorded as" in (check_reasons(model.feature_names, row, far, recorded, 1e-4) or "")
    score = features_from_body(body)[1]
    assert check_explanation(model, row, attr, score, body["decision"], body["explanation"], 1e-4) is None


def test_a_code_below_the_floor_on_this_machine_may_be_recorded_only_within_tolerance() -> None:
    names = ["new_counterparty", "round_amount"]
    row = np.array([1.0, 1.0])
    recorded = [Reason("NEW_COUNTERPARTY", 20, "the sender has not paid this beneficiary in the last 7 days")]
    just_below = np.array([MIN_CONTRIBUTION - 0.00055, 0.0])  # rounds to 19 here, 20 a hair away
    assert reasons(names, row, just_below) == []
    assert check_reasons(names, row, just_below, recorded, 1e-4) is None
    well_below = np.array([MIN_CONTRIBUTION - 0.003, 0.0])
    assert "is recorded as" in (check_reasons(names, row, well_below, recorded, 1e-4) or "")
    assert check_reasons(names, row, np.array([0.05, 0.0]), [], 1e-4) is not None  # left out: named
