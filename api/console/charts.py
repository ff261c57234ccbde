"""The overview's charts as inline SVG, drawn on the server: numbers in, escaped markup out.

No script and no ``style=`` (the CSP forbids both): colours come from console.css classes
(``.fill-ALLOW``, ``.fill-bar``, ``.axis``, ``.chart-label``) and geometry from presentation
attributes. Each SVG is ``role="img"`` with a ``<title>`` and a ``<desc>`` that says in words what
it shows; the page repeats the numbers in tables. Pure functions: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup, escape

from audit.query.stats import LatencySample, OutcomeBucket, RuleCount, ScoreHistogram
from wasm_rules import OUTCOMES

__all__ = ["EMPTY", "bucket_label", "bucket_unit", "compact", "fmt_us", "latency_chart", "nice_max",
           "outcome_chart", "rules_chart", "score_chart"]

EMPTY = "No decisions in this window."
# The viewBox of the charts, about a panel's width, so that 11px labels stay readable when the CSS
# scales it to the panel
W, H = 360, 200
LEFT, RIGHT, TOP, BOTTOM = 40, 6, 10, 24
_AXIS_LABELS = 4  # time labels along the x axis, at most
_UNIT = {"5min": "5 minutes", "hour": "hour", "day": "day", "month": "month", "year": "year"}


def nice_max(value: float) -> int:
    """The smallest 1, 2 or 5 times a power of ten that is >= ``value`` (1 for nothing)."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    return int(next(m * power for m in (1, 2, 5, 10) if m * power >= value))


def fmt_us(us: int) -> str:
    """A latency for people: µs below a millisecond, then ms, then s."""
    if us < 1000:
        return f"{us} µs"
    return f"{us / 1000:.3g} ms" if us < 1_000_000 else f"{us / 1e6:.3g} s"


def bucket_unit(bucket: str) -> str:
    """What one bar of the time chart covers, in words."""
    return _UNIT.get(bucket, bucket)


def bucket_label(key: str, bucket: str) -> str:
    """A bucket key as an axis label: the part of the time that changes between bars."""
    if bucket == "5min":
        return key[11:16]
    if bucket == "hour":
        return f"{key[5:10]} {key[11:13]}:00"
    return key[5:10] if bucket == "day" else key


def compact(n: float) -> str:
    """An axis number in a few characters: 950, 1.5k, 20k, 3M."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.3g}{suffix}"
    return f"{n:g}"


def _empty(text: str = EMPTY) -> Markup:
    return Markup('<p class="muted chart-empty">{}</p>').format(text)


def _svg(uid: str, title: str, desc: str, body: Sequence[str], width: int = W, height: int = H) -> Markup:
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-labelledby="{escape(uid)}-title {escape(uid)}-desc">'
            f'<title id="{escape(uid)}-title">{escape(title)}</title>'
            f'<desc id="{escape(uid)}-desc">{escape(desc)}</desc>')
    return Markup(head + "".join(body) + "</svg>")


def _rect(x: float, y: float, w: float, h: float, cls: str, tip: str, extra: str = "") -> str:
    return (f'<rect class="{escape(cls)}" x="{x:.2f}" y="{y:.2f}" width="{max(w, 0):.2f}" '
            f'height="{max(h, 0):.2f}"{extra}><title>{escape(tip)}</title></rect>')


def _text(x: float, y: float, text: str, anchor: str = "start") -> str:
    return f'<text class="chart-label" x="{x:.2f}" y="{y:.2f}" text-anchor="{anchor}">{escape(text)}</text>'


def _y_axis(top: int) -> list[str]:
    """Grid lines and labels at 0, half and the top of a vertical scale."""
    plot_h = H - TOP - BOTTOM
    out = []
    for frac in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - frac)
        out.append(f'<line class="axis" x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.2f}" y2="{y:.2f}"/>')
        out.append(_text(LEFT - 4, y + 4, compact(top * frac), "end"))
    return out


def outcome_chart(buckets: Sequence[OutcomeBucket], bucket: str, uid: str = "outcomes") -> Markup:
    """Stacked bars: decisions per time bucket, one colour per outcome, and a legend."""
    totals = [sum(b.counts) for b in buckets]
    if not buckets or sum(totals) == 0:
        return _empty()
    top = nice_max(max(totals))
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    step = plot_w / len(buckets)
    gap = min(step * 0.2, 4.0)
    body = _y_axis(top)
    every = max(1, math.ceil(len(buckets) / _AXIS_LABELS))
    for i, b in enumerate(buckets):
        x, y = LEFT + i * step + gap / 2, float(TOP + plot_h)
        for outcome, n in zip(OUTCOMES, b.counts, strict=True):
            if n:
                h = n / top * plot_h
                y -= h
                body.append(_rect(x, y, step - gap, h, f"fill-{outcome}", f"{b.start}: {n:,} {outcome}"))
        if i % every == 0:
            middle = min(max(x + (step - gap) / 2, 32), W - 32)  # a label wider than its bar stays inside
            body.append(_text(middle, H - BOTTOM + 16, bucket_label(b.start, bucket), "middle"))
    sums = [sum(b.counts[i] for b in buckets) for i in range(len(OUTCOMES))]
    unit = bucket_unit(bucket)
    per = ", ".join(f"{n:,} {o}" for o, n in zip(OUTCOMES, sums, strict=True))
    desc = (f"Stacked bars, one per {unit} from {buckets[0].start} to {buckets[-1].start}; "
            f"{sum(totals):,} decisions: {per}. The busiest {unit} "
            f"({buckets[totals.index(max(totals))].start}) had {max(totals):,}.")
    legend = "".join(f'<li><span class="swatch fill-{escape(o)}" aria-hidden="true"></span>{escape(o)}</li>'
                     for o in OUTCOMES)
    return _svg(uid, "Decisions per outcome over time", desc, body) + Markup(
        f'<ul class="legend" aria-label="Outcomes">{legend}</ul>')


def rules_chart(rules: Sequence[RuleCount], total: int, uid: str = "rules") -> Markup:
    """Horizontal bars: how many decisions each of the top rules fired in (label above its bar)."""
    if total == 0:
        return _empty()
    if not rules:
        return _empty(f"No rule fired on the {total:,} decisions in this window.")
    row, width = 32, W
    top = max(r.decisions for r in rules)
    plot_w = width - RIGHT
    body = []
    for i, r in enumerate(rules):  # the rule id left and its count right above the bar
        y = i * row
        share = r.decisions / total
        body.append(_text(0, y + 12, r.rule_id))
        body.append(_text(plot_w, y + 12, f"{r.decisions:,} ({share:.1%})", "end"))
        body.append(_rect(0, y + 16, r.decisions / top * plot_w, 12, "fill-bar",
                          f"{r.rule_id}: {r.decisions:,} decisions ({share:.1%})"))
    first = rules[0]
    desc = (f"Horizontal bars for the {len(rules)} rules that fired most among {total:,} decisions. "
            + "; ".join(f"{r.rule_id}: {r.decisions:,}" for r in rules[:3]) + "."
            + (f" The most frequent, {first.rule_id}, fired in {first.decisions / total:.1%} of decisions."))
    return _svg(uid, "Top firing rules", desc, body, width, row * len(rules) + 4)


def score_chart(hist: ScoreHistogram, uid: str = "scores") -> Markup:
    """A histogram of risk scores in [0, 1]; decisions without a score are said in words."""
    scored = sum(hist.bins)
    if scored + hist.unscored == 0:
        return _empty()
    unscored = (f"{hist.unscored:,} fail-safe HOLD{'s' if hist.unscored != 1 else ''} had no score."
                if hist.unscored else "Every decision had a score.")
    if scored == 0:
        return _empty(f"No decision in this window had a score. {unscored}")
    top = nice_max(max(hist.bins))
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    n = len(hist.bins)
    step = plot_w / n
    body = _y_axis(top)
    for i, count in enumerate(hist.bins):
        lo, hi = i / n, (i + 1) / n
        h = count / top * plot_h
        body.append(_rect(LEFT + i * step + 1, TOP + plot_h - h, step - 2, h, "fill-bar",
                          f"score {lo:.2f}–{hi:.2f}: {count:,}"))
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        body.append(_text(LEFT + frac * plot_w, H - BOTTOM + 16, f"{frac:g}", "middle"))
    peak = hist.bins.index(max(hist.bins))
    desc = (f"Histogram of {scored:,} risk scores in {n} bins of width {1 / n:g} from 0 to 1; "
            f"the fullest bin, {peak / n:.2f} to {(peak + 1) / n:.2f}, holds {max(hist.bins):,}. {unscored}")
    return _svg(uid, "Distribution of risk scores", desc, body)


def latency_chart(sample: LatencySample, uid: str = "latency") -> Markup:
    """Per stage, bars to p50 (darkest), p90 and p99 on one scale; max and the sample in words."""
    if not sample.stages:
        return _empty()
    row = 34
    top = max(s.p99 for s in sample.stages) or 1
    plot_w = W - RIGHT
    body = []
    for i, s in enumerate(sample.stages):  # the stage left, p50 and p99 right, above the bars
        y = i * row
        body.append(_text(0, y + 12, s.stage))
        body.append(_text(plot_w, y + 12, f"p50 {fmt_us(s.p50)} · p99 {fmt_us(s.p99)}", "end"))
        for q, value, opacity in (("p99", s.p99, "0.3"), ("p90", s.p90, "0.6"), ("p50", s.p50, "1")):
            body.append(_rect(0, y + 16, value / top * plot_w, 14, "fill-bar",
                              f"{s.stage} {q}: {fmt_us(value)}", f' fill-opacity="{opacity}"'))
    total = next((s for s in sample.stages if s.stage == "total"), sample.stages[-1])
    desc = (f"Bars per stage to the 50th (darkest), 90th and 99th percentile latency over the newest "
            f"{sample.decisions:,} decisions. {total.stage}: p50 {fmt_us(total.p50)}, "
            f"p90 {fmt_us(total.p90)}, p99 {fmt_us(total.p99)}, max {fmt_us(total.max)}.")
    return _svg(uid, "Latency percentiles per stage", desc, body, W, row * len(sample.stages) + 4)
