"""Import paths of audit modules before they moved into folders, kept working for one version.

``import audit.pipeline`` (and every other path in ``MOVED``) still gives the module at its new
place, the very same module object, with a ``DeprecationWarning`` naming the new path. One table
and one finder rather than a stub file per old module, so that ``audit/`` reads as its folders.
The table goes in the next version.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED", "install"]

MOVED: dict[str, str] = {
    "audit.bundle_context": "audit.bundle.context",
    "audit.bundle_errors": "audit.errors",
    "audit.bundle_proofs": "audit.bundle.proofs",
    "audit.bundle_reader": "audit.bundle.reader",
    "audit.bundle_records": "audit.bundle.records",
    "audit.verify_bundle": "audit.bundle.verify",
    "audit.replay": "audit.bundle.replay",
    "audit.canonical": "ledger.jcs",
    "audit.decide.canonical": "ledger.jcs",
    "audit.pipeline": "audit.decide.pipeline",
    "audit.pipeline_types": "audit.decide.types",
    "audit.principal": "audit.decide.principal",
    "audit.record": "audit.decide.record",
    "audit.service": "audit.decide.service",
    "audit.velocity_replay": "audit.state.replay",
    "audit.velocity_snapshot": "audit.state.snapshot",
    "audit.trace_index": "audit.query.index",
    "audit.queries": "audit.query.traces",
    "audit.stats": "audit.query.stats",
    "audit.governance_errors": "audit.errors",
    "audit.governance_state": "audit.governance.state",
    "audit.ruleset_proposal": "audit.governance.proposal",
    "audit.models_registry": "audit.governance.models",
    "audit.export_context": "audit.export.context",
    "audit.export_files": "audit.export.files",
    "audit.export_pass": "audit.export.spool",
    "audit.export_report": "audit.export.report",
    "audit.export_select": "audit.export.select",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.target}; the old path goes in the next version",
                      DeprecationWarning, stacklevel=3)
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is complete."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (importing ``audit`` does it)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
