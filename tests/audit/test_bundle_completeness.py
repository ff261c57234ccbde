"""A bundle proves that its selection is complete (``sealtrail.bundle/2``): the decision summaries
that bracket the window travel with it, and the offline verifier fails a bundle that leaves out
a decision its filters select, a summary of the chain, or the summary before the window, or that
states a wrong account key; an exporter whose selection disagrees with the summaries refuses.
Every commit of the ledger below is one second after the one before, so windows fall exactly
between batches."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.bundle.verify import verify_bundle
from audit.decide.principal import Principal
from audit.decide.summary import SUMMARY_KIND, parse_summary
from audit.errors import BundleFailed, DerivedRowError
from audit.export import completeness as completeness_module
from audit.export import spool as spool_module
from audit.export.create import BundleSummary, create_bundle, list_exports
from audit.export.select import ExportFilters
from ledger import NoteSigner
from ledger.append import Ledger
from tests.audit.test_export import governed_pipeline
from tests.audit.test_trace_index import mixed_submissions, transaction_of
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

OFFICER = Principal.local("officer")
T0 = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)  # after the genesis: times never go back
BATCHES, PER_BATCH = 8, 30


class Steps:
    """A clock one second later at every call: one commit, one second."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> datetime:
        self.n += 1
        return T0 + timedelta(seconds=self.n)


@dataclass
class World:
    ledger: Ledger
    signer: NoteSigner
    batch_times: list[str]  # recorded_at of each batch of decisions
    decisions: dict[int, dict[str, Any]]  # seq -> envelope
    raws: dict[int, bytes]


@pytest.fixture
def world(db: Db, signer: NoteSigner, sandbox: Sandbox) -> Iterator[World]:
    ledger = make_ledger(db, signer)
    ledger.clock = Steps()
    pipe = governed_pipeline(ledger, sandbox)
    subs = mixed_submissions(BATCHES * PER_BATCH, seed=23)
    times, decisions, raws = [], {}, {}
    for i in range(BATCHES):
        batch = subs[i * PER_BATCH:(i + 1) * PER_BATCH]
        got = pipe.decide(batch)
        times.append(got[0].recorded_at)
        for d, s in zip(got, batch, strict=True):
            raws[d.seq] = s.raw
    with ledger.engine.connect() as conn:
        for s, r in conn.exec_driver_sql("SELECT seq, record FROM ledger_entries WHERE kind = 'decision'"):
            decisions[int(s)] = orjson.loads(bytes(r))
    yield World(ledger, signer, times, decisions, raws)
    ledger.engine.dispose()


def export(w: World, path: Path, start: str, end: str, **filters: Any) -> Path:
    got: BundleSummary = create_bundle(w.ledger.engine, w.ledger, w.signer, path,
                                       ExportFilters.of(start, end, **filters), OFFICER, page_size=7)
    return got.path


def bundle_lines(path: Path) -> list[dict[str, Any]]:
    with zipfile.ZipFile(path) as z:
        return [orjson.loads(line) for line in z.read("records.jsonl").split(b"\n")[:-1]]


def manifest(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as z:
        doc: dict[str, Any] = orjson.loads(z.read("manifest.json"))
    return doc


def in_window(w: World, lo: int, hi: int) -> list[int]:
    """Seqs of the decisions of batches ``lo`` .. ``hi - 1``."""
    return sorted(s for s, env in w.decisions.items()
                  if w.batch_times[lo] <= env["recorded_at"] < w.batch_times[hi])


def failures(exc: BundleFailed) -> list[tuple[str, int | None]]:
    return [(f.kind, f.seq) for f in exc.failures]


# ------------------------------------------------------------------------------------ proven


def test_every_batch_seals_a_summary_chained_to_the_one_before(world: World) -> None:
    with world.ledger.engine.connect() as conn:
        rows = [(int(s), bytes(r), bytes(h)) for s, r, h in conn.exec_driver_sql(
            "SELECT seq, record, leaf_hash FROM ledger_entries WHERE kind = 'decision.summary' ORDER BY seq")]
    assert len(rows) == BATCHES
    prev = None
    for seq, rec, leaf in rows:
        env = orjson.loads(rec)
        s = parse_summary(seq, env["record"])
        assert s.prev == prev
        assert len(s.entries) == PER_BATCH
        for i, e in enumerate(s.entries):
            d = world.decisions[s.first_seq + i]
            assert (e.decision, list(e.rules), env["recorded_at"]) == (
                d["record"]["decision"], [h["id"] for h in d["record"]["fired"]], d["recorded_at"])
        prev = (seq, leaf.hex())


def test_a_past_window_is_proven_complete_with_its_two_neighbours(world: World, tmp_path: Path,
                                                                    signer: NoteSigner) -> None:
    start, end = world.batch_times[3], world.batch_times[6]
    out = export(world, tmp_path / "b.zip", start, end)
    got = bundle_lines(out)
    exported = [line["trace_id"] for line in got if line["kind"] == "decision"]
    assert sorted(exported) == sorted(world.decisions[s]["trace_id"] for s in in_window(world, 3, 6))
    summaries = [line for line in got if line["kind"] == SUMMARY_KIND]
    assert [s["recorded_at"] for s in summaries] == world.batch_times[2:7]  # left, three inside, right
    m = manifest(out)
    # format 7: the decisions' feature state travels too, from the start of the log (where the
    # deciding pipeline's state began) up to the window's last delta
    assert m["schema"] == "sealtrail.bundle/9" and m["state"]["from_seq"] == 0
    assert m["counts"]["summaries"] == 5 and m["completeness"]["left"] is not None
    report = verify_bundle(out, [signer.verifier])
    assert report.format == 9 and report.summaries == 5
    assert report.rederived == len(exported) and report.not_rederived == {}
    with zipfile.ZipFile(out) as z:  # the state stops at the last exported decision's delta
        state_seqs = [orjson.loads(x)["seq"] for x in z.read("state/index.jsonl").splitlines()]
        index = [orjson.loads(x) for x in z.read("index.jsonl").splitlines()]
    right = max(i["seq"] for i in index if i["kind"] == SUMMARY_KIND)  # the commit after the window
    last = max(i["seq"] for i in index if i["kind"] == "decision")
    assert max(state_seqs) == last + 2 < right  # its commit's delta, after its summary; none later
    assert report.completeness is not None and report.completeness.proven
    assert report.completeness.window == (start, end)
    assert report.completeness.checked == 3 * PER_BATCH  # every exported decision matched to its entry


@pytest.mark.parametrize("which", ["decision", "rule", "account"])
def test_a_filtered_window_is_proven_complete(world: World, tmp_path: Path, signer: NoteSigner,
                                              which: str) -> None:
    start, end = world.batch_times[1], world.batch_times[5]
    seqs = in_window(world, 1, 5)
    fired = [h["id"] for s in seqs for h in world.decisions[s]["record"]["fired"]]
    if which == "decision":
        flt = {"decision": world.decisions[seqs[0]]["record"]["decision"]}
    elif which == "rule":
        assert fired, "the simulation fires no rule in the window"
        flt = {"rule": fired[0]}
    else:
        tx = transaction_of(world.decisions[seqs[40]]["record"], world.raws[seqs[40]])
        assert tx.originator.account
        flt = {"account": tx.originator.account}
    out = export(world, tmp_path / "b.zip", start, end, **flt)
    report = verify_bundle(out, [signer.verifier])
    assert report.completeness is not None and report.completeness.proven, report.completeness
    assert report.decisions >= 1
    if which == "account":
        assert manifest(out)["completeness"]["account_key"] is not None


def test_a_window_reaching_past_now_is_proven_up_to_the_newest_summary(world: World, tmp_path: Path,
                                                                       signer: NoteSigner) -> None:
    out = export(world, tmp_path / "b.zip", world.batch_times[6], "2100-01-01T00:00:00Z")
    report = verify_bundle(out, [signer.verifier])
    c = report.completeness
    assert c is not None and c.window is not None and not c.proven  # not for the whole window asked
    assert c.window[1] < "2100" and c.window[1] > world.batch_times[7]  # the summary sealed for the edge
    assert any("newest summary" in n for n in c.notes)


# ------------------------------------------------------------------------------------ left out


def _drop_from_selection(monkeypatch: pytest.MonkeyPatch, seq: int) -> None:
    real = spool_module.iter_pages

    def pages(*a: Any, **k: Any) -> Iterator[list[Any]]:
        for page in real(*a, **k):
            yield [r for r in page if r.seq != seq]

    monkeypatch.setattr(spool_module, "iter_pages", pages)


def test_the_exporter_refuses_a_selection_that_leaves_out_a_summarised_decision(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    victim = in_window(world, 3, 6)[17]
    _drop_from_selection(monkeypatch, victim)
    before = len(list_exports(world.ledger.engine))
    with pytest.raises(DerivedRowError, match=f"seq {victim}"):
        export(world, tmp_path / "out" / "b.zip", world.batch_times[3], world.batch_times[6])
    assert not (tmp_path / "out" / "b.zip").exists()
    assert len(list_exports(world.ledger.engine)) == before


def test_a_bundle_leaving_out_a_selected_decision_fails_naming_it(
        world: World, tmp_path: Path, signer: NoteSigner, monkeypatch: pytest.MonkeyPatch) -> None:
    victim = in_window(world, 3, 6)[17]
    _drop_from_selection(monkeypatch, victim)
    monkeypatch.setattr("audit.export.create.check_selection", lambda *a: None)  # a dishonest exporter
    out = export(world, tmp_path / "b.zip", world.batch_times[3], world.batch_times[6])
    with pytest.raises(BundleFailed) as err:
        verify_bundle(out, [signer.verifier])
    assert failures(err.value) == [("completeness.missing", victim)]


def _bracket_without(monkeypatch: pytest.MonkeyPatch, position: int, *, state_no_left: bool = False) -> None:
    """A dishonest exporter: the summary at ``position`` of the bracket left out."""
    real = completeness_module.bracket

    def bracket(*a: Any, **k: Any) -> completeness_module.Bracket:
        b = real(*a, **k)
        rows = b.rows
        b.rows = (r for i, r in enumerate(rows) if i != position)
        if state_no_left:
            b.left = None
        return b

    monkeypatch.setattr("audit.export.create.bracket", bracket)
    monkeypatch.setattr("audit.export.create.check_selection", lambda *a: None)


def test_a_bundle_leaving_out_a_summary_of_the_chain_fails(
        world: World, tmp_path: Path, signer: NoteSigner, monkeypatch: pytest.MonkeyPatch) -> None:
    _bracket_without(monkeypatch, 2)  # the second summary inside the window
    out = export(world, tmp_path / "b.zip", world.batch_times[3], world.batch_times[6])
    with pytest.raises(BundleFailed) as err:
        verify_bundle(out, [signer.verifier])
    kinds = {k for k, _ in failures(err.value)}
    assert "completeness.chain" in kinds
    assert "completeness.uncovered" in kinds  # and its decisions are spoken for by no summary


def test_a_bundle_claiming_no_summary_before_the_window_fails(
        world: World, tmp_path: Path, signer: NoteSigner, monkeypatch: pytest.MonkeyPatch) -> None:
    _bracket_without(monkeypatch, 0, state_no_left=True)
    out = export(world, tmp_path / "b.zip", world.batch_times[3], world.batch_times[6])
    with pytest.raises(BundleFailed) as err:
        verify_bundle(out, [signer.verifier])
    assert "completeness.chain" in {k for k, _ in failures(err.value)}


def test_a_bundle_stating_another_account_key_fails(
        world: World, tmp_path: Path, signer: NoteSigner, monkeypatch: pytest.MonkeyPatch) -> None:
    seqs = in_window(world, 1, 5)
    tx = transaction_of(world.decisions[seqs[40]]["record"], world.raws[seqs[40]])
    assert tx.originator.account
    real = completeness_module.bracket

    def bracket(*a: Any, **k: Any) -> completeness_module.Bracket:
        return replace(real(*a, **k), account_key="0" * 32)

    monkeypatch.setattr("audit.export.create.bracket", bracket)
    monkeypatch.setattr("audit.export.create.check_selection", lambda *a: None)
    out = export(world, tmp_path / "b.zip", world.batch_times[1], world.batch_times[5],
                 account=tx.originator.account)
    with pytest.raises(BundleFailed) as err:
        verify_bundle(out, [signer.verifier])
    assert ("completeness.account", seqs[40]) in failures(err.value)


def test_the_summaries_are_stated_in_the_export_record(world: World, tmp_path: Path) -> None:
    export(world, tmp_path / "b.zip", world.batch_times[3], world.batch_times[6])
    record = list_exports(world.ledger.engine)[-1]["record"]
    assert record["counts"]["summaries"] == 5
