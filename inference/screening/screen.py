"""Screening a payment: every party, agent and line of free text against the lists indexed.

``screen(tx, index)`` returns a ``Screening``: the hits, each naming where in the payment it was
found (``originator``, ``beneficiary.address``, ``agent.intermediary``, ``remittance``, ...), the
list (by name and version), the entry, the listed name or identifier matched, the score (0-1000)
and its basis:

- ``identifier``: a party identifier equal to one the list gives the entry (passport, national
  id, LEI, ...): score 1000;
- ``bic``: a party's or agent's BIC (or a party identifier of scheme ``BIC``, as an ISO 20022
  organisation's ``AnyBIC``) of an institution listed with that BIC: score 1000;
- ``name``: a party's name resembling a listed name, adjusted by secondary evidence: a date of
  birth whose year the entry lists (+``DOB_AGREES``) or none of whose years it lists within one
  (-``DOB_DISAGREES``), a party country among the entry's (+``COUNTRY_AGREES``); an individual
  listed name against a party whose name carries a company form loses ``KIND_DISAGREES``;
- ``text``: a listed name found inside free text (``:70:``, ``:72:``, remittance
  information, address lines, an agent's name and address), scored on the words around it.

Only hits scoring at least ``floor`` are kept. What a hit leads to (REVIEW, HOLD, BLOCK) is the
rule pack's decision, not this module's.

Free text costs time with its length and with the listed words it holds: a remittance written
from a list's own words makes most of the list's names candidates, each scored over the text, and
one of many distinct words each alike many listed ones costs the index a lookup per word.
``screen(tx, index, budget=n)`` bounds that work per payment, deterministically: every identifier
and BIC is matched first, then every party's name, then the free text in a fixed order (each
party's address, the agents' names and addresses, remittance, sender-to-receiver). A free text
costs, each charge paid before the work it pays for: ``len(text) // CHARS_PER_UNIT`` units for
each reading of it (as written, and as its look-alike letters look), ``WORD_UNITS`` per distinct
word, and ``1 + words // WORDS_PER_UNIT`` per candidate name. When a charge would take the payment
past ``n``, screening stops there: the ``Screening`` names where (``stopped``) and keeps the hits
found until then, and no free text after it is screened. The same payment, lists and budget stop
at the same place on every machine; a screening that did not stop found exactly what an unbounded
one finds (the budget chooses where to stop, never what a candidate scores). A party's name of up
to ``MAX_NAME_TOKENS`` words is not charged and is screened whatever the budget: the index bounds
its cost (a longer one is screened, and charged, as free text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from inference.messages.transaction import Party, Transaction
from inference.screening.index import ListIndex, NameHit
from inference.screening.match import (
    JOINED_FLOOR,
    joined_counts,
    joined_may_pass,
    name_score,
    score_bound,
    token_keys,
    token_similarity,
)
from inference.screening.normalise import name_tokens, shape_reading

__all__ = ["CHARS_PER_UNIT", "COUNTRY_AGREES", "DEFAULT_BUDGET", "DEFAULT_FLOOR", "DOB_AGREES",
           "DOB_DISAGREES", "KIND_DISAGREES", "MAX_NAME_TOKENS", "WORDS_PER_UNIT", "WORD_UNITS", "Budget",
           "Hit", "Screening", "screen", "screen_name", "screen_text", "units_needed"]

DEFAULT_FLOOR = 800
MAX_NAME_TOKENS = 24  # more words than a name has: screened as free text
DOB_AGREES = 30
DOB_DISAGREES = 80
COUNTRY_AGREES = 20
KIND_DISAGREES = 60
# The screening budget the decision pipeline gives a payment, in units of ``Budget``. Against a
# 30,000-entry list, payments of the training simulator and of ``bench.screening`` need at most a
# few hundred units (most need none: a unit is a candidate, and an address like "9 Station Road
# Lisbon" yields some 500 of them); a remittance made of listed words reaches 16,384 in about a
# tenth of a second of CPU (docs/screening.md "Budget").
DEFAULT_BUDGET = 16384
CHARS_PER_UNIT = 8  # a free text (each reading of it) costs a unit per this many characters, first
WORD_UNITS = 32  # then each of its distinct words costs this many units (its reach in the index)
WORDS_PER_UNIT = 16  # then each candidate costs one unit, and one more per this many words of the text


@dataclass(frozen=True)
class Hit:
    """One listed entry found in one place of a payment."""

    where: str
    text: str  # what the payment said there
    list_name: str
    list_sha256: str
    entry_id: str
    matched: str  # the listed name, identifier or BIC matched
    score: int
    basis: str  # identifier | bic | name | text

    def to_json(self) -> dict[str, Any]:
        return {"where": self.where, "text": self.text, "list": self.list_name,
                "list_sha256": self.list_sha256, "entry_id": self.entry_id, "matched": self.matched,
                "score": self.score, "basis": self.basis}


@dataclass(frozen=True)
class Screening:
    """A payment's screening: the hits, best first, and the lists it was screened against. With
    ``stopped`` (where in the payment), screening stopped there at its ``budget``: the hits are
    those found before, and the payment was not screened in full."""

    hits: tuple[Hit, ...]
    lists: tuple[tuple[str, str], ...]  # (name, sha256) of every list indexed
    stopped: str | None = None
    budget: int | None = None  # the budget it was screened under (None: unbounded)

    @property
    def best(self) -> int:
        return max((h.score for h in self.hits), default=0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"lists": [{"name": n, "sha256": s} for n, s in self.lists],
                               "hits": [h.to_json() for h in self.hits]}
        if self.stopped is not None:
            out["stopped"] = self.stopped
            out["budget"] = self.budget
        return out


class Budget:
    """Units of screening work left for one payment (see the module), and where it ran out."""

    __slots__ = ("left", "stopped", "total")

    def __init__(self, units: int) -> None:
        if type(units) is not int or units < 1:
            raise ValueError(f"a screening budget is a positive number of units, got {units!r}")
        self.total = units
        self.left = units
        self.stopped: str | None = None

    def spend(self, units: int, where: str) -> bool:
        """Take ``units`` if that many are left (True); else stop at ``where`` (False), for good."""
        if self.stopped is None and units <= self.left:
            self.left -= units
            return True
        if self.stopped is None:
            self.stopped = where
        return False


def _dob_years(party: Party) -> set[int]:
    years = set()
    for ident in party.identifiers:
        if ident.scheme == "DOB" and len(ident.value) >= 4 and ident.value[:4].isdigit():
            years.add(int(ident.value[:4]))
    return years


def _adjust(hit: NameHit, party: Party | None, is_company: bool) -> int:
    score, entry = hit.score, hit.entry
    if party is not None:
        years = _dob_years(party)
        if years and entry.dob_years:
            if years & entry.dob_years:
                score += DOB_AGREES
            elif not any(abs(y - z) <= 1 for y in years for z in entry.dob_years):
                score -= DOB_DISAGREES
        if party.country and party.country in entry.countries:
            score += COUNTRY_AGREES
    if is_company and entry.kind == "individual":
        score -= KIND_DISAGREES
    return max(0, min(1000, score))


def _best(hits: list[Hit]) -> list[Hit]:
    """One hit per listed entry (its best), in the order first found."""
    best: dict[tuple[str, str], Hit] = {}
    for h in hits:
        key = (h.list_sha256, h.entry_id)
        if key not in best or h.score > best[key].score:
            best[key] = h
    return list(best.values())


def screen_name(index: ListIndex, where: str, text: str, party: Party | None = None,
                floor: int = DEFAULT_FLOOR, budget: Budget | None = None) -> list[Hit]:
    """Hits for one name, read as written and, where it has words in look-alike Cyrillic or Greek
    letters, as those words look ("НАМАЅ" is screened as HAMAS too). ``budget``: see the module (a
    name screened as free text is charged as free text; any other costs nothing)."""
    shaped = shape_reading(text)
    hits = _screen_name(index, where, text, party, floor, budget)
    if shaped is not None and not (len(name_tokens(text).tokens) > MAX_NAME_TOKENS
                                   and len(name_tokens(shaped).tokens) > MAX_NAME_TOKENS):
        # (a name screened as free text had its look-alike reading screened with it: not twice)
        hits += [Hit(where, text, h.list_name, h.list_sha256, h.entry_id, h.matched, h.score, h.basis)
                 for h in _screen_name(index, where, shaped, party, floor, budget)]
    return _best(hits)


def _screen_name(index: ListIndex, where: str, text: str, party: Party | None = None,
                 floor: int = DEFAULT_FLOOR, budget: Budget | None = None) -> list[Hit]:
    """Hits for one name (a party's, or any name a caller has). A "name" of more than
    ``MAX_NAME_TOKENS`` words is screened as free text, so that padding a listed name with other
    words cannot bury it (nor make the comparison slow)."""
    name = name_tokens(text)
    if len(name.tokens) > MAX_NAME_TOKENS:
        return [Hit(where, text, h.list_name, h.list_sha256, h.entry_id, h.matched, h.score, "name")
                for h in screen_text(index, where, text, floor, budget)]
    is_company = bool(name.forms)
    out = []
    # the most secondary evidence can add for this party: only names within it of the floor count
    margin = 0 if party is None else (DOB_AGREES if _dob_years(party) else 0) + (
        COUNTRY_AGREES if party.country else 0)
    for h in index.match_name(text, floor - margin, name.tokens):
        score = _adjust(h, party, is_company)
        if score >= floor:
            lst = index.lists[h.list_pos]
            out.append(Hit(where, text, lst.name, lst.sha256, h.entry.entry_id, h.entry.names[h.name_index],
                           score, "name"))
    return out


def screen_text(index: ListIndex, where: str, text: str, floor: int = DEFAULT_FLOOR,
                budget: Budget | None = None) -> list[Hit]:
    """Listed names inside free text: each candidate scored on the windows of words as long as its
    name (and one longer) around the words alike one of its own, the best kept; the text read as
    written and, where it has words in look-alike Cyrillic or Greek letters, as they look.
    ``budget``: the text's characters, its distinct words and each candidate are paid for before the
    work they stand for (see the module); when the budget runs out, the hits found until then."""
    if budget is not None and not budget.spend(len(text) // CHARS_PER_UNIT, where):
        return []  # (before any work that grows with the text)
    shaped = shape_reading(text)
    hits = _screen_text(index, where, text, floor, budget)
    if shaped is not None and (budget is None or budget.spend(len(shaped) // CHARS_PER_UNIT, where)):
        hits += [Hit(where, text, h.list_name, h.list_sha256, h.entry_id, h.matched, h.score, h.basis)
                 for h in _screen_text(index, where, shaped, floor, budget)]
    return _best(hits)


# From this many words on, a text's windows are chosen by the bound (``_TextWindows``), from the first:
# with a candidate's windows found from where its words stand, the bound costs less than scoring
# every window even for an address line (the same hits either way; 1 << 62 scores every window).
BOUNDED_FROM = 1
_FEW_WORDS = 256  # distinct words: up to this many, each is tried against a listed token
# A listed name's tokens times the text's words: past this, the arrays (some 21 bytes a cell) would
# hold hundreds of MB for one candidate (lists may name someone in thousands of words); such a name is
# scored on every window instead.
_MAX_CELLS = 1 << 22
# Window starts to check one by one: up to this many (the words alike a candidate's tokens, times the
# windows each lies in), a candidate's windows are found from where those words stand, without the
# arrays, whose dozen numpy calls cost some 150 microseconds a candidate whatever the text holds.
_SPARSE_STARTS = 256


def _screen_text(index: ListIndex, where: str, text: str, floor: int = DEFAULT_FLOOR,
                 budget: Budget | None = None) -> list[Hit]:
    """Each candidate's windows are the runs of words as long as its name, and one longer, that hold
    a word alike one of its tokens (a run cut by the end of the text counts from its start only);
    the best window's score counts."""
    toks = name_tokens(text).tokens
    if not toks:
        return []
    if budget is not None and not budget.spend(len(set(toks)) * WORD_UNITS, where):
        return []  # (before each distinct word's reach in the index is found)
    best: dict[tuple[int, str], Hit] = {}
    bounded = len(toks) >= BOUNDED_FROM
    windows: _TextWindows | None = None  # made for the first candidate: most texts have none
    cost = 1 + len(toks) // WORDS_PER_UNIT
    candidates, charged = index.charged_candidates(toks, floor)
    scored = set(candidates) if len(charged) > len(candidates) else None
    for i in charged if budget is not None else candidates:
        if budget is not None and not budget.spend(cost, where):
            break
        if scored is not None and i not in scored:
            continue  # charged as a budget counts it, but it cannot reach the floor
        pos, entry, k, listed = index.names[i]
        if not bounded or len(listed) * len(toks) > _MAX_CELLS:
            score = _every_window(toks, listed, index.weight)
        else:
            if windows is None:
                windows = _TextWindows(toks)
            score = windows.best(listed, index.weight, floor)
        if entry.weak_aliases and k in entry.weak_aliases:
            score = score * 9 // 10  # a weak alias, as a party's name is scored
        if score < floor:
            continue
        lst = index.lists[pos]
        key = (pos, entry.entry_id)
        if key not in best or score > best[key].score:
            best[key] = Hit(where, text, lst.name, lst.sha256, entry.entry_id, entry.names[k], score, "text")
    return list(best.values())


def _every_window(toks: Sequence[str], listed: Sequence[str], weight: Callable[[str], int]) -> int:
    """The best score of the listed name over the text's windows, every one scored."""
    near = [p for p, t in enumerate(toks) if any(token_similarity(t, x) > 0.0 for x in listed)]
    score = 0
    for size in (len(listed), len(listed) + 1):
        starts = {s for p in near for s in range(p - size + 1, p + 1)
                  if s >= 0 and (s + size <= len(toks) or s == 0)}
        for start in sorted(starts):
            score = max(score, name_score(toks[start:start + size], listed, weight))
    return score


class _TextWindows:
    """A free text's windows, of which only those that could reach the floor are scored: a window is
    left out when the listed tokens its words are alike weigh too little for ``score_bound`` to reach
    the floor and the names are not alike written together (``joined_may_count``, then
    ``joined_counts``). Such a window changes nothing (the best window counts, and only at the floor
    or above), so the best of the others is the best of all wherever either reaches the floor, and
    a text of thousands of listed words costs a few array operations per candidate instead of a
    score per window. Where the words alike a candidate's tokens are few, its windows are found from
    where they stand instead (``_sparse``): the same windows, without the arrays' fixed cost. Which
    words are alike a listed token is found once per token; the bound only chooses what is scored
    (with a point of margin), every score is ``name_score``'s."""

    def __init__(self, toks: Sequence[str]) -> None:
        self.toks = toks
        self.at: dict[str, list[int]] = {}  # each distinct word -> where it stands in the text
        for p, t in enumerate(toks):
            self.at.setdefault(t, []).append(p)
        # A word is alike a listed token only if they share a key of ``token_keys`` (a word is one
        # of its own keys), or one of them is a single letter the other begins with: the words to
        # try for a listed token are found by its keys, its first letter, or as single letters.
        self.by_key: dict[str, list[str]] = {}
        self.by_letter: dict[str, list[str]] = {}
        self.letters_alone: list[str] = []
        for t in self.at:
            for key in token_keys(t):
                self.by_key.setdefault(key, []).append(t)
            self.by_letter.setdefault(t[0], []).append(t)
            if len(t) == 1:
                self.letters_alone.append(t)
        self.where: dict[str, list[int]] = {}  # listed token -> where the words alike it stand
        n = len(toks)
        self.letters = np.zeros(n + 1, dtype=np.int64)  # [p]: letters of the words before position p
        np.cumsum([len(t) for t in toks], out=self.letters[1:])
        self.letter_list: list[int] = self.letters.tolist()  # the same, read one at a time
        self.joined = "".join(toks)  # the words written together: a window's are a slice of it

    def best(self, listed: Sequence[str], weight: Callable[[str], int], floor: int) -> int:
        """``_every_window``'s score where it reaches ``floor``; under the floor otherwise."""
        where = self._where(listed)
        found = sum(map(len, where))
        if not found:  # no window holds a word alike one of the name's: none is scored
            return 0
        if found * (2 * len(listed) + 1) <= _SPARSE_STARTS:
            return self._sparse(listed, where, weight, floor)
        return self._dense(listed, where, weight, floor)

    def _where(self, listed: Sequence[str]) -> list[list[int]]:
        """For each listed token, where the words alike it stand in the text (ascending)."""
        at, known = self.at, self.where
        where: list[list[int]] = []
        few = len(at) <= _FEW_WORDS
        for x in listed:
            ps = known.get(x)
            if ps is not None:  # a token of an earlier candidate too
                where.append(ps)
                continue
            tried: Iterable[str]
            if few:  # trying every word costs less than gathering them by key
                tried = at
            else:
                tried = {t for key in token_keys(x) for t in self.by_key.get(key, ())}
                if len(x) == 1:
                    tried.update(self.by_letter.get(x, ()))
                else:
                    tried.update(t for t in self.letters_alone if x.startswith(t))
            ps = []
            for t in tried:
                if token_similarity(t, x) > 0.0:
                    ps += at[t]
            ps.sort()
            where.append(ps)
            known[x] = ps
        return where

    def _sparse(self, listed: Sequence[str], where: list[list[int]], weight: Callable[[str], int],
                floor: int) -> int:
        """``_dense``, from where the words alike a listed token stand instead of arrays over the
        text. Those words fall into runs, each word less than a window's length after the one before
        it; a window holds words of one run only, and every window over a run holds one of its words.
        Over a run of words alike one listed token, every window weighs that token: they are scored
        all or none (or, one word longer, only written together) without counting each."""
        toks, letters = self.toks, self.letter_list
        n, size_l = len(toks), len(listed)
        weights = [float(weight(x)) for x in listed]
        total = sum(weights)
        listed_letters = sum(map(len, listed))
        loose = 2.02 - 2 * JOINED_FLOOR
        words = sorted((p, j) for j, ps in enumerate(where) for p in ps)
        spans: list[tuple[int, int]] = []
        score = 0
        for size in (size_l, size_l + 1):
            if size > n:  # the one window cut by the end of the text: it holds every word
                runs = [(0, 0, words)]
            else:
                runs = []
                first = 0
                for i in range(1, len(words) + 1):
                    if i == len(words) or words[i][0] - words[i - 1][0] >= size:
                        run = words[first:i]
                        runs.append((max(0, run[0][0] - size + 1), min(run[-1][0], n - size), run))
                        first = i
            for lo, hi, run in runs:
                one = run[0][1]
                if all(j == one for _, j in run):  # every window over the run weighs ``one`` alone
                    reach_all = score_bound(weights[one], total) + 1 >= floor
                    if not reach_all and size == size_l and size <= n:
                        continue  # none can count: names written together are of another length
                else:
                    reach_all = None
                for start in range(lo, hi + 1):
                    end = start + size if size <= n else n
                    if reach_all is None:
                        found = sum(weights[j] for j in {j for p, j in run if start <= p < end})
                        reach = score_bound(found, total) + 1 >= floor
                    else:
                        reach = reach_all
                    if reach:
                        score = max(score, name_score(toks[start:end], listed, weight))
                        continue
                    if end - start == size_l:
                        continue  # names written together are compared only at another length
                    letters_in = letters[end] - letters[start]
                    if abs(letters_in - listed_letters) <= loose * max(letters_in, listed_letters):
                        spans.append((start, end))  # only written together can it count
        if spans:
            text = self.joined
            for i in joined_may_pass([text[letters[s]:letters[e]] for s, e in spans], "".join(listed)):
                window = toks[spans[i][0]:spans[i][1]]
                if joined_counts(window, listed):  # else under the floor whatever its words
                    score = max(score, name_score(window, listed, weight))
        return score

    def _dense(self, listed: Sequence[str], where: list[list[int]], weight: Callable[[str], int],
               floor: int) -> int:
        """The windows that could reach ``floor`` found with arrays over the whole text, then scored."""
        toks, letters = self.toks, self.letters
        n = len(toks)
        present = np.zeros((len(listed), n + 1), dtype=np.int32)  # [j, p + 1]: word p alike token j
        for j, ps in enumerate(where):
            if ps:
                present[j, [p + 1 for p in ps]] = 1
        counts = np.cumsum(present, axis=1)  # [j, p]: words alike token j before position p
        weights = np.array([weight(x) for x in listed], dtype=np.float64)
        total = float(weights.sum())
        listed_letters = sum(map(len, listed))
        score = 0
        for size in (len(listed), len(listed) + 1):
            if size <= n:
                held = counts[:, size:] - counts[:, :n - size + 1] > 0  # [j, start]
                ends = np.arange(size, n + 1)
            else:  # the one window cut by the end of the text
                held = counts[:, n:] > 0
                ends = np.array([n])
            found = weights @ held
            starts = np.arange(len(ends))
            letters_in = letters[ends] - letters[starts]
            longer = np.maximum(letters_in, listed_letters)
            # score_bound of every window, and joined_may_count over every window (a hair looser here)
            reach = score_bound(found, total) + 1 >= floor
            apart = np.abs(letters_in - listed_letters) <= (2.02 - 2 * JOINED_FLOOR) * longer
            maybe = reach | ((ends - starts != len(listed)) & apart)
            picked = held.any(axis=0) & maybe
            for start in np.flatnonzero(picked & reach).tolist():
                score = max(score, name_score(toks[start:int(ends[start])], listed, weight))
            rest = np.flatnonzero(picked & ~reach)  # only written together can they count
            if rest.size:
                text, rest_ends = self.joined, ends[rest]
                spans = zip(letters[rest].tolist(), letters[rest_ends].tolist(), strict=True)
                passing = joined_may_pass([text[a:b] for a, b in spans], "".join(listed))
                for start, end in zip(rest[passing].tolist(), rest_ends[passing].tolist(), strict=True):
                    window = toks[start:end]
                    if joined_counts(window, listed):  # else under the floor whatever its words
                        score = max(score, name_score(window, listed, weight))
        return score


def _parties(tx: Transaction) -> Iterator[tuple[str, Party]]:
    yield "originator", tx.originator
    yield "beneficiary", tx.beneficiary
    for role, p in (("ultimate_originator", tx.ultimate_originator),
                    ("ultimate_beneficiary", tx.ultimate_beneficiary),
                    ("initiating_party", tx.initiating_party)):
        if p is not None:
            yield role, p


def screen(tx: Transaction, index: ListIndex, floor: int = DEFAULT_FLOOR,
           budget: int | None = None) -> Screening:
    """Every party, agent and free text of ``tx`` against ``index`` (see the module's text); with
    ``budget`` (units), names and free text until it runs out."""
    return _screen(tx, index, floor, None if budget is None else Budget(budget))


def units_needed(tx: Transaction, index: ListIndex, floor: int = DEFAULT_FLOOR) -> int:
    """The units screening ``tx`` in full costs: every budget of at least this (and at least 1)
    screens it in full, every smaller one stops (what a charge costs never depends on the budget).
    For sizing ``screening_budget`` against the lists a bank loads."""
    spent = Budget(1 << 62)
    _screen(tx, index, floor, spent)
    return spent.total - spent.left


def _screen(tx: Transaction, index: ListIndex, floor: int, spent: Budget | None) -> Screening:
    """``screen`` under ``spent`` (None: unbounded)."""
    hits: list[Hit] = []
    for where, party in _parties(tx):
        for ident in party.identifiers:
            if ident.scheme in ("DOB", "POB"):
                continue
            if ident.scheme == "BIC" and ident.value.upper()[:8] != (party.bic or "").upper()[:8]:
                # an organisation's AnyBIC (ISO 20022), or a BIC given as an identifier: a BIC
                for ih in index.match_bic(ident.value):
                    lst = index.lists[ih.list_pos]
                    hits.append(Hit(f"{where}.bic", ident.value, lst.name, lst.sha256, ih.entry.entry_id,
                                    ih.value, 1000, "bic"))
            for ih in index.match_identifier(ident.value):
                lst = index.lists[ih.list_pos]
                hits.append(Hit(f"{where}.identifier", ident.value, lst.name, lst.sha256, ih.entry.entry_id,
                                ih.value, 1000, "identifier"))
        if party.bic:
            for ih in index.match_bic(party.bic):
                lst = index.lists[ih.list_pos]
                hits.append(Hit(f"{where}.bic", party.bic, lst.name, lst.sha256, ih.entry.entry_id, ih.value,
                                1000, "bic"))
    for agent in tx.agents:
        if agent.bic:
            for ih in index.match_bic(agent.bic):
                lst = index.lists[ih.list_pos]
                hits.append(Hit(f"agent.{agent.role}.bic", agent.bic, lst.name, lst.sha256, ih.entry.entry_id,
                                ih.value, 1000, "bic"))
    # then every party's name (free: the index bounds a name's cost, unless it is long enough to be
    # screened as free text), then the free text in this order until the budget (if any) runs out,
    # and none after it; every exact match above is found whatever it does (the hits are sorted
    # below: the order they are found in changes nothing)
    for where, party in _parties(tx):
        if party.name:
            hits.extend(screen_name(index, where, party.name, party, floor, spent))
    for where, party in _parties(tx):
        if party.address_lines and (spent is None or spent.stopped is None):
            hits.extend(screen_text(index, f"{where}.address", " ".join(party.address_lines), floor, spent))
    for agent in tx.agents:
        if agent.name_address and (spent is None or spent.stopped is None):
            hits.extend(screen_text(index, f"agent.{agent.role}", " ".join(agent.name_address), floor, spent))
    for where, text in (("remittance", tx.remittance), ("sender_to_receiver", tx.sender_to_receiver)):
        if text and (spent is None or spent.stopped is None):
            hits.extend(screen_text(index, where, text, floor, spent))
    hits.sort(key=lambda h: (-h.score, h.where, h.list_name, h.entry_id))
    lists = tuple((lst.name, lst.sha256) for lst in index.lists)
    if spent is not None and spent.stopped is not None:
        return Screening(tuple(hits), lists, spent.stopped, spent.total)
    return Screening(tuple(hits), lists)
