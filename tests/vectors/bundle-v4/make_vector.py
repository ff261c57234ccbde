"""How ``bundle.zip`` of this directory was written (kept for the record; never run by the tests, and
never to be run again over the committed vector: a new format version gets a new directory).

    PYTHONPATH=. python tests/vectors/bundle-v4/make_vector.py OUT_DIR

writes ``bundle.zip`` and ``trusted.vkey`` into ``OUT_DIR``.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from audit.decide.refusal import empty_body, header_refused, refusal_of, too_large, undetected
from audit.decide.refusal_seal import seal_refusal
from audit.decide.submissions import parse_submissions
from audit.errors import SubmissionRefusedError
from audit.export.create import ExportFilters, create_bundle
from inference.messages import MessageError, detect_format
from ledger import NoteSigner
from ledger.append import CheckpointPolicy, Ledger
from ledger.store import connect
from migrations import upgrade
from tests.audit.test_export import OFFICER, governed_pipeline
from tests.audit.test_pipeline import submissions
from tests.audit.test_refusals import MT940, SCORER, unknown_currency
from wasm_rules import Sandbox

ORIGIN = "vectors.sealtrail/log"


def _refused(raw: bytes, fmt: str, batch: bool) -> SubmissionRefusedError:
    with pytest.raises(SubmissionRefusedError) as info:
        parse_submissions(raw, fmt, SCORER.to_json(), batch=batch)
    return info.value


def main(out: Path) -> None:
    signer = NoteSigner.generate(ORIGIN)
    who = SCORER.to_json()
    with tempfile.TemporaryDirectory() as tmp:
        engine = connect(f"sqlite:///{tmp}/ledger.db", create_file=True)
        upgrade(engine)
        ledger = Ledger.create(engine, signer, ORIGIN, policy=CheckpointPolicy(1000, 3600))
        with Sandbox() as sb:
            pipe = governed_pipeline(ledger, sb)
            subs = submissions(36)
            pipe.decide(subs[:12])
            second = pipe.decide(subs[12:24])
            batch = "POST /v1/decisions/batch"
            try:
                detect_format(b"hello")
            except MessageError as exc:
                not_detected = exc
            two = b"$".join([MT940, MT940])
            for r in (
                refusal_of(_refused(two, "mt", True), two, fmt="mt", principal=who, batch=True, via=batch,
                           max_items=10_000),
                refusal_of(_refused(unknown_currency(), "json", False), unknown_currency(), fmt="json",
                           principal=who, batch=False, via="POST /v1/decisions", max_items=10_000),
                empty_body(b"", fmt="json", principal=who, batch=False, via="POST /v1/decisions",
                           max_items=10_000),
                header_refused("unsupported_media_type", "Content-Type",
                               "Content-Type application/pdf is not accepted", fmt="auto", principal=who,
                               batch=True, via=batch, declared=812),
                too_large(70_000_000, 64 << 20, fmt="iso20022", principal=who, batch=True, via=batch),
                undetected(not_detected, b"hello", principal=who, batch=True, via="sealtrail score"),
            ):
                seal_refusal(ledger, r)
            third = pipe.decide(subs[24:])
            filters = ExportFilters.of(second[0].recorded_at, third[0].recorded_at)
            create_bundle(engine, ledger, signer, out / "bundle.zip", filters, OFFICER,
                          now=datetime.now(UTC))
        engine.dispose()
    (out / "trusted.vkey").write_text(signer.verifier.vkey + "\n")
    print(orjson.dumps({"out": str(out), "vkey": signer.verifier.vkey}).decode())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
