"""Type checking of a condition when a query is bound, the same for every language.

:func:`check_condition` applies the typed expression form's rules
(:mod:`replaydb.operators.exprcode.typed`) to a condition without compiling it: the condition,
and every operand of AND, OR and NOT, must be a boolean (or NULL); strings compare with strings
only; arithmetic needs numbers; a function must exist. The language supplies the kind of each
leaf (``kind_of``: a column reference, or a lowered leaf of its own) and the kinds of its own
functions. Whatever evaluator then runs the condition (NumPy, a compiled machine, the GPU) sees
only well-typed conditions, so none of them has to guess what a string or a number as a
condition means. Errors are QueryErrors naming the position. O(size of the condition).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pyarrow as pa

from replaydb.errors import QueryError
from replaydb.operators.expr import Call, Expr
from replaydb.operators.exprcode import opcodes as oc
from replaydb.operators.exprcode.typed import Typed, type_condition, type_expr

AGGREGATES = ("COUNT", "SUM", "AVG", "MIN", "MAX")
"""Aggregate names: a condition over one row cannot use them (the pattern languages lower their
running aggregates before the check)."""
STRING_FUNCTIONS = ("LOWER", "UPPER")
"""Functions of one string, giving a string, that every row evaluator runs."""


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


def schema_kinds(schema: pa.Schema) -> Callable[[Expr], str]:
    """``kind_of`` for plain column references over ``schema`` (qualifiers ignored; a column
    the schema lacks counts as a float: the language reports unknown columns itself)."""
    names = set(schema.names)

    def kind_of(e: Expr) -> str:
        name = getattr(e, "name", None)
        return column_kind(schema, name) if name in names else "f"
    return kind_of


class _KindScope:
    """The typed form's scope for checking only: kinds of the leaves, no code."""

    float_domain = True
    ordered_strings = True
    boolean_conditions = True

    def __init__(self, kind_of: Callable[[Expr], str], calls: Mapping[str, str],
                 pos: int | None) -> None:
        self.kind_of = kind_of
        self.calls = calls
        self.pos = pos

    def leaf(self, e: Expr) -> Typed:
        return Typed(oc.LDF, self.kind_of(e), "F")

    def string(self, value: str, e: Expr) -> Typed:
        return Typed(oc.CF, "s", "F")

    def call(self, e: Call) -> Typed:
        if e.name in self.calls:
            return Typed(oc.LDF, self.calls[e.name], "F")
        if e.name in STRING_FUNCTIONS:
            if len(e.args) != 1:
                raise self.error(f"{e.name} with {len(e.args)} arguments", e)
            if type_expr(e.args[0], self).kind != "s":
                raise self.error(f"{e.name} of a non-string value", e)
            return Typed(oc.CF, "s", "F")
        pos = self.pos if e.pos is None else e.pos
        if e.name in AGGREGATES:
            raise QueryError(_at(f"an aggregate ({e.name}) where a row value is required is "
                                 "not allowed", pos))
        raise QueryError(_at(f"unknown function {e.name}", pos))

    def error(self, message: str, e: Expr) -> Exception:
        pos = getattr(e, "pos", None)
        return QueryError(_at(f"{message} is not allowed", self.pos if pos is None else pos))


def check_condition(expr: Expr | None, kind_of: Callable[[Expr], str], pos: int | None = None,
                    calls: Mapping[str, str] | None = None) -> None:
    """Raise a QueryError unless ``expr`` is a well-typed condition (None is TRUE).

    ``kind_of`` gives each leaf's kind; ``calls`` the result kind of the language's own
    functions (``EQUIV``: 'b'); the error names the offending node's position, else ``pos``.
    """
    if expr is not None:
        type_condition(expr, _KindScope(kind_of, calls or {}, pos))


def _at(msg: str, pos: int | None) -> str:
    return msg if pos is None else f"{msg} (at position {pos})"
