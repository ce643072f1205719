"""What an operator declares about itself, for whoever runs it (locally, on Spark, on a GPU).

Every operator answers :meth:`~replaydb.operators.base.Operator.traits` with a :class:`Traits`
value; the executor and the Spark engine read it and guess nothing from outside:

* ``partition_keys`` - columns whose values split the operator's work into independent groups
  (PARTITION BY, SASE+ ``[attr]`` equivalence under the non-contiguous strategies, TPStream
  PARTITION BY, GRETA GROUP-BY, windowed aggregation GROUP BY); ``()`` when the operator must see
  the whole stream. Results for one key depend only on that key's events, so key groups can run
  in different tasks;
* ``interval_safe`` - :meth:`~replaydb.operators.base.Operator.end_interval` forgets every state
  that could carry a result across a gap, so replay intervals can run in different tasks;
* ``sort_columns`` / ``sort_complete`` - the documented order of the results, and whether those
  integer columns alone order them totally;
* ``numbering`` - for sequential patterns, which output columns depend on processing order
  (:class:`PatternNumbering`) and so must be renumbered after a parallel run;
* ``skips_gaps`` - :meth:`~replaydb.operators.base.Operator.end_interval` keeps the state: a
  gap between replay intervals only means that the events in it were left out, and results may
  combine events on both sides (GRETA under skip-till-any-match, whose results depend only on
  the events that can take part in a trend); a planner may then leave out any event that
  cannot take part;
* ``time_carrier`` - partition tasks must see time advance as the whole stream does;
* ``device`` - the devices that have a variant of the operator (``("cpu",)`` or
  ``("cpu", "gpu")``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
    """What one bound operator declares (see the module docstring)."""

    kind: str
    partition_keys: tuple[str, ...] = ()
    interval_safe: bool = True
    input_columns: tuple[str, ...] | None = None
    sort_columns: tuple[str, ...] = ()
    numbering: PatternNumbering | None = None
    strip_select: bool = False
    """The operator applies a select list to its full output; parallel tasks run it without
    (:meth:`~replaydb.operators.base.Operator.task_spec`) and the driver applies it after
    renumbering."""
    exact_partition_order: bool = False
    """Partition-parallel runs tag each result with the event that completed it (the order of
    ``match_id`` is reproduced exactly)."""
    partition_blocker: str | None = None
    """Why the key groups cannot run apart although there are keys (None: they can)."""
    time_carrier: bool = False
    """Partition tasks must see time advance exactly as the whole replay does: the operator's
    state for one key evolves with the whole batch's last time (the windowed aggregation closes
    every group's windows at each batch's end). Each partition task then also receives every
    batch's last event as a time carrier that the operator's task variant rejects."""
    sort_complete: bool = False
    """The integer :attr:`sort_columns` alone order the results totally: two results equal on
    all of them are equal rows. Partition-parallel results can then be merged as sorted runs."""
    devices: tuple[str, ...] = ("cpu",)
    """Devices with a variant of this operator."""
    skips_gaps: bool = False
    """A gap between replay intervals means only that the events in it were left out (the
    operator's :meth:`end_interval` keeps its state); see the module docstring."""
    notes: tuple[str, ...] = field(default=())

    @property
    def partitionable(self) -> bool:
        return bool(self.partition_keys) and self.partition_blocker is None
