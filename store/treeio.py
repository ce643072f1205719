"""Persistence of the TAB+-tree as a chain of segment files.

Each commit that changes the tree writes one *segment*: a small Parquet file in the stream's
``tree/`` folder with the rows of every node that changed (the new or rewritten leaf entries and
the right spine above them), the size of every level afterwards, the data files added and removed,
and the name of its parent segment. Every :data:`SNAPSHOT_EVERY` segments (or when a commit rewrites
most of the tree) the segment is a *base*: it holds every node and file, and the chain starts anew.

Loading replays the chain from its newest base to the head named by the manifest: O(changed rows),
so the tree is never rebuilt from the data. Segment files are immutable and named uniquely; a
segment that no manifest reaches (a crashed commit) is garbage, removed by ``replaydb vacuum``.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.errors import CorruptionError
from replaydb.store.manifest import FileInfo
from replaydb.store.tree import NodeLevel, TABTree, node_dtypes

SNAPSHOT_EVERY = 32
TREE_DIR = "tree"


def _level_rows(tree: TABTree, k: int, start: int) -> dict[str, np.ndarray]:
    lv = tree.levels[k]
    cols = lv.as_dict(start, len(lv))
    n = len(lv) - start
    out: dict[str, np.ndarray] = {"level": np.full(n, k, dtype=np.int8),
                                  "idx": np.arange(start, len(lv), dtype=np.int64)}
    leaf_cols = node_dtypes(tree.specs, leaf=True)
    for name, dt in leaf_cols.items():
        out[name] = cols[name] if name in cols else np.full(n, -1, dtype=dt)
    return out


def write_segment(
    stream_dir: Path,
    tree: TABTree,
    first_changed: list[int],
    files: dict[int, FileInfo],
    files_added: list[FileInfo],
    files_removed: list[int],
    parent: str | None,
    chain: int,
) -> tuple[str, int]:
    """Write the segment for a commit; returns ``(relative name, new chain length)``.

    ``first_changed[k]`` is the first changed node of level ``k`` (from
    :meth:`TABTree.replace_leaves_from`); a base segment is written instead when the chain is
    long or the change covers most of the tree.
    """
    changed = sum(len(lv) - (first_changed[k] if k < len(first_changed) else 0)
                  for k, lv in enumerate(tree.levels))
    total = sum(len(lv) for lv in tree.levels)
    base = parent is None or chain + 1 >= SNAPSHOT_EVERY or changed * 2 >= total
    parts = []
    for k in range(len(tree.levels)):
        start = 0 if base else (first_changed[k] if k < len(first_changed) else 0)
        parts.append(_level_rows(tree, k, min(start, len(tree.levels[k]))))
    cols = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    meta = {
        "parent": None if base else parent,
        "base": base,
        "level_sizes": [len(lv) for lv in tree.levels],
        "files_added": [asdict(f) for f in (files.values() if base else files_added)],
        "files_removed": [] if base else list(files_removed),
    }
    table = pa.table(cols).replace_schema_metadata({"replaydb.segment": json.dumps(meta)})
    folder = stream_dir / TREE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{TREE_DIR}/seg-{uuid.uuid4().hex}.parquet"
    tmp = stream_dir / (name + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, stream_dir / name)
    return name, 1 if base else chain + 1


def segment_parent(path: Path) -> str | None:
    """The parent segment a segment file names (None for a base segment, or a file that is
    not a readable segment: loading the tree reports that)."""
    try:
        meta = pq.read_schema(path).metadata or {}
        return json.loads(meta[b"replaydb.segment"])["parent"]
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return None


def load_tree(stream_dir: Path, head: str | None, tree: TABTree) -> dict[int, FileInfo]:
    """Replay the chain ending at ``head`` into the empty ``tree``; returns the live files."""
    files: dict[int, FileInfo] = {}
    if head is None:
        return files
    chain: list[tuple[pa.Table, dict]] = []
    name: str | None = head
    while name is not None:
        try:
            t = pq.ParquetFile(stream_dir / name).read()
        except (FileNotFoundError, OSError) as exc:
            raise CorruptionError(f"tree segment {name} is missing or unreadable: {exc}") from exc
        meta = json.loads(t.schema.metadata[b"replaydb.segment"])
        chain.append((t, meta))
        if len(chain) > 10 * SNAPSHOT_EVERY:
            raise CorruptionError("tree segment chain does not end in a base segment")
        name = meta["parent"]
    if not chain[-1][1]["base"]:
        raise CorruptionError("tree segment chain does not start with a base segment")
    for t, meta in reversed(chain):
        _apply(tree, t, meta)
        for fid in meta["files_removed"]:
            files.pop(fid, None)
        for f in meta["files_added"]:
            files[f["id"]] = FileInfo(**f)
    return files


def _apply(tree: TABTree, t: pa.Table, meta: dict) -> None:
    sizes = meta["level_sizes"]
    levels = t.column("level").to_numpy()
    idx = t.column("idx").to_numpy()
    while len(tree.levels) < len(sizes):
        tree.levels.append(NodeLevel(node_dtypes(tree.specs, leaf=False)))
    for k, size in enumerate(sizes):
        lv = tree.levels[k]
        sel = np.nonzero(levels == k)[0]
        if len(sel):
            start = int(idx[sel[0]])
            if not np.array_equal(idx[sel], np.arange(start, start + len(sel))):
                raise CorruptionError("tree segment rows are not contiguous")
            if start > len(lv):
                raise CorruptionError(f"tree segment writes level {k} at {start}, "
                                      f"level has {len(lv)} nodes")
            rows = {name: t.column(name).to_numpy()[sel] for name in lv.names}
            lv.set_from(start, rows)
        if size > len(lv):
            raise CorruptionError(f"tree level {k} should have {size} nodes, has {len(lv)}")
        lv.truncate(size)
    del tree.levels[len(sizes):]
    if not tree.levels:
        tree.levels = [NodeLevel(node_dtypes(tree.specs, leaf=True))]
