"""Hostile tests of version 3 explanations: a forger who writes records (and re-signs them) or a
skeptical examiner tries to make the verifier accept reason codes that say something false, to
make it refuse an honest recomputation, to escape the check by relabelling the record's version,
or to break the console page with a hostile explanation.

Most tests replay the published vector (``tests/vectors/decision-v3``: five records, the model
and the rule module that made them), so they do not move when the shipped model does."""

from __future__ import annotations

import copy
import importlib
import json
import os
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from audit.bundle.replay import Replayer
from audit.bundle.verify import verify_bundle
from audit.decide.explanation import EXPLANATION_METHOD, check_explanation, explain_decisions
from audit.errors import BundleError
from inference.explain import Reason, check_reasons, explain, reasons
from inference.model import MlpModel, load_npz
from inference.schema import model_columns
from ledger import NoteSigner, Record
from ledger.jcs import canonical_bytes
from tests.api.test_fail_closed import in_process
from tests.audit.bundle_fixture import lines, make_source, members, now_fixed, write_bundle
from tests.conftest import ORIGIN, Db, make_ledger
from wasm_rules import Sandbox

ROOT = Path(__file__).parents[2]
V3 = ROOT / "tests" / "vectors" / "decision-v3"
V2_SCHEMA, V3_SCHEMA = "sealtrail.decision/2", "sealtrail.decision/3"
Body = dict[str, Any]

# The vector, as the bundle verifier parses record lines (orjson): records 0-2 state three reasons
# each (0: ALLOW scored 0.607; 1: BLOCK 0.964; 2: HOLD 0.265), records 3 and 4 are allowed with a
# low score and state null.
_LINES = (V3 / "records.jsonl").read_bytes().splitlines()
_MODULE, _WEIGHTS = (V3 / "pack.wasm").read_bytes(), (V3 / "weights.npz").read_bytes()
EXPLAINED, HELD_LOW, QUIET = 0, 2, 3


def record(k: int) -> Body:
    """A fresh copy of vector record ``k``."""
    body: Body = orjson.loads(_LINES[k])
    return body


def replay(sandbox: Sandbox, *bodies: Body) -> list[BundleError]:
    """Every mismatch the bundle verifier's replay finds in ``bodies`` (seq 1, 2, ...)."""
    rp = Replayer(sandbox, lambda sha: _MODULE, lambda sha: _WEIGHTS)
    out: list[BundleError] = []
    for i, b in enumerate(bodies):
        out += rp.add(i + 1, f"trace-{i + 1}", b)
    return out + rp.flush()


def kinds(errs: list[BundleError]) -> list[str]:
    return [e.kind for e in errs]


@pytest.fixture(scope="module")
def model() -> MlpModel:
    return load_npz(_WEIGHTS)


def model_row(model: MlpModel, body: Body) -> np.ndarray:
    """The model's columns of a record's feature values (null -> NaN)."""
    width = model_columns(model.feature_names, body["features"]["schema"])
    return np.array([np.nan if v is None else v for v in body["features"]["values"]], np.float64)[:width]


# --- the vector itself --------------------------------------------------------------------------


def test_the_vector_replays_and_its_reasons_recompute(sandbox: Sandbox) -> None:
    bodies = [record(k) for k in range(len(_LINES))]
    rp = Replayer(sandbox, lambda sha: _MODULE, lambda sha: _WEIGHTS)
    errs = [e for i, b in enumerate(bodies) for e in rp.add(i + 1, f"t{i}", b)] + rp.flush()
    assert errs == [] and rp.explained == 3
    assert [b["explanation"] is None for b in bodies] == [False, False, False, True, True]


# --- forged explanations: every alteration is named ------------------------------------------


def _reason(i: int, **change: Any) -> Callable[[Body], None]:
    def apply(b: Body) -> None:
        b["explanation"]["reasons"][i].update(change)
    return apply


def _text(i: int, edit: Callable[[str], str]) -> Callable[[Body], None]:
    def apply(b: Body) -> None:
        r = b["explanation"]["reasons"][i]
        r["text"] = edit(r["text"])
    return apply


def _reasons(edit: Callable[[list[Any]], list[Any]]) -> Callable[[Body], None]:
    def apply(b: Body) -> None:
        b["explanation"]["reasons"] = edit(b["explanation"]["reasons"])
    return apply


def _fullwidth_one(text: str) -> str:
    """The first "1" as FULLWIDTH DIGIT ONE: the same text once NFKC-normalised."""
    forged = text.replace("1", "\uff11", 1)
    assert forged != text and unicodedata.normalize("NFKC", forged) == text
    return forged


FORGERIES: dict[str, Callable[[Body], None]] = {
    # record 0 states AMOUNT_VS_HISTORY 352, STRUCTURING_BAND 345, HIGH_RISK_JURISDICTION 334
    # (recomputed sums 351.93, 344.75, 333.93 milli)
    "an extra key beside method and reasons": lambda b: b["explanation"].update(verified=True),
    "an extra key in a reason": _reason(0, weight=0.9),
    "a contribution as a float equal to the integer": _reason(0, contribution_milli=352.0),
    "a contribution as a bool": _reason(2, contribution_milli=True),
    "a contribution as a string": _reason(0, contribution_milli="352"),
    "a contribution one milli over, past the tolerance": _reason(0, contribution_milli=353),
    "a contribution one milli under, past the tolerance": _reason(0, contribution_milli=351),
    "a contribution of 2**63": _reason(0, contribution_milli=2**63),
    "a negative contribution": _reason(2, contribution_milli=-334),
    "a lower-case code": _reason(0, code="amount_vs_history"),
    "a code no model gives": _reason(0, code="SANCTIONS_HIT"),
    "another real code in the same place": _reason(2, code="VELOCITY"),
    "text with a trailing space": _text(0, lambda t: t + " "),
    "text with a no-break space": _text(0, lambda t: t.replace(" ", "\u00a0", 1)),
    "text with a typographic apostrophe": _text(0, lambda t: t.replace("'", "\u2019")),
    "text equal only after NFKC normalisation": _text(0, _fullwidth_one),
    "text of another reason": _text(1, lambda t: record(EXPLAINED)["explanation"]["reasons"][2]["text"]),
    "a duplicated code": _reasons(lambda rs: [rs[0], rs[0], rs[1]]),
    "a duplicated code with an equal contribution": _reasons(lambda rs: [rs[0], rs[1], rs[1]]),
    "the first two in swapped order": _reasons(lambda rs: [rs[1], rs[0], rs[2]]),
    "the last reason dropped": _reasons(lambda rs: rs[:2]),
    "every reason dropped": _reasons(lambda rs: []),
    "a fourth reason": _reasons(lambda rs: [*rs, {"code": "ROUND_AMOUNT", "contribution_milli": 20,
                                                  "text": "a round amount"}]),
    "reasons as an object": _reasons(lambda rs: {str(i): r for i, r in enumerate(rs)}),  # type: ignore
    "a reason as a list": _reasons(lambda rs: [list(rs[0].values()), *rs[1:]]),
    "a method with a trailing space": lambda b: b["explanation"].update(method=EXPLANATION_METHOD + " "),
    "no method": lambda b: b["explanation"].pop("method"),
    "an explanation as a list": lambda b: b.update(explanation=b["explanation"]["reasons"]),
    "an explanation as a string": lambda b: b.update(explanation="AMOUNT_VS_HISTORY"),
    "an explanation as false": lambda b: b.update(explanation=False),
    "an empty explanation object": lambda b: b.update(explanation={}),
}


@pytest.mark.parametrize("forge", FORGERIES.values(), ids=FORGERIES.keys())
def test_a_forged_explanation_is_named_and_nothing_else(sandbox: Sandbox,
                                                        forge: Callable[[Body], None]) -> None:
    body = record(EXPLAINED)
    forge(body)
    errs = replay(sandbox, body)
    assert kinds(errs) == ["replay.explanation"] and errs[0].seq == 1 and errs[0].trace_id == "trace-1"
    assert errs[0].detail


# --- which records must state reasons --------------------------------------------------------


def test_a_record_that_must_state_reasons_may_not_state_null(sandbox: Sandbox) -> None:
    high, held = record(EXPLAINED), record(HELD_LOW)  # ALLOW scored 0.607; HOLD scored 0.265
    high["explanation"] = held["explanation"] = None
    errs = replay(sandbox, high, held)
    assert [(e.seq, e.kind) for e in errs] == [(1, "replay.explanation"), (2, "replay.explanation")]
    assert all("is null" in e.detail for e in errs)


@pytest.mark.parametrize("stated", [
    {"method": EXPLANATION_METHOD, "reasons": []},
    record(EXPLAINED)["explanation"],
], ids=["no reasons", "another record's reasons"])
def test_an_allowed_low_score_may_state_nothing_but_null(sandbox: Sandbox, stated: object) -> None:
    quiet = record(QUIET)
    quiet["explanation"] = copy.deepcopy(stated)
    errs = replay(sandbox, quiet)
    assert kinds(errs) == ["replay.explanation"] and "has none (null)" in errs[0].detail


def test_a_version_3_body_without_the_key_is_named(sandbox: Sandbox) -> None:
    """A version 2 body relabelled as version 3 (no explanation, no explain latency)."""
    for k in (EXPLAINED, QUIET):
        body = record(k)
        del body["explanation"], body["latency_us"]["explain"]
        errs = replay(sandbox, body)
        assert kinds(errs) == ["replay.explanation"] and "has no explanation" in errs[0].detail


def test_a_score_that_does_not_replay_is_the_only_finding(sandbox: Sandbox) -> None:
    body = record(EXPLAINED)
    body["score"] += 0.01  # still ALLOW under the pack's thresholds
    body["explanation"]["reasons"][0]["text"] = "a trusted customer"
    assert kinds(replay(sandbox, body)) == ["replay.score"]


# --- fail-safe decisions -----------------------------------------------------------------------


def _sandbox_fault(body: Body) -> Body:
    body.update(fail_safe="SANDBOX_FAULT: Trap: wasm trap: unreachable", decision="HOLD", fired=[])
    return body


def test_a_sandbox_fault_with_a_score_states_the_reasons_of_its_hold(sandbox: Sandbox,
                                                                     model: MlpModel) -> None:
    """The pipeline explains a fail-safe HOLD it scored (a HOLD whatever its score): the reasons the
    model gives pass, null does not."""
    null = _sandbox_fault(record(QUIET))
    errs = replay(sandbox, null)
    assert kinds(errs) == ["replay.explanation"] and "is null" in errs[0].detail
    said = _sandbox_fault(record(QUIET))
    [ex] = explain_decisions(model, model_row(model, said)[None], [said["score"]], ["HOLD"])
    said["explanation"] = ex.to_json()
    assert said["explanation"] is not None and replay(sandbox, said) == []


def _deadline(body: Body) -> Body:
    body.update(fail_safe="DEADLINE_EXCEEDED", decision="HOLD", fired=[], score=None)
    return body


def test_a_decision_past_its_deadline_states_null(sandbox: Sandbox) -> None:
    assert replay(sandbox, _deadline(record(QUIET))) == []
    forged = _deadline(record(EXPLAINED))  # keeps the reasons it had when scored
    errs = replay(sandbox, forged)
    assert kinds(errs) == ["replay.explanation"]


def _model_error(body: Body) -> Body:
    body.update(fail_safe="MODEL_ERROR: RuntimeError: backend lost", score=None)
    return body


def test_a_decision_the_model_did_not_score_states_null(sandbox: Sandbox) -> None:
    # the rules re-make a MODEL_ERROR decision (the vector's ALLOW becomes the pack's REVIEW): only
    # the explanation findings are looked at here
    assert "replay.explanation" not in kinds(replay(sandbox, _model_error(record(QUIET))))
    for forged in (_model_error(record(EXPLAINED)), _model_error(record(QUIET))):
        forged["explanation"] = record(EXPLAINED)["explanation"]
        assert "replay.explanation" in kinds(replay(sandbox, forged))
    gone = _model_error(record(QUIET))
    del gone["explanation"]
    assert "replay.explanation" in kinds(replay(sandbox, gone))


def test_the_finding_on_an_unscored_decision_says_what_it_states(sandbox: Sandbox) -> None:
    forged = _model_error(record(QUIET))
    forged["explanation"] = record(EXPLAINED)["explanation"]
    [err] = [e for e in replay(sandbox, forged) if e.kind == "replay.explanation"]
    assert "null explanation" not in err.detail and "must be null" in err.detail


# --- the version a record states ----------------------------------------------------------------


def _as_version_2(body: Body) -> Body:
    body["schema"] = V2_SCHEMA
    return body


def test_a_version_2_body_may_not_carry_an_unchecked_explanation(sandbox: Sandbox) -> None:
    forged = _as_version_2(record(EXPLAINED))
    forged["explanation"]["reasons"][0]["text"] = "a trusted customer"
    assert kinds(replay(sandbox, forged)) == ["replay.explanation"]


def test_a_downgrade_after_version_3_by_the_same_model_is_named(sandbox: Sandbox) -> None:
    honest, downgraded = record(EXPLAINED), _as_version_2(record(HELD_LOW))
    del downgraded["explanation"], downgraded["latency_us"]["explain"]
    assert honest["model"] == downgraded["model"]
    errs = replay(sandbox, honest, downgraded)
    assert [e.seq for e in errs] == [2]


def test_version_2_bodies_of_another_model_still_replay_without_an_explanation(sandbox: Sandbox) -> None:
    """What a downgrade check must leave alone: a version 2 ledger (or one whose scorer has no model)
    states no explanation and replays clean."""
    bodies = [_as_version_2(record(k)) for k in range(len(_LINES))]
    for b in bodies:
        del b["explanation"], b["latency_us"]["explain"]
    assert replay(sandbox, *bodies) == []


# --- the tolerance: honest recomputation passes, nothing else -----------------------------------

NAMES = ["cycle_len", "pass_through_24h_q16", "scatter_gather", "orig_fan_out_1d", "new_counterparty"]
ROW = np.array([3.0, 65536.0, 12.0, 25.0, 1.0])


def _attr(*milli: float) -> np.ndarray:
    return np.array(milli, np.float64) / 1000


def _texts() -> dict[str, str]:
    return {r.code: r.text for r in reasons(NAMES, ROW, _attr(300, 200, 100, 90, 80))
            + reasons(NAMES, ROW, _attr(0, 0, 0, 100, 90))}


def _said(*codes: tuple[str, int]) -> list[Reason]:
    texts = _texts()
    return [Reason(c, m, texts[c]) for c, m in codes]


def test_a_contribution_within_the_tolerance_passes_and_one_milli_more_does_not() -> None:
    at = _attr(0, 0, 0, 0, 100.45)  # NEW_COUNTERPARTY: 100 here, 101 on a machine 1e-4 away
    assert reasons(NAMES, ROW, at) == _said(("NEW_COUNTERPARTY", 100))
    for ok in (100, 101):
        assert check_reasons(NAMES, ROW, at, _said(("NEW_COUNTERPARTY", ok)), 1e-4) is None
    for bad in (99, 102):
        assert "is recorded as" in (check_reasons(NAMES, ROW, at, _said(("NEW_COUNTERPARTY", bad)), 1e-4)
                                    or "")


def test_a_code_another_machine_rounds_below_the_floor_may_be_left_out() -> None:
    at = _attr(0, 0, 0, 0, 19.55)  # 20 here; 19.45 a hair away rounds to 19
    assert reasons(NAMES, ROW, at) == _said(("NEW_COUNTERPARTY", 20))
    assert check_reasons(NAMES, ROW, at, [], 1e-4) is None


def test_a_tie_another_machine_breaks_the_other_way_passes() -> None:
    at = _attr(300, 200, 100.0, 100.45, 0)  # FAN_OUT is 100 here (tie, loses), 101 a hair away (wins)
    assert reasons(NAMES, ROW, at) == _said(("TEMPORAL_CYCLE", 300), ("PASS_THROUGH", 200),
                                            ("SCATTER_GATHER", 100))
    other = _said(("TEMPORAL_CYCLE", 300), ("PASS_THROUGH", 200), ("FAN_OUT", 101))
    assert check_reasons(NAMES, ROW, at, other, 1e-4) is None


def test_a_code_every_machine_keeps_may_not_be_left_out_at_the_floor() -> None:
    at = _attr(0, 0, 0, 0, 20.45)  # 20.35 to 20.55 all round to 20: kept everywhere
    assert reasons(NAMES, ROW, at) == _said(("NEW_COUNTERPARTY", 20))
    assert check_reasons(NAMES, ROW, at, [], 1e-4) is not None


def test_a_tie_at_the_cut_may_not_be_broken_against_the_code_order() -> None:
    at = _attr(300, 200, 100.2, 100.0, 0)  # SCATTER_GATHER (earlier) 100 and FAN_OUT 100: a tie, SG wins
    assert reasons(NAMES, ROW, at) == _said(("TEMPORAL_CYCLE", 300), ("PASS_THROUGH", 200),
                                            ("SCATTER_GATHER", 100))
    forged = _said(("TEMPORAL_CYCLE", 300), ("PASS_THROUGH", 200), ("FAN_OUT", 100))
    assert check_reasons(NAMES, ROW, at, forged, 1e-4) is not None


def test_a_contribution_past_float_range_is_named_not_raised(model: MlpModel) -> None:
    body = json.loads(_LINES[EXPLAINED])
    body["explanation"]["reasons"][0]["contribution_milli"] = 10**400
    row = model_row(model, body)
    attr = explain(model, row[None])[0]
    problem = check_explanation(model, row, attr, body["score"], body["decision"], body["explanation"], 1e-4)
    assert problem is not None


# --- determinism: another machine's SIMD and BLAS ----------------------------------------------

_ELSEWHERE = """
import json, sys
from pathlib import Path
import numpy as np
from numpy._core._multiarray_umath import __cpu_features__
from audit.bundle.replay import Replayer
from inference.explain import explain
from inference.model import load_npz
from wasm_rules import Sandbox
here = Path(sys.argv[1])
mod, weights = (here / "pack.wasm").read_bytes(), (here / "weights.npz").read_bytes()
bodies = [json.loads(x) for x in (here / "records.jsonl").read_bytes().splitlines()]
model = load_npz(weights)
rows = np.array([[np.nan if v is None else v for v in b["features"]["values"]] for b in bodies])
with Sandbox() as sb:
    rp = Replayer(sb, lambda sha: mod, lambda sha: weights)
    errs = [e for i, b in enumerate(bodies) for e in rp.add(i + 1, str(i), b)] + rp.flush()
    print(json.dumps({"errors": [str(e) for e in errs], "explained": rp.explained,
                      "attributions": explain(model, rows[:, :model.n_features]).tolist(),
                      "off": sorted(k for k, v in __cpu_features__.items() if not v)}))
"""


@pytest.mark.parametrize("env", [
    # numpy before 2.4 dispatches on these names; 2.4 names its targets X86_V3, X86_V4, AVX512_ICL
    # and ignores these (the BLAS thread count is what this case then varies)
    {"NPY_DISABLE_CPU_FEATURES": "AVX512F AVX512CD AVX512_SKX AVX2 FMA3", "OPENBLAS_NUM_THREADS": "1"},
    {"NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL", "OPENBLAS_CORETYPE": "Prescott"},
], ids=["numpy<2.4 names, one BLAS thread", "numpy 2.4 names, SSE3 BLAS kernels"])
def test_the_vector_verifies_with_other_simd_and_blas_kernels(model: MlpModel, env: dict[str, str]) -> None:
    """The same records verify when numpy's SIMD loops and OpenBLAS's kernels are other ones (as on
    another machine): attributions move in the last float32 bits, far inside the tolerance."""
    run = subprocess.run([sys.executable, "-c", _ELSEWHERE, str(V3)], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, **env}, timeout=60, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.splitlines()[-1])
    assert got["errors"] == [] and got["explained"] == 3
    # not vacuous: every dispatch target named that this machine has is off in the other process
    simd = importlib.import_module("numpy._core._multiarray_umath")
    named = set(env["NPY_DISABLE_CPU_FEATURES"].split()) & set(simd.__cpu_dispatch__)
    assert {f for f in named if simd.__cpu_features__.get(f)} <= set(got["off"])
    rows = np.array([[np.nan if v is None else v for v in record(k)["features"]["values"]]
                     for k in range(len(_LINES))])
    here = explain(model, rows[:, :model.n_features])
    assert np.abs(np.array(got["attributions"]) - here).max() < 1e-6


# --- a forged ledger, consistently signed ---------------------------------------------------------


@pytest.fixture(scope="module")
def forged_bundle(tmp_path_factory: pytest.TempPathFactory, sandbox: Sandbox) -> tuple[dict[str, int],
                                                                                      list[BundleError]]:
    """A real ledger to which a forger with the signing key appends copies of an explained HOLD:
    one with a false reason (version 3), one downgraded to version 2 without its explanation, and
    one relabelled version 2 keeping a false reason. The seq of each, and what verify finds."""
    tmp = tmp_path_factory.mktemp("forged")
    signer = NoteSigner.generate(ORIGIN)
    src = make_source(make_ledger(Db(f"sqlite:///{tmp / 'ledger.db'}", "sqlite"), signer), signer, sandbox,
                      n=20)
    envs = [orjson.loads(x) for x in lines(members(write_bundle(src, tmp / "a.zip"))["records.jsonl"])]
    held = next(e["record"] for e in envs if e["kind"] == "decision" and e["record"]["decision"] == "HOLD"
                and e["record"]["explanation"] and e["record"]["explanation"]["reasons"])
    false_v3 = copy.deepcopy(held)
    false_v3["explanation"]["reasons"][0]["text"] = "a trusted customer"
    downgraded = copy.deepcopy(held)
    downgraded["schema"] = V2_SCHEMA
    del downgraded["explanation"], downgraded["latency_us"]["explain"]
    false_v2 = {**copy.deepcopy(false_v3), "schema": V2_SCHEMA}
    receipts = src.ledger.append_many([Record.from_canonical_body("decision", canonical_bytes(b))
                                       for b in (false_v3, downgraded, false_v2)])
    src.ledger.checkpoint()
    try:
        verify_bundle(write_bundle(src, tmp / "b.zip"), [signer.verifier], sandbox=sandbox, now=now_fixed)
        found: list[BundleError] = []
    except BundleError as exc:
        found = list(exc.failures)
    seqs = dict(zip(("false_v3", "downgraded", "false_v2"), (r.seq for r in receipts), strict=True))
    return seqs, found


def test_a_signed_ledger_with_a_false_reason_fails_verify(forged_bundle: tuple[dict[str, int],
                                                                               list[BundleError]]) -> None:
    seqs, found = forged_bundle
    assert [(e.kind, "a trusted customer" in e.detail) for e in found if e.seq == seqs["false_v3"]] == [
        ("replay.explanation", True)]


def test_a_signed_ledger_with_a_downgraded_record_fails_verify(
        forged_bundle: tuple[dict[str, int], list[BundleError]]) -> None:
    seqs, found = forged_bundle
    assert any(e.seq == seqs["downgraded"] for e in found)


def test_a_signed_ledger_with_a_false_reason_labelled_version_2_fails_verify(
        forged_bundle: tuple[dict[str, int], list[BundleError]]) -> None:
    seqs, found = forged_bundle
    assert any(e.seq == seqs["false_v2"] for e in found)


# --- the console page ----------------------------------------------------------------------------

HOSTILE: dict[str, object] = {
    "script in code and text": {"method": "<script>alert(1)</script>", "reasons": [
        {"code": "<script>alert(1)</script>", "contribution_milli": 5,
         "text": "<img src=x onerror=alert(2)>"}]},
    "reasons null": {"method": EXPLANATION_METHOD, "reasons": None},
    "reasons a number": {"method": EXPLANATION_METHOD, "reasons": 7},
    "reasons a string": {"method": EXPLANATION_METHOD, "reasons": "<b>AMOUNT</b>"},
    "reasons an object": {"method": EXPLANATION_METHOD, "reasons": {"code": "A"}},
    "contribution a string": {"method": EXPLANATION_METHOD, "reasons": [
        {"code": "A", "contribution_milli": "<i>9</i>", "text": "t"}]},
    "contribution a bool": {"method": EXPLANATION_METHOD, "reasons": [
        {"code": "A", "contribution_milli": True, "text": "t"}]},
    "contribution 2**53 - 1": {"method": EXPLANATION_METHOD, "reasons": [
        {"code": "A", "contribution_milli": 2**53 - 1, "text": "t"}]},
    "contribution 1e308": {"method": EXPLANATION_METHOD, "reasons": [
        {"code": "A", "contribution_milli": 1e308, "text": "t"}]},
    "code and text not strings": {"method": EXPLANATION_METHOD, "reasons": [
        {"code": ["<s>"], "contribution_milli": 1, "text": {"<u>": 1}}, None, 3]},
    "no method, no reasons": {},
    "a list": [{"code": "<script>x</script>"}],
    "a string": "<script>alert(3)</script>",
}


@pytest.fixture
def console(sqlite_db: Db, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    with in_process(sqlite_db, tmp_path, exports_dir=tmp_path / "exports") as (client, rt, _):
        yield client, rt


def test_the_decision_page_renders_a_hostile_explanation_escaped(console: tuple[Any, Any]) -> None:
    """A record whose explanation a forger wrote (the ledger seals what it is given) is shown, never
    run as markup and never a server error."""
    client, rt = console
    for name, stated in HOSTILE.items():
        body = record(EXPLAINED)
        body["explanation"] = stated
        [receipt] = rt.ledger.append_many([Record.from_canonical_body("decision", canonical_bytes(body))])
        r = client.get(f"/console/decisions/{receipt.trace_id}", headers={"x-test-role": "officer"})
        assert r.status_code == 200, name
        shown = r.text.split('id="reasons">', 1)[1].split("</dd>", 1)[0]
        assert "<script" not in shown and "<img" not in shown and "<b>" not in shown, name
        assert "<i>" not in shown and "<s>" not in shown and "<u>" not in shown, name
    body = record(EXPLAINED)
    body["explanation"] = HOSTILE["script in code and text"]
    [receipt] = rt.ledger.append_many([Record.from_canonical_body("decision", canonical_bytes(body))])
    page = client.get(f"/console/decisions/{receipt.trace_id}", headers={"x-test-role": "officer"}).text
    assert "&lt;img src=x onerror=alert(2)&gt;" in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
