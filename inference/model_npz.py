"""The weights file of the risk model: ``MlpModel`` to and from deterministic ``.npz`` bytes.

The file's SHA-256 is the model's identity in every decision record, so its bytes must depend on
the model only: the zip is written field by field (fixed times, no compression), and reading it
refuses pickles, oversized or unexpected entries and a foreign feature schema with a
``ModelError`` that names the problem. This is storage, kept apart from the maths in
``inference.model`` (which re-exports the public names here) so that neither the forward pass nor
the ONNX export has to read past a zip writer.
"""

from __future__ import annotations

import hashlib
import io
import struct
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inference.errors import ModelError
from inference.model import FORMAT, MlpModel
from inference.schema import FEATURE_NAMES, FEATURE_SCHEMA

__all__ = ["load_npz", "model_npz_bytes", "save_npz", "sha256_file", "sha256_hex"]

MAX_ENTRY_BYTES = 64 << 20  # a weights file is kilobytes; refuse anything that inflates past this
F32 = np.dtype("<f4")  # every float array in the file: little-endian float32


def sha256_hex(data: bytes) -> str:
    """Lower-case hex SHA-256, the form records carry."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """SHA-256 of a file's bytes: for a weights file, the model's identity."""
    return sha256_hex(Path(path).read_bytes())


def _entries(model: MlpModel) -> list[tuple[str, np.ndarray[Any, Any]]]:
    names = model.feature_names
    out: list[tuple[str, np.ndarray[Any, Any]]] = [
        ("format", np.array(FORMAT, dtype=f"<U{len(FORMAT)}")),
        ("feature_schema", np.array(model.feature_schema, dtype=f"<U{len(model.feature_schema)}")),
        ("feature_names", np.array(names, dtype=f"<U{max(map(len, names))}")),
        ("log_mask", model.log_mask.astype("|b1")),
        ("mean", model.mean.astype(F32)),
        ("scale", model.scale.astype(F32)),
    ]
    for i, (w, b) in enumerate(model.layers):
        out += [(f"W{i}", w.astype(F32)), (f"b{i}", b.astype(F32))]
    return out


_DOS_DATE, _DOS_TIME = (1 << 5) | 1, 0  # 1980-01-01 00:00:00, the earliest a zip can say
_MADE_BY, _NEEDED = (3 << 8) | 20, 20  # Unix, zip 2.0
_EXT_ATTR = 0o100644 << 16


def _zip_stored(files: Sequence[tuple[str, bytes]]) -> bytes:
    """A zip of uncompressed entries, written field by field so its bytes never vary."""
    body, central = bytearray(), bytearray()
    for name, data in files:
        raw, crc, size, offset = name.encode("ascii"), zlib.crc32(data), len(data), len(body)
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, _NEEDED, 0, 0, _DOS_TIME, _DOS_DATE,
                            crc, size, size, len(raw), 0) + raw + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, _MADE_BY, _NEEDED, 0, 0, _DOS_TIME,
                               _DOS_DATE, crc, size, size, len(raw), 0, 0, 0, 0, _EXT_ATTR, offset) + raw
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(files), len(files), len(central), len(body), 0)
    return bytes(body + central + end)


def model_npz_bytes(model: MlpModel) -> bytes:
    """The weights file's bytes: an ``.npz`` (np.load reads it) whose bytes depend on the model only."""
    files = []
    for name, arr in _entries(model):
        buf = io.BytesIO()
        np.lib.format.write_array(buf, arr, version=(1, 0), allow_pickle=False)
        files.append((f"{name}.npy", buf.getvalue()))
    return _zip_stored(files)


def save_npz(model: MlpModel, path: str | Path) -> str:
    """Write the weights file; returns its SHA-256 (the model's identity)."""
    data = model_npz_bytes(model)
    Path(path).write_bytes(data)
    return sha256_hex(data)


def _read_arrays(data: bytes) -> dict[str, np.ndarray[Any, Any]]:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise ModelError(f"weights file is not a readable npz (zip): {e}") from None
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    for info in infos:
        key = info.filename.removesuffix(".npy")
        if key == info.filename or key in arrays:
            raise ModelError(f"weights file holds an unexpected or repeated entry {info.filename!r}")
        if info.file_size > MAX_ENTRY_BYTES:
            raise ModelError(f"array {key!r} is implausibly large ({info.file_size} bytes)")
        try:
            arrays[key] = np.lib.format.read_array(io.BytesIO(zf.read(info)), allow_pickle=False)
        except ValueError as e:
            if "allow_pickle" in str(e):
                raise ModelError(f"array {key!r} is an object (pickle) array; refused") from None
            raise ModelError(f"array {key!r} is not a readable .npy: {e}") from None
        # zipfile raises NotImplementedError for a compression method it does not support
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError) as e:
            raise ModelError(f"array {key!r} is not a readable .npy: {e}") from None
    return arrays


def _text(arrays: dict[str, np.ndarray[Any, Any]], name: str, ndim: int) -> np.ndarray[Any, Any]:
    arr = arrays[name]
    if arr.dtype.kind != "U" or arr.ndim != ndim:
        raise ModelError(f"array {name!r} must be a {ndim}-d unicode array; got {arr.dtype} {arr.shape}")
    return arr


def _typed(arrays: dict[str, np.ndarray[Any, Any]], name: str, dtype: np.dtype[Any]) -> Any:
    arr = arrays[name]
    if arr.dtype != dtype:
        raise ModelError(f"array {name!r} must be {dtype} ({dtype.str}); got {arr.dtype} ({arr.dtype.str})")
    return arr.astype(dtype.newbyteorder("="))


def load_npz(source: str | Path | bytes, *, expect_schema: bool = True) -> MlpModel:
    """Parse a weights file (path or bytes); ModelError names whatever is missing or malformed.

    With ``expect_schema`` (the default) the model must read this build's feature schema.
    """
    if isinstance(source, bytes):
        data = source
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as e:
            raise ModelError(f"cannot read weights file {source}: {e.strerror or e}") from None
    arrays = _read_arrays(data)
    if "format" not in arrays:
        raise ModelError("missing array 'format' (not a sealtrail model file)")
    fmt = str(_text(arrays, "format", 0)[()])
    if fmt != FORMAT:
        raise ModelError(f"unknown model format {fmt!r}; this build reads {FORMAT!r}")
    n_layers = 0
    while f"W{n_layers}" in arrays:
        n_layers += 1
    layer_names = [f"{p}{i}" for i in range(n_layers) for p in ("W", "b")]
    required = ["format", "feature_schema", "feature_names", "log_mask", "mean", "scale", *layer_names]
    for name in required:
        if name not in arrays:
            raise ModelError(f"missing array {name!r}")
    if extra := sorted(set(arrays) - set(required)):
        raise ModelError(f"unexpected array(s) {', '.join(map(repr, extra))}")
    model = MlpModel(
        feature_schema=str(_text(arrays, "feature_schema", 0)[()]),
        feature_names=tuple(str(s) for s in _text(arrays, "feature_names", 1)),
        log_mask=_typed(arrays, "log_mask", np.dtype("|b1")),
        mean=_typed(arrays, "mean", F32),
        scale=_typed(arrays, "scale", F32),
        layers=tuple((_typed(arrays, f"W{i}", F32), _typed(arrays, f"b{i}", F32)) for i in range(n_layers)),
    )
    if expect_schema:
        _check_schema(model)
    return model


def _check_schema(model: MlpModel) -> None:
    if model.feature_schema != FEATURE_SCHEMA:
        raise ModelError(f"model reads feature schema {model.feature_schema!r}; "
                         f"this build computes {FEATURE_SCHEMA!r}")
    if model.feature_names != FEATURE_NAMES:
        if model.n_features != len(FEATURE_NAMES):
            raise ModelError(f"model reads {model.n_features} features; "
                             f"schema {FEATURE_SCHEMA} has {len(FEATURE_NAMES)}")
        i = next(i for i, (a, b) in enumerate(zip(model.feature_names, FEATURE_NAMES, strict=True)) if a != b)
        raise ModelError(f"feature {i} is {model.feature_names[i]!r} in the model, "
                         f"{FEATURE_NAMES[i]!r} in schema {FEATURE_SCHEMA}")
