"""A finished query leaves no reference cycles behind.

Everything a query builds (the parsed query, the plan and its EXPLAIN hooks, the operator with
its event buffer and matches, the replay) must go when the query's last reference goes, by
reference counting. A cycle among them waits for Python's cyclic garbage collector instead:
the operator's buffers stay allocated until then, and every collection walks them - a cost
paid at random points of later queries (about 400 such objects and half a collection per
selective pattern query before the cycles were removed). Each case runs its query twice to
warm caches and compile kernels, then a third time with the collector off; the collector
then must find nothing unreachable.
"""

from __future__ import annotations

import gc
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.datasets.api import generate
from replaydb.indexes.manage import create_index
from replaydb.store.schema import Attribute, StreamSchema

MR = ("SELECT * FROM synthetic MATCH_RECOGNIZE (ORDER BY t MEASURES FIRST(S1.seq) AS f, "
      "LAST(S2.seq) AS l ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (S1 T1* S2) "
      "WITHIN 300 DEFINE S1 AS S1.A5 >= 0.5 AND S1.A5 <= 0.51, "
      "S2 AS S2.A1 >= 0.2 AND S2.A1 <= 0.21, T1 AS TRUE)")

CASES = {
    "sase": ("FROM stock PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_next_match(a[], b) "
             "{ [symbol] AND a[1].price % 500 = 0 AND a[i].price > a[i-1].price "
             "AND b.volume < 150 } WITHIN 500", {}),
    "imprecise": ("FROM ev PATTERN SEQ(A a, B b, C c) WHERE skip_till_any_match(a, b, c) "
                  "{ a.v % 2 = 0 } WITHIN 10 RETURN a, b, c", {}),
    "greta": ("FROM stock_greta RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [company, sector] "
              "AND S.price > NEXT(S).price GROUP-BY sector WITHIN 10 seconds", {}),
    "tpstream": ("FROM situations DEFINE A AS s1 = TRUE, B AS s2 = TRUE, C AS s3 = TRUE "
                 "PATTERN A before B AND B overlaps C WITHIN 300 seconds "
                 "RETURN first(A.t) AS a_start, last(C.t) AS c_last", {}),
    "window": ("SELECT window_start, window_end, COUNT(*) AS n, AVG(A1) AS avg_a1 "
               "FROM TABLE(TUMBLE(TABLE window_agg, DESCRIPTOR(t), INTERVAL '1' SECOND)) "
               "GROUP BY window_start, window_end", {}),
    "match_recognize, with a time limit": (MR, {"timeout": 60}),
    **{f"match_recognize, --plan {p}": (MR, {"plan": p})
       for p in ("auto", "replay", "all", "greedy", "budget", "cpm")},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> replaydb.Store:
    s = replaydb.open(Path(tmp_path_factory.mktemp("cycles")) / "s", create=True)

    def load(name: str, dataset: str, n: int, **options: str) -> None:
        for b in generate(dataset, n, seed=1, batch_size=1 << 16):
            s.append(name, pa.Table.from_batches([b]), **options)

    load("stock", "stock", 3000, time_unit="s")
    load("stock_greta", "stock-greta", 3000, time_unit="s", type_column="type")
    load("situations", "situations", 3000, time_unit="s")
    load("window_agg", "window-agg", 5000, time_unit="ms")
    load("synthetic", "synthetic-normal", 30000, time_unit="s")
    for a in ("A1", "A5"):
        create_index(s, "synthetic", a)
    sch = StreamSchema((Attribute("hi", "int64"), Attribute("type", "string"),
                        Attribute("v", "int64")), time_unit="s", time_column="lo",
                       upper_column="hi", type_column="type")
    s.create_stream("ev", sch)
    lo = np.arange(60) * 3
    s.append("ev", pa.table({"lo": lo, "hi": lo + 4,
                             "type": np.array(["A", "B", "C"])[np.arange(60) % 3],
                             "v": np.arange(60)}))
    return s


def _garbage_of(run: object) -> Counter[str]:
    """The objects ``run()`` leaves in reference cycles, by type (empty: none). Every object
    the collector tracks before the run is held until it ends: what an earlier test left
    behind (figures, say) cannot become garbage during the run and be counted as its own."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    before = gc.get_objects()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()  # type: ignore[operator]
        gc.collect()
        return Counter(getattr(o, "__qualname__", type(o).__qualname__) for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        del before
        if was:
            gc.enable()


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_query_leaves_no_reference_cycles(store: replaydb.Store, case: str) -> None:
    text, options = CASES[case]
    for _ in range(2):  # caches filled, kernels compiled: what stays is not the query's
        assert replaydb.query(store, text, **options).table.num_rows >= 0
    got = _garbage_of(lambda: replaydb.query(store, text, **options))
    assert not got, f"{case}: objects left in reference cycles: {got.most_common(8)}"


def test_explain_analyze_leaves_no_reference_cycles(store: replaydb.Store) -> None:
    for _ in range(2):
        replaydb.explain(store, MR, analyze=True)
    got = _garbage_of(lambda: replaydb.explain(store, MR, analyze=True))
    assert not got, f"objects left in reference cycles: {got.most_common(8)}"


def test_the_check_sees_a_cycle(store: replaydb.Store) -> None:
    """The check itself finds a cycle when there is one."""
    def leaves_a_cycle() -> None:
        a: dict[str, object] = {}
        a["self"] = a

    assert _garbage_of(leaves_a_cycle)["dict"] == 1
