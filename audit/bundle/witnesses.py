"""A bundle's witness cosignatures (format 8): the C2SP tlog-cosignature lines its ``checkpoint.txt``
carries after the log's signature, and the quorum an examiner asks for.

``manifest.witnesses`` lists each cosignature the bundle carries (witness verifier key and timestamp);
each must be in the checkpoint note and verify. What that proves depends on whose keys the examiner
pins: a cosignature by a witness the examiner trusts (``--witness-key``) says that witness saw this
checkpoint as the log's one consistent history at its time, so the bank could not have shown another
examiner a different history of the same size without that witness refusing. ``--min-witnesses N``
fails the bundle unless N pinned witnesses cosigned its checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from audit.bundle.reader import MANIFEST, BundleManifest
from audit.errors import BundleError, BundleMalformed, BundleTampered, BundleUntrusted
from ledger.cosignature import CosignerVerifier, cosignatures
from ledger.errors import KeyFileError, NoteError

__all__ = ["WitnessReport", "check_witnesses"]


@dataclass(frozen=True)
class WitnessReport:
    """The cosignatures that verified (vkey, timestamp), and how many are by pinned witnesses."""

    cosigned: tuple[tuple[str, int], ...]
    pinned: int
    required: int


def check_witnesses(manifest: BundleManifest, note: str, checkpoint_file: str,
                    pinned: Sequence[CosignerVerifier], min_witnesses: int
                    ) -> tuple[WitnessReport, list[BundleError]]:
    """Check ``manifest.witnesses`` against the checkpoint ``note`` and the examiner's quorum."""
    failures: list[BundleError] = []
    listed: list[tuple[CosignerVerifier, int]] = []
    for vkey, timestamp in manifest.witnesses:
        try:
            listed.append((CosignerVerifier.from_vkey(vkey), timestamp))
        except KeyFileError as exc:
            failures.append(BundleMalformed(f"manifest.witnesses: {exc}", kind="manifest.field",
                                            file=MANIFEST))
    found: dict[CosignerVerifier, int] = {}
    try:
        found = {c.witness: c.timestamp for c in cosignatures(note, [v for v, _ in listed] + list(pinned))}
    except NoteError as exc:
        failures.append(BundleTampered(f"a witness cosignature does not verify: {exc}",
                                       kind="witness.cosignature", file=checkpoint_file))
    for v, timestamp in listed:
        if found.get(v) != timestamp:
            failures.append(BundleTampered(
                f"manifest.witnesses lists {v.vkey} at {timestamp}; {checkpoint_file} carries "
                + ("no cosignature by it" if v not in found else f"its cosignature at {found[v]}"),
                kind="witness.missing", file=checkpoint_file))
    # distinct witnesses: a key pinned twice, or one public key under two names, is one witness
    count = len({v.public_key for v in pinned if v in found})
    if min_witnesses > count:
        shown = ", ".join(dict.fromkeys(v.vkey.split("+")[0] for v in pinned)) or "none pinned"
        failures.append(BundleUntrusted(
            f"{count} of the {min_witnesses} witness cosignatures required by pinned witnesses ({shown}) "
            f"are on the checkpoint" + ("" if manifest.witnesses else
                                        f"; a format-{manifest.version} bundle carries none"
                                        if manifest.version < 8 else "; this bundle carries none"),
            kind="witness.quorum", file=checkpoint_file))
    cosigned = tuple(sorted((v.vkey, t) for v, t in found.items()))
    return WitnessReport(cosigned, count, min_witnesses), failures
