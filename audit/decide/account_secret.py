"""The database side of decision summaries (``audit.decide.summary`` stays pure): the account
secret, the one row of ``audit_account_secret``, and the ledger tail that seals a summary linked
to the newest one.

Revision 0006 makes the secret (32 random bytes) when the schema is created; every decider of
the ledger reads the same row, so all of them key accounts alike. The app role may only read it.

The feature state (velocity windows, transaction graph) and the state deltas sealed with each
commit (``audit.state.delta``) key accounts under the ledger's **state key**, HMAC-SHA256 of the
secret under a domain of its own: every decider of the ledger derives the same key, so one
process applies the deltas another sealed, and a summary's account keys and the state's
identifiers are different hashes of an account (neither can be matched to the other).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from audit.decide.summary import SUMMARY_KIND, AccountKeyer, tail
from ledger import LedgerUnavailableError, Record, SchemaError, store
from ledger.jcs import Jcs

__all__ = ["TABLE", "load_keyer", "load_state_key", "read_keyer", "read_state_key", "sealing_tail"]

TABLE = "audit_account_secret"
_STATE_KEY_DOMAIN = b"sealtrail.state-key/1\n"
T = TypeVar("T")


def _secret(conn: Connection) -> bytes:
    secret = conn.exec_driver_sql(f"SELECT secret FROM {TABLE} WHERE id = 1").scalar()
    if secret is None or len(bytes(secret)) != 32:
        raise SchemaError(f"{TABLE} holds no 32-byte secret (run 'sealtrail init' to migrate)")
    return bytes(secret)


def read_state_key(conn: Connection) -> bytes:
    """The ledger's state key (32 bytes); ``SchemaError`` if the schema holds no secret."""
    return hmac.digest(_secret(conn), _STATE_KEY_DOMAIN, hashlib.sha256)


def load_state_key(engine: Engine) -> bytes:
    return _loaded(engine, read_state_key)


def read_keyer(conn: Connection) -> AccountKeyer:
    """The ledger's ``AccountKeyer``; ``SchemaError`` if the schema holds no secret."""
    return AccountKeyer(_secret(conn))


def load_keyer(engine: Engine) -> AccountKeyer:
    return _loaded(engine, read_keyer)


def _loaded(engine: Engine, read: Callable[[Connection], T]) -> T:
    """``read`` on a connection of its own; ``LedgerUnavailableError`` if the database cannot answer."""
    try:
        with engine.connect() as conn:
            return read(conn)
    except DBAPIError as exc:
        raise LedgerUnavailableError(f"cannot read the account secret: {exc.orig}") from exc


def _newest_summary(conn: Connection) -> tuple[int, bytes] | None:
    return store.last_of_kind(conn, SUMMARY_KIND)


def sealing_tail(key_id: str, entries: Jcs) -> Callable[[Connection, int], Record]:
    """The ``Ledger.append_many(tail=...)`` that seals the summary of ``entries`` (its canonical
    ``decisions`` array) keyed under ``key_id``, linked under the sequencer lock to the newest
    summary of the log."""
    return tail(key_id, entries, _newest_summary)
