"""Benchmark of what the console reads: the overview's aggregates and search pages over 1,000,000
indexed decisions, and the alert queue, the case list and one case over 1,000,000 alerts in
100,000 cases.

Overview and search (``--part overview``). What is synthetic: the index tables
(``audit_traces``, ``audit_trace_rules``) are filled directly with seeded rows (90% ALLOW, rules
fired on the rest, as ``bench.queries`` does), spread evenly over 40 days, so that a 1 h window
holds ~1,000 decisions, 24 h ~25,000 and 30 d ~750,000 (over the 500,000 cap: the newest 500,000
are aggregated). Latencies are read from ``ledger_entries``; only the newest 20,000 decisions get
an entry there: an envelope of a real decision record's shape and size (~1.6 kB) with seeded
stage latencies, not a sealed record (no valid hashes or tree). No account rows are written.
Timed: ``audit.query.stats.window`` + ``overview`` for 1 h, 24 h and 30 d windows, against a
same-run ``SELECT count(*)`` over the same range; ``audit.query.traces.query_traces`` first and
100th page by cursor (no filter, decision, rule), against a primary-key lookup.

Alert queue and cases (``--part queue``). The view tables are filled by ``bench.alert_view``
(what is real and what is not is said there; its one long-running case of 1,000 alerts is folded
from real sealed case events). Timed, each through the function the API calls, with the view's
catch-up included (a no-op: the watermark is at the tip): ``audit.cases.query.alert_page`` for
each queue view (open, mine, unassigned, overdue, closed; open by outcome; open by rule) and
``case_page`` for each case view, first page and 100th page (50 rows; the cursor found by walking
there, the 100th call timed alone); ``case_detail`` of the long-running case (its 1,000 alerts and
every sealed event). Baseline: a primary-key lookup of one ``audit_alerts`` row in the same run.
The console's own pages, as an officer opens them (``run_pages``): the queue
(``/console/alerts``, the open tab, first and 100th page by cursor) and the long-running case's
page (its timeline's newest page, and an older one by ``?before=<seq>``), served by the app in
process on the same database (the dev PKI's officer certificate as the TLS peer), server time,
each view's sealed read (a ledger commit) included. For that the database is made a ledger and
the runtime opened before the view is filled, the alerts those pages show get real decisions with
payloads (made by the app in a scratch ledger from simulated payments; the long case's name other
cases' accounts as counterparties, so it has counterparties' cases to show), and the log is padded
and given made-up Merkle nodes so that the ledger can append. The "JSON body" row is what
``GET /v1/cases/{id}`` answers, counterparties' cases included, less its sealed read.
Targets: a page within 3x the baseline + 10 ms; the case under 200 ms. A query page that misses
prints its query plan. SQLite runs without ``ANALYZE`` (sealtrail never runs it); PostgreSQL after a
``VACUUM ANALYZE`` (what autovacuum does after a bulk load).

A queue figure is the median of ``--repeat`` calls (default 7) after one warm-up call, each
call beside one of the baseline, so that both see the same load. Run from the repository root:
``python -m bench.console [--part all|overview|queue] [--rows N] [--alerts N] [--cases N]
[--dialect sqlite|postgresql|both] [--quick] [--explain] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.console")

import argparse
import dataclasses
import functools
import hashlib
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import orjson
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from sqlalchemy import Engine, event, func, select
from starlette.testclient import TestClient

import migrations
from api import ops
from api.app import create_app
from api.case_json import alert_json, case_json, event_json
from api.certs import create_dev_pki
from api.config import Settings
from api.console.alerts import QueueForm, parse_queue
from api.server import TLS_PEER_DER
from audit.cases.counterparties import counterparty_cases
from audit.cases.query import AlertFilter, AlertPage, CaseFilter, CasePage, alert_page, case_detail, case_page
from audit.cases.reads import READ_KIND, READ_SCHEMA
from audit.cases.tables import alerts as alert_table
from audit.cases.tables import cases as case_table
from audit.decide.record import DECISION_KIND
from audit.decide.runtime import Runtime
from audit.query import stats
from audit.query.index import trace_rules, traces
from audit.query.traces import TraceFilter, query_traces
from bench import alert_view
from bench.alert_view import ViewInfo
from bench.dbs import backends, connect_postgres, fresh_db, placeholder
from bench.machine import machine_info, print_machine, probe_ms
from bench.queries import OUTCOME_WEIGHTS, PRINCIPALS, RULES, timed
from bench.report import Row, format_table, verdict, write_json
from inference.simulate import SimConfig, simulate
from ledger import Record, store
from ledger.jcs import canonical_bytes
from ledger.merkle import leaf_hash, perfect_subtrees
from ledger.records import seal

START = datetime(2026, 1, 1, tzinfo=UTC)
DAYS = 40
WITH_RECORDS = 20_000  # newest decisions that get a ledger entry (latency is read from those)
CHUNK = 50_000
WINDOWS = {"1 h": timedelta(hours=1), "24 h": timedelta(hours=24), "30 d": timedelta(days=30)}


def _at(seq: int, n: int) -> str:
    t = START + timedelta(seconds=DAYS * 86400 * seq / n)
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _envelope(seq: int, at: str, decision: str, score: float, fired: list[str], rng: random.Random) -> bytes:
    """A decision envelope shaped like a sealed one (same members, similar size); hashes are fake."""
    h = f"{seq:064x}"
    lat = {"queue": int(rng.lognormvariate(6.0, 0.6)), "features": int(rng.lognormvariate(4.5, 0.4)),
           "model": int(rng.lognormvariate(5.5, 0.4)), "rules": int(rng.lognormvariate(5.8, 0.5))}
    body = {"at": at, "batch_size": 64, "decision": decision, "fail_safe": None,
            "features": {"schema": "sealtrail.features/1", "sha256": h, "tables": {"fx_rates": "ecb-2025-10"},
                         "values": [round(rng.random() * 500, 2) for _ in range(32)]},
            "fired": [{"id": r, "reason": "synthetic"} for r in fired], "fuel": 272,
            "input": {"format": "json", "message_type": "json", "raw_sha256": h, "reference": f"B{seq}",
                      "transaction_sha256": h},
            "latency_us": lat, "model": {"backend": "numpy", "sha256": h},
            "principal": {"fingerprint_sha256": PRINCIPALS[seq % 5][0], "subject": PRINCIPALS[seq % 5][1]},
            "rules": {"module_sha256": "ab" * 32, "ruleset_id": "aml_core", "version": "2026.12.0"},
            "schema": "sealtrail.decision/1", "score": score}
    return orjson.dumps({"kind": "decision", "payload_sha256": h, "record": body, "recorded_at": at,
                         "trace_id": _tid(seq), "v": 1}, option=orjson.OPT_SORT_KEYS)


def _tid(seq: int) -> str:
    return f"{seq:08x}-0000-7000-8000-000000000000"


def populate(engine: Engine, n: int, seed: int = 7) -> float:
    """Fill the index (and the newest entries) with seeded rows; seconds taken."""
    rng = random.Random(seed)
    outcomes = [o for o, _ in OUTCOME_WEIGHTS]
    weights = [w for _, w in OUTCOME_WEIGHTS]
    # the columns written (account risk and those added later: NULL, as in a version 1 record)
    cols = ("seq", "trace_id", "recorded_at", "event_at", "decision", "score", "fail_safe", "fired",
            "principal_fp", "principal_subject", "ruleset_id", "ruleset_version", "module_sha256")
    entry_cols = ("seq", "kind", "record", "leaf_hash", "chain_hash", "recorded_at", "trace_id")
    t0 = time.perf_counter()
    for lo in range(1, n + 1, CHUNK):
        rows, rules, entries = [], [], []
        for seq in range(lo, min(n + 1, lo + CHUNK)):
            decision = rng.choices(outcomes, weights)[0]
            fired = [] if decision == "ALLOW" else rng.sample(RULES[:-1], rng.randint(1, 3))
            score = rng.random() ** 8 if decision == "ALLOW" else rng.random()
            fp, subject = PRINCIPALS[seq % 5]
            at = _at(seq, n)
            rows.append((seq, _tid(seq), at, at, decision, score, None, ",".join(fired), fp, subject,
                         "aml_core", "2026.12.0", "ab" * 32))
            rules += [(r, seq) for r in fired]
            if seq > n - WITH_RECORDS:
                entries.append((seq, "decision", _envelope(seq, at, decision, score, fired, rng),
                                seq.to_bytes(32, "big"), seq.to_bytes(32, "big"), at, _tid(seq)))
        with engine.begin() as conn:
            store.insert_rows(conn, traces, cols, rows)
            store.insert_rows(conn, trace_rules, ("rule_id", "seq"), rules)
            store.insert_rows(conn, store.entries, entry_cols, entries)
    if engine.dialect.name == "postgresql":  # as its autovacuum would; sealtrail never runs ANALYZE on SQLite
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    return time.perf_counter() - t0


def run(engine: Engine, n: int) -> list[Row]:
    migrations.upgrade(engine)
    print(f"  loaded {n:,} decisions ({WITH_RECORDS:,} with ledger entries) in {populate(engine, n):.1f} s")
    p = placeholder(engine)
    now = START + timedelta(days=DAYS + 1)
    rows: list[Row] = []
    for name, span in WINDOWS.items():
        w = stats.window(engine, now=now, span=span)
        ov = stats.overview(engine, w)

        def count(w: stats.Window = w) -> None:
            with engine.connect() as conn:
                conn.exec_driver_sql(f"SELECT count(*) FROM audit_traces WHERE recorded_at >= {p} "
                                     f"AND recorded_at < {p}", (w.since, w.until)).scalar()

        def page(span: timedelta = span) -> None:
            stats.overview(engine, stats.window(engine, now=now, span=span))

        base, ms = timed(count, repeat=5), timed(page, repeat=5)
        cut = f", newest {ov.cap:,} of more" if ov.truncated else ""
        rows.append(Row(f"overview {name} ({ov.total:,} decisions{cut}; {ov.latency.decisions:,} records)",
                        f"{ms:.1f} ms", f"{base:.1f} ms count(*)", f"{ms / base:.1f}x"))
    mid = n // 2

    def pk() -> None:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT * FROM audit_traces WHERE seq = {p}", (mid,)).all()

    base = timed(pk)
    for name, given in (("no filter", {}), ("decision=REVIEW (6%)", {"decision": "REVIEW"}),
                        ("rule_id=VELOCITY_BURST", {"rule_id": "VELOCITY_BURST"})):
        for number in (1, 100):
            f, reached = _walk(functools.partial(query_traces, engine), TraceFilter, {**given, "limit": 50},
                               number)
            ms = timed(lambda f=f: query_traces(engine, f))
            rows.append(Row(f"search page {reached} (50 rows): {name}", f"{ms:.2f} ms", f"{base:.3f} ms pk",
                            f"{ms / base:,.0f}x"))
    return rows


# -- the alert queue and cases --------------------------------------------------------------------

PAGE_TARGET = (3.0, 10.0)  # a page within 3x the primary-key lookup + 10 ms
CASE_TARGET_MS = 200.0
DEEP = 100  # the deep page
RULE = "VELOCITY_BURST"  # fired on ~1 alert in 5


@contextmanager
def _statements(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The SQL ``engine`` runs inside the block, with its parameters, in order."""
    got: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        got.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", grab)
    try:
        yield got
    finally:
        event.remove(engine, "before_cursor_execute", grab)


def plan_of(engine: Engine, fn: Callable[[], object]) -> list[str]:
    """The plan of the last statement ``fn`` runs: EXPLAIN QUERY PLAN on SQLite, EXPLAIN (ANALYZE,
    BUFFERS) on PostgreSQL."""
    with _statements(engine) as got:
        fn()
    statement, params = got[-1]
    pg = engine.dialect.name == "postgresql"
    with engine.connect() as conn:
        how = "EXPLAIN (ANALYZE, BUFFERS) " if pg else "EXPLAIN QUERY PLAN "
        rows = conn.exec_driver_sql(how + statement, params).all()
    lines = [" ".join(statement.split())]
    if pg:
        return lines + [str(r[0]) for r in rows]
    depth: dict[int, int] = {0: 0}
    for node, parent, _, detail in rows:
        depth[node] = depth.get(parent, 0) + 1
        lines.append("  " * depth[node] + str(detail))
    return lines


def _walk(fetch: Callable[[Any], Any], make: Callable[..., Any], given: dict[str, Any], page: int
          ) -> tuple[Any, int]:
    """The filter of page ``page`` (1-based) of ``make(**given)``, its cursor found by walking
    there (or of the last page, if there are fewer), and that page's number."""
    f = make(**given)
    for reached in range(1, page):
        cursor = fetch(f).next_cursor
        if cursor is None:
            return f, reached
        f = make(**given, cursor=cursor)
    return f, page


def beside(fn: Callable[[], object], base: Callable[[], object], repeat: int,
           took: Callable[[], float] | None = None) -> tuple[float, float]:
    """Medians in ms of ``fn()`` and of ``base()``, called in turn ``repeat`` times after one
    warm-up each, so that both see the same load on the machine. With ``took``, a call of ``fn``
    counts as what ``took()`` says after it (seconds; the server's time of a request) instead of
    its wall time."""
    fn(), base()
    ours, theirs = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        base()
        t1 = time.perf_counter()
        fn()
        t2 = time.perf_counter()
        theirs.append(t1 - t0)
        ours.append(t2 - t1 if took is None else took())
    return statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3


def _counts(engine: Engine, info: ViewInfo) -> dict[str, int]:
    """How many rows each view holds."""
    p = placeholder(engine)
    with engine.connect() as conn:
        a = conn.exec_driver_sql(
            "SELECT sum(is_open), sum(1 - is_open), "
            "sum(CASE WHEN is_open = 1 AND assignee_fp IS NULL THEN 1 ELSE 0 END), "
            f"sum(CASE WHEN is_open = 1 AND review_due < {p} THEN 1 ELSE 0 END), "
            f"sum(CASE WHEN is_open = 1 AND assignee_fp = {p} THEN 1 ELSE 0 END), "
            "sum(CASE WHEN is_open = 1 AND outcome = 'HOLD' THEN 1 ELSE 0 END) FROM audit_alerts",
            (info.today.isoformat(), info.busiest)).one()
        rule = conn.exec_driver_sql(
            f"SELECT count(*) FROM audit_trace_rules r JOIN audit_alerts a ON a.seq = r.seq "
            f"WHERE r.rule_id = {p} AND a.is_open = 1", (RULE,)).scalar()
        c = conn.exec_driver_sql(
            "SELECT sum(is_open), sum(1 - is_open), "
            "sum(CASE WHEN is_open = 1 AND assignee_fp IS NULL THEN 1 ELSE 0 END), "
            f"sum(CASE WHEN is_open = 1 AND assignee_fp = {p} THEN 1 ELSE 0 END) FROM audit_cases",
            (info.busiest,)).one()
    return {"open": int(a[0]), "closed": int(a[1]), "unassigned": int(a[2]), "overdue": int(a[3]),
            "mine": int(a[4]), "HOLD": int(a[5]), "rule": int(rule or 0), "open cases": int(c[0]),
            "closed cases": int(c[1]), "unassigned cases": int(c[2]), "my cases": int(c[3])}


def run_queue(engine: Engine, n_alerts: int, n_cases: int, *, repeat: int = 7, explain: bool = False,
              console: Path | None = None) -> tuple[list[Row], dict[str, Any]]:
    """Migrate, fill the view, and time each queue and case page and the long-running case, each
    beside a primary-key lookup; a figure over its target keeps its query plan (all do with
    ``explain``). With ``console`` (a scratch folder), the database is a ledger first and the
    console's own pages are timed too, through the app (``run_pages``). Returns the table's rows
    and the facts of the run (counts, plans)."""
    app = _ConsoleSetup(engine, console) if console is not None else None
    migrations.upgrade(engine)
    info = alert_view.populate(engine, n_alerts, n_cases)
    n = _counts(engine, info)
    print(f"  loaded in {info.load_s:.1f} s: {info.alerts:,} alerts ({n['open']:,} open, {n['unassigned']:,} "
          f"of them unassigned, {n['overdue']:,} overdue; {n['mine']:,} held by the busiest officer), "
          f"{info.cases:,} cases ({n['open cases']:,} open), {info.events:,} case events")
    p = placeholder(engine)
    mid = alert_view.STRIDE * (n_alerts // 2)

    def pk() -> None:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT * FROM audit_alerts WHERE seq = {p}", (mid,)).all()

    def row(what: str, ms: float, base: float, target_ms: float) -> Row:
        return Row(what, f"{ms:.2f} ms", f"{base:.3f} ms pk", f"{ms / base:,.1f}x", f"<= {target_ms:.1f} ms",
                   verdict(ms <= target_ms))

    base = timed(pk, repeat)
    rows = [Row("primary-key lookup of one alert (baseline)", f"{base:.3f} ms", f"{base:.3f} ms", "1.0x")]
    plans: dict[str, list[str]] = {}
    today = info.today

    def alerts_of(f: AlertFilter) -> AlertPage:
        return alert_page(engine, f, today=today)

    def cases_of(f: CaseFilter) -> CasePage:
        return case_page(engine, f)

    me = {"me": info.busiest}
    pages: list[tuple[str, Callable[[Any], Any], Callable[..., Any], dict[str, Any]]] = [
        (f"alerts, open ({n['open']:,})", alerts_of, AlertFilter, {}),
        (f"alerts, mine ({n['mine']:,})", alerts_of, AlertFilter, {"view": "mine", **me}),
        (f"alerts, unassigned ({n['unassigned']:,})", alerts_of, AlertFilter, {"view": "unassigned"}),
        (f"alerts, overdue ({n['overdue']:,})", alerts_of, AlertFilter, {"view": "overdue"}),
        (f"alerts, closed ({n['closed']:,})", alerts_of, AlertFilter, {"view": "closed"}),
        (f"alerts, open, outcome=HOLD ({n['HOLD']:,})", alerts_of, AlertFilter, {"outcome": "HOLD"}),
        (f"alerts, open, rule={RULE} ({n['rule']:,})", alerts_of, AlertFilter, {"rule": RULE}),
        (f"cases, open ({n['open cases']:,})", cases_of, CaseFilter, {}),
        (f"cases, mine ({n['my cases']:,})", cases_of, CaseFilter, {"view": "mine", **me}),
        (f"cases, unassigned ({n['unassigned cases']:,})", cases_of, CaseFilter, {"view": "unassigned"}),
        (f"cases, closed ({n['closed cases']:,})", cases_of, CaseFilter, {"view": "closed"}),
    ]
    for name, fetch, make, given in pages:
        for number in (1, DEEP):
            f, reached = _walk(fetch, make, {**given, "limit": 50}, number)
            call = functools.partial(fetch, f)
            ms, pk_ms = beside(call, pk, repeat)
            what = f"{name}: page {reached}" + (" (the last)" if reached < number else "")
            target = PAGE_TARGET[0] * pk_ms + PAGE_TARGET[1]
            rows.append(row(what, ms, pk_ms, target))
            if explain or ms > target:
                plans[what] = plan_of(engine, call)
    case_id = info.big_case
    what = f"case detail: {info.big_alerts:,} alerts, {info.big_events:,} sealed events"
    ms, pk_ms = beside(lambda: case_detail(engine, case_id), pk, repeat)
    rows.append(row(what, ms, pk_ms, CASE_TARGET_MS))
    if explain or ms > CASE_TARGET_MS:
        plans[what] = plan_of(engine, lambda: case_detail(engine, case_id))
    try:
        seated = _seat_pages(app, info) if app is not None else None  # the decisions the API's read names
        ms, pk_ms = beside(lambda: api_case_body(engine, case_id, today), pk, repeat)
        rows.append(row("case detail + its JSON body (orjson), counterparties' cases included", ms, pk_ms,
                        CASE_TARGET_MS))
        if app is not None and seated is not None:
            rows += run_pages(app, seated, info, pk, repeat)
    finally:
        if app is not None:
            app.close()
    facts = {**asdict(info), "today": info.today.isoformat(), "counts": n, "plans": plans}
    return rows, facts


# -- the console's own pages, through the app ----------------------------------------------------

ROLE = "officer"  # the dev PKI's officer certificate: reads payloads, acts on alerts
QUEUE_VIEW = "open"  # the officer's default tab is "mine", which the synthetic view gives them none of


class _ConsoleSetup:
    """What serving the console over the bench's database needs, made before the view is filled:
    a dev PKI, settings, the database made a ledger (genesis, key, first checkpoint at seq 0) and
    the runtime opened on it (the model and the shipped ruleset sealed at seqs 1 and 2; the view's
    seqs start at ``alert_view.STRIDE``). The runtime is opened first because its start-up reads
    the log as a dense one (the velocity window's start is a binary search over seqs), which the
    synthetic view's is not; close it with ``close``."""

    def __init__(self, engine: Engine, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        pki = create_dev_pki(root / "certs")
        self.ders = {role: x509.load_pem_x509_certificate(c.cert_path.read_bytes()).public_bytes(Encoding.DER)
                     for role, c in pki.clients.items()}
        self.officer_fp = hashlib.sha256(self.ders[ROLE]).hexdigest()
        self.roles_file = pki.roles_file
        self.settings = self.settings_for(engine.url.render_as_string(hide_password=False), root / "keys")
        ops.initialise(self.settings)
        self.runtime = Runtime.open(self.settings)

    def close(self) -> None:
        self.runtime.close()

    def settings_for(self, url: str, keys: Path) -> Settings:
        return Settings.model_validate({"db": url, "keys": keys, "roles_file": self.roles_file,
                                        "decision_timeout_ms": 5000})

    @contextmanager
    def client(self, rt: Runtime) -> Iterator[tuple[TestClient, list[float]]]:
        """The app on ``rt`` in process, behind a client whose ``x-role`` header picks the dev
        certificate the app sees as the TLS peer (as ``api.server`` hands it over); the list gets
        each request's server time in seconds (the app's, from the request to the last byte of its
        answer; the in-process client's own work is not in it)."""
        took: list[float] = []
        app = create_app(rt.settings, runtime=rt)
        ders = self.ders

        async def served(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            role = dict(scope["headers"]).get(b"x-role", ROLE.encode()).decode()
            t0 = time.perf_counter()
            await app({**scope, "extensions": {"tls": {TLS_PEER_DER: ders[role]}}}, receive, send)
            took.append(time.perf_counter() - t0)

        with TestClient(cast(Any, served)) as client:
            yield client, took


def _decisions(setup: _ConsoleSetup, n: int) -> list[tuple[bytes, str, bytes]]:
    """``n`` real decisions (envelope, payload SHA-256, payload), made by the app in a scratch
    SQLite ledger from simulated payments (one payment a payload), those that fired a rule first."""
    path = setup.root / "decisions.db"
    url = f"sqlite:///{path}"
    store.connect(url, create_file=True).dispose()
    s = setup.settings_for(url, setup.root / "scratch-keys")
    ops.initialise(s)
    rt = Runtime.open(s)
    txs = [x.transaction.canonical_bytes()
           for x in simulate(SimConfig(seed=21, n_normal=n, n_accounts=max(100, n // 10), days=3))[:n]]
    try:
        with setup.client(rt) as (client, _):
            for i in range(0, len(txs), 500):
                r = client.post("/v1/decisions/batch", content=b"[" + b",".join(txs[i:i + 500]) + b"]",
                                headers={"content-type": "application/json", "x-role": "scorer"})
                if r.status_code != 200:
                    raise RuntimeError(f"deciding the scratch payments: {r.status_code} {r.text[:300]}")
    finally:
        rt.close()
    engine = store.connect(url)
    e, p = store.entries, store.payloads
    try:
        with engine.connect() as conn:
            got = conn.execute(select(e.c.record, p.c.sha256, p.c.data).join(
                p, p.c.first_seq == e.c.seq).where(e.c.kind == DECISION_KIND).order_by(e.c.seq)).all()
    finally:
        engine.dispose()
    out = [(bytes(r.record), r.sha256, bytes(r.data)) for r in got]
    out.sort(key=lambda d: b'"fired":[]' in d[0])
    if len(out) < n:
        raise RuntimeError(f"the scratch ledger holds {len(out)} decisions with a payload, not {n}")
    return out[:n]


def _seat(engine: Engine, seqs: Sequence[int], made: list[tuple[bytes, str, bytes]]) -> None:
    """Give the alerts at ``seqs`` their decisions: each gets one of ``made`` as its ledger entry
    (the envelope's trace id and time made the alert's; its leaf hash that envelope's) and the
    payload row. ``alert_view`` writes no decisions: without these, every one would be absent."""
    a = alert_table
    with engine.connect() as conn:
        found = conn.execute(select(a.c.seq, a.c.trace_id, a.c.opened_at)
                             .where(a.c.seq.in_(list(seqs)))).all()
    entries: list[tuple[Any, ...]] = []
    payloads: dict[str, tuple[Any, ...]] = {}
    for (seq, tid, opened), (env, sha, data) in zip(sorted(found), made, strict=False):
        cut = env.rindex(b',"recorded_at":"')
        env = env[:cut] + b',"recorded_at":"%s","trace_id":"%s","v":1}' % (opened.encode(), tid.encode())
        leaf = leaf_hash(env)
        chain = hashlib.sha256(b"chain %d" % seq).digest()  # made up: only the tip's chain is read
        entries.append((seq, DECISION_KIND, env, leaf, chain, opened, tid))
        payloads.setdefault(sha, (sha, data, seq, 0))
    with engine.begin() as conn:
        store.insert_rows(conn, store.entries, ("seq", "kind", "record", "leaf_hash", "chain_hash",
                                                "recorded_at", "trace_id"), entries)
        p = store.payloads
        have = set(conn.execute(select(p.c.sha256).where(p.c.sha256.in_(list(payloads)))).scalars())
        store.insert_rows(conn, p, ("sha256", "data", "first_seq", "stored_at"),
                          [r for sha, r in payloads.items() if sha not in have])


def _appendable(engine: Engine, big_case: int) -> int:
    """Make the synthetic log one the ledger can append to: case reads of the long-running case
    after the tip, up to a size that is a multiple of 2^STRATUM, and the stored Merkle nodes the
    tree's compact range at that size folds from (made up, as the view's leaf hashes are: nothing
    verifies this log). Returns the new size."""
    with engine.connect() as conn:
        size, chain, _, _, _, last_at = store.head(conn)
    assert chain is not None and last_at is not None
    end = -(-size // (1 << store.STRATUM)) << store.STRATUM
    body = canonical_bytes({"schema": READ_SCHEMA, "principal": alert_view.officer(0),
                            "reads": [{"case": big_case, "what": "case"}]})
    entries = []
    for seq in range(size, end):
        tid, env, _ = seal(Record.from_canonical_body(READ_KIND, body), last_at)
        leaf = leaf_hash(env)
        chain = hashlib.sha256(chain + leaf).digest()
        entries.append((seq, READ_KIND, env, leaf, chain, last_at, tid))
    nodes = []
    for level, idx in perfect_subtrees(0, end):
        base = level - level % store.STRATUM
        span = 1 << (level - base)
        nodes += [(base, i, hashlib.sha256(b"node %d %d" % (base, i)).digest())
                  for i in range(idx * span, idx * span + span)]
    with engine.begin() as conn:
        store.insert_rows(conn, store.entries, ("seq", "kind", "record", "leaf_hash", "chain_hash",
                                                "recorded_at", "trace_id"), entries)
        t = store.nodes
        have = {(int(r.level), int(r.idx)) for r in conn.execute(select(t.c.level, t.c.idx))}
        store.insert_rows(conn, store.nodes, ("level", "idx", "hash"),
                          [n for n in nodes if (n[0], n[1]) not in have])
    return end


def api_case_body(engine: Engine, case_id: int, today: date) -> bytes:
    """What ``GET /v1/cases/{id}`` answers, less its sealed read: ``case_detail``, the
    counterparties' cases, and the JSON body made of them as the route makes it."""
    d = case_detail(engine, case_id)
    others = counterparty_cases(engine, case_id)
    return orjson.dumps({**case_json(d.case), "alerts": [alert_json(a, today) for a in d.alerts],
                         "events": [event_json(e) for e in d.events],
                         "counterparty_cases": [case_json(c) for c in others]})


@dataclass(frozen=True)
class _Seated:
    """The queue's first and deep page the console is timed on (its form, the deep filter, the
    deep page's number), their alerts and the long-running case's given real decisions."""

    form: QueueForm
    deep: AlertFilter
    reached: int
    counterparties: int
    half_way: int  # a seq half way through the long case's timeline, the cursor of an older page


COUNTERPARTIES = 400  # the long-running case's payments go to and from the accounts of this many cases


def _seat_pages(setup: _ConsoleSetup, info: ViewInfo) -> _Seated:
    """Give the alerts on the queue's two timed pages and the long-running case's 1,000 real
    decisions with their payloads (``_decisions``, ``_seat``), so each payment is laid out; the
    long case's decisions name the case's own account and, on the other side, the account of one
    of ``COUNTERPARTIES`` other cases (the keyed accounts rewritten, as the trace ids are), so the
    case has counterparties' cases to show and to seal as read. Then pad the log so that the ledger
    can append (``_appendable``)."""
    engine_url = setup.settings.db
    form = parse_queue({"view": QUEUE_VIEW}, me=setup.officer_fp, default_view="mine")
    assert form.filter is not None
    today = datetime.now(UTC).date()
    first = form.filter

    def fetch(f: AlertFilter) -> AlertPage:
        return alert_page(engine, f, today=today)

    engine = store.connect(engine_url)
    try:
        deep, reached = _walk(fetch, lambda cursor=None: dataclasses.replace(first, cursor=cursor), {}, DEEP)
        shown = [a.seq for f in (first, deep) for a in fetch(f).items]
        big_detail = case_detail(engine, info.big_case)
        big = [a.seq for a in big_detail.alerts]
        t0 = time.perf_counter()
        made = _decisions(setup, len(big))
        own, others = _keyed_as_recorded(engine, info.big_case)
        _seat(engine, big, [_between(d, own, others[i % len(others)]) for i, d in enumerate(made)])
        _seat(engine, [s for s in shown if s not in set(big)], made[:len(shown)])
        size = _appendable(engine, info.big_case)
        n_others = len(counterparty_cases(engine, info.big_case))
        print(f"  console: {len(made):,} real decisions made and seated, log at {size:,} entries, "
              f"in {time.perf_counter() - t0:.1f} s; the long case names {n_others} counterparties' cases")
    finally:
        engine.dispose()
    return _Seated(form, deep, reached, n_others, big[len(big) // 2])


def _keyed_as_recorded(engine: Engine, big_case: int) -> tuple[str, list[str]]:
    """The keyed accounts of the long-running case and of ``COUNTERPARTIES`` other cases, each
    case's subject cut to the 32 hex digits a decision record states an account key in (the view
    names its subjects by 64), in the view's cases and alerts alike. Returns the long case's key
    and the others'."""
    keep = len("account:") + 32
    with engine.begin() as conn:
        ids = [big_case, *conn.execute(select(case_table.c.case_id).where(
            case_table.c.case_id != big_case, case_table.c.subject.like("account:%"))
            .order_by(case_table.c.case_id).limit(COUNTERPARTIES)).scalars()]
        for t in (case_table, alert_table):
            conn.execute(t.update().where(t.c.case_id.in_(ids))
                         .values(subject=func.substr(t.c.subject, 1, keep)))
        subjects = {int(r.case_id): str(r.subject) for r in conn.execute(
            select(case_table.c.case_id, case_table.c.subject).where(case_table.c.case_id.in_(ids)))}
    return subjects[big_case][8:], [subjects[i][8:] for i in ids[1:]]


def _between(made: tuple[bytes, str, bytes], originator: str, beneficiary: str) -> tuple[bytes, str, bytes]:
    """A made decision whose sealed keyed accounts (``account_risk``, 32 hex digits) are
    ``originator`` and ``beneficiary`` instead: the record keeps its shape and length."""
    env, sha, data = made
    risk = orjson.loads(env)["record"].get("account_risk") or {}
    for side, now in (("originator", originator), ("beneficiary", beneficiary)):
        was = (risk.get(side) or {}).get("account")
        if isinstance(was, str) and len(was) == len(now):
            env = env.replace(b'"account":"%s"' % was.encode(), b'"account":"%s"' % now.encode())
    return env, sha, data


def run_pages(setup: _ConsoleSetup, seated: _Seated, info: ViewInfo, pk: Callable[[], object],
              repeat: int) -> list[Row]:
    """The console's queue (``/console/alerts``, the open tab, first page and 100th by cursor) and
    the long-running case's page (``/console/cases/{id}``: its newest page of the timeline, and
    the counterparties' cases), each through the app in process as the officer opens it, server
    time beside ``pk``. Each view seals its read (a ledger append) before it answers: that is in
    the time. ``_seat_pages`` gave their alerts real decisions first."""
    form, deep, reached = seated.form, seated.deep, seated.reached
    rows: list[Row] = []
    with setup.client(setup.runtime) as (client, took):
        while setup.runtime.pipeline.catch_up():  # the seated decisions: replayed now, not while timed
            pass
        def get(url: str) -> Callable[[], object]:
            def call() -> None:
                r = client.get(url, headers={"x-role": ROLE})
                if r.status_code != 200:
                    raise RuntimeError(f"GET {url}: {r.status_code} {r.text[:300]}")
            return call

        pages = [(f"console queue /console/alerts (view={QUEUE_VIEW}): page 1",
                  "/console/alerts?" + form.query()),
                 (f"console queue: page {reached}" + (" (the last)" if reached < DEEP else ""),
                  "/console/alerts?" + form.query(cursor=deep.cursor or ""))]
        for what, url in pages:
            ms, pk_ms = beside(get(url), pk, repeat, lambda: took[-1])
            target = PAGE_TARGET[0] * pk_ms + PAGE_TARGET[1]
            rows.append(Row(what, f"{ms:.2f} ms", f"{pk_ms:.3f} ms pk", f"{ms / pk_ms:,.1f}x",
                            f"<= {target:.1f} ms", verdict(ms <= target)))
        big = f"/console/cases/{info.big_case}"
        for what, url in ((f"console case page /console/cases/{{id}}: {info.big_alerts:,} alerts, "
                           f"{seated.counterparties} counterparties' cases, the timeline's newest page", big),
                          ("console case page: an older page of its timeline (?before=<seq>, half way)",
                           f"{big}?before={seated.half_way}")):
            ms, pk_ms = beside(get(url), pk, repeat, lambda: took[-1])
            rows.append(Row(what, f"{ms:.2f} ms", f"{pk_ms:.3f} ms pk", f"{ms / pk_ms:,.1f}x",
                            f"<= {CASE_TARGET_MS:.1f} ms", verdict(ms <= CASE_TARGET_MS)))
    return rows


def print_plans(plans: dict[str, list[str]]) -> None:
    """Each kept query plan under the figure it explains."""
    for what, lines in plans.items():
        print(f"\nplan of {what}:")
        print("\n".join("  " + line for line in lines))


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--part", choices=("all", "overview", "queue"), default="all",
                    help="overview and search pages, the alert queue and cases, or both (default)")
    ap.add_argument("--rows", type=int, default=1_000_000, help="decisions in the trace index (overview)")
    ap.add_argument("--alerts", type=int, default=1_000_000, help="alerts in the view (queue)")
    ap.add_argument("--cases", type=int, default=100_000, help="cases they make (queue)")
    ap.add_argument("--dialect", choices=("sqlite", "postgresql", "both"), default="both")
    ap.add_argument("--skip-postgres", action="store_true", help="the same as --dialect sqlite")
    ap.add_argument("--quick", action="store_true", help="20,000 decisions; 20,000 alerts in 2,000 cases")
    ap.add_argument("--repeat", type=int, default=7, help="calls a queue figure is the median of")
    ap.add_argument("--explain", action="store_true", help="print each queue query's plan, not a miss's only")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.alerts, args.cases = 20_000, 20_000, 2_000
    dialect = "sqlite" if args.skip_postgres else args.dialect
    admin, pg = connect_postgres(dialect == "sqlite")
    if dialect == "postgresql" and admin is None:
        sys.exit(f"PostgreSQL: {pg['server_version']}")
    with tempfile.TemporaryDirectory(prefix="sealtrail-bench-") as tmp:
        root = Path(tmp)
        machine = machine_info(root, pg)
        print_machine(machine)
        print(f"CPU probe:  {probe_ms():.1f} ms before (a fixed pure-Python loop)")
        figures: dict[str, Any] = {"machine": machine, "rows": args.rows, "alerts": args.alerts,
                                   "cases": args.cases}
        for backend in backends(admin):
            if dialect in ("both", backend):
                figures[backend] = _measure(args, backend, root, admin)
    print(f"\nCPU probe:  {probe_ms():.1f} ms after")
    if args.json:
        write_json(args.json, figures)


def _measure(args: argparse.Namespace, backend: str, root: Path, admin: Engine | None) -> dict[str, Any]:
    """The parts ``args`` asks for on ``backend``, each on a fresh database; printed and returned."""
    got: dict[str, Any] = {}
    if args.part in ("all", "overview"):
        print(f"\n{backend}: {args.rows:,} indexed decisions over {DAYS} days")
        with fresh_db(backend, root, admin) as engine:
            rows = run(engine, args.rows)
        print(format_table(rows, "median of 5 (overview) / 7 (search)"))
        got["overview"] = [r.__dict__ for r in rows]
    if args.part in ("all", "queue"):
        print(f"\n{backend}: the alert queue and cases, {args.alerts:,} alerts in {args.cases:,} cases")
        with fresh_db(backend, root, admin) as engine:
            rows, facts = run_queue(engine, args.alerts, args.cases, repeat=args.repeat, explain=args.explain,
                                    console=root / f"console-{backend}")
        print(format_table(rows, f"median of {args.repeat}"))
        print_plans(facts["plans"])
        got["queue"] = [r.__dict__ for r in rows]
        got["queue_facts"] = facts
    return got


if __name__ == "__main__":
    main()
