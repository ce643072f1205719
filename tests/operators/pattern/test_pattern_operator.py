"""Pattern operator: the dissertation's examples, lifecycle, state cap, measures, ordering."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from replaydb.errors import DataError, OperatorError, QueryError, StateCapExceeded
from replaydb.operators.expr import Binary, Call, Column, Literal
from replaydb.operators.pattern import model as pm
from replaydb.operators.pattern import oracle
from replaydb.operators.pattern.operator import PatternConfig, PatternOperator

SCH = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                 ("temp", pa.float64())])


def typed(types: str | list[str], temps: list[float] | None = None, t0: int = 1) -> pa.Table:
    types = list(types)
    n = len(types)
    return pa.table({"t": list(range(t0, t0 + n)), "seq": list(range(n)), "type": types,
                     "temp": temps if temps is not None else [0.0] * n}, schema=SCH)


def is_type(v: str) -> pm.VarDef:
    return pm.VarDef(v, Binary("=", Column("type"), Literal(v.lower())))


ABC = pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("B"), 0, None), pm.Var("C")))
FIG26 = typed("abacbc")
NAMES = ["a1", "b1", "a2", "c1", "b2", "c2"]


def fig26(strategy: pm.Strategy, batch: int | None = None) -> list[tuple[str, ...]]:
    spec = pm.PatternSpec(ABC, (is_type("A"), is_type("B"), is_type("C")), strategy=strategy)
    return [tuple(NAMES[i] for i in m[1]) for m in oracle.run_operator(spec, FIG26, batch)]


@pytest.mark.parametrize("batch", [None, 1, 4])
def test_fig_2_6_rows(batch: int | None) -> None:
    assert fig26(pm.Strategy.CONTIGUOUS, batch) == [("a2", "c1")]
    assert sorted(fig26(pm.Strategy.SKIP_TILL_NEXT, batch)) == sorted([("a2", "c1"),
                                                                    ("a1", "b1", "c1")])
    got = fig26(pm.Strategy.SKIP_TILL_ANY, batch)
    # the figure lists <a1,c2> twice and omits <a2,c2>: nine distinct subsequences exist
    expected = {("a2", "c1"), ("a1", "b1", "c1"), ("a1", "b1", "c2"), ("a1", "c1"),
                ("a1", "c2"), ("a1", "b1", "b2", "c2"), ("a1", "b2", "c2"), ("a2", "c2"),
                ("a2", "b2", "c2")}
    assert len(got) == 9 and set(got) == expected


def test_fig_2_6_documented_order() -> None:
    """All-runs output: by completing event, then lexicographically by event positions."""
    assert fig26(pm.Strategy.SKIP_TILL_ANY) == [
        ("a1", "b1", "c1"), ("a1", "c1"), ("a2", "c1"),
        ("a1", "b1", "b2", "c2"), ("a1", "b1", "c2"), ("a1", "b2", "c2"), ("a1", "c2"),
        ("a2", "b2", "c2"), ("a2", "c2")]


def test_running_example_temperature_increase() -> None:
    """Dissertation 2.3.5: A B* C, B: temp > prev(temp), C: temp >= A.temp + 5, contiguous."""
    temps = [20.0, 21.0, 23.0, 26.0, 25.0, 31.0, 30.0]
    tab = typed("x" * len(temps), temps)
    spec = pm.PatternSpec(ABC, (
        pm.VarDef("A"),
        pm.VarDef("B", Binary(">", Column("temp"), Call("PREV", (Column("temp"),)))),
        pm.VarDef("C", Binary(">=", Column("temp", "C"),
                           Binary("+", Column("temp", "A"), Literal(5)))),
    ), strategy=pm.Strategy.CONTIGUOUS)
    got = oracle.run_operator(spec, tab)
    assert got == oracle.matches(spec, tab)
    rows = {m[1] for m in got}
    # 20 21 23 26: C=26 >= 25 (B* = 21, 23); also 20 -> 26 needs B 21,23 contiguous first
    assert (0, 1, 2, 3) in rows
    assert (1, 2, 3) in rows          # 21, 23, 26 >= 26
    assert all(tab.column("temp")[m[-1]].as_py() >= tab.column("temp")[m[0]].as_py() + 5
               for m in rows)


def test_cross_event_conditions_decide_like_the_numpy_evaluator() -> None:
    """A condition on an earlier bound event runs on the compiled machine, a condition on the
    current event on NumPy; both share one definition of ``%`` (floor modulo on floats too:
    -7.0 % 3 is 2, -0.5 % 3 is 2.5) and FLOOR (a float: 1e20 and inf stay themselves), so the
    operator, the oracle and the local evaluation agree."""
    temps = [-7.0, 1.0, 1e20, -1.0, -0.5, 0.0, math.inf, 2.0, 5.0]
    tab = typed("x" * len(temps), temps)
    skip = pm.AfterMatchSkip(pm.SkipKind.TO_NEXT_ROW)
    pair = pm.Seq((pm.Var("A"), pm.Var("B")))

    def matched_a(cond: Binary, local: bool = False) -> list[int]:
        defs = (pm.VarDef("A", cond), pm.VarDef("B")) if local else (pm.VarDef("A"), pm.VarDef("B", cond))
        spec = pm.PatternSpec(pair, defs, strategy=pm.Strategy.CONTIGUOUS, semantics=pm.Semantics.SQL,
                           after_match_skip=skip)
        got = oracle.run_operator(spec, tab, batch_rows=3)
        assert got == oracle.matches(spec, tab)
        return [m[1][0] for m in got]

    mod2 = lambda x: Binary("=", Binary("%", x, Literal(3)), Literal(2.5))  # noqa: E731
    assert matched_a(mod2(Column("temp", "A"))) == [4]          # -0.5 % 3 = 2.5
    assert matched_a(mod2(Column("temp")), local=True) == [4]
    mod = lambda x: Binary("=", Binary("%", x, Literal(3)), Literal(2))  # noqa: E731
    assert matched_a(mod(Column("temp", "A"))) == [0, 3, 7]   # -7, -1 and 2 (1e20 % 3 = 1)
    assert matched_a(mod(Column("temp")), local=True) == [0, 3, 7]
    big = Binary(">", Call("FLOOR", (Column("temp", "A"),)), Literal(1e19))
    assert matched_a(big) == [2, 6]


def test_cross_event_conditions_refuse_arithmetic_on_booleans() -> None:
    """NumPy's ``bool + bool`` is OR and Python's is 2: a compiled condition refuses it."""
    flag = Binary("=", Column("type", "A"), Literal("x"))
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Var("B"))),
                       (pm.VarDef("A"), pm.VarDef("B", Binary(">", Binary("+", flag, flag),
                                                        Literal(1)))))
    with pytest.raises(QueryError, match="arithmetic on a boolean"):
        PatternOperator(PatternConfig(spec, SCH))


def _ops(spec: pm.PatternSpec, **kw: object) -> PatternOperator:
    return PatternOperator(PatternConfig(spec, SCH), **kw)  # type: ignore[arg-type]


def _fed(spec: pm.PatternSpec, tab: pa.Table, chunk: int, check: bool = False) -> PatternOperator:
    """An operator for ``spec`` fed ``tab`` in batches of ``chunk`` rows (its invariants checked
    after each when ``check``) and flushed; its results are not taken yet."""
    op = _ops(spec)
    for b in tab.to_batches(max_chunksize=chunk):
        op.push(b)
        if check:
            op._check()
    op.flush()
    return op


def random_stream(n: int, seed: int, ties: int = 2) -> pa.Table:
    """``n`` events whose time steps by 0..``ties`` (ties in ``t`` included), random type and
    temp."""
    rng = random.Random(seed)
    t = np.cumsum([rng.randint(0, ties) for _ in range(n)]).tolist()
    return pa.table({"t": t, "seq": list(range(n)), "type": [rng.choice("abc") for _ in range(n)],
                     "temp": [float(rng.randint(0, 9)) for _ in range(n)]}, schema=SCH)


SPECS = {
    "any": pm.PatternSpec(ABC, (is_type("A"), pm.VarDef("B", Binary(">", Column("temp"),
                                                              Column("temp", "A"))),
                             is_type("C")), window=6, strategy=pm.Strategy.SKIP_TILL_ANY),
    "next": pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("B"), 1, None), pm.Var("C"))),
                        (is_type("A"), pm.VarDef("B", Binary(">=", Column("temp"),
                                                          Call("AVG", (Column("temp", "B"),)))),
                         is_type("C")), window=8, strategy=pm.Strategy.SKIP_TILL_NEXT),
    "sql": pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("T"), 0, None), pm.Alt((pm.Var("B"), pm.Var("C"))))),
                       (is_type("A"), is_type("B"), pm.VarDef("C", Binary(">", Column("temp"),
                                                                       Literal(5)))),
                       window=10, semantics=pm.Semantics.SQL,
                       measures=(pm.Measure("n", Call("COUNT", (Column("*", "T"),))),
                                 pm.Measure("fa", Call("FIRST", (Column("seq", "A"),))))),
    # blocks and greedy always-true gaps: the vectorized GapSeqEngine
    "sql_gaps": pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("T"), 0, None), pm.Var("B"), pm.Var("C"),
                                 pm.Repeat(pm.Var("U"), 0, None), pm.Var("A"))),
                            (is_type("A"), is_type("B"),
                             pm.VarDef("C", Binary(">", Column("temp"), Literal(3)))),
                            window=9, semantics=pm.Semantics.SQL,
                            after_match_skip=pm.AfterMatchSkip(pm.SkipKind.TO_NEXT_ROW),
                            measures=(pm.Measure("n", Call("COUNT", (Column("*", "T"),))),
                                      pm.Measure("fa", Call("FIRST", (Column("seq", "A"),))))),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_snapshot_restore_equivalence(name: str) -> None:
    spec = SPECS[name]
    tab = random_stream(300, 7)
    ref = _ops(spec).process(tab)
    assert ref.num_rows > 0
    op = _ops(spec)
    batches = tab.to_batches(max_chunksize=37)
    for b in batches[:4]:
        op.push(b)
    snap = op.snapshot()
    for b in batches[4:6]:   # diverge, then go back
        op.push(b)
    op.restore(snap)
    for b in batches[4:]:
        op.push(b)
        op._check()
    op.flush()
    assert op.results().equals(ref)
    # a fresh operator restored from the snapshot continues identically
    op2 = _ops(spec)
    op2.restore(snap)
    for b in batches[4:]:
        op2.push(b)
    op2.flush()
    assert op2.results().slice(0).to_pylist() == ref.slice(
        ref.num_rows - op2.counters.results_out + snap["counters"].results_out).to_pylist() \
        or op2.results().num_rows == 0


@pytest.mark.parametrize("name", sorted(SPECS))
def test_batch_size_does_not_change_results(name: str) -> None:
    spec = SPECS[name]
    tab = random_stream(200, 3)
    ref = _ops(spec).process(tab)
    for chunk in (1, 5, 64):
        assert _fed(spec, tab, chunk, check=True).results().equals(ref), chunk


def test_end_interval_drops_partial_matches_all_runs() -> None:
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Var("B"))), (is_type("A"), is_type("B")),
                       strategy=pm.Strategy.SKIP_TILL_ANY)
    op = _ops(spec)
    op.push(typed("ab a", t0=1).filter(pa.array([True, True, False, True])))   # a b . a
    op.end_interval()                       # gap: the trailing 'a' must not pair with later b
    op.push(typed("bab", t0=10))
    op.flush()
    res = op.results().to_pylist()
    assert [(r["first_t"], r["last_t"]) for r in res] == [(1, 2), (11, 12)]
    assert [r["match_id"] for r in res] == [1, 2]
    assert op.counters.intervals == 1
    # without the gap, the a's at t=1 and t=4 pair with the b's at t=10 and 12 too
    op2 = _ops(spec)
    op2.push(typed("ab a", t0=1).filter(pa.array([True, True, False, True])))
    op2.push(typed("bab", t0=10))
    assert op2.results().num_rows == 6


def test_end_interval_sql_resolves_running_attempts() -> None:
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("B"), 1, None))), (is_type("A"), is_type("B")),
                       semantics=pm.Semantics.SQL,
                       measures=(pm.Measure("nb", Call("COUNT", (Column("*", "B"),))),))
    op = _ops(spec)
    op.push(typed("abb"))
    assert op.results().num_rows == 0       # greedy B+ may still grow
    op.end_interval()
    first = op.results().to_pylist()
    assert [(r["first_seq"], r["last_seq"], r["nb"]) for r in first] == [(0, 2, 2)]
    op.push(typed("bbab", t0=10))           # leading b's cannot continue the old match
    op.flush()
    rest = op.results().to_pylist()
    assert [(r["first_t"], r["nb"], r["match_number"]) for r in rest] == [(12, 1, 2)]


def test_state_cap_stops_skip_till_any_blow_up() -> None:
    """A B+ C under skip-till-any: every subset of the b's is a match - 2^k matches per c."""
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("B"), 1, None), pm.Var("C"))),
                       (is_type("A"), is_type("B"), is_type("C")),
                       strategy=pm.Strategy.SKIP_TILL_ANY)
    tab = typed("a" + "b" * 22 + "c")
    with pytest.raises(StateCapExceeded, match="state_cap") as ei:
        _ops(spec, state_cap=100_000).process(tab)
    assert ei.value.cap == 100_000
    # the shared run graph itself stays small: nodes grow with events, not with matches
    op = _ops(spec, state_cap=100_000)
    op.push(typed("a" + "b" * 22))
    assert op.counters.state_size < 1000


def test_state_cap_stops_distinct_running_aggregates() -> None:
    """Runs with distinct running sums cannot be merged: the run graph itself blows up."""
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("B"), 1, None), pm.Var("C"))),
                       (is_type("A"), pm.VarDef("B", Binary("<", Call("SUM", (Column("temp", "B"),)),
                                                         Literal(1e9))), is_type("C")),
                       strategy=pm.Strategy.SKIP_TILL_ANY)
    tab = typed("a" + "b" * 24, [float(2 ** i) for i in range(25)])
    with pytest.raises(StateCapExceeded, match="state_cap"):
        _ops(spec, state_cap=50_000).process(tab)


def test_input_order_errors_name_the_row() -> None:
    spec = pm.PatternSpec(pm.Var("A"), (is_type("A"),))
    op = _ops(spec)
    bad = pa.table({"t": [1, 3, 2], "seq": [0, 1, 2], "type": ["a"] * 3, "temp": [0.0] * 3},
                   schema=SCH)
    with pytest.raises(DataError, match="row 2"):
        op.push(bad)
    op2 = _ops(spec)
    op2.push(typed("a", t0=5))
    with pytest.raises(DataError, match="row 0"):
        op2.push(typed("a", t0=4))   # time went backwards across batches
    op3 = _ops(spec)                 # equal t with any seq order: arrival order (merged streams)
    op3.push(pa.table({"t": [1, 1, 2], "seq": [7, 3, 3], "type": ["a"] * 3, "temp": [0.0] * 3},
                      schema=SCH))
    assert op3.results().num_rows == 3


def test_measures_one_row() -> None:
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("B"), 1, None), pm.Var("C"))),
                       (is_type("A"), is_type("B"), is_type("C")), semantics=pm.Semantics.SQL,
                       measures=(
                           pm.Measure("a_seq", Column("seq", "A")),
                           pm.Measure("first_b", Call("FIRST", (Column("temp", "B"),))),
                           pm.Measure("last_b", Call("LAST", (Column("temp", "B"),))),
                           pm.Measure("b1", Call("LAST", (Column("temp", "B"), Literal(1)))),
                           pm.Measure("avg_b", Call("AVG", (Column("temp", "B"),))),
                           pm.Measure("n", Call("COUNT", (Column("*", None),)) if False else
                                   Call("COUNT", (Column("*", "B"),))),
                           pm.Measure("cls", Call("CLASSIFIER")),
                           pm.Measure("mn", Call("MATCH_NUMBER")),
                           pm.Measure("prev_c", Call("PREV", (Column("temp", "C"),))),
                           pm.Measure("next_a", Call("NEXT", (Column("temp", "A"),))),
                           pm.Measure("span", Binary("-", Column("t", "C"), Column("t", "A"))),
                       ))
    tab = typed("xabbbcx", [0.0, 1.0, 2.0, 4.0, 6.0, 7.0, 9.0])
    out = _ops(spec).process(tab).to_pylist()
    assert len(out) == 1
    r = out[0]
    assert (r["a_seq"], r["first_b"], r["last_b"], r["b1"], r["avg_b"], r["n"]) == \
        (1, 2.0, 6.0, 4.0, 4.0, 3)
    assert (r["cls"], r["mn"], r["prev_c"], r["next_a"], r["span"]) == ("C", 1, 6.0, 2.0, 4.0)
    assert _ops(spec).output_schema.field("n").type == pa.int64()


def test_measures_all_rows_running_and_final() -> None:
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("B"), 1, None))), (is_type("A"), is_type("B")),
                       semantics=pm.Semantics.SQL, rows_per_match=pm.RowsPerMatch.ALL,
                       measures=(pm.Measure("cls", Call("CLASSIFIER")),
                                 pm.Measure("run_sum", Call("SUM", (Column("temp"),))),
                                 pm.Measure("fin_sum", Call("SUM", (Column("temp"),), "FINAL")),
                                 pm.Measure("last_b", Column("temp", "B")),
                                 pm.Measure("fin_last_b", Call("LAST", (Column("temp", "B"),),
                                                            "FINAL")),
                                 pm.Measure("run_max", Call("MAX", (Column("temp", "B"),)))))
    tab = typed("abbx", [1.0, 5.0, 3.0, 0.0])
    out = _ops(spec).process(tab).to_pylist()
    assert [r["seq"] for r in out] == [0, 1, 2]
    assert [r["cls"] for r in out] == ["A", "B", "B"]
    assert [r["run_sum"] for r in out] == [1.0, 6.0, 9.0]
    assert [r["fin_sum"] for r in out] == [9.0, 9.0, 9.0]
    assert [r["last_b"] for r in out] == [None, 5.0, 3.0]
    assert [r["fin_last_b"] for r in out] == [3.0, 3.0, 3.0]
    assert [r["run_max"] for r in out] == [None, 5.0, 5.0]
    assert [r["match_id"] for r in out] == [1, 1, 1]


def test_measures_match_oracle_on_random_matches() -> None:
    exprs = [Call("FIRST", (Column("temp", "B"),)), Call("SUM", (Column("temp", "B"),)),
             Call("MAX", (Column("temp"),)), Column("temp", "A"), Call("COUNT", (Column("*", "B"),)),
             Binary("+", Column("temp"), Call("LAST", (Column("temp", "B"), Literal(1)))),
             # aggregates over expressions of one variable's (or every row's) columns
             Call("SUM", (Binary("*", Column("temp", "B"), Literal(2)),)),
             Call("AVG", (Binary("-", Column("temp"), Literal(1.5)),)),
             Call("MAX", (Binary("+", Column("temp", "A"), Column("temp", "A")),)),
             Call("COUNT", (Binary("*", Column("temp", "B"), Literal(1)),)),
             Call("MIN", (Call("ABS", (Binary("-", Column("temp", "B"), Literal(50)),)),)),
             # COUNT(DISTINCT ...) of a variable's column, of every row's, of an expression
             Call("COUNT", (Column("type", "B"),), distinct=True),
             Call("COUNT", (Column("temp"),), distinct=True),
             Call("COUNT", (Binary("%", Column("temp", "B"), Literal(3)),), distinct=True)]
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("B"), 0, None), pm.Var("C"))),
                       (is_type("A"), pm.VarDef("B", Binary("!=", Column("type"), Literal("a"))),
                        is_type("C")), window=6, strategy=pm.Strategy.SKIP_TILL_ANY,
                       measures=tuple(pm.Measure(f"m{i}", e) for i, e in enumerate(exprs)))
    tab = random_stream(60, 11)
    out = _ops(spec).process(tab).to_pylist()
    ms = oracle.matches(spec, tab)
    assert len(out) == len(ms) > 10
    for r, m in zip(out, ms):
        for i, e in enumerate(exprs):
            exp = oracle.measure_value(e, tab, m[1], m[2])
            got = r[f"m{i}"]
            if exp is None or (isinstance(exp, float) and np.isnan(exp)):
                assert got is None or (isinstance(got, float) and np.isnan(got))
            else:
                assert got == pytest.approx(exp), (i, m)


def test_ambiguous_pattern_reports_each_labelled_match_once() -> None:
    spec = pm.PatternSpec(pm.Alt((pm.Seq((pm.Var("A"), pm.Var("B"))), pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("B"), 0, 1))))),
                       (pm.VarDef("A"), pm.VarDef("B")), strategy=pm.Strategy.SKIP_TILL_ANY)
    got = oracle.run_operator(spec, typed("xy"))
    assert got == [((), (0,), ("A",)), ((), (0, 1), ("A", "B")), ((), (1,), ("A",))]


def test_t_and_seq_are_columns_and_partitions_come_out() -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                     ("k", pa.string())])
    tab = pa.table({"t": [1, 2, 3, 4], "seq": [10, 11, 12, 13], "type": list("aabb"),
                    "k": ["x", "y", "x", "y"]}, schema=sch)
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Var("B"))), (is_type("A"), is_type("B")),
                       partition_by=("k",), semantics=pm.Semantics.SQL,
                       measures=(pm.Measure("fa", Call("FIRST", (Column("seq", "A"),))),
                                 pm.Measure("dt", Binary("-", Column("t", "B"), Column("t", "A")))))
    op = PatternOperator(PatternConfig(spec, sch))
    out = op.process(tab)
    assert out.schema.names == ["t", "match_id", "match_number", "first_t", "first_seq",
                                "last_t", "last_seq", "k", "fa", "dt"]
    assert out.to_pylist() == [
        {"t": 3, "match_id": 1, "match_number": 1, "first_t": 1, "first_seq": 10, "last_t": 3,
         "last_seq": 12, "k": "x", "fa": 10, "dt": 2.0},
        {"t": 4, "match_id": 2, "match_number": 1, "first_t": 2, "first_seq": 11, "last_t": 4,
         "last_seq": 13, "k": "y", "fa": 11, "dt": 2.0}]


def test_skip_to_errors_follow_the_standard() -> None:
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("B"), 0, 1))), (is_type("A"), is_type("B")),
                       semantics=pm.Semantics.SQL,
                       after_match_skip=pm.AfterMatchSkip(pm.SkipKind.TO_LAST, "B"))
    with pytest.raises(OperatorError, match="bound no row"):
        _ops(spec).process(typed("ax"))
    spec2 = replace(spec, after_match_skip=pm.AfterMatchSkip(pm.SkipKind.TO_FIRST, "A"))
    with pytest.raises(OperatorError, match="first row"):
        _ops(spec2).process(typed("ab"))


def test_compile_errors() -> None:
    with pytest.raises(QueryError, match="zero events"):
        _ops(pm.PatternSpec(pm.Repeat(pm.Var("A"), 0, None)))
    with pytest.raises(QueryError, match="not in the pattern"):
        _ops(pm.PatternSpec(pm.Var("A"), (pm.VarDef("Z"),)))
    with pytest.raises(QueryError, match="FINAL"):
        _ops(pm.PatternSpec(pm.Var("A"), (pm.VarDef("A", Binary(">", Column("temp"), Call(
            "LAST", (Column("temp"),), "FINAL"))),)))
    with pytest.raises(QueryError, match="unknown column"):
        _ops(pm.PatternSpec(pm.Var("A"), (pm.VarDef("A", Binary(">", Column("nope", pos=3),
                                                       Literal(1))),)))


def test_counters_and_state_are_reported() -> None:
    op = _fed(SPECS["any"], random_stream(500, 5), 50)
    c = op.counters
    assert c.events_in == 500 and c.batches_in == 10
    assert c.results_out == op.results().num_rows > 0
    assert c.peak_state > 0
    assert "engine: all-runs" in op.explain()


def test_large_random_stream_invariants_after_every_batch() -> None:
    """Seeded stress: many garbage collections and buffer trims, invariants checked."""
    spec = SPECS["any"]
    tab = random_stream(5000, 99)
    op = _fed(spec, tab, 97, check=True)
    assert op.results().num_rows == len(oracle.matches(spec, tab.slice(0, 0))) + \
        op.counters.results_out


def _fixed_specs():  # type: ignore[no-untyped-def]
    from hypothesis import strategies as st

    conds = st.sampled_from([None, Binary("=", Column("type"), Literal("a")),
                             Binary("!=", Column("type"), Literal("b")),
                             Binary(">", Column("temp"), Literal(3.0)),
                             Binary(">=", Column("temp"), Call("PREV", (Column("temp"),)))])

    @st.composite
    def build(draw):  # type: ignore[no-untyped-def]
        k = draw(st.integers(1, 4))
        names = [draw(st.sampled_from("ABC")) for _ in range(k)]
        pat = pm.Seq(tuple(pm.Var(v) for v in names)) if k > 1 else pm.Var(names[0])
        defines = tuple(pm.VarDef(v, draw(conds)) for v in dict.fromkeys(names))
        window = draw(st.one_of(st.none(), st.integers(0, 4)))
        if draw(st.booleans()):
            skip = draw(st.sampled_from([pm.AfterMatchSkip(pm.SkipKind.PAST_LAST_ROW),
                                         pm.AfterMatchSkip(pm.SkipKind.TO_NEXT_ROW),
                                         pm.AfterMatchSkip(pm.SkipKind.TO_LAST, names[-1])]))
            return pm.PatternSpec(pat, defines, window, semantics=pm.Semantics.SQL,
                               after_match_skip=skip,
                               measures=(pm.Measure("s", Call("SUM", (Column("temp"),))),))
        return pm.PatternSpec(pat, defines, window, pm.Strategy.CONTIGUOUS,
                           measures=(pm.Measure("f", Call("FIRST", (Column("seq"),))),))

    return build()


def test_vectorized_fixed_sequences_equal_general_engines() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=120, deadline=None)
    @given(_fixed_specs(), st.integers(0, 60), st.integers(0, 10_000), st.integers(1, 9))
    def check(spec: pm.PatternSpec, n: int, seed: int, chunk: int) -> None:
        tab = random_stream(n, seed)
        fast = PatternOperator(PatternConfig(spec, SCH))
        slow = PatternOperator(PatternConfig(spec, SCH), vectorized=False)
        assert type(fast._engine).__name__ == "FixedSeqEngine"
        assert type(slow._engine).__name__ != "FixedSeqEngine"

        def run(op: PatternOperator) -> object:
            try:
                for b in tab.to_batches(max_chunksize=chunk):
                    op.push(b)
                    op._check()
                op.end_interval()
                for b in tab.to_batches(max_chunksize=chunk):
                    shifted = [x + 10**6 for x in b.column("t").to_pylist()]
                    op.push(pa.table({**b.to_pydict(), "t": shifted}, schema=SCH))
                op.flush()
            except OperatorError as e:
                return type(e)
            return op.results()

        a, b = run(fast), run(slow)
        if isinstance(a, pa.Table):
            assert isinstance(b, pa.Table) and a.equals(b)
        else:
            assert a == b

    check()


def test_dead_runs_do_not_pin_old_events() -> None:
    """Rare, short-lived runs over a long stream: the buffer stays small."""
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Var("B"))), (is_type("A"), is_type("B")), window=3,
                       strategy=pm.Strategy.SKIP_TILL_NEXT)
    op = _ops(spec)
    n = 1 << 20
    types = np.where(np.arange(n) % 1000 == 0, "a", "x")
    tab = pa.table({"t": np.arange(n), "seq": np.arange(n), "type": types,
                    "temp": np.zeros(n)}, schema=SCH)
    for b in tab.to_batches(max_chunksize=1 << 15):
        op.push(b)
        op._check()
        assert op._buffer.size <= (1 << 18) + (1 << 15)
    assert op.counters.extra["peak_live_runs"] <= 2


def test_end_interval_keeps_match_numbers_of_many_partitions() -> None:
    """Regression: with more partitions than the engine's initial per-partition capacity, the
    match numbers carried across an interval end were copied into smaller arrays (crash)."""
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Var("B"))), (is_type("A"), is_type("B")),
                       semantics=pm.Semantics.SQL, partition_by=("temp",))
    op = _ops(spec)
    keys = 33
    n = 2 * keys
    first = pa.table({"t": list(range(n)), "seq": list(range(n)),
                      "type": ["a"] * keys + ["b"] * keys,
                      "temp": [float(k) for k in range(keys)] * 2}, schema=SCH)
    for i in range(n):  # partitions appear one by one: the capacity grows by doubling
        op.push(first.slice(i, 1))
    op.end_interval()
    second = pa.table({"t": list(range(1000, 1000 + n)), "seq": list(range(n, 2 * n)),
                       "type": ["a"] * keys + ["b"] * keys,
                       "temp": [float(k) for k in range(keys)] * 2}, schema=SCH)
    op.push(second)
    op.flush()
    rows = op.results().to_pylist()
    assert len(rows) == 2 * keys
    per_key: dict[float, list[int]] = {}
    for r in rows:
        per_key.setdefault(r["temp"], []).append(r["match_number"])
    assert all(sorted(v) == [1, 2] for v in per_key.values()), per_key


@pytest.mark.parametrize("name", sorted(SPECS))
def test_many_intervals_build_rows_once_like_per_interval(name: str) -> None:
    """Matches of many short intervals wait in the buffer and their rows are built in one
    batch; asking for results after every interval (rows built per interval), or taking a
    snapshot in between, gives the same rows."""
    spec = SPECS[name]
    tab = random_stream(400, 11)
    pieces = [tab.slice(i, 13) for i in range(0, tab.num_rows, 17)]  # gaps of 4 events

    def run(ask_every: bool, snap_at: int | None = None) -> tuple[pa.Table, int]:
        op = _ops(spec)
        parts = []
        for k, p in enumerate(pieces):
            if k:
                op.end_interval()
                op._check()
            if snap_at == k:
                snap = op.snapshot()
                op = _ops(spec)
                op.restore(snap)
            op.push(p)
            op._check()
            if ask_every:
                parts.append(op.results())
        op.flush()
        parts.append(op.results())
        out = pa.concat_tables(parts)
        return out, sum(len(t.to_batches()) for t in parts)

    per, per_batches = run(True)
    once, once_batches = run(False)
    assert per.num_rows > 0
    assert once.equals(per)
    assert once_batches == 1 < per_batches
    assert run(False, snap_at=len(pieces) // 2)[0].equals(per)


def test_waiting_matches_keep_their_events_and_count_in_the_state() -> None:
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Var("B"))), (is_type("A"), is_type("B")),
                       semantics=pm.Semantics.SQL,
                       measures=(pm.Measure("ta", Call("FIRST", (Column("temp", "A"),))),))
    op = _ops(spec)
    op.push(typed("ab", [1.0, 2.0]))
    op.end_interval()
    assert op.counters.state_size >= 2        # the match's two events are pinned
    op.push(typed("xxab", [0.0, 0.0, 3.0, 4.0], t0=10))
    op.end_interval()
    op._check()
    assert op.has_results()
    rows = op.results().to_pylist()
    assert [(r["first_t"], r["ta"], r["match_number"]) for r in rows] == [(1, 1.0, 1),
                                                                          (12, 3.0, 2)]
    assert not op.has_results()


WIDE = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                  ("temp", pa.float64()), ("hum", pa.float64()), ("note", pa.string())])


def _wide(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"t": np.arange(n) * 2, "seq": np.arange(n),
                     "type": np.array(list("abc"))[rng.integers(0, 3, n)],
                     "temp": rng.integers(0, 9, n).astype(float),
                     "hum": rng.random(n), "note": [f"n{i}" for i in range(n)]}, schema=WIDE)


@pytest.mark.parametrize("query,cols", [
    ("MEASURES A.seq AS s PATTERN (A B) DEFINE A AS temp > 4, B AS temp < PREV(temp)",
     ["t", "seq", "temp"]),
    ("PARTITION BY type MEASURES LAST(B.hum) AS h, COUNT(*) AS n PATTERN (A B+) "
     "DEFINE A AS temp > 4, B AS B.temp < A.temp", ["t", "seq", "type", "temp", "hum"]),
    ("MEASURES FIRST(A.note) AS x, AVG(B.hum) AS y PATTERN (A B) DEFINE A AS temp > 4",
     ["t", "seq", "temp", "hum", "note"]),
    ("ALL ROWS PER MATCH PATTERN (A B) DEFINE A AS temp > 4", WIDE.names),
])
def test_input_columns_are_what_the_query_reads(query: str, cols: list[str]) -> None:
    """Batches of only ``input_columns`` give the rows that whole batches give."""
    from replaydb.planner.lang.match_recognize import bind, parse

    text = f"SELECT * FROM s MATCH_RECOGNIZE ({query})"
    op = bind(parse(text), WIDE, None)
    assert op.input_columns == cols
    tab = _wide(300, 5)
    ref = op.process(tab)
    assert ref.num_rows > 0
    narrow = bind(parse(text), WIDE, None)
    for b in tab.select(cols).to_batches(max_chunksize=50):
        narrow.push(b)
    narrow.flush()
    assert narrow.results().equals(ref)
    if len(cols) < len(WIDE.names):
        short = bind(parse(text), WIDE, None)
        with pytest.raises(DataError, match="lacks column"):
            short.push(tab.select([c for c in cols if c != cols[-1]]))


def _interval_specs() -> dict[str, pm.PatternSpec]:
    sql = SPECS["sql"]
    specs = dict(SPECS)
    specs["sql_next_row_partitioned"] = replace(
        sql, partition_by=("type",), after_match_skip=pm.AfterMatchSkip(pm.SkipKind.TO_NEXT_ROW))
    specs["sql_greedy_to_next_row"] = pm.PatternSpec(
        pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("B"), 1, None))),
        (is_type("A"), pm.VarDef("B", Binary(">", Column("temp"), Literal(2)))),
        window=20, semantics=pm.Semantics.SQL, after_match_skip=pm.AfterMatchSkip(pm.SkipKind.TO_NEXT_ROW),
        measures=(pm.Measure("n", Call("COUNT", (Column("*", "B"),))),))
    specs["sql_prev"] = replace(sql, defines=(is_type("A"), is_type("B"), pm.VarDef(
        "C", Binary(">", Column("temp"), Call("PREV", (Column("temp"),))))))
    return specs


INTERVAL_SPECS = _interval_specs()


def _per_interval(spec: pm.PatternSpec, tab: pa.Table, breaks: list[int]) -> tuple[pa.Table, int]:
    """Reference: the slices between breaks pushed one by one, end_interval between them."""
    op = _ops(spec)
    prev = 0
    for b in breaks:
        if b > prev:
            op.push(tab.slice(prev, b - prev))
        op.end_interval()
        prev = b
    if prev < tab.num_rows:
        op.push(tab.slice(prev))
    op.flush()
    return op.results(), op.counters.intervals


@pytest.mark.parametrize("name", sorted(INTERVAL_SPECS))
def test_push_intervals_equals_pushing_each_interval(name: str) -> None:
    """One batch with interval breaks gives the rows, match numbers and interval count of
    pushing each interval with end_interval between (property test over random streams and
    breaks, repeated breaks for empty intervals and a break before the first row included),
    the last batch pushed as ``final`` (ending with the flush) or followed by a flush."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    spec = INTERVAL_SPECS[name]
    in_kernel = _ops(spec)._breaks_in_kernel
    assert in_kernel == (name.startswith("sql") and name != "sql_prev"), name

    @settings(max_examples=40, deadline=None)
    @given(st.integers(1, 150), st.integers(0, 10_000),
           st.lists(st.integers(0, 149), max_size=12), st.integers(1, 200), st.booleans())
    def check(n: int, seed: int, raw: list[int], chunk: int, final: bool) -> None:
        tab = random_stream(n, seed)
        breaks = sorted(b for b in raw if b < n)
        ref, ref_iv = _per_interval(spec, tab, breaks)
        op = _ops(spec)
        done = 0
        for start in range(0, n, chunk):  # batches cut anywhere, breaks split among them
            rows = min(chunk, n - start)
            mine = [b - start for b in breaks if start <= b < start + rows]
            op.push_intervals(tab.slice(start, rows).to_batches()[0], np.array(mine),
                              final=final and start + rows == n)
            done += len(mine)
            op._check()
        for _ in range(len(breaks) - done):  # breaks past the last row
            op.end_interval()
        op.flush()
        assert op.results().equals(ref)
        assert op.counters.intervals == ref_iv

    check()


def test_push_intervals_grows_outputs_at_a_break() -> None:
    """Hundreds of attempts end at one break, more than the matcher's output arrays hold:
    they grow and the kernel resumes at the break row."""
    spec = INTERVAL_SPECS["sql_greedy_to_next_row"]
    n = 700
    tab = pa.table({"t": list(range(n)), "seq": list(range(n)),
                    "type": ["a"] * n, "temp": [5.0] * n}, schema=SCH)
    breaks = [300, 301, 650]
    ref, _ = _per_interval(spec, tab, breaks)
    op = _ops(spec)
    op.push_intervals(tab.to_batches()[0], np.array(breaks))
    op.flush()
    out = op.results()
    assert out.num_rows == ref.num_rows > 600
    assert out.equals(ref)


def test_push_intervals_rejects_bad_breaks() -> None:
    tab = random_stream(20, 1)
    for name in ("sql", "any"):  # the matcher's breaks, and the default's slices
        for bad in ([5, 3], [20], [-1]):
            with pytest.raises(OperatorError, match="break"):
                _ops(SPECS[name]).push_intervals(tab.to_batches()[0], np.array(bad))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_large_waiting_match_sets_build_alone_same_rows(name: str, monkeypatch) -> None:
    """A waiting match set of at least ``BUILD_ALONE_EVENTS`` matched events gets a batch of
    its own instead of being copied into one concatenation with its neighbours: the rows and
    their order are those of building everything at once, and the small sets between large
    ones still share a batch."""
    import replaydb.operators.pattern.output as pattern_output

    spec = SPECS[name]
    tab = random_stream(400, 11)
    breaks = list(range(13, tab.num_rows, 13))

    def run(alone: int) -> tuple[pa.Table, int]:
        monkeypatch.setattr(pattern_output, "BUILD_ALONE_EVENTS", alone)
        out, _ = _per_interval(spec, tab, breaks)
        return out, len(out.to_batches())

    together, together_batches = run(1 << 62)
    alone, alone_batches = run(3)
    assert together.num_rows > 0
    assert alone.equals(together)
    assert together_batches == 1 < alone_batches


def test_build_groups_keep_order_and_put_large_sets_alone() -> None:
    from replaydb.operators.pattern.measures import MatchSet
    from replaydb.operators.pattern.output import _build_groups

    def ms(events: int) -> MatchSet:
        z = np.zeros(events, dtype=np.int64)
        return MatchSet(z, z.astype(np.int32), np.array([0, events], dtype=np.int64),
                        np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64),
                        np.zeros(1, dtype=np.int64))

    sizes = [1, 2, 9, 3, 0, 10, 12, 4]
    parts = [ms(n) for n in sizes]
    groups = _build_groups(parts, 9)
    assert [[len(p.ev) for p in g] for g in groups] == [[1, 2], [9], [3, 0], [10], [12], [4]]
    flat = [p for g in groups for p in g]
    assert len(flat) == len(parts) and all(a is b for a, b in zip(flat, parts))
    assert _build_groups([], 9) == []
