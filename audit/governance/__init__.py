"""Rule governance (draft -> proposed -> approved by another principal -> active) and the model registry.

Every step is a sealed ledger record; the state of every ruleset is derived from those records.
``audit.governance.service`` (``Governance``) and ``audit.governance.models`` work on a ledger;
``audit.governance.state`` derives the state from records alone and needs no database, which is
why this package re-exports nothing: the offline bundle verifier imports ``state`` without
loading the service (and SQLAlchemy) behind it.
"""
