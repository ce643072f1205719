"""Engines: own the matchers' arrays, grow and garbage-collect them, return matches.

:class:`AllRunsEngine` drives :mod:`~replaydb.operators.pattern.nfa_cep` (dissertation / SASE+
semantics), :class:`SqlEngine` drives :mod:`~replaydb.operators.pattern.nfa_sql`
(MATCH_RECOGNIZE). Both keep every piece of runtime state in NumPy arrays inside ``self.s``
(a dict), so a snapshot is a deep copy of that dict. Arrays start small and double when a kernel
reports it ran out of room; before doubling the run graph is garbage-collected (nodes no frontier
run can reach, or whose every path left the window). ``grow_check`` is called with the size a
growth would reach so the operator can raise :class:`~replaydb.errors.StateCapExceeded` before
allocating.

Complexity: amortized O(1) per created node for growth and collection.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from replaydb.errors import OperatorError
from replaydb.operators.pattern import nfa_cep, nfa_sql
from replaydb.operators.pattern.automaton import ACCEPT
from replaydb.operators.pattern.compile import CompiledPattern
from replaydb.operators.pattern.measures import EMPTY, MATCHED, UNMATCHED, MatchSet
from replaydb.operators.pattern.model import RowsPerMatch

MIN_T = np.iinfo(np.int64).min
GC_MIN = 1 << 16
"""Arenas grow (instead of being collected) until they hold this many entries."""
_NO_BREAKS = np.zeros(0, dtype=np.bool_)


def _grow(a: np.ndarray, cap: int) -> np.ndarray:
    if a.ndim == 1:
        b = np.empty(cap, dtype=a.dtype)
        b[: a.shape[0]] = a
    else:
        b = np.empty((cap, a.shape[1]), dtype=a.dtype)
        b[: a.shape[0]] = a
    return b


def _pow2(n: int) -> int:
    return 1 << max(4, int(n - 1).bit_length())


class _Base:
    node_keys: tuple[str, ...] = ()

    def __init__(self, cp: CompiledPattern, grow_check: Callable[[int, str], None]) -> None:
        self.cp = cp
        self.grow_check = grow_check
        self.CI = len(cp.ci_kind)
        self.CF = len(cp.cf_kind)
        degs = [int(np.sum(cp.fol_to[cp.fol_ptr[p]:cp.fol_ptr[p + 1]] >= 0))
                for p in range(len(cp.pos_var))]
        self.maxdeg = max(1, max(degs) if degs else 1)
        # the unset int state of a starting run and the stacks of one condition program (the
        # all-runs engine keeps stacks for every candidate in its scratch)
        self.ci0 = np.full(max(1, self.CI), -1, dtype=np.int64)
        self.si = np.empty(cp.depth_i, dtype=np.int64)
        self.sf = np.empty(cp.depth_f, dtype=np.float64)
        # the condition machine's instructions, or None when no variable has a cross-event
        # condition: the kernels are then compiled without the machine (a smaller hot loop)
        self.prog_op = cp.p_op if np.any(cp.prog_hi > cp.prog_lo) else None
        self.reset()

    def reset(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _nodes(self, cap: int) -> dict[str, np.ndarray]:
        d = {k: np.empty(cap, dtype=np.int64) for k in self.node_keys}
        d["ctx_i"] = np.empty((cap, self.CI), dtype=np.int64)
        d["ctx_f"] = np.empty((cap, self.CF), dtype=np.float64)
        return d

    def _grow_keys(self, keys: tuple[str, ...], cap: int) -> None:
        for k in keys:
            self.s[k] = _grow(self.s[k], cap)

    def ensure_parts(self, n_parts: int) -> None:
        cur = self.s["part_cap"]
        self.s["n_parts"] = max(self.s["n_parts"], n_parts)
        if n_parts <= cur:
            return
        cap = max(n_parts, 2 * cur)
        for k, fill in self.part_fill.items():
            a = self.s[k]
            b = np.full(cap, fill, dtype=np.int64)
            b[: a.shape[0]] = a
            self.s[k] = b
        self.s["part_cap"] = cap
        self.s["n_parts"] = max(self.s["n_parts"], n_parts)

    def _ht(self, need: int) -> None:
        if self.s["ht"].shape[0] < 2 * need + 2:
            cap = _pow2(4 * need + 4)
            self.s["ht"] = np.zeros(cap, dtype=np.int64)
            self.s["ht_gen"] = np.zeros(cap, dtype=np.int64)

    def min_referenced(self) -> int | None:
        """Smallest global event index a live run still reads (None: nothing live): its
        nodes' events and the state slots that hold events (not those holding variables)."""
        s = self.s
        n = int(s["cnt"][0])
        if n == 0:
            return None
        m = int(s["n_ev"][:n].min())
        if self.cp.ci_events.any():
            ci = s["ctx_i"][:n][:, self.cp.ci_events]
            ci = ci[ci >= 0]
            if ci.size:
                m = min(m, int(ci.min()))
        return m

    part_fill: dict[str, int] = {}


class AllRunsEngine(_Base):
    """Drives the all-runs kernel (see :mod:`~replaydb.operators.pattern.nfa_cep`)."""

    node_keys = ("n_ev", "n_pos", "n_t", "n_lstart", "n_neg", "n_edge", "n_isstart")
    part_fill = {"f_off": 0, "f_len": 0, "f_cap": 0}

    def reset(self) -> None:
        s: dict = self._nodes(1024)
        s.update(
            e_src=np.empty(1024, dtype=np.int64), e_next=np.empty(1024, dtype=np.int64),
            fp=np.empty(4096, dtype=np.int64),
            f_off=np.zeros(16, dtype=np.int64), f_len=np.zeros(16, dtype=np.int64),
            f_cap=np.zeros(16, dtype=np.int64), part_cap=16, n_parts=1,
            out_node=np.empty(256, dtype=np.int64), cnt=np.zeros(5, dtype=np.int64),
            ht=np.zeros(1024, dtype=np.int64), ht_gen=np.zeros(1024, dtype=np.int64),
            now_t=MIN_T, gc_at=GC_MIN,
        )
        s.update(self._scratch(1024))
        self.s = s

    def _scratch(self, cap: int) -> dict[str, np.ndarray]:
        """Per-event scratch for candidate pairs (see :func:`nfa_cep.cep_run`)."""
        return {"cand_node": np.empty(cap, dtype=np.int64),
                "cand_k": np.empty(cap, dtype=np.int64),
                "cand_ok": np.empty(cap, dtype=np.bool_),
                "alive": np.empty(cap, dtype=np.bool_),
                "sel": np.empty(cap, dtype=np.int64),
                "si": np.empty(self.cp.depth_i * cap, dtype=np.int64),
                "sf": np.empty(self.cp.depth_f * cap, dtype=np.float64)}

    @property
    def state_size(self) -> int:
        return int(self.s["cnt"][0] + self.s["cnt"][1])

    @property
    def live_runs(self) -> int:
        return int(self.s["f_len"][: self.s["n_parts"]].sum())

    def process(self, g0: int, pid: np.ndarray, t: np.ndarray, vmask: np.ndarray,
                startable: np.ndarray, buf: np.ndarray, base: int,
                enumerate_cap: int | None) -> list[MatchSet]:
        cp, s = self.cp, self.s
        n = len(t)
        parts: list[MatchSet] = []
        i = 0
        while i < n:
            i = int(nfa_cep.cep_run(
                i, n, g0, pid, t, vmask, startable, cp.strategy, cp.window, cp.pos_var,
                cp.start, cp.fol_ptr, cp.fol_to, cp.fol_neg, cp.pos_final, cp.pos_has_next,
                cp.pos_negmask, cp.neg_var, cp.prog_lo, cp.prog_hi, self.prog_op, cp.p_ia, cp.p_ib,
                cp.p_fc, cp.p_ic, cp.ci_kind, cp.ci_var, cp.cf_kind, cp.cf_var, cp.cf_col,
                cp.init_f,
                buf.T, base, s["n_ev"], s["n_pos"], s["n_t"], s["n_lstart"], s["n_neg"],
                s["n_edge"], s["n_isstart"], s["ctx_i"], s["ctx_f"], s["e_src"], s["e_next"],
                s["fp"], s["f_off"], s["f_len"], s["f_cap"], s["out_node"], s["cnt"],
                self.maxdeg, s["ht"], s["ht_gen"], self.ci0, s["si"], s["sf"],
                s["cand_node"], s["cand_k"], s["cand_ok"], s["alive"], s["sel"]))
            if i < n:
                p = int(pid[i])
                if i > 0:
                    s["now_t"] = max(s["now_t"], int(t[i - 1]))
                if self._wants_collect(p):
                    parts.extend(self._drain(enumerate_cap))
                    self.collect()
                self._make_room(p)
        if n:
            s["now_t"] = max(s["now_t"], int(t[-1]))
        parts.extend(self._drain(enumerate_cap))
        if s["cnt"][0] > s["gc_at"]:
            self.collect()
        return parts

    def _wants_collect(self, p: int) -> bool:
        """Collect (instead of growing) once the graph passed the threshold ``gc_at``."""
        s = self.s
        need = int(s["f_len"][p]) * self.maxdeg + len(self.cp.start)
        cnt = s["cnt"]
        full = cnt[0] + need > s["n_ev"].shape[0] or cnt[1] + need > s["e_src"].shape[0]
        return bool(full and cnt[0] >= s["gc_at"])

    def _make_room(self, p: int) -> None:
        s = self.s
        flen = int(s["f_len"][p])
        need = flen * self.maxdeg + len(self.cp.start)
        cnt = s["cnt"]
        if cnt[0] + need > s["n_ev"].shape[0]:
            cap = max(2 * s["n_ev"].shape[0], int(cnt[0] + need) + 16)
            self.grow_check(cap, "partial-match nodes")
            self._grow_keys((*self.node_keys, "ctx_i", "ctx_f"), cap)
        if cnt[1] + need > s["e_src"].shape[0]:
            cap = max(2 * s["e_src"].shape[0], int(cnt[1] + need) + 16)
            self.grow_check(cap, "partial-match edges")
            self._grow_keys(("e_src", "e_next"), cap)
        if cnt[2] + 2 * (flen + need) + 8 > s["fp"].shape[0]:
            self._compact_pool()
            if cnt[2] + 2 * (flen + need) + 8 > s["fp"].shape[0]:
                cap = max(2 * s["fp"].shape[0], int(cnt[2] + 2 * (flen + need)) + 64)
                s["fp"] = _grow(s["fp"], cap)
        if cnt[3] + need > s["out_node"].shape[0]:
            s["out_node"] = _grow(s["out_node"], max(2 * s["out_node"].shape[0],
                                                     int(cnt[3] + need) + 16))
        if need > s["cand_node"].shape[0] or flen > s["alive"].shape[0]:
            s.update(self._scratch(max(2 * s["cand_node"].shape[0], need + flen + 16)))
        self._ht(need)

    def _compact_pool(self) -> None:
        s = self.s
        np_ = s["n_parts"]
        off, ln = s["f_off"][:np_], s["f_len"][:np_]
        new = np.empty(max(16, int(2 * ln.sum()) + 16), dtype=np.int64)
        pe = 0
        for p in range(np_):
            L = int(ln[p])
            new[pe: pe + L] = s["fp"][off[p]: off[p] + L]
            s["f_off"][p] = pe
            s["f_cap"][p] = L
            pe += L
        if new.shape[0] < s["fp"].shape[0]:
            new = _grow(new, s["fp"].shape[0])
        s["fp"] = new
        s["cnt"][2] = pe

    def _drain(self, enumerate_cap: int | None) -> list[MatchSet]:
        s, cp = self.s, self.cp
        nf = int(s["cnt"][3])
        if nf == 0:
            return []
        finals = s["out_node"][:nf].copy()
        s["cnt"][3] = 0
        cap_ev, cap_m = 1024, 256
        n_nodes = int(s["cnt"][0])
        st_node = np.empty(max(16, n_nodes + 1), dtype=np.int64)
        st_edge = np.empty_like(st_node)
        while True:
            out_ev = np.empty(cap_ev, dtype=np.int64)
            out_pos = np.empty(cap_ev, dtype=np.int64)
            out_off = np.empty(cap_m + 1, dtype=np.int64)
            m, total, status = nfa_cep.cep_enumerate(
                finals, nf, cp.window, s["n_ev"], s["n_pos"], s["n_t"], s["n_lstart"],
                s["n_edge"], s["n_isstart"], s["e_src"], s["e_next"], out_ev, out_pos, out_off,
                st_node, st_edge, -1 if enumerate_cap is None else int(enumerate_cap))
            if status == 0:
                break
            if status == 2:  # pragma: no cover - the stack holds every node
                raise OperatorError("pattern: match enumeration stack overflow")
            if enumerate_cap is not None and m > enumerate_cap:
                self.grow_check(int(m), "matches completed by one batch")
            cap_ev = max(2 * cap_ev, int(total) + 16)
            cap_m = max(2 * cap_m, int(m) + 16)
        ev = out_ev[:total]
        var = cp.pos_var[out_pos[:total]]
        off = out_off[: m + 1].copy()
        ms = MatchSet(ev.copy(), var.copy(), off, np.zeros(m, dtype=np.int64))
        return [ms]

    def collect(self) -> None:
        """Garbage-collect the run graph (see :func:`nfa_cep.cep_collect`)."""
        s, cp = self.s, self.cp
        n_nodes = int(s["cnt"][0])
        np_ = int(s["n_parts"])
        new_src = np.empty_like(s["e_src"])
        new_next = np.empty_like(s["e_next"])
        total_f = int(s["f_len"][:np_].sum())
        new_fp = np.empty(max(s["fp"].shape[0], 2 * total_f + 16 * np_ + 16), dtype=np.int64)
        new_off = np.zeros_like(s["f_off"])
        new_cap = np.zeros_like(s["f_cap"])
        remap = np.empty(max(1, n_nodes), dtype=np.int64)
        stack = np.empty(max(1, n_nodes), dtype=np.int64)
        k, ne, pe, min_ev = nfa_cep.cep_collect(
            s["now_t"], cp.window, n_nodes, int(s["cnt"][1]), s["n_ev"], s["n_pos"], s["n_t"],
            s["n_lstart"], s["n_neg"], s["n_edge"], s["n_isstart"], s["ctx_i"], s["ctx_f"],
            s["e_src"], s["e_next"], s["fp"], s["f_off"], s["f_len"], s["f_cap"], np_,
            new_src, new_next, new_fp, new_off, new_cap, remap, stack)
        s["e_src"], s["e_next"], s["fp"] = new_src, new_next, new_fp
        s["f_off"][:np_] = new_off[:np_]
        s["f_cap"][:np_] = new_cap[:np_]
        s["cnt"][0], s["cnt"][1], s["cnt"][2] = k, ne, pe
        s["min_ev"] = int(min_ev)
        s["gc_at"] = max(GC_MIN, 2 * int(k))

    def finish(self) -> list[MatchSet]:
        return []

    def _check(self) -> None:
        """Invariant checker for stress tests: frontier/edge references in range, ordering."""
        s = self.s
        n = int(s["cnt"][0])
        ne = int(s["cnt"][1])
        for p in range(int(s["n_parts"])):
            off, ln, cap = (int(s["f_off"][p]), int(s["f_len"][p]), int(s["f_cap"][p]))
            assert 0 <= ln <= max(cap, ln)
            fr = s["fp"][off: off + ln]
            assert np.all((fr >= 0) & (fr < n)), "frontier references a freed node"
        e = s["n_edge"][:n]
        assert np.all((e >= -1) & (e < ne))
        src = s["e_src"][:ne]
        assert np.all((src >= 0) & (src < n))
        # predecessors bind earlier events
        for x in range(n):
            k = int(s["n_edge"][x])
            while k >= 0:
                assert s["n_ev"][s["e_src"][k]] < s["n_ev"][x]
                k = int(s["e_next"][k])


class SqlEngine(_Base):
    """Drives the MATCH_RECOGNIZE kernel (see :mod:`~replaydb.operators.pattern.nfa_sql`)."""

    node_keys = ("n_ev", "n_pos", "n_pred", "n_t")
    att_keys = ("a_start_g", "a_start_t", "a_best", "a_done", "a_toff", "a_tlen", "a_tcap",
                "a_next", "a_mno")
    out_keys = ("o_node", "o_start", "o_pid", "o_number", "o_confirm")
    part_fill = {"p_head": -1, "p_tail": -1, "p_next_allowed": 0, "p_matchno": 0, "p_natt": 0,
                 "p_nthr": 0, "p_hmax": 0, "p_seen": 0, "p_cover": -1}

    def __init__(self, cp: CompiledPattern, grow_check: Callable[[int, str], None]) -> None:
        # the kernel writes the assumed match number of a starting attempt into its own copy
        # of the initial float state (see :func:`nfa_sql.sql_run`)
        self.init_f = cp.init_f.copy()
        self.n_start = max(len(cp.start), len(cp.start_first))
        spec = cp.spec
        omit = spec.rows_per_match == RowsPerMatch.ALL and not spec.show_empty
        self.modes = (nfa_sql.REPORT_UNMATCHED if spec.unmatched_rows else 0) | (
            nfa_sql.OMIT_EMPTY if omit else 0) | (
            nfa_sql.EMPTY_AT_FIRST if ACCEPT in cp.start_first else 0) | (
            nfa_sql.EMPTY_AT_OTHER if ACCEPT in cp.start else 0)
        super().__init__(cp, grow_check)

    def reset(self) -> None:
        s: dict = self._nodes(1024)
        s.update({k: np.empty(256, dtype=np.int64) for k in self.att_keys})
        s.update({k: np.empty(64, dtype=np.int64) for k in self.out_keys})
        s.update({k: np.full(16, fill, dtype=np.int64) for k, fill in self.part_fill.items()})
        s.update(tp=np.empty(4096, dtype=np.int64), part_cap=16, n_parts=1,
                 cnt=np.zeros(6, dtype=np.int64), ht=np.zeros(1024, dtype=np.int64),
                 ht_gen=np.zeros(1024, dtype=np.int64), gc_at=GC_MIN)
        self.s = s

    @property
    def state_size(self) -> int:
        return int(self.s["cnt"][0] + self.s["cnt"][1])

    @property
    def live_runs(self) -> int:
        return int(self.s["p_nthr"][: self.s["n_parts"]].sum())

    def _kernel_args_tail(self) -> tuple:
        s = self.s
        return (s["o_node"], s["o_start"], s["o_pid"], s["o_number"], s["o_confirm"], s["cnt"])

    #: :meth:`process` takes interval breaks (see :func:`nfa_sql.sql_run`)
    takes_breaks = True

    def process(self, g0: int, pid: np.ndarray, t: np.ndarray, vmask: np.ndarray,
                startable: np.ndarray, buf: np.ndarray, base: int,
                enumerate_cap: int | None, brk: np.ndarray | None = None) -> list[MatchSet]:
        """Match events ``g0 .. g0 + len(t) - 1``. ``brk`` flags events that start a new replay
        interval: every run ends there as at end of input (match numbers carry on)."""
        cp, s = self.cp, self.s
        n = len(t)
        parts: list[MatchSet] = []
        if brk is None:
            brk = _NO_BREAKS
        i = 0
        while i < n:
            i, st = nfa_sql.sql_run(
                i, n, g0, pid, brk, int(s["n_parts"]), t, vmask, startable, cp.window,
                cp.skip_kind, cp.skip_member, cp.pos_var, cp.start, cp.start_first, s["p_seen"],
                cp.fol_ptr, cp.fol_to,
                cp.prog_lo, cp.prog_hi, self.prog_op, cp.p_ia, cp.p_ib, cp.p_fc, cp.p_ic,
                cp.ci_kind, cp.ci_var, cp.cf_kind, cp.cf_var, cp.cf_col, self.init_f, buf.T, base,
                s["n_ev"], s["n_pos"], s["n_pred"], s["n_t"],
                s["ctx_i"], s["ctx_f"], s["a_start_g"], s["a_start_t"], s["a_best"],
                s["a_done"], s["a_toff"], s["a_tlen"], s["a_tcap"], s["a_next"], self._a_mno(),
                s["tp"], s["p_head"], s["p_tail"], s["p_next_allowed"], s["p_matchno"],
                s["p_natt"], s["p_nthr"], s["p_hmax"], s["p_cover"], self.modes,
                *self._kernel_args_tail(), self.maxdeg,
                s["ht"], s["ht_gen"], self.ci0, self.si, self.sf, cp.matchno_slot)
            i = int(i)
            self._check_status(int(st), g0 + i)
            if i < n:
                p = int(pid[i])
                if self._wants_collect(p):
                    parts.extend(self._drain())
                    self.collect()
                self._make_room(p)
        parts.extend(self._drain())
        if s["cnt"][0] > s["gc_at"] or s["cnt"][1] > s["gc_at"]:
            self.collect()
        return parts

    def _check_status(self, st: int, g: int) -> None:
        if st == nfa_sql.ST_OK or st == nfa_sql.ST_SPACE:
            return
        var = self.cp.skip_name or "?"
        if st == nfa_sql.ST_SKIP_NONE:
            raise OperatorError(
                f"AFTER MATCH SKIP TO {var}: the match resolved at input row {g} bound no row "
                f"to {var} (SQL:2016 raises an exception here)")
        raise OperatorError(
            f"AFTER MATCH SKIP TO {var}: the match resolved at input row {g} would restart at "
            "its own first row (SQL:2016 raises an exception here)")

    def finish(self) -> list[MatchSet]:
        cp, s = self.cp, self.s
        n_att = int(s["p_natt"][: s["n_parts"]].sum())
        if s["cnt"][3] + n_att + 1 > s["o_node"].shape[0]:
            self._grow_keys(self.out_keys, int(s["cnt"][3] + n_att + 16))
        st = nfa_sql.sql_finish(
            int(s["n_parts"]), cp.skip_kind, cp.skip_member, cp.pos_var, cp.fol_ptr, cp.fol_to,
            s["n_ev"], s["n_pos"], s["n_pred"], s["a_start_g"], s["a_best"], s["a_done"],
            s["a_toff"], s["a_tlen"], s["a_next"], self._a_mno(), s["tp"], s["p_head"], s["p_tail"],
            s["p_next_allowed"], s["p_matchno"], s["p_natt"], s["p_nthr"], s["p_cover"],
            self.modes, *self._kernel_args_tail())
        self._check_status(int(st), -1)
        return self._drain()

    def _wants_collect(self, p: int) -> bool:
        """Collect (instead of growing) once nodes, attempts or the thread pool passed
        ``gc_at``."""
        s = self.s
        cnt = s["cnt"]
        nthr = int(s["p_nthr"][p])
        n_hyp = self._hypotheses(p)
        need = nthr * self.maxdeg + self.n_start * n_hyp
        full = cnt[0] + need > s["n_ev"].shape[0] or cnt[1] + n_hyp > s["a_start_g"].shape[0] \
            or cnt[2] + 2 * (need + nthr) + 8 > s["tp"].shape[0]
        return bool(full and max(cnt[0], cnt[1], cnt[2]) >= s["gc_at"])

    def _a_mno(self) -> np.ndarray | None:
        """The attempts' assumed match numbers, None (a kernel without them) when no condition
        reads MATCH_NUMBER()."""
        return self.s["a_mno"] if self.cp.matchno_slot >= 0 else None

    def _hypotheses(self, p: int) -> int:
        """Copies a new attempt of partition ``p`` would start (:func:`nfa_sql.hypotheses`)."""
        s = self.s
        if self.cp.matchno_slot < 0:
            return 1
        return int(nfa_sql.hypotheses(s["p_head"][p], s["p_hmax"][p], s["p_matchno"][p]))

    def _make_room(self, p: int) -> None:
        s = self.s
        cnt = s["cnt"]
        nthr = int(s["p_nthr"][p])
        n_hyp = self._hypotheses(p)
        need = nthr * self.maxdeg + self.n_start * n_hyp
        if cnt[0] + need > s["n_ev"].shape[0]:
            cap = max(2 * s["n_ev"].shape[0], int(cnt[0] + need) + 16)
            self.grow_check(cap, "partial-match nodes")
            self._grow_keys((*self.node_keys, "ctx_i", "ctx_f"), cap)
        if cnt[1] + n_hyp > s["a_start_g"].shape[0]:
            cap = max(2 * s["a_start_g"].shape[0], int(cnt[1]) + n_hyp + 16)
            self.grow_check(cap, "match attempts")
            self._grow_keys(self.att_keys, cap)
        if cnt[2] + 2 * (need + nthr) + 8 > s["tp"].shape[0]:
            s["tp"] = _grow(s["tp"], max(2 * s["tp"].shape[0],
                                         int(cnt[2] + 2 * (need + nthr)) + 64))
        # an interval break ends the attempts of every partition
        natt = int(s["p_natt"][: s["n_parts"]].sum())
        if cnt[3] + natt + 1 > s["o_node"].shape[0]:
            self._grow_keys(self.out_keys, max(2 * s["o_node"].shape[0], int(cnt[3] + natt) + 16))
        self._ht(need)

    def _drain(self) -> list[MatchSet]:
        s, cp = self.s, self.cp
        k = int(s["cnt"][3])
        if k == 0:
            return []
        o_node = s["o_node"][:k]
        total = int(_chain_lengths(o_node, s["n_pred"]).sum())
        out_ev = np.empty(total, dtype=np.int64)
        out_pos = np.empty(total, dtype=np.int64)
        out_off = np.empty(k + 1, dtype=np.int64)
        nfa_sql.sql_paths(o_node, k, s["n_pred"], s["n_ev"], s["n_pos"], out_ev, out_pos, out_off)
        shown = ~cp.pos_excluded[out_pos[:total]] if cp.automaton.excluded \
            else np.zeros(0, dtype=np.bool_)
        ms = MatchSet(out_ev[:total].copy(), cp.pos_var[out_pos[:total]], out_off.copy(),
                      s["o_pid"][:k].copy(), s["o_number"][:k].copy(), shown=shown)
        if cp.every_row:
            ms.start = s["o_start"][:k].copy()
            ms.kind = np.where(o_node == nfa_sql.UNMATCHED_ROW, UNMATCHED,
                               np.where(o_node == nfa_sql.EMPTY_MATCH, EMPTY, MATCHED)
                               ).astype(np.int8)
        s["cnt"][3] = 0
        return [ms]

    def collect(self) -> None:
        s = self.s
        n_nodes, n_att = int(s["cnt"][0]), int(s["cnt"][1])
        np_ = int(s["n_parts"])
        total_thr = int(s["p_nthr"][:np_].sum())
        new_tp = np.empty(max(s["tp"].shape[0], 2 * total_thr + n_att + 16), dtype=np.int64)
        node_map = np.empty(max(1, n_nodes), dtype=np.int64)
        att_map = np.empty(max(1, n_att), dtype=np.int64)
        k, ka, pe, min_ev = nfa_sql.sql_collect(
            n_nodes, n_att, np_, s["n_ev"], s["n_pos"], s["n_pred"], s["n_t"], s["ctx_i"],
            s["ctx_f"], s["a_start_g"], s["a_start_t"], s["a_best"], s["a_done"], s["a_toff"],
            s["a_tlen"], s["a_tcap"], s["a_next"], self._a_mno(), s["tp"], s["p_head"], s["p_tail"],
            new_tp,
            node_map, att_map)
        s["tp"] = new_tp
        s["cnt"][0], s["cnt"][1], s["cnt"][2] = k, ka, pe
        s["gc_at"] = max(GC_MIN, 2 * int(max(k, ka, pe)))

    def _check(self) -> None:
        """Invariant checker: attempt lists well formed, threads reference live nodes."""
        s = self.s
        n = int(s["cnt"][0])
        na = int(s["cnt"][1])
        total = 0
        for p in range(int(s["n_parts"])):
            a = int(s["p_head"][p])
            prev_start = -1
            count = 0
            while a != -1:
                assert 0 <= a < na
                # copies of one attempt (assumed match numbers) share its row
                assert s["a_start_g"][a] > prev_start or (
                    self.cp.matchno_slot >= 0 and s["a_start_g"][a] == prev_start), \
                    "attempts out of row order"
                prev_start = int(s["a_start_g"][a])
                thr = s["tp"][s["a_toff"][a]: s["a_toff"][a] + s["a_tlen"][a]]
                assert np.all((thr >= 0) & (thr < n))
                total += len(thr)
                count += 1
                last = a
                a = int(s["a_next"][a])
            assert count == s["p_natt"][p]
            if count:
                assert s["p_tail"][p] == last
        assert total == int(s["p_nthr"][: s["n_parts"]].sum())


@njit(cache=True)
def _chain_lengths(o_node: np.ndarray, n_pred: np.ndarray) -> np.ndarray:
    """Length of the predecessor chain (path of a match) from every output node: O(total path
    length), compiled (a vectorized pointer chase would cost one pass over all outputs per step of
    the longest path, which dominates short replay intervals with long Kleene paths)."""
    lens = np.zeros(o_node.shape[0], dtype=np.int64)
    for i in range(o_node.shape[0]):
        cur = o_node[i]
        n = 0
        while cur >= 0:
            n += 1
            cur = n_pred[cur]
        lens[i] = n
    return lens


@njit(cache=True)
def sql_select(gstart, gend, next_allowed, skip_kind, offset):
    """Greedy resolution of candidate matches (first rows ``gstart``, last rows ``gend``) in
    row order under AFTER MATCH SKIP; ``offset``: the skip variable's row in the match (SKIP TO
    a variable, fixed-length matches only). Returns (kept, next allowed row, index of a match
    that would restart at its own first row or -1)."""
    keep = np.zeros(gstart.shape[0], dtype=np.bool_)
    for j in range(gstart.shape[0]):
        g = gstart[j]
        if g < next_allowed:
            continue
        keep[j] = True
        if skip_kind == nfa_sql.SKIP_PAST_LAST:
            next_allowed = gend[j] + 1
        elif skip_kind == nfa_sql.SKIP_NEXT_ROW:
            next_allowed = g + 1
        else:
            if offset == 0:
                return keep, next_allowed, j
            next_allowed = g + offset
    return keep, next_allowed, -1


class FixedSeqEngine:
    """Vectorized matcher for the common case of a fixed sequence of variables.

    Used when the pattern is a concatenation ``V1 V2 ... Vk`` of single variables (no
    quantifier, alternation or negation), every condition refers only to the current event (one
    boolean column per variable, PREV included), the stream is not partitioned and the
    semantics is all-runs contiguous or SQL. Then a match starts at ``i`` iff
    ``mask[i, V1] & mask[i+1, V2] & ... & mask[i+k-1, Vk]`` (and ``t[i+k-1] - t[i] <= window``),
    which NumPy evaluates over a whole batch with k shifted ANDs; the last ``k-1`` rows are
    carried to the next batch. SQL semantics then resolves candidates in row order with AFTER
    MATCH SKIP (a short compiled loop over the candidates only). Results, order and match
    numbers are those of the general engines (tests check it).

    Complexity: O(k) vectorized passes per batch; state O(k).
    """

    def __init__(self, cp: CompiledPattern, grow_check: Callable[[int, str], None]) -> None:
        self.cp = cp
        self.k = len(cp.pos_var)
        self.reset()

    @staticmethod
    def eligible(cp: CompiledPattern) -> bool:
        from replaydb.operators.pattern.model import Seq, Var

        pat = cp.spec.pattern
        items = pat.items if isinstance(pat, Seq) else (pat,)
        if not all(isinstance(x, Var) for x in items):
            return False
        if cp.partition_by or len(cp.p_op) or len(cp.ci_kind) or len(cp.cf_kind) \
                or len(cp.neg_var) or cp.every_row:
            return False
        return cp.sql or cp.strategy == nfa_cep.STRAT_CONTIGUOUS

    def reset(self) -> None:
        V = self.cp.n_vars
        self.s: dict = {"cm": np.zeros((0, V), dtype=np.bool_), "ct": np.zeros(0, np.int64),
                        "cg": np.zeros(0, np.int64), "next_allowed": 0, "matchno": 0,
                        "n_parts": 1}

    def ensure_parts(self, n_parts: int) -> None:
        return None

    @property
    def state_size(self) -> int:
        return int(len(self.s["cg"]))

    @property
    def live_runs(self) -> int:
        return int(len(self.s["cg"]))

    columnar = True  # takes one boolean array per variable instead of a 2-D mask

    def process(self, g0: int, pid: np.ndarray, t: np.ndarray, vmask: list[np.ndarray],
                startable: np.ndarray | None, buf: np.ndarray, base: int,
                enumerate_cap: int | None) -> list[MatchSet]:
        cp, s, k = self.cp, self.s, self.k
        pv = cp.pos_var
        n = len(t)
        m = len(s["cg"])
        w = cp.window
        # starts inside the batch: k shifted ANDs
        span = n - k + 1
        if span > 0:
            ok = vmask[pv[0]][:span].copy()
            for j in range(1, k):
                ok &= vmask[pv[j]][j: span + j]
            if w >= 0:
                ok &= (t[k - 1:] - t[:span]) <= w
            starts = np.flatnonzero(ok).astype(np.int64) + g0
        else:
            starts = np.zeros(0, dtype=np.int64)
        # starts in the carried rows of earlier batches (at most k - 1 of them)
        if m:
            cm, ct = s["cm"], s["ct"]
            extra = []
            for r in range(m):
                good = True
                for j in range(k):
                    row = r + j
                    if row < m:
                        good = bool(cm[row, pv[j]])
                    elif row - m < n:
                        good = bool(vmask[pv[j]][row - m])
                    else:
                        good = False
                    if not good:
                        break
                if good and w >= 0:
                    last = r + k - 1
                    t_last = ct[last] if last < m else t[last - m]
                    good = t_last - ct[r] <= w
                if good:
                    extra.append(int(s["cg"][r]))
            if extra:
                starts = np.concatenate([np.array(extra, dtype=np.int64), starts])
        parts: list[MatchSet] = []
        if cp.sql and len(starts):
            offset = 0
            if cp.skip_kind in (nfa_sql.SKIP_TO_FIRST, nfa_sql.SKIP_TO_LAST):
                occ = np.flatnonzero(cp.skip_member[pv])
                offset = int(occ[0] if cp.skip_kind == nfa_sql.SKIP_TO_FIRST else occ[-1])
            keep, na, bad = sql_select(starts, starts + (k - 1), s["next_allowed"],
                                       cp.skip_kind, offset)
            if bad >= 0:
                var = cp.skip_name
                raise OperatorError(
                    f"AFTER MATCH SKIP TO {var}: the match starting at input row "
                    f"{int(starts[bad])} would restart at its own first row (SQL:2016 raises "
                    "an exception here)")
            starts = starts[keep]
            s["next_allowed"] = int(na)
        nm = len(starts)
        if nm:
            ev = (starts[:, None] + np.arange(k, dtype=np.int64)[None, :]).reshape(-1)
            off = np.arange(0, nm * k + 1, k, dtype=np.int64)
            ms = MatchSet(ev, np.tile(pv, nm), off, np.zeros(nm, dtype=np.int64))
            if cp.sql:
                ms.number = np.arange(s["matchno"] + 1, s["matchno"] + nm + 1, dtype=np.int64)
                s["matchno"] += nm
            parts.append(ms)
        # carry the last k - 1 rows
        keep_rows = min(k - 1, m + n)
        if keep_rows:
            from_batch = min(keep_rows, n)
            from_carry = keep_rows - from_batch
            rows = [s["cm"][m - from_carry:]] if from_carry else []
            rows.append(np.stack([vm[n - from_batch:] for vm in vmask], axis=1)
                        if vmask else np.zeros((from_batch, 0), dtype=np.bool_))
            s["cm"] = np.concatenate(rows) if len(rows) > 1 else rows[0]
            s["ct"] = np.concatenate([s["ct"][m - from_carry:], t[n - from_batch:]])
            s["cg"] = np.arange(g0 + n - keep_rows, g0 + n, dtype=np.int64)
        else:
            s["cm"] = s["cm"][:0]
            s["ct"] = s["ct"][:0]
            s["cg"] = s["cg"][:0]
        return parts

    def finish(self) -> list[MatchSet]:
        return []

    def collect(self) -> None:
        return None

    def min_referenced(self) -> int | None:
        cg = self.s["cg"]
        return int(cg[0]) if len(cg) else None

    def _check(self) -> None:
        s = self.s
        assert len(s["cg"]) == len(s["ct"]) == len(s["cm"]) < max(self.k, 1)
        assert np.all(np.diff(s["cg"]) == 1)
