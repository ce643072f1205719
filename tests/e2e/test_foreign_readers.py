"""Other engines read a store's stream: delta-rs, Polars and DuckDB through the Delta log, and
Spark through the data files the log lists.

replaydb writes the events table's Parquet files itself (its own page encoder) and commits them
through delta-rs; these tests hold that the result is a table other readers take as it is: every
type with NULLs, several data files, and a late append that rewrote files (the log's remove
actions), compared row by row with replaydb's own read.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable

import replaydb
from replaydb.store.schema import Attribute, StreamSchema

N = 6000


def _batch(t: np.ndarray, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(t)
    x = rng.normal(size=n)
    name = rng.choice(["ab", "cd", "efg", "h"], size=n).astype(object)
    return pa.table({
        "t": pa.array(t, pa.int64()),
        "x": pa.array(x, mask=rng.random(n) < 0.1),
        "k": pa.array(rng.integers(-50, 50, n), pa.int64(), mask=rng.random(n) < 0.05),
        "flag": pa.array(rng.random(n) < 0.5, mask=rng.random(n) < 0.05),
        "name": pa.array(name, pa.string(), mask=rng.random(n) < 0.1),
    })


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    """A stream of N + 40 events in several data files, the last append late enough to rewrite
    the tail; yields (the store's events table directory, replaydb's own read by seq)."""
    root = tmp_path_factory.mktemp("readers")
    store = replaydb.open(root / "store", create=True)
    store.create_stream("ev", StreamSchema(
        (Attribute("x", "float64"), Attribute("k", "int64"), Attribute("flag", "bool"),
         Attribute("name", "string")), time_unit="ms", leaf_capacity=512, lateness=10_000))
    store.append("ev", _batch(np.arange(N // 2) * 10, 1))
    store.append("ev", _batch(np.arange(N // 2, N) * 10, 2))
    late = np.sort(np.random.default_rng(3).integers(N * 10 - 5_000, N * 10, 40))
    store.append("ev", _batch(late, 3))
    snap = store.stream("ev")
    assert snap.n_events == N + 40 and store.check("ev") == {"ev": []}
    on_disk = {p.name for p in snap.events_dir.rglob("*.parquet")}
    listed = {u.rsplit("/", 1)[-1] for u in DeltaTable(str(snap.events_dir)).file_uris()}
    assert listed < on_disk, "the late append should have replaced some data files"
    own = snap.read().sort_by("seq")
    yield snap.events_dir, own


def _same_rows(got: pa.Table, own: pa.Table) -> None:
    got = got.select(own.column_names).sort_by("seq")
    for name in own.column_names:
        a, b = got.column(name).to_pylist(), own.column(name).to_pylist()
        assert a == b, f"column {name} differs"


def test_delta_rs_reads_the_current_version(stream) -> None:
    events_dir, own = stream
    dt = DeltaTable(str(events_dir))
    assert len(dt.file_uris()) > 1
    _same_rows(dt.to_pyarrow_table(), own)


def test_polars_reads_the_stream(stream) -> None:
    pl = pytest.importorskip("polars")
    events_dir, own = stream
    got = pl.read_delta(str(events_dir))
    assert got.height == own.num_rows
    _same_rows(got.to_arrow(), own)


def test_duckdb_reads_the_stream(stream) -> None:
    events_dir, own = stream
    events = DeltaTable(str(events_dir)).to_pyarrow_dataset()  # noqa: F841 - DuckDB scans it
    con = duckdb.connect()
    [(rows, k_sum, nulls)] = con.sql(
        "SELECT count(*), sum(k), count(*) - count(name) FROM events").fetchall()
    k = own.column("k").to_numpy(zero_copy_only=False)
    assert rows == own.num_rows
    assert k_sum == int(np.nansum(k))
    assert nulls == own.column("name").null_count
    _same_rows(con.sql("SELECT * FROM events").to_arrow_table(), own)


def test_spark_reads_the_files_the_log_lists(stream, spark) -> None:
    events_dir, own = stream
    files = DeltaTable(str(events_dir)).file_uris()
    df = spark.read.parquet(*files)
    assert df.count() == own.num_rows
    got = pa.Table.from_pylist([r.asDict() for r in df.collect()])
    _same_rows(got, own)
