"""The context an exported decision names, checked against the proved records of the bundle.

For each rule module: ``rules/<sha>.wasm`` is the module its ``ruleset.proposed`` /
``ruleset.bootstrapped`` entry (a proved line of ``records.jsonl``) carries, ``.toml`` is that
entry's source, ``.json`` lists exactly that ruleset's governance entries, and those entries
derive (``audit.governance.state``) to a four-eyes approved (or bootstrapped) ruleset that was
activated before the first decision naming it. For each model: a ``model.registered`` entry
names it and ``card.json`` says the same SHA-256, and states the precision bounds
(``score_precision``, which replay holds version 6 scores to) the registration sealed, where it
sealed any.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

import orjson

from audit.bundle.reader import BundleArchive, BundleManifest
from audit.bundle.records import GOVERNANCE_KINDS, Findings, RecordTally
from audit.errors import BundleError, BundleMalformed, BundleTampered, GovernanceError
from audit.governance.state import derive
from inference.precision import SECTION as PRECISION_SECTION

__all__ = ["check_context"]


def check_context(bundle: BundleArchive, manifest: BundleManifest, t: RecordTally, found: Findings) -> None:
    """Failures go to ``found``."""
    for module, rid, version in sorted(t.rulesets):
        try:
            _ruleset(bundle, t, module, f"{rid}@{version}")
        except BundleError as exc:
            found.add(exc)
    for model in sorted(t.models):
        try:
            _model(bundle, t, model)
        except BundleError as exc:
            found.add(exc)


def _json(bundle: BundleArchive, name: str) -> Any:
    try:
        return orjson.loads(bundle.read(name))
    except orjson.JSONDecodeError as exc:
        raise BundleMalformed(f"is not JSON: {exc}", kind="context.file", file=name) from None


def _governs(env: dict[str, Any], rid: str) -> bool:
    return env["kind"] in GOVERNANCE_KINDS and env["record"].get("id") == rid


def _ruleset(bundle: BundleArchive, t: RecordTally, module: str, rid: str) -> None:
    name = f"rules/{module}.json"
    doc = _json(bundle, name)
    if not isinstance(doc, dict) or doc.get("module_sha256") != module or doc.get("id") != rid:
        raise BundleTampered(f"names {doc.get('id') if isinstance(doc, dict) else doc!r}, the decisions "
                             f"name {rid} with module {module}", kind="context.ruleset", file=name)
    seqs = doc.get("entries")
    if (not isinstance(seqs, list) or not seqs or not all(type(s) is int for s in seqs)
            or seqs != sorted(set(seqs))):
        raise BundleMalformed("entries is not an ascending list of seqs", kind="context.ruleset", file=name)
    stated = [s for s in seqs if not (isinstance(s, int) and s in t.entries and _governs(t.entries[s], rid))]
    if stated:
        raise BundleTampered(f"entries {stated[:5]} are not {rid} governance lines of records.jsonl",
                             kind="context.ruleset", file=name)
    mine = [s for s, env in sorted(t.entries.items()) if _governs(env, rid)]
    if mine != seqs:
        raise BundleTampered(f"lists {seqs}, records.jsonl holds {rid} governance entries {mine}",
                             kind="context.ruleset", file=name)
    try:
        view = derive([(s, t.entries[s]) for s in seqs]).views[rid]
    except (GovernanceError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BundleTampered(f"the governance entries of {rid} do not derive: {exc}",
                             kind="context.governance", file=name) from None
    first = t.first_decision.get(module)
    activated = view.activated.seq if view.activated is not None else None
    if view.module_sha256 != module or activated is None or (first is not None and activated > first):
        raise BundleTampered(f"{rid} (module {view.module_sha256[:12]}) was not activated before its "
                             f"first decision (activated at {activated}, first decision {first})",
                             kind="context.governance", file=name, seq=first)
    proposal = t.entries[seqs[0]]["record"]
    try:
        carried = base64.b64decode(str(proposal.get("module")), validate=True)
    except (binascii.Error, ValueError):
        carried = b""
    wasm = bundle.read(f"rules/{module}.wasm")
    if carried != wasm or hashlib.sha256(wasm).hexdigest() != module:
        raise BundleTampered(f"is not the module the {rid} proposal (seq {seqs[0]}) carries",
                             kind="context.module", file=f"rules/{module}.wasm", seq=seqs[0])
    if bundle.read(f"rules/{module}.toml") != str(proposal.get("source")).encode():
        raise BundleTampered(f"is not the source the {rid} proposal (seq {seqs[0]}) carries",
                             kind="context.source", file=f"rules/{module}.toml", seq=seqs[0])


def _model(bundle: BundleArchive, t: RecordTally, model: str) -> None:
    regs = [s for s, env in t.entries.items()
            if env["kind"] == "model.registered" and env["record"].get("model_sha256") == model]
    if not regs:
        raise BundleTampered(f"no model.registered entry in records.jsonl names model {model}",
                             kind="context.model", file="records.jsonl")
    name = f"models/{model}/card.json"
    card = _json(bundle, name)
    if not isinstance(card, dict) or card.get("model_sha256") != model:
        said = card.get("model_sha256") if isinstance(card, dict) else card
        raise BundleTampered(f"is the card of {said!r}, not of {model}", kind="context.model", file=name)
    sealed = t.entries[min(regs)]["record"].get("card")
    if (isinstance(sealed, dict) and PRECISION_SECTION in sealed
            and card.get(PRECISION_SECTION) != sealed[PRECISION_SECTION]):
        raise BundleTampered(f"states other {PRECISION_SECTION} bounds than the model.registered entry (seq "
                             f"{min(regs)}) sealed for model {model}", kind="context.model", file=name,
                             seq=min(regs))
    if f"models/{model}/weights.npz" not in bundle.sizes:
        raise BundleTampered("the weights of a model the decisions name are missing", kind="file.missing",
                             file=f"models/{model}/weights.npz")
