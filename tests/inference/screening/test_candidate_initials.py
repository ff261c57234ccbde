"""Single letters and digits in a screened text: what the index's candidate bound allows them.

A query's initial ("J") may partner a listed word it begins without sharing a key with it, so the
bound counts such words as found; a digit or a letter that begins no indexed word partners nothing,
and one initial partners one word. A house number in an address line must not make every listed
name that shares a word with the address a candidate (each costs a full score), and no name that
scores at the floor may be left out."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference.screening.entries import ListEntry, SanctionsList
from inference.screening.index import ListIndex
from inference.screening.match import name_score
from inference.screening.normalise import name_tokens
from inference.screening.screen import (
    CHARS_PER_UNIT,
    DEFAULT_FLOOR,
    WORD_UNITS,
    WORDS_PER_UNIT,
    Budget,
    screen_text,
)


def make_index(names: Sequence[str]) -> ListIndex:
    entries = tuple(ListEntry(f"e{i}", "individual", (n,)) for i, n in enumerate(names))
    return ListIndex([SanctionsList("internal", "bank-list", None, "ab" * 32, entries, "test/1")])


def brute_force(index: ListIndex, text: str, floor: int) -> set[int]:
    """Every indexed name that scores ``floor`` or more against ``text``."""
    query = name_tokens(text).tokens
    return {i for i, (*_, listed) in enumerate(index.names)
            if query and name_score(query, listed, index.weight) >= floor}


# "lisbin" is one letter from "lisbon": an address in Lisbon shares a word, by key, with these names
LISBIN = [f"{first} Lisbin {last}" for first in ("Jamal", "Karim", "Omar", "Yusuf", "Rashid", "Tariq")
          for last in ("Haddad", "Nasser", "Saleh", "Qasim", "Farouk", "Zaidan")]


def test_a_house_number_does_not_make_every_name_sharing_a_word_a_candidate() -> None:
    index = make_index(LISBIN)
    toks = name_tokens("9 Station Road Lisbon").tokens
    assert "9" in toks
    # "9" begins no listed word: it can partner none, and "lisbon" alone cannot carry a name to the floor
    assert index.candidates(toks, DEFAULT_FLOOR) == [] and brute_force(index, "9 Station Road Lisbon",
                                                                       DEFAULT_FLOOR) == set()
    assert index.match_name("Flat 3 14 Lisbon Road", DEFAULT_FLOOR) == []


def test_an_initial_that_begins_a_listed_word_still_finds_the_name() -> None:
    index = make_index(LISBIN)
    # "J" may partner "Jamal": the names it begins stay candidates, and the full name is found
    kept = index.candidates(name_tokens("J Lisbin Haddad").tokens, DEFAULT_FLOOR)
    assert {index.names[i][3] for i in kept} >= {("jamal", "lisbin", "haddad")}
    hits = index.match_name("J Lisbin Haddad", DEFAULT_FLOOR)
    assert [h.entry.names for h in hits][:1] == [("Jamal Lisbin Haddad",)]
    assert hits[0].score == name_score(("j", "lisbin", "haddad"), ("jamal", "lisbin", "haddad"), index.weight)


def test_one_initial_is_counted_for_one_word_only() -> None:
    # "K Lisbin" cannot reach a name of three heavy words: the initial partners one of the two it
    # does not share a key with
    index = make_index(["Karim Lisbin Kareem", "Lisbin Nasser"])
    toks = name_tokens("K Lisbin").tokens
    assert set(index.candidates(toks, DEFAULT_FLOOR)) >= brute_force(index, "K Lisbin", DEFAULT_FLOOR)


_WORDS = ["kovalev", "kovalyov", "aleksandr", "alexander", "mohammed", "muhammad", "hassan", "hasan",
          "john", "smith", "smit", "ivanov", "petrovich", "rahman", "cruz", "omar", "umar", "yusuf", "lisbin",
          "station", "road"]
_QUERY_ONLY = ["1", "3", "9", "14", "j", "k", "a", "o", "p", "lisbon"]  # numbers, initials, an address word


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join), min_size=1,
                max_size=8),
       st.lists(st.sampled_from(_WORDS + _QUERY_ONLY), min_size=1, max_size=6).map(" ".join),
       st.sampled_from([750, 800, 850, 920]))
def test_initials_and_numbers_in_a_query_never_leave_out_a_name_at_the_floor(names: list[str], query: str,
                                                                            floor: int) -> None:
    index = make_index(names)
    kept = set(index.candidates(name_tokens(query).tokens, floor))
    assert brute_force(index, query, floor) <= kept


def test_a_free_texts_budget_is_charged_for_the_candidates_it_always_was() -> None:
    """Decision records state the budget a payment was screened under and where it stopped, and
    their verifier screens again counting the same units: the names the bound now leaves out are
    still charged (without being scored), so a budget stops where it always did."""
    index = make_index(LISBIN)
    toks = name_tokens("9 Lisbin Road").tokens
    candidates, charged = index.charged_candidates(toks, DEFAULT_FLOOR)
    assert candidates == index.candidates(toks, DEFAULT_FLOOR) and set(candidates) <= set(charged)
    assert len(charged) == len(LISBIN) > len(candidates)  # a digit used to credit every unfound word
    text = "9 Lisbin Road"
    words = len(set(toks))
    need = len(text) // CHARS_PER_UNIT + words * WORD_UNITS + len(charged) * (1 + len(toks) // WORDS_PER_UNIT)
    budget = Budget(1 << 30)
    assert screen_text(index, "remittance", text, DEFAULT_FLOOR, budget) == []
    assert budget.total - budget.left == need
    short = Budget(need - 1)  # one unit short: it stops in this text, at the last candidate
    screen_text(index, "remittance", text, DEFAULT_FLOOR, short)
    assert short.stopped == "remittance"
