"""Public Python API of the datasets layer: list, describe, generate (Arrow), make (Parquet).

``generate`` streams a dataset as Arrow record batches; ``make`` writes it to a Parquet file with
a streaming ``ParquetWriter`` in row groups of a fixed size, so memory stays bounded by one block
plus one row group whatever N is, and the file's bytes depend only on (dataset, N, seed, options,
row group size, compression) - not on how the stream was chunked on the way.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.datasets.base import (
    DEFAULT_BATCH_SIZE,
    DatasetInfo,
    check_events,
    get_dataset,
    rechunk,
    registry,
)
from replaydb.errors import UsageError

DEFAULT_ROW_GROUP = 1 << 19
METADATA_KEY = b"replaydb.dataset"
_LOCAL_OPTIONS = frozenset({"cache_dir"})  # machine-specific; never written into files


def list_datasets() -> list[DatasetInfo]:
    """Descriptions of every dataset, generators first, by name."""
    return sorted((d.info for d in registry().values()), key=lambda i: (i.kind != "synthetic", i.name))


def describe(name: str) -> DatasetInfo:
    """The description of dataset ``name``."""
    return get_dataset(name).info


def schema(name: str, **opts: Any) -> pa.Schema:
    """The Arrow schema dataset ``name`` produces with options ``opts``."""
    ds = get_dataset(name)
    return ds.schema(ds.resolve_options(opts))


def generate(
    name: str,
    events: int | None = None,
    seed: int = 0,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    **opts: Any,
) -> Iterator[pa.RecordBatch]:
    """Stream dataset ``name`` as record batches of ``batch_size`` rows (the last may be shorter).

    ``events``: number of events (default: the paper's size for generators, all rows for real
    data; for real data a smaller number keeps the first ``events`` rows in time order).
    ``seed``: non-negative integer; the same (name, events, seed, opts) give the same rows for
    every ``batch_size``. Options are validated and the first block is produced before this
    function returns, so bad arguments and missing sources fail here, not at the first ``next``.
    """
    ds = get_dataset(name)
    resolved = ds.resolve_options(opts)
    real = ds.info.kind == "real"
    check_events(events, allow_none=True)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise UsageError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(batch_size, int) or batch_size <= 0:
        raise UsageError(f"batch size must be a positive integer, got {batch_size!r}")
    n = events if events is not None else (None if real else ds.info.default_events)
    if n == 0:
        return iter(())
    blocks = ds.blocks(n, seed, resolved)
    first = next(blocks, None)
    if first is None:
        return iter(())
    return rechunk(_chain_closing(first, blocks), n, batch_size)


def _chain_closing(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    try:
        yield from itertools.chain((first,), rest)
    finally:
        close = getattr(rest, "close", None)
        if close is not None:
            close()


@dataclass(frozen=True)
class MakeResult:
    """What ``make`` wrote: path, rows, file size, elapsed seconds, and how to ingest it."""

    name: str
    path: str
    rows: int
    bytes: int
    seconds: float
    seed: int
    time_column: str
    time_unit: str
    row_groups: int
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def events_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    def ingest_hint(self, store: str = "STORE", stream: str | None = None) -> str:
        stream = stream or describe(self.name).stream
        return (f"replaydb ingest {store} {stream} {self.path} --time {self.time_column} "
                f"--time-unit {self.time_unit}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "path": self.path, "rows": self.rows, "bytes": self.bytes,
            "seconds": round(self.seconds, 6), "events_per_second": round(self.events_per_second, 1),
            "seed": self.seed, "time_column": self.time_column, "time_unit": self.time_unit,
            "row_groups": self.row_groups, "options": self.options,
            "ingest": self.ingest_hint(),
        }


def make(
    name: str,
    out_path: str | os.PathLike[str],
    events: int | None = None,
    seed: int = 0,
    *,
    row_group_size: int = DEFAULT_ROW_GROUP,
    compression: str = "snappy",
    overwrite: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    **opts: Any,
) -> MakeResult:
    """Write dataset ``name`` to the Parquet file ``out_path`` and return what was written.

    Floating-point columns are written without dictionary encoding (see
    :func:`_dictionary_columns`). Streams: rows come from ``generate`` in batches of ``batch_size`` rows and are re-cut into
    batches of exactly ``row_group_size`` rows, each written as one row group, so the file's bytes
    do not depend on ``batch_size``. The file appears atomically (written beside it, renamed).
    The schema metadata key ``replaydb.dataset`` holds a JSON record of name, events, seed,
    options, time column and unit. An existing file is an error unless ``overwrite``.
    """
    out = Path(out_path)
    if out.exists() and not overwrite:
        raise UsageError(f"{out} exists", hint="choose another path or overwrite it (--force)")
    if out.exists() and out.is_dir():
        raise UsageError(f"{out} is a directory")
    if not isinstance(row_group_size, int) or row_group_size <= 0:
        raise UsageError(f"row group size must be a positive integer, got {row_group_size!r}")
    ds = get_dataset(name)
    info = ds.info
    resolved = ds.resolve_options(opts)
    public = {k: _jsonable(v) for k, v in resolved.items() if k not in _LOCAL_OPTIONS}
    meta = {
        "dataset": name, "events": events if events is not None else info.default_events,
        "seed": seed, "options": public, "time_column": info.time_column,
        "time_unit": info.time_unit, "format": 1,
    }
    sch = ds.schema(resolved).with_metadata({METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    started = time.perf_counter()
    rows = 0
    groups = 0
    try:
        batches = rechunk(generate(name, events, seed, batch_size=batch_size, **opts), None,
                          row_group_size)
        with pq.ParquetWriter(tmp, sch, compression=compression,
                              use_dictionary=_dictionary_columns(sch, info.time_column)) as writer:
            for batch in batches:
                writer.write_batch(batch.replace_schema_metadata(sch.metadata),
                                   row_group_size=row_group_size)
                rows += batch.num_rows
                groups += 1
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    elapsed = time.perf_counter() - started
    return MakeResult(name, str(out), rows, out.stat().st_size, elapsed, seed, info.time_column,
                      info.time_unit, groups, public)


def _dictionary_columns(sch: pa.Schema, time_column: str) -> list[str]:
    """Columns worth Parquet dictionary encoding: strings, booleans and integers except time.

    Floating-point measurements are almost all distinct; trying a dictionary on them costs the
    writer CPU time for nothing, so they are written plain.
    """
    return [
        f.name for f in sch
        if f.name != time_column
        and (pa.types.is_string(f.type) or pa.types.is_integer(f.type) or pa.types.is_boolean(f.type))
    ]


def _jsonable(v: Any) -> Any:
    if isinstance(v, tuple):
        return list(v)
    return v
