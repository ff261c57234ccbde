"""goAML suspicious transaction reports (STR): drafting (``report``) and validation (``schema``)
against the shipped profile ``goaml_str.xsd``. Pure: no storage, clock or network; docs/goaml.md
describes the format."""

from audit.cases.goaml.report import (
    Account,
    Address,
    Entity,
    Party,
    Person,
    ReportingEntity,
    ReportTransaction,
    Side,
    StrDraft,
    amendment_note,
    draft_report,
)
from audit.cases.goaml.schema import MAX_REPORT_BYTES, PROFILE, ReportError, SchemaFault, validate_report

__all__ = [
    "MAX_REPORT_BYTES",
    "PROFILE",
    "Account",
    "Address",
    "Entity",
    "Party",
    "Person",
    "ReportError",
    "ReportTransaction",
    "ReportingEntity",
    "SchemaFault",
    "Side",
    "StrDraft",
    "amendment_note",
    "draft_report",
    "validate_report",
]
