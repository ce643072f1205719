"""Type checking of pattern conditions (DEFINE, SASE+ WHERE) when a query is bound.

Every conjunct, after lowering, is checked by
:func:`~replaydb.operators.exprcode.check.check_condition` with the kinds of the lowered leaves:
the current or a bound event's column, a running aggregate (COUNT an integer, AVG a float, SUM,
MIN, MAX the column's kind; over a string column only COUNT), a row count or MATCH_NUMBER() (an
integer). The conjuncts over the
current event alone run in the vectorized evaluator, the others in the pattern machine; both see
only what this check accepts. O(size of the condition).
"""

from __future__ import annotations

import pyarrow as pa

from replaydb.errors import QueryError
from replaydb.operators.expr import Expr
from replaydb.operators.exprcode.check import check_condition as check_typed
from replaydb.operators.exprcode.check import column_kind
from replaydb.operators.pattern.lowering import (
    Agg,
    Bound,
    BoundVar,
    Cur,
    LowerContext,
    MatchNumber,
    MovedVar,
    Rows,
)


def check_condition(lowered: Expr, schema: pa.Schema, pos: int | None,
                    ctx: LowerContext | None = None) -> None:
    """Raise a QueryError unless ``lowered``, one lowered conjunct of a variable's condition
    over ``schema``, is a well-typed condition; the error names the position of the offending
    node, else ``pos`` (the conjunct's, as written). ``ctx``: the lowering's context, which
    knows the derived columns (an aggregate's argument, numeric and checked when computed; a
    string function's value; an order key: :meth:`LowerContext.kind`)."""
    derived = ctx.derived if ctx is not None else {}

    def kind_of(e: Expr) -> str:
        if isinstance(e, Cur | Bound):
            return ctx.kind(e.col) if ctx is not None else column_kind(schema, e.col)
        if isinstance(e, Agg) and e.col in derived:
            return "i" if e.fn == "COUNT" else "f"
        if isinstance(e, Agg):
            kind = column_kind(schema, e.col)
            if kind == "s" and e.fn != "COUNT":
                raise QueryError(f"{e.fn} over the string column {e.col!r} is not allowed"
                                 + ("" if pos is None else f" (at position {pos})"))
            return "f" if e.fn == "AVG" else ("i" if e.fn == "COUNT" else kind)
        if isinstance(e, Rows | MatchNumber):
            return "i"
        if isinstance(e, BoundVar | MovedVar):
            return "s"
        raise QueryError(f"unsupported expression in a condition: {type(e).__name__}")

    check_typed(lowered, kind_of, pos)
