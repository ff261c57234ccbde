"""`make audit`: pip-audit over the installed dependencies, read as JSON, judged in one place.

Exit 0: pip-audit audited every dependency and found no known vulnerability that lacks a
recorded exception; or its vulnerability service could not be reached, which is said loudly
(the audit did not run) without failing the suite. Exit 1: at least one known vulnerability
without a recorded exception (each is listed with its fix versions). Exit 2: the audit could not
be judged for another reason (pip-audit missing or failing, an exceptions file line without a
reason).

Recorded exceptions live in `.ci/audit-exceptions.txt`: one `ID  reason` per line (`#` starts
a comment). Each ID is passed to pip-audit as `--ignore-vuln` and, since pip-audit's own
matching has changed between versions, is also matched here against each vulnerability's id
and aliases. "Unreachable" and "vulnerable" are told apart by the output, never the exit code
alone: pip-audit exits 1 for both, and writes its JSON report only when the audit completed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXCEPTIONS = HERE / "audit-exceptions.txt"
_ID = re.compile(r"[A-Za-z][A-Za-z0-9]*-[A-Za-z0-9][A-Za-z0-9._:-]*")

# What a failed connection to PyPI or OSV looks like on pip-audit's stderr: its own
# ConnectionError ("Could not connect to PyPI's vulnerability feed", with a tip that the
# network may be blocking the service) and the requests/urllib3 errors it lets through.
_UNREACHABLE = re.compile(
    r"Could not connect|network may be blocking|ConnectionError|ConnectTimeout|ReadTimeout|timed out"
    r"|Max retries exceeded|Failed to establish a new connection|NameResolutionError"
    r"|Temporary failure in name resolution|Name or service not known|nodename nor servname"
    r"|Network is unreachable|Connection refused|Connection reset|ProxyError|RemoteDisconnected"
    r"|not redirecting properly|\b(?:429|502|503|504) (?:Client|Server) Error",
    re.IGNORECASE,
)
# pip-audit's skip reasons: this project itself (installed editable, skipped on purpose), and a
# package the service has no entry for (a private package, or a mirror without the JSON API).
_EDITABLE = re.compile(r"editable", re.IGNORECASE)
_NOT_FOUND = re.compile(r"not found on PyPI", re.IGNORECASE)


class AuditSetupError(Exception):
    """The audit cannot be judged: a bad exceptions file, pip-audit missing or failing."""


@dataclass(frozen=True)
class Finding:
    package: str
    version: str
    id: str
    aliases: tuple[str, ...]
    fix_versions: tuple[str, ...]
    description: str = ""

    def line(self) -> str:
        names = ", ".join((self.id, *self.aliases))
        fix = ", ".join(self.fix_versions) or "no fixed version yet"
        text = f"{self.package} {self.version}: {names} (fixed in: {fix})"
        return f"{text}: {self.description[:160]}" if self.description else text


@dataclass
class Verdict:
    code: int
    headline: str
    lines: list[str] = field(default_factory=list)
    ran: bool = True  # False: the service did not answer; exit 0, but said on stderr


def read_exceptions(text: str, source: str = "audit-exceptions.txt") -> dict[str, str]:
    """``ID  reason`` per line, ``#`` comments and blank lines ignored. ``AuditSetupError``
    naming the line for one without a reason, an ID that is not one, or an ID twice."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        vid, _, reason = line.partition(" ")
        if not _ID.fullmatch(vid):
            raise AuditSetupError(f"{source}:{n}: {vid!r} is not a vulnerability ID "
                                  "(PYSEC-..., GHSA-..., CVE-...)")
        if not reason.strip():
            raise AuditSetupError(f"{source}:{n}: {vid} has no reason: write why it is accepted, "
                                  "and until when")
        if vid.upper() in {k.upper() for k in out}:
            raise AuditSetupError(f"{source}:{n}: {vid} is listed twice")
        out[vid] = reason.strip()
    return out


def command(pip_audit: Sequence[str], exceptions: Mapping[str, str]) -> list[str]:
    """The pip-audit command line: the installed environment, JSON on stdout."""
    cmd = [*pip_audit, "--format", "json", "--desc", "on", "--aliases", "on", "--progress-spinner", "off",
           "--skip-editable"]
    for vid in exceptions:
        cmd += ["--ignore-vuln", vid]
    return cmd


def _report(stdout: str) -> dict[str, object] | None:
    """pip-audit's JSON report, or None if it wrote none (the audit did not complete)."""
    text = stdout.strip()
    if not text:
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("dependencies"), list) else None


def judge(returncode: int, stdout: str, stderr: str, exceptions: Mapping[str, str]) -> Verdict:
    """What one pip-audit run means for the suite (pure: the unit tests feed it canned runs)."""
    report = _report(stdout)
    if report is None:
        tail = [ln for ln in stderr.strip().splitlines() if ln.strip()][-6:]
        if returncode != 0 and _UNREACHABLE.search(stderr):
            return Verdict(0, "dependency audit NOT RUN: pip-audit could not reach its vulnerability "
                              "service; not failing the suite (run `make audit` where it answers)", tail,
                           ran=False)
        if returncode == 0:
            return Verdict(2, "pip-audit exited 0 but wrote no JSON report: cannot tell what it audited",
                           tail)
        return Verdict(2, f"pip-audit failed (exit {returncode}) without a report", tail)
    by_id = {k.upper(): (k, reason) for k, reason in exceptions.items()}
    findings: list[Finding] = []
    accepted: list[str] = []
    skipped: list[str] = []
    not_found: list[str] = []
    audited = 0
    deps = report["dependencies"]
    assert isinstance(deps, list)
    for dep in deps:
        if not isinstance(dep, dict):
            return Verdict(2, f"pip-audit's report has a dependency that is not an object: {dep!r}")
        name = str(dep.get("name", "?"))
        if "skip_reason" in dep:
            reason = str(dep["skip_reason"])
            if _NOT_FOUND.search(reason):
                not_found.append(name)
            elif not _EDITABLE.search(reason):
                skipped.append(f"{name}: {reason}")
            continue
        audited += 1
        for v in dep.get("vulns") or []:
            f = Finding(name, str(dep.get("version", "?")), str(v.get("id", "?")),
                        tuple(str(a) for a in v.get("aliases") or ()),
                        tuple(str(x) for x in v.get("fix_versions") or ()), str(v.get("description") or ""))
            known = next((by_id[i.upper()] for i in (f.id, *f.aliases) if i.upper() in by_id), None)
            if known is None:
                findings.append(f)
            else:
                accepted.append(f"{f.package} {f.version}: {known[0]} accepted: {known[1]}")
    if audited == 0 and not_found and not skipped:
        return Verdict(0, f"dependency audit NOT RUN: the vulnerability service knew none of the "
                          f"{len(not_found)} installed dependencies (every one 'not found on PyPI': a "
                          "mirror or proxy without PyPI's JSON API answered); not failing the suite",
                       [f"not found: {', '.join(not_found[:12])}{', ...' if len(not_found) > 12 else ''}"],
                       ran=False)
    notes = [*(f"not audited: {s}" for s in skipped), *accepted]
    if not_found:
        notes.insert(0, f"not audited (not found on PyPI): {', '.join(not_found)}")
    if findings:
        return Verdict(1, f"{len(findings)} known vulnerabilit{'y' if len(findings) == 1 else 'ies'} "
                          "without a recorded exception (fix, or record `ID  reason` in "
                          ".ci/audit-exceptions.txt)", [*(f.line() for f in findings), *notes])
    if audited == 0:
        return Verdict(2, "pip-audit audited no dependency at all", notes)
    return Verdict(0, f"no known vulnerabilities in {audited} audited dependencies"
                      + (f" ({len(accepted)} accepted by recorded exceptions)" if accepted else ""), notes)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--exceptions", type=Path, default=EXCEPTIONS)
    ap.add_argument("--pip-audit", default=None,
                    help="the pip-audit executable (default: this Python's pip_audit module)")
    args = ap.parse_args(argv)
    try:
        exceptions = read_exceptions(args.exceptions.read_text(encoding="utf-8"), str(args.exceptions)) \
            if args.exceptions.exists() else {}
        pip_audit = [args.pip_audit] if args.pip_audit else [sys.executable, "-m", "pip_audit"]
        cmd = command(pip_audit, exceptions)
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        except FileNotFoundError as exc:
            raise AuditSetupError(f"{pip_audit[0]} not found: install the dev extras "
                                  "(pip install -e '.[dev]')") from exc
        except subprocess.TimeoutExpired as exc:
            raise AuditSetupError("pip-audit ran for more than 15 minutes") from exc
    except AuditSetupError as exc:
        print(f"audit: error: {exc}", file=sys.stderr)
        return 2
    verdict = judge(run.returncode, run.stdout, run.stderr, exceptions)
    stream = sys.stdout if verdict.code == 0 and verdict.ran else sys.stderr
    print(f"audit: {verdict.headline}", file=stream)
    for line in verdict.lines:
        print(f"  {line}", file=stream)
    return verdict.code


if __name__ == "__main__":
    sys.exit(main())
