"""/v1/alerts, /v1/cases and /v1/outcomes over HTTP, in process, both databases: the queue pages by
cursor in each view; every action is a sealed record the next read shows; a BLOCK is released
only by a second officer, and the scorer that asked for the decision (and no other) reads the
outcome; refused requests seal nothing and name their field; scorers and admins see no alert or
case."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from sqlalchemy import select
from starlette.testclient import TestClient

from api import ops
from api.app import create_app
from api.certs import ORGANISATION, DevPki, create_dev_pki, role_uri
from api.config import Settings
from api.openapi import examples
from api.routes.cases import AlertActionIn, BulkAssignIn, CaseActionIn
from audit.cases.store import catch_up
from audit.cases.tables import alerts
from audit.decide.runtime import Runtime
from ledger import store
from tests.api.problem_doc import problem
from tests.api.test_fail_closed import JSON, _Outage, _with_peer, txs
from tests.conftest import Db


def _issue(pki: DevPki, cn: str, role: str) -> x509.Certificate:
    """A client certificate from the dev CA for a second principal of ``role`` (another subject)."""
    ca_key = serialization.load_pem_private_key(pki.ca.key_path.read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca = x509.load_pem_x509_certificate(pki.ca.cert_path.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANISATION),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    return (x509.CertificateBuilder().subject_name(name).issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(role_uri(role))]),
                           False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
            .sign(ca_key, hashes.SHA256()))


@dataclass
class Desk:
    """The app over a fresh ledger, a caller per dev role plus a second officer and scorer."""

    client: TestClient
    runtime: Runtime[Any]
    who: dict[str, dict[str, str]]  # caller -> {subject, fingerprint_sha256}

    def get(self, caller: str, path: str, **params: Any) -> Any:
        return self.client.get(path, params=params, headers={"x-test-role": caller})

    def post(self, caller: str, path: str, body: Any) -> Any:
        return self.client.post(path, json=body, headers={"x-test-role": caller})

    def act(self, caller: str, seq: int, **body: Any) -> Any:
        return self.post(caller, f"/v1/alerts/{seq}/actions", body)

    def entries(self) -> int:
        with self.runtime.engine.connect() as conn:
            return store.tail(conn)[0]

    def sealed_since(self, seq: int) -> list[tuple[str, dict[str, Any]]]:
        """The kind and body of every record sealed at ``seq`` or after, in order."""
        e = store.entries
        with self.runtime.engine.connect() as conn:
            return [(str(k), orjson.loads(r)["record"]) for k, r in conn.execute(
                select(e.c.kind, e.c.record).where(e.c.seq >= seq).order_by(e.c.seq))]

    def alerts(self, **params: Any) -> list[dict[str, Any]]:
        """Every alert of a view, walked page by page (``limit`` per page)."""
        out: list[dict[str, Any]] = []
        cursor = None
        while True:
            r = self.get("officer", "/v1/alerts", **params, **({"cursor": cursor} if cursor else {}))
            assert r.status_code == 200, r.text
            page = r.json()
            assert len(page["items"]) <= params.get("limit", 50)
            out += page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                return out

    def decide(self, caller: str, n: int, seed: int) -> None:
        r = self.client.post("/v1/decisions/batch", content=b"[" + b",".join(txs(n, seed=seed)) + b"]",
                             headers={**JSON, "x-test-role": caller})
        assert r.status_code == 200, r.text


@contextmanager
def desk_over(db: Db, tmp_path: Path) -> Iterator[Desk]:
    pki = create_dev_pki(tmp_path / "certs")
    s = Settings.model_validate({"db": db.url, "keys": tmp_path / "keys", "roles_file": pki.roles_file,
                                 "decision_timeout_ms": 2000})
    store.connect(db.url, create_file=True).dispose()
    ops.initialise(s)
    rt = Runtime.open(s)
    certs = {r: x509.load_pem_x509_certificate(c.cert_path.read_bytes()) for r, c in pki.clients.items()}
    certs["officer2"] = _issue(pki, "sealtrail-officer-2", "officer")
    certs["scorer2"] = _issue(pki, "sealtrail-scorer-2", "scorer")
    ders = {k: c.public_bytes(Encoding.DER) for k, c in certs.items()}
    who = {k: {"subject": c.subject.rfc4514_string(),
               "fingerprint_sha256": c.fingerprint(hashes.SHA256()).hex()} for k, c in certs.items()}
    try:
        with TestClient(_with_peer(create_app(s, runtime=rt), ders)) as client:
            yield Desk(client, rt, who)
    finally:
        rt.close()


@pytest.fixture
def desk(db: Db, tmp_path: Path) -> Iterator[Desk]:
    """A few hundred decisions: most by ``scorer``, some by ``scorer2``."""
    with desk_over(db, tmp_path) as d:
        d.decide("scorer", 300, seed=21)
        d.decide("scorer2", 100, seed=5)
        yield d


def first(items: list[dict[str, Any]], **want: Any) -> dict[str, Any]:
    return next(a for a in items if all(a[k] == v for k, v in want.items()))


# -- the queue ----------------------------------------------------------------------------------


def test_the_queue_pages_by_cursor_in_each_view(desk: Desk) -> None:
    catch_up(desk.runtime.engine)  # what the first read does; here the test reads the table itself
    with desk.runtime.engine.connect() as conn:
        stored = [tuple(r) for r in conn.execute(select(alerts.c.seq, alerts.c.outcome, alerts.c.fired,
                                                        alerts.c.case_id).order_by(alerts.c.seq.desc()))]
    seqs = [s for s, *_ in stored]
    assert len(seqs) > 10
    everything = desk.alerts(limit=3)
    assert [a["seq"] for a in everything] == seqs  # every alert is open at first; newest first
    assert [a["seq"] for a in desk.alerts(limit=4, order="oldest")] == seqs[::-1]
    assert [a["seq"] for a in desk.alerts(view="all", limit=7)] == seqs
    assert [a["seq"] for a in desk.alerts(view="unassigned", limit=5)] == seqs
    assert desk.alerts(view="closed") == desk.alerts(view="mine") == desk.alerts(view="overdue") == []
    holds = [s for s, outcome, *_ in stored if outcome == "HOLD"]
    assert holds and [a["seq"] for a in desk.alerts(outcome="HOLD", limit=1)] == holds
    rule = next(f for _, _, f, _ in stored if f).split(",")[0]  # an account alert alone fires no rule
    assert [a["seq"] for a in desk.alerts(rule=rule, limit=2)] == [s for s, _, f, _ in stored
                                                                   if rule in f.split(",")]
    case = stored[-1][3]
    assert [a["seq"] for a in desk.alerts(case_id=case)] == [s for s, *_, c in stored if c == case]

    a = everything[0]
    assert a["state"] == "new" and a["assignee"] is None and a["overdue"] is False
    assert a["scorer_fingerprint_sha256"] in (desk.who["scorer"]["fingerprint_sha256"],
                                              desk.who["scorer2"]["fingerprint_sha256"])
    assert set(a["account_alerts"]) <= {"originator", "beneficiary"}
    assert a["fired"] == (stored[0][2].split(",") if stored[0][2] else [])  # none: an account alert alone
    one = {**a, "screening_hits": []}  # the queue's row and the sanctions entries met: none here
    assert desk.get("officer", f"/v1/alerts/{a['seq']}").json() == one
    assert desk.get("regulator", f"/v1/alerts/{a['seq']}").json() == one  # regulators read

    mine, done = everything[1], first(everything, outcome="REVIEW")
    assert desk.act("officer", mine["seq"], action="assign", assignee="me").status_code == 201
    closed = desk.act("officer", done["seq"], action="close", disposition="FALSE_POSITIVE",
                      rationale="payroll run, employer verified")
    assert closed.status_code == 201, closed.text
    assert [x["seq"] for x in desk.alerts(view="mine")] == [mine["seq"]]
    assert desk.get("officer2", "/v1/alerts", view="mine").json()["items"] == []  # "mine" is the caller's
    assert [x["seq"] for x in desk.alerts(view="closed")] == [done["seq"]]
    assert [x["seq"] for x in desk.alerts(view="unassigned", limit=9)] == [
        s for s in seqs if s not in (mine["seq"], done["seq"])]
    assert [x["seq"] for x in desk.alerts(limit=9)] == [s for s in seqs if s != done["seq"]]

    # overdue by the ledger's clock (the one that stamps the records), passed in: two months on
    real = desk.runtime.ledger.clock
    desk.runtime.ledger.clock = lambda: real() + timedelta(days=61)
    late = desk.alerts(view="overdue", limit=4)
    assert sorted(x["seq"] for x in late) == sorted(s for s in seqs if s != done["seq"])
    assert [(x["review_due"], x["seq"]) for x in late] == sorted((x["review_due"], x["seq"]) for x in late)
    assert all(x["overdue"] for x in late)
    assert desk.get("officer", f"/v1/alerts/{done['seq']}").json()["overdue"] is False  # closed


def test_cursors_are_bound_to_their_query_and_bad_filters_are_refused(desk: Desk) -> None:
    page = desk.get("officer", "/v1/alerts", limit=2).json()
    assert page["next_cursor"]
    seqs = [a["seq"] for a in page["items"]]
    assert desk.post("officer", "/v1/alerts/actions", {"alerts": seqs, "action": "assign",
                                                       "assignee": "me"}).json()["applied"] == 2
    # a colleague may follow the cursor of a shared view; the cursor of "mine" is the caller's own
    assert desk.get("officer2", "/v1/alerts", limit=2, cursor=page["next_cursor"]).status_code == 200
    mine = desk.get("officer", "/v1/alerts", view="mine", limit=1).json()
    assert mine["next_cursor"]
    assert desk.get("officer", "/v1/alerts", view="mine", cursor=mine["next_cursor"]).json()["items"][0][
        "seq"] == seqs[1]
    cases = desk.get("officer", "/v1/cases", limit=1).json()
    before = desk.entries()  # from here on every request is refused: nothing is sealed, not even a read
    problem(desk.get("officer2", "/v1/alerts", view="mine", cursor=mine["next_cursor"]), 422,
            "invalid_request", "cursor")
    problem(desk.get("officer", "/v1/alerts", view="closed", cursor=page["next_cursor"]), 422,
            "invalid_request", "cursor")
    problem(desk.get("officer", "/v1/alerts", outcome="HOLD", cursor=page["next_cursor"]), 422,
            "invalid_request", "cursor")
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("/v1/alerts", {"view": "later"}, "view"), ("/v1/alerts", {"cursor": "bm9wZQ"}, "cursor"),
        ("/v1/alerts", {"cursor": "!!"}, "cursor"), ("/v1/alerts", {"limit": 0}, "limit"),
        ("/v1/alerts", {"limit": 501}, "limit"), ("/v1/alerts", {"outcome": "MAYBE"}, "outcome"),
        ("/v1/alerts", {"order": "random"}, "order"), ("/v1/alerts", {"rule": "x;drop"}, "rule"),
        ("/v1/alerts", {"case_id": -1}, "case_id"), ("/v1/cases", {"view": "overdue"}, "view"),
        ("/v1/cases", {"cursor": "bm9wZQ"}, "cursor"), ("/v1/cases", {"limit": 0}, "limit")]
    for path, params, field in bad:
        problem(desk.get("officer", path, **params), 422, "invalid_request", field)
    problem(desk.get("officer", "/v1/cases", view="all", cursor=cases["next_cursor"]), 422,
            "invalid_request", "cursor")
    polls: list[tuple[dict[str, Any], str]] = [({"after": -1}, "after"), ({"after": "x"}, "after"),
                                               ({"limit": 0}, "limit")]
    for params, field in polls:
        problem(desk.get("scorer", "/v1/outcomes", **params), 422, "invalid_request", field)
    problem(desk.get("officer", "/v1/alerts/999999999"), 404, "not_found", "seq")
    problem(desk.get("officer", "/v1/alerts/-3"), 422, "invalid_request", "seq")
    problem(desk.get("officer", "/v1/cases/999999999"), 404, "not_found", "case_id")
    assert desk.entries() == before


# -- actions ------------------------------------------------------------------------------------


def test_actions_are_sealed_and_the_next_read_shows_them(desk: Desk) -> None:
    a = first(desk.alerts(view="all", limit=500), outcome="REVIEW")
    before = desk.entries()
    officer2 = desk.who["officer2"]
    steps: list[tuple[str, dict[str, Any]]] = [
        ("officer", {"action": "assign", "assignee": officer2}),
        ("officer2", {"action": "start_review"}),
        ("officer2", {"action": "escalate", "rationale": "pattern across three accounts"}),
        ("officer", {"action": "close", "disposition": "NO_FURTHER_ACTION",
                     "rationale": "customer documented the source of funds"})]
    receipts = []
    for caller, body in steps:
        r = desk.act(caller, a["seq"], **body)
        assert r.status_code == 201, r.text
        receipts.append(r.json())
    assert desk.entries() == before + 8  # each action, and the read its answer is (it shows the alert)
    assert [r["seq"] for r in receipts] == list(range(before, before + 8, 2))
    last = receipts[-1]
    assert (last["action"], last["alert_seq"], last["case_id"]) == ("close", a["seq"], a["case_id"])
    assert [r["alert"]["state"] for r in receipts] == ["assigned", "in_review", "escalated", "closed"]
    now = desk.get("regulator", f"/v1/alerts/{a['seq']}").json()
    assert now == last["alert"]
    assert (now["state"], now["disposition"], now["assignee"], now["last_event_seq"], now["events"]) == (
        "closed", "NO_FURTHER_ACTION", officer2, last["seq"], 4)
    assert now["closed_at"] == last["recorded_at"] and now["closed_by"] == [desk.who["officer"]]
    # the receipt names the sealed record: the trace API reads it back with the same leaf hash
    sealed = desk.get("officer", f"/v1/traces/{last['trace_id']}").json()
    assert (sealed["kind"], sealed["seq"], sealed["leaf_hash"]) == (
        "case_event", last["seq"], last["leaf_hash"])
    assert sealed["record"]["record"]["rationale"] == "customer documented the source of funds"

    case = desk.get("regulator", f"/v1/cases/{a['case_id']}").json()
    assert a["seq"] in [x["seq"] for x in case["alerts"]]
    assert [(e["seq"], e["action"], e["principal"]["subject"], e["rationale"], e["applied"], e["why"])
            for e in case["events"]] == [
        (receipts[0]["seq"], "assign", desk.who["officer"]["subject"], None, True, None),
        (receipts[1]["seq"], "start_review", officer2["subject"], None, True, None),
        (receipts[2]["seq"], "escalate", officer2["subject"], "pattern across three accounts", True, None),
        (receipts[3]["seq"], "close", desk.who["officer"]["subject"],
         "customer documented the source of funds", True, None)]
    assert case["events"][0]["assignee"] == officer2
    assert case["events"][3]["disposition"] == "NO_FURTHER_ACTION"

    # a closed alert takes no action but reopen: 409 naming the field, nothing sealed
    size = desk.entries()
    for body in ({"action": "close", "disposition": "FALSE_POSITIVE", "rationale": "again"},
                 {"action": "escalate", "rationale": "too late"}, {"action": "assign", "assignee": "me"}):
        problem(desk.act("officer", a["seq"], **body), 409, "case_conflict", "action")
    assert desk.entries() == size
    again = desk.act("officer2", a["seq"], action="reopen", rationale="new information from the branch")
    assert again.status_code == 201 and again.json()["alert"]["state"] == "reopened"


def test_refused_actions_seal_nothing_and_name_their_field(desk: Desk) -> None:
    every = desk.alerts(view="all", limit=500)
    review, hold = first(every, outcome="REVIEW"), first(every, outcome="HOLD")
    before = desk.entries()
    fp = desk.who["officer2"]["fingerprint_sha256"]
    refused: list[tuple[int, dict[str, Any], int, str, str]] = [
        (review["seq"], {"action": "close", "disposition": "MAYBE", "rationale": "x"}, 422, "invalid_request",
         "disposition"),
        (review["seq"], {"action": "close", "disposition": "FALSE_POSITIVE"}, 422, "invalid_request",
         "rationale"),
        (review["seq"], {"action": "comment", "rationale": "  "}, 422, "invalid_request", "rationale"),
        (review["seq"], {"action": "comment", "rationale": "bidi \u202e inside"}, 422, "invalid_request",
         "rationale"),
        (review["seq"], {"action": "comment", "rationale": "x" * 10_001}, 422, "invalid_request",
         "rationale"),
        (review["seq"], {"action": "fly"}, 422, "invalid_request", "action"),
        (review["seq"], {"action": "file_report", "rationale": "x"}, 422, "invalid_request", "action"),
        (review["seq"], {"action": "assign"}, 422, "invalid_request", "assignee"),
        (review["seq"], {"action": "comment", "rationale": "x", "assignee": "me"}, 422, "invalid_request",
         "assignee"),
        (review["seq"], {"action": "assign", "assignee": "you"}, 422, "invalid_request", "assignee"),
        (review["seq"], {"action": "assign", "assignee": {"subject": "not a DN", "fingerprint_sha256": fp}},
         422, "invalid_request", "assignee"),
        (review["seq"], {"action": "assign", "assignee": {"subject": "CN=x", "fingerprint_sha256": "ab"}},
         422, "invalid_request", "assignee"),
        (review["seq"], {"action": "comment", "rationale": "x", "note": "extra"}, 422, "invalid_request",
         "note"),
        (review["seq"], {"action": "qa_review", "verdict": "AGREE", "rationale": "x"}, 409, "case_conflict",
         "action"),
        (review["seq"], {"action": "escalate", "rationale": "too early"}, 409, "case_conflict", "action"),
        (review["seq"], {"action": "release", "rationale": "nothing held"}, 409, "case_conflict", "action"),
        (hold["seq"], {"action": "close", "disposition": "FALSE_POSITIVE", "rationale": "fine"}, 409,
         "case_conflict", "action"),  # its held payment is decided first
        (999_999_999, {"action": "comment", "rationale": "x"}, 404, "not_found", "alert"),
    ]
    for seq, body, status, kind, field in refused:
        problem(desk.act("officer", seq, **body), status, kind, field)
    r = desk.client.post(f"/v1/alerts/{review['seq']}/actions", content=b"{not json",
                         headers={**JSON, "x-test-role": "officer"})
    problem(r, 422, "invalid_request", "body")
    problem(desk.post("officer", "/v1/alerts/x/actions", {"action": "comment", "rationale": "x"}), 422,
            "invalid_request", "seq")
    case = review["case_id"]
    on_case: list[tuple[dict[str, Any], int, str, str]] = [
            ({"action": "file_report", "rationale": "STR"}, 422, "invalid_request", "action"),
            ({"action": "start_review"}, 422, "invalid_request", "action"),
            ({"action": "close", "disposition": "NOPE", "rationale": "x"}, 422, "invalid_request",
             "disposition"),
            ({"action": "link", "rationale": "x"}, 422, "invalid_request", "link"),
            ({"action": "link", "link": True, "rationale": "x"}, 422, "invalid_request", "link"),
            ({"action": "link", "link": case, "rationale": "itself"}, 422, "invalid_request", "link"),
            ({"action": "approve"}, 409, "case_conflict", "action")]
    for body, status, kind, field in on_case:
        r = desk.post("officer", f"/v1/cases/{case}/actions", body)
        got = problem(r, status, kind, field)
        if body["action"] == "file_report":
            assert f"/v1/cases/{case}/reports" in got["detail"]
    problem(desk.post("officer", "/v1/cases/999999999/actions", {"action": "comment", "rationale": "x"}), 404,
            "not_found", "case")
    assert desk.entries() == before


@pytest.mark.requirement("GDPR-22-human-review")
def test_a_block_is_released_by_a_second_officer_and_only_its_scorer_reads_the_outcome(desk: Desk) -> None:
    every = desk.alerts(view="all", limit=500)
    scorer_fp = desk.who["scorer"]["fingerprint_sha256"]
    block = first(every, outcome="BLOCK", scorer_fingerprint_sha256=scorer_fp)
    hold = first(every, outcome="HOLD", scorer_fingerprint_sha256=scorer_fp)
    assert block["payment"] == "HELD"
    proposed = desk.act("officer", block["seq"], action="release", rationale="the list hit is a namesake")
    assert proposed.status_code == 201, proposed.text
    after = proposed.json()["alert"]
    assert (after["payment"], after["pending"], after["pending_by"]) == (
        "HELD", "release", desk.who["officer"])
    size = desk.entries()
    assert desk.get("scorer", "/v1/outcomes").json() == {"items": [], "next_cursor": 0}  # only proposed
    # the proposer cannot approve it: 403 four_eyes, nothing sealed
    problem(desk.act("officer", block["seq"], action="approve"), 403, "four_eyes", "principal")
    assert desk.entries() == size
    approved = desk.act("officer2", block["seq"], action="approve")
    assert approved.status_code == 201, approved.text
    assert (approved.json()["alert"]["payment"], approved.json()["alert"]["pending"]) == ("RELEASED", None)
    released = desk.act("officer2", hold["seq"], action="reject",
                        rationale="beneficiary on the internal list")
    assert released.status_code == 201, released.text

    want = [{"seq": approved.json()["seq"], "trace_id": block["trace_id"], "outcome": "RELEASED",
             "alert_seq": block["seq"], "recorded_at": approved.json()["recorded_at"]},
            {"seq": released.json()["seq"], "trace_id": hold["trace_id"], "outcome": "REJECTED",
             "alert_seq": hold["seq"], "recorded_at": released.json()["recorded_at"]}]
    feed = desk.get("scorer", "/v1/outcomes").json()
    assert feed == {"items": want, "next_cursor": want[-1]["seq"]}
    one = desk.get("scorer", "/v1/outcomes", limit=1).json()  # polled one at a time, in ledger order
    assert one == {"items": want[:1], "next_cursor": want[0]["seq"]}
    assert desk.get("scorer", "/v1/outcomes", after=one["next_cursor"]).json()["items"] == want[1:]
    assert desk.get("scorer", "/v1/outcomes", after=feed["next_cursor"]).json() == {
        "items": [], "next_cursor": feed["next_cursor"]}  # nothing new: the cursor stays
    assert desk.get("scorer2", "/v1/outcomes").json() == {"items": [], "next_cursor": 0}  # not its payments
    for reader in ("officer", "regulator"):
        assert desk.get(reader, "/v1/outcomes").json()["items"] == want

    # a second scorer reads its own payments' outcomes, and the first scorer never sees them
    theirs = first(every, payment="HELD", scorer_fingerprint_sha256=desk.who["scorer2"]["fingerprint_sha256"])
    r = desk.act("officer", theirs["seq"], action="reject" if theirs["outcome"] == "BLOCK" else "release",
                 rationale="decided")
    assert r.status_code == 201, r.text
    assert [o["alert_seq"] for o in desk.get("scorer2", "/v1/outcomes").json()["items"]] == [theirs["seq"]]
    assert desk.get("scorer", "/v1/outcomes", after=feed["next_cursor"]).json()["items"] == []


def test_bulk_assign_seals_each_alert_and_reports_each_result(desk: Desk) -> None:
    every = desk.alerts(view="all", limit=500)
    review = [a for a in every if a["outcome"] == "REVIEW"]
    closed = review[2]
    assert desk.act("officer", closed["seq"], action="close", disposition="FALSE_POSITIVE",
                    rationale="known payroll").status_code == 201
    before = desk.entries()
    seqs = [review[0]["seq"], closed["seq"], 999_999_999, review[1]["seq"]]
    r = desk.post("officer", "/v1/alerts/actions", {"alerts": seqs, "action": "assign", "assignee": "me"})
    assert r.status_code == 200, r.text
    got = r.json()
    assert [(x["alert_seq"], x["status"]) for x in got["results"]] == [
        (seqs[0], 201), (seqs[1], 409), (seqs[2], 404), (seqs[3], 201)]
    assert (got["applied"], got["refused"]) == (2, 2)
    assert got["results"][1]["problem"]["type"] == "urn:sealtrail:problem:case_conflict"
    assert got["results"][1]["problem"]["errors"][0]["field"] == "action"
    assert got["results"][2]["problem"]["status"] == 404
    receipts = [x["receipt"] for x in got["results"] if x["status"] == 201]
    assert [x["seq"] for x in receipts] == [before, before + 1] and desk.entries() == before + 2
    assert {x["seq"] for x in desk.alerts(view="mine")} == {seqs[0], seqs[3]}  # the failures undid nothing
    size = desk.entries()
    for body, field in [({"alerts": [], "action": "assign", "assignee": "me"}, "alerts"),
                        ({"alerts": list(range(201)), "action": "assign", "assignee": "me"}, "alerts"),
                        ({"alerts": [seqs[0], seqs[0]], "action": "assign", "assignee": "me"}, "alerts"),
                        ({"alerts": [seqs[0]], "action": "close", "assignee": "me"}, "action"),
                        ({"alerts": [seqs[0]], "action": "assign"}, "assignee"),
                        ({"alerts": ["1"], "action": "assign", "assignee": "me"}, "alerts.0")]:
        problem(desk.post("officer", "/v1/alerts/actions", body), 422, "invalid_request", field)
    problem(desk.post("regulator", "/v1/alerts/actions", {"alerts": [seqs[0]], "action": "assign",
                                                          "assignee": "me"}), 403, "forbidden")
    assert desk.entries() == size

    # the ledger stops committing: the alert it failed on and every one after it say so (503)
    outage = _Outage(desk.runtime.engine)
    outage.down = True
    r = desk.post("officer", "/v1/alerts/actions", {"alerts": [seqs[1], review[3]["seq"], review[4]["seq"]],
                                                    "action": "assign", "assignee": "me"})
    outage.down = False
    assert r.status_code == 200, r.text
    got = r.json()
    assert [x["status"] for x in got["results"]] == [409, 503, 503] and got["applied"] == 0
    assert "could not commit" in got["results"][1]["problem"]["detail"]
    assert got["results"][2]["problem"]["detail"].startswith("not attempted")
    assert desk.entries() == size


# -- cases --------------------------------------------------------------------------------------


def test_cases_page_and_take_actions(desk: Desk) -> None:
    every = desk.alerts(view="all", limit=500)
    case_ids = sorted({a["case_id"] for a in every}, reverse=True)
    walked: list[int] = []
    cursor = None
    while True:
        page = desk.get("regulator", "/v1/cases", limit=2, **({"cursor": cursor} if cursor else {})).json()
        walked += [c["case_id"] for c in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert walked == case_ids
    # a case none of whose alerts holds a payment can be closed whole
    quiet = next(c for c in case_ids if all(a["payment"] is None for a in every if a["case_id"] == c))
    other = next(c for c in case_ids if c != quiet)
    before = desk.entries()
    r = desk.post("officer", f"/v1/cases/{quiet}/actions", {"action": "assign", "assignee": "me"})
    assert r.status_code == 201, r.text
    assert r.json()["case"]["assignee"] == desk.who["officer"] and r.json()["alert_seq"] is None
    assert [c["case_id"] for c in desk.get("officer", "/v1/cases", view="mine").json()["items"]] == [quiet]
    assert quiet not in [c["case_id"] for c in desk.get("officer", "/v1/cases", view="unassigned",
                                                        limit=500).json()["items"]]
    linked = desk.post("officer", f"/v1/cases/{quiet}/actions",
                       {"action": "link", "link": other, "rationale": "same beneficiary network"})
    assert linked.status_code == 201 and linked.json()["case"]["links"] == [other], linked.text
    assert desk.get("officer", f"/v1/cases/{other}").json()["links"] == [quiet]
    closed = desk.post("officer", f"/v1/cases/{quiet}/actions",
                       {"action": "close", "disposition": "NO_FURTHER_ACTION", "rationale": "explained"})
    assert closed.status_code == 201, closed.text
    now = closed.json()["case"]
    assert (now["state"], now["disposition"]) == ("closed", "NO_FURTHER_ACTION")
    # each action is a case_event; each read of a case (the list, a case) a case_read before it
    assert [k for k, _ in desk.sealed_since(before)] == [
        "case_event", "case_read", "case_read", "case_read", "case_event", "case_read", "case_read",
        "case_event", "case_read"]
    detail = desk.get("officer", f"/v1/cases/{quiet}").json()
    assert {a["state"] for a in detail["alerts"]} == {"closed"} and detail["open_alert_count"] == 0
    assert detail["alert_count"] == len(detail["alerts"]) == len([a for a in every if a["case_id"] == quiet])
    assert [(e["action"], e["applied"], e["alert_seq"]) for e in detail["events"]] == [
        ("assign", True, None), ("link", True, None), ("close", True, None)]
    assert detail["events"][1]["link"] == other and detail["events"][2]["rationale"] == "explained"
    assert [c["case_id"] for c in desk.get("officer", "/v1/cases", view="closed").json()["items"]] == [quiet]
    size = desk.entries()
    problem(desk.post("officer", f"/v1/cases/{quiet}/actions", {"action": "close", "disposition":
                                                                "FALSE_POSITIVE", "rationale": "again"}),
            409, "case_conflict", "action")
    assert desk.entries() == size


def test_a_case_shows_the_annotations_of_its_decisions_with_their_authors(desk: Desk) -> None:
    every = desk.alerts(view="all", limit=500)
    case_id = Counter(a["case_id"] for a in every).most_common(1)[0][0]
    members = [a for a in every if a["case_id"] == case_id]
    other = next(a for a in every if a["case_id"] != case_id)
    assert len(members) >= 2

    def annotate(caller: str, alert: dict[str, Any], **body: Any) -> dict[str, Any]:
        r = desk.post(caller, f"/v1/traces/{alert['trace_id']}/annotations", body)
        assert r.status_code == 201, r.text
        got: dict[str, Any] = r.json()
        return got

    mine = annotate("officer", members[0], disposition="ESCALATED", note="<b>same address</b> & co")
    second = annotate("officer2", members[0], disposition="CORRECTION", note="should have held",
                      correction={"decision": "HOLD", "reason": "structuring"})
    theirs = annotate("officer", other, disposition="NOTE", note="a note on another case")
    before = desk.entries()
    for caller in ("officer", "regulator"):
        got = desk.get(caller, f"/v1/cases/{case_id}")
        assert got.status_code == 200, got.text
        notes = {a["seq"]: a["annotations"] for a in got.json()["alerts"]}
        assert set(notes) == {a["seq"] for a in members}
        ours = notes[members[0]["seq"]]
        said = [(n["seq"], n["record"]["principal"], n["record"]["disposition"], n["record"]["note"])
                for n in ours]
        assert [(seq, p["subject"], p["fingerprint_sha256"], *rest) for seq, p, *rest in said] == [
            (mine["seq"], *desk.who["officer"].values(), "ESCALATED", "<b>same address</b> & co"),
            (second["seq"], *desk.who["officer2"].values(), "CORRECTION", "should have held")]
        assert ours[1]["record"]["correction"] == {"decision": "HOLD", "reason": "structuring"}
        assert all(notes[a["seq"]] == [] for a in members[1:])
        assert theirs["seq"] not in [n["seq"] for ns in notes.values() for n in ns]
        # the same entries, in the same shape, as the decision's own resource lists them
        trace = desk.get(caller, f"/v1/traces/{members[0]['trace_id']}").json()
        assert notes[members[0]["seq"]] == trace["annotations"]
        # the keys a script already reads are all still there
        assert set(got.json()["alerts"][0]) == {*members[0], "annotations"}
    assert "annotations" not in desk.get("officer", f"/v1/alerts/{members[0]['seq']}").json()
    # each read is sealed once, as before: the annotations add no sealed read
    assert [k for k, _ in desk.sealed_since(before)] == ["case_read"] * 3
    for caller in ("scorer", "admin"):  # tipping-off: no case state, annotations included
        problem(desk.get(caller, f"/v1/cases/{case_id}"), 403, "forbidden")


def test_every_read_of_a_case_is_sealed_before_it_is_answered(desk: Desk) -> None:
    page = desk.get("regulator", "/v1/alerts", limit=5).json()["items"]
    a = page[0]
    before = desk.entries()
    assert desk.get("regulator", "/v1/alerts", limit=5).json()["items"] == page
    assert desk.get("regulator", f"/v1/alerts/{a['seq']}").status_code == 200
    shown = desk.get("officer", f"/v1/cases/{a['case_id']}")
    assert shown.status_code == 200
    others = [c["case_id"] for c in shown.json()["counterparty_cases"]]  # shown too: read as a queue
    regulator = desk.who["regulator"]["subject"]
    listed = dict.fromkeys(x["case_id"] for x in page)  # each case on the page, once, in page order
    got = desk.sealed_since(before)
    assert [k for k, _ in got] == ["case_read"] * 3
    assert [(b["principal"]["subject"], b["reads"]) for _, b in got] == [
        (regulator, [{"case": c, "what": "queue"} for c in listed]),
        (regulator, [{"case": a["case_id"], "what": "case"}]),
        (desk.who["officer"]["subject"], [{"case": a["case_id"], "what": "case"}]
         + [{"case": c, "what": "queue"} for c in others])]
    assert got[0][1]["principal"]["fingerprint_sha256"] == desk.who["regulator"]["fingerprint_sha256"]
    size = desk.entries()
    assert desk.get("officer", "/v1/alerts", view="closed").json()["items"] == []  # reads no case
    assert desk.get("scorer", "/v1/outcomes").status_code == 200  # the payment system's own feed
    problem(desk.get("officer", "/v1/cases/999999999"), 404, "not_found")
    assert desk.entries() == size
    # a read the ledger cannot seal is not answered
    outage = _Outage(desk.runtime.engine)
    outage.down = True
    for path in (f"/v1/cases/{a['case_id']}", f"/v1/alerts/{a['seq']}", "/v1/alerts", "/v1/cases"):
        body = problem(desk.get("officer", path), 503, "ledger_unavailable")
        assert a["trace_id"] not in str(body), path
    outage.down = False
    assert desk.entries() == size


def test_a_case_lists_its_counterparties_cases_and_their_read_is_sealed(desk: Desk) -> None:
    listed: dict[int, list[dict[str, Any]]] = {}
    for c in desk.get("officer", "/v1/cases", view="all", limit=200).json()["items"]:
        got = desk.get("officer", f"/v1/cases/{c['case_id']}").json()["counterparty_cases"]
        if got:
            listed[c["case_id"]] = got
    assert listed, "no case in the traffic has a counterparty with a case of its own"
    case_id, others = next(iter(listed.items()))
    assert all(o["case_id"] != case_id and o["subject"].startswith("account:") for o in others)
    assert len({o["subject"] for o in others}) == len(others)  # one case per counterparty account
    other = others[0]
    r = desk.post("officer", f"/v1/cases/{case_id}/actions",
                  {"action": "link", "link": other["case_id"], "rationale": "Pays the subject every week."})
    assert r.status_code == 201, r.text
    after = desk.get("officer", f"/v1/cases/{case_id}").json()
    assert other["case_id"] in after["links"]
    linked = next(o for o in after["counterparty_cases"] if o["case_id"] == other["case_id"])
    assert linked["links"] == [case_id]
    for caller in ("scorer", "admin"):
        assert desk.get(caller, f"/v1/cases/{case_id}").status_code == 403


# -- who may ------------------------------------------------------------------------------------


def test_scorers_admins_and_approvers_see_no_alert_or_case(desk: Desk) -> None:
    a = desk.alerts(view="all", limit=1)[0]
    before = desk.entries()
    reads = ["/v1/alerts", f"/v1/alerts/{a['seq']}", "/v1/cases", f"/v1/cases/{a['case_id']}"]
    writes = [(f"/v1/alerts/{a['seq']}/actions", {"action": "comment", "rationale": "x"}),
              ("/v1/alerts/actions", {"alerts": [a["seq"]], "action": "assign", "assignee": "me"}),
              (f"/v1/cases/{a['case_id']}/actions", {"action": "comment", "rationale": "x"})]
    for caller in ("scorer", "scorer2", "admin", "approver"):
        for path in reads:
            body = problem(desk.get(caller, path), 403, "forbidden")
            assert a["trace_id"] not in body["detail"]
        for path, payload in writes:
            problem(desk.post(caller, path, payload), 403, "forbidden")
    for path, payload in writes:  # regulators read, never act
        problem(desk.post("regulator", path, payload), 403, "forbidden")
    problem(desk.get("admin", "/v1/outcomes"), 403, "forbidden")
    problem(desk.get("approver", "/v1/outcomes"), 403, "forbidden")
    assert desk.entries() == before
    for path in reads:
        assert desk.get("regulator", path).status_code == 200
    assert [k for k, _ in desk.sealed_since(before)] == ["case_read"] * len(reads)  # their reads, sealed


def test_the_documented_examples_are_accepted(desk: Desk) -> None:
    AlertActionIn.model_validate(examples.ALERT_ACTION)
    BulkAssignIn.model_validate(examples.ALERT_BULK_ASSIGN)
    CaseActionIn.model_validate(examples.CASE_ACTION)
    review = first(desk.alerts(view="all", limit=500), outcome="REVIEW")
    r = desk.act("officer", review["seq"], **examples.ALERT_ACTION)
    assert r.status_code == 201 and r.json()["alert"]["disposition"] == "NO_FURTHER_ACTION", r.text
    bulk = desk.post("officer", "/v1/alerts/actions",
                     {**examples.ALERT_BULK_ASSIGN, "alerts": [review["seq"]]})
    assert bulk.json()["results"][0]["status"] == 409  # closed by the example above


# -- who read a case ----------------------------------------------------------------------------


def test_regulators_list_who_read_each_case_newest_first(desk: Desk) -> None:
    listed = desk.alerts(view="all", limit=500)
    a = listed[0]
    b = next(x for x in listed if x["case_id"] != a["case_id"])  # an alert of another case
    assert desk.get("officer", f"/v1/cases/{a['case_id']}").status_code == 200
    assert desk.get("officer2", f"/v1/alerts/{b['seq']}").status_code == 200
    assert desk.get("regulator", f"/v1/cases/{a['case_id']}").status_code == 200
    before = desk.entries()
    every = desk.get("regulator", "/v1/case-reads", limit=3).json()
    newest = every["items"]
    assert [(r["principal"]["subject"], r["reads"]) for r in newest] == [
        (desk.who["regulator"]["subject"], [{"case": a["case_id"], "what": "case"}]),
        (desk.who["officer2"]["subject"], [{"case": b["case_id"], "what": "case"}]),
        (desk.who["officer"]["subject"], [{"case": a["case_id"], "what": "case"}])]
    assert [r["seq"] for r in newest] == sorted((r["seq"] for r in newest), reverse=True)
    p = newest[2]["principal"]  # the reader's certificate, as the case_read record states it
    assert set(p) == {"subject", "sans", "issuer", "fingerprint_sha256", "serial"} and p["issuer"]
    assert {k: p[k] for k in ("subject", "fingerprint_sha256")} == desk.who["officer"]
    sealed = desk.sealed_since(newest[2]["seq"])[0][1]
    assert p == {k: sealed["principal"][k] for k in p} and newest[2]["reads"] == sealed["reads"]
    assert every["next_before"] == newest[-1]["seq"]  # the earlier queue reads are on the next page
    older = desk.get("regulator", "/v1/case-reads", before=every["next_before"], limit=500).json()
    assert older["items"] and older["next_before"] is None
    assert all(r["seq"] < newest[-1]["seq"] for r in older["items"])
    assert all(x["what"] == "queue" for r in older["items"] for x in r["reads"])
    # one case: only the reads naming it, each record listing only it
    one = desk.get("regulator", "/v1/case-reads", case_id=a["case_id"], limit=500).json()
    assert [r["seq"] for r in one["items"]][:2] == [newest[0]["seq"], newest[2]["seq"]]
    assert all(r["reads"] and {x["case"] for x in r["reads"]} == {a["case_id"]} for r in one["items"])
    assert desk.get("regulator", "/v1/case-reads", case_id=999_999_999).json() == {"items": [],
                                                                                   "next_before": None}
    assert desk.entries() == before  # listing the reads is not itself a read of a case
    bad: list[tuple[dict[str, Any], str]] = [({"limit": 0}, "limit"), ({"limit": 501}, "limit"),
                                             ({"before": -1}, "before"), ({"case_id": "x"}, "case_id"),
                                             ({"case_id": -1}, "case_id")]
    for params, field in bad:
        problem(desk.get("regulator", "/v1/case-reads", **params), 422, "invalid_request", field)
    for caller in ("officer", "officer2", "approver", "admin", "scorer"):  # the investigated read none
        problem(desk.get(caller, "/v1/case-reads"), 403, "forbidden")
    assert desk.entries() == before


# -- quality assurance --------------------------------------------------------------------------


def test_the_qa_queue_and_a_qa_review_with_its_verdict_in_the_case_history(db: Db, tmp_path: Path) -> None:
    from audit.cases.policy import DeadlinePolicy
    from audit.cases.service import set_policy
    from tests.audit.cases.test_cases import ALICE

    with desk_over(db, tmp_path) as desk:
        set_policy(desk.runtime.ledger, DeadlinePolicy(version="qa-all", qa_sample_permille=1000), ALICE,
                   "every closure is reviewed")
        desk.decide("scorer", 150, seed=21)
        quiet = [a for a in desk.alerts(view="all", limit=500) if a["payment"] is None][:3]
        assert len(quiet) == 3 and desk.alerts(view="qa") == []
        for a in quiet:
            r = desk.act("officer", a["seq"], action="close", disposition="FALSE_POSITIVE",
                         rationale="payroll")
            assert r.status_code == 201 and r.json()["alert"]["qa"] == "due", r.text
        due = sorted((a["seq"] for a in quiet), reverse=True)
        assert [a["seq"] for a in desk.alerts(view="qa", limit=2)] == due  # newest first, by cursor
        assert {a["qa"] for a in desk.alerts(view="qa")} == {"due"}
        problem(desk.act("officer", due[0], action="qa_review", verdict="AGREE", rationale="mine"), 403,
                "four_eyes", "principal")  # who closed it does not review it
        reviewed = desk.act("officer2", due[0], action="qa_review", verdict="DISAGREE",
                            rationale="the employer was never verified")
        assert reviewed.status_code == 201 and reviewed.json()["alert"]["qa"] == "disagreed", reviewed.text
        assert [a["seq"] for a in desk.alerts(view="qa")] == due[1:]
        case = desk.get("regulator", f"/v1/cases/{reviewed.json()['case_id']}").json()
        events = [(e["action"], e["verdict"]) for e in case["events"] if e["alert_seq"] == due[0]]
        assert events == [("close", None), ("qa_review", "DISAGREE")]
        assert case["events"][-1]["rationale"] == "the employer was never verified"
