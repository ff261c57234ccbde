"""Hostile probes of ``_TextWindows._sparse`` against ``_TextWindows._dense``: both must score the same
windows, so they give every candidate the same value at every floor (under the floor too), and
``screen_text`` on the sparse path finds exactly the hits of scoring every window. Probed: texts
shorter than the name, texts of exactly L and L + 1 words, alike words at the first and last
position, runs of one word, two tokens exactly a window apart or one less, repeated listed tokens,
one-letter tokens and initials, weak aliases, names written together near the tenth of length,
floors 0, 1, 999, 1000, tokens with no alike word, names of 1 and of 20-70 tokens, look-alike
Cyrillic letters."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from unittest import mock

import pytest

from inference.screening import screen as screen_module
from inference.screening.entries import ListEntry, SanctionsList
from inference.screening.index import ListIndex
from tests.inference.screening.test_text_windows_hostile import new_screen_text, old_screen_text

FLOORS = (0, 1, 500, 750, 850, 950, 999, 1000)
SYL = ["ka", "lo", "vi", "ne", "ra", "ta", "mi", "su", "ko", "pe", "al", "ib", "ov", "ev", "in", "an"]
LETTERS = "abkmvi"


def make_index(entries: Sequence[ListEntry]) -> ListIndex:
    return ListIndex([SanctionsList("internal", "l", None, "ab" * 32, tuple(entries), "t")])


def compare_ways(index: ListIndex, text: str, floors: Sequence[int] = FLOORS) -> int:
    """``_sparse`` == ``_dense`` for every candidate (those found at floor 0, a superset) at every
    floor; and where either reaches the floor it is ``_every_window``'s score. Returns the count."""
    toks = screen_module.name_tokens(text).tokens
    if not toks:
        return 0
    long_text = screen_module._TextWindows(toks)
    checked = 0
    for i in index.candidates(toks, 0):
        listed = index.names[i][3]
        where = long_text._where(listed)
        if not any(where):
            assert long_text.best(listed, index.weight, 0) == 0
            continue
        every = screen_module._every_window(toks, listed, index.weight)
        for floor in floors:
            sparse = long_text._sparse(listed, where, index.weight, floor)
            dense = long_text._dense(listed, where, index.weight, floor)
            assert sparse == dense, (text, listed, floor, sparse, dense)
            if sparse >= floor or every >= floor:
                assert sparse == every, (text, listed, floor, sparse, every)
            checked += 1
    return checked


@pytest.fixture(params=[1 << 30, 0], ids=["every-word", "by-key"])
def sparse_path(request: pytest.FixtureRequest) -> Iterator[None]:
    """``screen_text`` with the filter from one word on, on the sparse path always."""
    with mock.patch.object(screen_module, "BOUNDED_FROM", 1), \
            mock.patch.object(screen_module, "_FEW_WORDS", request.param), \
            mock.patch.object(screen_module, "_SPARSE_STARTS", 1 << 62):
        yield


def check_hits(index: ListIndex, text: str, floors: Sequence[int] = FLOORS) -> None:
    for floor in floors:
        assert new_screen_text(index, text, floor) == old_screen_text(index, text, floor), (text, floor)


def _word(rng: random.Random, lo: int = 1, hi: int = 5) -> str:
    return "".join(rng.choice(SYL) for _ in range(rng.randrange(lo, hi)))


HAND = make_index((
    ListEntry("ivanov", "individual", ("Ivan Ivanov", "Vanya Petrenko"), weak_aliases=frozenset({1})),
    ListEntry("rep", "individual", ("Ivan Ivan Ivan Ivanovich",)),
    ListEntry("aq", "individual", ("A.Q. Khan", "A Q K")),
    ListEntry("one", "entity", ("X",)),
    ListEntry("kalo", "entity", ("Kalovine",)),
    ListEntry("xi", "individual", ("XI Jinping",)),
    ListEntry("kor", "individual", ("Korvalenkom Ibragimovn",)),
    ListEntry("sev", "entity", ("Sevmor Neftegaz Trans",)),
    ListEntry("kov", "individual", ("Aleksandr Petrovich KOVALEV",)),
))
HAND_TEXTS = (
    "x", "ivan", "ivanov", "ivan ivanov", "ivanov ivan", "ivan ivan", "ivan ivan ivan", "ivan x ivanov",
    "ivan x x ivanov", "ivan x x x ivanov", "ivanov x ivan", "i ivanov", "ivan i", "i i i i",
    "ivan ivan ivan ivanovich", "ivan ivan ivanovich ivan", "ivan ivan x ivanovich", "ivanovich",
    "ivan " * 7 + "ivanovich", "x " * 5 + "ivan", "ivan" + " x" * 5, "ivan" + " x" * 5 + " ivanov",
    "vanya petrenko", "v petrenko", "petrenko v", "vanya x petrenko", "a q khan", "a.q. khan", "aq khan",
    "khan a q", "a k", "a q k", "q a k x", "k", "kalovine", "kalo vine", "kalovi ne", "ka lo vine",
    "kalovinex", "kalovin", "kalo vine x", "x kalo vine", "xi jinping", "xijinping", "jinping xi",
    "xi jin ping", "korvalenkom ibragimovn", "korvalenkomibragimovn", "korvalenkomibragimov",
    "korvalenkom ibra gimovn", "korvalen komibragimovn", "sevmorneftegaztrans", "sevmor neftegaztrans",
    "sev mor nefte gaz trans", "sevmorneftegaz trans", "aleksandr petrovich kovalev",
    "kovalev aleksandr", "a p kovalev", "aleksandr x x x petrovich x x x kovalev",
    "aleksandr petrovich x kovalev", "kovalev kovalev kovalev", "Аleksandr Реtrovich KОVАLЕV", "КОВАЛЕВ",
    "пауmеnt tо Alеksandr Kovalev and ivan ivanov", "ivan " * 40, "ivanov " * 30 + "ivan",
)


def test_hand_built_texts_both_ways() -> None:
    assert sum(compare_ways(HAND, t) for t in HAND_TEXTS) > 500


def test_hand_built_texts_hits(sparse_path: None) -> None:
    for text in HAND_TEXTS:
        check_hits(HAND, text)


def test_tokens_a_window_apart_and_one_less() -> None:
    """Two listed tokens ``gap`` words apart, for every gap around the window's sizes, with the
    filler at both ends or none; and a run of one token crossing the window's length."""
    rng = random.Random(3)
    checked = 0
    for L in (1, 2, 3, 4, 6):
        listed = [_word(rng, 2, 4) for _ in range(L)]
        idx = make_index([ListEntry("n", "individual", (" ".join(listed),))])
        filler = "zzq"
        for gap in range(0, L + 4):
            for pre, post in ((0, 0), (0, 3), (3, 0), (L, L + 1)):
                words = [filler] * pre + [listed[0]] + [filler] * gap + [listed[-1]] + [filler] * post
                checked += compare_ways(idx, " ".join(words))
                words = [filler] * pre + [listed[-1]] * (gap + 1) + [filler] * post
                checked += compare_ways(idx, " ".join(words))
        for n in (L - 1, L, L + 1, L + 2):  # texts of exactly about L words
            for k in range(max(n, 1)):
                words = [filler] * max(n, 1)
                words[k] = listed[k % L]
                checked += compare_ways(idx, " ".join(words))
    assert checked > 1000


def _random_case(rng: random.Random) -> tuple[ListIndex, list[str]]:
    vocab = [_word(rng) if rng.random() > 0.2 else rng.choice(LETTERS) for _ in range(rng.randrange(4, 18))]
    entries = []
    for e in range(rng.randrange(1, 5)):
        names = []
        for _ in range(rng.randrange(1, 3)):
            size = rng.choice([1, 1, 2, 2, 3, 3, 4, 5, 7])
            name = [rng.choice(vocab) for _ in range(size)]
            if rng.random() < 0.15:  # a word written apart in the list
                w = _word(rng, 3, 6)
                cut = rng.randrange(1, len(w))
                name += [w[:cut], w[cut:]]
            names.append(" ".join(name))
        weak = frozenset({0}) if rng.random() < 0.3 else frozenset()
        kind = rng.choice(["individual", "entity"])
        entries.append(ListEntry(f"e{e}", kind, tuple(names), weak_aliases=weak))
    idx = make_index(entries)
    noise = [_word(rng) for _ in range(5)] + ["zzq", "payment"]
    n = rng.choice([0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 30])
    words = [rng.choice(noise) if rng.random() < 0.6 else rng.choice(vocab) for _ in range(n)]
    name = rng.choice(rng.choice(entries).names).split()
    roll = rng.random()
    if roll < 0.2:
        name = ["".join(name)]  # written together
    elif roll < 0.35:
        joined = "".join(name)
        cut = rng.randrange(1, len(joined) + 1)
        name = [joined[:cut], joined[cut:]]  # written apart elsewhere
    elif roll < 0.5:
        name = [w[:1] if rng.random() < 0.5 else w for w in name]  # initials
    elif roll < 0.6:
        name = name[: rng.randrange(1, len(name) + 1)]
    if rng.random() < 0.5:
        words = name + words if rng.random() < 0.5 else words + name  # at the first or last position
    else:
        at = rng.randrange(len(words) + 1)
        words[at:at] = name
    if rng.random() < 0.2 and words:
        w = rng.choice(words)
        at = rng.randrange(len(words) + 1)
        words[at:at] = [w] * rng.randrange(2, 7)  # a run of one word
    return idx, [w for w in words if w]


def test_random_small_names_both_ways() -> None:
    checked = 0
    for seed in range(350):
        rng = random.Random(seed)
        idx, words = _random_case(rng)
        checked += compare_ways(idx, " ".join(words))
    assert checked > 5000


def test_random_small_names_hits(sparse_path: None) -> None:
    for seed in range(120):
        rng = random.Random(1000 + seed)
        idx, words = _random_case(rng)
        check_hits(idx, " ".join(words), (0, 1, 750, 950, 1000))


def test_names_of_many_tokens_both_ways_and_hits(sparse_path: None) -> None:
    rng = random.Random(23)
    vocab = [_word(rng, 2, 4) for _ in range(90)] + list("abk")
    entries = [ListEntry(f"n{L}", "entity", (" ".join(rng.choice(vocab) for _ in range(L)),))
               for L in (20, 33, 47, 70)]
    entries.append(ListEntry("short", "individual", (f"{vocab[0]} {vocab[1]}",)))
    idx = make_index(entries)
    checked = 0
    for e in entries[:4]:
        toks = e.names[0].split()
        L = len(toks)
        texts = [toks, toks[:-1], [*toks, "zzq"], ["zzq", *toks], toks[:3], toks[-2:], toks[::-1],
                 toks[: L // 2] + ["zzq"] * 5 + toks[L // 2:], [toks[0]] + ["zzq"] * (L - 1) + [toks[-1]],
                 [toks[0]] + ["zzq"] * L + [toks[-1]], [toks[0]] + ["zzq"] * (L + 1) + [toks[1]],
                 ["".join(toks[:5]), *toks[5:]], rng.sample(vocab, 30)]
        for text in texts:
            checked += compare_ways(idx, " ".join(text), (0, 1, 800, 1000))
            check_hits(idx, " ".join(text), (0, 800, 1000))
    assert checked > 100


def test_lookalike_cyrillic_hits(sparse_path: None) -> None:
    rng = random.Random(9)
    swap = str.maketrans({"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "k": "к", "x": "х"})
    for text in HAND_TEXTS[:40]:
        mixed = " ".join(w.translate(swap) if rng.random() < 0.5 else w for w in text.split())
        check_hits(HAND, mixed, (0, 750, 950))
        assert compare_ways(HAND, mixed) >= 0


def test_words_alike_several_tokens_both_ways() -> None:
    """Listed tokens that are alike one another (a word, it less a letter, it and a letter more, and
    its initial), so one word of the text stands for several of a name's tokens at once."""
    checked = 0
    for seed in range(200):
        rng = random.Random(seed)
        base = [_word(rng, 2, 4) for _ in range(4)]
        vocab = base + [b[:-1] for b in base] + [b + "a" for b in base] + list("abkv")[:rng.randrange(0, 4)]
        entries = [ListEntry(f"e{e}", "individual",
                             (" ".join(rng.choice(vocab) for _ in range(rng.choice([1, 2, 3, 4, 6, 9]))),))
                   for e in range(3)]
        idx = make_index(entries)
        share = rng.random()
        words = [rng.choice(vocab) if rng.random() < share else "zzq" for _ in range(rng.randrange(1, 30))]
        checked += compare_ways(idx, " ".join(words))
    assert checked > 2000
