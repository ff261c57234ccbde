"""Every ISO 20022 file of the public corpus (tests/vectors/public/iso-*/) checked against the
official XSD of its version, part by part, and compared with what tests/vectors/public/
xsd-results.json records: valid, invalid (with the path of the first error), not validated (no
schema shipped for the namespace) or refused. A file added to the corpus without an entry fails
here, by name, until someone has judged its result and recorded it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inference.messages import MessageError
from inference.messages.xsd_validation import validate_xml

PUBLIC = Path(__file__).resolve().parents[2] / "vectors" / "public"
RESULTS = PUBLIC / "xsd-results.json"
FILES = sorted(p.relative_to(PUBLIC).as_posix() for p in PUBLIC.glob("iso-*/*.xml"))


def observed(name: str) -> list[dict[str, Any]]:
    """What validation says of corpus file ``name``, in the form xsd-results.json records."""
    try:
        parts = validate_xml((PUBLIC / name).read_bytes())
    except MessageError as exc:
        return [{"result": "refused", "field": exc.field}]
    out: list[dict[str, Any]] = []
    for p in parts:
        entry: dict[str, Any] = {"part": p.part, "namespace": p.namespace, "result": p.status}
        if p.errors:
            entry["first_error"] = p.errors[0].path
        out.append(entry)
    return out


def _recorded() -> dict[str, list[dict[str, Any]]]:
    files: dict[str, list[dict[str, Any]]] = json.loads(RESULTS.read_text())["files"]
    return files


def test_every_corpus_file_has_a_recorded_result() -> None:
    recorded = _recorded()
    unjudged = [f for f in FILES if f not in recorded]
    assert not unjudged, (f"ISO corpus files without an entry in {RESULTS.name}: {unjudged}; validate "
                          "each (sealtrail parse FILE --validate --json), judge the result and record it")
    gone = [f for f in recorded if f not in FILES]
    assert not gone, f"{RESULTS.name} records files that are not in the corpus: {gone}"


@pytest.mark.parametrize("name", FILES)
def test_each_corpus_file_validates_as_recorded(name: str) -> None:
    want = _recorded().get(name)
    if want is None:
        pytest.fail(f"{name} has no entry in {RESULTS.name}: judge its validation result and record it")
    assert observed(name) == want


def test_the_corpus_holds_valid_invalid_and_unvalidated_parts() -> None:
    """The record is not vacuous: the corpus exercises each verdict, and every shipped-schema
    verdict names its first error when invalid."""
    parts = [p for entries in _recorded().values() for p in entries]
    results = {p["result"] for p in parts}
    assert {"valid", "invalid", "not validated"} <= results
    assert all("first_error" in p for p in parts if p["result"] == "invalid")
    assert sum(p["result"] == "valid" for p in parts) >= 20
