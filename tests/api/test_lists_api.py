"""/v1/lists over HTTP, in process, both databases: an admin loads published list files (sealed with
their bytes, in the caller's name), withdraws one; officers, regulators and admins read the lists
in force, a list's history and what changed between two loads; no one else loads or reads; a
refused load is problem+json naming the field and seals nothing; a list file may be far larger
than other bodies, for an admin only."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from sqlalchemy import select

from api.limits import DEFAULT_CAP, LIST_CAP, body_cap
from api.routes.lists import WithdrawIn
from ledger import store
from tests.api.problem_doc import problem
from tests.api.test_fail_closed import Served, in_process
from tests.conftest import Db

VECTORS = Path(__file__).parents[1] / "vectors" / "sanctions"
CSV = {"content-type": "text/csv"}
XML = {"content-type": "application/xml"}
HEADER = "entry_id,kind,name,aliases,dob,countries,identifiers,bics,programmes\n"
UN = (VECTORS / "un_consolidated.xml").read_bytes()  # UN Security Council list (2 individuals, 1 entity)
BANK = (VECTORS / "internal.csv").read_bytes()  # the bank's own list, 3 entries


@pytest.fixture
def desk(db: Db, tmp_path: Path) -> Iterator[Served]:
    with in_process(db, tmp_path) as (client, rt, s):
        yield Served(client, rt, s)


def load(d: Served, data: bytes | Iterator[bytes], role: str = "admin", headers: dict[str, str] | None = None,
         **params: str) -> Any:
    query = {"rationale": "weekly update from the publisher", **params}
    return d.client.post(f"/v1/lists?{urlencode(query)}", content=data,
                         headers={**(headers or CSV), "x-test-role": role})


def get(d: Served, path: str, role: str = "officer") -> Any:
    return d.client.get(path, headers={"x-test-role": role})


def withdraw(d: Served, name: str, body: Any, role: str = "admin") -> Any:
    return d.client.post(f"/v1/lists/{name}/withdraw", json=body, headers={"x-test-role": role})


def payload(d: Served, sha256: str) -> bytes | None:
    p = store.payloads
    with d.runtime.engine.connect() as conn:
        row = conn.execute(select(p.c.data).where(p.c.sha256 == sha256)).first()
    return None if row is None else bytes(row[0])


def bank_csv(entries: int) -> bytes:
    rows = [f"EX-{i:06d},individual,Person Number{i} EXAMPLE,,1970-03-04,GB,,,EXIT-2026\n"
            for i in range(entries)]
    return (HEADER + "".join(rows)).encode()


def test_an_admin_loads_two_published_files_sealed_in_its_name_and_readers_see_them(desk: Served) -> None:
    r = load(desk, BANK, name="bank-exits", format="internal-csv", published="2026-11-30")
    assert r.status_code == 201, r.text
    bank = r.json()
    r = load(desk, UN, headers=XML, name="un", format="un-xml", rationale="UN list, Feb 2026")
    assert r.status_code == 201, r.text
    un = r.json()
    for doc in (bank, un):  # nothing held: nothing to screen again
        assert doc.pop("rescreened") == {"held": 0, "screened": 0, "purged": 0, "annotated": [],
                                         "in_part": []}
    assert desk.settings.roles_file is not None  # the dev PKI's, beside the certificates
    admin = x509.load_pem_x509_certificate((desk.settings.roles_file.parent / "admin.pem").read_bytes())
    for doc, data, fmt in ((bank, BANK, "internal-csv"), (un, UN, "un-xml")):
        assert doc["sha256"] == hashlib.sha256(data).hexdigest() and payload(desk, doc["sha256"]) == data
        assert (doc["format"], doc["withdrawn"]) == (fmt, False) and doc["entries"] > 0
        assert doc["principal"]["fingerprint_sha256"] == admin.fingerprint(hashes.SHA256()).hex()
        assert doc["principal"]["subject"] == "CN=sealtrail-admin,O=sealtrail dev"
    assert (bank["name"], bank["source"], bank["published"], bank["entries"]) == (
        "bank-exits", "internal", "2026-11-30", 3)
    assert bank["rationale"] == "weekly update from the publisher" and un["rationale"] == "UN list, Feb 2026"
    assert (un["name"], un["source"], un["published"]) == ("un", "un", "2026-02-27")  # the file's own date
    assert un["seq"] == bank["seq"] + 1 == desk.size() - 1
    for role in ("officer", "regulator", "admin"):
        r = get(desk, "/v1/lists", role)
        assert r.status_code == 200, r.text
        assert r.json() == {"lists": [bank, un]}  # by name, as sealed


def test_history_diff_and_withdrawal_as_the_cli_answers_them(desk: Served) -> None:
    v1, v2 = BANK, b"".join(BANK.splitlines(keepends=True)[:-1])  # the last entry delisted
    first, second = (load(desk, v, name="bank", format="internal-csv").json() for v in (v1, v2))
    first.pop("rescreened"), second.pop("rescreened")  # what the load found held: none here
    r = get(desk, "/v1/lists/bank/history")
    assert r.status_code == 200, r.text
    assert r.json() == {"name": "bank", "loads": [first, second]}
    r = get(desk, "/v1/lists/bank/diff", "regulator")  # default: the last load against the one before
    assert r.status_code == 200, r.text
    d = r.json()
    assert (d["name"], d["from_seq"], d["to_seq"]) == ("bank", first["seq"], second["seq"])
    assert (d["old_sha256"], d["new_sha256"]) == (first["sha256"], second["sha256"])
    assert [e["entry_id"] for e in d["removed"]] == ["EX-0003"] and d["added"] == d["changed"] == []
    back = get(desk, f"/v1/lists/bank/diff?from={second['seq']}&to={first['seq']}").json()
    assert [e["entry_id"] for e in back["added"]] == ["EX-0003"] and back["removed"] == []
    problem(get(desk, f"/v1/lists/bank/diff?to={first['seq']}"), 404, "not_found", "from")  # nothing before
    problem(get(desk, "/v1/lists/bank/diff?from=99999"), 404, "not_found", "from")
    problem(get(desk, "/v1/lists/bank/diff?to=-1"), 422, "invalid_request", "to")

    r = withdraw(desk, "bank", {"rationale": "replaced by the group exit list"})
    assert r.status_code == 200, r.text
    gone = r.json()
    assert (gone["name"], gone["withdrawn"], gone["entries"]) == ("bank", True, 0)
    assert gone["seq"] == desk.size() - 1
    assert gone["rationale"] == "replaced by the group exit list"
    assert get(desk, "/v1/lists").json() == {"lists": []}
    assert get(desk, "/v1/lists/bank/history", "admin").json()["loads"] == [first, second, gone]
    problem(get(desk, f"/v1/lists/bank/diff?to={gone['seq']}"), 404, "not_found", "to")  # a withdrawal
    before = desk.size()
    problem(withdraw(desk, "bank", {"rationale": "again"}), 404, "not_found", "name")
    problem(withdraw(desk, "bank", {}), 422, "invalid_request", "rationale")
    problem(withdraw(desk, "bank", {"rationale": "x", "force": True}), 422, "invalid_request", "force")
    problem(withdraw(desk, "bank", {"rationale": "ok\u202eevil"}), 422, "list_refused", "rationale")
    assert desk.size() == before
    # one load is nothing to compare
    load(desk, v1, name="solo", format="internal-csv")
    problem(get(desk, "/v1/lists/solo/diff"), 404, "not_found", "name")


def test_only_admins_load_and_withdraw_and_only_readers_read(desk: Served) -> None:
    assert load(desk, BANK, name="bank", format="internal-csv").status_code == 201
    before = desk.size()
    for role in ("scorer", "officer", "approver", "regulator"):
        body = problem(load(desk, BANK, role, name="bank", format="internal-csv"), 403, "forbidden")
        assert "lists.load" in body["detail"]
        body = problem(withdraw(desk, "bank", {"rationale": "r"}, role), 403, "forbidden")
        assert "lists.withdraw" in body["detail"]
    for role in ("scorer", "approver"):
        for path in ("/v1/lists", "/v1/lists/bank/history", "/v1/lists/bank/diff"):
            assert "lists.read" in problem(get(desk, path, role), 403, "forbidden")["detail"]
    assert desk.size() == before
    assert [x["name"] for x in get(desk, "/v1/lists").json()["lists"]] == ["bank"]


@pytest.mark.parametrize(("params", "data", "headers", "status", "kind", "field"), [
    ({"name": "un", "format": "pdf"}, UN, XML, 422, "list_refused", "format"),
    ({"name": "un"}, UN, XML, 422, "invalid_request", "format"),
    ({"name": "un", "format": "un-xml"}, UN[:-40], XML, 422, "list_refused", "file"),  # cut short
    ({"name": "un", "format": "internal-csv"}, UN, XML, 422, "list_refused", "file"),  # another format
    ({"name": "bank", "format": "internal-csv"}, HEADER.encode(), CSV, 422, "list_refused", "file"),  # empty
    ({"name": "bank", "format": "internal-csv"}, b"", CSV, 422, "empty_body", "file"),
    ({"name": "Bank Exits", "format": "internal-csv"}, BANK, CSV, 422, "list_refused", "name"),
    ({"name": "x" * 65, "format": "internal-csv"}, BANK, CSV, 422, "list_refused", "name"),
    ({"name": "bank", "format": "internal-csv", "source": "interpol"}, BANK, CSV, 422, "list_refused",
     "source"),
    ({"name": "bank", "format": "internal-csv", "published": "30/11/2026"}, BANK, CSV, 422,
     "invalid_request", "published"),
    ({"name": "bank", "format": "internal-csv", "published": "2026-02-30"}, BANK, CSV, 422,
     "invalid_request", "published"),
    ({"name": "bank", "format": "internal-csv", "rationale": ""}, BANK, CSV, 422, "list_refused",
     "rationale"),
    ({"name": "bank", "format": "internal-csv", "rationale": None}, BANK, CSV, 422, "invalid_request",
     "rationale"),
    ({"name": "bank", "format": "internal-csv"}, BANK, {"content-type": "text/plain"}, 415,
     "unsupported_media_type", "Content-Type"),
])
def test_a_refused_load_names_the_field_and_seals_nothing(desk: Served, params: dict[str, str | None],
                                                         data: bytes, headers: dict[str, str], status: int,
                                                         kind: str, field: str) -> None:
    query = {"rationale": "weekly update", **params}
    before = desk.size()
    r = desk.client.post(f"/v1/lists?{urlencode({k: v for k, v in query.items() if v is not None})}",
                         content=data, headers={**headers, "x-test-role": "admin"})
    problem(r, status, kind, field)
    assert desk.size() == before
    assert get(desk, "/v1/lists").json() == {"lists": []}


def test_an_unknown_list_is_not_found_and_a_bad_name_refused(desk: Served) -> None:
    body = problem(get(desk, "/v1/lists/never-loaded/history"), 404, "not_found", "name")
    assert "never-loaded" in body["detail"]
    problem(get(desk, "/v1/lists/never-loaded/diff"), 404, "not_found", "name")
    problem(get(desk, "/v1/lists/Not%20A%20Name/history"), 422, "list_refused", "name")
    problem(withdraw(desk, "Not%20A%20Name", {"rationale": "r"}), 422, "list_refused", "name")


def test_a_list_file_may_be_far_larger_than_other_bodies_for_an_admin_only(desk: Served) -> None:
    assert body_cap("POST", "/v1/lists") == LIST_CAP >= 256 << 20
    assert body_cap("POST", "/v1/lists/bank/withdraw") == DEFAULT_CAP
    big = bank_csv(4000)
    assert len(big) > DEFAULT_CAP  # over what any other JSON endpoint takes
    chunks = [big[i:i + 65536] for i in range(0, len(big), 65536)]
    before = desk.size()
    # sent without a Content-Length (chunked): counted as it arrives, against the caller's cap
    body = problem(load(desk, iter(chunks), "scorer", name="bank", format="internal-csv"), 413, "too_large")
    assert body["limit_bytes"] == DEFAULT_CAP
    r = load(desk, iter(chunks), name="bank", format="internal-csv")
    assert r.status_code == 201, r.text
    assert r.json()["entries"] == 4000 and payload(desk, r.json()["sha256"]) == big
    assert desk.size() == before + 1
    # a declared length over the cap is refused unread: an admin's is the largest list file
    for role, cap in (("admin", LIST_CAP), ("officer", DEFAULT_CAP)):
        body = problem(load(desk, b"x", role, {**CSV, "content-length": str(cap + 1)}, name="bank",
                            format="internal-csv"), 413, "too_large")
        assert body["limit_bytes"] == cap and f"{cap + 1:,} bytes" in body["detail"]
    assert desk.size() == before + 1


def test_the_documented_examples_are_accepted(desk: Served) -> None:
    spec = get(desk, "/openapi.json", "admin").json()
    op = spec["paths"]["/v1/lists"]["post"]
    assert op["x-sealtrail-roles"] == ["admin"] and op["responses"]["413"]
    params = {p["name"]: p for p in op["parameters"]}
    assert {"name", "format", "rationale", "source", "published"} == set(params)
    assert params["format"]["required"] and params["rationale"]["required"]
    formats = {"application/xml": ("un", "un-xml", {}), "text/xml": ("un", "un-xml", {}),
               "text/csv": ("bank-exits", "internal-csv", {"published": "2026-11-30"}),
               "application/octet-stream": ("bank-exits", "internal-csv", {"published": "2026-11-30"}),
               "application/json": ("bank-exits", "internal-json", {})}
    content = op["requestBody"]["content"]
    assert set(content) == set(formats)
    for media_type, (name, fmt, extra) in formats.items():
        example = content[media_type]["example"]
        raw = example.encode() if isinstance(example, str) else orjson.dumps(example)
        r = load(desk, raw, headers={"content-type": media_type}, name=name, format=fmt, **extra)
        assert r.status_code == 201, (media_type, r.text)
    example = spec["paths"]["/v1/lists/{name}/withdraw"]["post"]["requestBody"]["content"]["application/json"]
    WithdrawIn.model_validate(example["example"])
    r = withdraw(desk, "un", example["example"])
    assert r.status_code == 200, r.text
    for path in ("/v1/lists", "/v1/lists/{name}/history", "/v1/lists/{name}/diff"):
        assert spec["paths"][path]["get"]["x-sealtrail-roles"] == ["admin", "officer", "regulator"]
