"""The examiner's side of a bundle: read it, verify it offline, replay every decision.

Imports no database code and none of the decision path: it runs where only the bundle and the
pinned keys are.
"""

from audit.bundle.verify import UNPINNED_WARNING, BundleReport, Limits, verify_bundle

__all__ = ["UNPINNED_WARNING", "BundleReport", "Limits", "verify_bundle"]
