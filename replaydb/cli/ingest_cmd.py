"""``replaydb ingest``: load raw event files into a stream with a Spark job."""

from __future__ import annotations

import argparse
import sys

from replaydb.cli import open_store, store_argument
from replaydb.cli.output import print_json
from replaydb.errors import UsageError
from replaydb.store.location import is_remote, parse_options
from replaydb.store.schema import KINDS, Attribute, StreamSchema
from replaydb.timeunits import describe_range


def register(sub: argparse._SubParsersAction) -> None:
    from replaydb.cli import common

    p = common(sub.add_parser(
        "ingest", help="load CSV/Parquet/JSON/Delta sources into a stream (a Spark job)",
        description="Load raw event files into a stream: validate every row (bad rows go to the "
                    "stream's quarantine table), sort globally by time, assign seq, write the "
                    "events with their TAB+-tree leaves and the requested secondary indexes, and "
                    "commit atomically. Re-running the same ingest changes nothing."))
    store_argument(p, "the store (created if missing)")
    p.add_argument("stream", help="stream name (created if missing)")
    p.add_argument("sources", nargs="+", metavar="SOURCE",
                   help="files, globs, directories or Delta table folders, local or on an "
                        "object store (s3://bucket/raw/*.csv; --storage-option applies to them "
                        "too)")
    p.add_argument("--time", dest="time_column", default="t", metavar="COL",
                   help="the source's event-time column (default: t)")
    p.add_argument("--time-unit", default=None, choices=["s", "ms", "us", "ns"],
                   help="the stream's time unit (new streams; default ms) and the unit of "
                        "integer epoch times in the source; naming it makes query results "
                        "show integer times as timestamps")
    p.add_argument("--source-unit", default=None, choices=["s", "ms", "us", "ns"],
                   help="unit of integer/float epoch times in the source, if not the stream's")
    p.add_argument("--time-format", default=None, metavar="FMT",
                   help="strptime format of string times (default: ISO 8601)")
    p.add_argument("--index", action="append", default=[], metavar="COL",
                   help="build a secondary index on COL (repeatable)")
    p.add_argument("--format", dest="fmt", default="auto",
                   choices=["auto", "csv", "parquet", "json", "delta"])
    p.add_argument("--master", default=None, metavar="URL",
                   help="Spark master (default local[*])")
    p.add_argument("--strict", action="store_true",
                   help="fail on the first bad row instead of quarantining it")
    p.add_argument("--batch-id", default=None,
                   help="idempotency key (default: derived from the sources and options)")
    p.add_argument("--lateness", type=int, default=0,
                   help="out-of-order bound of a new stream, in time units (default 0)")
    p.add_argument("--type-column", default=None, help="string column holding event types")
    p.add_argument("--upper", default=None, metavar="COL",
                   help="declare an imprecise stream: COL is the upper bound of each event's "
                        "time interval (the --time column is the lower bound)")
    p.add_argument("--pmf", default=None, metavar="COL",
                   help="imprecise streams: list column of probability weights over the interval")
    p.add_argument("--schema", default=None, metavar="COL:KIND,...",
                   help=f"explicit attribute schema of a new stream (kinds: {', '.join(KINDS)})")
    p.add_argument("--extra", default="error", choices=["error", "ignore"],
                   help="what to do with source columns the stream does not have")
    p.add_argument("--duplicates", default="keep", choices=["keep", "drop", "quarantine"],
                   help="rows equal in every column (within a source file)")
    p.add_argument("--rows-per-partition", type=int, default=2_000_000,
                   help="events per sort/write partition at most; the partition count is "
                        "rounded up to a multiple of Spark's cores (default: 2,000,000)")
    p.set_defaults(handler=cmd_ingest)


def parse_schema_arg(text: str, **kw) -> StreamSchema:
    attrs = []
    for part in text.split(","):
        if ":" not in part:
            raise UsageError(f"bad --schema entry {part!r}", hint="write COL:KIND, e.g. price:float64")
        name, kind = (x.strip() for x in part.split(":", 1))
        attrs.append(Attribute(name, kind))
    return StreamSchema(tuple(attrs), **kw)


def cmd_ingest(args: argparse.Namespace) -> int:
    from replaydb.ingest.job import ingest

    given = parse_options(args.storage_option) if args.storage_option else None
    if not is_remote(args.store):  # the options are for the sources on an object store
        if given and not any(is_remote(s) for s in args.sources):
            raise UsageError("storage options apply to stores and sources on object stores "
                             "(s3://...); neither the store nor a source is one")
        args.storage_option = None
    store = open_store(args, create=True)
    unit = args.time_unit or "ms"
    schema = None
    if args.schema:
        schema = parse_schema_arg(args.schema, time_unit=unit,
                                  time_instants=args.time_unit is not None,
                                  time_column=args.time_column,
                                  lateness=args.lateness, type_column=args.type_column,
                                  upper_column=args.upper, pmf_column=args.pmf)
    source_unit = args.source_unit
    if source_unit is None and args.time_unit and store.has_stream(args.stream):
        stream_unit = store.stream(args.stream).schema.time_unit
        if args.time_unit != stream_unit:
            source_unit = args.time_unit
    res = ingest(
        store, args.stream, args.sources, time_column=args.time_column, time_unit=unit,
        unit_declared=args.time_unit is not None,
        source_unit=source_unit, time_format=args.time_format, fmt=args.fmt, schema=schema,
        index=args.index, strict=args.strict, batch_id=args.batch_id, lateness=args.lateness,
        type_column=args.type_column, upper_column=args.upper, pmf_column=args.pmf,
        master=args.master, extra=args.extra,
        duplicates=args.duplicates, rows_per_partition=args.rows_per_partition,
        quiet=True if args.json else None, source_options=given,
    )
    if args.json:
        print_json(res.as_dict())
        return 0
    if res.skipped:
        print(f"already ingested (batch {res.batch_id}): nothing changed")
        return 0
    snap = store.stream(args.stream)
    unit = snap.schema.time_unit
    print(f"ingested {res.events:,} events into {args.stream!r} (version {res.version})")
    if res.t_min is not None:
        print(f"  time span     {describe_range(res.t_min, res.t_max, unit)}")
    print(f"  quarantined   {res.quarantined:,} row(s)"
          + (" - see the stream's quarantine table" if res.quarantined else ""))
    if res.late:
        print(f"  late events   {res.late:,} merged ({res.rewritten:,} stored events rewritten)")
    print(f"  files         {res.files} data file(s)"
          + (f", indexes on {', '.join(res.indexes)}" if res.indexes else ""))
    print(f"  duration      {res.seconds:.1f} s ({res.throughput:,.0f} rows/s)")
    print(f"  stream now    {snap.n_events:,} events", file=sys.stdout)
    return 0
