"""Replay (DESIGN.md invariant 6): re-run recorded decisions and say where they do not reproduce.

For each ``sealtrail.decision/1`` to ``/6`` body: the recorded features and score (a version 4
body's integers in fixed units, read as the values they stand for) go through
the recorded rule module in the sandbox (outcome, fired rule ids, their outcomes and reasons must
equal the record exactly), and the recorded features through the numpy reference model (score
within 1e-4), as ``docs/bundle-format.md`` "Replay" says, fail-safe records included. A version
3 body's ``explanation`` (and a version 4 body's, which has the field when its model could be
attributed) is recomputed from the same model and features (``inference.explain``): the
decisions that must carry reasons carry them, and the reason codes are those the recomputed
attributions give, each contribution within 1e-4 (``audit.decide.explanation.check_explanation``).
A body of a kind without explanations (versions 1 and 2, version 4 without the field) may state
none, and may not follow a record with one from the same backend and model (a record relabelled
or stripped to escape the check).

The score tolerance: 1e-4 (``SCORE_TOLERANCE``) for versions 1 to 5, and for a version 6 body whose
``model.precision`` is the reference's own (``fp32``, ``inference.precision.REFERENCE_PRECISION``).
A version 6 body scored at another precision is held to the bound the model's card states for that
precision and backend (``score_precision``), plus ``SCORE_MARGIN`` for the rounding of ``score_ppm``,
and never to less than 1e-4; a card with no bound for them (or no card to read) fails the record
(``replay.precision``), naming the precision, the backend and the model.

Decisions are buffered and replayed a batch at a time, grouped by feature schema (each record's
values are read by the schema it names), by module and by model, so the sandbox's per-call cost
(~30 us) is paid once per thousands of rows. Module and weights bytes come in
through ``fetch_module`` / ``fetch_model`` (I/O stays with the caller); each is loaded once and
checked against the SHA-256 the records name, and each model's card through ``fetch_card``.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import orjson

from audit.decide.explanation import check_explanation, is_explained
from audit.decide.record import (
    DECISION_SCHEMA,
    DECISION_SCHEMA_V3,
    DECISION_SCHEMA_V7,
    DECISION_SCHEMAS,
    FAIL_SAFE_DECISION,
    FIXED_SCHEMAS,
    PRECISION_SCHEMAS,
    SCREENED_SCHEMAS,
    features_from_body,
    states_explanation,
    states_precision,
)
from audit.decide.types import ActiveRules
from audit.errors import BundleError, ReplayMismatch
from audit.screening.evidence import evidence_from_json
from inference.errors import ModelError
from inference.explain import explain
from inference.model import MlpModel, forward, load_npz
from inference.precision import REFERENCE_PRECISION, MissingBoundError, card_bound
from inference.schema import FEATURE_SCHEMAS, SCREENING_NAMES, UnknownFeatureSchemaError, model_columns
from wasm_rules import OUTCOMES, RuleError, Sandbox

__all__ = ["SCORE_MARGIN", "SCORE_TOLERANCE", "Replayer"]

SCORE_TOLERANCE = 1e-4  # |recorded - reference| allowed every version, and the least any is held to
SCORE_MARGIN = 1e-6  # beside a card's bound: score_ppm's rounding (half a millionth at most), with room
_KEEP = 1000  # version 4 bodies without an explanation listed by name per model (the rest counted)
_RERUN = ("MODEL_ERROR", None)  # fail_safe values (prefixes) whose decision the rules re-make
_NOT_RUN = ("SANDBOX_FAULT", "DEADLINE_EXCEEDED")  # recorded fail-safe HOLD, nothing re-run
Fetch = Callable[[str], bytes]
_new_row = tuple.__new__  # builds a _Row in C: the NamedTuple constructor is a Python call
_NUMBER_TYPES = frozenset({float, int, type(None)})  # JSON numbers and null (bool is refused)


class _Row(NamedTuple):
    seq: int
    trace_id: str
    values: list[float | None]  # as recorded, null (or NaN) for NaN
    score: float
    body: dict[str, Any]
    schema: str  # the feature schema the values follow


@dataclass
class _Rules:
    rules: ActiveRules
    fired: dict[Any, list[dict[str, str]]] = field(default_factory=dict)  # by bitset words


class Replayer:
    """Buffers decision bodies and replays them in batches; ``add`` and ``flush`` return the
    mismatches found (as ``ReplayMismatch``), ``replayed`` / ``rescored`` count what was re-run."""

    def __init__(self, sandbox: Sandbox, fetch_module: Fetch, fetch_model: Fetch, *,
                 batch: int = 8192, file: str = "records.jsonl", fetch_card: Fetch | None = None) -> None:
        """``fetch_card(sha)`` gives the bytes of model ``sha``'s card (``models/<sha>/card.json``):
        without it, a version 6 score at a precision other than the reference's has no bound."""
        self._sandbox, self._fetch_module, self._fetch_model = sandbox, fetch_module, fetch_model
        self._fetch_card = fetch_card
        self._cards: dict[str, dict[str, Any] | str] = {}  # by model: the card, or why there is none
        self._bounds: dict[tuple[str, str, str], float | str] = {}  # (model, backend, precision) -> tolerance
        self._batch, self._file = batch, file
        self._rows: list[_Row] = []
        self._modules: dict[tuple[str, str], _Rules | BundleError] = {}  # by (sha, feature schema)
        self._models: dict[str, MlpModel | BundleError] = {}
        self.replayed = 0  # decisions whose rules were re-run
        self.rescored = 0  # decisions whose score was recomputed
        self.fail_safe = 0  # fail-safe HOLDs checked for their shape (nothing to re-run)
        self.explained = 0  # decisions (versions 3 and 4) whose reason codes were recomputed
        self._explainers: dict[tuple[str, str], int] = {}  # (backend, model) -> first explained seq
        # (backend, model) -> version 4 bodies without an explanation so far (the first _KEEP), and
        # how many: named when a version 4 body of the same model turns out to state one
        self._unexplained: dict[tuple[str, str], tuple[list[tuple[int, str]], int]] = {}

    def _miss(self, row: _Row | tuple[int, str], kind: str, detail: str) -> ReplayMismatch:
        seq, tid = (row.seq, row.trace_id) if isinstance(row, _Row) else row
        return ReplayMismatch(detail, kind=kind, file=self._file, seq=seq, trace_id=tid)

    def add(self, seq: int, trace_id: str, body: Any) -> list[BundleError]:
        """Queue one decision body; replays the queue when it is full."""
        try:
            f = body["features"]
            schema = f["schema"]
            names = FEATURE_SCHEMAS.get(schema) if type(schema) is str else None
            if names is None:
                raise ValueError(f"unknown feature schema {schema!r}")
            if body["schema"] in FIXED_SCHEMAS:  # integers in fixed units, checked as read
                got, as_float = features_from_body(body)
                values: list[float | None] = list(got)
                score: object = None if as_float != as_float else as_float
            else:
                if "scaled" in f or "score_ppm" in body:
                    raise ValueError(f"a {body['schema']} body states features.scaled or score_ppm "
                                     "(versions 4 and 5 only)")
                values, score = f["values"], body["score"]
            if (body["schema"] not in DECISION_SCHEMAS or type(values) is not list
                    or len(values) != len(names) or not _NUMBER_TYPES.issuperset(map(type, values))
                    or type(f["sha256"]) is not str
                    or type(body["model"]["sha256"]) is not str
                    or type(body["rules"]["module_sha256"]) is not str
                    or (score is not None and type(score) is not float and type(score) is not int)):
                raise ValueError(f"not a {DECISION_SCHEMA} body with the {len(names)} feature values of "
                                 f"{schema}, a score, model and rule module")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return [self._miss((seq, trace_id), "replay.body", f"decision body cannot be replayed: {exc}")]
        if (found := self._screening(seq, trace_id, body, names, values)) is not None:
            return [found]
        if (found := self._precision(seq, trace_id, body)) is not None:
            return [found]
        if (found := self._version(seq, trace_id, body)) is not None:
            return [found]
        earlier = self._stripped_before(seq, body)
        self._rows.append(_new_row(_Row, (seq, trace_id, values, math.nan if score is None else float(score),
                                          body, schema)))
        return earlier + (self.flush() if len(self._rows) >= self._batch else [])

    def _screening(self, seq: int, trace_id: str, body: dict[str, Any], names: tuple[str, ...],
                   values: list[float | None]) -> BundleError | None:
        """A version 5, 6 or 7 body's screening columns are those its stated lists and hits give
        (``ScreeningEvidence.values``; version 7: and where screening stopped); a body of another
        version states no screening."""
        if body["schema"] not in SCREENED_SCHEMAS:
            if "screening" in body:
                return self._miss((seq, trace_id), "replay.screening", f"a {body['schema']} body states "
                                  f"screening; only {' and '.join(SCREENED_SCHEMAS)} records do")
            return None
        try:
            evidence = evidence_from_json(body["screening"])
        except (KeyError, TypeError, ValueError) as exc:
            return self._miss((seq, trace_id), "replay.screening", f"screening cannot be read: {exc}")
        if names[-len(SCREENING_NAMES):] != SCREENING_NAMES:
            return self._miss((seq, trace_id), "replay.screening", f"a {body['schema']} body's features "
                              f"({body['features']['schema']}) have no screening columns")
        if not evidence.lists and (evidence.hits or evidence.cleared):
            return self._miss((seq, trace_id), "replay.screening", "the record states hits but names no list "
                              "it was screened against")
        if (evidence.stopped is not None) is not (body["schema"] == DECISION_SCHEMA_V7):
            said = ("states where its screening stopped at its budget; only" if evidence.stopped is not None
                    else "does not state where its screening stopped, as every")
            return self._miss((seq, trace_id), "replay.screening", f"a {body['schema']} body {said} "
                              f"{DECISION_SCHEMA_V7} record does")
        want = evidence.values()
        got = values[-len(SCREENING_NAMES):]
        for name, w, g in zip(SCREENING_NAMES, want, got, strict=True):
            g_nan = g is None or g != g
            if (w != w) is not g_nan or (not g_nan and g != w):
                return self._miss((seq, trace_id), "replay.screening",
                                  f"feature {name} is {None if g_nan else g}, but the lists and hits the "
                                  f"record states give {None if w != w else w}")
        return None

    def _precision(self, seq: int, trace_id: str, body: dict[str, Any]) -> BundleError | None:
        """A version 6 body names the precision its score was computed at, a version 7 one may (where
        its scorer stated one); no earlier one does."""
        model = body["model"]
        if body["schema"] == DECISION_SCHEMA_V7 and "precision" not in model:
            return None
        if body["schema"] in PRECISION_SCHEMAS:
            got = model.get("precision")
            if type(got) is not str or not got or type(model.get("backend")) is not str:
                said = f"model is {model!r}"[:400]
                return self._miss((seq, trace_id), "replay.precision", f"a {body['schema']} body names the "
                                  f"backend and the precision its score was computed at; {said}")
        elif "precision" in model:
            return self._miss((seq, trace_id), "replay.precision", f"a {body['schema']} body states "
                              f"model.precision; only {' and '.join(PRECISION_SCHEMAS)} records do")
        return None

    def _version(self, seq: int, trace_id: str, body: dict[str, Any]) -> BundleError | None:
        """An explanation is checked only in a body of a kind that states one
        (``states_explanation``): one in another body is unchecked text, and a body without one
        sealed after one with an explanation by the same backend and model (``_explainers``) is a
        record that lost its explanation."""
        schema = body["schema"]
        model = (str(body["model"].get("backend")), body["model"]["sha256"])
        if states_explanation(body):
            self._explainers.setdefault(model, seq)
            return None
        if "explanation" in body:
            return self._miss((seq, trace_id), "replay.explanation", f"a {schema} body states an "
                              f"explanation; only {DECISION_SCHEMA_V3} records and later ones do")
        first = self._explainers.get(model)
        if first is not None and first < seq:
            return self._miss((seq, trace_id), "replay.explanation", f"sealed as {schema}, without an "
                              f"explanation, after seq {first} sealed one with an explanation with the "
                              f"same backend and model {model[1][:12]}")
        if schema in FIXED_SCHEMAS:  # named if a version 4 or 5 body of this model states one later
            kept, count = self._unexplained.get(model, ([], 0))
            if len(kept) < _KEEP:
                kept.append((seq, trace_id))
            self._unexplained[model] = (kept, count + 1)
        return None

    def _stripped_before(self, seq: int, body: dict[str, Any]) -> list[BundleError]:
        """Whether a version 4 body states an explanation is a matter of its backend and model
        alone (a model that can be attributed always is): when one does, every version 4 body of
        the same backend and model seen before it without the field lost its explanation."""
        if body["schema"] not in FIXED_SCHEMAS or "explanation" not in body:
            return []
        model = (str(body["model"].get("backend")), body["model"]["sha256"])
        kept, count = self._unexplained.pop(model, ([], 0))
        said = (f"sealed without an explanation, while seq {seq} of the same backend "
                f"and model {model[1][:12]} states one")
        out: list[BundleError] = [self._miss(row, "replay.explanation", said) for row in kept]
        if count > len(kept):
            out[-1] = self._miss(kept[-1], "replay.explanation", f"sealed without an "
                                 f"explanation, as are {count - len(kept):,} more records not listed, while "
                                 f"seq {seq} of the same backend and model {model[1][:12]} states one")
        return out

    def flush(self) -> list[BundleError]:
        """Replay everything queued."""
        rows, self._rows = self._rows, []
        by_schema: dict[str, list[_Row]] = defaultdict(list)
        for r in rows:
            by_schema[r.schema].append(r)
        out: list[BundleError] = []
        for schema, group in by_schema.items():
            out += self._replay(schema, group)
        out.sort(key=lambda e: -1 if e.seq is None else e.seq)  # in record order, as an examiner reads
        return out

    def _replay(self, schema: str, rows: list[_Row]) -> list[BundleError]:
        """Replay rows whose features all follow ``schema`` (one matrix width)."""
        out: list[BundleError] = []
        matrix = np.array([r.values for r in rows], dtype=np.float64)  # null -> NaN
        scores = np.array([r.score for r in rows], dtype=np.float64)
        out += self._check_feature_hashes(rows, matrix)
        rerun: dict[str, list[int]] = defaultdict(list)
        scored: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(rows):
            b = r.body
            fs = b.get("fail_safe")
            if fs is None and r.score == r.score:  # the common case: scored, rules ran
                scored[b["model"]["sha256"]].append(i)
                rerun[b["rules"]["module_sha256"]].append(i)
                continue
            kind = fs.split(":", 1)[0] if isinstance(fs, str) else None
            if (fs is not None and not isinstance(fs, str)) or kind not in (*_RERUN, *_NOT_RUN):
                out.append(self._miss(r, "replay.fail_safe", f"unknown fail_safe {fs!r}"))
                continue
            if math.isnan(r.score):
                if states_explanation(b) and b.get("explanation", 0) is not None:
                    said = "has no explanation" if "explanation" not in b else "states an explanation"
                    out.append(self._miss(r, "replay.explanation", f"a decision the model did not score "
                                          f"{said}; it must be null"))
                # The spec allows a null score with MODEL_ERROR or DEADLINE_EXCEEDED only, but the
                # pipeline records SANDBOX_FAULT (it takes precedence) when the model failed in the same
                # batch, score null: a genuine record, and a fail-safe HOLD whatever its score.
                if kind not in ("MODEL_ERROR", "DEADLINE_EXCEEDED", "SANDBOX_FAULT"):
                    out.append(self._miss(r, "replay.score", f"score is null but fail_safe is {fs!r}"))
            else:
                scored[str(b["model"]["sha256"])].append(i)
            if kind in _NOT_RUN:
                self.fail_safe += 1
                if b.get("decision") != FAIL_SAFE_DECISION or b.get("fired") != []:
                    out.append(self._miss(r, "replay.fail_safe", f"{kind} must record HOLD with no fired "
                                          f"rule; records {b.get('decision')!r}, fired {b.get('fired')!r}"))
                continue
            rerun[str(b["rules"]["module_sha256"])].append(i)
        for sha, idx in rerun.items():
            out += self._rules(sha, schema, [rows[i] for i in idx], matrix[idx], scores[idx])
        for sha, idx in scored.items():
            out += self._score(sha, schema, [rows[i] for i in idx], matrix[idx], scores[idx])
        return out

    def _check_feature_hashes(self, rows: list[_Row], matrix: npt.NDArray[np.float64]) -> list[BundleError]:
        flat = np.ascontiguousarray(matrix, dtype="<f8").tobytes()
        width = 8 * matrix.shape[1]
        sha = hashlib.sha256
        out: list[BundleError] = []
        for i, r in enumerate(rows):
            want = r.body["features"]["sha256"]
            got = sha(flat[i * width:(i + 1) * width]).hexdigest()
            if got != want:
                out.append(self._miss(r, "replay.features_sha256", f"features.sha256 is {want!r}, the "
                                      f"recorded values hash to {got}"))
        return out

    def _module(self, sha: str, schema: str) -> _Rules | BundleError:
        got = self._modules.get((sha, schema))
        if got is None:
            try:
                data = self._fetch_module(sha)
                if hashlib.sha256(data).hexdigest() != sha:
                    raise ReplayMismatch(f"rules/{sha}.wasm hashes to {hashlib.sha256(data).hexdigest()}",
                                         kind="replay.module", file=f"rules/{sha}.wasm")
                got = _Rules(ActiveRules.of(self._sandbox.load(data), schema))
            except BundleError as exc:
                got = exc
            except (RuleError, ValueError) as exc:
                got = ReplayMismatch(f"rule module cannot run: {exc}", kind="replay.module",
                                     file=f"rules/{sha}.wasm")
            self._modules[sha, schema] = got
        return got

    def _rules(self, sha: str, schema: str, rows: list[_Row], matrix: npt.NDArray[np.float64],
               scores: npt.NDArray[np.float64]) -> list[BundleError]:
        mod = self._module(sha, schema)
        if isinstance(mod, BundleError):
            return [self._miss(r, mod.kind, f"{mod.file}: {mod.detail}") for r in rows]
        module, manifest = mod.rules.module, mod.rules.module.manifest
        full = np.hstack([matrix, scores[:, None]])[:, mod.rules.columns]
        try:
            result = module.evaluate(full)
        except RuleError as exc:
            return [self._miss(r, "replay.sandbox", f"the module faults on replay: {exc}") for r in rows]
        self.replayed += len(rows)
        out: list[BundleError] = []
        decisions = [OUTCOMES[k] for k in result.outcomes.tolist()]
        words_list = result.fired.tolist()
        keys: list[Any] = [w[0] for w in words_list] if module.words == 1 else list(map(tuple, words_list))
        cache, ours = mod.fired, (manifest.ruleset_id, manifest.version)
        for i, key in enumerate(keys):
            want = cache.get(key)
            if want is None:
                words = words_list[i]
                want = cache[key] = [
                    {"id": x.id, "outcome": x.outcome, "reason": x.reason}
                    for k, x in enumerate(manifest.rules) if words[k // 64] >> (k % 64) & 1]
            r = rows[i]
            b = r.body
            if decisions[i] != b.get("decision") or want != b.get("fired"):
                out.append(self._miss(r, "replay.outcome", f"records {b.get('decision')} firing "
                                      f"{_ids(b.get('fired'))}; module {sha[:12]} gives {decisions[i]} "
                                      f"firing {_ids(want)}" + _reasons(want, b.get("fired"))))
            rs = b["rules"]
            if (rs.get("ruleset_id"), rs.get("version")) != ours:
                out.append(self._miss(r, "replay.ruleset", f"records ruleset {rs.get('ruleset_id')}@"
                                      f"{rs.get('version')}, module {sha[:12]} is {ours[0]}@{ours[1]}"))
        return out

    def _model(self, sha: str) -> MlpModel | BundleError:
        got = self._models.get(sha)
        if got is None:
            where = f"models/{sha}/weights.npz"
            try:
                data = self._fetch_model(sha)
                if hashlib.sha256(data).hexdigest() != sha:
                    raise ReplayMismatch(f"hashes to {hashlib.sha256(data).hexdigest()}",
                                         kind="replay.model", file=where)
                got = load_npz(data)
            except BundleError as exc:
                got = exc
            except ModelError as exc:
                got = ReplayMismatch(f"model cannot be loaded: {exc}", kind="replay.model", file=where)
            self._models[sha] = got
        return got

    def _score(self, sha: str, schema: str, rows: list[_Row], matrix: npt.NDArray[np.float64],
               scores: npt.NDArray[np.float64]) -> list[BundleError]:
        model = self._model(sha)
        if isinstance(model, BundleError):
            return [self._miss(r, model.kind, f"{model.file}: {model.detail}") for r in rows]
        try:
            width = model_columns(model.feature_names, schema)
        except UnknownFeatureSchemaError as exc:
            return [self._miss(r, "replay.model", f"models/{sha}/weights.npz: {exc}") for r in rows]
        got = forward(model, matrix[:, :width])
        self.rescored += len(rows)
        tolerance = np.full(len(rows), SCORE_TOLERANCE)
        out: list[BundleError] = []
        unbound: set[int] = set()
        for i, r in enumerate(rows):
            m = r.body["model"]
            if states_precision(r.body) and m["precision"] != REFERENCE_PRECISION:
                tol = self._tolerance(sha, str(m["backend"]), str(m["precision"]))
                if isinstance(tol, str):
                    out.append(self._miss(r, "replay.precision", tol))
                    unbound.add(i)
                else:
                    tolerance[i] = tol
        bad = [i for i in np.flatnonzero(~(np.abs(got - scores) <= tolerance)).tolist() if i not in unbound]
        out += [self._miss(rows[i], "replay.score", f"records score {scores[i]!r}{_at(rows[i].body)}; the "
                           f"numpy model {sha[:12]} gives {got[i]!r} (|diff| {abs(got[i] - scores[i]):.3g} > "
                           f"{tolerance[i]:.3g})") for i in bad]
        return out + self._explanations(model, rows, matrix[:, :width], scores, set(bad))

    def _tolerance(self, sha: str, backend: str, precision: str) -> float | str:
        """How far from the reference a score model ``sha`` computed at ``precision`` on ``backend``
        may lie: the card's bound plus ``SCORE_MARGIN``, at least ``SCORE_TOLERANCE``; or why it
        has no bound (the text of a ``replay.precision`` mismatch)."""
        key = (sha, backend, precision)
        got = self._bounds.get(key)
        if got is None:
            card = self._card(sha)
            where = f"models/{sha}/card.json"
            if isinstance(card, str):
                got = (f"the score was computed at precision {precision} on {backend}, which replay holds "
                       f"to the bound model {sha[:12]}'s card states for it, and {card}")
            else:
                try:
                    got = max(SCORE_TOLERANCE, card_bound(card, backend, precision) + SCORE_MARGIN)
                except MissingBoundError as exc:
                    got = (f"the score was computed at precision {precision} on {backend}, and {where} "
                           f"(model {sha[:12]}) has no bound for it: {exc}")
            self._bounds[key] = got
        return got

    def _card(self, sha: str) -> dict[str, Any] | str:
        """Model ``sha``'s card, or why it cannot be read."""
        got = self._cards.get(sha)
        if got is None:
            if self._fetch_card is None:
                got = "no model card was given to replay"
            else:
                try:
                    doc = orjson.loads(self._fetch_card(sha))
                    got = doc if isinstance(doc, dict) else f"models/{sha}/card.json is not a JSON object"
                except BundleError as exc:
                    got = f"models/{sha}/card.json cannot be read: {exc.detail}"
                except orjson.JSONDecodeError as exc:
                    got = f"models/{sha}/card.json is not JSON: {exc}"
            self._cards[sha] = got
        return got

    def _explanations(self, model: MlpModel, rows: list[_Row], x: npt.NDArray[np.float64],
                      scores: npt.NDArray[np.float64], unscored: set[int]) -> list[BundleError]:
        """Bodies that state an explanation: each ``explanation`` against the one the model gives
        (see the module); not where the model gives another score (``unscored``), already a
        mismatch of its own."""
        v3 = [i for i, r in enumerate(rows) if states_explanation(r.body) and i not in unscored]
        if not v3:
            return []
        want = [i for i in v3 if is_explained(float(scores[i]), str(rows[i].body.get("decision")))]
        attr = explain(model, x[want]) if want else np.empty((0, x.shape[1]))
        at = {i: k for k, i in enumerate(want)}
        self.explained += len(want)
        out: list[BundleError] = []
        for i in v3:
            b = rows[i].body
            if "explanation" not in b:
                out.append(self._miss(rows[i], "replay.explanation",
                                      f"a {b['schema']} body has no explanation"))
                continue
            k = at.get(i)
            problem = check_explanation(model, x[i], None if k is None else attr[k], float(scores[i]),
                                        str(b.get("decision")), b["explanation"], SCORE_TOLERANCE)
            if problem is not None:
                out.append(self._miss(rows[i], "replay.explanation", problem[:600]))
        return out


def _at(body: dict[str, Any]) -> str:
    """Where a version 6 body says its score was computed (empty for earlier versions)."""
    if not states_precision(body):
        return ""
    return f" computed at {body['model']['precision']} on {body['model']['backend']}"


def _ids(fired: object) -> list[object]:
    if not isinstance(fired, list):
        return [fired]
    return [h.get("id") if isinstance(h, dict) else h for h in fired]


def _reasons(want: list[dict[str, str]], got: object) -> str:
    if _ids(want) != _ids(got) or not isinstance(got, list):
        return ""
    return f" (fired outcome/reason differ from the module manifest: {got!r} vs {want!r})"[:600]
