"""Device code of the GPU pattern matcher (see :mod:`replaydb.operators.gpu.pattern`).

The *check* and *propagate* steps of the operational table (:func:`advance`), the start, round,
path and garbage-collection kernels. Conditions and computation-state updates are the CPU
matcher's own functions (:func:`replaydb.operators.pattern.vm.vm_eval_node`,
:func:`replaydb.operators.pattern.ctxops.bind_update`), compiled for the device from the same
source. (The CUDA simulator swaps the ``cuda`` module per call of a device function from another
module, so device code that allocates local arrays or uses atomics is kept in this module; the
shared functions use neither.)

A partial match (PM) is one record: NFA position, partition, start time and start event, the head
of its event history (a node in the shared history arena: event, position, parent), and its
computation state (``ci``: bound-event slots, ``cf``: running counts and aggregates - the CPU
matcher's ``ctx_i``/``ctx_f`` row). A clone shares its history with the original (persistent
linked list), so cloning and moving cost O(state slots), not O(events matched).

Floating point: the shared machine's arithmetic uses non-fusing intrinsics on the device
(:mod:`replaydb.operators.exprcode.scalar`), so conditions decide exactly as on the CPU
(transcendental functions on a real device aside).
"""

from __future__ import annotations

from numba import cuda, float64, int64

from replaydb.operators.pattern.ctxops import bind_update
from replaydb.operators.pattern.vm import vm_eval_node

CI_MAX = 16
"""Bound-event slots a PM may carry on the device."""
CF_MAX = 32
"""Running-count/aggregate slots a PM may carry on the device."""
STACK_MAX = 32
"""Depth of each stack (int and float) of the device condition machine."""

STRAT_CONTIGUOUS = 0
STRAT_NEXT = 1
STRAT_ANY = 2

# counters (one device int64 array)
C_HIST = 0     # history nodes used
C_MATCH = 1    # matches recorded
C_WORK = 2     # worklist entries written
C_OVF = 3      # overflow bits: 1 history, 2 matches, 4 worklist, 8 state arrays
N_COUNTERS = 4

OVF_HIST = 1
OVF_MATCH = 2
OVF_WORK = 4
OVF_STATE = 8

@cuda.jit(device=True, inline=True)
def _copy(src_i, src_f, dst_i, dst_f, ni, nf):  # pragma: no cover - device code
    for s in range(ni):
        dst_i[s] = src_i[s]
    for s in range(nf):
        dst_f[s] = src_f[s]


@cuda.jit(device=True)
def _new_hist(g, q, parent, h_ev, h_pos, h_par, ctr):  # pragma: no cover - device code
    h = cuda.atomic.add(ctr, C_HIST, 1)
    if h >= h_ev.shape[0]:
        cuda.atomic.or_(ctr, C_OVF, OVF_HIST)
        return -1
    h_ev[h] = g
    h_pos[h] = q
    h_par[h] = parent
    return h


@cuda.jit(device=True)
def _record_match(h, i, m_hist, m_end, ctr):  # pragma: no cover - device code
    m = cuda.atomic.add(ctr, C_MATCH, 1)
    if m >= m_hist.shape[0]:
        cuda.atomic.or_(ctr, C_OVF, OVF_MATCH)
        return
    m_hist[m] = h
    m_end[m] = i


@cuda.jit(device=True)
def _push_work(q, pid, st_t, st_g, h, resume, ci, cf, ni, nf, w_pos, w_pid, w_t, w_g,
               w_hist, w_res, w_ci, w_cf, ctr):  # pragma: no cover - device code
    w = cuda.atomic.add(ctr, C_WORK, 1)
    if w >= w_pos.shape[0]:
        cuda.atomic.or_(ctr, C_OVF, OVF_WORK)
        return
    w_pos[w] = q
    w_pid[w] = pid
    w_t[w] = st_t
    w_g[w] = st_g
    w_hist[w] = h
    w_res[w] = resume
    for s in range(ni):
        w_ci[w, s] = ci[s]
    for s in range(nf):
        w_cf[w, s] = cf[s]


@cuda.jit(device=True)
def _survive(q, pid, st_t, st_g, h, ci, cf, ni, nf, s_off, s_cap, s_cnt, o_pid, o_t, o_g,
             o_hist, o_ci, o_cf, ctr):  # pragma: no cover - device code
    j = cuda.atomic.add(s_cnt, q, 1)
    if j >= s_cap[q]:
        cuda.atomic.or_(ctr, C_OVF, OVF_STATE)
        return
    x = s_off[q] + j
    o_pid[x] = pid
    o_t[x] = st_t
    o_g[x] = st_g
    o_hist[x] = h
    for s in range(ni):
        o_ci[x, s] = ci[s]
    for s in range(nf):
        o_cf[x, s] = cf[s]


@cuda.jit(device=True)
def advance(pos, pid, st_t, st_g, hist, r, ci, cf, ci2, cf2, ci3, cf3, si, sf,  # noqa: C901
            n, g0, t, epid, vmask, strategy, window, pos_var, fol_ptr, fol_to, pos_final,
            pos_has_next, prog_lo, prog_hi, p_op, p_ia, p_ib, p_fc, p_ic, ci_kind, ci_var, cf_kind,
            cf_var, cf_col, buf, dbase, h_ev, h_pos, h_par, m_hist, m_end, w_pos, w_pid, w_t,
            w_g, w_hist, w_res, w_ci, w_cf, s_off, s_cap, s_cnt, o_pid, o_t, o_g, o_hist, o_ci,
            o_cf, ctr):  # pragma: no cover - device code
    """Run one PM over events ``[r, n)`` of the batch: check, then propagate, per event.

    Check: the PM's partition; the window (``t - start > window``: drop); every outgoing
    transition (the target variable's per-event mask and its cross-event program against the
    PM's state). Propagate (the operational table): each fired transition makes a successor
    (state copied and updated, one history node, a match when the target is final); under
    contiguous the PM itself dies at every event of its partition, under skip-till-next it dies
    when some transition fired, under skip-till-any it always survives. One continuing successor
    goes on in this thread (a *move*), the others go to the worklist (*clones*) and are run from
    the next event by the next round. A PM alive at the end of the batch is written to its
    state's dense array.
    """
    ni = ci_kind.shape[0]
    nf = cf_kind.shape[0]
    ci_row = ci.reshape((1, ci.shape[0]))  # the state as the machine's one-row state table
    cf_row = cf.reshape((1, cf.shape[0]))
    cont_h = -1
    i = r
    while i < n:
        if epid[i] != pid:
            i += 1
            continue
        te = t[i]
        if window >= 0 and te - st_t > window:
            return
        g = g0 + i
        fired = 0
        cont = -1
        for k in range(fol_ptr[pos], fol_ptr[pos + 1]):
            q = fol_to[k]
            if q < 0:
                continue
            v = pos_var[q]
            if vmask[i, v] == 0:
                continue
            if prog_lo[v] < prog_hi[v] and not vm_eval_node(
                    p_op, p_ia, p_ib, p_fc, p_ic, prog_lo[v], prog_hi[v], buf, dbase, g, ci_row,
                    cf_row, ci, cf, 0, si, sf):
                continue
            fired += 1
            _copy(ci, cf, ci2, cf2, ni, nf)
            bind_update(v, g, ci_kind, ci_var, cf_kind, cf_var, cf_col, ci2, cf2, buf, dbase)
            h = _new_hist(g, q, hist, h_ev, h_pos, h_par, ctr)
            if h < 0:
                return
            if pos_final[q]:
                _record_match(h, i, m_hist, m_end, ctr)
            if pos_has_next[q]:
                if strategy != STRAT_ANY and cont < 0:
                    cont = q
                    _copy(ci2, cf2, ci3, cf3, ni, nf)
                    cont_h = h
                else:
                    _push_work(q, pid, st_t, st_g, h, i + 1, ci2, cf2, ni, nf, w_pos, w_pid,
                               w_t, w_g, w_hist, w_res, w_ci, w_cf, ctr)
        if strategy == STRAT_CONTIGUOUS or (strategy == STRAT_NEXT and fired > 0):
            if cont < 0:
                return
            pos = cont
            hist = cont_h
            _copy(ci3, cf3, ci, cf, ni, nf)
        i += 1
    _survive(pos, pid, st_t, st_g, hist, ci, cf, ni, nf, s_off, s_cap, s_cnt, o_pid, o_t, o_g,
             o_hist, o_ci, o_cf, ctr)


# --------------------------------------------------------------------------- kernels
@cuda.jit
def start_kernel(n, g0, t, epid, vmask, start, pos_var, pos_final, pos_has_next,  # pragma: no cover
                 prog_lo, prog_hi, p_op, p_ia, p_ib, p_fc, p_ic, ci_kind, ci_var, cf_kind, cf_var,
                 cf_col, init_f, buf, dbase, h_ev, h_pos, h_par, m_hist, m_end, w_pos, w_pid,
                 w_t, w_g, w_hist, w_res, w_ci, w_cf, ctr):
    """One thread per event: every first position whose variable accepts it starts a PM."""
    i = cuda.grid(1)
    if i >= n:
        return
    ci = cuda.local.array(CI_MAX, int64)
    cf = cuda.local.array(CF_MAX, float64)
    si = cuda.local.array(STACK_MAX, int64)
    sf = cuda.local.array(STACK_MAX, float64)
    ci_row = ci.reshape((1, CI_MAX))
    cf_row = cf.reshape((1, CF_MAX))
    ni = ci_kind.shape[0]
    nf = cf_kind.shape[0]
    g = g0 + i
    for k in range(start.shape[0]):
        q = start[k]
        v = pos_var[q]
        if vmask[i, v] == 0:
            continue
        for s in range(ni):
            ci[s] = -1
        for s in range(nf):
            cf[s] = init_f[s]
        if prog_lo[v] < prog_hi[v] and not vm_eval_node(
                p_op, p_ia, p_ib, p_fc, p_ic, prog_lo[v], prog_hi[v], buf, dbase, g, ci_row,
                cf_row, ci, cf, 0, si, sf):
            continue
        bind_update(v, g, ci_kind, ci_var, cf_kind, cf_var, cf_col, ci, cf, buf, dbase)
        h = _new_hist(g, q, -1, h_ev, h_pos, h_par, ctr)
        if h < 0:
            return
        if pos_final[q]:
            _record_match(h, i, m_hist, m_end, ctr)
        if pos_has_next[q]:
            _push_work(q, epid[i], t[i], g, h, i + 1, ci, cf, ni, nf, w_pos, w_pid, w_t, w_g,
                       w_hist, w_res, w_ci, w_cf, ctr)


@cuda.jit
def state_kernel(q, base, count, a_pid, a_t, a_g, a_hist, a_ci, a_cf,  # pragma: no cover
                 n, g0, t, epid, vmask, strategy, window, pos_var, fol_ptr, fol_to, pos_final,
                 pos_has_next, prog_lo, prog_hi, p_op, p_ia, p_ib, p_fc, p_ic, ci_kind, ci_var,
                 cf_kind, cf_var, cf_col, buf, dbase, h_ev, h_pos, h_par, m_hist, m_end, w_pos,
                 w_pid, w_t, w_g, w_hist, w_res, w_ci, w_cf, s_off, s_cap, s_cnt, o_pid, o_t,
                 o_g, o_hist, o_ci, o_cf, ctr):
    """The kernel of NFA state ``q``: one thread per PM of its dense array, from event 0."""
    j = cuda.grid(1)
    if j >= count:
        return
    x = base + j
    ci = cuda.local.array(CI_MAX, int64)
    cf = cuda.local.array(CF_MAX, float64)
    ci2 = cuda.local.array(CI_MAX, int64)
    cf2 = cuda.local.array(CF_MAX, float64)
    ci3 = cuda.local.array(CI_MAX, int64)
    cf3 = cuda.local.array(CF_MAX, float64)
    si = cuda.local.array(STACK_MAX, int64)
    sf = cuda.local.array(STACK_MAX, float64)
    for s in range(ci_kind.shape[0]):
        ci[s] = a_ci[x, s]
    for s in range(cf_kind.shape[0]):
        cf[s] = a_cf[x, s]
    advance(q, a_pid[x], a_t[x], a_g[x], a_hist[x], 0, ci, cf, ci2, cf2, ci3, cf3, si, sf,
            n, g0, t, epid, vmask, strategy, window, pos_var, fol_ptr, fol_to, pos_final,
            pos_has_next, prog_lo, prog_hi, p_op, p_ia, p_ib, p_fc, p_ic, ci_kind, ci_var, cf_kind,
            cf_var, cf_col, buf, dbase, h_ev, h_pos, h_par, m_hist, m_end, w_pos, w_pid, w_t,
            w_g, w_hist, w_res, w_ci, w_cf, s_off, s_cap, s_cnt, o_pid, o_t, o_g, o_hist, o_ci,
            o_cf, ctr)


@cuda.jit
def work_kernel(count, i_pos, i_pid, i_t, i_g, i_hist, i_res, i_ci, i_cf,  # pragma: no cover
                n, g0, t, epid, vmask, strategy, window, pos_var, fol_ptr, fol_to, pos_final,
                pos_has_next, prog_lo, prog_hi, p_op, p_ia, p_ib, p_fc, p_ic, ci_kind, ci_var,
                cf_kind, cf_var, cf_col, buf, dbase, h_ev, h_pos, h_par, m_hist, m_end, w_pos,
                w_pid, w_t, w_g, w_hist, w_res, w_ci, w_cf, s_off, s_cap, s_cnt, o_pid, o_t,
                o_g, o_hist, o_ci, o_cf, ctr):
    """One thread per worklist PM (started or cloned this batch), from its resume event."""
    j = cuda.grid(1)
    if j >= count:
        return
    ci = cuda.local.array(CI_MAX, int64)
    cf = cuda.local.array(CF_MAX, float64)
    ci2 = cuda.local.array(CI_MAX, int64)
    cf2 = cuda.local.array(CF_MAX, float64)
    ci3 = cuda.local.array(CI_MAX, int64)
    cf3 = cuda.local.array(CF_MAX, float64)
    si = cuda.local.array(STACK_MAX, int64)
    sf = cuda.local.array(STACK_MAX, float64)
    for s in range(ci_kind.shape[0]):
        ci[s] = i_ci[j, s]
    for s in range(cf_kind.shape[0]):
        cf[s] = i_cf[j, s]
    advance(i_pos[j], i_pid[j], i_t[j], i_g[j], i_hist[j], i_res[j], ci, cf, ci2, cf2, ci3, cf3,
            si, sf, n, g0, t, epid, vmask, strategy, window, pos_var, fol_ptr, fol_to,
            pos_final, pos_has_next, prog_lo, prog_hi, p_op, p_ia, p_ib, p_fc, p_ic, ci_kind,
            ci_var, cf_kind, cf_var, cf_col, buf, dbase, h_ev, h_pos, h_par, m_hist, m_end, w_pos, w_pid, w_t,
            w_g, w_hist, w_res, w_ci, w_cf, s_off, s_cap, s_cnt, o_pid, o_t, o_g, o_hist, o_ci,
            o_cf, ctr)


@cuda.jit
def path_len_kernel(m_hist, count, h_par, lens):  # pragma: no cover - device code
    """Length of every recorded match (walk its history to the start)."""
    j = cuda.grid(1)
    if j >= count:
        return
    c = 0
    h = m_hist[j]
    while h >= 0:
        c += 1
        h = h_par[h]
    lens[j] = c


@cuda.jit
def path_write_kernel(m_hist, count, h_ev, h_pos, h_par, offs, lens, out_ev,  # pragma: no cover
                      out_pos):
    """Every match's events and positions, first to last, at its offset."""
    j = cuda.grid(1)
    if j >= count:
        return
    w = offs[j] + lens[j] - 1
    h = m_hist[j]
    while h >= 0:
        out_ev[w] = h_ev[h]
        out_pos[w] = h_pos[h]
        w -= 1
        h = h_par[h]


@cuda.jit
def gc_mark_kernel(pm_hist, count, h_par, mark):  # pragma: no cover - device code
    """Mark the history nodes live PMs reach (a walk stops at a node marked before)."""
    j = cuda.grid(1)
    if j >= count:
        return
    h = pm_hist[j]
    while h >= 0 and mark[h] == 0:
        mark[h] = 1
        h = h_par[h]


@cuda.jit
def gc_compact_kernel(n_nodes, mark, newid, h_ev, h_pos, h_par, n_ev, n_pos,  # pragma: no cover
                      n_par):
    """Move marked nodes to their new (order-preserving) ids, parents remapped."""
    x = cuda.grid(1)
    if x >= n_nodes or mark[x] == 0:
        return
    y = newid[x]
    n_ev[y] = h_ev[x]
    n_pos[y] = h_pos[x]
    p = h_par[x]
    n_par[y] = newid[p] if p >= 0 else -1


@cuda.jit
def gc_remap_kernel(pm_hist, count, newid):  # pragma: no cover - device code
    j = cuda.grid(1)
    if j < count:
        pm_hist[j] = newid[pm_hist[j]]


@cuda.jit
def min_kernel(a, count, out):  # pragma: no cover - device code
    """``out[0] = min(out[0], a[:count])`` (the oldest event a live PM references)."""
    j = cuda.grid(1)
    if j < count:
        cuda.atomic.min(out, 0, a[j])

