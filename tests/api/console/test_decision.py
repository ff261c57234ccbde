"""The decision page: the sealed record as it is, the payload only for roles that may read it,
annotations sealed as new ledger records (refused input writes nothing), and the proof data."""

from __future__ import annotations

import base64
import html
import json
import re
from typing import Any

import pytest

from audit.decide.fixed_point import body_score
from audit.query.traces import get_trace
from ledger import store
from ledger.keys import load_signer
from ledger.retention import purge_payloads
from tests.api.console.conftest import Console
from tests.api.test_fail_closed import txs


def size(console: Console) -> int:
    with console.runtime.engine.connect() as conn:
        return int(store.tail(conn)[0])


def proof_data(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="proof-data">(.*?)</script>', page, re.S)
    assert m is not None, "no proof data on the page"
    data: dict[str, Any] = json.loads(m.group(1))
    return data


def field_error(page: str, name: str) -> str | None:
    m = re.search(r'<p class="field-error" id="e-' + name + r'">(.*?)</p>', page, re.S)
    return html.unescape(m.group(1)) if m else None


@pytest.fixture
def decision(console: Console) -> dict[str, Any]:
    """A decision in which rules fired, with the payment it was made on."""
    for d, tx in zip(console.score(40), txs(40), strict=True):
        if d["fired"]:
            return {**d, "tx": json.loads(tx)}
    raise AssertionError("no rule fired in the sample")


def url(d: dict[str, Any]) -> str:
    return f"/console/decisions/{d['trace_id']}"


def test_page_shows_what_the_record_seals(console: Console, decision: dict[str, Any]) -> None:
    r = console.get(url(decision))
    assert r.status_code == 200
    page = html.unescape(r.text)
    body = get_trace(console.runtime.engine, decision["trace_id"]).body  # type: ignore[union-attr]
    for sealed in (body["model"]["sha256"], body["model"]["backend"], body["rules"]["module_sha256"],
                   f'{body["rules"]["ruleset_id"]}@{body["rules"]["version"]}', str(body_score(body)),
                   body["principal"]["subject"], body["principal"]["issuer"],
                   body["principal"]["fingerprint_sha256"], *body["principal"]["sans"],
                   body["features"]["sha256"], decision["ledger"]["leaf_hash"]):
        assert sealed in page
    assert f'<span class="badge {decision["decision"]}">' in r.text
    for hit in decision["fired"]:  # each fired rule with the reason it states
        assert hit["id"] in page and hit["reason"] in page
    latency = r.text.split('id="latency"')[1].split("</table>")[0]
    for stage, us in body["latency_us"].items():
        assert f'<th scope="row">{stage}</th><td class="num">{us:,}</td>' in latency
    assert "amount_usd" in r.text  # feature values under their schema's names
    assert r.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("role", ["officer", "regulator"])
def test_payload_roles_see_the_payment(console: Console, decision: dict[str, Any], role: str) -> None:
    r = console.get(url(decision), role=role)
    assert r.status_code == 200
    assert 'data-state="present"' in r.text
    assert decision["tx"]["originator"]["name"] in html.unescape(r.text)


def test_admin_sees_the_decision_but_the_payload_withheld(console: Console, decision: dict[str, Any]) -> None:
    r = console.get(url(decision), role="admin")
    assert r.status_code == 200
    assert "Payload withheld" in r.text and 'data-state="withheld"' in r.text
    page = html.unescape(r.text)
    assert decision["tx"]["originator"]["name"] not in page
    assert decision["tx"]["originator"]["account"] not in page
    assert 'id="annotate"' not in r.text  # admin may not annotate: no form


def test_purged_payload_says_so_and_the_proof_stays(console: Console, decision: dict[str, Any]) -> None:
    sha = get_trace(console.runtime.engine, decision["trace_id"]).payload_sha256  # type: ignore[union-attr]
    assert sha is not None
    assert purge_payloads(console.runtime.ledger, [sha], "erasure order 8").purged == [sha]
    r = console.get(url(decision))
    assert r.status_code == 200
    assert "Payload purged" in r.text and 'data-state="purged"' in r.text
    assert decision["tx"]["originator"]["name"] not in html.unescape(r.text)
    assert proof_data(r.text)["index"] == decision["ledger"]["seq"]


@pytest.mark.parametrize("trace_id", ["01a23b73-01ab-7086-9124-75c0a2542a24", "not-a-trace", "1' OR '1'='1"])
def test_unknown_trace_is_a_404_page(console: Console, trace_id: str) -> None:
    r = console.get(f"/console/decisions/{trace_id}")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("text/html")
    assert "Not found" in r.text


@pytest.mark.parametrize("role", ["scorer", "approver"])
def test_roles_without_traces_get_are_refused(console: Console, decision: dict[str, Any], role: str) -> None:
    r = console.get(url(decision), role=role)
    assert r.status_code == 403
    assert r.headers["content-type"].startswith("text/html")


def test_proof_data_is_the_exact_sealed_bytes_and_the_ledger_key(console: Console,
                                                                  decision: dict[str, Any]) -> None:
    r = console.get(url(decision))
    data = proof_data(r.text)
    detail = get_trace(console.runtime.engine, decision["trace_id"])
    assert detail is not None
    assert base64.b64decode(data["record_bytes"]) == detail.record
    assert data["index"] == detail.seq and data["size"] > detail.seq
    assert "leaf_hash" not in data  # the browser computes it; it is given no hash to trust
    vkey = load_signer(console.settings.key_file).verifier.vkey
    assert data["vkey"] == vkey and f'id="proof-vkey">{vkey}<' in r.text
    assert 'id="proof-status" class="status pending" role="status"' in r.text
    assert 'data-state="pending"' in r.text
    assert '<script src="/console/static/proof.js" defer></script>' in r.text
    assert "needs JavaScript" in r.text  # what a browser without scripts says


def post(console: Console, d: dict[str, Any], role: str = "officer", **fields: str) -> Any:
    form = {"disposition": "NOTE", "note": "", "correction_decision": "", "correction_reason": "", **fields}
    return console.post_form(f"{url(d)}/annotations", form, role=role)


def test_annotation_round_trip_is_a_new_ledger_entry(console: Console, decision: dict[str, Any]) -> None:
    before = size(console)
    r = post(console, decision, disposition="FALSE_POSITIVE", note="Known payroll run;\nchecked with RM.")
    assert r.status_code == 303 and r.headers["location"] == url(decision)
    assert size(console) == before + 1
    page = console.get(r.headers["location"]).text
    table = page.split('id="annotation-entries"')[1].split("</table>")[0]
    assert "FALSE_POSITIVE" in table and "Known payroll run;\nchecked with RM." in table
    assert "CN=sealtrail-officer" in table
    assert f'aria-label="Annotation record {before}">{before}</a>' in table  # its seq, linked
    assert "never edited" in page
    detail = get_trace(console.runtime.engine, decision["trace_id"])
    assert detail is not None and detail.record == base64.b64decode(proof_data(page)["record_bytes"])


def test_a_correction_states_the_outcome_it_should_have_been(console: Console,
                                                            decision: dict[str, Any]) -> None:
    r = post(console, decision, disposition="CORRECTION", note="Wrong list version.",
             correction_decision="ALLOW", correction_reason="The country left the grey list.")
    assert r.status_code == 303
    table = console.get(url(decision)).text.split('id="annotation-entries"')[1]
    assert '<span class="badge ALLOW">ALLOW</span>' in table and "left the grey list" in table


def test_annotation_record_has_its_own_page(console: Console, decision: dict[str, Any]) -> None:
    post(console, decision, disposition="ESCALATED", note="to MLRO")
    console.runtime.ledger.checkpoint()  # the annotation is newer than the fixture's checkpoint
    page = console.get(url(decision)).text
    ann_id = re.findall(r'<tr data-trace-id="([0-9a-f-]{36})">', page.split('id="annotation-entries"')[1])[0]
    r = console.get(f"/console/decisions/{ann_id}")
    assert r.status_code == 200
    assert re.search(r"<h1>\s*Annotation\s", r.text)
    assert f'href="/console/decisions/{decision["trace_id"]}"' in r.text and "to MLRO" in r.text
    assert 'id="annotate"' not in r.text  # annotations are not annotated
    assert proof_data(r.text)["index"] > decision["ledger"]["seq"]


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"note": ""}, "note", "non-empty"),
    ({"note": "   \n"}, "note", "non-empty"),
    ({"note": "x" * 10_001}, "note", "more than 10,000"),
    ({"note": "ok", "disposition": "MAYBE"}, "disposition", "not one of"),
    ({"note": "ok", "disposition": "CORRECTION"}, "correction", "needs exactly"),
    ({"note": "ok", "disposition": "CORRECTION", "correction_decision": "ALLOW"}, "correction_reason",
     "non-empty"),
    ({"note": "ok", "disposition": "CORRECTION", "correction_decision": "MAYBE", "correction_reason": "r"},
     "correction_decision", "not one of"),
    ({"note": "ok", "disposition": "NOTE", "correction_decision": "BLOCK", "correction_reason": "r"},
     "correction", "only for disposition CORRECTION"),
])
def test_refused_annotation_writes_nothing_and_says_why(
        console: Console, decision: dict[str, Any], fields: dict[str, str], field: str, message: str) -> None:
    before = size(console)
    r = post(console, decision, **fields)
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("text/html")
    assert size(console) == before
    assert message in (field_error(r.text, field) or ""), r.text
    if fields["note"].strip() and len(fields["note"]) < 100:
        assert f">{fields['note']}</textarea>" in r.text  # what was typed is kept
    assert 'id="no-annotations"' in r.text


@pytest.mark.parametrize("role", ["approver", "admin", "regulator", "scorer"])
def test_only_officers_may_annotate(console: Console, decision: dict[str, Any], role: str) -> None:
    before = size(console)
    r = post(console, decision, role=role, note="not mine to write")
    assert r.status_code == 403
    assert r.headers["content-type"].startswith("text/html")
    assert size(console) == before


def test_annotating_an_unknown_trace_is_a_404(console: Console, decision: dict[str, Any]) -> None:
    before = size(console)
    r = post(console, {"trace_id": "01a23b73-01ab-7086-9124-75c0a2542a24"}, note="nothing there")
    assert r.status_code == 404
    assert size(console) == before


def test_a_hostile_note_is_rendered_escaped(console: Console, decision: dict[str, Any]) -> None:
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    assert post(console, decision, note=hostile).status_code == 303
    page = console.get(url(decision)).text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    # refused input is echoed back escaped too
    r = post(console, decision, note="ok", disposition="NOPE", correction_reason="</script><b>")
    assert "</script><b>" not in r.text


def test_officer_sees_the_form_with_every_disposition(console: Console, decision: dict[str, Any]) -> None:
    page = console.get(url(decision)).text
    assert f'action="{url(decision)}/annotations"' in page
    for d in ("STR_FILED", "FALSE_POSITIVE", "TRUE_POSITIVE", "ESCALATED", "CLOSED", "CORRECTION", "NOTE"):
        assert f'<option value="{d}"' in page
    assert '<label for="a-note">' in page and '<label for="a-disposition">' in page


def test_annotating_what_is_no_decision_is_refused(console: Console, decision: dict[str, Any]) -> None:
    post(console, decision, note="first")
    page = console.get(url(decision)).text
    ann_id = re.findall(r'<tr data-trace-id="([0-9a-f-]{36})">', page.split('id="annotation-entries"')[1])[0]
    before = size(console)
    r = post(console, {"trace_id": ann_id}, note="a note on a note")
    assert r.status_code == 422
    assert "only decisions are annotated" in r.text
    assert size(console) == before


def test_other_record_kinds_show_their_sealed_body(console: Console, decision: dict[str, Any]) -> None:
    with console.runtime.engine.connect() as conn:
        trace_id, kind = conn.exec_driver_sql(
            "SELECT trace_id, kind FROM ledger_entries WHERE kind NOT IN ('decision', 'annotation') "
            "ORDER BY seq LIMIT 1").one()
    r = console.get(f"/console/decisions/{trace_id}")
    assert r.status_code == 200
    assert f"Ledger record ({kind})" in r.text
    assert '<pre class="code">{' in r.text  # the record, as sealed
    assert 'id="annotate"' not in r.text and 'id="payload"' not in r.text
    assert proof_data(r.text)["record_bytes"]


def test_page_shows_the_account_risk_the_record_states(console: Console, decision: dict[str, Any]) -> None:
    page = html.unescape(console.get(url(decision)).text)
    risk = get_trace(console.runtime.engine, decision["trace_id"]).body["account_risk"]  # type: ignore[union-attr]
    assert 'id="account-risk"' in page
    assert f'{risk["max_milli"] / 1000:.3f} points' in page
    for side in ("originator", "beneficiary"):
        if risk[side]:
            assert risk[side]["account"] in page and f'{risk[side]["after_milli"] / 1000:.3f}' in page
    assert ("account alert:" in page) is bool(risk["alerts"])


def test_page_shows_the_reason_codes_the_record_states(console: Console) -> None:
    answers = console.score(60, seed=76)
    said = next(a for a in answers if a["explanation"] and a["explanation"]["reasons"])
    page = html.unescape(console.get(url(said)).text)
    reasons = page.split('id="reasons">')[1].split("</dd>")[0]
    for r in said["explanation"]["reasons"]:
        assert f'{r["code"]}</span> +{r["contribution_milli"] / 1000:.3f}: {r["text"]}' in reasons
    quiet = next(a for a in answers if a["explanation"] is None)
    page = console.get(url(quiet)).text
    quiet_reasons = page.split('id="reasons">')[1]
    assert "no reasons recorded: allowed with a score below 0.5, or not scored" in quiet_reasons


def test_an_admin_sees_the_decision_but_not_its_annotations(console: Console,
                                                             decision: dict[str, Any]) -> None:
    post(console, decision, disposition="ESCALATED", note="sent to the MLRO")  # tipping-off: case state
    console.runtime.ledger.checkpoint()
    officer = console.get(url(decision)).text
    table = officer.split('id="annotation-entries"')[1]
    ann_id = re.findall(r'<tr data-trace-id="([0-9a-f-]{36})">', table)[0]
    admin = console.get(url(decision), role="admin")
    assert admin.status_code == 200 and "sent to the MLRO" not in admin.text and "ESCALATED" not in admin.text
    assert 'id="annotations-withheld"' in admin.text and 'id="annotation-entries"' not in admin.text
    r = console.get(f"/console/decisions/{ann_id}", role="admin")
    assert r.status_code == 403 and "case state" in r.text and "sent to the MLRO" not in r.text
    assert console.get(f"/console/decisions/{ann_id}", role="regulator").status_code == 200
