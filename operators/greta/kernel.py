"""The compiled GRETA graph kernel: aggregate propagation with exact multi-limb integers.

One call processes the occurrences (event x state) of one graph for the sub-chunks of one
preparation (runs of events between window closes; the windows closing between them are closed
inside the call, :mod:`.closing`), in ``(t, seq)`` order. Events with the same
timestamp are computed first and committed together, so that they never precede each other
(``SEQ`` requires strictly increasing timestamps, paper Def. 1).

Per occurrence ``e`` of state ``x`` in partition ``p`` (paper Alg. 2 + Thm. 9.1), for every window
slot ``k`` of a window containing ``e``:

    count_k(e)  = [x = START and the start is valid in window k] + sum over predecessors
    countE_k(e) = count_k(e) * [x = E] + sum of predecessors' countE_k
    sum_k(e)    = e.attr * count_k(e) * [x = E] + sum of predecessors' sum_k
    min/max_k   = min/max(e.attr if x = E, predecessors' min/max_k)   (only where count_k > 0)

The predecessor sums come from the *indexes* of the incoming transitions (see
:mod:`~replaydb.operators.greta.plan`): one running aggregate, a Fenwick tree over key ranks
(prefix query, O(log n)), per-key aggregates, or a scan of records with a compiled edge predicate.
A vertex's values live in K window *slots* (window id mod K); a predecessor outside window k has
zero in slot k, which is how one shared graph serves all sliding windows (paper Sec. 6). When a
window closes its slot is cleared everywhere (panes purged whole).

Values: exact integers are two's complement numbers of ``L`` limbs of 30 bits stored in int64
(``MASK = 2**30 - 1``); a bound ``Z`` on every stored magnitude is tracked in log2, and the kernel
stops *before* a group of events whose results might not fit ``L`` limbs, so the caller widens the
arrays and resumes (no value is ever truncated). Float sums and min/max are float64/int64.

Negation (children already processed for the preparation, their completions sorted by time and
applied once the kernel's time passes them): case 1 removes source vertices older than the latest
negative trend start from the transition's index (subtracting their records; min/max indexes are
rebuilt from the records); case 2 keeps END contributions in a per-partition queue from which the
caller drops the invalidated ones when a window closes; case 3 blocks the START contribution in
the windows that a negative trend has already hit.

The row helpers (:mod:`.limbs`: ``acc_row``, ``magnitude_bits``, ...) are inlined into the
kernels at Numba's IR level (``inline="always"``): they take the plan tuple ``G`` (dozens of
arrays), and a call out of line once per Fenwick node and window slot passes all of them each
time; the price is a longer compilation, once per machine (the compiled code is cached). For the
same reason the window closes (:mod:`.closing`) are inlined too.

Negative graphs have one slot (no windows) and one channel, the latest start time of the trends
ending at a vertex (a max), and emit completions ``(time, latest start, partition)``.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from replaydb.operators.greta.closing import closes_due, mark_row, mark_windows
from replaydb.operators.greta.edgecode import STACK_SLOTS, eval_edge
from replaydb.operators.greta.limbs import (
    HALF,
    I64_MAX,
    I64_MIN,
    LIMB,
    MASK,
    acc_row,
    copy_row,
    is_zero,
    magnitude_bits,
    mul_small,
    normalize,
    reset_row,
    sub_row,
    to_float,
)
from replaydb.operators.uncounted import uncounted

K_NONE, K_FENWICK, K_POINT, K_SCAN = 0, 1, 2, 3
CH_COUNT, CH_COUNTE, CH_SUMI = 0, 1, 2


def scratch(G) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The scratch of one :func:`run_graph` call for the plan tuple ``G``: rows of the events
    of one timestamp (``G.max_group``) for the exact and float values, their alive flags, and
    an edge predicate's stack. Zeroed."""
    return (np.zeros((G.max_group, max(G.Wi, 1)), np.int64),
            np.zeros((G.max_group, max(G.Wf, 1)), np.float64),
            np.zeros(G.max_group, np.bool_), np.zeros(STACK_SLOTS, np.float64))


@nb.njit(cache=True)
def max_equal_run(t):
    """The longest run of equal values in the sorted array ``t`` (0 when empty). O(len(t))."""
    n = t.shape[0]
    if n == 0:
        return 0
    best = 1
    run = 1
    for i in range(1, n):
        if t[i] == t[i - 1]:
            run += 1
            if run > best:
                best = run
        else:
            run = 1
    return best


@nb.njit(cache=True)
def rows_of_asc(u_pid, off, sz, base):
    """Local row of every universe entry of a descending index, whose rows hold each
    partition's ascending entries in reverse order (``off``/``sz``: the index's partition
    ranges, ``base``: its first pool row); an entry of a forgotten partition (-1) keeps its
    position. O(entries)."""
    n = u_pid.shape[0]
    out = np.empty(n, np.int64)
    for j in range(n):
        p = u_pid[j]
        if p < 0:
            out[j] = j
        else:
            out[j] = 2 * (off[p] - base) + sz[p] - 1 - j
    return out


@nb.njit(cache=True)
def build_fenwick(fwI, fwF, ptI, ptF, off, sz, G):
    """fw[off:off+sz] := Fenwick tree of the point values pt[off:off+sz] (all slots)."""
    for i in range(sz):
        copy_row(fwI, fwF, off + i, ptI, ptF, off + i)
    for i in range(1, sz + 1):
        j = i + (i & (-i))
        if j <= sz:
            acc_row(fwI, fwF, off + j - 1, fwI, fwF, off + i - 1, G, 0, G.K - 1, True)


@nb.njit(cache=True)
def build_all_fenwicks(fwI, fwF, ptI, ptF, offs, szs, G):
    for q in range(offs.shape[0]):
        if szs[q] > 0:
            build_fenwick(fwI, fwF, ptI, ptF, offs[q], szs[q], G)


@nb.njit(cache=True)
def fenwicks_to_points(vI, vF, offs, szs, G):
    """Invert :func:`build_fenwick` in place (sums only): trees become point values."""
    K, L = G.K, G.L
    for q in range(offs.shape[0]):
        off, sz = offs[q], szs[q]
        for i in range(sz, 0, -1):
            j = i + (i & (-i))
            if j <= sz:
                for c in range(G.Cb):
                    for k in range(K):
                        base = (c * K + k) * L
                        for li in range(L):
                            vI[off + j - 1, base + li] -= vI[off + i - 1, base + li]
                        normalize(vI, off + j - 1, base, L)
                for col in range(G.Cf * K):
                    vF[off + j - 1, col] -= vF[off + i - 1, col]


@nb.njit(cache=True)
def log2_total(vi, nrows, G):
    """log2 of an upper bound on the sum of the magnitudes of the exact values in the first
    ``nrows`` rows (-1 when there are none)."""
    K, L = G.K, G.L
    best = -1.0
    acc = 0.0
    for r in range(nrows):
        for c in range(G.Cb):
            for k in range(K):
                if is_zero(vi, r, (c * K + k) * L, L):
                    continue
                b = float(magnitude_bits(vi, r, (c * K + k) * L, L))
                if b > best:
                    acc = acc * 2.0 ** (best - b) + 1.0
                    best = b
                else:
                    acc += 2.0 ** (b - best)
    if best < 0:
        return -1.0
    return best + math.log2(acc)


@nb.njit(cache=True)
def widen_rows(a, nblocks, L, L_new):
    """``a`` with its first ``nblocks`` groups of ``L`` limbs grown to ``L_new`` limbs each
    (two's complement sign extension, values unchanged); the columns after them are copied as
    they are. One pass over ``a``: O(rows x columns)."""
    rows, cols = a.shape
    nbo = nblocks * L
    out = np.empty((rows, nblocks * L_new + cols - nbo), np.int64)
    for r in range(rows):
        for b in range(nblocks):
            src = b * L
            dst = b * L_new
            for i in range(L):
                out[r, dst + i] = a[r, src + i]
            fill = MASK if a[r, src + L - 1] >= HALF else 0
            for i in range(L, L_new):
                out[r, dst + i] = fill
        for c in range(nbo, cols):
            out[r, nblocks * L_new + c - nbo] = a[r, c]
    return out


# ---------------------------------------------------------------------------- negation helpers
@nb.njit(cache=True)
def _rebuild_range(IX, RC, ii, p, G):
    """Recompute point values and Fenwick tree of index ii, partition p, from its records."""
    off = IX.off[ii, p]
    sz = IX.sz[ii, p]
    for i in range(sz):
        reset_row(IX.ptI, IX.ptF, off + i, G)
        mark_row(IX, off + i)
    rec = RC.head[ii, p]
    while rec >= 0:
        r = RC.rank[rec]
        if RC.alive[rec] and r >= 0:
            acc_row(IX.ptI, IX.ptF, off + r, RC.I, RC.F, rec, G, 0, G.K - 1, True)
        rec = RC.nxt[rec]
    if G.ix_kind[ii] == K_FENWICK:
        build_fenwick(IX.fwI, IX.fwF, IX.ptI, IX.ptF, off, sz, G)


@nb.njit(cache=True)
def _apply_removal(IX, RC, NG, ii, p, c, G):
    """Case 1: drop the source vertices of index ii older than the child's latest trend start."""
    M = NG.bM[c, NG.p_bucket[p, c]]
    if M <= IX.appM[ii, p]:
        return
    kind = G.ix_kind[ii]
    off = IX.off[ii, p]
    sz = IX.sz[ii, p]
    dirty = False
    rec = RC.head[ii, p]
    while rec >= 0 and RC.t[rec] < M:
        r = RC.rank[rec]
        if RC.alive[rec] and kind != K_SCAN and r >= 0:
            if G.Cmi > 0 or G.Cmf > 0:
                dirty = True
            else:
                if kind != K_FENWICK or not G.fw_in_pt:
                    sub_row(IX.ptI, IX.ptF, off + r, RC.I, RC.F, rec, G)
                    mark_row(IX, off + r)
                if kind == K_FENWICK:
                    i2 = r + 1
                    while i2 <= sz:
                        sub_row(IX.fwI, IX.fwF, off + i2 - 1, RC.I, RC.F, rec, G)
                        mark_row(IX, off + i2 - 1)
                        i2 += i2 & (-i2)
        RC.alive[rec] = False
        rec = RC.nxt[rec]
    RC.head[ii, p] = rec
    if rec < 0:
        RC.tail[ii, p] = -1
    IX.appM[ii, p] = M
    if dirty:
        _rebuild_range(IX, RC, ii, p, G)


@nb.njit(cache=True)
def _apply_completion(NG, q, G):
    """Fold one child completion into the negation state (its time is < the kernel's time)."""
    c = NG.cc_slot[q]
    b = NG.cc_bucket[q]
    ls = NG.cc_ls[q]
    case = G.child_case[c]
    if case == 1:
        if ls > NG.bM[c, b]:
            NG.bM[c, b] = ls
    elif case == 2:
        if ls > NG.bL[c, b]:
            NG.bL[c, b] = ls
    else:
        # case 3: block the START contribution in windows w with w.start <= ls containing the
        # completion's end time
        tc = NG.cc_t[q]
        wb = tc // G.s
        wa = (tc - G.d) // G.s + 1
        for w in range(wa, wb + 1):
            if w * G.s <= ls:
                NG.blk[c, b, w % G.K] = 1


# ---------------------------------------------------------------------------- the kernel
@nb.njit(cache=True, error_model="numpy")
def run_graph(G, OC, IX, RC, NG, OUT, CNT, Z, WC, SC):
    """Process occurrences OC[CNT[4]:] of one graph, closing windows as the markers of ``WC``
    come due (:mod:`.closing`); ``SC`` is :func:`scratch` of ``G``. Every bundle is read
    through :func:`~replaydb.operators.uncounted.uncounted` views (the loops read dozens of
    their arrays per occurrence; nothing keeps a view past the call). Returns the position
    reached: ``len(OC.t)`` when done, or the start of the first group that needs wider
    integers (then widen, resume); ``CNT[7]`` set means it stopped because the close buffer is
    full instead (drain it, resume)."""
    G, OC, IX, RC, NG = uncounted(G), uncounted(OC), uncounted(IX), uncounted(RC), uncounted(NG)
    OUT, CNT, Z, WC = uncounted(OUT), uncounted(CNT), uncounted(Z), uncounted(WC)
    scI, scF, alive, stack = uncounted(SC)
    n = OC.t.shape[0]
    K, L, Cb = G.K, G.L, G.Cb
    nb_ = Cb * K * L
    cap_bits = LIMB * L - 1
    ncc = NG.cc_t.shape[0]
    i = CNT[4]
    while i < n:
        t = OC.t[i]
        j = i
        while j < n and OC.t[j] == t:
            j += 1
        if Cb > 0 and Z[0] + G.slack >= cap_bits:
            CNT[4] = i
            return i
        # children's completions strictly before t, each after the closes due before it
        while CNT[3] < ncc and NG.cc_t[CNT[3]] < t:
            if not closes_due(WC, G, IX, RC, OUT, NG, CNT, NG.cc_t[CNT[3]]):
                return _stopped(CNT, i)
            _completion(NG, CNT[3], G, WC.slot_w)
            CNT[3] += 1
        if not closes_due(WC, G, IX, RC, OUT, NG, CNT, t):
            return _stopped(CNT, i)
        # ---- compute
        for a in range(i, j):
            sr = a - i
            x = OC.x[a]
            p = OC.pid[a]
            wa = OC.wa[a]
            wb = OC.wb[a]
            reset_row(scI, scF, sr, G)
            for q in range(G.in_ptr[x], G.in_ptr[x + 1]):
                T = G.in_list[q]
                ii = G.tr_ix[T]
                jj = q - G.in_ptr[x]
                c = G.tr_neg[T]
                if c >= 0:
                    _apply_removal(IX, RC, NG, ii, p, c, G)
                kind = G.ix_kind[ii]
                off = IX.off[ii, p]
                sz = IX.sz[ii, p]
                b = OC.bound[a, jj]
                if kind == K_NONE or kind == K_POINT:
                    if b >= 0 and b < sz:
                        acc_row(scI, scF, sr, IX.ptI, IX.ptF, off + b, G, wa, wb, False)
                elif kind == K_FENWICK:
                    i2 = b
                    while i2 > 0:
                        acc_row(scI, scF, sr, IX.fwI, IX.fwF, off + i2 - 1, G, wa, wb, False)
                        i2 -= i2 & (-i2)
                else:
                    rec = RC.head[ii, p]
                    bs = G.tr_bc_start[T]
                    bl = G.tr_bc_len[T]
                    while rec >= 0:
                        if RC.alive[rec] and eval_edge(G.bc_code, G.bc_arg, bs, bl, RC.g, rec,
                                                       OC.g, a, stack):
                            acc_row(scI, scF, sr, RC.I, RC.F, rec, G, wa, wb, False)
                        rec = RC.nxt[rec]
            any_alive = False
            for w in range(wa, wb + 1):
                k = w % K
                alive_k = True
                if Cb > 0:
                    if x == G.start:
                        ok = True
                        if G.case3 >= 0:
                            c3 = G.case3
                            if NG.blk[c3, NG.p_bucket[p, c3], k] != 0:
                                ok = False
                        if ok:
                            scI[sr, k * L] += 1
                    normalize(scI, sr, k * L, L)
                    alive_k = not is_zero(scI, sr, k * L, L)
                    for c in range(1, Cb):
                        base = (c * K + k) * L
                        if G.cb_state[c] == x and alive_k:
                            if G.cb_kind[c] == CH_COUNTE:
                                for li in range(L):
                                    scI[sr, base + li] += scI[sr, k * L + li]
                            else:
                                mul_small(scI, sr, k * L, L, OC.ai[a, G.cb_attr[c]], scI, sr,
                                           base)
                        normalize(scI, sr, base, L)
                for c in range(G.Cf):
                    if G.cf_state[c] == x and alive_k:
                        scF[sr, c * K + k] += OC.af[a, G.cf_attr[c]] * to_float(scI, sr, k * L, L)
                for c in range(G.Cmi):
                    col = nb_ + c * K + k
                    st = G.cmi_state[c]
                    if st == -2:
                        if x == G.start and t > scI[sr, col]:
                            scI[sr, col] = t
                    elif st == x and alive_k:
                        v = OC.ai[a, G.cmi_attr[c]]
                        if G.cmi_max[c]:
                            if v > scI[sr, col]:
                                scI[sr, col] = v
                        elif v < scI[sr, col]:
                            scI[sr, col] = v
                    if not alive_k:
                        scI[sr, col] = I64_MIN if G.cmi_max[c] else I64_MAX
                for c in range(G.Cmf):
                    col = G.Cf * K + c * K + k
                    st = G.cmf_state[c]
                    if st == x and alive_k:
                        v = OC.af[a, G.cmf_attr[c]]
                        if G.cmf_max[c]:
                            if v > scF[sr, col]:
                                scF[sr, col] = v
                        elif v < scF[sr, col]:
                            scF[sr, col] = v
                    if not alive_k:
                        scF[sr, col] = -np.inf if G.cmf_max[c] else np.inf
                if Cb == 0:
                    alive_k = scI[sr, nb_ + k] != I64_MIN
                any_alive = any_alive or alive_k
            alive[sr] = any_alive
        # ---- commit
        for a in range(i, j):
            sr = a - i
            if not alive[sr]:
                continue
            x = OC.x[a]
            p = OC.pid[a]
            wa = OC.wa[a]
            wb = OC.wb[a]
            mark_windows(WC.slot_w, wa, wb, K)
            for q in range(G.out_ptr[x], G.out_ptr[x + 1]):
                ii = G.out_list[q]
                r = OC.rank[a, q - G.out_ptr[x]]
                kind = G.ix_kind[ii]
                if kind != K_SCAN and r >= 0:
                    off = IX.off[ii, p]
                    sz = IX.sz[ii, p]
                    if kind != K_FENWICK or not G.fw_in_pt:
                        acc_row(IX.ptI, IX.ptF, off + r, scI, scF, sr, G, wa, wb, True)
                        mark_row(IX, off + r)
                    if kind == K_FENWICK:
                        i2 = r + 1
                        while i2 <= sz:
                            acc_row(IX.fwI, IX.fwF, off + i2 - 1, scI, scF, sr, G, wa, wb, True)
                            mark_row(IX, off + i2 - 1)
                            i2 += i2 & (-i2)
                if G.ix_rec[ii]:
                    rec = CNT[0]
                    CNT[0] += 1
                    copy_row(RC.I, RC.F, rec, scI, scF, sr)
                    RC.t[rec] = t
                    RC.rank[rec] = r
                    RC.alive[rec] = True
                    RC.nxt[rec] = -1
                    RC.pid[rec] = p
                    RC.ix[rec] = ii
                    RC.occ[rec] = a
                    for gc in range(RC.g.shape[1]):
                        RC.g[rec, gc] = OC.g[a, gc]
                    tl = RC.tail[ii, p]
                    if tl >= 0:
                        RC.nxt[tl] = rec
                    else:
                        RC.head[ii, p] = rec
                    RC.tail[ii, p] = rec
            if x == G.end:
                if G.is_pos:
                    if G.case2 >= 0:
                        qn = CNT[1]
                        CNT[1] += 1
                        copy_row(OUT.qI, OUT.qF, qn, scI, scF, sr)
                        OUT.q_t[qn] = t
                        OUT.q_seq[qn] = OC.seq[a]
                        OUT.q_pid[qn] = p
                        OUT.q_alive[qn] = True
                        OUT.q_nxt[qn] = -1
                        tl = OUT.qt[p]
                        if tl >= 0:
                            OUT.q_nxt[tl] = qn
                        else:
                            OUT.qh[p] = qn
                        OUT.qt[p] = qn
                        acc_row(OUT.qtotI, OUT.qtotF, p, scI, scF, sr, G, wa, wb, True)
                    else:
                        gid = OUT.p_gid[p]
                        acc_row(OUT.finI, OUT.finF, gid, scI, scF, sr, G, wa, wb, True)
                        for w in range(wa, wb + 1):
                            k = w % K
                            if not is_zero(scI, sr, k * L, L) and OC.seq[a] > OUT.fin_seq[gid, k]:
                                OUT.fin_seq[gid, k] = OC.seq[a]
                else:
                    cn = CNT[2]
                    CNT[2] += 1
                    OUT.co_t[cn] = t
                    OUT.co_ls[cn] = scI[sr, nb_]
                    OUT.co_pid[cn] = p
            if Cb > 0:
                # Z += the magnitudes of the new values (bounded by count x 2**max bits)
                bmax = 0
                for w in range(wa, wb + 1):
                    k = w % K
                    for c in range(Cb):
                        bits = magnitude_bits(scI, sr, (c * K + k) * L, L)
                        if bits > bmax:
                            bmax = bits
                b = bmax + math.log2(Cb * (wb - wa + 1))
                z = Z[0]
                hi = z if z > b else b
                lo = b if z > b else z
                Z[0] = hi + math.log2(1.0 + 2.0 ** (lo - hi)) + 1e-9
        i = j
    while CNT[3] < ncc:
        if not closes_due(WC, G, IX, RC, OUT, NG, CNT, NG.cc_t[CNT[3]]):
            return _stopped(CNT, n)
        _completion(NG, CNT[3], G, WC.slot_w)
        CNT[3] += 1
    CNT[4] = n
    return n


@nb.njit(cache=True, inline="always")
def _stopped(CNT, i):
    """Stop at position ``i`` because the close buffer is full."""
    CNT[4] = i
    CNT[7] = 1
    return i


@nb.njit(cache=True, inline="always")
def _completion(NG, q, G, slot_w):
    """:func:`_apply_completion`, and the windows a case-3 block was written to marked."""
    _apply_completion(NG, q, G)
    if G.child_case[NG.cc_slot[q]] == 3:
        tc = NG.cc_t[q]
        mark_windows(slot_w, (tc - G.d) // G.s + 1, tc // G.s, G.K)


# ---------------------------------------------------------------------------- window close
@nb.njit(cache=True)
def pop_queues(OUT, NG, c2, nparts, G):
    """Case 2: drop queued END contributions older than the latest negative trend start."""
    for p in range(nparts):
        L_ = NG.bL[c2, NG.p_bucket[p, c2]]
        rec = OUT.qh[p]
        while rec >= 0 and OUT.q_t[rec] < L_:
            if OUT.q_alive[rec]:
                sub_row(OUT.qtotI, OUT.qtotF, p, OUT.qI, OUT.qF, rec, G)
                # min/max are recomputed from the surviving entries below
            OUT.q_alive[rec] = False
            rec = OUT.q_nxt[rec]
        OUT.qh[p] = rec
        if rec < 0:
            OUT.qt[p] = -1


@nb.njit(cache=True)
def queue_minmax_and_seq(OUT, nparts, k, G, seq_out):
    """Recompute the min/max of slot k of every queue total from its live entries, and the
    largest seq of a live entry with a non-zero count in slot k (per partition)."""
    K, L = G.K, G.L
    nb_ = G.Cb * K * L
    for p in range(nparts):
        for c in range(G.Cmi):
            OUT.qtotI[p, nb_ + c * K + k] = I64_MIN if G.cmi_max[c] else I64_MAX
        for c in range(G.Cmf):
            OUT.qtotF[p, G.Cf * K + c * K + k] = -np.inf if G.cmf_max[c] else np.inf
        best = -1
        rec = OUT.qh[p]
        while rec >= 0:
            if OUT.q_alive[rec] and not is_zero(OUT.qI, rec, k * L, L):
                if OUT.q_seq[rec] > best:
                    best = OUT.q_seq[rec]
                for c in range(G.Cmi):
                    col = nb_ + c * K + k
                    v = OUT.qI[rec, col]
                    if G.cmi_max[c]:
                        if v > OUT.qtotI[p, col]:
                            OUT.qtotI[p, col] = v
                    elif v < OUT.qtotI[p, col]:
                        OUT.qtotI[p, col] = v
                for c in range(G.Cmf):
                    col = G.Cf * K + c * K + k
                    v = OUT.qF[rec, col]
                    if G.cmf_max[c]:
                        if v > OUT.qtotF[p, col]:
                            OUT.qtotF[p, col] = v
                    elif v < OUT.qtotF[p, col]:
                        OUT.qtotF[p, col] = v
            rec = OUT.q_nxt[rec]
        seq_out[p] = best
