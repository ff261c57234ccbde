"""``ledger verify`` says where ``recorded_at`` steps back along seq.

Trace queries by time window find their seq bounds by seeking ``recorded_at``, so they rely on it
never decreasing along the log. Every commit guarantees that (it takes at least the log's last
time); a ledger an older writer sealed may hold steps back. Verification cannot call them damage
(the bytes are sealed as they are) but names them, in one pass or cut into pieces.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from ledger import NoteSigner, Record, store
from ledger import append as append_mod
from ledger import verify as verify_mod
from ledger.append import CheckpointPolicy, Ledger
from ledger.scan import CHUNK
from ledger.verify import verify_ledger
from tests.conftest import Db, make_ledger

BODY = b'{"amount":"10.00","decision":"ALLOW"}'
T0 = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)  # after the genesis entry, sealed at the wall clock


def _records(n: int) -> list[Record]:
    return [Record.from_canonical_body("test.event", BODY) for _ in range(n)]


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


@pytest.fixture
def ledger(db: Db, signer: NoteSigner, clock: _Clock) -> Iterator[Ledger]:
    base = make_ledger(db, signer)
    yield Ledger(base.engine, signer, policy=CheckpointPolicy(1000, 3600), clock=clock)


def _older_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that does not hold recorded_at in order: it never sees the log's last time."""
    head = store.head

    def without_last_time(conn: object) -> tuple[object, ...]:
        return (*head(conn)[:5], None)  # type: ignore[arg-type]

    monkeypatch.setattr(append_mod.store, "head", without_last_time)


def _steps_warning(ledger: Ledger, signer: NoteSigner, workers: int = 1) -> list[str]:
    report = verify_ledger(ledger.engine, [signer.verifier], workers=workers)
    return [w for w in report.warnings if "steps back in time" in w]


def test_a_clock_that_steps_back_leaves_no_step_in_the_log(ledger: Ledger, signer: NoteSigner,
                                                           clock: _Clock) -> None:
    ledger.append_many(_records(3))
    clock.now = T0 - timedelta(hours=2)
    ledger.append_many(_records(3))
    ledger.checkpoint()
    assert _steps_warning(ledger, signer) == []


def test_a_step_back_an_older_writer_sealed_is_named_not_refused(
        ledger: Ledger, signer: NoteSigner, clock: _Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    _older_writer(monkeypatch)
    first = ledger.append_many(_records(3))
    clock.now = T0 - timedelta(minutes=5)
    stepped = ledger.append_many(_records(2))
    clock.now = T0 + timedelta(minutes=1)
    ledger.append_many(_records(2))
    clock.now = T0
    again = ledger.append_many(_records(1))
    ledger.checkpoint()
    warning, = _steps_warning(ledger, signer)  # verified: a warning, not damage
    assert f"at 2 entries, first at seq {stepped[0].seq}" in warning
    assert "2027-03-01T11:55:00.000000Z, after 2027-03-01T12:00:00.000000Z" in warning
    assert f"at seq {first[-1].seq})" in warning
    assert again[0].seq == stepped[0].seq + 4  # the second step is the entry counted with it


def test_a_step_at_the_edge_of_a_piece_is_found_in_parallel(
        ledger: Ledger, signer: NoteSigner, clock: _Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second piece compares its first entry with the last of the first piece."""
    monkeypatch.setattr(verify_mod, "_PIECE", CHUNK)
    _older_writer(monkeypatch)
    done = 1  # genesis
    while done < CHUNK:
        done += len(ledger.append_many(_records(min(4_000, CHUNK - done))))
    clock.now = T0 - timedelta(seconds=1)
    edge = ledger.append_many(_records(10))
    assert edge[0].seq == CHUNK
    ledger.checkpoint()
    serial = _steps_warning(ledger, signer, workers=1)
    assert serial == _steps_warning(ledger, signer, workers=2)
    assert len(serial) == 1 and f"at 1 entry, first at seq {CHUNK} " in serial[0]
