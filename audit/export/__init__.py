"""Cutting an export bundle: the selection read from the ledger, the files written, the manifest signed.

``create_bundle`` (a time window) and ``create_case_bundle`` (one case) are the entry points
(``audit.export.create``); the offline side that reads and verifies a bundle is ``audit.bundle``.
"""

from audit.export.create import (
    BUNDLE_SCHEMA,
    CASE_BUNDLE_SCHEMA,
    CASE_EXPORT_SCHEMA,
    EXPORT_KIND,
    EXPORT_SCHEMA,
    BundleSummary,
    ExportFilters,
    create_bundle,
    create_case_bundle,
    list_exports,
    manifest_sig_text,
)

__all__ = [
    "BUNDLE_SCHEMA", "CASE_BUNDLE_SCHEMA", "CASE_EXPORT_SCHEMA", "EXPORT_KIND", "EXPORT_SCHEMA",
    "BundleSummary", "ExportFilters", "create_bundle", "create_case_bundle", "list_exports",
    "manifest_sig_text",
]
