"""Secondary indexes inside the ingestion job.

Every index of the stream is maintained by every ingest (those named with ``--index`` are created
first). Order of operations, all before the stream's events commit:

1. :func:`prepare` (driver) - a new index is back-filled for the events already stored (a Spark
   job over the stream's data files; in the driver's process for a store on an object store,
   whose data files Spark's JVM cannot read); if the ingest rewrites the stored tail from seq ``f0`` (late
   events), a tombstone for ``seq >= f0`` is committed, so the rewritten entries disappear from the
   older runs; then the run ids the tasks will use are reserved (newer than every committed run).
2. :func:`write_task_run` (each Spark task) - the task's sorted partition becomes one level-0 run.
3. :func:`commit` (driver) - all runs of the job in one index commit; its version is pinned by the
   stream manifest of the events commit.

A crash anywhere leaves the index ahead of its pin; the next writer rolls it back
(:meth:`replaydb.store.writer.StreamWriter.recover`).
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.indexes.lsm import LSMIndex
from replaydb.indexes.sidetable import build_local, index_path, index_ref, key_type_of
from replaydb.indexes.spark_build import build_index_spark, commit_runs, next_run_id, write_run
from replaydb.store.manifest import SideTableRef


def columns_to_index(snap: Any, requested: list[str]) -> list[str]:
    """Existing indexes of the stream plus the requested ones, in a stable order."""
    existing = [r.options["column"] for r in snap.manifest.side if r.kind == "lsm"]
    return list(dict.fromkeys([*existing, *requested]))


def prepare(spark: Any, w: Any, column: str, rewrite_from: int | None) -> dict[str, Any]:
    """Make the index ready for the job's runs; returns the job description for the tasks."""
    snap = w.snap
    path = index_path(w.dir, column)
    kt = key_type_of(snap.schema.attr(column).kind)
    new = snap.manifest.side_table(f"index/{column}") is None
    if new:
        if path.exists():
            shutil.rmtree(path)
        files = [str(snap.events_dir / f.path) for f in snap.files.values()]
        if files and w.store.location is not None:  # data files are on the object store
            build_local(snap, column, path)
        elif files:
            build_index_spark(spark, files, column, str(path), key_type=kt)
        else:
            LSMIndex.create(str(path), kt)
    if rewrite_from is not None and snap.n_events > rewrite_from:
        idx = LSMIndex.open(str(path))
        idx.delete_from_seq(rewrite_from)
        idx.flush()
    return {"column": column, "path": str(path), "key_type": kt, "new": new,
            "run_id": next_run_id(str(path))}


def write_task_run(job: dict[str, Any], keys: pa.ChunkedArray, seq: np.ndarray, t: np.ndarray,
                   pid: int) -> dict[str, Any] | None:
    """Write one partition's entries as a level-0 run (inside a Spark task)."""
    if pa.types.is_boolean(keys.type):
        keys = keys.cast(pa.int64())
    entries = pa.table({"key": keys, "seq": pa.array(seq), "t": pa.array(t)})
    return write_run(entries, job["path"], key_type=job["key_type"], level=0,
                     run_id=job["run_id"] + pid)


def commit(job: dict[str, Any], adds: list[dict[str, Any]]) -> SideTableRef:
    """Commit the job's runs (one commit); returns the reference to pin."""
    if adds:
        version = commit_runs(job["path"], adds, key_type=job["key_type"])
    else:
        version = LSMIndex.open(job["path"]).version
    return index_ref(job["column"], job["key_type"], version)
