"""``opensky``: aircraft state vectors from the sample collections of the PyPI package ``traffic`` 2.13.

Source: every ``traffic/data/samples/**.json.gz`` file inside the wheel ``traffic-2.13`` (fetched
with ``pip download --no-deps --only-binary=:all:`` and read as a zip; nothing is installed).
These are ADS-B trajectories (most from the OpenSky Network) in 74 sample files: airport
calibration flights, gliders, ambulances, surveys, the ``quickstart`` traffic over France, a Swiss
collection, and more. 69 files are lists of records, 5 are pandas column dictionaries; one
(``performance/fuelflow_a320``, 11,808 rows) has no aircraft address or position and is left
out. The other 73 hold 930,932 state vectors of 1,134 aircraft, from 2017-03-08 to 2024-09-17.

The prepared stream (what ``make opensky`` writes), time column ``timestamp`` in **ms** (ingest
with ``--time timestamp --time-unit ms``; once ingested it is the store's ``t``):

================  =======  ====================================================================
column            type     meaning
================  =======  ====================================================================
``timestamp``     int64    time of the state vector, ms since 1970-01-01 UTC (the files' unit)
``icao24``        string   aircraft transponder address (24-bit, hex): the partitioning key
``callsign``      string   flight callsign (null where absent)
``latitude``      double   degrees (WGS84)
``longitude``     double   degrees (WGS84)
``altitude``      double   barometric altitude, ft
``geoaltitude``   double   geometric (GNSS) altitude, ft (only in 6 collections; else null)
``groundspeed``   double   ground speed, knots
``track``         double   track angle, degrees clockwise from north (some files use -180..180)
``vertical_rate`` double   climb (+) / descent (-) rate, ft/min
``onground``      bool     on-ground flag (only in 7 collections; else null)
``squawk``        string   transponder code, four digits (numbers and short digit strings are
                           zero-padded: 643 -> ``0643``)
``source``        string   the sample file, e.g. ``collections/quickstart``
================  =======  ====================================================================

Cleaning (decisions): other fields of some files (origin, destination, flight_id, roll, TAS, ...)
are dropped; a missing field or a NaN is a null, never NaN; rows without ``timestamp`` or
``icao24`` would be dropped (there are none). Duplicates: a row with the same (``icao24``,
``timestamp``) as an earlier row (files in path order, rows in file order) is dropped; that
removes 2,298 rows, all in ``onground/zurich_airport`` (2,297 exact copies and one conflicting
vector for the same aircraft and millisecond, whose first occurrence is kept), leaving
**928,634** rows. Rows are stably sorted by ``timestamp``; ties keep file order. The collections
come from different days (2017-2024), so the merged stream has long gaps between them.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from replaydb.datasets import base
from replaydb.datasets.base import ColumnInfo, DatasetInfo, ExampleQuery, OptionInfo, register
from replaydb.datasets.packages import TRAFFIC, fetch, prepared_dir
from replaydb.errors import DataError

NAME = "opensky"
SAMPLES = "traffic/data/samples/"
PREPARED_VERSION = 1
BLOCK = 1 << 18

COLUMNS = (
    ColumnInfo("timestamp", "int64", "ms", "time of the state vector, ms since epoch (UTC)"),
    ColumnInfo("icao24", "string", None, "aircraft address (partition key)"),
    ColumnInfo("callsign", "string", None, "callsign"),
    ColumnInfo("latitude", "double", "deg", "WGS84 latitude"),
    ColumnInfo("longitude", "double", "deg", "WGS84 longitude"),
    ColumnInfo("altitude", "double", "ft", "barometric altitude"),
    ColumnInfo("geoaltitude", "double", "ft", "geometric altitude (mostly null)"),
    ColumnInfo("groundspeed", "double", "kt", "ground speed"),
    ColumnInfo("track", "double", "deg", "track angle"),
    ColumnInfo("vertical_rate", "double", "ft/min", "vertical rate, + climbing"),
    ColumnInfo("onground", "bool", None, "on-ground flag (mostly null)"),
    ColumnInfo("squawk", "string", None, "transponder code"),
    ColumnInfo("source", "string", None, "sample file the row came from"),
)
SCHEMA = base.arrow_schema(COLUMNS, required=("timestamp", "icao24", "source"))
_FLOATS = ("latitude", "longitude", "altitude", "geoaltitude", "groundspeed", "track",
           "vertical_rate")


def _records(obj: Any, name: str) -> list[dict[str, Any]] | None:
    """Rows of one sample file: a list of records or a pandas column dict; None when unusable."""
    if isinstance(obj, list):
        return [r for r in obj if isinstance(r, dict)]
    if isinstance(obj, dict) and all(isinstance(v, dict) for v in obj.values()):
        index: list[str] = sorted(
            {k for col in obj.values() for k in col}, key=lambda k: (len(k), k)
        )
        return [{c: obj[c].get(i) for c in obj} for i in index]
    raise DataError("unrecognised JSON layout", source=name)


def _squawk(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return f"{int(v):04d}"
    s = str(v).strip()
    if s.isdigit() and len(s) < 4:
        s = s.zfill(4)
    return s or None


def _bool(v: Any) -> bool | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return bool(v)


def _float_array(values: list[Any], name: str, column: str) -> pa.Array:
    try:
        arr = pa.array(values, type=pa.float64(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise DataError(f"non-numeric value: {exc}", column=column, source=name) from None
    return arr


def _file_table(name: str, rows: list[dict[str, Any]]) -> pa.Table | None:
    if not rows or not any("icao24" in r for r in rows[:1000]):
        return None
    src = name[len(SAMPLES):].removesuffix(".json.gz")
    ts = []
    for k, r in enumerate(rows):
        v = r.get("timestamp")
        if v is not None and not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise DataError(f"timestamp {v!r} is not integer milliseconds", row=k,
                                column="timestamp", source=name)
        ts.append(v)
    cols: dict[str, pa.Array] = {
        "timestamp": pa.array(ts, type=pa.int64()),
        "icao24": pa.array([None if r.get("icao24") is None else str(r["icao24"]).strip()
                            for r in rows], type=pa.string()),
        "callsign": pa.array([None if r.get("callsign") is None else str(r["callsign"]).strip()
                              for r in rows], type=pa.string()),
    }
    for c in _FLOATS:
        cols[c] = _float_array([r.get(c) for r in rows], name, c)
    cols["onground"] = pa.array([_bool(r.get("onground")) for r in rows], type=pa.bool_())
    cols["squawk"] = pa.array([_squawk(r.get("squawk")) for r in rows], type=pa.string())
    cols["source"] = pa.array([src] * len(rows), type=pa.string())
    loose = pa.schema([f.with_nullable(True) for f in SCHEMA])
    return pa.table([cols[f.name] for f in SCHEMA], schema=loose)


def read_samples(wheel: Path) -> pa.Table:
    """All usable sample files of the wheel, concatenated in path order (not yet cleaned)."""
    tables = []
    with zipfile.ZipFile(wheel) as zf:
        names = sorted(n for n in zf.namelist() if n.startswith(SAMPLES) and n.endswith(".json.gz"))
        if not names:
            raise DataError("no sample files found", source=str(wheel))
        for name in names:
            try:
                obj = json.loads(gzip.decompress(zf.read(name)))
            except (OSError, ValueError) as exc:
                raise DataError(f"unreadable sample file: {exc}", source=name) from None
            t = _file_table(name, _records(obj, name) or [])
            if t is not None:
                tables.append(t)
    return pa.concat_tables(tables)


def clean(table: pa.Table) -> pa.Table:
    """Nulls for NaN, drop rows without key or time, dedup (icao24, timestamp), sort by time.

    O(n log n). Row order of the result: timestamp, then the input order.
    """
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        if name in _FLOATS:
            col = pc.if_else(pc.is_nan(col), pa.scalar(None, pa.float64()), col)
        cols[name] = col
    table = pa.table(cols).combine_chunks()
    table = table.filter(pc.and_(pc.is_valid(table.column("timestamp")),
                                 pc.is_valid(table.column("icao24"))))
    ts = table.column("timestamp").to_numpy()
    code = pc.dictionary_encode(table.column("icao24")).combine_chunks().indices.to_numpy()
    row = np.arange(ts.size)
    order = np.lexsort((row, code, ts))
    same = (ts[order][1:] == ts[order][:-1]) & (code[order][1:] == code[order][:-1])
    keep = np.ones(ts.size, dtype=bool)
    keep[order[1:][same]] = False
    kept = np.flatnonzero(keep)
    final = kept[np.argsort(ts[kept], kind="stable")]
    out = table.take(pa.array(final))
    return pa.Table.from_arrays(out.columns, schema=SCHEMA)


def load_opensky(cache_dir: str | os.PathLike[str] | None = None, *, use_prepared: bool = True) -> pa.Table:
    """The prepared, time-ordered OpenSky table (see the module docstring).

    The cleaned table is kept in the cache (``prepared/``) so later loads skip the JSON parsing;
    ``use_prepared=False`` always rebuilds it from the wheel.
    """
    wheel = fetch(TRAFFIC, cache_dir)
    cached = prepared_dir() / f"opensky-{TRAFFIC.name}-{TRAFFIC.version}-v{PREPARED_VERSION}.parquet"
    if use_prepared and cached.is_file():
        try:
            t = pq.read_table(cached)
            if t.schema.equals(SCHEMA):
                return t
        except (OSError, pa.ArrowInvalid):
            pass
    table = clean(read_samples(wheel))
    if use_prepared:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, cached)
    return table


def _blocks(events: int | None, seed: int, opts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    table = load_opensky(opts["cache_dir"])
    if events is not None:
        table = table.slice(0, events)
    yield from table.to_batches(max_chunksize=BLOCK)


LANDING_QUERY = (
    "SELECT * FROM opensky MATCH_RECOGNIZE (PARTITION BY icao24 ORDER BY t "
    "MEASURES A.callsign AS callsign, A.t AS approach_t, C.t AS rollout_t "
    "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
    "PATTERN (A T1* B T2* C) WITHIN 20 MINUTES "
    "DEFINE A AS A.altitude BETWEEN 3000 AND 6000 AND A.vertical_rate < -500, "
    "B AS B.altitude < 2000 AND B.vertical_rate < -300, "
    "C AS C.groundspeed < 60 AND C.altitude < 2000, "
    "T1 AS TRUE, T2 AS TRUE)"
)
TAKEOFF_QUERY = (
    "SELECT * FROM opensky MATCH_RECOGNIZE (PARTITION BY icao24 ORDER BY t "
    "MEASURES A.callsign AS callsign, A.t AS roll_t, C.t AS climb_t "
    "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
    "PATTERN (A T1* B T2* C) WITHIN 10 MINUTES "
    "DEFINE A AS A.groundspeed < 40, "
    "B AS B.groundspeed > 120 AND B.vertical_rate > 500, "
    "C AS C.vertical_rate > 1000 AND C.altitude > 5000, "
    "T1 AS TRUE, T2 AS TRUE)"
)

INFO = DatasetInfo(
    name=NAME,
    kind="real",
    title="OpenSky ADS-B state vectors (traffic 2.13 sample collections)",
    source="PyPI package traffic 2.13, traffic/data/samples/**.json.gz",
    description=(
        "Aircraft trajectories: position, altitude, speed, track and vertical rate per aircraft "
        "(icao24), merged from the package's sample collections and ordered by time. "
        "Rows: 928,634 of 1,134 aircraft (2017-2024)."
    ),
    columns=COLUMNS,
    time_column="timestamp",
    time_unit="ms",
    key_columns=("icao24",),
    default_events=None,
    event_bytes=None,
    suggested_indexes=("icao24", "altitude", "vertical_rate", "groundspeed"),
    example_queries=(
        ExampleQuery(
            "match_recognize", LANDING_QUERY,
            "a landing per aircraft: descending between 3000 and 6000 ft, then below 2000 ft "
            "still descending, then slower than 60 kt, within 20 minutes",
        ),
        ExampleQuery(
            "match_recognize", TAKEOFF_QUERY,
            "a takeoff per aircraft: slower than 40 kt, then faster than 120 kt and climbing, "
            "then above 5000 ft climbing over 1000 ft/min, within 10 minutes",
        ),
    ),
    options=(
        OptionInfo("cache_dir", str, None, "package cache directory (default: cache root/packages)"),
    ),
    block_events=f"{BLOCK} rows",
    notes=(
        "ingest with --time timestamp: the store keeps event time as t, so queries order by "
        "and measure t (times in ms)",
    ),
)

DATASET = register(INFO, SCHEMA, _blocks)
