"""MEASURES: values computed from each match, vectorized over all matches of a batch.

Semantics (SQL:2016 row pattern MEASURES; SASE+ RETURN items are translated into this dialect):

* ``A.x`` - ``x`` of the last row bound to ``A``; ``x`` unqualified - of the last row of the
  match. NULL when ``A`` bound no row. A union variable ``U`` (``SUBSET U = (A, B)``) stands
  for the rows bound to any of its variables, wherever a variable can stand.
* ``FIRST(A.x, k)`` / ``LAST(A.x, k)`` - the ``k``-th row (default 0) bound to ``A`` from the
  start / from the end; unqualified: of the whole match.
* ``PREV(e, k)`` / ``NEXT(e, k)`` - ``e`` evaluated ``k`` rows (default 1) before / after the row
  it refers to, physically in the partition. ``NEXT`` past the last event seen when the match is
  reported is NULL (the operator is online and reports a match as soon as it is final).
* ``COUNT(*)``, ``COUNT(A.*)``, ``COUNT/SUM/AVG/MIN/MAX(A.x)`` (or of ``x``: all rows) -
  aggregates skipping NULLs; SUM/AVG/MIN/MAX of no value is NULL.
* ``CLASSIFIER()`` - the variable of the row (``CLASSIFIER(v)``: of the last row bound to
  ``v``, a variable or union variable, NULL if none); navigated (``PREV(CLASSIFIER(), k)``,
  ``FIRST(CLASSIFIER(), k)``, ``LAST(...)``, ``NEXT(...)``) - the variable of the row reached,
  NULL when that row is not one of the match's rows up to the current one (RUNNING) or up to
  its last (FINAL); ``MATCH_NUMBER()`` - the match's number (1-based, per partition).
* ``RUNNING`` / ``FINAL``: with ONE ROW PER MATCH both mean the whole match. With ALL ROWS PER
  MATCH a measure is evaluated for every row of the match, over the rows up to that row
  (``RUNNING``, the default) or over the whole match (``FINAL`` before an aggregate or
  FIRST/LAST).

This module holds the matches (:class:`MatchSet`, :class:`Frame`) and the lowering of a measure
into leaves (:class:`MeasureLowerer`); :mod:`replaydb.operators.pattern.measure_eval` evaluates
them with NumPy/Arrow over flat arrays of all matches of a batch: O(total matched rows x measure
size), plus O(output) compiled loops for a variable's k-th row and running MIN/MAX.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

import numpy as np

from replaydb.errors import QueryError
from replaydb.operators import expr as ex
from replaydb.operators.exprcode.check import is_string_type
from replaydb.operators.pattern.lowering import (
    AGGREGATES,
    LowerContext,
    aggregated_variable,
    offset_arg,
)

MATCHED = 0
EMPTY = 1
"""``MatchSet.kind``: an empty match (no rows; ``start`` is the row it was found at)."""
UNMATCHED = 2
"""``MatchSet.kind``: a row in no match (WITH UNMATCHED ROWS; no rows, ``start`` is the row)."""


@dataclass
class MatchSet:
    """Matches as flat arrays: match ``m`` is rows ``off[m]:off[m+1]`` of ``ev``/``var``.
    ``shown`` (empty: every row) flags the rows ALL ROWS PER MATCH outputs: a row bound inside
    an exclusion ``{- -}`` is part of the match but not output. ``kind`` and ``start`` (empty:
    every match is an ordinary one) mark empty matches and unmatched rows, which have no rows,
    and give the row each was found at."""

    ev: np.ndarray
    var: np.ndarray
    off: np.ndarray
    pid: np.ndarray
    number: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    match_id: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    shown: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    start: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def shown_rows(self) -> np.ndarray:
        """``shown`` with one flag per row (all True when the matches exclude nothing)."""
        return self.shown if len(self.shown) == len(self.ev) else np.ones(len(self.ev), np.bool_)

    @property
    def n(self) -> int:
        return len(self.off) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.off)

    def flat_match(self) -> np.ndarray:
        return np.repeat(np.arange(self.n, dtype=np.int64), self.lengths)

    def take(self, order: np.ndarray) -> MatchSet:
        """Reorder (or select) matches."""
        lens = self.lengths[order]
        starts = self.off[:-1][order]
        idx = np.concatenate([np.arange(s, s + ln) for s, ln in zip(starts.tolist(),
                                                                    lens.tolist())]) \
            if len(order) else np.zeros(0, dtype=np.int64)
        off = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
        return MatchSet(self.ev[idx], self.var[idx], off, self.pid[order],
                        self.number[order] if len(self.number) else self.number,
                        self.match_id[order] if len(self.match_id) else self.match_id,
                        self.shown[idx] if len(self.shown) else self.shown,
                        self.kind[order] if len(self.kind) else self.kind,
                        self.start[order] if len(self.start) else self.start)

    @staticmethod
    def empty() -> MatchSet:
        z = np.zeros(0, dtype=np.int64)
        return MatchSet(z, z, np.zeros(1, dtype=np.int64), z, z, z)


@dataclass
class Frame:
    """Output rows: each has a match and a *current* flat row (last row for ONE ROW).
    ``per_match``: one row per match, in match order (ONE ROW PER MATCH)."""

    ms: MatchSet
    mid: np.ndarray
    cur: np.ndarray
    per_match: bool = False

    @staticmethod
    def one_row(ms: MatchSet) -> Frame:
        return Frame(ms, np.arange(ms.n, dtype=np.int64), ms.off[1:] - 1, True)

    @staticmethod
    def all_rows(ms: MatchSet) -> Frame:
        return Frame(ms, ms.flat_match(), np.arange(len(ms.ev), dtype=np.int64))


# --------------------------------------------------------------------------- leaves
VarRef = int | tuple[int, ...] | None
"""The rows a measure leaf looks at: a variable's index, a union variable's (sorted) indices,
or None for every row of the match."""


def covers(var: VarRef, vars: Collection[int]) -> bool:
    """Whether ``var`` looks at rows of one of ``vars`` (None: every row does)."""
    if var is None:
        return True
    if isinstance(var, tuple):
        return any(v in vars for v in var)
    return var in vars


def member_table(var: int | tuple[int, ...], n_vars: int) -> np.ndarray:
    """Per variable index, whether it is (one of) ``var``."""
    out = np.zeros(max(n_vars, 1), dtype=np.bool_)
    out[list(var) if isinstance(var, tuple) else [var]] = True
    return out


@dataclass(frozen=True)
class _Sel(ex.Expr):
    """Column ``col`` of the row chosen by (var, from_end, k, final), navigated ``nav`` rows."""

    var: VarRef
    from_end: bool
    k: int
    final: bool
    col: str
    nav: int = 0  # > 0: PREV, < 0: NEXT


@dataclass(frozen=True)
class _AggLeaf(ex.Expr):
    fn: str
    var: VarRef
    col: str | None  # None: row count (unless ``arg`` is given)
    final: bool
    arg: ex.Expr | None = None  # an expression evaluated on every row the aggregate covers
    arg_columns: tuple[tuple[str, str], ...] = ()  # its column names -> the schema's names
    distinct: bool = False  # COUNT(DISTINCT ...): each non-null value once


@dataclass(frozen=True)
class _Special(ex.Expr):
    what: str  # classifier | match_number
    final: bool
    shift: int = 0  # CLASSIFIER of the row this many rows before (> 0) / after (< 0) ...
    pick: tuple[bool, int] | None = None  # ... the k-th row from the end (True) / start
    var: VarRef = None  # CLASSIFIER(v): among the rows bound to v


def _at(msg: str, pos: int | None) -> str:
    return msg if pos is None else f"{msg} (at position {pos})"


def _offset(e: ex.Call, default: int) -> int:
    """The row offset of navigation ``e`` (``PREV(x, k)``, ``FIRST(x, k)`` ...): its optional
    second argument, a non-negative integer literal, else ``default``."""
    if not 1 <= len(e.args) <= 2:
        raise QueryError(_at(f"{e.name} takes 1 or 2 arguments", e.pos))
    if len(e.args) == 1:
        return default
    return offset_arg(e.args[1], f"the offset of {e.name}")


class MeasureLowerer:
    """Turn a MEASURES expression into leaves (:class:`_Sel`, :class:`_AggLeaf`, ...)."""

    def __init__(self, ctx: LowerContext, var_index: dict[str, int], all_rows: bool) -> None:
        self.ctx = ctx
        self.vidx = var_index
        self.all_rows = all_rows

    def vid(self, var: str | None) -> VarRef:
        """A resolved variable as a :data:`VarRef`."""
        members = self.ctx.members(var)
        if members is None:
            return None
        if var in self.ctx.subsets:
            return tuple(sorted({self.vidx[m] for m in members}))
        return self.vidx[var]  # type: ignore[index]

    def lower(self, e: ex.Expr, nav: int = 0, sel: tuple[str, int, bool] | None = None,
              final: bool | None = None) -> ex.Expr:
        fin = (not self.all_rows) if final is None else final
        if isinstance(e, ex.Literal):
            return e
        if isinstance(e, ex.Column):
            if e.name == "*":
                raise QueryError(_at(f"{e.qualifier}.* is only allowed in COUNT", e.pos))
            if e.index is not None:
                raise QueryError(_at("subscripted variables are not allowed here", e.pos))
            var = self.ctx.resolve_var(e.qualifier, e.pos) if e.qualifier is not None else None
            col = self.ctx.resolve_column(e.name, e.pos)
            kind, k, f2 = sel if sel is not None else ("last", 0, fin)
            if nav > 0:
                self.ctx.navs.add((col, nav))
            return _Sel(self.vid(var), kind == "last", k, f2, col, nav)
        if isinstance(e, ex.Star):
            raise QueryError(_at("'*' is only allowed in COUNT(*)", e.pos))
        if isinstance(e, ex.Unary):
            return ex.Unary(e.op, self.lower(e.operand, nav, sel, final), pos=e.pos)
        if isinstance(e, ex.Binary):
            return ex.Binary(e.op, self.lower(e.left, nav, sel, final),
                          self.lower(e.right, nav, sel, final), pos=e.pos)
        if isinstance(e, ex.Between):
            return ex.Between(self.lower(e.operand, nav, sel, final), self.lower(e.low, nav, sel, final),
                           self.lower(e.high, nav, sel, final), e.negated, pos=e.pos)
        if isinstance(e, ex.InList):
            return ex.InList(self.lower(e.operand, nav, sel, final),
                          tuple(self.lower(v, nav, sel, final) for v in e.values), e.negated,
                          pos=e.pos)
        if isinstance(e, ex.IsNull):
            return ex.IsNull(self.lower(e.operand, nav, sel, final), e.negated, pos=e.pos)
        if isinstance(e, ex.Call):
            return self.call(e, nav, sel, final)
        raise QueryError(f"unsupported measure expression {type(e).__name__}")  # pragma: no cover

    def call(self, e: ex.Call, nav: int, sel: tuple[str, int, bool] | None,
             final: bool | None) -> ex.Expr:
        name = e.name
        fin = (not self.all_rows) if final is None else final
        if e.qualifier == "FINAL":
            fin = True
        elif e.qualifier == "RUNNING":
            fin = not self.all_rows
        if name in ("PREV", "NEXT"):
            k = _offset(e, default=1)
            return self.lower(e.args[0], nav + (k if name == "PREV" else -k), sel, final)
        if name in ("FIRST", "LAST"):
            k = _offset(e, default=0)
            return self.lower(e.args[0], nav, (name.lower(), k, fin), final)
        if name in AGGREGATES:
            if len(e.args) != 1:
                raise QueryError(_at(f"{name} takes one argument", e.pos))
            a = e.args[0]
            if e.distinct:
                return self.count_distinct(e, fin)
            if isinstance(a, ex.Star):
                if name != "COUNT":
                    raise QueryError(_at(f"{name}(*) is not allowed", e.pos))
                return _AggLeaf("COUNT", None, None, fin)
            if not isinstance(a, ex.Column):
                return self.expression_aggregate(name, a, fin, e.pos)
            var = self.ctx.resolve_var(a.qualifier, a.pos) if a.qualifier is not None else None
            vi = self.vid(var)
            if a.name == "*":
                if name != "COUNT":
                    raise QueryError(_at(f"{name}({a.qualifier}.*) is not allowed", e.pos))
                return _AggLeaf("COUNT", vi, None, fin)
            if a.index is not None and a.index[0] not in ("all",):
                raise QueryError(_at("subscripted variables are not allowed here", a.pos))
            col = self.ctx.resolve_column(a.name, a.pos)
            if name != "COUNT" and is_string_type(self.ctx.schema.field(col).type):
                raise QueryError(_at(f"{name} over the non-numeric column {col!r}", e.pos))
            return _AggLeaf(name, vi, col, fin)
        if name == "CLASSIFIER":
            var = self.vid(self.classifier_var(e))
            if sel is None:
                return _Special("classifier", fin, nav, None, var)
            return _Special("classifier", sel[2], nav, (sel[0] == "last", sel[1]), var)
        if name == "MATCH_NUMBER":
            return _Special("match_number", fin)
        return ex.Call(name, tuple(self.lower(a, nav, sel, final) for a in e.args), None, pos=e.pos)

    def classifier_var(self, e: ex.Call) -> str | None:
        """The variable of ``CLASSIFIER(v)`` (a primary or union variable), None without one."""
        if not e.args:
            return None
        a = e.args[0]
        if len(e.args) > 1 or not isinstance(a, ex.Column) or a.qualifier is not None:
            raise QueryError(_at("CLASSIFIER takes no argument or one pattern variable", e.pos))
        return self.ctx.resolve_var(a.name, a.pos)

    def count_distinct(self, e: ex.Call, final: bool) -> _AggLeaf:
        """``COUNT(DISTINCT A.x)`` / ``COUNT(DISTINCT expr)``: the number of distinct non-null
        values over the rows the aggregate covers (strings too)."""
        a = e.args[0]
        if e.name != "COUNT":
            raise QueryError(_at(f"{e.name}(DISTINCT ...) is not supported: only COUNT takes "
                                 "DISTINCT", e.pos))
        if isinstance(a, ex.Star) or (isinstance(a, ex.Column) and a.name == "*"):
            raise QueryError(_at("COUNT(DISTINCT *) is not allowed: name a column", e.pos))
        if isinstance(a, ex.Column):
            if a.index is not None:
                raise QueryError(_at("subscripted variables are not allowed here", a.pos))
            var = self.ctx.resolve_var(a.qualifier, a.pos) if a.qualifier is not None else None
            col = self.ctx.resolve_column(a.name, a.pos)
            return _AggLeaf("COUNT", self.vid(var), col, final, distinct=True)
        leaf = self.expression_aggregate("COUNT", a, final, e.pos)
        return _AggLeaf("COUNT", leaf.var, None, final, leaf.arg, leaf.arg_columns, True)

    def expression_aggregate(self, name: str, arg: ex.Expr, final: bool,
                             pos: int | None) -> _AggLeaf:
        """``SUM(A.price * A.volume)`` and the like: the expression is evaluated on every row
        the aggregate covers. Its column references must all name the same variable (or none:
        every row of the match), as SQL:2016 asks; no navigation, aggregate, CLASSIFIER or
        MATCH_NUMBER inside."""
        var = aggregated_variable(name, arg, self.ctx, pos)
        columns = {x.name: self.ctx.resolve_column(x.name, x.pos) for x in arg.walk()
                   if isinstance(x, ex.Column)}
        return _AggLeaf(name, self.vid(var), None, final, arg=arg,
                        arg_columns=tuple(sorted(columns.items())))


def rows_of_vars_unread(lowered: Iterable[ex.Expr], vars: Collection[int], all_rows: bool
                        ) -> bool:
    """Whether lowered measures give the same values on a match that leaves out its rows bound
    to ``vars``, provided the match's first and last rows stay: ONE ROW PER MATCH (ALL ROWS
    outputs every row), and no measure reads such a row - no row reference or aggregate on one
    of ``vars``, no aggregate over all the match's rows (``COUNT(*)``, ``SUM(x)``), and no
    FIRST/LAST of the match's rows with an offset (the k-th row counts every row). A FIRST/LAST
    of a variable counts that variable's rows only, CLASSIFIER reads the last row, PREV/NEXT
    navigate the stream from the chosen row. O(measure nodes)."""
    if all_rows:
        return False
    for low in lowered:
        for node in low.walk():
            if isinstance(node, _Sel):
                if (node.k != 0 if node.var is None else covers(node.var, vars)):
                    return False
            elif isinstance(node, _AggLeaf):
                if covers(node.var, vars):
                    return False
    return True
