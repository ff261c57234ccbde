"""The rolling transaction graph: payments as edges between accounts, held for a window of up to
30 days under a per-account and a global cap.

An edge is ``(t, originator, beneficiary, cents)``: time in microseconds since the Unix epoch,
the two accounts' keys and the amount in whole US cents. Each account keeps its sent edges and its
received edges as two lists in time order (ties in arrival order), and, per counterparty, its
latest edge (``out_last`` / ``in_last``), so "has it paid X, and when last" is one lookup.

Keys, not the accounts' nodes: CPython's cyclic collector stops tracking a tuple of integers and
strings at the first collection it survives, so the millions of edges a window holds are never
promoted to the old generations nor walked as objects by a full collection (which every thread
waits out); the accounts' own containers are. An edge one of the lists holds names an account the
graph holds: an account is let go only once neither of its lists holds an edge, and an edge it
shares with an account whose list still holds it left its own list by the per-account cap, which
takes the oldest, so it is older than every edge the account kept and expired before them. An edge
both lists dropped may name an account let go, or a later one under the same key: where such an
edge is read (expiry, compaction, the state bytes) its accounts are looked up and their lists
checked for that very tuple.

What is kept:

- the window: an edge at or before ``watermark - window_us`` expires (the watermark is the
  latest time seen; expiry runs as it advances);
- the per-account cap: an account keeps at most ``node_cap`` sent and ``node_cap`` received edges,
  the newest; an older one drops out of that account's list (it may still be in the other
  account's list). A hub with a million payments holds ``node_cap`` of them, so every search
  through it is bounded;
- the global cap: at most ``global_cap`` edges are held in all (an edge counts while either
  account's list holds it); past it the oldest go first, as if expired.

``begin_journal()`` records what the following payments change, and ``rollback(journals)`` takes
it back exactly (a decider whose commit failed undoes the batch this way): each account is copied
the first time a journaled payment changes it, and the time-ordered log's changes are kept as
operations to reverse. Flags set or taken back are not journaled.

Payments arrive in time order; one up to ``late_us`` behind the watermark is placed in time order
and sees the graph as held; one further back is refused (``GraphInputError``). Accounts are keyed
by string (what ``inference.features`` names an account) and numbered in the order first seen;
nothing depends on ``PYTHONHASHSEED`` or on hash order: iteration goes over lists and over
insertion-ordered dicts only, and ``state_bytes()`` writes accounts in number order and edges in
time order.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable
from operator import attrgetter
from typing import Any

import orjson

from inference.graph.config import GraphConfig
from inference.graph.errors import GraphInputError

__all__ = ["GRAPH_STATE_FORMAT", "GRAPH_STATE_FORMAT_V1", "Edge", "GraphJournal", "Node", "TransactionGraph"]

GRAPH_STATE_FORMAT = "sealtrail.graph/2"
# The format of earlier releases: each account also carried its last activity and the counts
# behind its usual numbers of counterparties (``inference.graph.counted``). ``restore`` reads it.
GRAPH_STATE_FORMAT_V1 = "sealtrail.graph/1"

# (t µs, originator key, beneficiary key, cents): a tuple, so a list of edges bisects by ``(t,)``.
Edge = tuple[int, str, str, int]

_FLAGGED = attrgetter("flagged")


class GraphJournal:
    """What a stretch of payments changed in one ``TransactionGraph``, to take back exactly."""

    __slots__ = ("dead", "graph", "ops", "saved", "seq", "watermark")

    def __init__(self, graph: TransactionGraph) -> None:
        self.graph: TransactionGraph | None = graph  # None once rolled back
        self.watermark = graph.watermark
        self.dead = graph._dead
        self.seq = graph._seq
        self.ops: list[tuple[Any, ...]] = []  # changes to the log, new and forgotten accounts, in order
        self.saved: dict[Node, tuple[Any, ...]] = {}  # account -> its fields before the first change


class Node:
    """One account: its kept edges each way, latest edge per counterparty, sorted sent amounts and
    its flag. Nothing else: every value read from it depends on the edges of the window alone."""

    __slots__ = ("amounts", "flagged", "id", "in_last", "inn", "key", "out", "out_last")

    def __init__(self, key: str, ident: int) -> None:
        self.key = key
        self.id = ident  # when it was first seen (accounts are held in this order)
        self.out: list[Edge] = []  # sent edges kept, time order
        self.inn: list[Edge] = []  # received edges kept, time order
        self.out_last: dict[Node, Edge] = {}  # beneficiary -> latest kept edge to it
        self.in_last: dict[Node, Edge] = {}  # originator -> latest kept edge from it
        self.amounts: list[int] = []  # cents of the kept sent edges, sorted
        self.flagged = False

    def __repr__(self) -> str:
        return f"Node({self.key!r})"


# What an edge's key names when the graph no longer holds that account: no edges, no flag. Only
# read, never changed (an account let go is refused by ``add``).
_NOBODY = Node("", -1)


def _holds(edges: list[Edge], e: Edge) -> bool:
    """Whether ``edges`` (time order) holds this very edge."""
    t = e[0]
    i = bisect_left(edges, (t,))  # (t,) sorts before every edge at t
    n = len(edges)
    while i < n and edges[i][0] == t:
        if edges[i] is e:
            return True
        i += 1
    return False


def _one_less(near: dict[Node, int], n: Node) -> None:
    """One flagged counterparty fewer in ``n``'s latest-edge maps (its ``near`` count, gone at 0)."""
    c = near[n] - 1
    if c:
        near[n] = c
    else:
        del near[n]


class TransactionGraph:
    """Accounts and the payments between them over a rolling window; ``add`` takes one payment."""

    def __init__(self, config: GraphConfig | None = None) -> None:
        self.config = config if config is not None else GraphConfig()
        self.nodes: dict[str, Node] = {}  # account key -> node, in the order first seen (read-only outside)
        self._seq = 0  # accounts made so far: the next one's ``id``
        self._edges: deque[Edge] = deque()  # every edge held, time order (some dropped by both lists)
        self._dead = 0  # edges in _edges that neither account's list holds any more
        self.watermark: int | None = None  # latest time seen
        self.flagged: set[Node] = set()
        # For the flagged-account search (derived, not in the state bytes): each account whose
        # ``out_last`` or ``in_last`` names a flagged account, with how many of their keys are flagged
        # (counted twice when in both), kept as those maps and the flags change; only looked up, never
        # iterated. An account without a flagged counterparty has no entry (no memory when none is).
        self.near: dict[Node, int] = {}
        # the latest time of an edge ``restore`` read held by one account's list only (-1: none): until it
        # expires, a flag looks at every account (see ``_count_near``)
        self._one_sided = -1
        self._journal: GraphJournal | None = None  # the open journal, if any

    # --- accounts -------------------------------------------------------------------------

    def node(self, key: str) -> Node:
        """The account ``key``, created (unflagged, no edges) when first seen."""
        n = self.nodes.get(key)
        if n is None:
            if type(key) is not str or not key:
                raise GraphInputError(f"an account key is a non-empty string, got {key!r}")
            n = self.nodes[key] = Node(key, self._seq)
            self._seq += 1
            if self._journal is not None:
                self._journal.ops.append(("new", key))
        return n

    def _forget(self, n: Node) -> None:
        """``n`` holds no edge either way and no flag: the graph lets it go (bounded memory). Every
        sealed value of a later payment is the same as if it were kept: they read edges only."""
        del self.nodes[n.key]
        if self._journal is not None:
            self._journal.ops.append(("drop", n))

    def get(self, key: str) -> Node | None:
        """The account ``key`` if the graph has seen it."""
        return self.nodes.get(key)

    def _held(self, key: str) -> Node:
        """The account an edge names, or an empty stand-in for one let go (see the module)."""
        return self.nodes.get(key, _NOBODY)

    def flag(self, key: str) -> None:
        """Mark an account flagged (for example after a BLOCK): hops to it become a feature."""
        n = self.node(key)
        if not n.flagged:
            n.flagged = True
            self.flagged.add(n)
            self._count_near(n, 1)

    def unflag(self, key: str) -> None:
        """Take a flag back (a cleared case); an unknown or unflagged account is left as it is."""
        n = self.nodes.get(key)
        if n is not None and n.flagged:
            n.flagged = False
            self.flagged.discard(n)
            self._count_near(n, -1)
            if not n.out and not n.inn:
                self._forget(n)

    def _count_near(self, f: Node, step: int) -> None:
        """``f`` was just flagged (``step`` 1) or unflagged (-1): move the ``near`` count of every
        account whose ``out_last`` or ``in_last`` names ``f``. Those are the accounts ``f``'s own maps
        name, unless a counterparty holds an edge with ``f`` that ``f``'s lists dropped. Only the
        per-account cap drops an edge from one list: it takes the oldest of a full list, and the
        edges dropped are older than every edge left, so they expire before the list can fall below
        the cap. A list of ``f`` at the cap (or a state restored with one-sided edges still in the
        window) therefore has every account held looked at. The counts are sums: the order the
        accounts are visited in changes nothing."""
        cap = self.config.node_cap
        wm = self.watermark
        peers: Any
        if len(f.out) >= cap or len(f.inn) >= cap or (
                self._one_sided >= 0 and (wm is None or self._one_sided > wm - self.config.window_us)):
            peers = self.nodes.values()
        else:
            peers = f.out_last.keys() | f.in_last.keys()
        near = self.near
        for x in peers:
            c = (f in x.out_last) + (f in x.in_last)
            if c:
                c = near.get(x, 0) + step * c
                if c:
                    near[x] = c
                else:
                    del near[x]

    def _recount_near(self, n: Node) -> None:
        """``n``'s entry in ``near`` from its maps and the flags as they are now."""
        c = sum(map(_FLAGGED, n.out_last)) + sum(map(_FLAGGED, n.in_last))
        if c:
            self.near[n] = c
        else:
            self.near.pop(n, None)

    # --- journal --------------------------------------------------------------------------

    def begin_journal(self) -> GraphJournal:
        """Record every change payments make from now on (until ``end_journal``), for ``rollback``."""
        self._journal = GraphJournal(self)
        return self._journal

    def end_journal(self) -> None:
        self._journal = None

    def touch(self, n: Node) -> None:
        """Before ``n`` changes: an open journal keeps a copy of it, the first time only."""
        j = self._journal
        if j is not None and n not in j.saved:
            j.saved[n] = (n.out[:], n.inn[:], n.out_last.copy(), n.in_last.copy(), n.amounts[:])

    def rollback(self, journals: list[GraphJournal]) -> None:
        """Take back what ``journals`` (this graph's latest, in the order they began) recorded,
        newest first; ``GraphInputError`` and nothing done if one is not this graph's or was
        rolled back before."""
        if any(j.graph is not self for j in journals):
            raise GraphInputError("graph rollback: a journal of another graph, or one already rolled back")
        reorder = False  # a forgotten account came back: put the accounts in the order first seen
        restored: list[Node] = []  # accounts whose maps went back: their ``near`` is counted afresh
        for j in reversed(journals):
            for op in reversed(j.ops):
                kind = op[0]
                if kind == "a":
                    self._edges.pop()
                elif kind == "i":
                    del self._edges[op[1]]
                elif kind == "p":
                    self._edges.appendleft(op[1])
                elif kind == "c":
                    self._edges = op[1]
                elif kind == "new":
                    del self.nodes[op[1]]
                else:  # "drop": the account forgotten comes back
                    self.nodes[op[1].key] = op[1]
                    reorder = True
            for n, fields in j.saved.items():
                restored.append(n)
                n.out, n.inn, n.out_last, n.in_last, n.amounts = fields
                if n.id < j.seq and n.key not in self.nodes:
                    # held when the journal began, let go since outside it (a flag taken back after
                    # the journal ended): held again with its lists, as every edge naming it requires
                    self.nodes[n.key] = n
                    reorder = True
            self.watermark, self._dead, self._seq = j.watermark, j.dead, j.seq
            j.graph = None
            j.ops, j.saved = [], {}
            if self._journal is j:
                self._journal = None
        for n in restored:  # flags are not journaled: count under the flags as they are now
            self._recount_near(n)
        if reorder:
            ordered = sorted(self.nodes.values(), key=attrgetter("id"))
            self.nodes = {n.key: n for n in ordered}

    @property
    def accounts(self) -> int:
        """Accounts held: those with an edge in either list, or flagged (the others are let go)."""
        return len(self.nodes)

    @property
    def edges_held(self) -> int:
        """Edges held (in at least one account's list): what the global cap bounds."""
        return len(self._edges) - self._dead

    @property
    def edges_logged(self) -> int:
        """Edges in the time-ordered log, counting those both lists dropped that await compaction:
        at most ``2 * edges_held + 1024``."""
        return len(self._edges)

    # --- edges ----------------------------------------------------------------------------

    def check(self, orig: str, bene: str, t: int, cents: int) -> None:
        """Raise ``GraphInputError`` if ``add`` would refuse this payment (nothing changes)."""
        if type(orig) is not str or not orig or type(bene) is not str or not bene:
            raise GraphInputError(f"account keys are non-empty strings, got {orig!r} -> {bene!r}")
        if type(t) is not int:
            raise GraphInputError(f"a payment time is an integer of microseconds, got {t!r}")
        if type(cents) is not int or cents < 0:
            raise GraphInputError(f"an amount is a non-negative integer of US cents, got {cents!r}")
        wm = self.watermark
        if wm is not None and t < wm - self.config.late_us:
            raise GraphInputError(
                f"payment at {t} µs is {wm - t} µs behind the latest seen ({wm}); "
                f"at most {self.config.late_us} µs late is accepted")

    def advance(self, t: int) -> None:
        """Move the watermark to ``t`` if later and expire what falls out of the window."""
        wm = self.watermark
        if wm is None or t > wm:
            self.watermark = t
            horizon = t - self.config.window_us
            edges = self._edges
            while edges and edges[0][0] <= horizon:
                self._expire_oldest(horizon)

    def add(self, src: Node, dst: Node, t: int, cents: int) -> Edge:
        """Add the payment ``src -> dst`` (already checked and advanced to); returns its edge.
        Take the two accounts after ``advance``: it lets go of accounts left without edges, and an
        account let go is refused (``GraphInputError``)."""
        nodes = self.nodes
        if nodes.get(src.key) is not src or nodes.get(dst.key) is not dst:
            raise GraphInputError(f"payment {src.key!r} -> {dst.key!r}: an account the graph no longer holds "
                                  "(take accounts after advance)")
        e: Edge = (t, src.key, dst.key, cents)
        edges = self._edges
        j = self._journal
        if j is not None:
            self.touch(src)
            self.touch(dst)
        if not edges or edges[-1][0] <= t:
            edges.append(e)
            if j is not None:
                j.ops.append(("a",))
        else:  # late: after every edge at or before t
            i = len(edges)
            while i and edges[i - 1][0] > t:
                i -= 1
            edges.insert(i, e)
            if j is not None:
                j.ops.append(("i", i))
        cap = self.config.node_cap
        out = src.out
        if not out or out[-1][0] <= t:
            out.append(e)
        else:
            out.insert(bisect_left(out, (t + 1,)), e)
        prev = src.out_last.get(dst)
        if prev is None or prev[0] <= t:
            src.out_last[dst] = e
            if prev is None and dst.flagged:
                self.near[src] = self.near.get(src, 0) + 1
        insort(src.amounts, cents)
        inn = dst.inn
        if not inn or inn[-1][0] <= t:
            inn.append(e)
        else:
            inn.insert(bisect_left(inn, (t + 1,)), e)
        prev = dst.in_last.get(src)
        if prev is None or prev[0] <= t:
            dst.in_last[src] = e
            if prev is None and src.flagged:
                self.near[dst] = self.near.get(dst, 0) + 1
        if len(out) > cap:
            old = out[0]
            self._drop_out(src, old)
            if not _holds(self._held(old[2]).inn, old):
                self._dead += 1
        if len(inn) > cap:
            old = inn[0]
            self._drop_in(dst, old)
            if not _holds(self._held(old[1]).out, old):
                self._dead += 1
        if len(edges) - self._dead > self.config.global_cap:
            self._expire_oldest()
        if self._dead > 1024 and self._dead * 2 > len(edges):
            self._compact()
        return e

    def _drop_out(self, n: Node, e: Edge) -> None:
        """``e`` leaves the head of ``n``'s sent list."""
        del n.out[0]
        dst = self._held(e[2])
        if n.out_last.get(dst) is e:
            del n.out_last[dst]
            if dst.flagged:
                _one_less(self.near, n)
        amounts = n.amounts
        del amounts[bisect_left(amounts, e[3])]

    def _drop_in(self, n: Node, e: Edge) -> None:
        """``e`` leaves the head of ``n``'s received list."""
        del n.inn[0]
        src = self._held(e[1])
        if n.in_last.get(src) is e:
            del n.in_last[src]
            if src.flagged:
                _one_less(self.near, n)

    def _expire_oldest(self, horizon: int | None = None) -> None:
        """The oldest edge held leaves both lists that hold it (it is at their heads), after the
        edges before it that neither list holds. With a ``horizon`` (expiry by the window), only
        edges at or before it go: a held edge inside the window stays, however many dead edges the
        caps left before it."""
        edges = self._edges
        j = self._journal
        while edges:
            e = edges[0]
            if horizon is not None and e[0] > horizon:
                return
            edges.popleft()
            src, dst = self._held(e[1]), self._held(e[2])
            if j is not None:
                j.ops.append(("p", e))
                if src is not _NOBODY:
                    self.touch(src)
                if dst is not _NOBODY:
                    self.touch(dst)
            held = False
            if src.out and src.out[0] is e:
                self._drop_out(src, e)
                held = True
            if dst.inn and dst.inn[0] is e:
                self._drop_in(dst, e)
                held = True
            if held:
                if not src.out and not src.inn and not src.flagged and self.nodes.get(src.key) is src:
                    self._forget(src)
                if dst is not src and not dst.out and not dst.inn and not dst.flagged \
                        and self.nodes.get(dst.key) is dst:
                    self._forget(dst)
                return
            self._dead -= 1  # dropped from both lists by the caps before: not an edge held

    def _compact(self) -> None:
        """Forget the edges neither list holds (both dropped by the per-account cap)."""
        if self._journal is not None:
            self._journal.ops.append(("c", self._edges))
        held = self._held
        self._edges = deque(e for e in self._edges if _holds(held(e[1]).out, e) or _holds(held(e[2]).inn, e))
        self._dead = 0

    # --- state ----------------------------------------------------------------------------

    def state_bytes(self) -> bytes:
        """The whole state as canonical JSON: settings, watermark, accounts in the order first seen
        (key and flag) and the edges held in time order, each with whether the originator's and the
        beneficiary's lists hold it. Equal bytes: equal state."""
        cfg = self.config
        held = self.nodes.values()
        accounts = [self._account_row(n) for n in held]
        number = {n.key: i for i, n in enumerate(held)}  # an account's place in ``accounts``
        edges = []
        node = self._held
        for e in self._edges:
            o, i = _holds(node(e[1]).out, e), _holds(node(e[2]).inn, e)
            if o or i:
                edges.append([e[0], number[e[1]], number[e[2]], e[3], int(o), int(i)])
        return orjson.dumps({
            "format": self.STATE_FORMAT,
            "config": [cfg.window_us, cfg.cycle_hops, cfg.flag_hops, cfg.scatter_us, cfg.node_cap,
                       cfg.global_cap, cfg.search_budget, cfg.late_us],
            "watermark": self.watermark, "accounts": accounts, "edges": edges})

    @classmethod
    def restore(cls, data: bytes, config: GraphConfig | None = None,
                rename: Callable[[str], str] | None = None) -> TransactionGraph:
        """The graph ``state_bytes()`` wrote: ``restore(g.state_bytes()).state_bytes() ==
        g.state_bytes()``, and the same payments then give the same values. The settings the bytes
        name must be ``config``'s (the default settings when None); ``GraphInputError`` names any
        field that is missing, of the wrong type or out of place, and nothing is returned.
        ``rename`` maps each account key as it loads (accounts saved in clear, kept keyed)."""
        cfg = config if config is not None else GraphConfig()
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise GraphInputError(f"graph state is not JSON: {exc}") from None
        form = doc.get("format") if isinstance(doc, dict) else None
        if form not in (GRAPH_STATE_FORMAT, GRAPH_STATE_FORMAT_V1):
            raise GraphInputError(f"graph state is not {GRAPH_STATE_FORMAT} (nor {GRAPH_STATE_FORMAT_V1})")
        width = 2 if form == GRAPH_STATE_FORMAT else 9  # key, flag (graph/1: key, last, flag, 6 counts)
        want = [cfg.window_us, cfg.cycle_hops, cfg.flag_hops, cfg.scatter_us, cfg.node_cap, cfg.global_cap,
                cfg.search_budget, cfg.late_us]
        if doc.get("config") != want:
            raise GraphInputError(f"graph state was kept under other settings ({doc.get('config')!r}, "
                                  f"expected {want!r})")
        wm = doc.get("watermark")
        if wm is not None and type(wm) is not int:
            raise GraphInputError("graph state: watermark is not an integer")
        g = cls(cfg)
        g.watermark = wm
        accounts, edges = doc.get("accounts"), doc.get("edges")
        if not isinstance(accounts, list) or not isinstance(edges, list):
            raise GraphInputError("graph state: accounts and edges must be lists")
        by_id: list[Node] = []
        for i, a in enumerate(accounts):
            if (not isinstance(a, list) or len(a) != width or type(a[0]) is not str or not a[0]
                    or any(type(v) is not int for v in a[1:]) or a[0] in g.nodes):
                raise GraphInputError(f"graph state: account {i} is malformed")
            n = g.node(a[0] if rename is None else rename(a[0]))
            by_id.append(n)
            flagged = a[1] if width == 2 else a[2]
            g._restored(n, a[1:] if width == 9 else None)
            if flagged:
                n.flagged = True
                g.flagged.add(n)
        last_t = None
        for i, row in enumerate(edges):
            if (not isinstance(row, list) or len(row) != 6 or any(type(v) is not int for v in row)
                    or not (0 <= row[1] < len(by_id) and 0 <= row[2] < len(by_id)) or row[3] < 0
                    or not (row[4] or row[5]) or (last_t is not None and row[0] < last_t)):
                raise GraphInputError(f"graph state: edge {i} is malformed or out of time order")
            t, src, dst, cents = row[0], by_id[row[1]], by_id[row[2]], row[3]
            last_t = t
            e: Edge = (t, src.key, dst.key, cents)
            g._edges.append(e)
            if row[4]:
                src.out.append(e)
                src.out_last[dst] = e  # time order: the last one written is the latest
                src.amounts.append(cents)
            if row[5]:
                dst.inn.append(e)
                dst.in_last[src] = e
            if not (row[4] and row[5]):
                g._one_sided = t  # time order: the latest so far
        for n in by_id:
            n.amounts.sort()
            g._recount_near(n)
        idle = {i for i, n in enumerate(by_id) if not (n.out or n.inn or n.flagged)}
        if idle:  # an edge held names accounts held: none of them may be let go below
            for i, row in enumerate(edges):
                if row[1] in idle or row[2] in idle:
                    raise GraphInputError(f"graph state: edge {i} names an account that holds no edge and "
                                          "no flag (no graph writes such a state)")
        if any(not (n.out or n.inn or n.flagged) for n in by_id):
            # state written before accounts without edges were let go: let them go now, as the
            # payments since would have (the numbers of the others close up; their order stays)
            for n in by_id:
                if not (n.out or n.inn or n.flagged):
                    g._forget(n)
        return g

    STATE_FORMAT = GRAPH_STATE_FORMAT  # what ``state_bytes`` writes

    def _account_row(self, n: Node) -> list[Any]:
        """``n``'s row in ``state_bytes``."""
        return [n.key, 1 if n.flagged else 0]

    def _restored(self, n: Node, v1: list[int] | None) -> None:
        """``restore`` read ``n``; ``v1`` is the rest of its ``sealtrail.graph/1`` row (last activity,
        flag and the usual-counterparty counts), None from ``sealtrail.graph/2``. Nothing any value
        reads: this graph lets it go."""

    def state_sha256(self) -> str:
        """SHA-256 of ``state_bytes()``, lower-case hex."""
        return hashlib.sha256(self.state_bytes()).hexdigest()
