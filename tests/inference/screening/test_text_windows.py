"""Free text screened with the window filter finds exactly what scoring every window finds: the
filter may only leave out windows that cannot reach the floor. Checked against the straightforward
definition (every window around a word alike a listed token, each scored) on random texts of
listed words, their typos, initials, names written together or apart, and noise; at floors from
low to the default; with the filter taking texts from one word on, from 64, or never; with a
candidate's windows found from where its words stand, with arrays, or as the text's size chooses."""

from __future__ import annotations

import random
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from inference.screening import screen as screen_module
from inference.screening.entries import ListEntry, SanctionsList
from inference.screening.index import ListIndex
from inference.screening.match import (
    joined_counts,
    joined_may_count,
    joined_may_pass,
    name_score,
    token_similarity,
)
from inference.screening.normalise import name_tokens
from inference.screening.screen import DEFAULT_FLOOR, screen_text

ENTRIES = (
    ListEntry("kovalev", "individual", ("Aleksandr Petrovich KOVALEV", "Alexander Kovalyov")),
    ListEntry("xi", "individual", ("XI Jinping",)),
    ListEntry("sevmor", "entity", ("Sevmorneftegaz",)),
    ListEntry("hassan", "individual", ("Mohammed Ali HASSAN",)),
    ListEntry("khan", "individual", ("A.Q. Khan",)),
    ListEntry("tehran", "entity", ("TEHRAN IMPORTS COMPANY",)),
    ListEntry("ivanov", "individual", ("Ivan Ivanov", "Vanya Petrenko"), weak_aliases=frozenset({1})),
    ListEntry("smith", "individual", ("John Smith",)),
)
INDEX = ListIndex([SanctionsList("internal", "l", None, "ab" * 32, ENTRIES, "t")])
WORDS = ("aleksandr", "alexandr", "petrovich", "kovalev", "kovaljov", "kovalyov", "xi", "jin", "ping",
         "jinping", "sevmor", "neftegaz", "sevmorneftegas", "mohammed", "muhammad", "ali", "hassan", "a",
         "q", "khan", "aq", "tehran", "imports", "company", "ivan", "ivanov", "vanya", "petrenko", "john",
         "jon", "smith", "smyth", "invoice", "no", "payment", "for", "goods", "rent", "march", "ltd")


def every_window(index: ListIndex, text: str, floor: int) -> dict[str, int]:
    """The definition the filter must keep: each candidate scored on every window of its name's length
    (and one longer) around a word alike one of its tokens; entry -> best score at or above ``floor``."""
    toks = name_tokens(text).tokens
    found: dict[str, int] = {}
    if not toks:
        return found
    for i in index.candidates(toks, floor):
        _, entry, k, listed = index.names[i]
        near = [p for p, t in enumerate(toks) if any(token_similarity(t, x) > 0.0 for x in listed)]
        score = 0
        for size in (len(listed), len(listed) + 1):
            starts = {s for p in near for s in range(p - size + 1, p + 1)
                      if s >= 0 and (s + size <= len(toks) or s == 0)}
            for start in starts:
                score = max(score, name_score(toks[start:start + size], listed, index.weight))
        if entry.weak_aliases and k in entry.weak_aliases:
            score = score * 9 // 10
        if score >= floor:
            found[entry.entry_id] = max(found.get(entry.entry_id, 0), score)
    return found


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 90), st.sampled_from([0, 600, 750, DEFAULT_FLOOR, 950]),
       st.sampled_from([1, 64, 1 << 62]), st.sampled_from([0, 256]), st.sampled_from([-1, 256, 1 << 62]))
def test_the_window_filter_finds_what_scoring_every_window_finds(seed: int, words: int, floor: int,
                                                                 bounded_from: int, few: int,
                                                                 sparse: int) -> None:
    """``few``: up to how many distinct words each is tried against a listed token (0: the words to
    try are always gathered by the token's keys); ``sparse``: up to how many window starts a candidate's
    windows are found one by one (-1: always with arrays)."""
    rng = random.Random(seed)
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    with mock.patch.object(screen_module, "BOUNDED_FROM", bounded_from), \
            mock.patch.object(screen_module, "_FEW_WORDS", few), \
            mock.patch.object(screen_module, "_SPARSE_STARTS", sparse):
        hits = screen_text(INDEX, "remittance", text, floor)
    got = {h.entry_id: h.score for h in hits if h.score >= floor}
    assert got == every_window(INDEX, text, floor), text


@mock.patch.object(screen_module, "BOUNDED_FROM", 1)
def test_names_written_together_or_cut_by_the_end_of_the_text_are_still_found() -> None:
    assert {h.entry_id: h.score for h in screen_text(INDEX, "r", "paid to xi jin ping", 600)}["xi"] == 940
    # "xi jin ping" reaches "XI Jinping" only written together (940: its tokens alone find "xi")
    for text, entry in (("paid to xi jin ping", "xi"), ("for jinping", "xi"), ("invoice a q khan", "khan"),
                        ("kovalev", "kovalev"), ("xi jinping kovalev aleksandr", "kovalev")):
        got = {h.entry_id: h.score for h in screen_text(INDEX, "remittance", text, 400)}
        assert got.get(entry, 0) == every_window(INDEX, text, 400).get(entry, 0) > 0, text


def test_the_length_test_never_turns_away_names_alike_written_together() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        a = "".join(rng.choice("aeiknoprstv") for _ in range(rng.randrange(1, 14)))
        b = a
        for _ in range(rng.randrange(3)):  # a few edits
            i = rng.randrange(len(b) + 1)
            b = b[:i] + rng.choice(("", "x", "ab")) + b[i + 1:]
        if joined_counts([a, ""], [b]) or joined_counts([a[:1], a[1:]], [b]):
            assert joined_may_count(len(a), len(b))


def test_the_similarity_prefilter_never_turns_away_names_alike_written_together() -> None:
    rng = random.Random(4)
    for _ in range(300):
        listed = ["".join(rng.choice("aeiknoprstv") for _ in range(rng.randrange(1, 9)))
                  for _ in range(rng.randrange(1, 4))]
        windows: list[list[str]] = []
        for _ in range(20):
            b = "".join(listed)
            for _ in range(rng.randrange(3)):  # a few edits
                i = rng.randrange(len(b) + 1)
                b = b[:i] + rng.choice(("", "x", "ab")) + b[i + 1:]
            cut = sorted(rng.sample(range(1, len(b)), min(len(listed), len(b) - 1))) if len(b) > 1 else []
            windows.append([b[i:j] for i, j in zip([0, *cut], [*cut, len(b)], strict=True) if b[i:j]])
        kept = set(joined_may_pass(["".join(w) for w in windows], "".join(listed)))
        counted = {i for i, w in enumerate(windows) if joined_counts(w, listed)}
        assert counted <= kept
    far = ["zzzz", "qqqq"]  # and it turns away what is far
    assert joined_may_pass(["".join(far), "abcdefghij", "abcdefghix", "abcdefgx"], "abcdefghij") == [1, 2]
