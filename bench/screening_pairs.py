"""Labelled name pairs for measuring sanctions name matching, built without sealtrail's normaliser.

Writes ``bench/data/screening/pairs.csv`` with the columns ``name_a,name_b,label,kind,category,source``:
label 1 = the same person or organisation, 0 = different; kind is individual, entity or vessel;
``name_b`` is the listed side and ``name_a`` the name screened against it (``bench.screening`` reads
it that way). Nothing here imports ``inference.screening``: no positive pair is "two strings
sealtrail's normaliser maps to the same key", so the set measures the normaliser instead of echoing
it. Every positive comes from a variant source that exists without sealtrail:

1. ``watchman-cascade``: ``data/screening/cascade-name-pairs.csv``, 485 labelled company and vessel
   pairs (names in Latin, Hebrew, Burmese, Georgian, Armenian, CJK scripts; former names; legal
   forms) written by Cascade Screening (github.com/ArslaneSempai-ui/cascade-screening,
   ``contrib/opensanctions``), released under the MIT licence (Copyright (c) 2026 Arslane
   Chaouche; the rest of that repository is not MIT and nothing else of it is used), as vendored by
   moov-io/watchman ``pkg/search/testdata/cascade-name-pairs.csv`` @ 130e021d and
   ``cascade-name-pairs-2.csv`` @ 227c4629. Kept as published: name1 -> name_a, name2 -> name_b,
   is_match -> label, the upstream category. Licence text: ``data/screening/LICENSE-cascade-name-pairs``.
2. ``nomenklatura-putin``: ``data/screening/putin_names.txt``, 81 spellings of one person in 15
   scripts and many languages, from opensanctions/nomenklatura ``tests/fixtures/putin_names.txt``
   @ 07a47c47 (MIT, Copyright (c) 2013-2022 Friedrich Lindenberg, (c) 2023-2025 OpenSanctions
   Datenbanken GmbH; text in ``data/screening/LICENSE-nomenklatura``). Positives, sampled.
3. ``un-consolidated``: ``data/screening/un_alias_groups.json``, 223 entries (individuals and
   entities) of the UN Security Council Consolidated List with their listed aliases and original-
   script names, extracted from the copy in moov-io/watchman ``test/testdata/UN_consolidated.xml``
   @ e61ce041 (repository Apache-2.0; the list is public information of the United Nations).
   Positives: an entry's name against its own aliases (the list's Good and Low quality aliases in
   separate categories) and against its name in original script. Negatives: two different
   entries that share a name token (an alias the list gives to two entries is never a negative).
4. ``translit-standards``: our own tables of the published romanisation standards, for Russian:
   ICAO Doc 9303 (7th ed., 2015) Part 3, BGN/PCGN 1947, GOST 7.79-2000 system B, ISO 9:1995 (=
   GOST 7.79 system A; also with its diacritics stripped, as systems that drop accents carry it)
   and the scientific transliteration; for Ukrainian: ICAO Doc 9303, the national system of 2010
   (Cabinet of Ministers of Ukraine resolution 55, adopted by BGN/PCGN in 2019) and BGN/PCGN 1965.
   Written from the standards' tables, cross-read against nalgeon/iuliia-py (MIT) and
   interscript/maps, and checked against their published examples on every run (``TableError``).
   The 150 Cyrillic names they romanise are drawn from our own pools below.
5. ``perturbation``: edits a screening system meets, applied to names from sources 3-4 and to the
   company names of source 1: one typo in a word of at least five letters (keyboard neighbour,
   transposition, dropped letter), initials, surname first (with and without comma), an added
   honorific, and a legal form written differently or dropped (Limited/Ltd, Company/Co.,
   Corporation/Corp; jurisdiction-bearing forms are never swapped, since GmbH against Sdn. Bhd.
   is another company).
6. ``synthetic-pools``: hard negatives from our own multicultural name pools (``_CULTURES``):
   different people sharing a given name, a surname, all but one token; surnames or given names
   one suffix or letter apart that are different names (Kovalev/Kovalenko, Hassan/Hussein,
   Johnson/Johansson, Fernandez/Hernandez; spelling variants of one name are never used);
   partial names ("Mohammed Ali" against "Mohammed Ali Hassan", label 0: two people, one known by
   a shorter name, which no name alone can tell apart from one person); and the feminine form of
   a Russian surname ("Aleksandr Petrov" against "Aleksandra Petrova", category gender-variant, a
   judgement call, labelled 0 in its own category so a user can drop it).

``nonlisted_names`` draws realistic person and company names from the same synthetic pools, for
measuring how often names on no list alert.

Run from the repository root: ``python -m bench.screening_pairs [--seed N] [--out PATH] [--check]``
(``--check`` regenerates in memory and fails if the committed file differs).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "SEED",
    "Alias",
    "AliasGroup",
    "CascadeRow",
    "LabelConflictError",
    "Pair",
    "PairsError",
    "SourceFormatError",
    "TableError",
    "generate",
    "load_sources",
    "main",
    "nonlisted_names",
    "pairs_csv",
    "romanise",
    "script_of",
]

DATA: Final = Path(__file__).resolve().parent / "data" / "screening"
SEED: Final = 20251205
HEADER: Final = ("name_a", "name_b", "label", "kind", "category", "source")
KINDS: Final = frozenset({"individual", "entity", "vessel"})


class PairsError(Exception):
    """Base of this module's errors."""


class SourceFormatError(PairsError):
    """A source file is not in the shape this generator reads."""

    def __init__(self, source: str, where: str, detail: str) -> None:
        super().__init__(f"{source}: {where}: {detail}")
        self.source = source
        self.where = where
        self.detail = detail


class TableError(PairsError):
    """A romanisation table disagrees with a published example of its standard."""

    def __init__(self, system: str, text: str, expected: str, got: str) -> None:
        super().__init__(f"{system}: {text!r} gave {got!r}, the standard's example says {expected!r}")
        self.system = system
        self.text = text
        self.expected = expected
        self.got = got


class LabelConflictError(PairsError):
    """The same two names were generated once as a match and once as a non-match."""

    def __init__(self, first: Pair, second: Pair) -> None:
        super().__init__(f"{first!r} and {second!r} pair the same names with different labels")
        self.first = first
        self.second = second


@dataclass(frozen=True)
class Pair:
    """One labelled pair: ``name_b`` listed, ``name_a`` screened against it."""

    name_a: str
    name_b: str
    label: int
    kind: str
    category: str
    source: str

    def __post_init__(self) -> None:
        if self.label not in (0, 1) or self.kind not in KINDS:
            raise ValueError(f"bad label or kind in {self!r}")
        for name in (self.name_a, self.name_b):
            if not name.strip() or any(c in name for c in "\r\n"):
                raise ValueError(f"bad name in {self!r}")

    def key(self) -> frozenset[str]:
        """The unordered, case-blind identity of the two names."""
        return frozenset((self.name_a.casefold(), self.name_b.casefold()))


# --------------------------------------------------------------------------- sources, parsed


@dataclass(frozen=True)
class CascadeRow:
    """A row of the Cascade Screening pair set."""

    group: str
    schema: str
    name1: str
    name2: str
    is_match: bool
    category: str

    @classmethod
    def from_text(cls, text: str, source: str = "cascade-name-pairs.csv") -> tuple[CascadeRow, ...]:
        reader = csv.DictReader(io.StringIO(text))
        want = ["case_group", "schema", "name1", "name2", "is_match", "category"]
        if reader.fieldnames != want:
            raise SourceFormatError(source, "header", f"expected {want}, got {reader.fieldnames}")
        rows = []
        for n, r in enumerate(reader, start=2):
            if r["is_match"] not in ("true", "false") or r["schema"] not in ("Company", "Vessel"):
                detail = f"is_match {r['is_match']!r}, schema {r['schema']!r}"
                raise SourceFormatError(source, f"line {n}", detail)
            if not r["name1"].strip() or not r["name2"].strip() or not r["category"]:
                raise SourceFormatError(source, f"line {n}", "empty name or category")
            rows.append(cls(r["case_group"], r["schema"], r["name1"], r["name2"], r["is_match"] == "true",
                            r["category"]))
        return tuple(rows)


@dataclass(frozen=True)
class Alias:
    """A listed alias, with the list's quality mark and its original-script form if given."""

    name: str
    quality: str
    original_script: str | None


@dataclass(frozen=True)
class AliasGroup:
    """One UN list entry: its name, original-script name and aliases."""

    ref: str
    kind: str
    name: str
    original_script: str | None
    aliases: tuple[Alias, ...]

    @classmethod
    def from_text(cls, text: str, source: str = "un_alias_groups.json") -> tuple[AliasGroup, ...]:
        try:
            doc = json.loads(text)
            entries = doc["entries"]
        except (ValueError, KeyError, TypeError) as e:
            detail = f"not a {{'entries': [...]}} JSON object ({e})"
            raise SourceFormatError(source, "document", detail) from e
        if not isinstance(entries, list):
            raise SourceFormatError(source, "entries", "not a list")
        out = []
        for i, g in enumerate(entries):
            where = f"entry {i}"
            try:
                ref, kind, name = str(g["ref"]), str(g["kind"]), str(g["name"])
                names, quality, scripts = g["aliases"], g["alias_quality"], g["alias_original_script"]
            except (KeyError, TypeError) as e:
                raise SourceFormatError(source, where, f"missing field {e}") from e
            if kind not in ("individual", "entity") or not name.strip():
                raise SourceFormatError(source, where, f"kind {kind!r} or empty name")
            if not (len(names) == len(quality) == len(scripts)):
                detail = "aliases, alias_quality and alias_original_script differ in length"
                raise SourceFormatError(source, where, detail)
            bad = [q for q in quality if q not in ("Good", "Low", "a.k.a.", "f.k.a.")]
            if bad:
                raise SourceFormatError(source, where, f"unknown alias quality {bad}")
            aliases = tuple(Alias(str(a), str(q), None if s is None else str(s))
                            for a, q, s in zip(names, quality, scripts, strict=True))
            script = g.get("name_original_script")
            out.append(cls(ref, kind, name, None if script is None else str(script), aliases))
        return tuple(out)


def parse_name_list(text: str) -> tuple[str, ...]:
    """One name per line; blank lines ignored."""
    return tuple(line.strip() for line in text.splitlines() if line.strip())


@dataclass(frozen=True)
class Sources:
    cascade: tuple[CascadeRow, ...]
    putin: tuple[str, ...]
    un: tuple[AliasGroup, ...]


def load_sources(data: Path = DATA) -> Sources:
    """Read and parse the three vendored source files (the only I/O before writing)."""
    return Sources(
        CascadeRow.from_text((data / "cascade-name-pairs.csv").read_text(encoding="utf-8")),
        parse_name_list((data / "putin_names.txt").read_text(encoding="utf-8")),
        AliasGroup.from_text((data / "un_alias_groups.json").read_text(encoding="utf-8")),
    )


# --------------------------------------------------------------------------- scripts

_SCRIPT_NAMES: Final = {"CJK": "HAN", "HIRAGANA": "KANA", "KATAKANA": "KANA"}


def script_of(name: str) -> str:
    """The Unicode script most of the name's letters belong to (LATIN, CYRILLIC, ARABIC, ...)."""
    counts: Counter[str] = Counter()
    for ch in name:
        if ch.isalpha():
            head = unicodedata.name(ch, "UNKNOWN").split()[0]
            if head != "MODIFIER":
                counts[_SCRIPT_NAMES.get(head, head)] += 1
    return counts.most_common(1)[0][0] if counts else "NONE"


# --------------------------------------------------------------------------- romanisation tables
# Each table is written from the standard named beside it; ``_VECTORS`` are examples published
# for those standards (iuliia-py's and interscript's test vectors, which reproduce them).

_BASE: Final = {"а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "з": "z", "и": "i", "к": "k",
                "л": "l", "м": "m", "н": "n", "о": "o", "п": "p", "р": "r", "с": "s", "т": "t", "у": "u",
                "ф": "f"}
# ICAO Doc 9303 (2015) Part 3, Section 6: transliteration of Cyrillic (Russian letters).
_ICAO: Final = {**_BASE, "ё": "e", "ж": "zh", "й": "i", "х": "kh", "ц": "ts", "ч": "ch", "ш": "sh",
                "щ": "shch", "ъ": "ie", "ы": "y", "ь": "", "э": "e", "ю": "iu", "я": "ia"}
# ICAO Doc 9303 for Ukrainian: the same table with its one Ukrainian exception (И -> Y) and the
# letters Ґ G, Є IE, І I, Ї I; the apostrophe is dropped.
_ICAO_UKR: Final = {**_ICAO, "и": "y", "ґ": "g", "є": "ie", "і": "i", "ї": "i", "'": "", "’": "", "ʼ": ""}
# BGN/PCGN 1947 (Russian); е/ё -> ye/yë word-initially and after vowels, й, ъ, ь (see _bgn_rule);
# the optional middle dot of the standard is left out.
_BGN: Final = {**_BASE, "ё": "ë", "ж": "zh", "й": "y", "х": "kh", "ц": "ts", "ч": "ch", "ш": "sh",
               "щ": "shch", "ъ": "”", "ы": "y", "ь": "’", "э": "e", "ю": "yu", "я": "ya"}
# GOST 7.79-2000 system B (Russian); ц -> c before е, и, й, ы (see _gost_b_rule).
_GOST_B: Final = {**_BASE, "ё": "yo", "ж": "zh", "й": "j", "х": "x", "ц": "cz", "ч": "ch", "ш": "sh",
                  "щ": "shh", "ъ": "``", "ы": "y`", "ь": "`", "э": "e`", "ю": "yu", "я": "ya"}
# ISO 9:1995 (= GOST 7.79-2000 system A), one letter for one letter.
_ISO9: Final = {**_BASE, "ё": "ë", "ж": "ž", "й": "j", "х": "h", "ц": "c", "ч": "č", "ш": "š", "щ": "ŝ",
                "ъ": "ʺ", "ы": "y", "ь": "ʹ", "э": "è", "ю": "û", "я": "â"}
# The scientific (scholarly) transliteration of Russian.
_SCIENTIFIC: Final = {**_BASE, "ё": "ë", "ж": "ž", "й": "j", "х": "x", "ц": "c", "ч": "č", "ш": "š",
                      "щ": "šč", "ъ": "ʺ", "ы": "y", "ь": "ʹ", "э": "è", "ю": "ju", "я": "ja"}
# Ukrainian national system, Cabinet of Ministers resolution 55 of 27 January 2010 (= BGN/PCGN
# 2019, UNGEGN 2012): є ї й ю я are ye yi y yu ya word-initially, ie i i iu ia elsewhere; зг -> zgh.
_UKR_2010: Final = {
    "а": "a", "б": "b", "в": "v", "г": "h", "ґ": "g", "д": "d", "е": "e", "є": "ie", "ж": "zh", "з": "z",
    "и": "y", "і": "i", "ї": "i", "й": "i", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o", "п": "p",
    "р": "r", "с": "s", "т": "t", "у": "u", "ф": "f", "х": "kh", "ц": "ts", "ч": "ch", "ш": "sh", "щ": "shch",
    "ь": "", "ю": "iu", "я": "ia", "'": "", "’": "", "ʼ": "",
}
# BGN/PCGN 1965 (Ukrainian): є ye, ї yi, й y, ю yu, я ya everywhere, ь ’; зг, кг, сг, тс are z·h, k·h, s·h,
# t·s (the middle dot told them from the digraphs zh, kh, sh, ts; see _bgn_1965_rule).
_BGN_UKR_1965: Final = {**_UKR_2010, "є": "ye", "ї": "yi", "й": "y", "ю": "yu", "я": "ya", "ь": "’"}

_VOWELS_RU: Final = frozenset("аеёиоуыэюя")
_APOSTROPHES: Final = frozenset("'’ʼ")

Rule = Callable[[str, str, str], str | None]


def _initial(prev: str) -> bool:
    return not prev.isalpha() and prev not in _APOSTROPHES


def _bgn_rule(prev: str, ch: str, nxt: str) -> str | None:
    if ch in "её" and (_initial(prev) or prev in _VOWELS_RU or prev in "йъь"):
        return "ye" if ch == "е" else "yë"
    return None


def _gost_b_rule(prev: str, ch: str, nxt: str) -> str | None:
    return "c" if ch == "ц" and nxt in ("е", "и", "й", "ы") else None


def _ukr_2010_rule(prev: str, ch: str, nxt: str) -> str | None:
    if ch in "єїйюя" and _initial(prev):
        return {"є": "ye", "ї": "yi", "й": "y", "ю": "yu", "я": "ya"}[ch]
    if ch == "г" and prev == "з":
        return "gh"
    return None


def _bgn_1965_rule(prev: str, ch: str, nxt: str) -> str | None:
    if (ch == "г" and prev in ("з", "к", "с")) or (ch == "с" and prev == "т"):
        return "·h" if ch == "г" else "·s"
    return None


def _romanise(text: str, table: Mapping[str, str], rule: Rule | None = None) -> str:
    out: list[str] = []
    for i, ch in enumerate(text):
        low = ch.lower()
        prev = text[i - 1].lower() if i else ""
        nxt = text[i + 1].lower() if i + 1 < len(text) else ""
        rep = rule(prev, low, nxt) if rule else None
        if rep is None:
            rep = table.get(low)
        if rep is None:
            out.append(ch)
            continue
        if ch != low and rep:
            after = text[i + 1] if i + 1 < len(text) else ""
            before = text[i - 1] if i else ""
            word_upper = after.isupper() or (before.isupper() and not after.islower())
            rep = rep.upper() if word_upper else rep[0].upper() + rep[1:]
        out.append(rep)
    return "".join(out)


def _strip_marks(text: str) -> str:
    """Diacritics dropped and ISO 9's prime letters removed, as accent-stripping systems carry it."""
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(c for c in decomposed if not unicodedata.combining(c) and c not in "ʺʹ")
    return unicodedata.normalize("NFC", kept)


_SYSTEMS: Final[Mapping[str, Callable[[str], str]]] = {
    "icao": lambda t: _romanise(t, _ICAO),
    "bgn-pcgn": lambda t: _romanise(t, _BGN, _bgn_rule),
    "gost-b": lambda t: _romanise(t, _GOST_B, _gost_b_rule),
    "iso9": lambda t: _romanise(t, _ISO9),
    "iso9-ascii": lambda t: _strip_marks(_romanise(t, _ISO9)),
    "scientific": lambda t: _romanise(t, _SCIENTIFIC),
    "icao-ukr": lambda t: _romanise(t, _ICAO_UKR),
    "ukr-2010": lambda t: _romanise(t, _UKR_2010, _ukr_2010_rule),
    "bgn-pcgn-1965-ukr": lambda t: _romanise(t, _BGN_UKR_1965, _bgn_1965_rule),
}

_PANGRAM: Final = "Юлия, съешь ещё этих мягких французских булок из Йошкар-Олы, да выпей алтайского чаю"
_VECTORS: Final = (
    ("icao", _PANGRAM, "Iuliia, sieesh eshche etikh miagkikh frantsuzskikh bulok iz Ioshkar-Oly, da vypei "
     "altaiskogo chaiu"),
    ("icao", "Юлия Щеглова", "Iuliia Shcheglova"),
    ("icao", "Гайа Васильева", "Gaia Vasileva"),
    ("icao", "Артём Краевой", "Artem Kraevoi"),
    ("icao", "Ян Разъездной", "Ian Razieezdnoi"),
    ("bgn-pcgn", _PANGRAM, "Yuliya, s”yesh’ yeshchë etikh myagkikh frantsuzskikh bulok iz Yoshkar-Oly, da "
     "vypey altayskogo chayu"),
    ("bgn-pcgn", "Мейеровка", "Meyyerovka"),
    ("bgn-pcgn", "Юрьев объезд", "Yur’yev ob”yezd"),
    ("bgn-pcgn", "Воробьёво", "Vorob’yëvo"),
    ("bgn-pcgn", "Чапаевск", "Chapayevsk"),
    ("gost-b", _PANGRAM, "Yuliya, s``esh` eshhyo e`tix myagkix franczuzskix bulok iz Joshkar-Oly`, da vy`pej "
     "altajskogo chayu"),
    ("iso9", _PANGRAM, "Ûliâ, sʺešʹ eŝë ètih mâgkih francuzskih bulok iz Joškar-Oly, da vypej "
     "altajskogo čaû"),
    ("scientific", _PANGRAM, "Julija, sʺešʹ eščë ètix mjagkix francuzskix bulok iz Joškar-Oly, da vypej "
     "altajskogo čaju"),
    ("ukr-2010", "Борщагівка", "Borshchahivka"),
    ("ukr-2010", "Вишгород", "Vyshhorod"),
    ("ukr-2010", "Згорани", "Zghorany"),
    ("ukr-2010", "Ґалаґан", "Galagan"),
    ("ukr-2010", "Єнакієве", "Yenakiieve"),
    ("ukr-2010", "Наєнко", "Naienko"),
    ("ukr-2010", "Запоріжжя", "Zaporizhzhia"),
    ("ukr-2010", "Їжакевич", "Yizhakevych"),
    ("ukr-2010", "Кадіївка", "Kadiivka"),
    ("ukr-2010", "Йосипівка", "Yosypivka"),
    ("ukr-2010", "Стрий", "Stryi"),
    ("ukr-2010", "Київ", "Kyiv"),
    ("ukr-2010", "Миколаїв", "Mykolaiv"),
    ("ukr-2010", "Біла Церква", "Bila Tserkva"),
    ("ukr-2010", "Русь", "Rus"),
    ("ukr-2010", "Юрій", "Yurii"),
    ("ukr-2010", "Крюківка", "Kriukivka"),
    ("ukr-2010", "Ічня", "Ichnia"),
    ("ukr-2010", "Знам’янка", "Znamianka"),
    ("bgn-pcgn-1965-ukr", "Київ", "Kyyiv"),
)


def romanise(text: str, system: str) -> str:
    """``text`` (Cyrillic) romanised by one of the standards above (``icao``, ``bgn-pcgn``, ...)."""
    try:
        return _SYSTEMS[system](text)
    except KeyError:
        raise ValueError(f"unknown system {system!r}; known: {sorted(_SYSTEMS)}") from None


def check_tables() -> None:
    """Raise ``TableError`` unless every table reproduces its standard's published examples."""
    for system, text, expected in _VECTORS:
        got = romanise(text, system)
        if got != expected:
            raise TableError(system, text, expected, got)


def _w(text: str) -> tuple[str, ...]:
    """The words of ``text``: pools are written as running text to keep them readable."""
    return tuple(text.split())


def _slashed(text: str) -> tuple[tuple[str, ...], ...]:
    """Words of ``text`` split at "/": ``a/b c/d`` -> ((a, b), (c, d))."""
    return tuple(tuple(item.split("/")) for item in text.split())


def _pairs(text: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in text.split():
        a, b = item.split("/")
        out.append((a, b))
    return tuple(out)


# --------------------------------------------------------------------------- Cyrillic name pools (ours)
# (given name, patronymic of a son, patronymic of a daughter) for men's names.
_RU_MEN: Final = _slashed("Александр/Александрович/Александровна Алексей/Алексеевич/Алексеевна "
    "Андрей/Андреевич/Андреевна Антон/Антонович/Антоновна Артём/Артёмович/Артёмовна "
    "Борис/Борисович/Борисовна Вадим/Вадимович/Вадимовна Валерий/Валерьевич/Валерьевна "
    "Василий/Васильевич/Васильевна Виктор/Викторович/Викторовна Владимир/Владимирович/Владимировна "
    "Вячеслав/Вячеславович/Вячеславовна Геннадий/Геннадьевич/Геннадьевна Георгий/Георгиевич/Георгиевна "
    "Григорий/Григорьевич/Григорьевна Дмитрий/Дмитриевич/Дмитриевна Евгений/Евгеньевич/Евгеньевна "
    "Игорь/Игоревич/Игоревна Илья/Ильич/Ильинична Кирилл/Кириллович/Кирилловна "
    "Константин/Константинович/Константиновна Леонид/Леонидович/Леонидовна Максим/Максимович/Максимовна "
    "Михаил/Михайлович/Михайловна Николай/Николаевич/Николаевна Олег/Олегович/Олеговна "
    "Павел/Павлович/Павловна Пётр/Петрович/Петровна Роман/Романович/Романовна Сергей/Сергеевич/Сергеевна "
    "Станислав/Станиславович/Станиславовна Фёдор/Фёдорович/Фёдоровна Юрий/Юрьевич/Юрьевна "
    "Ярослав/Ярославович/Ярославовна Эдуард/Эдуардович/Эдуардовна Тимофей/Тимофеевич/Тимофеевна")
_RU_WOMEN: Final = _w("Анна Анастасия Валентина Вера Галина Дарья Екатерина Елена Елизавета Жанна Зоя "
    "Ирина Ксения Людмила Марина Мария Наталья Нина Ольга Светлана Татьяна Юлия Яна Алёна Софья Эльвира")
# men's forms; women's by _ru_feminine
_RU_SURNAMES: Final = _w("Иванов Смирнов Кузнецов Попов Васильев Петров Соколов Михайлов Новиков Фёдоров "
    "Морозов Волков Алексеев Лебедев Семёнов Егоров Павлов Козлов Степанов Николаев Орлов Андреев Макаров "
    "Никитин Захаров Зайцев Соловьёв Борисов Яковлев Григорьев Романов Воробьёв Сергеев Кузьмин Фролов "
    "Дмитриев Королёв Гусев Киселёв Ильин Поляков Сорокин Виноградов Ковалёв Белов Медведев Тарасов Жуков "
    "Баранов Щербаков Журавлёв Чернышёв Хохлов Цветков Юдин Ежов Шестаков Эльдаров Вишневский Покровский "
    "Яблонский Подъячев Объедков Хрущёв")
_UA_MEN: Final = _slashed("Олександр/Олександрович/Олександрівна Андрій/Андрійович/Андріївна "
    "Богдан/Богданович/Богданівна Василь/Васильович/Василівна Віктор/Вікторович/Вікторівна "
    "Володимир/Володимирович/Володимирівна Григорій/Григорович/Григорівна Дмитро/Дмитрович/Дмитрівна "
    "Євген/Євгенович/Євгенівна Іван/Іванович/Іванівна Ігор/Ігорович/Ігорівна Микола/Миколайович/Миколаївна "
    "Михайло/Михайлович/Михайлівна Олег/Олегович/Олегівна Олексій/Олексійович/Олексіївна "
    "Петро/Петрович/Петрівна Сергій/Сергійович/Сергіївна Тарас/Тарасович/Тарасівна Юрій/Юрійович/Юріївна "
    "Ярослав/Ярославович/Ярославівна Анатолій/Анатолійович/Анатоліївна Степан/Степанович/Степанівна "
    "Остап/Остапович/Остапівна Яків/Якович/Яківна")
_UA_WOMEN: Final = _w("Олена Оксана Наталія Ірина Тетяна Юлія Ганна Марія Людмила Світлана Катерина Ольга "
    "Галина Надія Вікторія Анастасія Христина Соломія Зоряна Леся Євгенія Яна")
# invariant, except -ський/-цький (women's -ська/-цька)
_UA_SURNAMES: Final = _w("Шевченко Коваленко Бондаренко Ткаченко Кравченко Олійник Шевчук Поліщук Бойко "
    "Ковальчук Мельник Лисенко Марченко Савченко Руденко Мороз Іваненко Петренко Гончаренко Кравчук "
    "Ярошенко Литвиненко Кузьменко Павленко Остапчук Гнатюк Романюк Федорук Білоус Хоменко Гриценко "
    "Дмитренко Коваль Левченко Зінченко Кириленко Нестеренко Приходько Сидоренко Яценко Ґонта Євтушенко "
    "Юрченко Яковенко Заїка Згуровський Коцюбинський Вишневецький Їжак Гайдамака")
# Surnames that are other names one suffix away (both forms are real, different surnames).
_CYR_FALSE_FRIENDS: Final = _slashed("Ковалёв/Коваленко Иванов/Иваненко Петров/Петренко Сидоров/Сидоренко "
    "Ткачёв/Ткаченко Кравцов/Кравченко Мельников/Мельниченко Захаров/Захарченко Романов/Романенко "
    "Фёдоров/Федоренко Никитин/Никитенко Попов/Попович Соколов/Соколовский Козлов/Козловский "
    "Орлов/Орловский Белов/Белоусов Гусев/Гусейнов Шевцов/Шевченко Бондарев/Бондаренко Марков/Маркович "
    "Шевчук/Шевченко Ковальчук/Коваленко Кравчук/Кравченко Мельник/Мельниченко Бойко/Бойченко "
    "Литвин/Литвиненко Гнатюк/Гнатенко Романюк/Романенко Остапчук/Остапенко Павлюк/Павленко")
# men's given names with a women's form (the gender-variant category)
_RU_GENDER_PAIRS: Final = _slashed("Александр/Александра Евгений/Евгения Валентин/Валентина "
    "Ярослав/Ярослава Станислав/Станислава Владислав/Владислава Виктор/Виктория Василий/Василиса")


def _ru_feminine(surname: str) -> str:
    if surname.endswith(("ов", "ев", "ёв", "ин", "ын")):
        return surname + "а"
    if surname.endswith(("ский", "цкий")):
        return surname[:-2] + "ая"
    return surname


def _ua_feminine(surname: str) -> str:
    if surname.endswith(("ський", "цький")):
        return surname[:-2] + "а"
    return _ru_feminine(surname) if surname.endswith(("ов", "ев", "ёв", "ин")) else surname


@dataclass(frozen=True)
class CyrillicPerson:
    lang: str  # "rus" or "ukr"
    female: bool
    given: str
    patronymic: str | None
    surname: str

    def full(self) -> str:
        return " ".join(x for x in (self.given, self.patronymic, self.surname) if x)


def _cyrillic_people(rng: random.Random, russian: int, ukrainian: int) -> list[CyrillicPerson]:
    people: list[CyrillicPerson] = []
    seen: set[str] = set()
    while len(people) < russian + ukrainian:
        ukr = len(people) >= russian
        men, women, surnames = (
            (_UA_MEN, _UA_WOMEN, _UA_SURNAMES) if ukr else (_RU_MEN, _RU_WOMEN, _RU_SURNAMES))
        female = rng.random() < 0.4
        given = rng.choice(women) if female else rng.choice(men)[0]
        father = rng.choice(men)
        patronymic = (father[2] if female else father[1]) if rng.random() < 0.7 else None
        surname = rng.choice(surnames)
        if female:
            surname = _ua_feminine(surname) if ukr else _ru_feminine(surname)
        p = CyrillicPerson("ukr" if ukr else "rus", female, given, patronymic, surname)
        if p.full() not in seen:
            seen.add(p.full())
            people.append(p)
    return people


# --------------------------------------------------------------------------- synthetic pools (ours)


@dataclass(frozen=True)
class Culture:
    """Our own synthetic name pool for one naming culture (Latin script as customers write it)."""

    name: str
    men: tuple[str, ...]
    women: tuple[str, ...]
    surnames: tuple[str, ...]
    middle: tuple[str, ...]  # '' or a second given name or patronymic, "man's/woman's" where they differ
    surname_first: bool
    false_surnames: tuple[tuple[str, str], ...]  # different surnames one suffix or letter apart
    false_given: tuple[tuple[str, str], ...]  # different given names one suffix or letter apart
    company_forms: tuple[str, ...]
    company_words: tuple[str, ...]  # trade words in the culture's own language or usage
    company_roots: tuple[str, ...]  # places and brand-like words
    feminine: Callable[[str], str] | None = None

    def person(self, rng: random.Random) -> str:
        female = rng.random() < 0.45
        given = rng.choice(self.women if female else self.men)
        surname = rng.choice(self.surnames)
        if female and self.feminine:
            surname = self.feminine(surname)
        middle = rng.choice(self.middle) if self.middle else ""
        if middle == "father":  # a father's given name
            middle = rng.choice(self.men)
        elif middle == "surname":  # a second surname
            middle = rng.choice(self.surnames)
        elif "/" in middle:
            middle = middle.split("/")[1 if female else 0]
        parts = [surname, middle, given] if self.surname_first else [given, middle, surname]
        return " ".join(p for p in parts if p)

    def company(self, rng: random.Random) -> str:
        form = rng.choice(self.company_forms)
        word = rng.choice(self.company_words)
        shape = rng.randrange(4)
        if shape == 0:
            core = f"{rng.choice(self.surnames)} {word}"
        elif shape == 1:
            core = f"{rng.choice(self.company_roots)} {word}"
        elif shape == 2:
            a, b = rng.sample(self.surnames, 2)
            core = f"{a} & {b}"
        else:
            core = f"{rng.choice(self.company_roots)} {rng.choice(self.surnames)} {word}"
        if form.endswith(" "):  # a form written before the name
            return f"{form}{core}"
        return f"{core} {form}".strip()


def _slavic_feminine(surname: str) -> str:
    if surname.endswith(("ov", "ev", "in")):
        return surname + "a"
    if surname.endswith(("ski", "cki")):
        return surname[:-1] + "a"
    return surname


_CULTURES: Final = (
    Culture(
        "english", _w("James John Robert Michael William David Richard Joseph Thomas Charles Christopher "
           "Daniel Matthew Anthony Mark Paul Steven Andrew Kenneth Joshua Kevin Brian George Edward Ronald "
           "Timothy Jason Jeffrey Ryan Gary Peter Simon Graham Neil Stuart"),
        _w("Mary Patricia Jennifer Linda Elizabeth Barbara Susan Jessica Sarah Karen Nancy Lisa Margaret "
           "Sandra Ashley Emily Donna Michelle Carol Amanda Melissa Deborah Stephanie Rebecca Laura Helen "
           "Sharon Cynthia Kathleen Amy Claire Joanne Rachel Fiona"),
        _w("Smith Jones Taylor Brown Williams Wilson Johnson Davies Robinson Wright Thompson Evans Walker "
           "White Roberts Green Hall Wood Jackson Clarke Harris Lewis Martin Cooper King Baker Turner Hill "
           "Moore Ward Morris Clark Watson Edwards Carter Mitchell Parker Collins Bennett Cook Shaw Murphy "
           "Bailey Bell Griffiths Kelly Marshall Simpson Ellis Richards Peters Stevens Nichols Davidson "
           "Wilkinson"),
        ("", "", "", "", "James/Anne", "John/Louise", "Edward/Jane", "Michael/Marie", "Robert/Elizabeth",
         "William/Rose"), False,
        _pairs("Johnson/Johansson Williams/Williamson Richards/Richardson Thomas/Thompson Harris/Harrison "
               "Robinson/Robins Nichols/Nicholson Peters/Peterson Stevens/Stevenson Jackson/Jacobson "
               "Davies/Davidson Roberts/Robertson Wilson/Wilkinson Clarke/Clarkson Morris/Morrison "
               "Ellis/Ellison Simpson/Simmons Collins/Collinson Watson/Watkins Edwards/Edmunds"),
        _pairs("Kevin/Gavin Jason/Mason Gary/Barry Laura/Lara Ronald/Donald Brian/Ryan Karen/Karin "
               "Neil/Nigel"),
        ("Ltd", "Limited", "plc", "LLP", "Holdings Ltd", "Group Ltd"),
        _w("Engineering Logistics Trading Consulting Builders Foods Textiles Marine Freight Motors "
           "Electrical Plastics Packaging Properties Ventures Supplies"),
        _w("Northgate Riverside Kingsway Westbridge Highfield Oakwood Ashford Thames Pennine Clyde Severn "
           "Mersey"),
    ),
    Culture(
        "spanish", _w("José Juan Luis Carlos Javier Miguel Antonio Manuel Francisco Pedro Alejandro "
           "Fernando Diego Jorge Rafael Sergio Pablo Andrés Raúl Álvaro Ricardo Eduardo Mario Alberto "
           "Enrique"),
        _w("María Carmen Ana Laura Isabel Lucía Marta Elena Pilar Teresa Rosa Cristina Patricia Beatriz "
           "Sofía Paula Raquel Silvia Mónica Victoria Julia Alicia Irene Andrea Natalia"),
        _w("García Fernández González Rodríguez López Martínez Sánchez Pérez Gómez Martín Jiménez Ruiz "
           "Hernández Díaz Moreno Muñoz Álvarez Romero Alonso Gutiérrez Navarro Torres Domínguez Vázquez "
           "Ramos Gil Ramírez Serrano Blanco Molina Morales Suárez Ortega Delgado Castro Ortiz Rubio Marín "
           "Sanz Iglesias Medina Garrido Cortés Castillo Santos Lozano Guerrero Cano Prieto Méndez Núñez "
           "Díez Gámez"),
        ("", "surname", "surname", "surname"), False,
        _pairs("Fernández/Hernández Martín/Martínez Ramos/Ramírez Gómez/Gámez Marín/Martín Muñoz/Núñez "
               "Díaz/Díez Castro/Castillo Moreno/Morales Santos/Santana Medina/Molina Garrido/Guerrero"),
        _pairs("Mario/Marino Rafael/Ismael Sergio/Segio Julia/Juliana Elena/Helena"),
        ("S.L.", "S.A.", "S.L.U.", "S.A. de C.V."),
        _w("Construcciones Transportes Distribuciones Inversiones Inmobiliaria Alimentación Exportaciones "
           "Servicios Logística Ingeniería"),
        _w("Ibérica Levante Cantábrica Andaluza Galaica Castellana Mediterránea Atlántica Pirineos Meseta"),
    ),
    Culture(
        "german", _w("Thomas Michael Andreas Stefan Christian Markus Frank Jürgen Klaus Wolfgang Uwe "
           "Matthias Jörg Peter Martin Daniel Sebastian Tobias Florian Lukas Jan Felix Jonas Maximilian "
           "Niklas"),
        _w("Sabine Petra Claudia Susanne Andrea Birgit Monika Katrin Stefanie Julia Anna Lena Laura Lisa "
           "Sarah Katharina Johanna Leonie Sophie Miriam"),
        _w("Müller Schmidt Schneider Fischer Weber Meyer Wagner Becker Schulz Hoffmann Schäfer Koch Bauer "
           "Richter Klein Wolf Schröder Neumann Schwarz Zimmermann Braun Krüger Hartmann Lange Werner "
           "Schmitz Krause Lehmann Köhler Herrmann König Walter Huber Kaiser Fuchs Peters Scholz Möller "
           "Weiß Jung Hahn Schubert Wegner Naumann Hartung Lehner"),
        ("", "", "", "Josef/Maria", "Karl/Elisabeth", "Heinz/Marie"), False,
        _pairs("Schmidt/Schmitz Müller/Möller Wagner/Wegner Neumann/Naumann Hartmann/Hartung "
               "Lehmann/Lehner Schneider/Schreiner Becker/Bender Richter/Reichert Koch/Kolb"),
        _pairs("Jan/Jens Jonas/Tobias Lena/Lene Stefan/Stephanie Katrin/Kathrin"),
        ("GmbH", "AG", "GmbH & Co. KG", "KG", "e.K."),
        _w("Maschinenbau Logistik Handels Bau Elektrotechnik Metallbau Spedition Immobilien Verpackung "
           "Holzbau"),
        _w("Rhein Main Elbe Allgäu Schwarzwald Hansa Nordsee Weser Isar Bodensee"),
    ),
    Culture(
        "french", _w("Jean Pierre Michel Philippe Alain Nicolas Christophe Patrick Laurent Frédéric Julien "
           "Sébastien Olivier Thierry Éric Stéphane David Antoine Guillaume François Mathieu Romain Hugo "
           "Louis Lucas"),
        _w("Marie Nathalie Isabelle Sylvie Catherine Françoise Valérie Sandrine Christine Céline Sophie "
           "Julie Aurélie Émilie Camille Léa Manon Chloé Claire Hélène"),
        _w("Martin Bernard Dubois Thomas Robert Richard Petit Durand Leroy Moreau Simon Laurent Lefebvre "
           "Michel Garcia David Bertrand Roux Vincent Fournier Morel Girard André Mercier Dupont Lambert "
           "Bonnet Legrand Garnier Faure Rousseau Blanc Guérin Henry Roussel Perrin Morin Clément Gauthier "
           "Dumont Fontaine Chevalier Robin Martineau Bernardin Petitjean Leroux Blanchard Robinet Granier"),
        ("", "", "", "Pierre/Marie", "Jean/Louise", "Paul/Anne"), False,
        _pairs("Martin/Martineau Bernard/Bernardin Petit/Petitjean Morel/Morin Leroy/Leroux "
               "Blanc/Blanchard Robin/Robinet Garnier/Granier Durand/Durant Moreau/Morel"),
        _pairs("Mathieu/Mathis Julien/Lucien Léa/Léon Camille/Cyrille"),
        ("SARL", "SAS", "SA", "EURL", "SNC"),
        _w("Transports Bâtiment Négoce Distribution Immobilier Conseil Industries Services Alimentaire "
           "Énergie"),
        _w("Atlantique Provence Normandie Loire Alpes Bretagne Garonne Rhône Vosges Méditerranée"),
    ),
    Culture(
        "italian", _w("Marco Giuseppe Giovanni Antonio Luca Andrea Francesco Alessandro Matteo Stefano "
           "Roberto Paolo Davide Simone Lorenzo"),
        _w("Giulia Francesca Chiara Sara Valentina Laura Alessandra Martina Federica Elena Silvia Anna "
           "Paola Elisa Roberta"),
        _w("Rossi Russo Ferrari Esposito Bianchi Romano Colombo Ricci Marino Greco Bruno Gallo Conti "
           "Mancini Costa Giordano Rizzo Lombardi Moretti Barbieri Fontana Santoro Mariani Rinaldi Caruso "
           "Ferrara Martini Leone Longo Gentile Martinelli Vitale Serra Coppola Marchetti Rossini Rosso "
           "Rizzi Costanzo"),
        ("", "", "", "Giuseppe/Maria", "Antonio/Anna"), False,
        _pairs("Rossi/Rossini Russo/Rosso Ricci/Rizzi Marino/Mariani Martini/Martinelli Costa/Costanzo "
               "Romano/Romani Greco/Grieco"),
        _pairs("Marco/Mirco Luca/Luana Paolo/Paola Simone/Simona"),
        ("S.r.l.", "S.p.A.", "S.n.c.", "S.a.s."),
        _w("Costruzioni Trasporti Impianti Commerciale Alimentari Meccanica Tessile Immobiliare Servizi"),
        _w("Adriatica Tirrenica Padana Toscana Lombarda Sicula Veneta Ligure Sarda Dolomiti"),
    ),
    Culture(
        "chinese", _w("Wei Fang Na Min Jing Qiang Lei Jun Yang Yong Yan Jie Juan Tao Ming Chao Xiuying Xia "
           "Ping Gang Hua Hui Hong Jian Bo Xin Hao Yi Zhiqiang Jianguo Jianhua Xiaoming Haiyan Lihua "
           "Guoqiang"),
        _w("Fang Na Min Jing Yan Juan Xiuying Xia Ping Hua Hui Hong Xin Yi Haiyan Lihua Jinhua Yuling "
           "Shuang Lan Ying Dan Ning Li Mei"),
        _w("Wang Li Zhang Liu Chen Yang Huang Zhao Wu Zhou Xu Sun Ma Zhu Hu Guo He Lin Gao Luo Zheng Liang "
           "Xie Song Tang Han Feng Deng Cao Peng Zeng Xiao Tian Dong Pan Yuan Cai Jiang Du Ye Cheng Wei Su "
           "Ding Ren Lu Yao Shen Zhong Zhuang Wan Zou Xue Kuang Tan Fang"),
        ("",), True,
        _pairs("Zhang/Zhuang Wang/Wan Chen/Cheng Li/Lin Zhou/Zou Xu/Xue Sun/Song Liu/Lu Huang/Kuang "
               "Tang/Tan Feng/Fang Han/Hang"),
        _pairs("Wei/Wen Jing/Jin Ming/Min Hua/Hui Jun/Juan Yan/Yang Hong/Hao"),
        ("Co., Ltd.", "Co., Ltd", "Company Limited", "Trading Co., Ltd.", "Limited"),
        _w("Trading Electronics Machinery Textile Logistics Chemical Technology Hardware Garments Ceramics"),
        _w("Shenzhen Guangzhou Shanghai Ningbo Xiamen Qingdao Tianjin Hangzhou Dongguan Foshan Wuhan "
           "Chengdu Hengda Xinyuan Jinlong Huatai Tianli Hongxing Dongfang Zhongxin Yongsheng Fuxing"),
    ),
    Culture(
        "indian", _w("Rahul Amit Rajesh Suresh Ramesh Sanjay Vijay Anil Sunil Arjun Rohan Vikram Manish "
           "Deepak Ajay Rakesh Mahesh Ashok Prakash Naveen Karthik Venkatesh Sachin Nikhil Aditya Mukesh "
           "Sumit"),
        _w("Priya Anjali Pooja Neha Sunita Kavita Lakshmi Deepa Meena Rekha Shalini Divya Ananya Swati "
           "Nisha Aishwarya Radha Geeta Sneha Kiran Kavya"),
        _w("Sharma Verma Gupta Singh Kumar Patel Shah Mehta Joshi Iyer Nair Reddy Rao Pillai Menon Das "
           "Banerjee Chatterjee Mukherjee Ghosh Bose Sen Chopra Kapoor Malhotra Khanna Agarwal Jain "
           "Kulkarni Deshpande Patil Naidu Chauhan Yadav Mishra Pandey Tiwari Dubey Saxena Srivastava "
           "Sinha Chaudhary Thakur Desai Trivedi Bansal Mehra Iyengar Naik Guha Chhabra Rai Sengupta "
           "Mehrotra"),
        ("", "", "Kumar/Kumari", "Prasad/Devi", "Lal/Devi", "Chandra/Rani"), False,
        _pairs("Sharma/Verma Patel/Patil Singh/Sinha Mehta/Mehra Iyer/Iyengar Nair/Naik Gupta/Guha "
               "Chopra/Chhabra Rao/Rai Sen/Sengupta Malhotra/Mehrotra"),
        _pairs("Suresh/Ramesh Rajesh/Rakesh Mahesh/Mukesh Anil/Sunil Amit/Sumit Vijay/Ajay Kavita/Kavya"),
        ("Pvt. Ltd.", "Private Limited", "Pvt Ltd", "Ltd.", "& Sons", "Exports"),
        _w("Textiles Exports Pharma Steel Agro Industries Enterprises Traders Engineering Infotech"),
        _w("Deccan Konkan Malabar Ganga Narmada Kaveri Himalaya Sahyadri Coromandel Vindhya"),
    ),
    Culture(
        "arabic", _w("Mohammed Ahmed Ali Hassan Hussein Omar Khalid Abdullah Ibrahim Youssef Mahmoud "
           "Mustafa Said Saleh Salem Karim Tariq Nasser Hamza Bilal Faisal Jamal Kamal Rashid Walid Adel "
           "Samir Hamid Hamad Amir Amin Yasin Yasir Ammar Anas Ziad Majid Nabil Sami Saad Khalil"),
        _w("Fatima Aisha Maryam Khadija Zainab Layla Noor Huda Salma Amina Amira Yasmin Hana Hanan Rania "
           "Rana Samira Samia Leila Dalia Mona Reem Sara Lubna"),
        _w("Al-Hashimi Al-Masri Al-Khatib Haddad Khoury Nasser Nassar Mansour Mansouri Hamdan Hamdi "
           "Darwish Al-Amin Al-Sayed Abdel-Rahman Abdel-Aziz Al-Najjar Al-Farsi Al-Ghamdi Al-Otaibi "
           "Al-Qahtani Al-Shehri Al-Harbi Al-Mutairi Al-Dosari Al-Shammari Al-Tamimi Al-Jabri Al-Balushi "
           "Al-Rashid Al-Rashidi Al-Hakim Al-Sharif Barakat Kassem Ayoub Jaber Younes Ghanem Shaheen Saadi "
           "Othman"),
        ("", "father", "father", "father"), False,
        _pairs("Nasser/Nassar Mansour/Mansouri Hamdan/Hamdi Al-Rashid/Al-Rashidi Saad/Saadi Jaber/Jabr"),
        _pairs("Hassan/Hussein Hamid/Hamad Amin/Amir Yasin/Yasir Omar/Ammar Saleh/Salem Jamal/Kamal "
               "Khalid/Khalil Said/Saad Sami/Samir Amina/Amira Rania/Rana Hana/Hanan Samira/Samia "
               "Majid/Hamid Walid/Khalid Nabil/Bilal"),
        ("LLC", "General Trading LLC", "FZE", "FZCO", "Trading Est.", "W.L.L.", "Co."),
        _w("Trading Contracting Foodstuff Electromechanical Transport Real Estate Investments Building "
           "Materials Travel Gold"),
        _w("Al Noor Al Fajr Al Safa Al Rawda Al Waha Al Baraka Al Amal Al Hilal Gulf Desert Pearl Falcon"),
    ),
    Culture(
        "russian", _w("Aleksandr Dmitry Sergey Andrey Alexey Maxim Ivan Mikhail Nikolai Vladimir Pavel "
           "Igor Oleg Yuri Viktor Konstantin Roman Artem Denis Evgeny"),
        _w("Elena Olga Natalia Irina Tatiana Svetlana Anna Maria Ekaterina Yulia Anastasia Marina Daria "
           "Ksenia Galina"),
        _w("Ivanov Smirnov Kuznetsov Popov Vasiliev Petrov Sokolov Mikhailov Novikov Fedorov Morozov "
           "Volkov Alekseev Lebedev Semenov Egorov Pavlov Kozlov Stepanov Nikolaev Orlov Andreev Makarov "
           "Nikitin Zakharov Zaitsev Borisov Yakovlev Grigoriev Romanov Sergeev Kuzmin Frolov Dmitriev "
           "Korolev Gusev Kiselev Ilyin Polyakov Sorokin Vinogradov Kovalev Belov Medvedev Tarasov Sidorov "
           "Tkachev Melnikov"),
        ("", "Aleksandrovich/Aleksandrovna", "Dmitrievich/Dmitrievna", "Sergeevich/Sergeevna",
         "Andreevich/Andreevna", "Ivanovich/Ivanovna", "Mikhailovich/Mikhailovna",
         "Nikolaevich/Nikolaevna", "Vladimirovich/Vladimirovna", "Pavlovich/Pavlovna",
         "Viktorovich/Viktorovna", "Yurievich/Yurievna", "Petrovich/Petrovna", "Olegovich/Olegovna",
         "Igorevich/Igorevna"), False,
        _pairs("Kovalev/Kovalenko Ivanov/Ivanenko Petrov/Petrenko Popov/Popovich Sokolov/Sokolovsky "
               "Kozlov/Kozlovsky Orlov/Orlovsky Belov/Belousov Gusev/Guseinov Sidorov/Sidorenko "
               "Tkachev/Tkachenko Melnikov/Melnichenko Zakharov/Zakharchenko Romanov/Romanenko "
               "Fedorov/Fedorenko Nikitin/Nikitenko"),
        _pairs("Ivan/Ivo Yuri/Yuliy Oleg/Gleb Denis/Deniz"),
        ("OOO ", "AO ", "PAO ", "LLC", "JSC"),
        _w("Stroy Trans Invest Torg Neft Prom Tekh Energo Agro Metall"),
        _w("Ural Volga Sibir Baltika Neva Amur Don Kama Altai Yenisei"),
        _slavic_feminine,
    ),
    Culture(
        "turkish", _w("Mehmet Mustafa Ahmet Ali Hüseyin Hasan İbrahim İsmail Osman Yusuf Murat Ömer "
           "Ramazan Halil Süleyman Abdullah Mahmut Kemal Emre Burak Serkan Onur Can Cem Volkan"),
        _w("Fatma Ayşe Emine Hatice Zeynep Elif Meryem Şerife Zehra Sultan Hanife Merve Esra Özlem Derya "
           "Gülsüm Büşra Ebru Seda Aylin"),
        _w("Yılmaz Kaya Demir Şahin Çelik Yıldız Yıldırım Öztürk Aydın Özdemir Arslan Doğan Kılıç Çetin "
           "Kara Koç Kurt Özkan Şimşek Polat Özcan Korkmaz Çakır Yavuz Acar Şen Aktaş Güler Yalçın Güneş "
           "Bozkurt Bulut Keskin Ünal Turan Özer Işık Kaplan Avcı Sarı Tekin Taş Köse Yüksel Ateş Aksoy "
           "Demirci Aydoğan Güner Aksu"),
        ("", "", "", "Ali/Nur", "Can/Su"), False,
        _pairs("Yılmaz/Yıldız Kaya/Kara Demir/Demirci Çelik/Çetin Aydın/Aydoğan Özcan/Özkan Güler/Güner "
               "Aksoy/Aksu Öztürk/Özkan"),
        _pairs("Hasan/Hüseyin Cem/Can Emre/Emir Murat/Mert Elif/Elçin"),
        ("Ltd. Şti.", "A.Ş.", "Tic. Ltd. Şti.", "San. ve Tic. A.Ş."),
        _w("İnşaat Tekstil Gıda Lojistik Otomotiv Makine Turizm Enerji Madencilik Tarım"),
        _w("Anadolu Ege Marmara Karadeniz Toros Boğaziçi Akdeniz Trakya Kapadokya Fırat"),
    ),
    Culture(
        "nigerian", _w("Chukwuemeka Oluwaseun Babatunde Adebayo Emeka Chinedu Ifeanyi Olumide Tunde Yusuf "
           "Ibrahim Musa Abubakar Sani Aliyu Uche Obinna Segun Femi Kunle Nnamdi Kelechi Tochukwu Ayodele "
           "Adewale Seun Remi"),
        _w("Ngozi Chiamaka Adaeze Funmilayo Folake Aisha Hauwa Zainab Amina Blessing Chidinma Nneka "
           "Yetunde Bukola Temitope Ifeoma Halima Kemi Ronke Uchenna"),
        _w("Okafor Okonkwo Okeke Eze Nwosu Obi Nwachukwu Adeyemi Adebayo Ogunleye Olawale Balogun Bello "
           "Abubakar Ibrahim Musa Usman Danjuma Okoro Chukwu Akinola Oyelaran Oladipo Afolabi Ogunbiyi "
           "Adeleke Ojo Ayodele Nnadi Udeh Anyanwu Ekwueme Onuoha Iwu Nwankwo Oyewole Olaniyan Ajayi "
           "Akande Salami Lawal Garba Yakubu Aminu Sule Adeyemo Okonjo Ogunlade Nwoye Adeoye Oladapo Ajala "
           "Akinyemi"),
        ("", "", "", "Chukwudi/Nkechi", "Oluwadamilare/Oluwakemi", "Ibrahim/Hauwa"), False,
        _pairs("Okafor/Okoro Adeyemi/Adeyemo Okonkwo/Okonjo Ogunleye/Ogunlade Nwosu/Nwoye Adeleke/Adeoye "
               "Oladipo/Oladapo Ajayi/Ajala Akinola/Akinyemi"),
        _pairs("Femi/Remi Segun/Seun Kemi/Remi Uche/Uchenna Musa/Moses"),
        ("Ltd", "Limited", "Nigeria Limited", "Enterprises", "Ventures"),
        _w("Oil Services Agro Allied Construction Logistics Petroleum Global Resources Properties Farms"),
        _w("Lagos Niger Delta Benue Kano Ogun Enugu Oyo Jos Calabar Abuja"),
    ),
    Culture(
        "portuguese", _w("João José Antônio Francisco Carlos Paulo Pedro Lucas Luiz Marcos Gabriel Rafael "
           "Daniel Marcelo Bruno Eduardo Felipe Rodrigo Gustavo Thiago Mateus Vinícius Leonardo Ricardo"),
        _w("Maria Ana Francisca Antônia Adriana Juliana Márcia Fernanda Patrícia Aline Sandra Camila "
           "Amanda Bruna Jéssica Letícia Larissa Beatriz Mariana Gabriela"),
        _w("Silva Santos Oliveira Souza Rodrigues Ferreira Alves Pereira Lima Gomes Costa Ribeiro Martins "
           "Carvalho Almeida Lopes Soares Fernandes Vieira Barbosa Rocha Dias Nascimento Andrade Moreira "
           "Nunes Marques Machado Mendes Freitas Cardoso Ramos Gonçalves Santana Teixeira Araújo Correia "
           "Pinto Monteiro Moura Cavalcanti Batista Campos Fonseca Reis Sampaio Medeiros Castro Duarte "
           "Coelho Silveira Neves Ramalho Lira Campelo"),
        ("", "surname", "surname", "surname"), False,
        _pairs("Silva/Silveira Santos/Santana Moreira/Moura Nunes/Neves Pereira/Ferreira Ramos/Ramalho "
               "Lima/Lira Campos/Campelo Marques/Martins Mendes/Menezes"),
        _pairs("João/Joel Paulo/Paula Bruno/Bruna Daniel/Daniela Marcos/Márcio"),
        ("Ltda.", "Ltda", "S.A.", "ME", "EIRELI"),
        _w("Comércio Transportes Construtora Agropecuária Alimentos Importadora Distribuidora Serviços "
           "Têxtil"),
        _w("Paulista Carioca Mineira Baiana Gaúcha Amazônia Paraná Atlântico Cerrado Pantanal"),
    ),
    Culture(
        "polish", _w("Piotr Krzysztof Andrzej Tomasz Paweł Jan Michał Marcin Jakub Adam Łukasz Marek "
           "Grzegorz Mateusz Wojciech Mariusz Dariusz Zbigniew Rafał Kamil"),
        _w("Anna Maria Katarzyna Małgorzata Agnieszka Barbara Ewa Magdalena Joanna Krystyna Monika Zofia "
           "Aleksandra Natalia Karolina Beata Dorota Justyna Marta Alicja"),
        _w("Nowak Kowalski Wiśniewski Wójcik Kowalczyk Kamiński Lewandowski Zieliński Szymański Woźniak "
           "Dąbrowski Kozłowski Jankowski Mazur Kwiatkowski Krawczyk Piotrowski Grabowski Nowakowski "
           "Pawłowski Michalski Nowicki Adamczyk Dudek Zając Wieczorek Jabłoński Król Majewski Olszewski "
           "Jaworski Wróbel Malinowski Pawlak Witkowski Walczak Stępień Górski Rutkowski Michalak Sikora "
           "Ostrowski Baran Duda Szewczyk Tomaszewski Pietrzak Marciniak Wróblewski Zalewski Wójtowicz "
           "Adamski Janowski"),
        ("", "", "", "Jan/Maria", "Józef/Anna"), False,
        _pairs("Nowak/Nowakowski Kowalski/Kowalczyk Wójcik/Wójtowicz Pawlak/Pawłowski Michalski/Michalak "
               "Wróbel/Wróblewski Adamczyk/Adamski Jankowski/Janowski"),
        _pairs("Marek/Marcin Jan/Jakub Adam/Adrian Anna/Hanna"),
        ("Sp. z o.o.", "S.A.", "Sp. j.", "Sp. k."),
        _w("Budownictwo Transport Handel Usługi Logistyka Meble Drewno Stal Spedycja Dystrybucja"),
        _w("Mazowsze Pomorze Śląsk Warta Wisła Tatry Bałtyk Kaszuby Podhale Karpaty"),
        _slavic_feminine,
    ),
    Culture(
        "japanese", _w("Haruto Sota Yuto Hiroshi Takashi Kenji Daisuke Shota Yuki Kazuki Ren Minato Riku "
           "Takumi Kaito Naoki Satoshi Makoto Kenta Ryota"),
        _w("Yui Aoi Hina Sakura Yuna Haruka Misaki Ayaka Nanami Mai Yuko Keiko Naoko Tomoko Emi Rina Miyu "
           "Saki Mio Akari"),
        _w("Sato Suzuki Takahashi Tanaka Watanabe Ito Yamamoto Nakamura Kobayashi Kato Yoshida Yamada "
           "Sasaki Yamaguchi Matsumoto Inoue Kimura Hayashi Shimizu Yamazaki Mori Abe Ikeda Hashimoto "
           "Yamashita Ishikawa Nakajima Maeda Fujita Ogawa Goto Okada Hasegawa Murakami Kondo Ishii Saito "
           "Sakamoto Endo Aoki Morita Ishida Yamamura Nakamoto Matsumura Fujii"),
        ("",), False,
        _pairs("Sato/Saito Mori/Morita Ishii/Ishida Yamamoto/Yamamura Nakamura/Nakamoto Hayashi/Kobayashi "
               "Matsumoto/Matsumura Fujita/Fujii Kato/Goto"),
        _pairs("Yuki/Yuko Kenta/Kento Mai/Mei Emi/Eri"),
        ("Co., Ltd.", "K.K.", "Corporation", "Inc."),
        _w("Shoji Sangyo Kogyo Seiko Unyu Kensetsu Denki Bussan Suisan Trading"),
        _w("Nippon Tokai Kanto Kansai Kyushu Hokuriku Sanyo Chubu Tohoku Seto"),
    ),
    Culture(
        "vietnamese", _w("Anh Binh Cuong Dung Hai Hieu Hung Khanh Long Nam Quang Son Trung Tuan Tung Viet "
           "Duc Minh"),
        _w("Anh Hoa Huong Lan Linh Mai Phuong Tam Thao Trang Yen Ngoc Thu Ha"),
        _w("Nguyen Tran Le Pham Hoang Phan Vu Dang Bui Do Ho Ngo Duong Ly Truong Dinh Lam Mai Trinh Luong"),
        ("Van/Thi", "Van/Thi", "Duc/Ngoc", "Minh/Minh", "Quoc/Thanh", "Huu/Xuan"), True,
        _pairs("Phan/Pham Dang/Duong Ho/Ngo Le/Ly Truong/Trinh Lam/Luong"),
        _pairs("Hung/Hong Tuan/Tuyen Linh/Lien Nam/Lam"),
        ("JSC", "Company Limited", "Co., Ltd", "Joint Stock Company"),
        _w("Trading Seafood Garment Construction Logistics Coffee Rice Steel Furniture Technology"),
        _w("Saigon Hanoi Mekong Hai Phong Da Nang Sao Viet Hoa Binh Phu My Thang Long"),
    ),
    Culture(
        "korean", _w("Min-jun Seo-jun Ji-ho Ha-jun Do-yun Joon-ho Sung-min Ji-hoon Hyun-woo Jae-won "
           "Min-jae Dong-hyun"),
        _w("Seo-yeon Ji-woo Min-seo Ha-eun Soo-ah Ji-min Yu-na Eun-ji Hye-jin Su-bin Ji-yeon"),
        _w("Kim Lee Park Choi Jung Kang Cho Yoon Jang Lim Han Oh Seo Shin Kwon Hwang Ahn Song Yoo Hong"),
        ("",), True,
        _pairs("Jung/Jang Kang/Kwang Shin/Shim Song/Seong"),
        _pairs("Ji-ho/Ji-hoon Min-jun/Min-jae Seo-yeon/Seo-yoon Ji-min/Ji-won"),
        ("Co., Ltd.", "Corporation", "Inc.", "Co., Ltd"),
        _w("Industrial Trading Precision Chemical Logistics Electronics Shipping Construction Textile "
           "Foods"),
        _w("Daehan Hanil Dongil Hanyang Sejin Daewon Busan Incheon Gwangju Ulsan"),
    ),
    Culture(
        "persian", _w("Reza Ali Mohammad Hossein Mehdi Amir Hamid Saeed Majid Ahmad Mahmoud Javad Behrouz "
           "Dariush Farhad Kamran Omid Babak Arash Navid"),
        _w("Maryam Fatemeh Zahra Sara Leila Nasrin Parisa Shirin Mina Neda Niloufar Azadeh Roya Samaneh "
           "Elham"),
        _w("Hosseini Mohammadi Ahmadi Rezaei Moradi Karimi Jafari Rahimi Mousavi Sadeghi Hashemi Ghasemi "
           "Kazemi Amiri Ebrahimi Rostami Shirazi Tehrani Esfahani Najafi Azimi Akbari Ansari Bagheri "
           "Heidari Nazari Salehi Yazdani Zamani Farahani Rahmani Amini Jaberi Rezvani"),
        ("",), False,
        _pairs("Rahimi/Rahmani Karimi/Kazemi Amiri/Amini Jafari/Jaberi Rezaei/Rezvani Hashemi/Hakimi"),
        _pairs("Hamid/Majid Omid/Navid Mina/Nina Saeed/Said"),
        ("Co.", "Trading Co.", "Industrial Group", "Company"),
        _w("Trading Industrial Petrochemical Carpet Saffron Steel Construction Pistachio Shipping "
           "Engineering"),
        _w("Pars Alborz Zagros Kavir Khazar Persia Simorgh Arya Sepahan Damavand"),
    ),
)
_BY_CULTURE: Final = {c.name: c for c in _CULTURES}


def nonlisted_names(n: int, seed: int) -> list[str]:
    """``n`` synthetic person (about 70 %) and company names from our own pools of 17 naming cultures.

    For measuring how often names that are on no list alert. Deterministic in ``seed``; names repeat
    where the pools do, as common names repeat in a bank's payments.
    """
    if n < 0:
        raise ValueError("n must be non-negative")
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(n):
        culture = rng.choice(_CULTURES)
        out.append(culture.company(rng) if rng.random() < 0.3 else culture.person(rng))
    return out


# --------------------------------------------------------------------------- pair sources


def _cascade_pairs(rows: Iterable[CascadeRow]) -> list[Pair]:
    return [Pair(r.name1, r.name2, int(r.is_match), "vessel" if r.schema == "Vessel" else "entity",
                 r.category, "watchman-cascade") for r in rows]


_TITLE_WORDS: Final = frozenset(
    w.casefold() for w in _w("Präsident Predsjednik Președintele Presiden Presidente Президент elnök"))


def _putin_pairs(names: Sequence[str], rng: random.Random, per_name: int = 3) -> list[Pair]:
    out: list[Pair] = []
    seen: set[frozenset[int]] = set()
    for i, a in enumerate(names):
        others = [j for j in range(len(names)) if j != i]
        for j in rng.sample(others, per_name):
            k = frozenset((i, j))
            if k in seen:
                continue
            seen.add(k)
            b = names[j]
            titled = any(w.casefold() in _TITLE_WORDS for w in (a + " " + b).replace(",", " ").split())
            sa, sb = script_of(a), script_of(b)
            if titled:
                cat = "title-and-name"
            elif sa != sb:
                cat = "script"
            elif sa == "LATIN":
                cat = "multilingual-latin"
            else:
                cat = "same-script-variant"
            out.append(Pair(a, b, 1, "individual", cat, "nomenklatura-putin"))
    return out


_PARTICLES: Final = frozenset(
    _w("al el bin ben ibn abu abou bint of the and in for de du la le wa wal ul fi da i e y a an"))


def _tokens(name: str) -> set[str]:
    cleaned = "".join(c if c.isalnum() else " " for c in name.casefold())
    return {t for t in cleaned.split() if len(t) >= 3 and t not in _PARTICLES}


def _clean_alias(name: str) -> str:
    return name.strip().strip("“”\"'").strip()


def _is_acronym(alias: str) -> bool:
    letters = alias.replace("-", "")
    return alias.isupper() and " " not in alias and 2 <= len(letters) <= 6 and letters.isalpha()


def _un_pairs(groups: Sequence[AliasGroup], rng: random.Random, per_entry: int = 10,
              negatives_per_entry: int = 2) -> list[Pair]:
    out: list[Pair] = []
    names_of: dict[str, set[str]] = {}
    for g in groups:
        names_of[g.ref] = {g.name.casefold()} | {_clean_alias(a.name).casefold() for a in g.aliases}
    # positives: the entry's name against its own aliases and original-script names
    for g in groups:
        found: list[Pair] = []
        base_tokens = _tokens(g.name)
        for a in g.aliases:
            alias = _clean_alias(a.name)
            if len(alias.replace(" ", "")) < 3 or alias.casefold() == g.name.casefold():
                continue
            if g.kind == "individual":
                if a.quality == "Low":
                    cat = "alias-low-quality"
                elif _tokens(alias) and _tokens(alias) < base_tokens:
                    cat = "alias-subset"
                else:
                    cat = "alias-good"
            elif _is_acronym(alias):
                cat = "alias-acronym"
            elif script_of(alias) != script_of(g.name):
                cat = "script-original"
            else:
                cat = "alias-fka" if a.quality == "f.k.a." else "alias-aka"
            found.append(Pair(alias, g.name, 1, g.kind, cat, "un-consolidated"))
            if a.original_script and a.original_script.casefold() != alias.casefold():
                found.append(Pair(a.original_script, alias, 1, g.kind, "script-original", "un-consolidated"))
        if g.original_script and script_of(g.original_script) != script_of(g.name):
            found.append(Pair(g.original_script, g.name, 1, g.kind, "script-original", "un-consolidated"))
        if len(found) > per_entry:
            found = rng.sample(found, per_entry)
        out.extend(found)
    # negatives: other entries sharing a name token; the same alias carried by two entries
    by_token: dict[str, list[AliasGroup]] = {}
    for g in groups:
        for t in _tokens(g.name) | {t for a in g.aliases if a.quality in ("Good", "a.k.a.")
                                    for t in _tokens(_clean_alias(a.name))}:
            by_token.setdefault(t, []).append(g)
    for g in groups:
        candidates: list[tuple[AliasGroup, str]] = []
        for t in sorted(_tokens(g.name)):
            for other in by_token.get(t, []):
                if other.ref == g.ref or other.kind != g.kind:
                    continue
                good = (_clean_alias(a.name) for a in other.aliases if a.quality in ("Good", "a.k.a."))
                for name in (other.name, *good):
                    if (t in _tokens(name) and name.casefold() not in names_of[g.ref]
                            and g.name.casefold() not in names_of[other.ref] and script_of(name) == "LATIN"):
                        candidates.append((other, name))
        picked = rng.sample(candidates, min(negatives_per_entry, len(candidates))) if candidates else []
        for _other, name in picked:
            out.append(Pair(name, g.name, 0, g.kind, "shared-token-negative", "un-consolidated"))
    return out


_RU_SYSTEMS: Final = ("bgn-pcgn", "gost-b", "iso9", "iso9-ascii", "scientific")


def _translit_pairs(rng: random.Random, russian: int = 100,
                    ukrainian: int = 50) -> tuple[list[Pair], list[tuple[str, bool]]]:
    """Positives between romanisations (and Cyrillic), hard negatives; also the passport-form names
    made (ICAO for Russian, the 2010 national system for Ukrainian) with whether each is a woman's."""
    out: list[Pair] = []
    listed_names: list[tuple[str, bool]] = []
    src = "translit-standards"
    for p in _cyrillic_people(rng, russian, ukrainian):
        cyr = p.full()
        if p.lang == "rus":
            listed = romanise(cyr, "icao")
            for system in rng.sample(_RU_SYSTEMS, 3):
                other = romanise(cyr, system)
                if other != listed:
                    out.append(Pair(other, listed, 1, "individual", f"transliteration-{system}", src))
            latin = romanise(cyr, rng.choice(("icao", "bgn-pcgn")))
            out.append(Pair(cyr, latin, 1, "individual", "script-cyrillic", src))
        else:
            listed = romanise(cyr, "ukr-2010")
            for system in ("icao-ukr", "bgn-pcgn-1965-ukr"):
                other = romanise(cyr, system)
                if other != listed:
                    out.append(Pair(other, listed, 1, "individual", f"transliteration-{system}", src))
            out.append(Pair(cyr, listed, 1, "individual", "script-cyrillic", src))
        listed_names.append((listed, p.female))
    # false friends: the same given names, a surname one suffix away (ICAO listed, BGN/PCGN screened)
    for _ in range(120):
        male, other_surname = rng.choice(_CYR_FALSE_FRIENDS)
        if rng.random() < 0.5:
            male, other_surname = other_surname, male
        female = rng.random() < 0.35
        ukr = script_of(male) == "CYRILLIC" and any(c in "іїєґ" for c in male + other_surname)
        men, women = (_UA_MEN, _UA_WOMEN) if ukr else (_RU_MEN, _RU_WOMEN)
        given = rng.choice(women) if female else rng.choice(men)[0]
        father = rng.choice(men)
        patronymic = father[2] if female else father[1]
        fem = _ua_feminine if ukr else _ru_feminine
        s1, s2 = (fem(male), fem(other_surname)) if female else (male, other_surname)
        a = romanise(f"{given} {patronymic} {s2}", "bgn-pcgn-1965-ukr" if ukr else "bgn-pcgn")
        b = romanise(f"{given} {patronymic} {s1}", "ukr-2010" if ukr else "icao")
        out.append(Pair(a, b, 0, "individual", "false-friend-surname", src))
    # the same given name and patronymic, another surname
    for _ in range(60):
        given, pm, _ = rng.choice(_RU_MEN)
        s1, s2 = rng.sample(_RU_SURNAMES, 2)
        out.append(Pair(romanise(f"{given} {pm} {s2}", "icao"), romanise(f"{given} {pm} {s1}", "icao"), 0,
                        "individual", "shared-given-names", src))
    # a man and a woman whose names differ only by grammatical gender (a judgement call, own category)
    for _ in range(40):
        man, woman = rng.choice(_RU_GENDER_PAIRS)
        father = rng.choice(_RU_MEN)
        surname = rng.choice(_RU_SURNAMES)
        he = romanise(f"{man} {father[1]} {surname}", "icao")
        she = romanise(f"{woman} {father[2]} {_ru_feminine(surname)}", "icao")
        if rng.random() < 0.5:
            out.append(Pair(she, he, 0, "individual", "gender-variant", src))
        else:
            he_i = romanise(f"{man[0]}. {father[1][0]}. {surname}", "icao")
            she_i = romanise(f"{woman[0]}. {father[2][0]}. {_ru_feminine(surname)}", "icao")
            if he_i != she_i:
                out.append(Pair(she_i, he_i, 0, "individual", "gender-variant-initials", src))
    return out, listed_names


# --------------------------------------------------------------------------- perturbations

_NEIGHBOURS: Final = {
    "q": "wa", "w": "qeas", "e": "wrsd", "r": "etdf", "t": "ryfg", "y": "tugh", "u": "yihj", "i": "uojk",
    "o": "ipkl", "p": "ol", "a": "qwsz", "s": "awedxz", "d": "serfcx", "f": "drtgvc", "g": "ftyhbv",
    "h": "gyujnb", "j": "huikmn", "k": "jiolm", "l": "kop", "z": "asx", "x": "zsdc", "c": "xdfv", "v": "cfgb",
    "b": "vghn", "n": "bhjm", "m": "njk",
}


def _long_word(name: str, rng: random.Random) -> tuple[list[str], int] | None:
    words = name.split(" ")
    idx = [i for i, w in enumerate(words) if sum(c.isascii() and c.isalpha() for c in w) >= 5]
    return (words, rng.choice(idx)) if idx else None


def _typo(name: str, kind: str, rng: random.Random) -> str | None:
    found = _long_word(name, rng)
    if found is None:
        return None
    words, i = found
    w = words[i]
    letters = [j for j, c in enumerate(w) if j > 0 and c.isascii() and c.isalpha()]
    if kind == "typo-keyboard":
        j = rng.choice(letters)
        rep = rng.choice(_NEIGHBOURS[w[j].lower()])
        w = w[:j] + (rep.upper() if w[j].isupper() else rep) + w[j + 1:]
    elif kind == "typo-transposition":
        spots = [j for j in letters
                 if j + 1 < len(w) and w[j + 1].isalpha() and w[j].lower() != w[j + 1].lower()]
        if not spots:
            return None
        j = rng.choice(spots)
        w = w[:j] + w[j + 1] + w[j] + w[j + 2:]
    else:
        j = rng.choice(letters)
        w = w[:j] + w[j + 1:]
    words[i] = w
    out = " ".join(words)
    return out if out != name else None


def _initials(name: str) -> str | None:
    words = name.split()
    if len(words) < 2 or not all(w[0].isalpha() for w in words[:-1]):
        return None
    return " ".join(f"{w[0].upper()}." for w in words[:-1]) + " " + words[-1]


def _surname_first(name: str, comma: bool) -> str | None:
    words = name.split()
    if len(words) < 2:
        return None
    return f"{words[-1]}{',' if comma else ''} {' '.join(words[:-1])}"


_HONORIFICS: Final = ("Mr", "Mr.", "Dr", "Dr.", "Prof.", "Colonel", "General", "Eng.")
_HONORIFICS_ISLAMIC: Final = ("Sheikh", "Shaykh", "Haji", "Hajji", "Mullah", "Maulavi", "Mufti", "Mr", "Dr")
_HONORIFICS_F: Final = ("Mrs", "Ms", "Ms.", "Dr", "Dr.", "Prof.")
_LEGAL_EQUIVALENTS: Final = (
    ("Company Limited", "Co., Ltd."), ("Co., Ltd.", "Co. Ltd"), ("CO LTD", "COMPANY LIMITED"),
    ("Limited", "Ltd"), ("Ltd.", "Limited"), ("LTD", "LIMITED"), ("Ltd", "Limited"),
    ("Corporation", "Corp."), ("CORP", "CORPORATION"), ("Corp.", "Corporation"),
    ("Company", "Co."), ("CO", "COMPANY"), ("Co.", "Company"),
    ("Incorporated", "Inc."), ("Inc.", "Incorporated"),
    ("Public Limited Company", "plc"), ("plc", "PLC"),
)
_LEGAL_TAILS: Final = tuple(sorted({f for pair in _LEGAL_EQUIVALENTS for f in pair}, key=len, reverse=True))


# forms that name a jurisdiction: never added to, swapped or dropped
_OTHER_FORMS: Final = frozenset(_w(
    "ooo ao pao gmbh ag kg sa sas sarl suarl eurl snc sl sau llc fze fzco est bhd ltda srl spa doo dd kk ab "
    "oy oü as bv nv sro kft jsc pte pty pvt sp spk ska sti şti aş plc llp wll sal gie ets"))


def _company_form(name: str, rng: random.Random) -> str | None:
    for a, b in _LEGAL_EQUIVALENTS:
        if name.endswith(" " + a):
            if rng.random() < 0.3:
                return name[: -len(a)].rstrip(" ,")
            return name[: -len(a)] + b
    words = [w.strip(".,()").replace(".", "").casefold() for w in name.split()]
    if any(name.endswith(" " + t) for t in _LEGAL_TAILS) or _OTHER_FORMS & set(words):
        return None
    return f"{name} {rng.choice(('Ltd', 'LLC', 'Co.', 'Limited'))}"


def _perturbation_pairs(groups: Sequence[AliasGroup], listed_names: Sequence[tuple[str, bool]],
                        cascade: Sequence[CascadeRow], rng: random.Random) -> list[Pair]:
    src = "perturbation"
    women = {n for n, female in listed_names if female}
    people = [g.name for g in groups if g.kind == "individual" and script_of(g.name) == "LATIN"]
    un_people = set(people)
    people += [n for n, _ in listed_names]
    short_people = [n for n in people if 2 <= len(n.split()) <= 3]
    entities = [g.name for g in groups if g.kind == "entity" and script_of(g.name) == "LATIN"]
    company_words = _w("CO CO. LTD LTD. CORP COMPANY LIMITED EXCHANGE TRADING SHIPPING INTERNATIONAL")
    companies = [n for n in entities if any(w in n.upper().split() for w in company_words)]
    companies += sorted({n for r in cascade if r.schema == "Company" and r.group == "cascade_entities"
                         for n in (r.name1, r.name2) if script_of(n) == "LATIN"})
    out: list[Pair] = []
    for kind in ("typo-keyboard", "typo-transposition", "typo-dropped-letter"):
        for base in rng.sample(people, 50) + rng.sample(entities, 15):
            typo = _typo(base, kind, rng)
            if typo:
                out.append(Pair(typo, base, 1, "individual" if base in people else "entity", kind, src))
    for base in rng.sample(short_people, 70):
        ini = _initials(base)
        if ini:
            out.append(Pair(ini, base, 1, "individual", "initials", src))
    for base in rng.sample(short_people, 60):
        for comma in (False, True):
            moved = _surname_first(base, comma)
            if moved:
                cat = "word-order-comma" if comma else "word-order"
                out.append(Pair(moved, base, 1, "individual", cat, src))
    for base in rng.sample(people, 70):
        pool = _HONORIFICS_F if base in women else _HONORIFICS_ISLAMIC if base in un_people else _HONORIFICS
        title = rng.choice(pool)
        out.append(Pair(f"{title} {base}", base, 1, "individual", "honorific", src))
    for base in rng.sample(companies, min(len(companies), 90)):
        changed = _company_form(base, rng)
        if changed and changed != base:
            out.append(Pair(changed, base, 1, "entity", "company-form", src))
    return out


def _synthetic_pairs(rng: random.Random) -> list[Pair]:
    src = "synthetic-pools"
    out: list[Pair] = []

    def person(c: Culture, given: str, middle: str, surname: str) -> str:
        parts = [surname, middle, given] if c.surname_first else [given, middle, surname]
        return " ".join(p for p in parts if p)

    def negative(a: str, b: str, category: str) -> Pair:
        return Pair(a, b, 0, "individual", category, src)

    for c in _CULTURES:
        if "father" in c.middle:
            third = list(c.men)
        elif "surname" in c.middle:
            third = list(c.surnames)  # the second surname
        else:
            third = sorted({m.split("/")[0] for m in c.middle if m})  # men's middle names, patronymics
        for _ in range(12):  # different people with the same given name
            g = rng.choice(c.men)
            s1, s2 = rng.sample(c.surnames, 2)
            out.append(negative(person(c, g, "", s1), person(c, g, "", s2), "shared-given-name"))
        for _ in range(10):  # different people with the same surname
            g1, g2 = rng.sample(c.men, 2)
            s = rng.choice(c.surnames)
            out.append(negative(person(c, g1, "", s), person(c, g2, "", s), "shared-surname"))
        for a, b in c.false_surnames:
            g = rng.choice(c.men)
            if rng.random() < 0.5:
                a, b = b, a
            out.append(negative(person(c, g, "", a), person(c, g, "", b), "false-friend-surname"))
        for a, b in c.false_given:
            s = rng.choice(c.surnames)
            out.append(negative(person(c, a, "", s), person(c, b, "", s), "false-friend-given-name"))
        for _ in range(8 if len(third) >= 2 else 0):  # all tokens but one shared
            g = rng.choice(c.men)
            s = rng.choice(c.surnames)
            m1, m2 = rng.sample(third, 2)
            if m1 in (g, s) or m2 in (g, s):
                continue
            out.append(negative(person(c, g, m1, s), person(c, g, m2, s), "one-token-apart"))
        # a shorter name of another person, where the dropped token tells families apart (a father's
        # name, a second surname); patronymics and middle names are dropped by the same person too often
        for _ in range(12 if c.name in ("arabic", "spanish", "portuguese") else 0):
            g = rng.choice(c.men)
            s = rng.choice(c.surnames)
            m = rng.choice(third)
            if m in (g, s):
                continue
            out.append(negative(person(c, g, "", m), person(c, g, m, s), "partial-name"))
    # "Mohammed Ali" and "Mohammed Ali Hassan": the brief's example, kept verbatim
    out.append(negative("Mohammed Ali", "Mohammed Ali Hassan", "partial-name"))
    return out


# --------------------------------------------------------------------------- assembly


def _dedupe(pairs: Iterable[Pair]) -> list[Pair]:
    """The first pair of each unordered name pair; pairs of identical names dropped."""
    kept: dict[frozenset[str], Pair] = {}
    for p in pairs:
        if p.name_a.casefold() == p.name_b.casefold():
            continue
        k = p.key()
        first = kept.get(k)
        if first is None:
            kept[k] = p
        elif first.label != p.label:
            raise LabelConflictError(first, p)
    return list(kept.values())


def generate(sources: Sources, seed: int = SEED) -> list[Pair]:
    """Every pair, in a fixed order, from the parsed sources and ``seed``."""
    check_tables()
    rng = random.Random(seed)
    pairs = _cascade_pairs(sources.cascade)
    pairs += _putin_pairs(sources.putin, rng)
    pairs += _un_pairs(sources.un, rng)
    translit, listed_names = _translit_pairs(rng)
    pairs += translit
    pairs += _perturbation_pairs(sources.un, listed_names, sources.cascade, rng)
    pairs += _synthetic_pairs(rng)
    return _dedupe(pairs)


def pairs_csv(pairs: Iterable[Pair]) -> str:
    """The pairs as the CSV text ``bench.screening`` reads."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    for p in pairs:
        w.writerow((p.name_a, p.name_b, p.label, p.kind, p.category, p.source))
    return buf.getvalue()


def summary(pairs: Sequence[Pair]) -> str:
    """Counts per source and category, by label, as a text table."""
    by: Counter[tuple[str, str, int]] = Counter((p.source, p.category, p.label) for p in pairs)
    lines = [f"{'source':20} {'category':46} {'label 1':>8} {'label 0':>8}"]
    for src, cat in sorted({(s, c) for s, c, _ in by}):
        lines.append(f"{src:20} {cat:46} {by[(src, cat, 1)]:8} {by[(src, cat, 0)]:8}")
    pos = sum(p.label for p in pairs)
    lines.append(f"{'total':67} {pos:8} {len(pairs) - pos:8}  ({len(pairs)} pairs, "
                 f"{(len(pairs) - pos) / max(1, len(pairs)):.1%} negative)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.screening_pairs",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--out", type=Path, default=DATA / "pairs.csv")
    ap.add_argument("--check", action="store_true", help="fail if --out differs from a fresh generation")
    args = ap.parse_args(argv)
    pairs = generate(load_sources(), args.seed)
    text = pairs_csv(pairs)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date: run python -m bench.screening_pairs", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date ({len(pairs)} pairs)")
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(summary(pairs))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
