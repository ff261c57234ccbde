"""The decision record (``sealtrail.decision/6``, or ``/7`` where screening stopped at its budget;
``/5`` before the score's precision, ``/4`` before
screening, ``/3`` before numbers in fixed units, ``/2`` before explanations, ``/1`` before account
risk): what one sealed decision binds.

The ledger envelope adds ``trace_id`` (UUIDv7), ``recorded_at`` and ``payload_sha256`` (the raw
message, kept apart so that it can be purged); this body binds the rest of DESIGN.md
invariant 3: who asked (X.509 principal), the input (raw and canonical transaction hashes),
the features (values and SHA-256, with the reference tables), the model (SHA-256 and
backend), the score, the rule module (SHA-256, ruleset id and version), the outcome (decision,
fired rules with reasons, fuel) and the stage latencies. No personal data from the payment is
in it: names and accounts stay in the purgeable payload.

Version 2 adds ``account_risk`` (``audit.decide.account_risk``): the originator's and the
beneficiary's keyed account, each one's risk before and after this decision's points, their
maximum, the sides that raised an account alert, and the policy with its constants. A body
without it is version 1, as every record sealed before it was.

Version 3 adds ``explanation`` (``audit.decide.explanation``): the reason codes of a decision the
model scored high or the rules held, with each code's contribution to the score and its words,
or ``null``. A pipeline whose scorer carries no model to attribute to still seals version 2.

Version 4 holds no float (``audit.decide.fixed_point``): each feature value is an integer count of
``10**-digits`` in ``features.scaled``, with the digits of each column beside it in
``features.digits``, and the score is ``score_ppm``, an integer count of millionths, in place of
``score``; the pipeline rounds its values to those units before the model and the rules read
them. ``explanation`` is there when the model can be attributed (as in version 3) and absent
otherwise. Versions 1 to 3 state feature values and the score as JSON numbers, ``null`` for a
missing value (NaN); JSON round-trips float64 exactly. Either way, replaying the rule module on
the recorded values reproduces the outcome; ``features_from_body`` and ``body_score`` read every
version.

Version 5 is version 4 with ``screening`` (``audit.screening.evidence``): the list versions the
payment's parties and free text were screened against, the hits (list, entry, listed name matched,
score, basis, where in the payment) and findings on the screening (a stale list), and its features
follow ``sealtrail.features/5`` (``sealtrail.features/7`` from this release: the same with the
fan-out of a forwarded amount's sender), whose screening columns those hits give. A pipeline without a
screener still seals version 5, naming no list.

Version 6 is version 5 with ``model.precision``: the arithmetic the score was computed at
(``inference.precision``: ``fp32`` for the numpy reference, onnxruntime and CuPy, ``fp16`` or
``int8`` for a TensorRT engine built so, ``fp64`` or ``fp16`` for numpy asked to). Replay holds a
score at the reference's own precision to the fixed tolerance, and one at another precision to the
bound the model card states for it (``audit.bundle.replay``). A scorer that states no precision
still seals version 5.

Version 7 is version 6 whose screening stopped at its budget (``inference.screening.screen``):
``screening.stopped`` names where in the payment, ``screening.budget`` the budget it had, the hits
are those found before it stopped, and the screening columns whose values depend on the rest (the
best, party and text scores, the count of hits) are missing. Only such a decision is sealed as
version 7 (with ``model.precision`` where its scorer states one); every other stays version 6, so
a version 6 or 5 record's screening was done in full, and screening it again without a budget finds
its hits. Bundle verification screens a version 7 payment again under the budget it states.

This module owns the record's layout: ``decision_body`` states it, and ``decision_bodies`` makes
a whole batch's canonical bodies from columns (spliced into one template per batch, with the
ledger's own encoder, ``ledger.jcs``); nothing else builds a body field by field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from audit.decide.account_risk import AccountRisk
from audit.decide.explanation import Explanation
from audit.decide.fixed_point import (
    FIXED_SCHEMA,
    FIXED_SCHEMAS,
    body_score,
    decode,
    decode_score,
    scaled_row,
    scaled_score,
)
from audit.screening.evidence import ScreeningEvidence
from inference.schema import UnknownFeatureSchemaError, feature_digits
from ledger.jcs import (
    JCS_NULL,
    CanonicalError,
    Jcs,
    Template,
    canonical_bytes,
    jcs_int,
    jcs_int_rows,
    jcs_numbers,
    jcs_rows,
    jcs_str,
)

__all__ = [
    "DECISION_KIND",
    "DECISION_SCHEMA",
    "DECISION_SCHEMAS",
    "DECISION_SCHEMA_V1",
    "DECISION_SCHEMA_V2",
    "DECISION_SCHEMA_V3",
    "DECISION_SCHEMA_V4",
    "DECISION_SCHEMA_V5",
    "DECISION_SCHEMA_V6",
    "DECISION_SCHEMA_V7",
    "FAIL_SAFE_DECISION",
    "FIXED_SCHEMAS",
    "PRECISION_SCHEMAS",
    "RISK_SCHEMAS",
    "SCREENED_SCHEMAS",
    "SLOTS",
    "BodyTemplate",
    "DecisionBatch",
    "DecisionColumns",
    "DecisionInputs",
    "IdempotencyKey",
    "RuleHit",
    "body_score",
    "decision_bodies",
    "decision_body",
    "features_from_body",
    "fired_json",
    "jcs_fired",
    "jcs_int",  # jcs_int, jcs_numbers, jcs_rows, jcs_str: ledger.jcs's, still importable from here
    "jcs_numbers",
    "jcs_rows",
    "jcs_str",
    "slot_parts",
    "states_explanation",
    "states_precision",
]

DECISION_KIND = "decision"
DECISION_SCHEMA_V1 = "sealtrail.decision/1"  # before account risk
DECISION_SCHEMA_V2 = "sealtrail.decision/2"  # version 1 and ``account_risk``
DECISION_SCHEMA_V3 = "sealtrail.decision/3"  # version 2 and ``explanation``
DECISION_SCHEMA_V4 = FIXED_SCHEMA  # version 3 with numbers in fixed units
DECISION_SCHEMA_V5 = FIXED_SCHEMAS[1]  # version 4 and ``screening``
DECISION_SCHEMA_V6 = FIXED_SCHEMAS[2]  # version 5 and ``model.precision``
DECISION_SCHEMA_V7 = FIXED_SCHEMAS[3]  # version 6 whose screening stopped at its budget
DECISION_SCHEMA = DECISION_SCHEMA_V6  # what is sealed (version 7 where screening stopped)
# every version read and replayed
DECISION_SCHEMAS = (DECISION_SCHEMA_V1, DECISION_SCHEMA_V2, DECISION_SCHEMA_V3, DECISION_SCHEMA_V4,
                    DECISION_SCHEMA_V5, DECISION_SCHEMA_V6, DECISION_SCHEMA_V7)
# those stating ``account_risk``
RISK_SCHEMAS = (DECISION_SCHEMA_V2, DECISION_SCHEMA_V3, DECISION_SCHEMA_V4, DECISION_SCHEMA_V5,
                DECISION_SCHEMA_V6, DECISION_SCHEMA_V7)
# those stating ``screening`` (the lists and hits)
SCREENED_SCHEMAS = (DECISION_SCHEMA_V5, DECISION_SCHEMA_V6, DECISION_SCHEMA_V7)
# those stating ``model.precision`` (version 7: where its scorer states one, see ``states_precision``)
PRECISION_SCHEMAS = (DECISION_SCHEMA_V6, DECISION_SCHEMA_V7)
FAIL_SAFE_DECISION = "HOLD"


@dataclass(frozen=True)
class RuleHit:
    id: str
    outcome: str
    reason: str


@dataclass(frozen=True)
class IdempotencyKey:
    """The idempotency key a decision record seals (``idempotency`` in the body; records sealed
    before the field existed have none). ``key_sha256`` is SHA-256 of the key's text (its source,
    a colon, the value); ``first_seq`` is set when the same principal's key was decided before on
    different content: this decision is then a second one, and says so (``finding``)."""

    key_sha256: str
    source: str  # uetr | reference (derived from the message) | header (sent by the caller)
    first_seq: int | None = None

    @property
    def finding(self) -> str | None:
        if self.first_seq is None:
            return None
        return f"idempotency key reused with different content: first decided at seq {self.first_seq}"

    def to_json(self) -> dict[str, Any]:
        return {"key_sha256": self.key_sha256, "source": self.source, "first_seq": self.first_seq,
                "finding": self.finding}


@dataclass(frozen=True)
class DecisionInputs:
    """Everything one record states, gathered by the pipeline."""

    at: str  # event time the features used (UTC, microseconds, Z)
    principal: dict[str, Any]
    message_format: str
    message_type: str
    reference: str
    raw_sha256: str
    transaction_sha256: str
    feature_schema: str
    feature_values: list[float]  # NaN for missing
    features_sha256: str
    tables: dict[str, str]
    model_sha256: str
    backend: str
    score: float  # NaN when the model did not score
    module_sha256: str
    ruleset_id: str
    ruleset_version: str
    decision: str
    fired: tuple[RuleHit, ...]
    fail_safe: str | None  # why the decision is a fail-safe HOLD, or None
    fuel: int  # fuel the rule module used for the whole batch
    batch_size: int
    latency_us: dict[str, int]
    idempotency: IdempotencyKey | None = None  # the sealed key; None: the body has no "idempotency"
    parser: str | None = None  # inference.messages.PARSER that read the message; None: not stated (version 1)
    account_risk: AccountRisk | None = None  # None: a version 1 body (no account risk)
    explanation: Explanation | None = None  # None: no "explanation" field (version 1 or 2, or 4 unattributed)
    fixed_point: bool = False  # version 4: feature values and score in fixed units (no float)
    screening: ScreeningEvidence | None = None  # version 5 (with fixed_point): the lists and hits
    precision: str | None = None  # version 6 (with screening): the precision the score was computed at


class DecisionBatch(Sequence[DecisionInputs]):
    """The ``DecisionInputs`` of one batch, made on demand, and the columns they are made from.

    A pipeline hands this to its index: an index that wants whole ``DecisionInputs`` indexes it
    like a list (each item is made when asked for, equal to what the record states), while one
    that needs only a few fields reads the columns and makes no per-decision object at all.
    """

    def __init__(self, make: Callable[[int], DecisionInputs], *, at: Sequence[str],
                 principal: Sequence[dict[str, Any]], decision: Sequence[str], score: Sequence[float],
                 fired: Sequence[tuple[RuleHit, ...]], fail_safe: Sequence[str | None], ruleset_id: str,
                 ruleset_version: str, module_sha256: str,
                 account_risk: Sequence[AccountRisk | None] | None = None) -> None:
        n = len(at)
        if not len(principal) == len(decision) == len(score) == len(fired) == len(fail_safe) == n:
            raise ValueError("every column of a decision batch has one value per decision")
        if account_risk is not None and len(account_risk) != n:
            raise ValueError("every column of a decision batch has one value per decision")
        self.account_risk = account_risk  # None: no decision of the batch states account risk
        self._make = make
        self.at, self.principal, self.decision, self.score = at, principal, decision, score
        self.fired, self.fail_safe = fired, fail_safe  # score: NaN when the model did not score
        self.ruleset_id, self.ruleset_version, self.module_sha256 = ruleset_id, ruleset_version, module_sha256

    def __len__(self) -> int:
        return len(self.at)

    @overload
    def __getitem__(self, i: int) -> DecisionInputs: ...

    @overload
    def __getitem__(self, i: slice) -> list[DecisionInputs]: ...

    def __getitem__(self, i: int | slice) -> DecisionInputs | list[DecisionInputs]:
        n = len(self.at)
        if isinstance(i, slice):
            return [self._make(k) for k in range(*i.indices(n))]
        if not -n <= i < n:
            raise IndexError("decision batch index out of range")
        return self._make(i % n)


def _num(v: float) -> float | None:
    return None if math.isnan(v) else v


def decision_body(d: DecisionInputs) -> dict[str, Any]:
    """The record body as a JSON object (canonicalised by the caller)."""
    if d.fixed_point:  # version 4: the numbers as integers in fixed units
        if d.account_risk is None:
            raise ValueError("a version 4 decision record states account risk")
        digits = feature_digits(d.feature_schema)
        if d.screening is None:
            if d.precision is not None:
                raise ValueError("only a record that states its screening (version 6) states its precision")
            schema = DECISION_SCHEMA_V4
        elif d.screening.stopped is not None:
            schema = DECISION_SCHEMA_V7
        else:
            schema = DECISION_SCHEMA_V5 if d.precision is None else DECISION_SCHEMA_V6
        numbers: dict[str, Any] = {"digits": list(digits), "scaled": scaled_row(d.feature_values, digits)}
        score: tuple[str, Any] = ("score_ppm", scaled_score(d.score))
    else:
        if d.screening is not None or d.precision is not None:
            raise ValueError("only a record in fixed units (versions 5 and 6) states screening or precision")
        schema = _schema(d)
        numbers = {"values": [_num(v) for v in d.feature_values]}
        score = ("score", _num(d.score))
    body: dict[str, Any] = {
        "schema": schema,
        "at": d.at,
        "principal": d.principal,
        "input": {"format": d.message_format, "message_type": d.message_type, "reference": d.reference,
                  "raw_sha256": d.raw_sha256, "transaction_sha256": d.transaction_sha256},
        "features": {"schema": d.feature_schema, **numbers, "sha256": d.features_sha256, "tables": d.tables},
        "model": ({"sha256": d.model_sha256, "backend": d.backend} if d.precision is None
                  else {"sha256": d.model_sha256, "backend": d.backend, "precision": d.precision}),
        score[0]: score[1],
        "rules": {"module_sha256": d.module_sha256, "ruleset_id": d.ruleset_id,
                  "version": d.ruleset_version},
        "decision": d.decision,
        "fired": fired_json(d.fired),
        "fail_safe": d.fail_safe,
        "fuel": d.fuel,
        "batch_size": d.batch_size,
        "latency_us": d.latency_us,
    }
    if d.parser is not None:  # additive: records before it were read by parser version 1
        body["input"]["parser"] = d.parser
    if d.idempotency is not None:  # additive: bodies without a key stay as they always were
        body["idempotency"] = d.idempotency.to_json()
    if d.account_risk is not None:  # version 2 on
        body["account_risk"] = d.account_risk.to_json()
    if d.explanation is not None:  # version 3, and version 4 where the model can be attributed
        body["explanation"] = d.explanation.to_json()
    if d.screening is not None:  # version 5 (version 7: with where it stopped)
        body["screening"] = d.screening.to_json()
    return body


def _schema(d: DecisionInputs) -> str:
    if d.explanation is not None:
        if d.account_risk is None:
            raise ValueError("a version 3 decision record states account risk as well as its explanation")
        return DECISION_SCHEMA_V3
    return DECISION_SCHEMA_V1 if d.account_risk is None else DECISION_SCHEMA_V2


def fired_json(hits: Sequence[RuleHit]) -> list[dict[str, str]]:
    """The record's ``fired`` array."""
    return [{"id": h.id, "outcome": h.outcome, "reason": h.reason} for h in hits]


def jcs_fired(hits: Sequence[RuleHit]) -> Jcs:
    """The canonical bytes of the record's ``fired`` array (the pipeline keeps them per set of hits)."""
    return canonical_bytes(fired_json(hits))


def states_precision(body: dict[str, Any]) -> bool:
    """Whether a decision body states the precision its score was computed at: every version 6
    body, and a version 7 body whose scorer stated one (it then has ``model.precision``)."""
    schema = body.get("schema")
    model = body.get("model")
    return schema == DECISION_SCHEMA_V6 or (
        schema == DECISION_SCHEMA_V7 and isinstance(model, dict) and "precision" in model)


def states_explanation(body: dict[str, Any]) -> bool:
    """Whether a decision body is of the kind that states an explanation: every version 3 body, and
    a version 4 body made with a model that can be attributed (it then has the field)."""
    schema = body.get("schema")
    return schema == DECISION_SCHEMA_V3 or (schema in FIXED_SCHEMAS and "explanation" in body)


def features_from_body(body: dict[str, Any]) -> tuple[list[float], float]:
    """The recorded feature values and score of any version, ``null`` back to NaN (for replay);
    ValueError (or KeyError, TypeError) where the body does not hold them as its version says."""
    f = body["features"]
    if body.get("schema") in FIXED_SCHEMAS:
        if "values" in f or "score" in body:  # in place of scaled and score_ppm: never beside them
            raise ValueError("a version 4 to 6 body states features.values or score beside its fixed units")
        digits = f["digits"]
        try:
            want = feature_digits(f["schema"])
        except UnknownFeatureSchemaError as exc:
            raise ValueError(str(exc)) from None
        if (type(digits) is not list or len(digits) != len(want)
                or any(type(d) is not int or d != w for d, w in zip(digits, want, strict=True))):
            raise ValueError(f"features.digits is not that of {f['schema']}")
        return decode(f["scaled"], digits), decode_score(body["score_ppm"])
    if "scaled" in f or "score_ppm" in body:
        raise ValueError(f"a {body.get('schema')} body states features.scaled or score_ppm (versions 4 to 6 "
                         "only)")
    values = [math.nan if v is None else float(v) for v in f["values"]]
    score = body["score"]
    return values, math.nan if score is None else float(score)





# --- canonical bytes of a batch's bodies, spliced from parts canonicalised once ----------------

# The DecisionInputs fields a batch's template holds as constants, beside its tables, which of the
# optional parts its bodies state, and its latency stages: the key of a template kept across
# batches. Every other field is a per-record slot or a per-batch number (tests/audit/test_record.py
# holds the three lists to the dataclass's fields).
_TEMPLATE_KEY = ("feature_schema", "model_sha256", "backend", "module_sha256", "ruleset_id",
                 "ruleset_version", "parser", "fixed_point", "precision")
_TEMPLATE_KEYED_OTHERWISE = ("tables", "idempotency", "account_risk", "explanation", "screening")
_TEMPLATE_PER_BATCH = ("fuel", "batch_size", "latency_us")
_TEMPLATES: dict[tuple[Any, ...], object] = {}
_MISSING = object()

# What differs between the records of a batch: the slots of the template, in the order parts are
# given to it. Only this module puts a value in a slot.
SLOTS = ("at", "decision", "fail_safe", "values", "features_sha256", "fired", "format", "message_type",
         "raw_sha256", "reference", "transaction_sha256", "principal", "score", "queue")


@dataclass(frozen=True)
class DecisionColumns:
    """What differs between the decisions of one batch, one column per field, a value per decision.

    ``principal`` and ``fired`` come already canonical (``canonical_bytes`` of the principal,
    ``jcs_fired`` of the hits): a batch holds few distinct ones, which the pipeline keeps."""

    at: Sequence[str]
    decision: Sequence[str]
    fail_safe: Sequence[str | None]
    feature_values: npt.NDArray[np.float64]  # one row per decision, NaN for missing
    features_sha256: Sequence[str]
    fired: Sequence[Jcs]
    message_format: Sequence[str]
    message_type: Sequence[str]
    raw_sha256: Sequence[str]
    reference: Sequence[str]
    transaction_sha256: Sequence[str]
    principal: Sequence[Jcs]
    score: Sequence[float]  # NaN when the model did not score
    queue_us: Sequence[int]
    scaled_values: npt.NDArray[np.int64] | None = None  # version 4: feature_values in fixed units
    idempotency: Sequence[IdempotencyKey | None] | None = None  # None: no decision of the batch has a key
    account_risk: Sequence[AccountRisk | None] | None = None  # None: version 1 bodies, no account risk
    explanation: Sequence[Explanation | None] | None = None  # None: no body states an explanation
    screening: Sequence[Jcs] | None = None  # version 5: each body's canonical "screening"; None: version 4
    # each decision whose screening stopped at its budget (a version 7 body, made whole); None: none did
    stopped: Sequence[bool] | None = None


class BodyTemplate:
    """The canonical bytes of one batch's decision bodies, spliced from parts made once.

    What the records of a batch share (schema, model, rules, tables, fuel, batch size and the
    stage latencies) is canonicalised once, from ``decision_body`` itself with a marker string in
    each per-record slot (``ledger.jcs.Template``); a record is those bytes with every marker
    replaced by the canonical bytes of its value, which is exactly the canonical bytes of the
    whole record (tests/audit/test_record.py checks it against rfc8785 over many records).
    """

    def __init__(self, template: Template, keyed: bool = False, risked: bool = False,
                 explained: bool = False, fixed: bool = False, slots: int = 0,
                 screened: bool = False) -> None:
        self._template = template
        self._slots = slots  # per-record slots; the per-batch numbers' slots follow (a cached template)
        self.fixed = fixed  # version 4 bodies: "values" and "score" slots hold integers
        self.keyed = keyed  # its bodies hold "idempotency" (a slot after SLOTS)
        self.risked = risked  # its bodies hold "account_risk" (a slot after those): version 2
        self.explained = explained  # its bodies hold "explanation" (a slot after those): version 3
        self.screened = screened  # its bodies hold "screening" (the last slot): version 5

    @classmethod
    def for_batch(cls, shared: DecisionInputs) -> BodyTemplate | None:
        """The template for records that state what ``shared`` states outside the slots, or None
        when its constant parts cannot be spliced (then canonicalise each body whole).

        Made once per kind of batch (``_TEMPLATE_KEY``: model, rules, tables, shape) with the
        per-batch numbers (fuel, batch size, stage latencies) as slots too, and bound to each
        batch's numbers: on the single-request path a batch is one record, and canonicalising
        the template cost more than splicing it."""
        stages = tuple(sorted(k for k in shared.latency_us if k != "queue"))
        numbers = (shared.fuel, shared.batch_size, *(shared.latency_us[k] for k in stages))
        try:
            parts = [jcs_int(v) for v in numbers]
        except TypeError:  # a value the splice does not vouch for: this batch's own template
            return cls._made(shared, None)
        key = (*(getattr(shared, name) for name in _TEMPLATE_KEY), tuple(sorted(shared.tables.items())),
               shared.idempotency is not None, shared.account_risk is not None,
               shared.explanation is not None, shared.screening is not None, stages)
        got = _TEMPLATES.get(key, _MISSING)
        if got is _MISSING:
            got = cls._made(shared, stages)
            if len(_TEMPLATES) >= 64:  # a handful of models and rule versions at a time
                _TEMPLATES.clear()
            _TEMPLATES[key] = got
        if got is None:
            return None
        assert isinstance(got, BodyTemplate)
        first = got._slots
        return cls(got._template.bind({first + i: part for i, part in enumerate(parts)}),
                   got.keyed, got.risked, got.explained, got.fixed, screened=got.screened)

    @classmethod
    def _made(cls, shared: DecisionInputs, stages: tuple[str, ...] | None) -> BodyTemplate | None:
        """The template of ``shared``; unless ``stages`` is None (a template for this batch
        alone), with the fuel, the batch size and each of ``stages`` (latency stages) as slots
        numbered after the per-record ones."""
        body = decision_body(shared)
        marks = {slot: Template.marker(slot) for slot in SLOTS}
        body["at"], body["decision"], body["fail_safe"] = marks["at"], marks["decision"], marks["fail_safe"]
        fixed = shared.fixed_point
        body["features"] = {**body["features"], "scaled" if fixed else "values": marks["values"],
                            "sha256": marks["features_sha256"]}
        body["fired"], body["principal"] = marks["fired"], marks["principal"]
        body["score_ppm" if fixed else "score"] = marks["score"]
        body["input"] = {"format": marks["format"], "message_type": marks["message_type"],
                         "raw_sha256": marks["raw_sha256"], "reference": marks["reference"],
                         "transaction_sha256": marks["transaction_sha256"]}
        if shared.parser is not None:  # one parser per batch: shared, not a slot
            body["input"]["parser"] = shared.parser
        body["latency_us"] = {**body["latency_us"], "queue": marks["queue"]}
        keyed = shared.idempotency is not None
        slots: tuple[str, ...] = SLOTS
        if keyed:
            slots = (*SLOTS, "idempotency")
            body["idempotency"] = Template.marker("idempotency")
        risked = shared.account_risk is not None
        if risked:
            slots = (*slots, "account_risk")
            body["account_risk"] = Template.marker("account_risk")
        explained = shared.explanation is not None
        if explained:
            slots = (*slots, "explanation")
            body["explanation"] = Template.marker("explanation")
        screened = shared.screening is not None
        if screened:
            slots = (*slots, "screening")
            body["screening"] = Template.marker("screening")
        n = len(slots)
        if stages is not None:
            body["fuel"], body["batch_size"] = Template.marker("fuel"), Template.marker("batch_size")
            for k in stages:
                body["latency_us"][k] = Template.marker(f"latency:{k}")
            slots = (*slots, "fuel", "batch_size", *(f"latency:{k}" for k in stages))
        template = Template.of(body, slots)
        return None if template is None else cls(template, keyed, risked, explained, fixed, n, screened)

    def body(self, parts: Sequence[Jcs]) -> Jcs:
        """The record bytes from the canonical bytes of each slot's value, in ``SLOTS`` order."""
        return self._template.fill(parts)

    def bodies(self, cols: DecisionColumns, whole: Callable[[int], DecisionInputs]) -> list[Jcs]:
        """The record bytes of each decision of ``cols``; ``whole(i)`` is canonicalised instead
        where a value is one the splice does not vouch for (the encoder then decides)."""
        nan = np.isnan(cols.feature_values)
        if self.fixed:
            if cols.scaled_values is None:
                raise ValueError("version 4 bodies are made from the scaled feature values")
            value_bytes, score_bytes = _fixed_parts(cols.scaled_values, nan, cols.score)
        else:
            values: list[list[float | None]] = cols.feature_values.tolist()
            if nan.any():
                for i in np.flatnonzero(nan.any(axis=1)).tolist():
                    values[i] = [None if v != v else v for v in values[i]]
            value_bytes = jcs_rows(values)
            score_bytes = jcs_numbers([None if v != v else v for v in cols.score])
        fill = self._template.fill
        out: list[Jcs] = []
        push = out.append
        rows = zip(cols.at, cols.decision, cols.fail_safe, value_bytes, cols.features_sha256, cols.fired,
                   cols.message_format, cols.message_type, cols.raw_sha256, cols.reference,
                   cols.transaction_sha256, cols.principal, score_bytes, cols.queue_us, strict=True)
        keys, risks, whys = cols.idempotency, cols.account_risk, cols.explanation
        keyed, risked, explained = self.keyed, self.risked, self.explained
        screens, stopped = cols.screening, cols.stopped
        if (screens is not None) is not self.screened:
            return [canonical_bytes(decision_body(whole(i))) for i in range(len(cols.at))]
        for i, (at, dec, why, vb, fsha, fired, fmt, mtype, raw, ref, tsha, who, sb, queue) in enumerate(rows):
            key = None if keys is None else keys[i]
            risk = None if risks is None else risks[i]
            said = None if whys is None else whys[i]
            if ((key is not None) is not keyed or (risk is not None) is not risked
                    or (said is not None) is not explained
                    or (stopped is not None and stopped[i])):  # not this shape (or version): whole
                push(canonical_bytes(decision_body(whole(i))))
                continue
            try:  # in SLOTS order
                parts: tuple[Jcs, ...] = (
                    jcs_str(at), jcs_str(dec), JCS_NULL if why is None else jcs_str(why), vb,
                    jcs_str(fsha), fired, jcs_str(fmt), jcs_str(mtype), jcs_str(raw), jcs_str(ref),
                    jcs_str(tsha), who, sb, jcs_int(queue))
                if key is not None:
                    parts = (*parts, canonical_bytes(key.to_json()))
                if risk is not None:
                    parts = (*parts, Jcs(risk.to_jcs()))  # integers and hex only: equal to canonical_bytes
                if said is not None:
                    parts = (*parts, Jcs(said.to_jcs()))  # canonical_bytes itself, or null
                if screens is not None:
                    parts = (*parts, screens[i])
                push(fill(parts))
            except TypeError:  # a value the splice does not vouch for: the whole-body path decides
                push(canonical_bytes(decision_body(whole(i))))
        return out


def _fixed_parts(scaled: npt.NDArray[np.int64], nan: npt.NDArray[np.bool_],
                 scores: Sequence[float]) -> tuple[list[Jcs], list[Jcs]]:
    """The canonical bytes of each row of scaled feature values (``null`` where NaN) and of each
    score in millionths: integers only, so one orjson call each (``ledger.jcs.jcs_int_rows``)."""
    rows: list[list[int | None]] = scaled.tolist()
    if nan.any():
        for i in np.flatnonzero(nan.any(axis=1)).tolist():
            rows[i] = [None if gone else v for v, gone in zip(rows[i], nan[i].tolist(), strict=True)]
    ppm = [scaled_score(v) for v in scores]
    return jcs_int_rows(rows), [JCS_NULL if p is None else jcs_int(p) for p in ppm]


def decision_bodies(shared: DecisionInputs, cols: DecisionColumns,
                    whole: Callable[[int], DecisionInputs]) -> list[Jcs]:
    """The canonical body of each decision of a batch, a batch at a time.

    ``shared`` states what the batch's records share (its per-decision fields are not read),
    ``cols`` what differs, and ``whole(i)`` gives the full inputs of decision ``i``, for a body
    that cannot be spliced. Each body equals ``canonical_bytes(decision_body(whole(i)))``."""
    keys, risks, whys = cols.idempotency, cols.account_risk, cols.explanation
    if keys is not None and any(k is not None for k in keys):  # a template for the keyed bodies
        shared = replace(shared, idempotency=IdempotencyKey("", ""))
    first_risk = None if risks is None else next((r for r in risks if r is not None), None)
    first_why = None if whys is None else next((w for w in whys if w is not None), None)
    if first_risk is None:
        first_why = None  # no version 3 template without account risk: such bodies go whole
    # a template for version 3 bodies, or version 2, or version 1
    shared = replace(shared, account_risk=first_risk, explanation=first_why)
    if shared.screening is not None and shared.screening.stopped is not None:
        # the template is of the batch's version 6 bodies; a version 7 one (``cols.stopped``) goes whole
        shared = replace(shared, screening=replace(shared.screening, stopped=None, budget=None))
    try:
        template = BodyTemplate.for_batch(shared)
    except CanonicalError:
        template = None  # every body on its own then raises where the encoder refuses
    if template is None:
        return [canonical_bytes(decision_body(whole(i))) for i in range(len(cols.at))]
    return template.bodies(cols, whole)


def slot_parts(d: DecisionInputs) -> tuple[Jcs, ...]:
    """The canonical bytes of each slot of ``d``, one value at a time, in ``SLOTS`` order (the
    pipeline makes the same bytes a batch at a time; tests hold the two together)."""
    body = decision_body(d)
    values, score = ((body["features"]["scaled"], body["score_ppm"]) if d.fixed_point
                     else (body["features"]["values"], body["score"]))
    return (jcs_str(d.at), jcs_str(d.decision), JCS_NULL if d.fail_safe is None else jcs_str(d.fail_safe),
            canonical_bytes(values), jcs_str(d.features_sha256), jcs_fired(d.fired),
            jcs_str(d.message_format), jcs_str(d.message_type), jcs_str(d.raw_sha256), jcs_str(d.reference),
            jcs_str(d.transaction_sha256), canonical_bytes(d.principal), canonical_bytes(score),
            jcs_int(d.latency_us["queue"])) + (
                () if d.idempotency is None else (canonical_bytes(d.idempotency.to_json()),)) + (
                () if d.account_risk is None else (canonical_bytes(d.account_risk.to_json()),)) + (
                () if d.explanation is None else (canonical_bytes(d.explanation.to_json()),)) + (
                () if d.screening is None else (d.screening.to_jcs(),))
