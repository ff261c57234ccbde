"""Drift on /metrics: each rule's hits (its alert rate over time) and the population stability of
the recent model scores against the training reference in the model card."""

from __future__ import annotations

import numpy as np
import pytest

from api.app import score_reference
from api.metrics import ScoreDrift
from inference.model import ModelFiles
from tests.api.test_fail_closed import Served, txs

REFERENCE = {"edges": [0.1 * i for i in range(1, 10)], "shares": [0.1] * 10}


@pytest.mark.requirement("SR11-7-monitoring")
def test_scores_like_the_reference_are_stable_and_a_shifted_population_is_not() -> None:
    rng = np.random.default_rng(4)
    like, shifted = ScoreDrift(REFERENCE), ScoreDrift(REFERENCE)
    like.add(rng.uniform(0, 1, 5000).tolist())
    shifted.add(rng.uniform(0.8, 1, 5000).tolist())
    assert (like.psi() or 1.0) < 0.02
    assert (shifted.psi() or 0.0) > 1.0
    few = ScoreDrift(REFERENCE)
    few.add([0.5] * 999 + [float("nan")] * 10)  # NaN (no score) is left out
    assert few.psi() is None  # under 1,000 scores: no figure yet
    with pytest.raises(ValueError, match="one share more than edges"):
        ScoreDrift({"edges": [0.5, 0.2], "shares": [0.3, 0.3, 0.4]})
    with pytest.raises(ValueError, match="one share more than edges"):
        ScoreDrift({"edges": [0.5], "shares": [1.0]})


def test_the_shipped_card_states_a_reference_and_another_model_gets_none() -> None:
    files = ModelFiles.open()
    ref = score_reference(files.model_sha256)
    assert ref is not None and len(ref["shares"]) == len(ref["edges"]) + 1
    assert abs(sum(ref["shares"]) - 1) < 1e-4
    assert score_reference("00" * 32) is None



def test_metrics_count_each_rules_hits_and_report_the_score_drift(served: Served) -> None:
    bodies = txs(1_100, seed=72)
    r = served.batches(bodies)[-1]
    fired: dict[str, int] = {}
    for d in r.json()["decisions"]:
        for h in d["fired"]:
            fired[h["id"]] = fired.get(h["id"], 0) + 1
    text = served.client.get("/metrics", headers={"x-test-role": "admin"}).text
    hits = {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("sealtrail_rule_hits_total{")}
    assert fired and all(hits[rule] >= n for rule, n in fired.items())  # the last batch's hits are in
    psi = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
           if line.startswith("sealtrail_score_psi ")]
    assert len(psi) == 1 and psi[0] >= 0
