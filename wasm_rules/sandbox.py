"""The wasmtime sandbox: load ABI v1 rule modules and evaluate batches of feature rows.

A module that imports anything is refused. Each batch runs under a fuel budget (fixed part
plus a part per row), an epoch deadline in wall time and a memory cap, with NaN
canonicalisation on. Faults become ``SandboxFault`` subtypes naming the cause; the instance
that faulted is discarded and the next batch gets a fresh one. Rows go in and results come
out through numpy views on the module's linear memory: one write, one read per call.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import wasmtime

from wasm_rules.binary import custom_sections
from wasm_rules.compiler import ABI_VERSION, MANIFEST_SECTION, MAX_FUEL_PER_ROW, MAX_MODULE_BYTES
from wasm_rules.errors import (
    AbiError,
    DeadlineError,
    FuelExhaustedError,
    ModuleRejectedError,
    RuleError,
    SandboxFault,
    TrapError,
)
from wasm_rules.language import OUTCOMES

__all__ = ["BatchResult", "Manifest", "RuleModule", "Sandbox", "SandboxLimits"]

_TICK_S = 0.005
_GETTERS = ("abi_version", "n_features", "n_rules", "max_rows", "input_ptr", "outcome_ptr",
            "fired_ptr")


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits per batch. Defaults fit the default pack with a wide margin."""

    fuel_base: int = 100_000
    fuel_per_row: int = MAX_FUEL_PER_ROW  # the compiler refuses packs that could need more
    deadline_ms: int = 250
    memory_bytes: int = 64 * 1024 * 1024
    max_module_bytes: int = MAX_MODULE_BYTES


@dataclass(frozen=True)
class RuleInfo:
    id: str
    outcome: str
    reason: str
    severity: str


@dataclass(frozen=True)
class Manifest:
    """The module's own description (custom section ``sealtrail.manifest.v1``)."""

    ruleset_id: str
    version: str
    features: tuple[str, ...]
    rules: tuple[RuleInfo, ...]
    source_sha256: str
    compiler: str
    raw: dict[str, Any]

    @classmethod
    def from_module(cls, module: bytes) -> Manifest:
        sections = custom_sections(module).get(MANIFEST_SECTION, [])
        if len(sections) != 1:
            raise AbiError(f"module must carry exactly one '{MANIFEST_SECTION}' custom section")
        try:
            raw = orjson.loads(sections[0])
            if raw["abi"] != ABI_VERSION:
                raise AbiError(f"manifest declares ABI {raw['abi']!r}, the host speaks {ABI_VERSION}")
            rules = tuple(RuleInfo(str(r["id"]), str(r["outcome"]), str(r["reason"]),
                                   str(r.get("severity", ""))) for r in raw["rules"])
            m = cls(str(raw["ruleset_id"]), str(raw["version"]),
                    tuple(str(f) for f in raw["features"]), rules,
                    str(raw.get("source_sha256", "")), str(raw.get("compiler", "")), raw)
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise AbiError(f"module manifest is malformed: {exc}") from exc
        bad = [r.id for r in rules if r.outcome not in OUTCOMES]
        if bad:
            raise AbiError(f"manifest rule {bad[0]} has an unknown outcome")
        return m


@dataclass(frozen=True)
class BatchResult:
    outcomes: npt.NDArray[np.uint8]  # (n,) codes into OUTCOMES
    fired: npt.NDArray[np.uint64]  # (n, ceil(rules / 64)) bitsets, bit k = rule k
    fuel_used: int

    def fired_rules(self, row: int, manifest: Manifest) -> list[str]:
        words = self.fired[row]
        return [r.id for k, r in enumerate(manifest.rules) if int(words[k // 64]) >> (k % 64) & 1]


class Sandbox:
    """A wasmtime engine configured for untrusted rule modules, with its epoch ticker."""

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()
        cfg = wasmtime.Config()
        cfg.consume_fuel = True
        cfg.epoch_interruption = True
        cfg.cranelift_nan_canonicalization = True
        cfg.wasm_threads = False
        cfg.wasm_relaxed_simd = False
        self.engine = wasmtime.Engine(cfg)
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="wasm-epoch", daemon=True)
        self._ticker.start()
        self.closed = False

    def _tick(self) -> None:
        while not self._stop.wait(_TICK_S):
            self.engine.increment_epoch()

    def load(self, module: bytes) -> RuleModule:
        """Validate and compile ``module``; raise ``ModuleRejectedError`` or ``AbiError``."""
        if self.closed:
            raise RuleError("sandbox is closed")
        return RuleModule(self, bytes(module))

    def close(self) -> None:
        self._stop.set()
        self.closed = True

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_exports(module: wasmtime.Module) -> None:
    exports = {e.name: e.type for e in module.exports}
    if not isinstance(exports.get("memory"), wasmtime.MemoryType):
        raise AbiError("module must export its linear memory as 'memory'")
    i32 = wasmtime.ValType.i32()
    for name in _GETTERS:
        t = exports.get(name)
        if not isinstance(t, wasmtime.FuncType) or t.params or t.results != [i32]:
            raise AbiError(f"export '{name}' must be a function () -> i32")
    t = exports.get("evaluate")
    if not isinstance(t, wasmtime.FuncType) or t.params != [i32] or t.results != [i32]:
        raise AbiError("export 'evaluate' must be a function (i32) -> i32")


class RuleModule:
    """One loaded rule module and its (reused) instance. Not shareable across threads
    without its own lock, which it holds around every call."""

    def __init__(self, sandbox: Sandbox, module: bytes) -> None:
        limits = sandbox.limits
        if len(module) > limits.max_module_bytes:
            raise ModuleRejectedError(
                f"module is {len(module):,} bytes, more than the {limits.max_module_bytes:,} "
                "allowed")
        self.sandbox = sandbox
        self.bytes = module
        self.sha256 = hashlib.sha256(module).hexdigest()
        try:
            self._module = wasmtime.Module(sandbox.engine, module)
        except wasmtime.WasmtimeError as exc:
            raise ModuleRejectedError(f"not a valid WebAssembly module: {exc}") from exc
        imports = [f"{i.module}.{i.name}" for i in self._module.imports]
        if imports:
            raise ModuleRejectedError(
                f"rule modules may import nothing; this one imports {', '.join(imports)}")
        _check_exports(self._module)
        self.manifest = Manifest.from_module(module)
        self.words = (len(self.manifest.rules) + 63) // 64
        self._codes = np.array([OUTCOMES.index(r.outcome) for r in self.manifest.rules],
                               dtype=np.uint8)
        self._lock = threading.Lock()
        self._inst: _Instance | None = None
        self._closed = False
        with self._lock:
            self._instance()  # fail at load, not at the first batch

    def _instance(self) -> _Instance:
        if self._closed:
            raise RuleError(f"rule module {self.sha256[:12]} is closed")
        if self._inst is None:
            self._inst = _Instance(self)
        return self._inst

    def evaluate(self, rows: npt.ArrayLike) -> BatchResult:
        """Outcomes and fired rules for each row (shape ``(n, len(features))``).

        One fuel budget (``fuel_base + fuel_per_row * n``) and one deadline cover the whole
        call, however many ``max_rows`` chunks it takes."""
        if self.sandbox.closed:
            raise RuleError("the sandbox is closed: its deadline no longer runs")
        if isinstance(rows, np.ma.MaskedArray):
            raise RuleError("masked arrays are refused: use NaN for a missing value")
        try:
            src = np.asarray(rows)
            if src.dtype.kind not in "biuf":
                raise TypeError(f"dtype {src.dtype} is not a real number type")
            arr = np.ascontiguousarray(src, dtype="<f8")
        except (TypeError, ValueError) as exc:
            raise RuleError(f"rows must be a 2-D array of real numbers: {exc}") from None
        if arr.ndim != 2 or arr.shape[1] != len(self.manifest.features):
            raise RuleError(f"rows must have shape (n, {len(self.manifest.features)}), "
                            f"got {arr.shape}")
        n = arr.shape[0]
        outcomes = np.empty(n, dtype=np.uint8)
        fired = np.empty((n, self.words), dtype=np.uint64)
        fuel = 0
        lim = self.sandbox.limits
        budget = lim.fuel_base + lim.fuel_per_row * n
        with self._lock:
            try:
                inst = self._instance()
            except ModuleRejectedError as exc:  # a fresh instance after a fault failed to start
                raise TrapError(f"module could not be started again: {exc}") from exc
            inst.store.set_epoch_deadline(inst.deadline_ticks)  # one deadline for the call
            try:
                for lo in range(0, n, inst.max_rows):
                    hi = min(lo + inst.max_rows, n)
                    fuel += inst.run(arr[lo:hi], outcomes[lo:hi], fired[lo:hi], budget - fuel)
            except SandboxFault:
                self._inst = None  # a faulted instance is never reused
                raise
        return BatchResult(outcomes, fired, fuel)

    def close(self) -> None:
        with self._lock:
            self._inst = None
            self._closed = True

    def __enter__(self) -> RuleModule:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _fault(exc: Exception) -> SandboxFault:
    if isinstance(exc, wasmtime.Trap):
        code = exc.trap_code
        first = exc.message.splitlines()[0] if exc.message else ""
        if code == wasmtime.TrapCode.OUT_OF_FUEL:
            return FuelExhaustedError(f"fuel exhausted: {first}")
        if code == wasmtime.TrapCode.INTERRUPT:
            return DeadlineError(f"deadline passed: {first}")
        return TrapError(f"trap {code.name if code else 'unknown'}: {first}")
    return TrapError(f"module failed: {exc}")


class _Instance:
    """A store + instance with the ABI layout read and checked once."""

    def __init__(self, owner: RuleModule) -> None:
        sb = owner.sandbox
        self.owner = owner
        self.store = wasmtime.Store(sb.engine)
        self.store.set_limits(memory_size=sb.limits.memory_bytes, instances=1, tables=1,
                              memories=1, table_elements=10_000)
        self.store.set_fuel(sb.limits.fuel_base)
        self.store.set_epoch_deadline(max(1, int(sb.limits.deadline_ms / 1000 / _TICK_S)) + 1)
        try:
            inst = wasmtime.Instance(self.store, owner._module, [])
            ex = inst.exports(self.store)
            values = {name: int(ex[name](self.store)) for name in _GETTERS}  # type: ignore[operator]
        except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            raise ModuleRejectedError(f"module cannot start in the sandbox: {exc}") from exc
        self.evaluate = ex["evaluate"]
        self.memory: wasmtime.Memory = ex["memory"]  # type: ignore[assignment]
        m = owner.manifest
        if values["abi_version"] != ABI_VERSION:
            raise AbiError(f"module speaks ABI {values['abi_version']}, the host {ABI_VERSION}")
        if values["n_features"] != len(m.features) or values["n_rules"] != len(m.rules):
            raise AbiError("module's n_features/n_rules disagree with its manifest")
        self.max_rows = values["max_rows"]
        width = len(m.features) * 8
        regions = sorted([
            (values["input_ptr"], values["input_ptr"] + self.max_rows * width, "input"),
            (values["outcome_ptr"], values["outcome_ptr"] + self.max_rows, "outcome"),
            (values["fired_ptr"], values["fired_ptr"] + self.max_rows * owner.words * 8,
             "fired"),
        ])
        size = self.memory.data_len(self.store)
        if not 0 < self.max_rows <= 1 << 20 or regions[0][0] < 0 or regions[-1][1] > size:
            raise AbiError("module's buffers do not fit in its memory")
        if any(a[1] > b[0] for a, b in itertools.pairwise(regions)):
            raise AbiError("module's input, outcome and fired buffers overlap")
        self.inp, self.out, self.fired = (values["input_ptr"], values["outcome_ptr"],
                                          values["fired_ptr"])
        self.deadline_ticks = max(1, int(sb.limits.deadline_ms / 1000 / _TICK_S)) + 1
        self._mem: npt.NDArray[np.uint8] | None = None

    def _view(self) -> npt.NDArray[np.uint8]:
        """A numpy view of linear memory, rebuilt only when the memory's size changed (each
        wasmtime-py call costs microseconds, and batch-1 latency is mostly such calls)."""
        size = self.memory.data_len(self.store)
        if self._mem is None or self._mem.size != size:
            self._mem = np.ctypeslib.as_array(self.memory.data_ptr(self.store), shape=(size,))
        return self._mem

    def run(self, rows: npt.NDArray[np.float64], outcomes: npt.NDArray[np.uint8],
            fired: npt.NDArray[np.uint64], budget: int) -> int:
        k = rows.shape[0]
        mem = self._view()
        src = rows.view(np.uint8).reshape(-1)
        mem[self.inp : self.inp + src.size] = src
        self.store.set_fuel(max(budget, 0))
        try:
            rc = self.evaluate(self.store, k)  # type: ignore[operator]
        except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            raise _fault(exc) from exc
        used = budget - self.store.get_fuel()
        if rc != 0:
            raise AbiError(f"evaluate({k}) returned {rc}, not 0")
        mem = self._view()  # the guest may have grown (and so moved) its memory
        if not np.array_equal(mem[self.inp : self.inp + src.size], src):
            raise AbiError("module wrote into its input rows (outside its result area)")
        outcomes[:] = mem[self.out : self.out + k]
        words = self.owner.words
        fired[:] = mem[self.fired : self.fired + k * words * 8].view("<u8").reshape(k, words)
        self._check(outcomes, fired)
        return int(used)

    def _check(self, outcomes: npt.NDArray[np.uint8], fired: npt.NDArray[np.uint64]) -> None:
        n_rules = len(self.owner.manifest.rules)
        bits = np.unpackbits(fired.view(np.uint8), axis=1, bitorder="little")
        if bits[:, n_rules:].any():
            raise AbiError("module set fired bits beyond its rule count")
        expected = (bits[:, :n_rules] * self.owner._codes).max(axis=1, initial=0)
        if not np.array_equal(expected, outcomes):
            raise AbiError("module's outcomes are not the highest outcome of its fired rules")
