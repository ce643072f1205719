"""The arrays of one GRETA graph's state and their upkeep.

:class:`GraphStore` owns the value pools of the index universes (point rows, Fenwick rows), the
records of sources with a record list, the case-2 queue, the final aggregates per group and the
negation buckets of the graph's children, all as NumPy arrays grown by amortized doubling. It
knows their layout (K window slots, L limbs per exact value), widens exact values, compacts the
record lists and the queue to their live rows and clears a closed window's slot.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from replaydb.operators.greta import closing as cl
from replaydb.operators.greta import kernel as kn
from replaydb.operators.greta.events import Keyspace
from replaydb.operators.greta.plan import CompiledPlan, GraphPlan

I64_MIN = np.iinfo(np.int64).min
I64_MAX = np.iinfo(np.int64).max
EMPTY_I = np.zeros(0, np.int64)


def _relink(same: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linked lists over ``m`` rows sorted by group, ``same[i]`` telling whether rows ``i`` and
    ``i + 1`` share a group: each row's successor in its group (-1 at the group's last row),
    and the first and last row of every group. O(m)."""
    nxt = np.full(m, -1, np.int64)
    if m == 0:
        e = np.zeros(0, np.int64)
        return nxt, e, e
    nxt[:-1] = np.where(same, np.arange(1, m), -1)
    starts = np.flatnonzero(np.concatenate([[True], ~same]))
    ends = np.flatnonzero(np.concatenate([~same, [True]]))
    return nxt, starts, ends


def _grow(a: np.ndarray, n: int, fill: Any = 0) -> np.ndarray:
    """``a`` with at least ``n`` rows (amortized doubling), new rows set to ``fill``."""
    if a.shape[0] >= n:
        return a
    cap = max(n, 2 * a.shape[0], 16)
    out = np.empty((cap, *a.shape[1:]), dtype=a.dtype)
    out[: a.shape[0]] = a
    out[a.shape[0]:] = fill
    return out


def _grow_cols(a: np.ndarray, n: int, fill: Any) -> np.ndarray:
    if a.shape[1] >= n:
        return a
    cap = max(n, 2 * a.shape[1], 4)
    out = np.full((a.shape[0], cap, *a.shape[2:]), fill, dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


class NegState:
    """Per negation: buckets (values of the attributes shared with the parent) and their state."""

    def __init__(self, K: int) -> None:
        self.buckets = Keyspace()
        self.K = K


class GraphStore:
    """The state arrays of one graph (see the module docstring); processing is added by
    :class:`~replaydb.operators.greta.runtime.GraphState`."""

    def __init__(self, plan: CompiledPlan, g: GraphPlan) -> None:
        self.cp = plan
        self.g = g
        self.is_main = g.gid == 0
        self.K = plan.K if self.is_main else 1
        self.L = 2 if self.is_main else 1
        self.Cb, self.Cf, self.Cmi, self.Cmf = len(g.big), len(g.fsum), len(g.mmi), len(g.mmf)
        # without min/max channels a Fenwick tree's point values can be recovered from the tree,
        # so the tree is kept in the point rows themselves (half the memory)
        self.fw_in_pt = self.Cmi == 0 and self.Cmf == 0
        self.nI = len(g.indexes)
        self.nchild = len(g.children)
        self.parts = Keyspace()
        self.p_gid = EMPTY_I.copy()
        self.p_bucket = np.zeros((0, max(self.nchild, 1)), np.int64)
        self.p_cb = EMPTY_I.copy()  # bucket of each partition in this graph's own negation
        # index universes
        self.u_pid = [EMPTY_I.copy() for _ in range(self.nI)]
        self.u_key: list[np.ndarray] = [np.zeros(0, np.int64) for _ in range(self.nI)]
        self.u_gk: list[np.ndarray | None] = [None] * self.nI  # distinct keys (ranks)
        self.u_uc: list[np.ndarray] = [EMPTY_I] * self.nI  # sorted (partition, key rank)
        self.ix_age = [0] * self.nI  # sub-chunks since the index was last rebuilt
        self.u_dense = [False] * self.nI  # universe is dense (see _universe)
        self.ubase = np.zeros(self.nI + 1, np.int64)
        self.ranges_P = -1  # partitions whose off/sz were last set from the universes
        Wi, Wf = self.widths()
        self.ptI = np.zeros((0, Wi), np.int64)
        self.ptF = np.zeros((0, Wf), np.float64)
        self.fwI = np.zeros((0, Wi), np.int64)
        self.fwF = np.zeros((0, Wf), np.float64)
        self.off = np.zeros((self.nI, 0), np.int64)
        self.sz = np.zeros((self.nI, 0), np.int64)
        self.appM = np.full((self.nI, 0), I64_MIN, np.int64)
        # records
        G = len(g.gcols)
        self.rI = np.zeros((0, Wi), np.int64)
        self.rF = np.zeros((0, Wf), np.float64)
        self.r_t = EMPTY_I.copy()
        self.r_rank = EMPTY_I.copy()
        self.r_alive = np.zeros(0, np.bool_)
        self.r_nxt = EMPTY_I.copy()
        self.r_pid = EMPTY_I.copy()
        self.r_ix = EMPTY_I.copy()
        self.r_occ = EMPTY_I.copy()
        self.r_g = np.zeros((0, G), np.float64)
        self.r_n = 0
        self.r_head = np.full((self.nI, 0), -1, np.int64)
        self.r_tail = np.full((self.nI, 0), -1, np.int64)
        # case-2 queue
        self.qI = np.zeros((0, Wi), np.int64)
        self.qF = np.zeros((0, Wf), np.float64)
        self.q_t = EMPTY_I.copy()
        self.q_seq = EMPTY_I.copy()
        self.q_pid = EMPTY_I.copy()
        self.q_alive = np.zeros(0, np.bool_)
        self.q_nxt = EMPTY_I.copy()
        self.q_n = 0
        self.qh = EMPTY_I.copy()
        self.qt = EMPTY_I.copy()
        self.qtotI = np.zeros((0, Wi), np.int64)
        self.qtotF = np.zeros((0, Wf), np.float64)
        # final aggregates per group (main graph)
        self.groups = Keyspace()
        self.finI = np.zeros((0, Wi), np.int64)
        self.finF = np.zeros((0, Wf), np.float64)
        self.fin_seq = np.zeros((0, self.K), np.int64)
        # negation state of the children of this graph (index c = position in g.children)
        self.negs = [NegState(self.K) for _ in range(self.nchild)]
        self.bM = np.full((max(self.nchild, 1), 0), I64_MIN, np.int64)
        self.bL = np.full((max(self.nchild, 1), 0), I64_MIN, np.int64)
        self.blk = np.zeros((max(self.nchild, 1), 0, self.K), np.uint8)
        # completions produced by the last run (negative graphs)
        self.co_t = EMPTY_I
        self.co_ls = EMPTY_I
        self.co_pid = EMPTY_I
        self.Z = 1.0
        self._static: dict[str, Any] | None = None
        self._slots: dict[tuple[int, int], tuple[Any, ...]] = {}
        self.slot_w = np.full(self.K, cl.CLEAN, np.int64)
        self._users_cache: tuple[list[np.ndarray], list[np.ndarray]] | None = None
        self._gc_base: Any = None  # the kernel configuration of the current limb count

    # ------------------------------------------------------------------ layout
    def widths(self) -> tuple[int, int]:
        Wi = self.Cb * self.K * self.L + self.Cmi * self.K
        Wf = self.Cf * self.K + self.Cmf * self.K
        return max(Wi, 1), max(Wf, 1)

    def fresh_rows(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` empty value rows (zero sums, min/max sentinels)."""
        Wi, Wf = self.widths()
        vi = np.zeros((n, Wi), np.int64)
        vf = np.zeros((n, Wf), np.float64)
        nb_ = self.Cb * self.K * self.L
        for c, (_, _, is_max) in enumerate(self.g.mmi):
            vi[:, nb_ + c * self.K: nb_ + (c + 1) * self.K] = I64_MIN if is_max else I64_MAX
        for c, (_, _, is_max) in enumerate(self.g.mmf):
            lo = self.Cf * self.K + c * self.K
            vf[:, lo: lo + self.K] = -np.inf if is_max else np.inf
        return vi, vf

    def static(self) -> dict[str, Any]:
        """Config arrays of the kernel that do not change between calls."""
        if self._static is not None:
            return self._static
        g = self.g
        in_ptr = np.zeros(len(g.states) + 1, np.int64)
        in_list: list[int] = []
        out_ptr = np.zeros(len(g.states) + 1, np.int64)
        out_list: list[int] = []
        for k in range(len(g.states)):
            in_list.extend(g.in_tr[k])
            in_ptr[k + 1] = len(in_list)
            out_list.extend(g.out_ix[k])
            out_ptr[k + 1] = len(out_list)
        codes: list[int] = []
        args: list[float] = []
        bc_start = np.zeros(len(g.transitions), np.int64)
        bc_len = np.zeros(len(g.transitions), np.int64)
        for t in g.transitions:
            if t.program is not None:
                c, a = t.program.arrays()
                bc_start[t.id] = len(codes)
                bc_len[t.id] = len(c)
                codes.extend(c.tolist())
                args.extend(a.tolist())
        child_local = {nid: c for c, nid in enumerate(g.children)}
        kinds = {"count": kn.CH_COUNT, "counte": kn.CH_COUNTE, "sumi": kn.CH_SUMI}
        self._static = dict(
            cb_kind=np.array([kinds[k] for k, _, _ in g.big], np.int64),
            cb_state=np.array([s for _, s, _ in g.big], np.int64),
            cb_attr=np.array([a for _, _, a in g.big], np.int64),
            cf_state=np.array([s for s, _ in g.fsum], np.int64),
            cf_attr=np.array([a for _, a in g.fsum], np.int64),
            cmi_state=np.array([s for s, _, _ in g.mmi], np.int64),
            cmi_attr=np.array([a for _, a, _ in g.mmi], np.int64),
            cmi_max=np.array([m for _, _, m in g.mmi], np.bool_),
            cmf_state=np.array([s for s, _, _ in g.mmf], np.int64),
            cmf_attr=np.array([a for _, a, _ in g.mmf], np.int64),
            cmf_max=np.array([m for _, _, m in g.mmf], np.bool_),
            in_ptr=in_ptr, in_list=np.array(in_list, np.int64),
            out_ptr=out_ptr, out_list=np.array(out_list, np.int64),
            tr_ix=np.array([t.index for t in g.transitions], np.int64),
            tr_neg=np.array([child_local[t.negation] if t.negation is not None else -1
                             for t in g.transitions], np.int64),
            tr_bc_start=bc_start, tr_bc_len=bc_len,
            ix_kind=np.array([ix.kind for ix in g.indexes], np.int64),
            ix_rec=np.array([ix.has_records for ix in g.indexes], np.bool_),
            bc_code=np.array(codes or [0], np.int64), bc_arg=np.array(args or [0.0], np.float64),
            case2=child_local[g.case2] if g.case2 is not None else -1,
            case3=child_local[g.case3] if g.case3 is not None else -1,
            child_case=np.array([self.cp.negations[nid].negation.case for nid in g.children]
                                or [0], np.int64),
        )
        return self._static

    # ------------------------------------------------------------------ widening
    def _widen_I(self, a: np.ndarray, L_new: int) -> np.ndarray:
        return kn.widen_rows(np.ascontiguousarray(a), self.Cb * self.K, self.L, L_new)

    def widen(self, L_new: int) -> None:
        """Grow every exact value to ``L_new`` limbs (sign-extended; values unchanged)."""
        if L_new <= self.L or self.Cb == 0:
            return
        for name in ("ptI", "fwI", "rI", "qI", "qtotI", "finI"):
            setattr(self, name, self._widen_I(getattr(self, name), L_new))
        self.L = L_new

    # ------------------------------------------------------------------ live rows, capacities
    def _alive_rows(self, vi: np.ndarray, W0: int) -> np.ndarray:
        if vi.shape[0] == 0:
            return np.zeros(0, bool)
        if self.is_main:
            return cl.nonzero_rows(vi, self.K * self.L)
        return vi[:, 0] >= W0

    def ensure_parts(self, P: int) -> None:
        self.p_gid = _grow(self.p_gid, P, 0)
        self.p_bucket = _grow(self.p_bucket, P, 0)
        self.p_cb = _grow(self.p_cb, P, 0)
        self.off = _grow_cols(self.off, P, 0)
        self.sz = _grow_cols(self.sz, P, 0)
        self.appM = _grow_cols(self.appM, P, I64_MIN)
        self.r_head = _grow_cols(self.r_head, P, -1)
        self.r_tail = _grow_cols(self.r_tail, P, -1)
        self.qh = _grow(self.qh, P, -1)
        self.qt = _grow(self.qt, P, -1)
        n0 = self.qtotI.shape[0]
        if self.g.case2 is not None and n0 < len(self.qh):
            cap = len(self.qh)
            vi, vf = self.fresh_rows(cap - n0)
            self.qtotI = np.concatenate([self.qtotI, vi])
            self.qtotF = np.concatenate([self.qtotF, vf])

    def ensure_buckets(self) -> None:
        nb_ = max((len(n.buckets) for n in self.negs), default=0)
        if nb_ > self.bM.shape[1]:
            self.bM = _grow_cols(self.bM, nb_, I64_MIN)
            self.bL = _grow_cols(self.bL, nb_, I64_MIN)
            self.blk = _grow_cols(self.blk, nb_, 0)

    # ------------------------------------------------------------------ records and queue
    def _compact_records(self, W0: int) -> None:
        n = self.r_n
        if n == 0:
            return
        live = self.r_alive[:n] & self._alive_rows(self.rI[:n], W0)
        if self.r_ix.size:
            order = np.lexsort((np.arange(n), self.r_pid[:n], self.r_ix[:n]))
            order = order[live[order]]
        else:  # pragma: no cover
            order = np.zeros(0, np.int64)
        m = len(order)
        for name in ("rI", "rF", "r_t", "r_rank", "r_pid", "r_ix", "r_occ", "r_g"):
            a = getattr(self, name)
            a[:m] = a[order]
        self.r_alive[:m] = True
        self.r_alive[m:n] = False
        self.r_n = m
        self.r_head[:] = -1
        self.r_tail[:] = -1
        ix, pp = self.r_ix[:m], self.r_pid[:m]
        nxt, starts, ends = _relink((ix[1:] == ix[:-1]) & (pp[1:] == pp[:-1]), m)
        self.r_head[ix[starts], pp[starts]] = starts
        self.r_tail[ix[ends], pp[ends]] = ends
        self.r_nxt[:m] = nxt

    def _compact_queue(self) -> None:
        n = self.q_n
        if n == 0:
            return
        live = self.q_alive[:n] & np.any(self.qI[:n, : self.K * self.L] != 0, axis=1)
        order = np.lexsort((np.arange(n), self.q_pid[:n]))
        order = order[live[order]]
        m = len(order)
        for name in ("qI", "qF", "q_t", "q_seq", "q_pid"):
            a = getattr(self, name)
            a[:m] = a[order]
        self.q_alive[:m] = True
        self.q_alive[m:n] = False
        self.q_n = m
        self.qh[:] = -1
        self.qt[:] = -1
        pp = self.q_pid[:m]
        nxt, starts, ends = _relink(pp[1:] == pp[:-1], m)
        self.qh[pp[starts]] = starts
        self.qt[pp[ends]] = ends
        self.q_nxt[:m] = nxt

    def _ensure_records(self, n: int) -> None:
        if self.rI.shape[0] >= n:
            return
        cap = max(n, 2 * self.rI.shape[0], 64)
        vi, vf = self.fresh_rows(cap - self.rI.shape[0])
        self.rI = np.concatenate([self.rI, vi])
        self.rF = np.concatenate([self.rF, vf])
        for name, fill in (("r_t", 0), ("r_rank", -1), ("r_nxt", -1), ("r_pid", 0), ("r_ix", 0),
                           ("r_occ", 0), ("r_alive", False), ("r_g", 0.0)):
            setattr(self, name, _grow(getattr(self, name), cap, fill))

    def _ensure_queue(self, n: int) -> None:
        if self.qI.shape[0] >= n:
            return
        cap = max(n, 2 * self.qI.shape[0], 64)
        vi, vf = self.fresh_rows(cap - self.qI.shape[0])
        self.qI = np.concatenate([self.qI, vi])
        self.qF = np.concatenate([self.qF, vf])
        for name, fill in (("q_t", 0), ("q_seq", 0), ("q_pid", 0), ("q_alive", False),
                           ("q_nxt", -1)):
            setattr(self, name, _grow(getattr(self, name), cap, fill))

    # ------------------------------------------------------------------ windows
    def slot_columns(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Columns of slot k: (big int cols, mmi cols, fsum cols, mmf cols). Cached per (k, L);
        the arrays are shared, not to be written. O(1) after the first call."""
        return self._slot(k)[0]

    def slot_int_columns(self, k: int) -> np.ndarray:
        """The big and mmi columns of slot k, in that order (cached as :meth:`slot_columns`)."""
        return self._slot(k)[1]

    def slot_float_columns(self, k: int) -> np.ndarray:
        """The fsum and mmf columns of slot k, in that order (cached as :meth:`slot_columns`)."""
        return self._slot(k)[2]

    def _slot(self, k: int) -> tuple[Any, ...]:
        """(columns of slot k, int columns, float columns, mmi fill, float fill), computed once
        per (k, L)."""
        key = (k, self.L)
        hit = self._slots.get(key)
        if hit is None:
            K, L = self.K, self.L
            big = np.concatenate([np.arange((c * K + k) * L, (c * K + k + 1) * L)
                                  for c in range(self.Cb)]) if self.Cb else EMPTY_I
            nb_ = self.Cb * K * L
            mmi = np.array([nb_ + c * K + k for c in range(self.Cmi)], np.int64)
            fs = np.array([c * K + k for c in range(self.Cf)], np.int64)
            mmf = np.array([self.Cf * K + c * K + k for c in range(self.Cmf)], np.int64)
            mmi_fill = np.array([I64_MIN if m else I64_MAX for _, _, m in self.g.mmi], np.int64)
            f_fill = np.concatenate([np.zeros(len(fs)),
                                     np.array([-np.inf if m else np.inf for _, _, m in self.g.mmf],
                                              np.float64)])
            hit = ((big, mmi, fs, mmf), np.concatenate([big, mmi]), np.concatenate([fs, mmf]),
                   mmi_fill, f_fill)
            self._slots[key] = hit
        return hit

    def clear_slot(self, k: int) -> None:
        """Reset slot k (a closed window) in every value table: zero sums, min/max sentinels,
        no last sequence number, no negation block. O(rows in use)."""
        (big, mmi, _, _), _, f_cols, mmi_fill, f_fill = self._slot(k)
        for vi, vf, n in ((self.ptI, self.ptF, self.ptI.shape[0]),
                          (self.fwI, self.fwF, self.fwI.shape[0]),
                          (self.rI, self.rF, self.r_n), (self.qI, self.qF, self.q_n),
                          (self.qtotI, self.qtotF, len(self.parts)),
                          (self.finI, self.finF, len(self.groups))):
            if n:
                cl.clear_columns(vi, vf, n, big, mmi, mmi_fill, f_cols, f_fill)
        if self.fin_seq.shape[0]:
            self.fin_seq[:, k] = -1
        if self.blk.shape[1]:
            self.blk[:, :, k] = 0
        self.slot_w[k] = cl.CLEAN

    def dirty_windows(self, wid: int) -> list[int]:
        """The windows with id ``<= wid`` that a kernel run wrote and no close cleared yet,
        oldest first (:mod:`.closing`). O(K)."""
        return sorted(int(w) for w in self.slot_w if w != cl.CLEAN and w <= wid)

    def slot_tables(self) -> tuple[np.ndarray, ...]:
        """Per slot (rows), the columns :mod:`.closing` reads and resets: ``(icols, fcols,
        bigc, mmic, mmi_fill, f_fill)``. Cached per limb count. O(1) after the first call."""
        key = ("tables", self.L)
        hit = self._slots.get(key)
        if hit is None:
            per = [self._slot(k) for k in range(self.K)]
            hit = (np.stack([p[1] for p in per]), np.stack([p[2] for p in per]),
                   np.stack([p[0][0] for p in per]), np.stack([p[0][1] for p in per]),
                   per[0][3], per[0][4])
            self._slots[key] = hit
        return hit

    # ------------------------------------------------------------------ size
    def state_entries(self) -> int:
        live_rec = int(self.r_alive[: self.r_n].sum()) if self.r_n else 0
        live_q = int(self.q_alive[: self.q_n].sum()) if self.q_n else 0
        return int(self.ubase[-1]) + live_rec + live_q + len(self.parts)

    def state_bytes(self) -> int:
        total = 0
        for name in ("ptI", "ptF", "fwI", "fwF", "rI", "rF", "r_g", "qI", "qF", "qtotI",
                     "qtotF", "finI", "finF", "off", "sz", "appM", "r_head", "r_tail"):
            total += getattr(self, name).nbytes
        return total
