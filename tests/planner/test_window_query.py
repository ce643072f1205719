"""Window SQL through the query hub: planner registration, --plan, EXPLAIN, time ranges."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.errors import UsageError
from replaydb.operators.expr import Between, Binary, Column, Literal
from replaydb.operators.window.oracle import assert_same_rows, make_stream
from replaydb.planner.window_path import time_bounds
from tests.helpers import nan_allowing_schema

PLANNER = "replaydb.planner.window_path:plan_query"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st = replaydb.open(tmp_path_factory.mktemp("winq") / "store", create=True)
    rng = np.random.default_rng(3)
    table = make_stream(rng, 4000, max_step=5, t0=0).drop_columns("seq")
    sch = nan_allowing_schema(table.schema, leaf_capacity=40, fanout=6)
    st.create_stream("s", sch)
    st.append("s", table)
    return st


def test_window_sql_has_its_planner() -> None:
    """The hub plans window SQL with the window path's planner."""
    from replaydb.planner.languages import planner_for
    from replaydb.planner.window_path import plan_query

    assert planner_for("window_sql") is plan_query


Q = ("SELECT window_start, window_end, SUM(x) AS sx, AVG(x) AS ax, COUNT(*) AS n, MIN(y) AS mn "
     "FROM TABLE(HOP(TABLE s, DESCRIPTOR(t), {slide}, INTERVAL '2' SECOND)) {where}"
     "GROUP BY window_start, window_end")


@pytest.mark.parametrize("slide,where", [
    (1000, ""), (7, ""), (600, "WHERE t >= 1500 AND t < 9000 "),
    (1000, "WHERE t BETWEEN 100 AND 5000 "), (500, "WHERE 3000 <= t AND x > 5 "),
])
def test_all_plans_agree(store, slide: int, where: str) -> None:
    text = Q.format(slide=slide, where=where)
    base = replaydb.query(store, text, plan="replay").table.to_pylist()
    assert base
    for p in ("auto", "index", "naive"):
        if "x >" in where and p != "auto":
            with pytest.raises(UsageError, match="WHERE"):
                replaydb.query(store, text, plan=p)
            continue
        assert_same_rows(replaydb.query(store, text, plan=p).table.to_pylist(), base)


def test_explain_shows_estimates_and_break_even(store) -> None:
    big = replaydb.explain(store, Q.format(slide=1000, where=""))
    assert big["strategy"] == "window-index"
    est = big["estimates"]
    assert est["merges_per_slide_index"] < est["merges_per_slide_replay"]
    assert est["break_even_slide"] is not None and est["tree"]["B"] == 40
    assert any("break-even" in line for line in big["window_path"])
    small = replaydb.explain(store, Q.format(slide=5, where=""))
    assert small["strategy"] == "window-replay"
    analyzed = replaydb.explain(store, Q.format(slide=1000, where="WHERE t < 8000 "),
                                analyze=True)
    assert analyzed["time_range"] == [None, 8000]
    assert analyzed["result_rows"] > 0
    res = replaydb.query(store, Q.format(slide=1000, where="WHERE t < 8000 "))
    assert res.plan.details["index_path"]["leaf_reads"] < 4000 / 40
    assert res.plan.details["index_path"]["windows"] == res.table.num_rows


def test_group_by_and_first_value_replay(store) -> None:
    text = ("SELECT window_start, window_end, k, FIRST_VALUE(x) AS f, COUNT(*) AS n FROM "
            "TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), INTERVAL '1' SECOND)) GROUP BY window_start, "
            "window_end, k")
    plan = replaydb.explain(store, text)
    assert plan["strategy"] == "window-replay"
    assert "GROUP BY" in " ".join(plan["window_path"])
    res = replaydb.query(store, text)
    assert res.table.column_names == ["window_start", "window_end", "k", "f", "n"]
    with pytest.raises(UsageError):
        replaydb.query(store, text, plan="index")


def test_time_bounds_extraction() -> None:
    t, x = Column("t"), Column("x")
    w = Binary("and", Binary("and", Binary(">=", t, Literal(10)), Binary("<", t, Literal(50))),
               Binary(">", x, Literal(1.0)))
    t0, t1, rest = time_bounds(w)
    assert (t0, t1) == (10, 50) and rest == Binary(">", x, Literal(1.0))
    assert time_bounds(Binary(">", t, Literal(9)))[:2] == (10, None)
    assert time_bounds(Binary("<=", t, Literal(9)))[:2] == (None, 10)
    assert time_bounds(Binary(">", Literal(9), t))[:2] == (None, 9)
    assert time_bounds(Between(t, Literal(3), Literal(7)))[:2] == (3, 8)
    both = Binary("and", Binary(">=", t, Literal(5)), Binary(">=", t, Literal(8)))
    assert time_bounds(both) == (8, None, None)
    # not a bound: float literal, OR, other columns
    for e in (Binary(">", t, Literal(1.5)),
              Binary("or", Binary(">", t, Literal(1)), Binary("<", t, Literal(0)))):
        assert time_bounds(e) == (None, None, e)


def test_time_alias_in_descriptor(store) -> None:
    from replaydb.planner.lang.window_sql import parse, to_config

    q = parse("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE s, "
              "DESCRIPTOR(ts), 10)) GROUP BY window_start, window_end")
    schema = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("ts", pa.int64())])
    assert to_config(q, schema, "ms", aliases={"ts": "t"}).size == 10
    with pytest.raises(replaydb.errors.ParseError, match="time column"):
        to_config(q, schema, "ms")


def test_explain_analyze_reports_what_the_index_path_did(store) -> None:
    text = Q.format(slide=1000, where="")
    out = replaydb.explain(store, text, analyze=True, plan="index")
    assert "index_path" in out, sorted(out)
    assert out["result_rows"] > 0


def test_replay_plan_reads_no_seq_for_window_sql(tmp_path) -> None:
    """The hub's replay honours the operator's input columns: without FIRST/LAST the stored seq
    column is never read (destroying it changes nothing), with them it is."""
    from tests.helpers import destroy_column

    st = replaydb.open(tmp_path / "store", create=True)
    table = make_stream(np.random.default_rng(5), 1500, max_step=5, t0=0).drop_columns("seq")
    sch = nan_allowing_schema(table.schema, leaf_capacity=40, fanout=6)
    st.create_stream("s", sch)
    st.append("s", table)
    text = Q.format(slide=500, where="WHERE x > 1 ")
    before = replaydb.query(st, text, plan="replay").table.to_pylist()
    assert before
    destroy_column(st.stream("s"), "seq")
    st = replaydb.open(tmp_path / "store")
    assert replaydb.query(st, text, plan="replay").table.to_pylist() == before
    with pytest.raises(OSError):
        replaydb.query(st, "SELECT window_start, window_end, FIRST_VALUE(x) AS f FROM TABLE("
                           "TUMBLE(TABLE s, DESCRIPTOR(t), INTERVAL '1' SECOND)) "
                           "GROUP BY window_start, window_end", plan="replay")
