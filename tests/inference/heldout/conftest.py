from __future__ import annotations

import pytest

from inference.heldout import HeldoutConfig, HeldoutRun, run


@pytest.fixture(scope="package")
def small() -> HeldoutRun:
    """A small month: 1,500 accounts, about 15,000 payments, every typology present."""
    return run(HeldoutConfig(seed=11, n_accounts=1_500, days=30, typology_share=0.04))
