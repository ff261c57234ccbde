"""``sealtrail compliance report --from T1 --to T2``: the facts an examiner checks against the
compliance map for a period (docs/cli.md, "compliance report").

The facts derived from sealed records come from ``audit.compliance`` (the same function the
exporter and ``export verify`` use); the retention setting and the witnesses configured come from
this process's settings and are printed as stated, not proven.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from api.cli.common import CliError, DbOpt, JsonOpt, KeysOpt, emit, engine, out, parse_time, settings

__all__ = ["compliance_app"]

compliance_app = typer.Typer(no_args_is_help=True, help="Compliance facts for examiners.")


def _human(doc: dict[str, Any]) -> None:
    f, s = doc["facts"], doc["stated"]
    p = f["period"]
    say = out.print
    say(f"compliance facts for [{p['from']}, {p['to']}) (derived from sealed records)", markup=False)
    d = f["decisions"]
    say(f"decisions: {d['total']} (" + ", ".join(f"{k} {v}" for k, v in d["by_decision"].items()) + ")",
        markup=False)
    fs = d["fail_safe"]
    say(f"fail-safe HOLDs: {fs['total']}" + "".join(f"; {k}: {v}" for k, v in fs["by_reason"].items()),
        markup=False)
    r = f["refusals"]
    say(f"refusals: {r['total']}" + "".join(f"; {k}: {v}" for k, v in r["by_kind"].items()), markup=False)
    k = f["keys"]
    say(f"signing keys: {len(k['history'])} in history, active at the end {k['active_at_end']}", markup=False)
    for rot in k["rotations"]:
        say(f"  rotation at seq {rot['seq']} ({rot['recorded_at']}): {rot['old_vkey']} -> {rot['new_vkey']}",
            markup=False)
    for rev in k["revocations"]:
        say(f"  revocation at seq {rev['seq']} ({rev['recorded_at']}): {rev['revoked_vkey']} from size "
            f"{rev['from_size']}: {rev['reason']}", markup=False)
    h = f["legal_holds"]
    say(f"legal holds in force: {len(h['in_force'])} (placed in the period {h['placed']}, released "
        f"{h['released']})", markup=False)
    for hold in h["in_force"]:
        released = "" if hold["released_seq"] is None else f", released at seq {hold['released_seq']}"
        say(f"  {hold['hold_id']}: seqs {hold['seq_from']}..{hold['seq_to']} ({hold['reason']}){released}",
            markup=False)
    pu = f["purges"]
    say(f"payload purges: {pu['records']} record(s), {pu['payloads']} payload(s)", markup=False)
    say(f"rulesets: {len(f['rulesets'])}", markup=False)
    for v in f["rulesets"]:
        a = v["approved"]
        approval = "bootstrapped by the operator (no four-eyes approval)" if v["bootstrapped"] else (
            "not approved" if a is None else f"approved by {a['subject']} at {a['recorded_at']}")
        say(f"  {v['id']}: proposed by {v['proposed']['subject']} at {v['proposed']['recorded_at']}; "
            f"{approval}{'; active at the end' if v['active_at_end'] else ''}", markup=False)
    say("stated, not proven (read from tables and settings that are not sealed):", markup=False)
    cp = s["checkpoints"]
    newest = cp["newest"]
    say(f"  checkpoints signed in the period: {cp['signed_in_period']}; newest: "
        + ("none" if newest is None else f"size {newest['size']} at {newest['created_at']}")
        + f"; entries not covered: {cp['entries_not_covered']}", markup=False)
    ret = s["retention"]
    say(f"  payload retention: {'-' if ret is None else str(ret['payload_retention_days']) + ' days'}",
        markup=False)
    w = s["witnesses"]
    configured = "none configured" if w["configured"] is None else f"{len(w['configured'])} configured"
    say(f"  witnesses: {configured}; cosigned in the period: "
        + (", ".join(f"{vk.split('+')[0]} ({x['cosignatures']})" for vk, x in w["cosigned_in_period"].items())
           or "none"), markup=False)


@compliance_app.command("report")
def compliance_report(
    start: Annotated[str, typer.Option("--from", help="period start (ISO 8601; no offset: UTC)")],
    end: Annotated[str, typer.Option("--to", help="period end, exclusive")],
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The period's retention, legal holds, key history, rulesets and approvals, refusals and fail-safe
    outcomes, checkpoint coverage and witnesses."""
    from audit.compliance.facts import Period
    from audit.compliance.store import compliance_report as read_report
    from ledger.records import format_time

    t1, t2 = parse_time(start, "from"), parse_time(end, "to")
    assert t1 is not None and t2 is not None
    if t2 <= t1:
        raise CliError(f"--to ({end}) must be after --from ({start})", error="QueryError", field="to")
    s = settings(db, keys)
    witnesses: list[str] | None = None
    if s.witnesses_file is not None:
        from api.witness import load_witness_list

        witnesses = [w.verifier.vkey for w in load_witness_list(s.witnesses_file).endpoints]
    eng = engine(db, keys)
    try:
        report = read_report(eng, Period(format_time(t1), format_time(t2)), retention_days=s.retention_days,
                             witnesses_configured=witnesses)
    finally:
        eng.dispose()
    doc = report.to_json()
    emit(doc, as_json, lambda: _human(doc))
