"""``sealtrail keys show|rotate``: the checkpoint signing key examiners pin, and its rotation.

``api.ops`` is imported in the command bodies so that ``sealtrail --help`` does not load it.
"""

from __future__ import annotations

import typer

from api.cli.common import DbOpt, JsonOpt, KeysOpt, emit, out, settings

__all__ = ["keys_app"]

keys_app = typer.Typer(no_args_is_help=True, help="Show and rotate the checkpoint signing key.")


@keys_app.command("show")
def keys_show(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """Print the verifier key examiners pin (and the ledger's key history)."""
    from api import ops

    doc = ops.keys_show(settings(db, keys))
    emit(doc, as_json, lambda: out.print(doc["active"], markup=False))


@keys_app.command("rotate")
def keys_rotate(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """Start signing with a new key; the rotation is itself a ledger record.

    Running servers and score runs on the same ledger and key directory take the new key up at
    their next commit, without a restart."""
    from api import ops

    doc = ops.keys_rotate(settings(db, keys))
    emit(doc, as_json, lambda: out.print(
        f"rotated at seq {doc['seq']}\nold {doc['old_vkey']}\nnew {doc['new_vkey']}\n"
        f"old private key moved to {doc['retired_file']}\n"
        "running servers using this key directory sign with the new key from their next commit",
        markup=False))
