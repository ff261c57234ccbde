"""The offline bundle verifier's exception tree: every outcome "this bundle does not verify".

All derive from ``BundleError``, itself a ``ledger.VerificationError``, so one ``except`` catches
them and the CLI maps them to exit codes in one place. Each carries its evidence: the bundle
file it is about, the record (seq, trace id) where there is one, and what differed. The
verifier collects record-level failures (up to a cap) and raises them together as
``BundleFailed`` so an examiner sees the extent, not only the first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger.errors import VerificationError

if TYPE_CHECKING:
    from audit.verify_bundle import BundleReport

__all__ = [
    "BundleError", "BundleFailed", "BundleMalformed", "BundleTampered", "BundleUnreadable",
    "BundleUntrusted", "ProofMismatch", "ReplayMismatch",
]


class BundleError(VerificationError):
    """Base of every verifier outcome. ``kind`` is a short stable code (``leaf_hash``,
    ``replay.outcome``, ...); ``file``, ``seq`` and ``trace_id`` say where; ``detail`` what."""

    code = "bundle"

    def __init__(self, detail: str, *, kind: str | None = None, file: str | None = None,
                 seq: int | None = None, trace_id: str | None = None) -> None:
        self.kind = kind or self.code
        self.file, self.seq, self.trace_id, self.detail = file, seq, trace_id, detail
        where = ", ".join(x for x in (file, None if seq is None else f"seq {seq}", trace_id) if x)
        super().__init__(f"{self.kind}: {detail}" + (f" [{where}]" if where else ""))

    @property
    def failures(self) -> tuple[BundleError, ...]:
        """The individual failures this error stands for (itself, unless an aggregate)."""
        return (self,)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "file": self.file, "seq": self.seq, "trace_id": self.trace_id,
                "detail": self.detail}

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.detail, self.kind, self.file, self.seq, self.trace_id))


def _rebuild(cls: type[BundleError], detail: str, kind: str, file: str | None, seq: int | None,
             trace_id: str | None) -> BundleError:
    return cls(detail, kind=kind, file=file, seq=seq, trace_id=trace_id)


class BundleUnreadable(BundleError):
    """The file cannot be read as a ZIP at all (missing, truncated, not a zip): exit 2."""

    code = "unreadable"


class BundleMalformed(BundleError):
    """The bundle is readable but breaks the format (unsafe paths, bomb-like sizes, a manifest
    or line that is not what the spec says)."""

    code = "malformed"


class BundleTampered(BundleError):
    """Bytes differ from what the signed manifest or the records state (file hash, leaf hash,
    index line, chain, payload, unlisted or missing file)."""

    code = "tampered"


class BundleUntrusted(BundleError):
    """A signature (manifest or checkpoint) is not by a trusted key, or does not verify."""

    code = "untrusted"


class ProofMismatch(BundleError):
    """The Merkle evidence does not lead to the signed checkpoint (multiproof, inclusion
    path, consistency with the previous export)."""

    code = "proof"


class ReplayMismatch(BundleError):
    """Re-running a decision (rules in the sandbox, numpy model) does not give what it records."""

    code = "replay"


class BundleFailed(BundleError):
    """Several failures at once (at most the verifier's cap, ``dropped`` more not kept), with the
    report of what was checked so far."""

    code = "failed"

    def __init__(self, failures: list[BundleError], dropped: int = 0,
                 report: BundleReport | None = None) -> None:
        self._failures = tuple(failures)
        self.dropped = dropped
        self.report = report
        more = f" (and {dropped} more)" if dropped else ""
        first = "; ".join(str(f) for f in failures[:3])
        super().__init__(f"{len(failures) + dropped} failure(s){more}: {first}", kind=self.code)

    @property
    def failures(self) -> tuple[BundleError, ...]:
        return self._failures

    def __reduce__(self) -> Any:
        return (type(self), (list(self._failures), self.dropped, self.report))
