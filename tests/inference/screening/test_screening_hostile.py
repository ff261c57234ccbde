"""Hostile tests of sanctions name screening: what an evader writes to slip past, what makes a bank
alert on the wrong person, and what crashes, stalls or changes its answer.

Each test asserts the behaviour a bank relies on. Where the code falls short the test is marked
``xfail(strict=True)`` with the defect in its reason, so that a fix shows up as an XPASS to act on;
every other test is a probe the code passes and must go on passing. The index's candidate bound is
cross-checked against scoring every indexed name by brute force (``match.name_score``), the
independent reference the index claims to agree with.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from audit.screening.diff import diff_lists
from inference.messages.transaction import Identifier, Party
from inference.screening.entries import EntryId, ListEntry, SanctionsList
from inference.screening.errors import ScreeningError
from inference.screening.index import ListIndex
from inference.screening.match import name_score
from inference.screening.normalise import name_tokens
from inference.screening.screen import DEFAULT_FLOOR, screen_name, screen_text

ROOT = Path(__file__).parents[3]
T = TypeVar("T")

KOVALEV = ListEntry("kovalev", "individual", ("Aleksandr Petrovich KOVALEV", "Alexander Kovalyov"),
                    dob_years=frozenset({1961}), countries=("RU",))
ENTRIES: tuple[ListEntry, ...] = (
    KOVALEV,
    ListEntry("tehran", "entity", ("TEHRAN IMPORTS COMPANY",), bics=("TEHRIRTH",)),
    ListEntry("hassan", "individual", ("Mohammed Ali HASSAN",)),
    ListEntry("xi", "individual", ("XI Jinping",)),
    ListEntry("sevmor", "entity", ("Sevmorneftegaz",),
              identifiers=(EntryId("Registration ID", "1027700070518", "RU"),
                           EntryId("Passport", "AB1234567", "RU"))),
    ListEntry("yildirim", "individual", ("İsmail Yıldırım",)),
    ListEntry("strauss", "individual", ("Hans Strauß",)),
    ListEntry("fischer", "entity", ("Fischer Shipping",)),
    ListEntry("smith", "individual", ("John Smith",)),
    ListEntry("sepah", "entity", ("Bank Sepah",)),
    ListEntry("hamas", "entity", ("HAMAS",)),
    ListEntry("khan", "individual", ("A.Q. Khan",)),
    ListEntry("ivanov", "individual", ("Ivan Ivanov", "Vanya Petrenko"), weak_aliases=frozenset({1})),
)


def make_index(entries: Sequence[ListEntry], name: str = "bank-list") -> ListIndex:
    return ListIndex([SanctionsList("internal", name, None, "ab" * 32, tuple(entries), "test/1")])


@pytest.fixture(scope="module")
def index() -> ListIndex:
    return make_index(ENTRIES)


def scores(index: ListIndex, text: str, floor: int = 0) -> dict[str, int]:
    """Entry id -> score of every entry ``match_name`` finds at ``floor`` or above."""
    return {h.entry.entry_id: h.score for h in index.match_name(text, floor)}


def alerts(index: ListIndex, text: str) -> dict[str, int]:
    """Entry id -> score of what screening a party with this name alerts on (the default floor)."""
    return {h.entry_id: h.score for h in screen_name(index, "beneficiary", text)}


def text_alerts(index: ListIndex, text: str) -> dict[str, int]:
    return {h.entry_id: h.score for h in screen_text(index, "remittance", text, DEFAULT_FLOOR)}


class OverBudget(Exception):
    """Raised inside a computation that ran past its time budget."""


def within(seconds: float, fn: Callable[[], T]) -> T:
    """``fn()``, interrupted with ``OverBudget`` after ``seconds``: SIGALRM, repeated every 50 ms in case
    one lands where an exception is swallowed (a gc callback), and checked again on return. The alarm
    pytest-timeout set is put back afterwards."""
    expired = []

    def stop(signum: int, frame: object) -> None:
        expired.append(True)
        raise OverBudget(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    started = time.monotonic()
    try:
        result = fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))
    if expired:
        raise OverBudget(f"ran past {seconds} s")
    return result


# --- evasion that is caught ----------------------------------------------------------------------

@pytest.mark.parametrize("query", [
    "Aleks\u200bandr Kova\u200blev",  # zero-width spaces inside words
    "Alek\u00adsandr Kova\u00adlev",  # soft hyphens inside words
    "Aleksandr Kovаlеv",  # Cyrillic а and е in a Latin name
    "Αleksandr Κovalev",  # Greek capital alpha and kappa
    "A\u0301leksandr Ko\u0308valev",  # combining marks
    "K\u0336o\u0336v\u0336a\u0336l\u0336e\u0336v\u0336 Aleksandr",  # combining strike-through on every letter
    "Ａｌｅｋｓａｎｄｒ Ｋｏｖａｌｅｖ",  # full-width
    "𝐀𝐥𝐞𝐤𝐬𝐚𝐧𝐝𝐫 𝐊𝐨𝐯𝐚𝐥𝐞𝐯",  # mathematical bold
    "Ⓐⓛⓔⓚⓢⓐⓝⓓⓡ Ⓚⓞⓥⓐⓛⓔⓥ",  # circled letters
    "ᴀʟᴇᴋsᴀɴᴅʀ ᴋᴏᴠᴀʟᴇᴠ",  # small capitals
    "\u202eAleksandr Kovalev\u202c",  # right-to-left override around the name
    "\u200fAleksandr \u200fKovalev",  # right-to-left marks before words
    "Aleksandr\nKovalev",  # a line break between the words
    "KOVALEV, Aleksandr",  # surname first with a comma
    "Mr. A. P. Kovalev",  # honorific and initials
    "Александр Ковалёв",  # Cyrillic script
])
def test_disguised_spellings_of_a_listed_name_still_alert(index: ListIndex, query: str) -> None:
    assert "kovalev" in alerts(index, query), (query, name_tokens(query))


@pytest.mark.parametrize(("query", "entry"), [
    ("ISMAIL YILDIRIM", "yildirim"),  # Turkish dotless/dotted i written in ASCII upper case
    ("İSMAİL YILDIRIM", "yildirim"),
    ("ısmaıl yıldırım", "yildirim"),
    ("HANS STRAUSS", "strauss"),  # German sharp s
    ("Hans Strauss", "strauss"),
    ("ﬁscher shipping", "fischer"),  # ligature
    ("FISCHER SHIPPING LTD", "fischer"),  # legal form added
])
def test_case_folding_and_ligatures_do_not_hide_a_name(index: ListIndex, query: str, entry: str) -> None:
    assert alerts(index, query).get(entry) == 1000, (query, alerts(index, query))


def test_a_listed_name_on_its_own_lines_of_free_text_alerts(index: ListIndex) -> None:
    text = "INV 4411\nGOODS PER CONTRACT\nBENEFICIARY ALEKSANDR\nKOVALEV\nTHANK YOU"
    assert "kovalev" in text_alerts(index, text)


# --- evasion that slips through ------------------------------------------------------------------

@pytest.mark.parametrize(("query", "entry"), [
    ("ВАNK SЕРАН", "sepah"),  # Cyrillic В А Е Р Н among Latin letters
    ("НАМАЅ", "hamas"),  # Cyrillic Н А М А and Ѕ: looks exactly like HAMAS
])
def test_mixed_script_look_alikes_are_folded_by_shape(index: ListIndex, query: str, entry: str) -> None:
    assert entry in alerts(index, query), (query, name_tokens(query))


@pytest.mark.parametrize("query", [
    "K.O.V.A.L.E.V Aleksandr",
    pytest.param("A.L.E.K.S.A.N.D.R K.O.V.A.L.E.V", marks=pytest.mark.xfail(
        strict=True, reason="two names spelt out letter by letter run together into one 16-letter word")),
])
def test_a_name_spelled_out_letter_by_letter_alerts(index: ListIndex, query: str) -> None:
    assert "kovalev" in alerts(index, query), (query, name_tokens(query))


@pytest.mark.parametrize(("query", "entry"), [
    ("XiJinping", "xi"),
    ("AleksandrKovalev", "kovalev"),
    ("Aleksandr\u2060Kovalev", "kovalev"),  # word joiner: shows as "AleksandrKovalev"
    ("TEHRANIMPORTS", "tehran"),
])
def test_a_listed_name_written_as_one_word_alerts(index: ListIndex, query: str, entry: str) -> None:
    assert entry in alerts(index, query), (query, name_tokens(query))


def test_a_one_word_listed_name_written_apart_alerts(index: ListIndex) -> None:
    listed = name_tokens("Sevmorneftegaz").tokens
    assert name_score(name_tokens("Sevmor Neftegaz").tokens, listed, index.weight) >= DEFAULT_FLOOR
    assert "sevmor" in alerts(index, "Sevmor Neftegaz")


@pytest.mark.xfail(strict=True, reason="a surname split by a space or hyphen ('Aleksandr Ko valev', "
                                       "'Kova-lev') scores about 400 (804 at 33e0204)")
@pytest.mark.parametrize("query", ["Aleksandr Ko valev", "Aleksandr Koval ev", "Aleksandr Kova lev",
                                   "Aleksandr Kova-lev", "Alek Sandr Kovalev"])
def test_a_name_split_inside_a_word_alerts(index: ListIndex, query: str) -> None:
    assert "kovalev" in alerts(index, query), (query, scores(index, query))


@pytest.mark.parametrize(("query", "entry"), [
    ("Aleksandr K0valev", "kovalev"),
    ("ALEKSANDR K0VA1EV", "kovalev"), ("A1eksandr K0va1ev", "kovalev"), ("4LEKS4NDR K0V4LEV", "kovalev"),
    ("BANK 5EPAH", "sepah"),
])
def test_digits_written_for_look_alike_letters_still_alert(index: ListIndex, query: str, entry: str) -> None:
    assert entry in alerts(index, query), (query, scores(index, query))


@pytest.mark.xfail(strict=True, reason="a listed name given whole inside a longer party name scores under "
                                       "the floor: 'HAMAS Charitable Society Gaza City Office' 792")
@pytest.mark.parametrize(("query", "entry"), [
    ("HAMAS Charitable Society Gaza City Office", "hamas"),
    ("Sevmorneftegaz Murmansk Shelf Drilling Operations Office", "sevmor"),
    ("Aleksandr Petrovich Kovalev c/o Volga River Logistics Services Moscow Russia Federation Branch Office "
     "Nine Tverskaya Street", "kovalev"),  # 123 characters: within an ISO 20022 Nm
])
def test_a_listed_name_given_whole_inside_a_longer_party_name_alerts(index: ListIndex, query: str,
                                                                     entry: str) -> None:
    assert entry in alerts(index, query), (query, scores(index, query))


@pytest.mark.parametrize(("value", "entry"), [
    ("１０２７７０００７０５１８", "sevmor"),  # full-width digits
    ("١٠٢٧٧٠٠٠٧٠٥١٨", "sevmor"),  # Arabic-Indic digits
    ("АВ1234567", "sevmor"),  # Cyrillic А and В
])
def test_an_identifier_in_other_digits_or_look_alike_letters_is_found(index: ListIndex, value: str,
                                                                       entry: str) -> None:
    assert [h.entry.entry_id for h in index.match_identifier(value)] == [entry]


def test_identifiers_in_plain_ascii_match_with_any_punctuation(index: ListIndex) -> None:
    assert [h.entry.entry_id for h in index.match_identifier(" 1027-700-070 518 ")] == ["sevmor"]
    assert [h.entry.entry_id for h in index.match_identifier("ab 123 4567")] == ["sevmor"]
    for junk in ("", "----", " . / ", "AB12345670"):
        assert index.match_identifier(junk) == []
    odd = make_index([ListEntry("odd", "entity", ("Odd Holdings",),
                                identifiers=(EntryId("Other", "----"), EntryId("Other", "1-2")))])
    for value in ("", "----", "1-2", "12"):
        assert odd.match_identifier(value) == []  # too short to identify anyone, listed or not


@pytest.mark.parametrize(("bic", "found"), [
    ("TEHRIRTH", True), ("tehrirth", True), (" TEHRIRTH ", True), ("TEHRIRTHXXX", True),
    ("TEHRIRTH1", True), ("TEHRIRTH12", True),  # odd lengths: the institution and place still compared
    ("TEHRIRT", False), ("TEHR", False), ("", False), ("        ", False), ("TEHRIRTX", False),
])
def test_bics_of_any_length_compare_by_institution_and_place(index: ListIndex, bic: str, found: bool) -> None:
    assert bool(index.match_bic(bic)) is found


# --- false alarms --------------------------------------------------------------------------------

@pytest.mark.parametrize(("query", "entry"), [
    ("Mohammed Ali", "hassan"),  # the listed man's two common names without his surname
    ("John Brown", "smith"),  # a shared common first name
    ("Jane Smith", "smith"),  # a shared common surname
    ("Alexander Smith", "kovalev"),
    ("Aleksandr Ivanov", "kovalev"),
    ("Ivan Petrov", "ivanov"),
    ("Tehran Carpets Ltd", "tehran"),
])
def test_another_person_sharing_common_names_does_not_alert(index: ListIndex, query: str, entry: str) -> None:
    assert entry not in alerts(index, query), (query, alerts(index, query))


def test_a_company_named_general_trading_does_not_match_every_trading_company() -> None:
    idx = make_index((ListEntry("gtc", "entity", ("General Trading Company",)), *ENTRIES))
    assert "gtc" not in alerts(idx, "Global Trading Ltd")
    assert "gtc" not in text_alerts(idx, "PAYMENT FOR GOODS VIA ORIENT TRADING")


def test_an_alias_made_of_a_title_does_not_match_every_the() -> None:
    idx = make_index((ListEntry("ayyash", "individual", ("Yahya Ayyash", "The Engineer")), *ENTRIES))
    assert "ayyash" not in text_alerts(idx, "PAYMENT FOR THE GOODS AS PER THE CONTRACT")


def test_a_weak_alias_in_free_text_scores_no_higher_than_as_a_name(index: ListIndex) -> None:
    as_name = alerts(index, "Vanya Petrenko")["ivanov"]
    in_text = text_alerts(index, "SERVICES BY VANYA PETRENKO")["ivanov"]
    assert as_name < 1000
    assert in_text <= as_name


@pytest.mark.xfail(strict=True, reason="Mahmoud and Mohammed, different names, fold to near-equal skeletons: "
                                       "'Ali Hassan Mahmoud' alerts on 'Mohammed Ali Hassan'")
@pytest.mark.parametrize("query", ["Ali Hassan Mahmoud", "Mahmoud Ali Hassan"])
def test_a_different_arabic_name_with_like_consonants_does_not_alert(index: ListIndex, query: str) -> None:
    assert "hassan" not in alerts(index, query), (query, alerts(index, query))


def test_bare_initials_do_not_score_as_a_name(index: ListIndex) -> None:
    listed = name_tokens("Aleksandr Kovalev").tokens
    for initials in ("A K", "A. K.", "K A"):
        assert name_score(name_tokens(initials).tokens, listed, index.weight) < DEFAULT_FLOOR, initials


# --- the index's candidate bound against brute force ---------------------------------------------

def brute_force(index: ListIndex, text: str, floor: int) -> dict[str, int]:
    """What ``match_name`` must answer: every indexed name scored, weak aliases at 9/10, per entry
    its best name's score where at least ``floor``."""
    query = name_tokens(text).tokens
    best: dict[str, int] = {}
    for _, entry, k, listed in index.names:
        score = name_score(query, listed, index.weight) if query else 0
        if k in entry.weak_aliases:
            score = score * 9 // 10
        if score >= floor:
            best[entry.entry_id] = max(best.get(entry.entry_id, 0), score)
    return best


def missed(index: ListIndex, text: str, floor: int) -> dict[str, int]:
    want = brute_force(index, text, floor)
    got = scores(index, text, floor)
    assert set(got) <= set(want) and all(got[e] == want[e] for e in got), (got, want)
    return {e: s for e, s in want.items() if e not in got}


def build(names: list[tuple[list[str], frozenset[int]]]) -> ListIndex:
    return make_index([ListEntry(f"e{i}", "individual", tuple(ns), weak_aliases=frozenset(k for k in weak
                                                                                          if k < len(ns)))
                       for i, (ns, weak) in enumerate(names)])


# tokens with transliteration variants, typos, particles and pieces that join into other tokens
_ALL = ["kovalev", "kovalyov", "kovalenko", "aleksandr", "alexander", "mohammed", "muhammad", "ali",
        "hassan", "hasan", "xi", "jin", "ping", "jinping", "al", "bin", "john", "smith", "smit", "ivanov",
        "ivan", "petrovich", "sevmor", "neftegaz", "sevmorneftegaz", "abd", "rahman", "abdulrahman", "de",
        "la", "cruz", "kim", "li", "j", "k", "a", "q", "x"]
# the ordinary case: no initials, and no token that other tokens written together make
_PLAIN = ["kovalev", "kovalyov", "kovalenko", "aleksandr", "alexander", "mohammed", "muhammad", "ali",
          "hassan", "hasan", "john", "smith", "smit", "ivanov", "ivan", "petrovich", "rahman", "de", "la",
          "cruz", "kim", "li", "omar", "umar", "yusuf", "yousef"]


def _lists(pool: list[str]) -> st.SearchStrategy[list[tuple[list[str], frozenset[int]]]]:
    name = st.lists(st.sampled_from(pool), min_size=1, max_size=5).map(" ".join)
    return st.lists(st.tuples(st.lists(name, min_size=1, max_size=3), st.frozensets(st.integers(1, 2))),
                    min_size=1, max_size=6)


def _query(pool: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(pool), min_size=1, max_size=5).map(" ".join)


_PROPERTY = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(_lists(_PLAIN), _query(_PLAIN), st.integers(750, 1000))  # 750: screen_name's floor
def test_the_candidate_bound_never_prunes_an_ordinary_name_that_reaches_the_floor(
        names: list[tuple[list[str], frozenset[int]]], query: str, floor: int) -> None:
    assert missed(build(names), query, floor) == {}


@pytest.mark.xfail(strict=True, reason="ListIndex.candidates prunes names that name_score puts at or above "
                                       "the floor: initials ('John Smith' vs listed 'J. Smith', 946), and "
                                       "any unfiled particle under 750")
@_PROPERTY
@given(_lists(_ALL), _query(_ALL), st.integers(600, 1000))
@example(names=[(["J. Smith"], frozenset())], query="John Smith", floor=750)
@example(names=[(["Kovalev de"], frozenset())], query="de", floor=600)  # under 750, particles never filed
def test_the_candidate_bound_never_prunes_a_name_that_reaches_the_floor(
        names: list[tuple[list[str], frozenset[int]]], query: str, floor: int) -> None:
    assert missed(build(names), query, floor) == {}


def test_a_listed_name_with_initials_is_found_from_the_full_name(index: ListIndex) -> None:
    assert missed(index, "Abdul Qadeer Khan", DEFAULT_FLOOR - 50) == {}
    assert "khan" in alerts(index, "Abdul Qadeer Khan")


@pytest.mark.xfail(strict=True, reason="tokens past the 63rd of a listed name are never filed: a 70-word "
                                       "name with one word changed (score 986) is not a candidate")
def test_a_name_of_more_than_64_tokens_is_still_found() -> None:
    words = [f"zz{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(70)]
    words[65:68] = ["baab", "baac", "baad"]  # its rarest tokens (first in order) at the end
    listed = " ".join(words)
    idx = make_index([ListEntry("long", "entity", (listed,))])
    assert scores(idx, listed, DEFAULT_FLOOR) == {"long": 1000}
    altered = " ".join(["qqqq", *words[1:]])
    assert brute_force(idx, altered, DEFAULT_FLOOR) == {"long": 986}
    assert scores(idx, altered, DEFAULT_FLOOR) == {"long": 986}


def test_a_word_longer_than_64_letters_is_found_and_a_typo_in_it_too() -> None:
    word = "Donaudampfschifffahrtselektrizitaetenhauptbetriebswerkbauunterbeamtengesellschaft"  # 82 letters
    idx = make_index([ListEntry("ddsg", "entity", (word,)), *ENTRIES])
    assert alerts(idx, word.upper()) == {"ddsg": 1000}
    assert "ddsg" in alerts(idx, word.replace("haupt", "hapt"))


# --- crashes, stalls and scores out of range ------------------------------------------------------

@pytest.mark.parametrize("text", ["", " ", "...", "---", "\u200b", "\u202e\u202c", "Mr", "Ltd", "'''",
                                  "\x00"])
def test_empty_and_punctuation_only_inputs_alert_on_nothing(index: ListIndex, text: str) -> None:
    assert index.match_name(text, DEFAULT_FLOOR) == []
    assert screen_name(index, "originator", text) == []
    assert screen_text(index, "remittance", text) == []


def test_an_empty_index_screens_without_error() -> None:
    empty = ListIndex([])
    assert len(empty) == 0
    assert empty.match_name("Aleksandr Kovalev", 0) == []
    assert empty.candidates(("kovalev",), 800) == []
    assert screen_text(empty, "remittance", "ALEKSANDR KOVALEV") == []


@pytest.mark.parametrize("names", [("***",), ("—", "...")])
def test_an_entry_no_name_of_which_can_be_screened_is_refused(names: tuple[str, ...]) -> None:
    with pytest.raises((ValueError, ScreeningError)):
        make_index([ListEntry("ghost", "individual", names)])


_anything = st.text(st.characters(codec="utf-8"), max_size=60)  # any text a payment can carry


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(_anything)
def test_any_text_screens_without_error_and_scores_within_0_to_1000(text: str) -> None:
    idx = make_index(ENTRIES)
    toks = name_tokens(text).tokens
    assert all(t.isascii() and t.isalnum() for t in toks)
    for h in idx.match_name(text, 0):
        assert 0 <= h.score <= 1000
    for hit in (*screen_name(idx, "originator", text, Party(name=text, identifiers=(
            Identifier("DOB", "1961-01-01"),), country="RU"), 0), *screen_text(idx, "remittance", text, 0)):
        assert 0 <= hit.score <= 1000


def test_secondary_evidence_never_pushes_a_score_past_1000(index: ListIndex) -> None:
    party = Party(name="Aleksandr Petrovich Kovalev", identifiers=(Identifier("DOB", "1961-04-02"),),
                  country="RU")
    hits = screen_name(index, "originator", "Aleksandr Petrovich Kovalev", party)
    assert [h.score for h in hits] == [1000]


def test_a_100_kb_name_of_common_words_screens_quickly(index: ListIndex) -> None:
    name = " ".join(["kovalev", "abcd", "smith"] * 12_000)[:100_000]  # about 36,000 short words
    hits = within(2.0, lambda: index.match_name(name, DEFAULT_FLOOR))
    assert isinstance(hits, list)


_BOMB = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from inference.screening.entries import ListEntry, SanctionsList
from inference.screening.index import ListIndex
from inference.screening.screen import screen_text
idx = ListIndex([SanctionsList("internal", "l", None, "a" * 64,
                               (ListEntry("1", "individual", ("Aleksandr Kovalev",)),), "t")])
print(screen_text(idx, "remittance", "KOVALEV" * 15_000))  # one 105,000-letter word
"""


def test_a_100_kb_one_word_remittance_screens_quickly_in_bounded_memory() -> None:
    try:
        done = subprocess.run([sys.executable, "-c", _BOMB], cwd=ROOT, capture_output=True, text=True,
                              timeout=4)
    except subprocess.TimeoutExpired:
        pytest.fail("a 100 KB one-word remittance was still being screened after 4 s")
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def big_index() -> tuple[ListIndex, list[str]]:
    """2,000 listed people: common first names and made-up surnames; and words from them."""
    rng = random.Random(7)
    first = ["mohammed", "ali", "ahmed", "hassan", "ivan", "sergei", "john", "maria", "abdul", "omar",
             "yusuf", "ibrahim", "aleksandr", "dmitri", "viktor", "li", "wang", "kim", "jose", "juan"]
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    last = sorted({"".join(rng.choice(syllables) for _ in range(3)) for _ in range(3000)})
    names = [f"{first[i % 20]} {first[i * 7 % 20]} {last[i % len(last)]}" for i in range(2000)]
    entries = [ListEntry(str(i), "individual", (n,)) for i, n in enumerate(names)]
    return make_index(entries), first + last[:40]


def test_ten_thousand_words_of_free_text_screen_in_seconds_not_tens_of_seconds(
        big_index: tuple[ListIndex, list[str]]) -> None:
    idx, words = big_index
    text = " ".join(words[i * 31 % len(words)] for i in range(10_000))
    # 1.1-1.7 s of one core on a 2-core AMD EPYC VM whose CPU probe reads 11 ms, more under a loaded
    # CI run; scoring every window took 11.7 s on a VM twice as fast: the budget tells them apart
    within(6.0, lambda: screen_text(idx, "remittance", text))


def test_the_longest_party_name_a_message_carries_screens_quickly(
        big_index: tuple[ListIndex, list[str]]) -> None:
    idx, words = big_index  # an ISO 20022 Nm past 140 characters is kept up to 4 * 140 + 1024
    name = " ".join(words[i * 31 % len(words)] for i in range(400))[:4 * 140 + 1024]
    assert isinstance(within(1.0, lambda: screen_name(idx, "originator", name)), list)


def test_ten_thousand_unlisted_words_screen_quickly(big_index: tuple[ListIndex, list[str]]) -> None:
    idx, _ = big_index
    text = " ".join(f"INV{n:06d}" for n in range(10_000))  # invoice numbers: no listed word
    assert within(2.0, lambda: screen_text(idx, "remittance", text)) == []
    assert within(2.0, lambda: screen_name(idx, "originator", text)) == []


# --- the same answer every time -------------------------------------------------------------------

QUERIES = ("Aleksandr Kovalev", "Kovalev Aleksandr", "Mohammed Ali", "Xi Jin Ping", "Tehran Imports Ltd",
           "John Smith", "Vanya Petrenko", "A. Q. Khan")


def test_scores_do_not_depend_on_the_order_of_entries_or_lists() -> None:
    half = len(ENTRIES) // 2
    one = make_index(ENTRIES)
    shuffled = list(ENTRIES)
    random.Random(5).shuffle(shuffled)
    two = ListIndex([SanctionsList("internal", "b", None, "cd" * 32, tuple(shuffled[half:]), "t"),
                     SanctionsList("internal", "a", None, "ef" * 32, tuple(shuffled[:half]), "t")])
    three = ListIndex([SanctionsList("internal", "a", None, "ef" * 32, tuple(shuffled[:half]), "t"),
                       SanctionsList("internal", "b", None, "cd" * 32, tuple(shuffled[half:]), "t")])
    for q in QUERIES:
        assert scores(one, q) == scores(two, q) == scores(three, q), q


_SCORES = """
from inference.screening.index import ListIndex
from inference.screening.entries import SanctionsList
from tests.inference.screening.test_screening_hostile import ENTRIES, QUERIES
idx = ListIndex([SanctionsList("internal", "l", None, "ab" * 32, ENTRIES, "t")])
print([[(h.entry.entry_id, h.name_index, h.score) for h in idx.match_name(q, 0)] for q in QUERIES])
"""


def test_scores_are_the_same_under_another_hash_seed() -> None:
    def run(seed: str) -> str:
        env = {"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}
        return subprocess.run([sys.executable, "-c", _SCORES], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=60, check=True).stdout

    assert run("1") == run("2")


def test_word_order_does_not_change_a_score() -> None:
    # an initial has two partners alike: which one it takes must not depend on the order of words
    others = [ListEntry(str(i), "individual", (f"Aleksandr {s}",))
              for i, s in enumerate(["Ivanov", "Petrov", "Sidorov", "Smirnov", "Popov", "Volkov", "Morozov"])]
    idx = make_index([ListEntry("ak", "individual", ("A. Kovalev",)), *others])
    orders = ("Aleksandr Anatolyevich Kovalev", "Anatolyevich Aleksandr Kovalev",
              "Kovalev Aleksandr Anatolyevich", "Kovalev Anatolyevich Aleksandr")
    assert len({scores(idx, q)["ak"] for q in orders}) == 1


# --- places and list versions ---------------------------------------------------------------------

@pytest.mark.xfail(strict=True, reason="an entry's places (birthplace, address city) are not indexed: a "
                                       "sanctioned place is found only as a 'region' entry of its own")
def test_a_listed_place_in_free_text_is_found() -> None:
    port = ListEntry("port", "entity", ("Sevastopol Commercial Seaport",), places=("Sevastopol",))
    idx = make_index([port])
    assert "port" in text_alerts(idx, "DELIVERY CHARGES SEVASTOPOL 12 MARCH")


def test_a_list_diff_names_what_changed_and_ignores_order() -> None:
    old = SanctionsList("internal", "l", None, "a" * 64, ENTRIES, "t")
    same = SanctionsList("internal", "l", None, "b" * 64, tuple(reversed(ENTRIES)), "t")
    assert diff_lists(old, same).unchanged
    weakened = ListEntry("kovalev", "individual", ("Aleksandr Petrovich KOVALEV", "Alexander Kovalyov"),
                        weak_aliases=frozenset({1}), dob_years=frozenset({1961}), countries=("RU",))
    new = SanctionsList("internal", "l", None, "c" * 64, (weakened, *ENTRIES[1:-1]), "t")
    d = diff_lists(old, new)
    assert [e.entry_id for e in d.removed] == ["ivanov"] and d.added == ()
    assert [(o.entry_id, f) for o, _, f in d.changed] == [("kovalev", ("weak_aliases",))]
