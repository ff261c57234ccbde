"""Helpers the simulator's tests share: a simulated payment's accounts and USD value, its patterns
by typology, and a fingerprint of a whole run."""

from __future__ import annotations

import hashlib
from collections import defaultdict

from inference.simulate import SimTx, usd_equivalent


def orig(s: SimTx) -> str:
    account = s.transaction.originator.account
    assert account is not None
    return account


def bene(s: SimTx) -> str:
    account = s.transaction.beneficiary.account
    assert account is not None
    return account


def usd(s: SimTx) -> float:
    return usd_equivalent(s.transaction.amount, s.transaction.currency)


def patterns(txs: list[SimTx], typology: str) -> list[list[SimTx]]:
    """The payments of each ``typology`` pattern, in pattern order."""
    groups: dict[int, list[SimTx]] = defaultdict(list)
    for s in txs:
        if s.typology == typology:
            groups[s.pattern].append(s)
    return [groups[k] for k in sorted(groups)]


def fingerprint(txs: list[SimTx], with_evasion: bool = False) -> str:
    """SHA-256 over every payment's canonical hash, time, label, typology and pattern (and evasion
    flag, ``with_evasion``)."""
    h = hashlib.sha256()
    for s in txs:
        extra = f"|{s.evasion}" if with_evasion else ""
        h.update(f"{s.transaction.sha256}|{s.at.isoformat()}|{s.label}|{s.typology}|{s.pattern}{extra}\n".encode())
    return h.hexdigest()
