"""Re-derivation under attack (``audit.bundle.rederive``, ``sealtrail.bundle/7``): a forger holding
the signing keys seals records whose features, state delta or transaction do not follow from the
payment, or cuts, reorders and mislabels the state a bundle carries; each must fail with the kind
an examiner reads, never pass and never crash. Honest ledgers must re-derive: decisions of two
deciders whose states began at different seqs, a payload of two messages, a window and an account
cut, a state that ends at the last decision's delta; what cannot be re-derived is counted by reason.

The ledgers are small (a few batches of simulated payments, one second a commit). "Perfect" forgeries
recompute ``proofs/nodes.bin`` from the real ledger for the leaves they carry and re-sign the
manifest, so that only the re-derivation's own checks stand between them and a pass."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from sqlalchemy import select

from audit.bundle.verify import BundleReport, verify_bundle
from audit.decide import pipeline as pipeline_module
from audit.decide.account_secret import load_state_key
from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.decide.types import Submission
from audit.errors import BundleError, BundleFailed
from audit.export import state as state_module
from audit.export.create import create_bundle
from audit.export.select import ExportFilters
from audit.query.index import TraceIndex
from audit.state.delta import DELTA_SCHEMA_V1
from audit.state.replay import catch_up, ledger_size
from inference.features import FeatureExtractor
from inference.schema import EXTRACTED_NAMES
from inference.velocity import VelocityState
from ledger import NoteSigner, store
from ledger.append import Ledger
from ledger.jcs import Jcs, canonical_bytes
from ledger.merkle import root_of
from ledger.multiproof import encode_nodes, frontier
from ledger.retention import purge_payloads
from tests.audit.bundle_fixture import joined, lines, members, rewrite
from tests.audit.test_bundle_completeness import Steps
from tests.audit.test_export import governed_pipeline
from tests.audit.test_pipeline import PRINCIPAL, submissions
from tests.conftest import ORIGIN, Db, make_ledger
from wasm_rules import Sandbox

OFFICER = Principal.local("officer")
T0 = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)  # after the genesis: times never go back
EVER = ("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z")
FIN = Path(__file__).parents[1] / "vectors" / "messages" / "mt" / "rje_two.fin"  # two MT103 in one file
PER_BATCH = 10
PURGED = "payload purged under retention"


def _purged(counts: dict[str, int]) -> int:
    """The decisions counted as not re-derived for a purged payload (whatever purge record)."""
    return sum(n for why, n in counts.items() if why.startswith(PURGED))
COLUMN = "log_amount_usd"  # the feature a forger nudges


@dataclass
class World:
    ledger: Ledger
    signer: NoteSigner
    dir: Path
    times: list[str] = field(default_factory=list)  # recorded_at of each batch
    seqs: list[list[int]] = field(default_factory=list)  # the decisions of each batch
    marks: dict[str, int] = field(default_factory=dict)  # seqs the tests name

    def decide(self, pipe: Pipeline, batch: list[Submission]) -> list[int]:
        got = pipe.decide(batch)
        self.times.append(got[0].recorded_at)
        self.seqs.append([d.seq for d in got])
        return self.seqs[-1]

    def export(self, name: str, start: str = EVER[0], end: str = EVER[1], **filters: Any) -> Path:
        out = self.dir / name
        create_bundle(self.ledger.engine, self.ledger, self.signer, out,
                      ExportFilters.of(start, end, **filters), OFFICER)
        return out

    def verify(self, path: Path, sandbox: Sandbox) -> BundleReport:
        return verify_bundle(path, [self.signer.verifier], sandbox=sandbox)

    def failures(self, path: Path, sandbox: Sandbox) -> BundleFailed:
        """The failures of a bundle that must fail: a ``BundleError``, never another exception."""
        with pytest.raises(BundleError) as info:
            self.verify(path, sandbox)
        assert isinstance(info.value, BundleFailed), info.value
        return info.value


def _world(tmp_path_factory: pytest.TempPathFactory, name: str) -> World:
    d = tmp_path_factory.mktemp(name)
    signer = NoteSigner.generate(ORIGIN)
    ledger = make_ledger(Db(f"sqlite:///{d / 'ledger.db'}", "sqlite"), signer)
    ledger.clock = Steps()  # one commit, one second, from a day ahead
    return World(ledger, signer, d)


def _caught_up_from(w: World, first: Pipeline, from_seq: int, *, vouch: bool = True) -> Pipeline:
    """A second decider on the log whose state is an empty one caught up from ``from_seq`` (with
    ``vouch``, it says so in its deltas; without, it seals ``state_from`` null)."""
    ex = FeatureExtractor(state=VelocityState(load_state_key(w.ledger.engine)))
    catch_up(w.ledger.engine, ex, from_seq)
    return Pipeline(w.ledger, first.scorer, first.rules, extractor=ex, index=TraceIndex(),
                    covered=ledger_size(w.ledger.engine), state_from=from_seq if vouch else None)


def _envelope(w: World, seq: int) -> dict[str, Any]:
    e = store.entries
    with w.ledger.engine.connect() as conn:
        doc: dict[str, Any] = orjson.loads(bytes(conn.execute(select(e.c.record).where(e.c.seq == seq))
                                                 .scalar_one()))
    return doc


def _leaves(w: World) -> list[bytes]:
    e = store.entries
    with w.ledger.engine.connect() as conn:
        return [bytes(h) for h in conn.execute(select(e.c.leaf_hash).order_by(e.c.seq)).scalars()]


# ----------------------------------------------------------------------------------- the ledgers


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory, sandbox: Sandbox) -> World:
    """Two deciders on one log: ``a`` from the empty ledger (origin 0), ``b`` from the middle of the
    second batch (origin ``b_from``), taking turns; ``b`` also decides a file of two messages (one
    payload); one payload of ``a``'s is purged."""
    w = _world(tmp_path_factory, "honest")
    a = governed_pipeline(w.ledger, sandbox)
    subs = submissions(40, seed=31)
    batches = [subs[i:i + PER_BATCH] for i in range(0, 7 * PER_BATCH, PER_BATCH)]
    w.decide(a, batches[0])
    w.decide(a, batches[1])
    w.marks["b_from"] = w.seqs[1][4]
    b = _caught_up_from(w, a, w.marks["b_from"])
    fin = [s for s in Submission.parse(FIN.read_bytes(), "mt", PRINCIPAL, batches[2][-1].received_at)
           if isinstance(s, Submission)]
    assert len(fin) == 2
    w.decide(b, batches[2] + fin)
    w.marks["fin_second"] = w.seqs[2][-1]
    for i, pipe in enumerate((a, b, a, b), start=3):
        w.decide(pipe, batches[i])
    purged = w.seqs[5][3]
    purge_payloads(w.ledger, [_envelope(w, purged)["payload_sha256"]], "erasure order 42")
    w.marks["purged"] = purged
    return w


@pytest.fixture(scope="module")
def full(honest: World) -> Path:
    return honest.export("full.zip")


@pytest.fixture(scope="module")
def window(honest: World) -> Path:
    """Batches 3 to 5: its state lines carry the summaries and deltas from seq 0 before it."""
    return honest.export("window.zip", honest.times[3], honest.times[6])


@dataclass
class Forged:
    world: World
    report: BundleReport
    failures: list[BundleError]
    targets: dict[str, tuple[int, str]]  # which forgery -> (seq, trace id)


@pytest.fixture(scope="module")
def forged(tmp_path_factory: pytest.TempPathFactory, sandbox: Sandbox) -> Forged:
    """A ledger sealed, validly, by a decider that lies in three ways in its second batch: one
    payment's feature nudged after extraction (``features``); one payment's amount doubled before
    extraction, so that its state delta and the state after it agree with each other but not with
    the message (``delta``); one submission's parsed transaction altered after parsing (``transaction``)."""
    w = _world(tmp_path_factory, "forged")
    subs = submissions(20, seed=7)
    batches = [subs[i:i + PER_BATCH] for i in range(0, 3 * PER_BATCH, PER_BATCH)]
    refs = {"features": batches[1][2].transaction.reference, "delta": batches[1][5].transaction.reference}
    tx = batches[1][7].transaction
    batches[1][7] = dataclasses.replace(batches[1][7],
                                        transaction=dataclasses.replace(tx, amount=tx.amount + 1))
    col = EXTRACTED_NAMES.index(COLUMN)
    real = FeatureExtractor.extract

    def lying(self: FeatureExtractor, txs: Any, at: Any, deltas: Any = None, ids: Any = None) -> np.ndarray:
        if deltas is None or ids is not None:  # not the pipeline's call
            return real(self, txs, at, deltas, ids)
        txs = [dataclasses.replace(t, amount=t.amount * 2) if t.reference == refs["delta"] else t
               for t in txs]
        rows = real(self, txs, at, deltas)
        for i, t in enumerate(txs):
            if t.reference == refs["features"]:
                rows[i, col] += 1.0
        return rows

    pipe = governed_pipeline(w.ledger, sandbox)
    w.decide(pipe, batches[0])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FeatureExtractor, "extract", lying)
        w.decide(pipe, batches[1])
    w.decide(pipe, batches[2])
    targets = {"features": w.seqs[1][2], "delta": w.seqs[1][5], "transaction": w.seqs[1][7]}
    out = w.failures(w.export("forged.zip"), sandbox)
    assert out.report is not None  # the bundle was read to the end
    return Forged(w, out.report, list(out.failures),
                  {k: (s, _envelope(w, s)["trace_id"]) for k, s in targets.items()})


def _v1_delta_body(state_key_id: str, first_seq: int, entries: bytes, decider: str,
                   state_from: int | None = None, account_risk: bytes | None = None) -> Jcs:
    """A version 1 delta, as an earlier release sealed it: no ``state_from``."""
    return Jcs(b'{"decider":"' + decider.encode() + b'","entries":' + entries + b',"first_seq":'
               + str(first_seq).encode() + b',"schema":"' + DELTA_SCHEMA_V1.encode() + b'","state_key_id":"'
               + state_key_id.encode() + b'"}')


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory, sandbox: Sandbox) -> World:
    """Batch 0 sealed with version 1 deltas (an earlier release), batch 1 by a decider handed a
    state it cannot vouch for (``state_from`` null), batch 2 by a decider from the empty ledger."""
    w = _world(tmp_path_factory, "legacy")
    subs = submissions(15, seed=11)
    batches = [subs[i:i + PER_BATCH] for i in range(0, 3 * PER_BATCH, PER_BATCH)]
    a = governed_pipeline(w.ledger, sandbox)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline_module, "delta_body", _v1_delta_body)
        w.decide(a, batches[0])
    w.decide(_caught_up_from(w, a, 0, vouch=False), batches[1])
    w.decide(a, batches[2])
    return w


# ------------------------------------------------------------------------------- perfect forgeries


def _seq_of(index_line: bytes) -> int | None:
    try:
        seq = orjson.loads(index_line)["seq"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return seq if type(seq) is int else None


def _kind_of(line: bytes) -> object:
    try:
        return orjson.loads(line).get("kind")
    except (orjson.JSONDecodeError, AttributeError):
        return None


def _index_for(line: bytes, like: bytes) -> bytes:
    """The index line of state record ``line`` (at the seq and chain hash of ``like``)."""
    ix = orjson.loads(like)
    ix["leaf_hash"] = hashlib.sha256(b"\x00" + line).hexdigest()
    return canonical_bytes(ix)


StateEdit = Callable[[list[bytes], list[bytes], dict[str, Any]], None]


def forge(w: World, src: Path, name: str, edit: StateEdit) -> Path:
    """``src`` with its state lines edited in place by ``edit(records, index, manifest_state)``, the
    manifest's state counts stated to match, ``proofs/nodes.bin`` made again from the ledger for
    every leaf carried, and the manifest signed again with the ledger's key."""
    m = members(src)
    manifest = orjson.loads(m["manifest.json"])
    recs, idx = lines(m["state/records.jsonl"]), lines(m["state/index.jsonl"])
    state = dict(manifest["state"])
    edit(recs, idx, state)
    size = manifest["checkpoint"]["size"]
    carried = {s for s in map(_seq_of, lines(m["index.jsonl"]) + idx) if s is not None and 0 <= s < size}
    leaves = _leaves(w)[:size]
    kinds = [_kind_of(r) for r in recs]
    state.update(deltas=kinds.count("state.delta"), summaries=kinds.count("decision.summary"))
    state["records"] = state["deltas"] + state["summaries"]

    def files(f: dict[str, bytes]) -> None:
        f["state/records.jsonl"], f["state/index.jsonl"] = joined(recs), joined(idx)
        f["proofs/nodes.bin"] = encode_nodes((lo, hi, root_of(leaves[lo:hi]))
                                             for lo, hi in frontier(size, sorted(carried)))
        f["manifest.json"] = canonical_bytes({**manifest, "state": state})

    return rewrite(src, w.dir / name, edit=files, resign=w.signer)


def _at(idx: list[bytes], kind: str, pick: Callable[[list[int]], int] = lambda xs: xs[0]) -> int:
    """The position in the state lines of the line of ``kind`` that ``pick`` chooses by seq."""
    seqs = [s for line in idx if orjson.loads(line)["kind"] == kind and (s := _seq_of(line)) is not None]
    want = pick(seqs)
    return next(i for i, line in enumerate(idx) if _seq_of(line) == want)


def _kinds(err: BundleFailed) -> set[str]:
    return {f.kind for f in err.failures}


# ------------------------------------------------------------------------------- honest ledgers


def test_an_unforged_copy_verifies_so_the_forgeries_below_fail_on_their_edit(
        honest: World, window: Path, sandbox: Sandbox) -> None:
    report = honest.verify(forge(honest, window, "same.zip", lambda r, i, s: None), sandbox)
    assert report.rederived == report.decisions - 1 > 0 and _purged(report.not_rederived) == 1


def test_decisions_of_two_deciders_with_different_origins_all_re_derive(
        honest: World, full: Path, sandbox: Sandbox) -> None:
    report = honest.verify(full, sandbox)
    deltas = [orjson.loads(r)["record"] for r in lines(members(full)["state/records.jsonl"])
              if _kind_of(r) == "state.delta"]
    assert {d["state_from"] for d in deltas} == {0, honest.marks["b_from"]}
    assert orjson.loads(members(full)["manifest.json"])["state"]["from_seq"] == 0
    assert report.decisions == sum(map(len, honest.seqs))
    assert _purged(report.not_rederived) == 1  # the purged payload is counted, not failed
    assert report.rederived == report.decisions - 1


def test_re_derivation_depends_on_the_origin_a_delta_names(honest: World, full: Path,
                                                           sandbox: Sandbox) -> None:
    """The second decider's deltas made to name origin 0: its decisions no longer re-derive (so the
    test above shows that each origin's state was rebuilt, not one shared by both)."""
    b_from = honest.marks["b_from"]

    def origin_0(recs: list[bytes], idx: list[bytes], state: dict[str, Any]) -> None:
        for i, line in enumerate(recs):
            env = orjson.loads(line)
            if env["kind"] == "state.delta" and env["record"]["state_from"] == b_from:
                env["record"]["state_from"] = 0
                recs[i] = canonical_bytes(env)
                idx[i] = _index_for(recs[i], idx[i])

    err = honest.failures(forge(honest, full, "origin0.zip", origin_0), sandbox)
    off = {f.seq for f in err.failures if f.kind == "replay.rederive.features"}
    assert off and off <= set(honest.seqs[2] + honest.seqs[4] + honest.seqs[6])  # b's batches only


def test_every_message_of_a_payload_of_two_re_derives(honest: World, full: Path, sandbox: Sandbox) -> None:
    """The file travels once, with its first message's decision; its second is re-derived too, not
    counted as purged."""
    payloads = [orjson.loads(x) for x in lines(members(full)["payloads.jsonl"])]
    fin = _envelope(honest, honest.marks["fin_second"])
    assert sum(p["sha256"] == fin["payload_sha256"] for p in payloads) == 1
    assert _purged(honest.verify(full, sandbox).not_rederived) == 1  # the purged one only


def test_a_window_re_derives_on_the_state_carried_from_before_it(
        honest: World, window: Path, sandbox: Sandbox) -> None:
    report = honest.verify(window, sandbox)
    kinds = [_kind_of(r) for r in lines(members(window)["state/records.jsonl"])]
    assert kinds.count("decision.summary") == 2 and kinds.count("state.delta") >= 6  # batches 0 and 1 on
    assert report.decisions == sum(len(s) for s in honest.seqs[3:6])
    assert report.rederived == report.decisions - 1 and _purged(report.not_rederived) == 1
    assert report.state_records == len(kinds)


def test_a_window_cut_to_one_account_re_derives_on_every_accounts_deltas(
        honest: World, sandbox: Sandbox) -> None:
    p = store.payloads
    with honest.ledger.engine.connect() as conn:
        raw = bytes(conn.execute(select(p.c.data).where(
            p.c.sha256 == _envelope(honest, honest.seqs[4][6])["payload_sha256"])).scalar_one())
    (sub,) = Submission.parse(raw, "json", PRINCIPAL, T0)
    assert isinstance(sub, Submission)
    account = sub.transaction.originator.account
    assert account
    out = honest.export("account.zip", honest.times[3], honest.times[6], account=account)
    report = honest.verify(out, sandbox)
    entries = [e for r in lines(members(out)["state/records.jsonl"]) if _kind_of(r) == "state.delta"
               for e in orjson.loads(r)["record"]["entries"]]
    assert report.decisions < len(entries)  # the state holds other accounts' payments
    assert report.rederived == report.decisions - sum(report.not_rederived.values()) >= 1
    assert all(k.startswith(PURGED) for k in report.not_rederived)


def test_a_state_that_ends_at_the_last_decisions_delta_verifies(
        honest: World, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """``audit.export.state`` carries the deltas up to its last decision's (with pages of one delta
    it stops right there): the summary that brackets the window on the right speaks for decisions
    after the bundle's, whose delta no state it re-derives on needs."""
    monkeypatch.setattr(state_module, "_PAGE", 1)
    out = honest.export("tight.zip", honest.times[3], honest.times[6])
    report = honest.verify(out, sandbox)
    assert report.rederived == report.decisions - 1


def test_deltas_of_earlier_releases_are_counted_by_reason_not_failed(legacy: World, sandbox: Sandbox) -> None:
    report = legacy.verify(legacy.export("legacy.zip"), sandbox)
    v1, unvouched = (sum(1 for r in report.not_rederived if why in r)
                     for why in ("state-delta/1", "unknown origin"))
    assert (v1, unvouched) == (1, 1), report.not_rederived  # two reasons, told apart
    assert sorted(report.not_rederived.values()) == sorted([len(legacy.seqs[0]), len(legacy.seqs[1])])
    assert report.rederived == len(legacy.seqs[2])  # on a state that applied both


# ----------------------------------------------------------------------------- forged records


def _named(f: Forged, kind: str) -> list[BundleError]:
    return [e for e in f.failures if e.kind == kind]


def test_a_sealed_record_with_a_nudged_feature_fails_naming_seq_trace_and_column(forged: Forged) -> None:
    seq, tid = forged.targets["features"]
    (err,) = _named(forged, "replay.rederive.features")
    assert (err.seq, err.trace_id) == (seq, tid)
    assert COLUMN in str(err) and str(err).count("recorded") == 1  # that column alone


def test_a_state_delta_that_agrees_with_its_state_but_not_its_message_fails(forged: Forged) -> None:
    seq, tid = forged.targets["delta"]
    (err,) = _named(forged, "replay.rederive.delta")
    assert (err.seq, err.trace_id) == (seq, tid) and "cents" in str(err)


def test_a_transaction_that_is_not_its_payloads_fails(forged: Forged) -> None:
    seq, tid = forged.targets["transaction"]
    (err,) = _named(forged, "replay.rederive.transaction")
    assert (err.seq, err.trace_id) == (seq, tid)


def test_the_other_decisions_of_a_forged_ledger_still_re_derive(forged: Forged) -> None:
    """A lie fails its own decision only: the state goes on from the sealed delta."""
    assert {e.seq for e in forged.failures if e.kind.startswith("replay.rederive")} == {
        s for s, _ in forged.targets.values()}
    assert forged.report.rederived == sum(map(len, forged.world.seqs)) - 3


# --------------------------------------------------------------------------- forged state lines


def _drop(kind: str, pick: Callable[[list[int]], int]) -> StateEdit:
    def edit(recs: list[bytes], idx: list[bytes], state: dict[str, Any]) -> None:
        i = _at(idx, kind, pick)
        del recs[i], idx[i]
    return edit


def test_a_delta_left_out_before_the_window_fails(honest: World, window: Path, sandbox: Sandbox) -> None:
    out = forge(honest, window, "nodelta.zip", _drop("state.delta", lambda xs: xs[1]))
    err = honest.failures(out, sandbox)
    assert "state.delta_missing" in _kinds(err)
    assert not any(k.startswith("proof") for k in _kinds(err))  # the proofs hold: the state check caught it


def test_the_delta_of_exported_decisions_left_out_fails(honest: World, window: Path,
                                                        sandbox: Sandbox) -> None:
    last = honest.seqs[5][-1]
    err = honest.failures(forge(honest, window, "nolast.zip",
                                _drop("state.delta", lambda xs: min(x for x in xs if x > last))), sandbox)
    assert ("state.delta_missing", last + 2) in {(f.kind, f.seq) for f in err.failures}


@pytest.mark.parametrize("pick", [min, lambda xs: xs[1]], ids=["first", "second"])
def test_a_summary_left_out_of_the_state_breaks_the_chain(honest: World, window: Path, sandbox: Sandbox,
                                                          pick: Callable[[list[int]], int]) -> None:
    err = honest.failures(forge(honest, window, "nosummary.zip", _drop("decision.summary", pick)), sandbox)
    assert "state.chain" in _kinds(err)
    assert not any(k.startswith("proof") for k in _kinds(err))


def test_an_origin_raised_past_the_decisions_with_their_state_dropped_fails(
        honest: World, window: Path, sandbox: Sandbox) -> None:
    """The forger's way to have every decision counted as not re-derived rather than failed: name a
    later origin (the right bracket's summary) and carry nothing before it."""
    m = members(window)
    right = max(orjson.loads(x)["seq"] for x, r in zip(lines(m["index.jsonl"]), lines(m["records.jsonl"]),
                                                       strict=True) if _kind_of(r) == "decision.summary")

    def raised(recs: list[bytes], idx: list[bytes], state: dict[str, Any]) -> None:
        keep = [i for i, line in enumerate(idx) if (_seq_of(line) or 0) > right]
        recs[:], idx[:] = [recs[i] for i in keep], [idx[i] for i in keep]
        state["from_seq"] = right

    err = honest.failures(forge(honest, window, "raised.zip", raised), sandbox)
    assert "state.origin" in _kinds(err)


def _swap(recs: list[bytes], idx: list[bytes], state: dict[str, Any]) -> None:
    recs[1], recs[2], idx[1], idx[2] = recs[2], recs[1], idx[2], idx[1]


def _duplicate(recs: list[bytes], idx: list[bytes], state: dict[str, Any]) -> None:
    recs.insert(3, recs[3])
    idx.insert(3, idx[3])


def _window_summary(window: Path) -> tuple[bytes, bytes]:
    recs, idx = lines(members(window)["records.jsonl"]), lines(members(window)["index.jsonl"])
    return next((r, i) for r, i in zip(recs, idx, strict=True) if _kind_of(r) == "decision.summary")


def _hostile_edits(honest: World, window: Path) -> Iterator[tuple[str, StateEdit, set[str]]]:
    """(name, edit, the kinds of which one at least must be named)."""
    yield "swapped", _swap, {"state.seq"}
    yield "duplicated", _duplicate, {"state.seq"}
    rec, ix = _window_summary(window)

    def at_record_seq(recs: list[bytes], idx: list[bytes], state: dict[str, Any]) -> None:
        at = next(i for i, line in enumerate(idx) if (_seq_of(line) or 0) > orjson.loads(ix)["seq"])
        recs.insert(at, rec)
        idx.insert(at, ix)
    yield "a records.jsonl summary again", at_record_seq, {"state.duplicate"}
    before = min(honest.seqs[1])  # a decision the window does not export, with its real leaf

    def decision_line(recs: list[bytes], idx: list[bytes], state: dict[str, Any]) -> None:
        env = _envelope(honest, before)
        line = canonical_bytes(env)
        at = next(i for i, x in enumerate(idx) if (_seq_of(x) or 0) > before)
        like = orjson.loads(idx[at])
        like.update(seq=before, kind="decision", trace_id=env["trace_id"])
        recs.insert(at, line)
        idx.insert(at, _index_for(line, canonical_bytes(like)))
    yield "a decision as a state line", decision_line, {"state.record", "state.chain_hash"}

    def replace(i: int, line: bytes, index: bytes | None = None) -> StateEdit:
        def edit(recs: list[bytes], idx: list[bytes], state: dict[str, Any]) -> None:
            recs[i] = line
            idx[i] = _index_for(line, idx[i]) if index is None else index
        return edit
    for name, line in (("not JSON", b'{"kind":"state.delta","record":'), ("a list", b"[]"), ("null", b"null"),
                       ("no record", b'{"kind":"state.delta"}'),
                       ("a delta of a list", b'{"kind":"state.delta","record":[1]}'),
                       ("a summary of a string", b'{"kind":"decision.summary","record":"x"}'),
                       ("a huge integer",
                        b'{"kind":"state.delta","record":{"first_seq":' + b"9" * 30 + b"}}")):
        yield f"record line {name}", replace(1, line), {"state.record", "state.index"}
    for name, index in (("not JSON", b"{"), ("a list", b"[]"), ("a number", b"7"), ("no seq", b"{}"),
                        ("a bool seq", b'{"seq":true,"kind":"state.delta","trace_id":"x","chain_hash":"00",'
                                       b'"leaf_hash":"00"}'),
                        ("a trace id that is a list", None)):
        if index is None:
            def listed(recs: list[bytes], idx: list[bytes], state: dict[str, Any]) -> None:
                ix = orjson.loads(idx[1])
                ix["trace_id"] = ["x"]
                idx[1] = canonical_bytes(ix)
            yield f"index line {name}", listed, {"state.index"}
        else:
            yield f"index line {name}", replace(1, lines(members(window)["state/records.jsonl"])[1], index), {
                "state.index"}

    def no_state(recs: list[bytes], idx: list[bytes], state: dict[str, Any]) -> None:
        recs.clear()
        idx.clear()
    yield "no state lines", no_state, {"replay.rederive.features", "state.delta_missing", "state.chain"}


def test_hostile_state_lines_fail_with_a_bundle_error_never_a_crash(
        honest: World, window: Path, sandbox: Sandbox) -> None:
    for n, (name, edit, want) in enumerate(_hostile_edits(honest, window)):
        err = honest.failures(forge(honest, window, f"hostile{n}.zip", edit), sandbox)
        assert _kinds(err) & want, (name, _kinds(err))


def test_state_files_missing_from_a_format_7_bundle_are_a_bundle_error(
        honest: World, window: Path, sandbox: Sandbox) -> None:
    out = rewrite(window, honest.dir / "nofiles.zip",
                  change={"state/records.jsonl": None, "state/index.jsonl": None}, resign=honest.signer)
    with pytest.raises(BundleError):
        honest.verify(out, sandbox)


# ----------------------------------------------------------------------- forged decision bodies


def _edited_decision(w: World, src: Path, name: str, edit: Callable[[dict[str, Any]], None]) -> Path:
    """``src`` with its first decision's body edited (index leaf fixed, manifest re-signed: the
    proofs fail, and the verifier must still read the rest as a ``BundleError``)."""
    m = members(src)
    recs, idx = lines(m["records.jsonl"]), lines(m["index.jsonl"])
    k = next(i for i, r in enumerate(recs) if _kind_of(r) == "decision")
    env = orjson.loads(recs[k])
    edit(env["record"])
    recs[k] = json.dumps(env, separators=(",", ":")).encode()
    idx[k] = _index_for(recs[k], idx[k])
    return rewrite(src, w.dir / name, change={"records.jsonl": joined(recs), "index.jsonl": joined(idx)},
                   resign=w.signer)


@pytest.mark.parametrize("edit", [
    lambda b: b["features"].pop("scaled"),
    lambda b: b["input"].update(format=["mt"]),
    lambda b: b["input"].update(format={"mt": 1}),
    lambda b: b["input"].update(transaction_sha256=["x"]),
    lambda b: b["features"].update(tables=["x"]),
    lambda b: b.update(at=7),
], ids=["no scaled", "format a list", "format an object", "transaction sha a list", "tables a list",
        "at a number"])
def test_a_decision_body_of_the_wrong_shapes_is_a_bundle_error_never_a_crash(
        honest: World, window: Path, sandbox: Sandbox, edit: Callable[[dict[str, Any]], None]) -> None:
    honest.failures(_edited_decision(honest, window, "body.zip", edit), sandbox)

