"""Stores, queries and the local-versus-Spark comparison shared by the Spark engine's tests.

:func:`make_store` builds one random store (a stream ``ev`` appended in three parts, one stream
per event type, an imprecise stream); :data:`QUERIES` holds a query of every operator kind and
partitioning shape; :func:`local_and_spark` runs one plan locally and on a real Spark session
(the suite's session, whose executors refuse planner imports) and :func:`check_equal` compares.

Equality is byte for byte (``Table.equals`` with metadata) for interval-parallel, one-task and
exact partition-parallel runs; sorted partition-parallel runs (operators without order-dependent
columns, patterns not showing ``match_id``) are equal after sorting both tables, float columns
within a relative 1e-12: with the shuffle read, a read task's time range may end inside a batch
of the local replay, and a window's float sum of a slice split across two pushes is added in
another order (the last bits differ).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import replaydb
from replaydb.planner.query import QueryOptions, execute, plan_query
from replaydb.replay.spark import run_plan
from replaydb.replay.spark.executors import SparkExecutor
from replaydb.store.schema import Attribute, StreamSchema

TYPES = np.array(["A", "B", "C", "D"])


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
    "mr_define_number": "SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY k MEASURES "
                        "MATCH_NUMBER() AS mn, A.x AS ax PATTERN (A B+) DEFINE A AS "
                        "x < 0.1 * MATCH_NUMBER(), B AS x > PREV(x))",
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

RUNS = (("single", "auto"), ("interval", "auto"), ("partition", "scan"),
        ("partition", "shuffle"))
"""(mode, partition read) pairs a comparison tries."""


def random_intervals(rng: np.random.Generator, t_max: int, n: int) -> list[tuple[int, int]]:
    cuts = np.sort(rng.choice(np.arange(0, t_max), 2 * n, replace=False))
    return [(int(a), int(b)) for a, b in zip(cuts[0::2], cuts[1::2])]


def sort_all(t: pa.Table) -> pa.Table:
    """``t`` sorted by every column, the float columns last (their last bits may differ)."""
    flat = [f for f in t.schema if not pa.types.is_nested(f.type)]
    cols = [f.name for f in flat if not pa.types.is_floating(f.type)] + \
        [f.name for f in flat if pa.types.is_floating(f.type)]
    return t.sort_by([(c, "ascending") for c in cols])


def tables_close(a: pa.Table, b: pa.Table, rtol: float = 1e-12) -> bool:
    """Equal tables, float columns within ``rtol`` (NaN and NULL where the other has them)."""
    if a.schema != b.schema or a.num_rows != b.num_rows:
        return False
    for name in a.column_names:
        x, y = a.column(name), b.column(name)
        if not pa.types.is_floating(x.type):
            if not x.equals(y):
                return False
            continue
        xn = x.to_numpy(zero_copy_only=False).astype(np.float64)
        yn = y.to_numpy(zero_copy_only=False).astype(np.float64)
        if not np.allclose(xn, yn, rtol=rtol, atol=0.0, equal_nan=True):
            return False
    return True


def local_and_spark(spark: Any, store: replaydb.Store, text: str, intervals: list | None,
                    mode: str, tasks: int = 3, plan: str = "replay", read: str = "auto",
                    **options: Any) -> tuple[pa.Table, pa.Table, dict]:
    """Local execution and execution on the Spark session ``spark`` of one plan; ``intervals``
    replace the planned ones unless ``plan`` is not ``replay`` (the planner's own intervals
    then); ``read``: how partition mode's tasks get their events (scan or shuffle);
    ``options``: further :func:`~replaydb.replay.spark.run_plan` options."""
    stream = next((STREAM[k] for k, v in QUERIES.items() if v == text and k in STREAM), None)
    p1 = plan_query(store, text, QueryOptions(plan=plan, stream=stream))
    if plan == "replay":
        p1.with_intervals(intervals)
    local = execute(p1).table
    p2 = plan_query(store, text, QueryOptions(plan=plan, engine="spark", stream=stream))
    assert p2.intervals == p1.intervals or plan == "replay"
    if plan == "replay":
        p2.with_intervals(intervals)
    got, stats = run_plan(p2.physical, p2.ctx.snapshots, mode=mode,
                          executor=SparkExecutor(spark), tasks=tasks, read_tasks=3,
                          partition_read=read, progress=False, **options)
    if stats["spark"]["mode"] not in ("none", "driver"):
        assert stats["spark"]["executor"] == "spark"
    if stats["spark"]["mode"] == "partition" and read != "auto":
        assert stats["spark"]["partition_read"] == read
    return local, got, stats


def check_equal(local: pa.Table, got: pa.Table, stats: dict) -> None:
    """Equal: byte for byte, or for sorted partition results after sorting, float columns
    within a relative 1e-12 (see the module docstring)."""
    sp = stats["spark"]
    assert got.schema.equals(local.schema, check_metadata=True)
    exact = sp["mode"] != "partition" or sp.get("result_order") == "local"
    if exact:
        assert got.equals(local, check_metadata=True)
    else:
        assert tables_close(sort_all(got), sort_all(local))
