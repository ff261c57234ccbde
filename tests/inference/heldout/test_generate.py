"""The held-out generator: reproducible, balances respected, typologies labelled, amounts scaled."""

from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest
from schwifty import BIC, IBAN

from inference.heldout import (
    BENIGN_LOOKALIKES,
    TYPOLOGIES,
    HeldoutConfig,
    HeldoutConfigError,
    HeldoutRun,
    credit_minor,
    generate,
    run,
)
from inference.messages.transaction import Transaction

TINY = HeldoutConfig(seed=5, n_accounts=1_000, days=7)


def _fingerprint(txs: list) -> list[tuple[str, str, int, str, int]]:  # type: ignore[type-arg]
    return [(x.transaction.sha256, x.at.isoformat(), x.label, x.typology, x.pattern) for x in txs]


def test_same_seed_gives_identical_transactions_and_another_seed_does_not() -> None:
    a, b = generate(TINY), generate(TINY)
    assert _fingerprint(a) == _fingerprint(b)
    c = generate(replace(TINY, seed=6))
    assert _fingerprint(a) != _fingerprint(c)
    assert not {x.transaction.sha256 for x in a} & {x.transaction.sha256 for x in c}


def test_output_does_not_depend_on_the_hash_seed() -> None:
    code = (
        "import hashlib; from inference.heldout import HeldoutConfig, generate; "
        "txs = generate(HeldoutConfig(seed=5, n_accounts=1_000, days=7)); "
        "text = '|'.join(x.transaction.sha256 + x.at.isoformat() for x in txs); "
        "print(hashlib.sha256(text.encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": h},
        ).stdout
        for h in ("1", "2")
    }
    here = hashlib.sha256("|".join(x.transaction.sha256 + x.at.isoformat() for x in generate(TINY)).encode())
    assert digests == {here.hexdigest() + "\n"}


def test_output_is_sorted_canonical_json_transactions_with_valid_identifiers(small: HeldoutRun) -> None:
    txs = small.transactions
    assert all(x.at <= y.at for x, y in itertools.pairwise(txs))
    assert len({x.transaction.reference for x in txs}) == len(txs)
    for x in txs[:3000]:
        tx = x.transaction
        assert isinstance(tx, Transaction) and tx.message_type == "json"
        assert tx.amount > 0 and tx.amount == tx.amount.quantize(Decimal("0.01"))
        assert tx.value_date == x.at.date() and tx.r16.complete
        for party, agent in ((tx.originator, tx.agents[0]), (tx.beneficiary, tx.agents[1])):
            assert agent.bic is not None
            assert BIC(agent.bic).country_code == party.country  # a bank of the account's country
            if party.iban is not None:
                assert str(IBAN(party.iban).compact) == party.iban and party.iban[:2] == party.country
    assert len({x.transaction.originator.country for x in txs}) >= 10


def test_balances_never_go_below_the_overdraft_limit(small: HeldoutRun) -> None:
    acc = small.world.accounts
    balance = list(small.opening)
    lowest = list(balance)
    for x in small.transactions:
        minor = int(x.transaction.amount * 100)
        payer, payee = acc[x.orig], acc[x.bene]
        assert x.transaction.currency == payer.currency
        balance[x.orig] -= minor
        balance[x.bene] += credit_minor(minor, payer.currency, payee.currency)
        lowest[x.orig] = min(lowest[x.orig], balance[x.orig])
    assert all(low >= -a.overdraft for low, a in zip(lowest, acc, strict=True))
    assert any(low < 0 for low in lowest)  # overdrafts are used, so the limit is what binds
    assert small.declined > 0  # and some normal payments were refused for want of funds


def test_every_typology_appears_with_labelled_patterns_and_suspects(small: HeldoutRun) -> None:
    by_pattern: dict[int, set[str]] = defaultdict(set)
    for x in small.transactions:
        assert (x.label == 1) == (x.typology != "normal") == (x.pattern > 0)
        if x.label:
            by_pattern[x.pattern].add(x.typology)
    assert all(len(t) == 1 for t in by_pattern.values())
    assert {t for ts in by_pattern.values() for t in ts} == set(TYPOLOGIES)
    suspects = small.suspects()
    assert set(suspects.values()) == set(TYPOLOGIES)
    used = [a for p in small.patterns for a in p.suspects]
    assert len(used) == len(set(used))  # one pattern per account
    share = sum(x.label for x in small.transactions) / len(small.transactions)
    assert 0.02 < share < 0.08


def test_benign_lookalikes_are_present_and_labelled_normal(small: HeldoutRun) -> None:
    kinds = Counter(x.kind for x in small.transactions if x.label == 0)
    assert all(kinds[k] > 0 for k in BENIGN_LOOKALIKES)
    assert all(x.label == 0 and x.pattern == 0 for x in small.transactions if x.kind in BENIGN_LOOKALIKES)
    # payroll really fans out: one employer pays many staff within minutes
    runs = Counter((x.orig, x.at.date()) for x in small.transactions if x.kind == "payroll")
    assert max(runs.values()) >= 10
    # family round-trips really return: some B pays A after A paid B
    sent = {(x.orig, x.bene) for x in small.transactions if x.kind == "family"}
    assert any((b, a) in sent for a, b in sent)


def test_amounts_scale_with_the_multiplier() -> None:
    base = run(TINY)
    for scale in (0.01, 100.0):
        scaled = run(replace(TINY, amount_scale=scale))
        assert len(scaled.transactions) > 0.9 * len(base.transactions)
        ratio = [
            float(s.transaction.amount / b.transaction.amount)
            for b, s in zip(base.transactions, scaled.transactions, strict=False)
            if b.kind == s.kind == "bill" and b.orig == s.orig and b.bene == s.bene and b.at == s.at
        ]
        assert len(ratio) > 100
        ratio.sort()
        assert ratio[len(ratio) // 2] == pytest.approx(scale, rel=0.02)


def test_density_and_accounts_set_the_volume() -> None:
    low = run(replace(TINY, density=0.2))
    high = run(replace(TINY, density=0.6))
    assert 0.8 * 0.2 * 7_000 < len(low.transactions) < 1.2 * 0.2 * 7_000 * 1.1
    assert len(high.transactions) > 2 * len(low.transactions)
    assert len(low.world.accounts) == 1_000


def test_a_small_world_over_a_long_period_still_has_every_typology_and_mostly_normal_accounts() -> None:
    r = run(HeldoutConfig(seed=1, n_accounts=1_000, days=180, typology_share=0.3))
    assert {p.typology for p in r.patterns} == set(TYPOLOGIES)
    assert len(r.suspects()) <= 0.3 * len(r.world.accounts)  # the quarter budget, give or take one pattern
    assert r.transactions[-1].at - r.transactions[0].at > timedelta(days=170)


def test_no_laundering_when_the_share_is_zero() -> None:
    r = run(replace(TINY, typology_share=0.0))
    assert not r.patterns and all(x.label == 0 for x in r.transactions)


@pytest.mark.parametrize(
    "bad",
    [
        {"days": 6},
        {"days": 181},
        {"n_accounts": 999},
        {"n_accounts": 200_001},
        {"amount_scale": 0.001},
        {"amount_scale": 101},
        {"density": 0},
        {"typology_share": 0.5},
        {"seed": -1},
    ],
)
def test_out_of_range_configurations_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(HeldoutConfigError):
        HeldoutConfig(**bad)  # type: ignore[arg-type]


def test_a_naive_start_is_refused() -> None:
    from datetime import datetime

    with pytest.raises(HeldoutConfigError, match="timezone"):
        HeldoutConfig(start=datetime(2026, 1, 1))
