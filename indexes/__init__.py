"""replaydb.indexes: LSM secondary indexes of (key, seq, t) entries persisted as Delta tables.

Public API: :class:`LSMIndex` (create/open, add/delete_from_seq/flush/compact/restore,
range/point/prefix, count/selectivity, sizes, cost counters, check), :class:`LSMOptions`, the
result types, the Spark bulk-building helpers in :mod:`replaydb.indexes.spark_build` and the
maintenance helpers in :mod:`replaydb.indexes.maintenance`.
"""

from replaydb.indexes.bounds import prefix_successor
from replaydb.indexes.lsm import LSMIndex
from replaydb.indexes.options import ENTRIES_PER_PAGE, PAGE_BYTES, LSMOptions, entries_per_page
from replaydb.indexes.results import CostCounters, CountEstimate, IndexResult

__all__ = [
    "ENTRIES_PER_PAGE",
    "PAGE_BYTES",
    "CostCounters",
    "CountEstimate",
    "IndexResult",
    "LSMIndex",
    "LSMOptions",
    "entries_per_page",
    "prefix_successor",
]
