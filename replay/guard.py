"""The TPStream interval guard: interval replay of a TPStream query drops the results whose
situations an interval's start or end cut.

The planner (:mod:`replaydb.planner.tpstream_plan`, whose module docstring derives the padding
rule and why the guard is exact) pads every interval so that no unpartitioned match needs a run
cut at the interval's start; with PARTITION BY, a partition's previous event can lie anywhere
before the interval, so the guard checks every result row with a member starting at its
partition's first time step in the interval against the partition's last event before the
interval (a backward leaf search in the stream, cached per interval and partition). With
``end_policy="close"`` it drops rows with a member closed at a cut end.

The executor wraps the TPStream operator in an :class:`IntervalGuard` when the plan's
:class:`~replaydb.replay.plan.IntervalScan` carries a
:class:`~replaydb.replay.plan.SituationGuard`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.errors import UsageError
from replaydb.operators.base import Operator
from replaydb.operators.expr import ColumnsEnv


class IntervalGuard(Operator):
    """Wraps the TPStream operator for interval replay: drops result rows whose members were cut
    by an interval's start or closed by its end (see the module docstring).

    ``snap``: the stream (backward searches of a partition's previous event); ``t_min`` /
    ``t_max``: the stream's first and last times. State: the wrapped operator's plus, per
    interval, its first and last event time and (PARTITION BY) every partition's first time.
    """

    name = "tpstream"

    def __init__(self, inner: Any, snap: Any, t_min: int, t_max: int,
                 aliases: dict[str, str] | None = None) -> None:
        super().__init__(inner.config, state_cap=inner.state_cap)
        self.inner = inner
        self.aliases = dict(aliases or {})  # query names of the time column -> "t"
        self.snap = snap
        self.t_min = t_min
        self.t_max = t_max
        self.pcols = list(inner.config.partition_by)
        self.names = list(inner.names)
        self.close = inner.config.end_policy == "close"
        if self.close and self.pcols:
            raise UsageError("interval replay of a partitioned TPStream query needs "
                             "end_policy='drop'")
        self.lookups = 0
        self.dropped_start = 0
        self.dropped_end = 0
        self.lookup_events = 0
        self._reset_interval()

    @property
    def output_schema(self) -> pa.Schema:
        return self.inner.output_schema

    def stats(self) -> dict[str, int]:
        """What the guard did: rows dropped at cut starts and ends, backward searches and the
        events they read."""
        return {"rows_dropped_cut_start": self.dropped_start,
                "rows_dropped_cut_end": self.dropped_end,
                "backward_searches": self.lookups, "events_read": self.lookup_events}

    def _reset_interval(self) -> None:
        self.first_t: dict[tuple, int] = {}
        self.a_f: int | None = None
        self.last_t: int | None = None
        self.cut_cache: dict[tuple, np.ndarray] = {}

    # ------------------------------------------------------------------ lifecycle
    def _push_batch(self, batch: pa.RecordBatch) -> None:
        t = batch.column("t").to_numpy(zero_copy_only=False)
        if self.a_f is None:
            self.a_f = int(t[0])
        self.last_t = int(t[-1])
        if self.pcols:
            g = pa.Table.from_batches([batch]).select([*self.pcols, "t"]).group_by(
                self.pcols, use_threads=False).aggregate([("t", "min")])
            keys = zip(*[g.column(c).to_pylist() for c in self.pcols])
            for k, tm in zip(keys, g.column("t_min").to_pylist()):
                self.first_t.setdefault(tuple(k), int(tm))
        self.inner.push(batch)
        self._drain(False)

    def end_interval(self) -> None:
        self.inner.end_interval()
        self._drain(True)
        self._reset_interval()
        self.counters.intervals += 1

    def _flush(self) -> None:
        self.inner.flush()
        self._drain(True)

    def _reset_state(self) -> None:
        self.inner.reset()
        self._reset_interval()

    def _get_state(self) -> Any:
        return {"inner": self.inner.snapshot(), "first_t": dict(self.first_t), "a_f": self.a_f,
                "last_t": self.last_t, "cut": dict(self.cut_cache)}

    def _set_state(self, state: Any) -> None:
        self.inner.restore(state["inner"])
        self.first_t = dict(state["first_t"])
        self.a_f, self.last_t = state["a_f"], state["last_t"]
        self.cut_cache = dict(state["cut"])

    # ------------------------------------------------------------------ filtering
    def _drain(self, at_end: bool) -> None:
        if not self.inner.has_results():
            return
        tbl = self.inner.results()
        n = tbl.num_rows
        keep = np.ones(n, bool)
        if at_end and self.close and self.last_t is not None and self.last_t < self.t_max:
            # closed at a cut end: te = t_last + 1, while every true end is an event's time
            for s in self.names:
                te = tbl.column(f"{s}_te").fill_null(np.iinfo(np.int64).min).to_numpy()
                keep &= te <= self.last_t
        self.dropped_end += int(n - keep.sum())
        kept = int(keep.sum())
        if self.a_f is not None and self.a_f > self.t_min:
            ts = np.stack([tbl.column(f"{s}_ts").to_numpy() for s in self.names])
            if not self.pcols:
                # a safety net: the padding makes the interval's first time step no feasible
                # start, so no row has a member starting there (tests check it never fires)
                keep &= ts.min(axis=0) > self.a_f
            else:
                keys = list(zip(*[tbl.column(c).to_pylist() for c in self.pcols]))
                ft = np.array([self.first_t.get(k, -1) for k in keys], np.int64)
                for d in range(len(self.names)):
                    for r in np.flatnonzero(keep & (ts[d] == ft)):
                        if self._cut(keys[r], int(ft[r]))[d]:
                            keep[r] = False
        self.dropped_start += kept - int(keep.sum())
        if not keep.all():
            tbl = tbl.filter(pa.array(keep))
        self._emit(tbl)

    def _flags(self, tbl: pa.Table) -> np.ndarray:
        """Condition values (rows: situations, columns: events) of a table of events."""
        if tbl.num_rows == 0:
            return np.zeros((len(self.names), 0), bool)
        for alias, target in self.aliases.items():
            if alias not in tbl.column_names and target in tbl.column_names:
                tbl = tbl.append_column(alias, tbl.column(target))
        rb = tbl.combine_chunks().to_batches()[0]
        env = ColumnsEnv(self.inner._columns(rb), self.inner.aliases)
        return np.stack([np.broadcast_to(np.asarray(p(env), dtype=bool), (rb.num_rows,))
                         for p in self.inner.preds])

    def _key_mask(self, tbl: pa.Table, key: tuple) -> pa.Array:
        mask = None
        for c, v in zip(self.pcols, key):
            col = tbl.column(c)
            m = pc.is_null(col) if v is None else pc.equal(col, pa.scalar(v, col.type))
            mask = m if mask is None else pc.and_(mask, m)
        return mask.fill_null(False)

    def _cut(self, key: tuple, first: int) -> np.ndarray:
        """Per situation: whether the partition's run starting at its first event of the
        interval (time ``first``) may have begun before the interval - every event of the
        partition at ``first`` satisfies the condition (else that run is empty, ``ts = te``, and
        a run starting at ``first`` follows an event of the interval) and so does the
        partition's last event before the interval (none: a true start)."""
        got = self.cut_cache.get(key)
        if got is not None:
            return got
        self.lookups += 1
        cols = [c for c in dict.fromkeys([*self.inner._needed_columns(), *self.pcols])
                if c not in self.aliases]
        at = self.snap.read(first, first + 1, cols)
        at = at.filter(self._key_mask(at, key))
        self.lookup_events += at.num_rows
        cut = self._flags(at).all(axis=1)
        if cut.any():
            prev = self._previous(key, cols)
            cut &= self._flags(prev)[:, 0] if prev.num_rows else False
        self.cut_cache[key] = cut
        return cut

    def _previous(self, key: tuple, cols: list[str]) -> pa.Table:
        """The partition's last event before the interval (empty when none): backward search
        over the leaves, doubling the number read each step."""
        assert self.a_f is not None
        j = int(np.searchsorted(self.snap.tree.leaves.col("t_min"), self.a_f, side="left"))
        k = 1
        while j > 0:
            lo = max(0, j - k)
            tbl = self.snap.read_leaves(lo, j, cols)
            self.lookup_events += tbl.num_rows
            mask = pc.and_(pc.less(tbl.column("t"), self.a_f), self._key_mask(tbl, key))
            hits = tbl.filter(mask)
            if hits.num_rows:
                return hits.slice(hits.num_rows - 1, 1)
            j, k = lo, 2 * k
        return self.snap.arrow_schema.empty_table().select(cols)
