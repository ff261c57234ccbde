"""The sanctions list the benchmarks seal (``bench.pipeline``'s screening row, ``bench.screening_reload``):
the bank's own CSV format, read back whole, the same entries ``bench.screening`` screens against
(names with a comma or a quote included: the CSV is written by the csv module, not by hand)."""

from __future__ import annotations

from bench.screening import _list_entries, list_csv
from inference.screening.lists import load


def test_the_benchmark_list_loads_whole_with_the_screening_benchmarks_entries() -> None:
    n = 400  # the UN list's own entries first (some names hold commas), then synthetic ones
    parsed = load(list_csv(n), "internal-csv", "bench-list")
    expected = _list_entries(n)
    assert len(parsed.entries) == n
    assert [e.entry_id for e in parsed.entries] == [e.entry_id for e in expected]
    assert [e.kind for e in parsed.entries] == [e.kind for e in expected]
    assert [e.names[0] for e in parsed.entries] == [e.names[0].replace(";", " ") for e in expected]
    assert any("," in e.names[0] or '"' in e.names[0] for e in expected)
