"""The settings of a transaction graph: its window, the search depths and the memory caps.

Every field is an integer (microseconds, hops, edges) and every default is stated here, so
two deciders built from the same ``GraphConfig`` hold the same bits after the same payments.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.graph.errors import GraphConfigError

__all__ = ["DAY_US", "HOUR_US", "MAX_HOPS", "MAX_WINDOW_US", "WEEK_US", "GraphConfig"]

HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
WEEK_US = 7 * DAY_US
MAX_WINDOW_US = 30 * DAY_US
MAX_HOPS = 6


@dataclass(frozen=True)
class GraphConfig:
    """What the graph keeps and how far its searches go.

    - ``window_us``: edges older than ``watermark - window_us`` expire (at most 30 days);
    - ``cycle_hops``: the longest temporal cycle looked for, counting the payment that closes it
      (2 to 6; 3 by default);
    - ``flag_hops``: the furthest a flagged account is looked for, in either direction (1 to 6);
    - ``scatter_us``: how far back the sources feeding an outflow are counted (at most the window);
    - ``node_cap``: edges kept per account and direction, newest first; older ones are dropped;
    - ``global_cap``: edges kept in all; past it the oldest edges go first, as if expired;
    - ``search_budget``: edges (cycles) or accounts (flagged hops) one search may visit; a search
      that reaches it stops and says so (``cycle_truncated``);
    - ``late_us``: how far a payment's time may go back behind the latest time seen before the
      graph refuses it.
    """

    window_us: int = MAX_WINDOW_US
    cycle_hops: int = 3
    flag_hops: int = 3
    scatter_us: int = 3 * DAY_US
    node_cap: int = 1024
    global_cap: int = 8_000_000
    search_budget: int = 20_000
    late_us: int = 5 * 60 * 1_000_000

    def __post_init__(self) -> None:
        for name in ("window_us", "cycle_hops", "flag_hops", "scatter_us", "node_cap", "global_cap",
                     "search_budget", "late_us"):
            value = getattr(self, name)
            if type(value) is not int:
                raise GraphConfigError(f"graph setting {name} must be an integer, got {value!r}")
        if not 0 < self.window_us <= MAX_WINDOW_US:
            raise GraphConfigError(f"window_us must be in (0, 30 days], got {self.window_us}")
        if not 2 <= self.cycle_hops <= MAX_HOPS:
            raise GraphConfigError(f"cycle_hops must be 2 to {MAX_HOPS}, got {self.cycle_hops}")
        if not 1 <= self.flag_hops <= MAX_HOPS:
            raise GraphConfigError(f"flag_hops must be 1 to {MAX_HOPS}, got {self.flag_hops}")
        if not 0 < self.scatter_us <= self.window_us:
            raise GraphConfigError(f"scatter_us must be in (0, window_us], got {self.scatter_us}")
        if self.node_cap < 1 or self.global_cap < 1 or self.search_budget < 1:
            raise GraphConfigError("node_cap, global_cap and search_budget must be at least 1")
        if not 0 <= self.late_us < self.window_us:
            raise GraphConfigError(f"late_us must be in [0, window_us), got {self.late_us}")
