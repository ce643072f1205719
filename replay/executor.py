"""The one executor: runs any :class:`~replaydb.replay.plan.PhysicalPlan`.

:func:`execute` takes the plan value and the streams it names, pinned (the caller's snapshots,
checked against :attr:`PhysicalPlan.streams <replaydb.replay.plan.PhysicalPlan.streams>`), and
returns an :class:`Execution`: the result table and what each node recorded (``replay``: what
was read; ``operator``: the operator's counters; ``index_path``: what the tree aggregates did;
``guard``: what the TPStream interval guard dropped).

* ``engine="local"`` runs in this process: a :class:`~replaydb.replay.plan.FullScan` or
  :class:`~replaydb.replay.plan.IntervalScan` replays its events into a fresh operator built from
  the plan's :class:`~replaydb.operators.spec.OperatorSpec` (its GPU variant where the plan
  places it there, in the plan's batch size); a
  :class:`~replaydb.replay.plan.TreeAggregates` source computes from the TAB+-tree.
* ``engine="spark"`` ships the plan value to Spark executors
  (:func:`replaydb.replay.spark.run_plan`); plans that replay nothing on executors (tree
  aggregates, guarded intervals) run on the driver.

``operator``: a fresh operator the caller already built from ``plan.operator`` (a planner binds
one while planning; reusing it saves compiling the query twice); it must never have been fed.
``check``: called before every batch and after every result table (time and memory limits).

Both engines return the plan's final rows: the columns the plan's
:class:`~replaydb.replay.plan.Output` names as stream times are timestamps (:func:`format_times`,
the last step of a local run and of a Spark run alike).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from replaydb.errors import UsageError
from replaydb.replay.plan import IntervalScan, Output, PhysicalPlan, TreeAggregates
from replaydb.replay.replay import Replay

ENGINES = ("local", "spark")


@dataclass
class Execution:
    """A plan's results and what its nodes recorded (see the module docstring)."""

    table: pa.Table
    stats: dict[str, Any] = field(default_factory=dict)


def check_streams(plan: PhysicalPlan, snapshots: Sequence[Any]) -> None:
    """The snapshots must be the plan's streams at the plan's versions, in order."""
    got = [(s.name, s.version) for s in snapshots]
    want = [(s.name, s.version) for s in plan.streams]
    if got != want:
        raise UsageError(f"the plan reads {want}, but the streams given are {got}",
                         hint="pin the streams the plan names (store.stream(name, version))")


def build_operator(plan: PhysicalPlan, operator: Any = None) -> Any:
    """The operator the plan runs: ``operator`` when given (fresh, built from
    ``plan.operator``), else a new one from the spec."""
    if operator is not None:
        return operator
    return plan.operator.build()


def replay_into(plan: PhysicalPlan, snapshots: Sequence[Any], op: Any,
                check: Callable[[], None] | None = None,
                progress: Callable[[int], None] | None = None) -> tuple[pa.Table, Replay]:
    """Replay the plan's source into ``op``; the results as one table, and the replay.
    ``progress`` is called with the number of events pushed so far, before every batch and
    at the end."""
    columns = getattr(op, "input_columns", None)
    extra = {} if plan.placement.batch_rows is None else {
        "batch_rows": plan.placement.batch_rows}
    # an operator that names its input columns without seq and does not order by it gets no seq
    seq = columns is None or "seq" in columns or getattr(op, "requires_seq", True)
    rep = Replay(list(snapshots), plan.intervals, columns=columns,
                 type_column=plan.type_column, aliases=dict(plan.aliases), seq=seq,
                 contiguous=plan.contiguous, **extra)
    tick = check
    if progress is not None:
        def tick() -> None:
            if check is not None:
                check()
            progress(rep.events_pushed)
    parts = []
    for tbl in rep.results(op, tick):
        parts.append(tbl)
        if check is not None:
            check()
    if check is not None:
        check()
    if progress is not None:
        progress(rep.events_pushed)
    table = pa.concat_tables(parts) if parts else op.output_schema.empty_table()
    return table, rep


def _tree_aggregates(plan: PhysicalPlan, snapshots: Sequence[Any]) -> Execution:
    from replaydb.replay.tree_aggregates import run_index, run_naive

    src = plan.source
    assert isinstance(src, TreeAggregates)
    if len(snapshots) != 1:
        raise UsageError("tree aggregates answer a query over one stream")
    runner = run_index if src.variant == "index" else run_naive
    table, stats = runner(snapshots[0], plan.operator.config, t0=src.t0, t1=src.t1)
    return Execution(table, {"index_path": stats.as_dict()})


def execute_local(plan: PhysicalPlan, snapshots: Sequence[Any], *, operator: Any = None,
                  check: Callable[[], None] | None = None,
                  progress: Callable[[int], None] | None = None) -> Execution:
    """Run ``plan`` in this process (see the module docstring); ``progress`` as in
    :func:`replay_into` (a tree-aggregate plan reads no events and reports none)."""
    check_streams(plan, snapshots)
    if isinstance(plan.source, TreeAggregates):
        out = _tree_aggregates(plan, snapshots)
        out.table = format_times(out.table, plan.output)
        return out
    op = build_operator(plan, operator)
    guard = None
    src = plan.source
    if isinstance(src, IntervalScan) and src.guard is not None:
        from replaydb.replay.guard import IntervalGuard

        op = guard = IntervalGuard(op, snapshots[0], src.guard.t_min, src.guard.t_max,
                                   dict(plan.aliases))
    table, rep = replay_into(plan, snapshots, op, check, progress)
    stats: dict[str, Any] = {"replay": rep.stats.as_dict(), "operator": op.counters.as_dict()}
    if guard is not None:
        stats["guard"] = guard.stats()
    return Execution(format_times(table, plan.output), stats)


def execute(plan: PhysicalPlan, snapshots: Sequence[Any], *, engine: str = "local",
            operator: Any = None, check: Callable[[], None] | None = None,
            limits: Any = None, spark: dict[str, Any] | None = None,
            progress: Callable[[int], None] | None = None) -> Execution:
    """Run ``plan`` locally or on Spark (see the module docstring). ``limits`` (an object
    with ``check()``, ``deadline`` and ``timeout``) also lets Spark cancel the query's jobs at
    its deadline; ``spark``: :func:`~replaydb.replay.spark.run_plan`'s keyword options;
    ``progress``: events replayed so far, locally (Spark reports its own stages)."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}", hint=f"use one of {', '.join(ENGINES)}")
    if check is None and limits is not None:
        check = limits.check
    if engine == "spark":
        from replaydb.replay.spark import run_plan

        check_streams(plan, snapshots)
        table, stats = run_plan(plan, snapshots, limits, operator=operator, **(spark or {}))
        return Execution(table, stats)
    return execute_local(plan, snapshots, operator=operator, check=check, progress=progress)


def format_times(table: pa.Table, output: Output) -> pa.Table:
    """``table`` with the plan's instant columns as Arrow timestamps of the stream's unit
    (:class:`~replaydb.replay.plan.Output`); other columns, and every column when the output
    keeps raw times, unchanged. O(columns): a cast of int64 to a timestamp shares the values."""
    if output.time_unit is None:
        return table
    typ = pa.timestamp(output.time_unit, tz=output.time_zone)
    for name in output.instants:
        i = table.schema.get_field_index(name)
        if i < 0 or not pa.types.is_integer(table.schema.field(i).type):
            continue
        field = table.schema.field(i).with_type(typ)
        table = table.set_column(i, field, table.column(i).cast(pa.int64()).cast(typ))
    return table
