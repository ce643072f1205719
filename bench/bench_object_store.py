"""A store on an object store against the same store on the local disk.

Data: ``flights-3m`` (quick: the first 1M flights; full: all 3M) appended to a local store with
indexes on ``origin`` and ``delay``, then copied to a real S3-compatible endpoint on the
loopback interface (:mod:`.s3endpoint`, its own process) and read there in place through its
``s3://`` URI.

Queries: the README's pattern (two departures from one airport, each delayed at least D minutes,
within one hour) for several airports and thresholds, from selective to broad; planned by the
planner (``auto``) and replayed in full (``replay``). Nothing is tuned on them, so there is no
held-out split.

Per query, side by side: the local store opened anew for every run (best of ``--repeat``, and
the data bytes the plan read: the compressed column chunks of its leaves), and the store on the
endpoint opened anew for every run (so nothing fetched by an earlier run is held in the
process; the local cache of its small files is warm, as for any query after the first): best
time, ranged requests and bytes of the data files (footers included), and all requests; once
more through a proxy that delays every request by ``--latency`` ms. The full replay takes the
best of at least :data:`FULL_REPLAY_RUNS` runs per side. The first query on an empty cache is
reported apart (it fetches the Delta logs, the tree and the indexes it consults).

Usage: ``python -m replaydb.bench.bench_object_store [--quick | --full] [--repeat R]
[--latency MS]``. Needs the test dependencies (``moto``). Writes
``bench/results/object_store/``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import replaydb
from replaydb.bench.common import Results, arguments
from replaydb.bench.realdata import load, store_of
from replaydb.bench.s3endpoint import S3Endpoint
from replaydb.store.mirror import CacheOptions
from replaydb.store.store import Store

STREAM = "flights"
FULL_REPLAY_RUNS = 15
"""Runs of each side of the full replay (best taken), at least."""
AIRPORTS = ("ORD", "ATL", "DFW", "LAX")
THRESHOLDS = (300, 180, 90)


def pattern(airport: str, delay: int) -> str:
    return ("SELECT * FROM flights MATCH_RECOGNIZE (ORDER BY t MEASURES A.t AS first_t, "
            "B.t AS last_t, A.delay AS first_delay, B.delay AS second_delay ONE ROW PER MATCH "
            "AFTER MATCH SKIP PAST LAST ROW PATTERN (A X* B) WITHIN 1 HOUR "
            f"DEFINE A AS A.origin = '{airport}' AND A.delay >= {delay}, "
            f"B AS B.origin = '{airport}' AND B.delay >= {delay}, X AS TRUE)")


def _index_bytes(store: Any) -> int:
    """Compressed bytes the stream's indexes have read (their cost counters, summed)."""
    return sum(side.index.counters.bytes_read
               for side in store.stream(STREAM).indexes().values())


def _local(store: Any, text: str, plan: str, repeat: int) -> dict[str, Any]:
    before = _index_bytes(store)
    res = replaydb.query(store, text, plan=plan)
    index_bytes = _index_bytes(store) - before
    best = float("inf")
    for _ in range(repeat):  # opened anew, as each remote run is
        t0 = time.perf_counter()
        res = replaydb.query(replaydb.open(store.path), text, plan=plan)
        best = min(best, time.perf_counter() - t0)
    rep = res.stats["replay"]
    return {"seconds": best, "bytes": rep["bytes"] + index_bytes, "intervals": rep["intervals"],
            "rows": res.table.num_rows, "table": res.table}


def _remote(uri: str, options: dict[str, str], cache: CacheOptions, text: str, plan: str,
            repeat: int, cold_pages: bool = True) -> dict[str, Any]:
    """Best of ``repeat`` runs, each on a store object opened anew (warm cache of small
    files and footers; with ``cold_pages`` no fetched chunk kept from an earlier run), with
    the fetch counters of the last run."""
    best = float("inf")
    for _ in range(repeat):
        if cold_pages:
            for p in [*Path(str(cache.dir)).rglob("*.pages"),
                      *Path(str(cache.dir)).rglob("*.ranges")]:
                p.unlink()
        t0 = time.perf_counter()
        store = Store(uri, storage_options=options, cache=cache)
        res = replaydb.query(store, text, plan=plan)
        best = min(best, time.perf_counter() - t0)
    fetched = store.location.counters.as_dict()
    return {"seconds": best, **fetched, "table": res.table}


def run(n: int | None, repeat: int, latency: float) -> Results:
    res = Results("object_store", "A store on an S3 endpoint against the same store on the "
                  "local disk")
    res.notes.append("local runs: a store object opened anew each (its files in the "
                     "operating system's cache), as the remote runs open theirs")
    res.notes.append("remote runs: a store object opened anew each, the cache of small files "
                     "and footers warm, no fetched chunk kept (ranged bytes: the index and "
                     "data chunks the plan reads); 'chunks cached': the same query again, its "
                     "chunks kept in the cache by an earlier process")
    work = Path(tempfile.mkdtemp(prefix="replaydb-objstore-"))
    table = load("flights-3m", n)
    local = store_of(work, STREAM, table, "date", indexed=("origin", "delay"))
    endpoint = S3Endpoint(latency_ms=latency)
    try:
        uri = endpoint.upload(local.path, "s3://bench-stores/flights")
        res.params = {"events": table.num_rows, "repeat": repeat, "latency_ms": latency,
                      "data_bytes": sum(f.stat().st_size for f in
                                        local.path.rglob("part-*.parquet"))}
        cache = CacheOptions(dir=str(work / "cache"))
        first = _remote(uri, endpoint.direct_options, cache, pattern("ORD", 180), "auto", 1)
        res.notes.append(f"first query on an empty cache: {first['seconds']:.2f} s, "
                         f"{first['requests']:,} requests, {first['bytes']:,} bytes (Delta "
                         "logs, tree segments, the origin and delay indexes, data chunks)")
        rows, ratios, per_interval, slow = [], [], [], []
        for airport in AIRPORTS:
            for delay in THRESHOLDS:
                rows.append(_query_row(res, local, uri, endpoint, cache, airport, delay,
                                       repeat, ratios, per_interval, slow))
        res.table("Planned (auto) queries: local store against the store on the endpoint "
                  "(warm cache of small files)",
                  ["query", "intervals", "rows", "local s", "local bytes (index + data)", "remote s",
                   "ranged requests", "ranged bytes", "bytes ratio", "requests/interval",
                   "all requests", f"remote s, +{latency:g} ms/request",
                   f"+{latency:g} ms, chunks cached"], rows)
        _full_replay(res, local, uri, endpoint, cache, repeat)
        _goals(res, ratios, per_interval, slow)
        _ingest(res, table, work, endpoint, cache, repeat)
    finally:
        endpoint.stop()
    return res


def _query_row(res: Results, local: Any, uri: str, endpoint: S3Endpoint, cache: CacheOptions,
               airport: str, delay: int, repeat: int, ratios: list[float],
               per_interval: list[float], slow: list[float]) -> list[Any]:
    text = pattern(airport, delay)
    loc = _local(local, text, "auto", repeat)
    rem = _remote(uri, endpoint.direct_options, cache, text, "auto", repeat)
    lat = _remote(uri, endpoint.options, cache, text, "auto", max(1, repeat // 2))
    warm = _remote(uri, endpoint.options, cache, text, "auto", max(1, repeat // 2),
                   cold_pages=False)
    if not (rem["table"].equals(loc["table"]) and lat["table"].equals(loc["table"])):
        res.notes.append(f"{airport} >= {delay}: remote rows DIFFER from local")
    ratio = rem["range_bytes"] / max(1, loc["bytes"])
    ints = max(1, loc["intervals"])
    ratios.append(ratio)
    per_interval.append(rem["ranges"] / ints)
    slow.append(rem["seconds"] / loc["seconds"])
    return [f"{airport}, delay >= {delay}", loc["intervals"], loc["rows"], loc["seconds"],
            loc["bytes"], rem["seconds"], rem["ranges"], rem["range_bytes"], ratio,
            rem["ranges"] / ints, rem["requests"], lat["seconds"], warm["seconds"]]


def _full_replay(res: Results, local: Any, uri: str, endpoint: S3Endpoint,
                 cache: CacheOptions, repeat: int) -> None:
    text = pattern("ORD", 180)
    runs = max(repeat, FULL_REPLAY_RUNS)  # short runs: the best of a few is noise-bound
    loc = _local(local, text, "replay", runs)
    rem = _remote(uri, endpoint.direct_options, cache, text, "replay", runs)
    lat = _remote(uri, endpoint.options, cache, text, "replay", 1)
    res.table("Full replay of the stream (plan replay)",
              ["where", "seconds", "requests", "bytes"],
              [["local disk", loc["seconds"], "-", loc["bytes"]],
               ["S3 endpoint (loopback)", rem["seconds"], rem["requests"], rem["bytes"]],
               [f"S3 endpoint, +{endpoint.latency_ms:g} ms/request", lat["seconds"],
                lat["requests"], lat["bytes"]]])
    ratio = rem["seconds"] / loc["seconds"]
    res.goal("full replay from the object store, time against local", "<= 1.5x",
             round(ratio, 2), ratio <= 1.5)


def _ingest(res: Results, table: Any, work: Path, endpoint: S3Endpoint, cache: CacheOptions,
            repeat: int) -> None:
    """The Spark ingest job (``replaydb ingest``'s) of the same flights, with indexes on
    origin and delay, into a new local store and into a new store on the endpoint, on one warm
    Spark session (its start-up is the same for both and left out): best of ``repeat``. On
    the endpoint twice: the local master's way (the tasks write into the driver's mirror, the
    commit uploads) and a cluster's way (``through_store``: the tasks stage on the object
    store, read the staging back and upload what they write)."""
    import pyarrow.parquet as pq

    from replaydb.ingest.job import ingest
    from replaydb.spark import get_spark

    src = work / "flights.parquet"
    pq.write_table(table, src)
    spark = get_spark("local[*]", app_name="replaydb bench object store", quiet=True)
    warm = replaydb.open(work / "warm", create=True)
    ingest(warm, "w", [str(src)], time_column="date", index=["origin"], spark=spark, quiet=True)
    ways = ("local", "s3", "s3-through")
    times: dict[str, float] = dict.fromkeys(ways, float("inf"))
    requests: dict[str, int] = {}
    for r in range(repeat):
        for where in ways:
            t0 = time.perf_counter()
            if where == "local":
                store = replaydb.open(work / f"ingest-{r}", create=True)
            else:
                store = Store(endpoint.bucket("bench-ingest") + f"/{where}-{r}", create=True,
                              storage_options=endpoint.direct_options, cache=cache)
            ingest(store, STREAM, [str(src)], time_column="date", index=["origin", "delay"],
                   spark=spark, quiet=True, through_store=where == "s3-through" or None)
            times[where] = min(times[where], time.perf_counter() - t0)
            if where != "local":  # the driver's requests (the tasks' own are not counted)
                requests[where] = store.location.counters.as_dict().get("requests", 0)
    res.table("Spark ingest job (indexes on origin and delay), one warm Spark session",
              ["where", "seconds", "events/s", "driver's requests"],
              [["local disk", times["local"], table.num_rows / times["local"], "-"],
               ["S3 endpoint (loopback), tasks write into the driver's mirror", times["s3"],
                table.num_rows / times["s3"], requests["s3"]],
               ["S3 endpoint (loopback), through the store (a cluster's way)",
                times["s3-through"], table.num_rows / times["s3-through"],
                requests["s3-through"]]])
    ratio = times["s3"] / times["local"]
    res.goal("ingest into the object store, time against local", "<= 1.3x", round(ratio, 2),
             ratio <= 1.3)


def _goals(res: Results, ratios: list[float], per_interval: list[float],
           slow: list[float]) -> None:
    worst = max(ratios)
    res.goal("planned queries: bytes fetched (index and data chunks) against the bytes the "
             "plan reads locally (worst query)", "<= 1.5x", round(worst, 2), worst <= 1.5)
    mean = statistics.fmean(per_interval)
    res.goal("planned queries: ranged requests per replay interval (mean over queries)",
             "<= 2", round(mean, 2), mean <= 2)
    res.notes.append("remote/local time of the planned queries: median "
                     f"{statistics.median(slow):.2f}x, max {max(slow):.2f}x")
    res.headline("selective pattern queries on a store on a loopback S3 endpoint, data bytes "
                 "and requests against the same plan on local disk",
                 f"{res.params['events']:,} flights, {len(ratios)} queries",
                 "replaydb on local disk",
                 f"bytes {statistics.median(ratios):.2f}x median, {max(ratios):.2f}x worst; "
                 f"{mean:.2f} requests per interval",
                 worst <= 1.5 and mean <= 2)


def main() -> None:
    ap = arguments(__doc__.splitlines()[0], quick="1M flights (default)", full="all 3M flights")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--latency", type=float, default=20.0, help="injected ms per request")
    args = ap.parse_args()
    n = None if args.full else 1_000_000
    run(n, args.repeat, args.latency).write_and_show()


if __name__ == "__main__":
    main()
