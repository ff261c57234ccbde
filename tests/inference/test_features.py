"""Feature rows: the schema contract, known answers, determinism and restart."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.errors import FeatureError
from inference.features import FeatureExtractor, features_sha256, row_dict
from inference.messages.transaction import R16, Agent, Party, Transaction
from inference.reference_tables import default_tables, load_table
from inference.schema import EXTRACTED_NAMES, FEATURE_NAMES, GRAPH_NAMES, RULE_FEATURE_NAMES, SCREENING_NAMES
from inference.state_store import (
    features_state_bytes,
    load_features_state,
    load_state,
    save_features_state,
    save_state,
)
from inference.velocity import VelocityState
from wasm_rules.language import parse_ruleset

T0 = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)  # a Monday
PACK = Path(__file__).parents[2] / "wasm_rules" / "packs" / "aml_core.toml"


def iban(n: int, country: str = "DE") -> str:
    return f"{country}{n:020d}"


def tx(orig: str | None, bene: str | None, amount: str = "100.00", currency: str = "USD", *,
       o_country: str | None = "DE", b_country: str | None = "DE", ref: str = "R",
       agents: tuple[Agent, ...] = (), o_name: str | None = "Alice") -> Transaction:
    o = Party(name=o_name, account=orig, iban=orig, country=o_country, address_lines=("1 Main St",))
    b = Party(name="Bob", account=bene, iban=bene, country=b_country)
    return Transaction("json", ref, Decimal(amount), currency, T0.date(), o, b, "0" * 64,
                       agents=agents, r16=R16.of(o, b))


def one(fe: FeatureExtractor, t: Transaction, at: datetime) -> dict[str, float | None]:
    return row_dict(fe.extract([t], [at])[0])


def test_schema_is_the_rule_packs_feature_contract() -> None:
    pack = parse_ruleset(PACK.read_text())
    assert pack.features == RULE_FEATURE_NAMES
    assert dict(pack.feature_tables) == default_tables().ids


def test_static_features_known_answers() -> None:
    fe = FeatureExtractor()
    r = one(fe, tx(iban(1), iban(2), "9000.00", "EUR", b_country="IR"), T0)
    # 9,000 EUR * 1.1630 USD/EUR (ecb-2025-10), to the cent
    assert r["amount_usd"] == 10467.0
    assert r["log_amount_usd"] == pytest.approx(math.log10(10468.0), abs=0)
    assert r["round_amount"] == 1.0 and r["cross_border"] == 1.0
    assert (r["orig_country_risk"], r["bene_country_risk"]) == (0.0, 2.0)
    assert r["hour_utc"] == 9.0 and r["weekend"] == 0.0
    # JPY has no minor units; 1,500,000 JPY -> USD at 1.1630 / 176.10
    r = one(fe, tx(iban(3), iban(4), "1500000", "JPY", b_country="VN"), T0 + timedelta(days=5, hours=14))
    assert r["amount_usd"] == float((Decimal(1500000) * Decimal("1.1630") / Decimal("176.10")).quantize(
        Decimal("0.01")))
    assert r["bene_country_risk"] == 1.0 and r["round_amount"] == 1.0
    assert r["hour_utc"] == 23.0 and r["weekend"] == 1.0  # Saturday 23:30 UTC


def test_unknowns_are_nan_not_zero() -> None:
    fe = FeatureExtractor()
    r = one(fe, tx(None, None, "12.50", "XAU", o_country=None, b_country="ZZ"), T0)
    assert r["amount_usd"] is None and r["log_amount_usd"] is None  # currency not in the FX table
    assert r["cross_border"] is None and r["orig_country_risk"] is None and r["bene_country_risk"] is None
    assert r["round_amount"] == 0.0
    assert r["orig_count_24h"] is None and r["bene_sum_usd_7d"] is None and r["new_counterparty"] is None
    assert r["orig_account_present"] == 0.0 and r["bene_account_present"] == 0.0


def test_country_falls_back_to_iban_then_bank_bic() -> None:
    fe = FeatureExtractor()
    agents = (Agent("creditor_agent", bic="BKCHCNBJXXX"),)
    r = one(fe, tx("FR7630006000011234567890189", None, o_country=None, b_country=None, agents=agents), T0)
    assert r["cross_border"] == 1.0  # FR (from the IBAN) -> CN (from the beneficiary's bank)


@pytest.mark.requirement("BSA-1010.410f-travel", "FATF-R16-originator")
def test_r16_flags_follow_the_message() -> None:
    fe = FeatureExtractor()
    r = one(fe, tx(iban(1), iban(2), o_name=None), T0)
    assert r["orig_name_present"] == 0.0 and r["orig_account_present"] == 1.0
    assert r["orig_address_or_id_present"] == 1.0 and r["bene_name_present"] == 1.0


def test_velocity_windows_are_half_open_and_include_the_current_transfer() -> None:
    fe = FeatureExtractor()
    a, b, c = iban(1), iban(2), iban(3)
    plan = [(0, a, b, "100.00"), (30, a, c, "200.00"), (60, a, b, "300.00"), (60 * 24 + 30, a, b, "400.00")]
    rows = [one(fe, tx(o, x, amt), T0 + timedelta(minutes=m)) for m, o, x, amt in plan]
    assert [r["orig_count_1h"] for r in rows] == [1, 2, 2, 1]  # at +60 min the first one is exactly 1 h old
    assert [r["orig_count_24h"] for r in rows] == [1, 2, 3, 2]
    assert [r["orig_sum_usd_24h"] for r in rows] == [100, 300, 600, 700]
    assert [r["orig_count_7d"] for r in rows] == [1, 2, 3, 4]
    assert [r["bene_count_24h"] for r in rows] == [1, 1, 2, 2]  # b received at 0, 60, 1470 min
    assert [r["orig_distinct_counterparties_24h"] for r in rows] == [1, 2, 2, 1]
    assert [r["new_counterparty"] for r in rows] == [1, 1, 0, 0]


def test_near_threshold_in_out_and_new_counterparty_after_seven_days() -> None:
    fe = FeatureExtractor()
    a, b, m = iban(1), iban(2), iban(9)
    one(fe, tx(b, m, "9500.00"), T0)  # m receives from b
    r = one(fe, tx(m, a, "8000.00"), T0 + timedelta(hours=2))  # ... and sends on within 24 h
    assert r["orig_in_out_24h"] == 1.0 and r["bene_in_out_24h"] == 0.0
    assert r["orig_near_threshold_count_24h"] == 1.0
    r = one(fe, tx(m, a, "9999.99"), T0 + timedelta(hours=3))
    assert r["orig_near_threshold_count_24h"] == 2.0 and r["bene_near_threshold_count_24h"] == 2.0
    r = one(fe, tx(m, a, "10000.00"), T0 + timedelta(hours=4))  # 10,000 is at the threshold, not near it
    assert r["orig_near_threshold_count_24h"] == 2.0 and r["new_counterparty"] == 0.0
    r = one(fe, tx(m, a, "5.00"), T0 + timedelta(days=7, hours=4))  # a's last payment from m is 7 days old
    assert r["new_counterparty"] == 1.0 and r["orig_in_out_24h"] == 0.0 and r["orig_count_7d"] == 1.0


def _stream(n: int, seed: int = 3) -> tuple[list[Transaction], list[datetime]]:
    rng = np.random.default_rng(seed)
    accounts = [iban(i) for i in range(40)]
    txs, ats = [], []
    t = T0
    for i in range(n):
        o, b = rng.choice(len(accounts), 2, replace=False)
        cur = ("USD", "EUR", "GBP", "JPY")[int(rng.integers(4))]
        amount = str(int(rng.integers(1, 2_000_000))) if cur == "JPY" else f"{rng.uniform(1, 12000):.2f}"
        country = ("DE", "FR", "IR")[i % 3]
        txs.append(tx(accounts[o], accounts[b], amount, cur, b_country=country, ref=f"R{i}"))
        t += timedelta(seconds=float(rng.exponential(900)))
        ats.append(t)
    return txs, ats


def test_rows_are_deterministic_and_independent_of_batching() -> None:
    txs, ats = _stream(600)
    whole = FeatureExtractor().extract(txs, ats)
    fe = FeatureExtractor()
    parts = np.vstack([fe.extract(txs[i:i + 37], ats[i:i + 37]) for i in range(0, 600, 37)])
    assert whole.shape == (600, len(EXTRACTED_NAMES)) and whole.dtype == np.float64
    assert whole.tobytes() == parts.tobytes()
    assert [features_sha256(r) for r in whole] == [features_sha256(r) for r in parts]


def test_restart_from_a_snapshot_file_gives_the_same_rows(tmp_path: Path) -> None:
    txs, ats = _stream(800)
    reference = FeatureExtractor().extract(txs, ats)
    fe = FeatureExtractor()
    fe.extract(txs[:500], ats[:500])
    save_features_state(tmp_path / "state.json", fe)
    restarted = load_features_state(tmp_path / "state.json")
    assert restarted.extract(txs[500:], ats[500:]).tobytes() == reference[500:].tobytes()
    # a file of the windows alone (as written before the graph was kept): the windows resume, the
    # graph starts empty, so its values differ from the run that never stopped
    save_state(tmp_path / "velocity.json", fe.state)
    windows_only = load_features_state(tmp_path / "velocity.json").extract(txs[500:], ats[500:])
    graph = len(EXTRACTED_NAMES) - len(GRAPH_NAMES)
    assert windows_only[:, :graph].tobytes() == reference[500:, :graph].tobytes()
    assert windows_only[:, graph:].tobytes() != reference[500:, graph:].tobytes()


def test_a_damaged_feature_state_file_is_refused_naming_it(tmp_path: Path) -> None:
    fe = FeatureExtractor()
    fe.extract(*_stream(50))
    good = features_state_bytes(fe)
    for damaged in (good.replace(b'"velocity":', b'"velocity":9', 1), good[:-40]):
        (tmp_path / "state.json").write_bytes(damaged)
        with pytest.raises(FeatureError, match=r"state\.json: feature state"):
            load_features_state(tmp_path / "state.json")


def test_rebuilding_from_the_last_30_days_gives_the_same_rows() -> None:
    # the pipeline's path after a restart without a state file: feed the ledger's recent transactions back
    txs, ats = _stream(4000)
    reference = FeatureExtractor().extract(txs, ats)
    cut = 3700
    since = ats[cut - 1] - timedelta(days=30)
    recent = [i for i in range(cut) if ats[i] > since]
    assert recent[0] > 0  # the stream is longer than the window, so this really drops history
    fe = FeatureExtractor()
    fe.observe([txs[i] for i in recent], [ats[i] for i in recent])
    assert fe.extract(txs[cut:], ats[cut:]).tobytes() == reference[cut:].tobytes()


def test_state_is_bounded_by_the_longest_window() -> None:
    state = VelocityState()
    start = 1_700_000_000_000_000
    hour = 3_600_000_000
    for h in range(24 * 30):  # 30 days, a fresh pair of accounts every hour
        state.observe(f"A{h}", f"B{h}", start + h * hour, 100)
    # only accounts active in the last 7 days (+ the sweep period) are held
    assert len(state) <= 2 * (7 * 24 + 2)
    assert state.events_held <= 2 * (7 * 24 + 2)


def test_late_events_are_placed_in_time_order() -> None:
    state = VelocityState()
    m = 60_000_000
    state.observe("A", "B", 10 * m, 100)
    state.observe("A", "B", 30 * m, 200)
    state.observe("A", "B", 20 * m, 400)  # late: sees the one before it only
    out = state.observe("A", "B", 40 * m, 800)
    assert out[:6] == [4.0, 4.0, 4.0, 15.0, 15.0, 15.0]
    again = VelocityState.restore(state.snapshot())
    assert again.snapshot() == state.snapshot()
    assert again.observe("A", "C", 50 * m, 1) == state.observe("A", "C", 50 * m, 1)


def test_naive_time_is_refused_before_anything_changes() -> None:
    fe = FeatureExtractor()
    before = fe.state.snapshot()
    with pytest.raises(FeatureError, match="no timezone"):
        fe.extract([tx(iban(1), iban(2)), tx(iban(1), iban(2))], [T0, datetime(2026, 3, 2, 10, 0)])
    assert fe.state.snapshot() == before
    with pytest.raises(FeatureError, match="2 transactions but 1 times"):
        fe.extract([tx(iban(1), iban(2)), tx(iban(1), iban(2))], [T0])
    assert fe.extract([], []).shape == (0, len(EXTRACTED_NAMES))


@pytest.mark.parametrize("data, reason", [
    (b"not json", "malformed"),
    (b'{"format": "other"}', "not a sealtrail.velocity/1"),
    (b'{"format": "sealtrail.velocity/1", "watermark": 1.5, "next_sweep": 0, "accounts": []}', "integer"),
    (b'{"format": "sealtrail.velocity/1", "watermark": 1, "next_sweep": 0, "accounts": [["A", 1, '
     b'[[5, 1, 0, "B"], [4, 1, 0, "B"]], []]]}', "out of time order"),
    (b'{"format": "sealtrail.velocity/1", "watermark": 1, "next_sweep": 0, "accounts": [["A", 1, [], []], '
     b'["A", 1, [], []]]}', "repeated account"),
    (b'{"format": "sealtrail.velocity/1", "watermark": 1, "next_sweep": 0}', "malformed"),
])
def test_malformed_snapshots_are_refused(data: bytes, reason: str, tmp_path: Path) -> None:
    with pytest.raises(FeatureError, match=reason):
        VelocityState.restore(data)
    (tmp_path / "v.json").write_bytes(data)
    with pytest.raises(FeatureError, match=r"v\.json"):
        load_state(tmp_path / "v.json")


def test_missing_state_file_starts_fresh(tmp_path: Path) -> None:
    assert len(load_state(tmp_path / "none.json")) == 0


@pytest.mark.parametrize("doc, reason", [
    (b'{"id": "x", "kind": "fx_rates", "base": "USD", "rates": {"USD": "1"}}', "base 'EUR'"),
    (b'{"id": "x", "kind": "fx_rates", "base": "EUR", "rates": {"USD": "abc"}}', "not a decimal"),
    (b'{"id": "x", "kind": "fx_rates", "base": "EUR", "rates": {"USD": "1", "GBP": "-2"}}', "GBP"),
    (b'{"id": "x", "kind": "jurisdiction_risk", "call_for_action": ["QQ"], "increased_monitoring": []}',
     "'QQ' is not an ISO country"),
    (b'{"id": "x", "kind": "jurisdiction_risk", "call_for_action": ["IR"], "increased_monitoring": ["IR"]}',
     "listed twice"),
    (b'{"id": "x", "kind": "weather"}', "unknown kind"),
    (b"[1]", "JSON object"),
])
def test_bad_reference_tables_are_refused(doc: bytes, reason: str) -> None:
    with pytest.raises(FeatureError, match=reason):
        load_table(doc)


def test_unknown_table_id_is_refused() -> None:
    with pytest.raises(FeatureError, match="'ecb-1999-01' is not shipped"):
        default_tables(fx="ecb-1999-01")


@settings(max_examples=500, deadline=None)
@given(st.decimals(min_value=0, max_value=10**12, places=2, allow_nan=False, allow_infinity=False),
       st.sampled_from(sorted(default_tables().fx.usd_per_unit)))
def test_the_fast_fx_path_equals_the_table_method(amount: Decimal, currency: str) -> None:
    tables = default_tables()
    fe = FeatureExtractor(tables)
    row = fe.extract([tx(iban(1), iban(2), str(amount), currency)], [T0])[0]
    cents = tables.fx.usd_cents(amount, currency)
    assert cents is not None and row[0] == cents / 100


# ------------------------------------------------------------- data quality (features/2)

MT103_JPY = Path(__file__).parents[1] / "vectors" / "messages" / "mt" / "mt103_jpy_33b.fin"


def _parsed(data: bytes) -> Transaction:
    from inference.messages import parse_messages

    (t,) = parse_messages(data, "mt")
    assert isinstance(t, Transaction), t
    return t


def test_a_beneficiary_iban_failing_its_check_digits_is_flagged_on_the_beneficiary_only() -> None:
    clean = _parsed(MT103_JPY.read_bytes())
    r = one(FeatureExtractor(), clean, T0)
    assert (r["finding_count"], r["orig_iban_invalid"], r["bene_iban_invalid"]) == (0.0, 0.0, 0.0)
    bad = _parsed(MT103_JPY.read_bytes().replace(b"/DE89370400440532013000", b"/DE89370400440532013001"))
    assert [f.code for f in bad.findings] == ["IBAN_CHECK_DIGITS"]
    r = one(FeatureExtractor(), bad, T0)
    assert (r["finding_count"], r["orig_iban_invalid"], r["bene_iban_invalid"]) == (1.0, 0.0, 1.0)
    assert (r["country_unreadable"], r["service_nak"]) == (0.0, 0.0)


@pytest.mark.parametrize(("account", "flag"), [
    ("DE89370400440532013000", 0.0),  # a valid IBAN
    ("DE89 3704 0044 0532 0130 01", 1.0),  # spaced, one digit off
    ("/GB29NWBK60161331926818", 1.0),  # as FIN writes an account, one digit off
    ("DE8937040044053201300", 1.0),  # one character short of Germany's 22
    ("US12345678901234", 0.0),  # the shape of an IBAN, but the US has none: an account number
    ("12345678", 0.0),  # an account number
])
def test_iban_invalid_means_an_iban_country_shape_that_fails(account: str, flag: float) -> None:
    o = Party(name="Alice", account=account, country="DE")
    t = Transaction("json", "R", Decimal("100.00"), "USD", T0.date(), o, Party(name="Bob", country="DE"),
                    "0" * 64, r16=R16.of(o, Party(name="Bob")))
    r = one(FeatureExtractor(), t, T0)
    assert (r["orig_iban_invalid"], r["bene_iban_invalid"]) == (flag, 0.0)


def test_country_unreadable_and_nak_come_from_the_findings() -> None:
    from inference.messages.findings import Finding

    base = tx(iban(1), iban(2))
    cases = {
        (Finding("BIC_UNKNOWN_COUNTRY", "{1:}", "BIC XXXXXXXX"),): (1.0, 0.0),
        (Finding("COUNTRY_UNKNOWN", "Cdtr/PstlAdr/Ctry", "'XX'"),): (1.0, 0.0),
        (Finding("SERVICE_NAK", "{451:}", "405:H25"), Finding("LAYOUT", "block 4", "indented")): (0.0, 1.0),
        (Finding("LINE_TOO_LONG", ":70:", "36 > 35"),): (0.0, 0.0),
    }
    for findings, (unreadable, nak) in cases.items():
        t = Transaction(base.message_type, base.reference, base.amount, base.currency, base.value_date,
                        base.originator, base.beneficiary, base.raw_sha256, r16=base.r16, findings=findings)
        r = one(FeatureExtractor(), t, T0)
        got = (r["finding_count"], r["country_unreadable"], r["service_nak"])
        assert got == (len(findings), unreadable, nak)


def test_each_feature_schema_extends_the_one_before_column_for_column() -> None:
    from inference.schema import DATA_QUALITY_NAMES, feature_names, model_columns

    v1, v2 = feature_names("sealtrail.features/1"), feature_names("sealtrail.features/2")
    assert v2 == (*v1, *DATA_QUALITY_NAMES)
    v3 = feature_names("sealtrail.features/3")
    forwarding, source = ("forward_share_permille", "forward_delay_hours"), ("forward_source_fan_out",)
    assert v3 == (*v2, *(n for n in GRAPH_NAMES if n not in forwarding + source))
    assert len(v3) == 57  # sealed records of features/3 keep their 57 columns
    v4 = feature_names("sealtrail.features/4")
    assert v4 == (*v3, *forwarding)
    assert feature_names("sealtrail.features/5") == (*v4, *SCREENING_NAMES)
    assert feature_names("sealtrail.features/6") == (*v4, *source) == EXTRACTED_NAMES
    assert feature_names("sealtrail.features/7") == (*EXTRACTED_NAMES, *SCREENING_NAMES) == FEATURE_NAMES
    assert model_columns(EXTRACTED_NAMES) == 60  # the shipped model reads the leading 60 of a features/7 row
    assert model_columns(v4) == 59  # a features/4 model reads the leading 59 columns of a features/7 row
    with pytest.raises(FeatureError, match=r"not the leading columns of sealtrail\.features/5"):
        model_columns(EXTRACTED_NAMES, "sealtrail.features/5")  # a features/6 model: not a features/5 row
    assert model_columns(v3) == 57  # a features/3 model reads the leading 57 columns of a features/4 row
    assert model_columns(v1) == 32  # a features/1 model reads the leading 32 columns of a features/2 row
    with pytest.raises(FeatureError, match=r"unknown feature schema 'sealtrail\.features/9'"):
        feature_names("sealtrail.features/9")
    with pytest.raises(FeatureError, match="not the leading columns"):
        model_columns((v1[1], v1[0]))
