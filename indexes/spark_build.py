"""Building index runs in parallel (Spark tasks) and committing them in one Delta commit.

Pieces (usable by any job, e.g. the ingestion job with ``--index``):

* :func:`write_run` - inside a task: sort an Arrow table of (key, seq, t) and write it as one run
  file into the index folder; returns the AddAction fields (a dict: path, size,
  partition_values {}, modification_time, data_change, stats).
* :func:`run_writer` - a function for ``DataFrame.mapInArrow(fn, RUN_ADD_SCHEMA)``: each task
  writes the rows of its partition as one run file. ``same_run=True`` (key-range partitioned
  input): all tasks write parts of ONE run (part = partition id, so parts ascend in key order);
  ``same_run=False`` (e.g. time-partitioned ingestion): every task writes its own level-0 run
  (run id = ``run_id`` + partition id).
* :func:`next_run_id` (driver, before the job) and :func:`commit_runs` (driver, after it): one
  commit for all runs of a job; it validates every file's footer, the run ids (newer than every
  committed run) and the part order, and creates the index table if needed.
* :func:`build_index_spark` - back-fill: read a stream's Parquet files with Spark, range
  partition by (key, seq), write the parts of one run in parallel, commit once.

Spark's Python workers must import ``replaydb``: run them with the interpreter it is installed in
(``spark.pyspark.python``). The index folder must be reachable from the executors (a local
path in local mode, a shared mount otherwise), except for a stream on an object store on a
cluster, whose tasks upload the runs (:class:`RemoteEvents`). A job that fails before
``commit_runs`` leaves only unreferenced files.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.errors import UsageError
from replaydb.indexes import deltalog
from replaydb.indexes.entries import check_key_type, normalize_entries
from replaydb.indexes.levels import group_runs
from replaydb.indexes.options import LSMOptions
from replaydb.indexes.runfile import load_run_meta, write_run_file
from replaydb.indexes.sorting import sort_entries
from replaydb.store.taskio import StreamTarget, TaskOutputs, objects_frame

RUN_ADD_SCHEMA = (
    "path string, size long, partition_values string, modification_time long, "
    "data_change boolean, stats string"
)
"""Spark DDL schema of the rows :func:`run_writer` yields (partition_values as JSON '{}')."""

_ADD_ARROW_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("partition_values", pa.string()),
        ("modification_time", pa.int64()),
        ("data_change", pa.bool_()),
        ("stats", pa.string()),
    ]
)

DEFAULT_FILE_ENTRIES = 1 << 22
"""Entries per part file of a back-filled run when ``options.target_file_entries`` is 0."""


def _as_table(entries: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch]) -> pa.Table | None:
    if isinstance(entries, pa.Table):
        return entries
    if isinstance(entries, pa.RecordBatch):
        return pa.Table.from_batches([entries])
    batches = list(entries)
    if not batches:
        return None
    return pa.Table.from_batches(batches)


def write_run(
    entries: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch],
    index_path: str,
    *,
    key_type: str,
    level: int,
    run_id: int,
    part: int = 0,
    options: LSMOptions | None = None,
) -> dict[str, Any] | None:
    """Sort (key, seq, t) rows and write them as one run file; returns AddAction fields.

    Returns None for no rows (after dropping null/NaN keys). O(n) radix sort + Parquet write.
    """
    check_key_type(key_type)
    table = _as_table(entries)
    if table is None or table.num_rows == 0:
        return None
    for c in ("key", "seq", "t"):
        if c not in table.column_names:
            raise UsageError(f"write_run needs columns key, seq, t; missing {c!r}")
    ent = normalize_entries(key_type, table.column("key"), table.column("seq"), table.column("t"))
    if not len(ent):
        return None
    ent = sort_entries(ent)
    os.makedirs(index_path, exist_ok=True)
    _, add = write_run_file(
        index_path,
        ent,
        key_type=key_type,
        level=level,
        id_lo=run_id,
        id_hi=run_id,
        part=part,
        options=options or LSMOptions(),
    )
    return add


def run_writer(
    index_path: str,
    key_type: str,
    *,
    level: int,
    run_id: int,
    same_run: bool,
    options: LSMOptions | None = None,
    target: StreamTarget | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function writing each partition as one run file (see module doc);
    with ``target``, the file is written in the task's own directory and uploaded to the
    index folder's place on the object store before it is reported (a cluster's executors do
    not see the driver's disk; :class:`~replaydb.store.taskio.TaskOutputs`)."""
    check_key_type(key_type)
    opts = options or LSMOptions()

    def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        rid, part = (run_id, pid) if same_run else (run_id + pid, 0)
        with TaskOutputs(target) as outputs:
            add = write_run(batches, outputs.path(index_path), key_type=key_type, level=level,
                            run_id=rid, part=part, options=opts)
        if add is not None:
            row = dict(add, partition_values="{}")
            yield pa.RecordBatch.from_pylist([row], schema=_ADD_ARROW_SCHEMA)

    return write_partition


def next_run_id(index_path: str) -> int:
    """The run id a job may start numbering its runs from (1 for a new index)."""
    if not deltalog.is_index_table(index_path):
        return 1
    dt = deltalog.load(index_path)
    metas = [load_run_meta(index_path, f.name, f.size) for f in deltalog.live_files(dt)]
    return max((m.id_hi for m in metas), default=0) + 1


def _add_dict(a: Any) -> dict[str, Any]:
    d = a.asDict() if hasattr(a, "asDict") else dict(a)
    d["partition_values"] = {}
    return d


def commit_runs(
    index_path: str,
    adds: list[Any],
    *,
    key_type: str | None = None,
    options: LSMOptions | None = None,
    commit_metadata: dict[str, Any] | None = None,
) -> int:
    """Commit run files written by :func:`write_run` / :func:`run_writer` in ONE Delta commit.

    Creates the index (with ``key_type`` and ``options``) when it does not exist yet; then the
    runs form version 0. Validates: footers readable and of the index's key type; run ids newer
    than every committed run; the parts of a run ascending in (key, seq); a run on a level >= 1
    only when it is the index's only run. Returns the new version.
    """
    adds = [_add_dict(a) for a in adds]
    exists = deltalog.is_index_table(index_path)
    if exists:
        dt = deltalog.load(index_path)
        kt, stored = deltalog.describe(dt)
        if key_type is not None and key_type != kt:
            raise UsageError(f"index {index_path} has key type {kt}, runs were built as {key_type}")
        key_type = kt
        existing = [load_run_meta(index_path, f.name, f.size) for f in deltalog.live_files(dt)]
    else:
        if key_type is None:
            raise UsageError("commit_runs: key_type is needed to create a new index")
        check_key_type(key_type)
        existing = []
    metas = [load_run_meta(index_path, a["path"], int(a["size"])) for a in adds]
    newest = max((m.id_hi for m in existing), default=0)
    for m in metas:
        if m.key_type != key_type:
            raise UsageError(f"run file {m.name} has key type {m.key_type}, index {key_type}")
        if m.id_lo <= newest:
            raise UsageError(
                f"run file {m.name}: run id {m.id_lo} is not newer than the committed runs "
                f"(newest {newest}); take ids from next_run_id() right before the job"
            )
    new_runs = group_runs(metas)
    for run in new_runs:
        prev = None
        for f in run.files:
            if not f.n:
                continue
            first = (_py(f.key_min), f.first_seq)
            if prev is not None and not prev < first:
                raise UsageError(f"run {run.id_lo}: part {f.part} overlaps the part before it")
            prev = (_py(f.key_max), f.last_seq)
        if run.level >= 1 and (existing or len(new_runs) > 1):
            raise UsageError(
                f"run {run.id_lo} on level {run.level}: only a sole run may skip level 0"
            )
    if not exists:
        deltalog.create_table(
            index_path, key_type, options or LSMOptions(), adds, commit_metadata=commit_metadata
        )
        return 0
    return deltalog.commit(dt, key_type, adds, [], "bulk", commit_metadata)


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


_SPARK_CASTS = {"int64": "long", "float64": "double", "string": "string"}


def spark_key_type(data_type: Any) -> str:
    """Index key type for a Spark SQL data type (UsageError if not indexable)."""
    from pyspark.sql import types as T

    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType)):
        return "int64"
    if isinstance(data_type, (T.FloatType, T.DoubleType, T.DecimalType)):
        return "float64"
    if isinstance(data_type, T.StringType):
        return "string"
    raise UsageError(f"cannot index a column of type {data_type.simpleString()}")


def _local(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


@dataclass(frozen=True)
class RemoteEvents:
    """A stream on an object store as :func:`build_index_spark` reads it: how tasks reach the
    stream (``target``), the Arrow schema of the columns read (key column, ``seq``, ``t``), its
    event count, and whether the tasks upload the runs they write (a cluster's executors) or
    write them into the driver's mirror of the index folder (a local master's)."""

    target: StreamTarget
    schema: pa.Schema
    rows: int
    through_store: bool


def build_index_spark(
    spark: Any,
    events_files: list[str],
    column: str,
    index_path: str,
    *,
    key_type: str | None = None,
    seq_column: str = "seq",
    t_column: str = "t",
    num_partitions: int | None = None,
    options: LSMOptions | None = None,
    commit_metadata: dict[str, Any] | None = None,
    remote: RemoteEvents | None = None,
) -> int:
    """Back-fill the index of ``column`` from a stream's Parquet files with Spark; one commit.

    ``events_files``: the stream's data files (e.g. the events table's ``file_uris()``). The
    index must not exist or be empty. Rows are range partitioned by (key, seq) into
    ``num_partitions`` (default: one per ``target_file_entries`` or 4M entries, at least the
    default parallelism when there are enough rows) and every task writes one part of a single
    run on the level that fits the total. Returns the index version.

    ``remote``: the stream lives on an object store, which Spark's JVM does not read: its data
    files (``events_files`` are then their names relative to the store root) are read by Python
    tasks through the store's URI, and with ``remote.through_store`` the runs are uploaded by
    the tasks that write them (:class:`RemoteEvents`).
    """
    from pyspark.sql import functions as F

    if not events_files:
        raise UsageError("build_index_spark: no event files given")
    options = options or LSMOptions()
    df = (spark.read.parquet(*events_files) if remote is None
          else objects_frame(spark, remote.target, list(events_files), remote.schema))
    if column not in df.columns:
        raise UsageError(f"stream has no column {column!r}; columns: {df.columns}")
    kt = key_type or spark_key_type(df.schema[column].dataType)
    check_key_type(kt)
    if deltalog.is_index_table(index_path):
        dt = deltalog.load(index_path)
        existing_kt, _ = deltalog.describe(dt)
        if existing_kt != kt:
            raise UsageError(f"index {index_path} has key type {existing_kt}, column gives {kt}")
        if deltalog.live_files(dt):
            raise UsageError(f"index {index_path} is not empty; back-fill needs an empty index")
    key = F.col(column).cast(_SPARK_CASTS[kt])
    sel = df.select(
        key.alias("key"),
        F.col(seq_column).cast("long").alias("seq"),
        F.col(t_column).cast("long").alias("t"),
    ).where(F.col("key").isNotNull())
    if kt == "float64":
        sel = sel.where(~F.isnan(F.col("key")))
    total = (remote.rows if remote is not None
             else sum(pq.read_metadata(_local(f)).num_rows for f in events_files))
    per_file = options.target_file_entries or DEFAULT_FILE_ENTRIES
    if num_partitions is None:
        num_partitions = max(1, math.ceil(total / per_file))
        par = int(spark.sparkContext.defaultParallelism)
        if total >= par * options.row_group_entries:
            num_partitions = max(num_partitions, par)
    level = options.fit_level(total)
    run_id = next_run_id(index_path)
    os.makedirs(index_path, exist_ok=True)
    fn = run_writer(index_path, kt, level=level, run_id=run_id, same_run=True, options=options,
                    target=remote.target if remote is not None and remote.through_store else None)
    rows = (
        sel.repartitionByRange(int(num_partitions), "key", "seq")
        .mapInArrow(fn, RUN_ADD_SCHEMA)
        .collect()
    )
    if not rows:
        if not deltalog.is_index_table(index_path):
            deltalog.create_table(index_path, kt, options, commit_metadata=commit_metadata)
        return int(deltalog.load(index_path).version())
    return commit_runs(
        index_path, rows, key_type=kt, options=options, commit_metadata=commit_metadata
    )
