"""``bench.threshold_testing``: which comparisons are thresholds, which way loosens each, and that
on a small held-out population loosening a threshold never alerts fewer payments than tightening it."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from bench.heldout_eval import PACK, Scored, Traffic, score
from bench.threshold_testing import UnknownRuleError, alerts, main, thresholds, vary, with_threshold
from inference.backends import load_backend
from inference.heldout import HeldoutConfig, run
from inference.model import ModelFiles
from inference.schema import RULE_FEATURE_NAMES
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

SMALL = """
[ruleset]
id = "t"
version = "1"
features = ["amount_usd", "pass_through_24h_q16", "orig_country_risk", "model_score", "orig_count_1h"]

[[rules]]
id = "LAW"
when = "not (amount_usd < 1000) and orig_country_risk >= 0"
outcome = "REVIEW"
reason = "r"
severity = "low"

[[rules]]
id = "BAND"
when = "52429 <= pass_through_24h_q16 <= 81920 or orig_count_1h > 5"
outcome = "REVIEW"
reason = "r"
severity = "low"

[[rules]]
id = "CODES"
when = "orig_country_risk == 2 or not (model_score >= 0 and model_score <= 1)"
outcome = "BLOCK"
reason = "r"
severity = "low"
"""


def test_thresholds_name_their_feature_and_the_way_that_loosens_them() -> None:
    found = {(t.rule, t.label): (t.loosen, t.kind) for t in thresholds(parse_ruleset(SMALL))}
    assert found == {
        ("LAW", "amount_usd < 1000"): (-1, "ratio"),  # inside not: lowering it reviews more
        ("BAND", "pass_through_24h_q16 >= 52429"): (-1, "ratio"),  # written 52429 <= x
        ("BAND", "pass_through_24h_q16 <= 81920"): (1, "ratio"),
        ("BAND", "orig_count_1h > 5"): (-1, "count"),
    }  # a country-risk code and the score's range [0, 1] are no thresholds


def test_settings_move_counts_by_steps_and_amounts_by_factors() -> None:
    ts = {t.label: t for t in thresholds(parse_ruleset(SMALL))}
    assert [(s.label, s.value) for s in ts["orig_count_1h > 5"].settings()] == [
        ("-2", 3), ("-1", 4), ("shipped", 5), ("+1", 6), ("+2", 7)]
    assert [s.value for s in ts["amount_usd < 1000"].settings()] == pytest.approx(
        [800, 900, 1000, 1100, 1250])


def test_a_moved_threshold_changes_that_comparison_alone() -> None:
    rs = parse_ruleset(SMALL)
    law = next(t for t in thresholds(rs) if t.rule == "LAW")
    moved = with_threshold(rs, law, 800.0)
    rows = np.array([[900.0, 0.0, 0.0, 0.5, 0.0], [700.0, 0.0, 0.0, 0.5, 0.0]])
    with Sandbox() as sandbox:
        before = sandbox.load(compile_ruleset(rs)).evaluate(rows).outcomes.tolist()
        after = sandbox.load(compile_ruleset(moved)).evaluate(rows).outcomes.tolist()
    assert before == [0, 0] and after == [1, 0]  # USD 900 now reviewed, USD 700 still not
    assert [r.expr for r in moved.rules[1:]] == [r.expr for r in rs.rules[1:]]


def test_an_unknown_rule_id_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    pack = parse_ruleset(PACK.read_text())
    with pytest.raises(UnknownRuleError, match=r"'NO_SUCH_RULE' is not in pack aml_core .*FAN_IN_24H"):
        thresholds(pack, ["FAN_IN_24H", "NO_SUCH_RULE"])
    with pytest.raises(UnknownRuleError, match=r"SWIFT_NAK .* has no threshold to move"):
        thresholds(pack, ["SWIFT_NAK"])
    assert main(["--rules", "NO_SUCH_RULE"]) == 2
    assert "error: rule 'NO_SUCH_RULE' is not in pack aml_core" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny() -> tuple[Scored, bytes]:
    """About 3,500 held-out payments over 1,000 accounts and 7 days, scored by the shipped path."""
    pack_bytes = PACK.read_bytes()
    model = load_backend("numpy", ModelFiles.open().weights_path)
    traffic = Traffic.of_heldout(run(HeldoutConfig(seed=20261205, days=7, n_accounts=1_000, density=0.5,
                                                   typology_share=0.05)))
    with Sandbox() as sandbox, sandbox.load(compile_ruleset(parse_ruleset(pack_bytes))) as module:
        columns = [RULE_FEATURE_NAMES.index(f) for f in module.manifest.features]
        return score(traffic, model, module, columns), pack_bytes


@pytest.mark.requirement("SR11-7-validation")
def test_loosening_a_threshold_never_alerts_fewer_payments_than_tightening_it(
        tiny: tuple[Scored, bytes]) -> None:
    scored, pack_bytes = tiny
    pack = parse_ruleset(pack_bytes)
    tested = thresholds(pack)
    assert len({t.rule for t in tested}) >= 10
    moved_any = False
    with Sandbox() as sandbox:
        with sandbox.load(compile_ruleset(pack)) as shipped:
            base = alerts(scored, shipped)
        for t in tested:
            rows = vary(scored, sandbox, pack, t)
            assert [s.value for s, _ in rows] == sorted(s.value for s, _ in rows)
            shipped_row = next(a for s, a in rows if s.label == "shipped")
            assert dataclasses.replace(shipped_row, rule_hits=0) == base  # the shipped value: the same pack
            by_looseness = [a for _, a in rows][::t.loosen]  # tightest first
            for tighter, looser in itertools.pairwise(by_looseness):
                assert looser.payments >= tighter.payments, t
                assert looser.rule_hits >= tighter.rule_hits, t
                assert looser.normal_accounts >= tighter.normal_accounts, t
                assert looser.laundering_accounts >= tighter.laundering_accounts, t
            moved_any |= by_looseness[0].payments < by_looseness[-1].payments
    assert moved_any  # some threshold matters on this traffic: the check above can fail
    assert PACK.read_bytes() == pack_bytes  # the pack file is never written
