"""Hostile checks of the forwarding columns of ``sealtrail.features/4`` (``forward_share_permille``,
``forward_delay_hours``): the definition in docs/graph-features.md against the code at the window
edges, under late payments, self-transfers, zero and equal amounts and the caps; determinism
(batching, journal and rollback, state bytes, hash seed); the extractor against state-delta
catch-up; and the ``FORWARDED_AMOUNT`` reason's words."""

from __future__ import annotations

import hashlib
import math
import os
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from inference.explain import Reason, _forward_text, check_reasons, reasons
from inference.features import FeatureExtractor, StateDelta
from inference.graph import GraphConfig, GraphFeatures, as_dict
from inference.messages.transaction import R16, Party, Transaction
from inference.schema import FEATURE_NAMES, feature_names
from inference.velocity import VelocityState
from tests.inference.graph.test_reference import _forward

H = 3_600_000_000
DAY = 24 * H
T0 = 1_767_225_600_000_000
LATE = GraphConfig().late_us
ROOT = Path(__file__).parents[3]
Pay = tuple[str, str, int, int]


def _fwd(got: dict[str, int]) -> tuple[int, int]:
    return got["forward_share_permille"], got["forward_delay_hours"]


def _stream(seed: int, n: int = 300, names: int = 6) -> list[Pay]:
    """Payments with late arrivals, same microseconds, self-transfers, zero and repeated amounts."""
    rng = random.Random(seed)
    keys = [f"N{i}" for i in range(names)]
    wm, out = T0, []
    for _ in range(n):
        wm += rng.choice([0, 1, rng.randrange(H), rng.randrange(DAY)])
        t = wm - (rng.randrange(LATE + 1) if rng.random() < 0.2 else 0)
        u = rng.choice(keys)
        v = u if rng.random() < 0.1 else rng.choice(keys)
        out.append((u, v, t, rng.choice([0, 1, 500, 1000, rng.randrange(2000)])))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_values_match_the_definition_with_late_payments_self_transfers_and_zero_amounts(seed: int) -> None:
    gf = GraphFeatures()
    seen: list[Pay] = []
    for u, v, t, c in _stream(seed):
        want = _forward(seen, u, t, c)  # the slow definition; later edges are outside (t - 7 d, t)
        assert _fwd(as_dict(gf.observe(u, v, t, c))) == want
        seen.append((u, v, t, c))


def test_window_edges_exactly_seven_days_and_one_microsecond_inside() -> None:
    gf = GraphFeatures()
    gf.observe("A", "M", T0, 1_000)
    gf.observe("B", "M", T0 + 1, 2_000)
    # at T0 + 7 d the first edge is exactly 7 days back (outside); the second is 1 µs inside
    assert _fwd(as_dict(gf.observe("M", "X", T0 + 7 * DAY, 900))) == (450, 167)
    assert _fwd(as_dict(gf.observe("M", "X", T0 + 7 * DAY + 1, 900))) == (0, -1)


def test_a_late_payment_leaves_out_later_edges_and_equal_amounts_read_the_latest() -> None:
    gf = GraphFeatures()
    gf.observe("A", "M", T0, 500)
    gf.observe("B", "M", T0 + 2 * H, 500)
    gf.observe("C", "M", T0 + 3 * H, 400)  # the watermark; the next payment is late, behind it
    gf.observe("D", "M", T0 + 3 * H - 60_000_000, 500)  # late, in time order: now the latest 500
    late = as_dict(gf.observe("M", "X", T0 + 3 * H - 2 * 60_000_000, 450))  # before D's and C's edges
    assert _fwd(late) == (900, 0)  # B's 500 at T0 + 2 h, 58 minutes before
    assert _fwd(as_dict(gf.observe("M", "X", T0 + 5 * H, 450))) == (900, 2)  # D's 500, the latest


def test_a_self_transfer_is_matched_by_nothing_before_it_but_is_an_amount_received_after() -> None:
    gf = GraphFeatures()
    assert _fwd(as_dict(gf.observe("M", "M", T0, 1_000))) == (0, -1)
    assert _fwd(as_dict(gf.observe("M", "X", T0 + H, 990))) == (990, 1)


def test_the_per_account_cap_hides_an_older_covering_amount() -> None:
    gf = GraphFeatures(GraphConfig(node_cap=2))
    gf.observe("A", "M", T0, 10_000)
    gf.observe("B", "M", T0 + H, 100)
    gf.observe("C", "M", T0 + 2 * H, 200)  # M keeps its newest two received edges
    assert _fwd(as_dict(gf.observe("M", "X", T0 + 3 * H, 5_000))) == (0, -1)
    assert _fwd(as_dict(gf.observe("M", "X", T0 + 3 * H, 150))) == (750, 1)


def test_expiry_keeps_a_received_edge_inside_the_window_behind_edges_the_caps_dropped() -> None:
    gf = GraphFeatures(GraphConfig(node_cap=1))
    gf.observe("A", "M", T0, 500)  # dropped from both lists by the next payment: held by neither
    gf.observe("A", "M", T0 + 25 * DAY, 1_000)  # held; 5 days before the payment below
    got = as_dict(gf.observe("M", "Z", T0 + 30 * DAY, 900))  # expires the first edge (at the horizon)
    assert _fwd(got) == (900, 120)
    assert got["orig_fan_in_30d"] == 1


def test_restored_state_gives_the_same_forwarding_after_cap_dropped_edges() -> None:
    gf = GraphFeatures(GraphConfig(node_cap=1))
    gf.observe("A", "M", T0, 500)
    gf.observe("A", "M", T0 + 25 * DAY, 1_000)
    copy = GraphFeatures.restore(gf.state_bytes(), GraphConfig(node_cap=1))
    assert copy.state_bytes() == gf.state_bytes()
    assert gf.observe("M", "Z", T0 + 30 * DAY, 900) == copy.observe("M", "Z", T0 + 30 * DAY, 900)


def _digest(values: list[tuple[int, ...]], gf: GraphFeatures) -> str:
    h = hashlib.sha256(repr(values).encode())
    h.update(gf.state_bytes())
    return h.hexdigest()


def test_batching_journal_rollback_and_restore_change_nothing() -> None:
    cfg = GraphConfig(global_cap=60)  # the global cap lets accounts go and they are seen again
    pays = _stream(7, 400, 40)
    whole = GraphFeatures(cfg)
    want = whole.observe_many(pays)
    for size in (1, 7, 1024):
        gf = GraphFeatures(cfg)
        got = [v for i in range(0, len(pays), size) for v in gf.observe_many(pays[i:i + size])]
        assert _digest(got, gf) == _digest(want, whole)
    rng = random.Random(3)
    gf, got = GraphFeatures(cfg), []
    for i in range(0, len(pays), 25):
        if rng.random() < 0.4:  # a batch whose commit failed: taken back, then the real one
            j = gf.begin_journal()
            gf.observe_many([(v, u, t, c + 7) for u, v, t, c in pays[i:i + 10]])
            gf.end_journal()
            gf.rollback([j])
        if rng.random() < 0.3:
            gf = GraphFeatures.restore(gf.state_bytes(), cfg)
        got += gf.observe_many(pays[i:i + 25])
    assert _digest(got, gf) == _digest(want, whole)


def test_values_do_not_depend_on_the_hash_seed() -> None:
    code = ("import hashlib,sys;sys.path.insert(0,sys.argv[1]);"
            "from tests.inference.graph.test_forwarding_hostile import _stream;"
            "from inference.graph import GraphFeatures, GraphConfig;"
            "gf=GraphFeatures(GraphConfig(global_cap=60));v=gf.observe_many(_stream(7,400,40));"
            "print(hashlib.sha256(repr(v).encode()+gf.state_bytes()).hexdigest())")
    gf = GraphFeatures(GraphConfig(global_cap=60))
    here = hashlib.sha256(repr(gf.observe_many(_stream(7, 400, 40))).encode() + gf.state_bytes()).hexdigest()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code, str(ROOT)], env=env, capture_output=True,
                             text=True, check=True, cwd=ROOT)
        assert out.stdout.strip() == here


def _tx(orig: str | None, bene: str | None, amount: str, currency: str = "USD") -> Transaction:
    o = Party(name="A", account=orig, iban=orig, country="DE", address_lines=("1 Main St",))
    b = Party(name="B", account=bene, iban=bene, country="DE")
    return Transaction("json", "R", Decimal(amount), currency, datetime(2026, 3, 2).date(), o, b, "0" * 64,
                       r16=R16.of(o, b))


def test_the_extractor_and_state_delta_catch_up_agree_and_unknowns_read_nan() -> None:
    at0 = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
    acct = [f"DE{n:020d}" for n in range(4)]
    rng = random.Random(5)
    txs, times = [], []
    for i in range(120):
        u, v = rng.choice(acct), rng.choice(acct)
        txs.append(_tx(u, v, rng.choice(["100.00", "98.50", "0", "1000.00", f"{rng.randrange(5000)}.00"])))
        times.append(at0 + timedelta(hours=3 * i))
    txs += [_tx(None, acct[0], "50.00"), _tx(acct[1], acct[0], "12.50", "XAU"),
            _tx(acct[0], acct[2], "40.00")]
    end = times[-1]
    times += [end + timedelta(hours=1), end + timedelta(hours=2), end - timedelta(minutes=10)]
    cols = [FEATURE_NAMES.index("forward_share_permille"), FEATURE_NAMES.index("forward_delay_hours")]
    key = bytes(range(32))
    fe = FeatureExtractor(state=VelocityState(key))
    deltas: list[StateDelta] = []
    rows = fe.extract(txs, times, deltas=deltas)
    one = FeatureExtractor(state=VelocityState(key))
    single = np.vstack([one.extract([t], [a]) for t, a in zip(txs, times, strict=True)])
    assert np.array_equal(rows, single, equal_nan=True)
    assert np.isnan(rows[-3:, cols]).all()  # unknown account, no USD value, more than 5 minutes late
    assert not np.isnan(rows[:-3, cols]).any() and (rows[:-3, cols[0]] > 0).any()
    caught_up = FeatureExtractor(state=VelocityState(key))
    assert caught_up.advance(deltas) == len(txs)
    assert caught_up.graph.state_bytes() == fe.graph.state_bytes() == one.graph.state_bytes()
    later = [_tx(acct[0], acct[3], "10.00")]
    at = times[-2] + timedelta(hours=1)
    assert np.array_equal(caught_up.extract(later, at), fe.extract(later, at), equal_nan=True)


@pytest.mark.parametrize(("share", "hours", "text"), [
    (985, 30, "the sender passed on 98.5% of an amount it received, 30 hours after it came in"),
    (1000, 0, "the sender passed on 100.0% of an amount it received, within the hour"),
    (800, 1, "the sender passed on 80.0% of an amount it received, 1 hour after it came in"),
    (1, 167, "the sender passed on 0.1% of an amount it received, 167 hours after it came in"),
    (0, -1, "the sender received no amount as large in the 7 days before"),
])
def test_forward_text_at_the_edges(share: int, hours: int, text: str) -> None:
    values = {"forward_share_permille": float(share), "forward_delay_hours": float(hours)}
    assert _forward_text(values) == text


def test_forward_text_of_a_nan_row_is_words_not_an_error() -> None:
    assert _forward_text({"forward_share_permille": math.nan, "forward_delay_hours": math.nan})


def test_a_share_floored_to_zero_is_not_worded_as_no_amount_received() -> None:
    gf = GraphFeatures()
    gf.observe("A", "M", T0, 1_000_000)  # USD 10,000 in
    got = as_dict(gf.observe("M", "X", T0 + 5 * H, 100))  # USD 1 out: 0.01 %
    assert _fwd(got) == (0, 5)
    text = _forward_text({k: float(v) for k, v in got.items()})
    assert "no amount" not in text and "5 hours" in text


def test_a_recorded_forwarded_amount_reason_round_trips_through_check_reasons() -> None:
    row = np.zeros(len(FEATURE_NAMES))
    row[FEATURE_NAMES.index("forward_share_permille")] = 985
    row[FEATURE_NAMES.index("forward_delay_hours")] = 30
    attr = np.zeros(len(FEATURE_NAMES))
    attr[FEATURE_NAMES.index("forward_share_permille")] = 0.2
    attr[FEATURE_NAMES.index("forward_delay_hours")] = 0.05
    attr[FEATURE_NAMES.index("scatter_gather")] = 0.25  # a tie at 250 milli: FORWARDED_AMOUNT comes first
    got = reasons(FEATURE_NAMES, row, attr)
    text = "the sender passed on 98.5% of an amount it received, 30 hours after it came in"
    assert got[:2] == [Reason("FORWARDED_AMOUNT", 250, text), Reason("SCATTER_GATHER", 250, got[1].text)]
    assert check_reasons(FEATURE_NAMES, row, attr, got, 1e-4) is None
    bad = [Reason("FORWARDED_AMOUNT", 250, text.replace("98.5", "99.5")), got[1]]
    assert "reads" in (check_reasons(FEATURE_NAMES, row, attr, bad, 1e-4) or "")
    v3 = feature_names("sealtrail.features/3")  # a features/3 record cannot carry the code
    said = check_reasons(v3, row[:len(v3)], attr[:len(v3)], got, 1e-4) or ""
    assert "FORWARDED_AMOUNT" in said and "not one this model's columns can give" in said
