"""C2SP signed-note and tlog-checkpoint: published vectors and every malformed input."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from ledger.checkpoint import Checkpoint, SignedCheckpoint
from ledger.errors import KeyFileError, NoteError
from ledger.note import NoteSigner, NoteVerifier, open_note, parse_note, sign_note

VEC = json.loads((Path(__file__).parents[1] / "vectors" / "signed_note.json").read_text())
GO = VEC["go_sumdb_note"]
SPEC = VEC["c2sp_spec_example"]


def test_go_sumdb_note_is_reproduced_byte_for_byte() -> None:
    signer = NoteSigner.from_skey(GO["skey"])
    assert signer.verifier.vkey == GO["vkey"]
    assert signer.verifier.key_id.hex() == "c74f20a3"
    assert signer.skey == GO["skey"]
    assert sign_note(GO["text"], [signer]) == GO["note"]


def test_published_notes_open_with_their_keys() -> None:
    for v in (GO, SPEC):
        verifier = NoteVerifier.from_vkey(v["vkey"])
        text, good = open_note(v["note"], [verifier])
        assert text == v["text"]
        assert good == [verifier]


def test_unknown_signers_are_ignored_but_one_trusted_signature_is_required() -> None:
    verifier = NoteVerifier.from_vkey(GO["vkey"])
    other = NoteSigner.generate("other.example/key")
    both = sign_note(GO["text"], [other, NoteSigner.from_skey(GO["skey"])])
    assert open_note(both, [verifier])[1] == [verifier]
    with pytest.raises(NoteError, match="no signature by a trusted key"):
        open_note(GO["note"], [other.verifier])


def test_tampered_text_fails() -> None:
    verifier = NoteVerifier.from_vkey(GO["vkey"])
    with pytest.raises(NoteError, match="does not verify"):
        open_note(GO["note"].replace("cryptography", "cryptographY"), [verifier])


def test_signature_by_a_known_name_and_id_but_wrong_bytes_fails() -> None:
    verifier = NoteVerifier.from_vkey(GO["vkey"])
    text, sigs = parse_note(GO["note"])
    forged = base64.b64encode(sigs[0].key_id + bytes(64)).decode()
    with pytest.raises(NoteError, match="does not verify"):
        open_note(f"{text}\n\u2014 PeterNeumann {forged}\n", [verifier])


@pytest.mark.parametrize(
    "note",
    [
        "no blank line\n\u2014 a AAAAAAAA\n",
        "text\n\n",
        "text\n\n\u2014 a AAAAAAAA",
        "text\n\n- a AAAAAAAA\n",
        "text\n\n\u2014 a not*base64\n",
        "text\n\n\u2014 a AAAA\n",
        "text\n\n\u2014 a\n",
        "te\x07xt\n\n\u2014 a AAAAAAAA\n",
        "text\n\n" + "\u2014 a AAAAAAAA\n" * 101,
    ],
)
def test_malformed_notes_are_refused(note: str) -> None:
    with pytest.raises(NoteError):
        parse_note(note)


@pytest.mark.parametrize(
    "vkey",
    [
        "PeterNeumann+c74f20a3",
        "PeterNeumann+00000000+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10",
        "PeterNeumann+c74f20a3+Apc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWA",
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a3+!!!",
    ],
)
def test_bad_verifier_keys_are_refused(vkey: str) -> None:
    with pytest.raises(KeyFileError):
        NoteVerifier.from_vkey(vkey)


@pytest.mark.parametrize(
    "skey",
    [
        "PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz",
        "PRIVATE+KEY+PeterNeumann+00000000+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz",
        "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdX",
    ],
)
def test_bad_signer_keys_are_refused(skey: str) -> None:
    with pytest.raises(KeyFileError):
        NoteSigner.from_skey(skey)


def test_checkpoint_text_round_trip_and_signature() -> None:
    signer = NoteSigner.generate("example.com/log")
    cp = Checkpoint("example.com/log", 8, bytes(range(32)), ("ext line",))
    text = cp.to_text()
    assert text == "example.com/log\n8\n" + base64.b64encode(bytes(range(32))).decode() + "\next line\n"
    assert Checkpoint.from_text(text) == cp
    signed = cp.sign([signer])
    assert SignedCheckpoint.verify(signed.note, [signer.verifier], "example.com/log").checkpoint == cp
    with pytest.raises(NoteError, match="origin"):
        SignedCheckpoint.verify(signed.note, [signer.verifier], "other/log")


@pytest.mark.parametrize(
    "text",
    [
        "origin\n8\n",
        "origin\n08\n" + base64.b64encode(bytes(32)).decode() + "\n",
        "origin\n-1\n" + base64.b64encode(bytes(32)).decode() + "\n",
        "origin\n8\n" + base64.b64encode(bytes(31)).decode() + "\n",
        "origin\n8\nnot base64\n",
        "\n8\n" + base64.b64encode(bytes(32)).decode() + "\n",
        "origin\n8\n" + base64.b64encode(bytes(32)).decode(),
        "origin\n8\n" + base64.b64encode(bytes(32)).decode() + "\n\n",
    ],
)
def test_malformed_checkpoints_are_refused(text: str) -> None:
    with pytest.raises(NoteError):
        Checkpoint.from_text(text)
