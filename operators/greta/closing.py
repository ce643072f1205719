"""Window closes of the GRETA main graph, compiled: which windows hold values, their rows, and
clearing their slots.

A window's values live in slot ``w mod K`` of every value table (:mod:`.kernel`). A slot is
*dirty* once a kernel run wrote a value of its window: ``slot_w[k]`` is that window's id,
:data:`CLEAN` otherwise. Between a window's opening and its close the slot belongs to it alone
(an event of window ``w + K`` comes at or after ``w``'s end, and windows are closed before the
events at or after their end are computed), so a clean slot at a window's close means the
window holds nothing: no row, nothing to clear. Closing a dirty window copies out the rows of
its groups with a nonzero count and resets its slot everywhere (exact limbs and float sums to
zero, min/max to their identity, no last sequence number, no negation block). In the index
tables, which hold a row per key of every partition, only the rows the kernel wrote are reset
(:func:`clear_index_slot`), so a close costs what its window wrote.

:func:`closes_due` runs inside :func:`~replaydb.operators.greta.kernel.run_graph`, so the
windows that close between the sub-chunks of one preparation cost no call from Python;
:func:`close_through` is also what a caller uses between kernel runs. Both stop (answer False)
before a window whose rows the output buffer could not take: the caller drains it and resumes.

The bundle ``WC`` (:class:`~replaydb.operators.greta.runtime.GraphState.closes`): close markers
``ct``/``cw`` (before anything at time ``>= ct[i]`` is computed, close the windows ``<= cw[i]``),
``slot_w``, per slot the columns of its values (``icols``: exact limbs then integer min/max, the
first ``L`` the count; ``fcols``: float sums then float min/max, reset to ``f_fill``) and the
other columns of its reset (``bigc``, ``mmic`` with ``mmi_fill``), ``ngroups``, ``nparts``, and
the output
buffer ``o_w`` (window), ``o_g`` (group), ``o_I``, ``o_F``, ``o_seq``. ``CNT[5]`` counts the
buffer's rows, ``CNT[6]`` the markers done.
"""

from __future__ import annotations

import numba as nb
import numpy as np

CLEAN = np.iinfo(np.int64).min
"""``slot_w`` of a slot no run wrote since its last close."""


@nb.njit(cache=True)
def nonzero_rows(vi, ncols):
    """Whether each row of ``vi`` has a nonzero value among its first ``ncols`` columns.
    O(rows x ncols)."""
    n = vi.shape[0]
    out = np.zeros(n, np.bool_)
    for r in range(n):
        for c in range(ncols):
            if vi[r, c] != 0:
                out[r] = True
                break
    return out


@nb.njit(cache=True, inline="always")
def _clear_row(vi, vf, r, big_cols, mmi_cols, mmi_fill, f_cols, f_fill):
    """Reset the given columns of row ``r``: exact limbs and float sums to zero, min/max
    columns to their identity."""
    for c in big_cols:
        vi[r, c] = 0
    for j in range(len(mmi_cols)):
        vi[r, mmi_cols[j]] = mmi_fill[j]
    for j in range(len(f_cols)):
        vf[r, f_cols[j]] = f_fill[j]


@nb.njit(cache=True, inline="always")
def clear_columns(vi, vf, n, big_cols, mmi_cols, mmi_fill, f_cols, f_fill):
    """Reset the given columns of the first ``n`` rows (:func:`_clear_row`). One pass over the
    rows (the columns of one window slot are scattered across a row, so clearing them column
    by column would stride over the array once per column)."""
    for r in range(min(n, vi.shape[0], vf.shape[0])):
        _clear_row(vi, vf, r, big_cols, mmi_cols, mmi_fill, f_cols, f_fill)


@nb.njit(cache=True, inline="always")
def mark_row(IX, r):
    """Row ``r`` of the index tables is written: listed for :func:`clear_index_slot` (once)."""
    if IX.dmark[r] == 0:
        IX.dmark[r] = 1
        n = IX.dcnt[0]
        IX.drow[n] = r
        IX.dcnt[0] = n + 1


@nb.njit(cache=True, inline="always")
def clear_index_slot(IX, G, k, bc, mc, mf, fc, ff):
    """Reset slot ``k`` in the index tables: every row when the slot was dirty as the view was
    made (``IX.dcnt[1 + k]``: rows written outside this view may hold its values), else only
    the rows written since (``IX.drow[:IX.dcnt[0]]``, :func:`mark_row`). A sparse window then
    costs its own rows, not the tables' (every partition's keys).

    Sound because a row the kernel never wrote through this view holds, in a slot that was
    clean as the view was made, the zeros that slot's last clear left (or the rows' initial
    zeros). Once every slot is clean again, every row is zero in every slot and the list
    starts over (:func:`forget_rows_when_clean`). O(rows listed), or O(rows) for a first
    close."""
    if IX.dcnt[1 + k] != 0:
        clear_columns(IX.ptI, IX.ptF, IX.ptI.shape[0], bc, mc, mf, fc, ff)
        if not G.fw_in_pt:
            clear_columns(IX.fwI, IX.fwF, IX.fwI.shape[0], bc, mc, mf, fc, ff)
        IX.dcnt[1 + k] = 0
    else:
        separate = not G.fw_in_pt and IX.fwI.shape[0] > 0  # Fenwick rows of their own
        for q in range(IX.dcnt[0]):
            r = IX.drow[q]
            _clear_row(IX.ptI, IX.ptF, r, bc, mc, mf, fc, ff)
            if separate:
                _clear_row(IX.fwI, IX.fwF, r, bc, mc, mf, fc, ff)


@nb.njit(cache=True, inline="always")
def forget_rows_when_clean(IX, slot_w):
    """Empty the list of written rows once every slot is clean (:func:`clear_index_slot`):
    then every row is zero in every slot. O(K + rows listed)."""
    for s in range(slot_w.shape[0]):
        if slot_w[s] != CLEAN or IX.dcnt[1 + s] != 0:
            return
    for q in range(IX.dcnt[0]):
        IX.dmark[IX.drow[q]] = 0
    IX.dcnt[0] = 0


@nb.njit(cache=True, inline="always")
def mark_windows(slot_w, wa, wb, K):
    """Windows ``wa..wb`` were written."""
    for w in range(wa, wb + 1):
        slot_w[w % K] = w


@nb.njit(cache=True, inline="always")
def _emit_rows(WC, OUT, k, w, L, CNT):
    """Copy the rows of window ``w`` (slot ``k``) whose count is nonzero into the buffer."""
    ic = WC.icols[k]
    fc = WC.fcols[k]
    nz_cols = min(L, ic.shape[0])
    for g in range(WC.ngroups):
        nz = False
        for c in range(nz_cols):
            if OUT.finI[g, ic[c]] != 0:
                nz = True
                break
        if not nz:
            continue
        r = CNT[5]
        CNT[5] += 1
        WC.o_w[r] = w
        WC.o_g[r] = g
        for c in range(ic.shape[0]):
            WC.o_I[r, c] = OUT.finI[g, ic[c]]
        for c in range(fc.shape[0]):
            WC.o_F[r, c] = OUT.finF[g, fc[c]]
        WC.o_seq[r] = OUT.fin_seq[g, k]


@nb.njit(cache=True, inline="always")
def _clear_slot(WC, G, IX, RC, OUT, NG, k, CNT):
    """Reset slot ``k`` in every value table (the rows in use) and mark it clean (the Fenwick
    rows once: they are the point rows when ``G.fw_in_pt``)."""
    bc, mc, fc = WC.bigc[k], WC.mmic[k], WC.fcols[k]
    mf, ff = WC.mmi_fill, WC.f_fill
    clear_index_slot(IX, G, k, bc, mc, mf, fc, ff)
    clear_columns(RC.I, RC.F, CNT[0], bc, mc, mf, fc, ff)
    clear_columns(OUT.qI, OUT.qF, CNT[1], bc, mc, mf, fc, ff)
    clear_columns(OUT.qtotI, OUT.qtotF, WC.nparts, bc, mc, mf, fc, ff)
    clear_columns(OUT.finI, OUT.finF, WC.ngroups, bc, mc, mf, fc, ff)
    for g in range(OUT.fin_seq.shape[0]):
        OUT.fin_seq[g, k] = -1
    for c in range(NG.blk.shape[0]):
        for b in range(NG.blk.shape[1]):
            NG.blk[c, b, k] = 0
    WC.slot_w[k] = CLEAN
    forget_rows_when_clean(IX, WC.slot_w)


@nb.njit(cache=True, inline="always")
def close_through(WC, G, IX, RC, OUT, NG, CNT, wid):
    """Close the dirty windows with id ``<= wid``, oldest first: their rows into the buffer,
    their slots cleared. False (and that window untouched) when the buffer has no room for
    another window's rows (``G``: the kernel's plan tuple). O(K) per window closed plus its
    rows and the tables' rows."""
    K = G.K
    while True:
        k = -1
        w = CLEAN
        for s in range(K):
            ws = WC.slot_w[s]
            if ws != CLEAN and ws <= wid and (k < 0 or ws < w):
                k = s
                w = ws
        if k < 0:
            return True
        if CNT[5] + WC.ngroups > WC.o_w.shape[0]:
            return False
        _emit_rows(WC, OUT, k, w, G.L, CNT)
        _clear_slot(WC, G, IX, RC, OUT, NG, k, CNT)


@nb.njit(cache=True, inline="always")
def closes_due(WC, G, IX, RC, OUT, NG, CNT, t):
    """Carry out the markers due before time ``t`` (``ct <= t``), in order; False when the
    buffer filled (the marker stays due)."""
    while CNT[6] < WC.ct.shape[0] and WC.ct[CNT[6]] <= t:
        if not close_through(WC, G, IX, RC, OUT, NG, CNT, WC.cw[CNT[6]]):
            return False
        CNT[6] += 1
    return True
