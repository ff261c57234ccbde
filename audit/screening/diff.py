"""What changed between two versions of a list, entry by entry (``sealtrail lists diff``).

Entries are matched by the list's own entry id: an id only in the newer version was added, one
only in the older was removed, and one in both whose published content differs (a name, an
alias, an identifier, a programme, ...) changed, with the fields that differ named. Officers read
this before re-screening held payments against the new version; examiners read it to see what a
decision could not yet have known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference.screening.entries import ListEntry, SanctionsList

__all__ = ["ListDiff", "diff_lists"]


@dataclass(frozen=True)
class ListDiff:
    """Entries added, removed and changed from ``old`` to ``new`` (each sorted by entry id)."""

    old_sha256: str
    new_sha256: str
    added: tuple[ListEntry, ...]
    removed: tuple[ListEntry, ...]
    changed: tuple[tuple[ListEntry, ListEntry, tuple[str, ...]], ...]  # (old, new, fields that differ)

    @property
    def unchanged(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def to_json(self) -> dict[str, Any]:
        return {
            "old_sha256": self.old_sha256, "new_sha256": self.new_sha256,
            "added": [e.to_json() for e in self.added],
            "removed": [e.to_json() for e in self.removed],
            "changed": [{"entry_id": n.entry_id, "fields": list(f), "old": o.to_json(), "new": n.to_json()}
                        for o, n, f in self.changed],
        }


def diff_lists(old: SanctionsList, new: SanctionsList) -> ListDiff:
    """``old`` -> ``new``, entry by entry (see the module's text)."""
    added = tuple(new.by_id[i] for i in sorted(new.by_id.keys() - old.by_id.keys()))
    removed = tuple(old.by_id[i] for i in sorted(old.by_id.keys() - new.by_id.keys()))
    changed = []
    for i in sorted(old.by_id.keys() & new.by_id.keys()):
        a, b = old.by_id[i].to_json(), new.by_id[i].to_json()
        fields = tuple(k for k in a if a[k] != b[k])
        if fields:
            changed.append((old.by_id[i], new.by_id[i], fields))
    return ListDiff(old.sha256, new.sha256, added, removed, tuple(changed))
