"""The endpoint x role matrix: which roles may call which operation (one table, tested whole).

``scorer`` is the payment engine's service identity; ``officer`` investigates and annotates;
``approver`` is the second pair of eyes on rule changes; ``regulator`` reads the trail and the
payloads it is entitled to; ``admin`` operates (ledger health, metrics, activation, the sanctions
lists) but reads no payment payloads. ``healthz`` needs a verified certificate and no role.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["ACCESS", "ALL_OUTCOMES_ROLES", "PAYLOAD_ROLES", "may"]

ACCESS: MappingProxyType[str, frozenset[str]] = MappingProxyType({
    "decisions.create": frozenset({"scorer"}),
    "decisions.batch": frozenset({"scorer"}),
    "traces.query": frozenset({"officer", "regulator", "admin"}),
    "traces.get": frozenset({"officer", "regulator", "admin"}),
    "traces.annotate": frozenset({"officer"}),
    "ledger.checkpoint": frozenset({"scorer", "officer", "approver", "regulator", "admin"}),
    "ledger.checkpoint_cosigned": frozenset({"scorer", "officer", "approver", "regulator", "admin"}),
    "ledger.consistency": frozenset({"scorer", "officer", "approver", "regulator", "admin"}),
    "ledger.verify": frozenset({"officer", "admin"}),
    "rulesets.list": frozenset({"officer", "approver", "regulator", "admin"}),
    "rulesets.propose": frozenset({"officer"}),
    "rulesets.approve": frozenset({"approver"}),
    "rulesets.activate": frozenset({"approver", "admin"}),
    "models.list": frozenset({"officer", "approver", "regulator", "admin"}),
    "exports.create": frozenset({"officer", "regulator"}),
    "exports.list": frozenset({"officer", "regulator"}),
    "exports.get": frozenset({"officer", "regulator"}),
    # Alerts and cases (tipping-off, FATF R.21): officers work them, regulators read them; scorers and
    # admins see neither. A scorer reads the outcomes of its own held payments only.
    "alerts.list": frozenset({"officer", "regulator"}),
    "alerts.get": frozenset({"officer", "regulator"}),
    "alerts.act": frozenset({"officer"}),
    "cases.list": frozenset({"officer", "regulator"}),
    "cases.get": frozenset({"officer", "regulator"}),
    "cases.act": frozenset({"officer"}),
    "outcomes.list": frozenset({"scorer", "officer", "regulator"}),
    # Who read which case: the tipping-off investigator's record of the officers' own reads, so it is
    # not theirs to read (docs/http-api.md, "Who read a case").
    "cases.reads": frozenset({"regulator"}),
    # How each rule and model fares once its alerts are worked: counts and rates, no case or payment.
    "performance.read": frozenset({"officer", "approver", "regulator"}),
    # Sanctions lists: which versions are in force, their history and what changed between two are
    # read by the officers who work the hits, the examiners who check what a decision was screened
    # against, and the admins who keep them; loading and withdrawing a list is an operator's act.
    "lists.read": frozenset({"officer", "regulator", "admin"}),
    "lists.load": frozenset({"admin"}),
    "lists.withdraw": frozenset({"admin"}),
    # Good-guy clearances: the officers who work the hits propose, approve (a second officer: four-eyes)
    # and revoke them; examiners and admins read them.
    "clearances.read": frozenset({"officer", "regulator", "admin"}),
    "clearances.propose": frozenset({"officer"}),
    "clearances.approve": frozenset({"officer"}),
    "clearances.revoke": frozenset({"officer"}),
    "metrics": frozenset({"admin"}),
    "healthz": frozenset(),  # any verified certificate
})

# Who sees the raw payment message (names, accounts) in GET /v1/traces/{id}.
PAYLOAD_ROLES = frozenset({"officer", "regulator"})

# Who reads every held payment's outcome in GET /v1/outcomes; any other caller allowed there (a
# scorer) reads only the outcomes of the decisions its own certificate asked for.
ALL_OUTCOMES_ROLES = frozenset({"officer", "regulator"})


def may(operation: str, roles: frozenset[str]) -> bool:
    allowed = ACCESS[operation]
    return not allowed or bool(allowed & roles)
