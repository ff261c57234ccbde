"""How ``bundle.zip`` of this directory was written (kept for the record; never run by the tests, and
never to be run again over the committed vector: a new format version gets a new directory).

    PYTHONPATH=. python tests/vectors/bundle-v9-case/make_vector.py OUT_DIR

writes ``bundle.zip``, ``trusted.vkey`` (the log's key) and ``witnesses.vkey`` (the witness that
cosigned) into ``OUT_DIR`` and prints what the README states. The case is worked as bundle-v5's was
(``make_vector.py`` there), over a smaller ledger.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import select

from audit.annotations import annotate
from audit.cases.events import EVENT_KIND, event_body
from audit.cases.policy import DeadlinePolicy
from audit.cases.service import act, set_policy
from audit.cases.store import catch_up
from audit.cases.tables import alerts, cases
from audit.export.create import create_case_bundle
from ledger import NoteSigner, Record, store
from ledger.append import CheckpointPolicy, Ledger
from ledger.cosign import WitnessEndpoint, collect
from ledger.cosignature import Cosigner
from ledger.jcs import canonical_bytes
from ledger.retention import place_hold
from ledger.store import connect
from ledger.witness import LogPolicy, Witness
from migrations import upgrade
from tests.audit.cases.test_cases import ALICE, BOB
from tests.audit.test_export import OFFICER, governed_pipeline
from tests.audit.test_trace_index import mixed_submissions
from wasm_rules import Sandbox

ORIGIN = "vectors.sealtrail/log"
XML = (b'<?xml version="1.0" encoding="UTF-8"?>\n<report><rentity_id>42</rentity_id>'
       b"<reason>structuring below the threshold</reason></report>\n")


def main(out: Path) -> None:
    signer = NoteSigner.generate(ORIGIN)
    with tempfile.TemporaryDirectory() as tmp:
        engine = connect(f"sqlite:///{tmp}/ledger.db", create_file=True)
        upgrade(engine)
        ledger = Ledger.create(engine, signer, ORIGIN, policy=CheckpointPolicy(1000, 3600))
        witness = Witness(Cosigner.generate("internal-audit.vectors.sealtrail/witness"),
                          [LogPolicy(ORIGIN, (signer.verifier,))], Path(tmp) / "w.db")

        def cosign() -> None:
            collect(engine, [WitnessEndpoint("https://w", witness.cosigner.verifier)], witness.post)

        with Sandbox() as sb:
            pipe = governed_pipeline(ledger, sb)
            subs = mixed_submissions(16)
            half = len(subs) // 2
            pipe.decide(subs[:half])
            set_policy(ledger, DeadlinePolicy(version="bank-2026-12", review_business_days=3), ALICE,
                       "review within three business days from December")
            pipe.decide(subs[half:])
            catch_up(engine)
            with engine.connect() as conn:
                every = conn.execute(select(cases)).all()
                by_case: dict[int, list[Any]] = {}
                for a in conn.execute(select(alerts).order_by(alerts.c.seq)):
                    by_case.setdefault(int(a.case_id), []).append(a)
            held = [c for c in every if any(a.outcome == "HOLD" for a in by_case[c.case_id])
                    and all(a.outcome != "BLOCK" for a in by_case[c.case_id])]
            target = max(held, key=lambda c: (len({a.policy_seq for a in by_case[c.case_id]}),
                                              any(a.policy_seq for a in by_case[c.case_id]), c.alerts))
            other = next(c for c in every if c.case_id != target.case_id)
            mine = by_case[target.case_id]
            act(ledger, ALICE, "comment", case=other.case_id, rationale="other case: before")
            act(ledger, ALICE, "assign", case=target.case_id, assignee=BOB)
            for a in mine:
                if a.payment == "HELD":
                    act(ledger, BOB, "release", alert=a.seq, rationale="beneficiary verified by phone")
            first = next(a for a in mine if a.outcome == "HOLD")
            with engine.connect() as conn:
                e = store.entries
                leaf = bytes(conn.execute(select(e.c.leaf_hash).where(e.c.seq == first.seq))
                             .scalar_one()).hex()
            late = event_body({"alert": {"trace_id": first.trace_id, "seq": first.seq, "leaf_hash": leaf}},
                              "reject", ALICE.to_json(), rationale="reject it: too late, it was released")
            ledger.append_many([Record.from_canonical_body(EVENT_KIND, canonical_bytes(late))])
            act(ledger, BOB, "link", case=target.case_id, link=other.case_id,
                rationale="same beneficiary network")
            act(ledger, ALICE, "link", case=other.case_id, link=target.case_id,
                rationale="linked from the other side too")
            act(ledger, ALICE, "comment", case=other.case_id, rationale="other case: between")
            annotate(ledger, mine[0].trace_id, BOB, "NOTE", "customer called about the held payment")
            filed = act(ledger, BOB, "file_report", case=target.case_id, report=XML,
                        rationale="STR to the FIU")
            place_hold(ledger, f"STR-{target.case_id}", filed.seq, filed.seq, "STR filed: keep the report")
            act(ledger, BOB, "close", case=target.case_id, disposition="REPORT_FILED",
                rationale="STR filed; relationship exited")
            act(ledger, ALICE, "comment", case=other.case_id, rationale="other case: after")
            summary = create_case_bundle(engine, ledger, signer, out / "bundle.zip", target.case_id, OFFICER,
                                         now=datetime.now(UTC), cosign=cosign, retention_days=3653)
        engine.dispose()
    (out / "trusted.vkey").write_text(signer.verifier.vkey + "\n")
    (out / "witnesses.vkey").write_text(witness.cosigner.verifier.vkey + "\n")
    print(orjson.dumps({"out": str(out), "vkey": signer.verifier.vkey, "decisions": len(subs),
                        "case": summary.case, "other": other.case_id, "counts": summary.counts,
                        "report_sha256": hashlib.sha256(XML).hexdigest()}).decode())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
