"""How far a pattern query looks outside its matches (PREV / NEXT).

``PREV(expr, k)`` in a DEFINE or MEASURES clause reads the row ``k`` rows before the row ``expr``
refers to, physically in the (partition's) stream - for the first row of a match that is before
the match. ``NEXT(expr, k)`` reads after it. Replaying an interval that starts at
a match's first event would give such a PREV a NULL where full replay gives a value, so replay
intervals must start ``before`` events earlier (and end ``after`` events later).

:func:`navigation_extent` returns ``(before, after)``: the largest total offsets, nested
navigation adding up (``PREV(PREV(x, 2))`` is 3 rows back; FIRST/LAST move inside the match and
add nothing), or None when an offset is not a non-negative integer literal. Complexity: linear in
the size of the spec's expressions.
"""

from __future__ import annotations

from replaydb.operators.expr import Call, Expr, Literal
from replaydb.operators.pattern.model import PatternSpec


def _offset(c: Call) -> int | None:
    if len(c.args) < 2:
        return 1
    a = c.args[1]
    if isinstance(a, Literal) and isinstance(a.value, int) and not isinstance(a.value, bool) \
            and a.value >= 0:
        return int(a.value)
    return None


def _extent(e: Expr) -> tuple[int, int] | None:
    before = after = 0
    if isinstance(e, Call) and e.name in ("PREV", "NEXT") and e.args:
        k = _offset(e)
        if k is None:
            return None
        inner = _extent(e.args[0])
        if inner is None:
            return None
        b, a = inner
        return (b + k, a) if e.name == "PREV" else (b, a + k)
    for c in e.children():
        got = _extent(c)
        if got is None:
            return None
        before, after = max(before, got[0]), max(after, got[1])
    return before, after


def navigation_extent(spec: PatternSpec) -> tuple[int, int] | None:
    """``(before, after)`` rows the query reads outside a match (see the module docstring)."""
    before = after = 0
    exprs = [d.condition for d in spec.defines if d.condition is not None]
    exprs += [m.expr for m in spec.measures]
    for item in spec.select or ():
        if item.expr is not None:
            exprs.append(item.expr)
    for e in exprs:
        got = _extent(e)
        if got is None:
            return None
        before, after = max(before, got[0]), max(after, got[1])
    return before, after
