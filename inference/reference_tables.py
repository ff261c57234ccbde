"""Versioned reference tables the features read: FX rates and FATF jurisdiction risk.

Each table is a JSON file in ``inference/tables/`` whose ``id`` (``ecb-2025-10``,
``fatf-2025-10``) names its version; the rule pack declares the ids it was calibrated with
(``[ruleset.feature_tables]``) and the pipeline records them. Tables are data, parsed once
into frozen objects; the maths in ``features.py`` never reads files.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
import pycountry

from inference.errors import FeatureError

__all__ = ["DEFAULT_FATF", "DEFAULT_FX", "FatfTable", "FxTable", "Tables", "default_tables", "load_table"]

DEFAULT_FX = "ecb-2025-10"
DEFAULT_FATF = "fatf-2025-10"
_CENT = Decimal("0.01")
_COUNTRIES = frozenset(c.alpha_2 for c in pycountry.countries)


@dataclass(frozen=True)
class FxTable:
    """USD value of an amount: ``amount / rate[currency] * rate[USD]``, rounded to the cent."""

    id: str
    sha256: str
    usd_per_unit: dict[str, Decimal]

    def usd_cents(self, amount: Decimal, currency: str) -> int | None:
        """The amount in whole US cents (half-even), or None for a currency not in the table."""
        rate = self.usd_per_unit.get(currency)
        if rate is None:
            return None
        return int((amount * rate).quantize(_CENT, rounding=ROUND_HALF_EVEN) * 100)


@dataclass(frozen=True)
class FatfTable:
    """0 not listed, 1 increased monitoring, 2 call for action; None for an unknown code."""

    id: str
    sha256: str
    listed: dict[str, int]

    def risk(self, country: str | None) -> int | None:
        if country is None or country not in _COUNTRIES:
            return None
        return self.listed.get(country, 0)


@dataclass(frozen=True)
class Tables:
    fx: FxTable
    fatf: FatfTable

    @property
    def ids(self) -> dict[str, str]:
        """As the rule pack names them (``[ruleset.feature_tables]``)."""
        return {"fx_rates": self.fx.id, "jurisdiction_risk": self.fatf.id}


def _fx(doc: dict[str, Any], digest: str) -> FxTable:
    rates = doc.get("rates")
    if doc.get("base") != "EUR" or not isinstance(rates, dict) or "USD" not in rates:
        raise FeatureError(f"fx table {doc.get('id')!r}: needs base 'EUR' and a USD rate")
    try:
        parsed = {str(k): Decimal(str(v)) for k, v in rates.items()}
    except InvalidOperation as exc:
        raise FeatureError(f"fx table {doc['id']!r}: a rate is not a decimal number") from exc
    bad = sorted(k for k, v in parsed.items() if not (v.is_finite() and v > 0) or len(k) != 3)
    if bad:
        raise FeatureError(f"fx table {doc['id']!r}: bad rate or code for {', '.join(bad)}")
    usd = parsed["USD"]
    return FxTable(doc["id"], digest, {k: usd / v for k, v in parsed.items()})


def _fatf(doc: dict[str, Any], digest: str) -> FatfTable:
    listed: dict[str, int] = {}
    for key, level in (("increased_monitoring", 1), ("call_for_action", 2)):
        codes = doc.get(key)
        if not isinstance(codes, list):
            raise FeatureError(f"jurisdiction table {doc.get('id')!r}: {key!r} must be a list")
        for code in codes:
            if code not in _COUNTRIES:
                raise FeatureError(f"jurisdiction table {doc['id']!r}: {code!r} is not an ISO country")
            if code in listed:
                raise FeatureError(f"jurisdiction table {doc['id']!r}: {code} is listed twice")
            listed[code] = level
    return FatfTable(doc["id"], digest, listed)


def load_table(data: bytes) -> FxTable | FatfTable:
    """Parse one table file's bytes; its SHA-256 goes with it."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FeatureError(f"reference table is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        raise FeatureError("reference table must be a JSON object with a string 'id'")
    digest = hashlib.sha256(data).hexdigest()
    if doc.get("kind") == "fx_rates":
        return _fx(doc, digest)
    if doc.get("kind") == "jurisdiction_risk":
        return _fatf(doc, digest)
    raise FeatureError(f"reference table {doc['id']!r}: unknown kind {doc.get('kind')!r}")


def _read(table_id: str, directory: Path | None) -> bytes:
    if directory is not None:
        path = directory / f"{table_id}.json"
        if not path.is_file():
            raise FeatureError(f"reference table {table_id!r} not found in {directory}")
        return path.read_bytes()
    res = resources.files("inference") / "tables" / f"{table_id}.json"
    if not res.is_file():
        raise FeatureError(f"reference table {table_id!r} is not shipped with sealtrail")
    return res.read_bytes()


def default_tables(fx: str = DEFAULT_FX, fatf: str = DEFAULT_FATF, directory: Path | None = None) -> Tables:
    """The named tables (shipped ones unless ``directory`` is given)."""
    fx_table, fatf_table = load_table(_read(fx, directory)), load_table(_read(fatf, directory))
    if not isinstance(fx_table, FxTable) or not isinstance(fatf_table, FatfTable):
        raise FeatureError(f"tables {fx!r} / {fatf!r} are not an fx and a jurisdiction table")
    if fx_table.id != fx or fatf_table.id != fatf:
        raise FeatureError(f"table file ids {fx_table.id!r} / {fatf_table.id!r} do not match their names")
    return Tables(fx_table, fatf_table)
