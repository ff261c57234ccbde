"""Prometheus metrics of one app instance (its own registry: two apps in a process never mix)."""

from __future__ import annotations

import gc
import logging
import math
import threading
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from audit.decide.types import Decision

__all__ = ["PSI_WINDOW", "FeatureDrift", "Metrics", "ScoreDrift"]

log = logging.getLogger(__name__)

_STAGES = ("queue", "features", "model", "rules", "explain", "seal", "ledger", "total")
_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 10000)


class _LedgerCollector(Collector):
    def __init__(self, read: Callable[[], tuple[int, int | None]]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            size, cp_at_us = self._read()
        except Exception:  # a scrape must not fail because the database is down: report nothing
            return
        yield GaugeMetricFamily("sealtrail_ledger_size", "entries in the ledger", value=size)
        if cp_at_us is not None:
            yield GaugeMetricFamily("sealtrail_checkpoint_age_seconds", "age of the newest signed checkpoint",
                                    value=max(0.0, time.time() - cp_at_us / 1e6))


class _ConflictCollector(Collector):
    """Index rows of sealed decisions the writer could not write because a row it did not write
    held their place (``audit.query.index.TraceIndex.conflicts``): each one is a forged or stray
    derived row that ``ledger verify`` will name. Alert on any increase."""

    def __init__(self, read: Callable[[], int]) -> None:
        self._read = read

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily("sealtrail_derived_row_conflicts", "trace-index rows of sealed decisions "
                                  "not written: a row the writer did not write held their place",
                                  value=self._read())


_GC_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _GcPauses:
    """How long each of this process's cyclic collections held the interpreter, by generation,
    timed by ``gc.callbacks``. Every thread waits out a collection (it holds the GIL): the decider
    and the requests it answers included, so a long one shows as a latency spike that no stage
    of a batch accounts for. A collection walks every container object of the generations it
    collects: the full one (generation 2) walks the feature state too (accounts' windows, the
    graph's edges), about 0.5 µs an object (``python -m bench.gc_pause``). Start-up runs one full
    collection itself (``api.server.tune_gc_for_serving``) before the first request; it is counted.

    One per process (``gc_pauses()``); the callback takes no lock (a collection may start while a
    thread holds one) and a scrape copies the counts, so it may lag a collection in flight."""

    def __init__(self) -> None:
        self._started: float | None = None  # None: no collection begun since this timer was installed
        self.counts = [[0] * (len(_GC_BUCKETS) + 1) for _ in range(3)]  # per generation, per bucket (+Inf)
        self.sums = [0.0, 0.0, 0.0]
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        if self._started is None:  # installed while a collection ran: its start was not seen
            return
        took = time.perf_counter() - self._started
        self._started = None
        gen = info.get("generation", 2)
        if 0 <= gen < 3:
            self.counts[gen][bisect_left(_GC_BUCKETS, took)] += 1  # the first bucket it is at most
            self.sums[gen] += took

    def collect(self) -> Iterator[HistogramMetricFamily | GaugeMetricFamily | CounterMetricFamily]:
        h = HistogramMetricFamily("sealtrail_gc_pause_seconds", "time each cyclic garbage collection of this "
                                  "process held the interpreter, by generation (2: the full one, which walks "
                                  "the feature state)", labels=["generation"])
        for gen in range(3):
            counts, total = list(self.counts[gen]), self.sums[gen]
            running, buckets = 0, []
            for bound, n in zip((*_GC_BUCKETS, math.inf), counts, strict=True):
                running += n
                buckets.append(("+Inf" if bound == math.inf else repr(bound), running))
            h.add_metric([str(gen)], buckets, total)
        yield h
        found = CounterMetricFamily("sealtrail_gc_collected_objects", "objects the cyclic collections of "
                                    "this process found unreachable, by the generation collected: what only "
                                    "the collector frees (reference cycles); what generations 1 and 2 find "
                                    "lived through a young collection first",
                                    labels=["generation"])
        for gen, stats in enumerate(gc.get_stats()):
            found.add_metric([str(gen)], stats["collected"])
        yield found
        yield GaugeMetricFamily("sealtrail_gc_frozen_objects", "objects moved out of the collector's reach "
                                "by gc.freeze (what start-up built, the feature state caught up included)",
                                value=gc.get_freeze_count())


_GC_PAUSES: list[_GcPauses] = []
_GC_INSTALL = threading.Lock()  # taken by callers of gc_pauses, never inside a collection


def gc_pauses() -> _GcPauses:
    """The process's collection timer, installed on first use (once, whichever thread comes first)."""
    with _GC_INSTALL:
        if not _GC_PAUSES:
            _GC_PAUSES.append(_GcPauses())
        return _GC_PAUSES[0]


class _GcCollector(Collector):
    def collect(self) -> Iterator[HistogramMetricFamily | GaugeMetricFamily | CounterMetricFamily]:
        yield from gc_pauses().collect()


_RULES_SKIPPED = ("DEADLINE_EXCEEDED", "SANDBOX_FAULT")  # fail-safe causes under which no rule ran
PSI_WINDOW = 10_000  # the recent scores compared with the model card's reference
_PSI_FLOOR = 1e-4  # an empty bin counts as this share, so the index stays finite


class ScoreDrift(Collector):
    """Population stability index of the recent model scores against the distribution the model
    card states for normal training payments (``drift_reference.score``: bin edges and shares):
    PSI = sum over bins of (recent - reference) * ln(recent / reference). Below 0.1 is usually
    read as stable, 0.1-0.25 as a shift worth a look, above 0.25 as a population the model was
    not trained on. Reported once at least 1,000 scores are held."""

    def __init__(self, reference: dict[str, Any]) -> None:
        self.edges = [float(e) for e in reference["edges"]]
        self.shares = [max(float(x), _PSI_FLOOR) for x in reference["shares"]]
        if len(self.shares) != len(self.edges) + 1 or self.edges != sorted(self.edges):
            raise ValueError("a score reference needs ascending edges and one share more than edges")
        self._recent: deque[int] = deque(maxlen=PSI_WINDOW)  # the bin of each recent score
        self._lock = threading.Lock()

    def add(self, scores: Sequence[float]) -> None:
        bins = [bisect_right(self.edges, s) for s in scores if s == s]  # NaN (no score): left out
        with self._lock:
            self._recent.extend(bins)

    def psi(self) -> float | None:
        with self._lock:
            held = list(self._recent)
        if len(held) < 1_000:
            return None
        counts = [0] * len(self.shares)
        for b in held:
            counts[b] += 1
        total = 0.0
        for c, ref in zip(counts, self.shares, strict=True):
            got = max(c / len(held), _PSI_FLOOR)
            total += (got - ref) * math.log(got / ref)
        return total

    def collect(self) -> Iterator[GaugeMetricFamily]:
        value = self.psi()
        if value is not None:
            yield GaugeMetricFamily("sealtrail_score_psi", "population stability index of the last "
                                    f"{PSI_WINDOW} model scores against the model card's training "
                                    "reference (> 0.25: traffic unlike the training population)", value=value)


class FeatureDrift(Collector):
    """Population stability index of each main model feature over the recent scored rows against
    its distribution on the normal training payments (``inference.drift_reference``: per feature
    bin edges, shares and the share missing). A missing value (NaN) falls in a bin of its own, so a
    feature gone missing upstream shows as drift; the index is read as ``ScoreDrift``'s. Reported
    once at least 1,000 rows are held."""

    def __init__(self, reference: dict[str, Any], names: Sequence[str]) -> None:
        """``reference["features"]``: per feature ``edges``, ``shares`` (one more than edges) and
        ``missing``; ``names``: the columns of the rows ``add`` takes (the model's feature names)."""
        features = reference.get("features")
        if not isinstance(features, dict) or not features:
            raise ValueError("a feature reference needs 'features': per feature edges, shares and missing")
        self.features = tuple(features)
        unknown = [f for f in self.features if f not in names]
        if unknown:
            raise ValueError(f"the feature reference names features the rows do not have: "
                             f"{', '.join(unknown)}")
        self.columns = np.array([list(names).index(f) for f in self.features], dtype=np.intp)
        self.width = len(names)
        self.edges: list[npt.NDArray[np.float64]] = []
        self.shares: list[npt.NDArray[np.float64]] = []  # per feature: its bins, then missing
        for name in self.features:
            f = features[name]
            edges = np.array([float(e) for e in f["edges"]], dtype=np.float64)
            shares = [float(x) for x in f["shares"]] + [float(f.get("missing", 0.0))]
            if len(shares) != len(edges) + 2 or not np.all(np.diff(edges) > 0) or np.isnan(edges).any():
                raise ValueError(f"feature {name}: a reference needs ascending edges and one share more "
                                 "than edges")
            self.edges.append(edges)
            self.shares.append(np.maximum(np.array(shares), _PSI_FLOOR))
        missing = [len(e) + 1 for e in self.edges]  # each feature's NaN bin, after its last
        if max(missing) > 255:
            raise ValueError("a feature reference holds at most 255 bins a feature, missing included")
        self._missing = np.array(missing, dtype=np.uint8)
        # every feature's edges in one matrix, padded with NaN (never <= a value): a value's bin is
        # the count of its feature's edges <= it, searchsorted(side="right") for all columns at once
        self._edges = np.full((len(self.edges), max(len(e) for e in self.edges)), np.nan)
        for k, e in enumerate(self.edges):
            self._edges[k, :len(e)] = e
        self._recent = np.zeros((PSI_WINDOW, len(self.features)), dtype=np.uint8)  # ring of bin numbers
        self._next = 0  # where the next row goes
        self._held = 0
        self._lock = threading.Lock()

    def add(self, rows: npt.ArrayLike) -> None:
        """Bin the rows (one per scored payment, the columns ``names``); ``ValueError`` for rows
        of another shape or not numbers. ``inf`` falls in the first or last bin, NaN in missing."""
        arr = np.asarray(rows)
        if arr.ndim != 2 or arr.shape[1] < self.width or arr.dtype.kind not in "fiub":
            raise ValueError(f"feature rows must be numbers of shape (N, {self.width}); got "
                             f"{arr.dtype} {arr.shape}")
        arr = arr[-PSI_WINDOW:, self.columns].astype(np.float64)
        if not len(arr):
            return
        counts = (self._edges[None, :, :] <= arr[:, :, None]).sum(axis=2, dtype=np.uint8)
        binned = np.where(np.isnan(arr), self._missing, counts)  # one pass: per column, per batch of 1
        with self._lock:
            n, at = len(binned), self._next
            first = min(n, PSI_WINDOW - at)
            self._recent[at:at + first] = binned[:first]
            self._recent[:n - first] = binned[first:]
            self._next = (at + n) % PSI_WINDOW
            self._held = min(PSI_WINDOW, self._held + n)

    def observe(self, rows: npt.NDArray[np.float64]) -> None:
        """``add``, for the pipeline's ``on_scored`` hook: the rows the model scored (about a
        microsecond a row). A decision never fails for the drift: an error here is logged and the
        rows are left out."""
        try:
            self.add(rows)
        except Exception:  # a metric must not cost a decision
            log.exception("feature drift: %d rows left out", len(rows))

    def psi(self) -> dict[str, float] | None:
        """Each feature's index over the rows held; None under 1,000 rows."""
        with self._lock:
            held = self._recent[:self._held].copy()
        if len(held) < 1_000:
            return None
        out: dict[str, float] = {}
        for k, name in enumerate(self.features):
            ref = self.shares[k]
            got = np.maximum(np.bincount(held[:, k], minlength=len(ref)) / len(held), _PSI_FLOOR)
            out[name] = float(np.sum((got - ref) * np.log(got / ref)))
        return out

    def collect(self) -> Iterator[GaugeMetricFamily]:
        values = self.psi()
        if values is None:
            return
        g = GaugeMetricFamily("sealtrail_feature_psi", f"population stability index of the last {PSI_WINDOW} "
                              "scored rows' main model features against their distribution on the normal "
                              "training payments (> 0.25: traffic unlike the training population)",
                              labels=["feature"])
        for name, value in values.items():
            g.add_metric([name], value)
        yield g


class Metrics:
    def __init__(self, ledger_state: Callable[[], tuple[int, int | None]],
                 index_conflicts: Callable[[], int] | None = None,
                 score_reference: dict[str, Any] | None = None,
                 feature_reference: dict[str, Any] | None = None,
                 feature_names: Sequence[str] = ()) -> None:
        """``score_reference``: the card's score distribution (``ScoreDrift``);
        ``feature_reference``: ``inference.drift_reference``'s over rows of ``feature_names``
        (``FeatureDrift``, fed through ``feature_drift.add`` or ``feature_drift.observe``)."""
        self.registry = CollectorRegistry()
        r = self.registry
        self.decisions = Counter("sealtrail_decisions", "sealed decisions by outcome", ["decision"],
                                 registry=r)
        self.fail_safe = Counter("sealtrail_fail_safe_decisions", "fail-safe HOLDs by cause", ["cause"],
                                 registry=r)
        self.sandbox_faults = Counter("sealtrail_sandbox_faults", "batches whose rule module faulted",
                                      registry=r)
        self.unavailable = Counter("sealtrail_unavailable_responses", "503 answers (ledger unavailable)",
                                   registry=r)
        self.refusals = Counter("sealtrail_refusals", "refused screening requests sealed as refusal "
                                "records, by kind", ["kind"], registry=r)
        self.refusal_seal_failures = Counter(
            "sealtrail_refusal_seal_failures", "refused screening requests whose refusal record could not "
            "be sealed (answered 422 without trace_id; the server log has the cause)", registry=r)
        self.stage = Histogram("sealtrail_stage_latency_seconds", "per-batch stage latency", ["stage"],
                               buckets=_LATENCY_BUCKETS, registry=r)
        self.batch = Histogram("sealtrail_batch_size", "decisions per pipeline batch", buckets=_BATCH_BUCKETS,
                               registry=r)
        self.rule_hits = Counter("sealtrail_rule_hits", "decisions sealed here on which each rule fired (its "
                                 "alert rate over time: rate() of this over rate() of "
                                 "sealtrail_rule_evaluations)", ["rule"], registry=r)
        self.rule_evaluations = Counter(
            "sealtrail_rule_evaluations", "decisions sealed here whose rule pack ran (not answered again "
            "from the ledger, not fail-safe for a deadline or a sandbox fault): each rule's alert-rate "
            "denominator",
            registry=r)
        self.score_drift = ScoreDrift(score_reference) if score_reference is not None else None
        if self.score_drift is not None:
            r.register(self.score_drift)
        self.feature_drift = (FeatureDrift(feature_reference, feature_names)
                              if feature_reference is not None else None)
        if self.feature_drift is not None:
            r.register(self.feature_drift)
        self._queue_stage = self.stage.labels("queue")
        r.register(_LedgerCollector(ledger_state))
        if index_conflicts is not None:
            r.register(_ConflictCollector(index_conflicts))
        gc_pauses()  # timing starts with the first app of the process
        r.register(_GcCollector())

    def observe_batch(self, decisions: Sequence[Decision]) -> None:
        """Called once per committed batch (from the batcher thread)."""
        if not decisions:
            return
        self.batch.observe(len(decisions))
        counts: dict[str, int] = {}
        causes: dict[str, int] = {}
        for d in decisions:
            counts[d.decision] = counts.get(d.decision, 0) + 1
            if d.fail_safe:
                cause = d.fail_safe.split(":", 1)[0]
                causes[cause] = causes.get(cause, 0) + 1
        for k, v in counts.items():
            self.decisions.labels(k).inc(v)
        hits: dict[str, int] = {}
        evaluated = 0
        for d in decisions:
            if d.replayed:  # answered again from the ledger: its hits were counted when it was sealed
                continue
            if not (d.fail_safe and d.fail_safe.startswith(_RULES_SKIPPED)):
                evaluated += 1
            for h in d.fired:
                hits[h.id] = hits.get(h.id, 0) + 1
        for k, v in hits.items():
            self.rule_hits.labels(k).inc(v)
        if evaluated:
            self.rule_evaluations.inc(evaluated)
        if self.score_drift is not None:
            self.score_drift.add([d.score for d in decisions if d.score is not None and not d.replayed])
        for k, v in causes.items():
            self.fail_safe.labels(k).inc(v)
        if "SANDBOX_FAULT" in causes:
            self.sandbox_faults.inc()
        lat = decisions[-1].latency_us
        for stage in _STAGES:
            if stage in lat and stage != "queue":
                self.stage.labels(stage).observe(lat[stage] / 1e6)
        observe_queue = self._queue_stage.observe  # one label lookup a batch, not one a decision
        for d in decisions:
            q = d.latency_us.get("queue")
            if q is not None:
                observe_queue(q / 1e6)

    def render(self) -> bytes:
        return generate_latest(self.registry)
