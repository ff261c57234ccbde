"""Cutting an export bundle: the selection read from the ledger, the files written, the manifest signed.

``create_bundle`` is the entry point (``audit.export.create``); the offline side that reads and
verifies a bundle is ``audit.bundle``.
"""

from audit.export.create import (
    BUNDLE_SCHEMA,
    EXPORT_KIND,
    EXPORT_SCHEMA,
    BundleSummary,
    ExportFilters,
    create_bundle,
    list_exports,
    manifest_sig_text,
)

__all__ = [
    "BUNDLE_SCHEMA", "EXPORT_KIND", "EXPORT_SCHEMA", "BundleSummary", "ExportFilters", "create_bundle",
    "list_exports", "manifest_sig_text",
]
