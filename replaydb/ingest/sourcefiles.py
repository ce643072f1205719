"""Opening ingest sources: local files, or objects named by object-store URIs.

A source may be a local path or an object-store URI of the kinds a store may live on
(``s3://bucket/raw/day-1.parquet``, ``az://container/raw/*.csv``,
``abfss://container@account.dfs.core.windows.net/raw/``): a file, a glob in its last
component, a directory (every object under it whose names do not start with ``.`` or ``_``) or
a Delta table. The storage options are resolved once, on the driver (its environment's
standard variables overridden by the options given, :class:`SourceOptions`), and travel with
the read tasks, so executors reach the sources with no environment or shared directory of
their own. Every reader opens its source through :func:`open_random` or :func:`open_stream`,
so local and remote sources are read by the same code.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from replaydb.errors import UsageError
from replaydb.store.location import RemoteLocation, is_remote, kind_of, shared_location

GLOB_CHARS = "*?["


@dataclass(frozen=True)
class SourceOptions:
    """Storage options of the sources on object stores, per kind of store (``S3``,
    ``Azure``), resolved on the driver (picklable; empty when every source is local)."""

    by_kind: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    @classmethod
    def resolve(cls, sources: list[str], given: Mapping[str, str] | None = None,
                store: RemoteLocation | None = None) -> SourceOptions:
        """The options for the URIs among ``sources``: the environment's standard variables
        of each URI's kind, overridden by ``given`` (delta-rs ``storage_options`` keys; a key
        the kind does not know is a UsageError). Without ``given``, sources on the same kind
        of store as ``store`` take the store's options (its credentials and endpoint)."""
        out: dict[str, tuple[tuple[str, str], ...]] = {}
        for s in sources:
            if not is_remote(s):
                continue
            kind = kind_of(s)
            if kind.name in out:
                continue
            if given is None and store is not None and store.kind.name == kind.name:
                opts = dict(store.options)
            else:
                opts = kind.options(dict(given or {}), s)
            out[kind.name] = tuple(sorted(opts.items()))
        return cls(tuple(sorted(out.items())))

    def options_for(self, uri: str) -> dict[str, str]:
        kind = kind_of(uri)
        for name, opts in self.by_kind:
            if name == kind.name:
                return dict(opts)
        return kind.options({}, uri)

    def locate(self, uri: str) -> tuple[RemoteLocation, str]:
        """The location of the directory holding object ``uri``, and the object's name in it."""
        scheme, _, rest = uri.rstrip("/").partition("://")
        head, sep, name = rest.rpartition("/")
        if not sep or not name:
            raise UsageError(f"source {uri}: names a bucket, not an object or a folder in it")
        return (shared_location(f"{scheme}://{head}",
                                tuple(sorted(self.options_for(uri).items()))), name)


@contextlib.contextmanager
def open_random(path: str, so: SourceOptions | None) -> Iterator[pa.NativeFile]:
    """``path`` opened for reads at any offset (Parquet footers and row groups)."""
    if not is_remote(path):
        with pa.OSFile(path, "rb") as f:
            yield f
        return
    loc, name = (so or SourceOptions()).locate(path)
    with loc.errors(name):
        f = loc.fs.open_input_file(loc.key(name))
    with f:
        yield f


@contextlib.contextmanager
def open_stream(path: str, so: SourceOptions | None) -> Iterator[pa.NativeFile]:
    """``path`` opened for one pass from its start, decompressed as its extension says
    (``.gz``, ``.bz2``, ``.zst``, ``.lz4``)."""
    if not is_remote(path):
        with pa.input_stream(path, compression="detect") as f:
            yield f
        return
    loc, name = (so or SourceOptions()).locate(path)
    with loc.errors(name):
        f = loc.fs.open_input_stream(loc.key(name), compression="detect")
    with f:
        yield f


def file_version(path: str, so: SourceOptions | None) -> tuple[int, int]:
    """The size and modification time (ns) of source ``path`` (what identifies its
    contents for the batch fingerprint)."""
    if not is_remote(path):
        st = os.stat(path)
        return st.st_size, st.st_mtime_ns
    loc, name = (so or SourceOptions()).locate(path)
    with loc.errors(name):
        info = loc.fs.get_file_info(loc.key(name))
    mtime = int(info.mtime.timestamp() * 1e9) if info.mtime is not None else 0
    return int(info.size or 0), mtime


def expand_remote(uri: str, so: SourceOptions) -> tuple[list[str], bool]:
    """The objects ``uri`` names (a file, a glob in its last component, or every object under
    a folder whose names do not start with ``.`` or ``_``), as URIs in name order, and whether
    ``uri`` is a Delta table (a folder holding ``_delta_log``; its objects are then the
    table's current data files)."""
    loc, name = so.locate(uri)
    if any(c in loc.uri.partition("://")[2] for c in GLOB_CHARS):
        raise UsageError(f"source {uri}: a pattern may only be in the last part of the name")
    if any(c in name for c in GLOB_CHARS):
        hits = [e.rel for e in loc.list("") if e.size >= 0 and fnmatch.fnmatchcase(e.rel, name)]
        if not hits:
            raise UsageError(f"no object matches {uri!r}")
        return [f"{loc.uri}/{h}" for h in hits], False
    with loc.errors(name):
        info = loc.fs.get_file_info(loc.key(name))
    if info.type == pafs.FileType.File:
        return [uri], False
    if info.type != pafs.FileType.Directory:
        raise UsageError(f"source {uri} does not exist")
    under = [e for e in loc.list(name, recursive=True) if e.size >= 0]
    if any(e.rel.startswith(f"{name}/_delta_log/") for e in under):
        from deltalake import DeltaTable

        table = DeltaTable(f"{loc.uri}/{name}", storage_options=dict(loc.options))
        return sorted(table.file_uris()), True
    keep = [e.rel for e in under
            if not any(p.startswith((".", "_")) for p in e.rel[len(name) + 1:].split("/"))]
    return [f"{loc.uri}/{r}" for r in keep], False
