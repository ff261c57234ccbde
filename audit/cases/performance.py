"""How each rule and each model performs once officers have worked its alerts.

Per rule and ruleset version: the decisions it fired on (hits, from the trace index), the alerts
those decisions opened, how the closed ones were disposed of (false-positive rate, report
conversion: the shares of closed alerts closed as ``FALSE_POSITIVE`` and ``REPORT_FILED``), how
many are still open, and the median time from opening to closing. Per model and score band: the
same for the alerts the model's score fell in. Read from the alert view (brought current first)
and the trace index, which ``ledger verify`` checks against the sealed records.

An alert fired by several rules counts for each of them: the rows answer "what happens to the
alerts this rule takes part in", not a split of the alerts between rules.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, func, select

from audit.cases.state import Disposition
from audit.cases.store import catch_up
from audit.cases.tables import alerts
from audit.query.index import trace_rules, traces

__all__ = ["BANDS", "Performance", "model_performance", "rule_performance", "to_csv"]

# Score bands in millionths, lower edge inclusive: where aml_core's REVIEW/HOLD/BLOCK edges sit.
BANDS: tuple[tuple[str, int, int], ...] = (
    ("[0, 0.5)", 0, 500_000), ("[0.5, 0.9)", 500_000, 900_000), ("[0.9, 0.95)", 900_000, 950_000),
    ("[0.95, 0.97)", 950_000, 970_000), ("[0.97, 0.98)", 970_000, 980_000),
    ("[0.98, 0.99)", 980_000, 990_000), ("[0.99, 1]", 990_000, 1_000_001),
)


@dataclass(frozen=True)
class Performance:
    """One row: a rule at a ruleset version, or a model in a score band."""

    key: str  # the rule id, or the model's SHA-256
    group: str  # the ruleset ("id@version"), or the score band
    hits: int | None  # decisions the rule fired on (None for a model row)
    alerts: int
    open: int
    closed: int
    false_positive: int
    no_further_action: int
    report_filed: int
    false_positive_rate: float | None  # of the closed; None when none is closed
    report_conversion: float | None
    median_hours_to_close: float | None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _hours(opened: str, closed: str) -> float:
    a = datetime.fromisoformat(opened.replace("Z", "+00:00"))
    b = datetime.fromisoformat(closed.replace("Z", "+00:00"))
    return (b - a).total_seconds() / 3600


def _row(key: str, group: str, hits: int | None, items: Sequence[tuple[Any, ...]]) -> Performance:
    """``items``: (is_open, disposition, opened_at, closed_at) of the group's alerts."""
    closed = [x for x in items if not x[0]]
    by = {d: sum(x[1] == d for x in closed) for d in Disposition}
    n = len(closed)
    times = [_hours(x[2], x[3]) for x in closed if x[3]]
    return Performance(
        key, group, hits, len(items), len(items) - n, n, by[Disposition.FALSE_POSITIVE],
        by[Disposition.NO_FURTHER_ACTION], by[Disposition.REPORT_FILED],
        by[Disposition.FALSE_POSITIVE] / n if n else None, by[Disposition.REPORT_FILED] / n if n else None,
        round(statistics.median(times), 3) if times else None)


def rule_performance(engine: Engine) -> list[Performance]:
    """One row per (rule, ruleset version) that fired on a decision, ordered by rule then ruleset."""
    catch_up(engine)
    r, t, a = trace_rules, traces, alerts
    ruleset = t.c.ruleset_id + "@" + t.c.ruleset_version
    with engine.connect() as conn:
        hits = {(str(k), str(g)): int(n) for k, g, n in conn.execute(
            select(r.c.rule_id, ruleset, func.count()).join(t, t.c.seq == r.c.seq)
            .group_by(r.c.rule_id, t.c.ruleset_id, t.c.ruleset_version))}
        grouped: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        for k, g, is_open, disp, opened, closed in conn.execute(
                select(r.c.rule_id, a.c.ruleset, a.c.is_open, a.c.disposition, a.c.opened_at, a.c.closed_at)
                .join(a, a.c.seq == r.c.seq)):
            grouped.setdefault((str(k), str(g)), []).append((is_open, disp, opened, closed))
    return [_row(k, g, n, grouped.get((k, g), ())) for (k, g), n in sorted(hits.items())]


def _band(ppm: int | None) -> str:
    if ppm is None:
        return "not scored"
    return next((name for name, lo, hi in BANDS if lo <= ppm < hi), "out of range")


def model_performance(engine: Engine) -> list[Performance]:
    """One row per (model, score band) that opened an alert, ordered by model then band."""
    catch_up(engine)
    a = alerts
    grouped: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for model, ppm, is_open, disp, opened, closed in conn.execute(
                select(a.c.model_sha256, a.c.score_ppm, a.c.is_open, a.c.disposition, a.c.opened_at,
                       a.c.closed_at)):
            grouped.setdefault((str(model), _band(ppm)), []).append((is_open, disp, opened, closed))
    order = {name: i for i, (name, _, _) in enumerate(BANDS)}
    return [_row(m, b, None, items) for (m, b), items in
            sorted(grouped.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], len(order))))]


def to_csv(rows: Iterable[Performance]) -> str:
    """The rows as CSV (RFC 4180, a header line first), for a spreadsheet."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\r\n")
    w.writerow([f.name for f in fields(Performance)])
    for p in rows:
        w.writerow(["" if v is None else v for v in p.to_json().values()])
    return out.getvalue()
