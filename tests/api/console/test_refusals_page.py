"""The refusals page: every refused screening request, as sealed, filtered and paged."""

from __future__ import annotations

import re

import pytest

from tests.api.console.conftest import Console

BAD_XML = b"<Document><unclosed>"
TWO_AMOUNTS = (b"{1:F01BANKBEBBAXXX2222123456}{2:I103BANKDEFFXXXXN}{4:\n:20:REF1\n:23B:CRED\n"
               b":32A:260115EUR100,00\n:32A:260115EUR900000,00\n:50K:/DE89370400440532013000\nJOHN DOE\n"
               b":59:/GB33BUKB20201555555555\nJANE SMITH\n:71A:SHA\n-}")


def refuse(console: Console, body: bytes, ctype: str) -> str:
    r = console.client.post("/v1/decisions", content=body, headers={"content-type": ctype,
                                                                    "x-test-role": "scorer"})
    assert r.status_code == 422, r.text
    trace_id: str = r.json()["trace_id"]
    return trace_id


def rows(page: str) -> list[str]:
    return re.findall(r'<tr data-trace-id="([^"]+)">', page)


def test_each_refused_request_is_listed_newest_first_with_its_reason(console: Console) -> None:
    first = refuse(console, BAD_XML, "application/xml")
    second = refuse(console, TWO_AMOUNTS, "application/x-swift-fin")
    r = console.get("/console/refusals")
    assert r.status_code == 200
    assert rows(r.text) == [second, first]
    assert ":32A:" in r.text and "not well-formed XML" in r.text
    assert 'href="/console/refusals"' in console.get("/console/overview").text  # in the navigation


def test_the_format_filter_and_paging(console: Console) -> None:
    xml = [refuse(console, BAD_XML, "application/xml") for _ in range(3)]
    fin = refuse(console, TWO_AMOUNTS, "application/x-swift-fin")
    assert rows(console.get("/console/refusals?format=mt").text) == [fin]
    page = console.get("/console/refusals?limit=2").text
    assert rows(page) == [fin, xml[2]]
    nxt = re.search(r'<a class="next" rel="next" href="([^"]+)"', page)
    assert nxt is not None
    assert rows(console.get(nxt.group(1).replace("&amp;", "&")).text) == [xml[1], xml[0]]


def test_bad_filters_are_refused_inline(console: Console) -> None:
    r = console.get("/console/refusals?format=telex&limit=abc&since=yesterday")
    assert r.status_code == 422
    for name in ("format", "limit", "since"):
        assert f'id="e-{name}"' in r.text
    assert "telex" in r.text


@pytest.mark.parametrize("role", ["scorer"])
def test_roles_that_may_not_query_get_a_403_page(console: Console, role: str) -> None:
    assert console.get("/console/refusals", role=role).status_code == 403
