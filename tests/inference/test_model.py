"""The MLP model: its maths against an independent float64 reference, the deterministic weights
file and every refusal of a malformed one, the ONNX export's shape and determinism, and the one
module (``inference.model``) that defines all three forms."""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from inference import model as model_module
from inference.errors import ModelError
from inference.model import (
    FORMAT,
    Z_CLIP,
    MlpModel,
    check_onnx_matches,
    forward,
    load_npz,
    model_npz_bytes,
    preprocess,
    save_npz,
    sha256_file,
    to_onnx_bytes,
)
from inference.schema import feature_names

# The models here read sealtrail.features/1 (32 columns), the leading columns of this build's rows,
# as a model trained on an earlier schema does; the shipped model's own tests are in test_train.py.
FEATURE_SCHEMA = "sealtrail.features/1"
FEATURE_NAMES = feature_names(FEATURE_SCHEMA)
N_FEATURES = len(FEATURE_NAMES)


def _init(rng: np.random.Generator, sizes: tuple[int, ...] = (32, 32, 16, 1), **kw: Any) -> MlpModel:
    """``MlpModel.init`` over the features/1 columns unless told otherwise."""
    kw = {"feature_names": FEATURE_NAMES, "feature_schema": FEATURE_SCHEMA, **kw}
    return MlpModel.init(rng, sizes, **kw)

LOG_MASK = np.array(["count" in n or "sum" in n or n == "amount_usd" for n in FEATURE_NAMES])


def clean_rows(rng: np.random.Generator, n: int) -> np.ndarray[Any, Any]:
    """Feature-like rows: heavy-tailed where the log mask is set, roughly normal elsewhere."""
    heavy = rng.lognormal(3.0, 2.5, (n, N_FEATURES))
    plain = rng.normal(0.3, 1.0, (n, N_FEATURES))
    return np.where(LOG_MASK, heavy, plain)


def hostile_rows(rng: np.random.Generator, n: int) -> np.ndarray[Any, Any]:
    """Clean rows salted with what production sends: NaN, zeros, huge values, infinities."""
    x = clean_rows(rng, n)
    u = rng.random(x.shape)
    x[u < 0.05] = np.nan
    x[(u >= 0.05) & (u < 0.08)] = 0.0
    x[(u >= 0.08) & (u < 0.09)] = 1e30
    x[(u >= 0.09) & (u < 0.095)] = -1e12
    if n >= 4:
        x[0, 0], x[1, 1], x[2, 2], x[3, 3] = 1e300, -1e300, np.inf, -np.inf
    return x


def fitted_model(seed: int = 7, sizes: tuple[int, ...] = (32, 32, 16, 1)) -> MlpModel:
    """A random model standardised on sample rows, so its scores spread over (0, 1)."""
    rng = np.random.default_rng(seed)
    z = preprocess(_init(rng, sizes, log_mask=LOG_MASK), clean_rows(rng, 4096))
    return _init(rng, sizes, log_mask=LOG_MASK, mean=z.mean(0), scale=1 / z.std(0))


def reference_scores(model: MlpModel, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The documented maths, written out plainly in float64 (independent of model.forward)."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = rows.astype(np.float32).astype(np.float64)
        x = np.where(np.isnan(x), 0.0, x)
        x = np.where(model.log_mask, np.log(np.maximum(x, 0.0) + 1.0), x)
        h = np.clip((x - model.mean) * model.scale, -Z_CLIP, Z_CLIP)
        for i, (w, b) in enumerate(model.layers):
            a = h @ w.astype(np.float64) + b
            h = np.maximum(a, 0.0) if i < len(model.layers) - 1 else 1.0 / (1.0 + np.exp(-a))
    return np.asarray(h[:, 0])


# ---------------------------------------------------------------- maths

@pytest.mark.parametrize("n", [0, 1, 7, 1024])
@pytest.mark.requirement("SR11-7-validation")
def test_forward_matches_an_independent_float64_reference(n: int) -> None:
    model = fitted_model()
    rows = hostile_rows(np.random.default_rng(n), n)
    with np.errstate(over="ignore"):
        got = forward(model, rows)
    assert got.dtype == np.float64 and got.shape == (n,)
    assert np.abs(got - reference_scores(model, rows)).max(initial=0) <= 1e-5


def test_scores_spread_and_stay_finite_on_hostile_rows() -> None:
    with np.errstate(over="ignore"):
        scores = forward(fitted_model(), hostile_rows(np.random.default_rng(1), 4096))
    assert np.isfinite(scores).all() and (scores >= 0).all() and (scores <= 1).all()
    assert np.mean((scores > 0.01) & (scores < 0.99)) > 0.2  # parity tests are not all saturated


def test_nan_is_a_missing_feature_scored_as_zero() -> None:
    model, rows = fitted_model(), clean_rows(np.random.default_rng(2), 64)
    holes, zeros = rows.copy(), rows.copy()
    holes[:, ::3], zeros[:, ::3] = np.nan, 0.0
    assert np.array_equal(forward(model, holes), forward(model, zeros))


def test_infinities_and_huge_values_are_clipped_not_propagated() -> None:
    model, rows = fitted_model(), clean_rows(np.random.default_rng(3), 8)
    plain = int(np.flatnonzero(~LOG_MASK)[0])
    huge, inf = rows.copy(), rows.copy()
    huge[:, plain], inf[:, plain] = 1e300, np.inf
    with np.errstate(over="ignore"):
        assert np.array_equal(forward(model, huge), forward(model, inf))
    assert np.isfinite(forward(model, inf)).all()


def test_forward_does_not_modify_its_input() -> None:
    rows = hostile_rows(np.random.default_rng(4), 16)
    before = rows.copy()
    with np.errstate(over="ignore"):
        forward(fitted_model(), rows)
    assert np.array_equal(rows, before, equal_nan=True)


@pytest.mark.parametrize("shape", [(4,), (4, 31), (4, 33), (2, 4, 32)])
def test_forward_refuses_rows_of_the_wrong_shape(shape: tuple[int, ...]) -> None:
    with pytest.raises(ModelError, match=r"shape \(N, 32\)"):
        forward(fitted_model(), np.zeros(shape))


def test_init_is_reproducible_from_the_seed_and_he_scaled() -> None:
    a = _init(np.random.default_rng(11), (32, 256, 1))
    b = _init(np.random.default_rng(11), (32, 256, 1))
    assert model_npz_bytes(a) == model_npz_bytes(b)
    assert a.sizes == (32, 256, 1) and a.feature_names == FEATURE_NAMES
    w0 = a.layers[0][0]
    assert w0.dtype == np.float32 and abs(float(w0.std()) - np.sqrt(2 / 32)) < 0.02
    assert not a.layers[0][1].any()


@pytest.mark.parametrize("sizes", [(31, 16, 1), (32, 16, 2), (32,)])
def test_init_refuses_sizes_that_do_not_run_from_the_features_to_one(sizes: tuple[int, ...]) -> None:
    with pytest.raises(ModelError, match="sizes must run from the feature count 32 to 1"):
        _init(np.random.default_rng(0), sizes)


def _fields(**change: Any) -> dict[str, Any]:
    m = fitted_model()
    fields = {"feature_schema": m.feature_schema, "feature_names": m.feature_names, "log_mask": m.log_mask,
              "mean": m.mean, "scale": m.scale, "layers": m.layers}
    return {**fields, **change}


@pytest.mark.parametrize(("change", "message"), [
    ({"mean": np.zeros(32)}, "mean must be a float32 array; got float64"),
    ({"scale": np.ones(31, np.float32)}, r"scale must have shape \(32,\); got \(31,\)"),
    ({"scale": np.full(32, -1, np.float32)}, "scale .* must be positive"),
    ({"log_mask": np.zeros(32, np.int8)}, "log_mask must be a bool array"),
    ({"mean": np.full(32, np.nan, np.float32)}, "mean holds NaN or infinite values"),
    ({"layers": ()}, "at least one layer"),
    ({"layers": ((np.zeros((32, 4), np.float32), np.zeros(4, np.float32)),)}, "one output .* it has 4"),
    ({"layers": ((np.zeros((31, 1), np.float32), np.zeros(1, np.float32)),)},
     r"W0 must have shape \(32, out\)"),
    ({"layers": ((np.zeros((32, 1), np.float32), np.zeros(2, np.float32)),)}, r"b0 must have shape \(1,\)"),
    ({"feature_names": (*FEATURE_NAMES[:-1], FEATURE_NAMES[0])}, "duplicate"),
    ({"feature_schema": ""}, "feature_schema"),
])
def test_model_refuses_inconsistent_fields(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelError, match=message):
        MlpModel(**_fields(**change))


def test_model_arrays_are_private_and_read_only() -> None:
    mean = fitted_model().mean.copy()
    model = MlpModel(**_fields(mean=mean))
    mean[:] = 99
    assert not (model.mean == 99).any()
    with pytest.raises(ValueError, match="read-only"):
        model.layers[0][0][0, 0] = 1.0


# ---------------------------------------------------------------- the weights file

def test_weights_file_round_trips_exactly_and_its_bytes_are_deterministic(tmp_path: Path) -> None:
    model = fitted_model()
    sha_a = save_npz(model, tmp_path / "a.npz")
    sha_b = save_npz(fitted_model(), tmp_path / "b.npz")
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    assert sha_a == sha_b == sha256_file(tmp_path / "a.npz")
    assert sha_a == hashlib.sha256(model_npz_bytes(model)).hexdigest()
    back = load_npz(tmp_path / "a.npz")
    assert model_npz_bytes(back) == model_npz_bytes(model)
    assert back.feature_schema == FEATURE_SCHEMA and back.feature_names == FEATURE_NAMES
    for (w, b), (w2, b2) in zip(back.layers, model.layers, strict=True):
        assert np.array_equal(w, w2) and np.array_equal(b, b2)
    assert model_npz_bytes(fitted_model(seed=8)) != model_npz_bytes(model)


def test_weights_file_is_a_plain_npz_that_numpy_and_zipfile_read() -> None:
    data = model_npz_bytes(fitted_model())
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.testzip() is None
        assert all(i.date_time == (1980, 1, 1, 0, 0, 0) and i.compress_type == zipfile.ZIP_STORED
                   for i in zf.infolist())
    npz = np.load(io.BytesIO(data), allow_pickle=False)
    assert list(npz.keys()) == ["format", "feature_schema", "feature_names", "log_mask", "mean", "scale",
                                "W0", "b0", "W1", "b1", "W2", "b2"]
    assert str(npz["format"]) == FORMAT and npz["W1"].dtype == np.float32


def _arrays(model: MlpModel | None = None) -> dict[str, Any]:
    npz = np.load(io.BytesIO(model_npz_bytes(model or fitted_model())), allow_pickle=False)
    return {k: npz[k] for k in npz}


def _savez(arrays: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # numpy's own writer: refusals do not depend on our zip code
    return buf.getvalue()


def _without(name: str) -> dict[str, Any]:
    arrays = _arrays()
    del arrays[name]
    return arrays


def _obj() -> np.ndarray[Any, Any]:
    arr = np.empty(32, object)
    arr[:] = [float(i) for i in range(32)]
    return arr


SHORT = _init(np.random.default_rng(0), (31, 8, 1), feature_names=FEATURE_NAMES[:31])
SWAPPED = _init(np.random.default_rng(0), feature_names=(FEATURE_NAMES[1], FEATURE_NAMES[0],
                                                                 *FEATURE_NAMES[2:]))


@pytest.mark.parametrize(("arrays", "message"), [
    (_without("mean"), "missing array 'mean'"),
    (_without("b1"), "missing array 'b1'"),
    (_without("format"), "missing array 'format'"),
    ({**_arrays(), "mean": _arrays()["mean"].astype(np.float64)},
     "array 'mean' must be float32 .*got float64"),
    ({**_arrays(), "W1": _arrays()["W1"].astype(np.float16)}, "array 'W1' must be float32"),
    ({**_arrays(), "log_mask": LOG_MASK.astype(np.uint8)}, "array 'log_mask' must be bool"),
    ({**_arrays(), "W1": np.zeros((16, 32), np.float32)}, r"W1 must have shape \(32, out\).*got \(16, 32\)"),
    ({**_arrays(), "b1": np.zeros(15, np.float32)}, r"b1 must have shape \(16,\); got \(15,\)"),
    ({**_arrays(), "mean": np.zeros(31, np.float32)}, r"mean must have shape \(32,\)"),
    ({**_arrays(), "mean": _obj()}, "array 'mean' is an object \\(pickle\\) array; refused"),
    ({**_arrays(), "format": np.array("sealtrail.mlp/9")}, "unknown model format 'sealtrail.mlp/9'"),
    ({**_arrays(), "format": np.array(["sealtrail.mlp/1"])}, "'format' must be a 0-d unicode array"),
    ({**_arrays(), "feature_schema": np.array("sealtrail.features/0")},
     "feature schema 'sealtrail.features/0'"),
    (_arrays(SHORT), "model reads 31 features; schema sealtrail.features/1 has 32"),
    (_arrays(SWAPPED), "feature 0 is 'log_amount_usd' in the model, 'amount_usd' in schema"),
    ({**_arrays(), "W9": np.zeros((1, 1), np.float32)}, "unexpected array\\(s\\) 'W9'"),
    ({**_arrays(), "W0": np.full((32, 32), np.inf, np.float32)}, "W0 holds NaN or infinite values"),
])
def test_load_refuses_malformed_weights_naming_the_problem(arrays: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelError, match=message):
        load_npz(_savez(arrays))


def test_load_refuses_what_is_not_a_weights_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not a readable npz"):
        load_npz(b"PK\x03\x04 not really")
    with pytest.raises(ModelError, match="cannot read weights file"):
        load_npz(tmp_path / "absent.npz")
    data = bytearray(model_npz_bytes(fitted_model()))
    data[200] ^= 0xFF  # inside the first entry's payload: the zip CRC catches it
    with pytest.raises(ModelError, match="array 'format'"):
        load_npz(bytes(data))


def test_other_schemas_load_only_when_asked() -> None:
    data = _savez(_arrays(SHORT))
    assert load_npz(data, expect_schema=False).n_features == 31


def test_a_features_1_model_reads_the_leading_columns_of_a_features_2_row() -> None:
    from inference.backends.numpy_backend import NumpyBackend
    from inference.schema import FEATURE_SCHEMA
    from inference.schema import N_FEATURES as ROW_WIDTH

    model = load_npz(model_npz_bytes(fitted_model()))  # sealtrail.features/1, checked on load
    assert model.feature_schema == "sealtrail.features/1" != FEATURE_SCHEMA
    rows = hostile_rows(np.random.default_rng(2), 50)
    wide = np.hstack([rows, np.random.default_rng(3).integers(0, 5, (50, ROW_WIDTH - N_FEATURES))])
    with NumpyBackend(model) as backend:
        assert np.array_equal(backend.predict(wide), backend.predict(rows))
        with pytest.raises(ModelError, match=r"shape \(N, 32\)"):  # neither the model's width nor a row's
            backend.predict(wide[:, :-1])


def test_a_model_of_a_schema_this_build_does_not_know_is_refused() -> None:
    arrays = {**_arrays(), "feature_schema": np.array("sealtrail.features/9")}
    with pytest.raises(ModelError, match=r"'sealtrail.features/9'; this build computes "
                                         r"'sealtrail.features/7' \(and reads sealtrail.features/1, "
                                         r"sealtrail.features/2, sealtrail.features/3, "
                                         r"sealtrail.features/4, sealtrail.features/5, "
                                         r"sealtrail.features/6, sealtrail.features/7\)"):
        load_npz(_savez(arrays))


# ---------------------------------------------------------------- the ONNX export

def test_onnx_export_is_deterministic_and_well_formed() -> None:
    model = fitted_model()
    data = to_onnx_bytes(model)
    assert data == to_onnx_bytes(fitted_model()) == to_onnx_bytes(load_npz(model_npz_bytes(model)))
    assert data != to_onnx_bytes(fitted_model(seed=8))
    proto = onnx.load_from_string(data)
    onnx.checker.check_model(proto, full_check=True)
    assert (proto.ir_version, proto.producer_name) == (8, "sealtrail")
    assert [(o.domain, o.version) for o in proto.opset_import] == [("", 17)]
    (inp,), (out,) = proto.graph.input, proto.graph.output
    dims = [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim]
    assert (inp.name, inp.type.tensor_type.elem_type) == ("features", onnx.TensorProto.FLOAT)
    assert dims == ["batch", 32]
    assert [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim] == ["batch", 1]
    assert out.name == "score"
    assert {n.op_type for n in proto.graph.node} <= {"IsNaN", "Where", "Relu", "Add", "Log", "Sub", "Mul",
                                                     "Clip", "MatMul", "Sigmoid"}
    props = {p.key: p.value for p in proto.metadata_props}
    assert props["sealtrail.weights_sha256"] == hashlib.sha256(model_npz_bytes(model)).hexdigest()


def test_onnx_binding_accepts_the_export_and_refuses_other_weights() -> None:
    model = fitted_model()
    check_onnx_matches(model, to_onnx_bytes(model))
    proto = onnx.load_from_string(to_onnx_bytes(model))
    proto.doc_string = "re-saved by another tool"  # other bytes, same graph: accepted
    check_onnx_matches(model, proto.SerializeToString())
    with pytest.raises(ModelError, match=r"exported from weights [0-9a-f]{64}, not"):
        check_onnx_matches(model, to_onnx_bytes(fitted_model(seed=8)))
    w0 = next(t for t in proto.graph.initializer if t.name == "W0")
    w0.raw_data = np.zeros((32, 32), np.float32).tobytes()  # same claimed weights, edited graph
    with pytest.raises(ModelError, match=re.escape("ONNX graph differs")):
        check_onnx_matches(model, proto.SerializeToString())
    with pytest.raises(ModelError, match="not a readable ONNX model"):
        check_onnx_matches(model, b"\xff\xff not onnx")


# ---------------------------------------------------------------- one module

def test_inference_model_defines_every_public_name_itself() -> None:
    for name in model_module.__all__:
        value = getattr(model_module, name)
        if callable(value):  # functions and classes come from here, not through a re-export
            assert value.__module__ == "inference.model", name
    with pytest.raises(AttributeError, match="has no attribute 'load_nzp'"):
        model_module.load_nzp  # noqa: B018 -- a typo stays an AttributeError


def test_importing_the_model_does_not_import_onnx() -> None:
    """Scoring with numpy needs no onnx: it is imported only when an export is asked for."""
    code = ("import sys\nfrom inference.model import MlpModel, ModelFiles, forward, load_npz\n"
            "assert 'onnx' not in sys.modules, 'onnx imported'\n"
            "from inference.model import to_onnx_bytes\nimport numpy as np\n"
            "to_onnx_bytes(MlpModel.init(np.random.default_rng(0)))\nassert 'onnx' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[2],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
