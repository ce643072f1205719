"""Files Spark tasks write to, and read from, a store on an object store, with no directory
shared with the driver.

A task that writes files of a stream (:class:`TaskOutputs`) writes them into a temporary
directory laid out like the stream's directory and uploads each to the same place on the object
store before it reports them, so the driver commits names and sizes whose objects already
exist. A task that reads Parquet objects of the store (:func:`read_objects`, as
:func:`objects_frame` schedules it) reads them through the store's URI. Both reach the store
through a :class:`StreamTarget`: its URI and storage options resolved on the driver, so
executors need no environment of their own.

Files are uniquely named (a retried task attempt writes the same index run name with the same
entries), so an upload never replaces a file a reader uses; files of a failed job are
unreferenced and ``replaydb vacuum`` removes them.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.store.location import RemoteLocation, shared_location
from replaydb.store.mirror import mirror_of

UPLOADS_IN_FLIGHT = 8
"""Concurrent uploads of one task's files."""


@dataclass(frozen=True)
class StreamTarget:
    """A stream of a store on an object store, as a task reaches it (picklable): the store's
    URI and storage options, the stream directory's path relative to the store root, and the
    driver's local name of that directory (the paths the driver hands to tasks start with it)."""

    uri: str
    options: tuple[tuple[str, str], ...]
    rel: str
    local_dir: str

    @classmethod
    def of_dir(cls, stream_dir: str | os.PathLike[str]) -> StreamTarget | None:
        """The target of a stream whose directory ``stream_dir`` lies in a store's mirror
        (:func:`~replaydb.store.mirror.mirror_of`); None for a local store's."""
        got = mirror_of(stream_dir)
        if got is None:
            return None
        mirror, rel = got
        location = mirror.location
        return cls(location.uri, tuple(sorted(location.options.items())), rel.strip("/"),
                   str(stream_dir))

    def location(self) -> RemoteLocation:
        """The store's location, opened once per process."""
        return shared_location(self.uri, self.options)

    def rel_of(self, path: str | os.PathLike[str]) -> str:
        """The store-relative name of ``path``, a path under :attr:`local_dir`."""
        inner = Path(path).relative_to(self.local_dir).as_posix()
        return self.rel if inner == "." else f"{self.rel}/{inner}"


class TaskOutputs:
    """The paths one task writes the stream's files to.

    Without a target, :meth:`path` is the identity: the files go where the driver named them.
    With one, they go into a temporary directory laid out like the stream's, and
    :meth:`publish` uploads them to their places on the object store and removes the
    directory; :meth:`discard` removes it without uploading (a failed task)."""

    def __init__(self, target: StreamTarget | None) -> None:
        self.target = target
        self.root = tempfile.mkdtemp(prefix="replaydb-task-") if target is not None else None

    def path(self, driver_path: str | os.PathLike[str]) -> str:
        """Where to write what the driver calls ``driver_path`` (a path in the stream's
        directory)."""
        if self.target is None or self.root is None:
            return str(driver_path)
        inner = Path(driver_path).relative_to(self.target.local_dir)
        return str(Path(self.root, inner))

    def publish(self) -> int:
        """Upload every file written under the temporary directory (concurrently), then remove
        it; returns the number of files. Nothing to do without a target."""
        if self.target is None or self.root is None:
            return 0
        files = [Path(d, n) for d, _, names in os.walk(self.root) for n in names]
        loc = self.target.location()

        def upload(f: Path) -> None:
            inner = f.relative_to(self.root).as_posix()
            loc.put_file(f"{self.target.rel}/{inner}", f)

        try:
            if files:
                with ThreadPoolExecutor(min(UPLOADS_IN_FLIGHT, len(files))) as pool:
                    list(pool.map(upload, files))
        finally:
            self.discard()
        return len(files)

    def discard(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> TaskOutputs:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is None:
            self.publish()
        else:
            self.discard()


def read_objects(batches: Iterator[pa.RecordBatch], *, target: StreamTarget,
                schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Inside a Spark task: the rows of the Parquet objects named by the rows of ``batches``
    (column ``path``, store-relative), read from the object store in ``schema`` (the objects'
    columns of that name, cast to it), in the objects' order, in batches of up to 65,536
    rows."""
    loc = target.location()
    for b in batches:
        for rel in b.column("path").to_pylist():
            with loc.open_file(rel) as f:
                for batch in pq.ParquetFile(f).iter_batches(1 << 16, columns=schema.names):
                    yield batch.cast(schema)


def objects_frame(spark: Any, target: StreamTarget, rels: list[str], schema: pa.Schema) -> Any:
    """A Spark DataFrame of the Parquet objects ``rels`` (store-relative; one task per object)
    in ``schema``, read by Python tasks from the object store; re-reads them whenever Spark
    evaluates it again."""
    from pyspark.sql.pandas.types import from_arrow_schema

    paths = spark.createDataFrame([(r,) for r in rels], "path string")
    paths = paths.repartition(max(1, len(rels)))
    return paths.mapInArrow(functools.partial(read_objects, target=target, schema=schema),
                            from_arrow_schema(schema))
