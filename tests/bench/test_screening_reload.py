"""Loading a sanctions list while the production scoring path decides: no request fails, and the
decisions made once the list is indexed name it (``bench.screening_reload``, on a smaller list)."""

from __future__ import annotations

import pytest

from bench.screening_reload import reload


@pytest.mark.slow
def test_a_list_loaded_while_deciding_fails_no_request_and_is_used_once_indexed() -> None:
    got = reload(3000, before_s=0.5, after_s=0.5)
    assert got["fail_safe"] == 0 and got["decisions_while_indexing"] > 0
    assert got["first_decision_with_the_list_after_s"] is not None
    assert got["first_decision_with_the_list_after_s"] <= got["indexed_after_s"] + 1.0
