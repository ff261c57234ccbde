"""Hostile tests of the candidate bound's treatment of one-character query words, and of the budget a
free text is charged for its candidates.

``ListIndex.candidates`` credits the prefix tokens no key reached only for query initials that begin
some filed token, the heaviest ``k`` of a name for ``k`` of them (every one for more than three);
``charged_candidates`` also gives the names of the bound it replaced (any one-character word credited
every such token at 0.9), which a free text is still charged for. Both are checked here against a
reference written from those docstrings, name by name, and against scoring every indexed name by
brute force (``match.name_score``).

Misses found (a name ``name_score`` puts at or above the floor that ``candidates`` leaves out, and
that is none of the documented exceptions: listed initials, particles under 750) are kept as
``xfail(strict=True)`` tests with the defect in the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from inference.screening.entries import ListEntry, SanctionsList
from inference.screening.index import PREFIX_TOKENS, ListIndex
from inference.screening.match import (
    INITIAL_SIMILARITY,
    LISTED_SHARE,
    joined_counts,
    name_score,
    token_keys,
    token_similarity,
)
from inference.screening.normalise import PARTICLES, name_tokens, shape_reading, skeleton
from inference.screening.screen import (
    CHARS_PER_UNIT,
    DEFAULT_FLOOR,
    WORD_UNITS,
    WORDS_PER_UNIT,
    Budget,
    screen_name,
    screen_text,
)

ROOT = Path(__file__).parents[3]
_FILED_SLOTS = 63  # a listed name's positions from here on are never filed (index._WHOLE_SLOT)
_BOUNDED = 3  # query initials up to this many credit a name's heaviest that many unfound tokens


def make_index(names: Sequence[Sequence[str]], weak: Sequence[frozenset[int]] = ()) -> ListIndex:
    """One list, an entry per item of ``names`` (its names; ``weak``: which of them are weak aliases)."""
    entries = tuple(ListEntry(f"e{i}", "individual", tuple(ns), weak_aliases=weak[i] if i < len(weak)
                              else frozenset()) for i, ns in enumerate(names))
    return ListIndex([SanctionsList("internal", "bank-list", None, "ab" * 32, entries, "test/1")])


def one_each(*names: str) -> ListIndex:
    return make_index([[n] for n in names])


def scores(index: ListIndex, query: Sequence[str]) -> list[int]:
    """``name_score`` of every indexed name against ``query`` (the brute-force reference)."""
    return [name_score(query, listed, index.weight) if query else 0 for *_, listed in index.names]


def hits(index: ListIndex, query: Sequence[str], floor: int) -> set[int]:
    return {i for i, s in enumerate(scores(index, query)) if s >= floor}


# --- the bounds, written out name by name from the docstrings -------------------------------------

@dataclass(frozen=True)
class Reference:
    """What the docstrings say ``charged_candidates(query, floor)`` gives, worked out name by name: each
    name's listed cover under each bound (what ``LISTED_SHARE * cover + (1 - LISTED_SHARE)`` must bring
    to the floor), for any floor."""

    new: dict[int, float]  # candidates: k initials that begin a filed token credit the heaviest k
    old: dict[int, float]  # charged: any one-character word credits every unfound prefix token
    sound: dict[int, float]  # every filed token at the best a key or a query initial gives it
    whole: frozenset[int]  # names written together as the query is: always scored
    outbid: frozenset[int]  # a query initial begins a filed token a key found under 0.9
    twice: frozenset[int]  # a listed initial a key found: its weight counted outside and found (xfail below)

    @staticmethod
    def at(cover: dict[int, float], floor: int) -> tuple[set[int], set[int]]:
        """The names kept at ``floor``, and those within rounding of it (either answer is right)."""
        kept, edge = set(), set()
        for i, c in cover.items():
            margin = LISTED_SHARE * c + (1 - LISTED_SHARE) - (floor / 1000 - 1e-9)
            if margin >= 0:
                kept.add(i)
            if abs(margin) < 1e-12:
                edge.add(i)
        return kept, edge

    @staticmethod
    def rounds_to(cover: dict[int, float], i: int, score: int) -> bool:
        """Whether name ``i``'s bound reaches ``score`` once rounded (scores are rounded to integers,
        so a bound a half point under a score is no bound on it)."""
        return i in cover and 1000 * (LISTED_SHARE * cover[i] + (1 - LISTED_SHARE)) >= score - 0.5 - 1e-9

    def rounded_out(self, i: int, score: int) -> bool:
        """Whether the new bound of name ``i`` falls short of ``score`` only by rounding (the xfail
        below): under it, but within half a point."""
        return self.rounds_to(self.new, i, score) and i not in self.at(self.new, score)[0]

    def candidates(self, floor: int) -> tuple[set[int], set[int]]:
        kept, edge = self.at(self.new, floor)
        return kept | self.whole, edge - self.whole

    def charged(self, floor: int) -> tuple[set[int], set[int]]:
        kept, edge = self.at(self.old, floor)
        return kept | self.whole, edge - self.whole

    def floors(self) -> set[int]:
        """The floors at which a name's bound just reaches, or just misses, the floor."""
        out: set[int] = set()
        for cover in (*self.new.values(), *self.old.values()):
            at = int((LISTED_SHARE * cover + (1 - LISTED_SHARE)) * 1000 + 1e-6)
            out.update(f for f in (at, at + 1) if 600 <= f <= 1000)
        return out


def reference(index: ListIndex, query: Sequence[str]) -> Reference:
    names = [listed for *_, listed in index.names]
    df: Counter[str] = Counter()
    for listed in names:
        df.update(set(listed))
    prefixes = []
    for listed in names:
        informative = [t for t in listed if t not in PARTICLES] or list(listed)
        prefixes.append(set(sorted(set(informative), key=lambda t: (df[t], t))[:PREFIX_TOKENS]))
    firsts = {t[0] for listed, prefix in zip(names, prefixes, strict=True)
              for p, t in enumerate(listed) if t in prefix and p < _FILED_SLOTS and len(t) > 1}
    qkeys = [token_keys(q) for q in query]
    joined = "".join(query)
    singles = [q for q in query if len(q) == 1]
    initials = sum(1 for q in singles if q in firsts)

    def keyed_sim(t: str) -> float:
        """As alike as the query word most like ``t`` among those sharing a key with it (0: none)."""
        keys = token_keys(t)
        best = max((token_similarity(q, t) for q, ks in zip(query, qkeys, strict=True)
                    if not ks.isdisjoint(keys)), default=0.0)
        if len(query) > 1 and (joined in keys or "-" + skeleton(joined) in keys):
            best = max(best, token_similarity(joined, t))
        return best

    whole: set[int] = set()
    if len(query) > 1 or len(joined) > 3:
        whole = {i for i, listed in enumerate(names)
                 if len(listed) > 1 and skeleton("".join(listed)) == skeleton(joined)}
    new, old, sound, outbid, twice = {}, {}, {}, set(), set()
    for i, (listed, prefix) in enumerate(zip(names, prefixes, strict=True)):
        weights = [index.weight(t) for t in listed]
        total = float(sum(weights))
        outside = float(sum(w for p, (t, w) in enumerate(zip(listed, weights, strict=True))
                            if t not in prefix or p >= _FILED_SLOTS or len(t) == 1))
        got = keyed = fair = 0.0
        reached = False
        heavy: list[int] = []
        for p, (t, w) in enumerate(zip(listed, weights, strict=True)):
            if t not in prefix or p >= _FILED_SLOTS:
                continue
            sim = keyed_sim(t)
            if len(t) > 1:
                heavy.append(w)
                if any(t.startswith(q) for q in singles):
                    if 0.0 < sim < INITIAL_SIMILARITY:
                        outbid.add(i)
                    fair += w * max(sim, INITIAL_SIMILARITY)
                else:
                    fair += w * sim
            if sim > 0.0:
                if len(t) == 1:
                    twice.add(i)
                reached = True
                got += w * sim
                keyed += w
        unfound = total - outside - keyed
        heavy.sort(reverse=True)
        loose = INITIAL_SIMILARITY * unfound if singles else 0.0
        if not initials:
            credit = 0.0
        elif initials > _BOUNDED:
            credit = loose
        else:
            credit = INITIAL_SIMILARITY * min(unfound, float(sum(heavy[:initials])))
        unfiled = sum(w for t, w in zip(listed, weights, strict=True) if len(t) == 1 or t not in prefix)
        sound[i] = (fair + unfiled) / total
        if reached:
            old[i] = (got + outside + loose) / total
            new[i] = (got + outside + credit) / total
    return Reference(new, old, sound, frozenset(whole), frozenset(outbid), frozenset(twice))


def documented_exception(listed: Sequence[str], floor: int) -> bool:
    """The misses ``test_the_candidate_bound_never_prunes_a_name_that_reaches_the_floor`` documents: a
    listed initial ("J. Smith"), and a particle (never filed) under floor 750."""
    return any(len(t) == 1 for t in listed) or (floor < 750 and any(t in PARTICLES for t in listed))


# --- strategies ------------------------------------------------------------------------------------

# listed words: several beginning with the same letters, particles (two of one letter), pieces that
# join into other listed words, and a number
_LISTED = ["omar", "smith", "ivanov", "kovalev", "aleksandr", "karim", "kamal", "kim", "john", "jong",
           "james", "xi", "jinping", "jin", "ping", "abdulrahman", "kovalenko", "sevmorneftegaz", "sevmor",
           "neftegaz", "petrovich", "emil", "ole", "olga", "hansen", "zhanna", "ostergaard", "al", "de",
           "bin", "e", "y", "1027"]
_LISTED_INITIALS = ["j", "k", "o"]  # listed initials: a documented exception, kept rare
# query words: variants a key finds under 0.9 (omer 0.81, smyth 0.85, ivanof 0.88, smit 0.88) and at
# 0.9 or more, pieces, address words, digits, initials and non-ASCII letters that read as initials
# ("É" e, "Ø" o, Cyrillic "А" a, katakana "ア" a) or do not ("Ж" zh, "ß" ss)
_VARIANTS = ["omer", "smyth", "ivanof", "smit", "kovalyov", "alexander", "abdul", "rahman", "kovalenk",
             "kovalenkp", "jinpin", "lisbon", "station", "road"]
_SINGLES = ["9", "14", "1", "3", "a", "j", "k", "o", "s", "x", "p", "e", "y", "z", "h", "É", "Ø", "А",
            "ア", "Ж", "ß"]


def _names() -> st.SearchStrategy[list[list[str]]]:
    word = st.sampled_from(_LISTED + _LISTED_INITIALS)
    name = st.lists(word, min_size=1, max_size=6).map(" ".join)
    return st.lists(st.lists(name, min_size=1, max_size=2), min_size=1, max_size=8)


def _query() -> st.SearchStrategy[str]:
    words = st.lists(st.sampled_from(_LISTED + _VARIANTS + _SINGLES), min_size=1, max_size=6)
    # initials first: 1 to 5 of them (repeated letters too) among up to 3 words, in any order
    initials = st.tuples(st.lists(st.sampled_from(_SINGLES), min_size=1, max_size=5),
                         st.lists(st.sampled_from(_LISTED + _VARIANTS), max_size=3)).flatmap(
        lambda x: st.permutations(x[0] + x[1]))
    return st.one_of(words, initials).map(" ".join)


# a listed word as a query may write it: a variant a key finds (under 0.9 or not), or written apart
_WRITTEN = {"omar": ["omer"], "smith": ["smyth", "smit"], "ivanov": ["ivanof"], "kovalev": ["kovalyov"],
            "aleksandr": ["alexander"], "abdulrahman": ["abdul rahman"], "jinping": ["jin ping", "jinpin"],
            "kovalenko": ["kovalenk", "kovalenkp"], "sevmorneftegaz": ["sevmor neftegaz"], "olga": ["olha"]}


@st.composite
def _case(draw: st.DrawFn) -> tuple[list[list[str]], str]:
    """Lists, and a query: random words, or one of the listed names as a payment may write it (words
    kept, written as their initial, as a variant, or left out; digits, initials and words added)."""
    names = draw(_names())
    if draw(st.booleans()):
        return names, draw(_query())
    listed = name_tokens(draw(st.sampled_from(names))[0]).tokens
    out: list[str] = []
    for t in listed:
        how = draw(st.sampled_from(["keep", "keep", "initial", "initial", "variant", "drop"]))
        if how == "keep" or (how == "variant" and t not in _WRITTEN):
            out.append(t)
        elif how == "initial":
            out.append(t[0])
        elif how == "variant":
            out.append(draw(st.sampled_from(_WRITTEN[t])))
    out += draw(st.lists(st.sampled_from(_SINGLES + _VARIANTS + _LISTED), max_size=3))
    if draw(st.booleans()):
        out = list(draw(st.permutations(out)))
    return names, " ".join(out) or listed[0]


_FILLERS = [f"{a} {b}" for a in ("Adams", "Baker", "Clarke", "Davies") for b in ("Nolan", "Parker", "Quinn",
                                                                                   "Reyes")]


_PROPERTY = settings(max_examples=600, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# --- properties --------------------------------------------------------------------------------------

@_PROPERTY
@given(_case(), st.integers(600, 1000))
@example(case=([["Jamal Lisbin Haddad"], ["Karim Lisbin Nasser"]], "9 J Lisbin"), floor=750)
@example(case=([["Karim Kamal Kovalev"], ["Kim Kovalev"]], "K K Kovalev"), floor=800)
@example(case=([["Kim Kim Kim Kim Jong"]], "K K Jong K K"), floor=800)  # 4 initials: every kim
@example(case=([["Kim Kim Kim Kim Jong"]], "K K Jong K"), floor=800)  # 3 initials: 3 of the 4 kims
def test_candidates_and_charged_are_the_bounds_their_docstrings_state(case: tuple[list[list[str]], str],
                                                                      floor: int) -> None:
    """``candidates`` is the bound that credits k initials the heaviest k unfound prefix tokens, and
    ``charged`` the one that credited every unfound prefix token for any one-character word: a name
    is in each exactly when that bound reaches the floor (or its joined skeleton is the query's), at
    the floor drawn and at each floor a name's bound just reaches or just misses."""
    names, query = case
    index = make_index(names)
    toks = name_tokens(query).tokens
    ref = reference(index, toks)
    for f in sorted({floor} | ref.floors()):
        candidates, charged = index.charged_candidates(toks, f)
        # what is scored is always among what the bound before charged (no hit it did not give), and
        # holds every name the initials bound keeps among those
        assert candidates == sorted(set(candidates)) and set(candidates) <= set(charged)
        named = index.candidates(toks, f)  # a name's query: the same, but for the runs of a text
        assert named == sorted(set(named)) and set(named) <= set(charged)
        want, edge = ref.candidates(f)
        assert (want & set(charged)) - set(candidates) <= edge, (toks, f, candidates, sorted(want))
        assert (want & set(charged)) - set(named) <= edge, (toks, f, named, sorted(want))
        want, edge = ref.charged(f)
        assert set(charged) ^ want <= edge, (toks, f, charged, sorted(want))


@_PROPERTY
@given(_case())
@example(case=([["Omar"], ["Omer Adams"]], "9 O Omer"))
@example(case=([["Karim Kamal Kovalev"], ["Adams Nolan"]], "K K Kovalev 9"))
@example(case=([["John Sevmor Y"], *([f] for f in _FILLERS[:7])], "John Y"))  # 667, a bound of 666.67
@example(case=([["Xi Jinping"], ["Sevmorneftegaz Trading"]], "Sevmor Neftegaz Trading 9"))  # joined
def test_the_initials_bound_loses_no_name_the_old_bound_found_at_the_floor(
        case: tuple[list[list[str]], str]) -> None:
    """A name the old bound let through at a floor it scores is still a candidate there (each name at
    its own score, the highest floor it reaches): the change only leaves out names that cannot reach
    the floor, but for those the old bound's credit kept by chance, that the xfail tests below keep: a
    name scored written together, and a bound a fraction of a point under the rounded score."""
    names, query = case
    index = make_index(names)
    toks = name_tokens(query).tokens
    ref = reference(index, toks)
    for i, score in enumerate(scores(index, toks)):
        if score < 600:
            continue
        candidates, charged = index.charged_candidates(toks, score)
        listed = index.names[i][3]
        if i in charged and not joined_counts(toks, listed) and not ref.rounded_out(i, score):
            assert i in candidates, (toks, listed, score)
        assert set(candidates) - set(charged) <= ref.twice


@_PROPERTY
@given(_case())
@example(case=([["John Kevin Smith"], ["James Smith"]], "J K Smith"))
@example(case=([["Ole Hansen"], ["Olga Hansen"]], "Ø Hansen"))
@example(case=([["Aleksandr Kovalev"], ["Kim Kovalev"]], "А. Ковалёв"))
@example(case=([["Kim Kim Jong"], ["Karim Kamal Kovalev"]], "K Jong K Kovalev K K"))
@example(case=([["Aleksandr Kovalev"]], "A K Lisbon"))  # no key shared
@example(case=([["Omar"], *([f"Omer {f}"] for f in _FILLERS[:15])], "O Omer"))  # an initial outbids omer
@example(case=([["Omar Aleksandr Petrovich"], ["Aleksandr Smith"], ["Ivan Petrovich"], ["Kim Jong"],
                ["Ole Hansen"]], "Aleksandr Petrovich"))  # 679, a bound of 678.57
def test_every_name_at_the_floor_is_a_candidate_but_for_the_known_misses(
        case: tuple[list[list[str]], str]) -> None:
    """Every name ``name_score`` puts at a floor is a candidate there (each name at its own score),
    except: the documented exceptions (listed initials, particles under 750), a name scored written
    together (``joined_counts``), and the misses the xfail tests below keep (a name no query word
    shares a key with, that initials partner; an initial outbidding a word a key found under 0.9; a
    bound a fraction of a point under the rounded score). Each miss is one of them, and a bound that
    allows for them keeps every other name."""
    names, query = case
    index = make_index(names)
    toks = name_tokens(query).tokens
    ref = reference(index, toks)
    for i, score in enumerate(scores(index, toks)):
        listed = index.names[i][3]
        if score < 600 or documented_exception(listed, score) or joined_counts(toks, listed):
            continue
        assert ref.rounds_to(ref.sound, i, score), (toks, listed, score)
        if i not in index.candidates(toks, score):
            explained = i not in ref.new or i in ref.outbid or ref.rounded_out(i, score)
            assert explained, (toks, listed, score)


_ASCII_TEXT = st.lists(st.sampled_from(_LISTED + _VARIANTS + ["9", "14", "a", "j", "k", "o", "p", "s"]),
                       min_size=1, max_size=20).map(" ".join)


@settings(max_examples=250, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.tuples(_names(), _ASCII_TEXT), _case()), st.sampled_from([700, 750, DEFAULT_FLOOR, 900]))
@example(case=([["Karim Lisbin Haddad"], ["Omar Lisbin Nasser"]], "9 Station Road Lisbon"), floor=800)
@example(case=([["Aleksandr Kovalev"]], "Оплата А Ковалёв 9"), floor=800)  # read twice: as it sounds
def test_a_free_text_is_charged_what_the_old_bound_charged(case: tuple[list[list[str]], str],
                                                           floor: int) -> None:
    """Each reading of the text costs len // CHARS_PER_UNIT, WORD_UNITS per distinct word and
    1 + words // WORDS_PER_UNIT per name of the old bound; one unit less stops in the text; a budget
    that does not stop finds what none finds, and one that stops finds nothing more."""
    names, query = case
    index = make_index(names)
    need = 0
    for reading in filter(None, (query, shape_reading(query))):
        toks = name_tokens(reading).tokens
        need += len(reading) // CHARS_PER_UNIT
        if toks:
            want, edge = reference(index, toks).charged(floor)
            charged = index.charged_candidates(toks, floor)[1]
            assert set(charged) ^ want <= edge
            need += len(set(toks)) * WORD_UNITS + len(charged) * (1 + len(toks) // WORDS_PER_UNIT)
    free = screen_text(index, "remittance", query, floor)
    budget = Budget(1 << 40)
    assert screen_text(index, "remittance", query, floor, budget) == free
    assert budget.total - budget.left == need and budget.stopped is None
    if need > 1:
        short = Budget(need - 1)
        got = screen_text(index, "remittance", query, floor, short)
        assert short.stopped == "remittance"
        best = {h.entry_id: h.score for h in free}  # stopped early: an entry's better name may be unscored
        assert all(h.score <= best.get(h.entry_id, -1) for h in got), (got, free)


# --- hand-built cases ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("listed", "query"), [
    ("John Kevin Smith", "J K Smith"),  # two initials, two unfound tokens
    ("John Kevin Smith", "K J Smith"),  # in the other order
    ("John James Smith", "J J Smith"),  # one letter twice, each partnering one word
    ("Karim Kamal Kovalev", "K K Kovalev"),  # an initial that begins every word of the name
    ("Karim Kamal Kovalev", "Kovalev K. K."),
    ("Aleksandr Petrovich Kovalev", "A P Kovalev"),
    ("Aleksandr Petrovich Kovalev", "A. P. Kovalyov 9"),  # a digit beside the initials
    ("Aleksandr Petrovich Ivanovich Kovalev Smith", "A P I Kovalev Smith"),  # more than 3 informative
    ("Kim Kim Kim Jong", "K K Jong K"),  # four initials: every unfound prefix token counts
    ("Emil Kovalev", "É. Kovalev"),  # é reads e (a particle, and an initial)
    ("Ole Hansen", "Ø Hansen"),  # ø reads o
    ("Aleksandr Kovalev", "А. Ковалёв"),  # Cyrillic А reads a
    ("Aleksandr Kovalev", "ア Kovalev"),  # katakana ア reads a
    ("Xi Jinping", "X Jinping"),
    ("Xi Jinping", "Xi J 9"),
])
def test_a_name_its_initials_reach_is_a_candidate_and_alerts(listed: str, query: str) -> None:
    """Every name at the floor is found through initials, whatever letters they are written in."""
    index = one_each(listed, *_FILLERS)
    toks = name_tokens(query).tokens
    floor = min(DEFAULT_FLOOR, scores(index, toks)[0])
    assert floor >= 700, (toks, floor)  # these are names a bank means to find
    assert 0 in index.candidates(toks, floor), toks
    assert "e0" in {h.entry.entry_id for h in index.match_name(query, floor)}


@pytest.mark.parametrize("floor", [600, 700, 750, 800, 900, 1000])
def test_initials_that_begin_no_listed_word_credit_nothing(floor: int) -> None:
    """"X" and "9" begin no filed word: with or without them the same names are candidates."""
    index = one_each("Karim Lisbin Haddad", "Omar Lisbin Nasser", "Jamal Lisbin Saleh", *_FILLERS)
    base = name_tokens("Lisbin Road").tokens
    for extra in (["x"], ["9"], ["x", "9", "14"], ["x"] * 5):
        toks = (*extra, *base)
        assert index.candidates(toks, floor) == index.candidates(base, floor), extra
        assert hits(index, toks, floor) <= set(index.candidates(toks, floor))


def test_one_initial_credits_one_word_and_the_names_it_cannot_carry_are_charged_not_scored() -> None:
    """"K Kovalev" may partner Karim or Kamal, not both: "Karim Kamal Kovalev" (712) is no candidate at
    the floor, though the old bound, which a free text is still charged for, kept it."""
    index = one_each("Karim Kamal Kovalev", *_FILLERS)
    toks = name_tokens("K Kovalev").tokens
    assert scores(index, toks)[0] == 712
    candidates, charged = index.charged_candidates(toks, DEFAULT_FLOOR)
    assert 0 not in candidates and 0 in charged
    assert index.charged_candidates(name_tokens("K K Kovalev").tokens, DEFAULT_FLOOR)[0] == [0]
    budget = Budget(1 << 30)
    text = "K Kovalev"
    assert screen_text(index, "remittance", text, DEFAULT_FLOOR, budget) == []
    assert budget.total - budget.left == len(text) // CHARS_PER_UNIT + 2 * WORD_UNITS + len(charged)


def test_a_weak_alias_reached_through_initials_is_found_at_nine_tenths() -> None:
    index = make_index([["Ivan Ivanov", "Karim Kamal Petrovich"], *[[f] for f in _FILLERS]],
                       weak=[frozenset({1})])
    query = "K K Petrovich"
    full = name_score(name_tokens(query).tokens, name_tokens("Karim Kamal Petrovich").tokens, index.weight)
    assert full >= 900
    assert [(h.entry.entry_id, h.name_index, h.score) for h in index.match_name(query, full * 9 // 10)] == [
        ("e0", 1, full * 9 // 10)]


def _hash_seed_run() -> list[list[list[int]]]:
    """``charged_candidates`` for a fixed set of lists and queries (run in other processes)."""
    index = one_each("Karim Kamal Kovalev", "Omar Lisbin Nasser", "Xi Jinping", "Kim Kim Jong",
                     "Aleksandr Petrovich Kovalev", "Emil Kovalyov", "Ole Hansen", *_FILLERS)
    out = []
    for query in ("K Kovalev", "K K Kovalev", "9 Station Road Lisbin", "A P Kovalev 9", "X Jinping",
                  "K Jong K K 3", "É Kovalev", "Ø Hansen 14", "O Omer", "J K Smith Baker Nolan"):
        for floor in (600, 750, 800, 900):
            cands, charged = index.charged_candidates(name_tokens(query).tokens, floor)
            out.append([cands, charged])
    return out


_IN_ANOTHER_PROCESS = """
import json, sys
from tests.inference.screening.test_candidate_initials_hostile import _hash_seed_run
json.dump(_hash_seed_run(), sys.stdout)
"""


def test_candidates_and_charges_do_not_depend_on_the_hash_seed() -> None:
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", _IN_ANOTHER_PROCESS], cwd=ROOT, env=env, check=True,
                              capture_output=True, text=True, timeout=120)
        runs.append(json.loads(done.stdout))
    assert runs[0] == runs[1] == _hash_seed_run()


# --- misses ------------------------------------------------------------------------------------------

@pytest.mark.xfail(strict=True, reason="a name that only query initials partner is never a candidate (no key "
                                       "is shared), yet name_score gives 'A K Lisbon' 825 against listed "
                                       "'Aleksandr Kovalev' (each initial 0.9, the unrelated word leaves "
                                       "the query 2/3 explained): match_name and screen_name miss it at "
                                       "floor 800 (as the bound before 8104809 did)")
def test_initials_and_an_unrelated_word_find_the_name_they_score_at_the_floor() -> None:
    index = one_each("Aleksandr Kovalev")
    toks = name_tokens("A K Lisbon").tokens
    assert hits(index, toks, DEFAULT_FLOOR) <= set(index.candidates(toks, DEFAULT_FLOOR)), scores(index, toks)


@pytest.mark.xfail(strict=True, reason="a query initial outbids a word a key found under 0.9: 'O Omer' "
                                       "scores 862 against listed 'Omar' (o partners omar at 0.9, not omer "
                                       "at 0.81), while the bound counts omar at 0.81 (bound 856, floor 862 "
                                       "misses it); as the bound before 8104809 did")
def test_an_initial_partnering_a_word_found_by_key_is_allowed_for() -> None:
    index = one_each("Omar", *(f"Omer {f}" for f in _FILLERS[:15]))
    toks = name_tokens("O Omer").tokens
    assert scores(index, toks)[0] == 862
    assert 0 in index.candidates(toks, 862), [index.names[i][3] for i in index.candidates(toks, 862)]


def test_a_digit_beside_a_name_written_apart_alerts_as_it_did() -> None:
    """A name scored written together (``match.joined_counts``) is not bounded by its tokens: the
    bound's credit for any one-character word kept it, so 'flat 9 Xi Jin Ping road' alerted on 'Xi
    Jinping' (940) and the party 'Sevmor Neftegaz Trading 9' on 'Sevmorneftegaz Trading' (914).
    Recorded decisions are screened again: they still alert, with the initials bound tighter."""
    index = one_each("Xi Jinping", "Sevmorneftegaz Trading", *_FILLERS)
    party = "Sevmor Neftegaz Trading 9"
    assert scores(index, name_tokens(party).tokens)[1] >= DEFAULT_FLOOR
    text = {h.entry_id: h.score for h in screen_text(index, "beneficiary.address", "flat 9 Xi Jin Ping road")}
    name = {h.entry_id: h.score for h in screen_name(index, "beneficiary", party)}
    assert (text.get("e0"), name.get("e1")) == (940, 914)


@pytest.mark.xfail(strict=True, reason="a Cyrillic initial transliterated to two letters is no initial: 'Ж. "
                                       "Ковалёв' reads ('zh', 'kovalev') and scores 444 against listed "
                                       "'Zhanna Kovalev' ('Z. Kovalev' 944); 'Ш.', 'Ч.', 'Я.', 'Ю.' alike "
                                       "(normalise/score, not the bound)")
def test_a_cyrillic_initial_written_in_two_latin_letters_is_an_initial() -> None:
    index = one_each("Zhanna Kovalev", *_FILLERS)
    assert [h.entry.entry_id for h in index.match_name("Ж. Ковалёв", DEFAULT_FLOOR)] == ["e0"]


@pytest.mark.xfail(strict=True, reason="the bound is compared with the floor unrounded, the score rounded: "
                                       "'Aleksandr Petrovich' scores 679 (678.57: 4/7 of listed 'Omar "
                                       "Aleksandr Petrovich' found) but its exact bound 678.57 is under "
                                       "floor 679, so match_name at 679 misses it (any floor where a bound "
                                       "falls within half a point under it), as it always has: what is "
                                       "scored stays among what that bound keeps. 'John Y' at 667 (666.67) "
                                       "against listed 'John Sevmor Y', which that bound keeps, is found")
def test_a_name_whose_score_rounds_up_to_the_floor_is_found() -> None:
    index = one_each("Omar Aleksandr Petrovich", "Aleksandr Smith", "Ivan Petrovich", "Kim Jong",
                     "Ole Hansen")
    toks = name_tokens("Aleksandr Petrovich").tokens
    assert scores(index, toks)[0] == 679
    index2 = one_each("John Sevmor Y", *_FILLERS[:7])
    assert scores(index2, name_tokens("John Y").tokens)[0] == 667
    assert index2.charged_candidates(name_tokens("John Y").tokens, 667)[1] == [0]  # the old bound kept it
    found = [h.entry.entry_id for h in index.match_name("Aleksandr Petrovich", 679)]
    assert (found, [h.entry.entry_id for h in index2.match_name("John Y", 667)]) == (["e0"], ["e0"])


def test_every_candidate_is_charged() -> None:
    """A listed initial a query word finds by key counts as outside and as keyed, so its unfound
    weight is negative and the old bound credits 0.9 of it, lowering itself: 'J Ivanof Abdulrahman'
    against listed 'J Ivanov Abdulrahman' at floor 1000 is not charged (it scores 961). What is
    scored stays among what is charged all the same."""
    index = one_each("J Ivanov Abdulrahman")
    toks = name_tokens("J Ivanof Abdulrahman").tokens
    candidates, charged = index.charged_candidates(toks, 1000)
    assert set(candidates) <= set(charged), (candidates, charged)
