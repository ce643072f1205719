"""``replaydb stats`` and ``replaydb check``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from replaydb.cli import open_store, store_argument
from replaydb.cli.output import print_json


def register(sub: argparse._SubParsersAction) -> None:
    from replaydb.cli import common

    p = common(sub.add_parser("stats", help="streams, sizes, tree shape, indexes"))
    _store_and_stream(p)
    p.set_defaults(handler=cmd_stats)

    p = common(sub.add_parser("check", help="verify every invariant of the store"))
    _store_and_stream(p)
    p.add_argument("--quick", action="store_true",
                   help="skip reading the data files (structure and Delta consistency only)")
    p.set_defaults(handler=cmd_check)

    p = common(sub.add_parser("index", help="create a secondary index on a column "
                                            "(back-filled with a Spark job)"))
    store_argument(p)
    p.add_argument("stream")
    p.add_argument("column")
    p.add_argument("--local", action="store_true",
                   help="build in this process instead of with Spark (small streams)")
    p.add_argument("--master", default=None, help="Spark master (default local[*])")
    p.set_defaults(handler=cmd_index)

    p = common(sub.add_parser("compact", help="merge secondary index runs (level policy, or "
                                              "--full into one run per index)"))
    _store_and_stream(p)
    p.add_argument("--full", action="store_true", help="merge all runs of each index into one")
    p.set_defaults(handler=cmd_compact)

    p = common(sub.add_parser("vacuum", help="remove files no committed version references "
                                             "(leftovers of interrupted writes)"))
    _store_and_stream(p)
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p.add_argument("--min-age", type=float, default=3600.0, metavar="SECONDS",
                   help="on an object store, keep files younger than this (a writer on another "
                        "machine uploads its files before it commits them; default 3600)")
    p.set_defaults(handler=cmd_vacuum)


def _store_and_stream(p: argparse.ArgumentParser) -> None:
    """The arguments of a command on one stream or on all streams of a store."""
    store_argument(p)
    p.add_argument("stream", nargs="?", help="one stream (default: all)")


def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def cmd_stats(args: argparse.Namespace) -> int:
    store = open_store(args, read_only=True)
    stats = store.stats(args.stream)
    if args.json:
        print_json({"store": store.uri, "streams": stats})
        return 0
    if not stats:
        print(f"store {store.uri}: no streams")
    from replaydb.timeunits import describe_range

    for s in stats:
        print(f"stream {s['stream']} (version {s['version']})")
        print(f"  events        {s['events']:,}")
        if s["events"]:
            print(f"  time          {describe_range(s['t_min'], s['t_max'], s['time_unit'])}; "
                  f"stored in {s['time_unit'] or 'units'}, source column {s['time_column']!r}")
        print(f"  columns       {', '.join(f'{k}:{v}' for k, v in s['columns'].items())}")
        print(f"  TAB+-tree     height {s['tree_height']}, fan-out {s['fanout']}, "
              f"leaf capacity {s['leaf_capacity']}, {s['leaves']:,} leaves")
        print(f"  data          {s['data_files']} files, {_human_bytes(s['data_bytes'])}")
        print(f"  lateness      {s['lateness']}")
        if s["side_tables"]:
            for name, d in s["side_tables"].items():
                extra = ", ".join(f"{k} {v}" for k, v in d.items() if k not in ("kind",))
                print(f"  {name:<13} {d['kind']}: {extra}")
        else:
            print("  indexes       none")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    store = open_store(args, read_only=True)
    report = store.check(args.stream, deep=not args.quick)
    bad = {k: v for k, v in report.items() if v}
    if args.json:
        print_json({"ok": not bad, "streams": report})
    else:
        for name, problems in report.items():
            if problems:
                print(f"stream {name}: {len(problems)} problem(s)")
                for p in problems:
                    print(f"  - {p}")
            else:
                print(f"stream {name}: ok")
        if not report:
            print("no streams")
    return 1 if bad else 0


def _each_stream(
    args: argparse.Namespace,
    action: Callable[[Any, str], dict[str, Any]],
    report: Callable[[dict[str, Any]], None],
) -> int:
    """``action(store, stream)`` on ``args.stream`` or on every stream of the store (opened for
    writing); prints the results as one JSON list with ``--json``, else ``report`` of each."""
    store = open_store(args)
    names = [args.stream] if args.stream else store.streams()
    out = [action(store, n) for n in names]
    if args.json:
        print_json(out)
        return 0
    for r in out:
        report(r)
    return 0


def cmd_vacuum(args: argparse.Namespace) -> int:
    from replaydb.store.vacuum import vacuum_stream

    def report(r: dict[str, Any]) -> None:
        verb = "would remove" if r["dry_run"] else "removed"
        print(f"stream {r['stream']}: {verb} {len(r['files'])} file(s), {_human_bytes(r['bytes'])}")

    return _each_stream(args, lambda store, n: vacuum_stream(
        store, n, dry_run=args.dry_run, min_age=args.min_age), report)


def cmd_index(args: argparse.Namespace) -> int:
    from replaydb.indexes.manage import create_index

    store = open_store(args)
    out = create_index(store, args.stream, args.column,
                       engine="local" if args.local else "spark", master=args.master)
    if args.json:
        print_json(out)
    else:
        print(f"index on {args.stream}.{args.column}: {out['entries']:,} entries in "
              f"{out['runs']} run(s), {_human_bytes(out['bytes'])} (stream version "
              f"{out['stream_version']})")
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    from replaydb.indexes.manage import compact

    def report(r: dict[str, Any]) -> None:
        if not r["indexes"]:
            print(f"stream {r['stream']}: no indexes")
        for col, d in r["indexes"].items():
            print(f"stream {r['stream']}: index {col}: {d['runs_before']} -> {d['runs_after']} "
                  f"run(s)")

    return _each_stream(args, lambda store, n: compact(store, n, full=args.full), report)
