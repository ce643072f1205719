"""``replaydb query`` and ``replaydb explain``."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from replaydb.cli import open_store, store_argument
from replaydb.cli.output import print_json, progress, to_jsonable, write_table
from replaydb.errors import UsageError


def _size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(i?[bB])?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (e.g. 512M, 4G)")
    mult = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def _plan_options(p: argparse.ArgumentParser) -> None:
    store_argument(p)
    p.add_argument("query", help="query text, @FILE to read it from a file, or - for stdin")
    add_query_options(p)


def add_query_options(p: argparse.ArgumentParser) -> None:
    """The options of running a query (``query``, ``explain`` and ``shell`` share them)."""
    p.add_argument("--stream", default=None, help="stream to query when the text names none")
    p.add_argument("--plan", default="auto",
                   help="plan strategy: auto (cost-based), replay (full replay), or a "
                        "language-specific strategy (patterns: all, greedy, optimal, budget, cpm; "
                        "windows: index, naive; TPStream: tree)")
    p.add_argument("--version", type=int, default=None, help="query the stream as of a version")
    p.add_argument("--state-cap", type=int, default=None,
                   help="cap on operator state entries (partial matches, buffered events)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop with an error after this many seconds")
    p.add_argument("--max-memory", type=_size, default=None, metavar="SIZE",
                   help="stop with an error when resident memory passes SIZE (e.g. 4G)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"],
                   help="where operators run (gpu needs a CUDA GPU)")
    p.add_argument("--engine", default="local", choices=["local", "spark"],
                   help="run the replay locally or on Spark executors")
    p.add_argument("--master", default=None, help="Spark master URL for --engine spark")
    p.add_argument("--time-format", default="timestamp", choices=["timestamp", "raw"],
                   help="result columns holding stream times: timestamps (the default, where "
                        "the stream declares a time unit) or raw int64 counts of the unit")
    p.add_argument("--time-zone", default="UTC", metavar="ZONE",
                   help="zone to show times in and to read TIMESTAMP literals without a zone "
                        "in (default UTC; e.g. Europe/Berlin, +02:00)")


def register(sub: argparse._SubParsersAction) -> None:
    from replaydb.cli import common

    p = common(sub.add_parser(
        "query", help="run a historical query (MATCH_RECOGNIZE, SASE+, TPStream, GRETA, "
                      "windowing SQL)"))
    _plan_options(p)
    p.add_argument("--format", dest="fmt", default="table",
                   choices=["table", "csv", "json", "parquet"])
    p.add_argument("--output", default=None, metavar="PATH", help="write results to PATH")
    p.set_defaults(handler=cmd_query)

    p = common(sub.add_parser("explain", help="show the plan of a query (--analyze runs it)"))
    _plan_options(p)
    p.add_argument("--analyze", action="store_true",
                   help="execute and report what was actually read and the time per phase")
    p.add_argument("--verbose", action="store_true",
                   help="after the plan's tree, every field the planner recorded (the cost "
                        "model's rivals, weights, selectivities)")
    p.add_argument("--plot", default=None, metavar="PATH",
                   help="also execute and draw the timeline with the replay intervals, the "
                        "coarse pattern map and the matches (PNG)")
    p.set_defaults(handler=cmd_explain)


def query_text(arg: str) -> str:
    if arg == "-":
        return sys.stdin.read()
    if arg.startswith("@"):
        path = Path(arg[1:])
        if not path.is_file():
            raise UsageError(f"query file {path} not found")
        return path.read_text(encoding="utf-8")
    return arg


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {"plan": args.plan, "stream": args.stream, **fixed_options(args)}


def fixed_options(args: argparse.Namespace) -> dict[str, Any]:
    """The query options of :func:`add_query_options` other than ``plan`` and ``stream``."""
    return {"version": args.version, "state_cap": args.state_cap, "timeout": args.timeout,
            "max_memory": args.max_memory, "device": args.device, "engine": args.engine,
            "master": args.master, "time_format": args.time_format,
            "time_zone": args.time_zone}


def cmd_query(args: argparse.Namespace) -> int:
    store = open_store(args, read_only=True)
    res = run_with_progress(store, query_text(args.query), _options(args))
    if args.json and args.fmt == "table":
        print_json({"rows": res.table, "stats": res.stats})
        return 0
    try:
        write_table(res.table, args.fmt, args.output)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.output and not args.json:
        print(f"{res.table.num_rows:,} rows written to {args.output}", file=sys.stderr)
    return 0


def run_with_progress(store: Any, text: str, options: dict[str, Any]) -> Any:
    """Plan and execute ``text``; on a terminal a progress bar counts the events replayed
    (out of the streams' events when the plan replays them all); silent when piped."""
    from replaydb.planner.query import execute, plan_query, query_options
    from replaydb.replay.plan import FullScan

    plan = plan_query(store, text, query_options(options))
    value = plan.physical
    total = sum(s.events for s in value.streams) if isinstance(value.source, FullScan) else None
    with progress("replaying", total) as bar:
        return execute(plan, progress=lambda n: bar.update(completed=n))


def render_plan(plan: dict[str, Any], indent: int = 0) -> str:
    """EXPLAIN as indented text."""
    lines = []
    pad = "  " * indent
    for k, v in plan.items():
        if isinstance(v, dict):
            if not v:
                continue
            lines.append(f"{pad}{k}:")
            lines.append(render_plan(v, indent + 1))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            lines.append(f"{pad}{k}:")
            for item in v:
                lines.append(f"{pad}  - " + ", ".join(f"{a}={_short(b)}" for a, b in item.items()))
        else:
            lines.append(f"{pad}{k}: {_short(v)}")
    return "\n".join(x for x in lines if x)


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, str) and "\n" in v:
        return " ".join(v.split())
    return str(to_jsonable(v))


def cmd_explain(args: argparse.Namespace) -> int:
    from replaydb.planner.query import explain

    store = open_store(args, read_only=True)
    text = query_text(args.query)
    out = explain(store, text, analyze=args.analyze, plot=args.plot, **_options(args))
    if args.json:
        print_json(out)
    else:
        from replaydb.cli.explain_text import plan_tree

        print(plan_tree(out))
        if args.verbose:
            print("\ndetails:")
            print(render_plan(out, indent=1))
        if args.plot:
            print(f"plot saved to {args.plot}", file=sys.stderr)
    return 0
