"""MATCH_RECOGNIZE's anchors, PERMUTE, exclusion, SUBSET, empty matches and unmatched rows
against the brute-force oracle.

Random patterns from the whole row pattern grammar the operator accepts (sequences,
alternation, greedy and reluctant quantifiers, ``^``, ``$``, ``PERMUTE(...)`` and ``{- -}``,
nested; quantified groups whose body can match zero rows, nested in each other) with random
union variables, random conditions (on the current row, PREV, other variables and union
variables, running aggregates, also over expressions, MATCH_NUMBER(), FIRST/LAST at any offset,
NEXT), AFTER MATCH SKIP modes
(to union variables too), patterns that can match zero rows (SHOW and OMIT EMPTY MATCHES) and
WITH UNMATCHED ROWS, on random streams with ties, NULLs
and two partitions; the operator (cut into random batch sizes) must give exactly the oracle's
matches, rows and variables, in order per partition. The oracle reads each construct from its
definition (:func:`replaydb.operators.pattern.oracle._bt`), sharing nothing with the automaton.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from replaydb.errors import OperatorError, QueryError
from replaydb.operators import expr as ex
from replaydb.operators.pattern import model as pm
from replaydb.operators.pattern import oracle, oracle_sql
from replaydb.operators.pattern.automaton import build_automaton
from replaydb.planner.lang import match_recognize as mr
from tests.operators.pattern.test_pattern_oracle import VARS, _compare, conditions, streams

QUANTIFIERS = [(0, None), (1, None), (0, 1), (1, 2), (2, 3), (0, 2), (2, None)]


def nullable_patterns(sub: st.SearchStrategy[pm.PatternNode]) -> st.SearchStrategy[pm.PatternNode]:
    """Patterns that can match zero rows, built over ``sub``: an optional or starred ``sub``,
    anchors alone, sequences of them, an alternation with one, an exclusion of one."""
    anchor = st.booleans().map(pm.Anchor)
    base = st.one_of(
        st.builds(lambda b, hi, g: pm.Repeat(b, 0, hi, g), sub, st.sampled_from([None, 1, 2]),
                  st.booleans()),
        anchor, st.lists(anchor, min_size=1, max_size=2).map(lambda xs: pm.Seq(tuple(xs))))
    return st.one_of(
        base,
        st.lists(base, min_size=2, max_size=3).map(lambda xs: pm.Seq(tuple(xs))),
        st.tuples(base, sub, st.booleans()).map(
            lambda p: pm.Alt((p[0], p[1]) if p[2] else (p[1], p[0]))),
        base.map(pm.Exclude),
        st.lists(base, min_size=2, max_size=2).map(lambda xs: pm.Permute(tuple(xs))),
    )


def nullable_groups(depth: int = 2) -> st.SearchStrategy[pm.PatternNode]:
    """A quantified group whose body can match zero rows (greedy or reluctant, bounded or not),
    its body's pieces themselves such groups down to ``depth``, alone or between variables."""
    var = st.sampled_from(VARS).map(pm.Var)
    inner = var if depth <= 1 else st.one_of(var, nullable_groups(depth - 1))
    group = st.builds(lambda b, q, g: pm.Repeat(b, q[0], q[1], g), nullable_patterns(inner),
                      st.sampled_from(QUANTIFIERS), st.booleans())
    return st.one_of(group, st.tuples(st.lists(var, max_size=1), group, st.lists(var, max_size=1))
                     .map(lambda p: pm.Seq((*p[0], p[1], *p[2]))))


def sql_patterns(depth: int = 2) -> st.SearchStrategy[pm.PatternNode]:
    var = st.sampled_from(VARS).map(pm.Var)
    if depth == 0:
        return var
    sub = sql_patterns(depth - 1)
    quant = st.sampled_from(QUANTIFIERS)
    anchor = st.booleans().map(pm.Anchor)
    return st.one_of(
        var,
        # a quantified group whose body can match zero rows (nested when ``sub`` is one)
        st.builds(lambda b, q, g: pm.Repeat(b, q[0], q[1], g), nullable_patterns(sub), quant,
                  st.booleans()),
        st.lists(st.one_of(sub, sub, anchor), min_size=2, max_size=3).map(
            lambda xs: pm.Seq(tuple(xs))),
        st.lists(sub, min_size=2, max_size=2).map(lambda xs: pm.Alt(tuple(xs))),
        st.builds(lambda b, q, g: pm.Repeat(b, q[0], q[1], g), sub, quant, st.booleans()),
        st.lists(sql_patterns(0), min_size=2, max_size=3).map(lambda xs: pm.Permute(tuple(xs))),
        st.lists(sub, min_size=2, max_size=2).map(lambda xs: pm.Permute(tuple(xs))),
        # an exclusion beside shown rows (a match with every row excluded outputs nothing)
        st.tuples(sub, sub, st.booleans()).map(
            lambda p: pm.Seq((pm.Exclude(p[0]), p[1]) if p[2] else (p[1], pm.Exclude(p[0])))),
    )


def expression_aggregates(var: str, names: list[str]) -> st.SearchStrategy[ex.Expr]:
    """Conditions with an aggregate over an expression of one (union) variable's rows, of all
    rows, or of the variable's own rows (the current row included)."""
    whose = st.sampled_from([None, var, *names])

    def agg(fn: str, q: str | None, op: str, c: int) -> ex.Expr:
        x = ex.Column("x", q)
        arg = {"SUM": ex.Binary("*", x, ex.Literal(2)), "COUNT": ex.Binary("+", x, ex.Literal(1)),
               "AVG": ex.Binary("-", x, ex.Literal(1)),
               "MAX": ex.Call("ABS", (ex.Binary("-", x, ex.Literal(2)),))}[fn]
        return ex.Binary(op, ex.Call(fn, (arg,)), ex.Literal(c))

    return st.builds(agg, st.sampled_from(["SUM", "COUNT", "AVG", "MAX"]), whose,
                     st.sampled_from(["<", ">=", "<="]), st.integers(0, 6))


def navigations(var: str, names: list[str]) -> st.SearchStrategy[ex.Expr]:
    """Conditions with FIRST/LAST at any offset (of the variable itself, another or a union
    variable, or every row) and NEXT (of the current row, of another variable's last row,
    around FIRST/LAST), NULL-tests of rows that may not be bound yet among them."""
    whose = st.sampled_from([None, var, *names])
    x = ex.Column("x")

    def nav(fn: str, q: str | None, k: int) -> ex.Expr:
        return ex.Call(fn, (ex.Column("x", q), ex.Literal(k)))

    first_last = st.builds(nav, st.sampled_from(["FIRST", "LAST"]), whose, st.integers(0, 3))
    nexts = st.one_of(
        st.integers(1, 2).map(lambda k: ex.Call("NEXT", (x, ex.Literal(k)))),
        whose.map(lambda q: ex.Call("NEXT", (ex.Column("x", q),))),
        first_last.map(lambda e: ex.Call("NEXT", (e,))),
        st.just(ex.Call("PREV", (ex.Call("NEXT", (x, ex.Literal(2))),))))
    value = st.one_of(first_last, nexts)
    labels = classifier_navigations(names)
    return st.one_of(
        string_functions(names),
        st.builds(lambda c, v: ex.Binary("=", c, ex.Literal(v)), labels,
                  st.sampled_from([var, *names])),
        st.builds(lambda c, neg: ex.IsNull(c, neg), labels, st.booleans()),
        st.builds(lambda v, op: ex.Binary(op, x, v), value, st.sampled_from(["<=", ">", "!="])),
        st.builds(lambda v, neg: ex.IsNull(v, neg), value, st.booleans()),
        st.builds(lambda a, b: ex.Binary("or", ex.Binary(">=", a, b), ex.IsNull(a)), value,
                  value))


def string_functions(names: list[str]) -> st.SearchStrategy[ex.Expr]:
    """LOWER/UPPER of the current row's, a bound row's or a previous row's string column,
    compared with each other, with a literal or with a column of another row; strings (and
    such calls) of different rows ordered (<, >=, >, BETWEEN)."""
    whose = st.sampled_from([None, *names])

    def call(fn: str, q: str | None, prev: bool) -> ex.Expr:
        c: ex.Expr = ex.Column("type", q)
        return ex.Call(fn, (ex.Call("PREV", (c,)) if prev else c,))

    one = st.builds(call, st.sampled_from(["LOWER", "UPPER"]), whose, st.booleans())
    column = st.one_of(whose.map(lambda q: ex.Column("type", q)), one)
    ordered = st.one_of(column, st.sampled_from("abc").map(ex.Literal))
    return st.one_of(
        st.builds(lambda op, a, b: ex.Binary(op, a, b), st.sampled_from(["<", ">=", ">"]),
                  column, ordered),
        st.builds(lambda a, lo, hi: ex.Between(a, lo, hi), column, ordered, ordered),
        st.builds(lambda a, b: ex.Binary("=", a, b), one, one),
        st.builds(lambda a, v: ex.Binary("!=", a, ex.Literal(v)), one, st.sampled_from("Ab")),
        st.builds(lambda a, q: ex.Binary("=", a, ex.Column("type", q)), one, whose))


def classifier_navigations(names: list[str]) -> st.SearchStrategy[ex.Expr]:
    """CLASSIFIER() and CLASSIFIER(v) of any variable, of rows of the running match: FIRST/LAST
    at offsets 0-3, PREV/NEXT at offsets 1-3 (also around FIRST/LAST)."""
    cls = ex.Call("CLASSIFIER")
    of = st.one_of(st.just(cls), st.sampled_from(names).map(
        lambda q: ex.Call("CLASSIFIER", (ex.Column(q),)))) if names else st.just(cls)

    def pick(fn: str, c: ex.Expr, k: int) -> ex.Expr:
        return ex.Call(fn, (c, ex.Literal(k)))

    picked = st.builds(pick, st.sampled_from(["FIRST", "LAST"]), of, st.integers(0, 3))
    moved = st.builds(lambda fn, k, inner: ex.Call(fn, (inner, ex.Literal(k))),
                      st.sampled_from(["PREV", "NEXT"]), st.integers(1, 3),
                      st.one_of(of, st.builds(pick, st.sampled_from(["FIRST", "LAST"]),
                                              of, st.integers(0, 2))))
    return st.one_of(of, picked, moved)


@st.composite
def sql_specs(draw) -> pm.PatternSpec:
    pat = draw(sql_patterns())
    if draw(st.integers(0, 3)) == 0:  # a quarter: a quantified group that can match zero rows
        pat = draw(nullable_groups())
    elif draw(st.integers(0, 2)) == 0:  # a third of the rest (a quarter) can match zero rows
        var = st.sampled_from(VARS).map(pm.Var)
        optional = st.builds(lambda b, hi, g: pm.Repeat(b, 0, hi, g),
                             st.one_of(var, st.lists(var, min_size=2, max_size=2).map(
                                 lambda xs: pm.Seq(tuple(xs)))),
                             st.sampled_from([None, 1, 2]), st.booleans())
        pat = draw(st.one_of(optional, st.just(pm.Seq(())),
                             st.lists(optional, min_size=2, max_size=2).map(
                                 lambda xs: pm.Seq(tuple(xs))),
                             st.tuples(optional, st.sampled_from(VARS)).map(
                                 lambda p: pm.Alt((p[0], pm.Var(p[1]))))))
    ends = draw(st.sampled_from(["", "", "^", "$", "^$"]))  # anchor a third of the patterns
    if ends:
        pat = pm.Seq(((pm.Anchor(True),) if "^" in ends else ()) + (pat,)
                     + ((pm.Anchor(False),) if "$" in ends else ()))
    try:
        build_automaton(pat, allow_empty=True)
    except QueryError:
        assume(False)
    used = pat.variables()
    n_subsets = draw(st.integers(0, 2)) if used else 0
    subsets = tuple(pm.Subset(f"U{i}", tuple(draw(st.lists(st.sampled_from(used), min_size=1,
                                                           max_size=3, unique=True))))
                    for i in range(n_subsets))
    names = used + [u.name for u in subsets]
    # half of the variables always true, so that long patterns still find matches
    defines = tuple(pm.VarDef(v, draw(st.one_of(st.none(), conditions(v, names, True),
                                                expression_aggregates(v, names),
                                                navigations(v, names))))
                    for v in used)
    window = draw(st.one_of(st.none(), st.integers(0, 5)))
    part = draw(st.sampled_from([(), ("k",)]))
    skips = [pm.AfterMatchSkip(pm.SkipKind.PAST_LAST_ROW),
             pm.AfterMatchSkip(pm.SkipKind.TO_NEXT_ROW)]
    if names:
        skips += [pm.AfterMatchSkip(pm.SkipKind.TO_LAST, draw(st.sampled_from(names))),
                  pm.AfterMatchSkip(pm.SkipKind.TO_FIRST, draw(st.sampled_from(names)))]
    skip = draw(st.sampled_from(skips))
    show_empty = draw(st.sampled_from([True, True, False]))
    unmatched = not pat_excludes(pat) and draw(st.booleans())
    return pm.PatternSpec(pat, defines, window, pm.Strategy.CONTIGUOUS, pm.Semantics.SQL, part,
                          rows_per_match=pm.RowsPerMatch.ALL, after_match_skip=skip,
                          subsets=subsets, show_empty=show_empty, unmatched_rows=unmatched)


def pat_excludes(pat: pm.PatternNode) -> bool:
    return any(isinstance(n, pm.Exclude) for n in pat.walk())


def _per_partition(ms: list) -> dict:
    d: dict = {}
    for m in ms:
        d.setdefault(m[0], []).append(m)
    return d


SUPPRESS = [HealthCheck.too_slow, HealthCheck.filter_too_much]


@settings(max_examples=500, deadline=None, suppress_health_check=SUPPRESS)
@given(sql_specs(), streams(), st.integers(1, 4))
def test_sql2016_constructs_match_the_oracle(spec: pm.PatternSpec, table: pa.Table,
                                             batch: int) -> None:
    _compare(spec, table, batch)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, suppress_health_check=SUPPRESS)
@given(sql_specs(), streams(11), st.integers(1, 5))
def test_sql2016_constructs_match_the_oracle_ten_thousand(spec: pm.PatternSpec,
                                                          table: pa.Table, batch: int) -> None:
    _compare(spec, table, batch)


@st.composite
def zero_row_group_specs(draw) -> pm.PatternSpec:
    """Quantified groups that can match zero rows under conditions that only sort rows by type:
    each variable holds on one or two of the three types, so rows fit several variables and the
    preference order alone decides between the ways of matching."""
    pat = draw(nullable_groups(3))
    types = st.lists(st.sampled_from("abc"), min_size=1, max_size=2, unique=True)
    defines = tuple(pm.VarDef(v, ex.InList(ex.Column("type"), tuple(ex.Literal(c)
                                                                   for c in draw(types))))
                    for v in pat.variables())
    return pm.PatternSpec(pat, defines, None, pm.Strategy.CONTIGUOUS, pm.Semantics.SQL,
                          rows_per_match=pm.RowsPerMatch.ALL)


@settings(max_examples=300, deadline=None, suppress_health_check=SUPPRESS)
@given(zero_row_group_specs(), streams(), st.integers(1, 4))
def test_zero_row_groups_match_the_oracle(spec: pm.PatternSpec, table: pa.Table,
                                          batch: int) -> None:
    _compare(spec, table, batch)


# --------------------------------------------------------------------------- examples
def _rows(query: str, table: pa.Table) -> list[dict]:
    op = mr.bind(mr.parse(query), table.schema, None)
    op.push(table.to_batches()[0])
    op.flush()
    return op.results().to_pylist()


def _prices(values: list[float], keys: list[int] | None = None) -> pa.Table:
    n = len(values)
    return pa.table({"t": pa.array(range(n), pa.int64()), "seq": pa.array(range(n), pa.int64()),
                     "price": pa.array(values, pa.float64()),
                     "k": pa.array(keys or [0] * n, pa.int64())})


def test_anchors_bind_the_partition_ends() -> None:
    table = _prices([5, 4, 3, 6, 2, 1, 7], [0, 0, 0, 0, 1, 1, 1])
    q = ("SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k MEASURES FIRST(A.seq) AS a, "
         "LAST(B.seq) AS b PATTERN (^ A B+) DEFINE B AS price < PREV(price))")
    assert [(r["k"], r["a"], r["b"]) for r in _rows(q, table)] == [(0, 0, 2), (1, 4, 5)]
    q = ("SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k MEASURES FIRST(A.seq) AS a "
         "PATTERN (A $) DEFINE A AS price > 5)")
    assert [(r["k"], r["a"]) for r in _rows(q, table)] == [(0, 3), (1, 6)]


def test_permute_prefers_the_lexicographic_order() -> None:
    # both A B and B A fit rows 0-1; PERMUTE(A, B) takes A B, PERMUTE(B, A) takes B A
    table = _prices([1, 1, 1])
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
         "PATTERN (PERMUTE({}) ) DEFINE A AS price = 1, B AS price = 1)")
    assert [r["c"] for r in _rows(q.format("A, B"), table)] == ["A", "B"]
    assert [r["c"] for r in _rows(q.format("B, A"), table)] == ["B", "A"]


def test_exclusion_hides_rows_but_keeps_them_in_measures() -> None:
    table = _prices([5, 4, 3, 6, 7])
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES COUNT(*) AS n, CLASSIFIER() AS c "
         "ALL ROWS PER MATCH PATTERN (A {- B+ -} C+) "
         "DEFINE B AS price < PREV(price), C AS price > PREV(price))")
    rows = _rows(q, table)
    assert [(r["seq"], r["c"], r["n"]) for r in rows] == [(0, "A", 1), (3, "C", 4), (4, "C", 5)]


def test_parse_errors_name_the_position() -> None:
    with pytest.raises(QueryError, match="PERMUTE of 9 items"):
        build_automaton(mr.parse(
            "SELECT * FROM s MATCH_RECOGNIZE (PATTERN (PERMUTE(A, B, C, D, E, F, G, H, I)) "
            "DEFINE A AS TRUE)").spec.pattern)
    from replaydb.errors import ParseError
    with pytest.raises(ParseError, match="expected"):
        mr.parse("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A {- B) DEFINE A AS TRUE)")


def test_subset_in_measures_define_and_skip() -> None:
    # the V shape of orders: a fall, then a rise past the start; U = (C, D) is the rise
    table = _prices([10, 8, 6, 7, 9, 12, 11, 5, 4, 6])
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES A.price AS start, LAST(B.price) AS bottom, "
         "LAST(U.price) AS top, COUNT(U.*) AS rising, FIRST(U.seq) AS turn "
         "PATTERN (A B+ C+ D+) SUBSET U = (C, D) "
         "DEFINE B AS price < PREV(price), C AS price > PREV(price) AND price <= A.price, "
         "D AS price > PREV(price))")
    rows = _rows(q, table)
    assert [(r["start"], r["bottom"], r["top"], r["rising"], r["turn"]) for r in rows] == [
        (10.0, 6.0, 12.0, 3, 3)]
    # a union variable in DEFINE: the current row counts when it is one of U's variables
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES COUNT(*) AS n PATTERN (A (B | C)+) "
         "SUBSET U = (B, C) DEFINE B AS COUNT(U.*) <= 2, C AS COUNT(U.*) <= 2)")
    assert [r["n"] for r in _rows(q, table)] == [3, 3, 3]
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES FIRST(A.seq) AS a AFTER MATCH SKIP TO LAST U "
         "PATTERN (A (B | C){2}) SUBSET U = (A, B) DEFINE C AS price > 100)")
    assert [r["a"] for r in _rows(q, table)] == [0, 2, 4, 6]  # the last B of each match


def test_subset_errors() -> None:
    schema = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("price", pa.float64())])
    for text, message in [
            ("PATTERN (A B) SUBSET A = (B)", "union variable 'A' is already a variable"),
            ("PATTERN (A B) SUBSET U = (A, Z)", "SUBSET U names 'Z', not a variable"),
            ("PATTERN (A B) SUBSET U = (A), U = (B)", "union variable 'U' is already"),
            ("MEASURES W.price AS w PATTERN (A B) SUBSET U = (A)", "unknown pattern variable 'W'")]:
        with pytest.raises(QueryError, match=message):
            mr.bind(mr.parse(f"SELECT * FROM s MATCH_RECOGNIZE ({text} DEFINE A AS TRUE)"),
                    schema, None)


def test_classifier_of_a_variable() -> None:
    # A (B | C)+ D: CLASSIFIER(U) is the variable of the last row bound to B or C
    table = _prices([1, 5, 2, 6, 9, 1, 3])
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES CLASSIFIER(U) AS last_u, "
         "FIRST(CLASSIFIER(U)) AS first_u, CLASSIFIER(D) AS d, CLASSIFIER(A) AS a, "
         "RUNNING CLASSIFIER(U) AS running_u, CLASSIFIER() AS c "
         "ALL ROWS PER MATCH PATTERN (A (B | C)+ D) SUBSET U = (B, C) "
         "DEFINE A AS price < 2, B AS price > 4, C AS price <= 4 AND CLASSIFIER(U) = 'C', "
         "D AS price > 8)")
    rows = [(r["c"], r["running_u"], r["last_u"], r["first_u"], r["d"], r["a"])
            for r in _rows(q, table)]
    assert rows == [("A", None, None, None, None, "A"), ("B", "B", "B", "B", None, "A"),
                    ("C", "C", "C", "B", None, "A"), ("B", "B", "B", "B", None, "A"),
                    ("D", "B", "B", "B", "D", "A")]
    # CLASSIFIER(v) of another variable in DEFINE: the variable of v's last row (NULL if none)
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
         "PATTERN (A? B+) DEFINE A AS price < 2, B AS CLASSIFIER(A) = 'A')")
    assert [r["c"] for r in _rows(q, table)] == ["A", "B", "B", "B", "B", "B", "B"]
    # with B AS CLASSIFIER(A) IS NULL the preferred A? takes no row: every row is a B
    assert [r["c"] for r in _rows(q.replace("= 'A'", "IS NULL"), table)] == ["B"] * 7
    with pytest.raises(QueryError, match="NEXT of CLASSIFIER.A. at these offsets in a "
                                         "condition keeps 40401 state slots"):
        _rows("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A B) DEFINE B AS "
              "NEXT(LAST(CLASSIFIER(A), 200), 200) = 'A')", table)


def test_navigation_from_a_variables_row_in_define() -> None:
    # (A | B)+ C on a b b a c: A's rows 0 and 3, B's rows 1 and 2, C row 4 (the current one).
    # Every fact below holds there; a wrong one (or NULL) would make C fail and leave no match.
    facts = ["PREV(CLASSIFIER(B)) = 'B'", "PREV(CLASSIFIER(B), 2) = 'A'",
             "PREV(CLASSIFIER(B), 3) IS NULL", "NEXT(CLASSIFIER(B)) = 'A'",
             "NEXT(CLASSIFIER(B), 2) = 'C'", "NEXT(CLASSIFIER(B), 3) IS NULL",
             "NEXT(FIRST(CLASSIFIER(B))) = 'B'", "PREV(FIRST(CLASSIFIER(A))) IS NULL",
             "NEXT(FIRST(CLASSIFIER(A)), 3) = 'A'", "PREV(FIRST(CLASSIFIER(B), 1), 2) = 'A'",
             "NEXT(LAST(CLASSIFIER(B), 1)) = 'B'", "NEXT(LAST(CLASSIFIER(B), 1), 3) = 'C'",
             "PREV(LAST(CLASSIFIER(A), 1)) IS NULL", "PREV(LAST(CLASSIFIER(A))) = 'B'",
             "NEXT(LAST(CLASSIFIER(A), 2)) IS NULL", "PREV(CLASSIFIER(C)) = 'A'"]
    defines = "A AS price = 1, B AS price = 2, C AS price = 3 AND "
    for fact in facts:
        assert _labels("(A | B)+ C", [1, 2, 2, 1, 3], defines + fact) == [
            (1, 0, "A"), (1, 1, "B"), (1, 2, "B"), (1, 3, "A"), (1, 4, "C")], fact
    for wrong in ("NEXT(CLASSIFIER(B), 2) = 'B'", "PREV(LAST(CLASSIFIER(A), 1)) = 'A'",
                  "NEXT(FIRST(CLASSIFIER(B)), 4) IS NOT NULL"):
        assert _labels("(A | B)+ C", [1, 2, 2, 1, 3], defines + wrong) == [], wrong
    # the variable's own rows: the current row is B's last; its first B row once bound
    own = ("A AS price = 1, B AS price = 2 AND PREV(FIRST(CLASSIFIER(B))) = 'A' "
           "AND NEXT(LAST(CLASSIFIER(B), 1), 1) = 'B' OR price = 2 AND COUNT(B.*) = 1, "
           "C AS price = 3")
    assert _labels("A B+ C", [1, 2, 2, 2, 3], own) == [
        (1, 0, "A"), (1, 1, "B"), (1, 2, "B"), (1, 3, "B"), (1, 4, "C")]


def test_strings_ordered_across_rows_keep_their_order_as_keys_move() -> None:
    """``B.s > A.s`` across rows compares order keys; strings that keep landing in one gap
    (each just below "b") force the keys to be re-spread while rows are buffered, and the
    buffered keys are rewritten: the operator still equals the oracle at every batch size."""
    import numpy as np

    from replaydb.operators.pattern.strings import OrderKeys

    keys = OrderKeys()
    squeezed = ["a", "b"] + ["a" + "z" * i for i in range(1, 80)]  # each just below "b"
    moved_once = False
    for word in squeezed:
        _, moved = keys.keys(np.array([word], dtype=object))
        moved_once |= moved is not None
    assert moved_once
    assert sorted(keys.strings) == keys.strings
    assert all(x < y for x, y in zip(keys.values, keys.values[1:]))
    names = ["b", "a"] + ["a" + "z" * i for i in range(1, 80)] + [None, "c", "az"]
    table = pa.table({"t": list(range(len(names))), "seq": list(range(len(names))),
                      "s": pa.array(names, pa.string())})
    q = ("SELECT * FROM s MATCH_RECOGNIZE (ALL ROWS PER MATCH PATTERN (A B+) "
         "DEFINE B AS B.s > PREV(B.s) AND B.s >= A.s OR B.s > 'b')")
    spec = mr.parse(q).spec
    expected = oracle_sql.sql_matches(spec, table)
    assert max(len(m[1]) for m in expected) > 60  # one match spans the re-spread
    for batch in (1, 4, 1000):
        assert oracle.run_operator(spec, table, batch_rows=batch) == expected, batch


# --------------------------------------------------------------------------- filtered streams
WHERES = [ex.Binary("=", ex.Column("type"), ex.Literal("a")),
          ex.Binary(">", ex.Column("x"), ex.Literal(1)),
          ex.InList(ex.Column("type"), (ex.Literal("a"), ex.Literal("b"))),
          ex.Binary("or", ex.IsNull(ex.Column("x")), ex.Binary("<=", ex.Column("x"),
                                                                ex.Literal(2)))]


def _by_seq(ms: list, table: pa.Table) -> dict:
    seqs = table.column("seq").to_pylist()
    return _per_partition([(k, tuple(seqs[r] for r in rows), labels) for k, rows, labels in ms])


@settings(max_examples=300, deadline=None, suppress_health_check=SUPPRESS)
@given(sql_specs(), streams(), st.sampled_from(WHERES), st.integers(1, 4))
def test_where_of_a_subquery_filters_the_rows(spec: pm.PatternSpec, table: pa.Table,
                                               where: ex.Expr, batch: int) -> None:
    """FROM (SELECT * FROM s WHERE w) MATCH_RECOGNIZE: the operator on every row equals the
    oracle on the rows passing ``w`` alone (rows failing it are no rows: PREV, contiguity and
    anchors step over them)."""
    mask = ex.compile_predicate(where)(ex.ColumnsEnv(
        {c: table.column(c).to_numpy(zero_copy_only=False) for c in ("type", "x")}))
    kept = table.filter(pa.array(mask, pa.bool_()))
    try:
        expected = oracle_sql.sql_matches(spec, kept)
    except OperatorError:
        with pytest.raises(OperatorError):
            oracle.run_operator(replace(spec, where=where), table, batch_rows=batch)
        return
    got = oracle.run_operator(replace(spec, where=where), table, batch_rows=batch)
    assert _by_seq(got, table) == _by_seq(expected, kept), (spec.to_text(), where)


def test_subquery_columns_and_errors() -> None:
    table = _prices([5, 4, 3, 6, 7], [0, 1, 0, 0, 1])
    q = ("SELECT * FROM (SELECT price FROM s WHERE k = 0) AS f MATCH_RECOGNIZE ("
         "MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A B) "
         "DEFINE B AS price > PREV(price))")
    rows = _rows(q, table)
    assert [(r["seq"], r["price"], r["c"]) for r in rows] == [(2, 3.0, "A"), (3, 6.0, "B")]
    assert set(rows[0]) == {"match_id", "match_number", "t", "seq", "price", "c"}
    with pytest.raises(QueryError, match="unknown column 'k'"):
        _rows("SELECT * FROM (SELECT price FROM s) MATCH_RECOGNIZE (PATTERN (A) "
              "DEFINE A AS k = 0)", table)
    with pytest.raises(QueryError, match="may use only the row's own columns"):
        _rows("SELECT * FROM (SELECT * FROM s WHERE price > PREV(price)) MATCH_RECOGNIZE "
              "(PATTERN (A) DEFINE A AS TRUE)", table)


def test_next_in_define_reads_rows_ahead_per_partition() -> None:
    # partition 0: seq 0 (5), 1 (4), 3 (6), 6 (7), 7 (8); partition 1: 2 (3), 4 (2), 5 (1), 8 (9)
    # A: the next row of the partition is dearer (the last row has none: NULL, false)
    table = _prices([5, 4, 3, 6, 2, 1, 7, 8, 9], [0, 0, 1, 0, 1, 1, 0, 0, 1])
    q = ("SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k MEASURES FIRST(A.seq) AS a, "
         "LAST(A.seq) AS b AFTER MATCH SKIP PAST LAST ROW PATTERN (A+) "
         "DEFINE A AS NEXT(price) > price)")
    for size in (1, 2, 3, 9):  # rows held back across batch boundaries
        op = mr.bind(mr.parse(q), table.schema, None)
        for b in table.to_batches(max_chunksize=size):
            op.push(b)
        op.flush()
        assert [(r["k"], r["a"], r["b"]) for r in op.results().to_pylist()] == [(0, 1, 6),
                                                                                (1, 5, 5)]
    # NEXT of another variable's last row, two rows on: A at 1 (4), B while B < NEXT(A.price, 2)
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES FIRST(A.seq) AS a, LAST(B.seq) AS b "
         "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) "
         "DEFINE A AS price = 4, B AS B.price < NEXT(A.price, 2))")
    assert [(r["a"], r["b"]) for r in _rows(q, table)] == [(1, 2)]  # row 3 (6) is not < 6


def test_first_and_last_offsets_in_define() -> None:
    # B extends while its price differs from the row two B rows back (LAST(B.price, 2)) and the
    # second B row (FIRST(B.price, 1)) is not above 5
    table = _prices([9, 1, 2, 1, 3, 4, 3, 7, 6])
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES FIRST(B.seq) AS f, LAST(B.seq) AS l "
         "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) DEFINE A AS price = 9, "
         "B AS (LAST(B.price, 2) IS NULL OR B.price != LAST(B.price, 2)) "
         "AND (FIRST(B.price, 1) IS NULL OR FIRST(B.price, 1) <= 5))")
    # B rows 1 (1), 2 (2), then row 3 (1) equals row 1 two B rows back: B ends at 2
    assert [(r["f"], r["l"]) for r in _rows(q, table)] == [(1, 2)]
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES LAST(B.seq) AS l "
         "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) DEFINE A AS price = 9, "
         "B AS FIRST(price, 3) IS NULL OR FIRST(price, 3) < 4)")
    # the match's row 3 is seq 3 (1): rows 1-2 pass while it is unbound, then FIRST(price, 3)
    # is 1 from row 3 on, so B runs to the end
    assert [r["l"] for r in _rows(q, table)] == [8]
    with pytest.raises(QueryError, match=r"LAST\(\.\.\., 4096\) in a condition: offsets up to"):
        _rows(q.replace("FIRST(price, 3) <", "LAST(price, 4096) <"), table)
    # FIRST at any offset: one slot counts the rows up to it. Prices 1, 2, 3, ... after A: B's
    # row 1000 (0-based, price 1001) is its own FIRST(B.price, 1000); B goes on while the price
    # stays below 1004, so the match ends at the row of price 1003
    long = _prices([9.0] + [float(p) for p in range(1, 1501)])
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES LAST(B.seq) AS l, FIRST(B.seq, 1000) AS f "
         "PATTERN (A B+) DEFINE A AS price = 9, "
         "B AS FIRST(B.price, 1000) IS NULL OR price < FIRST(B.price, 1000) + 3)")
    assert [(r["f"], r["l"]) for r in _rows(q, long)] == [(1001, 1003)]
    # the match's row 100,000 is never bound: NULL, so B's rows stop at the 1000th
    q = q.replace("FIRST(B.price, 1000) + 3", "FIRST(price, 100000) + 3")
    assert [(r["f"], r["l"]) for r in _rows(q, long)] == [(None, 1000)]


def test_count_distinct_in_measures() -> None:
    # A at row 0, B rows 1-7; prices 4 4 NULL 5 6 4 1 and symbols b a c NULL b a z on B's rows
    table = pa.table({"t": list(range(8)), "seq": list(range(8)),
                      "price": [5.0, 4, 4, None, 5, 6, 4, 1],
                      "sym": ["a", "b", "a", "c", None, "b", "a", "z"]})
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES COUNT(DISTINCT B.price) AS dp, "
         "COUNT(DISTINCT sym) AS ds, COUNT(DISTINCT B.price * 0) AS dz, "
         "FINAL COUNT(DISTINCT B.sym) AS fs ALL ROWS PER MATCH PATTERN (A B+) "
         "DEFINE A AS price = 5, B AS price IS NULL OR price < 7)")
    got = [(r["dp"], r["ds"], r["dz"], r["fs"]) for r in _rows(q, table)]
    assert got == [(0, 1, 0, 4), (1, 2, 1, 4), (1, 2, 1, 4), (1, 3, 1, 4), (2, 3, 1, 4),
                   (3, 3, 1, 4), (3, 3, 1, 4), (4, 4, 1, 4)]
    assert ex.to_text(mr.parse(q).spec.measures[0].expr) == "COUNT(DISTINCT B.price)"
    for bad, message in [("SUM(DISTINCT B.price)", "only COUNT takes DISTINCT"),
                         ("COUNT(DISTINCT *)", r"COUNT\(DISTINCT \*\) is not allowed")]:
        with pytest.raises(QueryError, match=message):
            _rows(q.replace("COUNT(DISTINCT B.price)", bad), table)
    with pytest.raises(QueryError, match=r"COUNT\(DISTINCT \.\.\.\) in a condition") as e:
        _rows("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A B+) "
              "DEFINE B AS COUNT(DISTINCT B.sym) < 3)", table)
    assert "MEASURES" in (e.value.hint or "")


def test_aggregate_arguments_read_alike_in_define_and_measures() -> None:
    # COUNT over a boolean expression counts its non-NULL values in both clauses; a numeric
    # aggregate over it is the same error in both
    table = _prices([5, 4, 6, 7, 3])
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES COUNT(B.price > 4) AS c "
         "PATTERN (A B+) DEFINE A AS price = 5, B AS COUNT(B.price > 4) <= 3)")
    assert [r["c"] for r in _rows(q, table)] == [3]
    for clause in ("MEASURES SUM(B.price > 4) AS c PATTERN (A B+) DEFINE A AS price = 5",
                   "PATTERN (A B+) DEFINE A AS price = 5, B AS SUM(B.price > 4) > 0"):
        with pytest.raises(QueryError, match="aggregate over the non-numeric expression"):
            _rows(f"SELECT * FROM s MATCH_RECOGNIZE ({clause})", table)


def test_count_of_a_string_column_in_measures() -> None:
    table = pa.table({"t": list(range(5)), "seq": list(range(5)),
                      "price": [5.0, 4, 4, 6, 1], "sym": ["a", None, "b", "b", "c"]})
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES COUNT(B.sym) AS n, "
         "COUNT(DISTINCT B.sym) AS d PATTERN (A B+) DEFINE A AS price = 5, B AS price < 7)")
    assert [(r["n"], r["d"]) for r in _rows(q, table)] == [(3, 2)]


# --------------------------------------------------------------------------- zero-row iterations
def _labels(pattern: str, prices: list[float], defines: str) -> list[tuple[int, int, str | None]]:
    """(match number, seq, variable) of every output row, ALL ROWS PER MATCH (an empty match:
    its row with no variable)."""
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES MATCH_NUMBER() AS n, CLASSIFIER() AS c "
         f"ALL ROWS PER MATCH PATTERN ({pattern}) DEFINE {defines})")
    return [(r["n"], r["seq"], r["c"]) for r in _rows(q, _prices(prices))]


AB = "A AS price = 1, B AS price = 2"


def test_a_group_that_can_match_zero_rows_repeats_while_it_binds_rows() -> None:
    # A (B?)+ on a b b a a: row 0 takes both b's; the third iteration would bind no row, which
    # is no way to match after an iteration that bound one, so the group ends. Rows 3 and 4: the
    # first iteration binds no row (no b follows) and ends the group: A alone.
    got = _labels("A (B?)+", [1, 2, 2, 1, 1], AB)
    assert got == [(1, 0, "A"), (1, 1, "B"), (1, 2, "B"), (2, 3, "A"), (3, 4, "A")]


def test_an_empty_later_iteration_is_no_way_to_match() -> None:
    # (A | B??)+ on a b: after A the body's order is A, (nothing), B; an empty second iteration
    # would end the group at row 1 (the match A), but an iteration after one that bound a row
    # must bind one, so B is tried and taken: one match, A B.
    assert _labels("(A | B??)+", [1, 2], AB) == [(1, 0, "A"), (1, 1, "B")]


def test_an_empty_first_iteration_ends_the_group_where_the_body_prefers_it() -> None:
    # (A | B??)+ on b a: at row 0 A fails and the body's next preference is to bind nothing:
    # the first iteration is empty and ends the group, an empty match (B?? never gets row 0).
    # Row 1: A, then no more rows.
    assert _labels("(A | B??)+", [2, 1], AB) == [(1, 0, None), (2, 1, "A")]


def test_empty_iterations_of_a_bounded_group_are_ordinary_iterations() -> None:
    # (A?? | B){0,2} C: a bounded group is its copies written out, so an empty first copy may be
    # followed by a second that binds a row. Preference: (none, none) C, (none, A) C,
    # (none, B) C, ... before (A, ...). Row 0 is both A and B (price 1 < 5), row 1 is C only after
    # a B (COUNT(B.*) = 1), row 2 is C by its price. (none, none) C fails at row 0, (none, A) C
    # fails at row 1 (no B), (none, B) C matches rows 0-1; then row 2 is C alone. A rule that
    # ended the group at its first empty iteration would try (A, A) C before (B) C and match
    # rows 0-2 as A A C.
    got = _labels("(A?? | B){0,2} C", [1, 3, 9],
                  "A AS price < 5, B AS price < 5, C AS COUNT(B.*) = 1 OR price > 8")
    assert got == [(1, 0, "B"), (1, 1, "C"), (2, 2, "C")]


def test_groups_of_anchors_and_nested_groups() -> None:
    # A ($)+: an iteration of $ binds no row and holds only after the partition's last row, so
    # the pattern is A $: the last row. (^ A?)+ B at the partition's start: the first iteration
    # passes ^ and takes A, a second cannot pass ^; then B.
    assert _labels("A ($)+", [1, 1, 1], "A AS TRUE") == [(1, 2, "A")]
    assert _labels("(^ A?)+ B", [1, 2, 2], AB) == [(1, 0, "A"), (1, 1, "B")]
    # (A* B*)* C on a b a c: iterations "a b", "a", then an empty one, which ends nothing: C.
    assert _labels("(A* B*)* C", [1, 2, 1, 3], AB + ", C AS price = 3") == [
        (1, 0, "A"), (1, 1, "B"), (1, 2, "A"), (1, 3, "C")]


def test_an_iteration_may_start_by_skipping_to_where_the_last_ended() -> None:
    # (A?? B??)+ C on rows 1 (A), 4 (A, B and C), 3 (C). The first iteration: binding no row
    # is followed by C, which fails at row 0; B fails; A takes row 0 (B?? then binds nothing).
    # The second iteration's ways: none (no way to match after a row), B alone, A, A B. B takes
    # row 1; a third iteration finds nothing at row 2, C takes it: A B C. Trino's matcher drops
    # the second iteration's "B alone" (it passes B?? again without a row between) and answers
    # A A C (docs/decisions.md).
    got = _labels("(A?? B??)+ C", [1, 4, 3],
                  "A AS price = 1 OR price = 4, B AS price = 4, C AS price = 4 OR price = 3")
    assert got == [(1, 0, "A"), (1, 1, "B"), (1, 2, "C")]
