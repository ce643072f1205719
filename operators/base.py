"""The one lifecycle every online operator follows.

An operator is a frozen configuration (a ``@dataclass(frozen=True)``, validated once) plus runtime
logic. It is fed Arrow record batches whose first two columns are ``t`` (int64, the stream's time
unit) and ``seq`` (int64, the event's absolute position; ``(t, seq)`` is the total order), followed
by attributes. Batches must arrive in ``(t, seq)`` order; an operator may check this cheaply.

Lifecycle::

    op = SomeOperator(config, state_cap=1_000_000)
    op.push(batch)        # any number of times; results accumulate inside
    out = op.results()    # drain the results produced so far (an Arrow table)
    op.end_interval()     # the next batch is not contiguous with the last (replay intervals)
    op.push_intervals(batch, breaks)  # many intervals at once: one ends before each row offset
                                      # (final=True: the last batch, the call ends with flush)
    op.flush()            # end of input: emit what end-of-input semantics allows
    state = op.snapshot() # a deep copy of the runtime state; op.restore(state) returns to it

The same operator object serves offline replay (fed by ``replaydb.replay``) and live streams (fed
directly from Python); operators import nothing from the store, the indexes or the planner.

State caps: every operator counts the state it holds (partial matches, buffered events, open
windows...) in ``counters.state_size`` and raises :class:`~replaydb.errors.StateCapExceeded`
naming the cap when it would pass ``state_cap``, instead of exhausting memory.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from replaydb.batches import as_batches
from replaydb.errors import OperatorError, StateCapExceeded
from replaydb.operators.instants import TIME_COLUMNS
from replaydb.operators.spec import FAMILIES, OperatorSpec

DEFAULT_STATE_CAP = 10_000_000
"""Default cap on an operator's state entries (partial matches, buffered events, ...)."""


@dataclass
class Counters:
    """What an operator did: input, output and the state it held.

    ``state_size`` is the current number of state entries; ``peak_state`` its maximum so far.
    """

    events_in: int = 0
    batches_in: int = 0
    results_out: int = 0
    state_size: int = 0
    peak_state: int = 0
    intervals: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, int]:
        d = {
            "events_in": self.events_in,
            "batches_in": self.batches_in,
            "results_out": self.results_out,
            "state_size": self.state_size,
            "peak_state": self.peak_state,
            "intervals": self.intervals,
        }
        d.update(self.extra)
        return d


class Operator(ABC):
    """Base class of every online operator (see the module docstring for the lifecycle).

    Subclasses implement :meth:`_push_batch`, :meth:`_flush`, :meth:`_reset_state`,
    :meth:`_get_state`, :meth:`_set_state` and :attr:`output_schema`, call :meth:`_emit` with result
    batches and :meth:`_set_state_size` whenever their state grows or shrinks.
    """

    name: ClassVar[str] = "operator"
    family: ClassVar[str | None] = None
    """The :data:`~replaydb.operators.spec.FAMILIES` key this operator is built from."""
    device: ClassVar[str] = "cpu"
    requires_seq: ClassVar[bool] = True

    def __init__(self, config: Any, *, state_cap: int | None = DEFAULT_STATE_CAP) -> None:
        self.config = config
        self.state_cap = state_cap
        self.counters = Counters()
        self._out: list[pa.RecordBatch] = []
        self._flushed = False

    # ------------------------------------------------------------------ what it declares
    def spec_options(self) -> dict[str, Any]:
        """The constructor keywords besides ``config`` and ``state_cap`` this operator was
        built with (families with further options override this)."""
        return {}

    def spec(self) -> Any:
        """The :class:`~replaydb.operators.spec.OperatorSpec` this operator was built from."""
        if self.family is None:
            raise OperatorError(f"{type(self).__name__} has no operator family")
        return OperatorSpec(self.family, self.config, self.state_cap,
                            tuple(sorted(self.spec_options().items())), self.device,
                            getattr(self, "backend", None) if self.device == "gpu" else None)

    def traits(self) -> Any:
        """What this operator declares to whoever runs it
        (:class:`~replaydb.operators.traits.Traits`); this default: one group, interval-safe
        when :meth:`end_interval` is the base class's."""
        from replaydb.operators.traits import Traits

        safe = type(self).end_interval is Operator.end_interval
        return Traits(self.name, interval_safe=safe, devices=self.devices())

    def instant_columns(self, time_columns: Collection[str] = TIME_COLUMNS) -> tuple[str, ...]:
        """The output columns that hold stream times (instants, see
        :mod:`~replaydb.operators.instants`), given the names of the stream's time column; the
        executor shows them as timestamps where the stream declares a time unit. This default,
        for operators that pass events through: the integer output columns named like the time
        column."""
        names = {n.lower() for n in time_columns}
        return tuple(f.name for f in self.output_schema
                     if f.name.lower() in names and pa.types.is_integer(f.type))

    def devices(self) -> tuple[str, ...]:
        """The devices that have a variant of this operator."""
        gpu = self.family is not None and FAMILIES[self.family][1] is not None
        return ("cpu", "gpu") if gpu else ("cpu",)

    def task_spec(self, *, strip_select: bool = False, time_carrier: str | None = None) -> Any:
        """The spec a parallel task runs: without the select list (``strip_select``, when
        :attr:`~replaydb.operators.traits.Traits.strip_select`), or rejecting the rows whose
        ``time_carrier`` column is 1 (when
        :attr:`~replaydb.operators.traits.Traits.time_carrier`). Operators declaring neither
        run their own spec."""
        return self.spec()

    def apply_select(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The operator's select list applied to a batch of its full output (the output of
        :meth:`task_spec` with ``strip_select``); identity for operators without one."""
        return batch

    # ------------------------------------------------------------------ public lifecycle
    @property
    @abstractmethod
    def output_schema(self) -> pa.Schema:
        """Schema of the result table."""

    def push(self, data: pa.RecordBatch | pa.Table | Any) -> None:
        """Feed events (in ``(t, seq)`` order); results accumulate until :meth:`results`."""
        self._check_open()
        for batch in as_batches(data):
            if batch.num_rows == 0:
                continue
            self._admit(batch)
            self._push_batch(batch)

    def _check_open(self) -> None:
        if self._flushed:
            raise OperatorError(f"{self.name}: push after flush; call reset() to start over")

    def _admit(self, batch: pa.RecordBatch) -> None:
        """Check a non-empty input batch's columns and count it."""
        self._check_batch(batch)
        self.counters.events_in += batch.num_rows
        self.counters.batches_in += 1

    def push_intervals(self, batch: pa.RecordBatch, breaks: np.ndarray, *,
                       final: bool = False) -> None:
        """Feed one batch that spans several replay intervals: before row ``b`` of every
        ``b`` in ``breaks`` (sorted, each in ``[0, num_rows)``; a repeated offset ends empty
        intervals too) an interval ends. ``final``: no input follows, the call ends with
        :meth:`flush` (an operator may then resolve what waits for more input in the same
        pass).

        The same as pushing the slices between the breaks with :meth:`end_interval` between
        them (this default does exactly that); operators override it to handle many short
        intervals in one pass. Rows must be in time order across the breaks too."""
        n = batch.num_rows
        prev = 0
        for b in self._checked_breaks(breaks, n).tolist():
            if b > prev:
                self.push(batch.slice(prev, b - prev))
            self.end_interval()
            prev = b
        if prev < n:
            self.push(batch.slice(prev))
        if final:
            self.flush()

    def _checked_breaks(self, breaks: np.ndarray, n: int) -> np.ndarray:
        """``breaks`` as int64, or an error unless sorted and each in ``[0, n)``."""
        breaks = np.asarray(breaks, dtype=np.int64)
        if breaks.size and (breaks[0] < 0 or breaks[-1] >= n or np.any(np.diff(breaks) < 0)):
            raise OperatorError(f"{self.name}: interval breaks must be sorted row offsets in "
                                f"0..{n - 1}, got {breaks.tolist()[:8]}")
        return breaks

    def end_interval(self) -> None:
        """Mark a gap in the input: events after it are not contiguous with those before.

        Default: end-of-input semantics for the interval (emit what can be emitted), then drop the
        runtime state so no result can span the gap.
        """
        self._flush()
        self._reset_state()
        self._set_state_size(0)
        self.counters.intervals += 1

    def flush(self) -> None:
        """End of input: emit every result end-of-input semantics allows."""
        if not self._flushed:
            self._flush()
            self._flushed = True

    def results(self) -> pa.Table:
        """Drain and return the results produced so far (possibly empty)."""
        out, self._out = self._out, []
        if not out:
            return self.output_schema.empty_table()
        return pa.Table.from_batches(out, schema=self.output_schema)

    def has_results(self) -> bool:
        return bool(self._out)

    def process(self, data: pa.RecordBatch | pa.Table | Any) -> pa.Table:
        """Convenience: push all of ``data``, flush, return every result."""
        self.push(data)
        self.flush()
        return self.results()

    def reset(self) -> None:
        """Forget all state, results and counters: the operator is as new."""
        self._reset_state()
        self._out = []
        self._flushed = False
        self.counters = Counters()

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of the runtime state (results not yet drained included)."""
        return {
            "operator": self.name,
            "state": copy.deepcopy(self._get_state()),
            "out": list(self._out),
            "flushed": self._flushed,
            "counters": copy.deepcopy(self.counters),
        }

    def restore(self, snap: dict[str, Any]) -> None:
        """Return to a state taken by :meth:`snapshot` (of an operator with the same config)."""
        if snap.get("operator") != self.name:
            raise OperatorError(f"{self.name}: cannot restore a snapshot of {snap.get('operator')!r}")
        self._set_state(copy.deepcopy(snap["state"]))
        self._out = list(snap["out"])
        self._flushed = snap["flushed"]
        self.counters = copy.deepcopy(snap["counters"])

    # ------------------------------------------------------------------ for subclasses
    @abstractmethod
    def _push_batch(self, batch: pa.RecordBatch) -> None: ...

    @abstractmethod
    def _flush(self) -> None: ...

    @abstractmethod
    def _reset_state(self) -> None: ...

    @abstractmethod
    def _get_state(self) -> Any: ...

    @abstractmethod
    def _set_state(self, state: Any) -> None: ...

    def _emit(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Append results (must match :attr:`output_schema`)."""
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        for b in batches:
            if b.num_rows:
                if not b.schema.equals(self.output_schema):
                    b = pa.RecordBatch.from_arrays(
                        [b.column(i).cast(f.type) for i, f in enumerate(self.output_schema)],
                        schema=self.output_schema,
                    )
                self._out.append(b)
                self.counters.results_out += b.num_rows

    def _set_state_size(self, size: int, what: str = "state entries") -> None:
        """Record the current state size; raise :class:`StateCapExceeded` past the cap."""
        self.counters.state_size = size
        if size > self.counters.peak_state:
            self.counters.peak_state = size
        if self.state_cap is not None and size > self.state_cap:
            raise StateCapExceeded(self.name, what, size, self.state_cap, "state_cap")

    def _check_batch(self, batch: pa.RecordBatch) -> None:
        names = batch.schema.names
        if "t" not in names:
            raise OperatorError(f"{self.name}: input batch has no 't' column (columns: {names})")
        if self.requires_seq and "seq" not in names:
            raise OperatorError(f"{self.name}: input batch has no 'seq' column (columns: {names})")


def column_np(batch: pa.RecordBatch | pa.Table, name: str) -> np.ndarray:
    """A column as a NumPy array (zero-copy where Arrow allows; nulls become NaN for floats)."""
    col = batch.column(name)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if col.null_count and pa.types.is_integer(col.type):
        return col.to_numpy(zero_copy_only=False).astype(np.float64)
    return col.to_numpy(zero_copy_only=False)
