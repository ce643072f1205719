"""LSM indexes as side tables of a stream (see :mod:`replaydb.store.sides`).

The stream's manifest pins each index at a Delta version (``SideTableRef`` of kind ``lsm``, name
``index/<column>``, path ``indexes/<column>``). This module registers the kind with the store:

* the *reader* opens the index at the pinned version (snapshot isolation) and adds ``check``
  against the stream's data: every event with a non-null key is in the index exactly once;
* the *writer* applies a stream commit to the index before the events commit: a tombstone for
  ``rewrite_from`` (late events rewrote the tail) plus the new entries, flushed as one run in one
  Delta commit; ``restore`` rolls back an index a crashed writer left ahead of its pin;
* the *garbage finder* lists, for ``replaydb vacuum``, the run files (and rank codes) an index
  writer wrote and never committed (:func:`index_garbage`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import StoreError
from replaydb.indexes import deltalog
from replaydb.indexes.lsm import LSMIndex
from replaydb.store import sides
from replaydb.store.manifest import SideTableRef

KIND = "lsm"


def key_type_of(kind: str) -> str:
    """Index key type for an attribute kind."""
    return {"float64": "float64", "int64": "int64", "bool": "int64", "string": "string"}[kind]


def index_ref(column: str, key_type: str, version: int) -> SideTableRef:
    return SideTableRef(f"index/{column}", KIND, f"indexes/{column}", version,
                        {"column": column, "key_type": key_type})


def index_path(stream_dir: Path, column: str) -> Path:
    return stream_dir / "indexes" / column


def _key_array(col: pa.ChunkedArray | pa.Array) -> Any:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_boolean(col.type):
        return col.cast(pa.int64())
    return col


class PinnedIndex:
    """An index opened at its pinned version; everything else is the :class:`LSMIndex` API."""

    def __init__(self, stream_dir: Path, ref: SideTableRef) -> None:
        self.ref = ref
        self.column = ref.options["column"]
        self.index = LSMIndex.open(str(stream_dir / ref.path), version=ref.version)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)

    def check(self, snapshot: Any, deep: bool = True) -> list[str]:
        """Structure (runs sorted, levels, metadata); with ``deep`` also every entry against the
        stream's data (each event with a non-null key exactly once)."""
        if not deep:
            return self.index.check()
        tbl = snapshot.read(columns=[self.column])
        keys = _key_array(tbl.column(self.column))
        return self.index.check((keys, tbl.column("seq").to_numpy(), tbl.column("t").to_numpy()))


class IndexWriter:
    """Applies stream commits to the index (latest version)."""

    def __init__(self, stream_dir: Path, ref: SideTableRef) -> None:
        self.path = str(stream_dir / ref.path)
        self.column = ref.options["column"]

    def latest_version(self) -> int:
        try:
            return LSMIndex.open(self.path).version
        except Exception:  # no table yet (creation never committed)
            return -1

    def apply(self, events: pa.Table, rewrite_from: int | None, **_: Any) -> int | None:
        idx = LSMIndex.open(self.path)
        if rewrite_from is not None:
            idx.delete_from_seq(rewrite_from)
        idx.add(_key_array(events.column(self.column)), events.column("seq").to_numpy(),
                events.column("t").to_numpy())
        return idx.flush()

    def restore(self, version: int) -> None:
        idx = LSMIndex.open(self.path)
        if idx.version > version:
            idx.restore(version)


def build_local(snapshot: Any, column: str, path: Path) -> SideTableRef:
    """Back-fill a new index from a stream's stored events in this process (no Spark)."""
    kind = snapshot.schema.attr(column).kind
    kt = key_type_of(kind)
    idx = LSMIndex.create(str(path), kt, exist_ok=False)
    version = idx.version
    if snapshot.n_events:
        keys, seqs, ts = [], [], []
        for tbl in snapshot.iter_batches(columns=[column], max_leaves=1024):
            keys.append(_key_array(tbl.column(column)))
            seqs.append(tbl.column("seq").to_numpy())
            ts.append(tbl.column("t").to_numpy())
        version = idx.bulk_add(pa.concat_arrays(keys), np.concatenate(seqs), np.concatenate(ts))
    return index_ref(column, kt, version)


def index_garbage(stream_dir: Path) -> list[Path]:
    """Files of the index tables under ``stream_dir/indexes`` that no readable version of their
    table references: run files (and their rank codes) an index writer wrote and never committed.
    Versions whose log entries Delta's log cleanup removed cannot be read, so the oldest
    readable version is where the references start (:meth:`LSMIndex.vacuum`). O(versions x
    files) per index; the caller holds the stream's writer lock."""
    out: list[Path] = []
    root = stream_dir / "indexes"
    if not root.is_dir():
        return out
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        if not deltalog.is_index_table(sub):
            continue
        idx = LSMIndex.open(sub)
        first = 0
        while first < idx.version:
            try:
                deltalog.load(sub, first)
                break
            except StoreError:
                first += 1
        out += [sub / n for n in idx.vacuum(first, dry_run=True)]
    return out


sides.register(KIND, reader=PinnedIndex, writer=IndexWriter, garbage=index_garbage)
