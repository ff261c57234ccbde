"""``sealtrail keys show|rotate|revoke``: the checkpoint signing key examiners pin, its rotation
and, after a compromise, the revocation of a retired key (docs/signing-keys.md).

``api.ops`` is imported in the command bodies so that ``sealtrail --help`` does not load it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli.common import DbOpt, JsonOpt, KeysOpt, emit, out, settings

__all__ = ["keys_app"]

keys_app = typer.Typer(no_args_is_help=True,
                       help="Show, rotate and revoke the checkpoint signing key.")


@keys_app.command("show")
def keys_show(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """Print the verifier key examiners pin (and the ledger's key history)."""
    from api import ops

    doc = ops.keys_show(settings(db, keys))
    emit(doc, as_json, lambda: out.print(doc["active"], markup=False))


@keys_app.command("rotate")
def keys_rotate(
    db: DbOpt = None,
    keys: KeysOpt = None,
    to: Annotated[str | None, typer.Option(
        "--to", help="generate the new key in this key store instead (a pkcs11: URI: moves a file "
                     "key into an HSM; set SEALTRAIL_KEY_STORE to it afterwards)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Start signing with a new key; the rotation is itself a ledger record.

    With a key file the old file moves to retired/; with a PKCS#11 key store (SEALTRAIL_KEY_STORE)
    the new pair is generated inside the token, labelled <object>-<key id>. Running servers and
    score runs on the same ledger and key store take the new key up at their next commit, without a
    restart."""
    from api import ops

    doc = ops.keys_rotate(settings(db, keys), to)
    where = (f"old private key moved to {doc['retired_file']}" if doc["retired_file"]
             else f"new key generated in {doc['key_store']}")
    emit(doc, as_json, lambda: out.print(
        f"rotated at seq {doc['seq']}\nold {doc['old_vkey']}\nnew {doc['new_vkey']}\n{where}\n"
        "running servers using this key store sign with the new key from their next commit",
        markup=False))


@keys_app.command("revoke")
def keys_revoke(
    vkey: Annotated[str, typer.Option("--vkey", help="the retired verifier key to revoke")],
    reason: Annotated[str, typer.Option("--reason", help="why (one line, sealed with the revocation)")],
    from_size: Annotated[int | None, typer.Option(
        "--from-size", min=1, help="tree size from which its checkpoints are refused [default: the "
                                   "size at which it was rotated away; earlier if it was stolen "
                                   "earlier]")] = None,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a retired signing key after a compromise: a sealed ledger.key_revocation record,
    endorsed by the active key. From then on 'ledger verify' and checkpoint checks refuse every
    checkpoint signed only by that key at or after --from-size. Rotate the key away first."""
    from api import ops

    doc = ops.keys_revoke(settings(db, keys), vkey, reason, from_size)
    lines = [f"revoked at seq {doc['seq']}: {doc['revoked_vkey']}",
             f"checkpoints it signed from size {doc['from_size']} on are refused",
             f"endorsed by {doc['endorser_vkey']}"]
    if doc["disowned_checkpoints"]:
        lines.append(f"{len(doc['disowned_checkpoints'])} checkpoints stored by this ledger are now "
                     f"refused by 'ledger verify' (sizes {doc['disowned_checkpoints'][:10]}): the "
                     "entries up to them are vouched for by the newer checkpoints only")
    emit(doc, as_json, lambda: out.print("\n".join(lines), markup=False))
