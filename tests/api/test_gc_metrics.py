"""/metrics times the process's cyclic garbage collections: a full one walks the feature state and
holds every thread meanwhile, so an operator must be able to see it beside the stage latencies."""

from __future__ import annotations

import gc
import re
import time

from api.metrics import _GC_BUCKETS, Metrics, _GcPauses
from tests.api.test_fail_closed import Served


def _pauses(text: str, generation: int) -> tuple[dict[str, float], float, float]:
    """The histogram of one generation in an exposition: cumulative buckets, sum, count."""
    buckets: dict[str, float] = {}
    for line in text.splitlines():
        m = re.fullmatch(
            rf'sealtrail_gc_pause_seconds_bucket\{{generation="{generation}",le="([^"]+)"\}} (\S+)', line)
        if m:
            buckets[m[1]] = float(m[2])
    total = re.search(rf'^sealtrail_gc_pause_seconds_sum{{generation="{generation}"}} (\S+)$', text, re.M)
    count = re.search(rf'^sealtrail_gc_pause_seconds_count{{generation="{generation}"}} (\S+)$', text, re.M)
    assert total is not None and count is not None, text
    return buckets, float(total[1]), float(count[1])


def test_a_full_collection_over_held_state_is_counted_and_timed() -> None:
    metrics = Metrics(lambda: (0, None))
    held = [[i, [i]] for i in range(200_000)]  # containers a full collection must walk
    gc.disable()  # only the collection below happens in between (an explicit one still runs)
    try:
        _, sum_before, before = _pauses(metrics.render().decode(), 2)
        t0 = time.perf_counter()
        gc.collect()
        took = time.perf_counter() - t0
        text = metrics.render().decode()
    finally:
        gc.enable()
    buckets, sum_after, after = _pauses(text, 2)
    assert after == before + 1
    assert 0 < sum_after - sum_before <= took  # the pause itself, not more than the call around it
    counts = list(buckets.values())
    assert list(buckets) == [*(repr(b) for b in _GC_BUCKETS), "+Inf"]
    assert counts == sorted(counts) and counts[-1] == after  # cumulative, +Inf holds every one
    frozen = re.search(r"^sealtrail_gc_frozen_objects (\S+)$", text, re.M)
    assert frozen is not None and float(frozen[1]) == gc.get_freeze_count()
    del held


def test_two_apps_in_one_process_report_the_same_collections() -> None:
    one, two = Metrics(lambda: (0, None)), Metrics(lambda: (0, None))
    gc.collect(0)
    assert _pauses(one.render().decode(), 0)[2] == _pauses(two.render().decode(), 0)[2] >= 1
    timers = [c for c in gc.callbacks if isinstance(getattr(c, "__self__", None), _GcPauses)]
    assert len(timers) == 1  # installed once a process, however many apps


def test_the_served_metrics_carry_the_pauses(served: Served) -> None:
    text = served.client.get("/metrics", headers={"x-test-role": "admin"}).text
    for gen in (0, 1, 2):
        _pauses(text, gen)
    assert "# TYPE sealtrail_gc_pause_seconds histogram" in text


def test_a_collection_whose_start_was_not_seen_is_not_counted() -> None:
    """A timer installed while a collection runs sees its end only: no pause is made up for it."""
    timer = _GcPauses()
    gc.callbacks.remove(timer._callback)  # driven by hand below, not by the process's collections
    timer._callback("stop", {"generation": 2, "collected": 0, "uncollectable": 0})
    assert timer.sums[2] == 0 and sum(timer.counts[2]) == 0
    timer._callback("start", {"generation": 2, "collected": 0, "uncollectable": 0})
    timer._callback("stop", {"generation": 2, "collected": 0, "uncollectable": 0})
    assert sum(timer.counts[2]) == 1 and 0 <= timer.sums[2] < 1
    timer._callback("stop", {"generation": 2, "collected": 0, "uncollectable": 0})  # no second start
    assert sum(timer.counts[2]) == 1
