"""The exports page: an officer creates a bundle through the form (the file appears, the list
shows it highlighted, its download link serves a zip that verifies offline); refused input
re-renders the form naming the field and writes nothing; roles without exports get 403 pages."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from audit.bundle.verify import verify_bundle
from ledger import NoteSigner
from ledger.keys import load_signer
from tests.api.console.conftest import Console
from tests.api.console.dom import dom
from tests.api.console.test_rules import size

ALL = {"from": "2000-01-01T00:00:00Z", "to": "2100-01-01T00:00:00Z"}


def files(c: Console) -> list[Path]:
    d = c.settings.exports_dir
    return sorted(d.iterdir()) if d.exists() else []


def create(c: Console, role: str = "officer", **values: str) -> object:
    return c.post_form("/console/exports", {"account": "", "decision": "", "rule": "", **values}, role=role)


def test_officer_creates_lists_and_downloads_a_bundle_that_verifies(console: Console, tmp_path: Path) -> None:
    console.score(6)
    r = create(console, **ALL)
    assert r.status_code == 303, r.text
    location = r.headers["location"]
    assert location.startswith("/console/exports?created=")
    bundle_id = location.split("=", 1)[1]
    assert (console.settings.exports_dir / f"{bundle_id}.zip").is_file()
    page = dom(console.get(location).text)
    created = page.one(id="export-created")
    assert "status" in created.attrs["class"] and "ok" in created.attrs["class"]
    assert bundle_id in created.text() and "6 decisions" in created.text()
    tr = page.one("table", id="exports").one("tr", data_bundle_id=bundle_id)
    assert tr.attrs.get("aria-current") == "true"
    assert "CN=sealtrail-officer,O=sealtrail dev" in tr.text()
    link = tr.one("a", class_="download")
    assert link.attrs["href"] == f"/v1/exports/{bundle_id}"
    got = console.get(link.attrs["href"], role="regulator")
    assert got.status_code == 200 and got.headers["content-type"] == "application/zip"
    out = tmp_path / "downloaded.zip"
    out.write_bytes(got.content)
    report = verify_bundle(out, [load_signer(console.settings.key_file).verifier], parallel=False)
    assert report.bundle_id == bundle_id and report.decisions == 6 == report.replayed
    assert report.pinned and report.warnings == ()


def test_create_and_list_on_each_dialect(console_any: Console) -> None:
    console_any.score(2)
    r = create(console_any, **ALL)
    assert r.status_code == 303, r.text
    bundle_id = r.headers["location"].split("=")[1]
    page = dom(console_any.get(r.headers["location"], role="regulator").text)
    assert page.one("table", id="exports").one("tr", data_bundle_id=bundle_id).has("a", class_="download")


def test_the_form_defaults_to_the_last_day_and_takes_what_was_just_decided(console: Console) -> None:
    console.score(3)
    page = dom(console.get("/console/exports").text)
    start = page.one("input", id="export-from").attrs["value"]
    end = page.one("input", id="export-to").attrs["value"]
    t0, t1 = datetime.fromisoformat(start), datetime.fromisoformat(end)
    assert (t1 - t0).total_seconds() == 86400 and t1 > datetime.now(UTC)
    r = create(console, **{"from": start, "to": end})
    assert r.status_code == 303, r.text
    assert "3 decisions" in dom(console.get(r.headers["location"]).text).one(id="export-created").text()


def test_a_time_without_an_offset_is_read_as_utc(console: Console) -> None:
    console.score(2)
    r = create(console, **{"from": "2000-01-01T00:00", "to": "2100-01-01T00:00", "decision": "ALLOW"})
    assert r.status_code == 303, r.text
    bundle_id = r.headers["location"].split("=")[1]
    table = dom(console.get("/console/exports").text).one("table", id="exports")
    tr = table.one("tr", data_bundle_id=bundle_id)
    assert "2000-01-01T00:00:00.000000Z" in tr.text() and "ALLOW" in tr.text()


@pytest.mark.parametrize(("values", "field", "says"), [
    ({"to": ALL["to"]}, "from", "required"),
    ({"from": "yesterday", "to": ALL["to"]}, "from", "not an ISO 8601 time"),
    ({"from": ALL["to"], "to": ALL["from"]}, "to", "later than from"),
    ({**ALL, "decision": "MAYBE"}, "decision", "not one of"),
    ({**ALL, "rule": "lower"}, "rule", "not a rule id"),
    ({"from": "2001-01-01T00:00:00Z", "to": "2001-01-02T00:00:00Z"}, None, "nothing to export"),
])
def test_refused_input_is_shown_beside_its_field_and_nothing_is_written(
        console: Console, values: dict[str, str], field: str | None, says: str) -> None:
    console.score(2)
    before = size(console)
    r = create(console, **values)
    assert r.status_code == 422
    page = dom(r.text)
    assert page.has(id="export-errors")
    where = page.one(id=f"export-{field}-error") if field else page.one(id="export-errors")
    assert says in where.text()
    if field:
        assert page.one(id=f"export-{field}").attrs.get("aria-invalid") == "true"
    kept = page.one("input", id="export-to").attrs["value"]
    assert kept == values.get("to", "")  # what the user typed is kept
    assert files(console) == [] and size(console) == before
    assert not [tr for tr in page.one("table", id="exports").all("tr") if "data-bundle-id" in tr.attrs]


def test_a_bundle_the_server_cannot_sign_is_a_409_and_writes_nothing(console: Console) -> None:
    console.score(2)
    rt = console.runtime
    rt.ledger.rotate_key(NoteSigner.generate(rt.ledger.origin))  # the key file is now stale
    before = size(console)
    r = create(console, **ALL)
    assert r.status_code == 409
    assert "active key" in dom(r.text).one(id="export-errors").text()
    assert files(console) == [] and size(console) == before


@pytest.mark.parametrize("role", ["scorer", "admin", "approver"])
def test_roles_without_exports_get_403_pages(console: Console, role: str) -> None:
    console.score(1)
    r = console.get("/console/exports", role=role)
    assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
    before = size(console)
    assert create(console, role=role, **ALL).status_code == 403
    assert files(console) == [] and size(console) == before


def test_a_regulator_lists_and_downloads_but_sees_the_officers_export(console: Console) -> None:
    console.score(2)
    bundle_id = create(console, **ALL).headers["location"].split("=")[1]
    page = dom(console.get("/console/exports", role="regulator").text)
    assert not page.has(id="export-created")  # no ?created=: nothing highlighted
    tr = page.one("table", id="exports").one("tr", data_bundle_id=bundle_id)
    assert "aria-current" not in tr.attrs and tr.has("a", class_="download")
    assert page.has("form", id="export-form")  # regulators may create too (api.access)
