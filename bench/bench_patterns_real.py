"""Pattern queries on real data: replaydb (auto and full replay) against Flink SQL MATCH_RECOGNIZE.

Data: ``flights-3m`` (the first million flights, and in ``--full`` all 3M) and ``opensky``
(928,634 ADS-B state vectors), each appended to a store with indexes on the columns its queries
test. Queries: MATCH_RECOGNIZE patterns of two and three rows with a reluctant gap, ``ONE ROW PER
MATCH`` and ``AFTER MATCH SKIP TO NEXT ROW`` (the shape on which Flink's non-backtracking matcher
finds the same matches as the standard: see :mod:`replaydb.bench.peers.flink_sql`), spread over
selectivities by their thresholds, some partitioned (by airport, by aircraft).

Per query and size, side by side on the same machine: replaydb ``auto`` (the planner's choice,
with the share of the stream it replays) and ``replay`` in this process (best of ``--repeat``,
wall and CPU), and Flink SQL on a local mini-cluster over the same rows (:mod:`replaydb.bench.
peers.flink`; its per-job overhead, a trivial job's warm time, is reported and subtracted in
"Flink net"). Flink's match count is checked against replaydb's. Flink runs under a time cap
(``--flink-cap`` seconds for the whole run); what it did not finish is reported as such.

Usage: ``python -m replaydb.bench.bench_patterns_real [--quick | --full] [--repeat R]
[--flink-cap S] [--no-flink] [--datasets flights-3m,opensky]``. Flink needs
``make bench-env-flink``. Writes ``bench/results/patterns_real/``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from replaydb.bench.common import (
    Results,
    arguments,
    format_speedups,
    speedup_stats,
)
from replaydb.bench.planner_report import flink_net
from replaydb.bench.realdata import load, store_of, timed_query
from replaydb.errors import ReplayDBError


def _pair(stream: str, order: str, cond_a: str, cond_b: str, within: str,
          partition: str | None = None) -> str:
    part = f"PARTITION BY {partition} " if partition else ""
    return (f"SELECT * FROM {stream} MATCH_RECOGNIZE ({part}ORDER BY {order} MEASURES "
            f"A.{order} AS first_t, B.{order} AS last_t ONE ROW PER MATCH AFTER MATCH SKIP TO "
            f"NEXT ROW PATTERN (A X* B) WITHIN {within} DEFINE A AS {cond_a}, B AS {cond_b}, "
            "X AS TRUE)")


@dataclass(frozen=True)
class Dataset:
    """A real dataset, its stream's time column, the indexed columns and the queries."""

    name: str
    stream: str
    time: str
    indexed: tuple[str, ...]
    queries: dict[str, str]


FLIGHTS = Dataset("flights-3m", "flights", "date", ("origin", "delay"), {
    **{f"ORD delays >= {d} min, twice within 1 h": _pair(
        "flights", "date", f"A.origin = 'ORD' AND A.delay >= {d}",
        f"B.origin = 'ORD' AND B.delay >= {d}", "1 HOUR") for d in (60, 180, 600)},
    **{f"one airport, delays >= {d} min, twice within 2 h": _pair(
        "flights", "date", f"A.delay >= {d}", f"B.delay >= {d}", "2 HOURS", "origin")
       for d in (300, 900)},
})
OPENSKY = Dataset("opensky", "opensky", "timestamp", ("vertical_rate", "groundspeed"), {
    **{f"one aircraft climbs >= {v} ft/min, then descends as fast, within 5 min": _pair(
        "opensky", "timestamp", f"A.vertical_rate >= {v}", f"B.vertical_rate <= -{v}",
        "5 MINUTES", "icao24") for v in (1500, 3000, 5000)},
    **{f"one aircraft at >= {s} kt, then under 50 kt, within 5 min": _pair(
        "opensky", "timestamp", f"A.groundspeed >= {s}", "B.groundspeed < 50", "5 MINUTES",
        "icao24") for s in (350, 450)},
})
DATASETS = {d.name: d for d in (FLIGHTS, OPENSKY)}


def measure_replaydb(store: Any, text: str, repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    total = store.stream(store.streams()[0]).n_events
    for plan in ("auto", "replay"):
        try:
            wall, cpu, res = timed_query(store, text, plan, repeat)
        except ReplayDBError as exc:  # e.g. the state cap: reported as this plan's miss
            out[plan] = {"wall": None, "cpu": None, "rows": None, "replayed": None,
                         "error": f"{plan}: {exc}"}
            continue
        replay = res.stats.get("replay", {})
        out[plan] = {"wall": wall, "cpu": cpu, "rows": res.table.num_rows,
                     "replayed": replay.get("events", total) / max(total, 1), "error": None}
    return out


def measure_flink(ds: Dataset, table: pa.Table, cap: float) -> dict[str, Any]:
    from replaydb.bench.peers.flink import FlinkUnavailable, run_flink

    try:
        return run_flink(table, ds.queries, time_column=ds.time, time_unit="ms",
                         table=ds.stream, mode="count", parallelism=os.cpu_count() or 1,
                         timeout_s=cap, query_timeout_s=cap / 2, build_env=False)
    except FlinkUnavailable as exc:
        return {"error": str(exc)}
    except Exception as exc:  # a killed or failed run is reported, the benchmark goes on
        return {"error": f"{type(exc).__name__}: {exc}"}


def run_size(ds: Dataset, n: int | None, repeat: int, flink_cap: float | None,
             flink_runs: list[list[Any]]) -> list[dict[str, Any]]:
    table = load(ds.name, n, seq=True)
    events = table.num_rows
    with tempfile.TemporaryDirectory(prefix="bench-patterns-real-") as d:
        store = store_of(Path(d), ds.stream, table, ds.time, ds.indexed)
        ours = {}
        for name, text in ds.queries.items():
            print(f"  {ds.name} {events:,}: {name}", flush=True)
            ours[name] = measure_replaydb(store, text, repeat)
    flink = measure_flink(ds, table, flink_cap) if flink_cap else {"error": "not run"}
    warm = ((flink.get("startup") or {}).get("trivial_warm_s") or 0.0)
    rows = []
    for name, o in ours.items():
        f = (flink.get("queries") or {}).get(name, {})
        gross = None if f.get("error") else f.get("wall_s")
        rows.append({"dataset": ds.name, "events": events, "query": name,
                     "matches": o["auto"]["rows"], "replayed": o["auto"]["replayed"],
                     "auto": o["auto"]["wall"], "auto_cpu": o["auto"]["cpu"],
                     "replay": o["replay"]["wall"], "replay_rows": o["replay"]["rows"],
                     "flink": gross,
                     "flink_net": None if gross is None else flink_net(gross, warm),
                     "flink_matches": f.get("matches"),
                     "error": "; ".join(e for e in (o["auto"]["error"], o["replay"]["error"],
                                                    f.get("error") or flink.get("error")) if e)})
    flink_runs.append([f"{ds.name} {events:,}", flink.get("flink_version"),
                       flink.get("parallelism"), warm, flink.get("csv_write_s"),
                       flink.get("process_s"), flink.get("error")])
    return rows


def report(res: Results, rows: list[dict[str, Any]], flink_runs: list[list[Any]]) -> None:
    res.table("Flink runs", ["run", "Flink version", "parallelism", "trivial job warm s",
                             "CSV write s", "process s", "error"], flink_runs)
    res.table("Wall seconds per query (replaydb best of the repeats, in process; Flink one run "
              "per query on a local mini-cluster, net = minus a trivial job's warm time)",
              ["dataset", "events", "query", "matches", "share replayed by auto", "auto s",
               "auto CPU s", "replay s", "Flink s", "Flink net s", "Flink matches",
               "Flink / auto (net)", "note"],
              [[r["dataset"], r["events"], r["query"], r["matches"], r["replayed"], r["auto"],
                r["auto_cpu"], r["replay"], r["flink"], r["flink_net"], r["flink_matches"],
                r["flink_net"] / r["auto"] if r["flink_net"] is not None and r["auto"] else None,
                r["error"][:120]] for r in rows])
    both = [r for r in rows if r["auto"] is not None and r["replay"] is not None]
    agree = all(r["matches"] == r["replay_rows"] for r in both)
    flink_ok = [r for r in rows if r["flink_net"] is not None and r["auto"] is not None]
    flink_agree = all(r["flink_matches"] == r["matches"] for r in flink_ok)
    res.goal("auto and full replay return the same number of matches", "every query both ran",
             f"{agree} ({len(rows) - len(both)} of {len(rows)} with a plan that failed)", agree)
    res.goal("Flink finds replaydb's match count", "every query Flink finished",
             f"{sum(r['flink_matches'] == r['matches'] for r in flink_ok)} of {len(flink_ok)} "
             f"(Flink finished {len(flink_ok)} of {len(rows)})",
             flink_agree if flink_ok else None)
    st_replay = speedup_stats([r["replay"] for r in both], [r["auto"] for r in both])
    largest = max((r["events"] for r in rows), default=0)
    at = [r for r in flink_ok if r["events"] == largest or r["dataset"] != "flights-3m"]
    st_flink = speedup_stats([r["flink_net"] for r in at], [r["auto"] for r in at])
    res.goal("replaydb auto faster than Flink's net time", "every query Flink finished",
             format_speedups(st_flink), bool(at) and min(r["flink_net"] / r["auto"]
                                                         for r in at) > 1 if at else None)
    missed = len(rows) - len(flink_ok)
    res.headline("MATCH_RECOGNIZE on real data (flights, ADS-B): replaydb auto vs Flink SQL "
                 "MATCH_RECOGNIZE", ", ".join(sorted({f"{r['dataset']} {r['events']:,}"
                                                     for r in rows})) + f" events, {len(rows)} "
                 "query runs", f"Flink {_flink_version(flink_runs)} (net of job start-up)",
                 (f"Flink net / auto: {format_speedups(st_flink)}" if at else
                  "Flink not measured") + f"; auto vs replaydb's own full replay: median "
                 f"{st_replay.get('median', float('nan')):.2f}x"
                 + (f"; Flink did not finish {missed}" if missed else "")
                 + (f"; replaydb failed {len(rows) - len(both)} (see the table)"
                    if len(rows) > len(both) else ""),
                 None if not at else bool(flink_agree and min(
                     r["flink_net"] / r["auto"] for r in at) > 1))


def _flink_version(runs: list[list[Any]]) -> str:
    versions = {str(r[1]) for r in runs if r[1]}
    return ", ".join(sorted(versions)) or "(not run)"


def main(argv: list[str] | None = None) -> None:
    ap = arguments(__doc__.splitlines()[0], quick="flights 1M and opensky (default)",
                   full="flights 1M and 3M, and opensky")
    ap.add_argument("--repeat", type=int, default=3, help="replaydb runs per query and plan")
    ap.add_argument("--flink-cap", type=float, default=None,
                    help="seconds for each Flink run (quick 900, full 3600)")
    ap.add_argument("--no-flink", action="store_true", help="leave Flink out")
    ap.add_argument("--datasets", default="flights-3m,opensky", help="datasets to run")
    args = ap.parse_args(argv)
    full = bool(args.full)
    cap = None if args.no_flink else (args.flink_cap or (3600.0 if full else 900.0))
    sizes = {"flights-3m": [1_000_000, 3_000_000] if full else [1_000_000], "opensky": [None]}
    chosen = [DATASETS[x] for x in args.datasets.split(",") if x]
    res = Results("patterns_real", "MATCH_RECOGNIZE on real data: replaydb vs Flink SQL",
                  params={"mode": "full" if full else "quick", "repeat": args.repeat,
                          "flink_cap_s": cap, "datasets": ",".join(d.name for d in chosen)})
    res.table("Queries", ["dataset", "query", "text"],
              [[d.name, name, text] for d in chosen for name, text in d.queries.items()])
    rows: list[dict[str, Any]] = []
    flink_runs: list[list[Any]] = []
    for ds in chosen:
        for n in sizes[ds.name]:
            rows += run_size(ds, n, args.repeat, cap, flink_runs)
    report(res, rows, flink_runs)
    res.notes.append(f"median share of the stream auto replayed: "
                     f"{statistics.median(r['replayed'] for r in rows):.1%}" if rows else "")
    res.write_and_show()


if __name__ == "__main__":
    main()
