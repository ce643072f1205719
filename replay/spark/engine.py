"""Run a planned query on Spark executors: choose the mode, ship the work, gather the results.

:func:`run_plan` takes the :class:`~replaydb.replay.plan.PhysicalPlan` (the driver plans as
usual) and returns ``(table, stats)`` equal to local execution. Tasks receive the plan's operator
spec (plain data) and build their operator from it; they never see query text. The mode (``stats["spark"]``):

* ``interval`` - **interval-parallel**: the planned replay intervals are independent (no result
  spans two: the operator's ``end_interval`` forgets everything between them), so consecutive
  intervals are grouped into tasks with balanced event counts (from the TAB+-tree's leaf counts,
  no data read; :mod:`.split`), each task reads its intervals' row groups and replays them into
  its own operator. Chosen when there are several intervals, the operator is interval-safe and
  no single interval holds much more than a task's share (else partitioning, when possible, does
  better).
* ``partition`` - **partition-parallel**: the operator's partition keys (PARTITION BY, SASE+
  ``[attr]``, TPStream PARTITION BY, GRETA GROUP-BY, windowed GROUP BY) split its work into
  independent key groups; each task replays all events of its keys, in the local replay's
  order, across every planned interval (``end_interval`` at each boundary, as locally). The
  events reach the tasks in one of two ways (``stats["spark"]["partition_read"]``):

  - ``scan`` (no shuffle): each of ``S`` tasks reads the whole planned replay itself (the local
    replay's batches, projected to the operator's columns), hashes the key column and keeps the
    events of the keys it owns (a balanced owner table from a sample of the keys,
    :mod:`.buckets`). No event crosses the JVM: cost ``S x`` the read plus ``1/S`` of the
    operator work per task;
  - ``shuffle``: read tasks replay balanced time ranges and split the events by key hash;
    Spark repartitions them by target and sorts the chunks back into replay order; one task per
    target replays its keys. Every event is read once but serialized, shuffled and sorted
    (Arrow IPC chunks through the JVM).

  The scan does ``S - 1`` redundant reads; the shuffle serializes, shuffles, sorts and decodes
  every event. ``auto`` scans while a query has at most :data:`SCAN_MAX_TASKS` tasks (one per
  executor core unless ``tasks`` says otherwise): one more than the passes over every event
  that the shuffle adds, each counted as one read (derived in its docstring); with more tasks,
  reading the whole replay in every one would dominate, and it shuffles.

* ``single`` - the **full-replay fallback** for queries that are neither: one task replays
  everything (the whole stream, or the planned intervals, in order) into one operator. Reading
  and matching then run on one executor core; Spark adds its start-up and transfer costs only.

Several streams (SASE+ event types stored one stream per type) are merged inside the tasks by
the same :class:`~replaydb.replay.Replay` as locally: ``(t, stream position, seq)``.

Not shipped (``stats["spark"]["mode"] == "driver"``): plans whose source is
:class:`~replaydb.replay.plan.TreeAggregates` (the windowed aggregation's index paths read only
tree aggregates, no events, so there is nothing to distribute) and interval scans with a
TPStream situation guard (its backward searches read the stream around each interval) run on the
driver through the local executor.

Limits: ``timeout`` cancels the query's Spark job group and raises
:class:`~replaydb.errors.ResourceLimitExceeded`; ``max_memory`` is checked on the driver after the
results are gathered (executors are governed by Spark's own memory settings); state caps apply
inside every task (a task's operator state, not the whole query's).

Options (keyword arguments or environment): ``mode`` (``REPLAYDB_SPARK_MODE``: auto | interval |
partition | single), ``tasks`` (``REPLAYDB_SPARK_TASKS``: interval tasks / key targets; default
one interval task or scan task per executor core, two shuffle targets per core),
``read_tasks`` (the shuffle's read tasks; default two per core), ``partition_read``
(``REPLAYDB_SPARK_PARTITION_READ``: auto | scan | shuffle), ``scan_max_tasks``
(``REPLAYDB_SPARK_SCAN_MAX_TASKS``: the most tasks ``auto`` scans with; default
:data:`SCAN_MAX_TASKS`, for a cluster whose measured crossover differs), ``result_dir``
(``REPLAYDB_SPARK_RESULT_DIR``): where tasks leave their results for the driver. By default
results of ``local[...]`` masters (executors on the driver's machine) travel as Arrow IPC files
in a fresh temporary directory that the driver memory-maps and removes (no JVM transfer and no
decoding on the driver's critical path); other masters send them
through Spark (zstd-compressed IPC) unless ``result_dir`` names a directory that the driver and
every executor share. ``none`` forces the transfer through Spark.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import ReplayDBError, ResourceLimitExceeded, UsageError
from replaydb.operators.traits import Traits
from replaydb.replay.executor import execute_local, format_times
from replaydb.replay.plan import IntervalScan, PhysicalPlan, TreeAggregates
from replaydb.replay.replay import normalize_intervals
from replaydb.replay.spark import order as O
from replaydb.replay.spark import tasks as T
from replaydb.replay.spark.adapters import CARRIER
from replaydb.replay.spark.buckets import scan_owner
from replaydb.replay.spark.drive import from_ipc, read_result_file
from replaydb.replay.spark.keys import bijective_slots
from replaydb.replay.spark.progress import Progress, job_group
from replaydb.replay.spark.reader import ship
from replaydb.replay.spark.split import group_intervals, interval_events, read_ranges

MODES = ("auto", "interval", "partition", "single")
PARTITION_READS = ("auto", "scan", "shuffle")
TASKS_PER_CORE = 2
"""Key targets per executor core of the shuffle (and its read tasks)."""
INTERVAL_TASKS_PER_CORE = 1
"""Interval tasks per executor core: the groups are balanced by the tree's event counts, and
every extra task costs a Python worker round trip and its own operator."""
SHUFFLE_PASSES = 2
"""Passes over every event that the shuffle makes and a scan task does not: each event written
into Spark's shuffle and read back out of it. What makes a shuffle one, on any machine."""
SCAN_MAX_TASKS = 1 + SHUFFLE_PASSES
"""Partition mode scans (no shuffle) up to this many tasks by default, shuffles beyond. For
``E`` events, a read (and hash) of an event costing ``r`` and the operator ``o``, ``S`` scan
tasks take ``E r + E o / S`` a core (every task reads everything); the shuffle reads every
event once and adds ``x`` an event to move it, ``E (r + x + o) / S``. The scan costs no more
while ``S - 1 <= x / r``. Counting every pass over every event alike - the shuffle's write and
read (:data:`SHUFFLE_PASSES`) as a scan task's read - ``x = 2 r``: scan up to 3 tasks. Derived
from what each way does, not measured: the shuffle also sorts its chunks and moves them
through the JVM (a network on a cluster), which only moves the crossover up; where a
measurement (``bench/bench_spark.py``) finds it elsewhere, the engine option
``scan_max_tasks`` sets it, and ``partition_read`` forces either way."""
IMBALANCE = 1.25
"""Interval mode is chosen over partition mode while the largest interval holds at most this
many times a task's share of the events."""


def choose_mode(mode: str, tr: Traits, counts: np.ndarray, slots: int) -> str:
    """The execution mode (see the module docstring); a forced mode that cannot apply raises."""
    if mode not in MODES:
        raise UsageError(f"unknown Spark mode {mode!r}", hint=f"use one of {', '.join(MODES)}")
    n = len(counts)
    if mode == "interval" and not tr.interval_safe:
        raise UsageError(f"{tr.kind} queries cannot run interval-parallel"
                         + (f" ({'; '.join(tr.notes)})" if tr.notes else ""))
    if mode == "partition" and not tr.partitionable:
        raise UsageError(f"this {tr.kind} query cannot run partition-parallel: "
                         + (tr.partition_blocker or "it has no partition keys"))
    if mode != "auto":
        return mode
    total = int(counts.sum())
    if n > 1 and tr.interval_safe:
        share = total / max(1, min(slots, n))
        if not tr.partitionable or int(counts.max()) <= IMBALANCE * share:
            return "interval"
    if tr.partitionable:
        return "partition"
    return "single"


def choose_partition_read(read: str, n_tasks: int, scan_max_tasks: int = SCAN_MAX_TASKS
                          ) -> str:
    """How partition mode's tasks get their events: ``scan`` or ``shuffle`` (module
    docstring); ``auto`` scans while ``n_tasks <= scan_max_tasks`` (0: always shuffles).
    UsageError for another read or a negative ``scan_max_tasks``."""
    if read not in PARTITION_READS:
        raise UsageError(f"unknown partition read {read!r}",
                         hint=f"use one of {', '.join(PARTITION_READS)}")
    if isinstance(scan_max_tasks, bool) or not isinstance(scan_max_tasks, int) \
            or scan_max_tasks < 0:
        raise UsageError(f"scan_max_tasks must be a count of tasks (>= 0), not "
                         f"{scan_max_tasks!r}")
    if read != "auto":
        return read
    return "scan" if n_tasks <= scan_max_tasks else "shuffle"


def _env_int(name: str) -> int | None:
    """The integer of environment variable ``name`` (None when unset or empty); UsageError
    for another value."""
    v = os.environ.get(name)
    if not v:
        return None
    try:
        return int(v)
    except ValueError:
        raise UsageError(f"{name} must be an integer, not {v!r}") from None


def _executor(master: str | None, executor: Any) -> Any:
    if executor is not None:
        return executor
    from replaydb.replay.spark.executors import SparkExecutor
    from replaydb.spark import get_spark

    return SparkExecutor(get_spark(master))


def run_plan(plan: PhysicalPlan, snapshots: Sequence[Any], limits: Any = None,
             **options: Any) -> tuple[pa.Table, dict[str, Any]]:
    """Execute ``plan`` over the pinned ``snapshots`` on Spark; returns ``(result table,
    stats)`` (see the module docstring), the plan's time columns as timestamps
    (:func:`~replaydb.replay.executor.format_times`). ``options``: those of
    :func:`_run_plan`."""
    table, stats = _run_plan(plan, snapshots, limits, **options)
    return format_times(table, plan.output), stats


def _run_plan(plan: PhysicalPlan, snapshots: Sequence[Any], limits: Any = None, *,
              operator: Any = None, master: str | None = None, mode: str | None = None,
              tasks: int | None = None, read_tasks: int | None = None, executor: Any = None,
              progress: bool | None = None, partition_read: str | None = None,
              result_dir: str | None = None, scan_max_tasks: int | None = None
              ) -> tuple[pa.Table, dict[str, Any]]:
    """:func:`run_plan`'s work: the result rows as the operator produced them. ``operator``: a
    fresh operator built from ``plan.operator`` (None: built here)."""
    t_start = time.perf_counter()
    driver = _driver_reason(plan)
    if driver is not None:
        out = execute_local(plan, snapshots, operator=operator,
                            check=None if limits is None else limits.check)
        out.stats["engine"] = "spark"
        out.stats["spark"] = {"mode": "driver", "note": driver}
        return out.table, out.stats
    op = operator if operator is not None else plan.operator.build()
    tr = op.traits()
    if tr.exact_partition_order and len(snapshots) > 1:
        tr = replace(tr, exact_partition_order=False, partition_blocker=(
            "match_id of merged streams: a match's last event is not named by its seq alone"))
    if tr.sort_complete and len(snapshots) > 1:
        tr = replace(tr, sort_complete=False)  # seq names no single event across streams
    mode = mode or os.environ.get("REPLAYDB_SPARK_MODE") or "auto"
    intervals = normalize_intervals(plan.intervals)
    if plan.intervals is not None and not intervals:
        return op.output_schema.empty_table(), {"engine": "spark", "spark": {
            "mode": "none", "note": "the plan replays nothing"}}
    counts = interval_events(snapshots, intervals)
    ex = _executor(master, executor)
    slots = ex.parallelism
    chosen = choose_mode(mode, tr, counts, slots)
    carrier = chosen == "partition" and tr.time_carrier
    task_spec = op.task_spec(strip_select=tr.strip_select,
                             time_carrier=CARRIER if carrier else None)
    task_schema_op = task_spec.build() if tr.strip_select else op
    columns = getattr(op, "input_columns", None)
    out_schema = task_schema_op.output_schema
    if tr.sort_complete and not all(c in out_schema.names and pa.types.is_integer(
            out_schema.field(c).type) for c in tr.sort_columns):
        tr = replace(tr, sort_complete=False)
    q = T.QueryShipment(
        operator=task_spec, type_column=plan.type_column,
        aliases=dict(plan.aliases), columns=tuple(columns) if columns is not None else None,
        partition_keys=tuple(tr.partition_keys),
        exact_order=chosen == "partition" and tr.exact_partition_order,
        key_report=chosen != "partition" and tr.numbering is not None
        and bool(tr.numbering.keys), time_carrier=carrier,
        sorted_runs=tuple(tr.sort_columns) if chosen == "partition" and tr.sort_complete
        else ())
    n_tasks = tasks or _env_int("REPLAYDB_SPARK_TASKS")
    read = None
    if chosen == "partition":
        scan_max = scan_max_tasks if scan_max_tasks is not None else \
            _env_int("REPLAYDB_SPARK_SCAN_MAX_TASKS")
        read = choose_partition_read(
            partition_read or os.environ.get("REPLAYDB_SPARK_PARTITION_READ") or "auto",
            n_tasks or slots, SCAN_MAX_TASKS if scan_max is None else scan_max)
        n_tasks = n_tasks or (slots if read == "scan" else TASKS_PER_CORE * slots)
    n_tasks = n_tasks or (INTERVAL_TASKS_PER_CORE if chosen == "interval" else 1) * slots
    info: dict[str, Any] = {"mode": chosen, "executor": ex.name, "slots": slots,
                            "intervals": len(intervals), "estimated_events": int(counts.sum()),
                            "operator": tr.kind}
    if tr.partition_keys:
        info["partition_keys"] = list(tr.partition_keys)
    notes = list(tr.notes) + ([tr.partition_blocker] if tr.partition_blocker else [])
    if notes:
        info["notes"] = notes
    group, desc = job_group(plan.language, plan.query)
    sc = getattr(ex, "sc", None)
    prog = Progress(sc, group, progress) if sc is not None else None
    if sc is not None:
        sc.setJobGroup(group, desc, interruptOnCancel=True)
        info["job_group"] = group
    out_dir, own_dir = _result_dir(result_dir, ex)
    q = replace(q, result_dir=out_dir)
    timer, fired = _arm_timeout(limits, sc, group)
    t_ship = time.perf_counter()
    try:
        job = _Job(plan, snapshots, intervals, counts, tr, q, ex, prog, info, n_tasks, slots)
        if chosen in ("interval", "single"):
            result = _interval_tasks(job, single=chosen == "single")
        elif read == "scan":
            result = _scan_tasks(job)
        else:
            result = _shuffle_tasks(job, read_tasks or TASKS_PER_CORE * slots)
    except ReplayDBError:
        raise
    except Exception:
        if fired.is_set():
            raise ResourceLimitExceeded(
                f"query exceeded its time limit of {limits.timeout:g} s",
                hint="raise --timeout, or narrow the query (time range, window, predicates)"
            ) from None
        raise
    else:  # gathered before the finally removes the result files
        t_gather = time.perf_counter()
        table, stats = _gather(result, tr, chosen, op, task_schema_op, bool(q.sorted_runs))
    finally:
        if timer is not None:
            timer.cancel()
        if own_dir:
            shutil.rmtree(out_dir, ignore_errors=True)
    info["seconds"] = {"prepare": t_ship - t_start, "spark": t_gather - t_ship,
                       "gather": time.perf_counter() - t_gather}
    info["results_via"] = "files" if out_dir else "spark"
    info.update(stats.pop("spark", {}))
    stats["engine"] = "spark"
    stats["spark"] = info
    if limits is not None:
        limits.check()
    return table, stats


@dataclass
class _Job:
    """What the task builders of one query share."""

    plan: PhysicalPlan
    snapshots: Sequence[Any]
    intervals: Any
    counts: np.ndarray
    tr: Traits
    q: T.QueryShipment
    ex: Any
    prog: Progress | None
    info: dict[str, Any]
    n_tasks: int
    slots: int

    def describe(self, label: str) -> None:
        _describe(getattr(self.ex, "sc", None), f"replaydb {self.plan.language} [{label}], "
                                                  f"~{int(self.counts.sum()):,} events")


def _interval_tasks(job: _Job, *, single: bool) -> pa.Table:
    """Interval-parallel (or one task replaying everything): consecutive intervals grouped
    into tasks of balanced event counts."""
    intervals = job.intervals
    groups = [(0, len(intervals))] if single else group_intervals(job.counts, job.n_tasks)
    rows = []
    for i, (a, b) in enumerate(groups):
        ivs = tuple((k, intervals[k][0], intervals[k][1]) for k in range(a, b))
        shipped = tuple(ship(s, [(x, y) for _, x, y in ivs]) for s in job.snapshots)
        rows.append((i, pickle.dumps(T.IntervalTask(i, ivs, shipped))))
    job.info["tasks"] = len(rows)
    label = ("full replay in one task" if single
             else f"interval replay: {len(intervals):,} intervals in {len(rows)} tasks")
    job.describe(label)
    return _run(job.ex.interval, job.prog, label, job.q, rows)


def _scan_tasks(job: _Job) -> pa.Table:
    """Partition-parallel without a shuffle: every task reads the planned replay and keeps
    the events of the keys it owns."""
    intervals, n_tasks = job.intervals, job.n_tasks
    owner = scan_owner(job.snapshots, intervals, job.tr.partition_keys, n_tasks)
    ivs = tuple((k, a, b) for k, (a, b) in enumerate(intervals))
    shipped = tuple(ship(s, list(intervals)) for s in job.snapshots)
    rows = [(i, pickle.dumps(T.ScanTask(i, ivs, shipped, owner))) for i in range(n_tasks)]
    job.info.update(partition_read="scan", tasks=n_tasks, exact_order=job.q.exact_order,
                    result_order=_result_order(job.tr))
    label = f"partition replay by {', '.join(job.tr.partition_keys)}: {n_tasks} scan tasks"
    job.describe(label)
    return _run(job.ex.scan, job.prog, label, job.q, rows)


def _shuffle_tasks(job: _Job, n_read: int) -> pa.Table:
    """Partition-parallel through a shuffle: read tasks split balanced time ranges by key,
    one task per key group replays its events."""
    ranges = read_ranges(job.snapshots, job.intervals, n_read)
    slots_ = bijective_slots(job.n_tasks)
    rows = []
    for i, rg in enumerate(ranges):
        shipped = tuple(ship(s, [(a, b) for _, a, b in rg]) for s in job.snapshots)
        rows.append((i, pickle.dumps(T.ReadTask(i, tuple(rg), shipped, tuple(slots_)))))
    job.info.update(partition_read="shuffle", read_tasks=len(rows), tasks=job.n_tasks,
                    exact_order=job.q.exact_order, result_order=_result_order(job.tr))
    label = (f"partition replay by {', '.join(job.tr.partition_keys)}: {len(rows)} read "
             f"tasks, {job.n_tasks} key groups")
    job.describe(label)
    return _run(job.ex.partition, job.prog, label, job.q, rows, job.n_tasks)


def _result_order(tr: Traits) -> str:
    """Partition mode's result order: ``local`` (the local execution's order, reproduced from
    tags) or ``sorted`` (by the operator's documented columns; equal to local after sorting)."""
    return "local" if tr.exact_partition_order else "sorted"


def _result_dir(option: str | None, ex: Any) -> tuple[str | None, bool]:
    """``(directory for result files or None, whether this query created it)`` (see the
    module docstring's ``result_dir``)."""
    value = option or os.environ.get("REPLAYDB_SPARK_RESULT_DIR") or "auto"
    if value == "none":
        return None, False
    if value != "auto":
        os.makedirs(value, exist_ok=True)
        return tempfile.mkdtemp(prefix="replaydb-results-", dir=value), True
    sc = getattr(ex, "sc", None)
    local = sc is None or str(sc.master).startswith("local")
    if not local:
        return None, False
    return tempfile.mkdtemp(prefix="replaydb-results-"), True


def _describe(sc: Any, text: str) -> None:
    if sc is not None:
        sc.setJobDescription(text)


def _run(fn: Any, prog: Progress | None, label: str, *args: Any) -> pa.Table:
    if prog is not None:
        prog.start(label)
    try:
        return fn(*args)
    finally:
        if prog is not None:
            prog.stop()


def _arm_timeout(limits: Any, sc: Any, group: str) -> tuple[Any, threading.Event]:
    fired = threading.Event()
    if limits is None or getattr(limits, "deadline", None) is None or sc is None:
        return None, fired
    left = max(0.0, limits.deadline - time.monotonic())

    def cancel() -> None:
        fired.set()
        sc.cancelJobGroup(group)

    timer = threading.Timer(left, cancel)
    timer.daemon = True
    timer.start()
    return timer, fired


def _gather(result: pa.Table, tr: Traits, mode: str, op: Any, task_op: Any,
            runs: bool = False) -> tuple[pa.Table, dict[str, Any]]:
    """Decode the task rows, raise task errors, order, renumber, select; sum the stats."""
    kinds = result.column("kind").to_pylist()
    task_ids = result.column("task").to_pylist()
    payloads = result.column("payload").to_pylist()
    parts: list[pa.Table] = []
    keys: list[pa.Table] = []
    per_task: list[dict[str, Any]] = []
    for kind, task, payload in zip(kinds, task_ids, payloads):
        if kind == "error":
            T.raise_error(payload)
        elif kind in ("rows", "file"):
            t = from_ipc(payload) if kind == "rows" else read_result_file(payload)
            parts.append(t.append_column("__task", pa.array(np.full(t.num_rows, task,
                                                                    np.int64))))
        elif kind == "keys":
            keys.append(from_ipc(payload))
        elif kind in ("stats", "readstats"):
            import json

            per_task.append(json.loads(payload))
    stats = _sum_stats(per_task)
    if not parts:
        return op.output_schema.empty_table(), stats
    rows = pa.concat_tables(parts)
    if mode == "partition":
        order = O.exact_order(rows) if tr.exact_partition_order else \
            O.sorted_order(rows, tr, runs)
    else:
        order = O.interval_order(rows, keys, tr)
    select = None
    if tr.strip_select:
        def select(t: pa.Table) -> pa.Table:
            # the operator's own select list, applied to its full-schema output
            out = [op.apply_select(b) for b in t.to_batches()]
            return pa.Table.from_batches(out, schema=op.output_schema)
    renumbered = mode != "partition" or tr.exact_partition_order
    table = O.finish(rows, order, tr, select, renumbered)
    if table.schema != op.output_schema:
        table = table.cast(op.output_schema)
    return table, stats


def _sum_stats(per_task: list[dict[str, Any]]) -> dict[str, Any]:
    replay: dict[str, Any] = {}
    operator: dict[str, Any] = {}
    tasks = []
    for d in per_task:
        T._merge_stats(replay, d.get("replay", {}))
        for k, v in d.get("operator", {}).items():
            if k in ("peak_state", "state_size") or k.startswith("peak"):
                operator[k] = max(operator.get(k, 0), v)
            elif isinstance(v, (int, float)):
                operator[k] = operator.get(k, 0) + v
        tasks.append({"task": d["task"], "stage": d["kind"], "pid": d.get("pid"),
                      "host": d.get("host"), "events": d["events"],
                      "seconds": round(d["seconds"], 4),
                      "cpu_seconds": round(d.get("cpu_seconds", 0.0), 4),
                      "bind_seconds": round(d.get("bind_seconds", 0.0), 4)})
    return {"replay": replay, "operator": operator, "spark": {"per_task": tasks}}


def _driver_reason(plan: PhysicalPlan) -> str | None:
    """Why ``plan`` runs on the driver, or None when tasks run it."""
    src = plan.source
    if isinstance(src, TreeAggregates):
        return f"the {plan.strategy} plan computes from tree aggregates on the driver"
    if isinstance(src, IntervalScan) and src.guard is not None:
        return "the TPStream interval guard reads the stream around each interval: driver"
    return None
