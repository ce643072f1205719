"""Time literals: ``TIMESTAMP '2001-03-01 08:00'`` and ``DATE '2001-03-01'`` in any language.

The parsers keep such a literal as written (:class:`~replaydb.operators.expr.TimeLiteral`),
because its value depends on what the parser does not know: the stream's time unit (stored
times are int64 counts of it since the Unix epoch) and the query's time zone (a literal without
a zone of its own is a wall-clock time there; UTC by default). Once the streams are pinned,
:func:`resolve_time_literals` replaces every one in the parsed query by the integer
:class:`~replaydb.operators.expr.Literal` of its instant in the stream's unit, so a condition on
``t`` (``WHERE t BETWEEN TIMESTAMP '...' AND TIMESTAMP '...'``, ``A.t >= TIMESTAMP '...'``) is a
comparison of integers everywhere after: in the operators, the index planner and the time-range
extraction. A literal finer than the unit, or on a stream without a unit, is a QueryError at
its position. O(size of the parsed query).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

from replaydb.errors import QueryError
from replaydb.operators.expr import Literal, TimeLiteral
from replaydb.timeunits import instant_units

_MAY_HOLD = re.compile(r"\b(TIMESTAMP|DATE)\s*'", re.IGNORECASE)


def resolve_time_literals(query: Any, text: str, unit: str | None, zone: str) -> Any:
    """``query`` (a parsed query: dataclasses, tuples, lists and dicts of expressions) with every
    time literal replaced by its instant in ``unit`` (see the module docstring); ``query``
    itself when ``text`` holds none."""
    if not _MAY_HOLD.search(text):
        return query

    def value(lit: TimeLiteral) -> Literal:
        try:
            return Literal(instant_units(lit.text, lit.kind, unit, zone), pos=lit.pos)
        except ValueError as exc:
            where = "" if lit.pos is None else f" (at position {lit.pos})"
            raise QueryError(f"{exc}{where}",
                             hint="a literal without a zone is read in the query's time zone "
                                  f"({zone})") from None

    return _replace(query, value)


def _replace(obj: Any, value: Any) -> Any:
    """``obj`` with every :class:`TimeLiteral` inside replaced by ``value(literal)``; objects
    with nothing to replace are returned as they are (no copy)."""
    if isinstance(obj, TimeLiteral):
        return value(obj)
    if isinstance(obj, tuple | list):
        items = [_replace(x, value) for x in obj]
        if all(a is b for a, b in zip(items, obj)):
            return obj
        return type(obj)(items) if isinstance(obj, list) or type(obj) is tuple \
            else type(obj)(*items)
    if isinstance(obj, dict):
        new = {k: _replace(v, value) for k, v in obj.items()}
        return obj if all(new[k] is obj[k] for k in obj) else new
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changed = {}
        for f in dataclasses.fields(obj):
            old = getattr(obj, f.name, None)
            new = _replace(old, value)
            if new is not old:
                changed[f.name] = new
        if not changed:
            return obj
        out = copy.copy(obj)
        for name, new in changed.items():
            object.__setattr__(out, name, new)
        return out
    return obj
