"""``make audit``'s judge (``.ci/audit.py``): canned pip-audit runs, no network.

pip-audit exits 1 both when it finds vulnerabilities and when it cannot reach its service; the
wrapper must tell the two apart by the report (written only when the audit completed) and by
what the failure says, fail the suite on a vulnerability without a recorded exception, and never
on an unreachable service."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "audit.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_audit", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_audit"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


audit = _load()

JINJA_VULN = {"id": "GHSA-h75v-3vvj-5mfj", "fix_versions": ["3.1.4"], "aliases": ["CVE-2024-34064"],
              "description": "Jinja vulnerable to HTML attribute injection when passing user input as keys"}


def report(*deps: dict[str, Any]) -> str:
    return json.dumps({"dependencies": [
        {"name": "sealtrail", "skip_reason": "distribution marked as editable"},
        {"name": "numpy", "version": "2.4.0", "vulns": []},
        *deps], "fixes": []})


def test_a_clean_report_passes() -> None:
    v = audit.judge(0, report(), "No known vulnerabilities found, 1 skipped\n", {})
    assert v.code == 0 and v.ran and "1 audited" in v.headline and v.lines == []


def test_a_vulnerability_without_an_exception_fails_naming_it() -> None:
    out = report({"name": "jinja2", "version": "3.1.3", "vulns": [JINJA_VULN]})
    v = audit.judge(1, out, "Found 1 known vulnerability in 1 package\n", {})
    assert v.code == 1 and "1 known vulnerability without a recorded exception" in v.headline
    (line,) = v.lines
    assert line.startswith("jinja2 3.1.3: GHSA-h75v-3vvj-5mfj, CVE-2024-34064 (fixed in: 3.1.4)")


@pytest.mark.parametrize("recorded", ["GHSA-h75v-3vvj-5mfj", "CVE-2024-34064", "ghsa-H75V-3vvj-5mfj"])
def test_a_recorded_exception_by_id_or_alias_accepts_it_and_says_so(recorded: str) -> None:
    # pip-audit may or may not have dropped it already (--ignore-vuln): either way it passes
    out = report({"name": "jinja2", "version": "3.1.3", "vulns": [JINJA_VULN]})
    v = audit.judge(1, out, "", {recorded: "console templates escape keys; until 2027-01"})
    assert v.code == 0 and "1 accepted" in v.headline
    assert v.lines == [f"jinja2 3.1.3: {recorded} accepted: console templates escape keys; until 2027-01"]
    other = report({"name": "jinja2", "version": "3.1.3", "vulns": [JINJA_VULN, {
        "id": "PYSEC-2099-1", "fix_versions": [], "aliases": []}]})
    v = audit.judge(1, other, "", {recorded: "accepted"})
    assert v.code == 1
    assert v.lines[0].startswith("jinja2 3.1.3: PYSEC-2099-1 (fixed in: no fixed version yet)")


@pytest.mark.parametrize("stderr", [
    "ERROR:pip_audit._cli:Could not connect to PyPI's vulnerability feed\n"
    "Tip: your network may be blocking this service. Try another service with `-s SERVICE`\n",
    "Traceback (most recent call last):\n  ...\nrequests.exceptions.ConnectionError: "
    "HTTPSConnectionPool(host='pypi.org', port=443): Max retries exceeded with url: /pypi/anyio/4.6.0/json "
    "(Caused by NameResolutionError(\"Failed to resolve 'pypi.org' ([Errno -3] Temporary failure in name "
    "resolution)\"))\n",
    "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: https://pypi.org/...\n",
])
def test_an_unreachable_service_is_said_and_does_not_fail(stderr: str) -> None:
    v = audit.judge(1, "", stderr, {})
    assert v.code == 0 and v.ran is False and "NOT RUN" in v.headline
    assert v.lines and v.lines[-1] in stderr


def test_a_failure_that_is_not_the_network_fails_the_audit() -> None:
    usage = "usage: pip-audit [-h] ...\npip-audit: error: unrecognized arguments: --aliases\n"
    v = audit.judge(2, "", usage, {})
    assert v.code == 2 and "without a report" in v.headline and "unrecognized arguments" in v.lines[-1]
    assert audit.judge(0, "", "", {}).code == 2  # exit 0 and no report: nothing to go by
    assert audit.judge(1, "{not json", "Found 1 known vulnerability", {}).code == 2
    only_skips = json.dumps({"dependencies": [{"name": "x", "skip_reason": "editable"}], "fixes": []})
    assert audit.judge(0, only_skips, "", {}).code == 2  # audited nothing


def test_an_unexpected_skip_is_reported() -> None:
    out = report({"name": "wheel", "skip_reason": "could not resolve the version"},
                 {"name": "bank-internal", "skip_reason": "Dependency not found on PyPI and could not be "
                                                          "audited: bank-internal (1.0)"})
    v = audit.judge(0, out, "", {})
    assert v.code == 0 and v.ran
    assert v.lines == ["not audited (not found on PyPI): bank-internal",
                       "not audited: wheel: could not resolve the version"]


def test_a_service_that_knows_no_dependency_did_not_audit() -> None:
    # a mirror standing in for pypi.org without the per-version JSON API: every lookup is a 404
    deps = [{"name": n, "skip_reason": f"Dependency not found on PyPI and could not be audited: {n} (1.0)"}
            for n in ("alembic", "anyio", "numpy")]
    editable = {"name": "sealtrail", "skip_reason": "distribution marked as editable"}
    out = json.dumps({"dependencies": [editable, *deps], "fixes": []})
    v = audit.judge(0, out, "No known vulnerabilities found, 4 skipped\n", {})
    assert v.code == 0 and v.ran is False and "NOT RUN" in v.headline and "3 installed" in v.headline
    assert v.lines == ["not found: alembic, anyio, numpy"]


def test_the_exceptions_file() -> None:
    text = "# header\n\nGHSA-h75v-3vvj-5mfj  console templates escape keys  # until 2027-01\nPYSEC-2024-1 x\n"
    assert audit.read_exceptions(text) == {"GHSA-h75v-3vvj-5mfj": "console templates escape keys",
                                           "PYSEC-2024-1": "x"}
    for bad, why in [("GHSA-h75v-3vvj-5mfj\n", "has no reason"), ("x.y because\n", "not a vulnerability ID"),
                     ("CVE-2024-1 a\ncve-2024-1 b\n", "listed twice")]:
        with pytest.raises(audit.AuditSetupError, match=why) as info:
            audit.read_exceptions(bad, "f.txt")
        assert str(info.value).startswith("f.txt:")
    assert audit.read_exceptions((SCRIPT.parent / "audit-exceptions.txt").read_text()) is not None
    cmd = audit.command(["pip-audit"], {"GHSA-h75v-3vvj-5mfj": "r"})
    assert cmd[cmd.index("--format") + 1] == "json" and cmd[-2:] == ["--ignore-vuln", "GHSA-h75v-3vvj-5mfj"]


def test_main_exits_by_the_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = tmp_path / "pip-audit"
    fake.write_text("#!/bin/sh\necho 'ERROR: Could not connect to PyPI' >&2\nexit 1\n")
    fake.chmod(0o755)
    none = tmp_path / "none.txt"
    assert audit.main(["--pip-audit", str(fake), "--exceptions", str(none)]) == 0
    assert "NOT RUN" in capsys.readouterr().err
    vulnerable = tmp_path / "vulnerable"
    vulnerable.write_text("#!/bin/sh\ncat <<'EOF'\n" + report({"name": "jinja2", "version": "3.1.3",
                                                               "vulns": [JINJA_VULN]}) + "\nEOF\nexit 1\n")
    vulnerable.chmod(0o755)
    assert audit.main(["--pip-audit", str(vulnerable), "--exceptions", str(none)]) == 1
    assert "GHSA-h75v-3vvj-5mfj" in capsys.readouterr().err
    bad = tmp_path / "exceptions.txt"
    bad.write_text("GHSA-h75v-3vvj-5mfj\n")
    assert audit.main(["--pip-audit", str(vulnerable), "--exceptions", str(bad)]) == 2
    assert audit.main(["--pip-audit", str(tmp_path / "absent"), "--exceptions", str(none)]) == 2
