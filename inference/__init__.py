"""inference: from a payment message to a risk score (see DESIGN.md and docs/scoring.md).

- ``inference.messages``: MT103/MT202/MT202COV, pacs.008 and JSON -> canonical ``Transaction``;
- ``inference.features``: deterministic float64 rows (schema ``sealtrail.features/6``) with
  velocity windows (``inference.velocity``) and versioned tables (``inference.reference_tables``);
- ``inference.model`` / ``inference.backends``: the MLP risk model (its maths, weights file, ONNX
  export and model directory with its card) and its numpy, onnxruntime, CuPy and TensorRT backends;
- ``inference.simulate`` / ``inference.train``: the seeded simulator and the training recipe;
- ``inference.batcher``: the dynamic batcher with priority lanes and deadlines.

This package imports nothing from ``ledger``, ``wasm_rules``, ``audit`` or ``api``.
"""
