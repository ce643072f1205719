"""Functions that run inside Spark tasks (``mapInArrow``) during ingestion.

They are module-level so executors can import them; each takes its parameters as plain JSON-able
values bound with :func:`functools.partial`. All heavy work is pyarrow / NumPy on whole batches.
"""

from __future__ import annotations

import io
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.ingest.sources import ReadTask, read_task
from replaydb.store.normalize import QUARANTINE_SCHEMA, normalize
from replaydb.store.schema import StreamSchema
from replaydb.store.tree import AggSpec

EMIT_ROWS = 65_536
BAD_COLUMNS = [("_src", pa.int32()), ("_row", pa.int64()), ("_bad", pa.bool_()),
               ("_col", pa.string()), ("_reason", pa.string()), ("_raw", pa.string())]


def parsed_schema(schema: StreamSchema) -> pa.Schema:
    """Schema of parsed rows: ``t``, attributes, then the bookkeeping columns."""
    fields = [pa.field("t", pa.int64())]
    fields += [pa.field(a.name, a.arrow_type) for a in schema.attributes]
    fields += [pa.field(n, t) for n, t in BAD_COLUMNS]
    return pa.schema(fields)


def _emit(good: pa.Table, good_rows: np.ndarray, bad: pa.Table, src: int,
          schema: StreamSchema) -> Iterator[pa.RecordBatch]:
    out_schema = parsed_schema(schema)
    n = good.num_rows
    if n:
        cols = [good.column(f.name) for f in out_schema if not f.name.startswith("_")]
        cols += [pa.array(np.full(n, src, dtype=np.int32)), pa.array(good_rows, pa.int64()),
                 pa.array(np.zeros(n, dtype=bool)), pa.nulls(n, pa.string()),
                 pa.nulls(n, pa.string()), pa.nulls(n, pa.string())]
        tbl = pa.Table.from_arrays(cols, schema=out_schema)
        yield from tbl.to_batches(max_chunksize=EMIT_ROWS)
    m = bad.num_rows
    if m:
        cols = [pa.array(np.zeros(m, dtype=np.int64))]
        cols += [pa.nulls(m, a.arrow_type) for a in schema.attributes]
        cols += [pa.array(np.full(m, src, dtype=np.int32)), bad.column("row"),
                 pa.array(np.ones(m, dtype=bool)), bad.column("column"), bad.column("reason"),
                 bad.column("raw")]
        yield from pa.Table.from_arrays(cols, schema=out_schema).to_batches(max_chunksize=EMIT_ROWS)


def parse_tasks(batches: Iterator[pa.RecordBatch], *, schema_json: str,
                options: dict) -> Iterator[pa.RecordBatch]:
    """Read and normalize the read tasks given as rows (one task per row)."""
    schema = StreamSchema.from_json(json.loads(schema_json))
    for b in batches:
        for task in b.to_pylist():
            t = ReadTask(**task)
            table = read_task(t)
            rows = t.row_offset + np.arange(1, table.num_rows + 1, dtype=np.int64)
            norm = normalize(table, schema, row_numbers=rows, source=t.path, **options)
            yield from _emit(norm.good, norm.good_rows, norm.bad, t.source, schema)


def parse_frame(batches: Iterator[pa.RecordBatch], *, schema_json: str,
                options: dict) -> Iterator[pa.RecordBatch]:
    """Normalize rows of a Spark DataFrame handed in from Python (``_row`` = its row id)."""
    schema = StreamSchema.from_json(json.loads(schema_json))
    for b in batches:
        tbl = pa.Table.from_batches([b])
        rows = tbl.column("_row").to_numpy()
        norm = normalize(tbl.drop(["_row"]), schema, row_numbers=rows, source="dataframe",
                         **options)
        yield from _emit(norm.good, norm.good_rows, norm.bad, -1, schema)


def count_partitions(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One row per partition: its id and row count."""
    from pyspark import TaskContext

    n = sum(b.num_rows for b in batches)
    pid = TaskContext.get().partitionId()
    yield pa.RecordBatch.from_pydict({"pid": pa.array([pid], pa.int32()),
                                      "n": pa.array([n], pa.int64())})


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
                    offsets: list[int], first_seq: int,
                    index_jobs: list[dict]) -> Iterator[pa.RecordBatch]:
    """Write one sorted partition as data files (one row group per leaf) and, for every
    requested index, one sorted run; yield one metadata row per file/run."""
    from pyspark import TaskContext

    from replaydb.store.writer import write_event_files

    schema = StreamSchema.from_json(json.loads(schema_json))
    pid = TaskContext.get().partitionId()
    parts = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not parts:
        return
    keep = ["t", *schema.names]
    table = pa.concat_tables([p.select(keep) for p in parts])
    seq0 = first_seq + offsets[pid]
    specs = [AggSpec(a.name, a.kind) for a in schema.numeric]
    prepared = write_event_files(Path(events_dir), schema, table, seq0, specs)
    rows = []
    for i, p in enumerate(prepared):
        f = p.info
        stats = json.loads(p.stats)
        stats["replaydbGaps"] = [f.gap_min, f.gap_max]
        rows.append({"pid": pid, "idx": i, "kind": "data", "path": f.path, "rows": f.rows,
                     "size": f.size, "seq_min": f.seq_min, "t_min": f.t_min, "t_max": f.t_max,
                     "row_groups": f.row_groups, "stats": json.dumps(stats),
                     "payload": _ipc(p.leaves)})
    if index_jobs:
        from replaydb.ingest.indexing import write_task_run

        seq = np.arange(seq0, seq0 + table.num_rows, dtype=np.int64)
        t = table.column("t").to_numpy()
        for k, job in enumerate(index_jobs):
            add = write_task_run(job, table.column(job["column"]), seq, t, pid)
            if add is not None:
                rows.append({"pid": pid, "idx": k, "kind": "index:" + job["column"],
                             "path": add["path"], "rows": 0, "size": int(add["size"]),
                             "seq_min": int(seq0), "t_min": int(t[0]), "t_max": int(t[-1]),
                             "row_groups": 0, "stats": json.dumps(add, default=str),
                             "payload": b""})
    yield pa.RecordBatch.from_pylist(rows, schema=META_SCHEMA)


def write_quarantine(batches: Iterator[pa.RecordBatch], *, table_dir: str, batch_id: str,
                     sources: list[str]) -> Iterator[pa.RecordBatch]:
    """Write bad rows as Parquet files of the quarantine table; yield their metadata."""
    import time

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
    os.makedirs(table_dir, exist_ok=True)
    name = f"part-{uuid.uuid4().hex}.parquet"
    pq.write_table(tbl, os.path.join(table_dir, name))
    size = os.path.getsize(os.path.join(table_dir, name))
    yield pa.RecordBatch.from_pylist([{
        "pid": 0, "idx": 0, "kind": "quarantine", "path": name, "rows": tbl.num_rows,
        "size": size, "seq_min": 0, "t_min": 0, "t_max": 0, "row_groups": 0,
        "stats": json.dumps({"numRecords": tbl.num_rows}), "payload": b""}], schema=META_SCHEMA)
