"""The Spark engine's logic, run in-process: every mode gives local execution's result.

These tests drive :func:`replaydb.replay.spark.run_plan` with the :class:`InlineExecutor`, which
runs the very stage functions Spark runs (same pickled payloads, same shuffle placement and
order), so the splitting, reading, ordering and renumbering are checked on many random stores,
queries and replay intervals in seconds. ``test_spark_engine_spark.py`` runs the same through a
real Spark session and ``test_spark_cluster.py`` on a standalone cluster.

Equality is byte for byte (``Table.equals`` with metadata) for interval-parallel, one-task and
exact partition-parallel runs; sorted partition-parallel runs (operators without order-dependent
columns, patterns not showing ``match_id``) are equal after sorting both tables by every column.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import replaydb
from replaydb.errors import StateCapExceeded, UsageError
from replaydb.operators.traits import Traits
from replaydb.planner.query import QueryOptions, execute, plan_query
from replaydb.replay.replay import Replay
from replaydb.replay.spark import run_plan
from replaydb.replay.spark.buckets import balanced_owner, sample_weights, scan_owner
from replaydb.replay.spark.drive import (
    Collector,
    from_ipc,
    integer_sort_order,
    read_result_file,
)
from replaydb.replay.spark.engine import SCAN_MAX_TASKS, choose_mode, choose_partition_read
from replaydb.replay.spark.executors import InlineExecutor
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

TYPES = np.array(["A", "B", "C", "D"])


# --------------------------------------------------------------------------- stores
def make_store(path: Path, seed: int, n: int = 3000, leaf: int = 64) -> replaydb.Store:
    """One stream ``ev`` (t in seconds with ties, key k, group g, value x, type), appended in
    three parts; streams ``A``..``D`` holding the events of one type each; an imprecise stream."""
    rng = np.random.default_rng(seed)
    store = replaydb.open(path, create=True)
    sch = StreamSchema((Attribute("k", "int64"), Attribute("g", "string"),
                        Attribute("x", "float64"), Attribute("type", "string")),
                       time_unit="s", type_column="type", leaf_capacity=leaf)
    store.create_stream("ev", sch)
    t = np.sort(rng.integers(0, n // 2, n))
    k = rng.integers(0, int(rng.integers(2, 9)), n)
    data = pa.table({"t": t, "k": k, "g": np.array(list("abcde"))[rng.integers(0, 5, n)],
                     "x": rng.random(n).round(3), "type": TYPES[rng.integers(0, 4, n)]})
    for a, b in ((0, n // 3), (n // 3, 2 * n // 3), (2 * n // 3, n)):
        store.append("ev", data.slice(a, b - a))
    for ty in TYPES.tolist():
        sub = data.filter(pa.compute.equal(data.column("type"), ty)).drop_columns(["type"])
        store.create_stream(ty, StreamSchema((Attribute("k", "int64"), Attribute("g", "string"),
                                              Attribute("x", "float64")), time_unit="s",
                                             leaf_capacity=leaf // 2))
        store.append(ty, sub)
    isch = StreamSchema((Attribute("hi", "int64"), Attribute("type", "string"),
                         Attribute("v", "int64")), time_unit="s", time_column="lo",
                        upper_column="hi", type_column="type", leaf_capacity=leaf)
    store.create_stream("imp", isch)
    m = n // 10
    lo = np.sort(rng.integers(0, n // 2, m))
    store.append("imp", pa.table({"lo": lo, "hi": lo + rng.integers(0, 4, m),
                                  "type": np.array(["A", "B", "C"])[rng.integers(0, 3, m)],
                                  "v": rng.integers(0, 10, m)}))
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> replaydb.Store:
    return make_store(tmp_path_factory.mktemp("spark-engine") / "s", seed=7)


QUERIES = {
    "mr_part_one": "SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY k MEASURES A.x AS ax, "
                   "LAST(B.x) AS bx, MATCH_NUMBER() AS mn ONE ROW PER MATCH AFTER MATCH SKIP "
                   "PAST LAST ROW PATTERN (A B+ C?) DEFINE A AS x < 0.3, B AS x > PREV(x), "
                   "C AS x < 0.5)",
    "mr_part_all": "SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY g MEASURES A.x AS ax "
                   "ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+) "
                   "DEFINE A AS x < 0.4, B AS x > PREV(x))",
    "mr_select": "SELECT match_number * 10 AS m10, ax, k FROM ev MATCH_RECOGNIZE (PARTITION BY "
                 "k MEASURES A.x AS ax PATTERN (A B*? C) DEFINE A AS x < 0.3, C AS x > 0.6)",
    "mr_compound": "SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY k MEASURES MATCH_NUMBER() * 2 "
                   "AS m2 PATTERN (A B+) DEFINE A AS x < 0.3, B AS x > PREV(x))",
    "mr_plain": "SELECT * FROM ev MATCH_RECOGNIZE (MEASURES A.x AS ax PATTERN (A B+ C) "
                "DEFINE A AS x < 0.2, B AS x > PREV(x), C AS x < PREV(x))",
    "sase_equiv": "FROM ev PATTERN SEQ(A a, B+ b[], C c) WHERE skip_till_any_match(a, b, c) "
                  "{ [k] AND c.x > a.x } WITHIN 8",
    "sase_next": "FROM ev PATTERN SEQ(A a, !(D d), B b, C c) WHERE skip_till_next_match(a, b, c) "
                 "{ [g] AND b.x > a.x } WITHIN 12",
    "sase_types": "PATTERN SEQ(A a, B b, C c) WHERE skip_till_next_match(a, b, c) { [k] } "
                  "WITHIN 10",
    "sase_plain": "FROM ev PATTERN SEQ(A a, B b) WHERE strict_contiguity(a, b) { b.x > a.x } "
                  "WITHIN 5",
    "tps_part": "FROM ev PARTITION BY k DEFINE U AS x > 0.5, L AS x < 0.5 PATTERN U before;meets L "
                "WITHIN 40 RETURN avg(U.x) AS au, count(L) AS nl, max(L.x) AS ml",
    "tps_plain": "FROM ev DEFINE U AS x > 0.7, L AS x < 0.2 PATTERN U overlaps;before L "
                 "WITHIN 30 RETURN sum(U.x) AS su",
    "imprecise": "PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) "
                 "{ b.v > a.v } WITHIN 6 RETURN a, b",
    "win_group": "SELECT window_start, window_end, k, SUM(x) AS sx, COUNT(*) AS n, MIN(x) AS mn "
                 "FROM TABLE(HOP(TABLE ev, DESCRIPTOR(t), INTERVAL '10' SECOND, "
                 "INTERVAL '30' SECOND)) GROUP BY window_start, window_end, k",
    "win_plain": "SELECT window_start, window_end, AVG(x) AS ax, COUNT(*) AS n, MAX(x) AS mx "
                 "FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(t), INTERVAL '25' SECOND)) "
                 "WHERE t >= 100 AND t < 1200 AND x > 0.1 GROUP BY window_start, window_end",
}
STREAM = {"imprecise": "imp"}
"""Queries that name no stream run on this one."""


def random_intervals(rng: np.random.Generator, t_max: int, n: int) -> list[tuple[int, int]]:
    cuts = np.sort(rng.choice(np.arange(0, t_max), 2 * n, replace=False))
    return [(int(a), int(b)) for a, b in zip(cuts[0::2], cuts[1::2])]


def sort_all(t: pa.Table) -> pa.Table:
    cols = [f.name for f in t.schema if not pa.types.is_nested(f.type)]
    return t.sort_by([(c, "ascending") for c in cols])


def local_and_spark(store: replaydb.Store, text: str, intervals: list | None, mode: str,
                    tasks: int = 3, plan: str = "replay", read: str = "auto"
                    ) -> tuple[pa.Table, pa.Table, dict]:
    """Local and (in-process) Spark execution of one plan; ``intervals`` replace the planned
    ones unless ``plan`` is not ``replay`` (the planner's own intervals then); ``read``: how
    partition mode's tasks get their events (scan or shuffle)."""
    stream = next((STREAM[k] for k, v in QUERIES.items() if v == text and k in STREAM), None)
    p1 = plan_query(store, text, QueryOptions(plan=plan, stream=stream))
    if plan == "replay":
        p1.with_intervals(intervals)
    local = execute(p1).table
    plan2 = plan_query(store, text, QueryOptions(plan=plan, engine="spark", stream=stream))
    assert plan2.intervals == p1.intervals or plan == "replay"
    if plan == "replay":
        plan2.with_intervals(intervals)
    got, stats = run_plan(plan2.physical, plan2.ctx.snapshots, mode=mode, executor=InlineExecutor(2), tasks=tasks,
                          read_tasks=3, partition_read=read)
    if stats["spark"]["mode"] == "partition" and read != "auto":
        assert stats["spark"]["partition_read"] == read
    return local, got, stats


RUNS = (("single", "auto"), ("interval", "auto"), ("partition", "scan"),
        ("partition", "shuffle"))
"""(mode, partition read) pairs every comparison tries."""


def check_equal(local: pa.Table, got: pa.Table, stats: dict) -> None:
    """Equal, byte for byte (after sorting for sorted partition results). Float aggregates too:
    the operators' float sums do not depend on where the batches a task sees end."""
    sp = stats["spark"]
    assert got.schema.equals(local.schema, check_metadata=True)
    exact = sp["mode"] != "partition" or sp.get("result_order") == "local"
    if exact:
        assert got.equals(local, check_metadata=True)
    else:
        assert sort_all(got).equals(sort_all(local))


# --------------------------------------------------------------------------- engine vs local
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_applicable_mode_equals_local(store: replaydb.Store, name: str) -> None:
    text = QUERIES[name]
    rng = np.random.default_rng(abs(hash(name)) % 1000)
    ran = []
    for intervals in (None, random_intervals(rng, 1500, 12)):
        for mode, read in RUNS:
            try:
                local, got, stats = local_and_spark(store, text, intervals, mode, read=read)
            except UsageError as exc:
                assert "cannot run" in str(exc)
                continue
            ran.append(mode)
            assert stats["spark"]["mode"] == mode
            check_equal(local, got, stats)
    assert "single" in ran


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10_000), name=st.sampled_from(sorted(QUERIES)),
       n_iv=st.integers(0, 20), tasks=st.integers(1, 5))
def test_random_intervals_and_task_counts(store: replaydb.Store, seed: int, name: str,
                                          n_iv: int, tasks: int) -> None:
    rng = np.random.default_rng(seed)
    intervals = None if n_iv == 0 else random_intervals(rng, 1600, n_iv)
    for mode, read in RUNS[1:]:
        try:
            local, got, stats = local_and_spark(store, QUERIES[name], intervals, mode, tasks,
                                                read=read)
        except UsageError:
            continue
        check_equal(local, got, stats)


def test_auto_mode_choice(store: replaydb.Store) -> None:
    rng = np.random.default_rng(3)
    ivs = random_intervals(rng, 1500, 10)
    _, _, st1 = local_and_spark(store, QUERIES["mr_part_one"], ivs, "auto")
    assert st1["spark"]["mode"] == "interval"          # several balanced intervals
    _, _, st2 = local_and_spark(store, QUERIES["sase_equiv"], None, "auto")
    assert st2["spark"]["mode"] == "partition"         # one interval, keys
    assert st2["spark"]["exact_order"] is True
    _, _, st3 = local_and_spark(store, QUERIES["mr_plain"], None, "auto")
    assert st3["spark"]["mode"] == "single"            # neither
    _, _, st4 = local_and_spark(store, QUERIES["mr_part_one"], None, "auto")
    assert st4["spark"]["mode"] == "single"            # SQL match_id: no key groups
    assert any("match_id" in n for n in st4["spark"]["notes"])


def test_multi_stream_merge_by_types(store: replaydb.Store) -> None:
    """Event types stored one stream per type merge by (t, stream position, seq) in tasks."""
    local, got, stats = local_and_spark(store, QUERIES["sase_types"], None, "single")
    assert stats["spark"]["mode"] == "single" and local.num_rows > 0
    check_equal(local, got, stats)
    # several streams: match_id of a key group is not placed exactly, so no key groups
    plan = plan_query(store, QUERIES["sase_types"], QueryOptions(plan="replay"))
    assert len(plan.ctx.snapshots) == 3
    with pytest.raises(UsageError, match="merged streams"):
        run_plan(plan.physical, plan.ctx.snapshots, mode="partition", executor=InlineExecutor(2))


def test_stats_report_what_tasks_read(store: replaydb.Store) -> None:
    ivs = [(100, 300), (500, 900)]
    local_plan = plan_query(store, QUERIES["mr_part_one"], QueryOptions(plan="replay"))
    local_plan.with_intervals(ivs)
    res = execute(local_plan)
    _, _, stats = local_and_spark(store, QUERIES["mr_part_one"], ivs, "interval", tasks=2)
    assert stats["engine"] == "spark"
    assert stats["replay"]["events"] == res.stats["replay"]["events"]
    assert stats["replay"]["row_groups"] == res.stats["replay"]["row_groups"]
    assert stats["operator"]["results_out"] == res.stats["operator"]["results_out"]
    assert stats["spark"]["tasks"] == 2 and len(stats["spark"]["per_task"]) == 2


def test_empty_plan_and_empty_results(store: replaydb.Store) -> None:
    local, got, stats = local_and_spark(store, QUERIES["mr_plain"], [], "auto")
    assert got.num_rows == 0 and got.schema.equals(local.schema)
    q = ("SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY k MEASURES A.x AS ax PATTERN (A B) "
         "DEFINE A AS x > 2, B AS x > 2)")
    local, got, stats = local_and_spark(store, q, [(0, 500), (600, 800)], "interval")
    assert got.num_rows == 0 and got.schema.equals(local.schema)


def test_task_errors_come_back_with_their_type(store: replaydb.Store) -> None:
    plan = plan_query(store, QUERIES["sase_equiv"], QueryOptions(plan="replay", state_cap=5))
    with pytest.raises(StateCapExceeded) as ei:
        run_plan(plan.physical, plan.ctx.snapshots, mode="interval", executor=InlineExecutor(2))
    assert ei.value.cap == 5 and ei.value.cap_name == "state_cap"
    for read in ("scan", "shuffle"):
        with pytest.raises(StateCapExceeded):
            run_plan(plan.physical, plan.ctx.snapshots, mode="partition", executor=InlineExecutor(2), partition_read=read)


def test_scan_tasks_split_the_events_by_key(store: replaydb.Store) -> None:
    ivs = [(50, 400), (420, 1300)]
    local, got, stats = local_and_spark(store, QUERIES["tps_part"], ivs, "partition", tasks=3,
                                        read="scan")
    check_equal(local, got, stats)
    sp = stats["spark"]
    per = [t for t in sp["per_task"] if t["stage"] == "scan"]
    assert sp["partition_read"] == "scan" and len(per) <= 3
    # every task reads the whole replay; together they push each event exactly once
    plan = plan_query(store, QUERIES["tps_part"], QueryOptions(plan="replay"))
    plan.with_intervals(ivs)
    assert stats["replay"]["events"] == len(per) * execute(plan).stats["replay"]["events"]
    assert sum(t["events"] for t in per) == sum(
        store.stream("ev").read(a, b).num_rows for a, b in ivs)


def test_partition_results_do_not_depend_on_the_task_count(store: replaydb.Store) -> None:
    """Sorted partition results (TPStream: by its complete integer sort columns, nulls last)
    are one table whatever the task count and read; and equal to the full sort."""
    ivs = [(0, 700), (760, 1500)]
    runs = [local_and_spark(store, QUERIES["tps_part"], ivs, "partition", tasks=n, read=r)
            for n in (1, 2, 5) for r in ("scan", "shuffle")]
    local = runs[0][0]
    for _, got, stats in runs:
        assert stats["spark"]["result_order"] == "sorted"
        assert got.equals(runs[0][1])
    assert runs[0][1].equals(local.sort_by(
        [(c, "ascending") for c in traits_of(store, "tps_part").sort_columns]))


def traits_of(store: replaydb.Store, name: str) -> Traits:
    return plan_query(store, QUERIES[name], QueryOptions(plan="replay")).physical.operator.build().traits()


@pytest.mark.parametrize("name, mode", [("tps_part", "partition"), ("sase_equiv", "partition"),
                                        ("mr_part_one", "interval")])
def test_results_through_files_or_through_spark(store: replaydb.Store, tmp_path: Path,
                                                name: str, mode: str) -> None:
    """Result files in a shared directory and results sent through Spark give one table; the
    query's own file directory is removed afterwards."""
    plan = plan_query(store, QUERIES[name], QueryOptions(plan="replay"))
    plan.with_intervals([(0, 800), (900, 1500)])
    local = execute(plan).table
    got = {}
    for where in ("none", str(tmp_path / "results")):
        p = plan_query(store, QUERIES[name], QueryOptions(plan="replay", engine="spark"))
        p.with_intervals(plan.intervals)
        got[where], stats = run_plan(p.physical, p.ctx.snapshots, mode=mode, executor=InlineExecutor(2), tasks=3,
                                     result_dir=where)
        assert stats["spark"]["results_via"] == ("spark" if where == "none" else "files")
        check_equal(local, got[where], stats)
    assert got["none"].equals(got[str(tmp_path / "results")])
    assert list((tmp_path / "results").iterdir()) == []


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
    plan = plan_query(s, QUERIES["tps_part"], QueryOptions(plan="replay"))
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


def test_partition_read_choice() -> None:
    assert choose_partition_read("auto", 1) == "scan"
    assert choose_partition_read("auto", SCAN_MAX_TASKS) == "scan"
    assert choose_partition_read("auto", SCAN_MAX_TASKS + 1) == "shuffle"
    assert choose_partition_read("shuffle", 1) == "shuffle"
    with pytest.raises(UsageError, match="partition read"):
        choose_partition_read("broadcast", 2)


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


def test_forced_modes_that_cannot_apply(store: replaydb.Store) -> None:
    plan = plan_query(store, QUERIES["mr_compound"], QueryOptions(plan="replay"))
    with pytest.raises(UsageError, match="MATCH_NUMBER"):
        run_plan(plan.physical, plan.ctx.snapshots, mode="interval", executor=InlineExecutor(2))
    plan = plan_query(store, QUERIES["mr_plain"], QueryOptions(plan="replay"))
    with pytest.raises(UsageError, match="no partition keys"):
        run_plan(plan.physical, plan.ctx.snapshots, mode="partition", executor=InlineExecutor(2))
    with pytest.raises(UsageError, match="unknown Spark mode"):
        run_plan(plan.physical, plan.ctx.snapshots, mode="fast", executor=InlineExecutor(2))


# --------------------------------------------------------------------------- traits
def test_traits_of_each_operator(store: replaydb.Store) -> None:
    def tr(name: str):  # noqa: ANN202
        opts = QueryOptions(plan="replay", stream=STREAM.get(name))
        return plan_query(store, QUERIES[name], opts).physical.operator.build().traits()

    t = tr("mr_part_one")
    assert t.partition_keys == ("k",) and t.interval_safe and t.partition_blocker
    assert t.numbering.number_columns == ("match_number", "mn")
    assert tr("mr_compound").interval_safe is False
    assert tr("mr_select").partitionable and tr("mr_select").strip_select
    assert tr("sase_equiv").exact_partition_order
    assert tr("sase_plain").partition_keys == ()   # strict contiguity: [attr] is a condition
    assert tr("tps_part").partition_keys == ("k",)
    assert tr("imprecise").partition_keys == () and tr("imprecise").interval_safe
    w = tr("win_group")
    assert w.partitionable and w.time_carrier and not w.interval_safe
    assert tr("win_plain").partition_keys == ()


def test_window_plans_ship_their_own_operator(store: replaydb.Store) -> None:
    """The window planner builds its operator's spec itself (time bounds out of WHERE): tasks
    build that operator from the shipped spec; a variance aggregate keeps its key groups in one
    task."""
    plan = plan_query(store, QUERIES["win_plain"], QueryOptions(plan="auto"))
    assert plan.strategy == "window-replay" and plan.intervals == [(100, 1200)]
    spec = plan.physical.operator
    assert spec.config.where != plan.ctx.bind().config.where  # t bounds became the interval
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and again.build().config == spec.config
    local, got, stats = local_and_spark(store, QUERIES["win_plain"], None, "auto", plan="auto")
    assert stats["spark"]["mode"] == "single" and local.num_rows > 0
    check_equal(local, got, stats)
    local, got, stats = local_and_spark(store, QUERIES["win_group"], None, "auto", plan="auto")
    assert stats["spark"]["mode"] == "partition" and local.num_rows > 0
    check_equal(local, got, stats)
    q = QUERIES["win_group"].replace("MIN(x) AS mn", "STDDEV_POP(x) AS sd")
    plan = plan_query(store, q, QueryOptions(plan="replay"))
    assert "variance" in plan.physical.operator.build().traits().partition_blocker
    local, got, stats = local_and_spark(store, q, None, "auto")
    assert stats["spark"]["mode"] == "single"
    check_equal(local, got, stats)


def test_choose_mode_prefers_partitions_for_one_big_interval() -> None:

    keyed = Traits("x", partition_keys=("k",))
    assert choose_mode("auto", keyed, np.array([10, 10, 10, 10]), 2) == "interval"
    assert choose_mode("auto", keyed, np.array([100, 1, 1]), 2) == "partition"
    assert choose_mode("auto", Traits("x"), np.array([100, 1, 1]), 2) == "interval"
    assert choose_mode("auto", Traits("x"), np.array([100]), 2) == "single"
    unsafe = Traits("x", partition_keys=("k",), interval_safe=False)
    assert choose_mode("auto", unsafe, np.array([5, 5]), 2) == "partition"


# --------------------------------------------------------------------------- pieces
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


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10_000), name=st.sampled_from(sorted(QUERIES)),
       n_iv=st.integers(0, 30), tasks=st.integers(1, 7), store_seed=st.integers(0, 3))
def test_random_cases_slow(tmp_path_factory: pytest.TempPathFactory, seed: int, name: str,
                           n_iv: int, tasks: int, store_seed: int) -> None:
    """Thousands of comparisons over four random stores (``make test-all``)."""
    store = _slow_store(tmp_path_factory, store_seed)
    rng = np.random.default_rng(seed)
    intervals = None if n_iv == 0 else random_intervals(rng, 1600, n_iv)
    for mode, read in RUNS:
        try:
            local, got, stats = local_and_spark(store, QUERIES[name], intervals, mode, tasks,
                                                read=read)
        except UsageError:
            continue
        check_equal(local, got, stats)


_SLOW_STORES: dict[int, replaydb.Store] = {}


def _slow_store(factory: pytest.TempPathFactory, seed: int) -> replaydb.Store:
    if seed not in _SLOW_STORES:
        _SLOW_STORES[seed] = make_store(factory.mktemp(f"slow{seed}") / "s", seed=100 + seed,
                                        n=2000 + 1000 * seed, leaf=16 << seed)
    return _SLOW_STORES[seed]
