"""The TPStream operator: derive situations, match temporal patterns (normal or low latency).

Usage (a live stream, no store)::

    from replaydb.planner.lang.tpstream import parse, bind
    op = bind(parse('''FROM cars PARTITION BY car_id
                       DEFINE A AS accel > 8, B AS speed > 70
                       PATTERN A overlaps;during B WITHIN 5 minutes
                       RETURN avg(B.speed) AS avg_speed'''), schema, "s")
    op.push(batch)          # Arrow record batches: t, seq, attributes, in (t, seq) order
    op.results()            # one row per match

or directly ``TPStream(TPStreamConfig(...), schema)``.

Output schema (one row per match, ordered by ``(detection_time, detection_seq, A_ts, ...,
A_te, ...)`` - deterministic whatever the batching, plan or parallelism; with
``end_policy="close"`` the matches of situations closed by :meth:`flush` come last, in the same
order among themselves, because a partition's open situations close at its own last event):

* ``detection_time`` (int64): when the match became certain - ``max(te)`` in normal mode, the
  earliest detection time in low-latency mode (:mod:`.lowlatency`);
* ``detection_seq`` (int64): ``seq`` of the last event (at ``detection_time``) whose arrival made
  the match certain (the end event of a member ending then, or the event at which a member
  became known);
* the PARTITION BY columns;
* per situation symbol ``X`` (DEFINE order): ``X_ts`` and ``X_te`` (int64; ``X_te`` is null for a
  member still ongoing at detection in low-latency mode);
* the RETURN items, in order (``avg`` float64, ``count`` int64, ``sum`` int64 for integer inputs
  else float64, ``min``/``max``/``first``/``last`` the input type). For a member still ongoing at
  detection the aggregates cover its events up to the detection time.

Processing of a batch (complexity O(n log n) for the partition sort, O(n) NumPy work per
definition, plus the matcher's work per situation - see :mod:`.kernel`):

1. the last timestamp of the batch is held back until a later one arrives (time steps must be
   complete: situations of events with equal times, and low-latency knowledge, depend on all of
   them);
2. conditions are evaluated vectorized and situations derived (:mod:`.deriver`);
3. *triggers* - situation ends (normal) or ends and known starts (low latency, restricted to
   trigger situations) - are sorted by ``(time, partition, kind, stream)``; the buffers are the
   finished situations still inside the window (kept as a table sorted per partition and stream)
   plus this batch's situations; the compiled matcher runs over all triggers and re-plans in
   place when its statistics drift (:mod:`.evaluation_order`);
4. results are built column-wise, sorted and emitted; situations that left the window are purged.

State (``counters.state_size``): buffered situations + open situations + held-back events.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import DataError, OperatorError, StateCapExceeded
from replaydb.operators.base import DEFAULT_STATE_CAP, Operator, column_np
from replaydb.operators.expr import ColumnsEnv, columns, compile_predicate
from replaydb.operators.instants import TIME_COLUMNS
from replaydb.operators.tpstream import kernel
from replaydb.operators.tpstream.aggregates import AggSpec
from replaydb.operators.tpstream.config import TPStreamConfig
from replaydb.operators.tpstream.deriver import INF, Deriver, Runs
from replaydb.operators.tpstream.evaluation_order import EvaluationPlanner
from replaydb.operators.tpstream.lowlatency import known_kind, trigger_streams
from replaydb.operators.tpstream.partitions import PartitionMap

_TABLE_INT = ("part", "stream", "ts", "te", "known", "te_seq", "known_seq")


PARTITION_IDS = "\x00pid"
"""The batch columns' entry holding partition ids already assigned (a key column that nothing
else reads is mapped straight from its Arrow array)."""


class TPStream(Operator):
    """Temporal pattern matching over situations (see module docstring)."""

    name = "tpstream"
    family = "tpstream"

    def __init__(self, config: TPStreamConfig, schema: pa.Schema | None = None, *,
                 state_cap: int | None = DEFAULT_STATE_CAP) -> None:
        super().__init__(config, state_cap=state_cap)
        cfg = config
        self.S = cfg.n_streams
        self.names = cfg.names
        self.ll = cfg.mode == "low_latency"
        relm = np.array(cfg.relation_matrix(), dtype=np.int64)
        self.unsatisfiable = bool((relm < 0).any())
        self.relm = np.where(relm < 0, 0, relm).astype(np.int64)
        self.aliases = frozenset({cfg.stream_alias} if cfg.stream_alias else set())
        self.preds = [compile_predicate(s.condition) for s in cfg.situations]
        self.cond_columns = sorted({c.name for s in cfg.situations for c in columns(s.condition)})
        for s in cfg.situations:
            for c in columns(s.condition):
                if c.qualifier is not None and c.qualifier not in self.aliases:
                    raise OperatorError(
                        f"situation {s.name}: condition refers to {c.qualifier}.{c.name}; "
                        f"conditions may only use attributes of the input stream")
        self.aggs = [AggSpec(r, self.names.index(r.symbol)) for r in cfg.returns]
        used = set(self.cond_columns) | {a.attr for a in self.aggs if a.attr is not None}
        # partition columns nothing but the partition ids reads (one key column only)
        self._key_only = (frozenset(cfg.partition_by) - used if len(cfg.partition_by) == 1
                          else frozenset())
        self.kinds = [known_kind(s.min_duration, s.max_duration) for s in cfg.situations]
        if self.ll and cfg.use_triggers:
            self.start_trig, self.end_trig = trigger_streams(self.relm, self.kinds)
        else:
            self.start_trig = np.full(self.S, self.ll)
            self.end_trig = np.ones(self.S, bool)
        order: str | tuple[int, ...]
        order = cfg.order if isinstance(cfg.order, str) else tuple(self.names.index(n)
                                                                   for n in cfg.order)
        self.planner = EvaluationPlanner(self.relm, order, cfg.alpha, cfg.threshold,
                                         cfg.initial_buffer, cfg.cost_model)
        self.pmap = PartitionMap(cfg.partition_by)
        self.in_schema = schema
        self._out_schema: pa.Schema | None = None
        if schema is not None:
            self._validate_schema(schema)
        self.kcounters = np.zeros(kernel.N_COUNTERS, np.int64)
        self._reset_state()

    # ------------------------------------------------------------------ declared
    def spec_options(self) -> dict[str, Any]:
        return {} if self.in_schema is None else {"schema": self.in_schema}

    def traits(self) -> Any:
        from replaydb.operators.traits import Traits

        cfg = self.config
        sort = ["detection_time", "detection_seq", *[f"{n}_ts" for n in cfg.names],
                *[f"{n}_te" for n in cfg.names]]
        return Traits("tpstream", partition_keys=tuple(cfg.partition_by),
                      sort_columns=tuple(sort), sort_complete=True)

    # ------------------------------------------------------------------ schema
    def _needed_columns(self) -> list[str]:
        cols = list(self.cond_columns) + list(self.config.partition_by)
        cols += [a.attr for a in self.aggs if a.attr is not None]
        return list(dict.fromkeys(cols))

    def _validate_schema(self, schema: pa.Schema) -> None:
        missing = [c for c in self._needed_columns() if c not in schema.names]
        if missing:
            raise OperatorError(f"{self.name}: input has no column {missing[0]!r} "
                                f"(columns: {', '.join(schema.names)})")
        self._out_schema = self._make_out_schema(schema)

    def instant_columns(self, time_columns: Collection[str] = TIME_COLUMNS) -> tuple[str, ...]:
        """``detection_time``, every situation's ``<name>_ts`` / ``<name>_te``, a PARTITION BY
        of the time column, and ``first``/``last``/``min``/``max`` of it."""
        names = {n.lower() for n in time_columns}
        out = ["detection_time"]
        out += [k for k in self.config.partition_by if k.lower() in names]
        for n in self.names:
            out += [f"{n}_ts", f"{n}_te"]
        out += [a.item.alias for a in self.aggs
                if a.func in ("first", "last", "min", "max") and a.attr is not None
                and a.attr.lower() in names]
        return tuple(out)

    def _make_out_schema(self, schema: pa.Schema | None) -> pa.Schema:
        fields = [pa.field("detection_time", pa.int64(), nullable=False),
                  pa.field("detection_seq", pa.int64(), nullable=False)]
        for c in self.config.partition_by:
            fields.append(pa.field(c, schema.field(c).type if schema is not None else pa.string()))
        for n in self.names:
            fields.append(pa.field(f"{n}_ts", pa.int64(), nullable=False))
            fields.append(pa.field(f"{n}_te", pa.int64()))
        for a in self.aggs:
            t: pa.DataType
            if a.func == "avg":
                t = pa.float64()
            elif a.func == "count":
                t = pa.int64()
            else:
                src = schema.field(a.attr).type if (schema is not None and a.attr) else pa.float64()
                if a.func == "sum":
                    t = pa.int64() if pa.types.is_integer(src) else pa.float64()
                elif a.func in ("min", "max"):
                    t = src if (pa.types.is_integer(src) or pa.types.is_floating(src)) \
                        else pa.float64()
                else:
                    t = src
            fields.append(pa.field(a.item.alias, t))
        names = [f.name for f in fields]
        dup = {x for x in names if names.count(x) > 1}
        if dup:
            raise OperatorError(f"{self.name}: output column {sorted(dup)[0]!r} would appear twice"
                                f" (rename a RETURN item or a situation)")
        return pa.schema(fields)

    @property
    def output_schema(self) -> pa.Schema:
        if self._out_schema is None:
            return self._make_out_schema(None)
        return self._out_schema

    # ------------------------------------------------------------------ state
    def _reset_state(self) -> None:
        self.deriver = Deriver([s.min_duration for s in self.config.situations],
                               [s.max_duration for s in self.config.situations],
                               self.aggs, with_open=self.ll)
        self.retained = self._empty_table()
        self.tail: dict[str, np.ndarray] | None = None
        self.last_t: int | None = None          # last timestamp seen (held back or processed)
        self.pmap.reset()
        self.planner.reset_stats()
        self.kcounters = np.zeros(kernel.N_COUNTERS, np.int64)

    def _empty_table(self) -> dict[str, Any]:
        t: dict[str, Any] = {f: np.empty(0, np.int64) for f in _TABLE_INT}
        t["vals"] = [np.empty(0, a.out_dtype) for a in self.aggs]
        return t

    def _get_state(self) -> Any:
        return {"deriver": self.deriver.get_state(), "retained": self.retained,
                "tail": self.tail, "last_t": self.last_t, "pmap": self.pmap.get_state(),
                "planner": self.planner.get_state(), "kcounters": self.kcounters.copy(),
                "out_schema": self._out_schema,
                "dtypes": [a.dtype for a in self.aggs]}

    def _set_state(self, state: Any) -> None:
        self.deriver.set_state(state["deriver"])
        self.retained = state["retained"]
        self.tail = state["tail"]
        self.last_t = state["last_t"]
        self.pmap.set_state(state["pmap"])
        self.planner.set_state(state["planner"])
        self.kcounters = state["kcounters"].copy()
        self._out_schema = state["out_schema"]
        for a, d in zip(self.aggs, state["dtypes"]):
            a.set_dtype(d)

    def _update_state_size(self) -> None:
        size = len(self.retained["ts"]) + self.deriver.open_count()
        if self.tail is not None:
            size += len(self.tail["t"])
        self._set_state_size(size, "buffered situations")

    # ------------------------------------------------------------------ input
    def _columns(self, batch: pa.RecordBatch) -> dict[str, np.ndarray]:
        names = batch.schema.names
        if self._out_schema is None:
            self._validate_schema(batch.schema)
        cols = {"t": column_np(batch, "t").astype(np.int64, copy=False),
                "seq": column_np(batch, "seq").astype(np.int64, copy=False)}
        for c in self._needed_columns():
            if c not in names:
                raise OperatorError(f"{self.name}: input batch has no column {c!r}")
            arr = batch.column(c)
            if c in self._key_only:  # partition ids from the Arrow array itself, in stream
                cols[PARTITION_IDS] = self.pmap.ids([arr])  # order as before
            elif pa.types.is_boolean(arr.type) and arr.null_count == 0:
                cols[c] = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)
            elif (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)
                  or pa.types.is_boolean(arr.type)):
                cols[c] = np.asarray(arr.to_pylist(), dtype=object)
            else:
                cols[c] = column_np(batch, c)
        return cols

    def _push_batch(self, batch: pa.RecordBatch) -> None:
        cols = self._columns(batch)
        t = cols["t"]
        if len(t) > 1:
            bad = np.flatnonzero(t[1:] < t[:-1])
            if len(bad):
                raise DataError(f"events out of time order ({t[bad[0]]} then {t[bad[0] + 1]})",
                                row=int(bad[0]) + 1, column="t")
        if self.last_t is not None and t[0] < self.last_t:
            raise DataError(f"event time {t[0]} is earlier than the previous batch's last "
                            f"time {self.last_t}", row=0, column="t")
        self.last_t = int(t[-1])
        if self.tail is not None:
            # the held-back step is complete once a later time arrives; events of the same time
            # at the start of this batch join it (only those are copied)
            k = int(np.searchsorted(t, self.tail["t"][0], side="right"))
            step = self.tail if k == 0 else {c: np.concatenate([self.tail[c], v[:k]])
                                             for c, v in cols.items()}
            self.tail = None
            if k == len(t):
                self.tail = step
                self._update_state_size()
                return
            self._process(step)
            if k:
                cols = {c: v[k:] for c, v in cols.items()}
                t = cols["t"]
        cut = int(np.searchsorted(t, t[-1], side="left"))
        self.tail = {c: v[cut:].copy() for c, v in cols.items()}
        if cut > 0:
            self._process({c: v[:cut] for c, v in cols.items()})
        self._update_state_size()

    def _flush(self) -> None:
        if self.tail is not None and len(self.tail["t"]):
            tail, self.tail = self.tail, None
            self._process(tail)
        self.tail = None
        runs = self.deriver.close(self.config.end_policy)
        if len(runs):
            self._match(runs)
        self._update_state_size()

    def end_interval(self) -> None:
        """A gap in the input: end-of-input semantics, then forget all state (no match spans the
        gap); the evaluation plan and its statistics are kept."""
        self._flush()
        planner_state = self.planner.get_state()
        self._reset_state()
        self.planner.set_state(planner_state)
        self._set_state_size(0)
        self.counters.intervals += 1

    # ------------------------------------------------------------------ one batch of steps
    def _inputs(self, cols: dict[str, np.ndarray]) -> tuple:
        """Partition ids, condition masks and RETURN inputs of a batch (vectorized)."""
        n = len(cols["t"])
        env = ColumnsEnv(cols, self.aliases)
        masks = []
        for pred in self.preds:
            m = pred(env)
            masks.append(np.broadcast_to(np.asarray(m, dtype=bool), (n,)))
        pid = None
        if PARTITION_IDS in cols:
            pid = cols[PARTITION_IDS]
        elif self.config.partition_by:
            pid = self.pmap.ids([cols[c] for c in self.config.partition_by])
        values = [cols[a.attr] if a.attr is not None else None for a in self.aggs]
        return pid, masks, values

    def fragments(self, cols: dict[str, np.ndarray], keep_context: bool = True) -> Any:
        """Phase 1 of the batch pipeline (derive, no carry; see :mod:`.parallel`)."""
        pid, masks, values = self._inputs(cols)
        return self.deriver.fragments(cols["t"], cols["seq"], pid, masks, values, keep_context)

    def consume(self, fr: Any, t_last: int) -> None:
        """Phases 2-3: synchronize (merge the carry) and match one batch of complete steps."""
        runs = self.deriver.absorb(fr)
        self._match(runs)
        self._purge(t_last)

    def _process(self, cols: dict[str, np.ndarray]) -> None:
        self.consume(self.fragments(cols), int(cols["t"][-1]))

    def _purge(self, t_now: int) -> None:
        """Drop buffered situations no future trigger can reach: ``ts < t - window`` where ``t``
        is the earliest possible future detection time - ``t_now``, or, under the close policy,
        ``t_last + 1`` of a partition with an open situation (it closes there at flush)."""
        w = self.config.window
        r = self.retained
        if not len(r["ts"]):
            return
        keep = r["ts"] >= t_now - w
        if self.config.end_policy == "close" and not keep.all():
            pids, first_close = self.deriver.earliest_close()
            if len(pids):
                pos = np.searchsorted(pids, r["part"])
                posc = np.minimum(pos, len(pids) - 1)
                has = (pos < len(pids)) & (pids[posc] == r["part"])
                keep |= has & (r["ts"] >= first_close[posc] - w)
        if not keep.all():
            self.retained = _take_table(self.retained, keep)

    def _match(self, runs: Runs) -> None:
        finished = runs.te != INF
        if self.ll:
            fin_trig = finished & self.end_trig[runs.stream]
            start_trig = runs.known_new & self.start_trig[runs.stream] & (runs.known < runs.te)
        else:
            fin_trig = finished
            start_trig = np.zeros(len(runs), bool)
        batch_tab = self._runs_table(runs)
        fin_rows = np.flatnonzero(finished)
        if self.unsatisfiable or not (fin_trig.any() or start_trig.any()):
            self._retain(batch_tab, fin_rows)
            return
        f_idx = np.flatnonzero(fin_trig)
        s_idx = np.flatnonzero(start_trig)
        tr_row = np.concatenate([f_idx, s_idx])
        tr_tau = np.concatenate([runs.te[f_idx], runs.known[s_idx]])
        tr_kind = np.concatenate([np.zeros(len(f_idx), np.int64), np.ones(len(s_idx), np.int64)])
        tr_part = runs.part[tr_row]
        tr_stream = runs.stream[tr_row]
        # table: retained situations of the triggering partitions + this batch's situations
        tparts = np.unique(tr_part)
        r_sel = np.flatnonzero(np.isin(self.retained["part"], tparts))
        b_sel = np.flatnonzero(np.isin(runs.part, tparts))
        n_r = len(r_sel)
        tab = {f: np.concatenate([self.retained[f][r_sel], batch_tab[f][b_sel]])
               for f in _TABLE_INT}
        p_local = np.searchsorted(tparts, tab["part"])
        order = np.lexsort((tab["ts"], tab["stream"], p_local))
        tab = {f: v[order] for f, v in tab.items()}
        p_local = p_local[order]
        S = self.S
        P = len(tparts)
        key = p_local * S + tab["stream"]
        allk = np.arange(P * S)
        seg_lo = np.searchsorted(key, allk, side="left").astype(np.int64)
        seg_hi = np.searchsorted(key, allk, side="right").astype(np.int64)
        inv = np.empty(len(order), np.int64)
        inv[order] = np.arange(len(order))
        # triggers: batch row -> position of that row in b_sel -> table index
        bpos = np.full(len(runs), -1, np.int64)
        bpos[b_sel] = np.arange(len(b_sel))
        tr_tab = inv[n_r + bpos[tr_row]]
        tr_pl = np.searchsorted(tparts, tr_part)
        o = np.lexsort((tr_stream, tr_kind, tr_pl, tr_tau))
        tr_tau, tr_pl, tr_stream, tr_tab, tr_kind = (tr_tau[o], tr_pl[o], tr_stream[o],
                                                     tr_tab[o], tr_kind[o])
        # origin of table rows (for values): < n_r retained, else batch row
        origin = np.concatenate([r_sel, b_sel])[order]
        from_batch = order >= n_r
        matches, mtr = self._run_kernel(tab, seg_lo, seg_hi, tr_tau, tr_pl, tr_stream, tr_tab,
                                        tr_kind)
        if len(mtr):
            self._emit_results(tab, matches, tr_tau[mtr], runs, batch_tab, origin, from_batch)
        self._retain(batch_tab, fin_rows)

    def _runs_table(self, runs: Runs) -> dict[str, Any]:
        tab: dict[str, Any] = {
            "part": runs.part, "stream": runs.stream, "ts": runs.ts, "te": runs.te,
            "known": runs.known if self.ll else runs.te, "te_seq": runs.te_seq,
            "known_seq": runs.known_seq,
        }
        tab["vals"] = [a.final(p) for a, p in zip(self.aggs, runs.prims)]
        return tab

    def _retain(self, batch_tab: dict[str, Any], fin_rows: np.ndarray) -> None:
        if len(fin_rows) == 0:
            return
        new = _take_table(batch_tab, fin_rows)
        self.retained = _concat_tables(self.retained, new)

    def _run_kernel(self, tab: dict[str, np.ndarray], seg_lo: np.ndarray, seg_hi: np.ndarray,
                    tr_tau: np.ndarray, tr_p: np.ndarray, tr_stream: np.ndarray,
                    tr_rec: np.ndarray, tr_kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pl = self.planner
        S = self.S
        out_idx = np.empty((max(64, len(tr_tau)), S), np.int64)
        out_tr = np.empty(out_idx.shape[0], np.int64)
        n_out = 0
        pos = 0
        replans_before = int(self.kcounters[kernel.C_REPLANS])
        cap = self.state_cap if self.state_cap is not None else np.iinfo(np.int64).max
        while True:
            pos, out_idx, out_tr, n_out, status = kernel.match_kernel(
                tab["ts"], tab["te"], tab["known"], seg_lo, seg_hi, S,
                tr_tau, tr_p, tr_stream, tr_rec, tr_kind, pos,
                pl.relm, pl.orders, pl.appl, pl.appl_n, pl.cons_a, pl.cons_b, pl.cons_m,
                np.int64(self.config.window), self.ll,
                pl.ema_buf, pl.buf_seen, pl.ema_sel, pl.snap_buf, pl.snap_sel,
                pl.alpha, pl.threshold, pl.adaptive, pl.nrel, pl.paper_cost,
                out_idx, out_tr, n_out, np.int64(cap), self.kcounters)
            if status == 2:
                raise StateCapExceeded(self.name, "matches of one batch", int(n_out), int(cap),
                                       "state_cap")
            if pos >= len(tr_tau):
                break
        pl.replans += int(self.kcounters[kernel.C_REPLANS]) - replans_before
        return out_idx[:n_out], out_tr[:n_out]

    # ------------------------------------------------------------------ results
    def _emit_results(self, tab: dict[str, np.ndarray], matches: np.ndarray, tau: np.ndarray,
                      runs: Runs, batch_tab: dict[str, Any], origin: np.ndarray,
                      from_batch: np.ndarray) -> None:
        S = self.S
        ts = tab["ts"][matches]                      # (n, S)
        te = tab["te"][matches]
        ongoing = te > tau[:, None]
        # detection seq: the latest change event (at tau) among the members
        ch = np.where(te == tau[:, None], tab["te_seq"][matches], -1)
        if self.ll:
            kn = tab["known"][matches]
            ch = np.maximum(ch, np.where(kn == tau[:, None], tab["known_seq"][matches], -1))
        det_seq = ch.max(axis=1)
        cols: dict[str, Any] = {"detection_time": tau, "detection_seq": det_seq}
        if self.config.partition_by:
            pid = tab["part"][matches[:, 0]]
            types = [self.output_schema.field(c).type for c in self.config.partition_by]
            keyvals = self.pmap.arrow_values(types)
            for c, arr in zip(self.config.partition_by, keyvals):
                cols[c] = arr.take(pa.array(pid))
        for j, nm in enumerate(self.names):
            cols[f"{nm}_ts"] = ts[:, j]
            cols[f"{nm}_te"] = pa.array(te[:, j], mask=ongoing[:, j], type=pa.int64())
        for k, a in enumerate(self.aggs):
            j = a.stream
            rows = matches[:, j]
            vals = self._values_of(k, rows, origin, from_batch, batch_tab)
            ong = ongoing[:, j]
            if ong.any():
                vals = vals.astype(np.result_type(vals.dtype, a.out_dtype), copy=True) \
                    if vals.dtype != object else vals.copy()
                sel = np.flatnonzero(ong)
                brow = origin[rows[sel]]      # ongoing members are always rows of this batch
                vals[sel] = self._partial_values(k, runs, brow, tau[sel])
            cols[a.item.alias] = vals
        # deterministic order
        keys = [te[:, j] for j in reversed(range(S))] + [ts[:, j] for j in reversed(range(S))]
        o = np.lexsort(keys + [det_seq, tau])
        schema = self.output_schema
        arrays = []
        for f in schema:
            v = cols[f.name]
            if isinstance(v, pa.Array):
                arrays.append(v.take(pa.array(o)))
            else:
                v = v[o]
                if v.dtype == object:
                    arrays.append(pa.array(v.tolist(), type=f.type))
                else:
                    arrays.append(pa.array(v, type=f.type, from_pandas=True))
        self._emit(pa.RecordBatch.from_arrays(arrays, schema=schema))

    def _values_of(self, k: int, rows: np.ndarray, origin: np.ndarray, from_batch: np.ndarray,
                   batch_tab: dict[str, Any]) -> np.ndarray:
        src_r = self.retained["vals"][k]
        src_b = batch_tab["vals"][k]
        o = origin[rows]
        fb = from_batch[rows]
        dt = np.result_type(src_r.dtype, src_b.dtype) if object not in (src_r.dtype, src_b.dtype) \
            else np.dtype(object)
        out = np.empty(len(rows), dt)
        if (~fb).any():
            out[~fb] = src_r[o[~fb]]
        if fb.any():
            out[fb] = src_b[o[fb]]
        return out

    def _partial_values(self, k: int, runs: Runs, brow: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """RETURN value of item ``k`` over the events of batch rows ``brow`` up to ``tau``."""
        a = self.aggs[k]
        ctx = self.deriver.ctx
        fp, lp = runs.first_pos[brow], runs.last_pos[brow]
        end = kernel.partial_positions(ctx.t_sorted, fp, lp, tau)
        has_batch = (fp >= 0) & (end > fp)
        pre_a, pre_b = runs.pre[k][0][brow], runs.pre[k][1][brow]
        has_pre = runs.has_pre[brow]
        v = ctx.values_sorted[k]
        f = a.func
        if a.attr is None:                       # count(S)
            cnt = np.where(has_batch, end - fp, 0)
            return np.where(has_pre, pre_a, 0) + cnt
        if f == "first":
            fpc = np.maximum(fp, 0)
            return np.where(has_pre, pre_a, v[fpc]) if v.dtype != object else \
                np.array([pa_ if h else v[q] for pa_, h, q in zip(pre_a, has_pre, fpc)], object)
        if f == "last":
            lastc = np.maximum(end - 1, 0)
            return np.where(has_batch, v[lastc], pre_a) if v.dtype != object else \
                np.array([v[q] if hb else pa_ for pa_, hb, q in zip(pre_a, has_batch, lastc)],
                         object)
        func = {"count": 0, "sum": 1, "avg": 1, "min": 2, "max": 3}[f]
        lo = np.where(has_batch, fp, 0)
        hi = np.where(has_batch, end, 0)
        seeded = f in ("sum", "avg") and np.asarray(pre_a).dtype.kind == "f"
        seed = np.where(has_pre, pre_a, 0.0).astype(np.float64) if seeded else np.zeros(len(lo))
        ba, bb = kernel.range_prims(np.asarray(v, np.float64), lo, hi, func, seed)
        if f == "count":
            return np.where(has_pre, pre_a, 0) + ba.astype(np.int64)
        if f in ("sum", "avg"):
            # float sums continue the carried sum event by event (see kernel.range_prims)
            s = ba if seeded else np.where(has_pre, pre_a, 0) + ba
            if f == "sum":
                return s
            c = np.where(has_pre, pre_b, 0) + bb
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(c > 0, s / np.maximum(c, 1), np.nan)
        fn = np.fmin if f == "min" else np.fmax
        return fn(np.where(has_pre, pre_a, np.nan), np.where(bb > 0, ba, np.nan))

    # ------------------------------------------------------------------ introspection
    def stats(self) -> dict[str, Any]:
        """Matcher counters, current plan and statistics (for EXPLAIN and benchmarks)."""
        k = self.kcounters
        return {
            "triggers": int(k[kernel.C_TRIGGERS]), "steps": int(k[kernel.C_STEPS]),
            "range_queries": int(k[kernel.C_QUERIES]), "candidates": int(k[kernel.C_CANDIDATES]),
            "results": int(k[kernel.C_RESULTS]), "duplicates_suppressed":
                int(k[kernel.C_DUPLICATES]),
            "replans": self.planner.replans, "orders": self.planner.describe(self.names),
            "buffer_ema": dict(zip(self.names, self.planner.ema_buf.round(3).tolist())),
            "start_triggers": [n for n, f in zip(self.names, self.start_trig) if f],
            "end_triggers": [n for n, f in zip(self.names, self.end_trig) if f],
        }

    def _check(self) -> None:
        """Invariants of the buffered state (for stress tests)."""
        self.deriver._check()
        r = self.retained
        assert np.all(r["ts"] < r["te"]), "a buffered situation has ts >= te"
        assert np.all(r["te"] != INF), "an open situation is buffered as finished"
        key = r["part"] * self.S + r["stream"]
        o = np.lexsort((r["ts"], key))
        k2, ts2, te2 = key[o], r["ts"][o], r["te"][o]
        same = k2[1:] == k2[:-1]
        assert np.all(te2[:-1][same] <= ts2[1:][same]), "situations of one stream overlap"


def _take_table(t: dict[str, Any], sel: np.ndarray) -> dict[str, Any]:
    out = {f: v[sel] for f, v in t.items() if f != "vals"}
    out["vals"] = [v[sel] for v in t["vals"]]
    return out


def _concat_tables(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {f: np.concatenate([a[f], b[f]]) for f in a if f != "vals"}
    vals = []
    for x, y in zip(a["vals"], b["vals"]):
        if len(x) == 0:
            vals.append(y.copy())
        elif len(y) == 0:
            vals.append(x.copy())
        elif x.dtype == object or y.dtype == object:
            vals.append(np.concatenate([x.astype(object), y.astype(object)]))
        else:
            vals.append(np.concatenate([x, y.astype(np.result_type(x.dtype, y.dtype))]))
    out["vals"] = vals
    return out
