"""``replaydb ingest``: the Spark job that loads raw event files into a stream.

Stages (each a Spark job; the driver only ever holds metadata):

1. **parse** - read tasks (files or Parquet row-group ranges) are read with pyarrow inside Spark
   tasks and normalized with the same rules as the append path
   (:mod:`replaydb.store.normalize`): every row is converted or marked bad with its source file,
   row number and reason. Each task writes its good and bad rows to its own staging Parquet
   files (``<stream>/_staging/<job>/``) and returns one summary row: counts, time range, its
   first bad row and a sample of its times. The events reach the JVM later through Spark's
   native Parquet reader, never as Arrow batches converted row by row, and nothing is cached.
   With ``strict`` the job stops at the first bad row, naming it, before anything is written.
2. **late events** - rows older than the stream's end minus its lateness bound are quarantined
   (``late event``) or, with ``strict``, fail the job. Rows within the bound are merged with the
   stored tail (read by Spark from the Delta files) so the stream stays in (t, arrival) order;
   on equal times stored events come first, then new rows in (source, row) order.
3. **sort** - the driver cuts time into buckets of about ``rows_per_partition`` events from the
   tasks' samples (:func:`time_bounds`); one JVM aggregation counts each bucket exactly, so
   ``seq`` can continue the stream's last seq; then Spark shuffles the rows so that every
   bucket lands whole in one partition (range partitioning by time with boundaries known in
   advance: no sampling job, no collect, no cache) and sorts each partition.
4. **write** - every partition writes its data files (one Parquet row group per TAB+-tree leaf)
   with their leaf aggregates and Delta statistics, and one sorted run per bucket and requested
   secondary index; bad rows are written to the quarantine table by Spark tasks too.
5. **commit** - the driver merges the leaf entries into the tree and commits: index and
   quarantine tables first, then the events table with the manifest and the job's transaction
   id. Re-running the same ingest (same sources, same options, or the same ``batch_id``) finds
   the id in the Delta log and does nothing: exactly once. A failure or kill before the commit
   leaves the stream as it was; unreferenced files (and the staging folder of a killed job) are
   removed by ``replaydb vacuum``; a job that ends, well or not, removes its staging folder.

Delta commits go through delta-rs (``deltalake``) on the driver, whatever the Spark master; the
executors write the Parquet data files the commit adds.

**Through the store.** On a local master the executors run on the driver's machine: they write
the data files, index runs, quarantine files and staged rows into the stream's directory (for a
store on an object store, the driver's mirror of it, which the commit publishes), and Spark's
JVM reads the staged rows back. On a cluster the executors do not see the driver's disk, and
the JVM reads no object store without extra jars; so for a store on an object store and a master
that is not local, every task writes into a temporary directory of its own and uploads what it
wrote before it reports it (:class:`~replaydb.store.taskio.TaskOutputs`), the staged rows go to
the object store and are read back by Python tasks (:func:`~replaydb.store.taskio.objects_frame`),
and the stored tail a late batch rewrites is read by the driver. The cluster needs the store's
URI and credentials, no shared directory.
"""

from __future__ import annotations

import functools
import json
import shutil
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from replaydb.errors import DataError, LateEventError, UsageError
from replaydb.ingest import tasks as T
from replaydb.ingest.buckets import bucket_expr, partition_count, partition_labels, time_bounds
from replaydb.ingest.sourcefiles import SourceOptions
from replaydb.ingest.sources import (
    batch_fingerprint,
    expand_sources,
    infer_schema,
    plan_tasks,
)
from replaydb.store.failpoints import failpoint
from replaydb.store.manifest import FileInfo, SideTableRef
from replaydb.store.quarantine import Quarantine
from replaydb.store.schema import StreamSchema
from replaydb.store.taskio import StreamTarget, objects_frame

DEFAULT_ROWS_PER_PARTITION = 2_000_000
STAGING = "_staging"
"""Folder of a stream where running ingests stage their parsed rows (removed when the job ends;
``replaydb vacuum`` removes what a killed job left)."""


@dataclass
class IngestResult:
    stream: str
    version: int | None
    batch_id: str
    events: int = 0
    rows_read: int = 0
    quarantined: int = 0
    late: int = 0
    rewritten: int = 0
    files: int = 0
    t_min: int | None = None
    t_max: int | None = None
    seconds: float = 0.0
    skipped: bool = False
    indexes: list[str] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=dict)
    index_seconds: dict[str, float] = field(default_factory=dict)
    """Per index: CPU seconds its runs took in the write tasks (summed over tasks) plus the
    driver's wall seconds to prepare and commit it."""

    @property
    def throughput(self) -> float:
        return self.rows_read / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["events_per_second"] = round(self.throughput)
        return d


def _say(msg: str, quiet: bool) -> None:
    if not quiet and sys.stderr.isatty():
        print(f"[ingest] {msg}", file=sys.stderr, flush=True)


def ingest(
    store: Any,
    stream: str,
    sources: list[str] | Any,
    *,
    time_column: str = "t",
    time_unit: str | None = "ms",
    unit_declared: bool = True,
    source_unit: str | None = None,
    time_format: str | None = None,
    fmt: str = "auto",
    schema: StreamSchema | None = None,
    index: list[str] | tuple[str, ...] = (),
    strict: bool = False,
    batch_id: str | None = None,
    lateness: int = 0,
    type_column: str | None = None,
    upper_column: str | None = None,
    pmf_column: str | None = None,
    master: str | None = None,
    extra: str = "error",
    duplicates: str = "keep",
    rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION,
    spark: Any = None,
    quiet: bool = False,
    through_store: bool | None = None,
    source_options: dict[str, str] | None = None,
) -> IngestResult:
    """Run the ingestion job (see the module docstring); ``sources`` are paths/globs or a Spark
    DataFrame. Creates the stream if it does not exist (``time_unit``, ``lateness``,
    ``type_column`` and ``schema`` apply then; ``unit_declared`` False: the user named no unit,
    so a numeric time column's values stay numbers in results, ``StreamSchema.time_instants``).
    ``through_store``: whether the tasks of a store on an object store write and stage through
    the object store itself rather than the driver's mirror of it (see the module docstring);
    default: when the Spark master is not local (a cluster's executors do not see the driver's
    disk).
    ``source_options``: storage options for sources named by object-store URIs
    (:mod:`.sourcefiles`; default: the store's own for sources on its kind of store, else the
    environment)."""
    from pyspark.sql import functions as F

    from replaydb.spark import get_spark

    store._require_writable()  # before anything starts (Spark takes seconds to)
    start = time.perf_counter()
    stages: dict[str, float] = {}
    is_frame = not isinstance(sources, list | tuple | str)
    files: list[tuple[str, str]] = []
    so = SourceOptions()
    if not is_frame:
        names = [sources] if isinstance(sources, str) else list(sources)
        so = SourceOptions.resolve(names, source_options, store.location)
        files = expand_sources(names, fmt, so)
        if not files:
            raise UsageError("no source files")
    options = {"time_column": time_column, "source_unit": source_unit,
               "time_format": time_format, "extra": extra, "duplicates": duplicates}
    if batch_id is None:
        if is_frame:
            raise UsageError("ingesting a DataFrame needs an explicit batch_id (exactly-once)")
        batch_id = batch_fingerprint(files, {**options, "stream": stream}, so)

    if through_store and store.location is None:
        raise UsageError(f"{store.uri}: through_store needs a store on an object store")
    created = False
    if not store.has_stream(stream):
        if schema is None:
            src_schema = sources.schema if is_frame else None
            if is_frame:
                from pyspark.sql.pandas.types import to_arrow_schema

                arrow_src = to_arrow_schema(src_schema)
            else:
                arrow_src = infer_schema(files, so)
            schema = StreamSchema.infer(arrow_src, time_column=time_column, time_unit=time_unit,
                                        unit_declared=unit_declared, lateness=lateness, type_column=type_column,
                                        upper_column=upper_column, pmf_column=pmf_column)
        store.create_stream(stream, schema)
        created = True
    try:
        if files:
            check_source_schemas(files, store.stream(stream).schema, options, so)
        spark = spark or get_spark(master, app_name=f"replaydb ingest {stream}", quiet=quiet)
        sc = spark.sparkContext
        sc.setJobGroup(f"replaydb-ingest-{stream}", f"replaydb ingest into {stream}")
        with store.writer(stream, timeout=60) as w:
            target = _stream_target(w, spark, through_store)
            return _run(store, w, stream, sources, files, is_frame, options, index, strict,
                        batch_id, rows_per_partition, spark, F, start, stages,
                        quiet, target, so)
    except BaseException:
        if created and store.has_stream(stream) and store.stream(stream).n_events == 0:
            store.drop_stream(stream)
        raise


def _stream_target(w: Any, spark: Any, through_store: bool | None) -> StreamTarget | None:
    """How the job's tasks reach the stream ``w`` writes: None for its directory (a local
    store, or the driver's mirror of a remote one when the executors share the driver's
    disk), else through the object store (see ``through_store`` in :func:`ingest`)."""
    from replaydb.spark import is_local_master

    if w.store.location is None:
        return None
    if through_store is None:
        through_store = not is_local_master(spark.sparkContext.master)
    return StreamTarget.of_dir(w.dir) if through_store else None


def _run(store: Any, w: Any, stream: str, sources: Any, files: list[tuple[str, str]],
         is_frame: bool, options: dict, index: Any, strict: bool, batch_id: str,
         rows_per_partition: int, spark: Any, F: Any, start: float,
         stages: dict[str, float], quiet: bool, target: StreamTarget | None,
         so: SourceOptions) -> IngestResult:
    from pyspark.sql.pandas.types import from_arrow_schema

    from replaydb.store import deltaio

    snap = w.snap
    schema: StreamSchema = snap.schema
    result = IngestResult(stream, snap.version, batch_id)
    if deltaio.applied(w.events_dir, batch_id):
        result.skipped = True
        result.seconds = time.perf_counter() - start
        _say(f"batch {batch_id} is already in the stream; nothing to do", quiet)
        return result
    schema_json = json.dumps(schema.to_json())
    from replaydb.ingest import indexing

    index = indexing.columns_to_index(snap, list(index))
    for col in index:
        if not schema.has(col) or col in ("t", "seq"):
            raise UsageError(f"cannot index {col!r}: not an attribute of stream {stream!r}")

    # ---- 1. parse (into staging files)
    t0 = time.perf_counter()
    stage_dir = str(w.dir / STAGING / uuid.uuid4().hex)
    stage_spark = from_arrow_schema(T.STAGE_SCHEMA)
    if is_frame:
        df = sources.withColumn("_row", F.monotonically_increasing_id())
        staged = df.mapInArrow(functools.partial(T.parse_frame, schema_json=schema_json,
                                                 options=options, stage_dir=stage_dir,
                                                 target=target),
                               stage_spark)
    else:
        read_tasks = plan_tasks(files, so)
        _say(f"reading {len(files)} source file(s) in {len(read_tasks)} task(s)", quiet)
        tdf = spark.createDataFrame([t.as_dict() for t in read_tasks],
                                    "source int, path string, fmt string, rg_start int, "
                                    "rg_stop int, row_offset long")
        tdf = tdf.repartition(max(1, len(read_tasks)))
        staged = tdf.mapInArrow(functools.partial(
            T.parse_tasks, schema_json=schema_json, options=options, stage_dir=stage_dir,
            target=target, sources=so), stage_spark)
    try:
        return _after_parse(store, w, stream, staged.toArrow().to_pylist(), files, index,
                            strict, batch_id, rows_per_partition, spark, F, start, stages, t0,
                            result, schema, schema_json, quiet, target)
    finally:
        shutil.rmtree(stage_dir, ignore_errors=True)
        if target is not None:
            target.location().delete_tree(target.rel_of(stage_dir))


def _after_parse(store: Any, w: Any, stream: str, summary: list[dict], files: list,
                 index: list[str], strict: bool, batch_id: str, rows_per_partition: int,
                 spark: Any, F: Any, start: float, stages: dict[str, float], t0: float,
                 result: IngestResult, schema: StreamSchema, schema_json: str,
                 quiet: bool, target: StreamTarget | None) -> IngestResult:
    """Stages 2-5, on the staged parse output (one summary row per parse task)."""
    from replaydb.ingest import indexing

    snap = w.snap
    n_good = sum(r["n_good"] for r in summary)
    n_bad = sum(r["n_bad"] for r in summary)
    lo = min((r["t_min"] for r in summary if r["n_good"]), default=None)
    hi = max((r["t_max"] for r in summary if r["n_good"]), default=None)
    good_paths = [r["good"] for r in summary if r["n_good"]]
    bad_paths = [r["bad"] for r in summary if r["n_bad"]]
    result.rows_read = n_good + n_bad
    stages["parse"] = time.perf_counter() - t0
    _say(f"parsed {result.rows_read:,} rows ({n_bad:,} bad)", quiet)
    source_names = [p for p, _ in files]
    if strict and n_bad:
        first = min((r for r in summary if r["n_bad"]),
                    key=lambda r: (r["first_src"], r["first_row"]))
        src = source_names[first["first_src"]] if first["first_src"] >= 0 else "dataframe"
        raise DataError(first["first_reason"], row=first["first_row"], column=first["first_col"],
                        source=src,
                        hint="fix the source, or ingest without --strict to quarantine bad rows")
    good = _staged(spark, target, good_paths, T.good_schema(schema))
    bad = _staged(spark, target, bad_paths, T.parsed_schema(schema))

    # ---- 2. late events
    n_stored = snap.n_events
    b = _Batch(good, bad, n_good, n_bad, lo, f0=n_stored)
    _late_events(b, w, schema, strict, source_names, spark, F)
    n_good, n_bad, lo = b.n_good, b.n_bad, b.lo
    f0 = b.f0
    result.late = b.n_late
    result.rewritten = n_stored - f0
    result.quarantined = n_bad

    # ---- 3. sort, 4. write
    total = n_good + result.rewritten
    out = _Written(index_runs={c: [] for c in index}, index_s=dict.fromkeys(index, 0.0))
    if total:
        _sort_and_write(out, b, total, w, summary, index, rows_per_partition, spark, F, stages,
                        schema, schema_json, quiet, target)

    # ---- quarantine rows
    side_versions: dict[str, int] = {}
    new_refs: list[SideTableRef] = []
    if n_bad:
        _quarantine(w, b.bad, n_bad, batch_id, source_names, side_versions, new_refs, target)

    # ---- 5. commit
    t0 = time.perf_counter()
    index_s = out.index_s
    for job in out.index_jobs if total else []:
        c0 = time.perf_counter()
        ref = indexing.commit(job, out.index_runs[job["column"]])
        index_s[job["column"]] += time.perf_counter() - c0
        side_versions[ref.name] = ref.version
        if w.manifest.side_table(ref.name) is None:
            new_refs.append(ref)
    failpoint("ingest.before_commit")
    infos, leaves = w.assign_file_ids([_Prepared(f, lv) for f, lv in
                                       zip(out.files, out.leaves)])
    removed = [f.id for f in snap.files.values() if f.seq_min >= f0] if total else []
    res = w.commit(f0, infos, leaves, removed, stats=out.stats, side_versions=side_versions,
                   new_sides=new_refs, batch_id=batch_id, operation="ingest")
    stages["commit"] = time.perf_counter() - t0
    result.version = res.version
    result.events = n_good
    result.files = len(infos)
    result.t_min, result.t_max = (lo, hi) if n_good else (None, None)
    result.indexes = list(index)
    result.stages = {k: round(v, 3) for k, v in stages.items()}
    result.index_seconds = {k: round(v, 3) for k, v in index_s.items()}
    result.seconds = time.perf_counter() - start
    return result


def _staged(spark: Any, target: StreamTarget | None, paths: list[str], schema: Any) -> Any:
    """The staged rows of the parse tasks' files ``paths`` as a Spark DataFrame (None for no
    file): read by Spark's Parquet reader, or through the store by Python tasks."""
    if not paths:
        return None
    if target is None:
        return spark.read.parquet(*paths)
    return objects_frame(spark, target, paths, schema)


@dataclass
class _Batch:
    """The batch's rows between the stages: good and bad rows (Spark frames) and their
    counts, the smallest good time, the first seq the commit rewrites (``f0``: the stream's
    length unless late events make it rewrite a tail), the stored tail to re-sort with the
    batch (None when nothing is rewritten) and the number of late events."""

    good: Any
    bad: Any
    n_good: int
    n_bad: int
    lo: Any
    f0: int
    tail_df: Any = None
    n_late: int = 0


@dataclass
class _Written:
    """What the write stage made: data files and their leaves and statistics, the index jobs
    with their runs, and the CPU seconds spent per index."""

    files: list[FileInfo] = field(default_factory=list)
    leaves: list[dict[str, np.ndarray]] = field(default_factory=list)
    stats: list[str] = field(default_factory=list)
    index_runs: dict[str, list[dict]] = field(default_factory=dict)
    index_jobs: list[dict] = field(default_factory=list)
    index_s: dict[str, float] = field(default_factory=dict)


def _late_events(b: _Batch, w: Any, schema: StreamSchema, strict: bool,
                 source_names: list[str], spark: Any, F: Any) -> None:
    """Stage 2 on ``b``: events older than the stream's end minus its lateness bound are
    quarantined (an error with ``strict``); when the others reach before the stream's end,
    the stored events from the data file holding the earliest of them on are read back as
    ``b.tail_df`` to be sorted and rewritten with the batch (``b.f0``, ``b.n_late``)."""
    snap = w.snap
    n_stored = snap.n_events
    stored_max = snap.t_range[1] if n_stored else None
    if stored_max is None or b.lo is None or b.lo >= stored_max:
        return
    bound = stored_max - schema.lateness
    too_late = b.good.filter(F.col("t") < bound)
    n_too_late = too_late.count()
    if n_too_late:
        if strict:
            first = too_late.orderBy("_src", "_row").limit(1).toArrow().to_pylist()[0]
            src = source_names[first["_src"]] if first["_src"] >= 0 else "dataframe"
            raise LateEventError(
                f"t={first['t']} is older than the stream's end {stored_max} minus its "
                f"lateness bound {schema.lateness}", row=first["_row"],
                column=schema.time_column, source=src)
        late_rows = too_late.withColumn("_bad", F.lit(True)) \
            .withColumn("_col", F.lit(schema.time_column)) \
            .withColumn("_reason", F.lit("late event")) \
            .withColumn("_raw", F.to_json(F.struct(*[F.col(c) for c in ["t", *schema.names]])))
        b.bad = late_rows if b.bad is None else b.bad.unionByName(late_rows)
        b.n_bad += n_too_late
        b.good = b.good.filter(F.col("t") >= bound)
        b.n_good -= n_too_late
        b.lo = b.good.agg(F.min("t")).toArrow().column(0)[0].as_py()
    if b.lo is not None and b.lo < stored_max:
        leaf = int(np.searchsorted(snap.tree.leaves.col("t_max"), b.lo, side="right"))
        fid = int(snap.tree.leaves.col("file_id")[leaf])
        b.f0 = snap.files[fid].seq_min
        b.n_late = b.good.filter(F.col("t") < stored_max).count()
        if w.store.location is not None:  # Spark's JVM cannot read the object store
            tail = snap.read_seq(b.f0, n_stored, columns=["t", *schema.names, "seq"])
            tail_df = spark.createDataFrame(tail)
        else:
            tail_paths = [str(w.events_dir / f.path) for f in snap.files.values()
                          if f.seq_min >= b.f0]
            tail_df = spark.read.parquet(*tail_paths)
        b.tail_df = tail_df.select(
            "t", *schema.names, F.lit(0).alias("_o1"), F.col("seq").alias("_o2"))


def _sort_and_write(out: _Written, b: _Batch, total: int, w: Any, summary: list[dict],
                    index: list[str], rows_per_partition: int, spark: Any, F: Any,
                    stages: dict[str, float], schema: StreamSchema, schema_json: str,
                    quiet: bool, target: StreamTarget | None) -> None:
    """Stages 3 and 4: the batch (and the rewritten tail) cut into time buckets and sorted by
    (t, order) within each, then written as data files and index runs by one ``mapInArrow``
    pass; what was written goes into ``out``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from replaydb.ingest import indexing

    t0 = time.perf_counter()
    n_stored = w.snap.n_events
    f0 = b.f0
    P = partition_count(total, rows_per_partition, int(spark.sparkContext.defaultParallelism))
    assert b.good is not None
    new = b.good.select("t", *schema.names, F.lit(1).alias("_o1"),
                        ((F.col("_src").cast("long") + 1) * F.lit(1 << 40) + F.col("_row"))
                        .alias("_o2"))
    rows = new if b.tail_df is None else b.tail_df.unionByName(new)
    bounds = time_bounds(summary, P)
    labels = partition_labels(spark, len(bounds) + 1)
    label = bucket_expr(F, F.col("t"), bounds, labels)
    # rows per bucket, counted in the JVM from the staged files (no Python pass)
    counted = rows.groupBy(label.alias("b")).agg(F.count(F.lit(1)).alias("n")).toArrow()
    per = np.zeros(len(labels), dtype=np.int64)
    slot = {lab: i for i, lab in enumerate(labels)}
    for lab, n in zip(counted.column("b").to_pylist(), counted.column("n").to_pylist()):
        per[slot[lab]] = n
    offsets = np.concatenate([[0], np.cumsum(per)[:-1]]).tolist()
    sorted_df = rows.repartition(len(labels), label).sortWithinPartitions("t", "_o1", "_o2")
    stages["sort"] = time.perf_counter() - t0
    _say(f"{total:,} events in {len(labels)} time bucket(s)", quiet)

    t0 = time.perf_counter()
    for c in index:
        c0 = time.perf_counter()
        out.index_jobs.append(indexing.prepare(spark, w, c, f0 if f0 < n_stored else None))
        out.index_s[c] += time.perf_counter() - c0
    meta = sorted_df.mapInArrow(functools.partial(
        T.write_partition, schema_json=schema_json, events_dir=str(w.events_dir),
        bounds=bounds, counts=per.tolist(), offsets=offsets, first_seq=f0,
        index_jobs=out.index_jobs, target=target), from_arrow_schema(T.META_SCHEMA)).toArrow()
    meta = meta.sort_by([("pid", "ascending"), ("kind", "ascending"), ("idx", "ascending")])
    for r in meta.to_pylist():
        if r["kind"] == "data":
            file_stats = json.loads(r["stats"])
            gaps = file_stats.pop("replaydbGaps", None) or [None, None]
            out.files.append(FileInfo(-1, r["path"], r["rows"], r["size"], r["seq_min"],
                                      r["t_min"], r["t_max"], r["row_groups"],
                                      gaps[0], gaps[1]))
            out.leaves.append(T.from_ipc(r["payload"]))
            out.stats.append(json.dumps(file_stats))
        elif r["kind"].startswith("index:"):
            add = json.loads(r["stats"])
            out.index_s[r["kind"][6:]] += add.pop("cpu_seconds", 0.0)
            out.index_runs[r["kind"][6:]].append(add)
    stages["write"] = time.perf_counter() - t0
    failpoint("ingest.files_written")
    _say(f"wrote {len(out.files)} data file(s)", quiet)


def _quarantine(w: Any, bad: Any, n_bad: int, batch_id: str, source_names: list[str],
                side_versions: dict[str, int], new_refs: list[SideTableRef],
                target: StreamTarget | None) -> None:
    """Write the batch's ``n_bad`` bad rows to the stream's quarantine table (created on first
    use) and commit them; its version goes into ``side_versions``, a new table's reference
    into ``new_refs``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    q = Quarantine(w.dir, w.manifest.side_table("quarantine"), pinned=False)
    qmeta = bad.coalesce(max(1, min(8, -(-n_bad // 500_000)))).mapInArrow(
        functools.partial(T.write_quarantine, table_dir=str(q.path), batch_id=batch_id,
                          sources=source_names, target=target),
        from_arrow_schema(T.META_SCHEMA)).toArrow()
    qv = _commit_quarantine(q, qmeta.to_pylist())
    side_versions["quarantine"] = qv
    if w.manifest.side_table("quarantine") is None:
        new_refs.append(Quarantine.ref(qv))


def check_source_schemas(files: list[tuple[str, str]], schema: StreamSchema,
                         options: dict[str, Any], so: SourceOptions | None = None) -> None:
    """Apply the column rules of :func:`~replaydb.store.normalize.normalize` (time column present,
    no unknown columns unless ``extra="ignore"``, non-nullable columns present, types castable) to
    every source's schema on the driver, before any Spark task runs: schema drift is a clear
    :class:`~replaydb.errors.SchemaError` naming the source, not a failed task. O(sources)
    small reads (Parquet footers, CSV headers, a JSON block)."""
    from replaydb.errors import SchemaError
    from replaydb.ingest.sources import source_schema
    from replaydb.store.normalize import normalize

    for path, fmt in files:
        try:
            normalize(source_schema(path, fmt, so).empty_table(), schema, **options)
        except SchemaError as exc:
            raise SchemaError(exc.reason, column=exc.column, source=path, hint=exc.hint) from None


@dataclass
class _Prepared:
    info: FileInfo
    leaves: dict[str, np.ndarray]


def _commit_quarantine(q: Quarantine, metas: list[dict]) -> int:
    from deltalake import CommitProperties, DeltaTable
    from deltalake import Schema as DSchema
    from deltalake.transaction import AddAction, create_table_with_add_actions

    from replaydb.store.mirror import mirror_of
    from replaydb.store.quarantine import SCHEMA
    from replaydb.store.remotewrite import commit_remote

    adds = [AddAction(m["path"], m["size"], {}, int(time.time() * 1000), True, m["stats"])
            for m in metas]
    create = q.latest_version() < 0
    remote = mirror_of(q.path)

    def write(uri: str, options: dict[str, str] | None = None) -> None:
        props = CommitProperties(max_commit_retries=0) if remote is not None else None
        if create:
            create_table_with_add_actions(uri, DSchema.from_arrow(SCHEMA), adds, mode="error",
                                          storage_options=options, commit_properties=props)
        else:
            DeltaTable(uri, storage_options=options).create_write_transaction(
                adds, mode="append", schema=SCHEMA, commit_properties=props)

    if remote is not None:
        commit_remote(*remote, write)
    else:
        write(str(q.path))
    return DeltaTable(str(q.path)).version()
