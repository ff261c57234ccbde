"""How alike two names are: weighted token alignment with Jaro-Winkler, in per-mille.

``name_score(query, listed, weight)`` answers: how much of the listed name is found in the query,
and how little of the query is left unexplained. Every token of the listed name looks for its best
partner among the query's tokens (each query token partners one listed token at most, best pairs
first); a pair's similarity is the larger of

- Jaro-Winkler averaged with the optimal-string-alignment similarity on the tokens (``rapidfuzz``),
- the same on their skeletons (transliteration folds, vowels as one), discounted by
  ``SKELETON_DISCOUNT``, for skeletons of ``SKELETON_MIN`` letters or more, so "Mukhammad" still
  finds "Mohammed" but less surely than itself;

times ``FIRST_LETTER_DIFFERS`` when the first letters differ even once folded ("Jason" / "Mason");
below ``TOKEN_FLOOR`` it is 0 (a different word, not a variant). An initial ("J") matches a token
it begins at ``INITIAL_SIMILARITY``; tokens that share no key of ``token_keys`` (exact, skeleton,
skeleton one letter apart) are not alike at all, so the index's bound is exact. Tokens weigh what
they tell about identity (``weight``: rare tokens much, common ones and particles little), so
"Mohammed Ali" alone does not reach "Mohammed Ali Hassan". The score is ``LISTED_SHARE`` of the
listed name's weighted coverage plus the rest of the query's, and names split into a different
number of tokens ("Jinping" / "Jin Ping") are compared as whole strings too.

Scores are integers, 0-1000: computed from exact ratios of string lengths and edit counts and
integer weights, then rounded once, so two machines give the same score and a decision record can
hash it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt
from rapidfuzz import process
from rapidfuzz.distance import OSA, JaroWinkler

from inference.screening.normalise import skeleton

__all__ = ["INITIAL_SIMILARITY", "JOINED_FLOOR", "LISTED_SHARE", "SKELETON_DISCOUNT", "joined_counts",
           "joined_may_count", "joined_may_pass",
           "joined_may_pass_any", "name_score", "score_bound", "token_keys",
           "token_similarity", "weighted_score"]

SKELETON_DISCOUNT = 0.94
SKELETON_MIN = 5  # skeletons shorter than this say too little to compare
JOINED_FLOOR = 0.95  # names written together count only when that alike, as one word
# the optimal-string-alignment similarity under which two names written together cannot reach
# JOINED_FLOOR (their mean with Jaro-Winkler, at most 1), less a margin: see ``joined_may_pass``
_JOINED_OSA_CUTOFF = 2 * JOINED_FLOOR - 1 - 0.01
FIRST_LETTER_DIFFERS = 0.9  # two tokens whose first letters differ, even once folded
TOKEN_FLOOR = 0.8  # two tokens less alike than this are different words: "romanenko" / "romaniuk"
INITIAL_SIMILARITY = 0.90
LISTED_SHARE = 0.75


@functools.lru_cache(maxsize=262_144)
def token_keys(token: str) -> frozenset[str]:
    """The keys a token is found by: itself, its skeleton, and (skeletons of 4 letters and more)
    each one-letter deletion of its skeleton. Two tokens one typo apart once folded share a key
    (both lose the changed letter, or the longer loses the one added)."""
    sk = skeleton(token)
    keys = {token, "-" + sk}
    # a deletion that leaves a doubled letter leaves it single, as skeletons have it; a "word" over
    # 40 letters is no name: its deletions would cost its length squared
    if 4 <= len(sk) <= 40:
        keys.update("-" + _single(sk[:i] + sk[i + 1:]) for i in range(len(sk)))
    return frozenset(keys)


def _single(s: str) -> str:
    return "".join(ch for i, ch in enumerate(s) if i == 0 or ch != s[i - 1])


@functools.lru_cache(maxsize=1_048_576)  # a bank's parties and a list's names reuse few words
def token_similarity(a: str, b: str) -> float:
    """0-1: how alike two normalised tokens are (see the module's text); 0 for tokens that share
    no key (``token_keys``), however their letters compare: what the index cannot find does not
    count, so the index's bound on a name's score is exact."""
    if a == b:
        return 1.0
    if len(a) == 1 or len(b) == 1:
        short, long_ = (a, b) if len(a) <= len(b) else (b, a)
        return INITIAL_SIMILARITY if long_.startswith(short) else 0.0
    if token_keys(a).isdisjoint(token_keys(b)):
        return 0.0
    direct = _alike(a, b)
    sa, sb = skeleton(a), skeleton(b)
    sim = direct
    if min(len(sa), len(sb)) >= SKELETON_MIN:  # short skeletons collide: "dinh" / "duong", "zhang" / "zhong"
        sim = max(sim, (1.0 if sa == sb else _alike(sa, sb)) * SKELETON_DISCOUNT)
    if a[0] != b[0] and sa[0] != sb[0]:  # "jason" / "mason", "ronald" / "donald": names, not typos
        sim *= FIRST_LETTER_DIFFERS
    return sim if sim >= TOKEN_FLOOR else 0.0


def _alike(a: str, b: str) -> float:
    """Jaro-Winkler averaged with the optimal-string-alignment similarity (Levenshtein with a swap
    of two neighbours as one edit): Jaro-Winkler alone forgives a different ending too much
    ("john" / "johnson" 0.94, "kovalev" / "kovalenko" 0.93)."""
    return (JaroWinkler.normalized_similarity(a, b) + OSA.normalized_similarity(a, b)) / 2


def name_score(query: Sequence[str], listed: Sequence[str], weight: Callable[[str], int]) -> int:
    """0-1000: how well the query's tokens match the listed name's (see the module's text)."""
    return weighted_score(query, [weight(t) for t in query], listed, [weight(t) for t in listed])


@overload
def score_bound(found: float, total: float) -> float: ...


@overload
def score_bound(found: npt.NDArray[np.float64], total: float) -> npt.NDArray[np.float64]: ...


def score_bound(found: Any, total: float) -> Any:
    """The most ``weighted_score`` can give, in per-mille before rounding, to a query in which only
    listed tokens weighing ``found`` of the name's ``total`` have a partner (a token alike them), when
    the names are not compared written together (``joined_counts``): every partner counted as alike
    as can be, and the whole of the query as explained. ``found`` may be an array (one a window)."""
    if not total:
        return found * 0 + 1000.0
    return (LISTED_SHARE * found / total + (1 - LISTED_SHARE)) * 1000


def joined_counts(query: Sequence[str], listed: Sequence[str]) -> bool:
    """Whether ``weighted_score`` also scores the two names written together and finds them alike
    enough for that to count (then ``score_bound`` does not bound it)."""
    if len(query) == len(listed):
        return False
    a, b = "".join(query), "".join(listed)
    return joined_may_count(len(a), len(b)) and _alike(a, b) >= JOINED_FLOOR


def joined_may_pass(joined: Sequence[str], listed: str) -> list[int]:
    """Which of the texts ``joined`` (each a window's words written together) could pass the test
    ``joined_counts`` puts to them against the listed name written together: their indexes. That
    test's mean with Jaro-Winkler (at most 1) reaches ``JOINED_FLOOR`` only where the optimal-string-
    alignment similarity is 2 * JOINED_FLOOR - 1 or more; that similarity is computed for all of
    them in one call (in C, a margin below it), so that only these are put to the test itself."""
    if not joined:
        return []
    sims = process.cdist([listed], joined, scorer=OSA.normalized_similarity, score_cutoff=_JOINED_OSA_CUTOFF)
    return np.flatnonzero(sims[0]).tolist()


def joined_may_pass_any(joined: Sequence[str], listed: Sequence[str]) -> list[bool]:
    """For each name of ``listed`` (written together), whether any of the texts ``joined`` could
    pass the test ``joined_counts`` puts to it: ``joined_may_pass`` for many names in one call."""
    if not joined or not listed:
        return [False] * len(listed)
    sims = process.cdist(listed, joined, scorer=OSA.normalized_similarity, score_cutoff=_JOINED_OSA_CUTOFF)
    close: list[bool] = (np.asarray(sims) != 0).any(axis=1).tolist()
    return close


def joined_may_count(a: int, b: int) -> bool:
    """Whether two names written together, ``a`` and ``b`` letters long, can be alike enough to
    count: the optimal-string-alignment similarity is at most 1 - |a - b| / max(a, b), and with
    Jaro-Winkler at most 1 their mean reaches ``JOINED_FLOOR`` only if that is 2 * JOINED_FLOOR - 1
    or more (lengths within a tenth of the longer)."""
    longer = max(a, b)
    return longer > 0 and abs(a - b) <= (2 - 2 * JOINED_FLOOR) * longer + 1e-9


def weighted_score(query: Sequence[str], wq: Sequence[int], listed: Sequence[str], wl: Sequence[int]) -> int:
    """``name_score`` with the tokens' weights given (an index keeps its names' weights)."""
    if not query or not listed:
        return 0
    if all(len(q) == 1 for q in query):  # initials alone ("A K") identify nobody
        return 0
    pairs = [(sim, i, j) for i, q in enumerate(query) for j, t in enumerate(listed)
             if (sim := token_similarity(q, t)) > 0.0]
    # best pairs first, one partner each; among equally alike pairs the heavier listed token first
    # (an initial partners the name that tells more, whatever the order the names are written in)
    if len(pairs) > 1:
        pairs.sort(key=lambda x: (-x[0], -wl[x[2]], -wq[x[1]], x[2], x[1]))
    found_l = [0.0] * len(listed)
    found_q = [0.0] * len(query)
    for sim, i, j in pairs:
        if found_q[i] == 0.0 and found_l[j] == 0.0:
            found_l[j] = found_q[i] = sim
    cover_l = sum(w * f for w, f in zip(wl, found_l, strict=True)) / sum(wl)
    cover_q = sum(w * f for w, f in zip(wq, found_q, strict=True)) / sum(wq)
    score = LISTED_SHARE * cover_l + (1 - LISTED_SHARE) * cover_q
    if len(query) != len(listed):  # "xi jin ping" and "xi jinping": the names written together
        a, b = "".join(query), "".join(listed)
        if joined_may_count(len(a), len(b)):  # else they are not alike enough written together
            joined = _alike(a, b)
            score = max(score, joined * SKELETON_DISCOUNT if joined >= JOINED_FLOOR else 0.0)
    return round(score * 1000)
