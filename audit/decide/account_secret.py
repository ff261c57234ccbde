"""Where decision summaries get their account secret: the one row of ``audit_account_secret``.

Revision 0006 makes the secret (32 random bytes) when the schema is created; every decider of
the ledger reads the same row, so all of them key accounts alike. The app role may only read it.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from audit.decide.summary import AccountKeyer
from ledger import LedgerUnavailableError, SchemaError

__all__ = ["TABLE", "load_keyer", "read_keyer"]

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
