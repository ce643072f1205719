"""Lowering of variable conditions (DEFINE / SASE+ WHERE) into evaluable forms.

A condition is written in the *running* dialect of SQL:2016 row pattern recognition. While the
matcher decides whether the current event ``e`` may be bound to variable ``V`` of a partial match
``m`` (the *running match* is ``m`` plus ``e`` bound to ``V``):

* ``x`` or ``V.x`` - the current event's column ``x`` (``t`` and ``seq`` included);
* ``A.x`` (another variable) - ``x`` of the last event bound to ``A`` so far; NULL if none;
* a union variable ``U`` (``SUBSET U = (A, B)``) stands for the rows bound to any of its
  variables: it behaves as ``V`` itself when ``V`` is one of them, else as another variable;
* ``PREV(expr, k)`` / ``NEXT(expr, k)`` - ``expr`` evaluated on the row ``k`` (default 1) rows
  before / after the row its columns refer to, *physically* in the (partition's) stream; NULL
  before the first row / after the last (NEXT may read rows the match has not reached: the
  operator holds rows back until the rows after them have arrived);
* ``FIRST(V.x, k)`` - the ``k``-th (default 0: the first) event bound to ``V`` in the running
  match (the current one when ``V`` has ``k`` events before it); ``FIRST(A.x, k)`` for another
  variable, its ``k``-th bound event; ``FIRST(x, k)`` - the match's ``k``-th event;
* ``LAST(V.x, k)`` - the ``k``-th event before the running match's last one bound to ``V``
  (``LAST(V.x)`` = ``V.x``, ``LAST(V.x, 1)`` the previous event bound to ``V``); for another
  variable counted from its last bound event; ``LAST(x, k)`` - of all the match's events;
  LAST offsets up to :data:`MAX_CONDITION_OFFSET`, FIRST any; NULL where no such event is bound;
* ``COUNT(*)``, ``COUNT(V.*)``, ``COUNT/SUM/AVG/MIN/MAX(V.x)`` - over the running match's events
  bound to ``V`` (the current one included); over ``A``'s events for another variable; over all
  events for an unqualified column. NULLs are skipped; SUM/AVG/MIN/MAX of no values are NULL;
* an aggregate over a column marked ``all_prev`` (SASE+ ``avg(b[..i-1].x)``) excludes the current
  event;
* ``CLASSIFIER()`` (and ``LAST(CLASSIFIER())``) - the variable's own name; ``LAST(CLASSIFIER(),
  k)``, ``FIRST(CLASSIFIER(), k)``, ``PREV``/``NEXT(CLASSIFIER(), k)`` - the variable of that
  row of the running match (NULL outside it: the rows after the current one are not matched
  yet); ``CLASSIFIER(v)`` - of the last row bound to ``v`` (a union variable: to one of its
  variables), with FIRST/LAST offsets too, and PREV/NEXT of it: the variable of the row that
  many rows before / after that row (NULL outside the running match);
* ``MATCH_NUMBER()`` (MATCH_RECOGNIZE) - the number the running match would get if it matched:
  one more than the partition's matches before it (Trino's reading).

* ``SUM(A.price * 2)``, ``COUNT(x + 1)``, ...: an aggregate over an expression of one variable's
  columns (or of unqualified columns: every row) runs over the expression's value on each row.

Not supported inside conditions (QueryError naming the position): ``FINAL``.

The lowered tree replaces column references and navigation by :class:`Cur`, :class:`Bound`,
:class:`Agg`, :class:`Rows` and :class:`MatchNumber` leaves; a conjunct made only of :class:`Cur` leaves is *local*
(evaluated vectorized over a batch), any other is *cross-event* (run by the VM per partial match).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from replaydb.errors import QueryError
from replaydb.operators import expr as ex
from replaydb.operators.exprcode.check import column_kind

AGGREGATES = ("COUNT", "SUM", "AVG", "MIN", "MAX")
NAVIGATION = ("PREV", "NEXT", "FIRST", "LAST")


# --------------------------------------------------------------------------- lowered leaves
@dataclass(frozen=True)
class Cur(ex.Expr):
    """The current event's column ``col``, ``nav`` rows back in the partition."""

    col: str
    nav: int = 0


@dataclass(frozen=True)
class Bound(ex.Expr):
    """Column ``col`` (``nav`` rows back) of a bound row: ``kind`` 'last' | 'first' | 'firstcur'
    ('firstcur': the current row when it would be that row itself).

    ``var`` None means any variable (the match's first / previous row).
    """

    kind: str
    var: str | None
    col: str
    nav: int = 0
    k: int = 0
    """For ``first``/``firstcur``: the ``k``-th row bound (0 = the first); for ``last``: the
    ``k``-th row before the last one bound (0 = the last)."""


@dataclass(frozen=True)
class BoundVar(ex.Expr):
    """``CLASSIFIER()`` of a bound row: the variable that row was bound to, the row chosen as in
    :class:`Bound` (``kind``, ``var``, ``k``); for ``firstcur`` the current row is bound to
    ``cur``; ``kind`` ``current``: the current row (``cur``); ``none``: a row outside the
    running match (a NULL label). ``need`` >= 0: NULL unless the ``need``-th slot of the same
    chain (every row's first or last rows) is set - the row a navigation started from must
    exist (``NEXT(LAST(CLASSIFIER(), 2))`` is NULL with fewer than two rows before the current
    one, though the row it names exists)."""

    kind: str
    var: str | None
    k: int = 0
    cur: str | None = None
    need: int = -1


@dataclass(frozen=True)
class MovedVar(ex.Expr):
    """``PREV``/``NEXT`` of ``CLASSIFIER(var)`` of a row of ``var`` other than the current one:
    the variable of the row ``nav`` rows before (``nav < 0``: after) ``var``'s ``k``-th first
    (``sel`` ``first``) or ``k``-th last bound row, NULL outside the running match; ``cur`` is
    the variable being defined (the current row's, when the move lands on it) and ``own``
    whether ``var`` covers it (then the ``k``-th first row may be the current one)."""

    sel: str
    var: str
    k: int
    nav: int
    cur: str
    own: bool


MAX_MOVED_SLOTS = 4096
"""The most state slots one ``PREV``/``NEXT`` (``n`` rows) of ``CLASSIFIER(v)`` in a condition
may take: ``NEXT`` from ``v``'s ``k``-th last row keeps ``(k + 1) x (n + 1)`` (the rows after
each of ``v``'s last ``k + 1`` rows), ``PREV`` from it ``k + n + 2``, a move from its ``k``-th
first row ``n + 2``."""


@dataclass(frozen=True)
class Agg(ex.Expr):
    """Running aggregate ``fn`` over column ``col`` of rows bound to ``var`` (None: all rows)."""

    fn: str
    var: str | None
    col: str
    include_current: bool


@dataclass(frozen=True)
class Rows(ex.Expr):
    """Number of rows bound to ``var`` (None: all rows), plus one with the current row."""

    var: str | None
    include_current: bool


@dataclass(frozen=True)
class MatchNumber(ex.Expr):
    """``MATCH_NUMBER()`` in a condition: the number the running match would get."""

    pos: int | None = field(default=None, compare=False)


@dataclass
class LowerContext:
    """What lowering needs to know: variables, the schema (for case-insensitive names)."""

    variables: list[str]
    schema: pa.Schema
    case_insensitive_vars: bool = False
    navs: set[tuple[str, int]] = field(default_factory=set)
    subsets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Union variables (``SUBSET``) and their primary variables."""
    derived: dict[str, tuple[ex.Expr, bool]] = field(default_factory=dict)
    """Per-row columns computed from the stream's (an aggregate's argument expression): name ->
    (an expression over the schema's columns, whether only its NULL-ness counts: COUNT)."""
    order_columns: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    """Order-key columns of strings ordered across rows (``A.name < B.name``): name -> (the
    string column, or None; the string literal, or None) whose order keys it holds
    (:func:`order_strings`)."""
    row_functions: dict[str, ex.Expr] = field(default_factory=dict)
    """Per-row string columns of the functions the pattern machine does not run (``LOWER``,
    ``UPPER``) in conditions that read other rows: name -> the call over the schema's columns
    (:func:`derive_row_functions`)."""

    def kind(self, name: str) -> str:
        """Column ``name``'s kind in the typed form ('s', 'b', 'i', 'f'): a stream column's, or
        a derived column's - an aggregate's argument and an order key are numbers, a string
        function's value a string."""
        if name in self.row_functions:
            return "s"
        if name in self.derived or name in self.order_columns:
            return "f"
        return column_kind(self.schema, name)

    def members(self, var: str | None) -> tuple[str, ...] | None:
        """The primary variables a resolved variable stands for (None: every row)."""
        if var is None:
            return None
        return self.subsets.get(var, (var,))

    def resolve_column(self, name: str, pos: int | None) -> str:
        names = self.schema.names
        if name in names:
            return name
        matches = [n for n in names if n.lower() == name.lower()]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise QueryError(_at(f"column name {name!r} is ambiguous ({', '.join(matches)})", pos))
        raise QueryError(_at(f"unknown column {name!r}", pos),
                         hint=f"columns are: {', '.join(names)}")

    def resolve_var(self, q: str, pos: int | None) -> str:
        """A primary or union variable's name as declared."""
        names = [*self.variables, *self.subsets]
        if q in names:
            return q
        if self.case_insensitive_vars:
            for v in names:
                if v.upper() == q.upper():
                    return v
        raise QueryError(_at(f"unknown pattern variable {q!r}", pos),
                         hint=f"variables are: {', '.join(names)}")


def _at(msg: str, pos: int | None) -> str:
    return msg if pos is None else f"{msg} (at position {pos})"


MAX_OFFSET = 2**31 - 1
"""The largest row offset of a navigation (PREV, NEXT, FIRST, LAST): offsets index int64 arrays
of rows, and no partition or match comes near this many rows."""

MAX_CONDITION_OFFSET = 4095
"""The largest LAST offset in a condition: a running match keeps its variable's last ``k + 1``
rows, a state slot each (every bound row updates them), where MEASURES read the finished
match's rows. FIRST takes any offset (one slot counts the rows up to the ``k``-th)."""


def offset_arg(e: ex.Expr, what: str) -> int:
    if isinstance(e, ex.Literal) and isinstance(e.value, int) and not isinstance(e.value, bool) \
            and e.value >= 0:
        if e.value > MAX_OFFSET:
            raise QueryError(_at(f"{what} is {e.value}, more than the largest offset, "
                                 f"{MAX_OFFSET}", getattr(e, "pos", None)))
        return int(e.value)
    raise QueryError(_at(f"{what} must be a non-negative integer literal", getattr(e, "pos", None)))


def column_var(e: ex.Expr) -> ex.Column | None:
    """The single column of a plain column reference (through unary +/- none), else None."""
    return e if isinstance(e, ex.Column) else None


def lower_condition(expr: ex.Expr, var: str, ctx: LowerContext) -> ex.Expr:
    """Lower the condition of variable ``var`` (see module docstring)."""
    return _Lowerer(var, ctx).lower(expr, nav=0, sel=None)


class _Lowerer:
    def __init__(self, var: str, ctx: LowerContext) -> None:
        self.var = var
        self.ctx = ctx

    def lower(self, e: ex.Expr, nav: int, sel: tuple[str, int] | None) -> ex.Expr:  # noqa: C901
        if isinstance(e, ex.Literal):
            return e
        if isinstance(e, ex.Column):
            return self.column(e, nav, sel)
        if isinstance(e, ex.Star):
            raise QueryError(_at("'*' is only allowed in COUNT(*)", e.pos))
        if isinstance(e, ex.Unary):
            return ex.Unary(e.op, self.lower(e.operand, nav, sel), pos=e.pos)
        if isinstance(e, ex.Binary):
            return ex.Binary(e.op, self.lower(e.left, nav, sel), self.lower(e.right, nav, sel),
                          pos=e.pos)
        if isinstance(e, ex.Between):
            return ex.Between(self.lower(e.operand, nav, sel), self.lower(e.low, nav, sel),
                           self.lower(e.high, nav, sel), e.negated, pos=e.pos)
        if isinstance(e, ex.InList):
            return ex.InList(self.lower(e.operand, nav, sel),
                          tuple(self.lower(v, nav, sel) for v in e.values), e.negated, pos=e.pos)
        if isinstance(e, ex.IsNull):
            return ex.IsNull(self.lower(e.operand, nav, sel), e.negated, pos=e.pos)
        if isinstance(e, ex.Call):
            return self.call(e, nav, sel)
        raise QueryError(f"unsupported expression {e}")  # pragma: no cover

    def call(self, e: ex.Call, nav: int, sel: tuple[str, int] | None) -> ex.Expr:
        name = e.name
        if e.qualifier == "FINAL":
            raise QueryError(_at("FINAL is not allowed in a pattern variable's condition", e.pos))
        if name in ("PREV", "NEXT"):
            if not 1 <= len(e.args) <= 2:
                raise QueryError(_at(f"{name} takes 1 or 2 arguments", e.pos))
            k = offset_arg(e.args[1], f"the offset of {name}") if len(e.args) == 2 else 1
            return self.lower(e.args[0], nav + k if name == "PREV" else nav - k, sel)
        if name in ("FIRST", "LAST"):
            if not 1 <= len(e.args) <= 2:
                raise QueryError(_at(f"{name} takes 1 or 2 arguments", e.pos))
            if sel is not None:
                raise QueryError(_at(f"{name} cannot be nested in FIRST/LAST", e.pos))
            k = offset_arg(e.args[1], f"the offset of {name}") if len(e.args) == 2 else 0
            return self.lower(e.args[0], nav, (name.lower(), k))
        if name in AGGREGATES:
            if nav or sel:
                raise QueryError(_at(f"{name} cannot be nested in navigation", e.pos))
            return self.aggregate(e)
        if name == "CLASSIFIER":
            if len(e.args) > 1 or (e.args and not isinstance(e.args[0], ex.Column)):
                raise QueryError(_at("CLASSIFIER takes no argument or one pattern variable",
                                     e.pos))
            var = self.ctx.resolve_var(e.args[0].name, e.pos) if e.args else None
            return self.classifier(var, nav, sel, e.pos)
        if name == "MATCH_NUMBER":
            if e.args:
                raise QueryError(_at("MATCH_NUMBER() takes no arguments", e.pos))
            if nav or sel is not None:
                raise QueryError(_at("MATCH_NUMBER() cannot be navigated (it is the same on "
                                     "every row of a match)", e.pos))
            return MatchNumber(pos=e.pos)
        return ex.Call(name, tuple(self.lower(a, nav, sel) for a in e.args), None, pos=e.pos)

    def classifier(self, var: str | None, nav: int, sel: tuple[str, int] | None,
                   pos: int | None) -> ex.Expr:
        """``CLASSIFIER([var])`` of the row ``sel`` picks among ``var``'s rows (None: every row
        of the running match; default: its last), moved ``nav`` rows back (PREV) or ahead
        (NEXT): the variable that row is bound to, NULL for a row outside the running match.
        The rows of a running match are consecutive, so with every row counted a move is an
        offset in the same chain; a move from one variable's row is a :class:`MovedVar`."""
        kind, k = sel if sel is not None else ("last", 0)
        if kind == "last" and k + max(nav, 0) > MAX_CONDITION_OFFSET:
            raise QueryError(_at(f"navigation of CLASSIFIER() in a condition: LAST offsets "
                                 f"and PREV moves from the last rows up to "
                                 f"{MAX_CONDITION_OFFSET} are supported", pos),
                             hint="use the offset in MEASURES, where any offset is allowed")
        own = self.own(var)
        if nav and var is not None:
            return self.moved_classifier(var, kind, k, nav, own, pos)
        if not nav:
            if kind == "last":
                if own:
                    return ex.Literal(self.var, pos=pos) if k == 0 else BoundVar("last", var,
                                                                                 k - 1)
                return BoundVar("last", var, k)
            return BoundVar("firstcur", var, k, self.var) if own else BoundVar("first", var, k)
        # every row (var None): rows are consecutive, so a move is another offset in the chain,
        # read where the row the navigation starts from exists
        if kind == "last":
            to = k + nav  # PREV goes further back, NEXT forward
            if to < 0:
                return BoundVar("none", None)  # after the current row: not matched yet
            need = k - 1 if nav < 0 and k > 0 else -1  # LAST(..., k) needs k rows before
            if to == 0:
                return BoundVar("current", None, 0, self.var, need)
            return BoundVar("last", None, to - 1, need=need)
        to = k - nav
        if to < 0:
            return BoundVar("none", None)  # before the match's first row
        if nav > 0:  # FIRST(..., k) must exist: k rows bound before the current one
            return BoundVar("first", None, to, need=k - 1)
        return BoundVar("firstcur", None, to, self.var)

    def moved_classifier(self, var: str, kind: str, k: int, nav: int, own: bool,
                         pos: int | None) -> ex.Expr:
        """``PREV``/``NEXT`` (``nav`` rows back; negative: ahead) of ``CLASSIFIER(var)`` of
        ``var``'s ``k``-th first or last row. When ``var`` covers the current row, its last row
        is the current one: ``PREV`` is then a row of every row's chain and ``NEXT`` a row not
        matched yet, and its ``k``-th last row is the ``k - 1``-th last bound one."""
        if kind == "last" and own:
            if k == 0:
                return BoundVar("last", None, nav - 1) if nav > 0 else BoundVar("none", None)
            k -= 1
        n = abs(nav)
        slots = n + 2 if kind == "first" else (k + 1) * (n + 1) if nav < 0 else k + n + 2
        if slots > MAX_MOVED_SLOTS:
            raise QueryError(_at(f"{'PREV' if nav > 0 else 'NEXT'} of CLASSIFIER({var}) at "
                                 f"these offsets in a condition keeps {slots} state slots per "
                                 f"running match; at most {MAX_MOVED_SLOTS} are supported", pos),
                             hint="use smaller offsets, or the navigation in MEASURES")
        return MovedVar(kind, var, k, nav, self.var, own)

    def aggregate(self, e: ex.Call) -> ex.Expr:
        if len(e.args) != 1:
            raise QueryError(_at(f"{e.name} takes one argument", e.pos))
        if e.distinct:
            raise QueryError(_at(f"{e.name}(DISTINCT ...) in a condition is not supported: a "
                                 "running match keeps no set of values", e.pos),
                             hint="use COUNT(DISTINCT ...) in MEASURES")
        a = e.args[0]
        if isinstance(a, ex.Star):
            if e.name != "COUNT":
                raise QueryError(_at(f"{e.name}(*) is not allowed", e.pos))
            return Rows(None, True)
        if not isinstance(a, ex.Column):
            return self.expression_aggregate(e.name, a, e.pos)
        var = self.ctx.resolve_var(a.qualifier, a.pos) if a.qualifier is not None else None
        excl = a.index is not None and a.index[0] == "all_prev"
        include = self.own(var) and not excl
        if a.name == "*":
            if e.name != "COUNT":
                raise QueryError(_at(f"{e.name}({a.qualifier}.*) is not allowed", e.pos))
            return Rows(var, include)
        col = self.ctx.resolve_column(a.name, a.pos)
        return Agg(e.name, var, col, include)

    def column(self, c: ex.Column, nav: int, sel: tuple[str, int] | None) -> ex.Expr:
        if c.name == "*":
            raise QueryError(_at(f"{c.qualifier}.* is only allowed in COUNT", c.pos))
        if c.index is not None and c.index[0] == "all_prev":
            raise QueryError(_at("x[..i-1] is only allowed inside an aggregate", c.pos))
        var = self.ctx.resolve_var(c.qualifier, c.pos) if c.qualifier is not None else None
        col = self.ctx.resolve_column(c.name, c.pos)
        own = self.own(var)
        kind, k = sel if sel is not None else ("last", 0)
        if kind == "last" and k > MAX_CONDITION_OFFSET:
            raise QueryError(_at(f"LAST(..., {k}) in a condition: offsets up to "
                                 f"{MAX_CONDITION_OFFSET} are supported", c.pos),
                             hint="use the offset in MEASURES, where any offset is allowed")
        if kind == "last":
            if own:  # the current row is the running match's last row of the variable
                return self._cur(col, nav) if k == 0 else self._bound("last", var, col, nav,
                                                                      k - 1)
            return self._bound("last", var, col, nav, k)
        return self._bound("firstcur" if own else "first", var, col, nav, k)

    def expression_aggregate(self, fn: str, arg: ex.Expr, pos: int | None) -> ex.Expr:
        """``SUM(A.price * 2)`` and the like: the expression's value on each row becomes a
        derived column (:attr:`LowerContext.derived`) aggregated like a column. Its columns must
        all be of one variable (or none: every row), as SQL:2016 asks; no navigation,
        aggregate, CLASSIFIER() or MATCH_NUMBER() inside."""
        var = aggregated_variable(fn, arg, self.ctx, pos)
        row_expr = _unqualified(arg, self.ctx)
        key = (row_expr, fn == "COUNT")
        name = next((n for n, v in self.ctx.derived.items() if v == key), None)
        if name is None:
            name = f"\x00expr{len(self.ctx.derived)}"
            self.ctx.derived[name] = key
        return Agg(fn, var, name, self.own(var))

    def own(self, var: str | None) -> bool:
        """Whether ``var`` (None: every row) covers the row being bound to this variable."""
        members = self.ctx.members(var)
        return members is None or self.var in members

    def _cur(self, col: str, nav: int) -> ex.Expr:
        if nav:
            self.ctx.navs.add((col, nav))
        return Cur(col, nav)

    def _bound(self, kind: str, var: str | None, col: str, nav: int, k: int = 0) -> ex.Expr:
        if nav:
            self.ctx.navs.add((col, nav))
        return Bound(kind, var, col, nav, k)


def aggregated_variable(fn: str, arg: ex.Expr, ctx: LowerContext, pos: int | None) -> str | None:
    """The one variable whose rows an aggregate over the expression ``arg`` covers (None: every
    row), checking SQL:2016's rules: plain columns, all of one variable, no navigation,
    aggregate, CLASSIFIER() or MATCH_NUMBER() inside (QueryErrors naming the position)."""
    variables: set[str | None] = set()
    for x in arg.walk():
        if isinstance(x, ex.Column):
            if x.name == "*" or x.index is not None:
                raise QueryError(_at(f"{fn} over an expression takes plain columns", x.pos))
            variables.add(None if x.qualifier is None else ctx.resolve_var(x.qualifier, x.pos))
        elif isinstance(x, ex.Star):
            raise QueryError(_at(f"'*' is not allowed inside {fn}(...)", x.pos))
        elif isinstance(x, ex.Call) and (x.name in AGGREGATES or x.name in NAVIGATION
                                         or x.name in ("CLASSIFIER", "MATCH_NUMBER")):
            raise QueryError(_at(f"{x.name} cannot be nested in {fn}", x.pos))
    if len(variables) > 1:
        named = ", ".join(sorted(v or "(none)" for v in variables))
        raise QueryError(_at(f"the columns inside {fn}(...) must all be of one pattern "
                             f"variable, not {named}", pos))
    return next(iter(variables), None)


def _unqualified(e: ex.Expr, ctx: LowerContext) -> ex.Expr:
    """``e`` with every column reference unqualified and resolved against the schema."""
    if isinstance(e, ex.Column):
        return ex.Column(ctx.resolve_column(e.name, e.pos))
    return ex.map_children(e, lambda x: _unqualified(x, ctx))


ROW_FUNCTIONS = ("LOWER", "UPPER")
"""Functions a cross-event condition reads as derived per-row columns (the pattern machine holds
strings as codes and computes no string function)."""


def derive_row_functions(e: ex.Expr, ctx: LowerContext) -> ex.Expr:
    """A lowered cross-event condition with every :data:`ROW_FUNCTIONS` call over one row's
    columns (``LOWER(A.name)``, ``UPPER(PREV(name))``) replaced by a read of that row's derived
    column holding the call's value (:attr:`LowerContext.row_functions`), so ``LOWER(A.name) =
    B.name`` compares string codes; a call mixing rows stays (and is refused by the machine).
    O(size of the condition)."""
    if isinstance(e, ex.Call) and e.name in ROW_FUNCTIONS and e.qualifier is None:
        leaves = [n for n in e.walk() if isinstance(n, Cur | Bound)]
        if not leaves and all(isinstance(n, ex.Call | ex.Literal) for n in e.walk()):
            value = ex.compile_expr(e)(ex.ColumnsEnv({}))  # LOWER('X'): a constant
            return ex.Literal(None if value is None else str(value), pos=e.pos)
        selectors = {_row_of(n) for n in leaves}
        if len(selectors) == 1 and not any(
                isinstance(n, Agg | Rows | MatchNumber | BoundVar | MovedVar) for n in e.walk()):
            body = _on_row(e)
            name = next((k for k, v in ctx.row_functions.items() if v == body), None)
            if name is None:
                name = f"\x00fn{len(ctx.row_functions)}"
                ctx.row_functions[name] = body
            leaf = leaves[0]
            if isinstance(leaf, Cur):
                return Cur(name, leaf.nav)
            return Bound(leaf.kind, leaf.var, name, leaf.nav, leaf.k)
    return ex.map_children(e, lambda x: derive_row_functions(x, ctx))


ORDERINGS = ("<", "<=", ">", ">=")


def order_strings(e: ex.Expr, ctx: LowerContext) -> ex.Expr:
    """A lowered cross-event condition with every ordering of strings (``A.name < B.name``,
    ``B.name BETWEEN A.name AND 'm'``) made an ordering of their order keys: each string column
    read becomes a read of its order-key column, each string literal a constant column of its
    key (:attr:`LowerContext.order_columns`; the keys keep the strings' order,
    :class:`~replaydb.operators.pattern.strings.OrderKeys`). Other comparisons are unchanged.
    O(size of the condition)."""
    if isinstance(e, ex.Binary) and e.op in ORDERINGS:
        sides = (e.left, e.right)
        if any(_is_string(x, ctx) for x in sides) and all(_orderable(x, ctx) for x in sides):
            return ex.Binary(e.op, _keyed(e.left, ctx), _keyed(e.right, ctx), pos=e.pos)
    if isinstance(e, ex.Between):
        parts = (e.operand, e.low, e.high)
        if any(_is_string(x, ctx) for x in parts) and all(_orderable(x, ctx) for x in parts):
            return ex.Between(*(_keyed(x, ctx) for x in parts), e.negated, pos=e.pos)
    return ex.map_children(e, lambda x: order_strings(x, ctx))


def _is_string(e: ex.Expr, ctx: LowerContext) -> bool:
    """A string literal, or a read of a string column (a string function's derived one too)."""
    if isinstance(e, ex.Literal):
        return isinstance(e.value, str)
    return isinstance(e, Cur | Bound) and ctx.kind(e.col) == "s"


def _orderable(e: ex.Expr, ctx: LowerContext) -> bool:
    """A string column read or a string literal (what order keys stand for)."""
    return _is_string(e, ctx) or (isinstance(e, ex.Literal) and e.value is None)


def _keyed(e: ex.Expr, ctx: LowerContext) -> ex.Expr:
    if isinstance(e, ex.Literal):
        if e.value is None:
            return e
        name = f"\x00key'{e.value}"
        ctx.order_columns[name] = (None, str(e.value))
        return Cur(name, 0)
    assert isinstance(e, Cur | Bound)
    name = f"\x00key:{e.col}"
    ctx.order_columns[name] = (e.col, None)
    if isinstance(e, Cur):
        return Cur(name, e.nav)
    return Bound(e.kind, e.var, name, e.nav, e.k)


def _row_of(leaf: Cur | Bound) -> tuple[object, ...]:
    """Which row a leaf reads (its column aside)."""
    if isinstance(leaf, Cur):
        return ("cur", leaf.nav)
    return ("bound", leaf.kind, leaf.var, leaf.nav, leaf.k)


def _on_row(e: ex.Expr) -> ex.Expr:
    """``e`` with its row's column reads as plain column references (the row is implied)."""
    if isinstance(e, Cur | Bound):
        return ex.Column(e.col)
    return ex.map_children(e, _on_row)


def is_local(e: ex.Expr) -> bool:
    """True if a lowered expression refers only to the current event."""
    return not any(isinstance(n, Bound | BoundVar | MovedVar | Agg | Rows | MatchNumber)
                   for n in e.walk())


def nav_name(col: str, nav: int) -> str:
    """Name of the derived column holding ``col`` ``nav`` rows back in the partition."""
    return col if nav == 0 else f"{col}\x00prev{nav}"


def to_batch_expr(e: ex.Expr) -> ex.Expr:
    """Turn a local lowered expression into an ordinary expression over batch columns."""
    if isinstance(e, Cur):
        return ex.Column(nav_name(e.col, e.nav))
    if isinstance(e, Bound | BoundVar | MovedVar | Agg | Rows | MatchNumber):  # none are local
        raise QueryError(f"cannot evaluate {type(e).__name__} over a batch")  # pragma: no cover
    return ex.map_children(e, to_batch_expr)
