"""The store: a directory of named streams, on a local disk or an object store.

A store on an object store (``s3://bucket/prefix``) is read in place through a local mirror of
its small files (:mod:`.mirror`) and byte-range reads of its data files and index runs
(:mod:`.remotefile`), and written through the mirror with conditional commits
(:mod:`.remotewrite`).

Layout::

    STORE/
      replaydb.json                 store configuration (format, calibration weights, defaults)
      streams/<name>/
        events/                     the stream's Delta table (t, seq, attributes), one row group
                                    per TAB+-tree leaf; each commit carries the stream manifest
        tree/seg-*.parquet          TAB+-tree segments (the manifest names the chain's head)
        indexes/<column>/           LSM secondary indexes (Delta tables, pinned by the manifest)
        quarantine/                 rows set aside by ingestion (Delta table, pinned)
        _writer.lock                the single-writer lock
      .trash/                       dropped streams being deleted (see drop_stream)

Stream names are validated (letters, digits, ``_``), so no name can escape the store directory.
A store opened with ``read_only=True`` refuses every write with
:class:`~replaydb.errors.ReadOnlyError`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from replaydb.errors import ReadOnlyError, ReplayDBError, StoreError, StreamNotFound, UsageError
from replaydb.store import deltaio
from replaydb.store.location import RemoteLocation, is_remote, local_path
from replaydb.store.manifest import Manifest
from replaydb.store.mirror import CacheOptions, StoreMirror, not_a_run
from replaydb.store.parquetcache import ParquetCache
from replaydb.store.remotefile import RemoteFiles
from replaydb.store.schema import (
    DEFAULT_TIME_UNIT,
    DEFAULT_UNIT,
    Attribute,
    DefaultUnit,
    StreamSchema,
    check_name,
)
from replaydb.store.snapshot import StreamSnapshot

if TYPE_CHECKING:  # the writer is imported by the methods that write: a query never loads it
    from replaydb.store.writer import AppendResult, StreamWriter

CONFIG_FILE = "replaydb.json"
STORE_FORMAT = 1


class Store:
    """A replaydb store (see the module docstring). Use :func:`replaydb.open` to get one."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = False,
                 read_only: bool = False, storage_options: dict[str, str] | None = None,
                 cache: CacheOptions | None = None) -> None:
        self.location: RemoteLocation | None = None
        self.mirror: StoreMirror | None = None
        if is_remote(path):
            self._open_remote(str(path), create, read_only, storage_options, cache)
        else:
            if storage_options:
                raise UsageError("storage options apply to stores on object stores (s3://...)")
            self.path = local_path(path)
            self.uri = str(self.path)
            self.read_only = read_only
            self._open_local(create)
        self.config: dict[str, Any] = self._read_config()
        if self.config.get("format") != STORE_FORMAT:
            raise StoreError(f"unsupported store format {self.config.get('format')!r}")
        remote = None if self.mirror is None else RemoteFiles(
            self.location, self.path, self.mirror)
        self.parquet_cache = ParquetCache(remote=remote)
        self._snapshots: OrderedDict[tuple[str, int], StreamSnapshot] = OrderedDict()
        self._writer_snaps: dict[str, StreamSnapshot] = {}
        # stream name -> (its events table, that table's log directory), built once per name
        # (no pathlib joins per query; the log directory is still checked)
        self._stream_paths: dict[str, tuple[Path, str]] = {}

    def _open_local(self, create: bool) -> None:
        cfg = self.path / CONFIG_FILE
        if cfg.exists():
            return
        if not create:
            raise StoreError(f"no replaydb store at {self.path}",
                             hint="create one with replaydb.open(path, create=True) or "
                                  "`replaydb ingest` (which creates it)")
        if self.read_only:
            raise ReadOnlyError(f"cannot create a store read-only: {self.path}")
        if self.path.exists() and any(self.path.iterdir()):
            raise StoreError(f"{self.path} exists and is not an empty directory or a store")
        (self.path / "streams").mkdir(parents=True, exist_ok=True)
        self._write_config({"format": STORE_FORMAT, "created": time.time(), "calibration": {}})

    def _open_remote(self, uri: str, create: bool, read_only: bool,
                     options: dict[str, str] | None, cache: CacheOptions | None) -> None:
        """Open a store on an object store through its local mirror (:mod:`.mirror`)."""
        self.location = RemoteLocation(uri, options)
        self.mirror = StoreMirror(self.location, cache or CacheOptions())
        self.path = self.mirror.root
        self.uri = self.location.uri
        self.read_only = read_only
        if self.mirror.fetch(CONFIG_FILE) is not None:
            return
        if not self.location.bucket_exists():
            word = self.location.kind.container_word
            raise StoreError(f"{self.uri}: the {word} {self.location.bucket!r} does not "
                             "exist", hint=f"check the {word} name in the URI")
        if not create:
            raise StoreError(f"no replaydb store at {self.uri}",
                             hint=f"{self.location.uri_of(CONFIG_FILE)} does not exist; "
                                  "`replaydb ingest` creates a store")
        if read_only:
            raise ReadOnlyError(f"cannot create a store read-only: {self.uri}")
        if self.location.list(""):
            raise StoreError(f"{self.uri} holds objects and is not a store",
                             hint="choose an empty prefix")
        (self.path / "streams").mkdir(parents=True, exist_ok=True)
        self._write_config({"format": STORE_FORMAT, "created": time.time(), "calibration": {}})

    # ------------------------------------------------------------------ configuration
    def _read_config(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / CONFIG_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreError(f"unreadable store configuration: {exc}") from exc

    def _write_config(self, cfg: dict[str, Any]) -> None:
        text = json.dumps(cfg, indent=2, sort_keys=True)
        if self.location is not None:  # one PUT replaces the object atomically
            self.location.put(CONFIG_FILE, text.encode())
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".config-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, self.path / CONFIG_FILE)

    def update_config(self, **changes: Any) -> None:
        """Atomically update the store configuration (e.g. calibration weights)."""
        self._require_writable()
        if self.mirror is not None:
            self.mirror.fetch(CONFIG_FILE)
        cfg = self._read_config()
        cfg.update(changes)
        self._write_config(cfg)
        self.config = cfg

    def _require_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError(f"store {self.uri} is open read-only")
        if not os.access(self.path, os.W_OK):  # a read-only file system or no permission
            raise ReadOnlyError(f"store {self.path} is read-only here (no write access)",
                                hint="writing needs write access to the store directory; "
                                     "reading works without it")

    # ------------------------------------------------------------------ catalog
    def stream_dir(self, name: str) -> Path:
        check_name(name, "stream")
        return self.path / "streams" / name

    def streams(self) -> list[str]:
        """Names of the streams (those with a committed events table), sorted."""
        if self.mirror is not None:
            names = [e.rel.rsplit("/", 1)[-1] for e in self.location.list("streams")
                     if e.size < 0]
            return [n for n in names if _valid_name(n) and self.has_stream(n)]
        root = self.path / "streams"
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir()
                      if (p / "events" / "_delta_log").is_dir())

    def _events_paths(self, name: str) -> tuple[Path, str]:
        """``(events table, its _delta_log)`` of stream ``name`` (the name checked)."""
        got = self._stream_paths.get(name)
        if got is None:
            events = self.stream_dir(name) / "events"
            got = (events, str(deltaio.log_dir(events)))
            if len(self._stream_paths) >= 1024:
                self._stream_paths.clear()
            self._stream_paths[name] = got
        return got

    def has_stream(self, name: str) -> bool:
        log = self._events_paths(name)[1]
        if self.mirror is not None:  # the latest commits, mirrored (one listing)
            self.mirror.sync_log(f"streams/{name}/events/{deltaio.LOG_DIR}")
        return os.path.isdir(log)

    def _mirror_tree(self, name: str, head: str | None) -> None:
        """For a store on an object store: mirror the TAB+-tree segment chain ending at
        ``head`` (each segment names its parent), fetching the segments not mirrored yet, one
        after the other; O(chain length) local reads, a GET per new segment."""
        if self.mirror is None:
            return
        from replaydb.store.treeio import SNAPSHOT_EVERY, segment_parent

        rel = head
        for _ in range(10 * SNAPSHOT_EVERY):
            if rel is None:
                return
            path = self.mirror.ensure(f"streams/{name}/{rel}")
            if path is None:
                return  # loading the tree reports the missing segment
            rel = segment_parent(path)

    def data_file_sizes(self, name: str) -> dict[str, int]:
        """Size of every file in stream ``name``'s events table directory (data files and
        leftovers alike) by name: one directory listing, local or remote."""
        if self.location is not None:
            return {e.rel.rsplit("/", 1)[-1]: e.size
                    for e in self.location.list(f"streams/{name}/events") if e.size >= 0}
        with os.scandir(self._events_paths(name)[0]) as it:
            return {e.name: e.stat().st_size for e in it if e.is_file()}

    def sync_stream(self, name: str, part: str, token: str) -> None:
        """Mirror the files of part ``part`` (``tree``, or a side table's directory) of stream
        ``name`` as of ``token`` (what the manifest pins of it: the tree's head, a side
        table's version) before reading them, for a store on an object store
        (:meth:`.mirror.StoreMirror.sync_once`); a no-op for a local store."""
        if self.mirror is not None:  # index runs are read by ranges (.remotefile)
            self.mirror.sync_once(f"streams/{name}/{part}", token, keep=not_a_run)

    def create_stream(
        self,
        name: str,
        schema: StreamSchema | pa.Schema | None = None,
        *,
        time_column: str = "t",
        time_unit: str | None | DefaultUnit = DEFAULT_UNIT,
        lateness: int = 0,
        type_column: str | None = None,
        attributes: list[Attribute] | None = None,
        exist_ok: bool = False,
        **layout: Any,
    ) -> StreamSnapshot:
        """Create an empty stream.

        ``schema`` is a :class:`StreamSchema`, or an Arrow schema of the *source* (the time
        column is taken out, every other column becomes an attribute), or None with explicit
        ``attributes``. ``time_unit`` not given: milliseconds, and a numeric time column's values
        stay numbers in query results (``StreamSchema.time_instants``); a declared unit, or a
        source time column of dates or timestamps, makes them instants.
        """
        declared = not isinstance(time_unit, DefaultUnit)
        unit = time_unit if declared else DEFAULT_TIME_UNIT
        self._require_writable()
        d = self.stream_dir(name)
        if self.has_stream(name):
            if exist_ok:
                return self.stream(name)
            raise UsageError(f"stream {name!r} already exists")
        if isinstance(schema, StreamSchema):
            sch = schema
        elif isinstance(schema, pa.Schema):
            sch = StreamSchema.infer(schema, time_column=time_column, time_unit=unit,
                                     unit_declared=declared, lateness=lateness,
                                     type_column=type_column, **layout)
        else:
            sch = StreamSchema(tuple(attributes or ()), time_unit=unit, time_instants=declared,
                               time_column=time_column, lateness=lateness,
                               type_column=type_column, **layout)
        if d.exists():  # leftovers of a creation that never committed
            shutil.rmtree(d)
        manifest = Manifest(schema=sch)
        deltaio.commit(d / "events", sch.arrow_schema, [], [], manifest, create=True)
        return self.stream(name)

    def drop_stream(self, name: str) -> None:
        """Delete a stream and everything it holds.

        The stream's directory is first renamed into ``.trash/`` (atomic), then deleted, so a
        crash never leaves a half-deleted stream in the catalog; leftovers of such a crash are
        deleted by the next ``drop_stream``. On an object store, where nothing renames, the
        stream's Delta log goes first, newest commit first (every state in between reads as an
        older version of the stream), then its other files (:func:`.remotewrite.delete_stream`)."""
        self._require_writable()
        if not self.has_stream(name):
            raise StreamNotFound(f"no stream {name!r} in {self.uri}")
        from replaydb.store.remotewrite import delete_stream
        from replaydb.store.writer import StreamWriter

        trash = self.path / ".trash"
        trash.mkdir(exist_ok=True)
        with StreamWriter(self, name):
            if self.mirror is not None:
                delete_stream(self.mirror, f"streams/{name}")
            os.rename(self.stream_dir(name), trash / f"{name}.{time.time_ns()}")
        for leftover in list(trash.iterdir()):
            shutil.rmtree(leftover, ignore_errors=True)
        self._writer_snaps.pop(name, None)
        for key in [k for k in self._snapshots if k[0] == name]:
            del self._snapshots[key]

    # ------------------------------------------------------------------ snapshots
    def stream(self, name: str, version: int | None = None) -> StreamSnapshot:
        """The stream pinned at ``version`` (default: the latest)."""
        if not self.has_stream(name):
            raise StreamNotFound(
                f"no stream {name!r} in {self.uri}",
                hint=f"streams: {', '.join(self.streams()) or '(none)'}",
            )
        events = self._events_paths(name)[0]
        latest = deltaio.latest_version(events)
        v = latest if version is None else version
        if v < 0 or v > latest:
            raise StoreError(f"stream {name!r} has no version {v} (latest is {latest})")
        key = (name, v)
        snap = self._snapshots.get(key)
        if snap is None:
            ws = self._writer_snaps.get(name)
            if ws is not None and ws.version == v:
                snap = ws
            else:
                manifest, mv = deltaio.read_manifest(events, v)
                self._mirror_tree(name, manifest.tree_head)
                snap = StreamSnapshot(self, name, v, manifest, mv)
            self._snapshots[key] = snap
            if len(self._snapshots) > 16:
                self._snapshots.popitem(last=False)
        else:
            self._snapshots.move_to_end(key)
        snap.counters.reset()
        return snap

    def _writer_snapshot(self, name: str) -> StreamSnapshot:
        """Latest snapshot for a writer holding the lock (reuses the in-process state)."""
        events = self.stream_dir(name) / "events"
        if not self.has_stream(name):
            raise StreamNotFound(f"no stream {name!r} in {self.uri}")
        latest = deltaio.latest_version(events)
        ws = self._writer_snaps.get(name)
        if ws is not None and ws.version == latest:
            return ws
        manifest, mv = deltaio.read_manifest(events, latest)
        self._mirror_tree(name, manifest.tree_head)
        if self.mirror is not None:  # a writer opens its side tables at their latest versions
            for ref in manifest.side:
                self.mirror.sync(f"streams/{name}/{ref.path}")
        snap = StreamSnapshot(self, name, latest, manifest, mv)
        self._writer_snaps[name] = snap
        return snap

    def _remember_writer_snapshot(self, snap: StreamSnapshot) -> None:
        self._writer_snaps[snap.name] = snap

    # ------------------------------------------------------------------ writing
    def writer(self, name: str, timeout: float = 30.0) -> StreamWriter:
        """The stream's exclusive writer (use as a context manager)."""
        self._require_writable()
        if not self.has_stream(name):
            raise StreamNotFound(f"no stream {name!r} in {self.uri}")
        from replaydb.store.writer import StreamWriter

        return StreamWriter(self, name, timeout)

    def append(self, name: str, data: Any, **options: Any) -> AppendResult:
        """Append a batch (Arrow table / record batch / pandas frame) to a stream; creates the
        stream from the batch's schema if it does not exist (``time_column``, ``time_unit``,
        ``lateness`` options apply then). See :class:`StreamWriter.append` for the options."""
        self._require_writable()
        if not self.has_stream(name):
            tbl = data if isinstance(data, pa.Table) else None
            if tbl is None:
                from replaydb.store.writer import _to_table

                tbl = _to_table(data)
                data = tbl
            create_opts = {k: options.pop(k) for k in ("time_unit", "lateness", "type_column",
                                                       "upper_column", "pmf_column")
                           if k in options}
            self.create_stream(name, tbl.schema, time_column=options.get("time_column") or "t",
                               **create_opts)
        else:
            for k in ("time_unit", "lateness", "type_column", "upper_column", "pmf_column"):
                options.pop(k, None)
        with self.writer(name) as w:
            return w.append(data, **options)

    # ------------------------------------------------------------------ reporting
    def stats(self, name: str | None = None) -> list[dict[str, Any]]:
        names = [name] if name else self.streams()
        return [self.stream(n).stats() for n in names]

    def check(self, name: str | None = None, *, deep: bool = True) -> dict[str, list[str]]:
        """Run every invariant check; returns problems per stream (empty lists = healthy)."""
        from replaydb.store.check import check_stream

        names = [name] if name else self.streams()
        return {n: check_stream(self, n, deep=deep) for n in names}

    def __repr__(self) -> str:
        return f"Store({self.uri!r}{', read_only=True' if self.read_only else ''})"


def _valid_name(name: str) -> bool:
    try:
        check_name(name, "stream")
    except ReplayDBError:
        return False
    return True
