"""Screening under a budget: a payment's names and free text are screened until the budget runs out,
deterministically. A screening that did not stop finds exactly what an unbounded one finds; one that
stopped says where, keeps only hits an unbounded screening also finds, and its scores read as not
known; every identifier and BIC is matched whatever the budget; the units a payment needs complete
it and one unit less stops it, on every run; a bad budget is refused."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from datetime import date
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.messages.transaction import Agent, Identifier, Party, Transaction
from inference.screening.entries import EntryId, ListEntry, SanctionsList
from inference.screening.features import SCREENING_NAMES, screening_values
from inference.screening.index import ListIndex
from inference.screening.normalise import name_tokens
from inference.screening.screen import (
    CHARS_PER_UNIT,
    DEFAULT_BUDGET,
    WORD_UNITS,
    WORDS_PER_UNIT,
    Budget,
    Screening,
    screen,
    units_needed,
)
from tests.inference.screening.test_text_windows import ENTRIES, WORDS

LISTED = (*ENTRIES,
          ListEntry("passport", "individual", ("Pavel Ostrov",),
                    identifiers=(EntryId("Passport", "7201234567"),)),
          ListEntry("bank", "entity", ("Tehran Export Bank",), bics=("TEHRIRTH",)))
INDEX = ListIndex([SanctionsList("internal", "l", None, "ab" * 32, LISTED, "t")])


def payment(text: str | None = None, *, address: tuple[str, ...] = (), agent_text: tuple[str, ...] = (),
            name: str = "Jane Doe", ident: str | None = None, bic: str | None = None) -> Transaction:
    return Transaction(
        message_type="json", reference="R1", amount=Decimal("2500.00"), currency="EUR",
        value_date=date(2026, 12, 1), raw_sha256="0" * 64,
        originator=Party(name=name, country="DE", address_lines=address),
        beneficiary=Party(name="Acme Trading GmbH", country="DE",
                          identifiers=() if ident is None else (Identifier("CCPT", ident, "RU"),)),
        agents=(Agent("intermediary", bic=bic, name_address=agent_text),), remittance=text)


def hostile(words: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def by_entry(s: Screening) -> dict[tuple[str, str], int]:
    return {(h.where, h.entry_id): h.score for h in s.hits}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 120), st.integers(1, 400))
def test_a_budget_stops_screening_or_changes_nothing(seed: int, words: int, budget: int) -> None:
    tx = payment(hostile(words, seed), address=(hostile(6, seed + 1),))
    full = screen(tx, INDEX)
    got = screen(tx, INDEX, budget=budget)
    assert full.stopped is None and full.budget is None
    if got.stopped is None:
        assert got == full  # the very same hits, in the same order
        assert screen(tx, INDEX, budget=budget + 1) == full
    else:
        assert got.budget == budget and got.stopped in ("originator.address", "remittance")
        whole = by_entry(full)
        for key, score in by_entry(got).items():  # only what the unbounded screening finds too
            assert key in whole and score <= whole[key]
        assert screen(tx, INDEX, budget=budget) == got  # the same stop, every time
        assert screen(tx, INDEX, budget=budget - 1).stopped is not None if budget > 1 else True


def test_the_units_needed_complete_and_one_unit_less_stops() -> None:
    tx = payment(hostile(200))
    need = units_needed(tx, INDEX)
    assert need > 2
    assert screen(tx, INDEX, budget=need) == screen(tx, INDEX)
    cut = screen(tx, INDEX, budget=need - 1)
    assert cut.stopped == "remittance" and cut.budget == need - 1
    # the text's characters, then its distinct words, then 1 + 200 // WORDS_PER_UNIT a candidate
    text = tx.remittance or ""
    toks = name_tokens(text).tokens
    paid = len(text) // CHARS_PER_UNIT + len(set(toks)) * WORD_UNITS
    assert need > paid and (need - paid) % (1 + len(toks) // WORDS_PER_UNIT) == 0


def test_screening_stops_where_the_budget_runs_out_and_nothing_after_is_screened() -> None:
    tx = payment("goods for SEVMORNEFTEGAZ", address=(hostile(300),))
    got = screen(tx, INDEX, budget=5)
    assert got.stopped == "originator.address"
    assert all(h.where != "remittance" for h in got.hits)  # the remittance comes after: not screened
    assert "sevmor" in {h.entry_id for h in screen(tx, INDEX).hits if h.where == "remittance"}
    agent = payment("goods for SEVMORNEFTEGAZ", agent_text=(hostile(300),))
    assert screen(agent, INDEX, budget=5).stopped == "agent.intermediary"


def test_every_identifier_and_bic_is_matched_whatever_the_budget() -> None:
    tx = payment(hostile(300), address=(hostile(300, 2),), ident="7201234567", bic="TEHRIRTHXXX")
    got = screen(tx, INDEX, budget=1)
    assert got.stopped == "originator.address"
    assert {(h.basis, h.entry_id) for h in got.hits} >= {("identifier", "passport"), ("bic", "bank")}


def test_party_names_are_screened_whatever_the_budget() -> None:
    tx = payment(hostile(300), name="Aleksandr KOVALEV")  # a listed name: names are not charged
    got = screen(tx, INDEX, budget=1)
    assert got.stopped == "remittance"
    assert "kovalev" in {h.entry_id for h in got.hits if h.where == "originator"}
    # stopped at the originator's address, the beneficiary's name is still screened
    tx = replace(payment(None, address=(hostile(300),)), beneficiary=Party(name="Aleksandr KOVALEV"))
    got = screen(tx, INDEX, budget=5)
    assert got.stopped == "originator.address"
    assert "kovalev" in {h.entry_id for h in got.hits if h.where == "beneficiary"}


def test_a_text_is_paid_for_before_it_is_read() -> None:
    # a megabyte of text stops at once: its characters alone are over the budget
    text = "invoice " * (1 << 17)
    got = screen(payment(text), INDEX, budget=DEFAULT_BUDGET)
    assert len(text) // CHARS_PER_UNIT > DEFAULT_BUDGET and got.stopped == "remittance" and got.hits == ()


def test_a_stopped_screening_says_its_scores_are_not_known() -> None:
    tx = payment(hostile(300), ident="7201234567")
    got = screen(tx, INDEX, budget=3)
    values = dict(zip(SCREENING_NAMES, screening_values(got), strict=True))
    assert values["screen_lists"] == 1.0 and values["screen_identifier_match"] == 1.0
    assert values["screen_bic_match"] == 0.0
    for name in ("screen_best_score", "screen_party_score", "screen_text_score", "screen_hits"):
        assert math.isnan(values[name]), name
    full = dict(zip(SCREENING_NAMES, screening_values(screen(tx, INDEX)), strict=True))
    assert not any(math.isnan(v) for v in full.values())
    assert got.to_json()["stopped"] == "remittance" and got.to_json()["budget"] == 3
    assert "stopped" not in screen(tx, INDEX).to_json()


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "16"])
def test_a_bad_budget_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="positive number of units"):
        Budget(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive number of units"):
        screen(payment(hostile(40)), INDEX, budget=bad)  # type: ignore[arg-type]


def test_the_default_budget_leaves_ordinary_free_text_alone() -> None:
    # a remittance of 140 characters of listed words, as much as an MT :70: or a CBPR+ Ustrd holds
    text = hostile(40)[:140]
    assert screen(payment(text), INDEX, budget=DEFAULT_BUDGET) == screen(payment(text), INDEX)
