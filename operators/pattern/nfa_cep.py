"""All-runs matcher (dissertation Defs. 2.15-2.18, SASE+ NFA^b) with a shared run graph.

Semantics - the operational table of the dissertation (Table 4.1), applied to every partial match
(PM, a run waiting at automaton position ``p`` after binding its last event) for each arriving
event ``e`` of the PM's partition:

=====================  ==============  ==============  =====================
check result           contiguous      skip-till-next  skip-till-any
=====================  ==============  ==============  =====================
window exceeded        drop            drop            drop
no transition          drop            ignore          ignore
self transition        add e           add e           clone PM; add e
forward transition     move; add e     move; add e     clone; move; add e
=====================  ==============  ==============  =====================

Generalized to every automaton (alternation, nested quantifiers): a PM at ``p`` has a transition
to every ``q`` in ``follow[p]`` whose variable accepts ``e`` (local condition, cross-event
condition against the PM's state, and no negated event seen on the edge since the PM's last
event). Each transition yields a successor (a *branch*; several transitions - take/proceed
nondeterminism - yield several). The PM itself survives only under skip-till-any, or under
skip-till-next when it had no transition. Every event accepted by a first position starts a PM;
a successor at a final position is a match (reported at ``e``: output time ``e.t``), and it stays
a PM if its position can continue (``A B+``). Window: ``last.t - first.t <= window``.

Decisions where the dissertation is silent or inconsistent:

* the operational table is normative; Def. 2.16 read literally would also accept ``<a1, c1>``
  in Fig. 2.6 (it skips ``b1``, which satisfies ``B*``), the table - and the figure - do not;
* Fig. 2.6 lists ``<a1, c2>`` twice and omits ``<a2, c2>``: the nine distinct subsequences are
  reported (the table's result);
* Def. 2.15 assumes strictly increasing timestamps; events are ordered by ``(t, seq)`` (Def. 2.5:
  ties broken by a sequence number), so a match may contain events with equal ``t``;
* a match is an accepting run, i.e. a (subsequence, variable per event) pair; when an ambiguous
  pattern (``A | A B?``) reaches the same pair along two automaton paths it is reported once.

Sharing (memory proportional to the buffer, not to the number of PMs): a PM is a *path* in a
graph whose nodes are (event, position, computation state). Successors of different PMs that
bind the same event at the same position with equal state are one node with several predecessor
edges (SASE+ run merging); a node records the latest start time of its paths (for expiry) and
whether it starts paths itself. Matches are enumerated at completion by walking predecessor
edges backwards, pruning edges whose latest start is outside the window, so the walk is
proportional to its output. A "PM" in the table is a frontier node; the strategies act on nodes,
which is exact because all paths through a node behave alike (same position and state; window
expiry is checked per path at enumeration).

Complexity per event of partition ``P``: O(|frontier(P)| * out-degree * condition cost) plus
O(output) for enumeration; memory O(nodes + edges) of runs within the window.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from replaydb.operators.pattern.ctxops import (
    bind_update_row,
    copy_row,
    init_row,
    row_hash,
    rows_equal,
)
from replaydb.operators.pattern.vm import vm_eval, vm_eval_node

STRAT_CONTIGUOUS = 0
STRAT_NEXT = 1
STRAT_ANY = 2
MIN_T = np.iinfo(np.int64).min


@njit(cache=True, inline="always")
def _make_node(q, src, v, g, te, new_lo, stamp, cnt, n_ev, n_pos, n_t, n_lstart, n_neg, n_edge,
               n_isstart, ctx_i, ctx_f, init_f, ci_kind, ci_var, cf_kind, cf_var, cf_col, rows,
               base, ht, ht_gen):
    nid = cnt[0]
    if src >= 0:
        copy_row(nid, src, ctx_i, ctx_f)
    else:
        init_row(nid, ctx_i, ctx_f, init_f)
    bind_update_row(nid, v, g, ci_kind, ci_var, cf_kind, cf_var, cf_col, ctx_i, ctx_f, rows,
                base)
    mask = ht.shape[0] - 1
    h = row_hash(q, nid, ctx_i) & mask
    while ht_gen[h] == stamp:
        m = ht[h]
        if n_pos[m] == q and rows_equal(m, nid, ctx_i, ctx_f):
            return m
        h = (h + 1) & mask
    ht_gen[h] = stamp
    ht[h] = nid
    n_ev[nid] = g
    n_pos[nid] = q
    n_t[nid] = te
    n_lstart[nid] = MIN_T
    n_neg[nid] = 0
    n_edge[nid] = -1
    n_isstart[nid] = 0
    cnt[0] = nid + 1
    return nid


@njit(cache=True, error_model="numpy")
def cep_run(i0, n, g0, pid, t, vmask, startable, strategy, window,  # noqa: C901
            pos_var, start, fol_ptr, fol_to, fol_neg, pos_final, pos_has_next, pos_negmask,
            neg_var, prog_lo, prog_hi, p_op, p_ia, p_ib, p_fc, p_ic, ci_kind, ci_var, cf_kind,
            cf_var, cf_col, init_f, rows, base, n_ev, n_pos, n_t, n_lstart, n_neg, n_edge,
            n_isstart, ctx_i, ctx_f, e_src, e_next, fp, f_off, f_len, f_cap, out_node, cnt, maxdeg,
            ht, ht_gen, ci0, si, sf, cand_node, cand_k, cand_ok, alive, sel):
    """Process events ``[i0, n)`` of a batch; returns the index where it stopped.

    Stops early (returns ``i < n``) when an arena may be too small for event ``i``; the caller
    grows or collects and calls again from ``i``. ``cnt`` = [nodes, edges, pool end, outputs,
    hash stamp]. Per event: (A) collect the (partial match, option) pairs whose per-event
    condition holds, (B) run each variable's cross-event program over all its pairs at once
    (:func:`vm_eval`; ``ci0`` is the unset int state of a starting run, ``si``/``sf`` scratch
    stacks for ``cand_node``'s capacity of candidates), (C) apply the operational table in
    frontier order. ``p_op`` None (no cross-event condition) compiles a specialization without
    the machine: Numba prunes the ``p_op is not None`` branches by the argument's type.
    """
    nstart = start.shape[0]
    nneg = neg_var.shape[0]
    nvars = prog_lo.shape[0]
    for i in range(i0, n):
        p = pid[i]
        flen = f_len[p]
        if flen == 0 and not startable[i]:
            continue
        need = flen * maxdeg + nstart
        if (cnt[0] + need > n_ev.shape[0] or cnt[1] + need > e_src.shape[0]
                or cnt[2] + 2 * (flen + need) + 8 > fp.shape[0]
                or cnt[3] + need > out_node.shape[0] or 2 * need + 2 > ht.shape[0]
                or need > cand_node.shape[0] or flen > alive.shape[0]):
            return i
        g = g0 + i
        te = t[i]
        cnt[4] += 1
        stamp = cnt[4]
        new_lo = cnt[0]
        for k in range(nstart):
            q = start[k]
            v = pos_var[q]
            if not vmask[i, v]:
                continue
            if p_op is not None and prog_lo[v] < prog_hi[v] and not vm_eval_node(
                    p_op, p_ia, p_ib, p_fc, p_ic, prog_lo[v], prog_hi[v], rows, base, g, ctx_i,
                    ctx_f, ci0, init_f, -1, si, sf):
                continue
            nid = _make_node(q, -1, v, g, te, new_lo, stamp, cnt, n_ev, n_pos, n_t, n_lstart,
                             n_neg, n_edge, n_isstart, ctx_i, ctx_f, init_f, ci_kind, ci_var,
                             cf_kind, cf_var, cf_col, rows, base, ht, ht_gen)
            n_isstart[nid] = 1
            if te > n_lstart[nid]:
                n_lstart[nid] = te
        off = f_off[p]
        # (A) candidate (partial match, option) pairs passing the per-event conditions
        nc = 0
        for j in range(flen):
            nd = fp[off + j]
            if window >= 0 and te - n_lstart[nd] > window:
                alive[j] = False
                continue
            alive[j] = True
            ps = n_pos[nd]
            for k in range(fol_ptr[ps], fol_ptr[ps + 1]):
                q = fol_to[k]
                if q < 0 or (fol_neg[k] & n_neg[nd]) != 0 or not vmask[i, pos_var[q]]:
                    continue
                cand_node[nc] = nd
                cand_k[nc] = k
                cand_ok[nc] = True
                nc += 1
        # (B) cross-event conditions, one program run per variable over all its pairs
        if p_op is not None and nc > 0:
            for v in range(nvars):
                if prog_lo[v] == prog_hi[v]:
                    continue
                m = 0
                for c in range(nc):
                    if pos_var[fol_to[cand_k[c]]] == v:
                        sel[m] = c
                        m += 1
                if m > 0:
                    vm_eval(p_op, p_ia, p_ib, p_fc, p_ic, prog_lo[v], prog_hi[v], rows, base, g,
                            ctx_i, ctx_f, ci0, init_f, cand_node, sel, m, si, sf, cand_ok)
        # (C) the operational table, in frontier order
        w = cnt[2]
        nw = 0
        c = 0
        for j in range(flen):
            if not alive[j]:
                continue
            nd = fp[off + j]
            fired = False
            while c < nc and cand_node[c] == nd:
                if cand_ok[c]:
                    q = fol_to[cand_k[c]]
                    v = pos_var[q]
                    nid = _make_node(q, nd, v, g, te, new_lo, stamp, cnt, n_ev, n_pos, n_t,
                                     n_lstart, n_neg, n_edge, n_isstart, ctx_i, ctx_f, init_f,
                                     ci_kind, ci_var, cf_kind, cf_var, cf_col, rows, base, ht,
                                     ht_gen)
                    ec = cnt[1]
                    e_src[ec] = nd
                    e_next[ec] = n_edge[nid]
                    n_edge[nid] = ec
                    cnt[1] = ec + 1
                    if n_lstart[nd] > n_lstart[nid]:
                        n_lstart[nid] = n_lstart[nd]
                    fired = True
                c += 1
            if strategy == STRAT_ANY or (strategy == STRAT_NEXT and not fired):
                nm = pos_negmask[n_pos[nd]]
                if nm != 0:
                    for kk in range(nneg):
                        bit = np.int64(1) << kk
                        if (nm & bit) != 0 and (n_neg[nd] & bit) == 0:
                            v = neg_var[kk]
                            if vmask[i, v] and (p_op is None or prog_lo[v] == prog_hi[v]
                                                or vm_eval_node(p_op, p_ia, p_ib, p_fc, p_ic,
                                                                prog_lo[v], prog_hi[v], rows, base,
                                                                g, ctx_i, ctx_f, ci0, init_f, nd,
                                                                si, sf)):
                                n_neg[nd] |= bit
                fp[w + nw] = nd
                nw += 1
        for nid in range(new_lo, cnt[0]):
            q = n_pos[nid]
            if pos_final[q]:
                out_node[cnt[3]] = nid
                cnt[3] += 1
            if pos_has_next[q]:
                fp[w + nw] = nid
                nw += 1
        if nw <= f_cap[p]:
            for j in range(nw):
                fp[off + j] = fp[w + j]
        else:
            f_off[p] = w
            f_cap[p] = 2 * nw
            cnt[2] = w + 2 * nw
        f_len[p] = nw
    return n


@njit(cache=True)
def cep_enumerate(finals, nf, window, n_ev, n_pos, n_t, n_lstart, n_edge,  # noqa: C901
                  n_isstart, e_src, e_next, out_ev, out_pos, out_off, st_node, st_edge,
                  max_m=-1):
    """All paths (matches) ending at the final nodes ``finals[:nf]``.

    Writes match ``m``'s events (first to last) to ``out_ev[out_off[m]:out_off[m+1]]`` and
    positions to ``out_pos``. Returns (matches, total events, status): status 0 when done, 1 when
    an output array was too small (the counts then say how much is needed), 2 when the walk
    stack was too small, 3 when more than ``max_m`` matches were found (``max_m >= 0``; the walk
    stops there, so a skip-till-any-match blow-up of 2^k paths costs O(max_m), not O(2^k)).
    O(output) thanks to window pruning on each predecessor's latest start.
    """
    total = 0
    m = 0
    out_off[0] = 0
    cap = out_ev.shape[0]
    mcap = out_off.shape[0] - 1
    over = False
    for fi in range(nf):
        f = finals[fi]
        tend = n_t[f]
        depth = 0
        st_node[0] = f
        st_edge[0] = -2
        while depth >= 0:
            nd = st_node[depth]
            if st_edge[depth] == -2:
                st_edge[depth] = n_edge[nd]
                if n_isstart[nd] == 1 and (window < 0 or tend - n_t[nd] <= window):
                    L = depth + 1
                    if total + L > cap or m + 1 > mcap:
                        over = True
                    if not over:
                        for d in range(depth, -1, -1):
                            out_ev[total] = n_ev[st_node[d]]
                            out_pos[total] = n_pos[st_node[d]]
                            total += 1
                        out_off[m + 1] = total
                    else:
                        total += L
                    m += 1
                    if max_m >= 0 and m > max_m:
                        return m, total, 3
            e = st_edge[depth]
            if e < 0:
                depth -= 1
                continue
            st_edge[depth] = e_next[e]
            src = e_src[e]
            if window >= 0 and tend - n_lstart[src] > window:
                continue
            depth += 1
            if depth >= st_node.shape[0]:
                return m, total, 2
            st_node[depth] = src
            st_edge[depth] = -2
    return m, total, 1 if over else 0


@njit(cache=True)
def cep_collect(now_t, window, n_nodes, n_edges, n_ev, n_pos, n_t, n_lstart, n_neg,  # noqa: C901
                n_edge, n_isstart, ctx_i, ctx_f, e_src, e_next, fp, f_off, f_len, f_cap,
                n_parts, new_src, new_next, new_fp, new_off, new_cap, remap, stack):
    """Garbage-collect the run graph: keep nodes reachable from the frontier (window-live only).

    Compacts nodes in place and edges into ``new_src``/``new_next`` preserving their order (so
    results stay deterministic) and rewrites the frontier pool into ``new_fp``. Returns (nodes, edges, pool end, min event index
    still referenced or -1).
    """
    for x in range(n_nodes):
        remap[x] = -1
    sp = 0
    # roots: frontier nodes that are still inside the window
    for p in range(n_parts):
        for j in range(f_len[p]):
            nd = fp[f_off[p] + j]
            if window >= 0 and now_t - n_lstart[nd] > window:
                continue
            if remap[nd] == -1:
                remap[nd] = 0
                stack[sp] = nd
                sp += 1
    while sp > 0:
        sp -= 1
        nd = stack[sp]
        e = n_edge[nd]
        while e >= 0:
            src = e_src[e]
            if remap[src] == -1 and not (window >= 0 and now_t - n_lstart[src] > window):
                remap[src] = 0
                stack[sp] = src
                sp += 1
            e = e_next[e]
    # new ids in old order
    k = 0
    for x in range(n_nodes):
        if remap[x] == 0:
            remap[x] = k
            k += 1
    # edges: rebuild per node preserving list order
    ne = 0
    for x in range(n_nodes):
        if remap[x] < 0:
            continue
        e = n_edge[x]
        head = -1
        prev = -1
        while e >= 0:
            src = e_src[e]
            if remap[src] >= 0 and not (window >= 0 and now_t - n_lstart[src] > window):
                new_src[ne] = remap[src]
                new_next[ne] = -1
                if prev >= 0:
                    new_next[prev] = ne
                else:
                    head = ne
                prev = ne
                ne += 1
            e = e_next[e]
        n_edge[x] = head
    # compact nodes
    min_ev = -1
    for x in range(n_nodes):
        y = remap[x]
        if y < 0:
            continue
        n_ev[y] = n_ev[x]
        n_pos[y] = n_pos[x]
        n_t[y] = n_t[x]
        n_lstart[y] = n_lstart[x]
        n_neg[y] = n_neg[x]
        n_edge[y] = n_edge[x]
        n_isstart[y] = n_isstart[x]
        for s in range(ctx_i.shape[1]):
            ctx_i[y, s] = ctx_i[x, s]
            if ctx_i[y, s] >= 0 and (min_ev < 0 or ctx_i[y, s] < min_ev):
                min_ev = ctx_i[y, s]
        for s in range(ctx_f.shape[1]):
            ctx_f[y, s] = ctx_f[x, s]
        if min_ev < 0 or n_ev[y] < min_ev:
            min_ev = n_ev[y]
    # frontier pool
    pe = 0
    for p in range(n_parts):
        new_off[p] = pe
        c = 0
        for j in range(f_len[p]):
            nd = fp[f_off[p] + j]
            if window >= 0 and now_t - n_lstart[nd] > window:
                continue
            new_fp[pe + c] = remap[nd]
            c += 1
        f_len[p] = c
        new_cap[p] = c + 2 if c > 0 else 0
        pe += new_cap[p]
    return k, ne, pe, min_ev
