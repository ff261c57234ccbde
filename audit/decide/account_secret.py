"""The database side of decision summaries (``audit.decide.summary`` stays pure): the account
secret, the one row of ``audit_account_secret``, and the ledger tail that seals a summary linked
to the newest one.

Revision 0006 makes the secret (32 random bytes) when the schema is created; every decider of
the ledger reads the same row, so all of them key accounts alike. The app role may only read it.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from audit.decide.summary import SUMMARY_KIND, AccountKeyer, tail
from ledger import LedgerUnavailableError, Record, SchemaError, store
from ledger.jcs import Jcs

__all__ = ["TABLE", "load_keyer", "read_keyer", "sealing_tail"]

TABLE = "audit_account_secret"


def read_keyer(conn: Connection) -> AccountKeyer:
    """The ledger's ``AccountKeyer``; ``SchemaError`` if the schema holds no secret."""
    secret = conn.exec_driver_sql(f"SELECT secret FROM {TABLE} WHERE id = 1").scalar()
    if secret is None or len(bytes(secret)) != 32:
        raise SchemaError(f"{TABLE} holds no 32-byte secret (run 'sealtrail init' to migrate)")
    return AccountKeyer(bytes(secret))


def load_keyer(engine: Engine) -> AccountKeyer:
    try:
        with engine.connect() as conn:
            return read_keyer(conn)
    except DBAPIError as exc:
        raise LedgerUnavailableError(f"cannot read the account secret: {exc.orig}") from exc


def _newest_summary(conn: Connection) -> tuple[int, bytes] | None:
    return store.last_of_kind(conn, SUMMARY_KIND)


def sealing_tail(key_id: str, entries: Jcs) -> Callable[[Connection, int], Record]:
    """The ``Ledger.append_many(tail=...)`` that seals the summary of ``entries`` (its canonical
    ``decisions`` array) keyed under ``key_id``, linked under the sequencer lock to the newest
    summary of the log."""
    return tail(key_id, entries, _newest_summary)
