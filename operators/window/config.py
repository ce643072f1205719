"""The configuration of a windowed aggregation (:class:`WindowConfig`): window geometry,
aggregates, grouping, the WHERE filter and the input schema, validated once.

Built by the window SQL front-end (:mod:`replaydb.planner.lang.window_sql`) or directly for live
use; :class:`~replaydb.operators.window.operator.WindowAggregate` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from replaydb.errors import OperatorError
from replaydb.operators.expr import Expr
from replaydb.operators.window.aggregates import AggSpec
from replaydb.operators.window.assign import SliceGeometry

WINDOW_COLUMNS = ("window_start", "window_end")


@dataclass(frozen=True)
class WindowConfig:
    """Frozen configuration of :class:`~replaydb.operators.window.operator.WindowAggregate`.

    ``size``/``slide``/``offset`` are in stream time units (time windows) or events (count
    windows). ``schema`` (the input schema) fixes the output types before any input arrives;
    without it they are learned from the first batch.
    """

    size: int
    aggregates: tuple[AggSpec, ...]
    slide: int | None = None
    kind: str = "time"
    align: str | None = None
    offset: int = 0
    empty: str = "skip"
    group_by: tuple[str, ...] = ()
    where: Expr | None = None
    schema: pa.Schema | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in ("time", "count"):
            raise OperatorError(f"window kind must be 'time' or 'count', got {self.kind!r}")
        if self.slide is None:
            object.__setattr__(self, "slide", self.size)
        align = self.align or ("epoch" if self.kind == "time" else "first")
        if align not in ("epoch", "first"):
            raise OperatorError(f"align must be 'epoch' or 'first', got {align!r}")
        if self.kind == "count" and align != "first":
            raise OperatorError("count windows are anchored at the first event (align='first')")
        object.__setattr__(self, "align", align)
        if self.offset and align != "epoch":
            raise OperatorError("offset applies to epoch-aligned time windows only")
        if self.empty not in ("skip", "emit"):
            raise OperatorError(f"empty must be 'skip' or 'emit', got {self.empty!r}")
        if self.empty == "emit" and (self.group_by or self.kind == "count"):
            raise OperatorError(
                "empty='emit' needs an ungrouped time window (a group or a count window is never "
                "empty)")
        SliceGeometry(int(self.size), int(self.slide))  # validates size and slide
        object.__setattr__(self, "aggregates", tuple(self.aggregates))
        object.__setattr__(self, "group_by", tuple(self.group_by))
        if not self.aggregates:
            raise OperatorError("a windowed aggregation needs at least one aggregate")
        names = list(WINDOW_COLUMNS) + list(self.group_by) + [a.alias for a in self.aggregates]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise OperatorError(f"duplicate output column name(s): {', '.join(dup)}",
                                hint="give the aggregates distinct aliases")

    @property
    def geometry(self) -> SliceGeometry:
        return SliceGeometry(int(self.size), int(self.slide))  # type: ignore[arg-type]
