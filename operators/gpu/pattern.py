"""GPU sequential pattern matching (dissertation 4.3.5): partial-match arrays per NFA state.

:class:`GpuPatternOperator` is the CPU :class:`~replaydb.operators.pattern.operator.PatternOperator`
(same :class:`~replaydb.operators.pattern.operator.PatternConfig`, same compiled automaton and
conditions, same per-event masks, measures, output schema and result order) with the all-runs
matcher replaced by :class:`GpuAllRunsEngine`, which keeps its partial matches (PMs) on the device.

Data layout (the dissertation's): every NFA state (automaton position) has one *dense array* of
PMs; a PM holds its partition, start time and start event, the head of its event history and its
computation state (bound-event slots and running aggregates, as the CPU matcher's state row). The
events a PM matched form a persistent linked list in a shared *history arena* (event, position,
parent), so a clone shares its history with the original.

One batch of events (a replay interval is cut into large batches) is processed as:

1. the batch's per-event arrays (time, partition, one condition-mask column per variable) are
   copied to the device in one staged transfer each; the condition machine's columns are appended
   to a device mirror of the event buffer;
2. *start kernel*: one thread per event; every first position whose variable accepts the event
   starts a PM (a match right away if that position is final);
3. *state kernels*: one launch per NFA state, one thread per PM of its dense array. Each thread
   runs its PM over the batch's events in order - the **check** step (partition, window,
   transitions: per-event mask and cross-event condition against the PM's state) and the
   **propagate** step of the operational table (Table 4.1: drop, ignore, add, move, clone; see
   :func:`~replaydb.operators.gpu.pattern_kernels.advance`). A moved PM continues in the same
   thread; clones (and PMs started in step 2) are appended, with one atomic each, to a worklist
   processed from their next event by the next *round* (``work_kernel``) until no PM is pending;
4. a PM alive at the end of the batch is written, reserving its slot with an atomic add, to its
   state's dense array of the next batch - dropped and moved PMs simply are not written, so the
   arrays come out **compacted on the device** (double buffering replaces the dissertation's
   mark-then-compact pass on the CPU);
5. completed matches (history node + completing event) are expanded on the device into event
   lists (a length pass, an exclusive scan, a write pass) and copied back compactly; the host
   sorts them by completing event and the operator finalizes them exactly as the CPU matcher's
   (lexicographic order of simultaneous matches, MATCH_NUMBER, measures).

Overflow of any device array (history, matches, worklist, a state's array) is detected with an
atomic flag; the round is rolled back (counters restored, nothing else was overwritten) and run
again with bigger arrays, after :meth:`~GpuAllRunsEngine.grow_check` lets the operator enforce its
state cap. The history arena is garbage-collected on the device (mark from live PMs, exclusive
scan, order-preserving compaction) when it has doubled since the last collection.

Semantics: identical matches to the CPU matcher (the tests run both). Unlike the CPU run graph the
device does not merge runs that reached the same state, so state grows with the number of
partial matches (a skip-till-any Kleene blow-up reaches the state cap sooner; ``state_size``
counts PMs plus history nodes).

Supported: all-runs semantics (the dissertation's and SASE+'s contiguous, partition-contiguity,
skip-till-next and skip-till-any strategies), any pattern of variables, sequences, alternation and
quantifiers (Kleene plus and star included), WITHIN windows, partitions and equivalence tests,
conditions on the current event and on bound events and running aggregates of the PM. Refused at
bind time with :class:`~replaydb.operators.gpu.exprvm.GpuUnsupported` naming the feature:
negation, SQL MATCH_RECOGNIZE semantics (preferment, AFTER MATCH SKIP), and conditions needing
more device state than
:data:`~replaydb.operators.gpu.pattern_kernels.CI_MAX` /
:data:`~replaydb.operators.gpu.pattern_kernels.CF_MAX` slots or a deeper stack than
:data:`~replaydb.operators.gpu.pattern_kernels.STACK_MAX`.

Complexity: O(sum over PMs of the events they see) device work per batch (the same as the CPU
matcher without run sharing), O(rounds) launches, where the rounds are the longest chain of
clones within the batch; O(batch + matched events) transfers.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda

from replaydb.operators.base import DEFAULT_STATE_CAP
from replaydb.operators.gpu import pattern_kernels as pk
from replaydb.operators.gpu.device import TPB, Staging, blocks_for, resolve_backend
from replaydb.operators.gpu.exprvm import GpuUnsupported
from replaydb.operators.gpu.scan import exclusive_sum
from replaydb.operators.pattern.compile import CompiledPattern
from replaydb.operators.pattern.config import PatternConfig
from replaydb.operators.pattern.measures import MatchSet
from replaydb.operators.pattern.operator import PatternOperator

INT64_MAX = np.iinfo(np.int64).max
GC_MIN = 1 << 16


def check_supported(cp: CompiledPattern) -> None:
    """Raise :class:`GpuUnsupported` naming the first feature the device matcher lacks."""
    if cp.sql:
        raise GpuUnsupported("pattern matcher", "SQL MATCH_RECOGNIZE semantics (preferment and "
                                                "AFTER MATCH SKIP); it supports the all-runs "
                                                "strategies")
    if len(cp.neg_var):
        raise GpuUnsupported("pattern matcher", "negation")
    if len(cp.ci_kind) > pk.CI_MAX:
        raise GpuUnsupported("pattern matcher", f"conditions referring to more than "
                                                f"{pk.CI_MAX} bound events")
    if len(cp.cf_kind) > pk.CF_MAX:
        raise GpuUnsupported("pattern matcher", f"more than {pk.CF_MAX} running count/aggregate "
                                                "slots in conditions")
    if max(cp.depth_i, cp.depth_f) > pk.STACK_MAX:
        raise GpuUnsupported("pattern matcher", f"conditions nested deeper than "
                                                f"{pk.STACK_MAX} stack entries")


class _Pool:
    """PM arrays on the device: one dense segment per NFA state (offset, capacity, count)."""

    def __init__(self, caps: np.ndarray, ci: int, cf: int) -> None:
        self.caps = caps.astype(np.int64)
        self.off = np.concatenate(([0], np.cumsum(self.caps)[:-1])).astype(np.int64)
        total = int(self.caps.sum())
        self.ci_w, self.cf_w = max(1, ci), max(1, cf)
        self.pid = cuda.device_array(max(1, total), np.int64)
        self.t = cuda.device_array(max(1, total), np.int64)
        self.g = cuda.device_array(max(1, total), np.int64)
        self.hist = cuda.device_array(max(1, total), np.int64)
        self.ci = cuda.device_array((max(1, total), self.ci_w), np.int64)
        self.cf = cuda.device_array((max(1, total), self.cf_w), np.float64)
        self.d_off = cuda.to_device(self.off)
        self.d_cap = cuda.to_device(self.caps)
        self.cnt = np.zeros(len(caps), np.int64)

    FIELDS = ("pid", "t", "g", "hist", "ci", "cf")

    def copy_counts_from(self, other: _Pool, counts: np.ndarray) -> None:
        """Copy the first ``counts[q]`` PMs of every state from ``other`` (a re-layout)."""
        for q, c in enumerate(counts.tolist()):
            if c:
                a, b = int(other.off[q]), int(self.off[q])
                for f in self.FIELDS:
                    getattr(self, f)[b:b + c].copy_to_device(getattr(other, f)[a:a + c])
        self.cnt = counts.copy()

    def host(self) -> dict[str, Any]:
        """The live PMs per state, copied to the host."""
        out: dict[str, Any] = {"caps": self.caps.copy(), "cnt": self.cnt.copy()}
        for f in self.FIELDS:
            arr = getattr(self, f).copy_to_host()
            out[f] = [arr[int(o):int(o) + int(c)].copy() for o, c in zip(self.off, self.cnt)]
        return out

    @staticmethod
    def from_host(h: dict[str, Any], ci: int, cf: int) -> _Pool:
        caps = np.maximum(h["caps"], h["cnt"])
        p = _Pool(caps, ci, cf)
        for q, c in enumerate(h["cnt"].tolist()):
            if c:
                o = int(p.off[q])
                for f in _Pool.FIELDS:
                    getattr(p, f)[o:o + c].copy_to_device(np.ascontiguousarray(h[f][q]))
        p.cnt = h["cnt"].copy()
        return p


class _Work:
    """A worklist of PMs waiting to be run from their resume event."""

    def __init__(self, cap: int, ci: int, cf: int) -> None:
        self.cap = max(16, int(cap))
        self.pos = cuda.device_array(self.cap, np.int64)
        self.pid = cuda.device_array(self.cap, np.int64)
        self.t = cuda.device_array(self.cap, np.int64)
        self.g = cuda.device_array(self.cap, np.int64)
        self.hist = cuda.device_array(self.cap, np.int64)
        self.res = cuda.device_array(self.cap, np.int64)
        self.ci = cuda.device_array((self.cap, max(1, ci)), np.int64)
        self.cf = cuda.device_array((self.cap, max(1, cf)), np.float64)

    FIELDS = ("pos", "pid", "t", "g", "hist", "res", "ci", "cf")

    def grown(self, cap: int, keep: int, ci: int, cf: int) -> _Work:
        w = _Work(cap, ci, cf)
        if keep:
            for f in self.FIELDS:
                getattr(w, f)[:keep].copy_to_device(getattr(self, f)[:keep])
        return w

    def args(self) -> tuple[Any, ...]:
        return (self.pos, self.pid, self.t, self.g, self.hist, self.res, self.ci, self.cf)


def _grown(a: Any, cap: int, keep: int) -> Any:
    b = cuda.device_array(cap, a.dtype)
    if keep:
        b[:keep].copy_to_device(a[:keep])
    return b


class _LazyState:
    """The engine's state as the operator's snapshot sees it (``engine.s``).

    Membership tests and item reads are cheap (they describe what exists); a deep copy downloads
    every live PM and history node, which is what a snapshot needs.
    """

    KEYS = ("pool", "hist", "n_hist")

    def __init__(self, engine: GpuAllRunsEngine) -> None:
        self.engine = engine

    def __contains__(self, key: object) -> bool:
        return key in self.KEYS

    def __getitem__(self, key: str) -> Any:
        return self.engine.host_state()[key]

    def __deepcopy__(self, memo: dict) -> dict[str, Any]:
        return copy.deepcopy(self.engine.host_state(), memo)


class GpuAllRunsEngine:
    """The all-runs matcher on the device (see the module docstring); the interface of
    :class:`~replaydb.operators.pattern.engine.AllRunsEngine`."""

    columnar = False
    INITIAL_STATE = 256
    """Initial capacity of every NFA state's PM array (doubled on overflow)."""
    INITIAL_HIST = 1 << 12
    INITIAL_MATCHES = 1 << 10
    INITIAL_WORK = 1 << 10
    GC_MIN = GC_MIN
    """The history arena is collected once it holds more than max(GC_MIN, 2 x live) nodes."""

    def __init__(self, cp: CompiledPattern, grow_check: Callable[[int, str], None]) -> None:
        check_supported(cp)
        self.cp = cp
        self.grow_check = grow_check
        self.CI = len(cp.ci_kind)
        self.CF = len(cp.cf_kind)
        self.P = len(cp.pos_var)
        self.staging = Staging()
        d = {k: getattr(cp, k) for k in (
            "pos_var", "start", "fol_ptr", "fol_to", "prog_lo", "prog_hi", "p_op", "p_ia",
            "p_ib", "p_fc", "p_ic", "ci_kind", "ci_var", "cf_kind", "cf_var", "cf_col",
            "init_f")}
        d["pos_final"] = cp.pos_final.astype(np.uint8)
        d["pos_has_next"] = cp.pos_has_next.astype(np.uint8)
        self.auto = {k: cuda.to_device(v if len(v) else np.zeros(1, v.dtype))
                     for k, v in d.items()}
        # empty state layouts must keep their length 0 (the kernels loop over their shape)
        for k in ("ci_kind", "ci_var", "cf_kind", "cf_var", "cf_col", "init_f"):
            if not len(d[k]):
                self.auto[k] = cuda.to_device(np.zeros(0, d[k].dtype))
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        caps = np.full(self.P, self.INITIAL_STATE, np.int64)
        self.pool = _Pool(caps, self.CI, self.CF)
        self.h_cap = self.INITIAL_HIST
        self.h_ev = cuda.device_array(self.h_cap, np.int64)
        self.h_pos = cuda.device_array(self.h_cap, np.int64)
        self.h_par = cuda.device_array(self.h_cap, np.int64)
        self.n_hist = 0
        self.gc_at = self.GC_MIN
        self.m_cap = self.INITIAL_MATCHES
        self.w_cap = self.INITIAL_WORK
        self.dbuf = None
        self.dbase = 0
        self.dend = 0
        self._min_ref: int | None = None

    @property
    def s(self) -> _LazyState:
        return _LazyState(self)

    @s.setter
    def s(self, st: dict[str, Any]) -> None:
        self.pool = _Pool.from_host(st["pool"], self.CI, self.CF)
        n = int(st["n_hist"])
        self.h_cap = max(self.INITIAL_HIST, 2 * n)
        self.h_ev = cuda.device_array(self.h_cap, np.int64)
        self.h_pos = cuda.device_array(self.h_cap, np.int64)
        self.h_par = cuda.device_array(self.h_cap, np.int64)
        if n:
            self.h_ev[:n].copy_to_device(st["hist"][0])
            self.h_pos[:n].copy_to_device(st["hist"][1])
            self.h_par[:n].copy_to_device(st["hist"][2])
        self.n_hist = n
        self.dbuf = None  # the mirror of the event buffer is rebuilt from the operator's buffer
        self._min_ref = self._compute_min_ref()

    def host_state(self) -> dict[str, Any]:
        n = self.n_hist
        hist = (self.h_ev[:n].copy_to_host(), self.h_pos[:n].copy_to_host(),
                self.h_par[:n].copy_to_host()) if n else (np.zeros(0, np.int64),) * 3
        return {"pool": self.pool.host(), "hist": hist, "n_hist": n}

    def ensure_parts(self, n_parts: int) -> None:
        return None

    @property
    def live_runs(self) -> int:
        return int(self.pool.cnt.sum())

    @property
    def state_size(self) -> int:
        return self.live_runs + self.n_hist

    def finish(self) -> list[MatchSet]:
        return []

    def min_referenced(self) -> int | None:
        """Smallest global event index a live PM references (its start event)."""
        return self._min_ref

    # ------------------------------------------------------------------ event buffer mirror
    def _mirror(self, buf: np.ndarray, base: int, g0: int, n: int) -> None:
        """Make the device mirror of the VM columns cover ``[base, g0 + n)``."""
        ncol = buf.shape[0]
        end = g0 + n
        if ncol == 0:
            if self.dbuf is None:
                self.dbuf = cuda.device_array((1, 1), np.float64)
            self.dbase, self.dend = base, end
            return
        fits = (self.dbuf is not None and self.dend == g0 and self.dbase <= base
                and end - self.dbase <= self.dbuf.shape[0])
        if fits:
            rows = np.ascontiguousarray(buf[:, g0 - base:g0 - base + n].T)
            self.staging.upload_into("vm_rows", rows.reshape(-1),
                                     self.dbuf[g0 - self.dbase:end - self.dbase].reshape(-1))
            self.dend = end
            return
        used = end - base
        cap = max(1024, 2 * used)
        self.dbuf = cuda.device_array((cap, ncol), np.float64)
        rows = np.ascontiguousarray(buf[:, :used].T)
        self.dbuf[:used].copy_to_device(rows)
        self.staging.bytes_to_device += rows.nbytes
        self.dbase, self.dend = base, end

    # ------------------------------------------------------------------ processing
    def process(self, g0: int, pid: np.ndarray, t: np.ndarray, vmask: np.ndarray,
                startable: np.ndarray | None, buf: np.ndarray, base: int,
                enumerate_cap: int | None) -> list[MatchSet]:
        n = len(t)
        if n == 0:
            return []
        self._mirror(buf, base, g0, n)
        st = self.staging
        ev = (g0, st.stage("t", np.ascontiguousarray(t, dtype=np.int64)),
              st.stage("pid", np.ascontiguousarray(pid, dtype=np.int64)),
              st.stage("vmask", np.ascontiguousarray(vmask, dtype=np.uint8)))
        self.ctr = cuda.to_device(np.array([self.n_hist, 0, 0, 0], np.int64))
        self.m_hist = cuda.device_array(self.m_cap, np.int64)
        self.m_end = cuda.device_array(self.m_cap, np.int64)
        self.n_match = 0
        caps = np.maximum(self.INITIAL_STATE, 2 * self.pool.cnt)
        out = _Pool(caps, self.CI, self.CF)
        s_cnt = cuda.to_device(np.zeros(self.P, np.int64))
        work_in = _Work(self.w_cap, self.CI, self.CF)
        # step 0: the start kernel fills the first worklist
        work_in = self._run_step("start", n, ev, None, 0, work_in, out, s_cnt)[0]
        n_in = self._last_work
        first = True
        while first or n_in:
            nxt = _Work(self.w_cap, self.CI, self.CF)
            nxt, out, s_cnt = self._run_step("round", n, ev, work_in if n_in else None, n_in,
                                             nxt, out, s_cnt, states=first)
            n_in = self._last_work
            work_in = nxt
            first = False
        out.cnt = s_cnt.copy_to_host()
        self.pool = out
        self.n_hist = int(self.ctr.copy_to_host()[pk.C_HIST])
        ms = self._drain(enumerate_cap)
        if self.n_hist > self.gc_at:
            self.collect()
        self._min_ref = self._compute_min_ref()
        return ms

    def _automaton_args(self) -> tuple[Any, ...]:
        a = self.auto
        cp = self.cp
        return (cp.strategy, cp.window, a["pos_var"], a["fol_ptr"], a["fol_to"],
                a["pos_final"], a["pos_has_next"], a["prog_lo"], a["prog_hi"], a["p_op"],
                a["p_ia"], a["p_ib"], a["p_fc"], a["p_ic"], a["ci_kind"], a["ci_var"],
                a["cf_kind"], a["cf_var"], a["cf_col"])

    def _run_step(self, kind: str, n: int, ev: tuple[Any, ...], work_in: _Work | None,
                  n_in: int, work_out: _Work, out: _Pool, s_cnt: Any, states: bool = False
                  ) -> tuple[_Work, _Pool, Any]:
        """Run one step (start kernel, or a round: state kernels and/or the worklist),
        rolling back and growing arrays until nothing overflows."""
        g0, d_t, d_pid, d_vm = ev
        a = self.auto
        while True:
            saved = self.ctr.copy_to_host()
            saved_cnt = s_cnt.copy_to_host()
            self.ctr = cuda.to_device(np.array([saved[0], saved[1], 0, 0], np.int64))
            hist = (self.h_ev, self.h_pos, self.h_par)
            matches = (self.m_hist, self.m_end)
            wout = work_out.args()
            outs = (out.d_off, out.d_cap, s_cnt, out.pid, out.t, out.g, out.hist, out.ci,
                    out.cf)
            tail = (self.dbuf, self.dbase, *hist, *matches, *wout, *outs, self.ctr)
            if kind == "start":
                pk.start_kernel[blocks_for(n), TPB](
                    n, g0, d_t, d_pid, d_vm, a["start"], a["pos_var"], a["pos_final"],
                    a["pos_has_next"], a["prog_lo"], a["prog_hi"], a["p_op"], a["p_ia"],
                    a["p_ib"], a["p_fc"], a["p_ic"], a["ci_kind"], a["ci_var"], a["cf_kind"],
                    a["cf_var"], a["cf_col"], a["init_f"], self.dbuf, self.dbase, *hist, *matches,
                    *wout, self.ctr)
            else:
                common = (n, g0, d_t, d_pid, d_vm, *self._automaton_args(), *tail)
                if states:
                    p = self.pool
                    for q in range(self.P):
                        c = int(p.cnt[q])
                        if c:
                            pk.state_kernel[blocks_for(c), TPB](
                                q, int(p.off[q]), c, p.pid, p.t, p.g, p.hist, p.ci, p.cf,
                                *common)
                if work_in is not None and n_in:
                    pk.work_kernel[blocks_for(n_in), TPB](n_in, *work_in.args(), *common)
            got = self.ctr.copy_to_host()
            ovf = int(got[pk.C_OVF])
            if not ovf:
                self._last_work = int(got[pk.C_WORK])
                return work_out, out, s_cnt
            # roll back: counters to their values before the step, then grow what overflowed
            cnt_after = np.maximum(s_cnt.copy_to_host(), saved_cnt)
            self.ctr = cuda.to_device(np.array([saved[0], saved[1], 0, 0], np.int64))
            s_cnt = cuda.to_device(saved_cnt)
            if ovf & pk.OVF_HIST:
                need = max(2 * self.h_cap, int(got[pk.C_HIST]) + 16)
                self.grow_check(need, "partial-match history nodes")
                keep = int(saved[0])
                self.h_ev = _grown(self.h_ev, need, keep)
                self.h_pos = _grown(self.h_pos, need, keep)
                self.h_par = _grown(self.h_par, need, keep)
                self.h_cap = need
            if ovf & pk.OVF_MATCH:
                need = max(2 * self.m_cap, int(got[pk.C_MATCH]) + 16)
                keep = int(saved[1])
                self.m_hist = _grown(self.m_hist, need, keep)
                self.m_end = _grown(self.m_end, need, keep)
                self.m_cap = need
            if ovf & pk.OVF_WORK:
                need = max(2 * work_out.cap, int(got[pk.C_WORK]) + 16)
                self.grow_check(need, "partial matches")
                work_out = _Work(need, self.CI, self.CF)
                self.w_cap = need
            if ovf & pk.OVF_STATE:
                caps = out.caps.copy()
                over = cnt_after > caps
                caps[over] = np.maximum(2 * caps[over], cnt_after[over] + 16)
                self.grow_check(int(caps.sum()), "partial matches")
                bigger = _Pool(caps, self.CI, self.CF)
                bigger.copy_counts_from(out, saved_cnt)
                out = bigger

    def _drain(self, enumerate_cap: int | None) -> list[MatchSet]:
        """Expand the batch's matches into event lists on the device, order by end event."""
        got = self.ctr.copy_to_host()
        m = int(got[pk.C_MATCH])
        if m == 0:
            return []
        if enumerate_cap is not None and m > enumerate_cap:
            self.grow_check(m, "matches completed by one batch")
        lens = cuda.device_array(m, np.int64)
        pk.path_len_kernel[blocks_for(m), TPB](self.m_hist, m, self.h_par, lens)
        offs, total = exclusive_sum(lens, m)
        out_ev = cuda.device_array(max(1, total), np.int64)
        out_pos = cuda.device_array(max(1, total), np.int64)
        pk.path_write_kernel[blocks_for(m), TPB](self.m_hist, m, self.h_ev, self.h_pos,
                                                 self.h_par, offs, lens, out_ev, out_pos)
        ev = self.staging.fetch(out_ev, total)
        pos = self.staging.fetch(out_pos, total)
        ln = self.staging.fetch(lens, m)
        end = self.staging.fetch(self.m_end, m)
        off = np.concatenate(([0], np.cumsum(ln))).astype(np.int64)
        order = np.argsort(end, kind="stable")
        ln2 = ln[order]
        off2 = np.concatenate(([0], np.cumsum(ln2))).astype(np.int64)
        idx = np.repeat(off[:-1][order] - off2[:-1], ln2) + np.arange(total, dtype=np.int64)
        ev, pos = ev[idx], pos[idx]
        return [MatchSet(ev, self.cp.pos_var[pos], off2, np.zeros(m, dtype=np.int64))]

    # ------------------------------------------------------------------ garbage collection
    def collect(self) -> None:
        """Compact the history arena to the nodes live PMs reach (order preserved)."""
        n = self.n_hist
        if n == 0:
            return
        p = self.pool
        mark = cuda.to_device(np.zeros(n, np.int64))
        for q in range(self.P):
            c = int(p.cnt[q])
            if c:
                o = int(p.off[q])
                pk.gc_mark_kernel[blocks_for(c), TPB](p.hist[o:o + c], c, self.h_par, mark)
        newid, k = exclusive_sum(mark, n)
        cap = max(self.INITIAL_HIST, 2 * k)
        n_ev = cuda.device_array(cap, np.int64)
        n_pos = cuda.device_array(cap, np.int64)
        n_par = cuda.device_array(cap, np.int64)
        pk.gc_compact_kernel[blocks_for(n), TPB](n, mark, newid, self.h_ev, self.h_pos,
                                                 self.h_par, n_ev, n_pos, n_par)
        for q in range(self.P):
            c = int(p.cnt[q])
            if c:
                o = int(p.off[q])
                pk.gc_remap_kernel[blocks_for(c), TPB](p.hist[o:o + c], c, newid)
        self.h_ev, self.h_pos, self.h_par = n_ev, n_pos, n_par
        self.h_cap = cap
        self.n_hist = k
        self.gc_at = max(self.GC_MIN, 2 * k)

    def _compute_min_ref(self) -> int | None:
        p = self.pool
        if not int(p.cnt.sum()):
            return None
        out = cuda.to_device(np.array([INT64_MAX], np.int64))
        for q in range(self.P):
            c = int(p.cnt[q])
            if c:
                o = int(p.off[q])
                pk.min_kernel[blocks_for(c), TPB](p.g[o:o + c], c, out)
        return int(out.copy_to_host()[0])

    def _check(self) -> None:
        """Invariants: counts within capacities, histories well formed (parents older), every
        PM's history starts at its start event, positions valid."""
        h = self.host_state()
        pool = h["pool"]
        assert np.all(pool["cnt"] <= pool["caps"])
        ev, pos, par = h["hist"]
        n = h["n_hist"]
        assert len(ev) == n
        if n:
            assert np.all(par < np.arange(n)), "a history node's parent is not older"
            assert np.all((pos >= 0) & (pos < self.P))
            ok = par >= 0
            assert np.all(ev[par[ok]] < ev[ok]), "history events out of order"
        for q in range(self.P):
            for hd, g in zip(pool["hist"][q].tolist(), pool["g"][q].tolist()):
                assert 0 <= hd < n, "a PM references a freed history node"
                assert pos[hd] == q, "a PM's last node is not at its state"
                while par[hd] >= 0:
                    hd = par[hd]
                assert ev[hd] == g, "a PM's history does not start at its start event"



class GpuPatternOperator(PatternOperator):
    """Sequential pattern matching with the matcher on the GPU (see the module docstring).

    ``backend`` as for :class:`~replaydb.operators.gpu.filter.GpuFilterOperator`; with the CPU
    fallback the operator is the CPU operator (the check for supported features still runs, so
    building one tells whether the GPU could run the query).
    """

    device = "gpu"

    def __init__(self, config: PatternConfig, *, state_cap: int | None = DEFAULT_STATE_CAP,
                 backend: str = "auto") -> None:
        self.backend = resolve_backend(backend)
        self._gpu_engine: GpuAllRunsEngine | None = None
        super().__init__(config, state_cap=state_cap)
        check_supported(self.cp)

    def _reset_state(self) -> None:
        super()._reset_state()
        if getattr(self, "backend", "cpu") == "cpu":
            return
        if self._gpu_engine is None:
            self._gpu_engine = GpuAllRunsEngine(self.cp, self._grow_check)
        else:
            self._gpu_engine.reset()
        self._engine = self._gpu_engine  # type: ignore[assignment]

    def transfer_bytes(self) -> dict[str, int]:
        e = self._gpu_engine
        if e is None:
            return {"to_device": 0, "from_device": 0}
        return {"to_device": e.staging.bytes_to_device,
                "from_device": e.staging.bytes_from_device}
