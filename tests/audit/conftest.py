"""Fixtures shared by the audit tests: one sandbox per module, the shipped pack compiled once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

PACK = Path(__file__).parents[2] / "wasm_rules" / "packs" / "aml_core.toml"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


@pytest.fixture(scope="module")
def pack_wasm() -> bytes:
    return compile_ruleset(parse_ruleset(PACK.read_text()))
