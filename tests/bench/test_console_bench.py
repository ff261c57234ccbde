"""``bench.console`` at a tiny size: it runs, prints the machine and every figure with its
baseline and target (the console's own pages, served by the app in process, among them), and
the synthetic view it measures is one the product reads as current."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

import migrations
from audit.cases.query import AlertFilter, alert_page, case_detail
from audit.cases.store import catch_up
from audit.cases.tables import alerts, cases, watermark
from bench import alert_view, console
from ledger import store
from tests.conftest import Db


def test_the_quick_run_prints_the_machine_and_each_figure_beside_its_baseline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "console.json"
    console.main(["--rows", "5000", "--alerts", "3000", "--cases", "300", "--dialect", "sqlite",
                  "--repeat", "1", "--json", str(out_json)])
    out = capsys.readouterr().out
    for header in ("CPU:", "RAM:", "SQLite:", "PostgreSQL: skipped", "CPU probe:"):
        assert header in out
    for figure in ("overview 1 h", "search page 100", "primary-key lookup of one alert (baseline)",
                   "alerts, open (", "alerts, mine (", "alerts, unassigned (", "alerts, overdue (",
                   "alerts, closed (", "alerts, open, outcome=HOLD", "alerts, open, rule=VELOCITY_BURST",
                   "cases, open (", "cases, mine (", "cases, unassigned (", "cases, closed (",
                   "case detail: 1,000 alerts", "case detail + its JSON body",
                   "console queue /console/alerts (view=open): page 1", "console queue: page ",
                   "console case page /console/cases/{id}: 1,000 alerts",
                   "counterparties' cases, the timeline's newest page",
                   "console case page: an older page of its timeline (?before=<seq>, half way)"):
        assert figure in out, figure
    figures = json.loads(out_json.read_text())
    queue = figures["sqlite"]["queue"]
    assert (figures["rows"], figures["alerts"], figures["cases"]) == (5_000, 3_000, 300)
    assert {r["met"] for r in queue[1:]} <= {"yes", "NO"}
    assert all(r["baseline"].endswith("ms pk") and r["ratio"].endswith("x") for r in queue[1:])
    pages = [r["what"] for r in queue if "page" in r["what"] and not r["what"].startswith("console")]
    assert len(pages) == 22  # 11 views, first and 100th (or last) page each
    served = [r for r in queue if r["what"].startswith("console")]
    assert [r["target"] for r in served][-2:] == ["<= 200.0 ms"] * 2  # the case page: under 200 ms
    assert len(served) == 4  # the queue's first and 100th page; the long case's newest and an older page
    assert "counterparties' cases included" in out


def test_an_unknown_dialect_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as info:
        console.main(["--dialect", "oracle"])
    assert info.value.code == 2


def test_the_synthetic_view_is_current_and_its_long_case_reads_back(db: Db) -> None:
    engine = db.engine()
    migrations.upgrade(engine)
    info = alert_view.populate(engine, 3_000, 300)
    report = catch_up(engine)  # the watermark is at the tip: nothing to fold
    folded = (report.from_seq, report.to_seq, report.alerts_opened, report.events)
    assert folded == (info.tip, info.tip, 0, 0)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(alerts)).scalar() == 3_000
        assert conn.execute(select(func.count()).select_from(cases)).scalar() == 300
        assert conn.execute(select(func.sum(cases.c.alerts))).scalar() == 3_000
        assert conn.execute(select(func.max(store.entries.c.seq))).scalar() == info.tip
        assert conn.execute(select(watermark.c.seq)).scalar() == info.tip
    d = case_detail(engine, info.big_case)
    assert len(d.alerts) == info.big_alerts == 1_000 and d.case.open
    assert len(d.events) == info.big_events and all(e.applied for e in d.events)
    assert {e.principal["subject"] for e in d.events} >= {"CN=queue-lead,OU=FIU,O=Example Bank"}
    mine = alert_page(engine, AlertFilter(view="mine", me=info.busiest, limit=500), today=info.today)
    assert len(mine.items) == min(500, info.busiest_open)
    assert all(a.open and a.assignee_fp == info.busiest for a in mine.items)
