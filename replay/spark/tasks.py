"""Functions that run inside Spark tasks (``mapInArrow``) to answer a query.

They are module-level so executors can import them; the driver binds their parameters with
:func:`functools.partial` (a :class:`QueryShipment`) and sends each task its own work as a row
``(index, payload)`` where the payload is a pickled :class:`IntervalTask` or :class:`ReadTask`.

Every task **builds its operator from the plan's operator spec**
(:class:`~replaydb.operators.spec.OperatorSpec`: the family, its frozen configuration, the state
cap - plain data; no query text, no operator object, compiled code or Numba state crosses the
wire, and nothing of the planner is imported on executors). Results travel back as Arrow IPC payloads in rows of
:data:`RESULT_SCHEMA` - Arrow types survive untouched (decimals, lists, dictionaries), so the
gathered tables are byte for byte what the operator produced.

Stages:

* :func:`interval_stage` - interval-parallel: replay a run of consecutive planned intervals into
  one operator (``end_interval`` between them) and return its tagged results;
* :func:`read_stage` - partition-parallel, step 1: replay a time range of the streams and split
  the events by the hash of their partition key into one group per target partition (Arrow IPC
  chunks, each event tagged with its interval, its batch of the local replay and its global
  position; chunks end at batch ends);
* :func:`partition_stage` - partition-parallel, step 2: after Spark repartitioned the chunks by
  target and sorted them by (read task, chunk), replay the partition's events - all events of its
  keys, in the order of the local replay - into one operator;
* :func:`scan_stage` - partition-parallel without a shuffle: replay every planned interval (the
  local replay's batches, read by the task itself) and push only the events of the keys the task
  owns (:mod:`.buckets`) into one operator.

Errors the project raises on purpose (:class:`~replaydb.errors.ReplayDBError`) are returned as
rows of kind ``error`` and raised again on the driver with their type and fields, instead of
failing (and retrying) the Spark task.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.errors import ReplayDBError
from replaydb.operators.spec import OperatorSpec
from replaydb.replay.replay import Replay
from replaydb.replay.spark.adapters import CARRIER
from replaydb.replay.spark.drive import (
    Collector,
    ExactOrder,
    KeyBook,
    drive,
    from_ipc,
    to_ipc,
)
from replaydb.replay.spark.keys import key_targets
from replaydb.replay.spark.reader import ShippedStream, StreamShipment
from replaydb.store.snapshot import ParquetCache

RESULT_SCHEMA = pa.schema([("task", pa.int32()), ("chunk", pa.int32()), ("kind", pa.string()),
                           ("payload", pa.binary())])
"""Rows every stage returns: ``kind`` is rows | file | keys | stats | readstats | error."""
TASK_SCHEMA = pa.schema([("index", pa.int32()), ("payload", pa.binary())])
BLOB_SCHEMA = pa.schema([("slot", pa.int32()), ("r", pa.int32()), ("j", pa.int32()),
                         ("payload", pa.binary())])
"""Rows of the read stage: events for target ``slot`` from read task ``r``, chunk ``j``
(``j = -1``: the read task's statistics, passed through by whichever partition gets them)."""
CHUNK_EVENTS = 131_072
FILES = ParquetCache()
"""Open data files of this Python worker, shared by its tasks (data files are immutable; Spark
reuses workers across tasks and queries, as a local process reuses its store's open files)."""
I64_MIN = int(np.iinfo(np.int64).min)
I64_MAX = int(np.iinfo(np.int64).max)


@dataclass(frozen=True)
class QueryShipment:
    """What every task of one query shares (picklable; see the module docstring)."""

    operator: OperatorSpec
    """The operator every task builds: the plan's, without its select list when the driver
    applies it, rejecting time carriers in partition tasks of an operator that needs them."""
    type_column: str | None
    aliases: dict[str, str]
    columns: tuple[str, ...] | None
    partition_keys: tuple[str, ...] = ()
    exact_order: bool = False
    key_report: bool = False
    time_carrier: bool = False
    """Partition mode: send every target each local batch's last event as a time carrier
    (:attr:`~replaydb.operators.traits.Traits.time_carrier`)."""
    sorted_runs: tuple[str, ...] = ()
    """Partition tasks sort their results by these integer columns (the operator's complete
    sort columns), so that the driver merges sorted runs instead of sorting."""
    result_dir: str | None = None
    """A directory the driver and every executor share: results travel as IPC files written
    there instead of through the JVM (:class:`~replaydb.replay.spark.drive.Collector`)."""


@dataclass(frozen=True)
class IntervalTask:
    """Consecutive planned intervals ``(k, t0, t1)`` (``(0, None, None)``: everything)."""

    index: int
    intervals: tuple[tuple[int, int | None, int | None], ...]
    streams: tuple[StreamShipment, ...]


@dataclass(frozen=True)
class ReadTask:
    """A time range of the replay (sub-ranges of planned intervals, ``(k, t0, t1)``) to read
    and split by key into ``len(slots)`` targets."""

    index: int
    ranges: tuple[tuple[int, int | None, int | None], ...]
    streams: tuple[StreamShipment, ...]
    slots: tuple[int, ...]
    chunk_events: int = CHUNK_EVENTS


@dataclass(frozen=True)
class ScanTask:
    """Every planned interval ``(k, t0, t1)``; the task keeps the events whose key's virtual
    slot (:func:`~replaydb.replay.spark.keys.key_targets` over ``len(owner)`` slots) has
    ``owner[slot] == index``."""

    index: int
    intervals: tuple[tuple[int, int | None, int | None], ...]
    streams: tuple[StreamShipment, ...]
    owner: np.ndarray


@dataclass
class TaskStats:
    """What one task did (summed on the driver)."""

    events: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    """CPU time of the task's process while it ran (wall ``seconds`` minus waiting for a core on
    a busy machine)."""
    bind_seconds: float = 0.0
    replay: dict[str, Any] = field(default_factory=dict)
    operator: dict[str, Any] = field(default_factory=dict)

    def finish(self, t0: float, c0: float, *, reps: Sequence[Replay] = (),
               op: Any = None) -> None:
        """Close the task's record: add the replays' statistics and the operator's counters,
        and take the wall and CPU seconds since ``t0`` / ``c0``."""
        for rep in reps:
            _merge_stats(self.replay, rep.stats.as_dict())
        if op is not None:
            self.operator = op.counters.as_dict()
        self.seconds, self.cpu_seconds = time.perf_counter() - t0, time.process_time() - c0

    def payload(self, index: int, kind: str) -> dict[str, Any]:
        return {"task": index, "kind": kind, "pid": os.getpid(), "host": socket.gethostname(),
                "events": self.events, "seconds": self.seconds,
                "cpu_seconds": self.cpu_seconds,
                "bind_seconds": self.bind_seconds, "replay": self.replay,
                "operator": self.operator}


# --------------------------------------------------------------------------- operator
def build_operator(q: QueryShipment) -> Any:
    """A fresh operator of the query, built from its spec."""
    return q.operator.build()


def _replay(streams: list[ShippedStream], q: QueryShipment,
            ivs: Sequence[tuple[int | None, int | None]]) -> Replay:
    """One replay over the intervals ``ivs`` (``None`` ends unbounded; a single
    ``(None, None)`` is everything, the only case Replay takes as None)."""
    if len(ivs) == 1 and ivs[0] == (None, None):
        bounds = None
    else:
        bounds = [(I64_MIN if a is None else a, I64_MAX if b is None else b) for a, b in ivs]
    return Replay(streams, bounds, columns=list(q.columns) if q.columns is not None else None,
                  type_column=q.type_column, aliases=q.aliases)


def _replay_batches(streams: list[ShippedStream], q: QueryShipment,
                    ivs: tuple[tuple[int, int | None, int | None], ...], reps: list[Replay]
                    ) -> Iterator[tuple[int, pa.RecordBatch]]:
    """``(interval index, batch)`` of the intervals ``ivs`` (disjoint, in order), from one
    :class:`~replaydb.replay.Replay` over all of them (the same batches as one replay per
    interval; one replay set-up instead of one per interval). ``reps`` collects the replays
    (their statistics)."""
    rep = _replay(streams, q, [(a, b) for _, a, b in ivs])
    if len(ivs) > 1 and len(rep.intervals) != len(ivs):
        # touching or empty intervals: one replay each
        for k, a, b in ivs:
            one = _replay(streams, q, [(a, b)])
            reps.append(one)
            for _, batch in one.batches():
                yield k, batch
        return
    reps.append(rep)
    for j, batch in rep.batches():
        yield ivs[j][0], batch


def _merge_stats(acc: dict[str, Any], d: dict[str, Any]) -> None:
    for k, v in d.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            acc[k] = acc.get(k, 0) + v


# --------------------------------------------------------------------------- error transport
def error_payload(exc: ReplayDBError) -> bytes:
    state = {k: v for k, v in vars(exc).items()}
    return pickle.dumps({"module": type(exc).__module__, "name": type(exc).__qualname__,
                         "message": exc.message, "state": state})


def _error_class(module: str, name: str) -> type[ReplayDBError] | None:
    """The loaded subclass of ReplayDBError (or itself) named ``module.name``: the class of
    an error a task raised was loaded on the driver too (the same code raised or built it)."""
    todo: list[type[ReplayDBError]] = [ReplayDBError]
    while todo:
        cls = todo.pop()
        if cls.__module__ == module and cls.__qualname__ == name:
            return cls
        todo.extend(cls.__subclasses__())
    return None


def raise_error(payload: bytes) -> None:
    """Raise on the driver the error a task reported (same type, message, hint, fields)."""
    d = pickle.loads(payload)
    cls = _error_class(d["module"], d["name"])
    if cls is None:
        raise ReplayDBError(d["message"])
    exc = cls.__new__(cls)
    Exception.__init__(exc, d["message"])
    exc.__dict__.update(d["state"])
    raise exc


def _rows(index: int, kind: str, payloads: list[bytes]) -> pa.RecordBatch:
    n = len(payloads)
    return pa.RecordBatch.from_arrays(
        [pa.array([index] * n, pa.int32()), pa.array(range(n), pa.int32()),
         pa.array([kind] * n, pa.string()), pa.array(payloads, pa.binary())],
        schema=RESULT_SCHEMA)


def _guarded(index: int, work: Callable[[], Iterator[pa.RecordBatch]]
             ) -> Iterator[pa.RecordBatch]:
    try:
        yield from work()
    except ReplayDBError as exc:
        yield _rows(index, "error", [error_payload(exc)])


def _task_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, bytes]]:
    for b in batches:
        idx = b.column(0).to_pylist()
        pay = b.column(1).to_pylist()
        yield from zip(idx, pay)


def by_id(batches: Iterator[pa.RecordBatch], *, stage: Callable[..., Iterator[pa.RecordBatch]],
          query: QueryShipment, rows: tuple[tuple[int, bytes], ...]
          ) -> Iterator[pa.RecordBatch]:
    """mapInArrow function over ``spark.range(len(rows))``: each id picks its task row from
    ``rows`` (shipped with the function) and runs ``stage`` on it. The task list starts in the
    JVM (no Python rows to convert), which saves a Python round trip per task."""
    table = dict(rows)

    def tasks() -> Iterator[pa.RecordBatch]:
        for b in batches:
            ids = [int(i) for i in b.column(0).to_pylist()]
            yield pa.RecordBatch.from_arrays(
                [pa.array(ids, pa.int32()), pa.array([table[i] for i in ids], pa.binary())],
                schema=TASK_SCHEMA)

    yield from stage(tasks(), query=query)


def by_partition(ids: Iterator[int], *, stage: Callable[..., Iterator[pa.RecordBatch]],
                 query: QueryShipment, rows: tuple[tuple[int, bytes], ...]
                 ) -> Iterator[tuple[int, int, str, bytes]]:
    """RDD ``mapPartitions`` function over ``parallelize(range(n), n)``: like :func:`by_id`,
    but the stage's :data:`RESULT_SCHEMA` rows come back as plain tuples (an RDD job skips the
    SQL planning and the Arrow-to-row conversions of a DataFrame job; the payloads are bytes
    either way)."""
    batches = iter([pa.RecordBatch.from_arrays([pa.array(list(ids), pa.int64())],
                                               names=["id"])])
    for b in by_id(batches, stage=stage, query=query, rows=rows):
        yield from zip(*(b.column(i).to_pylist() for i in range(b.num_columns)))


def result_table(rows: list[tuple[int, int, str, bytes]]) -> pa.Table:
    """Collected :func:`by_partition` tuples as a :data:`RESULT_SCHEMA` table."""
    cols = list(zip(*rows)) if rows else [[], [], [], []]
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(cols, RESULT_SCHEMA)],
                                schema=RESULT_SCHEMA)


# --------------------------------------------------------------------------- interval stage
def run_interval_task(q: QueryShipment, task: IntervalTask) -> Iterator[pa.RecordBatch]:
    t0, c0 = time.perf_counter(), time.process_time()
    op = build_operator(q)
    st = TaskStats(bind_seconds=time.perf_counter() - t0)
    cache = FILES
    streams = [ShippedStream(s, cache) for s in task.streams]
    out = Collector(result_dir=q.result_dir, task_index=task.index)
    book = KeyBook(q.partition_keys) if q.key_report else None
    reps: list[Replay] = []

    def source() -> Iterator[tuple[int, pa.Table]]:
        for k, batch in _replay_batches(streams, q, task.intervals, reps):
            yield k, pa.Table.from_batches([batch])

    st.events = drive(op, source(), out, task_index=task.index, book=book)
    payloads = out.take()
    st.finish(t0, c0, reps=reps, op=op)
    yield _rows(task.index, out.kind, payloads)
    if book is not None:
        yield _rows(task.index, "keys", [to_ipc(book.first_table(task.index))])
    yield _rows(task.index, "stats", [json.dumps(st.payload(task.index, "interval")).encode()])


def interval_stage(batches: Iterator[pa.RecordBatch], *, query: QueryShipment
                   ) -> Iterator[pa.RecordBatch]:
    """Stage function (through :func:`by_partition` or :func:`by_id`): one
    :class:`IntervalTask` per input row."""
    for index, payload in _task_rows(batches):
        task: IntervalTask = pickle.loads(payload)
        yield from _guarded(index, lambda t=task: run_interval_task(query, t))


# --------------------------------------------------------------------------- read stage
def run_read_task(q: QueryShipment, task: ReadTask) -> Iterator[pa.RecordBatch]:
    t0, c0 = time.perf_counter(), time.process_time()
    cache = FILES
    streams = [ShippedStream(s, cache) for s in task.streams]
    n_t = len(task.slots)
    buffers: list[list[pa.Table]] = [[] for _ in range(n_t)]
    sizes = [0] * n_t
    chunk_no = [0] * n_t
    st = TaskStats()
    pos = 0

    def blob(target: int) -> pa.RecordBatch:
        tbl = pa.concat_tables(buffers[target])
        buffers[target], sizes[target] = [], 0
        chunk_no[target] += 1
        return pa.RecordBatch.from_arrays(
            [pa.array([task.slots[target]], pa.int32()), pa.array([task.index], pa.int32()),
             pa.array([chunk_no[target] - 1], pa.int32()), pa.array([to_ipc(tbl)], pa.binary())],
            schema=BLOB_SCHEMA)

    n_batches = 0
    for k, a, b in task.ranges:
        rep = _replay(streams, q, [(a, b)])
        for _, batch in rep.batches():
            tbl = pa.Table.from_batches([batch])
            n = tbl.num_rows
            tgt = key_targets(tbl, q.partition_keys, n_t)
            tbl = tbl.append_column("__k", pa.array(np.full(n, k, np.int64)))
            tbl = tbl.append_column("__b", pa.array(np.full(n, n_batches, np.int64)))
            n_batches += 1
            tbl = tbl.append_column("__r", pa.array(np.full(n, task.index, np.int64)))
            tbl = tbl.append_column("__l", pa.array(np.arange(pos, pos + n, dtype=np.int64)))
            pos += n
            carrier = None
            if q.time_carrier:
                tbl = tbl.append_column(CARRIER, pa.array(np.zeros(n, np.int8)))
                carrier = tbl.slice(n - 1, 1).set_column(
                    tbl.num_columns - 1, CARRIER, pa.array(np.ones(1, np.int8)))
            order = np.argsort(tgt, kind="stable")
            counts = np.bincount(tgt, minlength=n_t)
            part = tbl.take(pa.array(order))
            start = 0
            for target, c in enumerate(counts.tolist()):
                if c or carrier is not None:
                    piece = part.slice(start, c)
                    if carrier is not None:  # one record batch: one push, as locally
                        piece = pa.concat_tables([piece, carrier]).combine_chunks()
                    buffers[target].append(piece)
                    sizes[target] += c
                    start += c
                    if sizes[target] >= task.chunk_events:
                        yield blob(target)
        _merge_stats(st.replay, rep.stats.as_dict())
    for target in range(n_t):
        if buffers[target]:
            yield blob(target)
    st.events = pos
    st.finish(t0, c0)
    stats = json.dumps(st.payload(task.index, "read")).encode()
    yield pa.RecordBatch.from_arrays(
        [pa.array([task.slots[0]], pa.int32()), pa.array([task.index], pa.int32()),
         pa.array([-1], pa.int32()), pa.array([stats], pa.binary())], schema=BLOB_SCHEMA)


def read_stage(batches: Iterator[pa.RecordBatch], *, query: QueryShipment
               ) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: one :class:`ReadTask` per input row; yields :data:`BLOB_SCHEMA`.

    A ReplayDBError while reading travels as a statistics row carrying the error."""
    for index, payload in _task_rows(batches):
        task: ReadTask = pickle.loads(payload)
        try:
            yield from run_read_task(query, task)
        except ReplayDBError as exc:
            yield pa.RecordBatch.from_arrays(
                [pa.array([task.slots[0]], pa.int32()), pa.array([index], pa.int32()),
                 pa.array([-2], pa.int32()), pa.array([error_payload(exc)], pa.binary())],
                schema=BLOB_SCHEMA)


# --------------------------------------------------------------------------- scan stage
def run_scan_task(q: QueryShipment, task: ScanTask) -> Iterator[pa.RecordBatch]:
    """Replay all planned intervals; push each local batch restricted to the owned keys.

    The operator sees exactly what a partition task of the shuffle path sees - the local
    replay's batches restricted to its keys, ``end_interval`` at every boundary, time carriers
    when the operator needs them, positions in the whole replay for exact order - without any
    event leaving the task. Cost: the whole planned read (the key column hashed, O(n)) plus the
    operator work of the owned events only."""
    t0, c0 = time.perf_counter(), time.process_time()
    op = build_operator(q)
    st = TaskStats(bind_seconds=time.perf_counter() - t0)
    cache = FILES
    streams = [ShippedStream(s, cache) for s in task.streams]
    out = Collector(result_dir=q.result_dir, task_index=task.index, sort_columns=q.sorted_runs)
    exact = ExactOrder() if q.exact_order else None
    owner = task.owner
    everything = bool(np.all(owner == task.index))
    reps: list[Replay] = []
    carriers = [0]

    def source() -> Iterator[tuple[int, pa.Table]]:
        pos = 0
        for k, batch in _replay_batches(streams, q, task.intervals, reps):
            tbl = pa.Table.from_batches([batch])
            n = tbl.num_rows
            if everything:
                keep = None
                piece = tbl
            else:
                mask = owner[key_targets(tbl, q.partition_keys, len(owner))] == task.index
                keep = np.flatnonzero(mask)
                # a boolean filter copies far faster than a take of the same rows
                piece = tbl.filter(pa.array(mask)) if len(keep) < n else tbl
            if exact is not None:
                where = np.arange(pos, pos + n, dtype=np.int64) if keep is None \
                    else keep.astype(np.int64) + pos
                piece = piece.append_column("__r", pa.array(np.zeros(len(where), np.int64)))
                piece = piece.append_column("__l", pa.array(where))
            pos += n
            if q.time_carrier:
                m = piece.num_rows
                carrier = tbl.slice(n - 1, 1)
                if exact is not None:
                    carrier = carrier.append_column("__r", pa.array([0], pa.int64())
                                                    ).append_column("__l", pa.array(
                                                        [pos - 1], pa.int64()))
                piece = piece.append_column(CARRIER, pa.array(np.zeros(m, np.int8)))
                carrier = carrier.append_column(CARRIER, pa.array(np.ones(1, np.int8)))
                # one record batch: one push, as locally
                piece = pa.concat_tables([piece, carrier]).combine_chunks()
                carriers[0] += 1
            elif piece.num_rows == 0:
                continue
            yield k, piece

    st.events = drive(op, source(), out, task_index=task.index, exact=exact,
                      positions=exact is not None) - carriers[0]
    payloads = out.take()
    st.finish(t0, c0, reps=reps, op=op)
    yield _rows(task.index, out.kind, payloads)
    yield _rows(task.index, "stats", [json.dumps(st.payload(task.index, "scan")).encode()])


def scan_stage(batches: Iterator[pa.RecordBatch], *, query: QueryShipment
               ) -> Iterator[pa.RecordBatch]:
    """Stage function (through :func:`by_partition` or :func:`by_id`): one :class:`ScanTask`
    per input row."""
    for index, payload in _task_rows(batches):
        task: ScanTask = pickle.loads(payload)
        yield from _guarded(index, lambda t=task: run_scan_task(query, t))


# --------------------------------------------------------------------------- partition stage
def run_partition_task(q: QueryShipment, index: int, rows: Iterator[tuple[int, int, bytes]]
                       ) -> Iterator[pa.RecordBatch]:
    """Replay one target partition's events (rows sorted by read task and chunk)."""
    t0, c0 = time.perf_counter(), time.process_time()
    op = build_operator(q)
    st = TaskStats(bind_seconds=time.perf_counter() - t0)
    out = Collector(result_dir=q.result_dir, task_index=index, sort_columns=q.sorted_runs)
    passthrough: list[tuple[str, bytes]] = []
    exact = ExactOrder() if q.exact_order else None
    carriers = [0]

    def source() -> Iterator[tuple[int, pa.Table]]:
        for _r, j, payload in rows:
            if j == -1:
                passthrough.append(("readstats", payload))
                continue
            if j == -2:
                passthrough.append(("error", payload))
                continue
            tbl = from_ipc(payload)
            if q.time_carrier:
                carriers[0] += int(pc.sum(tbl.column(CARRIER)).as_py() or 0)
            ks = tbl.column("__k").to_numpy()
            bs = tbl.column("__b").to_numpy()
            # one push per batch of the local replay (restricted to this partition's keys)
            cut = np.flatnonzero(bs[1:] != bs[:-1]) + 1
            bounds = [0, *cut.tolist(), tbl.num_rows]
            for s, e in zip(bounds[:-1], bounds[1:]):
                piece = tbl.slice(s, e - s)
                if piece.column(0).num_chunks > 1:  # push the local batch in one piece
                    piece = piece.combine_chunks()
                yield int(ks[s]), piece

    st.events = drive(op, source(), out, task_index=index, exact=exact, positions=True)
    st.events -= carriers[0]
    payloads = out.take()
    st.finish(t0, c0, op=op)
    yield _rows(index, out.kind, payloads)
    for kind, payload in passthrough:
        yield _rows(index, kind, [payload])
    if st.events:
        yield _rows(index, "stats", [json.dumps(st.payload(index, "partition")).encode()])


def partition_stage(batches: Iterator[pa.RecordBatch], *, query: QueryShipment
                    ) -> Iterator[pa.RecordBatch]:
    """mapInArrow function over one shuffled, sorted partition of :data:`BLOB_SCHEMA` rows."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    index = ctx.partitionId() if ctx is not None else 0
    yield from partition_rows(batches, query=query, index=index)


def partition_rows(batches: Iterator[pa.RecordBatch], *, query: QueryShipment, index: int
                   ) -> Iterator[pa.RecordBatch]:
    def rows() -> Iterator[tuple[int, int, bytes]]:
        for b in batches:
            r = b.column(1).to_pylist()
            j = b.column(2).to_pylist()
            p = b.column(3).to_pylist()
            yield from zip(r, j, p)

    yield from _guarded(index, lambda: run_partition_task(query, index, rows()))
