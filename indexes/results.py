"""What index reads return: entries, count estimates, and cost counters."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
import pyarrow as pa


@dataclass
class CostCounters:
    """I/O an index object spent on reads since the last :meth:`reset` (all counts are sums).

    * ``queries``: range/point/count calls that read entries or boundary row groups.
    * ``runs_consulted`` / ``runs_skipped``: runs whose key range overlapped the query (and were
      read) / did not (skipped from their key min/max without any I/O).
    * ``files_read``, ``row_groups_read``, ``row_groups_skipped`` (skipped inside consulted files
      from the sparse row-group key index).
    * ``entries_read``: entries decoded (whole row groups); ``entries_returned``: entries in the
      answers; ``pages_read``: logical 8 KiB pages read, ``ceil(rows / entries_per_page)`` per row
      group read (the unit of the planner's C_SIO); ``bytes_read``: compressed Parquet bytes of the
      column chunks read.
    """

    queries: int = 0
    runs_consulted: int = 0
    runs_skipped: int = 0
    files_read: int = 0
    row_groups_read: int = 0
    row_groups_skipped: int = 0
    entries_read: int = 0
    entries_returned: int = 0
    pages_read: int = 0
    bytes_read: int = 0

    def reset(self) -> None:
        for name in _COST_NAMES:
            setattr(self, name, 0)

    def snapshot(self) -> CostCounters:
        return CostCounters(*[getattr(self, name) for name in _COST_NAMES])

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _COST_NAMES}

    def __sub__(self, other: CostCounters) -> CostCounters:
        return CostCounters(*[getattr(self, n) - getattr(other, n) for n in _COST_NAMES])

    def __add__(self, other: CostCounters) -> CostCounters:
        return CostCounters(*[getattr(self, n) + getattr(other, n) for n in _COST_NAMES])


_COST_NAMES: tuple[str, ...] = tuple(f.name for f in fields(CostCounters))
"""The counters in declaration order (what the constructor takes positionally): every index
lookup takes two snapshots and a difference, and ``dataclasses.fields`` is rebuilt per call."""


@dataclass
class IndexResult:
    """Entries (key, seq, t) answering a range query, as NumPy columns.

    ``order`` is "key" (sorted by (key, seq)) or "seq" (sorted by seq). ``key`` is int64/float64,
    or an object array of ``str`` for string indexes (``key_arrow`` holds the Arrow form then).
    ``cost`` is the I/O this one query spent.
    """

    key: np.ndarray
    seq: np.ndarray
    t: np.ndarray
    order: str = "key"
    cost: CostCounters = field(default_factory=CostCounters)
    key_arrow: pa.Array | None = None

    def __len__(self) -> int:
        return int(self.seq.size)

    def to_arrow(self) -> pa.Table:
        key = self.key_arrow if self.key_arrow is not None else pa.array(self.key)
        return pa.table({"key": key, "seq": pa.array(self.seq), "t": pa.array(self.t)})


@dataclass(frozen=True)
class CountEstimate:
    """Number of entries in a key range, estimated from statistics, with guaranteed bounds.

    ``low <= true count <= high`` always holds; ``estimate`` interpolates inside the sketch
    buckets; ``exact`` is True when ``low == high`` (then all three are the true count).
    """

    estimate: float
    low: int
    high: int

    @property
    def exact(self) -> bool:
        return self.low == self.high

    def __int__(self) -> int:
        return int(round(self.estimate))
