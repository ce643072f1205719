"""The physical plan: one value that says what to read, which operator to run, where, and why.

Every query language's planner produces a :class:`PhysicalPlan`; the one executor
(:mod:`replaydb.replay.executor`) runs it locally or on Spark, and EXPLAIN prints it. A plan is
plain data - frozen dataclasses, tuples, strings, numbers, interval arrays
(:class:`~replaydb.store.interval_list.IntervalList`), the operators' frozen configurations - so
two plans compare with ``==``, a plan survives a ``pickle`` round trip, and Spark executors
receive the plan itself (never query text to parse again, never a closure).

Node types:

* **sources** (what to read): :class:`FullScan` (every event of the pinned streams),
  :class:`IntervalScan` (only the given half-open time intervals, with why they were chosen:
  index lookups, a time range, situation pruning, the coarse pattern map; a TPStream
  :class:`SituationGuard` when interval cuts must be checked), :class:`TreeAggregates` (the
  windowed aggregation computed from the TAB+-tree's per-node aggregates, no event replayed);
* the **operator** (:class:`~replaydb.operators.spec.OperatorSpec`: family, frozen
  configuration, state cap, CPU or GPU);
* the **placement** (:class:`Placement`: the device decision and the replay batch size);
* the **output** (:class:`Output`: which result columns are stream times, shown as timestamps);
* the **streams** (:class:`StreamRef`: name, pinned version, event count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from replaydb.operators.spec import OperatorSpec
from replaydb.store.interval_list import IntervalList


@dataclass(frozen=True)
class StreamRef:
    """One stream the plan reads, pinned at one version."""

    name: str
    version: int
    events: int


# --------------------------------------------------------------------------- sources
@dataclass(frozen=True)
class FullScan:
    """Every event of the pinned streams, merged by ``(t, stream position, seq)``."""

    kind: ClassVar[str] = "full_scan"

    def describe(self) -> dict[str, Any]:
        return {"node": self.kind}


@dataclass(frozen=True)
class SituationGuard:
    """TPStream interval replay: results whose situations an interval's start or end cut are
    dropped (:class:`~replaydb.replay.guard.IntervalGuard`); ``t_min`` / ``t_max`` are the
    stream's first and last times."""

    t_min: int
    t_max: int


@dataclass(frozen=True)
class IntervalScan:
    """Only the events inside :attr:`intervals`; the operator's ``end_interval`` runs between
    two intervals, so no result spans a gap (unless the operator declares ``skips_gaps``: then
    a gap only leaves events out). ``reason``: ``index`` (index lookups, Algorithm 3.1),
    ``time_range`` (a WHERE range on ``t``), ``situations`` (TPStream pruning), ``coarse_map``
    (the coarse pattern map), ``trends`` (GRETA: where an event can take part in a trend),
    ``nothing`` (no interval can hold a result)."""

    intervals: IntervalList
    reason: str
    guard: SituationGuard | None = None
    contiguous: bool = False
    """The planner proved that no result spans a gap and no event in a gap decides a result:
    the intervals are then fed as one stream, with no ``end_interval`` between them (ending
    each one gives the same rows; Spark's interval tasks do that)."""
    kind: ClassVar[str] = "interval_scan"

    def describe(self) -> dict[str, Any]:
        a = self.intervals.array
        out: dict[str, Any] = {"node": self.kind, "reason": self.reason,
                               "intervals": len(self.intervals)}
        if len(a):
            out["span"] = [int(a[0, 0]), int(a[-1, 1])]
        if self.contiguous:
            out["feed"] = "one stream"
        if self.guard is not None:
            out["guard"] = "situation cuts"
        return out


@dataclass(frozen=True)
class TreeAggregates:
    """The windowed aggregation answered from the TAB+-tree's per-node aggregates (no event
    replayed): ``variant`` ``index`` (the optimized path) or ``naive``; ``t0`` / ``t1`` bound
    the time range read (None: unbounded)."""

    variant: str
    t0: int | None = None
    t1: int | None = None
    kind: ClassVar[str] = "tree_aggregates"

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.kind, "variant": self.variant}
        if self.t0 is not None or self.t1 is not None:
            out["time_range"] = [self.t0, self.t1]
        return out


Source = FullScan | IntervalScan | TreeAggregates


@dataclass(frozen=True)
class Placement:
    """Where the operator runs: ``device`` (cpu | gpu) as decided for ``requested``, with the
    reason, and the replay batch size (None: replay's default; large batches for a GPU)."""

    requested: str = "auto"
    device: str = "cpu"
    reason: str = ""
    backend: str | None = None
    batch_rows: int | None = None
    estimate: tuple[tuple[str, float], ...] = ()

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requested": self.requested, "device": self.device,
                               "reason": self.reason}
        if self.backend:
            out["backend"] = self.backend
        if self.estimate:
            out["estimate"] = dict(self.estimate)
        return out


TIME_FORMATS = ("timestamp", "raw")
"""How results show stream times: Arrow timestamps, or the stored int64 counts (``raw``)."""


@dataclass(frozen=True)
class Output:
    """How results leave the executor: the output columns holding stream times
    (:attr:`instants`, as the operator declares them:
    :meth:`~replaydb.operators.base.Operator.instant_columns`) become Arrow
    ``timestamp[time_unit, tz=time_zone]`` columns (the same int64 values, no copy). With
    ``time_unit`` None - the stream declares no unit, or the query asked for raw times - every
    column stays as the operator produced it."""

    time_unit: str | None = None
    instants: tuple[str, ...] = ()
    time_zone: str = "UTC"

    def describe(self) -> dict[str, Any]:
        if self.time_unit is None or not self.instants:
            return {"times": "raw"}
        return {"times": f"timestamp[{self.time_unit}, {self.time_zone}]",
                "instants": list(self.instants)}


@dataclass(frozen=True)
class PhysicalPlan:
    """One query's plan (see the module docstring)."""

    language: str
    query: str
    streams: tuple[StreamRef, ...]
    source: Source
    operator: OperatorSpec
    strategy: str = "replay"
    placement: Placement = Placement()
    type_column: str | None = None
    aliases: tuple[tuple[str, str], ...] = ()
    estimates: dict[str, Any] = field(default_factory=dict, hash=False)
    output: Output = Output()

    @property
    def intervals(self) -> IntervalList | None:
        """The replayed intervals (None: every event; tree aggregates read no interval)."""
        src = self.source
        return src.intervals if isinstance(src, IntervalScan) else None

    @property
    def contiguous(self) -> bool:
        """Whether the intervals are fed as one stream (:attr:`IntervalScan.contiguous`)."""
        src = self.source
        return isinstance(src, IntervalScan) and src.contiguous

    def describe(self) -> dict[str, Any]:
        """The plan as nested plain dicts, node by node (what EXPLAIN prints)."""
        return {"strategy": self.strategy,
                "source": self.source.describe(),
                "operator": self.operator.describe(),
                "placement": self.placement.describe(),
                "output": self.output.describe(),
                "streams": [{"name": s.name, "version": s.version, "events": s.events}
                            for s in self.streams]}
