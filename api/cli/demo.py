"""``sealtrail demo``: the quick-start job behind ``make demo``, end to end on one machine.

Initialises the ledger (idempotent), writes dev certificates if there are none, opens the
serving runtime (model registration and the shipped ruleset on a fresh ledger), simulates
payments with AML typologies and scores them through the pipeline in batches, as the dev
scorer certificate's principal, so the records look like served ones. Then a checkpoint,
a full verification and a summary. The simulator is seeded with the ledger's size, so each
run appends new payments, and a run can be repeated exactly on a copy of the same ledger
(its event times end at the hour the run started).

Before the run the demo seals sample sanctions lists, one in each official format (OFAC SDN, UN,
EU, UK and a bank's own CSV), so every payment is screened against them; after it, a handful of
crafted payments show a listed name, its Cyrillic and surname-first forms, a listed name in the
remittance text, a listed passport number and a listed BIC, beside an unlisted name, each decided
through the same runtime (``api.cli.demo_sanctions``). Then a good-guy clearance: the local operator
proposes that the held listed name's beneficiary is not the listed person, the dev officer
certificate's principal approves it (four-eyes), and that customer's next payment goes through,
naming the clearance, while the same name at another account is still held.

After scoring, the alert view is brought current with the ledger: the demo reports the alerts
and cases its decisions (the crafted ones included) opened, by outcome, and prints the officer's
next commands (the queue, one case of the simulated run, releasing one of its held payments)
beside the others.

The bundle goes where the server looks for exports (``--exports``, ``SEALTRAIL_EXPORTS_DIR``,
default ``./exports``, as ``<bundle_id>.zip``), so the console of the server the demo suggests
lists it. The commands the demo prints run as printed from the same directory: they start with
the path of this very ``sealtrail`` (``command_prefix``) and repeat every location option that
was given on the command line (the environment and the defaults reach ``serve`` by themselves).
"""

from __future__ import annotations

import getpass
import random
import shlex
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import (
    DbOpt,
    JsonOpt,
    KeysOpt,
    emit,
    err,
    fail,
    out,
    setting_option,
    settings,
    setup_errors,
)

if TYPE_CHECKING:
    from rich.progress import Progress

    from audit.decide.types import Decision, Submission
    from inference.simulate import SimConfig, SimTx

__all__ = ["DEFAULT_TRANSACTIONS", "command_prefix", "demo", "sim_config", "simulate_exactly", "summarise"]

DEFAULT_TRANSACTIONS = 20_000
CERTS_DIR = Path("demo/certs")
BATCH_TIMEOUT_S = 600.0
RELEASE_RATIONALE = "beneficiary confirmed by phone"  # the printed release command's example words


def command_prefix() -> str:
    """How to run this ``sealtrail`` again from the current directory, as shell words: plain
    ``sealtrail`` when that is what PATH finds, else this environment's script by its path
    (``.venv/bin/sealtrail`` after ``make demo``), else ``python -m api.cli``."""
    script = Path(sys.executable).parent / "sealtrail"
    if not script.is_file():
        return f"{shlex.quote(sys.executable)} -m api.cli"
    found = shutil.which("sealtrail")
    if found is not None and Path(found).resolve() == script.resolve():
        return "sealtrail"
    try:
        shown = script.absolute().relative_to(Path.cwd())
    except ValueError:
        shown = script.absolute()
    return shlex.quote(str(shown))


def sim_config(n: int, seed: int, end: datetime, n_normal: int | None = None) -> SimConfig:
    """A simulation of about ``n`` payments over the days before ``end`` (config minimums kept):
    one account for every ten payments (100 to 200,000), so a larger run is a larger population
    at a bank-like density (under one payment per account and day from 200,000 payments on), not
    the same 2,000 accounts paying ever more often."""
    from inference.simulate import SimConfig

    days = min(14, max(3, n // 1000))
    return SimConfig(seed=seed, start=end - timedelta(days=days), days=days,
                     n_accounts=max(100, min(200_000, n // 10)),
                     n_normal=round(n * 0.95) if n_normal is None else n_normal)


def simulate_exactly(n: int, seed: int, end: datetime) -> tuple[SimConfig, list[SimTx]]:
    """Exactly ``n`` simulated payments in time order: more normal traffic until there are
    enough, then a seeded sample (each typology occurs at least once, so small runs overshoot)."""
    from inference.simulate import simulate

    cfg = sim_config(n, seed, end)
    sims = simulate(cfg)
    while len(sims) < n:
        cfg = sim_config(n, seed, end, cfg.n_normal + n - len(sims))
        sims = simulate(cfg)
    if len(sims) > n:
        keep = sorted(random.Random(seed).sample(range(len(sims)), n))
        sims = [sims[i] for i in keep]
    return cfg, sims


@dataclass(frozen=True)
class Scored:
    decisions: list[Decision]
    sims: list[SimTx]
    seconds: float


def score_all(decide: Callable[[list[Submission]], list[Decision]], sims: Sequence[SimTx],
              principal: dict[str, Any], batch: int, advance: Callable[[int], None]) -> Scored:
    """Parse and decide ``sims`` in batches; the next batch is parsed while one is decided."""
    from audit.decide.types import Submission

    t0 = time.perf_counter()
    decisions: list[Decision] = []
    with ThreadPoolExecutor(1, thread_name_prefix="demo-decide") as pool:
        pending: Future[list[Decision]] | None = None
        for i in range(0, len(sims), batch):
            subs: list[Submission] = []
            for s in sims[i:i + batch]:
                (sub,) = Submission.parse(s.transaction.canonical_bytes(), "json", principal, s.at)
                if not isinstance(sub, Submission):  # the simulator writes valid messages only
                    raise ValueError(f"simulated payment refused: {sub}")
                subs.append(sub)
            if pending is not None:
                done = pending.result()
                decisions += done
                advance(len(done))
            pending = pool.submit(decide, subs)
        if pending is not None:
            done = pending.result()
            decisions += done
            advance(len(done))
    return Scored(decisions, list(sims), time.perf_counter() - t0)


def summarise(scored: Scored) -> dict[str, Any]:
    """Outcomes, top rules, latency and throughput of one run (plain data)."""
    import numpy as np

    from wasm_rules import OUTCOMES

    ds, n = scored.decisions, len(scored.decisions)
    counts = Counter(d.decision for d in ds)
    outcomes = {o: {"count": counts.get(o, 0), "percent": round(100 * counts.get(o, 0) / max(1, n), 2)}
                for o in OUTCOMES}
    rules = Counter(h.id for d in ds for h in d.fired)
    said = [d for d in ds if d.explanation is not None and d.explanation.reasons]
    codes = Counter(r.code for d in said for r in (d.explanation.reasons or () if d.explanation else ()))
    example = max(said, key=lambda d: d.score or 0.0, default=None)  # the highest score, first such
    lat = np.array([d.latency_us.get("total", 0) + d.latency_us.get("queue", 0) for d in ds] or [0])
    flagged = [d.decision != "ALLOW" for d in ds]
    laundering = [s.label == 1 for s in scored.sims]
    bad = sum(laundering)
    caught = sum(f and b for f, b in zip(flagged, laundering, strict=True))
    false_alarms = sum(f and not b for f, b in zip(flagged, laundering, strict=True))
    return {
        "decisions": n,
        "outcomes": outcomes,
        "top_rules": [{"id": r, "count": c} for r, c in rules.most_common(5)],
        "latency_us": {"p50": int(np.percentile(lat, 50)), "p99": int(np.percentile(lat, 99))},
        "seconds": round(scored.seconds, 3),
        "throughput_per_s": round(n / scored.seconds) if scored.seconds > 0 else None,
        "laundering": {"transactions": bad, "flagged": caught,
                       "normal_flagged": false_alarms, "normal": n - bad},
        "fail_safe": sum(d.fail_safe is not None for d in ds),
        "explained": {"decisions": len(said),
                      "top_reasons": [{"code": c, "count": k} for c, k in codes.most_common(5)],
                      "example": None if example is None or example.explanation is None else {
                          "trace_id": example.trace_id, "decision": example.decision, "score": example.score,
                          **(example.explanation.to_json() or {})}},
    }


def _progress(as_json: bool) -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("scoring"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                    console=err, disable=as_json or not err.is_terminal, transient=False)


def demo(
    ctx: typer.Context,
    transactions: Annotated[int, typer.Option("--transactions", min=1, max=1_000_000,
                                              help="simulated payments to score")] = DEFAULT_TRANSACTIONS,
    db: DbOpt = None,
    keys: KeysOpt = None,
    certs: Annotated[Path, typer.Option("--certs", help="dev certificates (created if absent)")] = CERTS_DIR,
    exports: Annotated[Path | None, setting_option(
        "exports_dir", "--exports", "--exports-dir",
        help="where the bundle is written (where serve looks for exports)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Score simulated payments with AML typologies end to end, screened against sample sanctions
    lists (and crafted payments that meet them): seal, checkpoint, verify, then export the run's
    decisions as a regulator bundle and verify that offline."""
    from api import ops
    from api.certs import create_dev_pki
    from api.cli import demo_sanctions as sanctions_demo
    from audit.decide.principal import Principal
    from audit.decide.runtime import Runtime

    t_start = time.perf_counter()
    s = settings(db, keys, exports_dir=exports)
    info = ops.initialise(s)
    pem = certs / "scorer.pem"
    created = not pem.exists()
    if created:
        create_dev_pki(certs)
    refused: tuple[type[Exception], ...] = (*setup_errors(), OSError)  # OSError: a certificate missing
    try:
        principal = Principal.from_pem(pem.read_bytes())
        officer = Principal.from_pem((certs / "officer.pem").read_bytes())  # approves the clearance
        rt = Runtime.open(s, operator=getpass.getuser())
    except refused as exc:
        fail(exc, as_json, code=2)
    try:
        seed = rt.ledger.size()
        end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)

        def decide(subs: list[Submission]) -> list[Decision]:
            return rt.service.decide(subs, timeout_s=BATCH_TIMEOUT_S)

        def refresh() -> None:  # the lists and clearances sealed now, in force for the next batch
            if rt.screener is not None:
                rt.screener.refresh(wait=True)

        operator = Principal.local(getpass.getuser())
        lists = sanctions_demo.seal_demo_lists(rt.ledger, operator)
        refresh()  # the run is screened against them from its first batch
        t0 = time.perf_counter()
        cfg, sims = simulate_exactly(transactions, seed, end)
        sim_s = time.perf_counter() - t0

        with _progress(as_json) as bar:
            task = bar.add_task("scoring", total=len(sims), rate="")
            t1, done = time.perf_counter(), [0]

            def advance(k: int) -> None:
                done[0] += k
                rate = done[0] / max(1e-9, time.perf_counter() - t1)
                bar.update(task, advance=k, rate=f"{rate:,.0f}/s")

            scored = score_all(decide, sims, principal.to_json(), s.max_batch, advance)
        first_at = scored.decisions[0].recorded_at if scored.decisions else None
        t2 = time.perf_counter()
        crafted = decide(sanctions_demo.crafted_submissions(principal.to_json(), end, seed))
        payments = sanctions_demo.payment_results(rt.engine, crafted)
        clearance, again = sanctions_demo.clear_and_pay_again(rt.ledger, refresh, decide, payments, operator,
                                                              officer, principal.to_json(), end, seed)
        crafted += again
        sanctions = {"lists": lists, "simulated": sanctions_demo.simulated_screening(scored.decisions),
                     "payments": payments, "clearance": clearance,
                     "seconds": round(time.perf_counter() - t2, 3)}
    finally:
        rt.close()  # a clean stop seals the feature state (state.snapshot): the checkpoint covers it
    ledger = ops.open_ledger(s)
    try:
        cp = ledger.checkpoint()
    finally:
        ledger.engine.dispose()
    # before verify, which checks the view it wrote; the officer's example is a simulated payment
    alerts = _alerts_opened(s, [*scored.decisions, *crafted], scored.decisions)
    report = ops.verify(s, [], None)
    exported = _export_and_verify(s, first_at) if first_at else None
    summary = summarise(scored)
    typologies = Counter(x.typology for x in sims)
    given = {name: _given(ctx, name) for name in ("db", "keys", "exports")}
    doc = {"ok": True, "init": info,  # a report means verified: damage raises
           "certs": {"dir": str(certs), "created": created, "principal": principal.to_json()},
           "simulation": {"seed": cfg.seed, "start": cfg.start.isoformat(), "days": cfg.days,
                          "accounts": cfg.n_accounts, "transactions": len(sims),
                          "typologies": dict(sorted(typologies.items())), "seconds": round(sim_s, 3)},
           **summary,
           "ledger_size": cp.checkpoint.size, "checkpoint": cp.note, "verify": report.to_json(),
           "export": exported,
           "alerts": alerts["alerts"], "cases": alerts["cases"], "sanctions": sanctions,
           "commands": _commands(s, certs, exported, given, alerts["example"]),
           "total_seconds": round(time.perf_counter() - t_start, 3)}
    emit(doc, as_json, lambda: _human(doc, _shown_url(s.db), s.max_batch))


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was typed on the command line (not the environment, not a default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _shown_url(url: str) -> str:
    """A database URL fit for the screen: its password, if any, as ***."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: the ledger refused it already
        return url


def _commands(s: Any, certs: Path, exported: dict[str, Any] | None, given: dict[str, bool],
              example: dict[str, int | None]) -> dict[str, str]:
    """The next commands to try, exactly as they run from this directory; ``example`` names a
    case and a held payment of this run for the officer's."""
    q, prefix = shlex.quote, command_prefix()
    where = ""
    if given["db"]:
        where += f" --db {q(s.db)}"
    if given["keys"]:
        where += f" --keys {q(str(s.keys))}"
    c = {name: q(str(certs / name)) for name in ("server.pem", "server.key", "ca.pem", "roles.toml")}
    serve = (f"{prefix} serve{where} --tls-cert {c['server.pem']} --tls-key {c['server.key']} "
             f"--client-ca {c['ca.pem']} --roles {c['roles.toml']}"
             + (f" --exports-dir {q(str(s.exports_dir))}" if given["exports"] else "")
             + f" --port {s.port}")
    doc = {"serve": serve, "console": f"https://{s.host}:{s.port}/console",
           "browser_certificate": str(certs / "officer.p12")}
    if exported is not None:
        doc["verify_export"] = (f"{prefix} export verify {q(exported['file'])} "
                                f"--trusted-key {q(exported['trusted_key'])}")
    doc["console_alerts"] = f"{doc['console']}/alerts"
    doc["alerts_list"] = f"{prefix} alerts list{where}"
    if example["case"] is not None:
        doc["case_show"] = f"{prefix} cases show {example['case']}{where}"
    if example["hold"] is not None:
        doc["release_hold"] = (f"{prefix} alerts act {example['hold']} release "
                               f"--rationale {q(RELEASE_RATIONALE)}{where}")
    return doc


def _alerts_opened(s: Any, decisions: Sequence[Decision], examples: Sequence[Decision]) -> dict[str, Any]:
    """Bring the alert view current with the ledger (``audit.cases.store.catch_up``) and count
    the alerts and cases this run's ``decisions`` opened, by outcome (a case by the alert that opened
    it); ``example``: the newest held payment among ``examples`` and its case (else the newest
    alert's among them)."""
    from dataclasses import replace

    from api import ops
    from audit.cases.query import MAX_LIMIT, AlertFilter, alert_page
    from audit.cases.store import catch_up
    from wasm_rules import OUTCOMES

    t0 = time.perf_counter()
    ours = {d.seq for d in decisions if not d.replayed}
    opened = []
    engine = ops.engine_for(s)
    try:
        catch_up(engine)
        f = AlertFilter(view="all", limit=MAX_LIMIT)  # newest first: this run's alerts come first
        while ours:
            page = alert_page(engine, f, today=datetime.now(UTC).date())
            opened += [a for a in page.items if a.seq in ours]
            if page.next_cursor is None or page.items[-1].seq < min(ours):
                break
            f = replace(f, cursor=page.next_cursor)
    finally:
        engine.dispose()
    by_alert = Counter(a.outcome for a in opened)
    by_case = Counter(a.outcome for a in opened if a.case_id == a.seq)
    pick = {d.seq for d in examples if not d.replayed}
    among = [a for a in opened if a.seq in pick]
    hold = next((a for a in among if a.outcome == "HOLD" and a.payment == "HELD"), None)
    case = hold.case_id if hold is not None else among[0].case_id if among else None
    return {"alerts": {"opened": len(opened), "by_outcome": {o: by_alert.get(o, 0) for o in OUTCOMES},
                       "account_alerts": sum(a.account_alert > 0 for a in opened),
                       "held_payments": sum(a.payment == "HELD" for a in opened),
                       "seconds": round(time.perf_counter() - t0, 3)},
            "cases": {"opened": sum(by_case.values()),
                      "by_outcome": {o: by_case.get(o, 0) for o in OUTCOMES}},
            "example": {"case": case, "hold": None if hold is None else hold.seq}}


def _human(doc: dict[str, Any], db: str, batch: int) -> None:
    p = print_line
    sim, lau, v = doc["simulation"], doc["laundering"], doc["verify"]
    p(f"ledger      {db}  (origin {doc['init']['origin']}, "
      f"{'initialised now' if doc['init']['created'] else 'already initialised'})")
    p(f"certs       {doc['certs']['dir']} ({'created' if doc['certs']['created'] else 'existing'}); "
      f"scoring as {doc['certs']['principal']['subject']}")
    p(f"simulated   {sim['transactions']:,} payments over {sim['days']} days, {sim['accounts']:,} accounts, "
      f"seed {sim['seed']} ({sim['seconds']:.1f}s); "
      + ", ".join(f"{k} {c}" for k, c in sim["typologies"].items() if k != "normal"))
    p(f"scored      {doc['decisions']:,} in {doc['seconds']:.1f}s: {doc['throughput_per_s'] or 0:,}/s "
      f"(parse + features + model + rules + seal, batches of {batch})")
    p("outcomes    " + "  ".join(f"{k} {o['count']:,} ({o['percent']:.1f}%)"
                                  for k, o in doc["outcomes"].items()))
    p("top rules   " + ("  ".join(f"{r['id']} {r['count']:,}" for r in doc["top_rules"]) or "none fired"))
    p(f"laundering  {lau['flagged']:,} of {lau['transactions']:,} flagged; normal flagged "
      f"{lau['normal_flagged']:,} of {lau['normal']:,}"
      + (f"; fail-safe {doc['fail_safe']}" if doc["fail_safe"] else ""))
    al, ca = doc["alerts"], doc["cases"]
    p(f"alerts      {al['opened']:,} opened: "
      + "  ".join(f"{k} {n:,}" for k, n in al["by_outcome"].items())
      + f" ({al['account_alerts']:,} with an account alert); {al['held_payments']:,} held payments await "
        "an officer")
    p(f"cases       {ca['opened']:,} opened, by the alert that opened each: "
      + "  ".join(f"{k} {n:,}" for k, n in ca["by_outcome"].items()))
    _human_sanctions(doc["sanctions"])
    ex = doc["explained"]
    if ex["decisions"]:
        p(f"reasons     {ex['decisions']:,} decisions carry reason codes: "
          + "  ".join(f"{r['code']} {r['count']:,}" for r in ex["top_reasons"]))
        e = ex["example"]
        p(f"            e.g. {e['decision']} {e['trace_id']} (score {e['score']:.3f}): "
          + "; ".join(f"{r['text']} (+{r['contribution_milli'] / 1000:.3f})" for r in e["reasons"]))
    lat = doc["latency_us"]
    p(f"latency     p50 {lat['p50'] / 1000:.1f} ms  p99 {lat['p99'] / 1000:.1f} ms per decision "
      "(queue + its batch)")
    p(f"ledger size {doc['ledger_size']:,}; latest checkpoint:")
    out.print(doc["checkpoint"], end="", markup=False)
    p(f"verified    {v['size']:,} entries, {v['checkpoints']} checkpoints in {v['seconds']:.2f}s "
      f"against {v['trusted_key'] or 'no pinned key'}")
    view = (v.get("derived") or {}).get("case_view") or {}
    if view.get("alerts"):
        p(f"            and the alert view row by row against the records: {view['alerts']:,} alerts, "
          f"{view['cases']:,} cases")
    e = doc["export"]
    if e is not None:
        p(f"export      {e['file']}: {e['records']:,} records, {e['size_bytes'] / 2**20:.1f} MiB "
          f"in {e['create_seconds']:.1f}s; verified offline in {e['verify_seconds']:.1f}s "
          f"({e['replayed']:,} decisions replayed, {e['rescored']:,} rescored, {e['explained']:,} "
          f"explanations recomputed, {e['rescreened']:,} screened again) against {e['trusted_key']}")
        gone = sum((e.get("not_rederived") or {}).values())
        p(f"            {e.get('rederived', 0):,} decisions re-derived from their messages (parsed again, "
          f"features recomputed on the sealed state, screened, scored and ruled again)"
          + (f"; {gone:,} not re-derivable (reasons in the verify report)" if gone else ""))
        c = e.get("completeness") or {}
        if c.get("proven"):
            p(f"            complete: every decision recorded in [{c['from']}, {c['until']}) is in it, "
              f"proven by {c['summaries']} sealed decision summaries")
        p(f"            check it yourself: {doc['commands']['verify_export']}")
    cmd = doc["commands"]
    p(f"console     {cmd['serve']}")
    p(f"            then open {cmd['console']} with {cmd['browser_certificate']} imported into the "
      "browser (password sealtrail-dev)")
    p(f"officer     the alert queue: {cmd['alerts_list']}  (in the console: {cmd['console_alerts']})")
    if "case_show" in cmd:
        p(f"            a case and its history: {cmd['case_show']}")
    if "release_hold" in cmd:
        p(f"            release a held payment: {cmd['release_hold']}")
    p(f"done in {doc['total_seconds']:.1f}s")


def _human_sanctions(sanctions: dict[str, Any]) -> None:
    """The lists screened against, the simulated run's sanctions alerts, then one line per crafted
    payment: outcome, the sanctions rule fired and the best hit (list, entry, listed name, score);
    then the good-guy clearance and a line for each payment decided after it."""
    p, lists, sim, c = print_line, sanctions["lists"], sanctions["simulated"], sanctions["clearance"]
    sealed = sum(x["sealed_now"] for x in lists)
    p(f"sanctions   {len(lists)} sample lists in force "
      f"({f'{sealed} sealed now' if sealed else 'sealed by an earlier run'}): "
      + ", ".join(f"{x['name']} ({x['format']}, {x['entries']})" for x in lists))
    p(f"            the simulated payments: {sim['sanctions_alerts']:,} of {sim['decisions']:,} fired a "
      "sanctions rule" + "".join(f"; {r} {n:,}" for r, n in sim["by_rule"].items()))
    payments = [*sanctions["payments"], *c["payments"]]
    width = max(len(x["shows"]) for x in payments)
    for x in sanctions["payments"]:
        p(_payment_line(x, width))
    p(f"            good-guy clearance {c['seq']} ({c['list']} entry {c['entry_id']} at the {c['where']}, "
      f"until {c['until']}): proposed by {c['proposer']['subject']}, approved by "
      f"{(c['approver'] or {}).get('subject')}")
    for x in c["payments"]:
        p(_payment_line(x, width))


def _payment_line(x: dict[str, Any], width: int) -> str:
    """One demo payment: what it shows, its outcome, the sanctions rule and best hit, or the hit a
    clearance cleared."""
    line = f"            {x['shows']:<{width}}  {x['decision']:<6} "
    if x["sanctions_rule"] is None:
        line += "no sanctions rule" + (f" (fired: {', '.join(x['rules'])})" if x["rules"] else "")
        for h in x.get("cleared", ()):
            line += (f"; hit cleared by clearance {h['clearance_seq']}: {h['list']} entry {h['entry_id']} "
                     f"{h['matched']!r} ({h['basis']}, {h['where']})")
        return line
    h = x["hits"][0]
    return line + (f"{x['sanctions_rule']}: {h['list']} entry {h['entry_id']} {h['matched']!r}, "
                   f"score {h['score']} ({h['basis']}, {h['where']})")


def _export_and_verify(s: Any, first_at: str) -> dict[str, Any]:
    """This run's decisions as a regulator bundle where the server keeps exports
    (``exports_dir/<bundle_id>.zip``, as ``POST /v1/exports`` names it), then verified offline
    with the pinned key."""
    import uuid6

    from api import ops
    from audit.bundle.verify import verify_bundle
    from audit.decide.principal import Principal
    from audit.export.create import create_bundle
    from audit.export.select import ExportFilters

    ledger = ops.open_ledger(s)
    signer = ops.export_signer(s, ledger)
    # every decision of this run was recorded by now; the summary the export seals at the window's
    # end is recorded after it, so the bundle proves the whole window complete
    until = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    exports: Path = s.exports_dir
    exports.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        bundle_id = str(uuid6.uuid7())
        summary = create_bundle(ledger.engine, ledger, signer, exports / f"{bundle_id}.zip",
                                ExportFilters.of(first_at, until), Principal.local(getpass.getuser()),
                                bundle_id=bundle_id)
    finally:
        ledger.engine.dispose()
    t1 = time.perf_counter()
    rep = verify_bundle(summary.path, [signer.verifier])
    t2 = time.perf_counter()
    return {"file": str(summary.path), "bundle_id": summary.bundle_id, "records": rep.records,
            "size_bytes": summary.size_bytes, "create_seconds": round(t1 - t0, 3),
            "verify_seconds": round(t2 - t1, 3), "verified": True, "replayed": rep.replayed,
            "rescored": rep.rescored, "explained": rep.explained, "rescreened": rep.rescreened,
            "rederived": rep.rederived, "not_rederived": rep.not_rederived,
            "trusted_key": signer.verifier.vkey,
            "completeness": None if rep.completeness is None else rep.completeness.to_json()}


def print_line(text: str) -> None:
    out.print(text, markup=False)
