"""Compliance facts: what an examiner checks against the compliance map, for a period
(``audit.compliance.facts``, pure), read from the ledger (``audit.compliance.store``)."""
