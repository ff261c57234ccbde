"""The endpoint x role matrix: which roles may call which operation (one table, tested whole).

``scorer`` is the payment engine's service identity; ``officer`` investigates and annotates;
``approver`` is the second pair of eyes on rule changes; ``regulator`` reads the trail and the
payloads it is entitled to; ``admin`` operates (ledger health, metrics, activation) but reads no
payment payloads. ``healthz`` needs a verified certificate and no role.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["ACCESS", "PAYLOAD_ROLES", "may"]

ACCESS: MappingProxyType[str, frozenset[str]] = MappingProxyType({
    "decisions.create": frozenset({"scorer"}),
    "decisions.batch": frozenset({"scorer"}),
    "traces.query": frozenset({"officer", "regulator", "admin"}),
    "traces.get": frozenset({"officer", "regulator", "admin"}),
    "traces.annotate": frozenset({"officer"}),
    "ledger.checkpoint": frozenset({"scorer", "officer", "approver", "regulator", "admin"}),
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
    "metrics": frozenset({"admin"}),
    "healthz": frozenset(),  # any verified certificate
})

# Who sees the raw payment message (names, accounts) in GET /v1/traces/{id}.
PAYLOAD_ROLES = frozenset({"officer", "regulator"})


def may(operation: str, roles: frozenset[str]) -> bool:
    allowed = ACCESS[operation]
    return not allowed or bool(allowed & roles)
