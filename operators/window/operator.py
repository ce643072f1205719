"""The online windowed aggregation operator (dissertation Def. 2.11 with the windows of Defs 2.7/2.8).

Semantics (documented decisions):

* **Time windows** ``kind="time"``: window ``k`` covers ``[a + k*slide, a + k*slide + size)`` of
  event time ``t``. The anchor ``a`` is

  - ``align="epoch"`` (default; the SQL convention of Flink and Spark): ``a = offset``
    (0 by default), so windows start at multiples of ``slide`` since time 0;
  - ``align="first"`` (Def 2.8): ``a`` is the time of the first event that passes ``where``;
    windows start there (no window starts earlier).

  ``window_start`` and ``window_end`` are ``a + k*slide`` and ``a + k*slide + size`` (end
  exclusive, as in Flink/Spark; Def 2.8's stamp "largest covered time" is ``window_end - 1``).
  A window is reported once an event with ``t >= window_end`` has been seen, or at :meth:`flush`.
* **Count windows** ``kind="count"`` (Def 2.7): window ``k`` holds events ``k*slide ..
  k*slide + size - 1`` counted from the first event that passes ``where`` (per group with GROUP
  BY, like Flink's keyed count windows). Only full windows are reported (Def 2.7: a window holds
  exactly ``size`` events); a trailing partial window is not. ``window_start``/``window_end`` are
  the times of the window's first and last event (both inclusive; the end is Def 2.7's stamp).
* **Slides**: any ``size`` and ``slide`` > 0. A size that is not a multiple of the slide is handled
  by the slide1/slide2 split of the dissertation (3.3.3; see
  :mod:`~replaydb.operators.window.assign`). ``slide > size`` gives hopping windows with gaps (events
  in a gap belong to no window). ``slide=None`` means tumbling (``slide = size``).
* **Empty windows**: ``empty="skip"`` (default, the SQL convention: a window is a group and a group
  without rows yields no row) reports only windows holding at least one event. ``empty="emit"``
  (Def 2.11: one result per window) reports every window from the first one holding an event
  that passes ``where`` up to the last one starting at or before the latest input time (every
  input event advances time, also one that ``where`` rejects), with ``COUNT = 0`` and NULL for
  the other aggregates; it is available without GROUP BY only. With GROUP BY, a row ``(window, key)`` exists exactly when the window holds an
  event of that key.
* **where**: a predicate over event attributes, applied before windowing (σ then α); events it
  rejects still advance time (they close windows). Gaps between replay intervals
  (:meth:`end_interval`) are treated the same way: windows continue across them.
* **Aggregates**: see :mod:`~replaydb.operators.window.aggregates` (COUNT, SUM, AVG, MIN, MAX,
  FIRST, LAST, VAR_POP, VAR_SAMP, STDDEV_POP, STDDEV_SAMP; nulls ignored).

Output schema: ``window_start`` int64, ``window_end`` int64 (stream time units), the GROUP BY columns
(their input types), then one column per aggregate named by its alias. Results come ordered by
``window_end``, then by the order in which groups first appeared.

Runtime (per batch of ``N`` events that closes ``S`` slices): events are assigned to slices with
NumPy (O(N)), reduced per slice with ``ufunc.reduceat`` (O(N)), and the slices go through the slide
tree (:mod:`~replaydb.operators.window.sliding`, O(S) NumPy work + O(log W) per call); each window
result is O(1). Memory: ``W`` slice partials per active group (``W`` = slices per window). Groups
are kept in a dict of per-group slide states; a group whose state holds no event is dropped.
Every push costs a fixed few hundred NumPy calls per group present in the batch, so feed batches
of thousands of events: single-event pushes work, but pay that overhead per event (throughput by
batch size and group count: ``bench/results/window``).

Example (live use, without a store)::

    import pyarrow as pa
    from replaydb.operators.window import AggSpec, WindowAggregate, WindowConfig
    from replaydb.operators.expr import Column

    cfg = WindowConfig(size=10, slide=5, aggregates=(
        AggSpec("SUM", Column("x"), "sx"), AggSpec("COUNT", None, "n")))
    op = WindowAggregate(cfg)
    op.push(pa.table({"t": [1, 4, 12], "seq": [0, 1, 2], "x": [1.0, 2.0, 3.0]}))
    op.flush()
    op.results()   # window_start, window_end, sx, n: (-5, 5, 3.0, 2), (0, 10, 3.0, 2), ...

or from SQL: ``bind(parse(text), schema, "ms")`` in :mod:`replaydb.planner.lang.window_sql`.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.errors import DataError, OperatorError
from replaydb.operators.base import DEFAULT_STATE_CAP, Operator, column_np
from replaydb.operators.expr import (
    Call,
    Column,
    ColumnsEnv,
    Expr,
    columns,
    compile_expr,
)
from replaydb.operators.instants import TIME_COLUMNS, is_instant
from replaydb.operators.valuemask import ConditionMask
from replaydb.operators.window.aggregates import (
    AggSpec,
    Layout,
    Partials,
    concat,
    finalize,
    make_layout,
    reduce_segments,
    take,
)
from replaydb.operators.window.config import WindowConfig
from replaydb.operators.window.sliding import SlideState


def _slot_dtype(expr: Expr, schema: pa.Schema | None) -> str:
    """``int64`` for a plain integer/bool/temporal column, ``float64`` otherwise."""
    if isinstance(expr, Column) and schema is not None and expr.name in schema.names:
        t = schema.field(expr.name).type
        if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_temporal(t):
            return "int64"
    return "float64"


class WindowAggregate(Operator):
    """Windowed aggregation over time or count windows (see the module docstring)."""

    name = "window_aggregate"
    family = "window"

    def __init__(self, config: WindowConfig, *, state_cap: int | None = DEFAULT_STATE_CAP) -> None:
        super().__init__(config, state_cap=state_cap)
        self.cfg = config
        self.geom = config.geometry
        self._where = config.where
        self._where_mask: ConditionMask | None = None  # built from the first batch's schema
        # seq orders FIRST/LAST only; without them a batch may come without it
        self.requires_seq = any(a.func in ("FIRST", "LAST") for a in config.aggregates)
        self._arg_fns: dict[Expr, Any] = {}
        self._reset_state()

    @property
    def input_columns(self) -> list[str]:
        """The input columns this query reads (for replay: read nothing else)."""
        cols = ["t", "seq"] if self.requires_seq else ["t"]
        for a in self.cfg.aggregates:
            cols += [c.name for c in columns(a.arg)]
        cols += [c.name for c in columns(self.cfg.where)] + list(self.cfg.group_by)
        return list(dict.fromkeys(cols))

    # ------------------------------------------------------------------ schema
    def _input_schema(self) -> pa.Schema | None:
        return self.cfg.schema if self.cfg.schema is not None else self._learned

    def _make_layout(self, schema: pa.Schema | None) -> Layout:
        aggs = self.cfg.aggregates
        dtypes = {a.arg: _slot_dtype(a.arg, schema) for a in aggs if a.arg is not None}
        return make_layout(aggs, dtypes, with_time=self.cfg.kind == "count")

    # ------------------------------------------------------------------ declared
    def traits(self) -> Any:
        """Group keys split the work unless windows are anchored at the stream's first event
        or a variance aggregate shifts by the first value seen; windows continue across
        replay gaps (not interval-safe); partition tasks need time carriers."""
        from replaydb.operators.traits import Traits

        cfg = self.config
        keys: tuple[str, ...] = tuple(cfg.group_by)
        notes = []
        if cfg.kind == "time" and cfg.align == "first":
            keys = ()
            notes.append("windows anchored at the first event: one task")
        blocker = None
        if keys and any(a.func.startswith(("VAR", "STDDEV")) for a in cfg.aggregates):
            blocker = "variance aggregates shift by the stream's first value: one task"
        cols = self.input_columns
        return Traits("window", partition_keys=keys, interval_safe=False, time_carrier=True,
                      partition_blocker=blocker, input_columns=tuple(cols) if cols else None,
                      sort_columns=("window_end", "window_start", *cfg.group_by),
                      devices=self.devices(), notes=tuple(notes))

    def task_spec(self, *, strip_select: bool = False, time_carrier: str | None = None) -> Any:
        """With ``time_carrier``: the same aggregation whose WHERE also rejects rows whose
        ``time_carrier`` column is 1 (rejected rows still advance time)."""
        spec = self.spec()
        if time_carrier is None:
            return spec
        from replaydb.operators.expr import Binary, Column, Literal

        cfg = self.config
        test = Binary("=", Column(time_carrier), Literal(0))
        where = test if cfg.where is None else Binary("and", test, cfg.where)
        return spec.with_config(replace(cfg, where=where))

    def instant_columns(self, time_columns: Collection[str] = TIME_COLUMNS) -> tuple[str, ...]:
        """``window_start``, ``window_end``, a GROUP BY of the time column, and every
        aggregate picking a time (``MIN(t)``, ``LAST(t)``: :func:`is_instant`)."""
        names = {n.lower() for n in time_columns}
        out = ["window_start", "window_end"]
        out += [k for k in self.cfg.group_by if k.lower() in names]
        out += [a.alias for a in self.cfg.aggregates
                if a.func in ("MIN", "MAX", "FIRST", "LAST")
                and is_instant(Call(a.func, (a.arg,)) if a.arg is not None else None,
                               time_columns)]
        return tuple(out)

    @property
    def output_schema(self) -> pa.Schema:
        schema = self._input_schema()
        fields = [pa.field("window_start", pa.int64()), pa.field("window_end", pa.int64())]
        for k in self.cfg.group_by:
            typ = schema.field(k).type if schema is not None and k in schema.names else pa.string()
            fields.append(pa.field(k, typ))
        lay = self._layout if self._layout is not None else self._make_layout(schema)
        for a, i in zip(lay.aggs, lay.agg_slot):
            fields.append(pa.field(a.alias, self._agg_type(a, lay, i, schema)))
        return pa.schema(fields)

    @staticmethod
    def _agg_type(a: AggSpec, lay: Layout, i: int, schema: pa.Schema | None) -> pa.DataType:
        if a.func == "COUNT":
            return pa.int64()
        if a.func in ("AVG", "VAR_POP", "VAR_SAMP", "STDDEV_POP", "STDDEV_SAMP"):
            return pa.float64()
        dt = lay.slot_dtypes[i]
        if a.func == "SUM":
            return pa.int64() if dt == "int64" else pa.float64()
        if isinstance(a.arg, Column) and schema is not None and a.arg.name in schema.names:
            t = schema.field(a.arg.name).type
            if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) \
                    or pa.types.is_temporal(t):
                return t
        return pa.int64() if dt == "int64" else pa.float64()

    # ------------------------------------------------------------------ state
    def _reset_state(self) -> None:
        self._learned: pa.Schema | None = None
        self._layout: Layout | None = (
            self._make_layout(self.cfg.schema) if self.cfg.schema is not None else None)
        self.anchor: int | None = None
        self.groups: dict[int, SlideState] = {}
        self.counts: dict[int, int] = {}  # count windows: events seen per group
        self.key_ids: dict[tuple, int] = {}
        self.key_values: list[tuple] = []
        self.due: dict[int, int] = {}
        self.heap: list[tuple[int, int]] = []
        self.frontier: int | None = None  # largest t seen
        self.t_first: int | None = None  # first event passing `where`
        self.t_last: int | None = None
        self.shifts: list[float | None] = []
        self._set_state_size(0)

    def _get_state(self) -> Any:
        return {
            "learned": self._learned, "anchor": self.anchor,
            "groups": {g: s.get_state() for g, s in self.groups.items()},
            "counts": self.counts, "key_ids": self.key_ids, "key_values": self.key_values,
            "due": self.due, "heap": self.heap, "frontier": self.frontier,
            "t_first": self.t_first, "t_last": self.t_last, "shifts": self.shifts,
        }

    def _set_state(self, st: Any) -> None:
        self._learned = st["learned"]
        self._layout = self._make_layout(self._input_schema()) \
            if self._input_schema() is not None else None
        self.anchor = st["anchor"]
        self.groups = {}
        for g, gs in st["groups"].items():
            s = self._new_state(0)
            s.set_state(gs)
            self.groups[g] = s
        self.counts, self.key_ids, self.key_values = st["counts"], st["key_ids"], st["key_values"]
        self.due, self.heap, self.frontier = st["due"], st["heap"], st["frontier"]
        self.t_first, self.t_last, self.shifts = st["t_first"], st["t_last"], st["shifts"]
        self._update_size()

    def _new_state(self, k_first: int) -> SlideState:
        assert self._layout is not None
        return SlideState(self._layout, self.geom, k_first, emit_empty=self.cfg.empty == "emit")

    def _update_size(self) -> None:
        self._set_state_size(sum(s.size for s in self.groups.values()), "slide-tree leaves")

    def _check(self) -> None:
        """Invariants of every group's slide state (seeded stress tests call this)."""
        for s in self.groups.values():
            s._check()

    def end_interval(self) -> None:
        """A gap in the input (the next replay interval): windows simply continue.

        Windows are defined on time (or on the count of events that reach the operator), so a
        window spanning the gap aggregates the events on both sides; the gap's events are absent
        exactly as if ``where`` had rejected them. (The base class would flush and reset, which
        for windows would report a window that spans the gap twice, once per side.)
        """
        self.counters.intervals += 1

    # ------------------------------------------------------------------ input
    def _values(self, batch: pa.RecordBatch) -> list[tuple[np.ndarray | None, np.ndarray | None]]:
        """Per slot: (values as the slot dtype, valid mask or None)."""
        assert self._layout is not None
        lay = self._layout
        out: list[tuple[np.ndarray | None, np.ndarray | None]] = []
        n = batch.num_rows
        needs_values = {i for a, i in zip(lay.aggs, lay.agg_slot) if i >= 0 and a.func != "COUNT"}
        for i, expr in enumerate(lay.slots):
            dt = np.dtype(lay.slot_dtypes[i])
            if isinstance(expr, Column) and expr.name in batch.schema.names:
                col = batch.column(expr.name)
                valid = None
                if col.null_count:
                    valid = col.is_valid().to_numpy(zero_copy_only=False)
                if i not in needs_values:  # COUNT(x) only needs validity (NaN is null too)
                    if pa.types.is_floating(col.type):
                        nan = np.isnan(col.fill_null(0).to_numpy(zero_copy_only=False))
                        if nan.any():
                            valid = ~nan if valid is None else valid & ~nan
                    out.append((None, valid))
                    continue
                if pa.types.is_temporal(col.type):
                    col = col.cast(pa.int64())
                elif pa.types.is_boolean(col.type):
                    col = col.cast(pa.int64())
                elif not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
                          or pa.types.is_decimal(col.type)):
                    raise OperatorError(
                        f"{self.name}: column {expr.name!r} of type {col.type} cannot be "
                        f"aggregated (only COUNT works on it)")
                if col.null_count:
                    col = col.fill_null(0)
                v = col.to_numpy(zero_copy_only=False).astype(dt, copy=False)
                if dt.kind == "f":
                    nan = np.isnan(v)
                    if nan.any():
                        valid = ~nan if valid is None else valid & ~nan
                out.append((v, valid))
                continue
            fn = self._arg_fns.get(expr)
            if fn is None:
                fn = self._arg_fns[expr] = compile_expr(expr)
            cols = {c.name: column_np(batch, c.name) for c in columns(expr)
                    if c.name in batch.schema.names}
            r = fn(ColumnsEnv(cols))
            v = np.broadcast_to(np.asarray(r, dtype=np.float64), (n,)).copy()
            nan = np.isnan(v)
            out.append((v, ~nan if nan.any() else None))
        return out

    def _group_codes(self, batch: pa.RecordBatch) -> np.ndarray:
        """Group id (stable across batches) of every row."""
        n = batch.num_rows
        if not self.cfg.group_by:
            if not self.key_ids:
                self.key_ids[()] = 0
                self.key_values.append(())
            return np.zeros(n, np.int64)
        codes, dicts = [], []
        for k in self.cfg.group_by:
            enc = pc.dictionary_encode(batch.column(k))
            if isinstance(enc, pa.ChunkedArray):
                enc = enc.combine_chunks()
            idx = enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False)
            codes.append(idx.astype(np.int64))
            dicts.append(enc.dictionary.to_pylist() + [None])
        if len(codes) == 1:
            uniq, inv = np.unique(codes[0], return_inverse=True)
            tuples = [(dicts[0][u],) for u in uniq]
        else:
            stacked = np.stack(codes, axis=1)
            uniq2, inv = np.unique(stacked, axis=0, return_inverse=True)
            tuples = [tuple(d[c] for d, c in zip(dicts, row)) for row in uniq2.tolist()]
        gids = np.empty(len(tuples), np.int64)
        for j, key in enumerate(tuples):
            gid = self.key_ids.get(key)
            if gid is None:
                gid = self.key_ids[key] = len(self.key_values)
                self.key_values.append(key)
            gids[j] = gid
        return gids[inv.reshape(-1)]

    def _push_batch(self, batch: pa.RecordBatch) -> None:
        cfg = self.cfg
        if self._layout is None:
            self._learned = batch.schema
            self._layout = self._make_layout(batch.schema)
        for k in cfg.group_by:
            if k not in batch.schema.names:
                raise OperatorError(f"{self.name}: GROUP BY column {k!r} is not in the input "
                                    f"(columns: {batch.schema.names})")
        t_all = column_np(batch, "t").astype(np.int64, copy=False)
        if self.frontier is not None and t_all[0] < self.frontier:
            raise DataError(f"{self.name}: input out of time order (t={int(t_all[0])} after "
                            f"t={self.frontier} of an earlier batch)", row=0, column="t")
        if not (t_all[1:] >= t_all[:-1]).all():
            back = np.flatnonzero(t_all[1:] < t_all[:-1])
            raise DataError(f"{self.name}: input out of time order", row=int(back[0]) + 1,
                            column="t")
        self.frontier = int(t_all[-1])
        if self._where is not None:
            if self._where_mask is None:
                self._where_mask = ConditionMask(self._where, batch.schema)
            cols = {c: column_np(batch, c) for c in self._where_mask.numpy_columns
                    if c in batch.schema.names}
            mask = self._where_mask.mask(batch, ColumnsEnv(cols), {})
            if not mask.all():
                batch = batch.filter(pa.array(mask))
        produced: list[tuple[np.ndarray, np.ndarray, Partials]] = []
        if batch.num_rows:
            self._push_rows(batch, produced)
        if cfg.kind == "time" and self.anchor is not None:
            self._advance_time(produced)
        self._emit_windows(produced)
        self._update_size()

    def _push_rows(self, batch: pa.RecordBatch,
                   produced: list[tuple[np.ndarray, np.ndarray, Partials]]) -> None:
        cfg, geom = self.cfg, self.geom
        lay = self._layout
        assert lay is not None
        t = column_np(batch, "t").astype(np.int64, copy=False)
        seq = None  # orders FIRST / LAST only
        if any(c.kind in ("first", "last") for c in lay.components):
            seq = column_np(batch, "seq").astype(np.int64, copy=False) \
                if "seq" in batch.schema.names else np.arange(batch.num_rows, dtype=np.int64)
        if self.t_first is None:
            self.t_first = int(t[0])
        self.t_last = int(t[-1])
        if self.anchor is None:
            self.anchor = (cfg.offset if cfg.align == "epoch" else int(t[0])) \
                if cfg.kind == "time" else 0
        values = self._values(batch)
        if len(self.shifts) < len(values):
            self.shifts = [None] * len(values)
        for i, (v, valid) in enumerate(values):
            if self.shifts[i] is None and v is not None and f"s1{i}" in lay.names:
                ok = np.flatnonzero(valid) if valid is not None else np.arange(min(1, len(v)))
                if len(ok):
                    self.shifts[i] = float(v[ok[0]])
        gid = self._group_codes(batch)
        if cfg.group_by:
            order = np.argsort(gid, kind="stable")
            sg = gid[order]
            bounds = np.flatnonzero(np.diff(sg)) + 1
            starts = np.concatenate([[0], bounds])
            ends = np.append(bounds, len(sg))
            groups = [(int(sg[a]), order[a:b]) for a, b in zip(starts, ends)]
        else:
            groups = [(0, None)]
        shifts = [s if s is not None else 0.0 for s in self.shifts]
        frontier_rel = None if cfg.kind == "count" else self.frontier - self.anchor  # type: ignore[operator]
        for g, rows in groups:
            tg = t if rows is None else t[rows]
            if cfg.kind == "time":
                rel = tg - self.anchor
            else:
                c0 = self.counts.get(g, 0)
                rel = np.arange(c0, c0 + len(tg), dtype=np.int64)
                self.counts[g] = c0 + len(tg)
            state = self.groups.get(g)
            if state is None:
                k_first = geom.first_window_ending_after(int(rel[0]))
                if cfg.align == "first":
                    k_first = max(k_first, 0)
                if cfg.empty == "emit":
                    k_first = geom.first_window_ending_after(self.t_first - self.anchor)
                    if cfg.align == "first":
                        k_first = max(k_first, 0)
                state = self.groups[g] = self._new_state(k_first)
            seg_starts, seg_slices = geom.segments(rel)
            vals = [((v if rows is None else v[rows]) if v is not None else None,
                     (m if rows is None else m[rows]) if m is not None else None)
                    for v, m in values]
            parts = reduce_segments(
                lay, seg_starts, len(tg),
                [(v if v is not None else np.zeros(len(tg)), m) for v, m in vals],
                seq if rows is None or seq is None else seq[rows], tg, shifts)
            closed = geom.slice_of(frontier_rel if cfg.kind == "time" else self.counts[g])
            ks, wp = state.feed(seg_slices, parts, int(closed))
            state.last_rel = int(rel[-1])
            if len(ks):
                produced.append((np.full(len(ks), g, np.int64), ks, wp))
            if cfg.kind == "time" and cfg.group_by:
                self._schedule(g, state)

    def _schedule(self, g: int, state: SlideState) -> None:
        """Time windows with GROUP BY: remember when group ``g`` next has a window to report."""
        if state.idle():
            self.groups.pop(g, None)
            self.due.pop(g, None)
            return
        due = int(self.anchor + self.geom.window_end(state.next_window()))  # type: ignore[operator]
        if self.due.get(g) != due:
            self.due[g] = due
            heapq.heappush(self.heap, (due, g))

    def _advance_time(self, produced: list[tuple[np.ndarray, np.ndarray, Partials]]) -> None:
        """Report windows that time has closed in groups that received no event in this batch."""
        closed = int(self.geom.slice_of(self.frontier - self.anchor))  # type: ignore[operator]
        lay = self._layout
        assert lay is not None
        if not self.cfg.group_by:
            state = self.groups.get(0)
            if state is not None and state.next_slice < closed:
                ks, wp = state.feed(np.zeros(0, np.int64), lay.identity(0), closed)
                if len(ks):
                    produced.append((np.zeros(len(ks), np.int64), ks, wp))
            return
        while self.heap and self.heap[0][0] <= self.frontier:
            due, g = heapq.heappop(self.heap)
            if self.due.get(g) != due:
                continue  # stale entry
            del self.due[g]
            state = self.groups[g]
            ks, wp = state.feed(np.zeros(0, np.int64), lay.identity(0), closed)
            if len(ks):
                produced.append((np.full(len(ks), g, np.int64), ks, wp))
            self._schedule(g, state)

    def _flush(self) -> None:
        produced: list[tuple[np.ndarray, np.ndarray, Partials]] = []
        lay = self._layout
        if self.cfg.kind == "time" and self.anchor is not None and lay is not None:
            geom = self.geom
            for g, state in list(self.groups.items()):
                last = self.frontier - self.anchor if self.cfg.empty == "emit" \
                    else state.last_rel  # type: ignore[operator]
                if last is None:
                    continue
                target = geom.last_window_starting_by(int(last)) * geom.p + geom.W
                if target > state.next_slice or state.open_slice is not None:
                    ks, wp = state.feed(np.zeros(0, np.int64), lay.identity(0),
                                        max(target, state.next_slice))
                    if len(ks):
                        produced.append((np.full(len(ks), g, np.int64), ks, wp))
            self.heap, self.due = [], {}
        self._emit_windows(produced)

    # ------------------------------------------------------------------ per-slice partials
    def open_partials(self, anchor: int, first: int) -> None:
        """Start feeding per-slice partials computed elsewhere (the TAB+-tree index path).

        ``anchor`` is the window anchor ``a`` (time windows: ``offset`` or the first event's
        time; count windows: 0); ``first`` the relative position of the first event (time
        windows: its time; count windows: 0). Only for ungrouped queries without ``where``
        (partials then describe all events of a slice). The partials must have the components
        of :attr:`layout` (requires ``config.schema``).
        """
        cfg = self.cfg
        if cfg.group_by or cfg.where is not None:
            raise OperatorError(f"{self.name}: per-slice partials need an ungrouped query "
                                f"without WHERE")
        if self._layout is None:
            raise OperatorError(f"{self.name}: per-slice partials need config.schema")
        self.reset()
        self.anchor = int(anchor)
        if cfg.kind == "time":
            self.t_first = int(first)
            k_first = self.geom.first_window_ending_after(int(first) - self.anchor)
            if cfg.align == "first":
                k_first = max(k_first, 0)
        else:
            k_first = 0
        self._group_codes(pa.record_batch({"t": pa.array([], pa.int64())}))
        self.groups[0] = self._new_state(k_first)
        self._update_size()

    @property
    def layout(self) -> Layout | None:
        """The partial-aggregate layout of this query (None until the schema is known)."""
        return self._layout

    def push_partials(self, slices: np.ndarray, parts: Partials, closed_before: int) -> None:
        """Feed non-empty slices (ascending indices) and close every slice ``< closed_before``;
        completed windows become results."""
        state = self.groups[0]
        ks, wp = state.feed(slices, parts, int(closed_before))
        if len(ks):
            self._emit_windows([(np.zeros(len(ks), np.int64), ks, wp)])
        self._update_size()

    def close_partials(self, last: int, last_time: int) -> None:
        """End of per-slice input: ``last`` is the relative position of the last event (time
        windows: its time minus the anchor; count windows: the number of events minus 1) and
        ``last_time`` its time. Emits what :meth:`flush` allows."""
        state = self.groups[0]
        state.last_rel = int(last)
        self.t_last = self.frontier = int(last_time)
        if self.cfg.kind == "count":
            self.counts[0] = int(last) + 1
        self.flush()

    # ------------------------------------------------------------------ output
    def _emit_windows(self, produced: list[tuple[np.ndarray, np.ndarray, Partials]]) -> None:
        if not produced:
            return
        lay = self._layout
        assert lay is not None
        gid = np.concatenate([p[0] for p in produced])
        ks = np.concatenate([p[1] for p in produced])
        parts = concat([p[2] for p in produced])
        if self.cfg.kind == "time":
            start = self.anchor + self.geom.window_start(ks)  # type: ignore[operator]
            end = start + self.cfg.size
        else:
            start, end = parts["tmin"], parts["tmax"]
        order = np.lexsort((ks, gid, end)) if len(produced) > 1 else None
        if order is not None:
            gid, ks, start, end = gid[order], ks[order], start[order], end[order]
            parts = take(parts, order)
        self._emit(self.build_batch(gid, start, end, parts))

    def build_batch(self, gid: np.ndarray, start: np.ndarray, end: np.ndarray,
                    parts: Partials) -> pa.RecordBatch:
        """Result rows from window bounds, group ids and window partials."""
        schema = self.output_schema
        lay = self._layout
        assert lay is not None
        arrays: list[pa.Array] = [pa.array(start.astype(np.int64)), pa.array(end.astype(np.int64))]
        for j, k in enumerate(self.cfg.group_by):
            vals = [self.key_values[g][j] for g in range(len(self.key_values))]
            arrays.append(pa.array(vals, type=schema.field(k).type).take(pa.array(gid)))
        shifts = [s if s is not None else 0.0 for s in self.shifts]
        for res, f in zip(finalize(lay, parts, shifts), list(schema)[len(arrays):]):
            data = np.ma.getdata(res)
            mask = np.ma.getmaskarray(res)
            arr = pa.array(data, mask=mask if mask.any() else None)
            if arr.type != f.type:
                arr = arr.cast(f.type)
            arrays.append(arr)
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
