"""Transaction-graph and behavioural features over a rolling window of up to 30 days.

- ``config``: ``GraphConfig``, the window, search depths and caps;
- ``store``: ``TransactionGraph``, payments as edges between accounts, bounded per account and in all;
- ``cycles``: temporal cycles a payment closes;
- ``flagged``: hops from a payment to a flagged account;
- ``fixedpoint``: the integer log2, ratios and percentiles the values use (and the running means
  of ``sealtrail.graph/1``);
- ``features``: ``GraphFeatures``, the values of each payment (``GRAPH_FEATURE_NAMES``);
- ``counted``: ``CountedGraph``, the graph as ``sealtrail.graph/1`` held it, to re-derive state
  snapshots sealed by earlier releases.

Everything is integer arithmetic, so the values and ``state_bytes()`` are the same on every CPU.
``inference.schema.GRAPH_NAMES`` of these values are columns of the sealed ``sealtrail.features/6``
(``inference.features`` computes them through ``GraphFeatures``).
"""

from inference.graph.config import GraphConfig
from inference.graph.counted import CountedGraph
from inference.graph.errors import GraphConfigError, GraphError, GraphInputError
from inference.graph.features import GRAPH_FEATURE_NAMES, GraphFeatures, Payment, as_dict
from inference.graph.store import GRAPH_STATE_FORMAT, GRAPH_STATE_FORMAT_V1, TransactionGraph

__all__ = ["GRAPH_FEATURE_NAMES", "GRAPH_STATE_FORMAT", "GRAPH_STATE_FORMAT_V1", "CountedGraph",
           "GraphConfig", "GraphConfigError", "GraphError", "GraphFeatures", "GraphInputError", "Payment",
           "TransactionGraph", "as_dict"]
