"""Creating and compacting a stream's indexes under the stream's commit protocol.

* :func:`create_index` back-fills an index for the events a stream already holds - with a Spark
  job (``engine="spark"``, the default of ``replaydb index``) or in this process
  (``engine="local"``) - and pins it in the stream's manifest in one commit. From then on every
  append and ingest maintains it.
* :func:`compact` merges index runs per the level policy (or fully) and records the new versions
  in the manifest (compaction does not change what an index answers).

Both hold the stream's writer lock, so they never race with appends.
"""

from __future__ import annotations

import shutil
from typing import Any

from replaydb.errors import UsageError
from replaydb.indexes.lsm import LSMIndex
from replaydb.indexes.sidetable import build_local, index_path, index_ref, key_type_of
from replaydb.store.failpoints import failpoint


def create_index(store: Any, stream: str, column: str, *, engine: str = "local",
                 spark: Any = None, master: str | None = None) -> dict[str, Any]:
    """Build and pin an index on ``column`` of ``stream``; returns a summary."""
    if engine not in ("local", "spark"):
        raise UsageError("engine must be local or spark")
    with store.writer(stream) as w:
        snap = w.snap
        if column in ("t", "seq") or not snap.schema.has(column):
            raise UsageError(f"cannot index {column!r}: not an attribute of stream {stream!r}")
        name = f"index/{column}"
        if snap.manifest.side_table(name) is not None:
            raise UsageError(f"stream {stream!r} already has an index on {column!r}")
        path = index_path(w.dir, column)
        if path.exists():  # leftovers of a creation that never committed
            shutil.rmtree(path)
        if engine == "local":
            ref = build_local(snap, column, path)
        else:
            from replaydb.indexes.spark_build import build_index_spark
            from replaydb.spark import get_spark

            spark = spark or get_spark(master, app_name=f"replaydb index {stream}.{column}")
            kt = key_type_of(snap.schema.attr(column).kind)
            remote = _remote_events(w, column, spark)
            files = [str(snap.events_dir / f.path) if remote is None
                     else f"{remote.target.rel}/events/{f.path}" for f in snap.files.values()]
            if files:
                version = build_index_spark(spark, files, column, str(path), key_type=kt,
                                            remote=remote)
            else:
                version = LSMIndex.create(str(path), kt).version
            ref = index_ref(column, kt, version)
        failpoint("index.backfilled")
        stream_version = w.add_side(ref)
        failpoint("index.committed")
        idx = LSMIndex.open(str(path), version=ref.version)
        return {"stream": stream, "column": column, "index_version": ref.version,
                "stream_version": stream_version, "entries": idx.num_entries,
                "runs": idx.num_runs, "bytes": idx.size_bytes}


def compact(store: Any, stream: str, *, full: bool = False) -> dict[str, Any]:
    """Compact every index of ``stream``; pins the new versions. Returns what changed."""
    out: dict[str, Any] = {"stream": stream, "indexes": {}}
    with store.writer(stream) as w:
        manifest = w.manifest
        changed = False
        for ref in manifest.side:
            if ref.kind != "lsm":
                continue
            idx = LSMIndex.open(str(w.dir / ref.path))
            before = idx.num_runs
            v = idx.compact(full=full)
            while v is not None and not full and idx.needs_compaction():
                v = idx.compact()
            if idx.version != ref.version:
                manifest = manifest.with_side(index_ref(ref.options["column"],
                                                        ref.options["key_type"], idx.version))
                changed = True
                failpoint("compact.index_committed")
            out["indexes"][ref.options["column"]] = {"runs_before": before,
                                                     "runs_after": idx.num_runs,
                                                     "version": idx.version}
        if changed:
            out["stream_version"] = w.set_manifest(manifest, "compact indexes")
            failpoint("compact.committed")
    return out


def _remote_events(w: Any, column: str, spark: Any) -> Any:
    """For a stream on an object store (``w`` its writer): how the back-fill's tasks read its
    data files and write the runs (:class:`~replaydb.indexes.spark_build.RemoteEvents`);
    None for a local store."""
    import pyarrow as pa

    from replaydb.indexes.spark_build import RemoteEvents
    from replaydb.spark import is_local_master
    from replaydb.store.taskio import StreamTarget

    target = StreamTarget.of_dir(w.dir) if w.store.location is not None else None
    if target is None:
        return None
    snap = w.snap
    schema = pa.schema([pa.field(column, snap.schema.attr(column).arrow_type),
                        pa.field("seq", pa.int64()), pa.field("t", pa.int64())])
    return RemoteEvents(target, schema, snap.n_events,
                        through_store=not is_local_master(spark.sparkContext.master))
