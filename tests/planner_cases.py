"""Random streams, random MATCH_RECOGNIZE and SASE+ queries, and the check that every plan
strategy returns exactly what full replay returns - shared by the planner's property tests.

Streams are real stores on disk with real LSM indexes (``create_index``) on a random subset of
the columns, with small leaves and fan-out so that the TAB+-tree has several levels.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import assume
from hypothesis import strategies as st

import replaydb
from replaydb.errors import OperatorError, QueryError, ReplayDBError
from replaydb.indexes.manage import create_index
from replaydb.operators import expr as ex
from replaydb.operators.pattern.model import Alt, PatternNode, Repeat, Seq, Var
from replaydb.planner.query import QueryOptions, execute, plan_query
from replaydb.store.schema import Attribute, StreamSchema

VARS = ["A", "B", "C", "D"]
STRATEGIES: list[tuple[str, dict[str, Any]]] = [
    ("auto", {}),
    ("all", {}),
    ("greedy", {}),
    ("budget", {}),
    ("optimal", {}),
    ("cpm", {}),
    ("optimal", {"cpm": False}),
    ("all", {"cpm_level": 0}),
]


# --------------------------------------------------------------------------- streams
@st.composite
def streams(draw, max_len: int = 40) -> dict[str, Any]:
    n = draw(st.integers(0, max_len))
    steps = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    t = np.cumsum(steps).astype(np.int64) + draw(st.integers(0, 5))
    x = draw(st.lists(st.one_of(st.integers(0, 6).map(float), st.none()), min_size=n,
                      max_size=n))
    k = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    types = draw(st.lists(st.sampled_from("abc"), min_size=n, max_size=n))
    table = pa.table({"t": pa.array(t, pa.int64()), "x": pa.array(x, pa.float64()),
                      "k": pa.array(k, pa.int64()), "type": pa.array(types, pa.string())})
    indexed = draw(st.lists(st.sampled_from(["k", "type"]), unique=True, max_size=2))
    if draw(st.integers(0, 6)) > 0:  # x carries most range conditions: usually indexed
        indexed.insert(0, "x")
    return {"table": table, "indexed": indexed, "leaf": draw(st.integers(2, 6)),
            "fanout": draw(st.integers(2, 4))}


@contextmanager
def stream_store(s: dict[str, Any]) -> Iterator[Any]:
    with tempfile.TemporaryDirectory() as d:
        store = replaydb.open(f"{d}/store", create=True)
        store.create_stream("s", StreamSchema(
            (Attribute("x", "float64"), Attribute("k", "int64"), Attribute("type", "string")),
            time_unit="s", leaf_capacity=s["leaf"], fanout=s["fanout"]))
        if s["table"].num_rows:
            store.append("s", s["table"])
        for c in s["indexed"]:
            create_index(store, "s", c)
        yield store


# --------------------------------------------------------------------------- MATCH_RECOGNIZE
def _patterns(depth: int = 2) -> st.SearchStrategy[PatternNode]:
    var = st.sampled_from(VARS).map(Var)
    if depth == 0:
        return var
    sub = _patterns(depth - 1)
    quant = st.sampled_from([(0, None), (1, None), (0, 1), (1, 2), (2, 2), (2, None)])
    return st.one_of(
        var, var,
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: Seq(tuple(xs))),
        st.lists(sub, min_size=2, max_size=2).map(lambda xs: Alt(tuple(xs))),
        st.builds(lambda b, q, g: Repeat(b, q[0], q[1], g), sub, quant, st.booleans()),
    )


def _range_atoms(x: ex.Expr) -> st.SearchStrategy[ex.Expr]:
    return st.one_of(
        st.integers(0, 6).map(lambda c: ex.Binary(">", x, ex.Literal(c))),
        st.integers(0, 6).map(lambda c: ex.Binary("<=", x, ex.Literal(c))),
        st.integers(0, 6).map(lambda c: ex.Binary(">=", ex.Literal(c), x)),
        st.integers(0, 6).map(lambda c: ex.Binary("=", x, ex.Literal(float(c)))),
        st.integers(0, 6).map(lambda c: ex.Binary("!=", x, ex.Literal(c))),
        st.tuples(st.integers(0, 4), st.integers(1, 6)).map(
            lambda p: ex.Between(x, ex.Literal(p[0]), ex.Literal(p[1]))),
        st.lists(st.integers(0, 6), min_size=1, max_size=3).map(
            lambda vs: ex.InList(x, tuple(ex.Literal(v) for v in vs))),
    )


def mr_condition(var: str, used: list[str]) -> st.SearchStrategy[ex.Expr | None]:
    x = st.sampled_from([ex.Column("x"), ex.Column("x", var)])
    others = [v for v in used if v != var] or [var]
    other = st.sampled_from(others)
    atoms = st.one_of(
        x.flatmap(_range_atoms), x.flatmap(_range_atoms), x.flatmap(_range_atoms),
        st.sampled_from("abc").map(lambda c: ex.Binary("=", ex.Column("type"), ex.Literal(c))),
        st.just(ex.InList(ex.Column("type", var), (ex.Literal("a"), ex.Literal("b")))),
        st.integers(0, 1).map(lambda c: ex.Binary("=", ex.Column("k"), ex.Literal(c))),
        st.just(ex.Binary(">", ex.Column("x"), ex.Call("PREV", (ex.Column("x"),)))),
        st.just(ex.Binary(">=", ex.Column("x"), ex.Call("PREV", (ex.Column("x"), ex.Literal(2))))),
        other.map(lambda o: ex.Binary(">=", ex.Column("x"), ex.Column("x", o))),
        st.just(ex.Binary(">=", ex.Column("x"), ex.Call("FIRST", (ex.Column("x", var),)))),
        st.integers(1, 3).map(lambda c: ex.Binary("<=", ex.Call("COUNT", (ex.Column("*", var),)),
                                               ex.Literal(c))),
        st.just(ex.Binary(">=", ex.Column("x"), ex.Call("AVG", (ex.Column("x", var),)))),
        st.just(ex.Unary("not", ex.Binary(">", ex.Column("x"), ex.Literal(3)))),
        st.just(ex.IsNull(ex.Column("x"))),
        st.just(ex.Binary("<=", ex.Call("COUNT", (ex.Star(),)), ex.Literal(3))),
    )
    combo = st.one_of(
        atoms, atoms,
        st.tuples(st.sampled_from(["and", "or"]), atoms, atoms).map(
            lambda p: ex.Binary(p[0], p[1], p[2])),
        st.tuples(atoms, atoms, atoms).map(
            lambda p: ex.Binary("and", ex.Binary("and", p[0], p[1]), p[2])))
    return st.one_of(st.none(), combo, combo, combo)


@st.composite
def mr_queries(draw) -> str:
    pat = draw(_patterns())
    used = pat.variables()
    defines = []
    for v in used:
        c = draw(mr_condition(v, used))
        if c is not None:
            defines.append(f"{v} AS {ex.to_text(c)}")
    parts = []
    if draw(st.booleans()):
        parts.append("PARTITION BY k")
    measures = draw(st.sampled_from([
        "", "MEASURES FIRST(x) AS fx, LAST(x) AS lx, COUNT(*) AS n",
        "MEASURES PREV(FIRST(x)) AS px", "MEASURES NEXT(LAST(x), 2) AS nx",
        f"MEASURES SUM({used[0]}.x) AS s, MATCH_NUMBER() AS mn",
    ]))
    if measures:
        parts.append(measures)
    parts.append(draw(st.sampled_from(["", "ONE ROW PER MATCH", "ALL ROWS PER MATCH"])))
    skip = draw(st.sampled_from(["", "AFTER MATCH SKIP PAST LAST ROW",
                                 "AFTER MATCH SKIP TO NEXT ROW",
                                 f"AFTER MATCH SKIP TO FIRST {draw(st.sampled_from(used))}",
                                 f"AFTER MATCH SKIP TO LAST {draw(st.sampled_from(used))}"]))
    parts.append(skip)
    parts.append(f"PATTERN ({pat.to_text()})")
    w = draw(st.one_of(st.none(), st.integers(0, 10)))
    if w is not None:
        parts.append(f"WITHIN {w}")
    if defines:
        parts.append("DEFINE " + ", ".join(defines))
    body = " ".join(p for p in parts if p)
    return f"SELECT * FROM s MATCH_RECOGNIZE ({body})"


# --------------------------------------------------------------------------- SASE+
@st.composite
def sase_queries(draw) -> str:
    n = draw(st.integers(1, 4))
    comps: list[tuple[str, str, str]] = []  # (kind, type, var)
    for i in range(n):
        kind = draw(st.sampled_from(["one", "one", "plus", "star"]))
        comps.append((kind, draw(st.sampled_from(["a", "b", "c", "ANY"])), f"v{i}"))
    if n >= 2 and draw(st.booleans()):
        pos = draw(st.integers(1, n - 1))
        comps.insert(pos, ("neg", draw(st.sampled_from(["a", "b", "c"])), "ng"))
    items = []
    for kind, typ, var in comps:
        if kind == "one":
            items.append(f"{typ} {var}")
        elif kind == "plus":
            items.append(f"{typ}+ {var}[]")
        elif kind == "star":
            items.append(f"{typ}* {var}[]")
        else:
            items.append(f"~({typ} {var})")
    conds: list[str] = []
    positives = [c for c in comps if c[0] != "neg"]
    for kind, _, var in comps:
        if not draw(st.booleans()):
            continue
        ref = f"{var}[i]" if kind in ("plus", "star") else var
        choice = draw(st.integers(0, 7))
        c = draw(st.integers(0, 6))
        if choice == 0:
            conds.append(f"{ref}.x > {c}")
        elif choice == 1:
            conds.append(f"{ref}.x <= {c}")
        elif choice == 2:
            conds.append(f"{ref}.x = {c}")
        elif choice == 3:
            conds.append(f"{ref}.k = {c % 2}")
        elif choice == 4 and kind in ("plus", "star"):
            conds.append(f"{var}[i].x > {var}[i-1].x")
        elif choice == 5 and kind != "neg":
            earlier = [p for p in positives if p[2] < var and p[0] == "one"]
            if earlier:
                conds.append(f"{var if kind == 'one' else ref}.x >= {earlier[0][2]}.x")
        elif choice == 6:
            conds.append(f"{ref}.x >= {c} AND {ref}.x <= {c + 2}")
        elif choice == 7 and kind in ("plus", "star"):
            conds.append(f"avg({var}[..i-1].x) <= {var}[i].x")
    equiv = draw(st.booleans())
    strategy = draw(st.sampled_from(["", "strict_contiguity", "skip_till_next_match",
                                     "skip_till_any_match", "partition_contiguity"]))
    where = []
    if equiv:
        where.append("[k]")
    where += conds
    text = f"PATTERN SEQ({', '.join(items)})"
    if strategy:
        vs = ", ".join(v + ("[]" if k in ("plus", "star") else "") for k, _, v in comps)
        text += f" WHERE {strategy}({vs})"
        if where:
            text += " { " + " AND ".join(where) + " }"
    elif where:
        text += " WHERE " + " AND ".join(where)
    w = draw(st.one_of(st.none(), st.integers(0, 8)))
    if w is not None:
        text += f" WITHIN {w}"
    return text


# --------------------------------------------------------------------------- the check
def _norm(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def rows(table: pa.Table, drop: tuple[str, ...] = ()) -> list[tuple]:
    cols = [c for c in table.column_names if c not in drop]
    data = table.select(cols).to_pylist()
    return [tuple(_norm(r[c]) for c in cols) for r in data]


def check_intervals(plan: Any, store: Any) -> None:
    st = getattr(plan, "pattern_state", None)
    if st is not None:
        if st.rp is not None:
            st.rp._check()
        if st.scope is not None:
            st.scope._check()
    iv = plan.intervals
    if iv is None:
        return
    snap = plan.ctx.snapshots[0]
    tr = snap.t_range
    for a, b in iv:
        assert a < b
        assert tr is not None and tr[0] <= a and b <= tr[1] + 1
    for (_, b0), (a1, _) in zip(iv, iv[1:]):
        assert b0 < a1, iv  # disjoint, not touching (touching ones are merged)


def same_as_full_replay(store: Any, text: str, strategies=STRATEGIES, *,
                        invalid_ok: bool = False) -> int:
    """Run every strategy and compare with full replay; returns the number of matches.

    ``invalid_ok`` (inside hypothesis tests): a query that full replay rejects is skipped
    (``assume``) once the planner is seen to reject it the same way.
    """
    try:
        full_plan = plan_query(store, text, QueryOptions(plan="replay", state_cap=200_000))
        full = execute(full_plan).table
    except (QueryError, OperatorError) as exc:
        if not invalid_ok:
            raise
        # the planner must fail the same way (or the query may be invalid for both)
        for name, extra in strategies[:1]:
            try:
                p = plan_query(store, text, QueryOptions(plan=name, extra=dict(extra),
                                                         state_cap=200_000))
                execute(p)
            except ReplayDBError as exc2:
                assert type(exc2).__name__ == type(exc).__name__ or isinstance(
                    exc2, type(exc)), (text, exc, exc2)
                assume(False)
            raise AssertionError(f"full replay failed ({exc}) but the plan did not: {text}") from exc
    spec = full_plan.physical.operator.config.spec
    sql_partitioned = spec.semantics.value == "sql" and bool(spec.partition_by)
    drop = ("match_id",) if sql_partitioned else ()
    want = rows(full, drop)
    if sql_partitioned:
        want = sorted(want, key=repr)
    groups: dict[Any, Any] = {}
    for name, extra in strategies:
        p = plan_query(store, text, QueryOptions(plan=name, extra=dict(extra),
                                                 state_cap=200_000))
        check_intervals(p, store)
        key = None if p.intervals is None else tuple(p.intervals)
        groups.setdefault(key, (name, extra, p))
    for key, (name, extra, p) in groups.items():
        got = rows(execute(p).table, drop)
        if sql_partitioned:
            got = sorted(got, key=repr)
        assert got == want, (text, name, extra, p.strategy, key, got, want)
    return len(want)


@contextmanager
def xy_store(t: np.ndarray, rng: np.random.Generator, leaf: int, parts: int = 1
             ) -> Iterator[Any]:
    """Stream ``s`` with times ``t``, indexed ``x`` in 0..49 and ``y`` in 0..29 (drawn from
    ``rng``, x then y per append), appended in ``parts`` equal appends (the gaps across files
    count too), leaves of ``leaf`` events."""
    n = int(t.size)
    with tempfile.TemporaryDirectory() as d:
        store = replaydb.open(f"{d}/store", create=True)
        store.create_stream("s", StreamSchema(
            (Attribute("x", "float64"), Attribute("y", "float64")), time_unit="s",
            leaf_capacity=leaf, fanout=4))
        cuts = [n * k // parts for k in range(parts + 1)]
        for a, b in zip(cuts, cuts[1:]):
            store.append("s", pa.table({"t": t[a:b], "x": rng.integers(0, 50, b - a) * 1.0,
                                        "y": rng.integers(0, 30, b - a) * 1.0}))
        for c in ("x", "y"):
            create_index(store, "s", c)
        yield store


def xy_range_query(shape: str, lo: list[int], window: int) -> str:
    """A MATCH_RECOGNIZE query over :func:`xy_store`'s stream: ``shape``'s symbols alternate
    ranges on x (width 14) and y (width 9) from ``lo``; a starred B stays unconditioned."""
    syms = sorted({c for c in shape if c.isalpha()})
    conds = ", ".join(
        f"{s} AS {'x' if i % 2 == 0 else 'y'} >= {lo[i]} AND "
        f"{'x' if i % 2 == 0 else 'y'} <= {lo[i] + (14 if i % 2 == 0 else 9)}"
        for i, s in enumerate(syms) if s != "B" or "B*" not in shape)
    return (f"SELECT * FROM s MATCH_RECOGNIZE (MEASURES FIRST(A.t) AS a_t "
            f"PATTERN ({shape}) WITHIN {window} DEFINE {conds})")
