"""The pattern operator against the brute-force oracle on random streams and random patterns.

Every example builds a random stream (ties in time, NULLs, two partitions) and a random pattern
(sequences, alternation, quantifiers, greedy and reluctant) with random conditions that refer to
the current event, to PREV, to earlier bound variables, to running aggregates and (SQL semantics)
to MATCH_NUMBER(), then compares
the operator (cut into random batch sizes) with :mod:`replaydb.operators.pattern.oracle`:
exact lists, so the documented output order is checked too.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from replaydb.errors import OperatorError, QueryError
from replaydb.operators import expr as ex
from replaydb.operators.pattern import model as pm
from replaydb.operators.pattern import oracle
from replaydb.operators.pattern.automaton import build_automaton

SCHEMA = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                    ("x", pa.float64()), ("k", pa.int64())])
VARS = ["A", "B", "C", "D"]


@st.composite
def streams(draw, max_len: int = 9) -> pa.Table:
    n = draw(st.integers(0, max_len))
    t, cur = [], 0
    for _ in range(n):
        cur += draw(st.integers(0, 2))
        t.append(cur)
    types = draw(st.lists(st.sampled_from("abc"), min_size=n, max_size=n))
    xs = draw(st.lists(st.one_of(st.integers(0, 4).map(float), st.none()), min_size=n,
                       max_size=n))
    ks = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return pa.table([pa.array(t, pa.int64()), pa.array(range(n), pa.int64()),
                     pa.array(types), pa.array(xs, pa.float64()), pa.array(ks, pa.int64())],
                    schema=SCHEMA)


def patterns(depth: int = 3) -> st.SearchStrategy[pm.PatternNode]:
    var = st.sampled_from(VARS).map(pm.Var)
    if depth == 0:
        return var

    def rep(body: pm.PatternNode, q: tuple[int, int | None], greedy: bool) -> pm.PatternNode:
        return pm.Repeat(body, q[0], q[1], greedy)

    sub = patterns(depth - 1)
    quant = st.sampled_from([(0, None), (1, None), (0, 1), (1, 2), (2, 3), (0, 2), (2, None)])
    return st.one_of(
        var,
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: pm.Seq(tuple(xs))),
        st.lists(sub, min_size=2, max_size=2).map(lambda xs: pm.Alt(tuple(xs))),
        st.builds(rep, sub, quant, st.booleans()),
    )


def conditions(var: str, used: list[str], sql: bool = False) -> st.SearchStrategy[ex.Expr | None]:
    """Random conditions of ``var``; with ``sql``, MATCH_RECOGNIZE's MATCH_NUMBER() too."""
    x = ex.Column("x")
    others = [v for v in used if v != var] or [var]
    other = st.sampled_from(others)
    atoms = st.one_of(
        st.sampled_from("abc").map(lambda c: ex.Binary("=", ex.Column("type"), ex.Literal(c))),
        st.integers(0, 4).map(lambda c: ex.Binary(">", x, ex.Literal(c))),
        st.integers(0, 4).map(lambda c: ex.Binary("<=", x, ex.Literal(c))),
        st.tuples(st.integers(0, 2), st.integers(2, 4)).map(
            lambda p: ex.Between(x, ex.Literal(p[0]), ex.Literal(p[1]))),
        st.just(ex.Binary(">", x, ex.Call("PREV", (x,)))),
        st.just(ex.Binary(">=", x, ex.Call("PREV", (x, ex.Literal(2))))),
        other.map(lambda o: ex.Binary(">=", x, ex.Column("x", o))),
        other.map(lambda o: ex.Binary("!=", ex.Column("type"), ex.Column("type", o))),
        st.just(ex.Binary("!=", x, ex.Call("FIRST", (x,)))),
        st.just(ex.Binary(">=", x, ex.Call("FIRST", (ex.Column("x", var),)))),
        st.integers(1, 3).map(lambda c: ex.Binary("<=", ex.Call("COUNT", (ex.Column("*", var),)),
                                               ex.Literal(c))),
        st.just(ex.Binary(">=", x, ex.Call("AVG", (ex.Column("x", var),)))),
        st.integers(2, 9).map(lambda c: ex.Binary("<", ex.Call("SUM", (x,)), ex.Literal(c))),
        st.just(ex.Binary("or", ex.Binary("<", ex.Call("LAST", (ex.Column("x", var), ex.Literal(1))), x),
                       ex.Binary("=", ex.Call("COUNT", (ex.Column("*", var),)), ex.Literal(1)))),
        st.just(ex.Binary(">", ex.Call("MAX", (ex.Column("x", var),)), ex.Call("MIN", (x,)))),
        st.just(ex.IsNull(x)),
        st.just(ex.InList(ex.Column("type"), (ex.Literal("a"), ex.Literal("b")))),
        st.just(ex.Binary("<=", ex.Call("COUNT", (ex.Star(),)), ex.Literal(3))),
    )
    if sql:
        number = ex.Call("MATCH_NUMBER")
        atoms = st.one_of(
            atoms,
            st.integers(1, 4).map(lambda c: ex.Binary("<=", number, ex.Literal(c))),
            st.integers(1, 3).map(lambda c: ex.Binary("!=", number, ex.Literal(c))),
            st.just(ex.Binary(">=", ex.Binary("+", x, ex.Literal(1)), number)))
    combo = st.one_of(atoms, st.tuples(st.sampled_from(["and", "or"]), atoms, atoms).map(
        lambda p: ex.Binary(p[0], p[1], p[2])))
    return st.one_of(st.none(), combo, combo)


@st.composite
def specs(draw, semantics: pm.Semantics) -> pm.PatternSpec:
    pat = draw(patterns())
    try:
        auto = build_automaton(pat)
    except QueryError:
        assume(False)
    if semantics == pm.Semantics.ALL_RUNS:
        assume(auto.unambiguous_labels())
    used = pat.variables()
    sql = semantics == pm.Semantics.SQL
    defines = tuple(pm.VarDef(v, draw(conditions(v, used, sql))) for v in used)
    window = draw(st.one_of(st.none(), st.integers(0, 5)))
    part = draw(st.sampled_from([(), ("k",)]))
    if semantics == pm.Semantics.SQL:
        skip = draw(st.sampled_from([pm.AfterMatchSkip(pm.SkipKind.PAST_LAST_ROW),
                                     pm.AfterMatchSkip(pm.SkipKind.TO_NEXT_ROW),
                                     pm.AfterMatchSkip(pm.SkipKind.TO_LAST, draw(st.sampled_from(used))),
                                     pm.AfterMatchSkip(pm.SkipKind.TO_FIRST,
                                                    draw(st.sampled_from(used)))]))
        return pm.PatternSpec(pat, defines, window, pm.Strategy.CONTIGUOUS, pm.Semantics.SQL, part,
                           after_match_skip=skip)
    strat = draw(st.sampled_from([pm.Strategy.CONTIGUOUS, pm.Strategy.SKIP_TILL_NEXT,
                                  pm.Strategy.SKIP_TILL_ANY]))
    return pm.PatternSpec(pat, defines, window, strat, pm.Semantics.ALL_RUNS, part)


def _compare(spec: pm.PatternSpec, table: pa.Table, batch: int) -> None:
    try:
        expected = oracle.matches(spec, table)
    except OperatorError:
        with pytest.raises(OperatorError):
            oracle.run_operator(spec, table, batch_rows=batch)
        return
    got = oracle.run_operator(spec, table, batch_rows=batch)
    if spec.semantics == pm.Semantics.SQL:  # compare per partition, in order
        def per(ms: list) -> dict:
            d: dict = {}
            for m in ms:
                d.setdefault(m[0], []).append(m)
            return d
        assert per(got) == per(expected), (spec.to_text(), table.to_pydict())
    else:
        assert got == expected, (spec.to_text(), table.to_pydict())


SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@SETTINGS
@given(specs(pm.Semantics.ALL_RUNS), streams(), st.integers(1, 4))
def test_all_runs_matches_oracle(spec: pm.PatternSpec, table: pa.Table, batch: int) -> None:
    _compare(spec, table, batch)


@SETTINGS
@given(specs(pm.Semantics.SQL), streams(), st.integers(1, 4))
def test_sql_matches_oracle(spec: pm.PatternSpec, table: pa.Table, batch: int) -> None:
    _compare(spec, table, batch)


@st.composite
def negation_specs(draw) -> pm.PatternSpec:
    """Flat SASE-like sequences of distinct variables with negations between positives."""
    n = draw(st.integers(2, 3))
    names = VARS[:n]
    items: list[pm.PatternNode] = []
    negs = []
    for i, v in enumerate(names):
        items.append(draw(st.sampled_from([pm.Var(v), pm.Repeat(pm.Var(v), 1, None)])))
        if i < n - 1 and draw(st.booleans()):
            nv = f"N{i}"
            negs.append(nv)
            items.append(pm.Neg(pm.Var(nv)))
    assume(negs)
    defines = [pm.VarDef(v, draw(conditions(v, names))) for v in names]
    for nv in negs:
        cond = draw(st.sampled_from([ex.Binary("=", ex.Column("type"), ex.Literal("c")),
                                     ex.Binary(">", ex.Column("x"), ex.Column("x", "A")), None]))
        defines.append(pm.VarDef(nv, cond))
    strat = draw(st.sampled_from([pm.Strategy.SKIP_TILL_NEXT, pm.Strategy.SKIP_TILL_ANY,
                                  pm.Strategy.CONTIGUOUS]))
    return pm.PatternSpec(pm.Seq(tuple(items)), tuple(defines), draw(st.one_of(st.none(),
                                                                          st.integers(0, 6))),
                       strat, pm.Semantics.ALL_RUNS, draw(st.sampled_from([(), ("k",)])))


@SETTINGS
@given(negation_specs(), streams(), st.integers(1, 4))
def test_negation_matches_oracle(spec: pm.PatternSpec, table: pa.Table, batch: int) -> None:
    _compare(spec, table, batch)


SLOW = settings(max_examples=2500, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@pytest.mark.slow
@SLOW
@given(specs(pm.Semantics.ALL_RUNS), streams(11), st.integers(1, 5))
def test_all_runs_matches_oracle_thousands(spec: pm.PatternSpec, table: pa.Table, batch: int) -> None:
    _compare(spec, table, batch)


@pytest.mark.slow
@SLOW
@given(specs(pm.Semantics.SQL), streams(11), st.integers(1, 5))
def test_sql_matches_oracle_thousands(spec: pm.PatternSpec, table: pa.Table, batch: int) -> None:
    _compare(spec, table, batch)


@pytest.mark.slow
@SLOW
@given(negation_specs(), streams(11), st.integers(1, 5))
def test_negation_matches_oracle_thousands(spec: pm.PatternSpec, table: pa.Table, batch: int) -> None:
    _compare(spec, table, batch)
