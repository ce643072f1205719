"""What a pattern operator declares about its output for parallel runs
(:class:`~replaydb.operators.traits.Traits`).

Order-dependent columns and how a parallel run makes them deterministic:

* ``match_id`` (1-based, in output order over the operator's lifetime): a parallel run
  reproduces the local output order and numbers the matches 1, 2, ... in it;
* ``match_number`` / ``MATCH_NUMBER()`` (1-based per partition key, in output order):
  renumbered per key in the same order. A measure that *computes with* ``MATCH_NUMBER()``
  (``MATCH_NUMBER() * 10``) cannot be renumbered after the fact, so such a query never runs
  interval-parallel (its key groups still can: a key's numbering is complete inside one task);
  nor does one whose DEFINE reads ``MATCH_NUMBER()``: which rows match depends on the number;
  nor does a pattern with an anchor ``^``/``$``, which needs each partition's first/last row,
  nor one with empty matches or unmatched rows, which come from every row;
* the SQL select list of MATCH_RECOGNIZE may compute with ``match_id``/``match_number``: tasks
  run the operator without it (``strip_select``) and the driver applies it after renumbering.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pyarrow as pa

from replaydb.operators.expr import Call, Column, Expr, Star, to_text
from replaydb.operators.instants import is_instant
from replaydb.operators.traits import PatternNumbering, Traits

SORT_COLUMNS = ("t", "last_seq", "first_t", "first_seq", "match_number")


def _is_match_number(e: Expr) -> bool:
    return isinstance(e, Call) and e.name == "MATCH_NUMBER"


def _uses_match_number(e: Expr) -> bool:
    return any(_is_match_number(n) for n in e.walk())


def _select_shows(select: Any, name: str) -> bool:
    if select is None:
        return True
    for it in select:
        if it.star:
            return True
        for n in it.expr.walk():
            if isinstance(n, Star) or (isinstance(n, Column) and n.name.lower() == name):
                return True
    return False


def base_fields(op: Any) -> list[pa.Field]:
    """The pattern operator's output fields before its select list."""
    base = getattr(op, "_base_schema", None)
    return list(base) if base is not None else list(op.output_schema)


def pattern_traits(op: Any) -> Traits:
    """The traits of a bound pattern operator (see the module docstring)."""
    spec = op.cp.spec
    measures = {m.name: m.expr for m in spec.measures}
    id_col = None if "match_id" in measures else "match_id"
    numbers = []
    if "match_number" not in measures or _is_match_number(measures["match_number"]):
        numbers.append("match_number")
    numbers += [n for n, e in measures.items() if _is_match_number(e) and n != "match_number"]
    compound = any(_uses_match_number(e) and not _is_match_number(e) for e in measures.values())
    keys = tuple(op.cp.partition_by)
    visible = id_col is not None and _select_shows(spec.select, "match_id")
    numbering = PatternNumbering(id_col, tuple(numbers), keys, compound, visible)
    notes = []
    if compound:
        notes.append("a measure computes with MATCH_NUMBER(): no interval-parallel run")
    numbered_define = op.cp.matchno_slot >= 0
    if numbered_define:
        notes.append("a condition in DEFINE reads MATCH_NUMBER(): no interval-parallel run")
    anchored = spec.anchored()
    if anchored:
        notes.append("the anchors ^ $ need each partition's first and last rows: no "
                     "interval-parallel run")
    every_row = op.cp.every_row
    if every_row:
        notes.append("empty matches or unmatched rows number every row: no interval-parallel "
                     "run")
    exact = False
    blocker = None
    if visible and keys:
        names = set(op.output_schema.names) if spec.select is None else set(
            f.name for f in base_fields(op))
        if (not op.cp.sql and not op.all_rows and "last_seq" in names
                and "last_seq" not in measures):
            exact = True
        else:
            blocker = ("match_id follows the order in which MATCH_RECOGNIZE resolves matches, "
                       "which only the operator knows: key groups cannot run apart while "
                       "match_id is selected")
    interval_safe = not (compound or numbered_define or anchored or every_row)
    return Traits("pattern", partition_keys=keys, interval_safe=interval_safe,
                  sort_columns=SORT_COLUMNS, numbering=numbering,
                  strip_select=spec.select is not None, exact_partition_order=exact,
                  partition_blocker=blocker, devices=op.devices(), notes=tuple(notes))


def pattern_instants(op: Any, time_columns: Collection[str]) -> tuple[str, ...]:
    """The output columns of pattern operator ``op`` that hold stream times: ``t``,
    ``first_t`` and ``last_t`` of ONE ROW PER MATCH (unless a measure takes the name), the rows'
    time column under ALL ROWS PER MATCH, every measure that is an instant
    (:func:`~replaydb.operators.instants.is_instant`), and what the select list takes of them."""
    from replaydb.operators.pattern.output import META_TIMES, _resolve_select

    names = {n.lower() for n in time_columns}
    base: set[str] = set()
    if op.all_rows:
        base |= {f.name for f in op.rows_schema if f.name.lower() in names}
    else:
        base |= {n for n in META_TIMES if n not in op._shadowed}
    for m in op.config.spec.measures:
        base.discard(m.name)
        if is_instant(m.expr, time_columns):
            base.add(m.name)
    items = op.config.spec.select
    if items is None or (len(items) == 1 and items[0].star):
        return tuple(n for n in op._base_schema.names if n in base)
    lookup = {n.lower(): n for n in op._base_schema.names}
    out: list[str] = []
    for it in items:
        if it.star:
            out += [n for n in op._base_schema.names if n in base]
            continue
        e = _resolve_select(it.expr, lookup)
        name = it.alias or (e.name if isinstance(e, Column) else to_text(it.expr))
        if is_instant(e, base):
            out.append(name)
    return tuple(out)
