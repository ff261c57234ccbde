"""The human side of a bundle: ``records.csv`` rows and a self-contained ``report.html``.

``ReportStats`` is fed one decision at a time while the bundle streams and keeps only what the
report shows: counts by outcome, by fired rule and by day, the first ``ROW_CAP`` decisions for
the table, and the first ``PURGED_CAP`` purged payloads. The page has no scripts and no
external assets; numbers carry ``data-*`` attributes so a test can read them back.

A bundle cut for one case (format 5) also shows the case: its final state, its history (who did
what when, with their words, and whether each action applied), its filed reports with their
SHA-256 and its legal holds, from the same ``CaseReport`` the verifier's case check gives.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any

import orjson

from audit.compliance.facts import FactsBuilder
from audit.decide.fixed_point import body_score
from wasm_rules import OUTCOMES

if TYPE_CHECKING:
    from audit.bundle.cases import CaseReport

__all__ = ["CSV_HEADER", "PURGED_CAP", "ROW_CAP", "ReportStats", "csv_cell", "csv_line", "csv_row",
           "render_report"]

ROW_CAP = 10_000
PURGED_CAP = 1_000
CSV_HEADER = ("seq", "trace_id", "recorded_at", "decision", "score", "fired", "fail_safe",
              "principal_subject", "principal_fingerprint_sha256", "ruleset", "module_sha256", "model_sha256",
              "input_format", "message_type", "reference", "payload_state", "annotations")


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# a line that may need more than joining: a formula character opening it or following a comma,
# or a character that RFC 4180 quotes (comma counted apart: the separators are commas)
_RISKY = re.compile(r'(?:^|,)[=+\-@\t\r]|["\r\n]')


def csv_cell(value: str) -> str:
    """One ``records.csv`` cell. A value a spreadsheet would run as a formula (one that starts
    with ``=``, ``+``, ``-``, ``@``, a tab or a CR) is neutralised as OWASP advises: prefixed with
    a single quote and quoted. A value holding a comma, quote, CR or LF is quoted (RFC 4180,
    quotes doubled)."""
    if value.startswith(_FORMULA_START):
        return "\"'" + value.replace('"', '""') + '"'
    if "," in value or '"' in value or "\r" in value or "\n" in value:
        return '"' + value.replace('"', '""') + '"'
    return value


def csv_line(fields: list[str]) -> str:
    """One ``records.csv`` line (with its CRLF): plain joining where no cell needs quoting or
    neutralising (the usual row), else cell by cell (``csv_cell``)."""
    line = ",".join(fields)
    if line.count(",") == len(fields) - 1 and _RISKY.search(line) is None:
        return line + "\r\n"
    return ",".join(map(csv_cell, fields)) + "\r\n"


def csv_row(seq: int, env: dict[str, Any], payload_state: str, annotations: int) -> list[str]:
    b = env["record"]
    score = body_score(b)
    inp = b["input"]
    rules, who = b["rules"], b["principal"]
    return [str(seq), env["trace_id"], env["recorded_at"], b["decision"],
            "" if score is None else repr(score), ";".join(h["id"] for h in b["fired"]), b["fail_safe"] or "",
            who.get("subject", ""), who.get("fingerprint_sha256", ""),
            f"{rules['ruleset_id']}@{rules['version']}", rules["module_sha256"], b["model"]["sha256"],
            inp["format"], inp["message_type"], inp["reference"], payload_state, str(annotations)]


def csv_header() -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerow(CSV_HEADER)
    return buf.getvalue().encode()


@dataclass
class ReportStats:
    decisions: int = 0
    annotations: int = 0
    by_decision: Counter[str] = field(default_factory=Counter)
    by_rule: Counter[str] = field(default_factory=Counter)
    by_day: dict[str, Counter[str]] = field(default_factory=dict)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    purged: list[tuple[str, int]] = field(default_factory=list)
    purged_total: int = 0
    facts: FactsBuilder | None = None  # the compliance facts, fed the same decisions and refusals

    def add(self, seq: int, env: dict[str, Any], annotations: int) -> None:
        if self.facts is not None:
            self.facts.add(seq, env)
        b = env["record"]
        self.decisions += 1
        self.annotations += annotations
        self.by_decision[b["decision"]] += 1
        fired = b["fired"]
        for h in fired:
            self.by_rule[h["id"]] += 1
        day = env["recorded_at"][:10]
        self.by_day.setdefault(day, Counter())[b["decision"]] += 1
        if len(self.rows) < ROW_CAP:
            self.rows.append((seq, env["trace_id"], env["recorded_at"], b["decision"], body_score(b),
                              tuple((h["id"], h["reason"]) for h in fired), b["fail_safe"],
                              b["principal"].get("subject", ""), b["principal"].get("fingerprint_sha256", ""),
                              annotations))

    def add_refusal(self, seq: int, entry: bytes) -> None:
        """A refusal record the bundle carries (only the compliance facts count them here)."""
        if self.facts is not None:
            self.facts.add(seq, orjson.loads(entry))

    def add_purged(self, sha256: str, purge_seq: int) -> None:
        self.purged_total += 1
        if len(self.purged) < PURGED_CAP:
            self.purged.append((sha256, purge_seq))


def _e(v: object) -> str:
    return escape(str(v), quote=True)


def _timeline(days: dict[str, Counter[str]]) -> str:
    """Per-day counts as an inline SVG bar chart (stacked by outcome) plus the same as a table."""
    if not days:
        return ""
    keys = sorted(days)
    top = max(sum(c.values()) for c in days.values()) or 1
    w, h, bar = max(40 * len(keys), 200), 160, 30
    colours = {"ALLOW": "#4caf50", "REVIEW": "#ffb300", "HOLD": "#fb8c00", "BLOCK": "#e53935"}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + 20}" role="img" '
             'aria-label="decisions per day">']
    for i, day in enumerate(keys[:400]):
        y = float(h)
        for o in OUTCOMES:
            n = days[day][o]
            if n:
                hh = n / top * h
                y -= hh
                parts.append(f'<rect x="{i * 40 + 5}" y="{y:.1f}" width="{bar}" height="{hh:.1f}" '
                             f'fill="{colours.get(o, "#888")}"><title>{_e(day)} {o}: {n}</title></rect>')
        parts.append(f'<text x="{i * 40 + 5}" y="{h + 15}" font-size="8">{_e(day[5:])}</text>')
    parts.append("</svg>")
    head = "".join(f"<th>{o}</th>" for o in OUTCOMES)
    body = "".join(f'<tr data-day="{_e(d)}"><td>{_e(d)}</td>'
                   + "".join(f'<td class="n">{days[d][o]}</td>' for o in OUTCOMES)
                   + f'<td class="n">{sum(days[d].values())}</td></tr>' for d in keys)
    return ("".join(parts) + f"<table><tr><th>day (UTC)</th>{head}<th>total</th></tr>{body}</table>")


_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;"
        "margin:1em 0}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:left}"
        "td.n{text-align:right}code{font-size:12px}h2{margin-top:1.5em}")


def _case(report: CaseReport) -> str:
    """The case section: final state, history, reports and holds."""
    s = report.state or {}
    out = [f'<h2>Case {report.case_id}</h2><table data-case="{report.case_id}">']
    for k in ("subject", "opened_at", "alerts", "open_alerts", "assignee_subject", "disposition", "closed_at",
              "links", "reports", "last_report"):
        v = s.get(k)
        shown = "-" if v in (None, "") else v
        out.append(f"<tr><th>{_e(k)}</th><td data-field=\"{_e(k)}\">{_e(shown)}</td></tr>")
    out.append("</table><h3>Alerts</h3><table><tr><th>seq</th><th>opened</th><th>outcome</th>"
               "<th>rules</th><th>state</th><th>disposition</th><th>payment</th><th>review due</th>"
               "<th>filing due</th></tr>")
    for a in report.alerts:
        out.append(f'<tr data-alert="{a["seq"]}"><td class="n">{a["seq"]}</td><td>{_e(a["opened_at"])}</td>'
                   f'<td>{_e(a["outcome"])}</td><td>{_e(a["fired"] or "-")}</td><td>{_e(a["state"])}</td>'
                   f'<td>{_e(a["disposition"] or "-")}</td><td>{_e(a["payment"] or "-")}</td>'
                   f'<td>{_e(a["review_due"])}</td><td>{_e(a["filing_due"])}</td></tr>')
    out.append(f"</table><h3>History</h3><p>Every sealed action on the case, in log order. The case "
               f"events of seqs {report.from_seq} to {report.to_seq} about other cases ({report.withheld}) "
               "are in the bundle as proved leaf hashes only.</p><table><tr><th>seq</th><th>recorded at</th>"
               "<th>action</th><th>on</th><th>by</th><th>rationale</th><th>details</th><th>applied</th></tr>")
    for h in report.history:
        details = "<br>".join(f"{_e(k)}: {_e(v)}" for k, v in h["details"].items() if k != "policy")
        applied = "yes" if h["applied"] else f"no: {_e(h['why'])}"
        out.append(f'<tr data-history="{h["seq"]}"><td class="n">{h["seq"]}</td>'
                   f'<td>{_e(h["recorded_at"])}</td>'
                   f'<td>{_e(h["what"])}</td><td>{_e(h["target"] or "-")}</td><td>{_e(h["by"] or "-")}</td>'
                   f'<td>{_e(h["rationale"] or "-")}</td><td>{details or "-"}</td><td>{applied}</td></tr>')
    out.append("</table><h3>Filed reports</h3>")
    if not report.reports:
        out.append("<p>None.</p>")
    else:
        out.append("<table><tr><th>seq</th><th>filed at</th><th>by</th><th>SHA-256</th><th>amends</th>"
                   "<th>payload</th><th>legal holds</th></tr>")
        for r in report.reports:
            out.append(f'<tr data-report="{_e(r["sha256"])}"><td class="n">{r["seq"]}</td>'
                       f'<td>{_e(r["recorded_at"])}</td><td>{_e(r["by"])}</td><td><code>{_e(r["sha256"])}</code>'
                       f'</td><td><code>{_e(r["amends"] or "-")}</code></td><td>{_e(r["payload"])}</td>'
                       f'<td>{_e(", ".join(r.get("holds", [])) or "none")}</td></tr>')
        out.append("</table>")
    if report.holds:
        out.append("<h3>Legal holds</h3><table><tr><th>hold</th><th>placed (seq)</th><th>seqs</th>"
                   "<th>reason</th><th>released (seq)</th></tr>")
        for hold in report.holds:
            out.append(f"<tr><td>{_e(hold['hold_id'])}</td><td class=\"n\">{hold['placed_seq']}</td>"
                       f"<td>{_e(hold['seq_from'])} to {_e(hold['seq_to'])}</td><td>{_e(hold['reason'])}</td>"
                       f"<td>{_e('-' if hold['released_seq'] is None else hold['released_seq'])}</td></tr>")
        out.append("</table>")
    for note in report.notes:
        out.append(f"<p>{_e(note)}</p>")
    return "".join(out)


def _fact(path: str, value: object) -> str:
    """One fact's cell: its path in ``compliance.json``'s ``facts`` and its value, which the verifier
    reads back (``data-fact``) and compares with the facts it recomputed."""
    shown = "-" if value is None else value
    return f'<td data-fact="{_e(path)}">{_e(shown)}</td>'


def _step_text(step: dict[str, Any] | None) -> str:
    if step is None:
        return "-"
    return f"{step['subject'] or '(local)'}, {step['recorded_at']} (seq {step['seq']})"


def _stated(st: dict[str, Any]) -> str:
    """What the bank's system states and no sealed record proves (kept apart from the facts)."""
    cp, w, ret = st["checkpoints"], st["witnesses"], st["retention"]
    newest = cp["newest"]
    rows = [("payload retention", "-" if ret is None else f"{ret['payload_retention_days']} days"),
            ("checkpoints signed in the period", str(cp["signed_in_period"])),
            ("newest checkpoint by the end",
             "none" if newest is None else f"size {newest['size']}, {newest['created_at']}"),
            ("entries not covered by it", str(cp["entries_not_covered"])),
            ("witnesses configured", "-" if w["configured"] is None
             else ", ".join(x.split("+")[0] for x in w["configured"]) or "none"),
            ("cosignatures received in the period",
             ", ".join(f"{vk.split('+')[0]}: {x['cosignatures']}"
                       for vk, x in w["cosigned_in_period"].items()) or "none")]
    body = "".join(f"<tr><th>{_e(k)}</th><td data-stated=\"{_e(k)}\">{_e(v)}</td></tr>" for k, v in rows)
    return f'<h3>Stated, not proven</h3><p class="stated">{_e(st["note"])}.</p><table>{body}</table>'


def _row(*cells: str) -> str:
    return "<tr>" + "".join(cells) + "</tr>"


def _td(value: object) -> str:
    return f"<td>{_e(value)}</td>"


_CASE_SCOPE = ("The period the case's records span, from its first decision to its last record; the "
               "decisions counted are the case's, and a case carries no refusal. ")


def _compliance(doc: dict[str, Any]) -> str:
    """The compliance section: the facts derived from sealed records (checked by ``export verify``),
    then what is stated and not proven."""
    f = doc["facts"]
    p, d = f["period"], f["decisions"]
    fs = d["fail_safe"]
    out = ['<section id="compliance" data-compliance="1"><h2>Compliance facts</h2>',
           f"<p>For the period from {_e(p['from'])} to {_e(p['to'])} (scope: {_e(doc['scope'])}). "
           + (_CASE_SCOPE if doc["scope"] == "case" else "")
           + "Derived from the sealed records this bundle carries (<code>compliance.json</code>); "
           "<code>sealtrail export verify</code> recomputes them and fails if this page or that file "
           "disagrees.</p>", "<h3>Decisions, fail-safe outcomes and refusals</h3><table>",
           _row("<th>decisions</th>", _fact("decisions.total", d["total"]))]
    out += [_row(f"<th>{_e(o)}</th>", _fact(f"decisions.by_decision.{o}", n))
            for o, n in d["by_decision"].items()]
    out.append(_row("<th>fail-safe HOLDs</th>", _fact("decisions.fail_safe.total", fs["total"])))
    out += [_row(f"<th>fail-safe: {_e(why)}</th>", _fact(f"decisions.fail_safe.by_reason.{why}", n))
            for why, n in fs["by_reason"].items()]
    out.append(_row("<th>refusals</th>", _fact("refusals.total", f["refusals"]["total"])))
    out += [_row(f"<th>refused: {_e(kind)}</th>", _fact(f"refusals.by_kind.{kind}", n))
            for kind, n in f["refusals"]["by_kind"].items()]
    k = f["keys"]
    out.append("</table><h3>Signing keys</h3><table><tr><th>key</th><th>from seq</th><th>until seq</th></tr>")
    for i, key in enumerate(k["history"]):
        at = f"keys.history[{i}]"
        out.append(_row(_fact(f"{at}.vkey", key["vkey"]), _fact(f"{at}.from_seq", key["from_seq"]),
                        _fact(f"{at}.until_seq", key["until_seq"])))
    out.append("</table><p>Rotations in the period:</p><table><tr><th>seq</th><th>recorded at</th>"
               "<th>old key</th><th>new key</th></tr>")
    for i, r in enumerate(k["rotations"]):
        at = f"keys.rotations[{i}]"
        out.append(_row(_fact(f"{at}.seq", r["seq"]), _td(r["recorded_at"]), _td(r["old_vkey"]),
                        _fact(f"{at}.new_vkey", r["new_vkey"])))
    out.append("</table><p>Revocations sealed by the period's end:</p><table><tr><th>seq</th>"
               "<th>revoked key</th><th>from size</th><th>reason</th></tr>")
    for i, r in enumerate(k["revocations"]):
        at = f"keys.revocations[{i}]"
        out.append(_row(_fact(f"{at}.seq", r["seq"]), _fact(f"{at}.revoked_vkey", r["revoked_vkey"]),
                        _fact(f"{at}.from_size", r["from_size"]), _td(r["reason"])))
    h = f["legal_holds"]
    out.append(f"</table><h3>Legal holds in force</h3><p>Placed in the period: {h['placed']}; released: "
               f"{h['released']}.</p><table><tr><th>hold</th><th>seqs</th><th>placed (seq)</th>"
               "<th>reason</th><th>released (seq)</th></tr>")
    for i, x in enumerate(h["in_force"]):
        at = f"legal_holds.in_force[{i}]"
        out.append(_row(_fact(f"{at}.hold_id", x["hold_id"]), _td(f"{x['seq_from']} to {x['seq_to']}"),
                        _fact(f"{at}.placed_seq", x["placed_seq"]), _td(x["reason"]),
                        _fact(f"{at}.released_seq", x["released_seq"])))
    pu = f["purges"]
    out.append("</table><h3>Payload purges in the period</h3><table>"
               + _row("<th>purge records</th>", _fact("purges.records", pu["records"]))
               + _row("<th>payloads purged</th>", _fact("purges.payloads", pu["payloads"])) + "</table>")
    out.append("<h3>Ruleset versions and their approvals</h3><table><tr><th>ruleset</th>"
               "<th>module SHA-256</th><th>proposed</th><th>approved</th><th>activated</th>"
               "<th>four-eyes</th></tr>")
    for i, v in enumerate(f["rulesets"]):
        acts = "<br>".join(_e(_step_text(a)) for a in v["activations"]) or "-"
        approved = ("<td>-</td>" if v["approved"] is None
                    else _fact(f"rulesets[{i}].approved.subject", v["approved"]["subject"]))
        eyes = "bootstrapped by the operator" if v["bootstrapped"] else "yes" if v["four_eyes"] else "no"
        sha = f"<td><code>{_e(v['module_sha256'][:16])}…</code></td>"
        out.append(_row(_fact(f"rulesets[{i}].id", v["id"]), sha,
                        _td(_step_text(v["proposed"])), approved, f"<td>{acts}</td>", _td(eyes)))
    out.append("</table>")
    out.append(_stated(doc["stated"]))
    out.append("</section>")
    return "".join(out)


def render_report(manifest: dict[str, Any], stats: ReportStats, purge_reasons: dict[int, str], *,
                  case: CaseReport | None = None, compliance: dict[str, Any] | None = None) -> bytes:
    """The report page for a bundle whose manifest (without ``files``) is ``manifest`` (and, for a
    bundle cut for one case, that case as the case check derived it)."""
    c, cp, f = manifest["counts"], manifest["checkpoint"], manifest["filters"]
    out: list[str] = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
                      f"<title>sealtrail export {_e(manifest['bundle_id'])}</title><style>{_CSS}</style>"
                      "</head><body>",
                      f"<h1>sealtrail export bundle</h1><p>Bundle <code>{_e(manifest['bundle_id'])}</code>, "
                      f"created {_e(manifest['created_at'])} by {_e(manifest['creator']['subject'])}, "
                      f"from the log <code>{_e(manifest['log']['origin'])}</code>.</p>",
                      "<h2>Selection</h2><table>"]
    if f is None:
        out.append(f"<tr><th>case</th><td>{_e(manifest['case']['case_id'])}</td></tr>")
    else:
        for k in ("from", "to", "account", "decision", "rule"):
            out.append(f"<tr><th>{k}</th><td>{_e('-' if f[k] is None else f[k])}</td></tr>")
    out.append("</table>")
    if case is not None:
        out.append(_case(case))
    out.append("<h2>Counts</h2><table>")
    case_counts = ("case_events", "policies", "holds") if manifest.get("case") else ()
    for k in ("decisions", "annotations", "context", *case_counts, "records", "payloads_present",
              "payloads_purged"):
        out.append(f'<tr><th>{k}</th><td class="n" data-count="{k}">{c[k]}</td></tr>')
    out.append("</table><h3>By outcome</h3><table>")
    for o in OUTCOMES:
        out.append(f'<tr><th>{o}</th><td class="n" data-outcome="{o}">{stats.by_decision[o]}</td></tr>')
    out.append("</table><h3>By rule (decisions on which it fired)</h3><table>")
    for rule, n in sorted(stats.by_rule.items(), key=lambda kv: (-kv[1], kv[0])):
        out.append(f'<tr><th>{_e(rule)}</th><td class="n" data-rule="{_e(rule)}">{n}</td></tr>')
    out.append("</table><h2>Timeline</h2>" + _timeline(stats.by_day))
    shown = len(stats.rows)
    out.append(f'<h2>Decisions</h2><p data-rows-shown="{shown}">')
    out.append(f"All {shown} decisions." if shown == stats.decisions else
               f"The first {shown} of {stats.decisions} decisions (by seq); every decision is in "
               "<code>records.csv</code> and <code>records.jsonl</code>.")
    out.append("</p><table><tr><th>seq</th><th>trace id</th><th>recorded at</th><th>decision</th>"
               "<th>score</th><th>fired rules and reasons</th><th>fail-safe</th><th>principal</th>"
               "<th>notes</th></tr>")
    for seq, tid, at, dec, score, fired, fail, subject, fp, notes in stats.rows:
        why = "<br>".join(f"<b>{_e(i)}</b>: {_e(r)}" for i, r in fired) or "-"
        sc = "-" if score is None else f"{score:.4f}"
        who = _e(subject) + (f"<br><code>{_e(fp[:16])}…</code>" if fp else " (local)")
        out.append(f'<tr data-seq="{seq}"><td class="n">{seq}</td><td><code>{_e(tid)}</code></td>'
                   f"<td>{_e(at)}</td><td>{_e(dec)}</td><td class=\"n\">{sc}</td><td>{why}</td>"
                   f"<td>{_e(fail or '-')}</td><td>{who}</td><td class=\"n\">{notes}</td></tr>")
    out.append("</table><h2>Purged payloads</h2>")
    if not stats.purged_total:
        out.append("<p>None: every raw message of these decisions is in <code>payloads.jsonl</code>.</p>")
    else:
        out.append(f"<p>{stats.purged_total} raw message(s) were purged (retention or an erasure order); "
                   "their SHA-256 stays sealed in the records, so every proof still holds.</p><table>"
                   "<tr><th>payload SHA-256</th><th>purge record seq</th><th>reason</th></tr>")
        for sha, pseq in stats.purged:
            out.append(f"<tr><td><code>{_e(sha)}</code></td><td class=\"n\">{pseq}</td>"
                       f"<td>{_e(purge_reasons.get(pseq, ''))}</td></tr>")
        out.append("</table>")
        if stats.purged_total > len(stats.purged):
            out.append(f"<p>First {len(stats.purged)} shown; all are in <code>payloads.jsonl</code>.</p>")
    if compliance is not None:
        out.append(_compliance(compliance))
    out.append(f"<h2>How to verify</h2><p>The records are proved against the signed checkpoint of size "
               f"{cp['size']} (root <code>{_e(cp['root'])}</code>). Run <code>sealtrail export verify "
               "BUNDLE.zip --trusted-key VKEY</code> with the bank's verifier key obtained out of band, "
               "or follow <code>VERIFY.md</code>. This page is covered by the manifest's file hashes "
               "but proves nothing by itself.</p></body></html>\n")
    return "".join(out).encode()
