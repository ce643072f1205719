"""Predicate and value expressions: one AST for every query language, compiled to NumPy.

User-written predicates are never ``eval``-ed and never pasted into SQL. The parsers in
``replaydb.planner.lang`` build these nodes; :func:`compile_expr` turns a tree into a closure tree
once, and each call of the result evaluates the whole expression vectorized over NumPy arrays.

What a name means is up to the operator that evaluates it. Evaluation goes through an *environment*
(anything with :meth:`Env.column` and, optionally, :meth:`Env.call`): the pattern matcher maps
``A.price`` to the bound event's value (a scalar or an array over partial matches), a filter maps
``price`` to a batch column, GRETA maps ``NEXT(S).price`` to the next event's value. Values
broadcast with NumPy rules, so one compiled predicate can run over a batch of events or over a
batch of partial matches.

Semantics (documented decisions):

* Nulls are NaN (floats) or None (strings). Every comparison involving a null is False, and NOT of
  such a comparison is True (two-valued logic, as the filter operator of the dissertation assumes,
  Def 2.10) - not SQL's three-valued logic.
* ``/`` is true division (float); ``%`` is floor modulo (NumPy's ``remainder``, Python's ``%``:
  the result has the divisor's sign) on integers and floats alike; division by zero gives +-inf
  or NaN and ``x % 0`` NULL, never an exception (so a bad row cannot abort a replay).
* The compiled evaluators (pattern conditions across events, GRETA edge predicates, the GPU
  filter and join) share one typed form and one definition of these scalar semantics
  (:mod:`replaydb.operators.exprcode`); this module is the reference they are tested against.
* ``=`` on strings is exact, case-sensitive equality.

Complexity: compiling is O(size of the tree); evaluating is O(size of the tree x length of the
broadcast arrays), entirely inside NumPy.
"""

from __future__ import annotations

import operator as _op
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

import numpy as np

from replaydb.errors import QueryError


class ExprError(QueryError):
    """A semantic error in an expression (unknown column, wrong argument count, ...).

    ``pos`` is the 0-based offset of the offending node in the query text, when known.
    """

    def __init__(self, message: str, pos: int | None = None, *, hint: str | None = None) -> None:
        super().__init__(message if pos is None else f"{message} (at position {pos})", hint=hint)
        self.pos = pos
        self.reason = message


# --------------------------------------------------------------------------- nodes
@dataclass(frozen=True)
class Expr:
    """Base node. ``pos`` is the node's offset in the query text (not part of equality)."""

    def children(self) -> tuple[Expr, ...]:
        return ()

    def walk(self) -> Iterator[Expr]:
        """All nodes of the tree, pre-order."""
        yield self
        for c in self.children():
            yield from c.walk()

    def __str__(self) -> str:
        return to_text(self)


@dataclass(frozen=True)
class Literal(Expr):
    value: Any
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Column(Expr):
    """A column reference ``[qualifier.]name``; ``index`` is a language-specific subscript.

    Examples: ``price`` (name only), ``A.price`` (pattern variable A), ``b[i-1].price`` (SASE+
    Kleene element, ``index=("prev", 1)``), ``b[1].price`` (``index=("abs", 1)``),
    ``b[b.len].price`` (``index=("last", 0)``).
    """

    name: str
    qualifier: str | None = None
    index: tuple[str, int] | None = None
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "neg" | "not"
    operand: Expr
    pos: int | None = field(default=None, compare=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Binary(Expr):
    op: str  # + - * / % = != < <= > >= and or
    left: Expr
    right: Expr
    pos: int | None = field(default=None, compare=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Between(Expr):
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False
    pos: int | None = field(default=None, compare=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.operand, self.low, self.high)


@dataclass(frozen=True)
class InList(Expr):
    operand: Expr
    values: tuple[Expr, ...]
    negated: bool = False
    pos: int | None = field(default=None, compare=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.operand, *self.values)


@dataclass(frozen=True)
class IsNull(Expr):
    operand: Expr
    negated: bool = False
    pos: int | None = field(default=None, compare=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Call(Expr):
    """A function call; ``name`` is upper-case. ``qualifier`` holds a RUNNING/FINAL prefix;
    ``distinct``: an aggregate over the distinct values of its argument (``COUNT(DISTINCT x)``,
    parsed where a language allows it)."""

    name: str
    args: tuple[Expr, ...] = ()
    qualifier: str | None = None
    pos: int | None = field(default=None, compare=False)
    distinct: bool = False

    def children(self) -> tuple[Expr, ...]:
        return self.args


@dataclass(frozen=True)
class Star(Expr):
    """``*`` as in ``COUNT(*)``."""

    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TimeLiteral(Expr):
    """``TIMESTAMP '2001-03-01 08:00'`` or ``DATE '2001-03-01'`` as written (``kind`` is
    ``TIMESTAMP`` or ``DATE``). Its value depends on the stream's time unit and the query's time
    zone, so the planner replaces it by the instant's integer :class:`Literal` before anything
    evaluates it; an operator given one directly refuses it."""

    kind: str
    text: str
    pos: int | None = field(default=None, compare=False)


TRUE = Literal(True)


# --------------------------------------------------------------------------- helpers
def map_children(e: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """``e`` with ``fn`` applied to each of its direct child expressions (every other field,
    positions included, kept); ``e`` itself when it has none. O(children)."""
    changes: dict[str, Any] = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            changes[f.name] = fn(v)
        elif isinstance(v, tuple) and v and all(isinstance(x, Expr) for x in v):
            changes[f.name] = tuple(fn(x) for x in v)
    return replace(e, **changes) if changes else e


def conjuncts(expr: Expr | None) -> list[Expr]:
    """Split a predicate at top-level ANDs (``None`` -> ``[]``)."""
    if expr is None:
        return []
    if isinstance(expr, Binary) and expr.op == "and":
        return conjuncts(expr.left) + conjuncts(expr.right)
    if isinstance(expr, Literal) and expr.value is True:
        return []
    return [expr]


def and_all(parts: list[Expr]) -> Expr:
    """AND of ``parts`` (``TRUE`` when empty)."""
    if not parts:
        return TRUE
    out = parts[0]
    for p in parts[1:]:
        out = Binary("and", out, p)
    return out


def columns(expr: Expr | None) -> list[Column]:
    """Every column reference in the tree, in order."""
    if expr is None:
        return []
    return [n for n in expr.walk() if isinstance(n, Column)]


def qualifiers(expr: Expr | None) -> set[str]:
    """The set of qualifiers (pattern variables, situation names) referenced."""
    return {c.qualifier for c in columns(expr) if c.qualifier is not None}


# --------------------------------------------------------------------------- printing
_PREC = {"or": 1, "and": 2, "not": 3, "=": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
         "+": 5, "-": 5, "*": 6, "/": 6, "%": 6, "neg": 7}


def to_text(e: Expr, parent_prec: int = 0) -> str:
    """SQL-like text of an expression (for EXPLAIN and error messages)."""
    if isinstance(e, Literal):
        if isinstance(e.value, str):
            return "'" + e.value.replace("'", "''") + "'"
        if e.value is None:
            return "NULL"
        if isinstance(e.value, bool):
            return "TRUE" if e.value else "FALSE"
        return repr(e.value)
    if isinstance(e, Column):
        s = e.name
        if e.qualifier is not None:
            q = e.qualifier
            if e.index is not None and e.index[0] == "next":  # GRETA's NEXT(E).attr
                return f"NEXT({q}).{e.name}"
            if e.index is not None:
                kind, k = e.index
                sub = {"prev": f"i-{k}", "abs": str(k), "last": f"{q}.len", "current": "i",
                       "all_prev": "..i-1"}.get(kind, f"{kind}{k}")
                q = f"{q}[{sub}]"
            s = f"{q}.{e.name}"
        return s
    if isinstance(e, Star):
        return "*"
    if isinstance(e, TimeLiteral):
        return f"{e.kind} '{e.text}'"
    if isinstance(e, Unary):
        if e.op == "not":
            s = f"NOT {to_text(e.operand, _PREC['not'])}"
            prec = _PREC["not"]
        else:
            s = f"-{to_text(e.operand, _PREC['neg'])}"
            prec = _PREC["neg"]
        return f"({s})" if prec < parent_prec else s
    if isinstance(e, Binary):
        prec = _PREC[e.op]
        op = {"and": "AND", "or": "OR"}.get(e.op, e.op)
        s = f"{to_text(e.left, prec)} {op} {to_text(e.right, prec + 1)}"
        return f"({s})" if prec < parent_prec else s
    if isinstance(e, Between):
        s = (f"{to_text(e.operand, 5)} {'NOT ' if e.negated else ''}BETWEEN "
             f"{to_text(e.low, 5)} AND {to_text(e.high, 5)}")
        return f"({s})" if 4 < parent_prec else s
    if isinstance(e, InList):
        vals = ", ".join(to_text(v) for v in e.values)
        s = f"{to_text(e.operand, 5)} {'NOT ' if e.negated else ''}IN ({vals})"
        return f"({s})" if 4 < parent_prec else s
    if isinstance(e, IsNull):
        s = f"{to_text(e.operand, 5)} IS {'NOT ' if e.negated else ''}NULL"
        return f"({s})" if 4 < parent_prec else s
    if isinstance(e, Call):
        q = f"{e.qualifier} " if e.qualifier else ""
        d = "DISTINCT " if e.distinct else ""
        return f"{q}{e.name}({d}{', '.join(to_text(a) for a in e.args)})"
    raise TypeError(f"unknown node {e!r}")  # pragma: no cover


# --------------------------------------------------------------------------- evaluation
class Env(Protocol):
    """What a compiled expression asks its environment for."""

    def column(self, ref: Column) -> Any:
        """Value(s) of a column reference: a NumPy array or a scalar."""

    def call(self, node: Call, args: list[Any]) -> Any:
        """Value(s) of a function the core does not know (navigation, aggregates, ...)."""


Compiled = Callable[[Env], Any]


_PLAIN_KINDS = frozenset("biuf")


def _plain(v: Any) -> bool:
    """A numeric NumPy array or a Python/NumPy number: compared without object semantics."""
    if isinstance(v, np.ndarray):
        return v.dtype.kind in _PLAIN_KINDS
    return isinstance(v, (int, float, np.number)) and not isinstance(v, bool)


def _nan_safe_cmp(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def cmp(a: Any, b: Any) -> Any:
        if _plain(a) and _plain(b):
            # NumPy compares numbers (NaN included) without floating-point warnings: no
            # errstate context (it costs more than comparing a small batch)
            return fn(a, b)
        nulls = _null_of(a) | _null_of(b)
        if np.any(nulls):  # NULL orders with nothing: compare a stand-in, then false there
            a, b = _without_nulls(a), _without_nulls(b)
        with np.errstate(invalid="ignore"):
            r = fn(a, b)
        if isinstance(r, np.ndarray) and r.dtype == object:
            r = r.astype(bool)
        if np.any(nulls):
            r = np.logical_and(r, np.logical_not(nulls))
        return r

    return cmp


def _null_of(v: Any) -> Any:
    """Where ``v`` (an object array or a scalar) is None (a NULL string)."""
    if isinstance(v, np.ndarray):
        return _none_mask(v)
    return v is None


def _without_nulls(v: Any) -> Any:
    """``v`` with None replaced by the empty string (its results are masked out)."""
    if isinstance(v, np.ndarray):
        return np.where(_none_mask(v), "", v) if v.dtype == object else v
    return "" if v is None else v


def _obj_eq(a: Any, b: Any) -> Any:
    r = _op.eq(a, b)
    if _plain(a) and _plain(b):
        return r
    if isinstance(r, np.ndarray) and r.dtype == object:
        r = r.astype(bool)
    if a is None or b is None:  # = NULL: false, like every comparison with NULL
        return r & False
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):  # NULL = NULL row by row
        return r & ~(_none_mask(a) | _none_mask(b))
    return r  # a NULL row never equals a non-null scalar


def _none_mask(v: np.ndarray) -> np.ndarray:
    """Where an object array holds None (one comparison per row, in C)."""
    if v.dtype != object:
        return np.zeros(v.shape, bool)
    return np.asarray(v == None, dtype=bool)  # noqa: E711 - elementwise, not identity


def _div(a: Any, b: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b)


def _mod(a: Any, b: Any) -> Any:
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    if np.issubdtype(a_arr.dtype, np.integer) and np.issubdtype(b_arr.dtype, np.integer):
        with np.errstate(divide="ignore", invalid="ignore"):
            safe = np.where(b_arr == 0, 1, b_arr)
            r = np.mod(a_arr, safe)
            if np.any(b_arr == 0):
                r = np.where(b_arr == 0, np.nan, r)
            return r if r.ndim else r[()]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mod(a, b)


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": _div,
    "%": _mod,
    "=": _nan_safe_cmp(_obj_eq),
    "!=": _nan_safe_cmp(lambda a, b: np.logical_not(_obj_eq(a, b)) & ~(_isnull(a) | _isnull(b))),
    "<": _nan_safe_cmp(_op.lt),
    "<=": _nan_safe_cmp(_op.le),
    ">": _nan_safe_cmp(_op.gt),
    ">=": _nan_safe_cmp(_op.ge),
}


def _isnull(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        if v.dtype == object:
            return np.array([x is None or (isinstance(x, float) and x != x) for x in v], bool)
        if np.issubdtype(v.dtype, np.floating):
            return np.isnan(v)
        return np.zeros(v.shape, bool)
    if v is None:
        return True
    if isinstance(v, float | np.floating):
        return bool(np.isnan(v))
    return False


def _as_bool(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        if v.dtype == bool:
            return v
        if np.issubdtype(v.dtype, np.floating):
            return np.nan_to_num(v, nan=0.0) != 0
        return v.astype(bool)
    if v is None:
        return False
    if isinstance(v, float) and v != v:
        return False
    return bool(v)


def _scalar_fn(fn: Callable[..., Any], arity: int | tuple[int, int]) -> tuple[Callable, tuple[int, int]]:
    """A builtin with its arity; a domain error (``LN(-1)``, ``SQRT(-1)``) is NaN, silently."""

    def quiet(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args)

    return quiet, (arity, arity) if isinstance(arity, int) else arity


def _round(x: Any, nd: Any = 0) -> Any:
    return np.round(x, int(nd))


def _case_mapped(x: Any, kernel: str, str_fn: Callable[[str], str]) -> Any:
    """LOWER/UPPER: NULL stays NULL (SQL); arrays through Arrow's UTF-8 ``kernel``
    (vectorized), an object array with None for NULL."""
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            return _case_mapped(x.item(), kernel, str_fn)
        import pyarrow as pa
        import pyarrow.compute as pc

        arr = pa.array(x.astype(object), type=pa.string(), from_pandas=True)
        return np.asarray(pc.call_function(kernel, [arr]).to_numpy(zero_copy_only=False),
                          dtype=object)
    return None if x is None else str_fn(str(x))


def _lower(x: Any) -> Any:
    return _case_mapped(x, "utf8_lower", str.lower)


def _upper(x: Any) -> Any:
    return _case_mapped(x, "utf8_upper", str.upper)


BUILTINS: dict[str, tuple[Callable[..., Any], tuple[int, int]]] = {
    "ABS": _scalar_fn(np.abs, 1),
    "SQRT": _scalar_fn(lambda x: np.sqrt(np.asarray(x, dtype=float)), 1),
    "LN": _scalar_fn(lambda x: np.log(np.asarray(x, dtype=float)), 1),
    "LOG10": _scalar_fn(lambda x: np.log10(np.asarray(x, dtype=float)), 1),
    "EXP": _scalar_fn(lambda x: np.exp(np.asarray(x, dtype=float)), 1),
    "FLOOR": _scalar_fn(np.floor, 1),
    "CEIL": _scalar_fn(np.ceil, 1),
    "ROUND": _scalar_fn(_round, (1, 2)),
    "POWER": _scalar_fn(lambda a, b: np.power(np.asarray(a, dtype=float), b), 2),
    "LEAST": _scalar_fn(lambda *a: np.minimum.reduce(np.broadcast_arrays(*a)), (1, 64)),
    "GREATEST": _scalar_fn(lambda *a: np.maximum.reduce(np.broadcast_arrays(*a)), (1, 64)),
    "LOWER": _scalar_fn(_lower, 1),
    "UPPER": _scalar_fn(_upper, 1),
}
"""Row-wise functions every language understands (case-insensitive names)."""


def compile_expr(expr: Expr) -> Compiled:
    """Compile ``expr`` once into a function ``f(env) -> value(s)`` (see module docstring)."""
    if isinstance(expr, Literal):
        v = expr.value
        return lambda env: v
    if isinstance(expr, Column):
        ref = expr
        return lambda env: env.column(ref)
    if isinstance(expr, Unary):
        inner = compile_expr(expr.operand)
        if expr.op == "not":
            return lambda env: np.logical_not(_as_bool(inner(env)))
        if expr.op == "neg":
            return lambda env: np.negative(inner(env))
        raise ExprError(f"unknown unary operator {expr.op!r}", expr.pos)
    if isinstance(expr, Binary):
        left, right = compile_expr(expr.left), compile_expr(expr.right)
        if expr.op == "and":
            return lambda env: np.logical_and(_as_bool(left(env)), _as_bool(right(env)))
        if expr.op == "or":
            return lambda env: np.logical_or(_as_bool(left(env)), _as_bool(right(env)))
        fn = _BINARY.get(expr.op)
        if fn is None:
            raise ExprError(f"unknown operator {expr.op!r}", expr.pos)
        return lambda env: fn(left(env), right(env))
    if isinstance(expr, Between):
        x, lo, hi = compile_expr(expr.operand), compile_expr(expr.low), compile_expr(expr.high)
        ge, le = _BINARY[">="], _BINARY["<="]
        neg = expr.negated

        def between(env: Env) -> Any:
            v = x(env)
            r = np.logical_and(ge(v, lo(env)), le(v, hi(env)))
            return np.logical_and(np.logical_not(r), np.logical_not(_isnull(v))) if neg else r

        return between
    if isinstance(expr, InList):
        x = compile_expr(expr.operand)
        vals = [compile_expr(v) for v in expr.values]
        eq = _BINARY["="]
        neg = expr.negated

        def in_list(env: Env) -> Any:
            v = x(env)
            r: Any = False
            for c in vals:
                r = np.logical_or(r, eq(v, c(env)))
            return np.logical_and(np.logical_not(r), np.logical_not(_isnull(v))) if neg else r

        return in_list
    if isinstance(expr, IsNull):
        x = compile_expr(expr.operand)
        neg = expr.negated
        return (lambda env: np.logical_not(_isnull(x(env)))) if neg else (lambda env: _isnull(x(env)))
    if isinstance(expr, Call):
        args = [compile_expr(a) for a in expr.args]
        builtin = BUILTINS.get(expr.name)
        if builtin is not None and expr.qualifier is None:
            fn, (lo_n, hi_n) = builtin
            if not lo_n <= len(args) <= hi_n:
                raise ExprError(
                    f"{expr.name} takes {lo_n if lo_n == hi_n else f'{lo_n}-{hi_n}'} "
                    f"argument(s), got {len(args)}",
                    expr.pos,
                )
            return lambda env: fn(*[a(env) for a in args])
        node = expr
        return lambda env: env.call(node, [a(env) for a in args])
    if isinstance(expr, Star):
        raise ExprError("'*' is only allowed inside COUNT(*)", expr.pos)
    if isinstance(expr, TimeLiteral):
        raise ExprError(f"{expr.kind} '{expr.text}' needs a stream's time unit: run the query "
                        "through the planner (replaydb.query)", expr.pos)
    raise ExprError(f"cannot compile {type(expr).__name__}")  # pragma: no cover


def compile_predicate(expr: Expr | None) -> Callable[[Env], Any]:
    """Like :func:`compile_expr` but the result is coerced to booleans (``None`` -> always True)."""
    if expr is None:
        return lambda env: True
    f = compile_expr(expr)
    return lambda env: _as_bool(f(env))


class ColumnsEnv:
    """Environment over a mapping of column name -> NumPy array (a batch of events).

    Unqualified names and names qualified by any of ``aliases`` resolve to the batch's columns.
    """

    def __init__(self, cols: dict[str, np.ndarray], aliases: frozenset[str] = frozenset()) -> None:
        self.cols = cols
        self.aliases = aliases

    def column(self, ref: Column) -> Any:
        if ref.qualifier is not None and ref.qualifier not in self.aliases:
            raise ExprError(f"unknown qualifier {ref.qualifier!r}", ref.pos)
        try:
            return self.cols[ref.name]
        except KeyError:
            raise ExprError(
                f"unknown column {ref.name!r}", ref.pos,
                hint=f"columns are: {', '.join(sorted(self.cols))}",
            ) from None

    def call(self, node: Call, args: list[Any]) -> Any:
        raise ExprError(f"unknown function {node.name}", node.pos)


def evaluate_mask(expr: Expr | None, cols: dict[str, np.ndarray], n: int,
                  aliases: frozenset[str] = frozenset()) -> np.ndarray:
    """Evaluate a predicate over a batch of ``n`` events; returns a bool array of length ``n``."""
    r = compile_predicate(expr)(ColumnsEnv(cols, aliases))
    return np.broadcast_to(np.asarray(r, dtype=bool), (n,)).copy()
