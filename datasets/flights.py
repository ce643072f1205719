"""``flights-3m``: 3,000,000 US domestic flights (January-June 2001) from ``vega-datasets`` 3.2.1.

Source: ``data/flights-3m.parquet`` inside the npm package ``vega-datasets`` 3.2.1 (fetched with
``npm pack``, read from the tarball with :mod:`tarfile`). Its own description: "Flight delay
statistics (3 million rows) from U.S. Bureau of Transportation Statistics" (on-time performance
reports). The file holds 3,000,000 rows with columns ``date`` (timestamp[us], whole minutes, from
2001-01-01 00:01 to 2001-07-01 00:00), ``delay`` (int64), ``distance`` (int64), ``origin`` and
``destination`` (IATA airport codes; 229 origins, 228 destinations); it has no nulls and is
already in time order.

The prepared stream (what ``make flights-3m`` writes):

==============  =======  ======================================================================
column          type     meaning
==============  =======  ======================================================================
``date``        int64    scheduled departure, **milliseconds** since 1970-01-01 (the file's
                         wall-clock time taken as UTC; the source has no time zone, BTS times
                         are local to the origin airport). Time column: ``--time date
                         --time-unit ms``; once ingested it is the store's ``t``.
``delay``       int64    departure delay in minutes (negative: early), -1116 .. 1688
``distance``    int64    flight distance in miles, 21 .. 4962
``origin``      string   departure airport
``destination`` string   arrival airport
==============  =======  ======================================================================

Cleaning (decisions): rows with a null ``date`` would be dropped (there are none); nulls elsewhere
would be kept as nulls (there are none); rows are stably sorted by ``date`` (a no-op on this file,
kept so the guarantee does not depend on it). 191 rows duplicate an earlier row exactly; with no
flight number or carrier in the data they may be distinct flights, so they are **kept** by
default; ``dedup=True`` drops them (2,999,809 rows remain). Minutes would be the natural unit, but
stream time units are s/ms/us/ns, so ``date`` is in ms.
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from replaydb.datasets import base
from replaydb.datasets.base import ColumnInfo, DatasetInfo, ExampleQuery, OptionInfo, register
from replaydb.datasets.packages import VEGA_DATASETS, fetch, packages_dir, sha256_of
from replaydb.errors import DataError

NAME = "flights-3m"
MEMBER = "package/data/flights-3m.parquet"
PARQUET_SHA256 = "dbeb920c90f59b6ccaff823dcc3d08f25a97fa1ce128d93f40be4e931f5900b0"
ROWS = 3_000_000
BLOCK = 1 << 18

COLUMNS = (
    ColumnInfo("date", "int64", "ms", "scheduled departure, ms since epoch (wall clock as UTC)"),
    ColumnInfo("delay", "int64", "min", "departure delay, negative when early"),
    ColumnInfo("distance", "int64", "mi", "flight distance"),
    ColumnInfo("origin", "string", None, "departure airport (IATA code)"),
    ColumnInfo("destination", "string", None, "arrival airport (IATA code)"),
)
SCHEMA = base.arrow_schema(COLUMNS, required=("date",))


def source_parquet(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``flights-3m.parquet`` extracted from the (cached or fetched) tarball, verified."""
    target = packages_dir(cache_dir) / f"{VEGA_DATASETS.name}-{VEGA_DATASETS.version}" / "flights-3m.parquet"
    if target.is_file() and sha256_of(target) == PARQUET_SHA256:
        return target
    tgz = fetch(VEGA_DATASETS, cache_dir)
    with tarfile.open(tgz, "r:gz") as tf:
        try:
            member = tf.getmember(MEMBER)
        except KeyError:
            raise DataError(f"{MEMBER} is missing from the package", source=str(tgz)) from None
        f = tf.extractfile(member)
        if f is None:
            raise DataError(f"{MEMBER} is not a regular file", source=str(tgz))
        data = f.read()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(data)
    if sha256_of(tmp) != PARQUET_SHA256:
        tmp.unlink()
        raise DataError("flights-3m.parquet does not match its pinned SHA-256", source=str(tgz))
    os.replace(tmp, target)
    return target


def load_flights(cache_dir: str | os.PathLike[str] | None = None, dedup: bool = False) -> pa.Table:
    """The prepared, time-ordered flights table (see the module docstring). O(n log n)."""
    path = source_parquet(cache_dir)
    raw = pq.read_table(path)
    missing = [c for c in SCHEMA.names if c not in raw.column_names]
    if missing:
        raise DataError(f"columns {missing} missing", source=str(path))
    date = raw.column("date")
    if not pa.types.is_timestamp(date.type):
        raise DataError(f"expected a timestamp, found {date.type}", column="date", source=str(path))
    raw = raw.filter(pc.is_valid(date))
    ms = pc.cast(raw.column("date"), pa.timestamp("ms", tz=date.type.tz)).cast(pa.int64())
    table = pa.table(
        [
            ms,
            raw.column("delay").cast(pa.int64()),
            raw.column("distance").cast(pa.int64()),
            raw.column("origin").cast(pa.string()),
            raw.column("destination").cast(pa.string()),
        ],
        schema=SCHEMA,
    ).combine_chunks()
    order = np.argsort(table.column("date").to_numpy(), kind="stable")
    if not np.array_equal(order, np.arange(order.size)):
        table = table.take(pa.array(order))
    if dedup:
        table = _drop_exact_duplicates(table)
    return table


def _drop_exact_duplicates(table: pa.Table) -> pa.Table:
    """Keep the first of rows equal in every column, in the original order. O(n log n).

    Each column is dictionary-encoded (hash) and the codes are folded into one int64 row key,
    re-densified with ``np.unique`` whenever the next fold could overflow.
    """
    key = np.zeros(table.num_rows, dtype=np.int64)
    span = 1
    for col in table.columns:
        enc = pc.dictionary_encode(col).combine_chunks()
        card = len(enc.dictionary) + 1
        codes = pc.fill_null(enc.indices, card - 1).to_numpy().astype(np.int64)
        if span * card >= 1 << 62:
            uniq, key = np.unique(key, return_inverse=True)
            span = uniq.size
        key = key * card + codes
        span *= card
    _, first = np.unique(key, return_index=True)
    return table.take(pa.array(np.sort(first)))


def _blocks(events: int | None, seed: int, opts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    table = load_flights(opts["cache_dir"], opts["dedup"])
    if events is not None:
        table = table.slice(0, events)
    yield from table.to_batches(max_chunksize=BLOCK)


INFO = DatasetInfo(
    name=NAME,
    kind="real",
    title="US flights, 3M departures Jan-Jun 2001 (vega-datasets 3.2.1)",
    source="npm package vega-datasets 3.2.1, data/flights-3m.parquet (U.S. BTS on-time data)",
    description=(
        "Departures with delay (minutes), distance (miles), origin and destination airports, "
        "in departure-time order. Rows: 3,000,000 (2,999,809 with dedup)."
    ),
    columns=COLUMNS,
    time_column="date",
    time_unit="ms",
    key_columns=("origin", "destination"),
    default_events=None,
    event_bytes=None,
    suggested_indexes=("origin", "delay", "destination", "distance"),
    example_queries=(
        ExampleQuery(
            "match_recognize",
            "SELECT * FROM flights MATCH_RECOGNIZE (ORDER BY t "
            "MEASURES A.t AS first_t, C.t AS last_t, A.delay AS first_delay, "
            "C.delay AS last_delay "
            "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
            "PATTERN (A T1* B T2* C) WITHIN 3 HOURS "
            "DEFINE A AS A.origin = 'ORD' AND A.delay BETWEEN 30 AND 59, "
            "B AS B.origin = 'ORD' AND B.delay BETWEEN 60 AND 119, "
            "C AS C.origin = 'ORD' AND C.delay >= 120, "
            "T1 AS TRUE, T2 AS TRUE)",
            "a delay cascade at Chicago O'Hare: departures delayed 30-59, then 60-119, then "
            "120+ minutes within 3 hours (index-supported: origin and delay)",
        ),
        ExampleQuery(
            "match_recognize",
            "SELECT * FROM flights MATCH_RECOGNIZE (PARTITION BY origin ORDER BY t "
            "MEASURES FIRST(D.t) AS first_t, LAST(D.t) AS last_t, "
            "COUNT(D.delay) AS delayed_departures "
            "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
            "PATTERN (D{5,}) WITHIN 1 HOUR "
            "DEFINE D AS D.delay >= 60)",
            "per airport: at least 5 consecutive departures each delayed an hour or more",
        ),
    ),
    options=(
        OptionInfo("cache_dir", str, None, "package cache directory (default: cache root/packages)"),
        OptionInfo("dedup", bool, False, "drop rows that exactly duplicate an earlier row"),
    ),
    block_events=f"{BLOCK} rows",
    stream="flights",
    notes=(
        f"{ROWS:,} rows; 191 exact duplicate rows are kept unless dedup is set",
        "ingest with --time date: the store keeps event time as t, so queries order by and "
        "measure t (times in ms)",
    ),
)

DATASET = register(INFO, SCHEMA, _blocks)
