"""The lists a decision screens against, indexed so that a name meets a few entries, not all.

``ListIndex(lists)`` reads every name and alias of every entry once. A name is filed under its
``PREFIX_TOKENS`` rarest tokens (prefix filtering, as set-similarity joins do): a listed name whose
rarest tokens are all missing from a query cannot reach an alerting score, since those tokens
carry at least 2/k of its weight. Each filed token has three keys: the token, its skeleton (which
absorbs transliteration and vowel spelling), and the skeleton with any one letter left out (a
typo: a letter dropped, added, changed or two swapped). A whole multi-token name is also filed by
the skeleton of its tokens written together ("Jinping" / "Jin Ping", "Abdulrahman" / "Abd al
Rahman"). A query looks up the same keys of every one of its tokens: what comes back is scored with
``match.name_score``.

Identifiers and BICs are exact keys (identifiers compared without spaces, dashes and case; a BIC
by its first 8 characters, the institution and its location).

Token weights come from the indexed lists alone: ``max(1, bit_length(N // df))`` for a token that
``df`` of the ``N`` names contain (integers, the same on every machine), particles 1, and a token no
list contains the weight of the rarest.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from anyascii import anyascii

from inference.screening.entries import ListEntry, SanctionsList
from inference.screening.errors import ScreeningError
from inference.screening.match import (
    INITIAL_SIMILARITY,
    LISTED_SHARE,
    joined_may_pass_any,
    token_keys,
    token_similarity,
    weighted_score,
)
from inference.screening.normalise import PARTICLES, look_alikes_as_latin, name_tokens, skeleton

__all__ = ["PREFIX_TOKENS", "IdentifierHit", "ListIndex", "NameHit", "identifier_key", "screenable"]

PREFIX_TOKENS = 3
_SLOTS = 64  # token positions per name filed (a longer name's tokens from the 64th on
# count as outside its prefix)
_WHOLE_SLOT = _SLOTS - 1  # positions from here on are not filed
# Query words whose listed tokens alike them an index remembers (a party's words recur: its own
# customers, common names): tens of bytes for most words (alike no listed token), a few kB for a
# word alike many; then it forgets them all and starts again.
_REACH_CACHE = 1 << 15
# query initials up to this many have the prefix tokens they may partner bounded by their number (the
# heaviest that many of a name's); with more, every prefix token no key found counts
_INITIALS_BOUNDED = 3
# names times runs of a text compared written together, in C, before the names the bound left out are
# scored instead (``ListIndex._joined_may_count``)
_JOINED_CELLS = 1 << 16

_ID_CLEAN = re.compile(r"[^0-9A-Z]")


def screenable(entry: ListEntry) -> bool:
    """Whether at least one of the entry's names keeps a word once normalised ("***" does not)."""
    return any(name_tokens(text).tokens for text in entry.names)


def identifier_key(value: str) -> str:
    """An identifier as compared: NFKC, in ASCII (other digits as ASCII digits), upper case,
    letters and digits only ("AB 123-456" -> "AB123456", "１０２７" -> "1027")."""
    return _ID_CLEAN.sub("", anyascii(look_alikes_as_latin(unicodedata.normalize("NFKC", value))).upper())


@dataclass(frozen=True)
class NameHit:
    """A listed name that a query resembles: which list (by position and version), which entry,
    which of its names, and the score (0-1000)."""

    list_pos: int
    entry: ListEntry
    name_index: int
    score: int


@dataclass(frozen=True)
class IdentifierHit:
    """A query identifier or BIC equal to one the list gives an entry."""

    list_pos: int
    entry: ListEntry
    kind: str  # "bic" or the list's identifier kind
    value: str  # as the list published it


class ListIndex:
    """Every name, identifier and BIC of ``lists``, ready for screening (read-only once built)."""

    def __init__(self, lists: Sequence[SanctionsList]) -> None:
        self.lists = tuple(lists)
        names: list[tuple[int, ListEntry, int, tuple[str, ...]]] = []
        self._ids: dict[str, list[IdentifierHit]] = {}
        self._bics: dict[str, list[IdentifierHit]] = {}
        for pos, lst in enumerate(self.lists):
            for entry in lst.entries:
                seen: set[tuple[str, ...]] = set()
                for k, text in enumerate(entry.names):
                    toks = name_tokens(text).tokens
                    if toks and toks not in seen:
                        seen.add(toks)
                        names.append((pos, entry, k, toks))
                if not seen:
                    raise ScreeningError(f"list {lst.name!r}, entry {entry.entry_id!r}: none of its names "
                                         f"({', '.join(map(repr, entry.names))}) has a word that can be "
                                         "screened")
                for ident in entry.identifiers:
                    key = identifier_key(ident.value)
                    if len(key) >= 4:  # shorter ones identify nothing
                        hit = IdentifierHit(pos, entry, ident.kind, ident.value)
                        self._ids.setdefault(key, []).append(hit)
                for bic in entry.bics:
                    self._bics.setdefault(bic.upper()[:8], []).append(IdentifierHit(pos, entry, "bic", bic))
        self._names = names
        df: Counter[str] = Counter()
        for *_, toks in names:
            df.update(set(toks))
        n = max(1, len(names))
        self._rarest = max(1, n.bit_length())
        self._weights = {t: 1 if t in PARTICLES else max(1, (n // c).bit_length()) for t, c in df.items()}
        # Two levels: a key -> the distinct listed tokens filed under it; a token -> its postings (the
        # names it is a prefix token of, once per place in the name, and its weight there). A query's
        # tokens meet a few dozen listed tokens by key; only those alike enough reach their postings.
        tokens_of: dict[str, set[int]] = {}
        vocab: dict[str, int] = {}
        token_postings: list[list[int]] = []
        posting_weights: list[list[int]] = []
        wholes: dict[str, list[int]] = {}
        # per name, for the bound in ``candidates``: the name's whole weight, and the part outside its
        # prefix (tokens no key is filed for)
        totals, outsides, heaviest, sizes = [], [], [], []
        firsts: set[str] = set()  # the letters (or digits) filed prefix tokens begin with
        self._name_weights: list[tuple[int, ...]] = []
        for i, (*_, toks) in enumerate(names):
            informative = [t for t in toks if t not in PARTICLES] or list(toks)
            prefix = set(sorted(set(informative), key=lambda t: (df[t], t))[:PREFIX_TOKENS])
            weights = [self.weight(t) for t in toks]
            self._name_weights.append(tuple(weights))
            totals.append(sum(weights))
            # outside: never looked up, so counted as found; a listed initial too ("J. Smith": any
            # query word it begins may partner it, with no key in common)
            outsides.append(sum(w for p, (t, w) in enumerate(zip(toks, weights, strict=True))
                                if t not in prefix or p >= _WHOLE_SLOT or len(t) == 1))
            # the rest, the filed tokens of more than one letter: what a query initial may partner with
            # no key in common; the weight of its heaviest 1, 2 and 3 (a query initial partners one)
            filed = sorted((w for p, (t, w) in enumerate(zip(toks, weights, strict=True))
                            if t in prefix and p < _WHOLE_SLOT and len(t) > 1), reverse=True)
            firsts.update(t[0] for p, t in enumerate(toks[:_WHOLE_SLOT]) if t in prefix and len(t) > 1)
            heaviest.append([sum(filed[:k]) for k in range(1, _INITIALS_BOUNDED + 1)])
            sizes.append(len(toks))
            for p, t in enumerate(toks[:_WHOLE_SLOT]):
                if t in prefix:
                    tid = vocab.get(t)
                    if tid is None:
                        tid = vocab[t] = len(token_postings)
                        token_postings.append([])
                        posting_weights.append([])
                        for key in token_keys(t):
                            tokens_of.setdefault(key, set()).add(tid)
                    token_postings[tid].append(i)
                    posting_weights[tid].append(weights[p])
            if len(toks) > 1:
                wholes.setdefault(skeleton("".join(toks)), []).append(i)
        # emptied as it is copied: freed all at once, hundreds of thousands of sets hold the GIL for tens
        # of milliseconds, and a process reloading a list while it decides would stall its batches
        self._tokens_of: dict[str, tuple[int, ...]] = {}
        while tokens_of:
            key, tids = tokens_of.popitem()
            self._tokens_of[key] = tuple(sorted(tids))
        self._vocab = sorted(vocab, key=vocab.__getitem__)
        self._token_postings = [np.array(v, dtype=np.int64) for v in token_postings]
        self._reach: dict[str, tuple[tuple[int, float], ...]] = {}  # query word -> listed tokens alike it
        self._posting_weights = [np.array(v, dtype=np.float64) for v in posting_weights]
        self._wholes = {k: tuple(v) for k, v in wholes.items()}
        self._total = np.array(totals, dtype=np.float64)
        self._outside = np.array(outsides, dtype=np.float64)
        self._heaviest = np.array(heaviest, dtype=np.float64).reshape(len(names), _INITIALS_BOUNDED)
        self._firsts = frozenset(firsts)
        self._sizes = sizes  # tokens a name has

    @property
    def names(self) -> Sequence[tuple[int, ListEntry, int, tuple[str, ...]]]:
        """Every indexed name: (list position, entry, name index in the entry, tokens)."""
        return self._names

    def __len__(self) -> int:
        """How many distinct names (primary and aliases) are indexed."""
        return len(self._names)

    def weight(self, token: str) -> int:
        """What a token tells about identity (see the module's text)."""
        w = self._weights.get(token)
        if w is not None:
            return w
        return 1 if token in PARTICLES else self._rarest

    def candidates(self, tokens: Sequence[str], floor: int = 0) -> list[int]:
        """The names that share a key with ``tokens`` and could still score ``floor`` (indexes into
        the index's name table, ascending).

        The bound: each prefix token of a listed name counts as found as alike as the query token
        most like it (``match.token_similarity``, which is 0 for tokens that share no key), each
        token outside its prefix as found whole (never looked up), and the prefix tokens no key
        found as not found, but for what the query's initials may partner: an initial partners one
        listed word, which it begins, at ``INITIAL_SIMILARITY``, so for ``k`` initials that begin
        some filed token the name's heaviest ``k`` prefix tokens count as found so (a digit, as in
        the house number of "9 Station Road", begins none); the query's own coverage as complete;
        a name written together the same way as the query is always scored. A name whose bound is
        under ``floor`` cannot reach it and is not scored.

        The names scored are always among those of the looser bound ``charged_candidates`` states,
        and every one of those that reaches ``floor`` is scored, so the hits are those that bound
        gave (decision records are screened again by their verifier): where a query initial may
        partner a word a key found, that word counts at ``INITIAL_SIMILARITY`` at least; the bound is
        rounded as scores are; and a name of the looser bound that the query written together may
        match closely enough to count (``match.joined_counts``) is scored whatever its tokens."""
        return self._candidates(tokens, floor, False)[0]

    def charged_candidates(self, tokens: Sequence[str], floor: int) -> tuple[list[int], list[int]]:
        """``(candidates, charged)``: ``candidates(tokens, floor)``, and the names a free text's
        screening budget charges a unit cost for, in order: those of the bound that counted every
        prefix token no key found as found at ``INITIAL_SIMILARITY`` as soon as the query held any
        one-character token. Budgets are stated in decision records (``sealtrail.decision/7``) and
        counted again by their verifier, so they keep being charged as they were; the names of
        ``charged`` not in ``candidates`` cannot reach ``floor`` and are charged without being
        scored. Every name of ``candidates`` is in ``charged``."""
        return self._candidates(tokens, floor, True)

    def _candidates(self, tokens: Sequence[str], floor: int, text: bool) -> tuple[list[int], list[int]]:
        """``charged_candidates``; ``text``: the tokens are a free text's, compared with a name by
        windows of as many words as it has and one more (``screen.screen_text``), else a name's."""
        # each listed token found by a query token's keys, as alike as the query token most like it
        # (a token shares no key with another query token is not alike it at all)
        best: dict[int, float] = {}
        tokens_of, vocab, known = self._tokens_of, self._vocab, self._reach
        for q in tokens:
            alike = known.get(q)
            if alike is None:
                reached: set[int] = set()
                for key in token_keys(q):
                    reached.update(tokens_of.get(key, ()))
                alike = tuple((tid, sim) for tid in reached if (sim := token_similarity(q, vocab[tid])) > 0.0)
                if len(known) >= _REACH_CACHE:
                    known.clear()  # a word seen long ago is worked out again
                known[q] = alike
            for tid, sim in alike:
                if sim > best.get(tid, 0.0):
                    best[tid] = sim
        joined = "".join(tokens)
        whole: tuple[int, ...] = ()
        if len(tokens) > 1:  # the joined words by themselves and by skeleton (no typo keys: not a word)
            sk = skeleton(joined)  # "Sevmor Neftegaz": one listed word written apart
            for key in (joined, "-" + sk):
                for tid in tokens_of.get(key, ()):
                    sim = token_similarity(joined, vocab[tid])
                    if sim > best.get(tid, 0.0):
                        best[tid] = sim
            whole = self._wholes.get(sk, ())
        elif len(joined) > 3:  # "XiJinping": a listed name of several words, written together
            whole = self._wholes.get(skeleton(joined), ())
        arrays = [self._token_postings[tid] for tid in best]
        if floor <= 0:
            found = set(whole)
            for a in arrays:
                found.update(a.tolist())
            every = sorted(found)
            return every, every
        if not arrays:
            return sorted(whole), sorted(whole)
        ids = np.concatenate(arrays)
        # numpy floats here only choose what is scored (conservatively): scores are integer-exact
        w = np.concatenate([self._posting_weights[tid] for tid in best])
        sims = np.repeat(np.fromiter(best.values(), np.float64, len(best)), [len(a) for a in arrays])
        # each name once, its postings summed in the order given (a stable sort keeps it): what
        # np.unique and np.bincount give, without their dozen calls (written out for speed)
        order = ids.argsort(kind="stable")
        ids = ids[order]
        first = np.empty(len(ids), dtype=bool)
        first[0] = True
        np.not_equal(ids[1:], ids[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        uids = ids[starts]
        w = w[order]
        keyed = np.add.reduceat(w, starts)  # the weight of the prefix tokens some query token found
        sims = sims[order]
        got = np.add.reduceat(w * sims, starts)  # and how much of it, at best
        total, outside = self._total[uids], self._outside[uids]
        # the prefix tokens no key found that the query's initials may partner: only those beginning
        # with one of them, and one each (a digit, as in "9 Station Road", begins no name's token)
        singles = sum(1 for t in tokens if len(t) == 1)
        initials = sum(1 for t in tokens if len(t) == 1 and t in self._firsts)
        unfound = total - outside - keyed
        # the bound charged for (see ``charged_candidates``): any one-character token credits them all
        loose: npt.NDArray[np.float64] | float = INITIAL_SIMILARITY * unfound if singles else 0.0
        charged = self._kept(uids, (got + outside + loose) / total, floor, whole)
        if initials == singles and (not initials or initials > _INITIALS_BOUNDED):
            return charged, charged  # the two bounds are one
        credit: npt.NDArray[np.float64] | float
        if not initials:
            credit = 0.0
        else:
            if initials > _INITIALS_BOUNDED:
                credit = loose
            else:
                credit = INITIAL_SIMILARITY * np.minimum(unfound, self._heaviest[uids, initials - 1])
            # an initial may partner a word a key found, at more than that key's similarity
            got = np.add.reduceat(w * np.maximum(sims, INITIAL_SIMILARITY), starts)
        cover = (got + outside + credit) / total
        tight = set(uids[(LISTED_SHARE * cover + (1 - LISTED_SHARE)) * 1000 >= floor - 0.5 - 1e-6].tolist())
        tight.update(whole)
        rest = [i for i in charged if i not in tight]
        if rest:
            tight |= self._joined_may_count(tokens, rest, text)
        return [i for i in charged if i in tight], charged

    def _joined_may_count(self, tokens: Sequence[str], names: Sequence[int], text: bool) -> set[int]:
        """The names of ``names`` that the query written together may match closely enough for
        ``weighted_score`` to count it: a name's words written together against the query's (a name
        of another number of tokens), or against the text's runs of one word more than the name has
        and the whole text (``text``); ``match.joined_may_pass_any``, one call per run length.
        Past ``_JOINED_CELLS`` comparisons, every name of ``names``."""
        runs: dict[int, list[str]] = {}
        need: dict[int, list[int]] = {}
        for i in names:
            size = self._sizes[i] + 1 if text else len(tokens)
            if not text and self._sizes[i] == len(tokens):
                continue  # a name of as many tokens is not compared written together
            need.setdefault(size, []).append(i)
        cells = 0
        for size in need:
            joined = {"".join(tokens)}  # the whole query (a text shorter than the run: cut there)
            if text:
                joined.update("".join(tokens[s:s + size]) for s in range(max(0, len(tokens) - size + 1)))
            runs[size] = sorted(joined)
            cells += len(runs[size]) * len(need[size])
        if cells > _JOINED_CELLS:
            return set(names)
        out: set[int] = set()
        for size, group in need.items():
            close = joined_may_pass_any(runs[size], ["".join(self._names[i][3]) for i in group])
            out.update(i for i, row in zip(group, close, strict=True) if row)
        return out

    @staticmethod
    def _kept(uids: npt.NDArray[np.int64], cover: npt.NDArray[np.float64], floor: int,
              whole: tuple[int, ...]) -> list[int]:
        """The names of ``uids`` whose listed cover ``cover`` may reach ``floor`` (the bound as it
        was: not rounded), and ``whole``."""
        keep = LISTED_SHARE * cover + (1 - LISTED_SHARE) >= floor / 1000 - 1e-9
        kept: list[int] = uids[keep].tolist()  # ascending
        return sorted({*kept, *whole}) if whole else kept

    def match_name(self, text: str, floor: int, tokens: Sequence[str] | None = None) -> list[NameHit]:
        """Each entry whose best name scores at least ``floor`` against ``text``, best first
        (ties by list position and entry id: the same order on every run). ``tokens``: the text's
        ``name_tokens``, where the caller has them already."""
        toks = name_tokens(text).tokens if tokens is None else tokens
        if not toks:
            return []
        best: dict[tuple[int, str], NameHit] = {}
        wq = [self.weight(t) for t in toks]
        for i in self.candidates(toks, floor):
            pos, entry, k, listed = self._names[i]
            score = weighted_score(toks, wq, listed, self._name_weights[i])
            if entry.weak_aliases and k in entry.weak_aliases:
                score = score * 9 // 10  # a weak alias: the list itself doubts it
            if score < floor:
                continue
            key = (pos, entry.entry_id)
            prev = best.get(key)
            if prev is None or (score, -k) > (prev.score, -prev.name_index):
                best[key] = NameHit(pos, entry, k, score)
        return sorted(best.values(), key=lambda h: (-h.score, h.list_pos, h.entry.entry_id))

    def match_identifier(self, value: str) -> list[IdentifierHit]:
        """Entries that carry ``value`` as an identifier (compared as ``identifier_key``)."""
        return list(self._ids.get(identifier_key(value), ()))

    def match_bic(self, bic: str) -> list[IdentifierHit]:
        """Entries listed with a BIC of the same institution and location (first 8 characters)."""
        return list(self._bics.get(bic.strip().upper()[:8], ())) if len(bic.strip()) >= 8 else []
