"""Prometheus metrics of one app instance (its own registry: two apps in a process never mix)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from audit.decide.types import Decision

__all__ = ["Metrics"]

_STAGES = ("queue", "features", "model", "rules", "seal", "ledger", "total")
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


class Metrics:
    def __init__(self, ledger_state: Callable[[], tuple[int, int | None]],
                 index_conflicts: Callable[[], int] | None = None) -> None:
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
        self._queue_stage = self.stage.labels("queue")
        r.register(_LedgerCollector(ledger_state))
        if index_conflicts is not None:
            r.register(_ConflictCollector(index_conflicts))

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
