"""The deadline policy: when an alert must be reviewed and a filing decision made.

Examiners judge alert ageing against the policy that was in force when the alert opened, not
against today's. So the policy is configuration that is sealed: ``sealtrail cases policy set``
seals a record of kind ``alert_policy`` (body ``sealtrail.alert-policy/1``), and an alert is
judged by the last policy record sealed before the decision that opened it (the built-in
:data:`DEFAULT_POLICY` before any). Due dates are calendar dates (UTC), computed here from the
alert's ``recorded_at`` by integer date arithmetic: a pure function of the sealed records.

- ``review_business_days``: the alert is reviewed within this many business days (Monday to
  Friday, not a listed holiday) after the day it opened.
- ``filing_calendar_days``: a filing decision is due this many calendar days after detection
  (31 CFR 1020.320(b)(3): a SAR within 30 calendar days of initial detection).
- ``continuing_review_days``: after a report is filed, continuing activity is reviewed this many
  days after the filing (FinCEN's 90-day continuing-activity review).
- ``subject``: what a case is about: the ``originator``'s account (default), the
  ``beneficiary``'s, or the ``decision`` alone (one case per alert).
- ``four_eyes_false_positive``: closing an alert or a case as a false positive needs a second
  officer.
- ``qa_sample_permille``: this many closed alerts in a thousand go to quality assurance: a
  reviewer other than the officer who closed it records a verdict. Which alerts is a pure
  function of the alert's trace id, so every process and the examiner draw the same sample.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from audit.errors import CaseError

__all__ = ["DEFAULT_POLICY", "POLICY_KIND", "POLICY_SCHEMA", "SUBJECTS", "DeadlinePolicy"]

POLICY_KIND = "alert_policy"
POLICY_SCHEMA = "sealtrail.alert-policy/1"
SUBJECTS = ("originator", "beneficiary", "decision")
_INTS = {"review_business_days": (1, 60), "filing_calendar_days": (1, 365),
         "continuing_review_days": (1, 730), "qa_sample_permille": (0, 1000)}
_FIELDS = ("version", *_INTS, "holidays", "subject", "four_eyes_false_positive")


def _day(text: str) -> date:
    return date.fromisoformat(text[:10])


@dataclass(frozen=True)
class DeadlinePolicy:
    """One version of the deadline policy; ``from_json`` refuses anything else, naming the field."""

    version: str
    review_business_days: int = 5
    filing_calendar_days: int = 30
    continuing_review_days: int = 90
    holidays: tuple[str, ...] = field(default=())  # ISO dates, sorted, not business days
    subject: str = "originator"
    four_eyes_false_positive: bool = False
    qa_sample_permille: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "review_business_days": self.review_business_days,
                "filing_calendar_days": self.filing_calendar_days,
                "continuing_review_days": self.continuing_review_days, "holidays": list(self.holidays),
                "subject": self.subject, "four_eyes_false_positive": self.four_eyes_false_positive,
                "qa_sample_permille": self.qa_sample_permille}

    @classmethod
    def from_json(cls, doc: object, *, where: str = "policy") -> DeadlinePolicy:
        if not isinstance(doc, Mapping):
            raise CaseError(where, "must be a table of the policy's fields")
        unknown = sorted(set(doc) - set(_FIELDS))
        if unknown:
            raise CaseError(f"{where}.{unknown[0]}", f"is not a policy field (allowed: {', '.join(_FIELDS)})")
        version = doc.get("version")
        if not isinstance(version, str) or not version.strip() or len(version) > 64:
            raise CaseError(f"{where}.version", "must name the policy version (1 to 64 characters)")
        ints: dict[str, int] = {}
        for name, (low, high) in _INTS.items():
            value = doc.get(name, getattr(cls, name))
            if type(value) is not int or not low <= value <= high:
                raise CaseError(f"{where}.{name}", f"must be a whole number from {low} to {high}")
            ints[name] = value
        holidays = doc.get("holidays", [])
        if not isinstance(holidays, list):
            raise CaseError(f"{where}.holidays", "must be a list of ISO dates (YYYY-MM-DD)")
        days: set[str] = set()
        for h in holidays:
            if isinstance(h, date):
                h = h.isoformat()
            try:
                ok = isinstance(h, str) and len(h) == 10 and date.fromisoformat(h).isoformat() == h
            except ValueError:
                ok = False
            if not ok:
                raise CaseError(f"{where}.holidays", f"{h!r} is not an ISO date (YYYY-MM-DD)")
            days.add(str(h))
        subject = doc.get("subject", "originator")
        if subject not in SUBJECTS:
            raise CaseError(f"{where}.subject", f"{subject!r} is not one of {', '.join(SUBJECTS)}")
        four = doc.get("four_eyes_false_positive", False)
        if type(four) is not bool:
            raise CaseError(f"{where}.four_eyes_false_positive", "must be true or false")
        return cls(version=version, holidays=tuple(sorted(days)), subject=str(subject),
                   four_eyes_false_positive=four, **ints)

    @classmethod
    def from_toml(cls, text: str) -> DeadlinePolicy:
        """The policy a TOML file states (top-level keys are the fields)."""
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CaseError("policy", f"is not TOML: {exc}") from exc
        return cls.from_json(doc)

    def qa_sampled(self, trace_id: str) -> bool:
        """Whether the alert of decision ``trace_id`` goes to quality assurance when closed."""
        h = hashlib.sha256(b"sealtrail.qa-sample/1\n" + trace_id.encode()).digest()
        return int.from_bytes(h[:8], "big") % 1000 < self.qa_sample_permille

    def is_business_day(self, d: date) -> bool:
        return d.weekday() < 5 and d.isoformat() not in self.holidays

    def review_due(self, opened_at: str) -> str:
        """The last day (UTC) to review an alert opened at ``opened_at`` (a record's recorded_at)."""
        d, left = _day(opened_at), self.review_business_days
        while left:
            d += timedelta(days=1)
            left -= self.is_business_day(d)
        return d.isoformat()

    def filing_due(self, opened_at: str) -> str:
        """The last day for the filing decision on an alert detected at ``opened_at``."""
        return (_day(opened_at) + timedelta(days=self.filing_calendar_days)).isoformat()

    def continuing_review_due(self, filed_at: str) -> str:
        """When continuing activity is reviewed after a report filed at ``filed_at``."""
        return (_day(filed_at) + timedelta(days=self.continuing_review_days)).isoformat()


# In force until the first ``alert_policy`` record: US practice as the module docstring cites.
DEFAULT_POLICY = DeadlinePolicy(version="sealtrail-default/1")
