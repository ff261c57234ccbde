"""Hostile input over HTTP (in process, both databases): identifiers that cannot be sealed or
addressed, documents nested to exhaust a parser, text that hides what it says, an empty batch.
Each is refused with 422 naming the field or the limit, before anything is sealed: the ledger
does not grow, and a retry of a valid request is never a 409 for a write reported as failed."""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from api.roles import RoleMap, RoleMapError
from audit.governance.service import DEFAULT_PACK
from tests.api.test_fail_closed import Served, txs
from wasm_rules import parse_ruleset

PACK = DEFAULT_PACK.read_text(encoding="utf-8")
SHIPPED_VERSION = parse_ruleset(PACK).version
VERSION_LINE = f'version = "{SHIPPED_VERSION}"'
TOML = {"content-type": "application/toml"}
JSON = {"content-type": "application/json"}
FORM = {"content-type": "application/x-www-form-urlencoded"}
DEEP_TOML = "junk = " + "[" * 500 + "]" * 500 + "\n"  # about 1 KB



def undecided(served: Served) -> int:
    """Entries other than sealed refusals and the summaries that speak for them: a refused request
    adds its refusal record, and the summary of its commit, and nothing else."""
    with served.runtime.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT kind, record FROM ledger_entries WHERE kind <> 'refusal'").all()
    return sum(1 for kind, rec in rows if not (kind == "decision.summary" and _refusals_only(bytes(rec))))


def _refusals_only(record: bytes) -> bool:
    entries = orjson.loads(record)["record"].get("entries") or [{}]
    return all(set(e) == {"refusal"} for e in entries)


def with_version(version: str) -> str:
    """The shipped pack under another version, as TOML source (the value escaped as TOML needs)."""
    escaped = "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04X}" for c in version)
    text = PACK.replace(VERSION_LINE, f'version = "{escaped}"', 1)
    assert text != PACK
    return text


def propose_toml(s: Served, source: str) -> Any:
    return s.client.post("/v1/rulesets", content=source.encode(), headers={**TOML, "x-test-role": "officer"})


def propose_json(s: Served, source: str) -> Any:
    return s.client.post("/v1/rulesets", content=orjson.dumps({"source": source}),
                         headers={**JSON, "x-test-role": "officer"})


def propose_form(s: Served, source: str) -> Any:
    return s.client.post("/console/rules", content=urlencode({"source": source}), follow_redirects=False,
                         headers={**FORM, "x-test-role": "officer"})


def fields(r: Any) -> list[str]:
    return [e["field"] for e in r.json().get("errors", [])]


# -- identifiers: checked before anything is sealed ------------------------------------------------

BAD_VERSIONS = {
    "a snowman (not Latin-1: the Location header cannot hold it)": "2027.1-\u2603",
    "NUL": "2027.1\x00",
    "ESC": "2027.1\x1b[31m",
    "a slash (no URL addresses the id)": "2027/1",
    "65 characters": "2" * 65,
    "a space": "2027 1",
    "a percent sign": "2027%2F1",
}


@pytest.mark.parametrize("send", [propose_toml, propose_json], ids=["toml", "json"])
def test_a_version_outside_the_identifier_set_is_refused_naming_it_and_nothing_is_sealed(
        served: Served, send: Any) -> None:
    before = undecided(served)
    for why, version in BAD_VERSIONS.items():
        r = send(served, with_version(version))
        assert r.status_code == 422, (why, r.status_code, r.text)
        assert r.json()["type"] == "urn:sealtrail:problem:ruleset_refused", why
        assert fields(r) == ["source.ruleset.version"], why
        assert "version" in r.json()["detail"] and "[A-Za-z0-9]" in r.json()["detail"], why
        assert undecided(served) == before, why
    assert [v.id for v in served.runtime.governance.list()] == [f"aml_core@{SHIPPED_VERSION}"]


def test_the_console_form_refuses_the_same_versions_and_seals_nothing(served: Served) -> None:
    before = undecided(served)
    for why, version in BAD_VERSIONS.items():
        r = propose_form(served, with_version(version))
        assert r.status_code == 422, (why, r.status_code)
        assert r.headers["content-type"].startswith("text/html"), why
        assert "nothing was recorded" in r.text and "[ruleset]: version" in r.text, why
        assert undecided(served) == before, why


def test_ruleset_and_rule_ids_are_refused_naming_their_field(served: Served) -> None:
    before = undecided(served)
    source = with_version("2027.1.0")
    r = propose_toml(served, source.replace('id = "aml_core"', 'id = "aml/core"', 1))
    assert r.status_code == 422 and fields(r) == ["source.ruleset.id"], r.text
    first_rule = parse_ruleset(PACK).rules[0].id
    r = propose_json(served, source.replace(f'id = "{first_rule}"', 'id = "R\u2603"', 1))
    assert r.status_code == 422 and fields(r) == ["source.rules[0].id"], r.text
    assert undecided(served) == before


def test_a_valid_version_answers_201_with_a_location_that_gets_it(served: Served) -> None:
    version = "2027.1.0-rc_1"  # every character class the identifier set allows
    r = propose_toml(served, with_version(version))
    assert r.status_code == 201, r.text
    assert r.headers["location"] == f"/v1/rulesets/aml_core@{version}"
    assert r.json()["id"] == f"aml_core@{version}" and r.json()["status"] == "proposed"
    got = served.client.get(r.headers["location"], headers={"x-test-role": "officer"})
    assert got.status_code == 200 and got.json() == r.json()
    again = propose_toml(served, with_version(version))  # the first was sealed and answered as such
    assert again.status_code == 409 and "already proposed" in again.json()["detail"]


def test_a_sealed_proposal_is_answered_as_sealed_though_the_database_stops_answering_after_it(
        served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the record is durable nothing is read before the answer: a read failing then (a lost
    connection) must not turn a sealed proposal into a 503 that a retry turns into a 409."""
    ledger = served.runtime.governance.ledger
    real_append, down = ledger.append_many, threading.Event()

    def append_then_fail_reads(*args: Any, **kw: Any) -> Any:
        receipts = real_append(*args, **kw)
        down.set()
        return receipts

    def refuse_reads(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if down.is_set():
            raise OperationalError(statement[:40], None, Exception("injected: connection lost"))

    monkeypatch.setattr(ledger, "append_many", append_then_fail_reads)
    event.listen(ledger.engine, "before_cursor_execute", refuse_reads)
    try:
        r = propose_toml(served, with_version("2027.5.0"))
    finally:
        event.remove(ledger.engine, "before_cursor_execute", refuse_reads)
        down.clear()
    assert r.status_code == 201, r.text
    assert r.json()["id"] == "aml_core@2027.5.0" and r.json()["status"] == "proposed"
    got = served.client.get(r.headers["location"], headers={"x-test-role": "officer"})
    assert got.status_code == 200 and got.json() == r.json()


def test_approve_and_activate_answer_from_the_sealed_record(served: Served) -> None:
    rid = propose_json(served, with_version("2027.2.0")).json()["id"]
    size = served.size()
    r = served.client.post(f"/v1/rulesets/{rid}/approve", headers={"x-test-role": "approver"})
    assert r.status_code == 200 and r.json()["status"] == "approved", r.text
    assert r.json()["approved"]["seq"] == size
    r = served.client.post(f"/v1/rulesets/{rid}/activate", headers={"x-test-role": "admin"})
    assert r.status_code == 200 and r.json()["status"] == "active", r.text
    assert r.json()["activated"]["seq"] == size + 1
    listed = served.client.get(f"/v1/rulesets/{rid}", headers={"x-test-role": "officer"}).json()
    assert listed == r.json()


# -- nesting: refused before any parser recurses ---------------------------------------------------

def test_a_deeply_nested_ruleset_is_refused_naming_the_limit_on_every_path(served: Served) -> None:
    before = undecided(served)
    deep = with_version("2027.3.0") + DEEP_TOML
    for send in (propose_toml, propose_json):
        r = send(served, deep)
        assert r.status_code == 422, r.text
        assert "MAX_TOML_NESTING" in r.json()["detail"] and fields(r) == ["source"]
    r = propose_form(served, deep)
    assert r.status_code == 422 and "MAX_TOML_NESTING" in r.text
    assert undecided(served) == before


def test_a_deeply_nested_json_body_is_refused_before_it_is_parsed(served: Served) -> None:
    before = undecided(served)
    for body in (b'{"source": "x", "junk": ' + b"[" * 500 + b"]" * 500 + b"}",
                 b"[" * 5000 + b"]" * 5000,
                 b'{"source": ' + b'{"a": ' * 40 + b"1" + b"}" * 41):
        r = served.client.post("/v1/rulesets", content=body, headers={**JSON, "x-test-role": "officer"})
        assert r.status_code == 422, r.text
        assert "MAX_JSON_NESTING" in r.json()["detail"] and fields(r) == ["body"]
    # brackets inside strings are text, not nesting: this one is refused as TOML, not as JSON
    r = propose_json(served, with_version("2027.4.0") + 'note = "' + "[" * 100 + '"\n')
    assert r.status_code == 422 and "MAX_JSON_NESTING" not in r.json()["detail"]
    assert undecided(served) == before


# -- the scoring path: an empty batch, text with control characters ---------------------------------

def test_an_empty_batch_is_refused_naming_the_body_as_the_single_endpoint_refuses_it(served: Served) -> None:
    before = undecided(served)
    for body in (b"[]", b'{"transactions": []}', b" [ ] "):
        r = served.client.post("/v1/decisions/batch", content=body, headers={**JSON, "x-test-role": "scorer"})
        assert r.status_code == 422, (body, r.text)
        assert r.json()["type"] == "urn:sealtrail:problem:message_refused"
        assert fields(r) == ["body"] and "no transaction" in r.json()["detail"]
        one = served.post(body)
        assert one.status_code == 422
    assert undecided(served) == before


def test_a_json_name_or_reference_with_a_control_character_is_refused_naming_it(served: Served) -> None:
    doc = orjson.loads(txs(1)[0])
    before = undecided(served)
    for path, value in ((("reference",), "REF\x00"), (("originator", "name"), "Alice\x1b[2J"),
                        (("beneficiary", "name"), "Bob\u0085"), (("originator", "name"), "Eve\nMallory")):
        bad = orjson.loads(orjson.dumps(doc))
        node = bad
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        r = served.post(orjson.dumps(bad))
        assert r.status_code == 422, (path, r.text)
        assert fields(r) == ["$." + ".".join(path)], r.text
        assert "control character" in r.json()["errors"][0]["message"]
        r = served.client.post("/v1/decisions/batch", content=orjson.dumps([doc, bad]),
                               headers={**JSON, "x-test-role": "scorer"})
        assert r.status_code == 422 and fields(r) == ["[1].$." + ".".join(path)], r.text
    assert undecided(served) == before


def test_an_annotation_with_a_bidi_override_is_refused_naming_the_note(served: Served) -> None:
    decided = served.post(txs(1)[0]).json()
    before = undecided(served)
    for note in ("approved \u202eSTR_FILED\u202c", "see \u2066case 12\u2069"):
        r = served.client.post(f"/v1/traces/{decided['trace_id']}/annotations",
                               content=orjson.dumps({"disposition": "NOTE", "note": note}),
                               headers={**JSON, "x-test-role": "officer"})
        assert r.status_code == 422, r.text
        assert fields(r) == ["note"] and "bidirectional control" in r.json()["detail"]
    assert undecided(served) == before



def test_a_deeply_nested_role_map_is_a_clear_configuration_error() -> None:
    deep = '[[principal]]\nsan_uri = "spiffe://x"\nroles = ["officer"]\njunk = ' + "[" * 500 + "]" * 500
    with pytest.raises(RoleMapError, match="MAX_TOML_NESTING"):
        RoleMap.from_toml(deep)
