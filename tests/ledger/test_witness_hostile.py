"""Hostile tests of the witness (C2SP tlog-witness / tlog-cosignature) code: the witness service, the
log collecting cosignatures, ``witness init`` and both bundle verifiers' witness quorum.

Each ``test_bug_*`` reproduces a defect a hostile review found (a crash, a quorum met by one witness, a
revocation not applied, a witness that forgot its state, ...), now fixed: it fails if the defect comes
back. The ``test_holds_*`` tests are attacks that were refused from the start and must stay refused."""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.witness import create_witness_app, load_config, load_cosigner
from audit.bundle.reader import BundleManifest
from audit.bundle.verify import verify_bundle
from audit.bundle.witnesses import check_witnesses
from audit.errors import BundleError
from audit.export.create import ExportFilters, create_bundle
from ledger import Record
from ledger.checkpoint import Checkpoint
from ledger.cosign import WitnessEndpoint, collect
from ledger.cosignature import Cosigner, cosignatures
from ledger.keys import write_private
from ledger.merkle import consistency_ranges, leaf_hash, root_of
from ledger.note import NoteSigner, sign_note
from ledger.witness import LogPolicy, Witness
from tests.audit.bundle_fixture import OFFICER, members, now_fixed, rewrite
from tests.audit.test_export import governed_pipeline
from tests.audit.test_pipeline import submissions
from tests.conftest import Db, make_ledger
from tools import verify_bundle as vb
from wasm_rules import Sandbox

ORIGIN = "bank.example/aml"
ROOT0 = base64.b64encode(hashlib.sha256(b"").digest()).decode()
runner = CliRunner()


# --- helpers --------------------------------------------------------------------------------------


class Log:
    """A log in memory whose checkpoints ``signer`` signs."""

    def __init__(self, signer: NoteSigner, tag: str = "") -> None:
        self.signer, self.tag = signer, tag
        self.leaves: list[bytes] = []

    def grow(self, n: int) -> None:
        start = len(self.leaves)
        self.leaves += [leaf_hash(f"{self.tag}{i}".encode()) for i in range(start, start + n)]

    def note(self, size: int) -> str:
        root = root_of(self.leaves[:size]) if size else hashlib.sha256().digest()
        return Checkpoint(ORIGIN, size, root).sign([self.signer]).note

    def request(self, old: int, size: int, proof: list[bytes] | None = None) -> bytes:
        if proof is None:
            proof = [root_of(self.leaves[a:b]) for a, b in consistency_ranges(old, size)] if old else []
        lines = "".join(base64.b64encode(h).decode() + "\n" for h in proof)
        return f"old {old}\n{lines}\n{self.note(size)}".encode()


def _raw_request(old: int, body: str, signer: NoteSigner) -> bytes:
    """An add-checkpoint request for an arbitrary checkpoint ``body`` signed by ``signer``."""
    return f"old {old}\n\n{sign_note(body, [signer])}".encode()


@pytest.fixture
def log_key() -> NoteSigner:
    return NoteSigner.generate(ORIGIN)


@pytest.fixture
def witness(log_key: NoteSigner, tmp_path: Path) -> Iterator[Witness]:
    w = Witness(Cosigner.generate("w.example/witness"), [LogPolicy(ORIGIN, (log_key.verifier,))],
                tmp_path / "w.db", clock=lambda: 1_790_000_000.0)
    yield w
    w.close()



# --- the witness service ---------------------------------------------------------------------------


@pytest.mark.parametrize(("old", "size"), [("0", "\u00b2"), ("0", "9" * 5000), ("9" * 5000, "5")],
                         ids=["superscript-size", "5000-digit-size", "5000-digit-old"])
def test_bug_witness_crashes_on_a_bad_number_before_any_signature_check(witness: Witness, old: str,
                                                                       size: str) -> None:
    """``Checkpoint.from_text`` takes ``str.isdigit()`` for "decimal", so a size of ``'²'`` passes the
    check and ``int()`` raises ``ValueError``; a size or ``old`` of more than 4,300 digits hits Python's
    int-parsing limit (``ValueError`` again). add_checkpoint raises instead of answering 400. No
    signature is needed (parsing comes first): anyone who reaches the endpoint triggers it."""
    body = f"old {old}\n\n{ORIGIN}\n{size}\n{ROOT0}\n\n\u2014 anyone AAAAAAA=\n".encode()
    outcome = witness.add_checkpoint(body)  # raises ValueError today
    assert outcome.status == 400


def test_bug_witness_http_app_answers_500_to_an_unsigned_request(witness: Witness) -> None:
    """The same request over the HTTP face: an unhandled exception (500, traceback in the log) from an
    unauthenticated body, where tlog-witness asks for 400."""
    from starlette.testclient import TestClient

    client = TestClient(create_witness_app(witness), raise_server_exceptions=False)
    r = client.post("/add-checkpoint", content=f"old 0\n\n{ORIGIN}\n\u00b2\n{ROOT0}\n\n\u2014 x AAAAAAA=\n")
    assert r.status_code == 400, (r.status_code, r.text)


def test_bug_witness_cosigns_a_checkpoint_whose_size_is_not_ascii(witness: Witness, log_key: NoteSigner
                                                                   ) -> None:
    """tlog-checkpoint's size is an ASCII decimal. ``'\u0665'`` (ARABIC-INDIC FIVE) is accepted as 5, and
    the witness then cosigns ``Checkpoint.to_text()`` (``...\\n5\\n...``), a body the log never signed,
    while it stores the note as submitted. It must refuse the checkpoint (400)."""
    out = witness.add_checkpoint(_raw_request(0, f"{ORIGIN}\n\u0665\n{ROOT0}\n", log_key))
    assert out.status == 400, out


def test_bug_witness_crashes_on_a_signed_checkpoint_larger_than_sqlite_integer(witness: Witness,
                                                                               log_key: NoteSigner) -> None:
    """A signed checkpoint of size 2**64 makes the state query raise ``OverflowError`` (500) instead of
    a refusal: sizes must be bounded (tlog sizes are u64; SQLite holds < 2**63)."""
    out = witness.add_checkpoint(_raw_request(0, f"{ORIGIN}\n{2**64}\n{ROOT0}\n", log_key))
    assert out.status in (400, 403), out


def test_bug_revocation_ignored_when_the_config_key_has_white_space(log_key: NoteSigner, tmp_path: Path
                                                                    ) -> None:
    """``load_config`` checks each ``revoked`` key with ``NoteVerifier.from_vkey`` (which strips white
    space) but stores the raw TOML key; the witness then looks revocations up by the canonical
    ``v.vkey``. A key pasted with a trailing space (or newline) is accepted and silently never revoked:
    the witness keeps cosigning checkpoints signed by a key revoked from size 0 (fail-open)."""
    write_private(tmp_path / "witness.key", Cosigner.generate("w.example/witness").skey, exclusive=True)
    vkey = log_key.verifier.vkey
    cfg = tmp_path / "witness.toml"
    cfg.write_text('name = "w.example/witness"\nkey = "witness.key"\nstate = "witness.db"\n\n'
                   f'[[log]]\norigin = "{ORIGIN}"\nkeys = ["{vkey}"]\nrevoked = {{ "{vkey} " = 0 }}\n',
                   encoding="utf-8")
    conf = load_config(cfg)  # accepted
    w = Witness(load_cosigner(conf.key, conf.name), conf.logs, conf.state)
    try:
        log = Log(log_key)
        log.grow(3)
        out = w.add_checkpoint(log.request(0, 3))
    finally:
        w.close()
    assert out.status == 403, out


def test_bug_extra_proof_hash_on_an_identical_checkpoint_is_filed_as_evidence(witness: Witness,
                                                                              log_key: NoteSigner) -> None:
    """Resubmitting the very checkpoint the witness cosigned (same size, same root) with one junk proof
    hash is answered 422 and kept as ``inconsistent`` evidence, so ``witness evidence`` exits 1 and the
    log's ``collect`` reports a fork. The proof is not signed by the log: anyone with a client
    certificate and a public checkpoint can plant this 'evidence' against an honest log (and vary the
    note with junk signature lines to grow the evidence table without bound). A malformed proof is a
    400, and only signed contradictions (split views) are evidence."""
    log = Log(log_key)
    log.grow(5)
    assert witness.add_checkpoint(log.request(0, 5)).ok
    out = witness.add_checkpoint(log.request(5, 5, proof=[bytes(32)]))
    assert out.status != 422 and witness.evidence() == [], (out, witness.evidence())


def test_holds_split_view_refused_after_restart_and_under_a_race(log_key: NoteSigner, tmp_path: Path) -> None:
    """Two roots for one size never both get a cosignature: across a restart (state on disk), at size 0,
    with old == size, and with two Witness objects on the same state file racing from many threads."""
    cos = Cosigner.generate("w.example/witness")
    policy = [LogPolicy(ORIGIN, (log_key.verifier,))]
    a, b = Log(log_key, "a"), Log(log_key, "b")
    a.grow(8)
    b.grow(8)
    w = Witness(cos, policy, tmp_path / "w.db")
    assert w.add_checkpoint(a.request(0, 0)).ok
    w.close()
    w = Witness(cos, policy, tmp_path / "w.db")  # restart
    zero_other = _raw_request(0, f"{ORIGIN}\n0\n{base64.b64encode(bytes(32)).decode()}\n", log_key)
    assert w.add_checkpoint(zero_other).status == 409
    assert w.add_checkpoint(a.request(0, 4)).ok
    assert w.add_checkpoint(b.request(4, 4)).status == 409  # old == size, other root
    w.close()
    w1, w2 = Witness(cos, policy, tmp_path / "w.db"), Witness(cos, policy, tmp_path / "w.db")
    results: list[tuple[str, int]] = []

    def go(w: Witness, log: Log, tag: str) -> None:
        results.append((tag, w.add_checkpoint(log.request(4, 8)).status))

    threads = [threading.Thread(target=go, args=(w, log, tag)) for _ in range(8)
               for w, log, tag in ((w1, a, "a"), (w2, b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w1.close()
    w2.close()
    assert not any(tag == "b" and status == 200 for tag, status in results), results


def test_holds_revoked_key_plus_an_untrusted_key_is_refused(log_key: NoteSigner, tmp_path: Path) -> None:
    other = NoteSigner.generate(ORIGIN)  # same name, not trusted
    w = Witness(Cosigner.generate("w.example/witness"),
                [LogPolicy(ORIGIN, (log_key.verifier,), {log_key.verifier.vkey: 2})], tmp_path / "w.db")
    body = Checkpoint(ORIGIN, 3, bytes(32)).to_text()
    note = sign_note(body, [log_key, other, log_key])  # duplicate line too
    try:
        assert w.add_checkpoint(f"old 0\n\n{note}".encode()).status == 403
    finally:
        w.close()


# --- the log collecting cosignatures ---------------------------------------------------------------


@pytest.mark.parametrize("answer", ["\u00b2", "9" * 5000], ids=["superscript", "5000-digits"])
def test_bug_one_witness_409_with_a_bad_size_crashes_collect(sqlite_db: Db, signer: NoteSigner,
                                                             tmp_path: Path, answer: str) -> None:
    """``collect`` promises "each witness's answer is an outcome, never an exception, so one witness down
    does not stop the others", but a 409 ``text/x.tlog.size`` body of ``'²'`` passes ``isdigit()`` and
    ``int()`` raises (so does a 5,000-digit size): one broken or hostile witness stops the log from
    collecting its quorum (``sealtrail ledger cosign`` ends in a traceback)."""
    ledger = make_ledger(sqlite_db, signer)
    ledger.checkpoint()
    honest = Witness(Cosigner.generate("good.example/w"), [LogPolicy(ledger.origin, (signer.verifier,))],
                     tmp_path / "good.db")
    bad = WitnessEndpoint("https://bad", Cosigner.generate("bad.example/w").verifier)
    good = WitnessEndpoint("https://good", honest.cosigner.verifier)

    def post(url: str, body: bytes) -> tuple[int, str, bytes]:
        if url.startswith("https://bad"):
            return 409, "text/x.tlog.size", f"{answer}\n".encode()
        return honest.post(url, body)

    outcomes = collect(ledger.engine, [bad, good], post)  # raises ValueError today
    assert [o.ok for o in outcomes] == [False, True]


def test_bug_a_witness_that_forgot_what_it_cosigned_raises_no_alarm(sqlite_db: Db, signer: NoteSigner,
                                                                    tmp_path: Path) -> None:
    """The log holds witness W's cosignature of size N. W's state is then lost (restored from an old
    backup, a new state file) and it answers 409 with size 0: the log quietly starts W over from 0 and
    counts its cosignature again. A witness that rolled back is exactly what lets a split view through
    (it would also cosign another history); the log must raise the alarm, not resubmit."""
    ledger = make_ledger(sqlite_db, signer)
    policy = [LogPolicy(ledger.origin, (signer.verifier,))]
    cos = Cosigner.generate("w.example/w")
    ep = WitnessEndpoint("https://w", cos.verifier)
    ledger.checkpoint()
    w = Witness(cos, policy, tmp_path / "w.db")
    assert [o.ok for o in collect(ledger.engine, [ep], w.post)] == [True]
    w.close()
    ledger.append_many([Record("test.event", {"i": i}) for i in range(3)])
    ledger.checkpoint()
    forgot = Witness(cos, policy, tmp_path / "fresh.db")  # same key, its state gone
    (outcome,) = collect(ledger.engine, [ep], forgot.post)
    forgot.close()
    assert outcome.alarm, outcome


# --- bundles: the quorum of pinned witnesses ---------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


@pytest.fixture
def world(sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> dict[str, Any]:
    """A format-8 bundle whose checkpoint ONE witness (w1) cosigned; w2 is a real witness that did not."""
    ledger = make_ledger(sqlite_db, signer)
    governed_pipeline(ledger, sandbox).decide(submissions(6))
    ledger.checkpoint()
    policy = [LogPolicy(ledger.origin, (signer.verifier,))]
    w1 = Witness(Cosigner.generate("w1.example/witness"), policy, tmp_path / "w1.db")
    w2 = Witness(Cosigner.generate("w2.example/witness"), policy, tmp_path / "w2.db")

    def cosign() -> None:
        assert [o.ok for o in collect(ledger.engine, [WitnessEndpoint("https://w1", w1.cosigner.verifier)],
                                      w1.post)] == [True]

    out = tmp_path / "b.zip"
    filters = ExportFilters.of("2000-01-01T00:00:00Z", datetime.now(UTC).isoformat().replace("+00:00", "Z"))
    create_bundle(ledger.engine, ledger, signer, out, filters, OFFICER, now=datetime.now(UTC), cosign=cosign)
    return {"signer": signer, "w1": w1.cosigner, "w2": w2.cosigner, "bundle": out}


def test_bug_export_verify_counts_the_same_pinned_witness_twice(world: dict[str, Any], tmp_path: Path
                                                                ) -> None:
    """``sealtrail export verify --witness-key W1 --witness-key W1 --min-witnesses 2`` passes a bundle
    that ONE witness cosigned: ``check_witnesses`` counts ``pinned`` entries, not distinct witnesses, and
    the CLI's ``min_witnesses > len(witnesses)`` guard counts the duplicate too. (A script that builds the
    --witness-key list from a file with a repeated line gets a quorum of one.)"""
    w1 = world["w1"].verifier.vkey
    res = runner.invoke(app, ["export", "verify", str(world["bundle"]), "--trusted-key",
                              world["signer"].verifier.vkey, "--witness-key", w1, "--witness-key", w1,
                              "--min-witnesses", "2", "--json"])
    assert res.exit_code == 2 and "distinct" in res.output, res.output  # one witness cannot make two


def test_bug_one_key_under_two_witness_names_counts_as_two_witnesses(world: dict[str, Any]) -> None:
    """The key id binds the name, so the same Ed25519 key published as two witnesses (two names) yields
    two 'distinct' pinned witnesses, and a single key holder meets a quorum of 2. The quorum should count
    distinct public keys (or refuse pinned keys that share one)."""
    priv = Cosigner.generate("a.example/witness")._private  # one key, two names
    a, b = Cosigner("a.example/witness", priv), Cosigner("b.example/witness", priv)
    note = members(world["bundle"])["checkpoint.txt"].decode()
    body = note[: note.rfind("\n\n") + 1]
    note2 = note + a.cosign(body, 1_790_000_000) + b.cosign(body, 1_790_000_000)
    manifest = BundleManifest.parse(members(world["bundle"])["manifest.json"])
    report, failures = check_witnesses(manifest, note2, "checkpoint.txt", [a.verifier, b.verifier], 2)
    assert failures, report


def test_bug_independent_verifier_counts_a_duplicated_cosignature_line(world: dict[str, Any],
                                                                      tmp_path: Path) -> None:
    """tools/verify_bundle.py counts verified *lines*, not witnesses: the bank copies w1's one cosignature
    line twice into checkpoint.txt (re-signing its manifest, as it makes the bundle), and
    ``--witness-key W1 --witness-key W2 --min-witnesses 2`` passes although W2 never cosigned. The main
    verifier refuses the same bundle: the two verifiers disagree, and the independent one is fooled."""
    m = members(world["bundle"])
    note = m["checkpoint.txt"].decode()
    line = next(x for x in note.split("\n") if x.startswith("\u2014 w1."))
    doubled = rewrite(world["bundle"], tmp_path / "doubled.zip",
                      change={"checkpoint.txt": (note + line + "\n").encode()}, resign=world["signer"])
    w1, w2 = world["w1"].verifier.vkey, world["w2"].verifier.vkey
    with pytest.raises(BundleError, match="1 of the 2"):  # the main verifier: one witness
        verify_bundle(doubled, [world["signer"].verifier], now=now_fixed,
                      witness_keys=[world["w1"].verifier, world["w2"].verifier], min_witnesses=2)
    code = vb.main([str(doubled), "--trusted-key", world["signer"].verifier.vkey, "--witness-key", w1,
                    "--witness-key", w2, "--min-witnesses", "2", "--json"])
    assert code == 1


def test_holds_listed_witness_not_on_the_checkpoint_fails_both_verifiers(world: dict[str, Any],
                                                                         tmp_path: Path) -> None:
    """A format-8 manifest listing a witness whose cosignature is not in checkpoint.txt fails the main
    verifier and the independent one, and a cosignature line claiming w1 that does not verify is not
    quietly skipped by ``cosignatures()``."""
    import orjson

    from ledger.errors import NoteError

    def add_w2(files: dict[str, bytes]) -> None:
        doc = orjson.loads(files["manifest.json"])
        doc["witnesses"].append({"vkey": world["w2"].verifier.vkey, "timestamp": 1_790_000_000})
        files["manifest.json"] = orjson.dumps(doc)

    forged = rewrite(world["bundle"], tmp_path / "listed.zip", edit=add_w2, resign=world["signer"])
    with pytest.raises(BundleError) as failed:
        verify_bundle(forged, [world["signer"].verifier], now=now_fixed)
    assert "witness.missing" in [f.kind for f in failed.value.failures]
    assert vb.main([str(forged), "--trusted-key", world["signer"].verifier.vkey, "--json"]) == 1
    note = members(world["bundle"])["checkpoint.txt"].decode()
    body = note[: note.rfind("\n\n") + 1]
    other_body = body + "extension line\n"
    bad_line = world["w1"].cosign(other_body, 5)  # w1's name and key id, another body
    with pytest.raises(NoteError):
        cosignatures(note + bad_line, [world["w1"].verifier])


# --- witness init -------------------------------------------------------------------------------------


def test_bug_witness_init_writes_a_config_that_does_not_match_its_key(tmp_path: Path,
                                                                      log_key: NoteSigner) -> None:
    """``witness init`` pastes ``--name`` into ``name = "..."`` unescaped. ``evil"#`` (no white space, so
    the key accepts it) makes the TOML read back as ``name = "evil"`` followed by a comment; a backslash
    escape (``w\\u0041``) reads back as ``wA``. init exits 0 and prints a vkey, but the witness it made can
    never start (``load_cosigner``: key named 'evil"#', config says 'evil')."""
    from api.cli.witness import _open

    cfg = tmp_path / "witness.toml"
    res = runner.invoke(app, ["witness", "init", "--config", str(cfg), "--name", 'evil"#',
                              "--log-key", log_key.verifier.vkey, "--json"])
    if res.exit_code == 0:  # accepted: what it wrote must open
        _open(cfg).close()
    else:  # refused: a usage error
        assert res.exit_code == 2, res.output


def test_bug_witness_init_refused_half_way_leaves_its_key_and_a_broken_config(tmp_path: Path,
                                                                              log_key: NoteSigner) -> None:
    """``--name 'w"x'`` (or a log key named with a quote) is refused only after the key and the config
    were written: the config is not TOML, and a rerun is refused ('already exists'). init should check
    (or escape) first and write nothing when it refuses."""
    from api.cli.witness import _open

    cfg = tmp_path / "witness.toml"
    res = runner.invoke(app, ["witness", "init", "--config", str(cfg), "--name", 'w"x',
                              "--log-key", log_key.verifier.vkey, "--json"])
    assert res.exit_code == 0, res.output  # escaped in the TOML it writes: a quote is no harm
    _open(cfg).close()
    other = tmp_path / "other"
    other.mkdir()
    cfg = other / "witness.toml"
    for bad in (["--name", "w x", "--log-key", log_key.verifier.vkey], ["--name", "w", "--log-key", "nope"]):
        res = runner.invoke(app, ["witness", "init", "--config", str(cfg), *bad, "--json"])
        assert res.exit_code == 2, res.output
        assert sorted(p.name for p in other.iterdir()) == [], "a refused init left files behind"


def test_bug_witness_with_a_lost_state_file_starts_over_and_cosigns_a_fork(tmp_path: Path,
                                                                          log_key: NoteSigner) -> None:
    """The witness's whole defence against split views is its state file, yet a missing state file is
    silently created anew (``Witness.__init__`` / ``witness serve`` / ``witness evidence``): after a
    lost volume or a wrong path the witness accepts ``old 0`` again and cosigns a second root for a size
    it already cosigned, and ``witness evidence`` reports "no evidence" (exit 0). ``witness init`` should
    create the state, and opening a configured witness whose state is gone should refuse to start."""
    from api.cli.witness import _open

    cfg = tmp_path / "witness.toml"
    res = runner.invoke(app, ["witness", "init", "--config", str(cfg), "--name", "w.example/witness",
                              "--log-key", log_key.verifier.vkey, "--json"])
    assert res.exit_code == 0, res.output
    a, b = Log(log_key, "a"), Log(log_key, "b")
    a.grow(4)
    b.grow(4)
    w = _open(cfg)
    assert w.add_checkpoint(a.request(0, 4)).ok
    state = w.state
    w.close()
    for p in tmp_path.glob(state.name + "*"):  # the volume holding the state is lost
        p.unlink()
    try:
        w = _open(cfg)
    except Exception:  # refusing to start is the fix
        return
    try:
        out = w.add_checkpoint(b.request(0, 4))  # the other root of size 4
    finally:
        w.close()
    assert not out.ok, "the witness forgot its state and cosigned a second root for size 4"


def test_bug_independent_verifier_passes_a_format_8_manifest_without_witnesses(world: dict[str, Any],
                                                                              tmp_path: Path) -> None:
    """Both verifiers read ``manifest.witnesses`` alike: an empty list is malformed for both (the tool
    once skipped the check and verified the bundle). Without the list (a format 9 bundle may carry
    none) both verify, and the cosignature lines still on the checkpoint still meet a quorum of the
    witnesses the examiner pins: dropping the list hides no witness and invents none."""
    import orjson

    def edit(value: object) -> Any:
        def change(files: dict[str, bytes]) -> None:
            doc = orjson.loads(files["manifest.json"])
            if value is None:
                del doc["witnesses"]
            else:
                doc["witnesses"] = value
            files["manifest.json"] = orjson.dumps(doc)
        return change

    key, signer = world["signer"].verifier, world["signer"]
    empty = rewrite(world["bundle"], tmp_path / "empty.zip", edit=edit([]), resign=signer)
    with pytest.raises(BundleError, match="witnesses"):
        verify_bundle(empty, [key], now=now_fixed)
    assert vb.main([str(empty), "--trusted-key", key.vkey, "--json"]) == 1
    bare = rewrite(world["bundle"], tmp_path / "bare.zip", edit=edit(None), resign=signer)
    w1 = world["w1"].verifier
    report = verify_bundle(bare, [key], now=now_fixed, witness_keys=[w1], min_witnesses=1)
    assert report.witnesses_pinned == 1
    assert vb.main([str(bare), "--trusted-key", key.vkey, "--witness-key", w1.vkey, "--min-witnesses", "1",
                    "--json"]) == 0


def test_bug_verifiers_disagree_on_a_far_future_cosignature_time(world: dict[str, Any],
                                                                 tmp_path: Path) -> None:
    """A valid cosignature whose timestamp is far in the future (a witness with a broken clock; any u64
    below 2**63 is allowed by tlog-cosignature) verifies in the main verifier, but tools/verify_bundle.py
    turns it into a date, gets ``ValueError``/``OverflowError`` and FAILS the bundle ("the cosignature
    does not hold"): the two verifiers disagree on one bundle."""
    import orjson

    w2 = world["w2"]
    stamp = 2**53 - 1  # the largest a JCS manifest can state
    note = members(world["bundle"])["checkpoint.txt"].decode()
    body = note[: note.rfind("\n\n") + 1]

    def add(files: dict[str, bytes]) -> None:
        files["checkpoint.txt"] = (note + w2.cosign(body, stamp)).encode()
        doc = orjson.loads(files["manifest.json"])
        doc["witnesses"] = sorted([*doc["witnesses"], {"vkey": w2.verifier.vkey, "timestamp": stamp}],
                                  key=lambda x: x["vkey"])
        files["manifest.json"] = orjson.dumps(doc)

    future = rewrite(world["bundle"], tmp_path / "future.zip", edit=add, resign=world["signer"])
    report = verify_bundle(future, [world["signer"].verifier], now=now_fixed,
                           witness_keys=[world["w1"].verifier, w2.verifier], min_witnesses=2)
    assert report.witnesses_pinned == 2  # the main verifier: verified
    code = vb.main([str(future), "--trusted-key", world["signer"].verifier.vkey, "--witness-key",
                    world["w1"].verifier.vkey, "--witness-key", w2.verifier.vkey, "--min-witnesses", "2",
                    "--json"])
    assert code == 0


def test_bug_one_witness_with_a_huge_timestamp_breaks_every_witnessed_export(
        sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    """``collect`` stores any cosignature that verifies, timestamp up to 2**63 - 1, in the append-only
    ``ledger_cosignatures``. The format-8 manifest is RFC 8785 JSON, which cannot hold an integer above
    2**53 - 1, so ``create_bundle`` then fails with ``CanonicalError`` on the newest cosigned checkpoint:
    one witness (a broken clock, or hostile) stops the bank's witnessed exports, and the row can never
    be removed. collect should refuse (not store) a timestamp outside what the bundle format carries, or
    far from the log's clock."""
    ledger = make_ledger(sqlite_db, signer)
    governed_pipeline(ledger, sandbox).decide(submissions(3))
    ledger.checkpoint()
    evil = Cosigner.generate("evil.example/witness")

    def post(url: str, body: bytes) -> tuple[int, str, bytes]:
        note = body.decode().partition("\n\n")[2]
        return 200, "text/plain", evil.cosign(note[: note.rfind("\n\n") + 1], 2**62).encode()

    def cosign() -> None:
        collect(ledger.engine, [WitnessEndpoint("https://evil", evil.verifier)], post)

    filters = ExportFilters.of("2000-01-01T00:00:00Z", datetime.now(UTC).isoformat().replace("+00:00", "Z"))
    create_bundle(ledger.engine, ledger, signer, tmp_path / "b.zip", filters, OFFICER, now=datetime.now(UTC),
                  cosign=cosign)  # raises CanonicalError today


def test_a_content_length_that_is_no_number_is_a_bad_request(witness: Witness) -> None:
    from starlette.testclient import TestClient

    client = TestClient(create_witness_app(witness), raise_server_exceptions=False)
    r = client.post("/add-checkpoint", content=b"old 0\n\n", headers={"content-length": "7x"})
    assert r.status_code == 400, (r.status_code, r.text)


def test_a_state_path_that_is_a_directory_is_a_configuration_error(tmp_path: Path,
                                                                   log_key: NoteSigner) -> None:
    from ledger.witness import WitnessStateError

    (tmp_path / "state").mkdir()
    with pytest.raises(WitnessStateError, match="is a directory"):
        Witness(Cosigner.generate("w.example/w"), [LogPolicy(ORIGIN, (log_key.verifier,))],
                tmp_path / "state")
