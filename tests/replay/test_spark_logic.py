"""The Spark engine's pieces that need no Spark: mode choice, interval groups, read ranges,
shipped streams, key targets and owners, Spark's hash placement computed on the driver,
renumbering, sorted result runs, and the float-sum property partition-parallel TPStream runs
rely on. Each piece is a plain function of plain data, tested directly; the engine itself runs
on a real Spark session in ``test_spark_engine.py``.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import replaydb
from replaydb.errors import UsageError
from replaydb.operators.traits import Traits
from replaydb.planner.query import QueryOptions, execute, plan_query
from replaydb.replay.replay import Replay
from replaydb.replay.spark.buckets import balanced_owner, sample_weights, scan_owner
from replaydb.replay.spark.drive import (
    Collector,
    from_ipc,
    integer_sort_order,
    read_result_file,
)
from replaydb.replay.spark.engine import (
    SCAN_MAX_TASKS,
    SHUFFLE_PASSES,
    choose_mode,
    choose_partition_read,
)
from replaydb.replay.spark.keys import (
    _hashed_targets,
    bijective_slots,
    key_codes,
    key_targets,
    spark_partition_of,
)
from replaydb.replay.spark.order import renumber
from replaydb.replay.spark.reader import ShippedStream, ship
from replaydb.replay.spark.split import group_intervals, interval_events, read_ranges
from replaydb.store.schema import Attribute, StreamSchema
from tests.spark_cases import QUERIES, STREAM, make_store, random_intervals, sort_all


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> replaydb.Store:
    return make_store(tmp_path_factory.mktemp("spark-logic") / "s", seed=7)


# --------------------------------------------------------------------------- modes
def test_choose_mode_prefers_partitions_for_one_big_interval() -> None:

    keyed = Traits("x", partition_keys=("k",))
    assert choose_mode("auto", keyed, np.array([10, 10, 10, 10]), 2) == "interval"
    assert choose_mode("auto", keyed, np.array([100, 1, 1]), 2) == "partition"
    assert choose_mode("auto", Traits("x"), np.array([100, 1, 1]), 2) == "interval"
    assert choose_mode("auto", Traits("x"), np.array([100]), 2) == "single"
    unsafe = Traits("x", partition_keys=("k",), interval_safe=False)
    assert choose_mode("auto", unsafe, np.array([5, 5]), 2) == "partition"


def test_partition_read_choice() -> None:
    """``auto`` scans up to the crossover derived from the shuffle's passes over every event
    (one task more than them), or the one given, and shuffles beyond; a forced read stays."""
    assert SCAN_MAX_TASKS == 1 + SHUFFLE_PASSES
    assert choose_partition_read("auto", 1) == "scan"
    assert choose_partition_read("auto", SCAN_MAX_TASKS) == "scan"
    assert choose_partition_read("auto", SCAN_MAX_TASKS + 1) == "shuffle"
    assert choose_partition_read("auto", 8, 8) == "scan"
    assert choose_partition_read("auto", 9, 8) == "shuffle"
    assert choose_partition_read("auto", 1, 0) == "shuffle"
    assert choose_partition_read("shuffle", 1) == "shuffle"
    assert choose_partition_read("scan", 100, 0) == "scan"
    with pytest.raises(UsageError, match="partition read"):
        choose_partition_read("broadcast", 2)
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(UsageError, match="scan_max_tasks"):
            choose_partition_read("auto", 2, bad)  # type: ignore[arg-type]


def test_traits_of_each_operator(store: replaydb.Store) -> None:
    def tr(name: str):  # noqa: ANN202
        opts = QueryOptions(plan="replay", stream=STREAM.get(name))
        return plan_query(store, QUERIES[name], opts).physical.operator.build().traits()

    t = tr("mr_part_one")
    assert t.partition_keys == ("k",) and t.interval_safe and t.partition_blocker
    assert t.numbering.number_columns == ("match_number", "mn")
    assert tr("mr_compound").interval_safe is False
    assert tr("mr_define_number").interval_safe is False
    assert "DEFINE reads MATCH_NUMBER()" in tr("mr_define_number").notes[0]
    assert tr("mr_select").partitionable and tr("mr_select").strip_select
    assert tr("sase_equiv").exact_partition_order
    assert tr("sase_plain").partition_keys == ()   # strict contiguity: [attr] is a condition
    assert tr("tps_part").partition_keys == ("k",)
    assert tr("imprecise").partition_keys == () and tr("imprecise").interval_safe
    w = tr("win_group")
    assert w.partitionable and w.time_carrier and not w.interval_safe
    assert tr("win_plain").partition_keys == ()


# --------------------------------------------------------------------------- split and read
@settings(max_examples=200, deadline=None)
@given(counts=st.lists(st.integers(0, 1000), min_size=1, max_size=40), n=st.integers(1, 9))
def test_group_intervals_are_consecutive_and_balanced(counts: list[int], n: int) -> None:
    c = np.array(counts, np.int64)
    groups = group_intervals(c, n)
    assert groups[0][0] == 0 and groups[-1][1] == len(c)
    assert all(a < b for a, b in groups) and len(groups) <= n
    assert all(g[1] == h[0] for g, h in zip(groups, groups[1:]))
    sizes = [int(c[a:b].sum()) for a, b in groups]
    # a group exceeds its fair share by at most one interval
    if len(groups) == min(n, len(c)):
        assert max(sizes) <= c.sum() / len(groups) + c.max()


def test_read_ranges_cover_the_intervals_once(store: replaydb.Store) -> None:
    snaps = [store.stream("ev")]
    rng = np.random.default_rng(11)
    for intervals in ([(None, None)], random_intervals(rng, 1500, 7)):
        tasks = read_ranges(snaps, intervals, 4)
        pieces = [p for t in tasks for p in t]
        # in order, each inside its interval, together exactly the intervals
        assert [p[0] for p in pieces] == sorted(p[0] for p in pieces)
        for k, (a, b) in enumerate(intervals):
            mine = [(x, y) for kk, x, y in pieces if kk == k]
            assert mine[0][0] == a and mine[-1][1] == b
            assert all(m[1] == n[0] for m, n in zip(mine, mine[1:]))
        ev = interval_events(snaps, intervals)
        assert ev.sum() > 0


def test_shipped_stream_reads_like_the_snapshot(store: replaydb.Store) -> None:
    snap = store.stream("ev")
    ranges = [(10, 200), (333, 334), (700, 1100)]
    shipped = ShippedStream(pickle.loads(pickle.dumps(ship(snap, ranges))))
    assert shipped.tree.n_leaves < snap.tree.n_leaves
    for a, b in ranges:
        assert shipped.read(a, b).equals(snap.read(a, b))
        assert shipped.read(a, b, ["x"]).equals(snap.read(a, b, ["x"]))


# --------------------------------------------------------------------------- keys and owners
@settings(max_examples=60, deadline=None)
@given(weights=st.lists(st.integers(0, 1000), min_size=1, max_size=300),
       n=st.integers(1, 9))
def test_balanced_owner_is_lpt(weights: list[int], n: int) -> None:
    w = np.array(weights, np.float64)
    owner = balanced_owner(w, n)
    assert owner.shape == w.shape and owner.min() >= 0 and owner.max() < n
    loads = np.bincount(owner, weights=w, minlength=n)
    # LPT: the heaviest task exceeds the average by at most the heaviest slot
    assert loads.max() <= w.sum() / n + w.max() + 1e-9
    unseen = np.flatnonzero(w == 0)
    assert np.array_equal(owner[unseen], np.arange(len(unseen)) % n)


def test_sampled_owner_balances_equal_keys(tmp_path: Path) -> None:
    s = replaydb.open(tmp_path / "s", create=True)
    s.create_stream("ev", StreamSchema((Attribute("k", "int64"),), time_unit="s",
                                       leaf_capacity=256))
    rng = np.random.default_rng(5)
    n = 64 * 400
    s.append("ev", pa.table({"t": np.arange(n), "k": rng.permutation(np.arange(n) % 64)}))
    snap = s.stream("ev")
    w = sample_weights([snap], [(None, None)], ["k"])
    assert np.count_nonzero(w) == 64 and abs(w.sum() - n) < 1e-6 * n
    for tasks in (2, 3, 4):
        owner = scan_owner([snap], [(None, None)], ["k"], tasks)
        keys_of = np.bincount(owner[key_targets(pa.table({"k": np.arange(64)}), ["k"],
                                                len(owner))], minlength=tasks)
        assert keys_of.max() - keys_of.min() <= 1   # equal keys: equal shares
    assert not scan_owner([snap], [(None, None)], ["k"], 1).any()


def test_key_targets_are_deterministic_and_fold_equal_keys() -> None:
    t = pa.table({"f": pa.array([0.0, -0.0, float("nan"), None, 1.5], pa.float64()),
                  "s": pa.array(["a", "a", None, "b", "a"]),
                  "i": pa.array([1, 1, 2, None, 1], pa.int64())})
    tg = key_targets(t, ["f"], 7)
    assert tg[0] == tg[1] and 0 <= tg.min() and tg.max() < 7
    nan2 = pa.table({"f": pa.array([float("-nan")], pa.float64())})
    assert key_targets(nan2, ["f"], 7)[0] == tg[2]
    both = key_targets(t, ["s", "i"], 5)
    assert both[0] == both[1] == both[4]
    assert np.array_equal(key_targets(t, ["s", "i"], 5), both)
    (codes,) = key_codes([t], ["s", "i"])
    assert codes[0] == codes[1] == codes[4] and len(set(codes.tolist())) == 3


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 3000),
       typ=st.sampled_from(["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64"]),
       span=st.sampled_from([1, 64, 5000, 1 << 20, 1 << 40]), chunks=st.integers(1, 3),
       targets=st.sampled_from([2, 7, 4096]))
def test_key_targets_lookup_path_equals_the_hash(seed: int, n: int, typ: str, span: int,
                                                 chunks: int, targets: int) -> None:
    """The small-range lookup table gives every row the target of the hash itself (and wide
    ranges, uint64 and other cases take the hash)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(typ)
    lo = max(int(np.iinfo(dt).min), -span)
    hi = min(int(np.iinfo(dt).max), lo + span)
    v = rng.integers(lo, hi, n, endpoint=True).astype(dt)
    cuts = np.sort(rng.integers(0, n + 1, chunks - 1))
    col = pa.chunked_array([pa.array(p) for p in np.split(v, cuts)], type=pa.from_numpy_dtype(dt))
    t = pa.table({"k": col})
    assert np.array_equal(key_targets(t, ["k"], targets), _hashed_targets(t, ["k"], targets))


def test_bijective_slots_land_one_per_partition() -> None:
    for n in (1, 2, 3, 8, 33):
        slots = bijective_slots(n)
        assert sorted(spark_partition_of(s, n) for s in slots) == list(range(n))
        assert [spark_partition_of(s, n) for s in slots] == list(range(n))


# --------------------------------------------------------------------------- gathering
def test_renumber_follows_the_final_order() -> None:
    from replaydb.operators.traits import PatternNumbering

    nb = PatternNumbering("match_id", ("match_number",), ("k",), False, True)
    # two tasks; task-local ids/numbers restart; rows already in final order
    rows = pa.table({"match_id": [1, 2, 1, 2, 3], "match_number": [1, 1, 1, 2, 1],
                     "k": [5, 6, 5, 5, 6], "__task": [0, 0, 1, 1, 1]})
    out = renumber(rows, nb)
    assert out.column("match_id").to_pylist() == [1, 2, 3, 4, 5]
    assert out.column("match_number").to_pylist() == [1, 1, 2, 3, 2]
    # ALL ROWS: several rows per match share the id
    rows = pa.table({"match_id": [1, 1, 2, 1, 1], "match_number": [1, 1, 1, 1, 1],
                     "k": [5, 5, 6, 5, 5], "__task": [0, 0, 0, 1, 1]})
    out = renumber(rows, nb)
    assert out.column("match_id").to_pylist() == [1, 1, 2, 3, 3]
    assert out.column("match_number").to_pylist() == [1, 1, 1, 2, 2]


def test_sorted_runs_nulls_last_and_without_tags(tmp_path: Path) -> None:
    t = pa.table({"a": pa.array([3, 1, None, 1, 2], pa.int64()),
                  "b": pa.array([0, None, 5, 2, 9], pa.int64()), "v": list("pqrst")})
    assert integer_sort_order(t, ["a", "b"]).tolist() == [3, 1, 4, 0, 2]
    for where in (None, str(tmp_path)):
        out = Collector(chunk_rows=2, result_dir=where, sort_columns=("a", "b"))
        out.add(t.slice(0, 3), 0, 0, 0, 0)
        out.add(t.slice(3), 0, 1, 0, 0)
        parts = [from_ipc(p) if where is None else read_result_file(p) for p in out.take()]
        assert [p.num_rows for p in parts] == [2, 2, 1]
        assert pa.concat_tables(parts).equals(t.take([3, 1, 4, 0, 2]))


def test_tpstream_float_sums_do_not_depend_on_the_batch_end(tmp_path: Path) -> None:
    """The local batches restricted to one key give the same avg, bit for bit, as the whole
    batches - although the operator processes each batch up to its *own* last time, so a U
    situation spanning a batch boundary is cut elsewhere for one key than for all keys. Float
    sums are summed event by event and continued from the carried sum, so the cut does not
    matter; partition-parallel TPStream runs rely on it."""
    s = make_store(tmp_path / "s", seed=101, n=3000, leaf=32)
    plan = plan_query(s, QUERIES["tps_part"], QueryOptions(plan="replay", time_format="raw"))
    local = execute(plan).table
    batches = [pa.Table.from_batches([b]) for _, b in
               Replay([s.stream("ev")], None).batches()]
    parts = []
    for key in sorted(set(local.column("k").to_pylist())):
        op = plan.physical.operator.build()
        for b in batches:
            piece = b.filter(pa.compute.equal(b.column("k"), key))
            if piece.num_rows:
                op.push(piece)
                if op.has_results():
                    parts.append(op.results())
        op.flush()
        if op.has_results():
            parts.append(op.results())
    assert sort_all(pa.concat_tables(parts)).equals(sort_all(local))
