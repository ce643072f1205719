"""The Python side of the GRETA runtime: partitions, index universes, records, windows.

The stream is cut into *sub-chunks*: runs of events between two window closes. Consecutive
sub-chunks up to a few thousand events are prepared together (:meth:`Runtime.process_spans`):
each graph (negative graphs first, so that their completions are known) is prepared with
vectorized NumPy/Arrow work, then handed to :func:`~replaydb.operators.greta.kernel.run_graph`,
which closes the windows due between the sub-chunks itself (:mod:`.closing`):

1. occurrences: events whose type is a state of the graph and that satisfy its local predicates
   (the main graph drops events that lie in no window);
2. partitions: the values of the graph's partition attributes are dictionary-encoded and mapped to
   dense partition ids (paper Sec. 6: grouping and equivalence predicates partition the stream);
3. index universes: an index holds, per partition, the sorted distinct keys of its vertices
   (the edge predicate's attribute) with one aggregate row per key; a Fenwick index keeps the
   prefix tree over these rows. When the new vertices bring keys the universe lacks (or after
   K+1 preparations, when every older entry may have expired), the index is rebuilt from its
   live rows: dead rows dropped, rows moved to their new ranks, trees rebuilt; otherwise it is
   used as is. Every new vertex then has a rank and every probe a prefix bound, computed with
   ``searchsorted`` once for the whole preparation (through a lookup table over small integer key
   ranges, see :class:`~replaydb.operators.greta.universe.Positions`);
4. live state is compacted: vertices whose windows all closed (all slots zero) and, in negative
   graphs, vertices whose trends all start before the oldest open window are dropped; partitions
   without state are forgotten when they dominate.

Relation to the paper's structures (Sec. 7): instead of one vertex tree per *pane* and type, an
index per (partition, source state, edge-predicate key) holds one aggregate per open window in
K slots (window id mod K); closing a window clears its slot everywhere, which purges the expired
pane's contribution at once, and the rebuild drops vertices none of whose windows is open. A
query is one prefix lookup instead of one range search per pane.

Cost per preparation: O(its events) plus O(live state) for the indexes that are rebuilt, plus
the kernel's O(log n) per event and index and O(K + groups + state rows) per window closed
that holds values (a window no run wrote costs nothing).

The work is layered over these modules: :mod:`~replaydb.operators.greta.events` (event columns,
key codes), :mod:`~replaydb.operators.greta.state` (the state arrays and their upkeep),
:mod:`~replaydb.operators.greta.closing` (window closes, compiled),
:mod:`~replaydb.operators.greta.universe` (index universes, step 3) and this one (steps 1, 2 and
4, the kernel call, and the :class:`Runtime` over all graphs).
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np

from replaydb.errors import DataError
from replaydb.operators.greta import closing as cl
from replaydb.operators.greta import kernel as kn
from replaydb.operators.greta.events import EventChunk, as_bool, encode_keys, null_mask
from replaydb.operators.greta.plan import SCAN, CompiledPlan
from replaydb.operators.greta.state import EMPTY_I
from replaydb.operators.greta.universe import IndexUniverses

# argument bundles of kernel.run_graph
GC = namedtuple("GC", [
    "K", "L", "Cb", "Cf", "Cmi", "Cmf", "Wi", "Wf", "is_pos", "start", "end", "d", "s",
    "cb_kind", "cb_state", "cb_attr", "cf_state", "cf_attr", "cmi_state", "cmi_attr", "cmi_max",
    "cmf_state", "cmf_attr", "cmf_max", "in_ptr", "in_list", "out_ptr", "out_list", "tr_ix",
    "tr_neg", "tr_bc_start", "tr_bc_len", "ix_kind", "ix_rec", "bc_code", "bc_arg", "case2",
    "case3", "child_case", "slack", "max_group", "fw_in_pt"])
OCC = namedtuple("OCC", ["t", "seq", "x", "pid", "wa", "wb", "ai", "af", "rank", "bound", "g"])
IXT = namedtuple("IXT", ["off", "sz", "ptI", "ptF", "fwI", "fwF", "appM", "drow", "dmark",
                         "dcnt"])
RCT = namedtuple("RCT", ["I", "F", "t", "rank", "alive", "nxt", "pid", "ix", "occ", "g", "head",
                         "tail"])
NGT = namedtuple("NGT", ["bM", "bL", "blk", "p_bucket", "cc_t", "cc_ls", "cc_slot", "cc_bucket"])
WC = namedtuple("WC", [
    "ct", "cw", "slot_w", "icols", "fcols", "bigc", "mmic", "mmi_fill", "f_fill",
    "ngroups", "nparts", "o_w", "o_g", "o_I", "o_F", "o_seq"])
OUTT = namedtuple("OUTT", [
    "finI", "finF", "fin_seq", "p_gid", "qI", "qF", "q_t", "q_seq", "q_pid", "q_alive", "q_nxt",
    "qh", "qt", "qtotI", "qtotF", "co_t", "co_ls", "co_pid"])


_NO_COMPLETIONS = (EMPTY_I, EMPTY_I, EMPTY_I, EMPTY_I)
_EMPTY_OCC = OCC(t=EMPTY_I, seq=EMPTY_I, x=EMPTY_I, pid=EMPTY_I, wa=EMPTY_I, wb=EMPTY_I,
                 ai=np.zeros((0, 1), np.int64), af=np.zeros((0, 1)),
                 rank=np.zeros((0, 1), np.int64), bound=np.zeros((0, 1), np.int64),
                 g=np.zeros((0, 1)))
Emit = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int], None]
"""Receives closed windows' rows: window ids, group ids, integer and float slot values, last
sequence numbers, and the limb count of the integer values."""


def occurrences(ev: EventChunk, g: Any) -> tuple[np.ndarray, np.ndarray]:
    """(event rows, states) of the occurrences of graph ``g``'s states in ``ev``, in event
    order (stable: a row's states in state order): the rows of each state's event type that
    pass its local predicate (a null or NaN predicate value counts as false).
    O(events + occurrences log occurrences)."""
    rows_l, x_l = [], []
    for k, ty in enumerate(g.types):
        code = ev.type_index.get(ty)
        if code is None:
            continue
        rows = np.flatnonzero(ev.type_codes == code)
        if rows.size and g.local[k] is not None:
            rows = rows[as_bool(ev.values(g.local[k], rows))]
        rows_l.append(rows)
        x_l.append(np.full(rows.size, k, np.int64))
    if not rows_l:
        return EMPTY_I, EMPTY_I
    if len(rows_l) == 1:  # one state: its rows are already in event order
        return rows_l[0], x_l[0]
    rows = np.concatenate(rows_l)
    xs = np.concatenate(x_l)
    order = np.argsort(rows, kind="stable")
    return rows[order], xs[order]


class GraphState(IndexUniverses):
    """Runtime state of one graph (see the module docstring)."""

    COMPACT_MIN_PARTITIONS = 4096
    """Partitions without live state are forgotten once there are this many and they are the
    majority."""

    # ------------------------------------------------------------------ kernel arguments
    def gc(self, slack: float, max_group: int) -> Any:
        """The kernel's configuration bundle (layout, static arrays, this call's slack). The
        bundle of the current limb count is built once and copied with this call's slack and
        group size. O(1)."""
        base = self._gc_base
        if base is None or base.L != self.L:
            Wi, Wf = self.widths()
            base = self._gc_base = GC(
                K=self.K, L=self.L, Cb=self.Cb, Cf=self.Cf, Cmi=self.Cmi, Cmf=self.Cmf, Wi=Wi,
                Wf=Wf, is_pos=self.is_main, start=self.g.start, end=self.g.end,
                d=self.cp.within, s=self.cp.slide, slack=0.0, max_group=1,
                fw_in_pt=self.fw_in_pt, **self.static())
        slack, max_group = float(slack), max(max_group, 1)
        if slack == base.slack and max_group == base.max_group:
            return base
        return base._replace(slack=slack, max_group=max_group)

    def _ixt(self) -> IXT:
        """The kernel's view of the index tables, with an empty list of the rows the kernel
        writes (:func:`~replaydb.operators.greta.closing.clear_index_slot`): a slot that is
        dirty now may hold values in any row, so its first close clears every row. O(rows)."""
        fwI, fwF = (self.ptI, self.ptF) if self.fw_in_pt else (self.fwI, self.fwF)
        n = self.ptI.shape[0]
        dcnt = np.concatenate([[0], (self.slot_w != cl.CLEAN).astype(np.int64)])
        return IXT(off=self.off, sz=self.sz, ptI=self.ptI, ptF=self.ptF, fwI=fwI, fwF=fwF,
                   appM=self.appM, drow=np.empty(n, np.int64), dmark=np.zeros(n, np.uint8),
                   dcnt=dcnt)

    def _rct(self) -> RCT:
        """The kernel's view of the run table: its current arrays (rebuild it after
        :meth:`widen` or any other reallocation). O(1)."""
        return RCT(I=self.rI, F=self.rF, t=self.r_t, rank=self.r_rank, alive=self.r_alive,
                   nxt=self.r_nxt, pid=self.r_pid, ix=self.r_ix, occ=self.r_occ, g=self.r_g,
                   head=self.r_head, tail=self.r_tail)

    def _outt(self) -> OUTT:
        """The kernel's output arrays: finals, queued results and this call's completions
        (the current arrays; rebuild after a reallocation). O(1)."""
        return OUTT(finI=self.finI, finF=self.finF, fin_seq=self.fin_seq, p_gid=self.p_gid,
                    qI=self.qI, qF=self.qF, q_t=self.q_t, q_seq=self.q_seq, q_pid=self.q_pid,
                    q_alive=self.q_alive, q_nxt=self.q_nxt, qh=self.qh, qt=self.qt,
                    qtotI=self.qtotI, qtotF=self.qtotF, co_t=self.co_t, co_ls=self.co_ls,
                    co_pid=self.co_pid)

    def _ngt(self, cc: tuple[np.ndarray, ...]) -> NGT:
        """The kernel's negation bundle: the bucket layout and the children's completions
        ``cc`` (times, lengths, slots, buckets). O(1)."""
        return NGT(bM=self.bM, bL=self.bL, blk=self.blk, p_bucket=self.p_bucket,
                   cc_t=cc[0], cc_ls=cc[1], cc_slot=cc[2], cc_bucket=cc[3])

    def closes(self, ct: np.ndarray, cw: np.ndarray) -> WC:
        """The kernel's window-close bundle (:mod:`.closing`): markers ``ct``/``cw``, this
        graph's dirty slots, the slots' columns, and an output buffer for the rows of a few
        windows when there are markers. Rebuild after a widening. O(K) after the first call
        per limb count."""
        icols, fcols, bigc, mmic, mmi_fill, f_fill = self.slot_tables()
        ng = len(self.groups)
        cap = max(4 * ng, 256) if len(ct) else 0
        return WC(ct=ct, cw=cw, slot_w=self.slot_w, icols=icols, fcols=fcols, bigc=bigc,
                  mmic=mmic, mmi_fill=mmi_fill, f_fill=f_fill, ngroups=ng,
                  nparts=len(self.parts), o_w=np.zeros(cap, np.int64),
                  o_g=np.zeros(cap, np.int64), o_I=np.zeros((cap, icols.shape[1]), np.int64),
                  o_F=np.zeros((cap, fcols.shape[1]), np.float64),
                  o_seq=np.zeros(cap, np.int64))

    # ------------------------------------------------------------------ partitions
    def new_partitions(self, first: int, keys: list[tuple], runtime: Runtime) -> None:
        """Record the groups and negation buckets of the partitions ``first, first+1, ...``
        just created for ``keys``."""
        n = len(keys)
        pids = np.arange(first, first + n)
        self.ensure_parts(first + n)
        attrs = self.g.part_attrs
        if self.is_main:
            ng = len(self.cp.group_by)
            get = self.groups.get
            self.p_gid[pids] = [get(k[:ng]) for k in keys]
            runtime.ensure_groups(self)
        for c, nid in enumerate(self.g.children):
            pos = [attrs.index(a) for a in self.cp.negations[nid].common]
            get = self.negs[c].buckets.get
            self.p_bucket[pids, c] = [get(tuple(k[j] for j in pos)) for k in keys]
        self.ensure_buckets()
        if self.g.template.negation is not None:
            nid = self.g.template.negation
            pos = [attrs.index(a) for a in self.cp.negations[nid].common]
            parent = runtime.graphs[self.cp.negations[nid].negation.parent]
            c = parent.g.children.index(nid)
            get = parent.negs[c].buckets.get
            self.p_cb[pids] = [get(tuple(k[j] for j in pos)) for k in keys]
            parent.ensure_buckets()

    def compact_partitions(self, runtime: Runtime, W0: int) -> bool:
        """Forget partitions without any live state when they are the majority. True when it
        did. Below :attr:`COMPACT_MIN_PARTITIONS` partitions it returns at once, before the
        O(state) scan for live rows."""
        P = len(self.parts)
        if P < self.COMPACT_MIN_PARTITIONS:
            return False
        # a partition is live when some row of it is: tree or point rows alike
        keep_rows = [self._alive_rows(self.ptI[self.ubase[ii]: self.ubase[ii + 1]], W0)
                     if self.g.indexes[ii].kind != SCAN else np.zeros(0, bool)
                     for ii in range(self.nI)]
        alive = np.zeros(P, bool)
        for ii in range(self.nI):
            alive[self.u_pid[ii][keep_rows[ii]]] = True
        if self.r_n:
            live = self.r_alive[: self.r_n] & self._alive_rows(self.rI[: self.r_n], W0)
            alive[self.r_pid[: self.r_n][live]] = True
        if self.q_n:
            alive[self.q_pid[: self.q_n][self.q_alive[: self.q_n]]] = True
        if alive.sum() * 2 > P:
            return False
        remap = self.parts.remap(alive)
        kept = np.flatnonzero(alive)
        self.p_gid = self.p_gid[kept].copy()
        self.p_bucket = self.p_bucket[kept].copy()
        self.p_cb = self.p_cb[kept].copy()
        self.off = self.off[:, kept].copy()
        self.sz = self.sz[:, kept].copy()
        self.appM = self.appM[:, kept].copy()
        self.r_head = self.r_head[:, kept].copy()
        self.r_tail = self.r_tail[:, kept].copy()
        self.qh = self.qh[kept].copy()
        self.qt = self.qt[kept].copy()
        if self.qtotI.shape[0]:
            self.qtotI = self.qtotI[kept].copy()
            self.qtotF = self.qtotF[kept].copy()
        for ii in range(self.nI):
            # universe entries of forgotten partitions (all zero) go; the pool rows of the kept
            # partitions keep their offsets (off/sz columns moved with their partitions)
            self.u_pid[ii] = remap[self.u_pid[ii]]  # -1: dropped at the coming rebuild
        if self.r_n:
            newp = remap[self.r_pid[: self.r_n]]
            self.r_alive[: self.r_n] &= newp >= 0
            self.r_pid[: self.r_n] = np.where(newp >= 0, newp, 0)
        if self.q_n:
            newp = remap[self.q_pid[: self.q_n]]
            self.q_alive[: self.q_n] &= newp >= 0
            self.q_pid[: self.q_n] = np.where(newp >= 0, newp, 0)
        return True

    def _users(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per integer and per float attribute, a mask over the graph's states: the states
        whose aggregates read it (a null there is an error). Computed once. O(states)."""
        if self._users_cache is None:
            g = self.g
            ns = len(g.states)
            ui = [np.zeros(ns, bool) for _ in g.attr_i]
            uf = [np.zeros(ns, bool) for _ in g.attr_f]
            for _, s_, a in g.big:
                if a >= 0:
                    ui[a][s_] = True
            for s_, a, _ in g.mmi:
                if a >= 0:
                    ui[a][s_] = True
            for s_, a in g.fsum:
                uf[a][s_] = True
            for s_, a, _ in g.mmf:
                uf[a][s_] = True
            self._users_cache = (ui, uf)
        return self._users_cache

    def _attributes(self, ev: EventChunk, rows: np.ndarray, xs: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """(integer, float) attribute columns of the occurrences ``rows`` (states ``xs``); a null
        where an aggregate reads it raises :class:`DataError`, elsewhere it reads as 0 (or
        NaN). O(occurrences x attributes)."""
        g = self.g
        n = len(rows)
        ui, uf = self._users()
        ai = np.zeros((n, max(len(g.attr_i), 1)), np.int64)
        af = np.zeros((n, max(len(g.attr_f), 1)), np.float64)
        if n == 0:
            return ai, af
        for j, name in enumerate(g.attr_i):
            v = ev.np(name)[rows]
            if v.dtype == object or np.issubdtype(v.dtype, np.floating):
                nulls = null_mask(v)
                bad = ui[j][xs] & nulls
                if bad.any():
                    r = int(rows[np.flatnonzero(bad)[0]])
                    raise DataError("null value in an attribute that is aggregated", row=r,
                                    column=name)
                v = np.where(nulls, 0, v)
            ai[:, j] = v.astype(np.int64)
        for j, name in enumerate(g.attr_f):
            v = ev.np(name)[rows].astype(np.float64)
            bad = uf[j][xs] & np.isnan(v)
            if bad.any():
                r = int(rows[np.flatnonzero(bad)[0]])
                raise DataError("null value in an attribute that is aggregated", row=r,
                                column=name)
            af[:, j] = v
        return ai, af

    # ------------------------------------------------------------------ preparation
    def prepare(self, ev: EventChunk, runtime: Runtime, W0: int) -> OCC | None:
        cp, g = self.cp, self.g
        rows, xs = occurrences(ev, g)
        t = ev.t[rows]
        if self.is_main:
            d, s = cp.within, cp.slide
            wb = np.floor_divide(t, s)
            wa = np.floor_divide(t - d, s) + 1
            keep = wa <= wb
            rows, xs, t, wa, wb = rows[keep], xs[keep], t[keep], wa[keep], wb[keep]
        else:
            wa = np.zeros(len(rows), np.int64)
            wb = wa
        n = len(rows)
        # --- compaction (a partition is live when some row of it is: tree or point rows alike)
        compacted = self.compact_partitions(runtime, W0)
        # --- partitions of the new occurrences
        inv, tuples = encode_keys(ev, rows, g.part_attrs)
        index = self.parts.index
        mapping = np.fromiter((index.get(k, -1) for k in tuples), np.int64, len(tuples))
        fresh = np.flatnonzero(mapping < 0)
        if len(fresh):
            first = len(self.parts)
            new_keys = [tuples[j] for j in fresh]
            for j, key in enumerate(new_keys):
                index[key] = first + j
            self.parts.keys.extend(new_keys)
            mapping[fresh] = np.arange(first, first + len(fresh))
            self.new_partitions(first, new_keys, runtime)
        pid = mapping[inv] if n else EMPTY_I
        P = len(self.parts)
        self.ensure_parts(P)
        # --- attributes
        ai, af = self._attributes(ev, rows, xs)
        gcols = np.zeros((n, max(len(g.gcols), 1)), np.float64)
        for j, name in enumerate(g.gcols):
            gcols[:, j] = ev.np(name)[rows].astype(np.float64)
        # --- indexes
        max_out = max((len(o) for o in g.out_ix), default=0)
        max_in = max((len(i) for i in g.in_tr), default=0)
        rank = np.full((n, max(max_out, 1)), -1, np.int64)
        bound = np.zeros((n, max(max_in, 1)), np.int64)
        self._rebuild_indexes(ev, rows, xs, pid, compacted, W0, rank, bound, self.gc(0.0, 1))
        self._compact_records(W0)
        self._compact_queue()
        # --- capacities
        per_state = np.bincount(xs, minlength=len(g.states)) if n else None
        if per_state is not None:
            n_rec = sum(int(per_state[ix.src]) for ix in g.indexes if ix.has_records)
            self._ensure_records(self.r_n + n_rec)
            if g.case2 is not None:
                self._ensure_queue(self.q_n + int(per_state[g.end]))
        if self.is_main:
            self.co_t = self.co_ls = self.co_pid = EMPTY_I
        else:
            self.co_t = np.zeros(n, np.int64)
            self.co_ls = np.zeros(n, np.int64)
            self.co_pid = np.zeros(n, np.int64)
        return OCC(t=np.ascontiguousarray(t), seq=np.ascontiguousarray(ev.seq[rows]), x=xs,
                   pid=pid, wa=np.ascontiguousarray(wa), wb=np.ascontiguousarray(wb), ai=ai, af=af,
                   rank=rank, bound=bound, g=gcols)
    # ------------------------------------------------------------------ magnitude bound
    def _tighten_z(self) -> None:
        """Z := the smaller of the running bound and :meth:`_init_z`'s bound from the stored
        values (both are valid: every value the kernel computes is a sum of distinct live
        vertex values). Called only when the running bound would make the values wider: the
        recount is O(state), so it is not paid on every sub-chunk."""
        z = self.Z
        self._init_z()
        self.Z = min(z, self.Z)

    def _init_z(self) -> None:
        """Z := a bound on the sum of the magnitudes of every stored exact value (log2)."""
        if self.Cb == 0:
            return
        gc = self.gc(0.0, 1)
        z = 0.0  # log2(1): the bound counts one extra unit
        for vi, n in ((self.ptI, self.ptI.shape[0]), (self.fwI, self.fwI.shape[0]),
                      (self.rI, self.r_n), (self.qI, self.q_n),
                      (self.qtotI, len(self.parts)), (self.finI, len(self.groups))):
            n = min(n, vi.shape[0])
            if n:
                b = float(kn.log2_total(vi, n, gc))
                if b >= 0:
                    hi, lo = max(z, b), min(z, b)
                    z = hi + math.log2(1.0 + 2.0 ** (lo - hi))
        self.Z = z + 1e-6

    # ------------------------------------------------------------------ run
    def slack_bits(self, occ: OCC, max_group: int) -> int:
        """Headroom bits the kernel keeps below the limb capacity for ``occ``: attribute
        magnitude, fan-in, channels and the largest group of equal times. O(occurrences)."""
        abits = 0
        sumi = self._sumi_cols()
        if sumi and len(occ.t):
            m = np.abs(occ.ai[:, sumi].astype(np.float64)).max()
            abits = int(math.ceil(math.log2(m + 2))) + 1
        fan_in = max((len(x) for x in self.g.in_tr), default=0)
        return (abits + math.ceil(math.log2(fan_in + 2)) + math.ceil(math.log2(self.Cb + 2))
                + math.ceil(math.log2(max_group + 1)) + 4)

    def views(self) -> tuple[IXT, RCT, OUTT]:
        """The kernel's views of the index, record and output arrays: valid until the next
        preparation or widening (both reallocate). O(1)."""
        return self._ixt(), self._rct(), self._outt()

    def run(self, occ: OCC, cc: tuple[np.ndarray, ...], runtime: Runtime, *,
            bounds: tuple[int, int] | None = None,
            views: tuple[IXT, RCT, OUTT] | None = None,
            markers: tuple[np.ndarray, np.ndarray] = (EMPTY_I, EMPTY_I),
            emit: Emit | None = None) -> tuple[IXT, RCT, OUTT] | None:
        """Run the kernel over ``occ`` with the children's completions ``cc`` (widening the
        exact values first or midway where they might not fit). ``bounds``: ``(slack bits,
        largest group of equal times)`` valid for ``occ`` (computed from it when None);
        ``views``: :meth:`views` since the last preparation. ``markers``: ``(times, window
        ids)``: before anything at a marker's time or later, the windows up to its id close
        inside the kernel (:mod:`.closing`), their rows handed to ``emit`` (required with
        markers) in window order. Returns the views in use after the run (new ones when it
        widened)."""
        if not len(occ.t):
            occ = _EMPTY_OCC
            if not len(cc[0]):
                return views
        if bounds is None:
            max_group = int(kn.max_equal_run(occ.t))
            bounds = (self.slack_bits(occ, max_group), max_group)
        slack, max_group = bounds

        def limbs_needed() -> int:
            return int(math.ceil((self.Z + slack + 2) / kn.LIMB))

        if self.Cb and limbs_needed() > self.L:
            # the kernel's running bound only grows (closed windows do not lower it):
            # tighten it from the stored values before widening
            self._tighten_z()
            if limbs_needed() > self.L:
                self.widen(limbs_needed())
                views = None
        CNT = np.array([self.r_n, self.q_n, 0, 0, 0, 0, 0, 0], np.int64)
        Zarr = np.array([self.Z], np.float64)
        ngt = self._ngt(cc)
        wc = None
        while True:
            gc = self.gc(slack, max_group)
            if views is None:
                views = self.views()
            if wc is None:
                wc = self.closes(*markers)
            ixt, rct, outt = views
            pos = kn.run_graph(gc, occ, ixt, rct, ngt, outt, CNT, Zarr, wc, kn.scratch(gc))
            if CNT[5]:
                assert emit is not None
                m = int(CNT[5])
                emit(wc.o_w[:m].copy(), wc.o_g[:m].copy(), wc.o_I[:m].copy(),
                     wc.o_F[:m].copy(), wc.o_seq[:m].copy(), self.L)
                CNT[5] = 0
            if CNT[7]:  # the close buffer was full: drained, resume
                CNT[7] = 0
                continue
            if pos >= len(occ.t):
                break
            # stopped before a group whose values might not fit: tighten, else widen
            self.r_n, self.q_n = int(CNT[0]), int(CNT[1])
            self.Z = float(Zarr[0])
            self._tighten_z()
            Zarr[0] = self.Z
            if limbs_needed() <= self.L:
                continue
            # exactly the limbs the recounted bound needs: a further stop costs one recount,
            # while a headroom limb would widen every stored value for good
            self.widen(max(limbs_needed(), self.L + 1))
            views = wc = None
        self.r_n, self.q_n = int(CNT[0]), int(CNT[1])
        co_n = int(CNT[2])
        if co_n != len(self.co_t):
            self.co_t, self.co_ls, self.co_pid = self.co_t[:co_n], self.co_ls[:co_n], \
                self.co_pid[:co_n]
            views = None
        self.Z = float(Zarr[0])
        return views

    def _sumi_cols(self) -> list[int]:
        """The integer attribute columns summed exactly (sorted, distinct). O(channels)."""
        return sorted({a for k, _, a in self.g.big if k == "sumi"})

    # ------------------------------------------------------------------ checks
    def _check(self) -> None:
        """Verify the structural invariants (for tests; O(state)):
        :func:`~replaydb.operators.greta.invariants.check_graph`."""
        from replaydb.operators.greta.invariants import check_graph

        check_graph(self)

class Runtime:
    """All graphs of a query plus window bookkeeping."""

    def __init__(self, plan: CompiledPlan) -> None:
        self.plan = plan
        self.graphs = [GraphState(plan, g) for g in plan.graphs]

    def ensure_groups(self, gs: GraphState) -> None:
        n = len(gs.groups)
        if gs.finI.shape[0] >= n:
            return
        cap = max(n, 2 * gs.finI.shape[0], 16)
        vi, vf = gs.fresh_rows(cap - gs.finI.shape[0])
        gs.finI = np.concatenate([gs.finI, vi])
        gs.finF = np.concatenate([gs.finF, vf])
        gs.fin_seq = np.concatenate([gs.fin_seq, np.full((cap - gs.fin_seq.shape[0], gs.K), -1,
                                                         np.int64)])

    @property
    def scans(self) -> bool:
        """Whether some index is a scan of records (each probe walks its partition's records,
        so records of closed windows must not pile up between two preparations)."""
        return any(ix.kind == SCAN for g in self.plan.graphs for ix in g.indexes)

    def process_spans(self, ev: EventChunk, W0: int, ends: np.ndarray, closes: np.ndarray,
                      close: Callable[[int], None], emit: Emit) -> tuple[int, int | None]:
        """Run every graph over the sub-chunks ``ev[ends[i-1]:ends[i]]`` (``ends[-1]`` is
        ``ev.n``), before each of which the windows up to ``closes[i]`` close, prepared
        together: the graphs' occurrences, partitions, attributes and index universes are
        computed once for all of them (children before parents; a child runs over all of them
        at once, as it has no windows). The main graph then runs once, closing the windows
        inside the kernel before each sub-chunk with occurrences or children's completions
        (:mod:`.closing`; rows to ``emit``); with a negation after its last element (case 2,
        whose closes need the queues' totals) it runs once per such sub-chunk instead,
        ``close(closes[i])`` first. Returns ``(sub-chunks with occurrences or completions, the
        last window closed through, or None)``.

        Sound because nothing the preparation computes depends on which windows are open: a
        closed window's slot is zero everywhere (its rows stay until the next rebuild drops
        them), the universes only grow between rebuilds, and completions are applied in time
        order after the closes due before them. O(events + occurrences log occurrences +
        state) for the preparation, plus the kernel."""
        for gid in range(len(self.graphs) - 1, 0, -1):
            gs = self.graphs[gid]
            gs.run(gs.prepare(ev, self, W0), self._child_completions(gs), self)
        main = self.graphs[0]
        occ = main.prepare(ev, self, W0)
        cc = self._child_completions(main)
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        t_first, t_last = ev.t[starts], ev.t[ends - 1]
        o_lo, o_hi = np.searchsorted(occ.t, t_first, "left"), np.searchsorted(occ.t, t_last,
                                                                               "right")
        c_lo, c_hi = np.searchsorted(cc[0], t_first, "left"), np.searchsorted(cc[0], t_last,
                                                                               "right")
        active = np.flatnonzero((o_hi > o_lo) | (c_hi > c_lo))
        if not len(active):
            return 0, None
        max_group = int(kn.max_equal_run(occ.t))
        bounds = (main.slack_bits(occ, max_group), max_group)
        if main.g.case2 is None:
            markers = (np.ascontiguousarray(t_first[active]),
                       np.ascontiguousarray(closes[active]))
            main.run(occ, cc, self, bounds=bounds, markers=markers, emit=emit)
            return len(active), int(closes[active[-1]])
        views = None
        for i in active.tolist():
            close(int(closes[i]))
            a, b, c0, c1 = int(o_lo[i]), int(o_hi[i]), int(c_lo[i]), int(c_hi[i])
            part = OCC(*(f[a:b] for f in occ))
            done = tuple(x[c0:c1] for x in cc) if c1 > c0 else _NO_COMPLETIONS
            views = main.run(part, done, self, bounds=bounds, views=views)
        return len(active), int(closes[active[-1]])

    def _child_completions(self, gs: GraphState) -> tuple[np.ndarray, ...]:
        ts, ls, slots, buckets = [], [], [], []
        for c, nid in enumerate(gs.g.children):
            child = self.graphs[self.plan.negations[nid].negation.child]
            if not len(child.co_t):
                continue
            ts.append(child.co_t)
            ls.append(child.co_ls)
            slots.append(np.full(len(child.co_t), c, np.int64))
            buckets.append(child.p_cb[child.co_pid])
        if not ts:
            return _NO_COMPLETIONS
        t = np.concatenate(ts)
        order = np.argsort(t, kind="stable")
        return (np.ascontiguousarray(t[order]), np.ascontiguousarray(np.concatenate(ls)[order]),
                np.ascontiguousarray(np.concatenate(slots)[order]),
                np.ascontiguousarray(np.concatenate(buckets)[order]))

    def state_entries(self) -> int:
        return sum(g.state_entries() for g in self.graphs)

    def state_bytes(self) -> int:
        return sum(g.state_bytes() for g in self.graphs)
