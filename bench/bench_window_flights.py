"""Windowed aggregation on real data: replaydb against DuckDB, Polars and Spark SQL.

Data: ``flights-3m`` (first ``--events`` rows; quick 1M, full all 3M) appended to a store, and
the same rows as one Parquet file that the peers read. Every query aggregates the departure delay
(COUNT, SUM, AVG, MIN, MAX) per epoch-aligned time window, with no key and no filter, so the
planner may answer from the TAB+-tree (the index path) or by replay:

* tumbling windows of 1 minute, 1 hour, 1 day and 7 days;
* hopping windows of 1 day sliding by 1 hour and of 7 days sliding by 1 day.

Per query, side by side on the same cores: replaydb ``auto`` (the planner's choice, recorded) and
``replay`` (forced), in this process; DuckDB SQL over the Parquet file; Polars over the same file
(a lazy scan and a group-by on the window start; hopping windows assign each row to its windows
by a list of starts, as in the DuckDB query); Spark SQL's DataFrame API over the file on
``local[N]``. The
window starts, counts, sums, minima and maxima of every engine are compared with replaydb's
(averages to 1e-9 relative). Times are wall seconds, best of ``--repeat`` runs after one warm-up
run (DuckDB, Polars and Spark use every core; replaydb one); replaydb's CPU seconds are recorded
beside.

Usage: ``python -m replaydb.bench.bench_window_flights [--quick | --full] [--events N]
[--repeat R] [--no-spark]``. Writes ``bench/results/window_flights/``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.bench.common import Results, arguments, best_of, peer
from replaydb.bench.realdata import load, parquet_of, store_of, timed_query

STREAM = "flights"
MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000
WINDOWS: list[tuple[str, int, int]] = [
    ("tumble 1 min", MINUTE, MINUTE), ("tumble 1 h", HOUR, HOUR), ("tumble 1 day", DAY, DAY),
    ("tumble 7 days", 7 * DAY, 7 * DAY), ("hop 1 day / 1 h", HOUR, DAY),
    ("hop 7 days / 1 day", DAY, 7 * DAY)]
"""(name, slide, size) in milliseconds; every size is a multiple of its slide."""
AGGS = ("n", "total", "avg", "lo", "hi")

DUCKDB_TUMBLE = ("SELECT date // $size * $size AS ws, COUNT(*) AS n, SUM(delay) AS total, "
                 "AVG(delay) AS avg, MIN(delay) AS lo, MAX(delay) AS hi "
                 "FROM read_parquet($path) GROUP BY ws ORDER BY ws")
DUCKDB_HOP = ("SELECT ws, COUNT(*) AS n, SUM(delay) AS total, AVG(delay) AS avg, "
              "MIN(delay) AS lo, MAX(delay) AS hi FROM (SELECT delay, unnest(range("
              "(date // $slide - $per + 1) * $slide, (date // $slide + 1) * $slide, $slide)) AS ws "
              "FROM read_parquet($path)) GROUP BY ws ORDER BY ws")


def replaydb_query(slide: int, size: int) -> str:
    """The windowed SQL of one grid point (durations as bare numbers of milliseconds, the
    stream's time unit)."""
    tvf = (f"TUMBLE(TABLE {STREAM}, DESCRIPTOR(date), {size})" if slide == size
           else f"HOP(TABLE {STREAM}, DESCRIPTOR(date), {slide}, {size})")
    return (f"SELECT window_start, COUNT(*) AS n, SUM(delay) AS total, AVG(delay) AS avg, "
            f"MIN(delay) AS lo, MAX(delay) AS hi FROM TABLE({tvf}) "
            "GROUP BY window_start, window_end")


def build(root: Path, n: int) -> tuple[Any, Path, int]:
    """The store of the first ``n`` flights (read-only), their Parquet file, and ``n``."""
    table = load("flights-3m", n)
    return (store_of(root, STREAM, table, "date"), parquet_of(root, table, "flights.parquet"),
            table.num_rows)


def canonical(table: pa.Table) -> dict[str, np.ndarray]:
    """The result's window starts (``window_start`` in replaydb's rows, ``ws`` in the peers')
    and aggregates as float arrays, ordered by window start."""
    start = "window_start" if "window_start" in table.column_names else "ws"

    def values(col: str) -> np.ndarray:
        arr = table.column(col)
        if pa.types.is_timestamp(arr.type):  # replaydb's window starts are times (in ms)
            arr = arr.cast(pa.int64())
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=float)

    cols = {name: values(col) for name, col in (("ws", start), *((a, a) for a in AGGS))}
    order = np.argsort(cols["ws"], kind="stable")
    return {k: v[order] for k, v in cols.items()}


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    if len(a["ws"]) != len(b["ws"]):
        return False
    exact = all(np.array_equal(a[k], b[k]) for k in ("ws", "n", "total", "lo", "hi"))
    return exact and bool(np.allclose(a["avg"], b["avg"], rtol=1e-9, atol=0))


def peers(parquet: Path, spark: Any) -> dict[str, Callable[[int, int], pa.Table]]:
    """Each peer's function (slide, size) -> result table (ws, n, total, avg, lo, hi)."""
    import duckdb
    import polars as pl

    con = duckdb.connect()
    frame = pl.scan_parquet(parquet)  # lazy: every run reads the file, as DuckDB's does

    def run_duckdb(slide: int, size: int) -> pa.Table:
        if slide == size:
            return con.sql(DUCKDB_TUMBLE, params={"size": size,
                                                  "path": str(parquet)}).to_arrow_table()
        return con.sql(DUCKDB_HOP, params={"slide": slide, "per": size // slide,
                                           "path": str(parquet)}).to_arrow_table()

    def run_polars(slide: int, size: int) -> pa.Table:
        date = pl.col("date")
        if slide == size:
            grouped = frame.group_by((date // size * size).alias("ws"))
        else:
            per = size // slide
            starts = pl.int_ranges((date // slide - per + 1) * slide, (date // slide + 1) * slide,
                                   slide).alias("ws")
            grouped = frame.select(starts, pl.col("delay")).explode("ws").group_by("ws")
        d = pl.col("delay")
        out = grouped.agg(pl.len().alias("n"), d.sum().alias("total"), d.mean().alias("avg"),
                          d.min().alias("lo"), d.max().alias("hi"))
        return out.collect().to_arrow()

    funcs: dict[str, Callable[[int, int], pa.Table]] = {"DuckDB": run_duckdb,
                                                         "Polars": run_polars}
    if spark is not None:
        from pyspark.sql import functions as F

        df = spark.read.parquet(str(parquet))

        def run_spark(slide: int, size: int) -> pa.Table:
            date = F.col("date")
            if slide == size:
                src = df.select((F.floor(date / size) * size).alias("ws"), "delay")
            else:
                per = size // slide
                first = (F.floor(date / slide) - per + 1) * slide
                src = df.select(F.explode(F.sequence(first, first + (per - 1) * slide,
                                                     F.lit(slide).cast("long"))).alias("ws"),
                                "delay")
            d = F.col("delay")
            rows = src.groupBy("ws").agg(F.count(F.lit(1)).alias("n"), F.sum(d).alias("total"),
                                         F.avg(d).alias("avg"), F.min(d).alias("lo"),
                                         F.max(d).alias("hi")).collect()
            return pa.Table.from_pylist([r.asDict() for r in rows])

        funcs["Spark SQL"] = run_spark
    return funcs


def measure(store: Any, funcs: dict[str, Callable[[int, int], pa.Table]], slide: int, size: int,
            repeat: int) -> dict[str, Any]:
    text = replaydb_query(slide, size)
    row: dict[str, Any] = {}
    for plan in ("auto", "replay"):
        wall, cpu, res = timed_query(store, text, plan, repeat)
        row[plan] = {"wall": wall, "cpu": cpu,
                     "path": "index" if "index_path" in res.stats else "replay"}
    want = canonical(res.table)  # full replay's rows
    row["windows"] = len(want["ws"])
    row["peers"] = {}
    for name, fn in funcs.items():
        fn(slide, size)  # warm-up
        wall, table = best_of(lambda fn=fn: fn(slide, size), repeat)
        row["peers"][name] = {"wall": wall, "same": same(canonical(table), want)}
    return row


def report(res: Results, rows: list[tuple[str, dict[str, Any]]], n: int) -> None:
    names = list(rows[0][1]["peers"]) if rows else []
    res.table(f"Wall seconds per query, flights-3m ({n:,} events), best of the repeats "
              "(replaydb's operator on one thread, its reads one step ahead on a second; "
              "peers on every core); 'same' = every peer's rows equal replaydb's", ["windows", "count", "auto path", "auto s", "auto CPU s",
                             "replay s", *[f"{p} s" for p in names], "same",
                             "fastest peer / auto"],
              [[q, r["windows"], r["auto"]["path"], r["auto"]["wall"], r["auto"]["cpu"],
                r["replay"]["wall"], *[r["peers"][p]["wall"] for p in names],
                all(v["same"] for v in r["peers"].values()),
                min(v["wall"] for v in r["peers"].values()) / r["auto"]["wall"]]
               for q, r in rows])
    duck = [r["peers"]["DuckDB"]["wall"] / r["auto"]["wall"] for _, r in rows
            if "DuckDB" in r["peers"]]
    wins = sum(1 for x in duck if x >= 1)
    agree = all(v["same"] for _, r in rows for v in r["peers"].values())
    res.goal("replaydb auto at least as fast as DuckDB (wall)", "every query",
             f"{wins} of {len(duck)}; DuckDB time / auto time median "
             f"{statistics.median(duck):.2f}x, min {min(duck):.2f}x" if duck else "-",
             bool(duck) and wins == len(duck))
    res.goal("every peer returns replaydb's rows", "every query", agree, agree)
    best = [min(v["wall"] for v in r["peers"].values()) / r["auto"]["wall"] for _, r in rows]
    res.headline("windowed aggregation (tumbling 1 min-7 days, hopping), replaydb auto vs "
                 "each peer on the same Parquet rows", f"flights-3m, {n:,} events, "
                 f"{len(rows)} queries", ", ".join(peer(name) for name in names),
                 f"faster than DuckDB on {wins} of {len(duck)} queries; fastest peer's time / "
                 f"auto's: median {statistics.median(best):.2f}x, min {min(best):.2f}x"
                 if rows else "not measured", bool(duck) and wins == len(duck) and agree)


def main(argv: list[str] | None = None) -> None:
    ap = arguments(__doc__.splitlines()[0], quick="1M flights (default)", full="all 3M flights")
    ap.add_argument("--events", type=int, default=None, help="flights to load")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per engine and query")
    ap.add_argument("--no-spark", action="store_true", help="leave Spark SQL out")
    args = ap.parse_args(argv)
    n = args.events or (3_000_000 if args.full else 1_000_000)
    cores = os.cpu_count() or 1
    res = Results("window_flights", "Windowed aggregation on flights-3m: replaydb vs DuckDB, "
                  "Polars and Spark SQL", params={"mode": "full" if args.full else "quick",
                                                  "events": n, "repeat": args.repeat,
                                                  "cores": cores})
    spark = None
    if not args.no_spark:
        from replaydb.spark import get_spark

        spark = get_spark(f"local[{cores}]", quiet=True)
    with tempfile.TemporaryDirectory(prefix="bench-window-flights-") as d:
        store, parquet, n = build(Path(d), n)
        res.params["events"] = n
        funcs = peers(parquet, spark)
        rows = []
        for name, slide, size in WINDOWS:
            print(f"{name} ...", flush=True)
            rows.append((name, measure(store, funcs, slide, size, args.repeat)))
    report(res, rows, n)
    res.notes.append("Hopping windows are epoch-aligned as in replaydb (Flink's and Spark's "
                     "default): the first windows start before the first flight. DuckDB, Polars "
                     "(a lazy scan) and Spark read the Parquet file in every run; replaydb "
                     "reads its store.")
    res.write_and_show()


if __name__ == "__main__":
    main()
