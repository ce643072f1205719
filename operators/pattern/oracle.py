"""Brute-force reference semantics of sequential patterns, for tests on small inputs.

Independent of the operator's automaton, lowering and compiled loops: patterns are matched
through Brzozowski derivatives of the pattern tree (all-runs semantics) or a backtracking
matcher that tries alternatives in SQL:2016 preferment order (SQL semantics); conditions are
evaluated by a scalar interpreter of the running dialect (:func:`eval_condition`), delegating only
operators and built-in functions to :mod:`replaydb.operators.expr`.

* :func:`all_runs_matches` - every match of the dissertation's / SASE+'s strategies, defined
  declaratively: a labelled subsequence ``r`` of one partition is a match if its labels form a
  word of the pattern, every event satisfies its variable's condition against the prefix before
  it, ``r[-1].t - r[0].t <= window`` and no negated event lies between two consecutive events
  where the negation applies; plus, for *contiguous*, consecutive positions in the partition,
  and for *skip-till-next*, every ``r[i+1]`` is the first event after ``r[i]`` on which the
  prefix ``r[..i]`` has any transition. This is the operational table's fixed point. Valid for
  patterns whose runs are identified by their labels (every automaton option list names
  distinct variables) and, with negation, for flat sequences of distinct variables.
* :func:`replaydb.operators.pattern.oracle_sql.sql_matches` - SQL:2016 MATCH_RECOGNIZE: per partition, attempts at every row in order,
  the first match in preferment order, AFTER MATCH SKIP; a match's rows are those ALL ROWS PER
  MATCH outputs (rows inside an exclusion ``{- -}`` left out, a match with no other row
  omitted). Anchors, PERMUTE and exclusion are read straight from their definitions
  (:func:`_bt`), not from the automaton.

Both return matches as ``(partition key, (row indices...), (variables...))`` with row indices
into the input table. Exponential in the input size: use only on a handful of events.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.operators import expr as ex
from replaydb.operators.pattern import model as pm

Match = tuple[Any, tuple[int, ...], tuple[str | None, ...]]
UNMATCHED = "\x00unmatched"
"""The label of an unmatched row (WITH UNMATCHED ROWS); an empty match has the label None."""

# --------------------------------------------------------------------------- derivatives
_EMPTY = pm.Seq(())          # matches the empty word
_NONE = pm.Alt(())           # matches nothing


def _orders(n: pm.Permute) -> pm.Alt:
    """PERMUTE as the alternation of its orders, lexicographically (all-runs semantics)."""
    return pm.Alt(tuple(pm.Seq(order) for order in permutations(n.items)))


def nullable(n: pm.PatternNode) -> bool:
    if isinstance(n, pm.Permute):
        return nullable(_orders(n))
    if isinstance(n, pm.Var):
        return False
    if isinstance(n, pm.Neg):
        return True
    if isinstance(n, pm.Seq):
        return all(nullable(i) for i in n.items)
    if isinstance(n, pm.Alt):
        return any(nullable(o) for o in n.options)
    if isinstance(n, pm.Repeat):
        return n.min == 0 or nullable(n.body)
    raise TypeError(n)


def derive(n: pm.PatternNode, label: str) -> pm.PatternNode:
    """Brzozowski derivative: the words w such that ``label w`` is in the language of ``n``."""
    if isinstance(n, pm.Permute):
        return derive(_orders(n), label)
    if isinstance(n, pm.Var):
        return _EMPTY if n.name == label else _NONE
    if isinstance(n, pm.Neg):
        return _NONE
    if isinstance(n, pm.Seq):
        if not n.items:
            return _NONE
        head, rest = n.items[0], pm.Seq(n.items[1:])
        d = _seq(derive(head, label), rest)
        if nullable(head):
            return _alt(d, derive(rest, label))
        return d
    if isinstance(n, pm.Alt):
        out: pm.PatternNode = _NONE
        for o in n.options:
            out = _alt(out, derive(o, label))
        return out
    if isinstance(n, pm.Repeat):
        if n.max == 0:
            return _NONE
        rest = pm.Repeat(n.body, max(n.min - 1, 0), None if n.max is None else n.max - 1, n.greedy)
        if rest.max == 0:
            rest_n: pm.PatternNode = _EMPTY
        else:
            rest_n = rest
        return _seq(derive(n.body, label), rest_n)
    raise TypeError(n)


def _seq(a: pm.PatternNode, b: pm.PatternNode) -> pm.PatternNode:
    if a == _NONE or b == _NONE:
        return _NONE
    if a == _EMPTY:
        return b
    if b == _EMPTY:
        return a
    return pm.Seq((a, b))


def _alt(a: pm.PatternNode, b: pm.PatternNode) -> pm.PatternNode:
    if a == _NONE:
        return b
    if b == _NONE:
        return a
    if a == b:
        return a
    return pm.Alt((a, b))


def nonempty(n: pm.PatternNode) -> bool:
    """True if the language of ``n`` contains some word."""
    if isinstance(n, pm.Permute):
        return nonempty(_orders(n))
    if isinstance(n, pm.Var):
        return True
    if isinstance(n, pm.Neg):
        return True
    if isinstance(n, pm.Seq):
        return all(nonempty(i) for i in n.items)
    if isinstance(n, pm.Alt):
        return any(nonempty(o) for o in n.options)
    if isinstance(n, pm.Repeat):
        return n.min == 0 or nonempty(n.body)
    raise TypeError(n)


# --------------------------------------------------------------------------- conditions
@dataclass
class Rows:
    """One partition's rows: column values per row (Python scalars, NaN for numeric NULL)."""

    cols: dict[str, list[Any]]
    t: list[int]
    index: list[int]  # row index in the input table
    numeric: frozenset[str] = frozenset()


def _val(rows: Rows, col: str, r: int | None) -> Any:
    if r is None or r < 0 or r >= len(rows.t):
        return float("nan") if col in rows.numeric else None
    v = rows.cols[col][r]
    if v is None and col in rows.numeric:
        return float("nan")
    return v


def _null(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


class _Running:
    """Scalar interpreter of the running dialect for variable ``var`` at row ``cur``."""

    def __init__(self, rows: Rows, match: list[tuple[int, str]], var: str, cur: int,
                 names: dict[str, str], number: int | None = None,
                 subsets: dict[str, tuple[str, ...]] | None = None) -> None:
        self.subsets = subsets or {}  # union variable -> its variables (SUBSET)
        self.rows = rows
        self.match = match + [(cur, var)]  # running match, current row included
        self.var = var
        self.cur = cur
        self.names = names  # case-insensitive column names -> actual
        self.number = number  # MATCH_NUMBER() of the attempt (SQL semantics)

    def col(self, name: str) -> str:
        if name in self.rows.cols:
            return name
        return self.names[name.lower()]

    def rows_of(self, q: str | None, exclude_current: bool = False) -> list[int]:
        m = self.match[:-1] if exclude_current else self.match
        return [r for r, lab in m if q is None or lab in self.subsets.get(q, (q,))]

    def row_for(self, c: ex.Column, sel: tuple[str, int] | None) -> int | None:
        q = c.qualifier
        kind, k = sel if sel is not None else ("last", 0)
        own = q is None or self.var in self.subsets.get(q, (q,))
        if sel is None and own:
            return self.cur
        rows = self.rows_of(q)
        if kind == "last":
            return rows[-1 - k] if k < len(rows) else None
        return rows[k] if k < len(rows) else None

    def label_at(self, q: str | None, nav: int, sel: tuple[str, int] | None) -> str | None:
        """The variable of the row ``sel`` picks among ``q``'s rows of the running match (the
        last by default), ``nav`` rows before it (after, when negative); None outside it."""
        kind, k = sel if sel is not None else ("last", 0)
        rows = self.rows_of(q)
        if k >= len(rows):
            return None
        r = (rows[-1 - k] if kind == "last" else rows[k]) - nav
        return dict(self.match).get(r)

    def row_value(self, e: ex.Expr, r: int) -> Any:
        """``e`` (columns and scalar functions only) on the match's row ``r``."""
        def closed(x: ex.Expr) -> ex.Expr:
            if isinstance(x, ex.Column):
                return ex.Literal(_val(self.rows, self.col(x.name), r))
            if isinstance(x, ex.Unary):
                return ex.Unary(x.op, closed(x.operand))
            if isinstance(x, ex.Binary):
                return ex.Binary(x.op, closed(x.left), closed(x.right))
            if isinstance(x, ex.Call):
                return ex.Call(x.name, tuple(closed(y) for y in x.args), x.qualifier)
            assert isinstance(x, ex.Literal), f"unsupported inside an aggregate: {x}"
            return x
        v = ex.compile_expr(closed(e))(ex.ColumnsEnv({}))
        v = np.asarray(v).item() if not isinstance(v, str | type(None)) else v
        return None if isinstance(v, float) and v != v else v

    def leaf(self, e: ex.Expr, nav: int, sel: tuple[str, int] | None) -> ex.Expr:
        if isinstance(e, ex.Column):
            r = self.row_for(e, sel)
            if r is not None:
                r = r - nav
            return ex.Literal(_val(self.rows, self.col(e.name), r))
        if isinstance(e, ex.Call):
            n = e.name
            if n in ("PREV", "NEXT"):
                k = e.args[1].value if len(e.args) > 1 else 1  # type: ignore[attr-defined]
                return self.leaf(e.args[0], nav + k if n == "PREV" else nav - k, sel)
            if n in ("FIRST", "LAST"):
                k = e.args[1].value if len(e.args) > 1 else 0  # type: ignore[attr-defined]
                return self.leaf(e.args[0], nav, (n.lower(), k))
            if n == "COUNT" and e.distinct:  # the set of non-null values of the rows covered
                a = e.args[0]
                quals = {c.qualifier for c in ex.columns(a)}
                rs = self.rows_of(next(iter(quals)) if len(quals) == 1 else None)
                return ex.Literal(len({v for r in rs if not _null(v := self.row_value(a, r))}))
            if n in ("COUNT", "SUM", "AVG", "MIN", "MAX"):
                a = e.args[0]
                if isinstance(a, ex.Star):
                    return ex.Literal(len(self.match))
                if not isinstance(a, ex.Column):  # an expression, evaluated row by row
                    quals = {c.qualifier for c in ex.columns(a)}
                    rs = self.rows_of(next(iter(quals)) if len(quals) == 1 else None)
                    vals = [self.row_value(a, r) for r in rs]
                    return _aggregate(n, [v for v in vals if not _null(v)])
                excl = a.index is not None and a.index[0] == "all_prev"
                rs = self.rows_of(a.qualifier, excl)
                if a.name == "*":
                    return ex.Literal(len(rs))
                vals = [_val(self.rows, self.col(a.name), r) for r in rs]
                return _aggregate(n, [v for v in vals if not _null(v)])
            if n == "CLASSIFIER":
                q = e.args[0].name if e.args else None  # type: ignore[attr-defined]
                return ex.Literal(self.label_at(q, nav, sel))
            if n == "MATCH_NUMBER":
                assert self.number is not None, "MATCH_NUMBER() outside MATCH_RECOGNIZE"
                return ex.Literal(self.number)
            return ex.Call(n, tuple(self.leaf(a, nav, sel) for a in e.args), e.qualifier)
        if isinstance(e, ex.Literal):
            return e
        if isinstance(e, ex.Unary):
            return ex.Unary(e.op, self.leaf(e.operand, nav, sel))
        if isinstance(e, ex.Binary):
            return ex.Binary(e.op, self.leaf(e.left, nav, sel), self.leaf(e.right, nav, sel))
        if isinstance(e, ex.Between):
            return ex.Between(self.leaf(e.operand, nav, sel), self.leaf(e.low, nav, sel),
                           self.leaf(e.high, nav, sel), e.negated)
        if isinstance(e, ex.InList):
            return ex.InList(self.leaf(e.operand, nav, sel),
                          tuple(self.leaf(v, nav, sel) for v in e.values), e.negated)
        if isinstance(e, ex.IsNull):
            return ex.IsNull(self.leaf(e.operand, nav, sel), e.negated)
        raise TypeError(e)


def eval_condition(cond: ex.Expr | None, rows: Rows, match: list[tuple[int, str]], var: str,
                   cur: int, names: dict[str, str], number: int | None = None,
                   subsets: dict[str, tuple[str, ...]] | None = None) -> bool:
    """Does row ``cur`` satisfy ``var``'s condition, given the running ``match`` before it
    (``number``: the attempt's MATCH_NUMBER(); ``subsets``: union variables)?"""
    if cond is None:
        return True
    interp = _Running(rows, match, var, cur, names, number, subsets)
    closed = interp.leaf(cond, 0, None)
    r = ex.compile_predicate(closed)(ex.ColumnsEnv({}))
    return bool(np.asarray(r).item())


# --------------------------------------------------------------------------- input
def _partitions(table: pa.Table, keys: tuple[str, ...]) -> dict[Any, Rows]:
    data = table.to_pydict()
    n = table.num_rows
    numeric = frozenset(f.name for f in table.schema
                        if pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
    out: dict[Any, Rows] = {}
    for i in range(n):
        key = tuple(data[k][i] for k in keys)
        if key not in out:
            out[key] = Rows({c: [] for c in data}, [], [], numeric)
        rw = out[key]
        for c in data:
            v = data[c][i]
            if v is None and pa.types.is_floating(table.schema.field(c).type):
                v = float("nan")
            rw.cols[c].append(v)
        rw.t.append(int(data["t"][i]))
        rw.index.append(i)
    return out


class Conditions(dict):
    """Each variable's condition (a dict), with the query's union variables."""

    subsets: dict[str, tuple[str, ...]] = {}


def _conditions(spec: pm.PatternSpec) -> Conditions:
    conds = Conditions()
    conds.subsets = spec.subset_members()
    eq: list[ex.Expr] = []
    if spec.equivalence and spec.strategy == pm.Strategy.CONTIGUOUS:
        eq = [ex.Binary("=", ex.Column(a), ex.Call("FIRST", (ex.Column(a),))) for a in spec.equivalence]
    for v in spec.variables():
        d = spec.define(v)
        parts = ex.conjuncts(d.condition) + eq
        if d.event_types:
            parts.insert(0, ex.InList(ex.Column(spec.type_column),
                                   tuple(ex.Literal(x) for x in d.event_types)))
        c: ex.Expr | None = None
        for p in parts:
            c = p if c is None else ex.Binary("and", c, p)
        conds[v] = c
    return conds


def _keys(spec: pm.PatternSpec) -> tuple[str, ...]:
    keys = tuple(spec.partition_by)
    if spec.equivalence and spec.strategy != pm.Strategy.CONTIGUOUS:
        keys = keys + tuple(a for a in spec.equivalence if a not in keys)
    return keys


def _names(table: pa.Table) -> dict[str, str]:
    return {n.lower(): n for n in table.schema.names}


# --------------------------------------------------------------------------- all runs
def _flat_negations(spec: pm.PatternSpec) -> tuple[dict[str, int], list[tuple[int, str]]]:
    """For flat sequences: component index per positive variable, (index, var) per negation."""
    items = spec.pattern.items if isinstance(spec.pattern, pm.Seq) else (spec.pattern,)
    idx: dict[str, int] = {}
    negs: list[tuple[int, str]] = []
    for i, it in enumerate(items):
        if isinstance(it, pm.Neg):
            body = it.body
            while isinstance(body, pm.Seq) and len(body.items) == 1:
                body = body.items[0]
            assert isinstance(body, pm.Var)
            negs.append((i, body.name))
            continue
        for v in it.walk():
            if isinstance(v, pm.Var):
                idx[v.name] = i
    return idx, negs


def all_runs_matches(spec: pm.PatternSpec, table: pa.Table) -> list[Match]:
    """Every match under the dissertation / SASE+ strategies (see module docstring), in the
    operator's documented order: by last event, then row indices, then variables."""
    pvars = [v for v in spec.variables() if v not in spec.negated_variables()]
    out: list[Match] = []
    for key, rows in _partitions(table, _keys(spec)).items():
        _AllRuns(spec, key, rows, _names(table), pvars, out).run()
    out = list(dict.fromkeys(out))
    out.sort(key=lambda m: (m[1][-1], m[1], tuple(pvars.index(v) for v in m[2])))
    return out


class _AllRuns:
    """Depth-first enumeration of one partition's labelled subsequences."""

    def __init__(self, spec: pm.PatternSpec, key: Any, rows: Rows, names: dict[str, str],
                 pvars: list[str], out: list[Match]) -> None:
        self.spec = spec
        self.key = key
        self.rows = rows
        self.names = names
        self.pvars = pvars
        self.out = out
        self.conds = _conditions(spec)
        self.w = spec.window
        self.strat = spec.strategy
        self.contiguous = spec.strategy in (pm.Strategy.CONTIGUOUS, pm.Strategy.PARTITION_CONTIGUITY)
        has_neg = bool(spec.negated_variables())
        self.comp_idx, self.negs = _flat_negations(spec) if has_neg else ({}, [])

    def ok_event(self, match: list[tuple[int, str]], var: str, j: int) -> bool:
        return eval_condition(self.conds[var], self.rows, match, var, j, self.names)

    def negated_between(self, match: list[tuple[int, str]], y: str, j: int) -> bool:
        """Is there a negated event strictly between match[-1] and row j on the edge to y?"""
        if not self.negs:
            return False
        lo, hi = self.comp_idx[match[-1][1]], self.comp_idx[y]
        active = [nv for ni, nv in self.negs if lo < ni < hi]
        for r in range(match[-1][0] + 1, j):
            for nv in active:
                if self.ok_event(match, nv, r):
                    return True
        return False

    def transitions(self, match: list[tuple[int, str]], d: pm.PatternNode, j: int) -> list[str]:
        rows = self.rows
        if self.w is not None and rows.t[j] - rows.t[match[0][0]] > self.w:
            return []
        ys = []
        for y in self.pvars:
            if not nonempty(derive(d, y)):
                continue
            if self.negated_between(match, y, j):
                continue
            if self.ok_event(match, y, j):
                ys.append(y)
        return ys

    def dfs(self, match: list[tuple[int, str]], d: pm.PatternNode) -> None:
        rows = self.rows
        if nullable(d):
            self.out.append((self.key, tuple(rows.index[r] for r, _ in match),
                             tuple(lab for _, lab in match)))
        last = match[-1][0]
        for j in range(last + 1, len(rows.t)):
            if self.contiguous and j != last + 1:
                break
            if self.w is not None and rows.t[j] - rows.t[match[0][0]] > self.w:
                break
            ys = self.transitions(match, d, j)
            for y in ys:
                self.dfs(match + [(j, y)], derive(d, y))
            if self.strat == pm.Strategy.SKIP_TILL_NEXT and ys:
                break

    def run(self) -> None:
        for j in range(len(self.rows.t)):
            for y in self.pvars:
                d = derive(self.spec.pattern, y)
                if nonempty(d) and self.ok_event([], y, j):
                    self.dfs([(j, y)], d)


# --------------------------------------------------------------------------- SQL
def matches(spec: pm.PatternSpec, table: pa.Table) -> list[Match]:
    """Dispatch on the spec's semantics."""
    if spec.semantics == pm.Semantics.SQL:
        from replaydb.operators.pattern.oracle_sql import sql_matches

        return sql_matches(spec, table)
    return all_runs_matches(spec, table)


def _aggregate(fn: str, vals: list[Any]) -> ex.Literal:
    """COUNT / SUM / AVG / MIN / MAX of non-null ``vals`` (NaN for no value but COUNT)."""
    if fn == "COUNT":
        return ex.Literal(len(vals))
    if not vals:
        return ex.Literal(float("nan"))
    f = {"SUM": sum, "MIN": min, "MAX": max, "AVG": lambda xs: sum(xs) / len(xs)}[fn]
    return ex.Literal(float(f(vals)))


def measure_value(expr: ex.Expr, table: pa.Table, rows_idx: tuple[int, ...],
                  labels: tuple[str, ...]) -> Any:
    """ONE ROW PER MATCH value of a simple measure (columns of variables, FIRST/LAST,
    aggregates, CLASSIFIER) over a match given by input row indices - for tests."""
    data = table.to_pydict()
    names = _names(table)
    cols = {c: [data[c][i] for i in rows_idx] for c in data}
    numeric = frozenset(f.name for f in table.schema
                        if pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
    rows = Rows(cols, [int(data["t"][i]) for i in rows_idx], list(rows_idx), numeric)
    match = [(j, lab) for j, lab in enumerate(labels)]
    last = len(labels) - 1
    interp = _Running(rows, match[:-1], labels[-1], last, names)
    interp.var = "\x00none"  # FINAL semantics: unqualified refer to the last row via rows_of
    interp.match = match
    closed = _final_leaf(interp, expr)
    r = ex.compile_expr(closed)(ex.ColumnsEnv({}))
    v = np.asarray(r).item() if not isinstance(r, str | type(None)) else r
    return v


def _final_leaf(interp: _Running, e: ex.Expr) -> ex.Expr:
    if isinstance(e, ex.Column) and e.qualifier is None:
        return ex.Literal(_val(interp.rows, interp.col(e.name), len(interp.match) - 1))
    if isinstance(e, ex.Call) and e.name == "CLASSIFIER":
        return ex.Literal(interp.match[-1][1])
    return interp.leaf(e, 0, None)


def run_operator(spec: pm.PatternSpec, table: pa.Table, batch_rows: int | None = None,
                 state_cap: int | None = None, time_unit: str | None = None) -> list[Match]:
    """Run the real operator on ``table`` and return its matches in this module's format.

    The spec is run with ALL ROWS PER MATCH and a CLASSIFIER() measure so every matched row and
    its variable come back; rows are mapped to table indices through ``seq``. Matches come in the
    operator's output order. Useful for operator-vs-oracle and index-vs-replay tests.
    """
    from dataclasses import replace

    from replaydb.operators.pattern.model import Measure, RowsPerMatch
    from replaydb.operators.pattern.operator import PatternConfig, PatternOperator

    spec2 = replace(spec, rows_per_match=RowsPerMatch.ALL, select=None,
                    measures=(Measure("\x00cls", ex.Call("CLASSIFIER")),))
    op = PatternOperator(PatternConfig(spec2, table.schema, time_unit), state_cap=state_cap)
    for b in table.to_batches(max_chunksize=batch_rows) if batch_rows else [table]:
        op.push(b)
    op.flush()
    res = op.results().to_pylist()
    seq_to_row = {s: i for i, s in enumerate(table.column("seq").to_pylist())}
    keys = _keys(spec)
    groups: list[list[dict[str, Any]]] = []
    for r in res:  # a match's rows are adjacent; an unmatched row (no match id) is alone
        if groups and r["match_id"] is not None and groups[-1][0]["match_id"] == r["match_id"]:
            groups[-1].append(r)
        else:
            groups.append([r])
    out: list[Match] = []
    for rs in groups:
        key = tuple(rs[0][k] for k in keys)
        labels = (UNMATCHED,) if rs[0]["match_id"] is None else tuple(r["\x00cls"] for r in rs)
        out.append((key, tuple(seq_to_row[r["seq"]] for r in rs), labels))
    return out
