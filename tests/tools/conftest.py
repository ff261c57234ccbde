"""The audit tests' sandbox fixture, shared: the bundles these tests check are built by the audit helpers."""

from tests.audit.conftest import sandbox

__all__ = ["sandbox"]
