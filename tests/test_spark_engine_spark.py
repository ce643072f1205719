"""The Spark engine through a real Spark session (``local[2]``, shared with the other Spark
tests): every mode, every operator kind, results equal to local execution; Spark's hash
placement; job names; progress output."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.errors import StateCapExceeded
from replaydb.planner.query import QueryOptions, execute, plan_query
from replaydb.replay.spark import run_plan
from replaydb.replay.spark.keys import bijective_slots, spark_hash_int
from replaydb.replay.spark.progress import Progress
from tests.test_spark_engine import QUERIES, STREAM, check_equal, make_store, random_intervals

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> replaydb.Store:
    return make_store(tmp_path_factory.mktemp("spark-real") / "s", seed=21, n=4000)


def both(store: replaydb.Store, name: str, intervals: list | None, mode: str,
         read: str = "auto") -> tuple[pa.Table, pa.Table, dict]:
    text = QUERIES[name]
    opts = {"plan": "replay", "stream": STREAM.get(name)}
    plan = plan_query(store, text, QueryOptions(**opts))
    plan.with_intervals(intervals)
    local = execute(plan).table
    plan = plan_query(store, text, QueryOptions(**opts, engine="spark"))
    plan.with_intervals(intervals)
    got, stats = run_plan(plan.physical, plan.ctx.snapshots, mode=mode, tasks=3, read_tasks=3, progress=False,
                          partition_read=read)
    return local, got, stats


def test_spark_hash_matches_spark(spark) -> None:
    rows = spark.range(-50, 200).selectExpr("cast(id as int) as v", "hash(cast(id as int)) as h"
                                            ).collect()
    assert all(spark_hash_int(r.v) == r.h for r in rows)
    # slots chosen on the driver land one per partition after repartition(n, slot)
    n = 3
    df = spark.createDataFrame([(s,) for s in bijective_slots(n)], "slot int")
    got = df.repartition(n, "slot").rdd.glom().map(lambda rs: [r.slot for r in rs]).collect()
    assert sorted(len(p) for p in got) == [1, 1, 1]
    assert [p[0] for p in got] == bijective_slots(n)


SLOW = pytest.mark.slow


@pytest.mark.parametrize("name, mode, with_intervals, read", [
    ("mr_part_one", "interval", True, "auto"),     # SQL semantics, flush blocks re-ordered
    pytest.param("mr_part_all", "single", False, "auto", marks=SLOW),
    pytest.param("mr_select", "partition", False, "shuffle", marks=SLOW),  # driver's select
    ("sase_equiv", "partition", True, "scan"),     # exact order of match_id across key groups
    ("sase_equiv", "partition", True, "shuffle"),
    pytest.param("sase_types", "single", False, "auto", marks=SLOW),  # streams merged by type
    pytest.param("tps_part", "partition", True, "scan", marks=SLOW),  # float aggregates
    pytest.param("tps_part", "partition", True, "shuffle", marks=SLOW),
    ("win_group", "partition", True, "scan"),      # planner-built operator, time carriers
    pytest.param("win_group", "partition", True, "shuffle", marks=SLOW),
    pytest.param("imprecise", "interval", True, "auto", marks=SLOW),
])
def test_real_spark_equals_local(spark, store: replaydb.Store, name: str, mode: str,
                                 with_intervals: bool, read: str) -> None:
    rng = np.random.default_rng(5)
    intervals = random_intervals(rng, 2000, 9) if with_intervals else None
    local, got, stats = both(store, name, intervals, mode, read)
    assert stats["spark"]["mode"] == mode and stats["spark"]["executor"] == "spark"
    if mode == "partition":
        assert stats["spark"]["partition_read"] == read
    assert local.num_rows > 0
    check_equal(local, got, stats)


def test_python_api_and_job_names(spark, store: replaydb.Store) -> None:
    res = replaydb.query(store, QUERIES["sase_equiv"], engine="spark", plan="replay")
    local = replaydb.query(store, QUERIES["sase_equiv"], plan="replay")
    assert res.table.equals(local.table)
    sp = res.stats["spark"]
    assert sp["mode"] == "partition" and sp["exact_order"]
    group = sp["job_group"]
    sc = spark.sparkContext
    assert sc.getLocalProperty("spark.jobGroup.id") == group
    assert "[partition replay by k" in sc.getLocalProperty("spark.job.description")
    assert len(sc.statusTracker().getJobIdsForGroup(group)) >= 1
    stages = {t["stage"] for t in sp["per_task"]}
    assert stages == {"scan"} and sp["partition_read"] == "scan"  # few cores: no shuffle
    # each scan task reads the whole replay and pushes its own keys' events
    assert sum(t["events"] for t in sp["per_task"]) == local.stats["replay"]["events"]
    assert res.stats["replay"]["events"] == sp["tasks"] * local.stats["replay"]["events"]


@pytest.mark.slow
def test_state_cap_error_from_an_executor(spark, store: replaydb.Store) -> None:
    with pytest.raises(StateCapExceeded) as ei:
        replaydb.query(store, QUERIES["sase_equiv"], engine="spark", plan="replay", state_cap=3)
    assert ei.value.cap == 3


@pytest.mark.slow
def test_progress_line_only_on_request(spark, capsys: pytest.CaptureFixture[str]) -> None:
    sc = spark.sparkContext
    sc.setJobGroup("replaydb-progress-test", "progress test")
    for enabled in (False, True):
        p = Progress(sc, "replaydb-progress-test", enabled=enabled, interval=0.05)
        p.start("counting")
        spark.range(0, 1000, numPartitions=2).count()
        p.stop()
    err = capsys.readouterr().err
    assert err.count("spark counting:") >= 1 and err.rstrip().endswith("tasks")
    assert "/" in err.strip().splitlines()[-1]


def test_cli_query_engine_spark(spark, store: replaydb.Store, tmp_path) -> None:  # noqa: ANN001
    """``replaydb query --engine spark --master URL`` runs the planned query on Spark (here the
    window planner's own operator, shipped as a recipe, and its key groups as tasks) and writes
    what local execution returns; ``explain --analyze`` reports the Spark run."""
    import json

    import pyarrow.parquet as pq

    from replaydb.cli import main

    text = QUERIES["win_group"]
    master = spark.sparkContext.master
    out = tmp_path / "spark.parquet"
    assert main(["query", str(store.path), text, "--engine", "spark", "--master", master,
                 "--format", "parquet", "--output", str(out)]) == 0
    local = replaydb.query(store, text).table
    got = pq.read_table(out)
    assert local.num_rows > 0
    check_equal(local, got.cast(local.schema), {"spark": {"mode": "partition"}})
    plan = explain_json(store, text, master)
    sp = plan["analyze"]["spark"]
    assert plan["strategy"] == "window-replay"
    assert sp["mode"] == "partition" and sp["executor"] == "spark" and sp["partition_keys"] == ["k"]
    assert json.dumps(sp)  # plain data


def explain_json(store: replaydb.Store, text: str, master: str) -> dict:
    from replaydb.planner.query import explain

    return explain(store, text, analyze=True, engine="spark", master=master)
