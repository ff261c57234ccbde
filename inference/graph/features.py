"""Per-payment graph and behavioural features, all integers (counts, days, fixed point).

``GraphFeatures.observe(orig, bene, t, cents)`` takes one payment (account keys as
``inference.features`` names them, time in µs since the Unix epoch, amount in whole US cents),
returns its values in ``GRAPH_FEATURE_NAMES`` order and adds it to the graph. Payments are taken
in the order given; ``observe_many`` is ``observe`` in a loop, so batching changes nothing.

Two moments, as a reader of the values needs to know:

- measured on the graph *before* the payment is added (history it is compared with): the cycle,
  scatter-gather, dormancy, the amount against the account's history, forwarding of an amount
  received (and how many accounts its sender paid) and hops to a flagged account;
- measured *after* it is added (windows that count the current payment, as the velocity
  features do): fan-in and fan-out, activity in 24 hours and pass-through.

docs/graph-features.md defines each value for an examiner. All but one of them
(``inference.schema.GRAPH_UNSEALED``: ``flagged_hops``) are columns of the sealed
``sealtrail.features/6`` (``features/4`` holds all of them but ``forward_source_fan_out``), and
every value depends on the payments of the window alone.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter

from inference.graph.config import DAY_US, HOUR_US, WEEK_US, GraphConfig
from inference.graph.cycles import temporal_cycle
from inference.graph.fixedpoint import log2_q8
from inference.graph.flagged import hops_to_flagged
from inference.graph.store import Edge, GraphJournal, Node, TransactionGraph

__all__ = ["GRAPH_FEATURE_NAMES", "PASS_THROUGH_CAP_Q16", "GraphFeatures", "Payment", "as_dict"]

GRAPH_FEATURE_NAMES: tuple[str, ...] = (
    "cycle_len", "cycle_count", "cycle_truncated",
    "scatter_gather",
    "orig_fan_out_1d", "orig_fan_out_7d", "orig_fan_out_30d",
    "orig_fan_in_1d", "orig_fan_in_7d", "orig_fan_in_30d",
    "bene_fan_in_1d", "bene_fan_in_7d", "bene_fan_in_30d",
    "pass_through_24h_q16", "pass_through_7d_q16",
    "orig_dormancy_days", "orig_activity_24h",
    "amount_history_n", "amount_log2_ratio_q8", "amount_percentile_permille",
    "flagged_hops",
    "forward_share_permille", "forward_delay_hours", "forward_source_fan_out",
)
PASS_THROUGH_CAP_Q16 = 4 << 16  # out / in is reported up to 4.0

Payment = tuple[str, str, int, int]  # originator key, beneficiary key, µs, cents


_CENTS = itemgetter(3)
_SRC = itemgetter(1)
_DST = itemgetter(2)


class GraphFeatures:
    """A ``TransactionGraph`` and the features each payment gets from it (one per scoring stream)."""

    def __init__(self, config: GraphConfig | None = None,
                 graph: type[TransactionGraph] = TransactionGraph) -> None:
        """``graph``: the class of graph to hold (``CountedGraph`` re-derives a ``sealtrail.graph/1``
        state; every value is the same)."""
        self.graph = graph(config)
        self.config = self.graph.config

    def flag(self, key: str) -> None:
        """Mark an account flagged (for example after a BLOCK)."""
        self.graph.flag(key)

    def unflag(self, key: str) -> None:
        """Take a flag back."""
        self.graph.unflag(key)

    def begin_journal(self) -> GraphJournal:
        """Journal what the following payments change (``TransactionGraph.begin_journal``)."""
        return self.graph.begin_journal()

    def end_journal(self) -> None:
        self.graph.end_journal()

    def rollback(self, journals: list[GraphJournal]) -> None:
        """Take back the journaled payments (``TransactionGraph.rollback``)."""
        self.graph.rollback(journals)

    def state_bytes(self) -> bytes:
        """The graph's whole state as canonical bytes (see ``TransactionGraph.state_bytes``)."""
        return self.graph.state_bytes()

    @classmethod
    def restore(cls, data: bytes, config: GraphConfig | None = None,
                rename: Callable[[str], str] | None = None,
                graph: type[TransactionGraph] = TransactionGraph) -> GraphFeatures:
        """Features over the graph ``state_bytes()`` wrote (``TransactionGraph.restore``)."""
        gf = cls(config, graph)
        gf.graph = graph.restore(data, gf.config, rename)
        return gf

    def observe_many(self, payments: Iterable[Payment]) -> list[tuple[int, ...]]:
        """``observe`` each payment in order; a bad one raises with the ones before it added."""
        observe = self._observe  # ``observe``, one call less a payment
        return [observe(o, b, t, c, True) for o, b, t, c in payments]

    def observe(self, orig: str, bene: str, t: int, cents: int) -> tuple[int, ...]:
        """The payment's values in ``GRAPH_FEATURE_NAMES`` order; then it is part of the graph.
        A bad payment raises ``GraphInputError`` and changes nothing."""
        return self._observe(orig, bene, t, cents, True)

    def observe_sealed(self, orig: str, bene: str, t: int, cents: int) -> tuple[int, ...]:
        """``observe`` without the search for a flagged account: ``flagged_hops`` reads -1, every
        other value and the state after it are ``observe``'s. For a caller that keeps only the values
        outside ``inference.schema.GRAPH_UNSEALED`` (the feature extractor)."""
        return self._observe(orig, bene, t, cents, False)

    def add_sealed(self, orig: str, bene: str, t: int, cents: int) -> None:
        """``observe_sealed`` without its values: the same checks and the same graph after it (the
        values are read from the graph, never written to it), for a caller that only brings a state
        up to date, a decider applying other deciders' state deltas, without the cycle search and
        the windows that are most of a payment's cost."""
        g = self.graph
        src, dst = self._enter(orig, bene, t, cents)
        g.add(src, dst, t, cents)

    def _enter(self, orig: str, bene: str, t: int, cents: int) -> tuple[Node, Node]:
        """A payment checked (``GraphInputError``, nothing changed), the watermark moved to it and
        its two accounts, journaled when a journal is open: what ``_observe`` and ``add_sealed``
        change before the payment's edge is added."""
        g = self.graph
        wm = g.watermark
        if not (type(orig) is str and type(bene) is str and type(t) is int and type(cents) is int
                and orig and bene and cents >= 0 and (wm is None or t >= wm - self.config.late_us)):
            g.check(orig, bene, t, cents)  # says what is wrong
        if wm is None or t > wm:
            g.advance(t)  # before the accounts are looked up: expiry may forget an account
        nodes = g.nodes
        src = nodes.get(orig) or g.node(orig)
        dst = nodes.get(bene) or g.node(bene)
        if g._journal is not None:
            g.touch(src)
            g.touch(dst)
        return src, dst

    def _observe(self, orig: str, bene: str, t: int, cents: int, with_hops: bool) -> tuple[int, ...]:
        """``observe``; the windows of ``_window`` and ``_distinct`` are inlined for the usual case (a
        payment at or after every edge of the list), the hot path of every scoring batch."""
        g = self.graph
        cfg = self.config
        src, dst = self._enter(orig, bene, t, cents)
        nodes = g.nodes

        # --- before the payment is added ---
        c_len, c_count, c_cut = temporal_cycle(src, dst, t, cfg.cycle_hops, cfg.search_budget, nodes)
        inn = src.inn
        out = src.out
        lo7 = t - WEEK_US
        in7: list[Edge] | None = None  # src's received edges in (t - 7 d, t], when taken before the add
        if inn:
            last = inn[-1][0]
            if last <= t and dst is not src and cfg.scatter_us <= WEEK_US:
                # The add leaves src's received list as it is (it is not the beneficiary) unless the
                # global cap takes its oldest edge (checked after): its 7-day window, taken now, serves
                # the scatter-gather (inside it) and the windows after the add.
                in7 = inn[bisect_left(inn, (lo7 + 1,)):] if inn[0][0] <= lo7 else inn
                in_first, in_len = inn[0], len(inn)
                hi = len(in7) if last < t else bisect_left(in7, (t,))  # strictly before this payment
                lo = bisect_left(in7, (t - cfg.scatter_us + 1,), 0, hi)
                scatter = len(set(map(_SRC, in7[lo:hi]))) if lo < hi else 0
            else:
                hi = len(inn) if last < t else bisect_left(inn, (t,))  # strictly before this payment
                lo = bisect_left(inn, (t - cfg.scatter_us + 1,), 0, hi)
                scatter = len(set(map(_SRC, inn[lo:hi]))) if lo < hi else 0
            if out and out[-1][0] > last:
                last = out[-1][0]
        else:
            scatter = 0
            last = out[-1][0] if out else -1
        # the latest held edge either way: nothing older than the window
        dormancy = -1 if last < 0 else (t - last) // DAY_US if t > last else 0
        hist = src.amounts
        n_hist = len(hist)
        if n_hist:
            median = hist[(n_hist - 1) // 2]
            log_ratio = log2_q8(cents if cents > 0 else 1) - log2_q8(median if median > 0 else 1)
            below = bisect_left(hist, cents)  # mid_rank_permille, inlined
            pct = (1000 * (below + bisect_right(hist, cents, below))) // (2 * n_hist)
        else:
            log_ratio, pct = 0, -1
        # forwarding: the smallest amount src received in (t - 7 d, t) that this payment does not exceed
        fwd_share, fwd_delay, fwd_source = 0, -1, -1
        if inn and cents:
            hi = len(inn) if inn[-1][0] < t else bisect_left(inn, (t,))
            lo = bisect_left(inn, (lo7 + 1,), 0, hi) if inn[0][0] <= lo7 else 0
            if lo < hi:
                got = list(map(_CENTS, inn[lo:hi]))
                best = min(filter(cents.__le__, got), default=-1)
                if best >= 0:
                    fwd_share = (1000 * cents) // best
                    at = hi - 1 - got[::-1].index(best)  # the latest edge of that amount
                    fwd_delay = (t - inn[at][0]) // HOUR_US
                    # how many accounts its sender paid in the window (an employer's payroll: many)
                    fwd_source = len(nodes[inn[at][1]].out_last)
        hops = (hops_to_flagged(src, dst, g.flagged, g.near, cfg.flag_hops, cfg.search_budget) if with_hops
                else -1)

        g.add(src, dst, t, cents)

        # --- after: windows that count this payment ---
        lo1 = t - DAY_US
        out = src.out  # the lists may have been replaced by the add (never today, but cheap to reread)
        if not out:  # a late payment's own edge went at once to a cap
            part7 = out
        elif out[-1][0] <= t:
            part7 = out[bisect_left(out, (lo7 + 1,)):] if out[0][0] <= lo7 else out
        else:  # a late payment: later edges are left out
            hi = bisect_left(out, (t + 1,))
            part7 = out[bisect_left(out, (lo7 + 1,), 0, hi):hi]
        if part7:  # empty only when a late payment's own edge went at once to the per-account cap
            part1 = part7[bisect_left(part7, (lo1 + 1,)):] if part7[0][0] <= lo1 else part7
            n_out1 = len(part1)
            out1 = sum(map(_CENTS, part1))
            out7 = sum(map(_CENTS, part7))
            o_out7 = len(set(map(_DST, part7)))
            o_out1 = len(set(map(_DST, part1))) if n_out1 < len(part7) else o_out7
        else:
            n_out1 = out1 = out7 = o_out1 = o_out7 = 0
        inn = src.inn
        if in7 is not None and len(inn) == in_len and inn[0] is in_first:
            part7 = in7  # the list is as it was before the add (when the cap took an edge of it, that
            # edge was its oldest: then ``in7`` is the list itself, or the edge was outside it)
        elif not inn:
            part7 = inn
        elif inn[-1][0] <= t:
            part7 = inn[bisect_left(inn, (lo7 + 1,)):] if inn[0][0] <= lo7 else inn
        else:
            hi = bisect_left(inn, (t + 1,))
            part7 = inn[bisect_left(inn, (lo7 + 1,), 0, hi):hi]
        if part7:
            part1 = part7[bisect_left(part7, (lo1 + 1,)):] if part7[0][0] <= lo1 else part7
            n_in1 = len(part1)
            in1 = sum(map(_CENTS, part1))
            in_7 = sum(map(_CENTS, part7))
            o_in7 = len(set(map(_SRC, part7)))
            o_in1 = len(set(map(_SRC, part1))) if n_in1 < len(part7) else o_in7
        else:
            n_in1 = in1 = in_7 = o_in1 = o_in7 = 0
        if dst is src:
            b_in1, b_in7 = o_in1, o_in7
        else:
            inn = dst.inn
            if not inn:
                part7 = inn
            elif inn[-1][0] <= t:
                part7 = inn[bisect_left(inn, (lo7 + 1,)):] if inn[0][0] <= lo7 else inn
            else:
                hi = bisect_left(inn, (t + 1,))
                part7 = inn[bisect_left(inn, (lo7 + 1,), 0, hi):hi]
            if part7:
                part1 = part7[bisect_left(part7, (lo1 + 1,)):] if part7[0][0] <= lo1 else part7
                b_in7 = len(set(map(_SRC, part7)))
                b_in1 = len(set(map(_SRC, part1))) if len(part1) < len(part7) else b_in7
            else:
                b_in1 = b_in7 = 0
        if in1 <= 0:
            pass_1 = 0
        else:
            pass_1 = (out1 << 16) // in1
            if pass_1 > PASS_THROUGH_CAP_Q16:
                pass_1 = PASS_THROUGH_CAP_Q16
        if in_7 <= 0:
            pass_7 = 0
        else:
            pass_7 = (out7 << 16) // in_7
            if pass_7 > PASS_THROUGH_CAP_Q16:
                pass_7 = PASS_THROUGH_CAP_Q16
        return (c_len, c_count, c_cut, scatter, o_out1, o_out7, len(src.out_last), o_in1, o_in7,
                len(src.in_last), b_in1, b_in7, len(dst.in_last),
                pass_1, pass_7, dormancy, n_out1 + n_in1, n_hist, log_ratio, pct, hops, fwd_share, fwd_delay,
                fwd_source)


def as_dict(values: Sequence[int]) -> dict[str, int]:
    """One payment's values by name."""
    return dict(zip(GRAPH_FEATURE_NAMES, values, strict=True))
