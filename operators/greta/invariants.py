"""Structural invariants of a GRETA graph's state, checked by the tests after every step.

:func:`check_graph`: the partition keyspace is dense; each index universe is grouped by
partition with strictly ascending keys inside one; a Fenwick tree equals the tree rebuilt from
its point rows; exact limbs are normalized; a slot no kernel run wrote since its last close
(:mod:`.closing`) holds no count anywhere; each (index, partition) record list is in time order
and reaches exactly its live records; a case-2 queue total equals the sum of its live entries.
O(state).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from replaydb.operators.greta import kernel as kn
from replaydb.operators.greta.closing import CLEAN
from replaydb.operators.greta.plan import FENWICK, SCAN


def check_graph(gs: Any) -> None:
    """Assert the invariants of :class:`~replaydb.operators.greta.runtime.GraphState` ``gs``."""
    g = gs.g
    P = len(gs.parts)
    assert len(gs.parts.index) == P
    for key, pid in gs.parts.index.items():
        assert gs.parts.keys[pid] == key
    assert gs.ptI.shape[0] == gs.ubase[-1] == gs.ptF.shape[0]
    gc = gs.gc(0.0, 1)
    for ii, ix in enumerate(g.indexes):
        if ix.kind == SCAN:
            continue
        u_pid, u_key = gs.u_pid[ii], gs.u_key[ii]
        assert len(u_pid) == len(u_key) == gs.ubase[ii + 1] - gs.ubase[ii]
        assert np.all(np.diff(u_pid) >= 0), "universe not grouped by partition"
        for p in range(P):
            off, sz = int(gs.off[ii, p]), int(gs.sz[ii, p])
            if sz == 0:
                continue
            lo = off - gs.ubase[ii]
            assert np.all(u_pid[lo: lo + sz] == p)
            keys = u_key[lo: lo + sz]
            if len(keys) > 1:
                assert np.all(keys[1:] > keys[:-1]), "keys not ascending within a partition"
            gk = gs.u_gk[ii]
            assert gk is not None and np.all(np.isin(keys, gk))
            if ix.kind == FENWICK and not gs.fw_in_pt:
                fwI, fwF = gs.fresh_rows(sz)
                ptI = gs.ptI[off: off + sz].copy()
                ptF = gs.ptF[off: off + sz].copy()
                kn.build_fenwick(fwI, fwF, ptI, ptF, 0, sz, gc)
                assert np.array_equal(fwI, gs.fwI[off: off + sz]), "Fenwick out of date"
                assert np.allclose(fwF, gs.fwF[off: off + sz], equal_nan=True)
        if gs.Cb:  # limbs are normalized
            nbo = gs.Cb * gs.K * gs.L
            assert np.all((gs.ptI[:, :nbo] >= 0) & (gs.ptI[:, :nbo] <= kn.MASK))
    # record lists: per (index, partition), in time order, reaching exactly the live records
    seen = np.zeros(gs.r_n, bool)
    for ii in range(gs.nI):
        for p in range(min(P, gs.r_head.shape[1])):
            rec, last_t, prev = int(gs.r_head[ii, p]), None, -1
            while rec >= 0:
                assert gs.r_ix[rec] == ii and gs.r_pid[rec] == p
                assert last_t is None or gs.r_t[rec] >= last_t
                last_t, prev = gs.r_t[rec], rec
                seen[rec] = True
                rec = int(gs.r_nxt[rec])
            assert prev == gs.r_tail[ii, p]
    assert np.all(seen | ~gs.r_alive[: gs.r_n])
    if g.case2 is not None and gs.Cb:
        tot = np.zeros((P, gs.K * gs.L), np.int64)
        live = np.flatnonzero(gs.q_alive[: gs.q_n])
        np.add.at(tot, gs.q_pid[live], gs.qI[live, : gs.K * gs.L])
        from replaydb.operators.greta.limbrows import normalize_limbs
        assert np.array_equal(normalize_limbs(tot, gs.L),
                              gs.qtotI[:P, : gs.K * gs.L]), "queue totals"
    if gs.is_main and gs.Cb:
        for k in range(gs.K):
            if gs.slot_w[k] != CLEAN:
                continue
            cols = gs.slot_int_columns(k)[: gs.L]
            for vi, n in ((gs.ptI, gs.ptI.shape[0]), (gs.rI, gs.r_n), (gs.qI, gs.q_n),
                          (gs.finI, len(gs.groups))):
                assert not vi[:n][:, cols].any(), f"slot {k} is clean but holds counts"
