"""The feature schema: the ordered names of a feature row, versioned.

``FEATURE_NAMES`` is what ``inference.features`` produces and what the risk model reads
(float64, in this order). The rule pack reads the same names plus ``model_score``, which the
pipeline appends after scoring (``RULE_FEATURE_NAMES``). Changing the order, a name or a
definition means a new ``FEATURE_SCHEMA`` id, a new model and a new rule pack.
"""

from __future__ import annotations

__all__ = ["FEATURE_NAMES", "FEATURE_SCHEMA", "N_FEATURES", "RULE_FEATURE_NAMES", "SCORE_NAME"]

FEATURE_SCHEMA = "sealtrail.features/1"

FEATURE_NAMES: tuple[str, ...] = (
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
N_FEATURES = len(FEATURE_NAMES)
SCORE_NAME = "model_score"
RULE_FEATURE_NAMES: tuple[str, ...] = (*FEATURE_NAMES, SCORE_NAME)
