"""The overview's SVG charts as pure functions: well-formed, labelled for screen readers, bars in
proportion to the numbers, every label escaped, and a sentence instead of an empty chart."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from markupsafe import Markup

from api.console.charts import (
    EMPTY,
    bucket_label,
    compact,
    fmt_us,
    latency_chart,
    nice_max,
    outcome_chart,
    rules_chart,
    score_chart,
)
from audit.query.stats import LatencySample, OutcomeBucket, RuleCount, ScoreHistogram, StageLatency

NS = "{http://www.w3.org/2000/svg}"
EVIL = '<script>alert("x")</script>&'


def svg_of(markup: Markup) -> ET.Element:
    """The chart's <svg> element, parsed as XML (fails on a malformed chart)."""
    assert isinstance(markup, Markup)
    m = re.search(r"<svg .*</svg>", str(markup), re.S)
    assert m is not None, markup
    root = ET.fromstring(m.group(0))
    assert root.get("role") == "img"
    ids = {e.get("id"): e for e in root.iter() if e.get("id")}
    title, desc = (ids[i] for i in root.get("aria-labelledby", "").split())
    assert title.tag == f"{NS}title" and title.text and desc.tag == f"{NS}desc" and desc.text
    return root


def rects(root: ET.Element, cls: str | None = None) -> list[dict[str, float | str]]:
    out = []
    for r in root.iter(f"{NS}rect"):
        if cls is None or r.get("class") == cls:
            tip = r.find(f"{NS}title")
            out.append({**{k: float(r.get(k, "0")) for k in ("x", "y", "width", "height")},
                        "class": r.get("class", ""), "tip": "" if tip is None else tip.text or ""})
    return out


def test_stacked_bars_are_in_proportion_and_stack_upwards() -> None:
    buckets = [OutcomeBucket("2026-12-03T10:00", (10, 0, 0, 0)),
               OutcomeBucket("2026-12-03T10:05", (5, 5, 0, 2)),
               OutcomeBucket("2026-12-03T10:10", (0, 0, 0, 0))]
    out = outcome_chart(buckets, "5min")
    root = svg_of(out)
    allow = rects(root, "fill-ALLOW")
    review, block = rects(root, "fill-REVIEW"), rects(root, "fill-BLOCK")
    assert len(allow) == 2 and len(review) == 1 and len(block) == 1 and not rects(root, "fill-HOLD")
    assert allow[0]["height"] == pytest.approx(2 * allow[1]["height"])
    assert review[0]["height"] == pytest.approx(allow[1]["height"])
    assert block[0]["height"] == pytest.approx(0.4 * review[0]["height"])
    # REVIEW sits on ALLOW, BLOCK on REVIEW, in the same column
    assert review[0]["y"] + review[0]["height"] == pytest.approx(allow[1]["y"])
    assert block[0]["y"] + block[0]["height"] == pytest.approx(review[0]["y"])
    assert allow[1]["x"] == review[0]["x"] == block[0]["x"] > allow[0]["x"]
    assert allow[0]["tip"] == "2026-12-03T10:00: 10 ALLOW"
    desc = root.find(f"{NS}desc")
    assert desc is not None and "22 decisions: 15 ALLOW, 5 REVIEW, 0 HOLD, 2 BLOCK" in (desc.text or "")
    assert 'class="swatch fill-HOLD"' in out and "10:05" in out  # the legend and an axis label


def test_rules_chart_bars_are_in_proportion_and_labels_are_escaped() -> None:
    rules = [RuleCount("VELOCITY_BURST", 40), RuleCount(EVIL, 10)]
    out = rules_chart(rules, total=200)
    assert "<script>" not in out and "&lt;script&gt;" in out
    root = svg_of(out)
    bars = rects(root, "fill-bar")
    assert bars[0]["width"] == pytest.approx(4 * bars[1]["width"])
    labels = [t.text for t in root.iter(f"{NS}text")]
    assert EVIL in labels and "40 (20.0%)" in labels  # the parsed text is the label as given
    assert bars[1]["tip"] == f"{EVIL}: 10 decisions (5.0%)"


def test_histogram_bins_are_in_proportion_and_unscored_holds_are_said() -> None:
    bins = (8, 4, *([0] * 17), 2)
    root = svg_of(score_chart(ScoreHistogram(bins, unscored=3)))
    bars = rects(root, "fill-bar")
    assert len(bars) == 20
    assert [b["height"] for b in bars][:2] == pytest.approx([2 * bars[1]["height"], bars[1]["height"]])
    assert bars[19]["height"] == pytest.approx(bars[0]["height"] / 4) and bars[5]["height"] == 0
    assert bars[0]["x"] < bars[1]["x"] < bars[19]["x"]
    desc = root.find(f"{NS}desc")
    assert desc is not None and "3 fail-safe HOLDs had no score" in (desc.text or "")
    assert "14 risk scores" in (desc.text or "")


def test_latency_bars_share_one_scale() -> None:
    sample = LatencySample(50, 5000, (StageLatency("model", 100, 200, 400, 900),
                                      StageLatency("total", 1000, 1500, 2000, 9000)))
    root = svg_of(latency_chart(sample))
    bars = rects(root, "fill-bar")
    widths = {b["tip"]: b["width"] for b in bars}
    assert widths["total p99: 2 ms"] == pytest.approx(5 * widths["model p99: 400 µs"])
    assert widths["total p50: 1 ms"] == pytest.approx(widths["total p99: 2 ms"] / 2)
    desc = root.find(f"{NS}desc")
    assert desc is not None and "newest 50 decisions" in (desc.text or "") and "max 9 ms" in (desc.text or "")


def test_no_decisions_gives_a_sentence_not_a_broken_chart() -> None:
    empties = [outcome_chart([], "hour"),
               outcome_chart([OutcomeBucket("2026-12-03T10", (0, 0, 0, 0))], "hour"),
               rules_chart([], total=0), score_chart(ScoreHistogram((0,) * 20, 0)),
               latency_chart(LatencySample(0, 5000, ()))]
    for out in empties:
        assert isinstance(out, Markup) and EMPTY in out and "<svg" not in out
    assert "No rule fired on the 12 decisions" in rules_chart([], total=12)
    only_holds = score_chart(ScoreHistogram((0,) * 20, 4))
    assert "<svg" not in only_holds and "4 fail-safe HOLDs had no score" in only_holds


def test_the_helpers() -> None:
    assert [nice_max(v) for v in (0, 1, 3, 10, 11, 48, 500, 501, 123_456)] == [
        1, 1, 5, 10, 20, 50, 500, 1000, 200_000]
    assert [fmt_us(v) for v in (0, 999, 1000, 1976, 2_500_000)] == [
        "0 µs", "999 µs", "1 ms", "1.98 ms", "2.5 s"]
    assert bucket_label("2026-12-03T10:25", "5min") == "10:25"
    assert bucket_label("2026-12-03T10", "hour") == "12-03 10:00"
    assert bucket_label("2026-12-03", "day") == "12-03"
    assert bucket_label("2026-12", "month") == "2026-12"
    assert [compact(v) for v in (0, 2.5, 950, 1500, 20_000, 3_000_000)] == [
        "0", "2.5", "950", "1.5k", "20k", "3M"]
