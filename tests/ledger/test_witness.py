"""The witness cosigns a log's checkpoints only along one consistent history (C2SP tlog-witness),
and the cosignatures it gives are C2SP tlog-cosignature/v1 lines any verifier can check."""

from __future__ import annotations

import base64
import hashlib
import struct
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.checkpoint import Checkpoint
from ledger.cosignature import Cosigner, CosignerVerifier, add_lines, cosignatures
from ledger.errors import KeyFileError, NoteError
from ledger.merkle import consistency_ranges, leaf_hash, root_of
from ledger.note import NoteSigner
from ledger.witness import LogPolicy, Witness

ORIGIN = "bank.example/aml"


class Log:
    """A log in memory: its leaves, and checkpoints signed by ``signer``."""

    def __init__(self, signer: NoteSigner, tag: str = "") -> None:
        self.signer = signer
        self.leaves: list[bytes] = []
        self.tag = tag

    def grow(self, n: int) -> None:
        start = len(self.leaves)
        self.leaves += [leaf_hash(f"{self.tag}{i}".encode()) for i in range(start, start + n)]

    def note(self, size: int | None = None, signers: list[NoteSigner] | None = None) -> str:
        size = len(self.leaves) if size is None else size
        cp = Checkpoint(ORIGIN, size, root_of(self.leaves[:size]) if size else hashlib.sha256().digest())
        return cp.sign(signers or [self.signer]).note

    def proof(self, old: int, new: int) -> list[bytes]:
        return [root_of(self.leaves[a:b]) for a, b in consistency_ranges(old, new)] if old else []

    def request(self, old: int, size: int | None = None, proof: list[bytes] | None = None,
                signers: list[NoteSigner] | None = None) -> bytes:
        size = len(self.leaves) if size is None else size
        hashes = self.proof(old, size) if proof is None else proof
        lines = "".join(base64.b64encode(h).decode() + "\n" for h in hashes)
        return f"old {old}\n{lines}\n".encode() + self.note(size, signers).encode()


@pytest.fixture
def log_key() -> NoteSigner:
    return NoteSigner.generate(ORIGIN)


@pytest.fixture
def cosigner() -> Cosigner:
    return Cosigner.generate("audit.bank.example/witness")


def make_witness(cosigner: Cosigner, path: Path, keys: list[NoteSigner],
                 revoked: dict[str, int] | None = None, clock: float = 1_790_000_000.0) -> Witness:
    policy = LogPolicy(ORIGIN, tuple(k.verifier for k in keys), revoked or {})
    return Witness(cosigner, [policy], path / "witness.db", clock=lambda: clock)


def test_cosignature_line_is_the_c2sp_format(cosigner: Cosigner) -> None:
    """Key id, timestamp and signed message as tlog-cosignature/v1 defines them, checked with
    nothing but hashlib and the Ed25519 primitive."""
    body = Checkpoint(ORIGIN, 5, bytes(32)).to_text()
    line = cosigner.cosign(body, 1_700_000_123)
    assert line.startswith(f"\u2014 {cosigner.name} ") and line.endswith("\n")
    blob = base64.b64decode(line[:-1].split(" ")[2])
    pub = cosigner.verifier.public_key
    assert blob[:4] == hashlib.sha256(cosigner.name.encode() + b"\n\x04" + pub).digest()[:4]
    assert struct.unpack(">Q", blob[4:12])[0] == 1_700_000_123
    message = b"cosignature/v1\ntime 1700000123\n" + body.encode()
    Ed25519PublicKey.from_public_bytes(pub).verify(blob[12:], message)  # raises if wrong
    # a vkey round-trips, and its algorithm byte is 0x04 (not a log key's 0x01)
    v = CosignerVerifier.from_vkey(cosigner.verifier.vkey)
    assert v == cosigner.verifier
    assert base64.b64decode(v.vkey.split("+", 2)[2])[0] == 0x04
    assert Cosigner.from_skey(cosigner.skey).verifier == cosigner.verifier


def test_bad_witness_keys_are_refused_by_name(log_key: NoteSigner) -> None:
    with pytest.raises(KeyFileError, match="not a cosignature/v1 key"):
        CosignerVerifier.from_vkey(log_key.verifier.vkey)  # a log key (0x01) is not a witness key
    w = Cosigner.generate("w1").verifier.vkey
    name, _, key = w.split("+", 2)
    with pytest.raises(KeyFileError, match="does not match"):
        CosignerVerifier.from_vkey(f"{name}+00000000+{key}")
    with pytest.raises(KeyFileError, match="not name\\+keyid\\+key"):
        CosignerVerifier.from_vkey("w1")


def test_witness_cosigns_a_growing_log_and_the_lines_verify(tmp_path: Path, log_key: NoteSigner,
                                                           cosigner: Cosigner) -> None:
    log = Log(log_key)
    w = make_witness(cosigner, tmp_path, [log_key])
    log.grow(7)
    first = w.add_checkpoint(log.request(0))
    assert first.status == 200, first.body
    log.grow(13)
    second = w.add_checkpoint(log.request(7))
    assert second.status == 200, second.body
    note = add_lines(log.note(), [second.body])
    (cs,) = cosignatures(note, [cosigner.verifier])
    assert cs.witness == cosigner.verifier and cs.timestamp == 1_790_000_000
    assert w.latest(ORIGIN) is not None and Checkpoint.from_text(
        w.latest(ORIGIN).split("\n\n")[0] + "\n").size == 20  # type: ignore[union-attr]
    # the same checkpoint again is cosigned again (a log retrying after a lost answer)
    assert w.add_checkpoint(log.request(20)).status == 200
    # a tampered cosignature is an error, not a skipped line
    mid = len(second.body) - 30  # inside the signature bytes, clear of base64 padding bits
    bad = second.body[:mid] + ("A" if second.body[mid] != "A" else "B") + second.body[mid + 1:]
    with pytest.raises(NoteError, match="does not verify"):
        cosignatures(add_lines(log.note(), [bad]), [cosigner.verifier])
    # another witness's verifier finds nothing
    assert cosignatures(note, [Cosigner.generate("other").verifier]) == []


def test_old_size_must_be_the_last_cosigned(tmp_path: Path, log_key: NoteSigner, cosigner: Cosigner) -> None:
    log = Log(log_key)
    w = make_witness(cosigner, tmp_path, [log_key])
    log.grow(10)
    assert w.add_checkpoint(log.request(0)).ok
    log.grow(5)
    stale = w.add_checkpoint(log.request(0))  # the log forgot where the witness stands
    assert (stale.status, stale.body, stale.content_type) == (409, "10\n", "text/x.tlog.size")
    assert w.add_checkpoint(log.request(10)).ok


@pytest.mark.requirement("DORA-24-25-testing")
def test_a_rollback_is_refused(tmp_path: Path, log_key: NoteSigner, cosigner: Cosigner) -> None:
    log = Log(log_key)
    w = make_witness(cosigner, tmp_path, [log_key])
    log.grow(30)
    assert w.add_checkpoint(log.request(0)).ok
    older = w.add_checkpoint(log.request(0, size=20))
    assert older.status == 409 and older.body == "30\n"
    assert w.add_checkpoint(log.request(30, size=20, proof=[])).status == 400  # old > size


def test_an_inconsistent_history_is_refused(tmp_path: Path, log_key: NoteSigner, cosigner: Cosigner) -> None:
    """A proof that does not connect is refused (422) but is no evidence: it is not signed, so a wrong
    proof sent for a good checkpoint must not read as the log's fork."""
    honest, forked = Log(log_key), Log(log_key, tag="x")
    honest.grow(8)
    forked.leaves = honest.leaves[:5]
    forked.grow(10)  # shares the first 5 leaves, then differs
    w = make_witness(cosigner, tmp_path, [log_key])
    assert w.add_checkpoint(honest.request(0)).ok
    # the forked log's checkpoint with its own proof from size 8: the proof cannot hold
    answer = w.add_checkpoint(forked.request(8, proof=forked.proof(8, 15)))
    assert answer.status == 422 and "does not verify" in answer.body
    assert w.evidence() == []
    # the same good checkpoint again, with a junk proof hash: malformed, not a fork
    again = w.add_checkpoint(honest.request(8, proof=[bytes(32)]))
    assert again.status == 400 and w.evidence() == []
    assert Checkpoint.from_text(w.latest(ORIGIN).split("\n\n")[0] + "\n").size == 8  # type: ignore[union-attr]


def test_split_view_is_caught_across_a_restart(tmp_path: Path, log_key: NoteSigner,
                                               cosigner: Cosigner) -> None:
    """Two different checkpoints of one size: the second is refused with both as evidence, also
    when the witness restarted between them and the log moved on meanwhile."""
    view_a, view_b = Log(log_key, "a"), Log(log_key, "b")
    view_a.grow(12)
    view_b.grow(12)
    w = make_witness(cosigner, tmp_path, [log_key])
    assert w.add_checkpoint(view_a.request(0)).ok
    view_a.grow(4)
    assert w.add_checkpoint(view_a.request(12)).ok
    w.close()
    again = make_witness(cosigner, tmp_path, [log_key])  # restarted: only the state file remembers
    answer = again.add_checkpoint(view_b.request(0))
    assert answer.status == 409 and answer.body == "16\n"
    (ev,) = again.evidence(ORIGIN)
    assert ev.kind == "split-view" and ev.size == 12
    assert ev.submitted_note == view_b.note() and ev.cosigned_note == view_a.note(12)
    # the evidence verifies on its own: both notes carry the log's valid signature
    for n in (ev.submitted_note, ev.cosigned_note):
        assert Checkpoint.from_text(n.split("\n\n")[0] + "\n").size == 12


def test_signatures_keys_and_revocation(tmp_path: Path, log_key: NoteSigner, cosigner: Cosigner) -> None:
    log = Log(log_key)
    log.grow(3)
    stranger = NoteSigner.generate(ORIGIN)
    w = make_witness(cosigner, tmp_path, [log_key])
    forged = w.add_checkpoint(log.request(0, signers=[stranger]))
    assert forged.status == 403 and "no signature by a key trusted" in forged.body
    other = Witness(cosigner, [LogPolicy("other.example/log", (log_key.verifier,))], tmp_path / "o.db")
    assert other.add_checkpoint(log.request(0)).status == 404
    assert w.add_checkpoint(b"old x\n\n" + log.note().encode()).status == 400
    assert w.add_checkpoint(b"no blank line").status == 400
    # a key revoked from size 10 signs size 3 but not size 10 or later
    new_key = NoteSigner.generate(ORIGIN)
    rw = make_witness(cosigner, tmp_path / "r", [log_key, new_key], revoked={log_key.verifier.vkey: 10})
    assert rw.add_checkpoint(log.request(0)).ok
    log.grow(9)
    stolen = rw.add_checkpoint(log.request(3))
    assert stolen.status == 403 and "revoked from size 10" in stolen.body
    assert rw.add_checkpoint(log.request(3, signers=[new_key])).ok


def test_racing_requests_never_roll_the_witness_back(tmp_path: Path, log_key: NoteSigner,
                                                     cosigner: Cosigner) -> None:
    """Many threads submit checkpoints of several sizes from the same old size: exactly one of each
    old size wins, and the witness ends at the largest size any success reported."""
    log = Log(log_key)
    log.grow(64)
    w = make_witness(cosigner, tmp_path, [log_key])
    assert w.add_checkpoint(log.request(0, size=1)).ok
    results: list[tuple[int, int]] = []

    def submit(size: int) -> None:
        results.append((size, w.add_checkpoint(log.request(1, size=size)).status))

    threads = [threading.Thread(target=submit, args=(s,)) for s in range(2, 64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [s for s, status in results if status == 200]
    assert len(won) == 1 and all(status == 409 for s, status in results if s not in won)
    latest = w.latest(ORIGIN)
    assert latest is not None and Checkpoint.from_text(latest.split("\n\n")[0] + "\n").size == won[0]
