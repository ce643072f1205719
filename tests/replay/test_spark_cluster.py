"""Distributed queries on a real Spark standalone cluster: a master and two workers on this
machine, started from the pyspark installation and stopped afterwards (even on failure).

The queries run in separate driver processes - this file itself, run as a program, for plans
with replay intervals in every mode, and the ``replaydb query --engine spark`` command - so the
session-wide local Spark of the other tests is not disturbed. Their executors run under the
same guard as the local session's (``tests/spark_guard``: a task that imports the planner
fails), and the driver program checks that the guard bites on the cluster too. Their results (Arrow IPC / Parquet
files) are compared with local execution in this process: byte for byte, or after sorting for
sorted partition-parallel results. Both workers must have run tasks. The same queries also run
with ``--master local[*]``.

Slow (a cluster, two driver JVMs, fresh Python workers): ``make test-all``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import replaydb
from replaydb.planner.query import QueryOptions, execute, plan_query
from tests.conftest import EXECUTOR_GUARD
from tests.spark_cases import (
    QUERIES,
    STREAM,
    check_equal,
    make_store,
    random_intervals,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

CASES = [  # (query, mode, replay intervals?)
    ("mr_part_one", "interval", True),
    ("mr_select", "partition", False),
    ("sase_equiv", "partition", True),
    ("sase_types", "single", False),
    ("tps_part", "partition", False),
    ("tps_plain", "interval", True),
    ("imprecise", "single", False),
]
READ = {"mr_select": "shuffle", "sase_equiv": "scan", "tps_part": "scan"}
"""Partition mode's read per case (both run on the cluster)."""
SHARED_RESULTS = {"tps_plain", "tps_part"}
"""Cases whose results the executors leave as files in a directory the driver shares (the
workers run on this machine); the others send them through Spark."""


def intervals_for(name: str, with_intervals: bool) -> list[tuple[int, int]] | None:
    if not with_intervals:
        return None
    return random_intervals(np.random.default_rng(len(name)), 2000, 8)


def plan_for(store: replaydb.Store, name: str, engine: str, with_intervals: bool,
             master: str | None = None):  # noqa: ANN201
    opts = QueryOptions(plan="replay", stream=STREAM.get(name), engine=engine, master=master)
    plan = plan_query(store, QUERIES[name], opts)
    plan.with_intervals(intervals_for(name, with_intervals))
    return plan


def driver_main(store_path: str, master: str, out_dir: str) -> None:
    """The driver program: run every case on ``master``, write results and stats."""
    from replaydb.replay.spark import run_plan
    from replaydb.spark import get_spark

    spark = get_spark(master, config={"spark.executor.memory": "512m",
                                      "spark.driver.memory": "1g",
                                      "spark.sql.shuffle.partitions": "4", **EXECUTOR_GUARD},
                      quiet=True)
    store = replaydb.open(store_path, read_only=True)
    out = Path(out_dir)
    (out / "guard.json").write_text(json.dumps({"refused": planner_import_refused(spark)}))
    for name, mode, with_iv in CASES:
        plan = plan_for(store, name, "spark", with_iv, master)
        shared = str(out / "results") if name in SHARED_RESULTS else None
        table, stats = run_plan(plan.physical, plan.ctx.snapshots, master=master, mode=mode,
                                tasks=4, read_tasks=4, partition_read=READ.get(name),
                                result_dir=shared)
        with pa.OSFile(str(out / f"{name}.arrow"), "wb") as f, \
                pa.ipc.new_file(f, table.schema) as w:
            w.write_table(table)
        (out / f"{name}.json").write_text(json.dumps(stats, default=str))


def planner_import_refused(spark) -> bool:  # noqa: ANN001
    """Whether an executor refuses to import the planner (the guard's settings reached it)."""

    def import_the_planner(_: int) -> int:  # travels by value: defined in the driver program
        import importlib

        importlib.import_module("replaydb.planner.query")
        return 1

    try:
        spark.sparkContext.parallelize([0], 1).map(import_the_planner).collect()
    except Exception as exc:  # noqa: BLE001 - Spark wraps the task's error
        return "imported on a Spark executor" in str(exc)
    return False


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> replaydb.Store:
    return make_store(tmp_path_factory.mktemp("cluster-store") / "s", seed=33, n=5000)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    from replaydb.replay.spark.cluster import LocalCluster

    c = LocalCluster(workers=2, cores=1, memory="1g",
                     work_dir=tmp_path_factory.mktemp("cluster"))
    c.start()
    try:
        yield c
    finally:
        c.stop()


def run_driver(store: replaydb.Store, master: str, out: Path, env: dict | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "tests.replay.test_spark_cluster", str(store.path),
                           master, str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]


def compare_all(store: replaydb.Store, out: Path) -> list[dict]:
    all_stats = []
    for name, mode, with_iv in CASES:
        local = execute(plan_for(store, name, "local", with_iv)).table
        with pa.memory_map(str(out / f"{name}.arrow")) as src:
            got = pa.ipc.open_file(src).read_all()
        stats = json.loads((out / f"{name}.json").read_text())
        assert stats["spark"]["mode"] == mode, name
        assert stats["spark"].get("partition_read") == READ.get(name), name
        assert stats["spark"]["results_via"] == ("files" if name in SHARED_RESULTS
                                                 else "spark"), name
        assert local.num_rows > 0, name
        check_equal(local, got, stats)
        all_stats.append(stats)
    return all_stats


def test_standalone_cluster_equals_local(cluster, store: replaydb.Store,
                                         tmp_path: Path) -> None:
    run_driver(store, cluster.url, tmp_path / "out", env=cluster.env)
    assert json.loads((tmp_path / "out" / "guard.json").read_text()) == {"refused": True}
    stats = compare_all(store, tmp_path / "out")
    # the tasks ran in executors of both workers
    for wdir in cluster.worker_dirs:
        logs = list(wdir.glob("app-*/*/stderr"))
        assert logs, f"no executor ran on {wdir.name}"
        assert any("Running task" in p.read_text(errors="replace") for p in logs)
    pids = {t["pid"] for s in stats for t in s["spark"]["per_task"]}
    assert len(pids) >= 2
    assert list((tmp_path / "out" / "results").iterdir()) == []  # result files removed
    apps = cluster.status()
    assert len(apps.get("completedapps", [])) + len(apps.get("activeapps", [])) >= 1


def test_cli_on_the_cluster_and_on_local_star(cluster, store: replaydb.Store,
                                              tmp_path: Path) -> None:
    """``replaydb query --engine spark [--master URL]`` writes what local execution returns."""
    name = "sase_equiv"
    local = replaydb.query(store, QUERIES[name], plan="replay").table
    for master in (cluster.url, "local[*]"):
        out = tmp_path / f"{'cluster' if master.startswith('spark') else 'local'}.parquet"
        cmd = [sys.executable, "-m", "replaydb", "query", str(store.path), QUERIES[name],
               "--engine", "spark", "--master", master, "--plan", "replay",
               "--format", "parquet", "--output", str(out)]
        env = {**cluster.env, "REPLAYDB_SPARK_DRIVER_MEMORY": "1g",
               "REPLAYDB_SPARK_CONF": ";".join(f"{k}={v}" for k, v in EXECUTOR_GUARD.items())}
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-4000:]
        got = pq.read_table(out)
        assert got.num_rows == local.num_rows > 0
        assert got.equals(local.cast(got.schema))  # exact order of match_id across key groups


if __name__ == "__main__":
    driver_main(*sys.argv[1:4])
