"""Building indexes with a real local Spark session: back-fill and per-task runs, one commit."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from replaydb.errors import UsageError
from replaydb.indexes import LSMIndex, LSMOptions
from replaydb.indexes.spark_build import (
    RUN_ADD_SCHEMA,
    build_index_spark,
    commit_runs,
    next_run_id,
    run_writer,
    write_run,
)

pytestmark = pytest.mark.spark


def write_events(tmp_path, n_files=3, rows=4000, seed=0):
    """A stream's Parquet files: t, seq, a numeric, a string and a nullable attribute."""
    rng = np.random.default_rng(seed)
    files = []
    seq0 = 0
    allt = []
    for i in range(n_files):
        seq = np.arange(seq0, seq0 + rows, dtype=np.int64)
        price = rng.normal(100, 10, rows).round(2)
        city = rng.choice(["berlin", "bonn", "köln", "aachen", "zürich"], rows)
        opt = pa.array([None if j % 5 == 0 else float(j % 17) for j in range(rows)])
        table = pa.table({"t": seq * 1000, "seq": seq, "price": price, "city": city, "opt": opt})
        path = tmp_path / f"part-{i}.parquet"
        pq.write_table(table, path)
        files.append(str(path))
        allt.append(table)
        seq0 += rows
    return files, pa.concat_tables(allt)


def test_backfill_numeric_and_string_columns(spark, tmp_path):
    files, events = write_events(tmp_path)
    opts = LSMOptions(row_group_entries=512, target_file_entries=3000)
    v = build_index_spark(
        spark,
        ["file://" + f for f in files],
        "price",
        str(tmp_path / "ix_price"),
        options=opts,
        commit_metadata={"stream_version": 3},
    )
    idx = LSMIndex.open(tmp_path / "ix_price")
    assert v == idx.version == 0 and idx.commit_info(0)["stream_version"] == 3
    assert idx.num_runs == 1 and idx.num_files >= 2  # parts written by parallel tasks
    assert idx.check((events["price"], events["seq"], events["t"])) == []
    price = events["price"].to_numpy()
    r = idx.range(95.0, 96.0, order="seq")
    assert r.seq.tolist() == np.flatnonzero((price >= 95.0) & (price <= 96.0)).tolist()

    build_index_spark(spark, files, "city", str(tmp_path / "ix_city"), num_partitions=3)
    sidx = LSMIndex.open(tmp_path / "ix_city")
    assert sidx.key_type == "string"
    assert sidx.check((events["city"], events["seq"], events["t"])) == []
    city = np.array(events["city"].to_pylist())
    assert sidx.point("köln").seq.tolist() == np.flatnonzero(city == "köln").tolist()

    # nulls are not indexed; a back-fill into a non-empty index is refused
    build_index_spark(spark, files, "opt", str(tmp_path / "ix_opt"))
    oidx = LSMIndex.open(tmp_path / "ix_opt")
    assert oidx.num_entries == events.num_rows - events["opt"].null_count
    assert oidx.check((events["opt"], events["seq"], events["t"])) == []
    with pytest.raises(UsageError, match="not empty"):
        build_index_spark(spark, files, "price", str(tmp_path / "ix_price"))
    with pytest.raises(UsageError, match="no column"):
        build_index_spark(spark, files, "nope", str(tmp_path / "ix_x"))


def test_ingestion_style_runs_one_commit(spark, tmp_path):
    """Time-partitioned tasks each write a level-0 run; the driver commits all at once."""
    files, events = write_events(tmp_path, n_files=2, rows=3000, seed=1)
    path = str(tmp_path / "ix")
    idx = LSMIndex.create(path, "float64", options=LSMOptions(auto_compact=False))
    head = events.slice(0, 1000)
    idx.add(head["price"], head["seq"], head["t"])
    v0 = idx.flush()

    df = spark.read.parquet(*files).where("seq >= 1000").selectExpr("price as key", "seq", "t")
    fn = run_writer(path, "float64", level=0, run_id=next_run_id(path), same_run=False)
    rows = df.repartition(3).mapInArrow(fn, RUN_ADD_SCHEMA).collect()
    assert len(rows) == 3
    v = commit_runs(path, rows)
    assert v == v0 + 1
    idx = LSMIndex.open(path)
    assert idx.num_runs == 4 and {r["level"] for r in idx.runs()} == {0}
    assert idx.check((events["price"], events["seq"], events["t"])) == []
    # ids must be newer than the committed runs: committing the same runs again is refused
    stale = write_run(
        events.select(["price", "seq", "t"]).rename_columns(["key", "seq", "t"]),
        path,
        key_type="float64",
        level=0,
        run_id=1,
    )
    with pytest.raises(UsageError, match="not newer"):
        commit_runs(path, [stale])
    assert LSMIndex.open(path).version == v
