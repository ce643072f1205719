"""A Spark Python data source: a query's results, or a stream's events, as a DataFrame.

Register once per session, then read::

    import replaydb.spark_source
    replaydb.spark_source.register(spark)
    results = (spark.read.format("replaydb").option("store", "/data/store")
               .option("query", "SELECT ... MATCH_RECOGNIZE (...)").load())
    events = (spark.read.format("replaydb").option("store", "/data/store")
              .option("stream", "flights").load().where("t >= 978307200000"))

Options (strings, as Spark passes them; any other is an error naming the valid ones):
``store`` (required: the store's path, which every executor must see, or an ``s3://`` URI, which
every executor reads by itself: ``storage.KEY`` options are its storage options, e.g.
``.option("storage.AWS_ENDPOINT_URL", url)``, and ``cache_dir`` its local cache), exactly one of ``query``
and ``stream``, ``plan`` (``auto`` by default; ``replay`` forces full replay), ``version`` (the
stream version to read), ``partitions`` (the most Spark tasks to use; default: the session's
default parallelism); in query mode, any other option is an option of the query's planner or
operator, as ``replaydb.query`` takes it (an unknown one is an error naming the valid ones).

**Query mode.** The planner runs on the driver (in ``schema()`` and ``partitions()``) and turns
the query into its plan value; the executors replay it with the same executor as
``replaydb query`` (they import no planner module). The DataFrame's schema is the result table's
(found by running the plan's operator over no events on the driver). A plan whose source is an
interval scan, whose operator declares its results never cross a replay interval
(``interval_safe``) and numbers nothing by position (no MATCH_NUMBER or match id) is split into
up to ``partitions`` tasks, each replaying a run of consecutive intervals; every other plan runs
in one task, so its rows equal ``replaydb query``'s. Spark does not keep row order: sort the
DataFrame for an order.

**Stream mode.** The stream's stored columns (``t``, ``seq`` and the attributes) at one pinned
version, split into up to ``partitions`` time ranges of about equal event counts (from the
TAB+-tree's leaves, no event read on the driver). Comparisons of ``t`` with a constant (``=``,
``<``, ``<=``, ``>``, ``>=``, conjunctions of them) are pushed down (with
``spark.sql.python.filterPushdown.enabled``, which :func:`register` sets) and become the time
range the tasks read; Spark evaluates every other filter.

Cost: query mode plans once on the driver (as ``replaydb explain``) and reads what the plan reads;
stream mode reads the events of the requested time range once.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass, fields, replace
from fractions import Fraction
from typing import Any

import pyarrow as pa

from replaydb.errors import UsageError
from replaydb.timeunits import UNITS, epoch_ns

try:  # pyspark is a dependency; the data source classes need it at import time
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
except ImportError:  # pragma: no cover - without pyspark there is no Spark to register with
    DataSource = DataSourceReader = InputPartition = object  # type: ignore[misc,assignment]

NAME = "replaydb"
"""The format name: ``spark.read.format("replaydb")``."""

STORAGE = "storage."
"""Prefix of the options that are storage options of a store on an object store."""


def open_store(uri: str, storage: tuple[tuple[str, str], ...] = (),
               cache_dir: str | None = None) -> Any:
    """The store at ``uri`` opened read-only (a store on an object store with the storage
    options ``storage`` and its local cache in ``cache_dir``)."""
    from replaydb.store.mirror import CacheOptions
    from replaydb.store.store import Store

    cache = CacheOptions(dir=cache_dir) if cache_dir else None
    return Store(uri, read_only=True, storage_options=dict(storage) or None, cache=cache)


@dataclass(frozen=True)
class SourceOptions:
    """The data source's options (see the module docstring)."""

    store: str
    query: str | None = None
    stream: str | None = None
    plan: str = "auto"
    version: int | None = None
    partitions: int | None = None
    cache_dir: str | None = None
    storage: tuple[tuple[str, str], ...] = ()
    """Storage options of a store on an object store: the options ``storage.KEY``."""
    extra: tuple[tuple[str, Any], ...] = ()
    """Options of the query's planner and operator (as ``replaydb.query`` takes them; values
    read as integers, floats or true/false where they parse so)."""

    @classmethod
    def parse(cls, given: dict[str, str]) -> SourceOptions:
        """Spark's option map (keys in any case) as typed options; raises UsageError for a
        missing store, both or neither of query and stream, a bad number, or (in stream mode)
        any other option. In query mode other options go to the planner, which rejects the
        ones that are no option of the query's language."""
        from replaydb.planner.options import option_value

        names = {f.name for f in fields(cls)} - {"extra", "storage"}
        values = {str(k).lower(): v for k, v in given.items()}
        storage = tuple(sorted((k[len(STORAGE):].upper(), str(v)) for k, v in values.items()
                               if k.startswith(STORAGE)))
        values = {k: v for k, v in values.items() if not k.startswith(STORAGE)}
        extra = tuple(sorted((k, option_value(v)) for k, v in values.items() if k not in names))
        values = {k: v for k, v in values.items() if k in names}
        if extra and not values.get("query"):
            raise UsageError(f"unknown option(s) {', '.join(k for k, _ in extra)} of the "
                             "replaydb data source",
                             hint=f"valid options: {', '.join(sorted(names))}")
        if not values.get("store"):
            raise UsageError("the replaydb data source needs .option('store', PATH)")
        if bool(values.get("query")) == bool(values.get("stream")):
            raise UsageError("give exactly one of .option('query', Q) and .option('stream', NAME)")
        for key in ("version", "partitions"):
            if values.get(key) is not None:
                try:
                    values[key] = int(values[key])
                except ValueError:
                    raise UsageError(f"option {key} must be an integer, "
                                     f"not {values[key]!r}") from None
        return cls(**values, extra=extra, storage=storage)


def register(spark: Any) -> None:
    """Register the ``replaydb`` format with ``spark`` and enable filter pushdown into Python
    data sources (stream mode pushes time ranges)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(ReplayDBDataSource)


class ReplayDBDataSource(DataSource):  # type: ignore[misc]
    """The ``replaydb`` format (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def __init__(self, options: dict[str, str]) -> None:
        self.opts = SourceOptions.parse(dict(options))
        self._work: Any = None

    def work(self) -> Any:
        """The query's plan value or the stream's pinned version (planned once, on the
        driver)."""
        if self._work is None:
            self._work = plan_query_work(self.opts) if self.opts.query \
                else plan_stream_work(self.opts)
        return self._work

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self.work().schema)

    def reader(self, schema: Any) -> ReplayDBReader:
        return ReplayDBReader(self.work(), self.opts.partitions)


class ReplayDBReader(DataSourceReader):  # type: ignore[misc]
    """Splits the planned work into tasks and runs each in an executor."""

    def __init__(self, work: Any, partitions: int | None) -> None:
        self.work = work
        self.partitions_wanted = partitions

    def pushFilters(self, filters: list[Any]) -> Any:  # noqa: N802 - Spark's name
        if not isinstance(self.work, StreamWork):
            yield from filters
            return
        for f in filters:
            narrowed = self.work.narrowed(f)
            if narrowed is None:
                yield f
            else:
                self.work = narrowed

    def partitions(self) -> list[Any]:
        n = self.partitions_wanted or default_parallelism()
        return [InputPartition(pickle.dumps(piece)) for piece in self.work.split(max(1, n))]

    def read(self, partition: Any) -> Any:
        piece = pickle.loads(partition.value)
        yield from piece.run()


def default_parallelism() -> int:
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    return int(spark.sparkContext.defaultParallelism) if spark is not None else 1


# --------------------------------------------------------------------------- query mode
@dataclass(frozen=True)
class QueryWork:
    """A planned query: the store's path, the plan value, its result schema, and whether its
    intervals may run in separate tasks."""

    store: str
    plan: Any
    schema: pa.Schema
    splittable: bool
    storage: tuple[tuple[str, str], ...] = ()
    cache_dir: str | None = None

    def split(self, n: int) -> list[QueryWork]:
        """Up to ``n`` plans, each replaying a run of consecutive intervals, the runs of about
        equal estimated events (the Spark engine's interval grouping, from leaf counts)."""
        from replaydb.replay.plan import IntervalScan
        from replaydb.replay.spark.split import group_intervals, interval_events

        src = self.plan.source
        if not self.splittable or not isinstance(src, IntervalScan) or len(src.intervals) < 2:
            return [self]
        counts = interval_events(self.snapshots(), list(src.intervals))
        return [replace(self, plan=replace(self.plan, source=replace(
            src, intervals=src.intervals[a:b]))) for a, b in group_intervals(counts, n)]

    def snapshots(self) -> list[Any]:
        """The plan's streams, pinned at the plan's versions."""

        store = open_store(self.store, self.storage, self.cache_dir)
        return [store.stream(ref.name, ref.version) for ref in self.plan.streams]

    def run(self) -> Any:
        """Replay the plan in this process; yields its result as record batches."""
        from replaydb.replay.executor import execute

        table = execute(self.plan, self.snapshots()).table
        yield from table.cast(self.schema).to_batches()


def spark_times(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every timestamp as Spark holds one (``timestamp[us, tz=UTC]``: Spark's
    TimestampType is an instant in microseconds); the result's times are cast to it."""
    typ = pa.timestamp("us", tz="UTC")
    return pa.schema([f.with_type(typ) if pa.types.is_timestamp(f.type) else f for f in schema])


def plan_query_work(opts: SourceOptions) -> QueryWork:
    """Plan ``opts.query`` on the driver; find the result schema by running the operator over
    no events."""
    from replaydb.planner.query import plan_query, query_options
    from replaydb.replay.executor import execute
    from replaydb.replay.plan import IntervalScan
    from replaydb.store.interval_list import IntervalList

    store = open_store(opts.store, opts.storage, opts.cache_dir)
    options: dict[str, Any] = {"plan": opts.plan, **dict(opts.extra)}
    if opts.version is not None:
        options["version"] = opts.version
    plan = plan_query(store, opts.query or "", query_options(options))
    value = plan.physical
    empty = replace(value, source=IntervalScan(IntervalList.of([]), "nothing"))
    schema = spark_times(execute(empty, plan.ctx.snapshots).table.schema)
    traits = value.operator.build().traits()
    splittable = bool(traits.interval_safe and traits.numbering is None)
    return QueryWork(store.uri, value, schema, splittable, opts.storage, opts.cache_dir)


# --------------------------------------------------------------------------- stream mode
@dataclass(frozen=True)
class StreamWork:
    """A stream pinned at one version, and the time range ``[t0, t1)`` to read (None: open).
    ``time_unit``: set when the stream's times are instants; ``t`` is then a Spark timestamp
    (``timestamp[us, UTC]``) and time filters compare instants."""

    store: str
    stream: str
    version: int
    schema: pa.Schema
    t0: int | None = None
    t1: int | None = None
    time_unit: str | None = None
    storage: tuple[tuple[str, str], ...] = ()
    cache_dir: str | None = None

    def narrowed(self, f: Any) -> StreamWork | None:
        """This work with the comparison ``f`` on ``t`` applied to its range, or None when
        ``f`` is no such comparison (Spark then evaluates it)."""
        from pyspark.sql import datasource as ds

        if tuple(getattr(f, "attribute", ())) != ("t",):
            return None
        v = self._units(getattr(f, "value", None))
        if v is None:
            return None
        lo_ex, lo_in = math.floor(v) + 1, math.ceil(v)  # first unit > v, >= v
        bounds = {ds.EqualTo: (lo_in, lo_in + 1) if lo_in == v else (lo_in, lo_in),
                  ds.GreaterThan: (lo_ex, None), ds.GreaterThanOrEqual: (lo_in, None),
                  ds.LessThan: (None, lo_in), ds.LessThanOrEqual: (None, lo_ex)}.get(type(f))
        if bounds is None:
            return None
        lo, hi = bounds
        t0 = self.t0 if lo is None else (lo if self.t0 is None else max(self.t0, lo))
        t1 = self.t1 if hi is None else (hi if self.t1 is None else min(self.t1, hi))
        return replace(self, t0=t0, t1=t1)

    def _units(self, value: Any) -> Fraction | None:
        """A filter's value as stream units (exact), or None when it cannot be pushed: an
        integer on a stream of plain numbers, a datetime on a stream of instants in a unit
        no finer than Spark's microseconds."""
        import datetime as dt

        if self.time_unit is None:
            ok = isinstance(value, int) and not isinstance(value, bool)
            return Fraction(value) if ok else None
        if not isinstance(value, dt.datetime) or self.time_unit == "ns":
            return None
        return Fraction(epoch_ns(value), UNITS[self.time_unit])

    def split(self, n: int) -> list[StreamWork]:
        """Up to ``n`` consecutive time ranges of about equal event counts, cut at leaf
        boundaries no event time spans (the Spark engine's read ranges, from leaf counts)."""
        from replaydb.replay.spark.split import read_ranges

        snap = open_store(self.store, self.storage, self.cache_dir).stream(self.stream,
                                                                          self.version)
        groups = read_ranges([snap], [(self.t0, self.t1)], n,
                             batch_rows=snap.schema.leaf_capacity)
        return [replace(self, t0=g[0][1], t1=g[-1][2]) for g in groups] or [self]

    def run(self) -> Any:

        snap = open_store(self.store, self.storage, self.cache_dir).stream(self.stream,
                                                                          self.version)
        events = snap.read(self.t0, self.t1)
        if self.time_unit is not None:
            t = events.column("t").cast(pa.timestamp(self.time_unit, tz="UTC"))
            events = events.set_column(0, "t", t).cast(self.schema, safe=False)
        yield from events.to_batches()


def plan_stream_work(opts: SourceOptions) -> StreamWork:
    """A stream's events; ``t`` as a Spark timestamp where the stream's times are instants."""

    store = open_store(opts.store, opts.storage, opts.cache_dir)
    snap = store.stream(opts.stream or "", opts.version)
    sch = snap.schema
    unit = sch.time_unit if sch.time_instants else None
    schema = snap.arrow_schema
    if unit is not None:
        schema = schema.set(0, schema.field(0).with_type(pa.timestamp("us", tz="UTC")))
    return StreamWork(store.uri, snap.name, snap.version, schema, time_unit=unit,
                      storage=opts.storage, cache_dir=opts.cache_dir)
