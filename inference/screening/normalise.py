"""Names as comparable tokens: script, case, diacritics, punctuation, honorifics, legal forms.

``name_tokens("Mr. Aleksandr Petrovich KOVALËV")`` -> ``("aleksandr", "petrovich", "kovalev")``.
The same function reads a party's name in a payment and an entry's name in a list, so both sides
of a comparison went through identical steps:

1. Unicode NFKC (full-width and compatibility forms to their plain letters);
2. Cyrillic and Greek letters drawn like Latin ones, inside a word that also has Latin letters,
   read as those letters ("ВАNK" -> "BANK"); then transliteration to ASCII with ``anyascii``
   (Cyrillic, Greek, Arabic, Hebrew, CJK, ...; each CJK ideograph becomes its own syllable token,
   as pinyin is written apart in lists);
3. lower case; apostrophes and modifier letters dropped inside a word (``Naval'nyy``, ``O'Brien``),
   every other punctuation mark a word break;
4. digits written for letters inside a word read as those letters ("K0VA1EV"), four or more single
   letters in a row joined ("K.O.V.A.L.E.V"), a word break written as a capital letter split
   ("AleksandrKovalev"); honorifics and titles leading a name that has no legal form dropped
   (``mr``, ``dr``, ``sheikh``, ``general``, ...), legal forms of
   companies (``limited``, ``l.l.c.``, ``gmbh``, ``ooo``, ...) taken out of the name and returned
   apart as canonical forms, so "Acme Trading Limited" and "ACME TRADING LTD" have the same tokens
   and the same form.

``skeleton`` folds a token further for the comparisons that must survive transliteration: the
spellings that romanisation standards and common practice differ on (``x``/``ks``, ``y``/``j``/
``i``, ``kh``/``h``, ``ts``/``c``, ``dh``/``d``, ``th``/``t``, ``ph``/``f``, ``w``/``v``, ``q``/
``k``, ``g``/``h`` as Ukrainian writes ``Г``, doubled letters) and every vowel as one, so that
"Mohammed", "Muhammad" and "Mukhammad" share one skeleton. Skeletons find candidates and give a
second, discounted similarity; they never decide alone.

Pure functions of their input, the same bits on every machine: the decision record hashes what
they produce.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

from anyascii import anyascii

__all__ = [
    "HONORIFICS",
    "LEGAL_FORMS",
    "PARTICLES",
    "Name",
    "look_alikes_as_latin",
    "name_tokens",
    "normalise",
    "shape_reading",
    "skeleton",
]

HONORIFICS = frozenset({
    "mr", "mrs", "ms", "miss", "mister", "madam", "dr", "doctor", "prof", "professor", "sir", "dame",
    "lord", "lady", "rev", "reverend", "hon", "honourable", "honorable", "sheikh", "shaikh", "shaykh",
    "haji", "hajji", "alhaji", "mullah", "maulana", "imam", "gen", "general", "col", "colonel", "maj",
    "major", "capt", "captain", "lt", "lieutenant", "sgt", "cmdr", "admiral", "adm", "brig", "eng",
    "engineer", "herr", "frau", "monsieur", "mme", "mlle", "senor", "senora", "sra", "sr", "jr",
    "gospodin", "gospozha",
})

# variant spellings of a legal form (after steps 1-3) -> one canonical form
_FORMS: dict[tuple[str, ...], str] = {}
for _canon, _variants in {
    "ltd": ("ltd", "limited", "ltda", "limitada"),
    "llc": ("llc", "l l c"),
    "llp": ("llp", "l l p"),
    "lp": ("lp", "l p"),
    "inc": ("inc", "incorporated"),
    "corp": ("corp", "corporation"),
    "co": ("co", "company", "cie", "compagnie", "compania", "companhia"),
    "plc": ("plc", "p l c", "public limited company"),
    "gmbh": ("gmbh", "g m b h", "gesellschaft mit beschrankter haftung"),
    "ag": ("ag", "aktiengesellschaft"),
    "kg": ("kg", "kommanditgesellschaft"),
    "sa": ("sa", "s a", "societe anonyme", "sociedad anonima", "sociedade anonima"),
    "sarl": ("sarl", "s a r l", "societe a responsabilite limitee"),
    "srl": ("srl", "s r l", "societa a responsabilita limitata"),
    "spa": ("spa", "s p a", "societa per azioni"),
    "bv": ("bv", "b v", "besloten vennootschap"),
    "nv": ("nv", "n v", "naamloze vennootschap"),
    "ab": ("ab", "aktiebolag"),
    "as": ("as", "a s", "aksjeselskap"),
    "oy": ("oy", "osakeyhtio"),
    "pte": ("pte",),
    "pvt": ("pvt", "private"),
    "fze": ("fze", "free zone establishment"),
    "fzco": ("fzco", "fz co", "fzc"),
    "jsc": ("jsc", "joint stock company", "ao", "oao", "zao", "pao", "aktsionernoe obshchestvo",
            "aktsionernoye obshchestvo", "otkrytoe aktsionernoe obshchestvo",
            "zakrytoe aktsionernoe obshchestvo", "publichnoe aktsionernoe obshchestvo"),
    "ooo": ("ooo", "obshchestvo s ogranichennoi otvetstvennostiu",
            "obshchestvo s ogranichennoy otvetstvennostyu", "obshchestvo s ogranichennoj otvetstvennostju"),
    "tov": ("tov", "tovarystvo z obmezhenoiu vidpovidalnistiu"),
    "holding": ("holding", "holdings"),
    "group": ("group",),
}.items():
    for _v in _variants:
        _FORMS[tuple(_v.split())] = _canon
_FORM_LENGTHS = sorted({len(k) for k in _FORMS}, reverse=True)
LEGAL_FORMS = frozenset(_FORMS.values())

# short connecting words of names (Arabic, Romance, Germanic, Dutch): they carry little identity
PARTICLES = frozenset({
    "al", "el", "bin", "ben", "ibn", "bint", "abu", "abd", "ul", "ud", "de", "del", "della", "di", "da",
    "das", "dos", "do", "du", "la", "le", "van", "von", "der", "den", "ter", "y", "e", "and", "of", "the",
})

_APOSTROPHES = re.compile(r"['`\u2018\u2019\u02bc\u02bb\u02b9\u02bf\u02be]")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"([a-z])(?=[A-Z][a-z]{2})")  # a word break written as a capital letter
_LEET = str.maketrans("013457", "oleast")  # digits written for letters inside a word: "K0VA1EV"


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return (0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x20000 <= o <= 0x2A6DF
            or 0xF900 <= o <= 0xFAFF)  # CJK ideographs (Hangul words are written apart already)


# Cyrillic and Greek letters drawn like Latin ones (after Unicode's confusables): inside a word that
# also has Latin letters they are those Latin letters ("ВАNK" is BANK, not VANK); a word made of
# them alone has a second reading, by shape, that ``shape_reading`` gives.
_LOOK_ALIKES = str.maketrans(
    "АВЕКМНОРСТУХЅІЈԚԜаеорсухѕіјԛԝһӏΑΒΕΖΗΙΚΜΝΟΡΤΥΧοινρα",
    "ABEKMHOPCTYXSIJQWaeopcyxsijqwhlABEZHIKMNOPTYXoivpa")
_LOOKS_LATIN = frozenset("АВЕКМНОРСТУХЅІЈԚԜаеорсухѕіјԛԝһӏΑΒΕΖΗΙΚΜΝΟΡΤΥΧοινρα")
_WORD = re.compile(r"[^\W\d_]+")


def _mixed(word: re.Match[str]) -> str:
    w = word.group()
    if w.isascii() or not any(ch.isascii() for ch in w):
        return w
    return w.translate(_LOOK_ALIKES)


def look_alikes_as_latin(text: str) -> str:
    """Every Cyrillic or Greek letter drawn like a Latin one read as that letter (for identifiers,
    which are written in Latin letters: "АВ1234567" with Cyrillic А and В is AB1234567)."""
    return text.translate(_LOOK_ALIKES)


def shape_reading(text: str) -> str | None:
    """``text`` with every word written only in Cyrillic or Greek letters that look Latin read as
    those Latin letters ("НАМАЅ" -> "HAMAS"), or None when there is no such word: the reading an
    evader means a person to see, screened beside the reading by sound."""
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return None
    changed = False

    def shape(word: re.Match[str]) -> str:
        nonlocal changed
        w = word.group()
        if not w.isascii() and all(ch in _LOOKS_LATIN or ch.isascii() for ch in w):
            changed = True
            return w.translate(_LOOK_ALIKES)
        return w

    out = _WORD.sub(shape, text)
    return out if changed else None


def normalise(text: str) -> str:
    """Steps 1-3: ``text`` as lower-case ASCII words separated by single spaces."""
    text = unicodedata.normalize("NFKC", text)
    if not text.isascii():
        text = _WORD.sub(_mixed, text)
        text = "".join(f" {anyascii(ch)} " if _is_cjk(ch) else ch for ch in text) \
            if any(_is_cjk(ch) for ch in text) else text
        text = _APOSTROPHES.sub("", text)  # before anyascii, which writes some as apostrophes
        text = anyascii(text)
    text = _CAMEL.sub(r"\1 ", _APOSTROPHES.sub("", text)).lower()  # "AleksandrKovalev", "XiJinping"
    # a y gliding off a vowel is written i: Cyrillic й and Arabic ي are romanised either way
    # ("Шейх" -> "Sheykh" / "Sheikh", "Зейд" -> "Zeyd" / "Zeid"), so both spellings meet as one
    return " ".join(_Y_GLIDE.sub("i", _NON_ALNUM.sub(" ", text)).split())


@dataclass(frozen=True, slots=True)
class Name:
    """A name's tokens (honorifics and legal forms out) and the legal forms found in it."""

    tokens: tuple[str, ...]
    forms: tuple[str, ...]


@functools.lru_cache(maxsize=65_536)
def name_tokens(text: str) -> Name:
    """Steps 1-4: the tokens that identify the name, and its legal forms apart (cached: the same
    names recur in a bank's payments)."""
    words = _joined_letters([w.translate(_LEET) if not w.isdigit() and not w.isalpha() else w
                             for w in normalise(text).split()])
    tokens: list[str] = []
    forms: list[str] = []
    i = 0
    while i < len(words):
        for n in _FORM_LENGTHS:
            form = _FORMS.get(tuple(words[i:i + n])) if i + n <= len(words) else None
            # a form word is a form only after the name started ("AO Gazprom" and "Gazprom AO" both
            # have form jsc; "Co" alone is a name)
            if form is not None and (tokens or i + n < len(words)) and len(words) > n:
                forms.append(form)
                i += n
                break
        else:
            tokens.append(words[i])
            i += 1
    if not forms:  # a title leads a person's name; in a company's ("General Trading Co") it is a word
        while len(tokens) > 1 and tokens[0] in HONORIFICS:
            tokens.pop(0)
    return Name(tuple(tokens), tuple(forms))


def _joined_letters(words: list[str]) -> list[str]:
    """A run of four or more single letters is one word spelt out ("K.O.V.A.L.E.V"); up to three
    are initials ("J. Q. Smith")."""
    out: list[str] = []
    run: list[str] = []
    for w in [*words, ""]:
        if len(w) == 1 and w.isalpha():
            run.append(w)
            continue
        out.extend(["".join(run)] if len(run) >= 4 else run)
        run = []
        if w:
            out.append(w)
    return out


_FOLDS = (("tsch", "ch"), ("tch", "ch"), ("sch", "sh"), ("dzh", "j"), ("zh", "j"), ("kh", "h"),
          ("ph", "f"), ("dh", "d"), ("th", "t"), ("gh", "g"), ("ck", "k"), ("x", "ks"), ("ts", "c"),
          ("q", "k"), ("g", "h"), ("w", "v"), ("c", "k"))
_VOWELS = re.compile(r"[aeiouyj]")
_Y_GLIDE = re.compile(r"(?<=[aeiou])y(?![aeiou])")  # j and y stand for the vowel i in several romanisations


@functools.lru_cache(maxsize=262_144)
def skeleton(token: str) -> str:
    """``token`` with transliteration variants folded, every vowel written ``a`` and doubled
    letters made single: ``mohammed``, ``muhammad`` and ``mukhammad`` -> ``mahamad``."""
    s = token
    for a, b in _FOLDS:
        if a in s:
            s = s.replace(a, b)
    s = _VOWELS.sub("a", s)
    out = [s[0]]
    for ch in s[1:]:
        if ch != out[-1]:
            out.append(ch)
    return "".join(out)
