"""Real datasets as the benchmarks load them: the first rows of a bundled dataset, appended to
a fresh store (with indexes) and, for the peers, written as one Parquet file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import replaydb
from replaydb.bench.common import best_wall_and_cpu


def load(name: str, n: int | None, seq: bool = False) -> pa.Table:
    """The first ``n`` rows of dataset ``name`` (all when None) in time order; ``seq`` adds
    the row number as a ``seq`` column."""
    from replaydb.datasets import generate

    table = pa.Table.from_batches(list(generate(name, n)))
    if seq:
        table = table.append_column("seq", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    return table


def store_of(root: Path, stream: str, table: pa.Table, time_column: str,
             indexed: tuple[str, ...] = (), time_unit: str = "ms") -> Any:
    """A new store under ``root / "store"`` holding ``table`` (without a ``seq`` column) as
    ``stream``, with an index on each of ``indexed``; returned opened read-only."""
    from replaydb.indexes.manage import create_index
    from replaydb.store.schema import StreamSchema

    data = table.drop_columns(["seq"]) if "seq" in table.column_names else table
    store = replaydb.open(root / "store", create=True)
    store.create_stream(stream, StreamSchema.infer(data.schema, time_column=time_column,
                                                   time_unit=time_unit))
    store.append(stream, data, time_column=time_column)
    for col in indexed:
        create_index(store, stream, col)
    return replaydb.open(root / "store", read_only=True)


def timed_query(store: Any, text: str, plan: str, repeat: int) -> tuple[float, float, Any]:
    """Best wall and best CPU seconds of ``repeat`` runs of ``text`` under ``plan`` after one
    untimed run (compiled code, caches), and the last result."""
    replaydb.query(store, text, plan=plan)
    return best_wall_and_cpu(lambda: replaydb.query(store, text, plan=plan), repeat)


def parquet_of(root: Path, table: pa.Table, name: str = "events.parquet") -> Path:
    """``table`` written as one Parquet file (pyarrow's defaults) under ``root``."""
    path = root / name
    pq.write_table(table, path)
    return path
