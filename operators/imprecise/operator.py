"""The imprecise-timestamp pattern operator: lifecycle, input order, readiness, output.

Input: Arrow batches with ``t``, ``seq``, the type column, the two bound columns (and the pmf
column when configured) and the attributes the predicates and RETURN use; ordered by lower bound
(default) or, with ``max_uncertainty = U``, in any order meeting the arrival assumption with
intervals of at most ``U``. Violations raise :class:`~replaydb.errors.DataError` naming the row.

*Horizon.* With ``L`` the largest lower bound seen, every event with ``lower < L - U`` (``U = 0``
for ordered input) has been seen. The matches whose first event ``a`` has
``a.upper + W - 1 < horizon`` are final - every event that can take part in (or, for
skip-till-next, spoil) them has arrived - and are emitted then; :meth:`flush` emits the rest.

Output (one row per reported signature), in order of ``(a.upper + W - 1, signature)``:

=====================  =========================================================================
``t``                  int64: the end of the time range (the latest completion of the match)
``t_start``/``t_end``  int64: the tightest range covering the point matches of the signature
``confidence``         float64: the probability of the worlds returning the signature
``confidence_exact``   string ``"p/q"`` (only with ``exact=True``): the same, exactly
``signature``          list<int64>: the matched events' ``seq``, in pattern order
``<var>_seq``          int64 per RETURN variable (all variables without RETURN)
``<var>_<attr>``       each RETURN ``var.attr``
=====================  =========================================================================

State held: the relevant events that may still take part in a match, plus the framework's runs
(any-state runs, or point runs of the point-based framework) and matches awaiting finality; its
size is checked against ``state_cap``.

Complexity per batch: O(batch) to ingest (vectorized), plus the framework's matching work (see
:mod:`.query_order`, :mod:`.any_state`, :mod:`.point_based`) and the confidence of the matches that
become final (:mod:`.kernels`). Irrelevant events (matching no component) are dropped at ingest.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import DataError
from replaydb.operators.base import DEFAULT_STATE_CAP, Operator
from replaydb.operators.imprecise.any_state import AnyStateEngine, SelectivityFeeder
from replaydb.operators.imprecise.candidates import ComponentIndex
from replaydb.operators.imprecise.config import ImpreciseConfig, ReturnItem
from replaydb.operators.imprecise.events import EventBuffer, ingest
from replaydb.operators.imprecise.finalize import Finalized, finalize
from replaydb.operators.imprecise.point_based import PointEngine
from replaydb.operators.imprecise.predicates import PredicatePlan
from replaydb.operators.imprecise.query_order import query_order_matches
from replaydb.operators.instants import TIME_COLUMNS

INF = float("inf")


class ImprecisePatternOperator(Operator):
    """SASE+ sequence patterns over events with uncertainty intervals (paper 003).

    Example (live use)::

        from replaydb.planner.lang.imprecise import parse, bind
        q = parse("PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { b.v > a.v } "
                  "WITHIN 10")
        op = bind(q, schema, None, lower_col="t_lower", upper_col="t_upper")
        op.push(batch)          # columns t, seq, type, t_lower, t_upper, v
        op.flush()
        op.results()            # signature, t_start, t_end, confidence, ...

    or with a config: ``ImprecisePatternOperator(ImpreciseConfig(components=..., window=10))``.
    See the module docstring for input order, readiness and the output schema.
    """

    name = "imprecise_pattern"
    family = "imprecise"

    def traits(self) -> Any:
        """Equivalence tests are predicates here, not partitions: no key group is independent;
        results are ordered by ``t``."""
        from replaydb.operators.traits import Traits

        return Traits("imprecise", sort_columns=("t",))

    def __init__(self, config: ImpreciseConfig, *, state_cap: int | None = DEFAULT_STATE_CAP
                 ) -> None:
        super().__init__(config, state_cap=state_cap)
        self.cfg: ImpreciseConfig = config
        extra = tuple(r.attr for r in config.returns if r.attr is not None)
        self.plan = PredicatePlan(config.variables, config.predicates, extra)
        self._slack = config.max_uncertainty or 0
        fields = [
            pa.field("t", pa.int64()),
            pa.field("t_start", pa.int64()),
            pa.field("t_end", pa.int64()),
            pa.field("confidence", pa.float64()),
        ]
        if config.exact:
            fields.append(pa.field("confidence_exact", pa.string()))
        fields.append(pa.field("signature", pa.list_(pa.int64())))
        returns = config.returns or tuple(ReturnItem(v) for v in config.variables)
        self._returns = returns
        for r in returns:
            fields.append(pa.field(r.column_name, pa.int64() if r.attr is None else r.arrow_type))
        self._schema = pa.schema(fields)
        self._reset_state()

    # ------------------------------------------------------------------ Operator API
    @property
    def output_schema(self) -> pa.Schema:
        return self._schema

    def instant_columns(self, time_columns: Collection[str] = TIME_COLUMNS) -> tuple[str, ...]:
        """``t``, ``t_start``, ``t_end``, and every RETURN ``var.attr`` of a time column or of
        the uncertainty interval's bounds (integer instants of the same unit)."""
        cfg = self.cfg
        names = {n.lower() for n in (*time_columns, cfg.lower_column, cfg.upper_column)}
        return ("t", "t_start", "t_end", *(
            r.column_name for r in self._returns
            if r.attr is not None and r.attr.lower() in names
            and (r.arrow_type is None or pa.types.is_integer(r.arrow_type))))

    def _reset_state(self) -> None:
        cfg = self.cfg
        self.buf = EventBuffer(cfg.length, self.plan.attribute_names)
        self.max_lower: int | None = None
        self.emitted_until: float = -INF  # matches with key < this have been emitted
        self.engine = (AnyStateEngine(cfg, self.plan)
                       if cfg.framework == "event" and cfg.method != "query_order" else None)
        self.feeder = (SelectivityFeeder(cfg)
                       if cfg.framework == "event" and cfg.method == "selectivity" else None)
        self.points = PointEngine(cfg, self.plan) if cfg.framework == "point" else None
        self.candidates = 0

    def _get_state(self) -> Any:
        return {
            "buf": self.buf.get_state(),
            "max_lower": self.max_lower,
            "emitted_until": self.emitted_until,
            "engine": self.engine.get_state() if self.engine else None,
            "feeder": self.feeder.get_state() if self.feeder else None,
            "points": self.points.get_state() if self.points else None,
            "candidates": self.candidates,
        }

    def _set_state(self, state: Any) -> None:
        self._reset_state()
        self.buf.set_state(state["buf"])
        self.max_lower = state["max_lower"]
        self.emitted_until = state["emitted_until"]
        if self.engine:
            self.engine.set_state(state["engine"])
        if self.feeder:
            self.feeder.set_state(state["feeder"])
        if self.points:
            self.points.set_state(state["points"])
        self.candidates = state["candidates"]

    @property
    def horizon(self) -> float:
        """Every event with ``lower`` below this has been seen."""
        return -INF if self.max_lower is None else self.max_lower - self._slack

    def _push_batch(self, batch: pa.RecordBatch) -> None:
        for name in (self.cfg.type_column, self.cfg.lower_column, self.cfg.upper_column):
            if name not in batch.schema.names:
                raise DataError(f"input batch has no column {name!r}", column=name)
        ev = ingest(batch, self.cfg, self.plan)
        self._check_order(ev.lo_all, ev.hi_all)
        uids = self.buf.append(ev)
        self._set_state_size(self._state_entries())
        if ev.lo_all.size:
            m = int(ev.lo_all.max())
            self.max_lower = m if self.max_lower is None else max(self.max_lower, m)
        if self.engine is not None and uids.size:
            if self.feeder is not None:
                self.feeder.add(self.buf, uids)
            else:
                # events later in this batch start at or after the running maximum of the
                # declared lower bounds (minus the slack) - not of the trimmed ones
                pos = self.buf.positions(uids)
                run_max = np.maximum.accumulate(ev.lo_raw)
                self.engine.feed(self.buf, pos, run_max - self._slack, self.state_cap)
        self._advance(flush=False)

    def _flush(self) -> None:
        self._advance(flush=True)

    # ------------------------------------------------------------------ input order
    def _check_order(self, lo: np.ndarray, hi: np.ndarray) -> None:
        if lo.size == 0:
            return
        prev = self.max_lower
        if self.cfg.max_uncertainty is None:
            bad = np.flatnonzero(np.diff(lo) < 0)
            if bad.size:
                r = int(bad[0]) + 1
                raise DataError(
                    f"lower bound {int(lo[r])} is below the previous event's {int(lo[r - 1])}; "
                    "the input must be ordered by lower bound", row=r,
                    column=self.cfg.lower_column,
                    hint="set max_uncertainty to accept any order meeting the arrival "
                         "assumption e1.lower <= e2.upper")
            if prev is not None and lo[0] < prev:
                raise DataError(
                    f"lower bound {int(lo[0])} is below {prev}, already seen in an earlier "
                    "batch; the input must be ordered by lower bound", row=0,
                    column=self.cfg.lower_column)
            return
        u = self.cfg.max_uncertainty
        wide = np.flatnonzero(hi - lo > u)
        if wide.size:
            r = int(wide[0])
            raise DataError(f"uncertainty interval [{int(lo[r])}, {int(hi[r])}] is wider than "
                            f"max_uncertainty={u}", row=r, column=self.cfg.upper_column)
        seed = np.array([prev if prev is not None else np.iinfo(np.int64).min], np.int64)
        before = np.maximum.accumulate(np.concatenate([seed, lo]))[:-1]
        late = np.flatnonzero(hi < before)
        if late.size:
            r = int(late[0])
            raise DataError(
                f"event with interval [{int(lo[r])}, {int(hi[r])}] arrives after an event "
                f"starting at {int(before[r])}: the arrival assumption e1.lower <= e2.upper "
                "is violated", row=r, column=self.cfg.upper_column)

    # ------------------------------------------------------------------ matching
    def _advance(self, flush: bool) -> None:
        cfg = self.cfg
        horizon = INF if flush else self.horizon
        limit = horizon
        fin: Finalized | None = None
        if cfg.framework == "point":
            assert self.points is not None
            until = horizon
            if flush:
                until = float(self.buf.hi.max() + 1) if len(self.buf) else -INF
            if until > -INF:
                self.points.release(self.buf, int(min(until, 1 << 62)), self.state_cap)
            fin = self.points.collapse(self.buf, limit)
        elif cfg.method == "query_order":
            key = self.buf.hi + cfg.window - 1
            anchors = np.flatnonzero(self.buf.comp[:, 0] & (key >= self.emitted_until)
                                     & (key < limit))
            if anchors.size:
                index = ComponentIndex(self.buf)
                cand = query_order_matches(self.buf, index, self.plan, cfg, anchors)
                self.candidates += int(cand.shape[0])
                fin = finalize(self.buf, index, self.plan, cfg, cand, nelt_done=True)
        else:
            assert self.engine is not None
            if self.feeder is not None:
                self.feeder.step(self.engine, self.buf, horizon, flush, self.state_cap)
                limit = self.feeder.future_lower(self.buf, horizon)
            self.engine.prune(int(min(limit, 1 << 62)))
            ready = self.engine.take_ready(limit)
            if ready.shape[0]:
                self.candidates += int(ready.shape[0])
                pos = self.buf.positions(ready)
                index = ComponentIndex(self.buf)
                fin = finalize(self.buf, index, self.plan, cfg, pos, nelt_done=False)
        if fin is not None and fin.pos.shape[0]:
            self._emit(self._to_batch(fin))
        self.emitted_until = max(self.emitted_until, limit)
        self._evict()
        self._set_state_size(self._state_entries())

    def _state_entries(self) -> int:
        n = len(self.buf)
        if self.engine is not None:
            n += self.engine.size
        if self.feeder is not None:
            n += int(self.feeder.waiting.size)
        if self.points is not None:
            n += self.points.size
        return n

    def _evict(self) -> None:
        buf = self.buf
        n = len(buf)
        if n == 0:
            return
        cfg = self.cfg
        key = buf.hi + cfg.window - 1
        open_anchor = buf.comp[:, 0] & (key >= self.emitted_until)
        thr = self.emitted_until if self.emitted_until < INF else INF
        thr = min(thr, self.horizon)
        if open_anchor.any():
            thr = min(thr, float(buf.lo[open_anchor].min()))
        if self.points is not None and self.points.next_instant is not None:
            thr = min(thr, float(self.points.next_instant))
        keep = (buf.hi >= thr) | open_anchor
        if self.engine is not None:
            keep |= np.isin(buf.uid, self.engine.referenced())
        if self.feeder is not None:
            keep |= np.isin(buf.uid, self.feeder.waiting)
        if self.points is not None:
            keep |= np.isin(buf.uid, self.points.referenced())
        drop = n - int(keep.sum())
        if drop and (drop >= 4096 or drop * 4 >= n):
            buf.keep(keep)

    # ------------------------------------------------------------------ output
    def _to_batch(self, fin: Finalized) -> pa.RecordBatch:
        cfg = self.cfg
        buf = self.buf
        pos = fin.pos
        l_ = cfg.length
        seqs = buf.seq[pos]
        key = buf.hi[pos[:, 0]] + cfg.window - 1
        order = np.lexsort(tuple(seqs[:, c] for c in range(l_ - 1, -1, -1)) + (key,))
        pos, seqs = pos[order], seqs[order]
        t0, t1 = fin.t_start[order], fin.t_end[order]
        m = pos.shape[0]
        cols: list[pa.Array] = [pa.array(t1, pa.int64()), pa.array(t0, pa.int64()),
                                pa.array(t1, pa.int64()),
                                pa.array(fin.confidence[order], pa.float64())]
        if cfg.exact:
            assert fin.exact is not None
            cols.append(pa.array([fin.exact[i] for i in order], pa.string()))
        offsets = pa.array(np.arange(0, (m + 1) * l_, l_, dtype=np.int32))
        cols.append(pa.ListArray.from_arrays(offsets, pa.array(seqs.ravel(), pa.int64())))
        vidx = {v: i for i, v in enumerate(cfg.variables)}
        for r in self._returns:
            k = vidx[r.var]
            if r.attr is None:
                cols.append(pa.array(seqs[:, k], pa.int64()))
            else:
                vals = buf.attrs[r.attr][pos[:, k]]
                cols.append(pa.array(vals, type=r.arrow_type, from_pandas=True))
        return pa.RecordBatch.from_arrays(cols, schema=self._schema)

    # ------------------------------------------------------------------ checks
    def _check(self) -> None:
        """Invariants of every part of the state (used by the stress tests)."""
        self.buf._check()
        if self.engine is not None:
            self.engine._check()
        if self.feeder is not None:
            self.feeder._check()
            assert np.isin(self.feeder.waiting, self.buf.uid).all()
        if self.engine is not None:
            assert np.isin(self.engine.referenced(), self.buf.uid).all()
        if self.points is not None:
            self.points._check()
        assert self.counters.state_size == self._state_entries()
