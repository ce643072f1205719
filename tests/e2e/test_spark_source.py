"""The Spark data source (``spark.read.format("replaydb")``) on a real local Spark session: a
query's DataFrame holds the rows ``replaydb query`` gives (one golden query per language, and an
index-assisted plan split over tasks), a stream's DataFrame holds its events with time filters
pushed down, and bad options are clear errors."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

import replaydb
import replaydb.spark_source as source
from replaydb.errors import UsageError
from tests.queries.golden import ROOT, load_case
from tests.queries.stores import StoreCache

pytestmark = pytest.mark.spark

CASES = ["match_recognize/stock_fixed_sequence", "sase/stock_kleene_return",
         "tpstream/traffic_speeding_braking", "greta/stock_q1_downtrends",
         "window_sql/count_windows"]


@pytest.fixture(scope="module")
def session(spark: Any) -> Any:
    source.register(spark)
    return spark


def _sorted_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows as Spark returns them: timestamps as naive datetimes in the session's zone, UTC."""
    def spark_value(v: Any) -> Any:
        if isinstance(v, dt.datetime) and v.tzinfo is not None:
            return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v

    return sorted(tuple(spark_value(v) for v in r.values()) for r in table.to_pylist())


def _frame_rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in frame.collect())


@pytest.mark.parametrize("name", CASES)
def test_query_results_equal_replaydb_query(request: pytest.FixtureRequest, session: Any,
                                            golden_stores: StoreCache, name: str) -> None:
    case = load_case(ROOT / f"{name}.case")
    store = golden_stores.for_test(request, case.store)
    want = replaydb.query(store, case.query, **case.options).table
    frame = (session.read.format("replaydb").option("store", str(store.path))
             .option("query", case.query).load())
    assert frame.columns == want.column_names
    assert _frame_rows(frame) == _sorted_rows(want)


def test_interval_plans_split_over_tasks(request: pytest.FixtureRequest, session: Any,
                                         golden_stores: StoreCache) -> None:
    case = load_case(ROOT / "tpstream/traffic_speeding_braking.case")
    store = golden_stores.for_test(request, case.store)
    want = replaydb.query(store, case.query, interval_events=50).table
    options = {"store": str(store.path), "query": case.query, "interval_events": "50"}
    work = source.ReplayDBDataSource(options).work()
    n = len(work.plan.source.intervals)
    assert work.splittable and n >= 2
    assert len(work.split(n + 1)) == n  # at most one task per interval
    frame = session.read.format("replaydb").options(**options, partitions=str(n)).load()
    assert frame.rdd.getNumPartitions() == n
    assert _frame_rows(frame) == _sorted_rows(want)


def test_numbered_results_run_in_one_task(request: pytest.FixtureRequest,
                                          golden_stores: StoreCache) -> None:
    case = load_case(ROOT / "match_recognize/stock_rare_volumes.case")
    store = golden_stores.for_test(request, case.store)
    work = source.ReplayDBDataSource({"store": str(store.path), "plan": "optimal",
                                      "query": case.query}).work()
    assert len(work.plan.source.intervals) >= 3  # an interval plan, yet match numbers
    assert not work.splittable and len(work.split(3)) == 1  # need one task


def test_stream_events_with_time_filters_pushed(request: pytest.FixtureRequest, session: Any,
                                                golden_stores: StoreCache) -> None:
    case = load_case(ROOT / "window_sql/count_windows.case")
    store = golden_stores.for_test(request, case.store)
    snap = store.stream(case.store.stream)
    lo, hi = snap.t_range
    mid = (lo + hi) // 2
    frame = (session.read.format("replaydb").option("store", str(store.path))
             .option("stream", case.store.stream).option("partitions", "4").load())
    assert frame.count() == snap.n_events
    assert frame.schema["t"].dataType.typeName() == "timestamp"  # the stream's unit is declared

    def instant(ms: int) -> dt.datetime:
        return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)  # UTC, as the session

    # bounds between two milliseconds: t > x.5 ms reads from x + 1, t <= x.5 up to x
    from pyspark.sql import functions as F

    lo_t = instant(mid) - dt.timedelta(microseconds=500)
    hi_t = instant(mid + 60_000) - dt.timedelta(microseconds=500)
    window = frame.where((F.col("t") > lo_t) & (F.col("t") <= hi_t))
    want = snap.read(mid, mid + 60_000)
    want = want.set_column(0, "t", want.column("t").cast(pa.timestamp("ms", tz="UTC")))
    assert _frame_rows(window) == _sorted_rows(want)
    plan = window._jdf.queryExecution().executedPlan().toString()
    assert "Filter" not in plan or "t#" not in plan.split("Filter", 1)[1].split("\n", 1)[0]
    work = source.plan_stream_work(source.SourceOptions.parse(
        {"store": str(store.path), "stream": case.store.stream}))
    pieces = work.split(4)
    assert len(pieces) > 1 and pieces[0].t0 is None and pieces[-1].t1 is None
    assert all(a.t1 == b.t0 for a, b in zip(pieces, pieces[1:]))


def test_bad_options_are_clear_errors() -> None:
    with pytest.raises(UsageError, match="unknown option.*qeury"):
        source.SourceOptions.parse({"store": "s", "stream": "e", "qeury": "x"})
    opts = source.SourceOptions.parse({"store": "s", "query": "q", "Interval_Events": "50",
                                       "cpm": "false", "name": "x"})
    assert opts.extra == (("cpm", False), ("interval_events", 50), ("name", "x"))
    with pytest.raises(UsageError, match="exactly one of"):
        source.SourceOptions.parse({"store": "s"})
    with pytest.raises(UsageError, match="needs .option\\('store'"):
        source.SourceOptions.parse({"stream": "x"})
    with pytest.raises(UsageError, match="partitions must be an integer"):
        source.SourceOptions.parse({"store": "s", "stream": "x", "partitions": "many"})


def test_time_filters_narrow_the_read_exactly() -> None:
    """Spark's comparisons of ``t`` become half-open ranges of stream units: integers on a
    stream of plain numbers, instants (at any microsecond) on a stream of times."""
    from pyspark.sql import datasource as ds

    numbers = source.StreamWork("s", "e", 1, pa.schema([]))
    got = numbers.narrowed(ds.GreaterThan(("t",), 10)).narrowed(ds.LessThanOrEqual(("t",), 20))
    assert (got.t0, got.t1) == (11, 21)
    assert numbers.narrowed(ds.GreaterThan(("t",), dt.datetime(2001, 1, 1))) is None
    assert numbers.narrowed(ds.GreaterThan(("x",), 10)) is None
    times = source.StreamWork("s", "e", 1, pa.schema([]), time_unit="ms")
    at = dt.datetime(1970, 1, 1, 0, 0, 1, 500)  # 1000.5 ms
    whole = dt.datetime(1970, 1, 1, 0, 0, 1)

    def bounds(f: Any) -> tuple[int | None, int | None]:
        w = times.narrowed(f)
        return w.t0, w.t1

    assert bounds(ds.GreaterThan(("t",), at)) == (1001, None)
    assert bounds(ds.GreaterThanOrEqual(("t",), at)) == (1001, None)
    assert bounds(ds.LessThan(("t",), at)) == (None, 1001)
    assert bounds(ds.LessThanOrEqual(("t",), at)) == (None, 1001)
    assert bounds(ds.GreaterThan(("t",), whole)) == (1001, None)
    assert bounds(ds.LessThanOrEqual(("t",), whole)) == (None, 1001)
    assert bounds(ds.EqualTo(("t",), whole)) == (1000, 1001)
    assert bounds(ds.EqualTo(("t",), at)) == (1001, 1001)  # no event
    assert times.narrowed(ds.GreaterThan(("t",), 10)) is None
    nanos = source.StreamWork("s", "e", 1, pa.schema([]), time_unit="ns")
    assert nanos.narrowed(ds.GreaterThan(("t",), at)) is None  # Spark sees microseconds


def test_a_store_on_s3_in_query_and_stream_mode(request: pytest.FixtureRequest, session: Any,
                                                golden_stores: StoreCache, s3: Any,
                                                tmp_path: Any) -> None:
    """The store's ``s3://`` URI and ``storage.*`` options: the executors read it by URI."""
    case = load_case(ROOT / "match_recognize/stock_fixed_sequence.case")
    store = golden_stores.for_test(request, case.store)
    uri = s3.upload(store.path, "s3://spark-source/store")
    want = replaydb.query(store, case.query, **case.options).table
    def reader() -> Any:  # a DataFrameReader keeps the options given to it
        r = session.read.format("replaydb").option("store", uri)
        for k, v in s3.options.items():
            r = r.option(f"storage.{k}", v)
        return r.option("cache_dir", str(tmp_path))

    assert _frame_rows(reader().option("query", case.query).load()) == _sorted_rows(want)
    events = reader().option("stream", case.store.stream).option("partitions", "3").load()
    assert events.count() == store.stream(case.store.stream).n_events
