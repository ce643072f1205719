"""What the Spark engine must know about each operator (decided on the driver).

For every bound operator :func:`traits` answers:

* ``partition_keys`` - columns whose values split the operator's work into independent groups
  (PARTITION BY, SASE+ ``[attr]`` equivalence under the non-contiguous strategies, TPStream
  PARTITION BY, GRETA GROUP-BY, windowed aggregation GROUP BY); ``()`` when the operator must see
  the whole stream. An operator's results for one key depend only on that key's events, so the
  key groups can run in different Spark tasks;
* ``interval_safe`` - :meth:`~replaydb.operators.base.Operator.end_interval` forgets every state
  that could carry a result across a gap, so the planner's replay intervals can run in different
  tasks (the windowed aggregation is the exception: its windows continue across gaps);
* for sequential patterns, which output columns depend on processing order and how they are made
  deterministic (:class:`PatternNumbering`).

Engine-specific columns and their resolution (the only ones; every other output column is a
function of the matched events):

* ``match_id`` (pattern operator; 1-based, in output order over the operator's lifetime): the
  engine reproduces the local output order (see :mod:`replaydb.replay.spark.order`) and numbers
  the matches 1, 2, ... in it;
* ``match_number`` / ``MATCH_NUMBER()`` (1-based per partition key, in output order): renumbered
  per key in the same order. A measure that *computes with* ``MATCH_NUMBER()`` (``MATCH_NUMBER()
  * 10``) cannot be renumbered after the fact, so such a query never runs interval-parallel (its
  key groups still can: a key's numbering is complete inside one task);
* the SQL select list of MATCH_RECOGNIZE may compute with ``match_id``/``match_number``: tasks
  bind the query without it and the driver applies it after renumbering.

TPStream, GRETA, windowed aggregation and imprecise patterns have no order-dependent columns; a
partition-parallel result of theirs is sorted by the operator's documented order
(:attr:`Traits.sort_columns`, then every other sortable column).

A key group's batches (the local batches restricted to its keys) end at other times than the
local ones. This does not change any bit of a result: TPStream sums floats event by
event and continues a situation's sum across batches, so partition-parallel results equal local
ones byte for byte after sorting (tested with several tasks).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from replaydb.operators.base import Operator
from replaydb.operators.expr import Binary, Call, Column, Expr, Literal, Star


@dataclass(frozen=True)
class PatternNumbering:
    """Order-dependent columns of a pattern operator's output (before the select list)."""

    id_column: str | None
    """``match_id`` unless a measure of that name replaces it."""
    number_columns: tuple[str, ...]
    """Columns holding MATCH_NUMBER(): ``match_number`` and measures that are exactly it."""
    keys: tuple[str, ...]
    """The partition key columns (MATCH_NUMBER counts per key)."""
    compound: bool
    """A measure computes with MATCH_NUMBER() (cannot be renumbered afterwards)."""
    ids_visible: bool
    """The final output shows ``match_id`` (so its global order must be reproduced)."""


@dataclass(frozen=True)
class Traits:
    """What the engine needs to know about one bound operator (see the module docstring)."""

    kind: str
    partition_keys: tuple[str, ...] = ()
    interval_safe: bool = True
    input_columns: tuple[str, ...] | None = None
    sort_columns: tuple[str, ...] = ()
    numbering: PatternNumbering | None = None
    strip_select: bool = False
    exact_partition_order: bool = False
    """Partition-parallel runs tag each result with the event that completed it (the order of
    ``match_id`` is reproduced exactly; see :mod:`.drive`)."""
    partition_blocker: str | None = None
    """Why the key groups cannot run apart although there are keys (None: they can)."""
    time_carrier: bool = False
    """Partition tasks must see time advance exactly as the local replay does: the operator's
    state for one key evolves with the *whole* batch's last time (the windowed aggregation closes
    every group's windows at each batch's end, and its slide tree combines float partials in an
    order that depends on how many slices each call closes). Each partition task then receives,
    after its share of every local batch, that batch's last event as a *time carrier* that the
    operator's WHERE rejects (:func:`with_time_carrier`) - rejected events still advance time."""
    sort_complete: bool = False
    """The integer :attr:`sort_columns` alone order the results totally: two results equal on
    all of them are equal rows (TPStream: the detecting event's time and seq, then every
    situation's start and end - on a single stream a seq names one event, so one key, and the
    same intervals of the same key's situations are the same match). Partition-parallel results
    are then ordered by those int64 columns alone, without comparing every column: each task
    sorts its own results, and the driver merges the runs by the first two columns (the
    emitting event), on which only results of one task can tie."""
    notes: tuple[str, ...] = field(default=())

    @property
    def partitionable(self) -> bool:
        return bool(self.partition_keys) and self.partition_blocker is None


# --------------------------------------------------------------------------- patterns
def _is_match_number(e: Expr) -> bool:
    return isinstance(e, Call) and e.name == "MATCH_NUMBER"


def _uses_match_number(e: Expr) -> bool:
    return any(_is_match_number(n) for n in e.walk())


def strip_select(query: Any) -> Any:
    """The logical query without its SQL select list (tasks emit the operator's full schema)."""
    spec = getattr(query, "spec", None)
    if spec is None or getattr(spec, "select", None) is None:
        return query
    return replace(query, spec=replace(spec, select=None))


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


def _pattern_traits(op: Any) -> Traits:
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
    exact = False
    blocker = None
    if visible and keys:
        names = set(op.output_schema.names) if spec.select is None else set(
            f.name for f in _base_fields(op))
        if (not op.cp.sql and not op.all_rows and "last_seq" in names
                and "last_seq" not in measures):
            exact = True
        else:
            blocker = ("match_id follows the order in which MATCH_RECOGNIZE resolves matches, "
                       "which only the operator knows: key groups cannot run apart while "
                       "match_id is selected")
    return Traits("pattern", partition_keys=keys, interval_safe=not compound,
                  sort_columns=("t", "last_seq", "first_t", "first_seq", "match_number"),
                  numbering=numbering, strip_select=spec.select is not None,
                  exact_partition_order=exact, partition_blocker=blocker, notes=tuple(notes))


def _base_fields(op: Any) -> list[pa.Field]:
    """The pattern operator's output fields before its select list."""
    base = getattr(op, "_base_schema", None)
    return list(base) if base is not None else list(op.output_schema)


# --------------------------------------------------------------------------- others
def _tpstream_traits(op: Any) -> Traits:
    cfg = op.config
    sort = ["detection_time", "detection_seq", *[f"{n}_ts" for n in cfg.names],
            *[f"{n}_te" for n in cfg.names]]
    return Traits("tpstream", partition_keys=tuple(cfg.partition_by), sort_columns=tuple(sort),
                  sort_complete=True)


def _greta_traits(op: Any) -> Traits:
    cfg = op.config
    return Traits("greta", partition_keys=tuple(cfg.group_by),
                  sort_columns=("window_start", "window_end", *cfg.group_by, "last_seq"))


def _window_traits(op: Any) -> Traits:
    cfg = op.config
    keys: tuple[str, ...] = tuple(cfg.group_by)
    notes = []
    if cfg.kind == "time" and cfg.align == "first":
        keys = ()  # windows are anchored at the first event of the whole stream
        notes.append("windows anchored at the first event: one task")
    blocker = None
    if keys and any(a.func.startswith(("VAR", "STDDEV")) for a in cfg.aggregates):
        # the variance shift is the first value the operator sees (of any group): a key group
        # alone would start from another value and round differently
        blocker = "variance aggregates shift by the stream's first value: one task"
    cols = getattr(op, "input_columns", None)
    return Traits("window", partition_keys=keys, interval_safe=False, time_carrier=True,
                  partition_blocker=blocker,
                  input_columns=tuple(cols) if cols else None,
                  sort_columns=("window_end", "window_start", *cfg.group_by),
                  notes=tuple(notes))


CARRIER = "__c"
"""Column marking time carriers (1) among events (0) in partition tasks."""


def with_time_carrier(op: Any) -> Any:
    """A fresh copy of the windowed aggregation ``op`` whose WHERE also rejects time carriers
    (``__c = 1``); everything else - and so every result - stays the same."""
    cfg = op.config
    test = Binary("=", Column(CARRIER), Literal(0))
    where = test if cfg.where is None else Binary("and", test, cfg.where)
    return type(op)(replace(cfg, where=where), state_cap=op.state_cap)


def traits(op: Any) -> Traits:
    """The :class:`Traits` of a bound operator (unknown operators: one task, or their
    intervals in parallel when they keep the base class's ``end_interval``)."""
    name = getattr(op, "name", "")
    if name == "pattern" and hasattr(op, "cp"):
        return _pattern_traits(op)
    if name == "tpstream":
        return _tpstream_traits(op)
    if name == "greta":
        return _greta_traits(op)
    if name == "window_aggregate":
        return _window_traits(op)
    if name == "imprecise_pattern":
        # equivalence tests are predicates here, not partitions: a key group is not independent
        return Traits("imprecise", sort_columns=("t",))
    safe = type(op).end_interval is Operator.end_interval
    return Traits(name or type(op).__name__, interval_safe=safe)


def sortable(field_: pa.Field) -> bool:
    """Arrow types ``Table.sort_by`` can order."""
    t = field_.type
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_temporal(t) or pa.types.is_decimal(t))
