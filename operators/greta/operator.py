"""The GRETA operator: the online lifecycle around the runtime (see :mod:`replaydb.operators.greta`).

Input batches are buffered until a window can close (or the buffer is large), then processed in
sub-chunks that end at window closes, several prepared together
(:meth:`~replaydb.operators.greta.runtime.Runtime.process_spans`); the events of the latest
timestamp are held back until a later timestamp (or the end of input) shows that no more events
of that timestamp can come, so equal timestamps are never split between two calls (they must
not precede each other).
"""

from __future__ import annotations

from collections.abc import Collection
from decimal import Decimal
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.errors import DataError, OperatorError
from replaydb.operators.base import DEFAULT_STATE_CAP, Operator
from replaydb.operators.greta import closing as cl
from replaydb.operators.greta import kernel as kn
from replaydb.operators.greta.config import GretaConfig
from replaydb.operators.greta.events import EventChunk
from replaydb.operators.greta.limbrows import (
    exact_of_int64,
    limb_rows_to_int64,
    normalize_limbs,
    wide_rows_to_ints,
    widened_limbs,
)
from replaydb.operators.greta.plan import CompiledPlan, compile_plan
from replaydb.operators.greta.runtime import NGT, OUTT, GraphState, Runtime
from replaydb.operators.instants import TIME_COLUMNS

MIN_PROCESS_ROWS = 1 << 16
PREPARE_EVENTS = 1 << 13
"""Sub-chunks are prepared together until they hold this many events (at least one sub-chunk;
one at a time when an index scans records). It bounds what lingers between two preparations:
the zero rows of windows closed meanwhile, which the next rebuild drops."""
_DEC_LIMIT = 10**38
_I64 = (-(1 << 63), (1 << 63) - 1)
_DERIVED = ("cp", "g", "_static", "_slots", "_users_cache", "_gc_base")
"""Attributes of a graph's state derived from its plan and layout (not saved with the state)."""


class _Closed(NamedTuple):
    """Closed windows' rows before conversion (window order): each row's window id, group key,
    integer and float values (slot columns only) and last sequence number, and their limb
    count."""

    w: np.ndarray
    keys: list[tuple]
    vi: np.ndarray
    vf: np.ndarray
    seq: np.ndarray
    L: int


def _in_group_order(batch: pa.RecordBatch, n_keys: int) -> pa.RecordBatch:
    """The rows of closed windows (in window order) with each window's groups in ascending
    order of their GROUP-BY values (nulls last): an order that depends only on the rows, not
    on when a group was first seen (a pruned replay sees some groups later than full replay
    does). O(rows log rows)."""
    if n_keys == 0 or batch.num_rows < 2:
        return batch
    keys = [("window_start", "ascending")] + [(name, "ascending", "at_end")
                                              for name in batch.schema.names[2:2 + n_keys]]
    return batch.take(pc.sort_indices(batch, sort_keys=keys))


def _widened(closed: _Closed, L: int, Cb: int) -> _Closed:
    """``closed`` with its exact channels widened to ``L`` limbs (:func:`.widened_limbs`)."""
    if closed.L == L:
        return closed
    return closed._replace(vi=widened_limbs(closed.vi, closed.L, L, Cb), L=L)


def _key_column(vals: list[Any], ty: pa.DataType) -> pa.Array:
    """The GROUP-BY column of type ``ty`` from its values (None: null). O(rows)."""
    if pa.types.is_integer(ty):
        if pa.types.is_signed_integer(ty) and None not in vals:
            return pa.array(np.array(vals, np.int64)).cast(ty)
        vals = [None if v is None else int(v) for v in vals]
    return pa.array(vals, ty)


def _span_groups(ends: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Consecutive sub-chunks (``ends``: where each ends) grouped into ``[e0, e1)`` runs of at
    least one sub-chunk, each closed by the sub-chunk that brings it to ``limit`` events or
    more. O(groups log sub-chunks)."""
    out = []
    i, n = 0, len(ends)
    while i < n:
        start = int(ends[i - 1]) if i else 0
        j = min(max(int(np.searchsorted(ends, start + limit, "left")) + 1, i + 1), n)
        out.append((i, j))
        i = j
    return out


class GretaOperator(Operator):
    """Event trend aggregation (GRETA). See :mod:`replaydb.operators.greta` for the semantics,
    the output schema and an example.

    Counters beyond the common ones: ``chunks`` (the runs of events prepared together by the
    runtime: sub-chunks between window closes up to :data:`PREPARE_EVENTS` events; each has a
    fixed cost besides its events), ``window_runs`` (the sub-chunks with occurrences or
    completions of negated sub-patterns: the kernel's work between two window closes),
    ``state_bytes`` and ``peak_state_bytes``."""

    name = "greta"
    family = "greta"

    def __init__(self, config: GretaConfig, *, schema: pa.Schema | None = None,
                 state_cap: int | None = DEFAULT_STATE_CAP) -> None:
        super().__init__(config, state_cap=state_cap)
        self.in_schema = schema
        self._plan: CompiledPlan | None = compile_plan(config, schema) if schema is not None \
            else None
        self._last_input = False  # the batch being pushed is the last: the flush processes it
        self._reset_state()

    # ------------------------------------------------------------------ declared
    def spec_options(self) -> dict[str, Any]:
        return {} if self.in_schema is None else {"schema": self.in_schema}

    def traits(self) -> Any:
        from replaydb.operators.traits import Traits

        cfg = self.config
        cols = self.input_columns
        return Traits("greta", partition_keys=tuple(cfg.group_by),
                      sort_columns=("window_start", "window_end", *cfg.group_by, "last_seq"),
                      interval_safe=False, skips_gaps=True,
                      input_columns=tuple(cols) if cols is not None else None)

    @property
    def input_columns(self) -> list[str] | None:
        """The input columns the query reads (replay reads nothing else; batches may carry
        more, which are ignored): time, type, ``seq``, and every column a pattern graph
        partitions by, aggregates or evaluates. None until the plan is compiled (from the
        constructor's schema or the first batch): then every column is read."""
        return None if self._plan is None else list(self._plan.columns_needed)

    def end_interval(self) -> None:
        """A gap in the input means only that the events in it were left out: the state is
        kept, and trends combine events on both sides of it.

        Under skip-till-any-match a trend skips any event, so an event that can take part in
        no trend (it satisfies no variable's local predicates, or lies in no window that can
        hold a trend) changes no result: replaying a subset of the stream that keeps every
        event that can take part gives full replay's rows (the index-assisted plan of
        :mod:`replaydb.planner.greta_plan`). Windows still close as time advances."""
        self.counters.intervals += 1

    def push_intervals(self, batch: pa.RecordBatch, breaks: np.ndarray, *,
                       final: bool = False) -> None:
        """Many intervals in one batch: the breaks are checked and counted, the rows pushed
        at once (a gap keeps the state, see :meth:`end_interval`). With ``final`` the rows
        are only buffered, and the flush processes them in one pass: one preparation instead
        of one for all but the last timestamp's events and another for those."""
        breaks = self._checked_breaks(breaks, batch.num_rows)
        self.counters.intervals += int(breaks.size)
        self._last_input = final
        try:
            if batch.num_rows:
                self.push(batch)
        finally:
            self._last_input = False
        if final:
            self.flush()

    # ------------------------------------------------------------------ info
    @property
    def plan(self) -> CompiledPlan:
        if self._plan is None:
            raise OperatorError("greta: the plan is compiled from the first batch's schema; "
                                "pass schema= to the constructor to know it earlier")
        return self._plan

    @property
    def output_schema(self) -> pa.Schema:
        return self.plan.output_schema

    def instant_columns(self, time_columns: Collection[str] = TIME_COLUMNS) -> tuple[str, ...]:
        """``window_start``, ``window_end``, a GROUP-BY of the time column, and ``MIN``/``MAX``
        of it (when they keep its integer type)."""
        names = {n.lower() for n in time_columns}
        cfg = self.config
        out = ["window_start", "window_end"]
        out += [k for k in cfg.group_by if k.lower() in names]
        schema = self.output_schema
        out += [it.name for it in cfg.returns
                if it.kind in ("min", "max") and str(it.attr).lower() in names
                and it.name in schema.names and pa.types.is_integer(schema.field(it.name).type)]
        return tuple(out)

    def _check(self) -> None:
        """Verify the runtime's invariants (tests call this after every step)."""
        if self._rt is not None:
            for gs in self._rt.graphs:
                gs._check()
        if self._buf:
            t = np.concatenate([b.column("t").to_numpy() for b in self._buf])
            assert np.all(np.diff(t) >= 0)
            if self._t_last is not None:
                assert t[-1] == self._t_last

    def explain(self) -> str:
        """The split pattern, its templates, indexes and windows (for EXPLAIN)."""
        return self.plan.describe()

    # ------------------------------------------------------------------ lifecycle hooks
    def _reset_state(self) -> None:
        self._rt: Runtime | None = Runtime(self._plan) if self._plan is not None else None
        self._buf: list[pa.Table] = []
        self._buf_rows = 0
        self._buf_bytes = 0
        self._closed: list[_Closed] = []
        self._t_last: int | None = None
        self._w_next: int | None = None
        self._w_hi: int | None = None
        self._peak_bytes = 0
        self._entries = 0
        self._bytes = 0

    def _get_state(self) -> Any:
        graphs = None
        if self._rt is not None:
            graphs = [{k: v for k, v in g.__dict__.items() if k not in _DERIVED}
                      for g in self._rt.graphs]
        return {"graphs": graphs, "buf": list(self._buf), "buf_rows": self._buf_rows,
                "t_last": self._t_last, "w_next": self._w_next, "w_hi": self._w_hi,
                "peak_bytes": self._peak_bytes, "entries": self._entries, "bytes": self._bytes}

    def _set_state(self, state: Any) -> None:
        self._reset_state()
        if state["graphs"] is not None:
            rt = Runtime(self.plan)
            for gs, d in zip(rt.graphs, state["graphs"]):
                gs.__dict__.update(d)
            self._rt = rt
        self._buf = list(state["buf"])
        self._buf_rows = state["buf_rows"]
        self._buf_bytes = sum(t.nbytes for t in self._buf)
        self._t_last = state["t_last"]
        self._w_next = state["w_next"]
        self._w_hi = state["w_hi"]
        self._peak_bytes = state["peak_bytes"]
        self._entries = state["entries"]
        self._bytes = state["bytes"]

    def _push_batch(self, batch: pa.RecordBatch) -> None:
        if self._plan is None:
            self._plan = compile_plan(self.config, batch.schema)
            self._rt = Runtime(self._plan)
        plan = self.plan
        names = batch.schema.names
        for c in plan.columns_needed:
            if c not in names:
                raise DataError("the batch lacks a column the query needs", column=c)
        tbl = pa.Table.from_batches([batch]).select(list(plan.columns_needed))
        t = np.asarray(tbl.column("t").to_numpy(zero_copy_only=False), dtype=np.int64)
        if tbl.column("t").null_count:
            raise DataError("null timestamp", column="t",
                            row=int(np.flatnonzero(tbl.column("t").is_null().to_numpy(
                                zero_copy_only=False))[0]))
        d = np.diff(t)
        if d.size and (d < 0).any():
            raise DataError("events are not in time order", column="t",
                            row=int(np.flatnonzero(d < 0)[0] + 1))
        if self._t_last is not None and t[0] < self._t_last:
            raise DataError(f"event time {int(t[0])} is before the previous batch's last time "
                            f"{self._t_last}", column="t", row=0)
        self._buf.append(tbl)
        self._buf_rows += tbl.num_rows
        self._buf_bytes += tbl.nbytes
        self._t_last = int(t[-1])
        if self._w_next is None:
            self._w_next = (int(t[0]) - plan.within) // plan.slide + 1
        closable = self._w_next * plan.slide + plan.within <= self._t_last
        if not self._last_input and (closable or self._buf_rows >= max(MIN_PROCESS_ROWS,
                                                                        self._entries)):
            self._process(final=False)
        self._update_state_size(measure=False)

    def _flush(self) -> None:
        if self._plan is None:
            return
        self._process(final=True)
        if self._w_hi is not None:
            self._close_through(self._w_hi)
        self._emit_closed()
        self._update_state_size()

    # ------------------------------------------------------------------ processing
    def _process(self, final: bool) -> None:
        plan = self.plan
        if not self._buf:
            return
        table = pa.concat_tables(self._buf) if len(self._buf) > 1 else self._buf[0]
        t = np.asarray(table.column("t").to_numpy(zero_copy_only=False), dtype=np.int64)
        cut = len(t) if final else int(np.searchsorted(t, t[-1], "left"))
        rest = table.slice(cut)
        self._buf = [rest] if rest.num_rows else []
        self._buf_rows = rest.num_rows
        self._buf_bytes = rest.nbytes if rest.num_rows else 0
        d, s = plan.within, plan.slide
        if cut:
            proc = table.slice(0, cut)
            tp = t[:cut]
            closed = np.floor_divide(tp - d, s)
            ends = np.append(np.flatnonzero(np.diff(closed)) + 1, cut).astype(np.int64)
            whole = EventChunk(proc, plan.config.type_column)
            limit = 1 if self._rt.scans else PREPARE_EVENTS
            for e0, e1 in _span_groups(ends, limit):
                a = int(ends[e0 - 1]) if e0 else 0
                b = int(ends[e1 - 1])
                starts = np.concatenate([[a], ends[e0:e1 - 1]])
                self._close_through(int(closed[a]))
                W0 = self._w_next * s
                runs, through = self._rt.process_spans(
                    whole.slice(a, b - a), W0, ends[e0:e1] - a, closed[starts],
                    self._close_through, self._closed_rows)
                if through is not None:
                    self._w_next = max(self._w_next, through + 1)
                extra = self.counters.extra
                extra["chunks"] = extra.get("chunks", 0) + 1
                extra["window_runs"] = extra.get("window_runs", 0) + runs
                hi = int(tp[b - 1]) // s
                self._w_hi = hi if self._w_hi is None else max(self._w_hi, hi)
                self._update_state_size()
        if not final:  # the flush closes the remaining windows and emits them all at once
            if self._t_last is not None:
                self._close_through((self._t_last - d) // s)
            self._emit_closed()

    def _closed_rows(self, w: np.ndarray, g: np.ndarray, vi: np.ndarray, vf: np.ndarray,
                     seq: np.ndarray, L: int) -> None:
        """Rows of windows closed inside the kernel (window order), kept for
        :meth:`_emit_closed`."""
        keys = self._rt.graphs[0].groups.keys
        self._closed.append(_Closed(w, [keys[i] for i in g.tolist()], vi, vf, seq, L))

    def _close_through(self, wid: int) -> None:
        """Close (emit and clear) every window with id <= wid not closed yet. A window no
        kernel run wrote is zero in every table, so it has no rows and nothing to clear: only
        the graph's dirty windows are closed (:mod:`.closing`). O(windows closed + K)."""
        if self._w_next is None:
            self._w_next = wid + 1
            return
        for w in self._rt.graphs[0].dirty_windows(wid):
            self._close_window(w)
        self._w_next = max(self._w_next, wid + 1)

    def _close_window(self, w: int) -> None:
        """Close window ``w``: its nonzero groups' values are kept for :meth:`_emit_closed`
        (windows closing in one call become one output batch), and its slot is cleared.
        O(groups + state rows)."""
        gs = self._rt.graphs[0]
        k = w % gs.K
        ngroups = len(gs.groups)
        if ngroups == 0:
            gs.clear_slot(k)
            return
        big, mmi, fs, mmf = gs.slot_columns(k)
        if gs.g.case2 is not None:
            I_rows, F_rows, seq = self._queue_totals(gs, k, big, mmi, fs, mmf, ngroups)
        else:
            I_rows = gs.finI[:ngroups][:, gs.slot_int_columns(k)]
            F_rows = gs.finF[:ngroups][:, gs.slot_float_columns(k)]
            seq = gs.fin_seq[:ngroups, k]
        gids = np.flatnonzero(cl.nonzero_rows(I_rows, gs.L))
        if len(gids):
            self._closed.append(_Closed(np.full(len(gids), w, np.int64),
                                        [gs.groups.keys[g] for g in gids.tolist()],
                                        I_rows[gids], F_rows[gids], seq[gids], gs.L))
        gs.clear_slot(k)

    def _queue_totals(self, gs: GraphState, k: int, big: np.ndarray, mmi: np.ndarray,
                      fs: np.ndarray, mmf: np.ndarray,
                      ngroups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        P = len(gs.parts)
        c2 = gs.g.children.index(gs.g.case2)
        gc = gs.gc(0.0, 1)
        outt = OUTT(finI=gs.finI, finF=gs.finF, fin_seq=gs.fin_seq, p_gid=gs.p_gid, qI=gs.qI,
                    qF=gs.qF, q_t=gs.q_t, q_seq=gs.q_seq, q_pid=gs.q_pid, q_alive=gs.q_alive,
                    q_nxt=gs.q_nxt, qh=gs.qh, qt=gs.qt, qtotI=gs.qtotI, qtotF=gs.qtotF,
                    co_t=gs.co_t, co_ls=gs.co_ls, co_pid=gs.co_pid)
        e = np.zeros(0, np.int64)
        ngt = NGT(bM=gs.bM, bL=gs.bL, blk=gs.blk, p_bucket=gs.p_bucket, cc_t=e, cc_ls=e,
                  cc_slot=e, cc_bucket=e)
        kn.pop_queues(outt, ngt, c2, P, gc)
        pseq = np.full(max(P, 1), -1, np.int64)
        kn.queue_minmax_and_seq(outt, P, k, gc, pseq)
        gid = gs.p_gid[:P]
        I_big = np.zeros((ngroups, len(big)), np.int64)
        np.add.at(I_big, gid, gs.qtotI[:P][:, big])
        I_big = normalize_limbs(I_big, gs.L) if len(big) else I_big
        I_mm = np.zeros((ngroups, len(mmi)), np.int64)
        for j, (_, _, is_max) in enumerate(gs.g.mmi):
            if is_max:
                I_mm[:, j] = np.iinfo(np.int64).min
                np.maximum.at(I_mm[:, j], gid, gs.qtotI[:P, mmi[j]])
            else:
                I_mm[:, j] = np.iinfo(np.int64).max
                np.minimum.at(I_mm[:, j], gid, gs.qtotI[:P, mmi[j]])
        F_s = np.zeros((ngroups, len(fs)))
        np.add.at(F_s, gid, gs.qtotF[:P][:, fs])
        F_m = np.zeros((ngroups, len(mmf)))
        for j, (_, _, is_max) in enumerate(gs.g.mmf):
            F_m[:, j] = -np.inf if is_max else np.inf
            (np.maximum if is_max else np.minimum).at(F_m[:, j], gid, gs.qtotF[:P, mmf[j]])
        seq = np.full(ngroups, -1, np.int64)
        np.maximum.at(seq, gid, pseq[:P])
        return np.concatenate([I_big, I_mm], 1), np.concatenate([F_s, F_m], 1), seq

    def _emit_closed(self) -> None:
        """Emit the rows of the windows closed since the last call, in window order, as one
        batch (exact values widened to the largest limb count among them). O(rows)."""
        closed, self._closed = self._closed, []
        if closed:
            L = max(c.L for c in closed)
            Cb = self._rt.graphs[0].Cb
            self._emit(self._rows([_widened(c, L, Cb) for c in closed]))

    def _rows(self, closed: list[_Closed]) -> pa.RecordBatch:
        """The output rows of closed windows sharing one limb count (:func:`_widened`):
        window bounds, group values, aggregates and the last sequence number. O(rows x
        outputs)."""
        plan = self.plan
        gs = self._rt.graphs[0]
        L, Cb, Cf = closed[0].L, gs.Cb, gs.Cf
        wid = np.concatenate([c.w for c in closed])
        keys = [k for c in closed for k in c.keys]
        I_rows = np.concatenate([c.vi for c in closed])
        F_rows = np.concatenate([c.vf for c in closed])
        seq = np.concatenate([c.seq for c in closed])
        cols: list[pa.Array] = [pa.array(wid * plan.slide, pa.int64()),
                                pa.array(wid * plan.slide + plan.within, pa.int64())]
        for j, ty in enumerate(plan.group_types):
            cols.append(_key_column([k[j] for k in keys], ty))

        small_cache: dict[int, np.ndarray | None] = {}
        big_cache: dict[int, list[int]] = {}

        def small(c: int) -> np.ndarray | None:
            """Channel ``c``'s exact values as int64 when they all fit in 60 bits."""
            if c not in small_cache:
                small_cache[c] = limb_rows_to_int64(I_rows[:, c * L:(c + 1) * L])
            return small_cache[c]

        def big(c: int) -> list[int]:
            col = big_cache.get(c)
            if col is None:
                fits = small(c)
                col = big_cache[c] = (fits.tolist() if fits is not None
                                      else wide_rows_to_ints(I_rows[:, c * L:(c + 1) * L]))
            return col

        schema = plan.output_schema
        for out in plan.outputs:
            ftype = schema.field(out.name).type
            if out.source == "big":
                fits = small(out.channel)
                cols.append(exact_of_int64(fits, ftype)
                            if fits is not None and self.plan.config.exact_type != "string"
                            else self._exact(big(out.channel), ftype, out.name, wid))
                continue
            if out.source == "fsum":
                vals: Any = F_rows[:, out.channel].astype(np.float64)
            elif out.source == "mmi":
                vals = I_rows[:, Cb * L + out.channel].astype(np.int64)
            elif out.source == "mmf":
                vals = F_rows[:, Cf + out.channel].astype(np.float64)
            elif out.source == "avg_big":
                # int / int is correctly rounded (as float(Fraction(a, b)) is)
                vals = [a / b for a, b in zip(big(out.channel), big(out.channel2))]
            else:
                den = np.array([float(b) for b in big(out.channel2)], np.float64)
                vals = F_rows[:, out.channel].astype(np.float64) / den
            cols.append(pa.array(vals, ftype))
        cols.append(pa.array(seq.astype(np.int64), pa.int64()))
        return _in_group_order(pa.RecordBatch.from_arrays(cols, schema=schema),
                               len(plan.group_types))

    def _exact(self, vals: list[int], ftype: pa.DataType, name: str, wid: np.ndarray
               ) -> pa.Array:
        """An exact aggregate column (``wid``: each row's window, for the error message).
        O(rows)."""
        kind = self.plan.config.exact_type
        if kind == "string":
            return pa.array([str(v) for v in vals], pa.string())
        lim = _DEC_LIMIT if kind == "decimal" else None
        for i, v in enumerate(vals):
            bad = (abs(v) >= lim) if lim is not None else not (_I64[0] <= v <= _I64[1])
            if bad:
                w = int(wid[i])
                raise OperatorError(
                    f"greta: {name} = {v} in window [{w * self.plan.slide}, "
                    f"{w * self.plan.slide + self.plan.within}) does not fit "
                    f"{'decimal128(38, 0)' if kind == 'decimal' else 'int64'}",
                    hint="use exact_type='string' for unlimited exact results")
        if kind == "decimal":
            return pa.array([Decimal(v) for v in vals], ftype)
        return pa.array(vals, pa.int64())

    def _update_state_size(self, measure: bool = True) -> None:
        """Record the state size (vertices, records, buffered events) and bytes; ``measure``
        recounts the runtime's state (after processing), otherwise the last count is reused."""
        if self._rt is None:
            return
        if measure:
            self._entries = self._rt.state_entries()
            self._bytes = self._rt.state_bytes()
        b = self._bytes + self._buf_bytes
        if b > self._peak_bytes:
            self._peak_bytes = b
        self.counters.extra["state_bytes"] = b
        self.counters.extra["peak_state_bytes"] = self._peak_bytes
        self._set_state_size(self._entries + self._buf_rows,
                             "GRETA vertices, records and buffered events")
