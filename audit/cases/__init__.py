"""Alerts, cases and held-payment outcomes: officers' work, derived from sealed decisions and
sealed as events (DESIGN.md: "alerts and cases").

- ``policy``: the deadline policy (versioned, sealed; ageing judged by the one in force).
- ``state``: the alert state machine, pure (``step``).
- ``events``: the sealed ``case_event`` and ``alert_policy`` bodies.
- ``fold``: the view as a fold over sealed records in seq order.
- ``tables`` / ``store``: the stored view and its incremental catch-up.
- ``service``: officers' actions (check, seal, fold).
"""
