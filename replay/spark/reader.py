"""Reading a pinned stream inside a Spark task, without opening the store.

The driver pins every stream (a :class:`~replaydb.store.snapshot.StreamSnapshot`) and ships to
each task only what its reads need (:class:`StreamShipment`): the stream's schema, the absolute
path of its events table, the data files by id, and the leaf entries of the TAB+-tree that
overlap the task's time ranges (time range, first seq, count, file id, row group - exact event
counts without reading data). Inside the task, :class:`ShippedStream` is a stream snapshot over
that leaf subset: the same range reads as the snapshot's (row groups of the overlapping leaves,
partial boundary leaves sliced by time), so :class:`~replaydb.replay.Replay` drives it exactly as
it drives a local snapshot - same merge of several streams by ``(t, stream position, seq)``, same
batches. Nothing of the store (manifest, Delta log, indexes) is touched by executors; the data
files must be readable from every executor at the same path (a shared filesystem, or one
machine), or the store is on an object store, which each task reads by URI
(:class:`RemoteRef`: byte ranges of the data files, :mod:`replaydb.store.remotefile`).

A subset of leaves answers every range lookup inside the ranges it was cut for: a leaf that
overlaps a requested range is in the subset, and the leaves left out overlap none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from replaydb.store.location import RemoteLocation
from replaydb.store.remotefile import RemoteFiles
from replaydb.store.schema import StreamSchema
from replaydb.store.snapshot import IOCounters, ParquetCache, StreamSnapshot
from replaydb.store.tree import TABTree

LEAF_FIELDS = ("t_min", "t_max", "seq_min", "count", "file_id", "rg")


@dataclass(frozen=True)
class RemoteRef:
    """A store on an object store, as a task reaches it: its URI, its storage options, and the
    driver's local name of its root (the data files' local names start with it)."""

    uri: str
    options: tuple[tuple[str, str], ...]
    root: str


_REMOTE_CACHES: dict[RemoteRef, ParquetCache] = {}
"""Open data files of remote stores in this process, per store (kept across tasks)."""


def remote_cache(ref: RemoteRef) -> ParquetCache:
    """The process's open-file cache of the remote store ``ref`` (made on first use)."""
    got = _REMOTE_CACHES.get(ref)
    if got is None:
        location = RemoteLocation(ref.uri, dict(ref.options))
        got = _REMOTE_CACHES[ref] = ParquetCache(remote=RemoteFiles(location, Path(ref.root)))
    return got


@dataclass(frozen=True)
class StreamShipment:
    """What a task needs to read one stream (picklable; built on the driver)."""

    name: str
    version: int
    schema: StreamSchema
    events_dir: str
    files: dict[int, str]
    leaves: dict[str, np.ndarray]
    remote: RemoteRef | None = None

    @property
    def n_leaves(self) -> int:
        return len(self.leaves["t_min"])


def leaf_ranges(snap: Any, ranges: list[tuple[int | None, int | None]]) -> list[tuple[int, int]]:
    """Leaf index ranges ``[i, j)`` of ``snap`` overlapping each time range."""
    return [snap.tree.leaf_range_for_time(a, b) for a, b in ranges]


def ship(snap: Any, ranges: list[tuple[int | None, int | None]] | None) -> StreamShipment:
    """The shipment of ``snap`` restricted to the leaves overlapping ``ranges`` (None: all)."""
    lv = snap.tree.leaves
    if ranges is None:
        idx = np.arange(lv.n, dtype=np.int64)
    else:
        parts = [np.arange(i, j, dtype=np.int64) for i, j in leaf_ranges(snap, ranges) if j > i]
        idx = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    leaves = {f: np.ascontiguousarray(lv.col(f)[idx]) for f in LEAF_FIELDS}
    used = set(np.unique(leaves["file_id"]).tolist())
    files = {fid: info.path for fid, info in snap.files.items() if fid in used}
    loc = getattr(snap.store, "location", None)
    remote = None if loc is None else RemoteRef(loc.uri, tuple(sorted(loc.options.items())),
                                                str(snap.store.path))
    return StreamShipment(snap.name, int(snap.version), snap.schema, str(snap.events_dir), files,
                          leaves, remote)


class _Level:
    """The leaf level's columns, as :class:`~replaydb.store.tree.NodeLevel` exposes them."""

    def __init__(self, cols: dict[str, np.ndarray]) -> None:
        self._cols = cols
        self.n = len(cols["t_min"])

    def __len__(self) -> int:
        return self.n

    def col(self, name: str) -> np.ndarray:
        return self._cols[name]


class LeafIndex:
    """The leaf level of a TAB+-tree (a subset of it), with the tree's time lookup."""

    leaf_range_for_time = TABTree.leaf_range_for_time
    leaf_ranges_for_times = TABTree.leaf_ranges_for_times

    def __init__(self, leaves: dict[str, np.ndarray]) -> None:
        self.leaves = _Level(leaves)

    @property
    def n_leaves(self) -> int:
        return self.leaves.n


@dataclass
class _File:
    path: str


class ShippedStream(StreamSnapshot):
    """A :class:`StreamSnapshot` rebuilt in a task from a :class:`StreamShipment`.

    Only the read paths are available (``iter_batches``, ``read``, ``read_intervals``,
    ``read_leaves``); aggregation, histograms and side tables need the store.
    """

    def __init__(self, shipment: StreamShipment, cache: ParquetCache | None = None) -> None:
        # deliberately not calling StreamSnapshot.__init__: it loads the tree from the store
        self.store = None
        self.name = shipment.name
        self.version = shipment.version
        self.manifest = None
        self.manifest_version = shipment.version
        self.schema = shipment.schema
        self.events_dir = Path(shipment.events_dir)
        self.dir = self.events_dir.parent
        self.specs = []
        self.tree = LeafIndex(shipment.leaves)  # type: ignore[assignment]
        self.files = {fid: _File(p) for fid, p in shipment.files.items()}  # type: ignore[misc]
        self.counters = IOCounters()
        if shipment.remote is not None:
            self._cache = remote_cache(shipment.remote)
        else:
            self._cache = cache or ParquetCache()
        self._new_caches()

    @property
    def n_events(self) -> int:
        return int(self.tree.leaves.col("count").sum())
