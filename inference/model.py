"""The risk model: a small MLP over a feature row, its maths and its file forms, which must agree.

One model, three forms: the frozen ``MlpModel`` with ``forward`` (numpy, the reference the replay
check trusts); the weights file (``.npz`` with byte-for-byte deterministic content; its SHA-256 is
the model's identity in every decision record); and an ONNX graph that computes the same function
with operators TensorRT and onnxruntime both support. A model directory (``ModelFiles``) holds the
two files and a card naming both hashes. They are one module because they are one contract
(format ``sealtrail.mlp/1``): the export embeds the weights file's hash, the card both files'.

The function, for rows ``x`` (float64 in, float64 scores out)::

    x = float32(x); x = 0 where NaN (a missing feature)
    x = log(relu(x) + 1) on the log-masked columns (heavy-tailed counts and sums)
    z = clip((x - mean) * scale, -Z_CLIP, Z_CLIP)
    h = relu(h @ W + b) for the hidden layers; score = sigmoid(h @ W_last + b_last)

The clip is part of format ``sealtrail.mlp/1``: it keeps +/-inf and absurd values finite (no
NaN reaches a score), bounds float32 rounding so that backends agree within 1e-5 even on hostile
rows (with +/-1000, onnxruntime and numpy drifted 2.6e-5 apart), and keeps FP16 activations in range.

The weights file's bytes depend on the model only: the zip is written field by field (fixed
times, no compression), and reading it refuses pickles, oversized or unexpected entries and a
foreign feature schema with a ``ModelError`` that names the problem. The ONNX export uses opset 17
and fixed producer fields (no release numbers), so its bytes too depend on the model only; ``onnx``
is imported only when an export is asked for. ``ModelFiles.open`` refuses a directory whose files
do not match its card, so a swapped file cannot score under the card's name.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import orjson

from inference.errors import ModelError
from inference.schema import (
    FEATURE_SCHEMA,
    FEATURE_SCHEMAS,
    MODEL_SCHEMA,
    UnknownFeatureSchemaError,
    feature_names,
    model_columns,
)

if TYPE_CHECKING:  # onnx itself is imported only when an export is asked for
    import onnx

__all__ = [
    "CARD_FORMAT", "CARD_NAME", "FORMAT", "INPUT_NAME", "ONNX_NAME", "OUTPUT_NAME", "SHIPPED_MODEL",
    "WEIGHTS_NAME", "Z_CLIP", "MlpModel", "ModelFiles", "check_onnx_matches", "check_rows", "dense",
    "forward", "load_npz", "model_npz_bytes", "preprocess", "save_npz", "sha256_file", "sha256_hex",
    "shipped_model_dir", "to_onnx_bytes",
]

FORMAT = "sealtrail.mlp/1"
Z_CLIP = 100.0  # standardised values beyond +/-100 standard deviations are clipped (format constant)
MODEL_FEATURE_NAMES = feature_names(MODEL_SCHEMA)  # what a new model reads unless told otherwise

Floats = npt.NDArray[np.float32]
Layer = tuple[Floats, Floats]


# ---------------------------------------------------------------- the model

def _frozen(arr: np.ndarray[Any, Any]) -> Any:
    """A private, read-only, C-contiguous copy (the model is immutable, its arrays too)."""
    out = np.array(arr, copy=True, order="C")
    out.setflags(write=False)
    return out


def _check_float32(name: str, arr: object, shape: tuple[int, ...]) -> None:
    if not isinstance(arr, np.ndarray) or arr.dtype != np.float32:
        raise ModelError(f"{name} must be a float32 array; got {getattr(arr, 'dtype', type(arr).__name__)}")
    if arr.shape != shape:
        raise ModelError(f"{name} must have shape {shape}; got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ModelError(f"{name} holds NaN or infinite values")


@dataclass(frozen=True, eq=False)
class MlpModel:
    """A validated MLP: hidden layers ReLU, one sigmoid output; weights float32 ``W (in, out)``."""

    feature_schema: str
    feature_names: tuple[str, ...]
    log_mask: npt.NDArray[np.bool_]
    mean: Floats
    scale: Floats
    layers: tuple[Layer, ...]
    _log_cols: npt.NDArray[np.intp] = field(init=False, repr=False)  # derived from log_mask

    def __post_init__(self) -> None:
        n = len(self.feature_names)
        if not self.feature_schema or not isinstance(self.feature_schema, str):
            raise ModelError("feature_schema must be a non-empty string")
        if n == 0 or not all(isinstance(s, str) and s for s in self.feature_names):
            raise ModelError("feature_names must be a non-empty tuple of non-empty strings")
        if len(set(self.feature_names)) != n:
            raise ModelError("feature_names holds a duplicate name")
        lm = self.log_mask
        if not isinstance(lm, np.ndarray) or lm.dtype != np.bool_ or lm.shape != (n,):
            raise ModelError(f"log_mask must be a bool array of shape ({n},) (one per feature); got "
                             f"{getattr(lm, 'dtype', type(lm).__name__)} {getattr(lm, 'shape', '')}")
        _check_float32("mean", self.mean, (n,))
        _check_float32("scale", self.scale, (n,))
        if not (self.scale >= 0).all():  # 0: a column the model does not read
            raise ModelError("scale (1/std) must be positive, or 0 for a column not read, for every feature")
        if not self.layers:
            raise ModelError("a model needs at least one layer")
        width = n
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, tuple) or len(layer) != 2:
                raise ModelError(f"layer {i} must be a (W, b) pair")
            w, b = layer
            if not isinstance(w, np.ndarray) or w.ndim != 2 or w.shape[0] != width or w.shape[1] < 1:
                raise ModelError(f"W{i} must have shape ({width}, out): {width} rows, the width before it; "
                                 f"got {getattr(w, 'shape', type(w).__name__)}")
            width = w.shape[1]
            _check_float32(f"W{i}", w, w.shape)
            _check_float32(f"b{i}", b, (width,))
        if width != 1:
            raise ModelError(f"the last layer must have one output (the score); it has {width}")
        object.__setattr__(self, "feature_names", tuple(self.feature_names))
        for name in ("log_mask", "mean", "scale"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "layers", tuple((_frozen(w), _frozen(b)) for w, b in self.layers))
        object.__setattr__(self, "_log_cols", _frozen(np.flatnonzero(self.log_mask)))

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Layer widths, input first: (60, 64, 32, 1) for the shipped model."""
        return (self.n_features, *(w.shape[1] for w, _ in self.layers))

    @classmethod
    def init(cls, rng: np.random.Generator, sizes: Sequence[int] | None = None,
             feature_names: Sequence[str] = MODEL_FEATURE_NAMES, log_mask: npt.ArrayLike | None = None,
             mean: npt.ArrayLike | None = None, scale: npt.ArrayLike | None = None,
             feature_schema: str = MODEL_SCHEMA) -> MlpModel:
        """A fresh model: He-normal weights drawn from ``rng`` layer by layer, zero biases; ``sizes``
        (input width first) defaults to one feature per input, then 32, 16 and 1."""
        n = len(feature_names)
        sizes = (n, 32, 16, 1) if sizes is None else sizes
        if len(sizes) < 2 or sizes[0] != n or sizes[-1] != 1:
            raise ModelError(f"sizes must run from the feature count {n} to 1; got {tuple(sizes)}")
        layers = tuple(
            ((rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32),
             np.zeros(fan_out, np.float32))
            for fan_in, fan_out in itertools.pairwise(sizes))
        return cls(feature_schema, tuple(feature_names),
                   np.zeros(n, bool) if log_mask is None else np.asarray(log_mask, bool),
                   np.zeros(n, np.float32) if mean is None else np.asarray(mean, np.float32),
                   np.ones(n, np.float32) if scale is None else np.asarray(scale, np.float32),
                   layers)


# ---------------------------------------------------------------- the reference forward pass

def check_rows(rows: npt.ArrayLike, n_features: int) -> np.ndarray[Any, Any]:
    """``rows`` as an (N, n_features) numeric array, or ModelError saying what is wrong."""
    arr = np.asarray(rows)
    if arr.ndim != 2 or arr.shape[1] != n_features:
        raise ModelError(f"feature rows must have shape (N, {n_features}); got {arr.shape}")
    if arr.dtype.kind not in "fiub":
        raise ModelError(f"feature rows must be numeric; got dtype {arr.dtype}")
    return arr


def preprocess(model: MlpModel, rows: npt.ArrayLike) -> Floats:
    """The standardised float32 input ``z`` of the first layer (missing -> 0, log, scale, clip)."""
    with np.errstate(over="ignore", invalid="ignore"):
        z = check_rows(rows, model.n_features).astype(np.float32)
        np.copyto(z, np.float32(0), where=np.isnan(z))
        cols = model._log_cols
        if cols.size:
            sub = z[:, cols]
            np.maximum(sub, np.float32(0), out=sub)
            sub += np.float32(1)
            np.log(sub, out=sub)
            z[:, cols] = sub
        z -= model.mean
        z *= model.scale
        np.clip(z, np.float32(-Z_CLIP), np.float32(Z_CLIP), out=z)
    return z


# OpenBLAS runs a product of m*n*k <= 2**18 on the calling thread. Past that it wakes worker
# threads, which for products this small cost more than they save and, on a 2-core host, busy-wait
# against the caller (batch 1024: p99 went from 0.4 ms to 20 ms). So products go in row blocks.
_GEMM_MNK = 1 << 18


def dense(h: Floats, w: Floats, b: Floats) -> Floats:
    """``h @ w + b`` in row blocks small enough for BLAS to stay on this thread."""
    out = np.empty((h.shape[0], w.shape[1]), np.float32)
    block = max(1, _GEMM_MNK // w.size)
    for i in range(0, h.shape[0], block):
        np.matmul(h[i: i + block], w, out=out[i: i + block])
    out += b
    return out


def forward(model: MlpModel, rows: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Risk scores in [0, 1] for (N, n) feature rows: the numpy reference every backend must match."""
    h = preprocess(model, rows)
    *hidden, (w_last, b_last) = model.layers
    for w, b in hidden:
        h = dense(h, w, b)
        np.maximum(h, np.float32(0), out=h)
    logit = dense(h, w_last, b_last)
    with np.errstate(over="ignore"):  # exp(-logit) -> inf gives the right limit, 0
        np.negative(logit, out=logit)
        np.exp(logit, out=logit)
        logit += np.float32(1)
        np.reciprocal(logit, out=logit)
    return logit[:, 0].astype(np.float64)


# ---------------------------------------------------------------- the weights file (.npz)

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

    With ``expect_schema`` (the default) the model must read a feature schema this build knows,
    whose columns lead this build's rows.
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
    """The model reads a schema this build knows, by that schema's names, and those columns lead
    this build's rows (``inference.schema.model_columns``)."""
    if model.feature_schema not in FEATURE_SCHEMAS:
        raise ModelError(f"model reads feature schema {model.feature_schema!r}; this build computes "
                         f"{FEATURE_SCHEMA!r} (and reads {', '.join(FEATURE_SCHEMAS)})")
    names = feature_names(model.feature_schema)
    if model.feature_names != names:
        if model.n_features != len(names):
            raise ModelError(f"model reads {model.n_features} features; "
                             f"schema {model.feature_schema} has {len(names)}")
        i = next(i for i, (a, b) in enumerate(zip(model.feature_names, names, strict=True)) if a != b)
        raise ModelError(f"feature {i} is {model.feature_names[i]!r} in the model, "
                         f"{names[i]!r} in schema {model.feature_schema}")
    try:
        model_columns(model.feature_names)
    except UnknownFeatureSchemaError as exc:
        raise ModelError(str(exc)) from None


# ---------------------------------------------------------------- the ONNX export

INPUT_NAME, OUTPUT_NAME = "features", "score"
ONNX_OPSET, ONNX_IR_VERSION = 17, 8
ONNX_PRODUCER, ONNX_PRODUCER_VERSION = "sealtrail", FORMAT  # fixed: bytes must not follow releases


def _onnx_model(model: MlpModel) -> onnx.ModelProto:
    from onnx import TensorProto, helper, numpy_helper

    def const(name: str, value: np.ndarray[Any, Any]) -> onnx.TensorProto:
        return numpy_helper.from_array(value, name)

    f32 = np.float32
    inits = [const("zero", np.array(0, f32)), const("one", np.array(1, f32)),
             const("log_mask", model.log_mask.astype(bool)), const("mean", model.mean),
             const("scale", model.scale), const("z_min", np.array(-Z_CLIP, f32)),
             const("z_max", np.array(Z_CLIP, f32))]
    node = helper.make_node
    nodes = [
        node("IsNaN", [INPUT_NAME], ["missing"], name="find_missing"),
        node("Where", ["missing", "zero", INPUT_NAME], ["filled"], name="fill_missing"),
        node("Relu", ["filled"], ["nonneg"], name="log_relu"),
        node("Add", ["nonneg", "one"], ["plus_one"], name="log_plus_one"),
        node("Log", ["plus_one"], ["logged"], name="log"),
        node("Where", ["log_mask", "logged", "filled"], ["transformed"], name="apply_log_mask"),
        node("Sub", ["transformed", "mean"], ["centred"], name="centre"),
        node("Mul", ["centred", "scale"], ["scaled"], name="standardise"),
        node("Clip", ["scaled", "z_min", "z_max"], ["h"], name="clip"),
    ]
    h, last = "h", len(model.layers) - 1
    for i, (w, b) in enumerate(model.layers):
        inits += [const(f"W{i}", w), const(f"b{i}", b)]
        nodes += [node("MatMul", [h, f"W{i}"], [f"matmul{i}"], name=f"matmul{i}"),
                  node("Add", [f"matmul{i}", f"b{i}"], [f"pre{i}"], name=f"bias{i}")]
        h = OUTPUT_NAME if i == last else f"h{i}"
        nodes.append(node("Sigmoid" if i == last else "Relu", [f"pre{i}"], [h], name=f"act{i}"))
    graph = helper.make_graph(
        nodes, "sealtrail_mlp",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["batch", model.n_features])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", 1])],
        initializer=inits)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)],
                                   ir_version=ONNX_IR_VERSION, producer_name=ONNX_PRODUCER,
                                   producer_version=ONNX_PRODUCER_VERSION)
    helper.set_model_props(onnx_model, {
        "sealtrail.format": FORMAT, "sealtrail.feature_schema": model.feature_schema,
        "sealtrail.weights_sha256": sha256_hex(model_npz_bytes(model))})
    return onnx_model


def to_onnx_bytes(model: MlpModel) -> bytes:
    """The model as ONNX (opset 17): input ``features`` [batch, n] float32, output ``score`` [batch, 1].

    Deterministic: the same model gives the same bytes. It names the weights file's SHA-256 in
    its metadata (``sealtrail.weights_sha256``).
    """
    import onnx

    onnx_model = _onnx_model(model)
    onnx.checker.check_model(onnx_model, full_check=True)
    data: bytes = onnx_model.SerializeToString()  # protobuf's stubs say Any
    return data


def check_onnx_matches(model: MlpModel, onnx_bytes: bytes) -> None:
    """Refuse an ONNX file that was not exported from ``model`` (the record names the weights only).

    Equal bytes pass at once; otherwise the parsed graph must equal a fresh export's (so a
    different onnx or protobuf release that serialises the same graph differently still passes).
    """
    expected = to_onnx_bytes(model)
    if onnx_bytes == expected:
        return
    import onnx

    want = sha256_hex(model_npz_bytes(model))
    try:
        got = onnx.load_from_string(onnx_bytes)
    except Exception as e:  # protobuf raises its own DecodeError and friends
        raise ModelError(f"ONNX file is not a readable ONNX model: {e}") from None
    props = {p.key: p.value for p in got.metadata_props}
    named = props.get("sealtrail.weights_sha256")
    if named != want:
        raise ModelError(f"ONNX file was exported from weights {named or '(not named)'}, not {want}")
    ref = onnx.load_from_string(expected)
    if got.graph != ref.graph or list(got.opset_import) != list(ref.opset_import):
        raise ModelError(f"ONNX graph differs from the export of weights {want}; re-export it")


# ---------------------------------------------------------------- a model directory

WEIGHTS_NAME = "weights.npz"
ONNX_NAME = "model.onnx"
CARD_NAME = "card.json"
EVALUATION_NAME = "evaluation.json"  # figures measured apart from training (bench.heldout_eval --evaluation)
EVALUATION_FORMAT = "sealtrail.model-evaluation/1"
CARD_FORMAT = "sealtrail.model-card/1"
SHIPPED_MODEL = "aml_mlp"


def shipped_model_dir() -> Path:
    """The directory of the model shipped with sealtrail (trained by ``sealtrail model train``)."""
    return Path(str(resources.files("inference") / "models" / SHIPPED_MODEL))


@dataclass(frozen=True)
class ModelFiles:
    """A model directory: ``weights.npz`` + ``model.onnx`` + ``card.json``, checked together.

    The card names the SHA-256 of both files; ``model_sha256`` (the identity every decision
    record carries) is the weights file's.
    """

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
                got = sha256_file(directory / name)
            except FileNotFoundError:
                raise ModelError(f"model file {directory / name} is missing") from None
            if got != want:
                raise ModelError(f"model file {directory / name} has SHA-256 {got}, its card says {want}")
        if card.get("model_sha256") != files[WEIGHTS_NAME]:
            raise ModelError(f"{directory / CARD_NAME}: model_sha256 is not the SHA-256 of {WEIGHTS_NAME}")
        return cls(directory, card)

    def evaluation(self) -> dict[str, Any] | None:
        """The figures ``evaluation.json`` beside the card states for this very model (its
        ``model_sha256``); None when there is none, it is not a ``sealtrail.model-evaluation/1``
        document, or it was measured on other weights."""
        try:
            doc = orjson.loads((self.directory / EVALUATION_NAME).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if (not isinstance(doc, dict) or doc.get("format") != EVALUATION_FORMAT
                or doc.get("model_sha256") != self.model_sha256):
            return None
        return doc
