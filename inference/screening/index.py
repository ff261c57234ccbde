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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inference.screening.entries import ListEntry, SanctionsList
from inference.screening.match import INITIAL_SIMILARITY, LISTED_SHARE, name_score, token_keys
from inference.screening.normalise import PARTICLES, name_tokens, skeleton

__all__ = ["PREFIX_TOKENS", "IdentifierHit", "ListIndex", "NameHit", "identifier_key"]

PREFIX_TOKENS = 3
_SLOTS = 64  # token positions per name in a posting's code (a longer name's tokens from the 64th on
# count as outside its prefix)
_WHOLE_SLOT = _SLOTS - 1  # the posting of a whole name written together

_ID_CLEAN = re.compile(r"[^0-9A-Z]")


def identifier_key(value: str) -> str:
    """An identifier as compared: upper case, letters and digits only ("AB 123-456" -> "AB123456")."""
    return _ID_CLEAN.sub("", value.upper())


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
        # postings: key -> codes (name index * _SLOTS + token position; _WHOLE_SLOT: the whole name)
        postings: dict[str, list[int]] = {}
        # per name, for the bound in ``candidates``: the weight of each token (flat, from offset),
        # the name's whole weight, and the part outside its prefix (tokens no key is filed for)
        flat: list[int] = []
        offsets, totals, outsides = [], [], []
        for i, (*_, toks) in enumerate(names):
            informative = [t for t in toks if t not in PARTICLES] or list(toks)
            prefix = set(sorted(set(informative), key=lambda t: (df[t], t))[:PREFIX_TOKENS])
            weights = [self.weight(t) for t in toks]
            offsets.append(len(flat))
            flat.extend(weights[:_WHOLE_SLOT])
            totals.append(sum(weights))
            outsides.append(sum(w for p, (t, w) in enumerate(zip(toks, weights, strict=True))
                                if t not in prefix or p >= _WHOLE_SLOT))
            filed: set[tuple[str, int]] = set()
            for p, t in enumerate(toks[:_WHOLE_SLOT]):
                if t in prefix:
                    filed.update((key, p) for key in token_keys(t))
            if len(toks) > 1:
                filed.add(("=" + skeleton("".join(toks)), _WHOLE_SLOT))
            for key, p in filed:
                postings.setdefault(key, []).append(i * _SLOTS + p)
        self._postings = {k: np.array(sorted(v), dtype=np.int64) for k, v in postings.items()}
        self._flat = np.array([*flat, 0], dtype=np.float64)
        self._offset = np.array(offsets, dtype=np.int64)
        self._total = np.array(totals, dtype=np.float64)
        self._outside = np.array(outsides, dtype=np.float64)

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

        The bound: each token of a listed name that a key found counts as found whole, each one
        outside its prefix too (never looked up), and each other one as not found (tokens that
        share no key are not alike: ``match.token_similarity``) or, when the query has initials, as
        found at ``INITIAL_SIMILARITY``; the query's own coverage as complete. A name whose bound
        is under ``floor`` cannot reach it and is not scored."""
        keys: set[str] = set()
        for t in tokens:
            keys |= token_keys(t)
        if len(tokens) > 1:
            keys.add("=" + skeleton("".join(tokens)))
        found = [a for a in (self._postings.get(k) for k in keys) if a is not None]
        if not found:
            return []
        codes = np.unique(np.concatenate(found))
        ids, slots = np.divmod(codes, _SLOTS)
        if floor <= 0:
            return sorted(set(ids.tolist()))
        # numpy floats here only choose what is scored (conservatively): scores are integer-exact
        whole = slots == _WHOLE_SLOT
        w = np.where(whole, np.inf, self._flat[self._offset[ids] + np.where(whole, 0, slots)])
        uids, inv = np.unique(ids, return_inverse=True)
        total, outside = self._total[uids], self._outside[uids]
        got = np.minimum(np.bincount(inv, weights=w), total - outside)
        unkeyed = INITIAL_SIMILARITY if any(len(t) == 1 for t in tokens) else 0.0
        cover = (got + outside + unkeyed * (total - outside - got)) / total
        keep = LISTED_SHARE * cover + (1 - LISTED_SHARE) >= floor / 1000 - 1e-9
        return [int(i) for i in uids[keep]]

    def match_name(self, text: str, floor: int) -> list[NameHit]:
        """Each entry whose best name scores at least ``floor`` against ``text``, best first
        (ties by list position and entry id: the same order on every run)."""
        toks = name_tokens(text).tokens
        if not toks:
            return []
        best: dict[tuple[int, str], NameHit] = {}
        for i in self.candidates(toks, floor):
            pos, entry, k, listed = self._names[i]
            score = name_score(toks, listed, self.weight)
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
