"""How ``vector.json`` of this directory was written (kept for the record; never run by the tests, and
never to be run again over the committed vector: a new record version gets a new directory).

    PYTHONPATH=. python tests/vectors/ledger-epoch-v1/make_vector.py OUT_DIR

A primary and a hot standby from this machine's PostgreSQL binaries (``tests.pg_cluster``); a ledger
created on the primary, replicated, the primary stopped, the standby promoted and its epoch sealed
(``ledger.fencing.seal_epoch``, what ``sealtrail standby promote`` runs); the sealed entry read back.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import migrations
from ledger import NoteSigner, Record, store
from ledger.append import CheckpointPolicy, Ledger
from ledger.fencing import newest_epoch, seal_epoch
from ledger.replication import promote
from tests import pg_cluster

ORIGIN = "vectors.sealtrail/log"


def main(out: Path) -> None:
    signer = NoteSigner.generate(ORIGIN)
    with pg_cluster.Cluster.create(replication=True) as primary:
        standby = primary.standby("site_b")
        primary.wait_streaming("site_b")
        engine = store.connect(primary.url, create_file=True)
        migrations.upgrade(engine)
        ledger = Ledger.create(engine, signer, ORIGIN, policy=CheckpointPolicy(4, 3600))
        ledger.append_many([Record("note", {"i": i}) for i in range(5)])
        primary.wait_streaming("site_b", caught_up=True)
        engine.dispose()
        primary.stop(mode="immediate")
        promoted = store.connect(standby.url)
        assert promote(promoted) is True
        sealed = seal_epoch(Ledger(promoted, signer, policy=CheckpointPolicy(4, 3600)))
        with promoted.connect() as conn:
            row = conn.exec_driver_sql(
                f"SELECT seq, record, leaf_hash FROM ledger_entries WHERE seq = {sealed.seq}").one()
            epoch = newest_epoch(conn)
        promoted.dispose()
    assert epoch is not None
    doc = {"origin": ORIGIN, "seq": int(row[0]),
           "entry_b64": base64.b64encode(bytes(row[1])).decode(),
           "leaf_hash": bytes(row[2]).hex(),
           "expect": {"seq": epoch.seq, "timeline": epoch.timeline}}
    (out / "vector.json").write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
