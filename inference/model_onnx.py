"""The ONNX export of the risk model: the same function as ``inference.model.forward``, as a graph.

onnxruntime and TensorRT run this graph, so it uses only operators both support (opset 17), and
its bytes are deterministic for a given model (fixed producer fields, no release numbers). It
names the weights file's SHA-256 in its metadata, and ``check_onnx_matches`` refuses a graph that
was not exported from the weights in hand. Kept apart from the maths in ``inference.model``
(which re-exports the public names here) because it is a second form of the model with its own
dependency (``onnx``, imported only when an export is asked for).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inference.errors import ModelError
from inference.model import FORMAT, Z_CLIP, MlpModel
from inference.model_npz import model_npz_bytes, sha256_hex

__all__ = ["INPUT_NAME", "OUTPUT_NAME", "check_onnx_matches", "to_onnx_bytes"]

INPUT_NAME, OUTPUT_NAME = "features", "score"
ONNX_OPSET, ONNX_IR_VERSION = 17, 8
ONNX_PRODUCER, ONNX_PRODUCER_VERSION = "sealtrail", FORMAT  # fixed: bytes must not follow releases


def _onnx_model(model: MlpModel) -> Any:
    from onnx import TensorProto, helper, numpy_helper

    def const(name: str, value: np.ndarray[Any, Any]) -> Any:
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
    data: bytes = onnx_model.SerializeToString()
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
