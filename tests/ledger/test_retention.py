"""Retention, erasure and legal holds: payload bytes go, hashes and the chain stay."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from api.config import Settings
from ledger import LedgerError, LegalHoldError, NoteSigner, Record
from ledger.append import CheckpointPolicy, Ledger
from ledger.retention import (
    DEFAULT_RETENTION,
    Hold,
    active_holds,
    current_holds,
    place_hold,
    purge_expired,
    purge_payloads,
    release_hold,
)
from ledger.verify import verify_ledger
from tests.conftest import Db, make_ledger

FATF_FIVE_YEARS = timedelta(days=5 * 365 + 1)  # a bank that keeps FATF R.11's minimum


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2021, 6, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.fixture
def aged(db: Db, signer: NoteSigner) -> tuple[Ledger, Clock]:
    """Entries 1..10 stored in mid-2021, 11..20 in 2024; the clock then reads 2026-12."""
    base = make_ledger(db, signer)
    clock = Clock()
    lg = Ledger(base.engine, signer, policy=CheckpointPolicy(1000, 3600), clock=clock)
    lg.append_many([Record("test.event", {"n": i}, payload=b"old %d" % i) for i in range(10)])
    clock.now = datetime(2024, 6, 1, tzinfo=UTC)
    lg.append_many([Record("test.event", {"n": i}, payload=b"new %d" % i) for i in range(10)])
    clock.now = datetime(2026, 12, 2, tzinfo=UTC)
    return lg, clock


def payload(lg: Ledger, digest: str) -> bytes | None:
    with lg.engine.connect() as conn:
        got = conn.exec_driver_sql(
            f"SELECT data FROM ledger_payloads WHERE sha256 = '{digest}'").scalar()
    return None if got is None else bytes(got)


@pytest.mark.requirement("FATF-R11-retention", "EU-AMLR-77-retention", "EU-TFR-26-retention")
def test_expired_payloads_are_purged_and_verify_reports_them(aged: tuple[Ledger, Clock]) -> None:
    lg, _ = aged
    res = purge_expired(lg, FATF_FIVE_YEARS)
    assert sorted(res.purged) == sorted(sha(b"old %d" % i) for i in range(10))
    assert res.receipt is not None and res.held == []
    assert payload(lg, sha(b"old 3")) is None and payload(lg, sha(b"new 3")) == b"new 3"
    lg.checkpoint()
    report = verify_ledger(lg.engine, workers=1)
    assert {p.sha256 for p in report.purged} == set(res.purged)
    assert {p.purge_seq for p in report.purged} == {res.receipt.seq}
    assert report.payloads_present == 10
    assert purge_expired(lg).purged == []  # nothing left to do


@pytest.mark.requirement("FINRA-4511-retention", "OFAC-501.601-records", "FATF-R11-retention")
def test_the_default_period_is_ofac_s_ten_years_and_keeps_what_five_would_purge(
        aged: tuple[Ledger, Clock]) -> None:
    lg, _ = aged
    assert DEFAULT_RETENTION.days == 3653
    assert Settings.model_fields["retention_days"].default == 3653  # sealtrail's setting, the same
    assert purge_expired(lg).purged == []  # the 2021 payloads are 5.5 years old: kept
    assert payload(lg, sha(b"old 3")) == b"old 3"


@pytest.mark.requirement("FINRA-4511-retention")
def test_finra_six_years_keeps_more(aged: tuple[Ledger, Clock]) -> None:
    lg, _ = aged
    assert purge_expired(lg, timedelta(days=6 * 365 + 2)).purged == []


@pytest.mark.requirement("FATF-R11-retention", "EU-AMLR-77-retention", "GDPR-17-erasure")
def test_legal_hold_blocks_purge_until_released(aged: tuple[Ledger, Clock]) -> None:
    lg, _ = aged
    place_hold(lg, "CASE-2026-17", 3, 5, "SAR investigation 2026-17")
    with lg.engine.connect() as conn:
        assert [h.hold_id for h in active_holds(conn)] == ["CASE-2026-17"]
    placed = lg.size() - 1
    assert current_holds(lg.engine) == [Hold("CASE-2026-17", 3, 5, "SAR investigation 2026-17", placed)]
    res = purge_expired(lg, FATF_FIVE_YEARS)
    assert sorted(res.held) == sorted(sha(b"old %d" % i) for i in (2, 3, 4))
    assert len(res.purged) == 7 and payload(lg, sha(b"old 3")) == b"old 3"
    with pytest.raises(LegalHoldError, match="CASE-2026-17"):
        purge_payloads(lg, [sha(b"old 3")], "erasure order 9")
    assert payload(lg, sha(b"old 3")) == b"old 3"
    with pytest.raises(LedgerError, match="already active"):
        place_hold(lg, "CASE-2026-17", 1, 2, "again")
    release_hold(lg, "CASE-2026-17", "case closed")
    assert current_holds(lg.engine) == []
    assert len(purge_expired(lg, FATF_FIVE_YEARS).purged) == 3
    lg.checkpoint()
    assert len(verify_ledger(lg.engine, workers=1).purged) == 10


@pytest.mark.requirement("GDPR-17-erasure")
def test_erasure_order_purges_named_payloads(aged: tuple[Ledger, Clock]) -> None:
    lg, _ = aged
    res = purge_payloads(lg, [sha(b"new 1")], "erasure order 2026/44")
    assert res.purged == [sha(b"new 1")] and payload(lg, sha(b"new 1")) is None
    with pytest.raises(LedgerError, match="no stored"):
        purge_payloads(lg, [sha(b"new 1")], "again")
    with pytest.raises(LedgerError, match="reason"):
        purge_payloads(lg, [sha(b"new 2")], " ")


@pytest.mark.parametrize("args", [("bad id!", 1, 2, "r"), ("H1", 5, 2, "r"), ("H1", 1, 2, " ")])
def test_bad_holds_are_refused(aged: tuple[Ledger, Clock], args: tuple[str, int, int, str]) -> None:
    lg, _ = aged
    with pytest.raises(LedgerError):
        place_hold(lg, *args)
    with pytest.raises(LedgerError, match="no active legal hold"):
        release_hold(lg, "H404", "r")
