"""audit: composes ledger, rules and model into sealed decisions, and reads them back as evidence.

A folder per idea (see docs/development.md):

- ``audit.decide``: submissions, the decision pipeline and service, the decision record, principals;
- ``audit.state``: decision state rebuilt from the sealed records (velocity windows, snapshots);
- ``audit.query``: the trace index, trace queries and overview statistics;
- ``audit.annotations``: notes and dispositions sealed as new records about a decision;
- ``audit.governance``: rulesets (propose, approve, activate) and the model registry;
- ``audit.export``: cutting an export bundle from the ledger;
- ``audit.bundle``: reading, verifying and replaying a bundle offline (no database needed);
- ``audit.errors``: one exception tree under ``AuditError``.

Old flat module paths (``audit.pipeline``, ``audit.verify_bundle``, ...) still import, with a
``DeprecationWarning``, for one version (``audit._moved``).
"""

from audit import _moved

_moved.install()
