"""A model directory on disk: ``weights.npz`` + ``model.onnx`` + ``card.json``, checked together.

The model's identity (the ``model_sha256`` every decision record carries) is the SHA-256 of
``weights.npz``; the card names it and the SHA-256 of the ONNX export. ``ModelFiles.open``
refuses a directory whose files do not match its card, so a swapped file cannot score under
the card's name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from inference.errors import ModelError

__all__ = ["CARD_FORMAT", "CARD_NAME", "ONNX_NAME", "SHIPPED_MODEL", "WEIGHTS_NAME", "ModelFiles",
           "shipped_model_dir"]

WEIGHTS_NAME = "weights.npz"
ONNX_NAME = "model.onnx"
CARD_NAME = "card.json"
CARD_FORMAT = "sealtrail.model-card/1"
SHIPPED_MODEL = "aml_mlp"


def shipped_model_dir() -> Path:
    """The directory of the model shipped with sealtrail (trained by ``sealtrail model train``)."""
    return Path(str(resources.files("inference") / "models" / SHIPPED_MODEL))


@dataclass(frozen=True)
class ModelFiles:
    directory: Path
    card: dict[str, Any]

    @property
    def weights_path(self) -> Path:
        return self.directory / WEIGHTS_NAME

    @property
    def onnx_path(self) -> Path:
        return self.directory / ONNX_NAME

    @property
    def model_sha256(self) -> str:
        return str(self.card["model_sha256"])

    @classmethod
    def open(cls, directory: Path | None = None) -> ModelFiles:
        """The model in ``directory`` (default: the shipped one), its files checked against its card."""
        directory = directory if directory is not None else shipped_model_dir()
        try:
            card = orjson.loads((directory / CARD_NAME).read_bytes())
        except FileNotFoundError:
            raise ModelError(f"no model card {CARD_NAME} in {directory}") from None
        except orjson.JSONDecodeError as exc:
            raise ModelError(f"{directory / CARD_NAME} is not JSON: {exc}") from None
        if not isinstance(card, dict) or card.get("format") != CARD_FORMAT:
            raise ModelError(f"{directory / CARD_NAME} is not a {CARD_FORMAT} card")
        files = card.get("files")
        if not isinstance(files, dict) or set(files) != {WEIGHTS_NAME, ONNX_NAME}:
            raise ModelError(f"{directory / CARD_NAME}: 'files' must name {WEIGHTS_NAME} and {ONNX_NAME}")
        for name, want in sorted(files.items()):
            try:
                got = hashlib.sha256((directory / name).read_bytes()).hexdigest()
            except FileNotFoundError:
                raise ModelError(f"model file {directory / name} is missing") from None
            if got != want:
                raise ModelError(f"model file {directory / name} has SHA-256 {got}, its card says {want}")
        if card.get("model_sha256") != files[WEIGHTS_NAME]:
            raise ModelError(f"{directory / CARD_NAME}: model_sha256 is not the SHA-256 of {WEIGHTS_NAME}")
        return cls(directory, card)
