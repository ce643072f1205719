"""The ``datasets`` command group, mounted by the main CLI as ``replaydb datasets ...``.

::

    replaydb datasets list [NAME ...] [--json]
    replaydb datasets make NAME OUT [--events N] [--seed S] [--force] [--row-group-size R]
                           [--compression C] [generator options, e.g. --cars 500 --no-pad]
    replaydb datasets queries [--m 4] [--count 10] [--seed 0] [--attributes A5] [--json]

The main CLI calls :func:`add_arguments` with its subparsers object and :func:`run` with the
parsed arguments when the command is ``datasets``. ``run`` returns the exit status and lets
:class:`~replaydb.errors.ReplayDBError` propagate (the main CLI prints message and hint).
:func:`main` runs the group on its own (``python -m replaydb.datasets``).

Generator options of every dataset are accepted by ``make``; naming an option the chosen dataset
does not have is an error that lists its options.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from replaydb.datasets.api import DEFAULT_ROW_GROUP, describe, list_datasets, make
from replaydb.datasets.base import OptionInfo, registry
from replaydb.datasets.queries import DEFAULT_ATTRIBUTES, generate_pattern_queries
from replaydb.errors import ReplayDBError, UsageError

_OPT_PREFIX = "dsopt_"


def _all_options() -> dict[str, tuple[OptionInfo, list[str]]]:
    """Every generator option by name, with the datasets that take it (types must agree)."""
    out: dict[str, tuple[OptionInfo, list[str]]] = {}
    for name, ds in sorted(registry().items()):
        for opt in ds.info.options:
            if opt.name in out:
                known, users = out[opt.name]
                if known.type is not opt.type:
                    raise TypeError(f"option {opt.name} has different types across datasets")
                users.append(name)
            else:
                out[opt.name] = (opt, [name])
    return out


def add_arguments(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``datasets`` command (with ``list``, ``make``, ``queries``) to ``subparsers``."""
    p = subparsers.add_parser(
        "datasets", help="generate workloads of the papers, prepare real datasets",
        description="Generate the papers' workloads and prepare real datasets as Parquet.",
    )
    p.set_defaults(func=run)
    sub = p.add_subparsers(dest="datasets_command", metavar="{list,make,queries}")
    sub.required = True

    ls = sub.add_parser("list", help="list datasets with columns, units and example queries")
    ls.add_argument("names", nargs="*", metavar="NAME", help="show these datasets in detail")
    _add_json(ls)

    mk = sub.add_parser("make", help="write a dataset to a Parquet file (streamed)",
                        description="Write dataset NAME to the Parquet file OUT.")
    mk.add_argument("name", metavar="NAME", help="dataset name (see `datasets list`)")
    mk.add_argument("out", metavar="OUT", help="output Parquet file")
    mk.add_argument("--events", "-n", type=int, default=None,
                    help="number of events (default: the paper's size; real data: all rows)")
    mk.add_argument("--seed", "-s", type=int, default=0, help="random seed (default 0)")
    mk.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    mk.add_argument("--row-group-size", type=int, default=DEFAULT_ROW_GROUP,
                    help=f"rows per Parquet row group (default {DEFAULT_ROW_GROUP})")
    mk.add_argument("--compression", default="snappy",
                    choices=("snappy", "zstd", "gzip", "lz4", "none"), help="Parquet compression")
    _add_json(mk)
    group = mk.add_argument_group("generator options (each applies to the datasets named)")
    for name, (opt, users) in sorted(_all_options().items()):
        helptext = f"[{', '.join(users)}] {opt.help}".replace("%", "%%")
        dest = _OPT_PREFIX + name
        if opt.type is bool:
            group.add_argument(opt.flag, dest=dest, action=argparse.BooleanOptionalAction,
                               default=argparse.SUPPRESS, help=helptext)
        elif opt.type is tuple:
            group.add_argument(opt.flag, dest=dest, default=argparse.SUPPRESS,
                               metavar="X,Y,...", help=helptext)
        else:
            group.add_argument(opt.flag, dest=dest, type=opt.type, default=argparse.SUPPRESS,
                               choices=opt.choices, metavar=None if opt.choices else name.upper(),
                               help=helptext)

    q = sub.add_parser("queries", help="random MATCH_RECOGNIZE queries for synthetic-normal",
                       description="Random pattern queries of dissertation 3.5.3.")
    q.add_argument("--m", type=int, default=4, help="basic symbols per query (default 4)")
    q.add_argument("--count", type=int, default=10, help="number of queries (default 10)")
    q.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    q.add_argument("--attributes", default=",".join(DEFAULT_ATTRIBUTES),
                   help="comma-separated attributes to draw from (default A1..A5)")
    q.add_argument("--stream", default="synthetic", help="stream name in FROM (default synthetic)")
    q.add_argument("--window", type=int, default=300, help="window in time units (default 300)")
    _add_json(q)
    return p


def _add_json(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS keeps a --json given to the parent command from being reset by the subcommand.
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print JSON instead of text")


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``datasets`` command; returns the exit status."""
    as_json = bool(getattr(args, "json", False))
    cmd = getattr(args, "datasets_command", None)
    if cmd == "list":
        return _run_list(args.names, as_json)
    if cmd == "make":
        return _run_make(args, as_json)
    if cmd == "queries":
        return _run_queries(args, as_json)
    raise UsageError("missing datasets command", hint="use one of: list, make, queries")


def _run_list(names: list[str], as_json: bool) -> int:
    infos = [describe(n) for n in names] if names else list_datasets()
    if as_json:
        print(json.dumps([i.to_dict() for i in infos], indent=2, default=str))
        return 0
    if not names:
        rows = [("NAME", "KIND", "EVENTS", "TIME", "UNIT", "DESCRIPTION")]
        for i in infos:
            ev = f"{i.default_events:,}" if i.default_events else "all"
            rows.append((i.name, i.kind, ev, i.time_column, i.time_unit, i.title))
        widths = [max(len(r[k]) for r in rows) for k in range(5)]
        for r in rows:
            print("  ".join(r[k].ljust(widths[k]) for k in range(5)) + "  " + r[5])
        print("\n`datasets list NAME` shows columns, options and example queries.")
        return 0
    for i in infos:
        print(f"{i.name} ({i.kind}): {i.title}")
        print(f"  source: {i.source}")
        print(f"  {i.description}")
        print(f"  time column: {i.time_column} (--time-unit {i.time_unit}); stream name in the "
              f"examples: {i.stream}" + (f"; keys: {', '.join(i.key_columns)}" if i.key_columns else ""))
        if i.default_events:
            print(f"  default events: {i.default_events:,}")
        print("  columns:")
        for c in i.columns:
            unit = f" [{c.unit}]" if c.unit else ""
            print(f"    {c.name:14s} {c.type:8s}{unit} {c.description}")
        if i.suggested_indexes:
            print(f"  suggested indexes: {', '.join(i.suggested_indexes)}")
        if i.options:
            print("  options:")
            for o in i.options:
                print(f"    {o.flag} ({o.type.__name__}, default {o.default!r}): {o.help}")
        for q in i.example_queries:
            print(f"  example ({q.language}): {q.description}")
            print(f"    {q.text}")
        for note in i.notes:
            print(f"  note: {note}")
        print()
    return 0


def _run_make(args: argparse.Namespace, as_json: bool) -> int:
    opts = {k[len(_OPT_PREFIX):]: v for k, v in vars(args).items() if k.startswith(_OPT_PREFIX)}
    compression = None if args.compression == "none" else args.compression
    result = make(args.name, args.out, args.events, args.seed, row_group_size=args.row_group_size,
                  compression=compression or "none", overwrite=args.force, **opts)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(f"wrote {result.rows:,} events of {result.name} to {result.path} "
          f"({result.bytes / 1e6:,.1f} MB, {result.row_groups} row groups) in "
          f"{result.seconds:,.2f} s ({result.events_per_second:,.0f} events/s)")
    print(f"time column {result.time_column}, unit {result.time_unit}; ingest with:")
    print(f"  {result.ingest_hint()}")
    return 0


def _run_queries(args: argparse.Namespace, as_json: bool) -> int:
    attrs = tuple(a.strip() for a in args.attributes.split(",") if a.strip())
    qs = generate_pattern_queries(args.m, args.count, args.seed, attributes=attrs,
                                  stream=args.stream, window=args.window)
    if as_json:
        print(json.dumps([
            {"text": q.text, "pattern": list(q.pattern),
             "symbols": [{"name": s.name, "attribute": s.attribute, "low": s.low, "high": s.high}
                         for s in q.symbols]}
            for q in qs
        ], indent=2))
    else:
        for q in qs:
            print(q.text)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the ``datasets`` group standalone (``python -m replaydb.datasets ...``)."""
    parser = argparse.ArgumentParser(prog="replaydb")
    sub = parser.add_subparsers(dest="command")
    add_arguments(sub)
    args = parser.parse_args(["datasets", *(sys.argv[1:] if argv is None else argv)])
    try:
        return run(args)
    except ReplayDBError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
