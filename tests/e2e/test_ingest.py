"""The Spark ingestion job end to end, on a real local Spark session and real files."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import replaydb
from replaydb.errors import DataError
from replaydb.ingest.job import ingest
from replaydb.store.vacuum import vacuum_stream

pytestmark = pytest.mark.spark


def _frame(t, seed):
    rng = np.random.default_rng(seed)
    n = len(t)
    return pa.table({"ts": pa.array(t, pa.int64()), "x": rng.normal(size=n),
                     "k": rng.integers(0, 50, n), "name": [f"n{i % 7}" for i in range(n)]})


def _sources(tmp_path):
    a = _frame(np.arange(0, 3000, 3), 1)           # t = 0, 3, 6, ...
    b = _frame(np.arange(1, 3000, 3), 2)           # t = 1, 4, ...
    c = _frame(np.arange(2, 3000, 3), 3)           # t = 2, 5, ...
    pa.csv.write_csv(a, tmp_path / "a.csv")
    pq.write_table(b, tmp_path / "b.parquet", row_group_size=300)
    with open(tmp_path / "c.jsonl", "w") as fh:
        for r in c.to_pylist():
            fh.write(json.dumps(r) + "\n")
    return [str(tmp_path / "a.csv"), str(tmp_path / "b.parquet"), str(tmp_path / "c.jsonl")], \
        pa.concat_tables([a, b, c])


def test_csv_parquet_json_into_one_stream(tmp_path, spark):
    import pyarrow.csv  # noqa: F401 - registers pa.csv

    srcs, expected = _sources(tmp_path)
    store = replaydb.open(tmp_path / "store", create=True)
    res = ingest(store, "ev", srcs, time_column="ts", time_unit="ms", spark=spark, quiet=True,
                 rows_per_partition=1000)
    assert res.events == 3000 and res.quarantined == 0 and not res.skipped
    assert store.check("ev") == {"ev": []}
    snap = store.stream("ev")
    got = snap.read()
    exp = expected.sort_by("ts")
    assert got.column("t").to_pylist() == exp.column("ts").to_pylist()
    assert got.column("seq").to_pylist() == list(range(3000))
    assert np.allclose(got.column("x").to_numpy(), exp.column("x").to_numpy())
    assert got.column("name").to_pylist() == exp.column("name").to_pylist()
    # other engines read the same table
    dt = DeltaTable(str(snap.events_dir))
    via_rs = pa.table(dt.to_pyarrow_table()).sort_by("seq")
    assert via_rs.column("x").equals(got.column("x"))
    files = [u.removeprefix("file://") for u in dt.file_uris()]
    con = duckdb.connect()
    n, s = con.execute("select count(*), sum(k) from read_parquet(?)", [files]).fetchone()
    assert n == 3000 and s == int(exp.column("k").to_numpy().sum())
    # re-running the same ingest is a no-op
    again = ingest(store, "ev", srcs, time_column="ts", spark=spark, quiet=True)
    assert again.skipped and store.stream("ev").version == snap.version


def test_bad_rows_are_quarantined_with_reasons(tmp_path, spark):
    csv = tmp_path / "bad.csv"
    csv.write_text("ts,x,k\n10,1.5,1\n,2.5,2\n30,abc,3\n40,4.5,4\nnot-a-time,5.5,5\n"
                   "60,nan,6\n70,7.5,7\n80,8.5,8\n90,9.5,9\n100,10.5,10\n110,11.5,11\n"
                   "120,12.5,12\n130,13.5,13\n140,14.5,14\n150,15.5,15\n160,16.5,16\n"
                   "170,17.5,17\n180,18.5,18\n190,19.5,19\n200,20.5,20\n210,21.5,21\n")
    store = replaydb.open(tmp_path / "store", create=True)
    with pytest.raises(DataError) as ei:
        ingest(store, "ev", [str(csv)], time_column="ts", strict=True, spark=spark, quiet=True)
    assert ei.value.row == 2 and ei.value.column == "ts" and "bad.csv" in str(ei.value)
    assert not store.has_stream("ev")  # nothing kept from the failed strict job
    res = ingest(store, "ev", [str(csv)], time_column="ts", spark=spark, quiet=True)
    assert res.events == 17 and res.quarantined == 4
    q = store.stream("ev").side("quarantine").read()
    got = sorted(zip(q.column("row").to_pylist(), q.column("column").to_pylist(),
                     q.column("reason").to_pylist()))
    assert got == [(2, "ts", "missing time"), (3, "x", "wrong type"),
                   (5, "ts", "unparsable time"), (6, "x", "NaN value")]
    assert set(q.column("source").to_pylist()) == {str(csv)}
    assert store.check("ev") == {"ev": []}


def test_append_batch_with_late_events(tmp_path, spark):
    store = replaydb.open(tmp_path / "store", create=True)
    first = _frame(np.arange(0, 1000) * 10, 5)
    pq.write_table(first, tmp_path / "one.parquet")
    ingest(store, "ev", [str(tmp_path / "one.parquet")], time_column="ts", lateness=100,
           spark=spark, quiet=True)
    # late rows within the bound (t >= 9990 - 100) are merged; older ones are quarantined
    second = _frame(np.array([9895, 9950, 9990, 10000, 10005, 5]), 6)
    pq.write_table(second, tmp_path / "two.parquet")
    res = ingest(store, "ev", [str(tmp_path / "two.parquet")], time_column="ts", spark=spark,
                 quiet=True)
    assert res.events == 5 and res.quarantined == 1 and res.late == 2
    snap = store.stream("ev")
    t = snap.read().column("t").to_numpy()
    assert snap.n_events == 1005 and np.all(np.diff(t) >= 0)

    expected = np.sort(np.concatenate([first.column("ts").to_numpy(), [9895, 9950, 9990, 10000, 10005]]),
                       kind="stable")
    assert np.array_equal(t, expected)
    assert store.check("ev") == {"ev": []}


KILLED = textwrap.dedent("""
    import sys, replaydb
    from replaydb.ingest.job import ingest
    store = replaydb.open(sys.argv[1], create=True)
    ingest(store, "ev", [sys.argv[2]], time_column="ts", quiet=True, master="local[1]",
           rows_per_partition=20000)
""")


def test_killed_ingest_leaves_previous_version(tmp_path, spark):
    store = replaydb.open(tmp_path / "store", create=True)
    pq.write_table(_frame(np.arange(1000), 1), tmp_path / "base.parquet")
    ingest(store, "ev", [str(tmp_path / "base.parquet")], time_column="ts", spark=spark, quiet=True)
    before = store.stream("ev").version
    pq.write_table(_frame(np.arange(1000, 201000), 2), tmp_path / "big.parquet")
    # killed once its Spark tasks wrote the data files and index runs, before any commit (a
    # failpoint, not a timer: a timer can come after a fast machine's commit); the slow
    # crash trials kill at random times too
    env = {**os.environ, "REPLAYDB_FAILPOINT": "ingest.files_written"}
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path / "store"),
                             str(tmp_path / "big.parquet")], start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc.wait(timeout=600)
    with contextlib.suppress(ProcessLookupError):  # its Spark JVM goes with it
        os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    fresh = replaydb.open(tmp_path / "store")
    assert fresh.stream("ev").version == before and fresh.stream("ev").n_events == 1000
    assert fresh.check("ev") == {"ev": []}
    res = ingest(fresh, "ev", [str(tmp_path / "big.parquet")], time_column="ts", spark=spark,
                 quiet=True)
    assert res.events == 200000 and fresh.stream("ev").n_events == 201000
    assert fresh.check("ev") == {"ev": []}


def test_dataframe_source(tmp_path, spark):
    store = replaydb.open(tmp_path / "store", create=True)
    df = spark.createDataFrame([(i * 5, float(i), "a") for i in range(500)], "ts long, x double, s string")
    res = ingest(store, "ev", df, time_column="ts", batch_id="df-1", spark=spark, quiet=True)
    assert res.events == 500
    assert store.stream("ev").read().column("t").to_pylist() == [i * 5 for i in range(500)]
    assert ingest(store, "ev", df, time_column="ts", batch_id="df-1", spark=spark,
                  quiet=True).skipped


def test_ingest_builds_and_maintains_indexes(tmp_path, spark):
    store = replaydb.open(tmp_path / "store", create=True)
    first = _frame(np.arange(0, 3000) * 10, 7)
    pq.write_table(first, tmp_path / "one.parquet")
    res = ingest(store, "ev", [str(tmp_path / "one.parquet")], time_column="ts", lateness=100,
                 index=["x", "name"], spark=spark, quiet=True, rows_per_partition=1000)
    assert res.indexes == ["x", "name"]
    snap = store.stream("ev")
    assert sorted(snap.indexes()) == ["name", "x"]
    assert store.check("ev") == {"ev": []}  # compares every index with the data
    # a second batch with late events rewrites the tail: no --index needed, both are maintained
    second = _frame(np.array([29950, 29955, 29990, 30000, 30010]), 8)
    pq.write_table(second, tmp_path / "two.parquet")
    res2 = ingest(store, "ev", [str(tmp_path / "two.parquet")], time_column="ts", spark=spark,
                  quiet=True)
    assert res2.late == 2 and res2.rewritten > 0  # 29950 and 29955 precede the end 29990
    snap = store.stream("ev")
    assert store.check("ev") == {"ev": []}
    data = snap.read()
    x, seq = data.column("x").to_numpy(), data.column("seq").to_numpy()
    got = snap.side("index/x").range(0.25, 0.5, order="seq")
    want = seq[(x >= 0.25) & (x <= 0.5)]
    assert np.array_equal(got.seq, want)
    names = snap.side("index/name").point("n3", order="seq")
    assert np.array_equal(names.seq, seq[np.array(data.column("name").to_pylist()) == "n3"])


def test_time_buckets_keep_ties_together_and_seq_is_dense(tmp_path, spark):
    """Many events on few distinct times (a time held by 40% of the rows) and several buckets:
    each time stays in one bucket, seq is 0..n-1, and the order is (t, source, row)."""
    rng = np.random.default_rng(7)
    n = 5000
    t = np.where(rng.random(n) < 0.4, 500, rng.integers(0, 1000, n))
    parts = np.array_split(np.arange(n), 3)
    paths = []
    for j, idx in enumerate(parts):
        tbl = pa.table({"ts": pa.array(t[idx], pa.int64()), "i": pa.array(idx, pa.int64())})
        pq.write_table(tbl, tmp_path / f"p{j}.parquet", row_group_size=700)
        paths.append(str(tmp_path / f"p{j}.parquet"))
    store = replaydb.open(tmp_path / "store", create=True)
    res = ingest(store, "ev", paths, time_column="ts", spark=spark, quiet=True,
                 rows_per_partition=600, index=["i"])
    assert res.events == n
    got = store.stream("ev").read()
    assert got.column("seq").to_pylist() == list(range(n))
    order = np.lexsort((np.arange(n), t))  # by time, then file order (files hold rising i)
    assert got.column("i").to_pylist() == order.tolist()
    assert store.check("ev", deep=True) == {"ev": []}
    assert not any((store.stream_dir("ev") / "_staging").glob("*"))  # staging removed


def test_partition_labels_put_bucket_i_in_partition_i(spark):
    from pyspark.sql import functions as F

    from replaydb.ingest.buckets import bucket_expr, partition_labels, time_bounds

    for n in (1, 2, 5, 13):
        labels = partition_labels(spark, n)
        assert len(set(labels)) == n
        bounds = time_bounds([{"n_good": 1000, "sample": list(range(0, 1000, 10))}], n)
        assert len(bounds) == n - 1
        df = spark.range(0, 1000).select(F.col("id").alias("t"))
        lab = bucket_expr(F, F.col("t"), bounds, labels)
        got = df.repartition(n, lab).select(
            "t", F.spark_partition_id().alias("p")).toArrow()
        exp = np.searchsorted(np.asarray(bounds, dtype=np.int64),
                              got.column("t").to_numpy(), side="right")
        assert np.array_equal(got.column("p").to_numpy(), exp)


def test_failed_job_removes_its_staging_and_vacuum_removes_leftovers(tmp_path, spark):
    csv = tmp_path / "bad.csv"
    csv.write_text("ts,x\n1,1.0\n,2.0\n3,3.0\n")
    store = replaydb.open(tmp_path / "store", create=True)
    ingest(store, "ev", [str(csv)], time_column="ts", spark=spark, quiet=True,
           batch_id="first")
    staging = store.stream_dir("ev") / "_staging"
    with pytest.raises(DataError):
        ingest(store, "ev", [str(csv)], time_column="ts", strict=True, batch_id="strict",
               spark=spark, quiet=True)
    assert not any(staging.glob("*"))
    # what a killed job leaves behind is garbage for vacuum, never part of the stream
    left = staging / "deadbeef"
    left.mkdir(parents=True)
    pq.write_table(pa.table({"t": [1]}), left / "good-x.parquet")
    out = vacuum_stream(store, "ev")
    assert "_staging/deadbeef/good-x.parquet" in out["files"]
    assert not left.exists()
    assert store.stream("ev").n_events == 2 and store.check("ev") == {"ev": []}


def test_partition_count_whole_waves():
    from replaydb.ingest.buckets import partition_count

    assert partition_count(1000, 2_000_000, 2) == 1            # tiny: one partition
    assert partition_count(1_000_000, 2_000_000, 2) == 2       # every core gets work
    assert partition_count(10_000_000, 2_000_000, 2) == 6      # 5 rounded to whole waves
    assert partition_count(10_000_000, 2_000_000, 4) == 8
    assert partition_count(0, 2_000_000, 2) == 1


def test_a_declared_unit_makes_times_and_an_undeclared_one_keeps_numbers(tmp_path, spark):
    """``replaydb ingest`` of a numeric time column: with ``--time-unit`` the stream's times are
    instants (results show timestamps), without it they stay numbers (milliseconds still count
    durations)."""
    from replaydb.cli import main as cli_main

    pq.write_table(_frame(np.arange(0, 3000, 3), 1), tmp_path / "a.parquet")
    store_dir = str(tmp_path / "store")
    for stream, unit in (("declared", ["--time-unit", "ms"]), ("numbers", [])):
        assert cli_main(["ingest", store_dir, stream, str(tmp_path / "a.parquet"),
                         "--time", "ts", *unit]) == 0
    store = replaydb.open(store_dir)
    assert store.stream("declared").schema.time_instants
    assert not store.stream("numbers").schema.time_instants
    query = ("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE {}, DESCRIPTOR(t), "
             "INTERVAL '1' SECOND)) GROUP BY window_start, window_end")
    declared = replaydb.query(store, query.format("declared")).table
    numbers = replaydb.query(store, query.format("numbers")).table
    assert declared.schema.field("window_start").type == pa.timestamp("ms", tz="UTC")
    assert numbers.schema.field("window_start").type == pa.int64()
    assert numbers.column("window_start").to_pylist() == [0, 1000, 2000]
    assert declared.column("window_start").cast(pa.int64()).equals(
        numbers.column("window_start"))
