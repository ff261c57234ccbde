"""The OpenAPI document says what the API enforces: mutual TLS, each operation's roles (from the role
matrix), every POST's body (with examples the API accepts), and problem+json for every error;
it and its viewers (``/docs``, ``/redoc``) need a certificate and load nothing from elsewhere."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from api.access import ACCESS
from api.app import create_app
from api.config import Settings
from api.openapi import examples
from api.openapi.document import ProblemDetails
from api.openapi.pages import ASSETS_URL
from api.problems import PROBLEM_JSON, problem_response
from api.routes.exports import ExportIn
from api.routes.rulesets import Proposal, Step
from api.routes.traces import AnnotationIn
from audit.export.create import ExportFilters
from audit.governance.proposal import build_proposal
from tests.api.test_fail_closed import in_process
from tests.conftest import Db

METHODS = ("get", "put", "post", "delete", "patch")


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    app = create_app(Settings(db=f"sqlite:///{tmp_path_factory.mktemp('openapi') / 'x.db'}"))
    out: dict[str, Any] = json.loads(json.dumps(app.openapi()))  # as a client reads it
    return out


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def test_mutual_tls_is_the_security_scheme_of_every_operation(doc: dict[str, Any]) -> None:
    assert doc["openapi"].startswith("3.1")
    schemes = doc["components"]["securitySchemes"]
    assert set(schemes) == {"mtls"} and schemes["mtls"]["type"] == "mutualTLS"
    assert doc["security"] == [{"mtls": []}]
    assert all("security" not in op for _, _, op in operations(doc))  # none opts out


def test_each_operation_lists_the_roles_of_the_matrix(doc: dict[str, Any]) -> None:
    seen = set()
    for method, path, op in operations(doc):
        name = op["x-sealtrail-operation"]
        seen.add(name)
        assert op["x-sealtrail-roles"] == sorted(ACCESS[name]), (method, path)
        if ACCESS[name]:
            assert all(f"`{r}`" in op["description"] for r in ACCESS[name]), (method, path)
            assert "403" in op["responses"], (method, path)
        else:
            assert "any verified client certificate" in op["description"] and "403" not in op["responses"]
        assert "401" in op["responses"], (method, path)
    assert seen == set(ACCESS)  # every operation of the matrix is documented somewhere


def test_each_post_documents_its_body(doc: dict[str, Any]) -> None:
    posts = [(path, op) for method, path, op in operations(doc) if method == "POST"]
    assert {p for p, _ in posts} >= {"/v1/decisions", "/v1/decisions/batch", "/v1/exports", "/v1/rulesets",
                                     "/v1/traces/{trace_id}/annotations", "/v1/ledger/verify",
                                     "/v1/rulesets/{ruleset}/approve", "/v1/rulesets/{ruleset}/activate"}
    for path, op in posts:
        content = op["requestBody"]["content"]
        assert content, path
        for media_type, media in content.items():
            assert "schema" in media, (path, media_type)
            assert "example" in media or "examples" in media, (path, media_type)
    by_path = dict(posts)
    for path in ("/v1/decisions", "/v1/decisions/batch"):
        assert set(by_path[path]["requestBody"]["content"]) == {"application/json", "application/x-swift-fin",
                                                                "application/xml", "text/xml"}
    assert by_path["/v1/decisions"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/TransactionIn"}
    assert {"application/toml", "application/json"} <= set(by_path["/v1/rulesets"]["requestBody"]["content"])
    assert by_path["/v1/rulesets/{ruleset}/approve"]["requestBody"]["required"] is False


def test_errors_are_problem_json_and_no_default_validation_schema_is_left(doc: dict[str, Any]) -> None:
    text = json.dumps(doc)
    assert "HTTPValidationError" not in text and '"ValidationError"' not in text
    problem = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for method, path, op in operations(doc):
        for code, response in op["responses"].items():
            if int(code) >= 400:
                assert response["content"] == problem, (method, path, code)
                assert response["description"], (method, path, code)
    assert doc["paths"]["/v1/decisions"]["post"]["responses"]["503"]["headers"]["Retry-After"]
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', text))
    assert refs <= set(doc["components"]["schemas"]), refs - set(doc["components"]["schemas"])


def test_the_problem_schema_describes_what_the_api_answers() -> None:
    r = problem_response(422, "message_refused", "1 message(s) refused",
                         [{"field": "originator.country", "message": "not a country"}],
                         instance="/v1/decisions")
    p = ProblemDetails.model_validate_json(bytes(r.body))
    assert (p.status, p.errors and p.errors[0].field) == (422, "originator.country")
    assert set(orjson.loads(bytes(r.body))) <= set(ProblemDetails.model_fields)


def test_model_examples_are_accepted_by_their_models() -> None:
    e = ExportIn.model_validate(examples.EXPORT)
    ExportFilters.of(e.start, e.end, account=e.account, decision=e.decision, rule=e.rule)
    Step.model_validate(examples.STEP)
    AnnotationIn.model_validate(examples.ANNOTATION)
    Proposal.model_validate({"source": examples.RULESET_TOML, "cases": examples.RULESET_CASES})
    built = build_proposal(examples.RULESET_TOML, examples.RULESET_CASES, None)
    assert built.body["cases"] is not None and built.body["id"] == "aml_core@2027.1.0"
    assert built.body["module_sha256"] == examples.STEP["module_sha256"]  # the approval names this module


def test_docs_pages_and_document_need_a_certificate(tmp_path: Path) -> None:
    client = TestClient(create_app(Settings(db=f"sqlite:///{tmp_path / 'x.db'}")))  # no TLS peer
    for path in ("/openapi.json", "/docs", "/redoc", f"{ASSETS_URL}/swagger-ui-bundle.js"):
        r = client.get(path)
        assert r.status_code == 401 and r.headers["content-type"] == PROBLEM_JSON, path


def test_the_examples_are_accepted_by_the_api_and_the_pages_are_served(sqlite_db: Db, tmp_path: Path) -> None:
    with in_process(sqlite_db, tmp_path) as (client, _rt, _s):
        spec = client.get("/openapi.json", headers={"x-test-role": "admin"})
        assert spec.status_code == 200 and spec.headers["content-type"] == "application/json"
        posts = spec.json()["paths"]
        traces = []
        for path in ("/v1/decisions", "/v1/decisions/batch"):
            for media_type, media in posts[path]["post"]["requestBody"]["content"].items():
                values = ([media["example"]] if "example" in media
                          else [e["value"] for e in media["examples"].values()])
                for value in values:
                    raw = value.encode() if isinstance(value, str) else orjson.dumps(value)
                    r = client.post(path, content=raw, headers={"content-type": media_type})
                    assert r.status_code == 200, (path, media_type, r.text)
                    traces += [d["trace_id"] for d in r.json().get("decisions", [r.json()])]
        assert len(traces) == 4 + (2 + 2) + 2 + 1 + 1  # one per format; batch: 2 JSON forms, RJE, 2 XML
        annotation = posts["/v1/traces/{trace_id}/annotations"]["post"]["requestBody"]["content"]
        r = client.post(f"/v1/traces/{traces[0]}/annotations", json=annotation["application/json"]["example"],
                        headers={"x-test-role": "officer"})
        assert r.status_code == 201, r.text
        proposal = posts["/v1/rulesets"]["post"]["requestBody"]["content"]["application/json"]["example"]
        r = client.post("/v1/rulesets", json=proposal, headers={"x-test-role": "officer"})
        assert r.status_code == 201, r.text

        for path in ("/docs", "/redoc"):
            page = client.get(path, headers={"x-test-role": "regulator"})  # any role may read the docs
            assert page.status_code == 200, path
            csp = dict(d.strip().split(" ", 1) for d in page.headers["content-security-policy"].split(";"))
            assert csp["script-src"] == "'self'" and csp["default-src"] == "'none'", path
            assert not re.search(r"<script(?![^>]*\bsrc=)", page.text), "an inline script"
            for url in re.findall(r'(?:src|href)="([^"]+)"', page.text):
                assert url.startswith(ASSETS_URL + "/"), url  # nothing from another origin
                assert client.get(url, headers={"x-test-role": "regulator"}).status_code == 200, url
        assert client.get(f"{ASSETS_URL}/nope.js", headers={"x-test-role": "admin"}).status_code == 404


def test_every_operation_documents_the_limits_and_the_500_it_can_meet(doc: dict[str, Any]) -> None:
    """The rate limit (429) and unmapped errors (500) reach every operation; the body cap (413)
    every operation with a body (api.limits, api.problems)."""
    for method, path, op in operations(doc):
        codes = set(op["responses"])
        assert {"429", "500"} <= codes, (method, path)
        assert "Retry-After" in op["responses"]["429"]["headers"], (method, path)
        if "requestBody" in op:
            assert "413" in codes, (method, path)


def test_the_problem_schema_names_the_members_limits_and_incidents_add() -> None:
    for extra in ({"incident": "01a2"}, {"limit_bytes": 262144}, {"retry_after_s": 2}):
        r = problem_response(500, "internal", "x", extra=extra)
        assert set(orjson.loads(bytes(r.body))) <= set(ProblemDetails.model_fields), extra
