"""Hostile checks of ``forward_source_fan_out`` (docs/graph-features.md row 23, docs/scoring.md column
59 of ``sealtrail.features/6`` and ``/7``): an independent re-derivation under the per-account and
global caps, late payments and self-payments; journals, rollbacks, restores and the
``sealtrail.graph/1`` graph; hash seeds; the extractor's column; the schemas a model may read; and
the words of ``FORWARDED_AMOUNT`` for records with and without the column."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from inference.errors import ModelError
from inference.explain import check_reasons, reasons
from inference.features import FeatureExtractor, StateDelta
from inference.graph import GRAPH_FEATURE_NAMES, GraphConfig, GraphFeatures, as_dict
from inference.graph.counted import CountedGraph
from inference.messages.transaction import R16, Party, Transaction
from inference.model import MlpModel, forward, load_npz, model_npz_bytes, shipped_model_dir
from inference.schema import (
    EXTRACTED_NAMES,
    FEATURE_NAMES,
    GRAPH_NAMES,
    SCREENING_NAMES,
    UnknownFeatureSchemaError,
    feature_names,
    model_columns,
)

H = 3_600_000_000
DAY = 24 * H
MIN = 60_000_000
T0 = 1_767_225_600_000_000  # 2026-01-01 00:00 UTC
FWD = ("forward_share_permille", "forward_delay_hours", "forward_source_fan_out")
ROOT = Path(__file__).resolve().parents[3]

Pay = tuple[str, str, int, int]


# --- an independent re-derivation under the caps ----------------------------------------------------

class _Ref:
    """The graph as the docs state it, over a flat list of edges ``[t, arrival, orig, bene, cents,
    in the originator's list, in the beneficiary's list]``: the window expires edges at or before
    ``watermark - window``; each account keeps its newest ``node_cap`` sent and received edges; past
    ``global_cap`` edges held (in either list) the oldest goes from both. Forwarding reads the
    originator's received edges in (t - 7 d, t), the smallest amount covering the payment, its latest
    edge (the last to arrive among those at the same time), and the distinct beneficiaries of that
    edge's sender's kept sent edges."""

    def __init__(self, cfg: GraphConfig) -> None:
        self.cfg = cfg
        self.edges: list[list[object]] = []
        self.wm: int | None = None
        self.seq = 0

    @staticmethod
    def _key(e: list[object]) -> tuple[int, int]:
        t, seq = e[0], e[1]
        assert isinstance(t, int) and isinstance(seq, int)
        return t, seq

    def observe(self, u: str, v: str, t: int, c: int) -> tuple[int, int, int]:
        cfg = self.cfg
        if self.wm is None or t > self.wm:
            self.wm = t
            for e in self.edges:
                if self._key(e)[0] <= t - cfg.window_us:
                    e[5] = e[6] = False
        got = sorted((e for e in self.edges if e[6] and e[3] == u and t - 7 * DAY < self._key(e)[0] < t
                      and isinstance(e[4], int) and e[4] >= c), key=self._key)
        value = (0, -1, -1)
        if got and c:
            best = min(int(str(e[4])) for e in got)
            chosen = [e for e in got if e[4] == best][-1]
            fan = len({e[3] for e in self.edges if e[5] and e[2] == chosen[2]})
            value = ((1000 * c) // best, (t - self._key(chosen)[0]) // H, fan)
        self.edges.append([t, self.seq, u, v, c, True, True])
        self.seq += 1
        out = sorted((e for e in self.edges if e[5] and e[2] == u), key=self._key)
        if len(out) > cfg.node_cap:
            out[0][5] = False
        inn = sorted((e for e in self.edges if e[6] and e[3] == v), key=self._key)
        if len(inn) > cfg.node_cap:
            inn[0][6] = False
        held = sorted((e for e in self.edges if e[5] or e[6]), key=self._key)
        if len(held) > cfg.global_cap:
            held[0][5] = held[0][6] = False
        self.edges = [e for e in self.edges if e[5] or e[6]]
        return value


def _config(rng: random.Random) -> GraphConfig:
    return GraphConfig(window_us=rng.choice([DAY, 3 * DAY, 10 * DAY, 30 * DAY]), scatter_us=H,
                       node_cap=rng.choice([1, 2, 3, 5, 1024]), global_cap=rng.choice([1, 2, 5, 20, 10**6]),
                       late_us=rng.choice([0, H, 6 * H]))


def _stream(rng: random.Random, cfg: GraphConfig, n: int) -> list[Pay]:
    """Few accounts (self-payments, round trips, senders paying their own senders), repeated amounts,
    payments at the same time and up to ``late_us`` late."""
    accounts = [f"A{i}" for i in range(rng.choice([2, 3, 5, 8]))]
    wm = T0
    out: list[Pay] = []
    for _ in range(n):
        if rng.random() < 0.3:
            t = wm - rng.randrange(0, cfg.late_us + 1)
        else:
            wm = t = wm + rng.choice([0, 1, H, 5 * H, DAY, 3 * DAY])
        cents = rng.choice([0, 100, 200, 500, 1000, 5000])
        out.append((rng.choice(accounts), rng.choice(accounts), t, cents))
    return out


@pytest.mark.parametrize("seed", range(120))
def test_matches_a_re_derivation_under_tiny_caps_late_and_self_payments(seed: int) -> None:
    rng = random.Random(seed)
    cfg = _config(rng)
    gf, ref = GraphFeatures(cfg), _Ref(cfg)
    for i, (u, v, t, c) in enumerate(_stream(rng, cfg, 250)):
        if rng.random() < 0.1:
            gf.flag(rng.choice([u, v]))  # flags change no forwarding value
        got = as_dict(gf.observe(u, v, t, c))
        want = ref.observe(u, v, t, c)
        assert tuple(got[n] for n in FWD) == want, (i, cfg, (u, v, t - T0, c))
        fan = got["forward_source_fan_out"]
        assert fan == -1 if got["forward_delay_hours"] < 0 else 1 <= fan <= cfg.node_cap


# --- caps, by hand ------------------------------------------------------------------------------------

def test_a_hub_sender_reads_at_most_its_per_account_cap() -> None:
    cfg = GraphConfig(node_cap=8)
    gf = GraphFeatures(cfg)
    for i in range(50):
        gf.observe("EMPLOYER", f"STAFF{i:02d}", T0 + i, 300_000)
    # STAFF00's salary left the employer's sent list (the cap keeps its newest 8) but not STAFF00's
    # received list: still forwarded, from a sender whose kept edges name 8 accounts (not STAFF00,
    # whatever row 23's "`u` among them" says: that holds only below the cap)
    for who in ("STAFF00", "STAFF41", "STAFF49"):
        got = as_dict(gf.observe(who, f"SAVINGS_{who}", T0 + H, 100_000))
        assert (got["forward_share_permille"], got["forward_source_fan_out"]) == (333, 8), who


def test_a_payroll_past_the_default_cap_reads_1024() -> None:
    gf = GraphFeatures()
    gf.observe_many([("EMPLOYER", f"STAFF{i:04d}", T0 + i, 300_000) for i in range(1100)])
    assert as_dict(gf.observe("STAFF0000", "SAVINGS", T0 + H, 1))["forward_source_fan_out"] == 1024


def test_under_the_global_cap_the_oldest_salary_is_gone_and_the_rest_count_what_is_held() -> None:
    cfg = GraphConfig(global_cap=10)
    gf = GraphFeatures(cfg)
    for i in range(20):
        gf.observe("EMPLOYER", f"STAFF{i:02d}", T0 + i, 300_000)
    assert gf.graph.edges_held == 10
    assert as_dict(gf.observe("STAFF00", "X", T0 + H, 100_000))["forward_source_fan_out"] == -1
    # the payment above is held too and pushed out STAFF10's salary: nine of the employer's are left
    assert as_dict(gf.observe("STAFF19", "Y", T0 + H, 100_000))["forward_source_fan_out"] == 9


def test_the_sender_whose_only_kept_edges_are_elsewhere_is_still_looked_up() -> None:
    gf = GraphFeatures(GraphConfig(node_cap=1))
    gf.observe("VICTIM", "MULE", T0, 500_000)
    gf.observe("VICTIM", "SHOP", T0 + 1, 1_000)  # the victim's list keeps this one alone
    got = as_dict(gf.observe("MULE", "COLLECTOR", T0 + H, 450_000))
    assert (got["forward_share_permille"], got["forward_source_fan_out"]) == (900, 1)


# --- who the sender is, by hand -----------------------------------------------------------------------

def test_a_self_payment_is_its_own_source_counted_before_the_payment() -> None:
    gf = GraphFeatures()
    gf.observe("U", "U", T0, 1_000)
    assert as_dict(gf.observe("U", "V", T0 + H, 500))["forward_source_fan_out"] == 1  # U itself; V not yet
    assert as_dict(gf.observe("U", "W", T0 + 2 * H, 400))["forward_source_fan_out"] == 2  # U and V


def test_paying_the_money_back_to_its_sender() -> None:
    gf = GraphFeatures()
    gf.observe("S", "U", T0, 1_000)
    gf.observe("S", "V", T0 + 1, 1_000)
    got = as_dict(gf.observe("U", "S", T0 + H, 900))  # a round trip: the sender's fan-out, U among it
    assert got["forward_source_fan_out"] == 2
    assert got["cycle_len"] == 2


def test_distinct_beneficiaries_not_payments() -> None:
    gf = GraphFeatures()
    for i in range(5):
        gf.observe("S", "U", T0 + i, 1_000 + i)
    gf.observe("S", "V", T0 + 10, 7)
    assert as_dict(gf.observe("U", "X", T0 + H, 1_000))["forward_source_fan_out"] == 2


def test_a_late_payment_counts_the_senders_whole_window_but_forwards_only_what_came_before() -> None:
    gf = GraphFeatures()
    gf.observe("S", "U", T0, 1_000)
    gf.observe("S", "X", T0 + 10 * MIN, 50)  # the watermark
    got = as_dict(gf.observe("U", "V", T0 + 7 * MIN, 800))  # 3 minutes late: S's later edge is in its window
    assert got["forward_source_fan_out"] == 2
    gf2 = GraphFeatures()
    gf2.observe("OTHER", "Z", T0 + 10 * MIN, 1)
    gf2.observe("S", "U", T0 + 9 * MIN, 1_000)
    assert as_dict(gf2.observe("U", "V", T0 + 8 * MIN, 800))["forward_source_fan_out"] == -1  # came after


def test_the_latest_of_equal_amounts_is_the_last_to_arrive_late_ones_included() -> None:
    def run(first: str, second: str, late: bool) -> int:
        gf = GraphFeatures()
        for i in range(3):
            gf.observe("B", f"B{i}", T0, 1)  # B paid three accounts besides U; A none
        gf.observe(first, "U", T0 + 2 * MIN, 1_000)
        if late:
            gf.observe("C", "D", T0 + 5 * MIN, 1)  # the watermark moves on
        gf.observe(second, "U", T0 + 2 * MIN, 1_000)  # the same time, arriving last (late or not)
        return as_dict(gf.observe("U", "V", T0 + H, 900))["forward_source_fan_out"]

    for late in (False, True):
        assert run("A", "B", late) == 4
        assert run("B", "A", late) == 1


def test_an_amount_older_than_seven_days_is_not_forwarded_though_held() -> None:
    gf = GraphFeatures()
    gf.observe("S", "U", T0, 1_000)
    assert as_dict(gf.observe("U", "V", T0 + 7 * DAY, 500))["forward_source_fan_out"] == -1
    # a payment 1 µs late, just inside the week, forwards it
    assert as_dict(gf.observe("U", "V", T0 + 7 * DAY - 1, 500))["forward_source_fan_out"] == 1


def test_the_sealed_observe_gives_the_same_value() -> None:
    rng = random.Random(5)
    cfg = _config(rng)
    pays = _stream(rng, cfg, 300)
    a, b = GraphFeatures(cfg), GraphFeatures(cfg)
    a.flag("A1")
    b.flag("A1")
    k = GRAPH_FEATURE_NAMES.index("forward_source_fan_out")
    assert [v[k] for v in a.observe_many(pays)] == [b.observe_sealed(*p)[k] for p in pays]


# --- journals, restores, the sealtrail.graph/1 graph ------------------------------------------------------

def test_a_rolled_back_batch_takes_back_the_senders_beneficiaries() -> None:
    gf = GraphFeatures()
    gf.observe("S", "U", T0, 1_000)
    before = gf.state_bytes()
    j = gf.begin_journal()
    gf.observe_many([("S", "X", T0 + 1, 5), ("S", "Y", T0 + 2, 5), ("NEW", "S", T0 + 3, 5)])
    gf.end_journal()
    gf.rollback([j])
    assert gf.state_bytes() == before
    assert as_dict(gf.observe("U", "V", T0 + H, 900))["forward_source_fan_out"] == 1


def test_a_rolled_back_expiry_brings_the_sender_back() -> None:
    cfg = GraphConfig(window_us=2 * DAY, scatter_us=DAY)
    gf = GraphFeatures(cfg)
    gf.observe("S", "U", T0, 1_000)
    gf.observe("S", "W", T0 + 1, 1_000)
    j = gf.begin_journal()
    gf.observe("P", "Q", T0 + 3 * DAY, 1)  # expires both of S's edges: S and U let go
    assert gf.graph.get("S") is None
    gf.end_journal()
    gf.rollback([j])
    assert as_dict(gf.observe("U", "V", T0 + H, 900))["forward_source_fan_out"] == 2


@pytest.mark.parametrize("seed", range(25))
def test_journals_rollbacks_restores_and_the_counted_graph_give_the_plain_values(seed: int) -> None:
    rng = random.Random(1000 + seed)
    cfg = _config(rng)
    pays = _stream(rng, cfg, 150)
    plain = GraphFeatures(cfg)
    want = plain.observe_many(pays)
    assert GraphFeatures(cfg, CountedGraph).observe_many(pays) == want
    gf = GraphFeatures(cfg)
    got: list[tuple[int, ...]] = []
    i = 0
    while i < len(pays):
        k = rng.randint(1, 6)
        if rng.random() < 0.5:  # a batch whose commit failed: journaled, observed, rolled back
            before = gf.state_bytes()
            wm = gf.graph.watermark or T0
            junk: list[Pay] = []
            for _ in range(rng.randint(1, 5)):
                wm += rng.choice([0, 1, DAY, 40 * DAY])
                junk.append((rng.choice(["A0", "A1", "Z1", "Z2"]), rng.choice(["A0", "Z1"]), wm,
                             rng.choice([0, 100, 10**6])))
            journals = [gf.begin_journal()]
            gf.observe_many(junk[:-1])
            gf.end_journal()
            journals.append(gf.begin_journal())
            gf.observe_many(junk[-1:])
            gf.end_journal()
            gf.rollback(journals)
            assert gf.state_bytes() == before
        if rng.random() < 0.3:
            gf = GraphFeatures.restore(gf.state_bytes(), cfg)
        journal = rng.random() < 0.5
        if journal:
            gf.begin_journal()
        got += gf.observe_many(pays[i:i + k])
        if journal:
            gf.end_journal()
        i += k
    assert got == want
    assert gf.state_bytes() == plain.state_bytes()


def test_a_restore_of_sealtrail_graph_1_state_gives_the_same_values() -> None:
    rng = random.Random(77)
    cfg = GraphConfig(window_us=10 * DAY, scatter_us=H, node_cap=3, global_cap=60, late_us=H)
    pays = _stream(rng, cfg, 300)
    counted, plain = GraphFeatures(cfg, CountedGraph), GraphFeatures(cfg)
    counted.observe_many(pays[:200])
    plain.observe_many(pays[:200])
    v1 = counted.state_bytes()
    assert b"sealtrail.graph/1" in v1
    from_v1 = GraphFeatures.restore(v1, cfg)
    still_v1 = GraphFeatures.restore(v1, cfg, graph=CountedGraph)
    renamed = GraphFeatures.restore(plain.state_bytes(), cfg, rename=lambda k: "k:" + k)
    want = plain.observe_many(pays[200:])
    k = GRAPH_FEATURE_NAMES.index("forward_source_fan_out")
    assert any(v[k] > 1 for v in want)
    assert from_v1.observe_many(pays[200:]) == want
    assert still_v1.observe_many(pays[200:]) == want
    assert renamed.observe_many([("k:" + o, "k:" + b, t, c) for o, b, t, c in pays[200:]]) == want


# --- hash seeds ---------------------------------------------------------------------------------------

_SCRIPT = """
import json, random
from inference.graph import GraphConfig, GraphFeatures
rng = random.Random(3)
keys = ["acct-%x" % rng.getrandbits(64) for _ in range(40)]
gf = GraphFeatures(GraphConfig(node_cap=6, global_cap=300))
t, vals = 1_767_225_600_000_000, []
for i in range(1500):
    t += rng.choice([0, 1, 600_000_000, 3_600_000_000])
    vals.append(gf.observe(rng.choice(keys), rng.choice(keys), t, rng.choice([100, 500, 900, 1000]))[-1])
print(json.dumps([vals, gf.graph.state_sha256()]))
"""


def test_the_same_stream_in_other_hash_seeds_gives_the_same_values() -> None:
    runs = []
    for seed in ("0", "1", "987654"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120, check=True)
        runs.append(json.loads(done.stdout))
    assert runs[0] == runs[1] == runs[2]
    assert any(v > 1 for v in runs[0][0]) and -1 in runs[0][0]


# --- the extractor ------------------------------------------------------------------------------------

def _tx(orig: str, bene: str, amount: str) -> Transaction:
    o = Party(name="Alice", account=orig, iban=orig, country=orig[:2])
    b = Party(name="Bob", account=bene, iban=bene, country=bene[:2])
    return Transaction("json", "R", Decimal(amount), "EUR", date(2026, 3, 2), o, b, "0" * 64,
                       r16=R16.of(o, b))


VICTIM, MULE, COLLECTOR = "DE89370400440532013000", "DE02120300000000202051", "DE12500105170648489890"
SHOP = "FR1420041010050500013M02606"


def test_column_59_of_the_extracted_and_sealed_rows_and_nan_with_the_graph() -> None:
    name = "forward_source_fan_out"
    assert EXTRACTED_NAMES.index(name) == 59 == FEATURE_NAMES.index(name)
    assert feature_names("sealtrail.features/5")[59] == "screen_lists"
    assert FEATURE_NAMES[60:] == SCREENING_NAMES
    at = datetime(2026, 3, 2, 8, tzinfo=UTC)
    fx = FeatureExtractor()
    txs = [_tx(VICTIM, MULE, "5000.00"), _tx(VICTIM, SHOP, "20.00"), _tx(MULE, COLLECTOR, "4600.00")]
    rows = fx.extract(txs, [at, at + timedelta(minutes=1), at + timedelta(hours=1)])
    assert rows.shape == (3, 60)
    assert rows[:, 59].tolist() == [-1.0, -1.0, 2.0]
    assert rows[2, 57] == 920 and rows[2, 58] == 1
    late = fx.extract([_tx(VICTIM, MULE, "10.00")], [at])  # 1 h behind the latest seen: graph NaN
    assert all(math.isnan(late[0, EXTRACTED_NAMES.index(n)]) for n in GRAPH_NAMES)
    assert not math.isnan(late[0, 0])


def test_deltas_replayed_by_another_extractor_give_the_same_column() -> None:
    at = datetime(2026, 3, 2, 8, tzinfo=UTC)
    txs = [_tx(VICTIM, MULE, "5000.00"), _tx(VICTIM, SHOP, "20.00"), _tx(SHOP, MULE, "1.00"),
           _tx(MULE, COLLECTOR, "4600.00")]
    times = [at, at + timedelta(minutes=1), at + timedelta(minutes=2), at + timedelta(hours=1)]
    first = FeatureExtractor()
    deltas: list[StateDelta] = []
    rows = first.extract(txs, times, deltas=deltas)
    second = FeatureExtractor()
    assert second.advance(deltas[:3]) == 3
    again = second.extract(txs[3:], times[3:])
    assert rows[3, 59] == again[0, 59] == 2
    by_ids = FeatureExtractor().extract(txs, times, ids=[(o, b) for o, b, _, _ in deltas])
    assert np.array_equal(by_ids, rows, equal_nan=True)
    assert second.graph.state_bytes() == first.graph.state_bytes()


# --- the schemas a model reads --------------------------------------------------------------------------

def _model(schema: str) -> MlpModel:
    return MlpModel.init(np.random.default_rng(0), feature_names=feature_names(schema), feature_schema=schema)


def test_a_features_6_model_refuses_a_features_5_row_and_a_features_4_model_reads_a_features_7_row() -> None:
    f4, f6 = feature_names("sealtrail.features/4"), feature_names("sealtrail.features/6")
    with pytest.raises(UnknownFeatureSchemaError,
                       match=r"the model's 60 features are not the leading columns of sealtrail\.features/5"):
        model_columns(f6, "sealtrail.features/5")
    assert model_columns(f4, "sealtrail.features/7") == model_columns(f4, "sealtrail.features/5") == 59
    assert model_columns(f6, "sealtrail.features/7") == model_columns(f6, "sealtrail.features/6") == 60
    assert load_npz(model_npz_bytes(_model("sealtrail.features/4"))).n_features == 59
    assert load_npz(model_npz_bytes(_model("sealtrail.features/6"))).n_features == 60


def test_a_features_5_model_is_refused_rather_than_reading_a_screening_column_as_the_fan_out() -> None:
    with pytest.raises(UnknownFeatureSchemaError, match=r"66 features are not the leading columns"):
        model_columns(feature_names("sealtrail.features/5"), "sealtrail.features/7")
    with pytest.raises(ModelError, match=r"not the leading columns of sealtrail\.features/7"):
        load_npz(model_npz_bytes(_model("sealtrail.features/5")))


def test_the_shipped_model_reads_column_59_and_not_the_screening_columns() -> None:
    model = load_npz(shipped_model_dir() / "weights.npz")
    assert model.feature_schema == "sealtrail.features/6" and model.feature_names == EXTRACTED_NAMES
    row = np.zeros((3, len(FEATURE_NAMES)))
    row[:, FEATURE_NAMES.index("forward_share_permille")] = 920
    row[:, FEATURE_NAMES.index("forward_delay_hours")] = 1
    row[:, 59] = [1, 40, 1]
    row[2, 60:] = 7  # screening columns, which the model does not read
    width = model_columns(model.feature_names, "sealtrail.features/7")
    scores = forward(model, row[:, :width])
    assert scores[0] != scores[1] and scores[0] == scores[2]


# --- the words -------------------------------------------------------------------------------------

def _words(names: tuple[str, ...], **values: float) -> str:
    row = np.zeros(len(names))
    attr = np.zeros(len(names))
    for n, v in values.items():
        row[names.index(n)] = v
    attr[names.index("forward_share_permille")] = 0.3
    got = reasons(names, row, attr)
    assert got[0].code == "FORWARDED_AMOUNT"
    return got[0].text


def test_a_features_5_record_keeps_its_words_whatever_its_column_59() -> None:
    f5 = feature_names("sealtrail.features/5")
    old = "the sender passed on 92.0% of an amount it received, 1 hour after it came in"
    # column 59 of a features/5 row is screen_lists: three lists is not "paid 3 accounts"
    assert _words(f5, forward_share_permille=920, forward_delay_hours=1, screen_lists=3) == old
    f4 = feature_names("sealtrail.features/4")
    assert _words(f4, forward_share_permille=920, forward_delay_hours=1) == old
    row = np.zeros(len(f5))
    attr = np.zeros(len(f5))
    row[f5.index("forward_share_permille")], row[f5.index("forward_delay_hours")], row[59] = 920, 1, 3
    attr[f5.index("forward_share_permille")] = 0.3
    recorded = reasons(f5, row, attr)
    assert check_reasons(f5, row, attr, recorded, 1e-3) is None
    forged = [type(recorded[0])(recorded[0].code, recorded[0].contribution_milli,
                                old + ", from an account that paid 3 accounts in 30 days")]
    assert "reads" in str(check_reasons(f5, row, attr, forged, 1e-3))


def test_a_features_4_model_on_a_features_7_row_reads_the_old_words() -> None:
    f4 = feature_names("sealtrail.features/4")
    row7 = np.zeros(len(FEATURE_NAMES))
    row7[FEATURE_NAMES.index("forward_share_permille")] = 500
    row7[FEATURE_NAMES.index("forward_delay_hours")] = 30
    row7[59] = 40
    attr = np.zeros(len(f4))
    attr[f4.index("forward_delay_hours")] = 0.05
    (got,) = reasons(f4, row7[:model_columns(f4)], attr)
    assert got.text == "the sender passed on 50.0% of an amount it received, 30 hours after it came in"


@pytest.mark.parametrize(("fan", "tail"), [
    (1, ", from an account that paid 1 account in 30 days"),
    (2, ", from an account that paid 2 accounts in 30 days"),
    (1024, ", from an account that paid 1024 accounts in 30 days"),
    (0, ""), (-1, ""), (math.nan, ""),
])
def test_the_words_of_each_value_of_the_column(fan: float, tail: str) -> None:
    for names in (FEATURE_NAMES, EXTRACTED_NAMES, feature_names("sealtrail.features/6")):
        got = _words(names, forward_share_permille=999, forward_delay_hours=0, forward_source_fan_out=fan)
        assert got == "the sender passed on 99.9% of an amount it received, within the hour" + tail
    # nothing forwarded: the column's value changes nothing
    assert _words(FEATURE_NAMES, forward_delay_hours=-1, forward_source_fan_out=fan) == (
        "the sender received no amount as large in the 7 days before")
