"""Which output values are instants: the rules an operator uses to declare the output columns
that hold stream times (:meth:`~replaydb.operators.base.Operator.instant_columns`).

A stream's time column (``t``, and the names it is also known by) holds instants: counts of the
stream's time unit since the Unix epoch. An output expression is an instant when it picks one
of them, as SQL types a ``TIMESTAMP`` expression:

* a reference to a time column (``t``, ``A.t``, ``b[i].t``);
* navigation and picking aggregates of an instant (``FIRST``, ``LAST``, ``PREV``, ``NEXT``,
  ``MIN``, ``MAX``, ``ANY_VALUE``; ``RUNNING``/``FINAL`` do not change it);
* ``LEAST``, ``GREATEST`` and ``COALESCE`` of instants only;
* an instant plus or minus a number (a duration): ``LAST(t) + 60``.

Everything else is not: the difference of two instants is a duration (``LAST(t) - FIRST(t)``),
and ``SUM``, ``AVG`` or ``COUNT`` of times are numbers. O(size of the expression).
"""

from __future__ import annotations

from collections.abc import Collection

from replaydb.operators.expr import Binary, Call, Column, Expr

TIME_COLUMNS: frozenset[str] = frozenset({"t"})
"""The replayed time column's name (every replayed batch carries the stream's time as ``t``)."""

PICKS_FIRST_ARGUMENT = frozenset({"FIRST", "LAST", "PREV", "NEXT", "MIN", "MAX", "ANY_VALUE"})
"""Functions whose value is a value of their first argument."""

PICKS_AN_ARGUMENT = frozenset({"LEAST", "GREATEST", "COALESCE"})
"""Functions whose value is one of their arguments' values."""


def is_instant(e: Expr | None, time_columns: Collection[str] = TIME_COLUMNS) -> bool:
    """Whether ``e`` evaluates to an instant (see the module docstring); ``time_columns``: the
    names of the stream's time column (compared case-insensitively)."""
    names = {n.lower() for n in time_columns}
    return e is not None and _instant(e, names)


def _instant(e: Expr, names: set[str]) -> bool:
    if isinstance(e, Column):
        return e.name.lower() in names
    if isinstance(e, Call):
        if e.distinct or not e.args:
            return False
        if e.name in PICKS_FIRST_ARGUMENT:
            return _instant(e.args[0], names)
        if e.name in PICKS_AN_ARGUMENT:
            return all(_instant(a, names) for a in e.args)
        return False
    if isinstance(e, Binary) and e.op in ("+", "-"):
        left, right = _instant(e.left, names), _instant(e.right, names)
        if e.op == "+":
            return left != right
        return left and not right
    return False
