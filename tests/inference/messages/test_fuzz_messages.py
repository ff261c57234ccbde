"""Mutation fuzzing: whatever bytes arrive, ``parse_messages`` answers, per message, a Transaction
(whose canonical bytes and hash work) or a MessageError naming a field; it never raises.

Cases are the message vectors, the public samples (``tests/vectors/public``, as present at
collection) and JSON messages, each with one to three mutations from ``bench.fuzz_messages``
(byte flips, insertions, deletions, truncation, FIN block and field shuffles, XML element
swaps, JSON tree edits, nesting thousands deep, 1 MB values, encoding errors), drawn by
Hypothesis with a fixed seed so that CI sees the same cases each run. ``bench.fuzz_messages``
runs the same property over many more. Inputs that once crashed a parser live in
``tests/vectors/fuzz/`` and run here as regression cases.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from bench.fuzz_messages import EXTENSIONS, FORMATS, Case, Fmt, kinds_for, mutate, outcome, pool_for, seeds

FUZZ = Path(__file__).parents[2] / "vectors" / "fuzz"
SEEDS = seeds()
# Reproducers of crashes found by fuzzing and not fixed yet: file name -> the bug. Once a parser is
# fixed the case passes (xfail is not strict) and its entry should go; files not listed must pass.
KNOWN_BUGS: dict[str, str] = {}


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def cases(draw: st.DrawFn, fmt: Fmt) -> Case:
    """A seed for ``fmt`` (any seed for 'auto') with one to three of its mutations."""
    seed = draw(st.sampled_from(pool_for(fmt, SEEDS)))
    names = draw(st.lists(st.sampled_from(kinds_for(seed.kind)), min_size=1, max_size=3))
    return mutate(seed, names, draw(st.randoms(use_true_random=True)))


def _property(fmt: Fmt, examples: int) -> Callable[[], None]:
    """The property over ``examples`` cases for ``fmt`` (a test function per format, not a
    parametrized one: a strategy drawn inside the test through ``st.data()`` costs twice the time)."""
    @_settings(examples)
    @given(case=cases(fmt))
    def test(case: Case) -> None:
        note(f"{len(case.data):,} bytes from {case.describe()}; head {case.data[:120]!r}")
        assert outcome(case.data, fmt) in ("decided", "refused")
    return test


def test_there_are_seeds_of_every_format() -> None:
    assert {s.kind for s in SEEDS} == {"mt", "pacs008", "json"}
    assert all(pool_for(f, SEEDS) for f in FORMATS)


test_a_mutated_fin_message_is_decided_or_refused_naming_a_field = _property("mt", 2_000)
test_a_mutated_pacs008_message_is_decided_or_refused_naming_a_field = _property("pacs008", 2_000)
test_a_mutated_iso20022_message_is_decided_or_refused_naming_a_field = _property("iso20022", 2_000)
test_a_mutated_json_message_is_decided_or_refused_naming_a_field = _property("json", 2_000)
test_a_mutated_message_of_any_format_is_decided_or_refused_as_auto = _property("auto", 2_000)

test_many_mutated_fin_messages = pytest.mark.fuzz_long(pytest.mark.slow(_property("mt", 20_000)))
test_many_mutated_pacs008_messages = pytest.mark.fuzz_long(pytest.mark.slow(_property("pacs008", 20_000)))
test_many_mutated_iso20022_messages = pytest.mark.fuzz_long(pytest.mark.slow(_property("iso20022", 20_000)))
test_many_mutated_json_messages = pytest.mark.fuzz_long(pytest.mark.slow(_property("json", 20_000)))
test_many_mutated_messages_as_auto = pytest.mark.fuzz_long(pytest.mark.slow(_property("auto", 20_000)))


def _regressions() -> list[Any]:
    out = []
    for path in sorted(FUZZ.glob("*")) if FUZZ.is_dir() else []:
        kind = EXTENSIONS.get(path.suffix)
        if kind is None:
            continue
        bug = KNOWN_BUGS.get(path.name)
        marks = [pytest.mark.xfail(strict=False, reason=bug)] if bug else []
        out += [pytest.param(path, fmt, marks=marks, id=f"{path.name}-{fmt}") for fmt in (kind, "auto")]
    return out


def test_every_known_bug_has_its_reproducer() -> None:
    assert all((FUZZ / name).is_file() for name in KNOWN_BUGS)


def test_an_input_that_once_crashed_a_parser_is_decided_or_refused() -> None:
    """Every reproducer in tests/vectors/fuzz (none while no parser has crashed) as its own format and
    as auto; one known and still open (KNOWN_BUGS) is reported, not failed."""
    for case in _regressions():
        path, fmt = case.values
        assert isinstance(path, Path)
        got = outcome(path.read_bytes(), fmt)
        if case.marks:
            continue
        assert got in ("decided", "refused"), (path.name, fmt, got)
