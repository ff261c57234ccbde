"""The scoring path's documented Python entry point (docs/python-api.md, "The scoring path") runs
as written: its example is read from the page and executed against a fresh SQLite ledger."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import audit.scoring
from audit.errors import SubmissionRefusedError
from ledger.database import open_engine
from ledger.verify import verify_ledger

PAGE = Path(__file__).parents[2] / "docs" / "python-api.md"


def documented_example() -> str:
    text = PAGE.read_text()
    section = text[text.index("## The scoring path\n"):]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, "the scoring path section has no python example"
    return found.group(1)


def run(code: str, where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("SEALTRAIL_")]:
        monkeypatch.delenv(name)  # the example's Settings read SEALTRAIL_* too
    monkeypatch.chdir(where)
    exec(compile(code, str(PAGE), "exec"), {"__name__": "__example__"})


def decisions_sealed(where: Path) -> int:
    engine = open_engine(f"sqlite:///{where / 'sealtrail.db'}")
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql("SELECT count(*) FROM ledger_entries WHERE kind = 'decision'")
                       .scalar_one())
    finally:
        engine.dispose()


def test_the_documented_example_decides_and_seals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run(documented_example(), tmp_path, monkeypatch)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1
    trace_id, seq, decision, score, *_ = printed[0].split(" ")
    assert decision in {"ALLOW", "REVIEW", "HOLD", "BLOCK"} and 0.0 <= float(score) <= 1.0
    engine = open_engine(f"sqlite:///{tmp_path / 'sealtrail.db'}")
    try:
        report = verify_ledger(engine)
        assert report.size > int(seq)
        with engine.connect() as conn:
            (record,) = conn.exec_driver_sql("SELECT record FROM ledger_entries WHERE seq = ?",
                                             (int(seq),)).one()
        sealed = orjson.loads(record)
        assert (sealed["kind"], sealed["trace_id"], sealed["record"]["decision"]) == ("decision", trace_id,
                                                                                    decision)
    finally:
        engine.dispose()
    assert decisions_sealed(tmp_path) == 1


def test_the_example_with_a_refused_payment_names_it_and_decides_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = documented_example()
    assert code.count('"currency": "EUR"') == 1
    with pytest.raises(SubmissionRefusedError):
        run(code.replace('"currency": "EUR"', '"currency": "XXZ"'), tmp_path, monkeypatch)
    assert capsys.readouterr().out == "[0].$.currency currency 'XXZ' is not an ISO 4217 code\n"
    assert decisions_sealed(tmp_path) == 0


def test_the_public_face_is_what_the_page_names() -> None:
    for name in ("open_runtime", "parse_submissions", "Runtime", "RuntimeSettings", "Principal",
                 "SubmissionRefusedError", "Decision", "Submission"):
        assert name in audit.scoring.__all__ and getattr(audit.scoring, name) is not None


def test_the_entry_point_imports_first_in_a_fresh_interpreter() -> None:
    """Either order of import works: no cycle between the runtime and what it opens."""
    for first in ("audit.scoring", "audit.governance.service", "audit.query.index"):
        code = f"import {first}; import audit.scoring; print(audit.scoring.open_runtime.__module__)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "audit.decide.runtime"
