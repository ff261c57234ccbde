"""``python -m inference.precision_bounds [--model DIR] [--dry-run]``: measure how far each precision
scores from the reference over a model card's evaluation sets, and write it into the card.

The evaluation sets are those ``sealtrail model train`` evaluates the model on (``inference.train``:
held-out seed + 1, evasion variants seed + 2, the held-out populations drawn from seed + 1), made
again from the card's own training settings; the figures go under the card's ``score_precision``
(``inference.precision.card_section``), everything else in the card stays as it was. Prints the
section as JSON. Exit 0; 1 when the model directory does not open.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from inference.errors import ModelError
from inference.model import CARD_NAME, ModelFiles, load_npz
from inference.precision import SECTION, card_section
from inference.simulate import simulate
from inference.train import STATED_WHEN_SET, TrainConfig, build_rows, card_json, evaluation_configs

__all__ = ["evaluation_sets", "main", "train_config"]


def train_config(card: Mapping[str, Any]) -> TrainConfig:
    """The training settings a card states (its ``training``), as ``TrainConfig``."""
    training = card.get("training")
    if not isinstance(training, Mapping):
        raise ModelError("the card states no training settings")
    given = {f.name: training[f.name] for f in dataclasses.fields(TrainConfig) if f.name in training}
    if isinstance(given.get("hidden"), list):
        given["hidden"] = tuple(given["hidden"])
    if isinstance(given.get("populations"), list):  # the card lists the drawn populations by that key
        given["populations"] = len(given["populations"])
    # A setting a card does not state had the value it had before the setting existed.
    given = {**STATED_WHEN_SET, **given}
    given["typologies"] = tuple(given["typologies"])
    return TrainConfig(**given)


def evaluation_sets(cfg: TrainConfig) -> list[tuple[str, npt.NDArray[np.float64]]]:
    """The feature rows of each evaluation set of ``cfg``, the held-out populations as one."""
    sets: dict[str, list[npt.NDArray[np.float64]]] = {}
    for name, sim in evaluation_configs(cfg):
        sets.setdefault(name, []).append(build_rows(simulate(sim))[0])
    return [(name, np.vstack(parts)) for name, parts in sets.items()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inference.precision_bounds", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="model directory (default: the shipped one)")
    parser.add_argument("--dry-run", action="store_true", help="print the section, leave the card as it is")
    args = parser.parse_args(argv)
    try:
        files = ModelFiles.open(args.model)
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    model = load_npz(files.weights_path.read_bytes())
    section = card_section(model, evaluation_sets(train_config(files.card)), files.onnx_path.read_bytes())
    if not args.dry_run:
        (files.directory / CARD_NAME).write_bytes(card_json({**files.card, SECTION: section}))
    sys.stdout.write(orjson.dumps(section, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
