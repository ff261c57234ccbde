"""``sealtrail features FILE``, ``sealtrail model train`` and ``sealtrail model card``.

``inference`` (numpy, the feature tables, the model) is imported in the command bodies so that
``sealtrail --help`` does not load it.
"""

from __future__ import annotations

from datetime import UTC, datetime, time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from api.cli.common import (
    FORMAT_HELP,
    FORMATS,
    CliError,
    JsonOpt,
    emit,
    emit_failed,
    err,
    fail,
    out,
    parse_time,
    read_message_file,
)

__all__ = ["features", "model_app"]

model_app = typer.Typer(no_args_is_help=True, help="Train the risk model and show its card.")


def _parse_at(text: str | None) -> datetime | None:
    """``--at`` as the console reads times (ISO 8601; without an offset UTC); exit 2 if no time."""
    from audit.errors import QueryError

    try:
        at = parse_time(text, "--at")
    except QueryError as exc:
        raise CliError(f"--at: {exc.message}", code=2, error="usage", field="--at") from None
    return None if at is None else at.astimezone(UTC)


def features(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    fmt: Annotated[str, typer.Option("--format",
                                     help=FORMAT_HELP)] = "auto",
    at: Annotated[str | None, typer.Option(
        "--at", help="event time of every message (ISO 8601; without an offset: UTC)",
        show_default="value date 00:00 UTC")] = None,
    state: Annotated[Path | None, typer.Option(
        "--state", help="feature state file (velocity windows and transaction graph): read before, "
                        "written back after (created if missing)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Feature rows (this build's feature schema) per message, in file order; exit 1 if any is refused."""
    from inference.errors import InferenceError
    from inference.features import FeatureExtractor, features_sha256, row_dict
    from inference.messages import MessageError, Transaction, parse_messages
    from inference.schema import EXTRACTED_SCHEMA
    from inference.state_store import load_features_state, save_features_state

    if fmt not in FORMATS:
        raise CliError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}", code=2, error="usage",
                       field="--format")
    when = _parse_at(at)
    results = parse_messages(read_message_file(file), fmt)  # type: ignore[arg-type]
    txs = [r for r in results if isinstance(r, Transaction)]
    refused = [r for r in results if isinstance(r, MessageError)]
    times = [when or datetime.combine(t.value_date, time(0), tzinfo=UTC) for t in txs]
    try:
        extractor = load_features_state(state) if state is not None else FeatureExtractor()
        rows = extractor.extract(txs, times)
        if state is not None:
            save_features_state(state, extractor)
    except InferenceError as exc:
        fail(exc, code=2)
    items: list[dict[str, Any]] = [
        {"reference": t.reference, "transaction_sha256": t.sha256, "at": a.isoformat(),
         "features": row_dict(r), "features_sha256": features_sha256(r)}
        for t, a, r in zip(txs, times, rows, strict=True)]
    doc: dict[str, Any] = {
        "ok": not refused, "feature_schema": EXTRACTED_SCHEMA,
        "tables": extractor.tables.ids, "rows": items,
        "errors": [{"message": e.message, "field": e.field, "reason": e.reason} for e in refused],
    }
    if refused:
        doc |= {"error": "message_refused", "message": f"{len(refused)} of {len(results)} message(s) refused"}

    def human() -> None:
        for item in items:
            table = Table(title=f"{item['reference']}  at {item['at']}", show_header=False)
            for name, value in item["features"].items():
                table.add_row(name, "missing (NaN)" if value is None else f"{value:g}")
            out.print(table)
            out.print(f"features_sha256 {item['features_sha256']}", markup=False)
        for e in refused:
            err.print(f"refused: {e}", markup=False)
        out.print(f"{len(items)} rows, {len(refused)} refused", markup=False)

    if refused:
        emit_failed(doc, as_json, human)
    emit(doc, as_json, human)


@model_app.command("train")
def train_cmd(
    seed: Annotated[int, typer.Option("--seed", help="simulator and initialisation seed")] = 7,
    out_dir: Annotated[Path, typer.Option(
        "--out", help="directory for weights.npz, model.onnx, card.json")] = Path("aml_mlp"),
    as_json: JsonOpt = False,
) -> None:
    """Train the risk model from the simulator; with the shipped seed it reproduces the shipped files."""
    from inference.errors import InferenceError
    from inference.model import ModelFiles
    from inference.train import TrainConfig, train

    result = train(TrainConfig(seed=seed), out_dir)
    try:
        shipped = ModelFiles.open().model_sha256
    except InferenceError:
        shipped = None
    same = shipped == result.card["model_sha256"]
    doc = {"out": str(out_dir), "files": result.files, "model_sha256": result.card["model_sha256"],
           "matches_shipped_model": same, "metrics": result.card["metrics"]}

    def human() -> None:
        _print_card(result.card)
        out.print(f"wrote {out_dir}/: " + ", ".join(f"{k} {v[:16]}…" for k, v in result.files.items()),
                  markup=False)
        out.print("identical to the shipped model" if same else "differs from the shipped model "
                  f"({shipped or 'none shipped'})", markup=False)

    emit(doc, as_json, human)


@model_app.command("card")
def card_cmd(
    model: Annotated[Path | None, typer.Option("--model", help="model directory (default: shipped)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The model card: features, training, metrics and file hashes (checked against the files)."""
    from inference.errors import InferenceError
    from inference.model import ModelFiles

    try:
        files = ModelFiles.open(model)
    except InferenceError as exc:
        fail(exc, code=1)
    evaluation = files.evaluation()
    emit({**files.card, "directory": str(files.directory), "evaluation": evaluation}, as_json,
         lambda: _print_card(files.card, evaluation))


def _place_rows(table: Table, place: dict[str, Any] | None) -> None:
    """The first payments of patterns apart from the later ones, and the patterns seen at all (cards
    of models trained before these figures lack them)."""
    if not isinstance(place, dict):
        return
    for key, label in (("first_payment", "first payment of a pattern"), ("later_payments", "later payments")):
        m = place[key]
        if m["detected"] is not None:
            table.add_row(f"  {label}", f"{m['detected']:.3f} of {m['n']:,}")
    pat = place["patterns"]
    if pat["detected"] is not None:
        table.add_row("  patterns with a payment detected", f"{pat['detected']:.3f} of {pat['n']:,}")


def _print_card(card: dict[str, Any], evaluation: dict[str, Any] | None = None) -> None:
    held, ev = card["metrics"]["heldout"], card["metrics"]["evasion"]
    table = Table(title=f"model {card['name']}  {card['model_sha256']}", show_header=False)
    table.add_row("feature schema", f"{card['feature_schema']} ({len(card['features'])} features)")
    table.add_row("architecture", " -> ".join(map(str, card["architecture"]["sizes"])) + " (ReLU, sigmoid)")
    tr = card["training"]
    table.add_row("training", f"seed {tr['seed']}, {tr['rows']:,} rows ({tr['positives']:,} laundering), "
                  f"{tr['epochs']} epochs, numpy {tr['numpy']}")
    if "typologies" in tr:  # stated only when not the simulator's default set
        table.add_row("  typologies", ", ".join(tr["typologies"]))
    if tr.get("payroll_salaries"):
        table.add_row("  salaries passed on", "paid by payroll runs")
    table.add_row("held-out ROC-AUC", f"{held['roc_auc']:.4f} on {held['rows']:,} rows")
    table.add_row("recall at 1% FPR",
                  f"{held['recall_at_1pct_fpr']:.4f} (score > {held['threshold_at_1pct_fpr']:.4f})")
    for kind, m in held["per_typology_recall_at_1pct_fpr"].items():
        table.add_row(f"  {kind}", f"{m['detected']:.3f} of {m['n']:,}")
    _place_rows(table, held.get("by_place_at_1pct_fpr"))
    table.add_row("evasion variants detected", f"{ev['detection_rate_at_1pct_fpr']:.4f} at 1% FPR, "
                  f"{ev['detection_rate_score_ge_0_5']:.4f} at score >= 0.5")
    for kind, m in ev["per_typology_at_1pct_fpr"].items():
        table.add_row(f"  {kind}", f"{m['detected']:.3f} of {m['n']:,}")
    _place_rows(table, ev.get("by_place_at_1pct_fpr"))
    for pop in card["metrics"].get("heldout_populations", []):
        table.add_row(f"  population x{pop['amount_scale']:g}{' evasion' if pop['evasion'] else ''}",
                      f"ROC-AUC {pop['roc_auc']:.3f}, recall {pop['recall_at_1pct_fpr']:.3f} "
                      f"({pop['n_accounts']:,} accounts, {pop['days']} days)")
    if card["architecture"].get("not_read"):
        table.add_row("not read (scale 0)", ", ".join(card["architecture"]["not_read"]))
    for name, digest in card["files"].items():
        table.add_row(name, digest)
    out.print(table)
    gov = card.get("governance")
    if isinstance(gov, dict):
        for key in ("intended_use", "training_data", "evaluation"):
            if gov.get(key):
                out.print(f"[bold]{key.replace('_', ' ')}[/bold]: {gov[key]}")
        for limit in gov.get("limits", []):
            out.print(f"  limit: {limit}", markup=False)
    if evaluation is None:
        out.print("independent evaluation: none for this model (python -m bench.heldout_eval --evaluation)")
        return
    ev_table = Table(title=f"independent evaluation {evaluation['date']}: {evaluation['command']} "
                           f"(pack {evaluation['rule_pack']})")
    for col in ("population", "model ROC-AUC", "recall at 1 %", "best baseline ROC-AUC",
                "pack: normal accounts"):
        ev_table.add_column(col)
    for name, pop in evaluation["populations"].items():
        acc = pop["account_level"]
        best = max((v["roc_auc"] or 0.0) for k, v in acc.items() if k != "model")
        ev_table.add_row(name, f"{acc['model']['roc_auc']:.3f}", f"{acc['model']['recall_at_1pct']:.3f}",
                         f"{best:.3f}", f"{pop['rule_pack']['normal_accounts_alerted']:.1%}")
    out.print(ev_table)

