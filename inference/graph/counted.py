"""The graph as earlier releases held it (``sealtrail.graph/1``), to re-derive what they sealed.

Up to ``sealtrail.graph/1`` each account also carried its latest activity and the counts behind
its "usual number of counterparties" (distinct counterparties first paid or received from in each
7-day period since the epoch, folded into a running mean, Q16). Nothing sealed read them, but they
remembered further back than any window, so the state-snapshot roots of that release
(``sealtrail.state-leaf/1``) depend on where a decider began its state. ``sealtrail.graph/2`` holds
neither; ``CountedGraph`` is the graph with them, kept off the decision path, so a snapshot sealed
by an earlier release can still be recomputed from its deltas and checked bit for bit.

The counts move exactly as they did: when a payment ``u -> v`` at ``t`` is added (after expiry and
the searches), each account's period rolls forward to ``t // 7 days`` (the counts of a completed
period folded into the means, the first one setting them, then one empty period per period
skipped, at most 64); ``u``'s count of beneficiaries rises unless its latest kept edge to ``v`` is
in the current period, and ``v``'s count of originators likewise. An account the graph lets go
loses its counts with it.
"""

from __future__ import annotations

from typing import Any

from inference.graph.config import GraphConfig
from inference.graph.errors import GraphInputError
from inference.graph.fixedpoint import ema_step_q16
from inference.graph.store import GRAPH_STATE_FORMAT_V1, Edge, GraphJournal, Node, TransactionGraph

__all__ = ["CountedGraph"]

_WEEK_US = 7 * 86_400_000_000
_GAP_PERIODS_MAX = 64  # empty periods folded into a mean at most (3/4 ** 64 leaves nothing)
_LAST, _PERIOD, _P_OUT, _P_IN, _PERIODS, _EMA_OUT, _EMA_IN = range(7)


def _fresh() -> list[int]:
    """An account's counts when first seen: no activity, no period yet."""
    return [-1, -1, 0, 0, 0, 0, 0]


def _roll(c: list[int], period: int) -> None:
    """Close the counting period of ``c`` if ``period`` is later (a late payment counts in the
    current one)."""
    cur = c[_PERIOD]
    if period <= cur:
        return
    if cur >= 0:
        if c[_PERIODS]:
            c[_EMA_OUT] = ema_step_q16(c[_EMA_OUT], c[_P_OUT])
            c[_EMA_IN] = ema_step_q16(c[_EMA_IN], c[_P_IN])
        else:
            c[_EMA_OUT], c[_EMA_IN] = c[_P_OUT] << 16, c[_P_IN] << 16
        c[_PERIODS] += 1
        for _ in range(min(period - cur - 1, _GAP_PERIODS_MAX)):
            c[_EMA_OUT] = ema_step_q16(c[_EMA_OUT], 0)
            c[_EMA_IN] = ema_step_q16(c[_EMA_IN], 0)
            c[_PERIODS] += 1
    c[_PERIOD] = period
    c[_P_OUT] = c[_P_IN] = 0


class CountedGraph(TransactionGraph):
    """A ``TransactionGraph`` that also keeps each account's ``sealtrail.graph/1`` counts and writes
    that format. Every value it gives a payment is the plain graph's; it is not journaled."""

    STATE_FORMAT = GRAPH_STATE_FORMAT_V1

    def __init__(self, config: GraphConfig | None = None) -> None:
        super().__init__(config)
        self.counts: dict[Node, list[int]] = {}  # account -> last, period, p_out, p_in, periods, means

    def begin_journal(self) -> GraphJournal:
        raise GraphInputError("a graph kept in the sealtrail.graph/1 form re-derives sealed state only: it "
                              "is not journaled")

    def counts_of(self, key: str) -> dict[str, int] | None:
        """The ``sealtrail.graph/1`` counts of account ``key`` by name (None: not held)."""
        n = self.nodes.get(key)
        if n is None:
            return None
        c = self.counts.get(n) or _fresh()
        return dict(zip(("last", "period", "p_out", "p_in", "periods", "ema_out", "ema_in"), c, strict=True))

    def add(self, src: Node, dst: Node, t: int, cents: int) -> Edge:
        counts = self.counts
        cs = counts.get(src)
        if cs is None:
            cs = counts[src] = _fresh()
        cd = counts.get(dst)
        if cd is None:
            cd = counts[dst] = _fresh()
        period = t // _WEEK_US
        _roll(cs, period)
        if cd is not cs:
            _roll(cd, period)
        start = period * _WEEK_US
        prev = src.out_last.get(dst)
        if prev is None or prev[0] < start:
            cs[_P_OUT] += 1
        prev = dst.in_last.get(src)
        if prev is None or prev[0] < start:
            cd[_P_IN] += 1
        e = super().add(src, dst, t, cents)
        if t > cs[_LAST]:
            cs[_LAST] = t
        if t > cd[_LAST]:
            cd[_LAST] = t
        return e

    def _forget(self, n: Node) -> None:
        super()._forget(n)
        self.counts.pop(n, None)

    def _account_row(self, n: Node) -> list[Any]:
        c = self.counts.get(n) or _fresh()
        return [n.key, c[_LAST], 1 if n.flagged else 0, *c[_PERIOD:]]

    def _restored(self, n: Node, v1: list[int] | None) -> None:
        if v1 is None:
            raise GraphInputError("a sealtrail.graph/2 state has no sealtrail.graph/1 counts to carry on")
        last, _flag, *rest = v1
        self.counts[n] = [last, *rest]
