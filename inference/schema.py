"""The feature schema: the ordered names of a feature row, versioned.

``FEATURE_NAMES`` is a decision's feature row, in this order (float64), under the schema id
``FEATURE_SCHEMA``: what ``inference.features`` produces (``EXTRACTED_NAMES``) followed by the
screening columns the pipeline appends. The rule pack reads the same names plus ``model_score``,
which the pipeline appends after scoring (``RULE_FEATURE_NAMES``). Changing the order, a name or a definition
means a new schema id and a new rule pack.

``sealtrail.features/2`` is ``sealtrail.features/1``'s 32 columns, unchanged, followed by the
data-quality columns (``DATA_QUALITY_NAMES``) read from the transaction's findings and accounts.
``sealtrail.features/3`` is ``features/2`` followed by the behavioural and transaction-graph columns
(``GRAPH_NAMES``) of ``inference.graph`` under its default settings (a 30-day window, temporal
cycles of up to 3 hops), each an integer: counts, days, Q8 or Q16 fixed point.
``sealtrail.features/4`` is ``features/3`` followed by the two forwarding columns of the graph
(``forward_share_permille``, ``forward_delay_hours``): how closely the payment passes on an amount
its sender received in the 7 days before, and how long after.
``sealtrail.features/5`` is ``features/4`` followed by the sanctions-screening columns
(``SCREENING_NAMES``, ``inference.screening.features``): the payment's parties and free text against
the lists in force.
``sealtrail.features/6`` is ``features/4`` followed by ``forward_source_fan_out``: how many accounts
the sender of the amount a payment forwards paid in the window (an employer paying its staff, many; a
fraud victim or a depositor, one or two). ``sealtrail.features/7`` is ``features/6`` followed by the
screening columns, as ``features/5`` is ``features/4`` followed by them.
``inference.features`` computes the ``features/6`` columns (``EXTRACTED_SCHEMA``: they depend on the
feature state); the pipeline appends the screening columns, which depend on the lists alone.
Each schema extends an earlier one (``features/6`` extends ``features/4``, not ``features/5``), so a
risk model trained on an earlier schema reads the leading columns of a later row (``model_columns``):
a model trained on ``features/4`` reads a ``features/7`` row, one trained on ``features/6`` does not
read a ``features/5`` row. Records name the schema their values follow, and replay reads each record
by its own (``feature_names``, ``rule_feature_names``).
"""

from __future__ import annotations

from inference.errors import FeatureError
from inference.graph import GRAPH_FEATURE_NAMES
from inference.screening.features import SCREENING_NAMES

__all__ = [
    "DATA_QUALITY_NAMES",
    "EXTRACTED_NAMES",
    "EXTRACTED_SCHEMA",
    "FEATURE_NAMES",
    "FEATURE_SCHEMA",
    "FEATURE_SCHEMAS",
    "GRAPH_NAMES",
    "GRAPH_UNSEALED",
    "MODEL_SCHEMA",
    "N_EXTRACTED",
    "N_FEATURES",
    "RULE_FEATURE_NAMES",
    "SCORE_DIGITS",
    "SCORE_NAME",
    "SCREENING_NAMES",
    "UnknownFeatureSchemaError",
    "feature_digits",
    "feature_names",
    "model_columns",
    "rule_feature_names",
]

_V1: tuple[str, ...] = (
    "amount_usd",
    "log_amount_usd",
    "round_amount",
    "cross_border",
    "orig_country_risk",
    "bene_country_risk",
    "orig_name_present",
    "orig_account_present",
    "orig_address_or_id_present",
    "bene_name_present",
    "bene_account_present",
    "orig_count_1h",
    "orig_count_24h",
    "orig_count_7d",
    "orig_sum_usd_1h",
    "orig_sum_usd_24h",
    "orig_sum_usd_7d",
    "bene_count_1h",
    "bene_count_24h",
    "bene_count_7d",
    "bene_sum_usd_1h",
    "bene_sum_usd_24h",
    "bene_sum_usd_7d",
    "orig_distinct_counterparties_24h",
    "bene_distinct_counterparties_24h",
    "orig_near_threshold_count_24h",
    "bene_near_threshold_count_24h",
    "orig_in_out_24h",
    "bene_in_out_24h",
    "new_counterparty",
    "hour_utc",
    "weekend",
)

# What the parser found wrong with the message (``inference.messages.findings``), as the flags
# that matter for risk; docs/scoring.md "Features" defines each.
DATA_QUALITY_NAMES: tuple[str, ...] = (
    "finding_count",
    "orig_iban_invalid",
    "bene_iban_invalid",
    "country_unreadable",
    "service_nak",
)

# The graph library's values but hops to a flagged account (no decision flags an account yet).
# Every value depends on the payments of the window alone.
GRAPH_UNSEALED: tuple[str, ...] = ("flagged_hops",)
GRAPH_NAMES: tuple[str, ...] = tuple(n for n in GRAPH_FEATURE_NAMES if n not in GRAPH_UNSEALED)
_FORWARDING: tuple[str, ...] = ("forward_share_permille", "forward_delay_hours")  # added by features/4
_SOURCE: tuple[str, ...] = ("forward_source_fan_out",)  # added by features/6
_GRAPH4: tuple[str, ...] = tuple(n for n in GRAPH_NAMES if n not in _SOURCE)
_GRAPH3: tuple[str, ...] = tuple(n for n in _GRAPH4 if n not in _FORWARDING)

FEATURE_SCHEMAS: dict[str, tuple[str, ...]] = {
    "sealtrail.features/1": _V1,
    "sealtrail.features/2": (*_V1, *DATA_QUALITY_NAMES),
    "sealtrail.features/3": (*_V1, *DATA_QUALITY_NAMES, *_GRAPH3),
    "sealtrail.features/4": (*_V1, *DATA_QUALITY_NAMES, *_GRAPH4),
    "sealtrail.features/5": (*_V1, *DATA_QUALITY_NAMES, *_GRAPH4, *SCREENING_NAMES),
    "sealtrail.features/6": (*_V1, *DATA_QUALITY_NAMES, *GRAPH_NAMES),
    "sealtrail.features/7": (*_V1, *DATA_QUALITY_NAMES, *GRAPH_NAMES, *SCREENING_NAMES),
}
FEATURE_SCHEMA = "sealtrail.features/7"  # what a decision records
FEATURE_NAMES: tuple[str, ...] = FEATURE_SCHEMAS[FEATURE_SCHEMA]
N_FEATURES = len(FEATURE_NAMES)
EXTRACTED_SCHEMA = "sealtrail.features/6"  # what inference.features computes (the rest: screening)
EXTRACTED_NAMES: tuple[str, ...] = FEATURE_SCHEMAS[EXTRACTED_SCHEMA]
N_EXTRACTED = len(EXTRACTED_NAMES)
MODEL_SCHEMA = "sealtrail.features/6"  # the columns the shipped model is trained on
SCORE_NAME = "model_score"
RULE_FEATURE_NAMES: tuple[str, ...] = (*FEATURE_NAMES, SCORE_NAME)

# The decimal digits each value keeps where a record holds it as an integer in fixed units
# (``sealtrail.decision/4``: the value is that integer times 10**-digits): US dollar amounts to the
# cent (the extractor rounds amounts to the cent already; a sum of cents is a whole number of
# cents), the log of an amount to 6 digits; every other column is an integer by definition
# (flags, counts, table codes, days, Q8/Q16 fixed point), docs/scoring.md "Features".
_CENTS = ("amount_usd", "orig_sum_usd_1h", "orig_sum_usd_24h", "orig_sum_usd_7d", "bene_sum_usd_1h",
          "bene_sum_usd_24h", "bene_sum_usd_7d")
_DIGITS: dict[str, int] = {**dict.fromkeys(_CENTS, 2), "log_amount_usd": 6}
SCORE_DIGITS = 6  # the model score, 0..1, in millionths


class UnknownFeatureSchemaError(FeatureError):
    """A feature schema id this build does not know."""


def feature_names(schema: str) -> tuple[str, ...]:
    """The column names of ``schema``; ``UnknownFeatureSchemaError`` naming it if unknown."""
    try:
        return FEATURE_SCHEMAS[schema]
    except (KeyError, TypeError):
        known = ", ".join(FEATURE_SCHEMAS)
        raise UnknownFeatureSchemaError(f"unknown feature schema {schema!r} (known: {known})") from None


def rule_feature_names(schema: str) -> tuple[str, ...]:
    """What a rule module can read from a row of ``schema``: its columns, then ``model_score``."""
    return (*feature_names(schema), SCORE_NAME)


def feature_digits(schema: str) -> tuple[int, ...]:
    """The decimal digits kept of each column of ``schema`` in fixed units (see ``_DIGITS``)."""
    return tuple(_DIGITS.get(name, 0) for name in feature_names(schema))


def model_columns(model_names: tuple[str, ...], schema: str = FEATURE_SCHEMA) -> int:
    """How many leading columns of a ``schema`` row a model reading ``model_names`` takes, or
    ``UnknownFeatureSchemaError`` when its names are not the leading columns of that schema."""
    names = feature_names(schema)
    if names[:len(model_names)] != model_names:
        raise UnknownFeatureSchemaError(
            f"the model's {len(model_names)} features are not the leading columns of {schema}")
    return len(model_names)
