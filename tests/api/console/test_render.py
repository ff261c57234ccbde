"""The console's frame: errors as pages, headers that forbid foreign scripts, cross-site posts refused."""

from __future__ import annotations

from tests.api.console.conftest import Console


def test_static_css_is_served_by_the_app(console: Console) -> None:
    r = console.get("/console/static/console.css")
    assert r.status_code == 200
    assert "text/css" in r.headers["content-type"]


def test_unknown_console_page_is_an_html_404(console: Console) -> None:
    r = console.get("/console/no-such-page")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("text/html")
    assert "Not found" in r.text
    assert "script-src 'self'" in r.headers["content-security-policy"]


def test_an_error_page_keeps_the_navigation_the_caller_may_use(console: Console) -> None:
    page = console.get("/console/no-such-page", role="approver").text
    assert 'href="/console/rules"' in page and 'href="/console/search"' not in page  # approver's own


def test_api_errors_stay_problem_json(console: Console) -> None:
    r = console.get("/v1/traces/not-a-trace")
    assert r.headers["content-type"].startswith("application/problem+json")


def test_cross_site_post_is_refused_before_any_route(console: Console) -> None:
    r = console.client.post("/v1/rulesets", content="id = 'x'", headers={
        "content-type": "text/plain", "x-test-role": "officer", "origin": "https://evil.example",
        "sec-fetch-site": "cross-site"})
    assert r.status_code == 403
    assert r.json()["type"] == "urn:sealtrail:problem:cross_site"


def test_foreign_origin_without_fetch_metadata_is_refused(console: Console) -> None:
    r = console.client.post("/v1/rulesets", content="id = 'x'", headers={
        "content-type": "text/plain", "x-test-role": "officer", "origin": "https://evil.example"})
    assert r.status_code == 403
    assert "evil.example" in r.json()["detail"]


def test_same_origin_and_scripted_posts_pass_the_guard(console: Console) -> None:
    # a script sends no Origin; a same-origin form sends this server's own
    for headers in ({}, {"origin": "http://testserver", "sec-fetch-site": "same-origin"}):
        r = console.client.post("/v1/rulesets", content="not toml [", headers={
            "content-type": "text/plain", "x-test-role": "officer", **headers})
        assert r.status_code == 422, r.text  # reached the route, which refused the source


def test_opaque_origin_is_refused_and_a_proxied_scheme_is_not(console: Console) -> None:
    refused = console.client.post("/v1/rulesets", content="x", headers={
        "content-type": "text/plain", "x-test-role": "officer", "origin": "null"})
    assert refused.status_code == 403
    # behind a TLS-terminating proxy the page is https while this process sees http: same host passes
    passed = console.client.post("/v1/rulesets", content="not toml [", headers={
        "content-type": "text/plain", "x-test-role": "officer", "origin": "https://testserver"})
    assert passed.status_code == 422, passed.text


def test_fetch_metadata_same_origin_outranks_an_opaque_origin(console: Console) -> None:
    # Chromium sends Origin: null on some same-origin form posts; Sec-Fetch-Site is the browser's word
    r = console.client.post("/v1/rulesets", content="not toml [", headers={
        "content-type": "text/plain", "x-test-role": "officer", "origin": "null",
        "sec-fetch-site": "same-origin"})
    assert r.status_code == 422, r.text


def test_an_oversized_form_is_refused_before_it_is_read(console: Console) -> None:
    from api.console.forms import MAX_FORM
    before = console.runtime.ledger.size()
    r = console.post_form("/console/rules", {"source": "x" * (MAX_FORM + 1)})
    assert r.status_code == 413 and "form over" in r.text
    assert console.runtime.ledger.size() == before


def test_a_missing_signing_key_is_a_503_that_names_no_path(console: Console) -> None:
    key = console.settings.key_file
    key.rename(key.with_suffix(".moved"))
    window = {"from": "2026-01-01T00:00:00Z", "to": "2099-01-01T00:00:00Z"}
    r = console.client.post("/v1/exports", json=window, headers={"x-test-role": "officer"})
    assert r.status_code == 503, r.text
    assert r.json()["type"] == "urn:sealtrail:problem:signing_key_unavailable"
    assert str(key.parent) not in r.text


def test_static_assets_carry_the_pages_security_headers(console: Console) -> None:
    r = console.get("/console/static/proof.js")
    assert r.status_code == 200
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'none'" in r.headers["content-security-policy"]
