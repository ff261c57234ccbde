"""What a decision record states of its screening (``screening`` in ``sealtrail.decision/5``).

``{"lists": [{"name", "sha256", "seq", "published"}], "hits": [...], "findings": [...]}``:

- ``lists``: every list version the payment was screened against, by name, SHA-256 of the bytes
  loaded (the version), the seq of the ``sanctions_list`` record that sealed it and the
  publication date it states; empty when no list was in force;
- ``hits``: each (list, entry) found at or above the floor, best first: where in the payment
  (``originator``, ``beneficiary.address``, ``agent.intermediary.bic``, ``remittance``, ...), the
  list and its SHA-256, the entry id, the listed name, identifier or BIC matched, the score
  (0-1000) and its basis (``identifier``, ``bic``, ``name``, ``text``). The payment's own words
  are not repeated: they stay in its purgeable payload, like every name and account;
- ``findings``: what an examiner should know about the screening itself, e.g. a list older than
  its configured freshness when it was used;
- ``cleared`` (only where there is one): the name hits a good-guy clearance in force suppressed
  (``audit.screening.clearance``), each as a hit with the seq of the clearance's proposal
  (``clearance_seq``): found, and not a hit;
- ``stopped`` and ``budget`` (only where screening stopped at its budget, ``sealtrail.decision/7``):
  where in the payment it stopped and the budget it had (``inference.screening.screen``); the
  hits are those found before it stopped, and the screening columns say the scores are not known.

The screening columns of the record's features (``inference.screening.features``) are a function
of ``lists`` and ``hits`` alone (``values``): replay checks the two agree, and with the lists' and
the payment's bytes at hand it screens the payment again (``audit.bundle``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inference.screening.features import UNSCREENED, screening_values
from inference.screening.screen import Hit, Screening
from ledger.jcs import Jcs, canonical_bytes

__all__ = ["BASES", "ListRef", "ScreeningEvidence", "evidence_from_json", "sealed_hits"]

BASES = ("identifier", "bic", "name", "text")


@dataclass(frozen=True)
class ListRef:
    """One list version screened against: its name, version (SHA-256), sealing seq and date."""

    name: str
    sha256: str
    seq: int
    published: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "seq": self.seq, "published": self.published}


@dataclass(frozen=True)
class ScreeningEvidence:
    """One decision's screening as its record states it."""

    lists: tuple[ListRef, ...]
    hits: tuple[Hit, ...]
    findings: tuple[str, ...] = ()
    cleared: tuple[tuple[Hit, int], ...] = ()  # (hit, clearance proposal seq)
    stopped: str | None = None  # where screening stopped at its budget (None: screened in full)
    budget: int | None = None  # that budget, stated where it stopped

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "lists": [x.to_json() for x in self.lists],
            "hits": [_hit_json(h) for h in self.hits],
            "findings": list(self.findings),
        }
        if self.cleared:  # a hit a good-guy clearance suppressed: named, and not a hit
            out["cleared"] = [{**_hit_json(h), "clearance_seq": seq} for h, seq in self.cleared]
        if self.stopped is not None:  # version 7
            out["stopped"] = self.stopped
            out["budget"] = self.budget
        return out

    def to_jcs(self) -> Jcs:
        return canonical_bytes(self.to_json())

    def values(self) -> tuple[float, ...]:
        """The screening feature columns these lists and hits give."""
        if not self.lists:
            return UNSCREENED
        return screening_values(Screening(self.hits, tuple((x.name, x.sha256) for x in self.lists),
                                          self.stopped, self.budget))


def sealed_hits(body: object) -> tuple[dict[str, Any], ...]:
    """The hits a decision body states (``screening.hits`` of version 5; none for earlier versions),
    as sealed: the list's side only, never the payment's words."""
    scr = body.get("screening") if isinstance(body, Mapping) else None
    hits = scr.get("hits") if isinstance(scr, Mapping) else None
    return tuple(h for h in hits if isinstance(h, dict)) if isinstance(hits, list) else ()


def _hit_json(h: Hit) -> dict[str, Any]:
    return {"where": h.where, "list": h.list_name, "list_sha256": h.list_sha256, "entry_id": h.entry_id,
            "matched": h.matched, "score": h.score, "basis": h.basis}


def _str(obj: Mapping[str, Any], key: str) -> str:
    v = obj[key]
    if type(v) is not str:
        raise ValueError(f"screening: {key} is not a string")
    return v


def _int(obj: Mapping[str, Any], key: str, lo: int, hi: int) -> int:
    v = obj[key]
    if type(v) is not int or not lo <= v <= hi:
        raise ValueError(f"screening: {key} is not an integer {lo}..{hi}")
    return v


def _hit(obj: Any) -> Hit:
    if not isinstance(obj, Mapping):
        raise ValueError("screening: a hit is not an object")
    basis = _str(obj, "basis")
    if basis not in BASES:
        raise ValueError(f"screening: unknown hit basis {basis!r}")
    return Hit(_str(obj, "where"), "", _str(obj, "list"), _str(obj, "list_sha256"), _str(obj, "entry_id"),
               _str(obj, "matched"), _int(obj, "score", 0, 1000), basis)


def evidence_from_json(obj: Any) -> ScreeningEvidence:
    """A record's ``screening`` read back; ValueError (or KeyError) naming what is not as stated."""
    if not isinstance(obj, Mapping):
        raise ValueError("screening is not an object")
    lists, hits, findings = obj["lists"], obj["hits"], obj["findings"]
    if not all(isinstance(x, Sequence) and not isinstance(x, str) for x in (lists, hits, findings)):
        raise ValueError("screening: lists, hits and findings are arrays")
    refs = []
    for x in lists:
        if not isinstance(x, Mapping):
            raise ValueError("screening: a list is not an object")
        pub = x["published"]
        if pub is not None and type(pub) is not str:
            raise ValueError("screening: published is not a date")
        refs.append(ListRef(_str(x, "name"), _str(x, "sha256"), _int(x, "seq", 0, 2**62), pub))
    if any(type(f) is not str for f in findings):
        raise ValueError("screening: a finding is not a string")
    cleared = obj.get("cleared", ())
    if not isinstance(cleared, Sequence) or isinstance(cleared, str):
        raise ValueError("screening: cleared is an array")
    stopped = budget = None
    if "stopped" in obj or "budget" in obj:  # both or neither
        stopped, budget = _str(obj, "stopped"), _int(obj, "budget", 1, 2**62)
        if not stopped:
            raise ValueError("screening: stopped names where in the payment screening stopped")
        if not refs:
            raise ValueError("screening: stopped at its budget, yet names no list it was screened against")
    return ScreeningEvidence(tuple(refs), tuple(_hit(h) for h in hits), tuple(findings),
                             tuple((_hit(c), _int(c, "clearance_seq", 0, 2**62)) for c in cleared),
                             stopped, budget)
