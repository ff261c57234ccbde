"""A bundle's compliance facts (format 9), recomputed offline.

``compliance.json`` states the facts of the bundle's window (``audit.compliance.facts``), or, in a
bundle cut for one case, of the period its records span: from the earliest to the latest
``recorded_at`` of the lines of ``records.jsonl`` in the case's search range ``[from_seq, to_seq]``
(``audit.compliance.facts.covering``), its decisions being the case's. The
verifier derives them again with the same function from the sealed records the bundle carries:
the decisions and refusals of ``records.jsonl`` (handed over by the record pass) and the history
records of ``compliance/records.jsonl`` (key genesis, rotations and revocations, legal holds,
purges, ruleset governance, from seq 0 to the window's end), each proved in the checkpoint's tree
by its inclusion proof in ``compliance/proofs.json``. The first fact that differs fails the bundle
(``compliance.facts``), as does a ``report.html`` cell (``data-fact``) that shows another value
(``compliance.report``). What ``compliance.json`` puts under ``stated`` (retention setting,
checkpoint and cosignature rows, witnesses configured) is shown, never checked: no sealed record
states it.

Limit: each history record carried is proved to be in the log, and the keys it names must be the
manifest's key list, but that no other history record exists before the window's end is the
exporter's signed statement (no decision summary speaks for these kinds).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import html
import re
from typing import Any

import orjson

from audit.bundle.reader import MANIFEST, BundleArchive, BundleManifest
from audit.bundle.records import RECORDS, Findings
from audit.compliance.facts import (
    COUNTED_KINDS,
    HISTORY_KINDS,
    ComplianceFactsError,
    FactsBuilder,
    Period,
    covering,
    first_difference,
)
from audit.errors import BundleError, BundleMalformed, BundleTampered
from ledger.errors import LedgerError
from ledger.merkle import verify_inclusion

__all__ = ["REPORT", "ComplianceCheck"]

REPORT = "report.html"
_FACT = re.compile(r'<td data-fact="([^"]*)">([^<]*)</td>')
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _lookup(facts: Any, path: str) -> tuple[bool, Any]:
    node = facts
    for name, index in _STEP.findall(path):
        if name and isinstance(node, dict) and name in node:
            node = node[name]
        elif index and isinstance(node, list) and int(index) < len(node):
            node = node[int(index)]
        else:
            return False, None
    return True, node


class ComplianceCheck:
    """Fed the bundle's decisions and refusals (``record``, the record pass's sink; in a case bundle
    every line, to find the period the case's records span), then ``finish``."""

    def __init__(self, manifest: BundleManifest, found: Findings) -> None:
        sec = manifest.compliance
        assert sec is not None
        self.manifest, self.section, self.found = manifest, sec, found
        self.builder = FactsBuilder(Period(sec.start, sec.end))
        self.facts: dict[str, Any] | None = None
        self._span: tuple[str, str] | None = None  # a case bundle: the first and last recorded_at in range
        if manifest.case is None:
            window = (manifest.filters.get("from"), manifest.filters.get("to"))
            if window != (sec.start, sec.end):
                self._period_differs(f"the bundle's window [{window[0]}, {window[1]})")

    def _period_differs(self, what: str) -> None:
        sec = self.section
        self.found.add(BundleTampered(f"manifest.compliance.period is [{sec.start}, {sec.end}), {what}"[:600],
                                      kind="compliance.period", file=MANIFEST))

    def record(self, seq: int, env: dict[str, Any]) -> None:
        case = self.manifest.case
        if case is not None and case.from_seq <= seq <= case.to_seq:
            at = str(env["recorded_at"])  # a string: the record pass checked the envelope
            lo, hi = self._span or (at, at)
            self._span = (min(lo, at), max(hi, at))
        if env.get("kind") not in COUNTED_KINDS:
            return
        try:
            self.builder.add(seq, env)
        except ComplianceFactsError as exc:
            self.found.add(BundleMalformed(exc.detail, kind="compliance.record", file=RECORDS, seq=seq))

    def _case_period(self) -> None:
        """A case bundle's period starts at its earliest record in the case's range (the case's first
        decision) and holds every record of that range it carries: a period cut short to leave facts
        out fails. Its end is the exporter's (the last record's instant, included): a line dropped
        from the bundle is the record checks' to name, not this one's."""
        case, sec = self.manifest.case, self.section
        assert case is not None
        where = f"the records carried of seqs [{case.from_seq}, {case.to_seq}]"
        if self._span is None:
            self._period_differs(f"and {where} are none")
            return
        try:
            span = covering(*self._span)
            covering(sec.start, sec.end)  # a real period, in the ledger's form
        except ValueError as exc:
            self._period_differs(f"not a period of {where}: {exc}")
            return
        if sec.start != span.start or sec.end < span.end:
            self._period_differs(f"{where} span [{span.start}, {span.end}): the period must start "
                                 "with the first and hold the last")

    def finish(self, bundle: BundleArchive, size: int, root: bytes) -> dict[str, Any] | None:
        """Read and prove the history records, recompute the facts and compare them with
        ``compliance.json`` and ``report.html``; the recomputed facts, or None if they cannot be."""
        sec = self.section
        if self.manifest.case is not None:
            self._case_period()
        try:
            history = self._history(bundle, size, root)
            if history is None:
                return None
            for seq, env in history:
                self.builder.add(seq, env)
            facts = self.builder.facts()
        except ComplianceFactsError as exc:
            self.found.add(BundleMalformed(exc.detail, kind="compliance.record", file=sec.records_file,
                                           seq=exc.seq))
            return None
        except BundleError as exc:
            self.found.add(exc)
            return None
        self.facts = facts
        self._compare(bundle, facts)
        return facts

    def _history(self, bundle: BundleArchive, size: int, root: bytes
                 ) -> list[tuple[int, dict[str, Any]]] | None:
        sec, cap = self.section, bundle.limits.max_manifest
        try:
            proofs = orjson.loads(bundle.read(sec.proofs_file, cap))
            entries = proofs["entries"]
            if proofs["size"] != size or not isinstance(entries, list):
                raise ValueError(f"size is {proofs['size']!r}, the checkpoint's {size}")
            lines = bundle.read(sec.records_file, cap).split(b"\n")
        except (orjson.JSONDecodeError, ValueError, TypeError, KeyError) as exc:
            self.found.add(BundleMalformed(f"not the proofs of the history records: {exc}",
                                           kind="compliance.proofs", file=sec.proofs_file))
            return None
        if lines[-1] != b"" or len(lines) - 1 != len(entries) or len(entries) != sec.records:
            self.found.add(BundleTampered(
                f"manifest.compliance.records is {sec.records}; {sec.records_file} holds {len(lines) - 1} "
                f"line(s), {sec.proofs_file} {len(entries)} proof(s)", kind="compliance.records",
                file=sec.records_file))
            return None
        out: list[tuple[int, dict[str, Any]]] = []
        for line, proof in zip(lines, entries, strict=False):
            try:
                seq = proof["seq"]
                hashes = [base64.b64decode(h, validate=True) for h in proof["hashes"]]
                if type(seq) is not int:
                    raise ValueError("seq is not an integer")
                verify_inclusion(seq, size, hashlib.sha256(b"\x00" + line).digest(), hashes, root)
                env = orjson.loads(line)
                kind = env.get("kind") if isinstance(env, dict) else None
                if kind not in HISTORY_KINDS:
                    raise ValueError(f"an entry of kind {kind!r} is no history record")
            except (LedgerError, binascii.Error, orjson.JSONDecodeError, ValueError, TypeError,
                    KeyError) as exc:
                at = proof.get("seq") if isinstance(proof, dict) else None
                self.found.add(BundleTampered(f"a history record does not hold: {exc}",
                                              kind="compliance.proof", file=sec.records_file,
                                              seq=at if type(at) is int else None))
                return None
            out.append((seq, env))
        return out

    def _compare(self, bundle: BundleArchive, facts: dict[str, Any]) -> None:
        sec = self.section
        try:
            doc = orjson.loads(bundle.read(sec.file, bundle.limits.max_manifest))
            stated, scope = doc["facts"], doc["scope"]
        except (orjson.JSONDecodeError, TypeError, KeyError) as exc:
            self.found.add(BundleMalformed(f"not the compliance facts: {exc}", kind="compliance.facts",
                                           file=sec.file))
            return
        if scope != sec.scope:
            self.found.add(BundleTampered(f"scope is {scope!r}, the manifest says {sec.scope!r}",
                                          kind="compliance.facts", file=sec.file))
        path = first_difference(stated, facts)
        if path is not None:
            said, got = _lookup(stated, path)[1], _lookup(facts, path)[1]
            self.found.add(BundleTampered(f"states {path} = {said!r}, the sealed records give {got!r}"[:600],
                                          kind="compliance.facts", file=sec.file))
        keys = sorted({k["vkey"] for k in facts["keys"]["history"]})
        if keys != sorted(set(self.manifest.verifier_keys)):
            self.found.add(BundleTampered(f"the sealed key history names {keys}, manifest.log.verifier_keys "
                                          f"{sorted(self.manifest.verifier_keys)}"[:600],
                                          kind="compliance.keys", file=sec.records_file))
        self._report(bundle, facts)

    def _report(self, bundle: BundleArchive, facts: dict[str, Any]) -> None:
        if REPORT not in bundle.sizes:
            return  # file.missing says so
        page = bundle.read(REPORT, bundle.limits.max_manifest).decode("utf-8", "replace")
        if 'data-compliance="1"' not in page:
            self.found.add(BundleTampered("the report does not show the compliance facts",
                                          kind="compliance.report", file=REPORT))
            return
        for raw_path, raw_value in _FACT.findall(page):
            path, shown = html.unescape(raw_path), html.unescape(raw_value)
            ok, value = _lookup(facts, path)
            want = "-" if value is None else str(value)
            if not ok or shown != want:
                self.found.add(BundleTampered(f"shows {path} = {shown!r}, the sealed records give "
                                              f"{(want if ok else 'no such fact')!r}"[:600],
                                              kind="compliance.report", file=REPORT))
                return
