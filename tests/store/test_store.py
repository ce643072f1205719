"""The store: append/read round trips, leaf-precise reads, temporal aggregation, lateness."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import replaydb
from replaydb.errors import LateEventError, ReadOnlyError, StoreError, StreamNotFound, UsageError
from replaydb.store.schema import Attribute, StreamSchema
from tests.helpers import StreamModel, batch


def small_schema(lateness: int = 0, B: int = 8, D: int = 4) -> StreamSchema:
    return StreamSchema((Attribute("x", "float64"), Attribute("k", "int64")), time_unit="ms",
                        time_column="ts", lateness=lateness, leaf_capacity=B, fanout=D)


def test_append_read_roundtrip(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    rng = np.random.default_rng(1)
    model = StreamModel()
    store.create_stream("s", small_schema())
    t0 = 0
    for _ in range(15):
        n = int(rng.integers(1, 40))
        t = t0 + np.cumsum(rng.integers(0, 3, n))
        t0 = int(t[-1])
        x, k = rng.normal(size=n), rng.integers(-9, 9, n)
        store.append("s", batch(t, x, k))
        model.append(t, x, k)
    snap = store.stream("s")
    assert snap.read().equals(model.table().cast(snap.arrow_schema))
    assert store.check("s") == {"s": []}


def test_range_read_touches_only_overlapping_leaves(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    store.create_stream("s", small_schema(B=10, D=4))
    n = 1000
    store.append("s", batch(np.arange(n) * 10, np.zeros(n), np.zeros(n, dtype=np.int64)))
    snap = store.stream("s")
    assert snap.tree.n_leaves == 100
    tbl = snap.read(2000, 2500)  # events 200..249: leaves 20..24
    assert tbl.column("seq").to_pylist() == list(range(200, 250))
    assert snap.counters.leaves == 5
    assert snap.counters.events == 50
    snap.counters.reset()
    snap.read(2005, 2006)  # inside one leaf, no event there
    assert snap.counters.leaves == 1
    snap.counters.reset()
    assert snap.read(10**9, 10**9 + 5).num_rows == 0
    assert snap.counters.leaves == 0


def _brute(tbl: pa.Table, t0, t1):
    t = tbl.column("t").to_numpy()
    sel = (t >= (t0 if t0 is not None else -(2**62))) & (t < (t1 if t1 is not None else 2**62))
    x, k = tbl.column("x").to_numpy()[sel], tbl.column("k").to_numpy()[sel]
    return int(sel.sum()), x, k


@given(
    sizes=st.lists(st.integers(1, 60), min_size=1, max_size=8),
    ranges=st.lists(st.tuples(st.integers(-50, 1500), st.integers(0, 900)), min_size=1, max_size=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_temporal_aggregation_matches_brute_force(tmp_path_factory, sizes, ranges, seed):
    rng = np.random.default_rng(seed)
    store = replaydb.open(tmp_path_factory.mktemp("agg") / "s", create=True)
    store.create_stream("s", small_schema(B=5, D=3))
    t0 = 0
    for n in sizes:
        t = t0 + np.cumsum(rng.integers(0, 4, n))
        t0 = int(t[-1])
        store.append("s", batch(t, rng.normal(size=n), rng.integers(-100, 100, n)))
    snap = store.stream("s")
    full = snap.read()
    for lo, width in ranges:
        a = snap.aggregate(lo, lo + width)
        cnt, x, k = _brute(full, lo, lo + width)
        assert a["count"] == cnt
        assert a["k"]["sum"] == int(k.sum())
        assert np.isclose(a["x"]["sum"], x.sum(), rtol=1e-9, atol=1e-9)
        if cnt:
            assert a["x"]["min"] == x.min() and a["x"]["max"] == x.max()
            assert a["k"]["min"] == k.min() and a["k"]["max"] == k.max()
            assert np.isclose(a["x"]["avg"], x.mean())
        else:
            assert a["x"]["min"] is None and a["k"]["avg"] is None


def test_aggregation_reads_at_most_two_leaves(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    store.create_stream("s", small_schema(B=10, D=4))
    n = 5000
    store.append("s", batch(np.arange(n), np.ones(n), np.ones(n, dtype=np.int64)))
    snap = store.stream("s")
    a = snap.aggregate(123, 4321)
    assert a["count"] == 4321 - 123 and a["x"]["sum"] == 4321 - 123
    assert snap.counters.leaves == 2
    assert snap.counters.nodes <= snap.tree.height * 2 * 4


@given(
    batches=st.lists(
        st.lists(st.tuples(st.integers(-30, 40), st.integers(-5, 5)), min_size=1, max_size=25),
        min_size=1, max_size=10),
)
def test_out_of_order_within_bound_keeps_aggregates_exact(tmp_path_factory, batches):
    """Random appends with late events within the bound: the store equals the model and every
    node aggregate stays exact (tree check + deep check)."""
    store = replaydb.open(tmp_path_factory.mktemp("ooo") / "s", create=True)
    lateness = 25
    store.create_stream("s", small_schema(lateness=lateness, B=4, D=3))
    model = StreamModel()
    newest = 0
    for rows in batches:
        ts, xs, ks = [], [], []
        for dt, k in rows:
            t = max(0, newest + dt)
            if t < newest - lateness:
                t = newest - lateness
            t = max(t, 0)
            newest = max(newest, t)
            ts.append(t)
            xs.append(float(k) / 3)
            ks.append(k)
        store.append("s", batch(ts, xs, ks))
        model.append(np.array(ts), np.array(xs), np.array(ks))
    snap = store.stream("s")
    assert snap.read().equals(model.table().cast(snap.arrow_schema))
    assert store.check("s")["s"] == []


def test_too_late_is_rejected_naming_the_row(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    store.create_stream("s", small_schema(lateness=5))
    store.append("s", batch([10, 20, 30], [1, 2, 3], [1, 2, 3]))
    with pytest.raises(LateEventError) as ei:
        store.append("s", batch([31, 26, 10], [1, 2, 3], [1, 2, 3]))
    assert ei.value.row == 2 and "lateness bound 5" in str(ei.value)
    assert store.stream("s").n_events == 3  # nothing of the failed batch is stored
    r = store.append("s", batch([31, 26, 10], [1, 2, 3], [1, 2, 3]), late="quarantine")
    assert r.events == 2 and r.quarantined == 1 and r.late == 1
    q = store.stream("s").side("quarantine").read()
    assert q.column("reason").to_pylist() == ["late event"] and q.column("row").to_pylist() == [2]
    assert store.check("s")["s"] == []


def test_bad_rows_error_or_quarantine(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    store.create_stream("s", small_schema())
    bad = pa.table({"ts": pa.array([1, None, 3, 4]), "x": [1.0, 2.0, float("nan"), 4.0],
                    "k": [1, 2, 3, 4]})
    with pytest.raises(replaydb.errors.DataError) as ei:
        store.append("s", bad)
    assert ei.value.row == 1 and ei.value.column == "ts"
    r = store.append("s", bad, bad="quarantine")
    assert r.events == 2 and r.quarantined == 2
    q = store.stream("s").side("quarantine").read()
    assert sorted(zip(q.column("row").to_pylist(), q.column("reason").to_pylist())) == \
        [(1, "missing time"), (2, "NaN value")]


def test_idempotent_batch_id(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    store.create_stream("s", small_schema())
    b = batch([1, 2, 3], [1, 2, 3], [1, 2, 3])
    assert not store.append("s", b, batch_id="b1").skipped
    assert store.append("s", b, batch_id="b1").skipped
    assert store.stream("s").n_events == 3


def test_time_travel_and_histogram(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    store.create_stream("s", small_schema(B=4, D=2))
    store.append("s", batch(np.arange(10), np.arange(10), np.arange(10)))
    v1 = store.stream("s").version
    store.append("s", batch(np.arange(10, 30), np.arange(20), np.arange(20)))
    assert store.stream("s", v1).n_events == 10
    assert store.stream("s").n_events == 30
    h = store.stream("s").histogram(level=1)
    assert sum(h.column("count").to_pylist()) == 30
    assert h.column("x.max").to_pylist()[0] == 7.0  # first level-1 node covers 8 events


def test_read_only_and_names(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    store.create_stream("s", small_schema())
    ro = replaydb.open(tmp_path / "s", read_only=True)
    with pytest.raises(ReadOnlyError):
        ro.append("s", batch([1], [1], [1]))
    with pytest.raises(ReadOnlyError):
        ro.create_stream("u", small_schema())
    for evil in ["../x", "a/b", "..", "", "x" * 200, "a b"]:
        with pytest.raises(UsageError):
            store.stream_dir(evil)
    with pytest.raises(StreamNotFound):
        store.stream("nope")
    with pytest.raises(StoreError):
        replaydb.open(tmp_path / "missing")


def test_gap_statistics_follow_appends_and_rewrites(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    store.create_stream("s", small_schema(lateness=100, B=4, D=3))
    rng = np.random.default_rng(3)
    for _ in range(12):
        n = int(rng.integers(1, 30))
        newest = store.stream("s").t_range[1] if store.stream("s").n_events else 0
        t = np.sort(newest + rng.integers(-20, 60, n).clip(-newest, None))
        store.append("s", batch(t, np.zeros(n), np.zeros(n, np.int64)))
        snap = store.stream("s")
        d = np.diff(snap.read().column("t").to_numpy())
        if len(d):
            assert (snap.manifest.gap_min, snap.manifest.gap_max) == (int(d.min()), int(d.max()))


def test_bool_and_int_attributes_with_nulls(tmp_path):
    """Regression: a bool column with nulls (as in real ADS-B data) summarizes correctly."""
    store = replaydb.open(tmp_path / "s", create=True)
    tbl = pa.table({"t": pa.array(range(6), pa.int64()),
                    "flag": pa.array([True, None, False, None, True, True]),
                    "n": pa.array([1, None, 3, None, None, 6], pa.int64())})
    store.append("s", tbl)
    a = store.stream("s").aggregate()
    assert a["flag"]["n"] == 4 and a["flag"]["sum"] == 3
    assert a["n"]["n"] == 3 and a["n"]["sum"] == 10 and a["n"]["min"] == 1
    assert store.check("s") == {"s": []}


def test_latest_version_from_the_log_listing_matches_delta_rs(tmp_path):
    """The latest version read from the log directory's commit file names equals delta-rs's,
    with checkpoint and temporary files beside them and after older commit files are cleaned up
    behind a checkpoint."""
    from deltalake import DeltaTable

    from replaydb.store import deltaio

    store = replaydb.open(tmp_path / "s", create=True)
    for k in range(4):
        store.append("e", pa.table({"t": np.arange(k * 10, k * 10 + 10, dtype=np.int64),
                                    "x": np.ones(10)}))
    events = store.stream_dir("e") / "events"
    log = deltaio.log_dir(events)
    assert deltaio.latest_version(events) == DeltaTable(str(events)).version()
    DeltaTable(str(events)).create_checkpoint()
    v = DeltaTable(str(events)).version()
    assert any(f.name.endswith(".checkpoint.parquet") for f in log.iterdir())
    (log / "_commit_0123.json.tmp").write_text("{}")  # an unfinished commit's temporary file
    assert deltaio.latest_version(events) == v
    for f in log.glob("*.json"):  # log clean-up: only commits after the checkpoint remain
        if f.name[:20].isdigit() and int(f.name[:20]) < v:
            f.unlink()
    assert deltaio.latest_version(events) == v == DeltaTable(str(events)).version()
    assert store.stream("e").n_events == 40
    assert deltaio.latest_version(tmp_path / "nothing") == -1


def test_latest_version_after_the_one_last_seen(tmp_path):
    """The version last seen in a log directory is where the next look starts: later commits
    (by this store or another process) are found, and a directory whose last-seen version is
    gone (the table dropped and made again, the log cleaned) is listed again."""
    import shutil

    from replaydb.store import deltaio

    def append(store, k: int) -> None:
        store.append("e", pa.table({"t": np.arange(k * 10, k * 10 + 10, dtype=np.int64),
                                    "x": np.ones(10)}))

    store = replaydb.open(tmp_path / "s", create=True)
    append(store, 0)
    events = store.stream_dir("e") / "events"
    v0 = deltaio.latest_version(events)
    other = replaydb.open(tmp_path / "s")  # another writer, as another process would be
    append(other, 1)
    append(other, 2)
    assert deltaio.latest_version(events) == v0 + 2
    assert store.stream("e").n_events == 30
    shutil.rmtree(events.parent)  # the stream dropped behind this process's back
    fresh = replaydb.open(tmp_path / "s")
    append(fresh, 0)  # and made again: versions start over
    again = deltaio.latest_version(events)
    assert again < v0 + 2
    assert [f.name for f in sorted(deltaio.log_dir(events).glob("*.json"))][-1] == \
        f"{again:020d}.json"
    shutil.rmtree(events.parent)
    assert deltaio.latest_version(events) == -1
