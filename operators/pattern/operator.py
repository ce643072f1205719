"""The sequential pattern operator: one :class:`~replaydb.operators.base.Operator` for both
front ends (SQL MATCH_RECOGNIZE and SASE+) and all matching strategies.

Live use without a store::

    import pyarrow as pa
    from replaydb.planner.lang.sase import parse, bind

    schema = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                        ("temp", pa.float64())])
    op = bind(parse("PATTERN SEQ(A a, B+ b[], C c) WHERE skip_till_next_match(a, b, c) "
                    "{ c.temp >= a.temp + 5 } WITHIN 100"), schema, None)
    op.push(batch)          # Arrow batches in (t, seq) order
    op.results()            # an Arrow table, one row per match

or directly: ``PatternOperator(PatternConfig(spec, schema, time_unit))``.

Input: Arrow batches with ``t`` (int64), ``seq`` (int64) and the attributes of ``schema`` that
the query reads (:attr:`PatternOperator.input_columns`; replay reads only those), in
``(t, seq)`` order. The operator relies only on ``t`` never decreasing (a
:class:`~replaydb.errors.DataError` names the row that breaks it); events with equal ``t`` are
taken in arrival order, which is how the replay layer orders ties when it merges several streams
(by stream, then ``seq``; ``seq`` values of different streams may then repeat or decrease).

Output schema, ONE ROW PER MATCH (the default):
``t`` (output time = the match's largest timestamp = ``last_t``), ``match_id`` (1-based, in
output order, over the operator's lifetime), ``match_number`` (MATCH_NUMBER(): 1-based per
partition), ``first_t``, ``first_seq``, ``last_t``, ``last_seq`` (the first and last matched
event), the partition key columns, then the measures. A measure named like one of these
metadata columns replaces it (``MEASURES A.t AS first_t``).

ALL ROWS PER MATCH: ``match_id``, ``match_number``, every input column of the matched row
(``t``, ``seq``, ...), then the measures (RUNNING unless FINAL).

A SQL select list, when given, is applied last (``*`` keeps every column above).

Order of results (deterministic, independent of how the input is cut into batches):

* all-runs semantics (strategies of the dissertation / SASE+): by the event that completes the
  match; matches completed by the same event in lexicographic order of their events' positions
  (first event first, a proper prefix before its extensions), then of their variables' order of
  first appearance in the pattern;
* SQL semantics: in the order matches are resolved (see
  :mod:`~replaydb.operators.pattern.nfa_sql`).

State cap: ``counters.state_size`` = run-graph nodes and edges (all-runs) or thread nodes and
match attempts (SQL) plus buffered events, counted until garbage collection reclaims them
(``counters.extra["live_runs"]`` / ``["peak_live_runs"]`` count live partial matches only); :class:`~replaydb.errors.StateCapExceeded` names
``state_cap`` when a growth would pass it, or when one batch completes more matches than it.

``end_interval()`` reports what end of input allows (SQL attempts still running end), then drops
every run, the links between events (NEXT) and PREV history: no match can span the gap. Match
numbering goes on.

Completed matches wait, as index arrays into the event buffer, until results are asked for
(:meth:`results`, :meth:`has_results`, :meth:`flush`, a snapshot) or until
``EMIT_MATCHES`` of them wait or they pin more than ``EMIT_SPAN`` buffered events; then their
output rows are built in one pass. Replaying many short intervals thus builds one output batch
for many intervals instead of one per interval (building a batch has a fixed cost per
measure). The buffer keeps the events of waiting matches across
``end_interval`` (they count in ``counters.state_size``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import DataError, StateCapExceeded
from replaydb.operators.base import DEFAULT_STATE_CAP, Operator, column_np
from replaydb.operators.expr import (
    Column,
    ColumnsEnv,
    to_text,
)
from replaydb.operators.instants import TIME_COLUMNS
from replaydb.operators.pattern.buffer import (
    EventBuffer,
    NavAhead,
    NavCarry,
    PartitionMap,
    arrow_to_numpy,
    derived_column,
    first_disorder,
    object_to_float,
    row_function_codes,
    row_function_values,
    to_float_column,
)
from replaydb.operators.pattern.compile import CompiledPattern, compile_pattern
from replaydb.operators.pattern.config import PatternConfig
from replaydb.operators.pattern.engine import AllRunsEngine, FixedSeqEngine, SqlEngine
from replaydb.operators.pattern.gapseq import GapSeqEngine
from replaydb.operators.pattern.lowering import LowerContext, nav_name
from replaydb.operators.pattern.measures import (
    MatchSet,
    MeasureLowerer,
    rows_of_vars_unread,
)
from replaydb.operators.pattern.model import RowsPerMatch, Semantics
from replaydb.operators.pattern.output import (
    _NO_EVENT,
    MatchOutput,
)
from replaydb.operators.pattern.source import RowFilter, rows_schema
from replaydb.operators.valuemask import ConditionMask


def _weak_grow_check(op: PatternOperator) -> Callable[[int, str], None]:
    """``op._grow_check`` for its engine, through a weak reference: the engine holding the
    operator's bound method would make a reference cycle (operator - engine - method -
    operator), so a finished query's operator, its event buffer and matches would wait for a
    garbage collection instead of going with the query's last reference."""
    ref = weakref.ref(op)

    def grow_check(size: int, what: str) -> None:
        o = ref()
        if o is not None:
            o._grow_check(size, what)

    return grow_check


class PatternOperator(MatchOutput, Operator):
    """Sequential pattern matching (see the module docstring)."""

    name = "pattern"
    family = "pattern"

    def __init__(self, config: PatternConfig, *, state_cap: int | None = DEFAULT_STATE_CAP,
                 vectorized: bool = True) -> None:
        super().__init__(config, state_cap=state_cap)
        self._fast = vectorized
        spec = config.spec
        # the rows' columns: the subquery's selection (FROM (SELECT ... WHERE ...)), if any
        self.rows_schema = rows_schema(config.schema, spec.columns)
        self._where = None if spec.where is None else RowFilter(spec.where, config.schema)
        self.cp: CompiledPattern = compile_pattern(spec, self.rows_schema)
        self.all_rows = spec.rows_per_match == RowsPerMatch.ALL
        lctx = LowerContext(self.cp.var_names, self.rows_schema,
                            case_insensitive_vars=self.cp.sql, navs=self.cp.navs,
                            subsets=spec.subset_members())
        vidx = {v: i for i, v in enumerate(self.cp.var_names)}
        lowerer = MeasureLowerer(lctx, vidx, self.all_rows)
        self._measures = [(m.name, lowerer.lower(m.expr)) for m in spec.measures]
        self._uses_next = any(getattr(n, "nav", 0) < 0 for _, low in self._measures
                              for n in low.walk())
        self._locals = [None if e is None else ConditionMask(e, self.rows_schema)
                        for e in self.cp.local_exprs]
        self._local_cols = sorted({c.name for e in self.cp.local_exprs if e is not None
                                   for c in e.walk() if isinstance(c, Column)})
        self._numpy_cols = sorted({c for m in self._locals if m is not None
                                   for c in m.numpy_columns})
        self._nav_cols = sorted({c for c, _ in self.cp.navs})
        aug = list(self.rows_schema)
        for col, k in sorted(self.cp.navs):
            aug.append(pa.field(nav_name(col, k), self.rows_schema.field(col).type))
        self._aug_schema = pa.schema(aug)
        starts = np.concatenate((self.cp.start, self.cp.start_first))
        self._start_vars = np.unique(self.cp.pos_var[starts[starts >= 0]])
        # an empty match or an unmatched row may come from any row; the matcher resolves the
        # rows that start no thread itself, unless MATCH_NUMBER() in DEFINE makes every row's
        # attempt wait for the earlier ones
        self._every_row_starts = self.cp.every_row and self.cp.matchno_slot >= 0
        self._read = self._read_columns()
        self._base_schema = self._make_schema()
        self._select = self._compile_select(spec.select)
        self._schema = self._select[0] if self._select else self._base_schema
        self._reset_state()

    # ------------------------------------------------------------------ schema
    def _read_columns(self) -> list[str]:
        """The input columns the query reads, in schema order: ``t``, ``seq``, the partition
        keys, the columns of DEFINE (per-event and cross-event, PREV included) and of the
        measures; every column of the rows for ALL ROWS PER MATCH, which outputs them all; the
        columns of the subquery's WHERE."""
        names = self.config.schema.names
        where = self._where.columns if self._where is not None else []
        if self.all_rows:
            return [n for n in names if n in self.rows_schema.names or n in where]
        cp = self.cp
        used = {"t", "seq", *cp.partition_by, *self._local_cols, *self._nav_cols,
                *(c for c, _ in cp.buf_cols), *where}
        for e in [*(e for e, _ in cp.derived.values()), *cp.row_functions.values()]:
            used.update(c.name for c in e.walk() if isinstance(c, Column))  # SUM(A.x * 2)
        for _, low in self._measures:
            for node in low.walk():
                col = getattr(node, "col", None)
                if isinstance(col, str):
                    used.add(col)
                used.update(c for _, c in getattr(node, "arg_columns", ()))  # SUM(A.x * A.y)
        return [n for n in names if n in used]

    @property
    def input_columns(self) -> list[str]:
        """The input columns this query reads (replay reads nothing else; batches may carry
        more, which are ignored)."""
        return list(self._read)

    # ------------------------------------------------------------------ declared
    def spec_options(self) -> dict[str, Any]:
        return {} if self._fast else {"vectorized": False}

    def traits(self) -> Any:
        from replaydb.operators.pattern.traits import pattern_traits

        return pattern_traits(self)

    def instant_columns(self, time_columns: Collection[str] = TIME_COLUMNS) -> tuple[str, ...]:
        from replaydb.operators.pattern.traits import pattern_instants

        return pattern_instants(self, time_columns)

    def task_spec(self, *, strip_select: bool = False, time_carrier: str | None = None) -> Any:
        spec = self.spec()
        if strip_select and self.config.spec.select is not None:
            cfg = replace(self.config, spec=replace(self.config.spec, select=None))
            spec = spec.with_config(cfg)
        return spec

    @property
    def output_schema(self) -> pa.Schema:
        return self._schema

    # ------------------------------------------------------------------ state
    def _reset_state(self) -> None:
        """Fresh partitions, navigation carry, event buffer, engine and no waiting matches."""
        cp = self.cp
        if self._where is not None:
            self._where.reset()
        self._pmap = PartitionMap(cp.partition_by)
        self._nav = NavCarry(cp.navs)
        self._ahead = NavAhead(cp.navs) if any(k < 0 for _, k in cp.navs) else None
        self._buffer = EventBuffer(len(cp.buf_cols), track_next=self._uses_next)
        self._pending: list[MatchSet] = []
        self._pending_n = 0
        self._pending_lo = _NO_EVENT
        check = _weak_grow_check(self)
        if FixedSeqEngine.eligible(cp) and self._fast:
            self._engine = FixedSeqEngine(cp, check)
        elif GapSeqEngine.eligible(cp) and self._fast:
            self._engine = GapSeqEngine(cp, check)
            # matches without their gap rows when no measure reads one (ONE ROW PER MATCH)
            self._engine.block_rows_only = rows_of_vars_unread(
                (low for _, low in self._measures), set(self._engine.gapv.tolist()),
                self.all_rows)
        elif cp.sql:
            self._engine = SqlEngine(cp, check)
        else:
            self._engine = AllRunsEngine(cp, check)
        self._last: tuple[int, int] | None = None
        self._span_after_gc = 0
        self._next_match_id = 1
        self._numbers: dict[int, int] = {}

    def _get_state(self) -> Any:
        return {"pmap": self._pmap, "nav": self._nav, "ahead": self._ahead,
                "buffer": self._buffer,
                "engine": self._engine.s, "last": self._last, "next_id": self._next_match_id,
                "numbers": self._numbers, "strings": self.cp.strings.codes,
                "order_keys": self.cp.order_keys,
                "pending": self._pending}

    def _set_state(self, state: Any) -> None:
        self._pmap = state["pmap"]
        self._nav = state["nav"]
        self._ahead = state["ahead"]
        self._buffer = state["buffer"]
        self._engine.s = state["engine"]
        self._last = state["last"]
        self._next_match_id = state["next_id"]
        self._numbers = state["numbers"]
        self.cp.strings.codes = state["strings"]
        self.cp.order_keys = state["order_keys"]
        self._pending = state["pending"]
        self._pending_n = sum(ms.n for ms in self._pending)
        self._pending_lo = min((int(ms.ev.min()) for ms in self._pending if len(ms.ev)),
                               default=_NO_EVENT)

    def end_interval(self) -> None:
        """Report what end of input allows, then forget every run (see module docstring).

        Only what a gap must drop is reset: the engine's runs (``engine.reset`` replaces all
        of its state, kept in ``engine.s``; SQL match numbers, which live there, are carried
        over), PREV history, the buffer's NEXT links and the time-order check. Partitions,
        match ids and numbers, and the buffer with the events of waiting matches live on. Rows
        held back for NEXT in DEFINE are matched first (the interval's end is their
        partition's end)."""
        self._release_ahead()
        self._finish_engine()
        eng = self._engine
        eng_numbers = {k: eng.s[k] for k in ("p_matchno", "matchno") if k in eng.s}
        eng.reset()
        eng.ensure_parts(self._pmap.count)
        for k, v in eng_numbers.items():
            if isinstance(v, np.ndarray):  # the old arrays may have more capacity than parts
                dst = eng.s[k]
                n = min(len(v), len(dst))
                dst[:n] = v[:n]
            else:
                eng.s[k] = v
        self._nav = NavCarry(self.cp.navs)
        self._last = None
        self._span_after_gc = 0
        buf = self._buffer
        buf.last_g.clear()  # nothing links across the gap
        buf.trim(self._pending_min(buf.end))
        self._maybe_build()
        self._set_state_size(buf.size)
        self.counters.intervals += 1

    def _grow_check(self, size: int, what: str) -> None:
        total = size + self._buffer.size
        if self.state_cap is not None and total > self.state_cap:
            raise StateCapExceeded(self.name, what, total, self.state_cap, "state_cap")

    # ------------------------------------------------------------------ processing
    def _check_order(self, t: np.ndarray, seq: np.ndarray) -> None:
        """Time must not go backwards; events with equal ``t`` count in arrival order."""
        if self._last is not None and t[0] < self._last[0]:
            lt, ls = self._last
            raise DataError(f"event (t={t[0]}, seq={seq[0]}) is older than the previous one "
                            f"(t={lt}, seq={ls}); input must be in time order", row=0, column="t")
        r = int(first_disorder(t))
        if r >= 0:
            raise DataError(f"event (t={t[r]}, seq={seq[r]}) is older than the previous one "
                            f"(t={t[r - 1]}, seq={seq[r - 1]}); input must be in time order",
                            row=r, column="t")
        self._last = (int(t[-1]), int(seq[-1]))

    @property
    def _breaks_in_kernel(self) -> bool:
        """Whether :meth:`push_intervals` can hand interval breaks to the matcher: its engine
        takes them, and nothing else that ``end_interval`` resets lives across events (PREV
        history, NEXT links)."""
        return (getattr(self._engine, "takes_breaks", False) and not self.cp.navs
                and not self._uses_next)

    def push_intervals(self, batch: pa.RecordBatch, breaks: np.ndarray, *,
                       final: bool = False) -> None:
        """Many short replay intervals in one batch (see :meth:`Operator.push_intervals`).

        When the matcher takes breaks, the batch is handled by one :meth:`_push_batch`:
        predicates, partitions and the event buffer are computed once, and the matcher ends
        every run at each break as at end of input, with no per-interval Python work. Otherwise
        (PREV or NEXT, or an engine without breaks) the slices are pushed one by one. Both give
        the same rows (a test holds them to it). A break at row 0 (the batch starts a new
        interval, as every batch but the first of an interval plan does) is one more break
        for the matcher: the runs carried from the batch before end there, in the same call,
        instead of in an :meth:`end_interval` of their own (a matcher call and a reset per
        batch). ``final`` (no input follows, the call ends with :meth:`flush`): a matcher that
        can (``takes_final``) resolves the runs still waiting for rows in this same call, not in
        a call of its own at the flush. Cost: O(rows + breaks x partitions)."""
        n = batch.num_rows
        breaks = self._checked_breaks(breaks, n)
        if (breaks.size == 0 and not final) or not self._breaks_in_kernel:
            super().push_intervals(batch, breaks, final=final)
            return
        self._check_open()
        self._admit(batch)
        brk = np.zeros(n, dtype=np.bool_)
        brk[breaks] = True
        self._push_batch(batch, brk, final=final)
        self._span_after_gc = 0
        self.counters.intervals += int(breaks.size)
        if final:
            self.flush()

    def _push_batch(self, batch: pa.RecordBatch, brk: np.ndarray | None = None, *,
                    final: bool = False) -> None:
        """Match one batch; ``brk`` (only when :attr:`_breaks_in_kernel`) flags rows that start
        a new replay interval; ``final``: the input ends with this batch (a flush follows)."""
        have = set(batch.schema.names)
        missing = [n for n in self._read if n not in have]
        if missing:
            raise DataError(f"input batch lacks column(s) {', '.join(missing)}",
                            column=missing[0])
        if self._where is not None:  # rows failing the subquery's WHERE are no rows
            keep = self._where.keep(batch)
            if brk is not None:
                brk = self._where.breaks(brk, keep)
            if not keep.all():
                batch = batch.filter(pa.array(keep))
            if batch.num_rows == 0:
                return
        self._check_order(column_np(batch, "t").astype(np.int64, copy=False),
                          column_np(batch, "seq").astype(np.int64, copy=False))
        if self._ahead is None:
            self._match_batch(batch, {}, brk, final=final)
            return
        rows, nexts = self._ahead.push(batch, self._pmap)
        if rows is not None:
            self._match_batch(rows, nexts)
        else:
            self._set_state_size(self._engine.state_size + self._buffer.size + self._ahead.size,
                                 "partial matches and events")

    def _release_ahead(self) -> None:
        """End of input or of an interval: match the rows NEXT in DEFINE held back."""
        if self._ahead is not None:
            rows, nexts = self._ahead.push(None, self._pmap, final=True)
            if rows is not None:
                self._match_batch(rows, nexts)

    def _match_batch(self, batch: pa.RecordBatch, nexts: dict[str, np.ndarray],
                     brk: np.ndarray | None = None, *, final: bool = False) -> None:
        """Match rows that passed the WHERE and the order check (``nexts``: their NEXT columns
        for DEFINE; ``brk``, ``final`` as for :meth:`_push_batch`)."""
        cp = self.cp
        n = batch.num_rows
        t = column_np(batch, "t").astype(np.int64, copy=False)
        seq = column_np(batch, "seq").astype(np.int64, copy=False)
        encoded: dict[str, pa.Array] = {}  # string columns' encodings, read once per batch
        pid = self._pmap.assign(batch, encoded)
        self._engine.ensure_parts(self._pmap.count)
        cols: dict[str, np.ndarray] = {}
        for c in set(self._numpy_cols) | set(self._nav_cols):
            if c in batch.schema.names:
                cols[c] = arrow_to_numpy(batch.column(c))
        navs = self._nav.compute(cols, pid)
        navs.update(nexts)
        env_cols = dict(cols)
        env_cols.update(navs)
        env = ColumnsEnv(env_cols)
        masks = [np.ones(n, dtype=np.bool_) if f is None else f.mask(batch, env, encoded)
                 for f in self._locals]
        if getattr(self._engine, "columnar", False):
            vmask: Any = masks
            startable = None
        else:
            vmask = np.stack(masks, axis=1) if masks else np.zeros((n, 0), dtype=np.bool_)
            startable = np.full(n, self._every_row_starts, dtype=np.bool_)
            for v in self._start_vars:
                startable |= masks[v]
        vmcols = np.empty((len(cp.buf_cols), n), dtype=np.float64)
        for j, (c, k) in enumerate(cp.buf_cols):
            if c in cp.derived:  # SUM(A.price * 2) in DEFINE: the expression on each row
                vmcols[j] = derived_column(batch, *cp.derived[c])
            elif c in cp.row_functions:  # LOWER(A.name) in DEFINE: on each row, k rows back
                vmcols[j] = row_function_codes(cp.row_functions[c], batch, navs, k, cp.strings)
            elif c in cp.order_columns:  # A.name < B.name: order keys of the strings
                vmcols[j] = self._order_keys(cp.order_columns[c], batch, navs, k)
            elif k == 0:
                string = cp.buf_is_string[j]
                col = encoded[c] if string and c in encoded else batch.column(c)
                vmcols[j] = to_float_column(col, string, cp.strings)
            else:
                vmcols[j] = object_to_float(navs[nav_name(c, k)], cp.buf_is_string[j],
                                            cp.strings)
        raw = batch.select(self._read)
        if navs:
            arrays = list(raw.columns)
            names = list(raw.schema.names)
            for col, k in sorted(cp.navs):
                vals = navs[nav_name(col, k)]
                typ = self.rows_schema.field(col).type
                arrays.append(pa.array(vals.tolist() if vals.dtype == object else vals,
                                       from_pandas=True).cast(typ, safe=False))
                names.append(nav_name(col, k))
            raw = pa.RecordBatch.from_arrays(arrays, names=names)
        buf = self._buffer
        g0 = buf.append(raw, vmcols, t, seq, pid)
        if brk is None:
            parts = self._engine.process(g0, pid, t, vmask, startable, buf.vm, buf.base,
                                         self.state_cap)
        else:  # an engine without takes_final resolves the last runs at the flush
            ends = {"final": True} if final and getattr(self._engine, "takes_final", False) \
                else {}
            parts = self._engine.process(g0, pid, t, vmask, startable, buf.vm, buf.base,
                                         self.state_cap, brk, **ends)
        for ms in parts:
            self._emit_matches(ms)
        self._maybe_build()
        keep = self._engine.min_referenced()
        live = self._engine.live_runs
        if keep is not None and buf.end - keep > max(4 * n, 1 << 18, 2 * self._span_after_gc):
            # garbage (dead runs not yet collected) may pin old events: collect, then trim;
            # if live runs really span that far, wait until the span doubles before retrying
            self._engine.collect()
            keep = self._engine.min_referenced()
            self._span_after_gc = 0 if keep is None else buf.end - keep
        buf.trim(self._pending_min(buf.end if keep is None else keep))
        extra = self.counters.extra
        extra["live_runs"] = live
        extra["peak_live_runs"] = max(extra.get("peak_live_runs", 0), live)
        held = 0 if self._ahead is None else self._ahead.size
        self._set_state_size(self._engine.state_size + buf.size + held,
                             "partial matches and events")

    def _finish_engine(self) -> None:
        for ms in self._engine.finish():
            self._emit_matches(ms)

    def _flush(self) -> None:
        self._release_ahead()
        self._finish_engine()
        self._build_pending()

    def has_results(self) -> bool:
        return bool(self._out) or self._pending_n > 0

    def results(self) -> pa.Table:
        self._build_pending()
        return super().results()

    def snapshot(self) -> dict[str, Any]:
        self._build_pending()  # a snapshot holds output rows, not buffer positions
        return super().snapshot()

    # ------------------------------------------------------------------ output

    def _order_keys(self, source: tuple[str | None, str | None], batch: pa.RecordBatch,
                    navs: dict[str, np.ndarray], k: int) -> np.ndarray:
        """Order keys of a string column (``k`` rows back) or literal on the batch's rows; when
        known keys moved, the buffered rows' keys are rewritten first."""
        col, literal = source
        if col is None:
            values = np.full(batch.num_rows, literal, dtype=object)
        elif col in self.cp.row_functions:  # LOWER(A.s) < B.s: the function's strings
            values = row_function_values(self.cp.row_functions[col], batch, navs, k)
        else:
            values = arrow_to_numpy(batch.column(col)) if k == 0 else navs[nav_name(col, k)]
        keys, moved = self.cp.order_keys.keys(np.asarray(values, dtype=object))
        if moved is not None:
            rows = [j for j, (c, _) in enumerate(self.cp.buf_cols) if c in self.cp.order_columns]
            self._buffer.remap_keys(rows, *moved)
        return keys

    # ------------------------------------------------------------------ introspection
    @property
    def matcher(self) -> str:
        """Which engine runs the pattern: a vectorized one for its shape, or the automaton."""
        return {"FixedSeqEngine": "vectorized fixed sequence",
                "GapSeqEngine": "vectorized blocks and gaps"}.get(
                    type(self._engine).__name__, "automaton")

    @property
    def match_rows(self) -> str:
        """What a match keeps of its rows for its measures: ``block rows`` when the
        blocks-and-gaps matcher leaves out the gap rows no measure reads, else ``every row``."""
        return "block rows" if getattr(self._engine, "block_rows_only", False) else "every row"

    def explain(self) -> str:
        """One line per compiled part (for EXPLAIN)."""
        cp = self.cp
        lines = [cp.spec.to_text(),
                 f"engine: {'sql' if cp.sql else 'all-runs'}, matcher: {self.matcher}, "
                 f"match rows: {self.match_rows}, "
                 f"positions: {len(cp.pos_var)}, "
                 f"state slots: {len(cp.ci_kind)} int + {len(cp.cf_kind)} float"]
        for v, e in zip(cp.var_names, cp.local_exprs):
            lo, hi = int(cp.prog_lo[cp.var_index(v)]), int(cp.prog_hi[cp.var_index(v)])
            lines.append(f"  {v}: per-event {to_text(e) if e is not None else 'TRUE'}; "
                         f"cross-event program of {hi - lo} ops")
        return "\n".join(lines)

    def _check(self) -> None:
        """Invariant checker for stress tests."""
        self._engine._check()
        buf = self._buffer
        assert buf.base <= buf.end
        keep = self._engine.min_referenced()
        if keep is not None:
            assert keep >= buf.base, "a live run reads a trimmed event"
            assert buf.chunks and keep >= buf.chunks[0][0], "a live run's event was dropped"
        assert self._pending_n == sum(ms.n for ms in self._pending)
        if self._pending:
            lo = min(int(ms.ev.min()) for ms in self._pending if len(ms.ev))
            assert lo == self._pending_lo, "the waiting matches' first event is misrecorded"
            assert buf.chunks and lo >= buf.chunks[0][0], "a waiting match's event was dropped"
            assert buf.raw and lo >= buf.raw[0][0], "a waiting match's row was dropped"


__all__ = ["PatternConfig", "PatternOperator", "Semantics"]
