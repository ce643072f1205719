"""Functions that run inside Spark tasks (``mapInArrow``) during ingestion.

They are module-level so executors can import them; each takes its parameters as plain JSON-able
values bound with :func:`functools.partial`. All heavy work is pyarrow / NumPy on whole batches.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.ingest.sourcefiles import SourceOptions
from replaydb.ingest.sources import ReadTask, read_task
from replaydb.store.normalize import QUARANTINE_SCHEMA, normalize
from replaydb.store.schema import StreamSchema
from replaydb.store.taskio import StreamTarget, TaskOutputs
from replaydb.store.tree import AggSpec

BAD_COLUMNS = [("_src", pa.int32()), ("_row", pa.int64()), ("_bad", pa.bool_()),
               ("_col", pa.string()), ("_reason", pa.string()), ("_raw", pa.string())]


def parsed_schema(schema: StreamSchema) -> pa.Schema:
    """Schema of parsed rows: ``t``, attributes, then the bookkeeping columns."""
    fields = [pa.field("t", pa.int64())]
    fields += [pa.field(a.name, a.arrow_type) for a in schema.attributes]
    fields += [pa.field(n, t) for n, t in BAD_COLUMNS]
    return pa.schema(fields)


def _good_table(good: pa.Table, good_rows: np.ndarray, src: int,
                schema: StreamSchema) -> pa.Table:
    """Normalized good rows with their source index and row number (:func:`good_schema`)."""
    out = good_schema(schema)
    n = good.num_rows
    cols = [good.column(f.name) for f in out if not f.name.startswith("_")]
    cols += [pa.array(np.full(n, src, dtype=np.int32)), pa.array(good_rows, pa.int64())]
    return pa.Table.from_arrays(cols, schema=out)


def _bad_table(bad: pa.Table, src: int, schema: StreamSchema) -> pa.Table:
    """Bad rows in :func:`parsed_schema` (attributes null; the reason, column and raw text)."""
    m = bad.num_rows
    cols = [pa.array(np.zeros(m, dtype=np.int64))]
    cols += [pa.nulls(m, a.arrow_type) for a in schema.attributes]
    cols += [pa.array(np.full(m, src, dtype=np.int32)), bad.column("row"),
             pa.array(np.ones(m, dtype=bool)), bad.column("column"), bad.column("reason"),
             bad.column("raw")]
    return pa.Table.from_arrays(cols, schema=parsed_schema(schema))


STAGE_SCHEMA = pa.schema([
    ("good", pa.string()), ("bad", pa.string()), ("n_good", pa.int64()), ("n_bad", pa.int64()),
    ("t_min", pa.int64()), ("t_max", pa.int64()), ("first_src", pa.int32()),
    ("first_row", pa.int64()), ("first_col", pa.string()), ("first_reason", pa.string()),
    ("sample", pa.list_(pa.int64())),
])
"""One row per parse task: its staged files, counts, time range, first bad row, and a
systematic sample of its good rows' times (for the partition boundaries)."""

SAMPLE_SIZE = 4096


def good_schema(schema: StreamSchema) -> pa.Schema:
    """Schema of staged good rows: ``t``, attributes, source index and row number."""
    fields = [pa.field("t", pa.int64())]
    fields += [pa.field(a.name, a.arrow_type) for a in schema.attributes]
    return pa.schema([*fields, pa.field("_src", pa.int32()), pa.field("_row", pa.int64())])


class _Stager:
    """Writes one Spark task's normalized rows into its own staging files (good rows and bad
    rows, Parquet, names unique per task attempt) and keeps the task's summary.

    The JVM then reads the staged good rows with Spark's native Parquet reader: the events cross
    from Python to the JVM as files, not as Arrow batches converted row by row, and nothing is
    cached in the JVM. Through the store (``outputs`` with a target), the files are written in
    the task's temporary directory, compressed, and uploaded when the task's outputs are
    published; the summary names them relative to the store root
    (:mod:`replaydb.store.taskio`). Complexity: O(rows) writes, O(rows / SAMPLE_SIZE) sample."""

    def __init__(self, schema: StreamSchema, stage_dir: str, outputs: TaskOutputs) -> None:
        self.schema = schema
        self.target = outputs.target
        self.stage_dir = outputs.path(stage_dir)
        self.compression = "none" if self.target is None else "lz4"
        tag = uuid.uuid4().hex
        self.good_name = os.path.join(stage_dir, f"good-{tag}.parquet")
        self.bad_name = os.path.join(stage_dir, f"bad-{tag}.parquet")
        self.good_path = outputs.path(self.good_name)
        self.bad_path = outputs.path(self.bad_name)
        self._good: pq.ParquetWriter | None = None
        self._bad: pq.ParquetWriter | None = None
        self.n_good = self.n_bad = 0
        self.t_min: int | None = None
        self.t_max: int | None = None
        self.first: tuple[int, int, str | None, str | None] | None = None
        self.samples: list[np.ndarray] = []

    def add(self, norm: Any, src: int) -> None:
        if norm.good.num_rows:
            self._add_good(_good_table(norm.good, norm.good_rows, src, self.schema))
        if norm.bad.num_rows:
            self._add_bad(_bad_table(norm.bad, src, self.schema))

    def _add_good(self, tbl: pa.Table) -> None:
        if self._good is None:
            os.makedirs(self.stage_dir, exist_ok=True)
            self._good = pq.ParquetWriter(self.good_path, good_schema(self.schema),
                                          compression=self.compression)
        self._good.write_table(tbl, row_group_size=1 << 20)
        t = tbl.column("t").to_numpy()
        step = max(1, len(t) * 8 // SAMPLE_SIZE)
        self.samples.append(t[::step].copy())
        lo, hi = int(t.min()), int(t.max())
        self.t_min = lo if self.t_min is None else min(self.t_min, lo)
        self.t_max = hi if self.t_max is None else max(self.t_max, hi)
        self.n_good += tbl.num_rows

    def _add_bad(self, tbl: pa.Table) -> None:
        if self._bad is None:
            os.makedirs(self.stage_dir, exist_ok=True)
            self._bad = pq.ParquetWriter(self.bad_path, parsed_schema(self.schema),
                                         compression=self.compression)
        self._bad.write_table(tbl)
        self.n_bad += tbl.num_rows
        keys = np.lexsort((tbl.column("_row").to_numpy(), tbl.column("_src").to_numpy()))
        i = int(keys[0])
        cand = (tbl.column("_src")[i].as_py(), tbl.column("_row")[i].as_py(),
                tbl.column("_col")[i].as_py(), tbl.column("_reason")[i].as_py())
        if self.first is None or cand[:2] < self.first[:2]:
            self.first = cand

    def _name(self, driver_path: str) -> str:
        """How the driver finds a staged file: its path, or its name in the store."""
        return driver_path if self.target is None else self.target.rel_of(driver_path)

    def summary(self) -> pa.RecordBatch:
        for wr in (self._good, self._bad):
            if wr is not None:
                wr.close()
        sample = np.sort(np.concatenate(self.samples)) if self.samples else np.empty(0, np.int64)
        if len(sample) > SAMPLE_SIZE:
            sample = sample[np.linspace(0, len(sample) - 1, SAMPLE_SIZE).astype(np.int64)]
        first = self.first or (None, None, None, None)
        return pa.RecordBatch.from_pylist([{
            "good": self._name(self.good_name) if self.n_good else None,
            "bad": self._name(self.bad_name) if self.n_bad else None,
            "n_good": self.n_good, "n_bad": self.n_bad, "t_min": self.t_min, "t_max": self.t_max,
            "first_src": first[0], "first_row": first[1], "first_col": first[2],
            "first_reason": first[3], "sample": sample.tolist()}], schema=STAGE_SCHEMA)


def parse_tasks(batches: Iterator[pa.RecordBatch], *, schema_json: str, options: dict,
                stage_dir: str, target: StreamTarget | None = None,
                sources: SourceOptions | None = None) -> Iterator[pa.RecordBatch]:
    """Read and normalize the read tasks given as rows (one task per row) into this Spark task's
    staging files; yield the task's summary row (:data:`STAGE_SCHEMA`)."""
    schema = StreamSchema.from_json(json.loads(schema_json))
    with TaskOutputs(target) as outputs:  # uploaded after the summary closes the files
        stager = _Stager(schema, stage_dir, outputs)
        for b in batches:
            for task in b.to_pylist():
                t = ReadTask(**task)
                table = read_task(t, so=sources)
                rows = t.row_offset + np.arange(1, table.num_rows + 1, dtype=np.int64)
                stager.add(normalize(table, schema, row_numbers=rows, source=t.path,
                                     **options), t.source)
        summary = stager.summary()
    yield summary


def parse_frame(batches: Iterator[pa.RecordBatch], *, schema_json: str, options: dict,
                stage_dir: str, target: StreamTarget | None = None
                ) -> Iterator[pa.RecordBatch]:
    """Normalize rows of a Spark DataFrame handed in from Python (``_row`` = its row id) into
    this Spark task's staging files; yield the task's summary row."""
    schema = StreamSchema.from_json(json.loads(schema_json))
    with TaskOutputs(target) as outputs:  # uploaded after the summary closes the files
        stager = _Stager(schema, stage_dir, outputs)
        for b in batches:
            tbl = pa.Table.from_batches([b])
            rows = tbl.column("_row").to_numpy()
            stager.add(normalize(tbl.drop(["_row"]), schema, row_numbers=rows,
                                 source="dataframe", **options), -1)
        summary = stager.summary()
    yield summary


META_SCHEMA = pa.schema([
    ("pid", pa.int32()), ("idx", pa.int32()), ("kind", pa.string()), ("path", pa.string()),
    ("rows", pa.int64()), ("size", pa.int64()), ("seq_min", pa.int64()), ("t_min", pa.int64()),
    ("t_max", pa.int64()), ("row_groups", pa.int32()), ("stats", pa.string()),
    ("payload", pa.binary()),
])


def _ipc(cols: dict[str, np.ndarray]) -> bytes:
    sink = io.BytesIO()
    tbl = pa.table({k: pa.array(v) for k, v in cols.items()})
    with pa.ipc.new_stream(sink, tbl.schema) as w:
        w.write_table(tbl)
    return sink.getvalue()


def from_ipc(data: bytes) -> dict[str, np.ndarray]:
    tbl = pa.ipc.open_stream(io.BytesIO(data)).read_all()
    return {n: tbl.column(n).to_numpy() for n in tbl.column_names}


def write_partition(batches: Iterator[pa.RecordBatch], *, schema_json: str, events_dir: str,
                    bounds: list[int], counts: list[int], offsets: list[int], first_seq: int,
                    index_jobs: list[dict], target: StreamTarget | None = None
                    ) -> Iterator[pa.RecordBatch]:
    """Write one sorted partition as data files (one row group per leaf) and, for every
    requested index, sorted runs; yield one metadata row per file/run.

    The partition holds whole time buckets (bucket ``b`` = the number of ``bounds`` at or below
    ``t``; the driver counted ``counts[b]`` rows in it and its events take the seqs from
    ``first_seq + offsets[b]``). Rows are sorted by time, so each bucket is one contiguous run;
    every run is written on its own (files and index runs never span two buckets). A run whose
    length differs from the driver's count fails the task instead of writing wrong seqs.
    Through the store (``target``), every file is uploaded before the rows are yielded
    (:class:`~replaydb.store.taskio.TaskOutputs`). Complexity: O(rows log buckets) to find
    the runs, plus the writes."""
    schema = StreamSchema.from_json(json.loads(schema_json))
    parts = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not parts:
        return
    keep = ["t", *schema.names]
    table = pa.concat_tables([p.select(keep) for p in parts])
    t_all = table.column("t").to_numpy()
    bucket = np.searchsorted(np.asarray(bounds, dtype=np.int64), t_all, side="right")
    cuts = np.flatnonzero(np.diff(bucket)) + 1
    starts = np.concatenate([[0], cuts]).tolist()
    ends = np.concatenate([cuts, [len(t_all)]]).tolist()
    with TaskOutputs(target) as outputs:
        rows = _write_runs(table, t_all, bucket, starts, ends, schema, outputs, events_dir,
                           counts, offsets, first_seq, index_jobs)
    yield pa.RecordBatch.from_pylist(rows, schema=META_SCHEMA)


def _write_runs(table: pa.Table, t_all: np.ndarray, bucket: np.ndarray, starts: list[int],
                ends: list[int], schema: StreamSchema, outputs: TaskOutputs, events_dir: str,
                counts: list[int], offsets: list[int], first_seq: int,
                index_jobs: list[dict]) -> list[dict]:
    """The writes of :func:`write_partition`: one bucket's run ``[s, e)`` at a time; returns
    the metadata rows."""
    from replaydb.store.writer import write_event_files

    specs = [AggSpec(a.name, a.kind) for a in schema.numeric]
    rows = []
    for s, e in zip(starts, ends):
        b = int(bucket[s])
        if e - s != counts[b]:
            raise RuntimeError(f"ingest: time bucket {b} holds {e - s} rows in its partition, "
                               f"the driver counted {counts[b]}; nothing was committed")
        run = table.slice(s, e - s)
        seq0 = first_seq + offsets[b]
        prepared = write_event_files(Path(outputs.path(events_dir)), schema, run, seq0, specs)
        for i, p in enumerate(prepared):
            f = p.info
            stats = json.loads(p.stats)
            stats["replaydbGaps"] = [f.gap_min, f.gap_max]
            rows.append({"pid": b, "idx": i, "kind": "data", "path": f.path, "rows": f.rows,
                         "size": f.size, "seq_min": f.seq_min, "t_min": f.t_min,
                         "t_max": f.t_max, "row_groups": f.row_groups,
                         "stats": json.dumps(stats), "payload": _ipc(p.leaves)})
        if index_jobs:
            from replaydb.ingest.indexing import write_task_run

            seq = np.arange(seq0, seq0 + run.num_rows, dtype=np.int64)
            t = t_all[s:e]
            for k, job in enumerate(index_jobs):
                c0 = time.process_time()
                add = write_task_run({**job, "path": outputs.path(job["path"])},
                                     run.column(job["column"]), seq, t, b)
                if add is not None:
                    add["cpu_seconds"] = time.process_time() - c0
                    rows.append({"pid": b, "idx": k, "kind": "index:" + job["column"],
                                 "path": add["path"], "rows": 0, "size": int(add["size"]),
                                 "seq_min": int(seq0), "t_min": int(t[0]), "t_max": int(t[-1]),
                                 "row_groups": 0, "stats": json.dumps(add, default=str),
                                 "payload": b""})
    return rows


def write_quarantine(batches: Iterator[pa.RecordBatch], *, table_dir: str, batch_id: str,
                     sources: list[str], target: StreamTarget | None = None
                     ) -> Iterator[pa.RecordBatch]:
    """Write bad rows as Parquet files of the quarantine table (uploaded first through the
    store, ``target``); yield their metadata."""
    parts = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not parts:
        return
    bad = pa.concat_tables(parts)
    src = bad.column("_src").to_numpy()
    names = [sources[s] if 0 <= s < len(sources) else "dataframe" for s in src.tolist()]
    now = int(time.time() * 1000)
    tbl = pa.table({
        "batch_id": pa.array([batch_id] * bad.num_rows, pa.string()),
        "source": pa.array(names, pa.string()),
        "row": bad.column("_row"),
        "column": bad.column("_col"),
        "reason": bad.column("_reason"),
        "raw": bad.column("_raw"),
        "quarantined_at": pa.array([now] * bad.num_rows, pa.timestamp("ms", tz="UTC")),
    }, schema=QUARANTINE_SCHEMA.append(pa.field("quarantined_at", pa.timestamp("ms", tz="UTC"))))
    name = f"part-{uuid.uuid4().hex}.parquet"
    with TaskOutputs(target) as outputs:
        local_dir = outputs.path(table_dir)
        os.makedirs(local_dir, exist_ok=True)
        pq.write_table(tbl, os.path.join(local_dir, name))
        size = os.path.getsize(os.path.join(local_dir, name))
    yield pa.RecordBatch.from_pylist([{
        "pid": 0, "idx": 0, "kind": "quarantine", "path": name, "rows": tbl.num_rows,
        "size": size, "seq_min": 0, "t_min": 0, "t_max": 0, "row_groups": 0,
        "stats": json.dumps({"numRecords": tbl.num_rows}), "payload": b""}], schema=META_SCHEMA)
