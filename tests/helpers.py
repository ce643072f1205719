"""Test helpers: a pure-Python model of a stream to compare the store against, and the ways the
operator tests drive an operator (push and collect, snapshot and restore)."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa


class StreamModel:
    """What the store must hold: events in (t, arrival) order, seq = position."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, float, int]] = []  # (t, arrival, x, k)
        self.arrival = 0

    def append(self, t: np.ndarray, x: np.ndarray, k: np.ndarray) -> None:
        for ti, xi, ki in zip(t.tolist(), x.tolist(), k.tolist()):
            self.rows.append((ti, self.arrival, xi, ki))
            self.arrival += 1
        self.rows.sort(key=lambda r: (r[0], r[1]))

    @property
    def t_max(self) -> int | None:
        return max(r[0] for r in self.rows) if self.rows else None

    def table(self) -> pa.Table:
        return pa.table({
            "t": pa.array([r[0] for r in self.rows], pa.int64()),
            "seq": pa.array(np.arange(len(self.rows)), pa.int64()),
            "x": pa.array([r[2] for r in self.rows], pa.float64()),
            "k": pa.array([r[3] for r in self.rows], pa.int64()),
        })


def batch(t, x, k) -> pa.Table:
    return pa.table({"ts": pa.array(np.asarray(t), pa.int64()),
                     "x": pa.array(np.asarray(x), pa.float64()),
                     "k": pa.array(np.asarray(k), pa.int64())})


def destroy_column(snap, column: str) -> int:
    """Overwrite every stored chunk of ``column`` in the stream's data files with garbage (the
    Parquet footers stay intact), so that any later read of that column fails while reads of the
    other columns still work. Returns the number of bytes overwritten. Proves a reader does not
    decode a column, without instrumenting the reader."""
    import pyarrow.parquet as pq

    total = 0
    for info in snap.files.values():
        path = snap.events_dir / info.path
        md = pq.ParquetFile(path).metadata
        idx = md.schema.to_arrow_schema().names.index(column)
        with open(path, "r+b") as f:
            for r in range(md.num_row_groups):
                col = md.row_group(r).column(idx)
                start = col.dictionary_page_offset if col.has_dictionary_page else \
                    col.data_page_offset
                f.seek(start)
                f.write(b"\xff" * col.total_compressed_size)
                total += col.total_compressed_size
    return total


def nan_allowing_schema(schema: pa.Schema, *, leaf_capacity: int, fanout: int):  # noqa: ANN201
    """The stream schema inferred from ``schema`` (time in ms) with the given tree layout, every
    numeric attribute allowing NaN (the window tests' random streams carry NaN)."""
    import dataclasses

    from replaydb.store.schema import StreamSchema

    sch = StreamSchema.infer(schema, time_unit="ms", leaf_capacity=leaf_capacity, fanout=fanout)
    return dataclasses.replace(sch, attributes=tuple(
        dataclasses.replace(a, nan_policy="allow") if a.numeric else a for a in sch.attributes))


def push_all(op: Any, batches: Iterable[pa.Table | pa.RecordBatch], *,
             check: bool = False) -> list[dict]:
    """Push ``batches`` into operator ``op`` one by one, taking its results after each (and
    checking its internal invariants with ``op._check()`` when ``check``), then flush it; every
    result row in the order the operator produced them."""
    out: list[dict] = []
    for b in batches:
        op.push(b)
        if check:
            op._check()
        out.extend(op.results().to_pylist())
    op.flush()
    out.extend(op.results().to_pylist())
    return out


def rerun_from_snapshot(op: Any, tab: pa.Table, cut: int, *,
                        end_interval: bool = False) -> pa.Table:
    """Push ``tab[:cut]``, snapshot ``op``, push the rest and take the results; then restore the
    snapshot (ending the replay interval there when ``end_interval``) and push the rest again.
    Returns the results taken before the restore; what ``op`` yields after it must equal what an
    operator that never restored would have."""
    op.push(tab.slice(0, cut))
    snap = op.snapshot()
    op.push(tab.slice(cut))
    first = op.results()
    op.restore(snap)
    if end_interval:
        op.end_interval()
    op.push(tab.slice(cut))
    return first


def int_value(v: Any) -> Any:
    """An exact count as an int: a Decimal or a string of digits (exact count types an operator
    may return) becomes an int, anything else stays as it is."""
    if isinstance(v, Decimal):
        return int(v)
    if isinstance(v, str) and v.lstrip("-").isdigit():
        return int(v)
    return v
