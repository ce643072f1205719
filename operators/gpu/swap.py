"""Swap a bound CPU operator for its GPU variant (``--device auto|cpu|gpu``).

The planner binds a query to a CPU operator as usual, then calls :func:`swap_in`::

    op = ctx.bind()                                   # e.g. a PatternOperator
    op, choice = swap_in(op, options.device, estimate_for(op, events=n, batches=k))
    # choice.device is "gpu" or "cpu"; choice.reason says why (for EXPLAIN)

The GPU variant takes the very same frozen configuration and state cap, so results do not
depend on the choice. When the GPU variant refuses the query
(:class:`~replaydb.operators.gpu.exprvm.GpuUnsupported`: a feature its kernels lack) the CPU
operator is kept and the reason names the feature - also under ``--device gpu``, where the user
asked for the GPU but the query needs the CPU.

Operators without a GPU variant (imprecise patterns, GRETA, TPStream, ...) are returned unchanged.
"""

from __future__ import annotations

from typing import Any

from replaydb.operators.base import Operator
from replaydb.operators.filter import FilterOperator
from replaydb.operators.gpu.device import DeviceChoice, WorkEstimate, select_device
from replaydb.operators.gpu.exprvm import GpuUnsupported
from replaydb.operators.join import JoinOperator
from replaydb.operators.pattern.operator import PatternOperator
from replaydb.operators.window.operator import WindowAggregate


def _variant(op: Operator) -> tuple[str, type] | None:
    from replaydb.operators.gpu.filter import GpuFilterOperator
    from replaydb.operators.gpu.join import GpuJoinOperator
    from replaydb.operators.gpu.pattern import GpuPatternOperator
    from replaydb.operators.gpu.window import GpuWindowAggregate

    table: list[tuple[type, str, type]] = [
        (FilterOperator, "filter", GpuFilterOperator),
        (JoinOperator, "join", GpuJoinOperator),
        (WindowAggregate, "window", GpuWindowAggregate),
        (PatternOperator, "pattern", GpuPatternOperator),
    ]
    for cpu_cls, kind, gpu_cls in table:
        if type(op) is cpu_cls:
            return kind, gpu_cls
    return None


def estimate_for(op: Operator, events: int, batches: int = 1,
                 work: float | None = None) -> WorkEstimate | None:
    """A :class:`WorkEstimate` for ``op`` over ``events`` events in ``batches`` device batches.

    The per-event work factor defaults to: 1 for filters and aggregations; the other side's window
    size for joins (count windows; for time windows the size in time units, a proxy that assumes
    about one event per unit); the WITHIN window (a proxy for live partial matches) for patterns.
    """
    v = _variant(op)
    if v is None:
        return None
    kind = v[0]
    cfg: Any = op.config
    if work is None:
        if kind == "join":
            work = float(max(cfg.left_window.size, cfg.right_window.size))
        elif kind == "pattern":
            w = cfg.spec.window
            work = float(w) if w is not None and w > 0 else 1.0
        else:
            work = 1.0
    bytes_per_event = {"filter": 16, "window": 24, "join": 24, "pattern": 32}[kind]
    return WorkEstimate(kind, int(events), bytes_per_event, float(work), int(batches))


def swap_in(op: Operator, device: str = "auto",
            estimate: WorkEstimate | None = None) -> tuple[Operator, DeviceChoice]:
    """The operator to run (``op`` or its GPU variant) and the device decision."""
    v = _variant(op)
    if v is None:
        return op, DeviceChoice("cpu", "cpu", f"{op.name}: no GPU variant")
    choice = select_device(device, estimate)
    if choice.device != "gpu":
        return op, choice
    _, gpu_cls = v
    try:
        gpu_op = gpu_cls(op.config, state_cap=op.state_cap, backend=choice.backend)
    except GpuUnsupported as e:
        return op, DeviceChoice("cpu", "cpu", str(e))
    return gpu_op, choice
