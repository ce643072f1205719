"""Where a store lives: a local directory or an object store, named by a URI.

A store is named by a local path, a ``file://`` URI, an ``s3://bucket/prefix`` URI
(:mod:`.s3kind`) or an Azure URI, ``az://container/prefix`` or
``abfss://container@account.dfs.core.windows.net/prefix`` (:mod:`.azurekind`). For an object
store, credentials and the endpoint come from the kind's standard environment variables and
from explicit *storage options*, the keys delta-rs takes in its ``storage_options``
(``AWS_ENDPOINT_URL``, ``AZURE_STORAGE_ACCOUNT_KEY``, ...; case does not matter); an explicit
option wins over the environment.

:class:`RemoteLocation` reads objects through Arrow's file system for that kind of store and
counts what it asks for (:class:`FetchCounters`: requests and bytes), so that a benchmark and
EXPLAIN ANALYZE can report them. Every failure of the object store becomes a one-line
:class:`~replaydb.errors.StoreError` naming the URI and what to set (:func:`remote_error`).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from replaydb.errors import StoreError, UsageError
from replaydb.store.azurekind import AzureKind
from replaydb.store.s3kind import S3Kind

if TYPE_CHECKING:
    import numpy as np

CONCURRENT_REQUESTS = 32
"""Ranged GETs of one read in flight at once: an object store answers each after a
round trip of tens of milliseconds and serves many in parallel, so a read of many short
ranges (a planned query's chunks) takes a few round trips rather than one per eight."""

KINDS = (S3Kind(), AzureKind())
"""The kinds of object store a store may live on."""

OTHER_OBJECT_SCHEMES = ("gs", "gcs")
"""URI schemes of object stores replaydb recognises but does not read or write yet."""


def kind_of(uri: str) -> S3Kind | AzureKind:
    """The kind of object store ``uri`` names (UsageError for any other URI)."""
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
    for kind in KINDS:
        if scheme in kind.schemes:
            return kind
    if scheme in OTHER_OBJECT_SCHEMES:
        raise UsageError(f"{uri}: stores on {scheme}:// are not supported yet; replaydb reads "
                         "stores on local disks, S3-compatible object stores (s3://) and Azure "
                         "(az://, abfss://)")
    raise UsageError(f"{uri}: expected " + " or ".join(k.usage for k in KINDS))


def is_remote(path: Any) -> bool:
    """Whether ``path`` names a store on an object store (a URI with an object-store scheme)."""
    if not isinstance(path, str) or "://" not in path:
        return False
    scheme = path.split("://", 1)[0].lower()
    return scheme in OTHER_OBJECT_SCHEMES or any(scheme in k.schemes for k in KINDS)


def local_path(path: str | os.PathLike[str]) -> Path:
    """The local directory a local store name means (a path or a ``file://`` URI)."""
    text = os.fspath(path)
    if isinstance(text, str) and text.startswith("file://"):
        parsed = urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise UsageError(f"{text}: a file:// URI names this machine's files (file:///path)")
        text = parsed.path
    return Path(text).resolve()


def parse_options(pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (the CLI's repeatable ``--storage-option``) as a dict."""
    out: dict[str, str] = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--storage-option {p!r}: expected KEY=VALUE "
                             "(e.g. AWS_ENDPOINT_URL=http://127.0.0.1:9000)")
        out[key.strip()] = value
    return out


@dataclass
class FetchCounters:
    """What reads from an object store cost: requests (GET of a whole object or a byte range,
    HEAD, LIST) and bytes received; of those, the GETs of byte ranges (``ranges``, the data
    files' chunks and footers) and their bytes. Thread-safe through :meth:`add`."""

    requests: int = 0
    bytes: int = 0
    lists: int = 0
    ranges: int = 0
    range_bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, requests: int = 0, nbytes: int = 0, lists: int = 0, ranges: int = 0,
            range_bytes: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.bytes += nbytes
            self.lists += lists
            self.ranges += ranges
            self.range_bytes += range_bytes

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "bytes": self.bytes, "lists": self.lists,
                "ranges": self.ranges, "range_bytes": self.range_bytes}


@dataclass(frozen=True)
class RemoteEntry:
    """One object under a listed prefix: its path relative to the store root, its size (-1
    for a directory) and when it was written (seconds since the epoch; 0 when unknown)."""

    rel: str
    size: int
    mtime: float = 0.0


class RemoteLocation:
    """A store's root on an object store (see the module docstring).

    Paths given to the methods are relative to the store root, with ``/`` separators.
    Objects a store writes are immutable except the few it replaces whole (its configuration,
    a Delta log's ``_last_checkpoint``); reads here take no lock."""

    def __init__(self, uri: str, options: Mapping[str, str] | None = None) -> None:
        self.kind = kind_of(uri)
        self.uri = uri.rstrip("/")
        self.bucket, prefix = self.kind.parse(self.uri)
        self.root = f"{self.bucket}/{prefix}" if prefix else self.bucket
        self.options = self.kind.options(options or {}, uri)
        self.fs = self.kind.filesystem(self.options, self.uri)
        self.counters = FetchCounters()
        self.has_credentials = self.kind.has_credentials(self.options)

    # ------------------------------------------------------------------ naming
    def key(self, rel: str) -> str:
        """The file system path (``bucket/prefix/rel``) of ``rel``."""
        return f"{self.root}/{rel}" if rel else self.root

    def uri_of(self, rel: str) -> str:
        """The URI of ``rel`` (what delta-rs and error messages are given)."""
        return f"{self.uri}/{rel}" if rel else self.uri

    # ------------------------------------------------------------------ reading
    def list(self, rel: str, *, recursive: bool = False) -> list[RemoteEntry]:
        """Objects under the directory ``rel`` (sorted by path; [] when there is none);
        with ``recursive=False`` also its immediate sub-directories (size -1)."""
        sel = pafs.FileSelector(self.key(rel), allow_not_found=True, recursive=recursive)
        with self.errors(rel):
            infos = self.fs.get_file_info(sel)
        self.counters.add(requests=1, lists=1)
        cut = len(self.root) + 1
        out = [RemoteEntry(i.path[cut:], i.size if i.type == pafs.FileType.File else -1,
                           i.mtime.timestamp() if i.mtime is not None else 0.0)
               for i in infos if i.type in (pafs.FileType.File, pafs.FileType.Directory)]
        return sorted(out, key=lambda e: e.rel)

    def bucket_exists(self) -> bool:
        """Whether the URI's bucket exists (one request)."""
        with self.errors(""):
            info = self.fs.get_file_info(self.bucket)
        self.counters.add(requests=1)
        return info.type == pafs.FileType.Directory

    def read(self, rel: str) -> bytes:
        """The whole object ``rel`` (one GET; FileNotFoundError when there is none)."""
        with self.errors(rel):
            with self.fs.open_input_stream(self.key(rel), compression=None) as f:
                data = f.read()
        self.counters.add(requests=1, nbytes=len(data))
        return data

    def open_file(self, rel: str) -> pafs.NativeFile:
        """Object ``rel`` opened for reads of byte ranges (one HEAD request, which gives its
        size: ``.size()``); FileNotFoundError when there is none."""
        with self.errors(rel):
            f = self.fs.open_input_file(self.key(rel))
        self.counters.add(requests=1)
        return f

    def read_ranges_into(self, f: pafs.NativeFile, rel: str,
                         ranges: Sequence[tuple[int, int]], dest: np.ndarray) -> None:
        """Read the byte ranges ``[start, end)`` of object ``rel`` opened as ``f`` into
        ``dest[start:end]`` (a writable uint8 array of the object's size), one GET each,
        issued concurrently (up to :data:`CONCURRENT_REQUESTS` at a time), with no
        intermediate copy of the bytes."""
        def one(r: tuple[int, int]) -> None:
            view = memoryview(dest[r[0]:r[1]])
            with self.errors(rel):
                stream = f.get_stream(r[0], r[1] - r[0])
                at = 0
                while at < len(view):
                    got = stream.readinto(view[at:])
                    if not got:
                        raise OSError(f"object ended at byte {r[0] + at}, before {r[1]}")
                    at += got

        if len(ranges) == 1:
            one(ranges[0])
        elif ranges:
            with ThreadPoolExecutor(min(CONCURRENT_REQUESTS, len(ranges))) as pool:
                list(pool.map(one, ranges))
        n = sum(b - a for a, b in ranges)
        self.counters.add(requests=len(ranges), nbytes=n, ranges=len(ranges), range_bytes=n)

    # ------------------------------------------------------------------ writing
    def put(self, rel: str, data: bytes) -> None:
        """Write object ``rel`` (whole; replaces one of the same name). One PUT."""
        with self.errors(rel):
            with self.fs.open_output_stream(self.key(rel), compression=None) as f:
                f.write(data)
        self.counters.add(requests=1)

    def put_file(self, rel: str, path: str | os.PathLike[str]) -> int:
        """Write object ``rel`` from the local file ``path``, streamed in 8 MiB blocks (one
        upload; replaces one of the same name); returns the bytes written."""
        n = 0
        with self.errors(rel):
            with open(path, "rb") as src, \
                    self.fs.open_output_stream(self.key(rel), compression=None) as f:
                while block := src.read(8 << 20):
                    f.write(block)
                    n += len(block)
        self.counters.add(requests=1)
        return n

    def delete(self, rels: Sequence[str]) -> None:
        """Delete the objects ``rels`` (missing ones are skipped), in the order given."""
        for rel in rels:
            with self.errors(rel):
                try:
                    self.fs.delete_file(self.key(rel))
                except FileNotFoundError:
                    pass
            self.counters.add(requests=1)

    def delete_tree(self, rel: str) -> None:
        """Delete everything under the directory ``rel`` (and its directory markers)."""
        with self.errors(rel):
            try:
                self.fs.delete_dir(self.key(rel))
            except FileNotFoundError:
                pass
        self.counters.add(requests=1)

    def write_options(self) -> dict[str, str]:
        """The storage options delta-rs commits with, such that two commits of one version
        cannot both succeed (:meth:`.s3kind.S3Kind.write_options`,
        :meth:`.azurekind.AzureKind.write_options`)."""
        return self.kind.write_options(self.options)

    @contextmanager
    def errors(self, rel: str) -> Iterator[None]:
        """Turn an object-store failure while touching ``rel`` into a clear StoreError."""
        try:
            yield
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise remote_error(self.uri_of(rel), exc, self.has_credentials, self.kind) from None


@functools.lru_cache(maxsize=64)
def shared_location(uri: str, options: tuple[tuple[str, str], ...]) -> RemoteLocation:
    """The :class:`RemoteLocation` of ``uri`` with ``options`` (sorted key/value pairs, as a
    picklable value carries them), made once per process: the tasks of a job that reach the
    same place share its file system client."""
    return RemoteLocation(uri, dict(options))


def remote_error(uri: str, exc: BaseException, credentials: bool = True,
                 kind: S3Kind | AzureKind | None = None) -> StoreError:
    """A one-line StoreError for a failure of the object store behind ``uri`` (of ``kind``,
    by default the URI's); ``credentials``: whether any were configured (a refusal without
    them says so)."""
    kind = kind or kind_of(uri)
    text = str(exc)
    for needles, what, hint in kind.failures:
        if any(n in text for n in needles):
            if what == "permission denied" and not credentials:
                what, hint = kind.no_credentials
            return StoreError(f"{uri}: {what}", hint=hint)
    if not credentials:  # refused, unexplained, and unsigned: say what is missing
        return StoreError(f"{uri}: {kind.no_credentials[0]}", hint=kind.no_credentials[1])
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return StoreError(f"{uri}: the object store failed: {first}", hint=kind.fallback_hint)
