"""The transaction simulator: deterministic, well-formed payments, and typologies that have the
shape their documentation promises (plain ones over the rule thresholds, evasion ones under)."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import uuid
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import iso4217
import pytest
import schwifty
from schwifty import registry
from schwifty.exceptions import InvalidCountryCode

from inference.messages.transaction import R16
from inference.simulate import MINOR_UNITS, TYPOLOGIES, SimConfig, SimTx, simulate
from inference.simulate_population import CALL_FOR_ACTION, INCREASED_MONITORING, iban_check_digits
from tests.inference.simulated import fingerprint, patterns, usd

CONFIG = SimConfig(seed=11, days=7, n_accounts=300, n_normal=3000, typology_share=0.05)
EVASION = SimConfig(seed=11, days=7, n_accounts=300, n_normal=3000, typology_share=0.05, evasion=True)
DAY = timedelta(hours=24)
BLACK = {c.code for c in CALL_FOR_ACTION}
GREY = {c.code for c in INCREASED_MONITORING}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plain() -> list[SimTx]:
    return simulate(CONFIG)


@pytest.fixture(scope="module")
def evasion() -> list[SimTx]:
    return simulate(EVASION)




def key(party_account: str | None) -> str:
    assert party_account is not None
    return party_account



# --- determinism ---------------------------------------------------------------------------


def test_same_config_gives_the_same_list(plain: list[SimTx]) -> None:
    assert simulate(CONFIG) == plain


def test_another_seed_gives_other_payments(plain: list[SimTx]) -> None:
    other = simulate(SimConfig(seed=12, days=7, n_accounts=300, n_normal=3000))
    assert [s.transaction.sha256 for s in other[:50]] != [s.transaction.sha256 for s in plain[:50]]


def test_independent_of_hash_seed(plain: list[SimTx]) -> None:
    code = (
        "from inference.simulate import SimConfig, simulate\n"
        "from tests.inference.test_simulate import CONFIG, fingerprint\n"
        "print(fingerprint(simulate(CONFIG)))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "TZ": "Asia/Tokyo"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == fingerprint(plain)


def test_evasion_changes_only_the_laundering(plain: list[SimTx], evasion: list[SimTx]) -> None:
    def normal(txs: list[SimTx]) -> list[tuple[object, ...]]:
        return [(s.at, s.transaction.originator, s.transaction.beneficiary, s.transaction.amount)
                for s in txs if s.label == 0]

    assert normal(plain) == normal(evasion)
    laundering = [s.transaction.amount for s in evasion if s.label]
    assert [s.transaction.amount for s in plain if s.label] != laundering


# --- shape of the output ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["plain", "evasion"])
def test_sorted_and_inside_the_period(mode: str, request: pytest.FixtureRequest) -> None:
    txs: list[SimTx] = request.getfixturevalue(mode)
    times = [s.at for s in txs]
    assert times == sorted(times)
    assert all(t.tzinfo is not None and t.utcoffset() == timedelta(0) for t in times)
    assert CONFIG.start <= times[0] and times[-1] < CONFIG.start + timedelta(days=CONFIG.days)


@pytest.mark.parametrize("mode", ["plain", "evasion"])
def test_labels_typologies_and_share(mode: str, request: pytest.FixtureRequest) -> None:
    txs: list[SimTx] = request.getfixturevalue(mode)
    for s in txs:
        assert s.typology in ("normal", *TYPOLOGIES)
        assert s.label == (s.typology != "normal")
        assert s.evasion == (mode == "evasion" and s.label == 1)
        assert (s.pattern == 0) == (s.label == 0)
    assert {s.typology for s in txs if s.label} == set(TYPOLOGIES)
    assert sum(s.label == 0 for s in txs) == CONFIG.n_normal
    share = sum(s.label for s in txs) / len(txs)
    assert 0.035 < share < 0.075


@pytest.mark.parametrize("mode", ["plain", "evasion"])
def test_transactions_are_well_formed(mode: str, request: pytest.FixtureRequest) -> None:
    txs: list[SimTx] = request.getfixturevalue(mode)
    references = [s.transaction.reference for s in txs]
    assert len(set(references)) == len(txs) and max(map(len, references)) <= 16
    assert len({s.transaction.raw_sha256 for s in txs}) == len(txs)
    for s in txs:
        tx = s.transaction
        assert tx.message_type == "json" and tx.value_date == s.at.date()
        assert re.fullmatch(r"[0-9a-f]{64}", tx.raw_sha256)
        assert tx.uetr is not None and uuid.UUID(tx.uetr).version == 4
        exponent = iso4217.Currency(tx.currency).exponent
        assert exponent is not None and tx.amount > 0 and tx.amount.as_tuple().exponent == -exponent
        assert tx.r16 == R16.of(tx.originator, tx.beneficiary)
        assert [a.role for a in tx.agents] == ["debtor_agent", "creditor_agent"]
        for agent, party in zip(tx.agents, (tx.originator, tx.beneficiary), strict=True):
            assert agent.bic is not None and re.fullmatch(r"[A-Z]{6}[A-Z0-9]{2}", agent.bic)
            assert agent.bic[4:6] == party.country
        assert tx.originator.account != tx.beneficiary.account


def test_minor_units_follow_iso_4217() -> None:
    assert {c: iso4217.Currency(c).exponent for c in MINOR_UNITS} == MINOR_UNITS
    assert MINOR_UNITS["JPY"] == 0


def test_currencies_are_mostly_usd_eur_gbp(plain: list[SimTx]) -> None:
    currencies = [s.transaction.currency for s in plain]
    assert sum(c in ("USD", "EUR", "GBP") for c in currencies) / len(currencies) > 0.75
    assert {"CHF", "JPY"} <= set(currencies)


def test_accounts_are_valid_ibans_where_the_country_has_them(plain: list[SimTx]) -> None:
    parties = {p.account: p for s in plain for p in (s.transaction.originator, s.transaction.beneficiary)}
    with_iban = 0
    for account, party in parties.items():
        assert account and party.country
        if party.iban is None:  # national account number: the country has no IBAN scheme
            with pytest.raises(InvalidCountryCode):
                registry.get_iban_spec(party.country)
            assert account.isdigit()
        else:
            with_iban += 1
            assert account == party.iban
            assert schwifty.IBAN(party.iban).country_code == party.country
    assert with_iban > 0.6 * len(parties)


PUBLISHED_IBANS = ("GB82WEST12345698765432", "DE89370400440532013000", "CH9300762011623852957")


@pytest.mark.parametrize("iban", PUBLISHED_IBANS)
def test_iban_check_digits_on_published_examples(iban: str) -> None:
    assert iban_check_digits(iban[:2], iban[4:]) == iban[2:4]


def test_normal_traffic_has_some_incomplete_originators_and_grey_list_payments(plain: list[SimTx]) -> None:
    normal = [s.transaction for s in plain if s.label == 0]
    incomplete = sum(not tx.r16.complete for tx in normal) / len(normal)
    assert 0.01 < incomplete < 0.06
    assert any(tx.beneficiary.country in GREY for tx in normal)
    assert not any(BLACK & {tx.originator.country, tx.beneficiary.country} for tx in normal)


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="UTC"):
        SimConfig(start=datetime(2026, 1, 5))
    with pytest.raises(ValueError, match="days"):
        SimConfig(days=2)
    with pytest.raises(ValueError, match="n_accounts"):
        SimConfig(n_accounts=50)
    with pytest.raises(ValueError, match="typology_share"):
        SimConfig(typology_share=0.5)


def test_no_laundering_when_the_share_is_zero() -> None:
    txs = simulate(SimConfig(days=3, n_accounts=100, n_normal=200, typology_share=0.0))
    assert len(txs) == 200 and not any(s.label for s in txs)


# --- plain typologies: over the rule thresholds ----------------------------------------------


def test_structuring_plain_is_near_threshold_within_a_day(plain: list[SimTx]) -> None:
    for group in patterns(plain, "structuring"):
        assert 3 <= len(group) <= 8
        assert all(8000 <= usd(s) < 10000 for s in group)
        assert group[-1].at - group[0].at < DAY
        assert len({s.transaction.originator.account for s in group}) == 1 or \
            len({s.transaction.beneficiary.account for s in group}) == 1


def test_layering_plain_is_a_chain_moving_on_within_hours(plain: list[SimTx]) -> None:
    for group in patterns(plain, "layering"):
        assert len(group) >= 3
        for prev, nxt in itertools.pairwise(group):
            assert nxt.transaction.originator.account == prev.transaction.beneficiary.account
            assert timedelta(0) < nxt.at - prev.at <= timedelta(hours=6)
            assert usd(nxt) <= usd(prev)
        assert usd(group[0]) >= 10000


@pytest.mark.parametrize(("typology", "side"), [("fan_in", "beneficiary"), ("fan_out", "originator")])
def test_fan_plain_reaches_ten_counterparties_and_usd_10000_in_a_day(
        plain: list[SimTx], typology: str, side: str) -> None:
    other = "originator" if side == "beneficiary" else "beneficiary"
    for group in patterns(plain, typology):
        # A fan-out may be funded first by one inflow into the hub; the hub is the busiest account.
        hub, _ = Counter(getattr(s.transaction, side).account for s in group).most_common(1)[0]
        legs = [s for s in group if getattr(s.transaction, side).account == hub]
        assert len(legs) >= len(group) - 1
        assert len({getattr(s.transaction, other).account for s in legs}) >= 10
        assert legs[-1].at - legs[0].at < DAY
        assert sum(usd(s) for s in legs) > 10000


def test_a_small_world_asked_for_more_mules_than_it_has_fans_out_to_every_one() -> None:
    # 100 accounts hold about 50 retail mules: a fan of 200 takes them all, each once
    for seed in range(3):
        sims = simulate(SimConfig(seed=seed, n_accounts=100, n_normal=500, typology_share=0.2,
                                  fan_mules=(200, 200)))
        groups = patterns(sims, "fan_in") + patterns(sims, "fan_out")
        assert groups
        for group in groups:
            hub, _ = Counter(s.transaction.beneficiary.account for s in group).most_common(1)[0]
            if group[0].typology == "fan_out":
                hub, _ = Counter(s.transaction.originator.account for s in group).most_common(1)[0]
            mules = [s.transaction.originator.account if s.transaction.beneficiary.account == hub
                     else s.transaction.beneficiary.account for s in group]
            assert len(set(mules)) >= 40 and hub not in mules


def test_high_risk_corridor_plain_touches_fatf_lists(plain: list[SimTx]) -> None:
    groups = patterns(plain, "high_risk_corridor")
    txs = [s.transaction for g in groups for s in g]
    assert all((BLACK | GREY) & {tx.originator.country, tx.beneficiary.country} for tx in txs)
    assert any(not tx.r16.complete for tx in txs)


def test_round_tripping_plain_returns_to_the_origin(plain: list[SimTx]) -> None:
    for group in patterns(plain, "round_tripping"):
        assert len(group) in (3, 4)
        assert group[-1].transaction.beneficiary.account == group[0].transaction.originator.account
        assert group[0].transaction.amount % 1000 == 0
        assert 0.94 < usd(group[-1]) / usd(group[0]) <= 1.0


# --- evasion variants: under the rule thresholds ---------------------------------------------


def windows_24h(legs: list[SimTx]) -> list[list[SimTx]]:
    """For each leg, the legs in the 24 hours up to and including it."""
    return [[x for x in legs if s.at - DAY < x.at <= s.at] for s in legs]


def test_evasion_is_complete_and_not_round(evasion: list[SimTx]) -> None:
    laundering = [s for s in evasion if s.label]
    assert all(s.transaction.r16.complete for s in laundering)
    assert not any(s.transaction.amount % 1000 == 0 for s in laundering)
    assert not any(BLACK & {s.transaction.originator.country, s.transaction.beneficiary.country}
                   for s in laundering)


def test_structuring_evasion_stays_under_usd_8000_once_a_day(evasion: list[SimTx]) -> None:
    for group in patterns(evasion, "structuring"):
        assert all(7000 <= usd(s) < 8000 for s in group)
        for side in ("originator", "beneficiary"):
            by_account: dict[str, list[SimTx]] = defaultdict(list)
            for s in group:
                by_account[key(getattr(s.transaction, side).account)].append(s)
            for legs in by_account.values():
                assert all(len(w) == 1 for w in windows_24h(legs))


@pytest.mark.parametrize(("typology", "side"), [("fan_in", "beneficiary"), ("fan_out", "originator")])
def test_fan_evasion_stays_under_ten_mules_and_usd_10000_a_day(
        evasion: list[SimTx], typology: str, side: str) -> None:
    other = "originator" if side == "beneficiary" else "beneficiary"
    groups = patterns(evasion, typology)
    for group in groups:
        assert len({getattr(s.transaction, side).account for s in group}) == 1
        assert len({getattr(s.transaction, other).account for s in group}) == len(group)  # new mules
        assert group[-1].at - group[0].at > DAY  # spread over days
        for window in windows_24h(group):
            assert len({getattr(s.transaction, other).account for s in window}) < 10
            assert sum(usd(s) for s in window) < 10000


def test_layering_and_round_tripping_evasion_wait_more_than_a_day(evasion: list[SimTx]) -> None:
    for typology in ("layering", "round_tripping"):
        for group in patterns(evasion, typology):
            assert all(usd(s) < 10000 for s in group)
            assert all(b.at - a.at > DAY for a, b in itertools.pairwise(group))


def test_high_risk_corridor_evasion_is_grey_list_under_usd_1000(evasion: list[SimTx]) -> None:
    for group in patterns(evasion, "high_risk_corridor"):
        for s in group:
            assert GREY & {s.transaction.originator.country, s.transaction.beneficiary.country}
            assert usd(s) < 1000


def test_start_defaults_to_a_monday_in_utc() -> None:
    assert SimConfig().start == datetime(2026, 1, 5, tzinfo=UTC) and SimConfig().start.weekday() == 0


def test_lookalikes_add_benign_fan_in_fan_out_and_pass_through() -> None:
    base = SimConfig(seed=4, days=10, n_accounts=600, n_normal=6000)
    plain, alike = simulate(base), simulate(replace(base, lookalikes=True))
    assert len(alike) >= len(plain) - 50  # the look-alikes are part of the normal payments

    def senders_per_payee(sims: list[SimTx]) -> Counter[str | None]:
        pairs = {(s.transaction.originator.account, s.transaction.beneficiary.account)
                 for s in sims if not s.label}
        return Counter(b for _, b in pairs)

    # billers and merchants: payees of dozens of customers, all of it normal
    assert max(senders_per_payee(alike).values()) >= 30 > max(senders_per_payee(plain).values()) // 2
    assert {s.label for s in alike if s.typology == "normal"} == {0}
    # and the laundering is the same: look-alikes come from the normal stream only
    def laundering(sims: list[SimTx]) -> list[tuple[object, ...]]:
        return [(s.transaction.originator.account, s.transaction.beneficiary.account, s.transaction.amount,
                 s.at) for s in sims if s.label]

    assert laundering(alike) == laundering(plain)


@pytest.mark.parametrize("scale", [0.01, 100.0])
def test_amount_scale_multiplies_every_amount(scale: float) -> None:
    base = SimConfig(seed=4, days=7, n_accounts=300, n_normal=2000)
    one, scaled = simulate(base), simulate(replace(base, amount_scale=scale))
    ratios = sorted(float(b.transaction.amount) / float(a.transaction.amount)
                    for a, b in zip(one, scaled, strict=True) if a.transaction.amount > 100)
    assert abs(ratios[len(ratios) // 2] / scale - 1) < 0.01  # the median payment, scaled


def test_shape_settings_are_checked() -> None:
    for bad in ({"amount_scale": 0.0}, {"cycle_hops": (5, 3)}, {"fan_mules": (1, 10)},
                {"fan_hours": (1.0, 1000.0)}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SimConfig(**bad)
