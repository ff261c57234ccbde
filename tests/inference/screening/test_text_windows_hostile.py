"""Hostile probes of free-text screening's window filter (``screen._TextWindows``): the hits it finds
must be exactly those of scoring every window, the definition before the filter (a copy of that loop
is the reference here). Probed: weak aliases, names of many tokens (past 16, 64 and the index's 64
slots), repeated listed tokens, initials and one-letter words, names written together at the 10%
length boundary, texts shorter than the name, floors 0, 1, 999, 1000, look-alike Cyrillic letters,
empty text, entries of several names, the names of the real list vectors, and a 100 KB text against
a 64-token name (time). Each runs with the filter taking texts from one word on, and with the words
gathered for a listed token both by trying every word and by key."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from inference.screening import screen as screen_module
from inference.screening.entries import ListEntry, SanctionsList
from inference.screening.index import ListIndex
from inference.screening.lists import load
from inference.screening.normalise import shape_reading
from inference.screening.screen import DEFAULT_FLOOR, screen_text
from tests.inference.screening.test_text_windows import every_window

VECTORS = Path(__file__).parents[2] / "vectors" / "sanctions"


def make_index(entries: tuple[ListEntry, ...]) -> ListIndex:
    return ListIndex([SanctionsList("internal", "l", None, "ab" * 32, entries, "t")])


def old_screen_text(index: ListIndex, text: str, floor: int) -> dict[str, int]:
    found = every_window(index, text, floor)
    shaped = shape_reading(text)
    if shaped is not None:
        for e, s in every_window(index, shaped, floor).items():
            found[e] = max(found.get(e, 0), s)
    return found


def new_screen_text(index: ListIndex, text: str, floor: int) -> dict[str, int]:
    got: dict[str, int] = {}
    for h in screen_text(index, "remittance", text, floor):
        got[h.entry_id] = max(got.get(h.entry_id, 0), h.score)
    return got


@pytest.fixture(params=["every-word/sparse", "by-key/sparse", "every-word/dense", "by-key/dense"],
                autouse=True)
def bounded(request: pytest.FixtureRequest) -> Iterator[None]:
    """The filter from one word on; the words tried for a listed token all, or gathered by key; a
    candidate's windows found from where its words stand (``_sparse``), or with arrays (``_dense``)."""
    gather, path = request.param.split("/")
    few = 1 << 30 if gather == "every-word" else 0
    starts = 1 << 62 if path == "sparse" else -1
    with mock.patch.object(screen_module, "BOUNDED_FROM", 1, create=True), \
            mock.patch.object(screen_module, "_FEW_WORDS", few, create=True), \
            mock.patch.object(screen_module, "_SPARSE_STARTS", starts, create=True):
        yield


def check(index: ListIndex, text: str, floors: tuple[int, ...] = (0, 1, 600, 800, 950, 999, 1000)) -> None:
    for floor in floors:
        assert new_screen_text(index, text, floor) == old_screen_text(index, text, floor), (text, floor)


SYL = ["ka", "lo", "vi", "ne", "ra", "ta", "mi", "su", "ko", "pe", "al", "ib", "ov", "ev", "in", "an"]


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(SYL) for _ in range(rng.randrange(1, 5)))


def test_weak_aliases_initials_and_repeated_tokens() -> None:
    idx = make_index((
        ListEntry("ivanov", "individual", ("Ivan Ivanov", "Vanya Petrenko"), weak_aliases=frozenset({1})),
        ListEntry("rep", "individual", ("Ivan Ivan Ivan Ivanovich",)),
        ListEntry("aq", "individual", ("A.Q. Khan", "A Q K")),
        ListEntry("one", "entity", ("X",)),
        ListEntry("xi", "individual", ("XI Jinping",)),
    ))
    for text in ("vanya petrenko", "v petrenko", "ivan ivan ivan", "ivan ivan ivanovich ivan",
                 "a q khan", "a.q. khan", "aq khan", "x", "x y z", "xi jin ping", "xijinping", "jinpingxi",
                 "petrenko", "ivan", "khan a q", "a k", "i i i i", "ivan " * 5 + "ivanovich"):
        check(idx, text)


def test_many_token_names_and_texts_shorter_than_them() -> None:
    rng = random.Random(11)
    vocab = [_word(rng) + _word(rng) for _ in range(120)]
    entries = tuple(ListEntry(f"n{L}", "entity", (" ".join(rng.sample(vocab, L)),), weak_aliases=frozenset())
                    for L in (17, 24, 63, 64, 65, 80))
    idx = make_index(entries)
    for e in entries:
        toks = e.names[0].split()
        for text in (" ".join(toks), " ".join(toks[:-1]), " ".join(toks[:3]), " ".join(toks[-3:]),
                     " ".join(toks[::-1]), "pay " + " ".join(toks[:len(toks) // 2])):
            check(idx, text, (0, 800))


def test_names_written_together_at_the_tenth_of_length_boundary() -> None:
    # listed "abcdefghi jklmnopqrs" (19 letters); texts of 17..21 letters written in two or three words
    idx = make_index((ListEntry("j", "individual", ("Korvalenkom Ibragimovn", "Sevmor Neftegaz Trans")),))
    base = "korvalenkomibragimovn"
    for cut in range(len(base) + 1):
        for drop in range(0, 4):
            s = base[:cut] + base[cut + drop:]
            for split in (3, 8, 12):
                check(idx, f"{s[:split]} {s[split:]}", (0, 600, 800, 900))
                check(idx, f"{s[:split]} {s[split:split + 4]} {s[split + 4:]}", (0, 800, 900))
    for text in ("sevmorneftegaztrans", "sevmorneftegaz trans", "sevmor neftegaztrans", "sevmorneftegas",
                 "sev mor nefte gaz trans"):
        check(idx, text)


def test_lookalike_letters_empty_and_whitespace() -> None:
    idx = make_index((ListEntry("kov", "individual", ("Aleksandr Petrovich KOVALEV",)),
                      ListEntry("bank", "entity", ("Bank Sepah",))))
    for text in ("", "   ", "\n\t", "*** ---", "Аleksandr Реtrovich KОVАLЕV", "ВАNK Sеpah", "КОВАЛЕВ",
                 "пауmеnt tо Alеksandr Kovalev and bаnk sepah", "kovalev" * 50):
        check(idx, text)


def test_random_names_and_texts() -> None:
    for seed in range(40):
        rng = random.Random(seed)
        vocab = [_word(rng) if rng.random() > 0.15 else rng.choice("abkmv")
                 for _ in range(rng.randrange(5, 25))]
        entries = tuple(
            ListEntry(f"e{e}", "individual",
                      tuple(" ".join(rng.choice(vocab) for _ in range(rng.choice([1, 2, 3, 5, 18])))
                            for _ in range(rng.randrange(1, 4))),
                      weak_aliases=frozenset({0}) if rng.random() < 0.3 else frozenset())
            for e in range(rng.randrange(1, 6)))
        idx = make_index(entries)
        for _ in range(3):
            words = [rng.choice(vocab) for _ in range(rng.randrange(0, 40))]
            name = rng.choice(rng.choice(entries).names).split()
            if rng.random() < 0.3:
                name = ["".join(name)]
            at = rng.randrange(len(words) + 1)
            words[at:at] = name
            check(idx, " ".join(words), (0, 700, DEFAULT_FLOOR, 1000))


@pytest.fixture(scope="module")
def real_index() -> tuple[ListIndex, list[str]]:
    lists = [load((VECTORS / "ofac_sdn.xml").read_bytes(), "ofac-xml", "ofac-sdn"),
             load((VECTORS / "un_consolidated.xml").read_bytes(), "un-xml", "un"),
             load((VECTORS / "eu_fsf.xml").read_bytes(), "eu-xml", "eu"),
             load((VECTORS / "uk_sanctions_list.xml").read_bytes(), "uk-xml", "uk")]
    return ListIndex(lists), [n for lst in lists for e in lst.entries for n in e.names]


def test_names_from_the_real_list_vectors(real_index: tuple[ListIndex, list[str]]) -> None:
    idx, names = real_index
    rng = random.Random(5)
    for _ in range(60):
        parts: list[str] = []
        for _ in range(rng.randrange(1, 4)):
            name = rng.choice(names).split()
            if rng.random() < 0.3:
                name = rng.sample(name, rng.randrange(1, len(name) + 1))
            parts += [w if rng.random() < 0.7 else w[:1] for w in name] + ["invoice"]
        check(idx, " ".join(parts), (0, 750, DEFAULT_FLOOR, 950))


def test_a_100_kb_text_against_a_64_token_name_is_quick() -> None:
    rng = random.Random(1)
    toks = ["".join(rng.choice(SYL) for _ in range(4)) for _ in range(64)]
    idx = make_index((ListEntry("big", "entity", (" ".join(toks),)),
                      ListEntry("two", "individual", (f"{toks[0]} {toks[1]}",))))
    text = " ".join(rng.choice(toks) for _ in range(12_000))[:100_000]
    t = time.perf_counter()
    with mock.patch.object(screen_module, "_SPARSE_STARTS", 256):  # the path chosen as in service
        screen_text(idx, "remittance", text, DEFAULT_FLOOR)
    assert time.perf_counter() - t < 6.0  # scoring every window of it took about two minutes


def test_both_ways_of_finding_windows_give_every_candidate_the_same_score(
        real_index: tuple[ListIndex, list[str]]) -> None:
    """Not only the hits: ``_sparse`` and ``_dense`` score the same windows, so they agree on every
    candidate, under the floor too; over texts of listed words, repeated words and runs of one word."""
    idx, names = real_index
    rng = random.Random(17)
    vocab = sorted({w for n in names[:400] for w in n.split()})
    for trial in range(40):
        words = [rng.choice(vocab) for _ in range(rng.randrange(64, 400))]
        if trial % 4 == 0:  # runs of one word, and the same word far apart
            w = rng.choice(words)
            words[5:5] = [w] * rng.randrange(2, 9)
            words.append(w)
        toks = screen_module.name_tokens(" ".join(words)).tokens
        long_text = screen_module._TextWindows(toks)
        for floor in (0, 600, DEFAULT_FLOOR):
            for i in idx.candidates(toks, floor)[:150]:
                listed = idx.names[i][3]
                where = long_text._where(listed)
                if not any(where):
                    continue
                assert (long_text._sparse(listed, where, idx.weight, floor)
                        == long_text._dense(listed, where, idx.weight, floor)), (listed, floor)
