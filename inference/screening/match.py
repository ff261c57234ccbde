"""How alike two names are: weighted token alignment with Jaro-Winkler, in per-mille.

``name_score(query, listed, weight)`` answers: how much of the listed name is found in the query,
and how little of the query is left unexplained. Every token of the listed name looks for its best
partner among the query's tokens (each query token partners one listed token at most, best pairs
first); a pair's similarity is the larger of

- Jaro-Winkler averaged with Levenshtein similarity on the tokens (``rapidfuzz``), and
- the same on their skeletons (transliteration folds, vowels out), discounted by
  ``SKELETON_DISCOUNT``, so "Mukhammad" still finds "Mohammed" but less surely than itself;

an initial ("J") matches a token it begins at ``INITIAL_SIMILARITY``; tokens that share no key of
``token_keys`` (exact, skeleton, skeleton one letter apart) are not alike at all. Tokens weigh what they tell
about identity (``weight``: rare tokens much, common ones and particles little), so "Mohammed Ali"
alone does not reach "Mohammed Ali Hassan". The score is ``LISTED_SHARE`` of the listed name's
weighted coverage plus the rest of the query's, and the same names written without spaces
("Jinping" / "Jin Ping") are compared as whole strings too.

Scores are integers, 0-1000: computed from Jaro-Winkler's exact ratios and integer weights, then
rounded once, so two machines give the same score and the decision record can hash it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from rapidfuzz.distance import JaroWinkler, Levenshtein

from inference.screening.normalise import skeleton

__all__ = ["INITIAL_SIMILARITY", "LISTED_SHARE", "SKELETON_DISCOUNT", "name_score", "token_keys",
           "token_similarity"]

SKELETON_DISCOUNT = 0.94
INITIAL_SIMILARITY = 0.90
LISTED_SHARE = 0.8


@functools.lru_cache(maxsize=262_144)
def token_keys(token: str) -> frozenset[str]:
    """The keys a token is found by: itself, its skeleton, and (skeletons of 4 letters and more)
    each one-letter deletion of its skeleton. Two tokens one typo apart once folded share a key
    (both lose the changed letter, or the longer loses the one added)."""
    sk = skeleton(token)
    keys = {token, "-" + sk}
    if len(sk) >= 4:
        keys.update("-" + sk[:i] + sk[i + 1:] for i in range(len(sk)))
    return frozenset(keys)


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
    folded = 1.0 if sa == sb else _alike(sa, sb)
    return max(direct, folded * SKELETON_DISCOUNT)


def _alike(a: str, b: str) -> float:
    """Jaro-Winkler averaged with Levenshtein similarity: Jaro-Winkler alone forgives a different
    ending too much ("john" / "johnson" 0.94, "kovalev" / "kovalenko" 0.93)."""
    return (JaroWinkler.normalized_similarity(a, b) + Levenshtein.normalized_similarity(a, b)) / 2


def _align(query: Sequence[str], listed: Sequence[str]) -> list[tuple[int, int, float]]:
    """Best one-to-one pairs (query index, listed index, similarity), best first."""
    pairs = sorted(((token_similarity(q, t), i, j) for i, q in enumerate(query)
                    for j, t in enumerate(listed)), reverse=True)
    used_q: set[int] = set()
    used_l: set[int] = set()
    out = []
    for sim, i, j in pairs:
        if sim <= 0.0 or i in used_q or j in used_l:
            continue
        used_q.add(i)
        used_l.add(j)
        out.append((i, j, sim))
    return out


def name_score(query: Sequence[str], listed: Sequence[str], weight: Callable[[str], int]) -> int:
    """0-1000: how well the query's tokens match the listed name's (see the module's text)."""
    if not query or not listed:
        return 0
    wl = [weight(t) for t in listed]
    wq = [weight(t) for t in query]
    found_l = [0.0] * len(listed)
    found_q = [0.0] * len(query)
    for i, j, sim in _align(query, listed):
        found_l[j] = sim
        found_q[i] = sim
    cover_l = sum(w * f for w, f in zip(wl, found_l, strict=True)) / sum(wl)
    cover_q = sum(w * f for w, f in zip(wq, found_q, strict=True)) / sum(wq)
    score = LISTED_SHARE * cover_l + (1 - LISTED_SHARE) * cover_q
    if len(query) != len(listed) or score < 1.0:  # "xi jin ping" and "xi jinping": the whole strings
        joined = JaroWinkler.normalized_similarity("".join(query), "".join(listed))
        score = max(score, joined * SKELETON_DISCOUNT if joined >= 0.95 else 0.0)
    return round(score * 1000)
