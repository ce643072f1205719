"""Type checking of pattern conditions when a query is bound.

Every conjunct of a DEFINE (MATCH_RECOGNIZE) or WHERE (SASE+) condition is checked, after
lowering, with the rules of the typed expression form
(:mod:`replaydb.operators.exprcode.typed`): a condition must be a truth value (a string is
refused), a string compares only with a string, arithmetic needs numbers, functions must exist.
The conjuncts that refer to other events are compiled into the pattern machine under the same
rules; the ones over the current event alone are evaluated by the vectorized evaluator, which
would otherwise coerce (a non-empty string counted as true) - this check makes both paths accept
the same queries. Errors are QueryErrors naming the position. O(size of the condition).
"""

from __future__ import annotations

import pyarrow as pa

from replaydb.errors import QueryError
from replaydb.operators.expr import Call, Expr
from replaydb.operators.exprcode import opcodes as oc
from replaydb.operators.exprcode.typed import Typed, type_condition, type_expr
from replaydb.operators.pattern.lowering import Agg, Bound, Cur, Rows

_STRING_FUNCTIONS = ("LOWER", "UPPER")
"""Functions over strings that the vectorized evaluator runs (the typed form's core has the
numeric ones)."""


def is_string_type(t: pa.DataType) -> bool:
    """Whether values of Arrow type ``t`` are strings (dictionary-encoded ones included)."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def column_kind(schema: pa.Schema, name: str) -> str:
    """The kind of column ``name`` in the typed form: 's', 'b', 'i' (integers and times), 'f'."""
    t = schema.field(name).type
    if is_string_type(t):
        return "s"
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return "b"
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        return "i"
    return "f"


class _KindScope:
    """The typed form's scope for checking only: the kinds of the lowered leaves, no code."""

    float_domain = True
    ordered_strings = True
    boolean_conditions = True

    def __init__(self, schema: pa.Schema, pos: int | None) -> None:
        self.schema = schema
        self.pos = pos

    def leaf(self, e: Expr) -> Typed:
        if isinstance(e, Cur | Bound):
            return Typed(oc.LDF, column_kind(self.schema, e.col), "F")
        if isinstance(e, Agg):
            kind = column_kind(self.schema, e.col)
            if kind == "s" and e.fn != "COUNT":
                raise self.error(f"{e.fn} over the string column {e.col!r}", e)
            kind = "f" if e.fn == "AVG" else ("i" if e.fn == "COUNT" else kind)
            return Typed(oc.LDF, kind, "F")
        if isinstance(e, Rows):
            return Typed(oc.LDF, "i", "F")
        raise self.error(f"the expression {type(e).__name__}", e)  # pragma: no cover

    def string(self, value: str, e: Expr) -> Typed:
        return Typed(oc.CF, "s", "F")

    def call(self, e: Call) -> Typed:
        if e.name in _STRING_FUNCTIONS:
            if len(e.args) != 1:
                raise self.error(f"{e.name} with {len(e.args)} arguments", e)
            arg = type_expr(e.args[0], self)
            if arg.kind != "s":
                raise self.error(f"{e.name} of a non-string value", e)
            return Typed(oc.CF, "s", "F")
        raise QueryError(_at(f"unknown function {e.name}", self.pos if e.pos is None else e.pos))

    def error(self, message: str, e: Expr) -> Exception:
        pos = getattr(e, "pos", None)
        return QueryError(_at(f"{message} is not allowed", self.pos if pos is None else pos))


def check_condition(lowered: Expr, schema: pa.Schema, pos: int | None) -> None:
    """Raise a QueryError unless ``lowered``, one lowered conjunct of a variable's condition
    over ``schema``, is a well-typed condition; the error names the position of the offending
    node, else ``pos`` (the conjunct's, as written)."""
    type_condition(lowered, _KindScope(schema, pos))


def _at(msg: str, pos: int | None) -> str:
    return msg if pos is None else f"{msg} (at position {pos})"
