"""The rows of some parts of a table, as one contiguous table.

A read of whole leaves for replay intervals holds rows between intervals that a shared leaf
holds; the replay must not see them. :func:`keep_parts` cuts a read down to its intervals'
parts (what :meth:`.snapshot.StreamSnapshot.read_interval_groups` does with ``kept_only``
where the direct reader cannot decode only the kept rows itself).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from replaydb.store.pagecodec import copy_parts


def keep_parts(tbl: pa.Table, parts: list[tuple[int, int, int]]
               ) -> tuple[pa.Table, list[tuple[int, int, int]]]:
    """``(table, parts)`` of the rows of ``parts`` (``(interval, offset, rows)`` each, in row
    order, disjoint) only, one part after the other, in one chunk: the table as it is when
    the parts cover it from row 0 in order (several chunks combined). O(rows kept +
    parts)."""
    offs = np.fromiter((p[1] for p in parts), np.int64, len(parts))
    rows = np.fromiter((p[2] for p in parts), np.int64, len(parts))
    ends = np.cumsum(rows)
    if int(ends[-1]) != tbl.num_rows or not np.array_equal(offs, ends - rows):
        tbl = keep_rows(tbl, offs, rows)
    elif tbl.num_columns and tbl.column(0).num_chunks > 1:
        tbl = tbl.combine_chunks()
    return tbl, [(k, o, r) for (k, _, r), o in zip(parts, (ends - rows).tolist())]


SLICE_PARTS = 48
"""Up to this many parts, :func:`keep_rows` copies slices; beyond, one take: a slice costs a
fixed amount per part, a take one index array for all of them, so slices win while the parts
are few."""


def _fixed_view(arr: pa.Array) -> np.ndarray | None:
    """The values of a null-free array of 4- or 8-byte values as unsigned integers (a view,
    no copy), or None for any other array."""
    if arr.null_count:
        return None
    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t)):
        return None
    try:
        width = t.bit_width
    except ValueError:
        return None
    if width not in (32, 64):
        return None
    view = np.uint64 if width == 64 else np.uint32
    data = arr.buffers()[1]
    return np.frombuffer(data, dtype=view, count=arr.offset + len(arr))[arr.offset:]


def _keep_rows_fixed(tbl: pa.Table, offs: np.ndarray, rows: np.ndarray) -> pa.Table | None:
    """:func:`keep_rows` of a table of one chunk of null-free 4- and 8-byte columns (what
    the store's reader gives): one compiled copy of the parts per column; None for any
    other table."""
    total = int(rows.sum())
    arrays = []
    for col in tbl.columns:
        if col.num_chunks != 1:
            return None
        arr = col.chunk(0)
        src = _fixed_view(arr)
        if src is None:
            return None
        out = np.empty(total, src.dtype)
        copy_parts(src, offs, rows, out)
        arrays.append(pa.Array.from_buffers(arr.type, total, [None, pa.py_buffer(out)]))
    return pa.Table.from_arrays(arrays, schema=tbl.schema)


def keep_rows(tbl: pa.Table, offs: np.ndarray, rows: np.ndarray) -> pa.Table:
    """The rows ``[offs[i], offs[i] + rows[i])`` of ``tbl`` (sorted, disjoint), as one
    contiguous table: drops the rows of shared leaves that lie between replay intervals.
    A table of one chunk of null-free fixed-width columns is copied part by part in compiled
    code (:func:`_keep_rows_fixed`: one pass, no Arrow call per part); else a few parts are
    sliced and concatenated (a copy of each column, no index array), many are gathered by
    one take. O(rows kept + parts)."""
    fixed = _keep_rows_fixed(tbl, offs, rows) if tbl.num_columns else None
    if fixed is not None:
        return fixed
    if len(offs) <= SLICE_PARTS:
        return pa.concat_tables([tbl.slice(o, r) for o, r in
                                 zip(offs.tolist(), rows.tolist())]).combine_chunks()
    ends = np.cumsum(rows)
    start = np.repeat(offs - (ends - rows), rows)
    return tbl.take(pa.array(start + np.arange(int(ends[-1]))))
