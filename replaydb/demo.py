"""``make demo``: ingest a real dataset through Spark and answer historical queries with plans.

Every step is a ``replaydb`` command, printed before it runs, so the demo doubles as a tour of the
command line:

1. prepare the US flights dataset (3M departures, from the npm package ``vega-datasets``; a
   generated stream stands in when npm cannot be reached);
2. ingest it with the Spark job, building secondary indexes on ``origin`` and ``delay``
   (re-running the demo finds the batch in the Delta log and skips it: exactly once);
3. show the stream's statistics (TAB+-tree shape, indexes);
4. EXPLAIN ANALYZE a delay-cascade pattern at Chicago O'Hare, then run it;
5. a windowed aggregation (daily average delay per airport) and a consistency check.

Data goes to ``data/`` and the store to ``demo-store/`` in the current directory (both ignored by
git); ``REPLAYDB_DEMO_DIR`` moves them.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

from replaydb.cli import main as cli
from replaydb.errors import ReplayDBError

CASCADE = (
    "SELECT * FROM flights MATCH_RECOGNIZE (ORDER BY date "
    "MEASURES A.date AS first_departure, C.date AS last_departure, A.delay AS first_delay, "
    "C.delay AS last_delay ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
    "PATTERN (A T1* B T2* C) WITHIN 3 HOURS "
    "DEFINE A AS A.origin = 'ORD' AND A.delay BETWEEN 30 AND 59, "
    "B AS B.origin = 'ORD' AND B.delay BETWEEN 60 AND 119, "
    "C AS C.origin = 'ORD' AND C.delay >= 120, T1 AS TRUE, T2 AS TRUE)"
)
RARE = (
    "SELECT * FROM flights MATCH_RECOGNIZE (ORDER BY t "
    "MEASURES A.t AS first_t, B.t AS last_t, A.delay AS first_delay, B.delay AS second_delay "
    "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A X* B) WITHIN 1 HOUR "
    "DEFINE A AS A.origin = 'ORD' AND A.delay >= 180, B AS B.origin = 'ORD' AND B.delay >= 180, "
    "X AS TRUE)"
)
"""Rare at O'Hare: the planner replays only the few intervals the two indexes point to."""
DAILY = (
    "SELECT window_start, window_end, origin, COUNT(*) AS departures, AVG(delay) AS avg_delay "
    "FROM TABLE(TUMBLE(TABLE flights, DESCRIPTOR(date), INTERVAL '1' DAY)) "
    "WHERE origin = 'ORD' GROUP BY window_start, window_end, origin"
)


def run(args: list[str]) -> int:
    print(f"\n$ replaydb {' '.join(shlex.quote(a) for a in args)}", flush=True)
    t0 = time.perf_counter()
    rc = cli(args)
    print(f"[{time.perf_counter() - t0:.1f} s, exit {rc}]", flush=True)
    return rc


def main() -> int:
    base = Path(os.environ.get("REPLAYDB_DEMO_DIR", "."))
    data = base / "data"
    store = str(base / "demo-store")
    data.mkdir(parents=True, exist_ok=True)
    flights = data / "flights-3m.parquet"
    print("replaydb demo: US flights, January-June 2001 (3,000,000 departures)")
    if not flights.exists():
        rc = run(["datasets", "make", "flights-3m", str(flights)])
        if rc != 0:
            print("the flights dataset could not be fetched (npm unavailable?); using a "
                  "generated stream with the same columns instead", file=sys.stderr)
            return _generated_demo(data, store)
    steps = [
        ["ingest", store, "flights", str(flights), "--time", "date", "--time-unit", "ms",
         "--index", "origin", "--index", "delay"],
        ["stats", store, "flights"],
        ["explain", store, RARE, "--analyze", "--plot", str(data / "plan.png")],
        ["query", store, RARE],
        ["query", store, CASCADE],
    ]
    for step in steps:
        if run(step) != 0:
            return 1
    if _has_window_sql():
        run(["query", store, DAILY])
    return run(["check", store, "--quick"])


def _has_window_sql() -> bool:
    try:
        import replaydb.planner.lang.window_sql  # noqa: F401
    except ImportError:
        return False
    return True


def _generated_demo(data: Path, store: str) -> int:
    src = data / "synthetic-normal.parquet"
    if not src.exists() and run(["datasets", "make", "synthetic-normal", str(src),
                                 "--events", "1000000"]) != 0:
        return 1
    query = ("SELECT * FROM synthetic MATCH_RECOGNIZE (ORDER BY t MEASURES FIRST(S1.seq) AS "
             "first_seq, LAST(S2.seq) AS last_seq ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
             "PATTERN (S1 T* S2) WITHIN 300 DEFINE S1 AS S1.A1 BETWEEN 0.5 AND 0.505, "
             "S2 AS S2.A2 BETWEEN 0.5 AND 0.51, T AS TRUE)")
    for step in (["ingest", store, "synthetic", str(src), "--time", "t", "--time-unit", "s",
                  "--index", "A1", "--index", "A2"],
                 ["stats", store, "synthetic"], ["explain", store, query, "--analyze"],
                 ["query", store, query]):
        if run(step) != 0:
            return 1
    return run(["check", store, "--quick"])


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ReplayDBError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
