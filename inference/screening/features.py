"""A payment's screening as feature columns: what the rule pack and the model read of it.

``SCREENING_NAMES`` are the columns ``sealtrail.features/5`` adds after ``features/4`` (and
``sealtrail.features/7`` after ``features/6``), each an
integer (docs/scoring.md "Features", docs/screening.md "In the decision"):

- ``screen_lists``: how many lists the payment was screened against; 0 when none was in force;
- ``screen_best_score``: the best score (0-1000) of any hit, anywhere in the payment; 0 when
  nothing reached the floor;
- ``screen_party_score``: the best score of a hit on a party's name (originator, beneficiary,
  ultimate parties, initiating party);
- ``screen_text_score``: the best score of a hit in free text (addresses, agents' names and
  addresses, remittance information, sender-to-receiver information);
- ``screen_identifier_match``: 1 when a party identifier equals one a list gives an entry;
- ``screen_bic_match``: 1 when a party's or an agent's BIC is a listed institution's;
- ``screen_hits``: how many (list, entry) pairs were found at or above the floor.

With no list in force every column but ``screen_lists`` is NaN (not screened), so that a rule
written ``screen_best_score >= t`` stays silent and one written fail-closed can tell "screened,
nothing found" (0) from "not screened".

A screening that stopped at its budget (``Screening.stopped``) did not screen every name and text:
its best, party and text scores and its count of hits are NaN (not known), while
``screen_lists`` counts the lists and the identifier and BIC columns stand (every identifier and
BIC is matched before any name). Lists in force with no best score is what the rule pack's
``SANCTIONS_SCREENING_INCOMPLETE`` holds.
"""

from __future__ import annotations

import math

from inference.screening.screen import Screening

__all__ = ["SCREENING_NAMES", "UNSCREENED", "screening_values"]

SCREENING_NAMES: tuple[str, ...] = (
    "screen_lists",
    "screen_best_score",
    "screen_party_score",
    "screen_text_score",
    "screen_identifier_match",
    "screen_bic_match",
    "screen_hits",
)
UNSCREENED: tuple[float, ...] = (0.0,) + (math.nan,) * (len(SCREENING_NAMES) - 1)
_PARTY_ROLES = frozenset({"originator", "beneficiary", "ultimate_originator", "ultimate_beneficiary",
                          "initiating_party"})


def screening_values(screening: Screening | None) -> tuple[float, ...]:
    """The ``SCREENING_NAMES`` values of one payment's screening (``UNSCREENED`` for None or a
    screening against no list)."""
    if screening is None or not screening.lists:
        return UNSCREENED
    party = text = 0
    ident = bic = False
    entries = set()
    for h in screening.hits:
        entries.add((h.list_sha256, h.entry_id))
        if h.basis == "identifier":
            ident = True
        elif h.basis == "bic":
            bic = True
        elif h.basis == "name" and h.where in _PARTY_ROLES:
            party = max(party, h.score)
        else:
            text = max(text, h.score)
    if screening.stopped is not None:  # not screened in full: the scores and the count are not known
        return (float(len(screening.lists)), math.nan, math.nan, math.nan,
                1.0 if ident else 0.0, 1.0 if bic else 0.0, math.nan)
    return (float(len(screening.lists)), float(screening.best), float(party), float(text),
            1.0 if ident else 0.0, 1.0 if bic else 0.0, float(len(entries)))
