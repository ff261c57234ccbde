"""static/proof.js under Node 20 (the same Web Crypto a browser has) on proofs from a real ledger:
a genuine proof verifies; a flipped record byte, a wrong path hash, another key's signature or
a wrong size each fail, naming the check; without Ed25519 it says so and never claims verified."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ledger.checkpoint import Checkpoint
from ledger.keys import load_signer
from ledger.note import NoteSigner, parse_note, sign_note
from tests.api.console.conftest import Console

ROOT = Path(__file__).parents[3]
PROOF_JS = ROOT / "api/console/static/proof.js"
HELPER = Path(__file__).with_name("proof_check.mjs")
NODE = shutil.which("node")

if NODE is None and os.environ.get("CI"):
    raise RuntimeError("node is required in CI: it runs the console's in-browser proof check")
pytestmark = pytest.mark.skipif(NODE is None, reason="node (>= 20) is not installed; CI runs this test")


def check(*cases: dict[str, Any], subtle: str | None = None) -> list[dict[str, Any]]:
    """What proof.js says about each proof-data block."""
    assert NODE is not None
    done = subprocess.run([NODE, str(HELPER), str(PROOF_JS)], check=True, capture_output=True, text=True,
                          input=json.dumps([{"data": c, "subtle": subtle} for c in cases]), timeout=60)
    out: list[dict[str, Any]] = json.loads(done.stdout)
    return out


def failed(result: dict[str, Any]) -> dict[str, str]:
    """The failing checks: name -> why."""
    return {s["check"]: s["detail"] for s in result["steps"] if not s["ok"]}


@pytest.fixture
def proofs(console: Console) -> list[dict[str, Any]]:
    """The proof-data blocks of seven decision pages, as the browser receives them."""
    out = []
    for d in console.score(7):
        page = console.get(f"/console/decisions/{d['trace_id']}").text
        m = re.search(r'<script type="application/json" id="proof-data">(.*?)</script>', page, re.S)
        assert m is not None
        out.append(json.loads(m.group(1)))
    return out


def resign(data: dict[str, Any], signer: NoteSigner, **change: Any) -> dict[str, Any]:
    """``data`` with its checkpoint text (optionally changed) signed by ``signer`` alone."""
    text, _ = parse_note(data["checkpoint"])
    cp = Checkpoint.from_text(text)
    cp = Checkpoint(change.get("origin", cp.origin), change.get("size", cp.size), change.get("root", cp.root),
                    cp.extensions)
    return {**data, "checkpoint": sign_note(cp.to_text(), [signer])}


def test_genuine_proofs_verify(proofs: list[dict[str, Any]]) -> None:
    results = check(*proofs)
    assert [r["state"] for r in results] == ["verified"] * len(proofs), results
    assert all(r["summary"].startswith("Verified: ") for r in results)
    assert {s["check"] for s in results[0]["steps"]} == {"ledger key", "checkpoint", "signature", "leaf hash",
                                                         "sealed fields", "payload", "inclusion path", "root"}
    assert all("payment message shown" in r["summary"] for r in results)  # the officer sees payloads
    assert len({(p["index"], p["size"]) for p in proofs}) == len(proofs)  # different paths, last leaf too


def test_a_flipped_record_byte_fails_at_the_root(proofs: list[dict[str, Any]]) -> None:
    data = proofs[3]
    raw = bytearray(base64.b64decode(data["record_bytes"]))
    raw[len(raw) // 2] ^= 0x01
    (r,) = check({**data, "record_bytes": base64.b64encode(bytes(raw)).decode()})
    assert r["state"] == "failed"
    # the byte may also fall in a field the page shows (then "sealed fields" fails too), never elsewhere
    assert "root" in failed(r) and set(failed(r)) <= {"root", "sealed fields"}
    assert "root mismatch" in failed(r)["root"]
    assert "root mismatch" in r["summary"] and r["summary"].startswith("Failed: ")


def test_a_wrong_sibling_hash_fails(proofs: list[dict[str, Any]]) -> None:
    data = proofs[2]
    assert data["hashes"]
    hashes = list(data["hashes"])
    h = bytearray(base64.b64decode(hashes[0]))
    h[0] ^= 0x80
    hashes[0] = base64.b64encode(bytes(h)).decode()
    (r,) = check({**data, "hashes": hashes})
    assert r["state"] == "failed" and "root mismatch" in failed(r)["root"]
    (r,) = check({**data, "hashes": data["hashes"][:-1]})  # one hash short
    assert r["state"] == "failed" and "fewer than" in failed(r)["inclusion path"]


def test_a_checkpoint_signed_by_another_key_fails_at_the_signature(console: Console,
                                                                    proofs: list[dict[str, Any]]) -> None:
    data = proofs[1]
    impostor = NoteSigner.generate(load_signer(console.settings.key_file).name)  # same name, other key
    (r,) = check(resign(data, impostor))
    assert r["state"] == "failed"
    assert set(failed(r)) == {"signature"} and "no signature by" in failed(r)["signature"]
    assert "signature" in r["summary"]
    # the genuine checkpoint checked against a key the ledger never signed with
    (r,) = check({**data, "vkey": impostor.verifier.vkey})
    assert r["state"] == "failed" and set(failed(r)) == {"signature"}


def test_a_forged_signature_under_the_right_key_id_fails(proofs: list[dict[str, Any]]) -> None:
    data = proofs[0]
    text, sigs = parse_note(data["checkpoint"])
    forged = sigs[0].key_id + bytes(64)
    note = f"{text}\n\u2014 {sigs[0].name} {base64.b64encode(forged).decode()}\n"
    (r,) = check({**data, "checkpoint": note})
    assert r["state"] == "failed" and "does not verify" in failed(r)["signature"]


def test_a_changed_checkpoint_text_breaks_its_signature(proofs: list[dict[str, Any]]) -> None:
    data = proofs[4]
    note = data["checkpoint"]
    lines = note.split("\n")
    lines[1] = str(int(lines[1]) + 1)  # claim a bigger tree under the old signature
    (r,) = check({**data, "checkpoint": "\n".join(lines), "size": data["size"] + 1})
    assert r["state"] == "failed" and "does not verify" in failed(r)["signature"]


def test_a_wrong_size_fails(console: Console, proofs: list[dict[str, Any]]) -> None:
    data = proofs[5]
    for wrong in (data["size"] + 1, data["size"] - 1):
        (r,) = check({**data, "size": wrong})
        assert r["state"] == "failed"
        assert "size mismatch" in failed(r)["checkpoint"]
    # a genuinely signed checkpoint of another size does not fit this proof either
    own = load_signer(console.settings.key_file)
    (r,) = check(resign(data, own, size=data["size"] + 1))
    assert r["state"] == "failed" and "size mismatch" in failed(r)["checkpoint"]


def test_an_origin_other_than_the_keys_name_fails(console: Console, proofs: list[dict[str, Any]]) -> None:
    (r,) = check(resign(proofs[0], load_signer(console.settings.key_file), origin="another.example/log"))
    assert r["state"] == "failed" and "origin mismatch" in failed(r)["checkpoint"]


def test_malformed_input_fails_without_throwing(proofs: list[dict[str, Any]]) -> None:
    data = proofs[0]
    results = check({**data, "record_bytes": "not base64!"}, {**data, "vkey": "garbage"},
                    {**data, "checkpoint": "no blank line"}, {**data, "index": data["size"]},
                    {**data, "vkey": None})
    assert [r["state"] for r in results] == ["failed"] * 5
    assert "base64" in failed(results[0])["leaf hash"]
    assert "name+keyid+key" in failed(results[1])["ledger key"]
    assert "blank line" in failed(results[2])["checkpoint"]
    assert "outside" in failed(results[3])["inclusion path"]


def test_without_ed25519_it_says_unsupported_and_never_verified(proofs: list[dict[str, Any]]) -> None:
    genuine = next(p for p in proofs if len(p["hashes"]) >= 2)
    tampered = {**genuine, "hashes": list(reversed(genuine["hashes"]))}
    good, bad = check(genuine, tampered, subtle="no-ed25519")
    assert good["state"] == "unsupported" and "Ed25519" in good["summary"]
    assert "Verified" not in good["summary"]
    assert bad["state"] == "failed"  # a failure that needs no signature check is still reported


def test_a_key_with_plus_in_its_base64_is_read_whole(console: Console, proofs: list[dict[str, Any]]) -> None:
    name = load_signer(console.settings.key_file).name
    signer = next(s for s in (NoteSigner.generate(name) for _ in range(1000))
                  if "+" in s.verifier.vkey.split("+", 2)[2])
    (r,) = check({**resign(proofs[0], signer), "vkey": signer.verifier.vkey})
    # verified: which is why the page tells the reader to compare the key with the published one
    assert r["state"] == "verified", r


def test_a_payload_other_than_the_sealed_one_fails(proofs: list[dict[str, Any]]) -> None:
    data = {**proofs[2], "payload": base64.b64encode(b'{"amount": "1.00"}').decode()}
    r = check(data)[0]
    assert r["state"] == "failed" and "payload mismatch" in failed(r)["payload"]
    assert set(failed(r)) == {"payload"}  # the record itself still checks out


def test_shown_fields_other_than_the_sealed_ones_fail(proofs: list[dict[str, Any]]) -> None:
    other = proofs[4]["shown"]["trace_id"]
    changes = ({"trace_id": other}, {"recorded_at": "2020-01-01T00:00:00.000000Z"}, {"kind": "ledger.note"})
    for change in changes:
        data = {**proofs[1], "shown": {**proofs[1]["shown"], **change}}
        r = check(data)[0]
        assert r["state"] == "failed" and set(failed(r)) == {"sealed fields"}, (change, r)
        assert next(iter(change)) in failed(r)["sealed fields"]


def test_a_sealed_payload_the_ledger_lost_fails(proofs: list[dict[str, Any]]) -> None:
    r = check({**proofs[0], "payload": None, "payload_state": "absent"})[0]
    assert r["state"] == "failed" and "no longer holds it" in failed(r)["payload"]
    withheld = check({**proofs[0], "payload": None, "payload_state": "withheld"})[0]
    assert withheld["state"] == "verified" and "payment message" not in withheld["summary"]
