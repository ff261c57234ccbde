"""Sanctions lists as sealed records: a load seals the file as its payload, the lists in force are
a function of the sealed records, a list's bytes read back and parse to the same version, and a
refused file leaves nothing behind."""

from __future__ import annotations

from datetime import date

import orjson
import pytest
from sqlalchemy import func, select

from audit.decide.principal import Principal
from audit.errors import ListError, ListNotFoundError
from audit.screening.diff import diff_lists
from audit.screening.lists import LIST_KIND, list_history, lists_in_force, read_list, seal_list, withdraw_list
from inference.screening.entries import SanctionsList
from ledger import store
from ledger.append import Ledger

HEADER = b"entry_id,kind,name,aliases,dob,countries,identifiers,bics,programmes\n"
V1 = HEADER + (b"B-1,individual,Aleksandr KOVALEV,Alexander Kovalyov,1961-04-02,RU,Passport:7201234567:RU,,"
               b"RU-EXIT\n"
               b"B-2,entity,Tehran Imports Company,,,IR,,TEHRIRTH,IR-EXIT\n")
V2 = HEADER + (b"B-1,individual,Aleksandr KOVALEV,Alexander Kovalyov;Aleksandr Kovalyov,1961-04-02,RU,"
               b"Passport:7201234567:RU,,RU-EXIT\n"
               b"B-3,entity,Sevmorneftegaz Trading LLC,,,RU,,,RU-EXIT\n")
OPERATOR = Principal.local("list-admin")


def count(ledger: Ledger) -> int:
    with ledger.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(store.entries)).scalar_one())


def load(ledger: Ledger, data: bytes, name: str = "bank-exits") -> int:
    return seal_list(ledger, data, "internal-csv", name, OPERATOR, "quarterly exit list",
                     source="internal", published=date(2026, 11, 30)).seq


def test_a_load_is_a_sealed_record_whose_payload_is_the_file(ledger: Ledger) -> None:
    seq = load(ledger, V1)
    with ledger.engine.connect() as conn:
        raw = conn.execute(select(store.entries.c.record).where(store.entries.c.seq == seq)).scalar_one()
    env = orjson.loads(raw)
    assert env["kind"] == LIST_KIND
    body = env["record"]
    assert body["sha256"] == SanctionsList.digest(V1) == env["payload_sha256"]
    assert (body["name"], body["entries"], body["published"], body["withdrawn"]) == (
        "bank-exits", 2, "2026-11-30", False)
    assert body["principal"]["subject"] and body["rationale"] == "quarterly exit list"
    (in_force,) = lists_in_force(ledger.engine)
    back = read_list(ledger.engine, in_force)
    assert back.sha256 == body["sha256"] and [e.entry_id for e in back.entries] == ["B-1", "B-2"]


def test_the_lists_in_force_follow_the_sealed_records(ledger: Ledger) -> None:
    first = load(ledger, V1)
    load(ledger, V1, name="other")
    second = load(ledger, V2)
    assert [(x.name, x.seq) for x in lists_in_force(ledger.engine)] == [
        ("bank-exits", second), ("other", first + 1)]
    assert [(x.name, x.seq) for x in lists_in_force(ledger.engine, before=second)] == [
        ("bank-exits", first), ("other", first + 1)]
    withdraw_list(ledger, "other", OPERATOR, "merged into bank-exits")
    assert [x.name for x in lists_in_force(ledger.engine)] == ["bank-exits"]
    assert [x.withdrawn for x in list_history(ledger.engine, "other")] == [False, True]
    with pytest.raises(ListNotFoundError, match="no list 'other' is in force"):
        withdraw_list(ledger, "other", OPERATOR, "again")


def test_two_versions_differ_entry_by_entry(ledger: Ledger) -> None:
    load(ledger, V1)
    load(ledger, V2)
    old, new = (read_list(ledger.engine, x) for x in list_history(ledger.engine, "bank-exits"))
    d = diff_lists(old, new)
    assert [e.entry_id for e in d.added] == ["B-3"]
    assert [e.entry_id for e in d.removed] == ["B-2"]
    assert [(o.entry_id, f) for o, _, f in d.changed] == [("B-1", ("names",))]
    assert diff_lists(new, new).unchanged


@pytest.mark.parametrize(("data", "fmt", "name", "field", "why"), [
    (V1, "internal-csv", "Bank Exits", "name", "lower-case"),
    (V1, "pdf", "bank-exits", "format", "unknown list format"),
    (b"not,a,list\n1,2,3\n", "internal-csv", "bank-exits", "file", "internal-csv"),
    (HEADER, "internal-csv", "bank-exits", "file", "no entries"),
    (b"<sdnList", "ofac-xml", "bank-exits", "file", "ofac-xml"),
])
def test_a_refused_load_names_the_problem_and_seals_nothing(ledger: Ledger, data: bytes, fmt: str, name: str,
                                                           field: str, why: str) -> None:
    before = count(ledger)
    with pytest.raises(ListError, match=why) as exc:
        seal_list(ledger, data, fmt, name, OPERATOR, "try", source="internal")
    assert exc.value.field == field
    assert count(ledger) == before


def test_a_list_with_an_entry_no_name_of_which_can_be_screened_is_refused(ledger: Ledger) -> None:
    before = count(ledger)
    with pytest.raises(ListError, match=r"entry 'B-9'.*can be screened") as exc:
        seal_list(ledger, V1 + b"B-9,entity,***,,,,,,\n", "internal-csv", "bank-exits", OPERATOR, "try",
                  source="internal")
    assert exc.value.field == "file"
    assert count(ledger) == before


def test_a_rationale_with_control_characters_is_refused(ledger: Ledger) -> None:
    with pytest.raises(ListError) as exc:
        seal_list(ledger, V1, "internal-csv", "bank-exits", OPERATOR, "ok\u202eevil", source="internal")
    assert exc.value.field == "rationale"


def test_history_of_a_list_never_loaded_is_not_found(ledger: Ledger) -> None:
    with pytest.raises(ListNotFoundError):
        list_history(ledger.engine, "never")


@pytest.mark.requirement("OFAC-501.601-records")
def test_retention_keeps_the_bytes_of_a_list_as_long_as_decisions_of_the_period_used_it(
        ledger: Ledger) -> None:
    from datetime import UTC, datetime, timedelta

    from audit.screening.lists import lists_needed_since
    from ledger.retention import purge_expired

    load(ledger, V1)
    load(ledger, V2)  # V1 replaced now
    load(ledger, V1, name="gone")
    withdraw_list(ledger, "gone", OPERATOR, "merged")
    v1, v2 = SanctionsList.digest(V1), SanctionsList.digest(V2)
    assert lists_needed_since(ledger.engine, datetime(2000, 1, 1, tzinfo=UTC)) == {v1, v2}
    later = datetime.now(UTC) + timedelta(days=3650)
    keep = lists_needed_since(ledger.engine, later - timedelta(days=5 * 365))
    assert keep == {v2}  # in force still: decisions screened against it are retained
    done = purge_expired(ledger, timedelta(days=5 * 365), now=later, keep=keep)
    assert set(done.purged) == {v1} and v2 not in done.purged
    (in_force,) = lists_in_force(ledger.engine)
    assert read_list(ledger.engine, in_force).sha256 == v2  # still readable: replay screens against it
