"""Finding and compacting the indexes of a store (``replaydb compact STORE [STREAM]``).

Layout (owned by the store): the index of attribute ``column`` of stream ``stream`` lives at
``<store>/streams/<stream>/indexes/<column>/``.

Compaction never changes what an index answers, so the new index version it returns may be
recorded by the store for the current stream version (the store keeps that mapping in its
manifest; readers pinned to older versions keep reading the files they pinned, which are never
deleted by compaction).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replaydb.indexes import deltalog
from replaydb.indexes.lsm import LSMIndex


@dataclass(frozen=True)
class IndexLocation:
    stream: str
    column: str
    path: Path


def index_dir(store_path: str | os.PathLike[str], stream: str, column: str) -> Path:
    """Folder of the index of ``column`` of ``stream``."""
    return Path(store_path) / "streams" / stream / "indexes" / column


def list_indexes(
    store_path: str | os.PathLike[str], stream: str | None = None
) -> list[IndexLocation]:
    """Indexes present in a store (optionally of one stream), sorted by stream and column."""
    root = Path(store_path) / "streams"
    streams = (
        [stream]
        if stream is not None
        else sorted(p.name for p in root.iterdir() if p.is_dir())
        if root.is_dir()
        else []
    )
    out = []
    for s in streams:
        idx_root = root / s / "indexes"
        if not idx_root.is_dir():
            continue
        for col in sorted(p for p in idx_root.iterdir() if p.is_dir()):
            if deltalog.is_index_table(col):
                out.append(IndexLocation(s, col.name, col))
    return out


def compact_stream_indexes(
    store_path: str | os.PathLike[str],
    stream: str | None = None,
    *,
    full: bool = False,
    commit_metadata: dict[str, Any] | None = None,
) -> dict[tuple[str, str], int | None]:
    """Compact every index of the store (or of one stream).

    ``full=False`` runs the level policy (a no-op for indexes that need nothing); ``full=True``
    merges all runs of each index into one. Returns {(stream, column): new version or None}.
    """
    result: dict[tuple[str, str], int | None] = {}
    for loc in list_indexes(store_path, stream):
        with LSMIndex.open(loc.path) as idx:
            v = None
            for _ in range(16):
                step = idx.compact(full=full, commit_metadata=commit_metadata)
                if step is None:
                    break
                v = step
                if full:
                    break
            result[(loc.stream, loc.column)] = v
    return result


def index_stats(
    store_path: str | os.PathLike[str], stream: str | None = None
) -> list[dict[str, Any]]:
    """``LSMIndex.stats()`` of every index of the store (latest versions), for ``replaydb stats``."""
    out = []
    for loc in list_indexes(store_path, stream):
        with LSMIndex.open(loc.path) as idx:
            out.append({"stream": loc.stream, "column": loc.column, **idx.stats()})
    return out
