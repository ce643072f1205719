"""SQL:2016 MATCH_RECOGNIZE matcher: preference-ordered threads per match attempt (a Pike VM).

Semantics implemented (the documented subset, see also
:mod:`replaydb.planner.lang.match_recognize`): within each partition rows are matched
contiguously. A *match attempt* starts at every row; the attempt's result is its most preferred
match (SQL:2016 preferment: alternation left to right, greedy quantifiers prefer more
iterations, reluctant ones fewer - the order of the automaton's option lists). Attempts are
resolved in row order; after a match, AFTER MATCH SKIP decides where the next attempt may start
(PAST LAST ROW: after the match; TO NEXT ROW: the row after the match's first row; TO FIRST/LAST
v: the first/last row bound to ``v``, an error if ``v`` bound no row or that row is the match's
first row - the standard's exceptions). Attempts starting at skipped rows are discarded. A
pattern that can match zero rows has ACCEPT in its start list: an attempt reaching it has the
empty match as its result unless a more preferred thread matches; after an empty match the next
attempt starts at the next row. With WITH UNMATCHED ROWS every row not skipped starts an
attempt, and a failed one reports its row when no earlier match covered it.

Running all attempts of a partition side by side (instead of one after another) keeps the
operator online: each event is read once. An attempt is a list of threads (partial matches, most
preferred first); on each row every thread tries its options in order; reaching ACCEPT records
the thread's match and cuts every less preferred thread; a thread equal to a more preferred one
(same position and computation state) is dropped because it can only produce less preferred
matches. An attempt ends when it has no threads (or at end of input, where the first thread that
may accept wins) and WITHIN (``last.t - first.t <= window``) bounds it.

Output order: matches are reported when resolved, i.e. in the order of the event whose arrival
resolved them (ties: row order of their partition); at end of input the remaining ones come out
partition by partition in order of each partition's first event.

Complexity per row: O(live threads of the row's partition x out-degree x condition cost).
"""

from __future__ import annotations

from numba import njit

from replaydb.operators.pattern.automaton import ACCEPT_END
from replaydb.operators.pattern.ctxops import (
    bind_update_row,
    copy_row,
    init_row,
    row_hash,
    rows_equal,
)
from replaydb.operators.pattern.vm import vm_eval_node

SKIP_PAST_LAST = 0
SKIP_NEXT_ROW = 1
SKIP_TO_FIRST = 2
SKIP_TO_LAST = 3

NO_MATCH = -1
EMPTY_MATCH = -2   # an attempt's best match / a reported match: the empty match at its row
UNMATCHED_ROW = -3  # a reported row that is in no match (WITH UNMATCHED ROWS)

REPORT_UNMATCHED = 1  # ``modes`` bit: WITH UNMATCHED ROWS
OMIT_EMPTY = 2        # ``modes`` bit: empty matches are numbered but not reported
EMPTY_AT_FIRST = 4    # ``modes`` bit: an attempt at a partition's first row may match empty
EMPTY_AT_OTHER = 8    # ``modes`` bit: an attempt at any other row may match empty
EVERY_ROW = REPORT_UNMATCHED | EMPTY_AT_FIRST | EMPTY_AT_OTHER
"""``modes`` bits under which every row not skipped has a result (an empty match, an unmatched
row), even one that starts no thread (``startable`` False)."""

ST_OK = 0
ST_SPACE = 1
ST_SKIP_NONE = 2    # AFTER MATCH SKIP TO v: v bound no row
ST_SKIP_FIRST = 3   # AFTER MATCH SKIP TO v: that row is the match's first row


@njit(cache=True, inline="always")
def _thread_node(q, src, v, g, te, stamp, cnt, n_ev, n_pos, n_pred, n_t, ctx_i, ctx_f, init_f,
                 ci_kind, ci_var, cf_kind, cf_var, cf_col, rows, base, ht, ht_gen):
    """Create a thread node for ``q`` from ``src``; -1 if an equal thread already exists."""
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
            return -1
        h = (h + 1) & mask
    ht_gen[h] = stamp
    ht[h] = nid
    n_ev[nid] = g
    n_pos[nid] = q
    n_pred[nid] = src
    n_t[nid] = te
    cnt[0] = nid + 1
    return nid


@njit(cache=True)
def _report(node, start, p, number, confirm, o_node, o_start, o_pid, o_number, o_confirm, cnt):
    """Append one reported match (or empty match, or unmatched row) to the output arrays."""
    k = cnt[3]
    o_node[k] = node
    o_start[k] = start
    o_pid[k] = p
    o_number[k] = number
    o_confirm[k] = confirm
    cnt[3] = k + 1


@njit(cache=True)
def _resolve_threadless(p, g, empty, modes, p_cover, p_next_allowed, p_matchno, o_node, o_start,
                        o_pid, o_number, o_confirm, cnt):
    """:func:`_resolve` of an attempt at row ``g`` that started no thread, when no earlier
    attempt of partition ``p`` waits: its result is the empty match (``empty``), numbered and
    reported unless omitted, or none (its row reported as unmatched if no match covered it)."""
    if empty:
        p_matchno[p] += 1
        p_next_allowed[p] = g + 1
        if not modes & OMIT_EMPTY:
            _report(EMPTY_MATCH, g, p, p_matchno[p], g, o_node, o_start, o_pid, o_number,
                    o_confirm, cnt)
    elif modes & REPORT_UNMATCHED and g > p_cover[p]:
        _report(UNMATCHED_ROW, g, p, 0, g, o_node, o_start, o_pid, o_number, o_confirm, cnt)


@njit(cache=True, inline="always")
def _resolve(p, confirm, skip_kind, skip_member, pos_var, n_ev, n_pos, n_pred, a_start_g, a_best,
             a_done, a_tlen, a_next, a_mno, p_head, p_tail, p_next_allowed, p_matchno, p_natt,
             p_nthr, p_cover, modes, o_node, o_start, o_pid, o_number, o_confirm, cnt):
    """Resolve the partition's finished attempts in row order (see the module docstring).

    An empty match (``EMPTY_MATCH``) takes a number and lets the next attempt start at the next
    row (with ``modes & OMIT_EMPTY`` it is not reported). ``modes & REPORT_UNMATCHED``: a
    failed attempt at a row after every row of the partition's earlier matches (``p_cover``)
    reports that row (``UNMATCHED_ROW``, no number).

    With ``a_mno`` (MATCH_NUMBER() in a condition, see :func:`sql_run`), an attempt that assumed
    another number than the one it would get now, with every earlier attempt resolved, is
    dropped at once, running or not: a sibling with the right number stands in for it."""
    while p_head[p] != -1:
        a = p_head[p]
        wrong = False
        if a_mno is not None:
            wrong = a_mno[a] != p_matchno[p] + 1
        if a_done[a] == 0:
            if not wrong:
                break
            p_nthr[p] -= a_tlen[a]
            a_tlen[a] = 0
            a_done[a] = 1
        p_head[p] = a_next[a]
        if p_head[p] == -1:
            p_tail[p] = -1
        p_natt[p] -= 1
        if wrong or a_start_g[a] < p_next_allowed[p]:
            continue
        b = a_best[a]
        if b == NO_MATCH:
            if modes & REPORT_UNMATCHED and a_start_g[a] > p_cover[p]:
                _report(UNMATCHED_ROW, a_start_g[a], p, 0, confirm, o_node, o_start, o_pid,
                        o_number, o_confirm, cnt)
            continue
        p_matchno[p] += 1
        if b == EMPTY_MATCH:
            if not modes & OMIT_EMPTY:
                _report(b, a_start_g[a], p, p_matchno[p], confirm, o_node, o_start, o_pid,
                        o_number, o_confirm, cnt)
            p_next_allowed[p] = a_start_g[a] + 1
            continue
        _report(b, a_start_g[a], p, p_matchno[p], confirm, o_node, o_start, o_pid, o_number,
                o_confirm, cnt)
        if n_ev[b] > p_cover[p]:
            p_cover[p] = n_ev[b]
        if skip_kind == SKIP_PAST_LAST:
            na = n_ev[b] + 1
        elif skip_kind == SKIP_NEXT_ROW:
            na = a_start_g[a] + 1
        else:
            na = -1
            nd = b
            while nd >= 0:
                if skip_member[pos_var[n_pos[nd]]]:
                    na = n_ev[nd]
                    if skip_kind == SKIP_TO_LAST:
                        break
                nd = n_pred[nd]
            if na < 0:
                cnt[5] = b
                return ST_SKIP_NONE
            if na == a_start_g[a]:
                cnt[5] = b
                return ST_SKIP_FIRST
        p_next_allowed[p] = na
    return ST_OK


@njit(cache=True)
def hypotheses(head, hmax, matchno):
    """How many copies a new attempt of a partition starts when a condition reads
    MATCH_NUMBER() (see :func:`sql_run`): 1 with no earlier attempt live (``head`` -1), else
    one per number from ``matchno + 1`` to ``hmax``."""
    if head == -1 or hmax <= matchno + 1:
        return 1
    return hmax - matchno


@njit(cache=True, error_model="numpy")
def sql_run(i0, n, g0, pid, brk, n_parts, t, vmask, startable, window, skip_kind,  # noqa: C901
            skip_member, pos_var, start, start_first, p_seen, fol_ptr, fol_to, prog_lo, prog_hi,
            p_op, p_ia, p_ib, p_fc,
            p_ic, ci_kind, ci_var, cf_kind, cf_var, cf_col, init_f, rows, base, n_ev, n_pos, n_pred,
            n_t, ctx_i, ctx_f, a_start_g, a_start_t, a_best, a_done, a_toff, a_tlen, a_tcap,
            a_next, a_mno, tp, p_head, p_tail, p_next_allowed, p_matchno, p_natt, p_nthr, p_hmax,
            p_cover, modes, o_node, o_start, o_pid, o_number, o_confirm, cnt, maxdeg, ht,
            ht_gen, ci0, si, sf, mslot):
    """Process events ``[i0, n)``; returns (index where it stopped, status).

    ``cnt`` = [nodes, attempts, thread pool end, outputs, hash stamp, error node]. Status
    ``ST_SPACE`` asks the caller to grow arrays and call again from the returned index.
    ``brk`` (empty, or one flag per event): a flagged event starts a new replay interval, so
    every running attempt of every partition first ends as at end of input (the work of
    :func:`sql_finish`, done here so that many short intervals cost one call). Ending is
    idempotent, so a call resumed at a flagged event after ``ST_SPACE`` does no harm.
    Conditions run :func:`vm_eval_node` (``ci0``: the unset int state of a starting attempt;
    ``si``/``sf``: scratch stacks). ``p_op`` None (no cross-event condition) compiles a
    specialization without the machine: Numba prunes the ``p_op is not None`` branches by the
    argument's type, which keeps the unused machine out of the hot loop.

    ``a_mno`` not None: a condition reads MATCH_NUMBER(), the number the attempt's match would
    get, from float state slot ``mslot`` (``init_f``, a copy the caller owns, is written here).
    That number is known only once every earlier attempt of the partition is resolved, so a new
    attempt starts as one sibling per possible number (``a_mno``): from one past the partition's
    resolved matches to ``p_hmax``, one past the highest number the newest live attempt could
    take; each runs on its own and :func:`_resolve` keeps the sibling whose number turns out
    right. ``a_mno`` None compiles a specialization without any of this.

    Anchors: an attempt at a partition's first row (``p_seen`` 0) starts from ``start_first``;
    an option ``ACCEPT_END`` (-2) is never taken here, since a row of the thread's partition
    arrived after its last row (:func:`_finish_parts` takes it).
    """
    nstart = max(start.shape[0], start_first.shape[0])
    has_brk = brk.shape[0] > 0
    for i in range(i0, n):
        if has_brk and brk[i]:
            live = 0
            for pp in range(n_parts):
                live += p_natt[pp]
            if live > 0:
                if cnt[3] + live + 1 > o_node.shape[0]:
                    return i, ST_SPACE
                st = _finish_parts(n_parts, skip_kind, skip_member, pos_var, fol_ptr, fol_to, n_ev,
                                   n_pos, n_pred, a_start_g, a_best, a_done, a_toff, a_tlen,
                                   a_next, a_mno, tp, p_head, p_tail, p_next_allowed, p_matchno,
                                   p_natt, p_nthr, p_cover, modes, o_node, o_start, o_pid,
                                   o_number, o_confirm, cnt)
                if st != ST_OK:
                    return i, st
        p = pid[i]
        g = g0 + i
        allowed = g >= p_next_allowed[p]
        can_start = startable[i] and allowed
        if p_head[p] == -1 and not can_start:
            if modes & EVERY_ROW and allowed:  # no thread can start: resolved at once
                if cnt[3] + 1 > o_node.shape[0]:
                    return i, ST_SPACE
                empty = modes & (EMPTY_AT_FIRST if p_seen[p] == 0 else EMPTY_AT_OTHER) != 0
                if empty and modes & OMIT_EMPTY:
                    # an omitted empty match in scalar code: the call below passes arrays,
                    # whose reference counts would cost more than the rest of the row
                    p_matchno[p] += 1
                    p_next_allowed[p] = g + 1
                else:
                    _resolve_threadless(p, g, empty, modes, p_cover, p_next_allowed, p_matchno,
                                        o_node, o_start, o_pid, o_number, o_confirm, cnt)
            p_seen[p] = 1
            continue
        if modes & EVERY_ROW and allowed:
            can_start = True  # its result waits for the earlier attempts, in row order
        n_hyp = 1
        if a_mno is not None:
            n_hyp = hypotheses(p_head[p], p_hmax[p], p_matchno[p])
        need = p_nthr[p] * maxdeg + nstart * n_hyp
        if (cnt[0] + need > n_ev.shape[0] or cnt[1] + n_hyp > a_start_g.shape[0]
                or cnt[2] + 2 * (need + p_nthr[p]) + 8 > tp.shape[0]
                or cnt[3] + p_natt[p] + 1 > o_node.shape[0] or 2 * need + 2 > ht.shape[0]):
            return i, ST_SPACE
        first_row = p_seen[p] == 0
        p_seen[p] = 1
        te = t[i]
        # step running attempts, most senior first
        a = p_head[p]
        while a != -1:
            if a_done[a] == 0:
                cnt[4] += 1
                stamp = cnt[4]
                w = cnt[2]
                nw = 0
                exceeded = window >= 0 and te - a_start_t[a] > window
                off = a_toff[a]
                for j in range(a_tlen[a]):
                    nd = tp[off + j]
                    ps = n_pos[nd]
                    cut = False
                    for k in range(fol_ptr[ps], fol_ptr[ps + 1]):
                        q = fol_to[k]
                        if q == ACCEPT_END:  # this row follows the thread's last one
                            continue
                        if q < 0:
                            a_best[a] = nd
                            cut = True
                            break
                        if exceeded:
                            continue
                        v = pos_var[q]
                        if not vmask[i, v]:
                            continue
                        if p_op is not None and prog_lo[v] < prog_hi[v] and not vm_eval_node(
                                p_op, p_ia, p_ib, p_fc, p_ic, prog_lo[v], prog_hi[v], rows, base,
                                g, ctx_i, ctx_f, ci0, init_f, nd, si, sf):
                            continue
                        nid = _thread_node(q, nd, v, g, te, stamp, cnt, n_ev, n_pos, n_pred, n_t,
                                           ctx_i, ctx_f, init_f, ci_kind, ci_var, cf_kind,
                                           cf_var, cf_col, rows, base, ht, ht_gen)
                        if nid >= 0:
                            tp[w + nw] = nid
                            nw += 1
                    if cut:
                        break
                if nw <= a_tcap[a]:
                    for j in range(nw):
                        tp[off + j] = tp[w + j]
                else:
                    a_toff[a] = w
                    a_tcap[a] = 2 * nw
                    cnt[2] = w + 2 * nw
                p_nthr[p] += nw - a_tlen[a]
                a_tlen[a] = nw
                if nw == 0:
                    a_done[a] = 1
            a = a_next[a]
        # a new attempt starting at this row (one per assumed match number, see above)
        if can_start:
            started = False
            for h in range(n_hyp):
                if a_mno is not None:
                    init_f[mslot] = p_matchno[p] + 1 + h
                cnt[4] += 1
                stamp = cnt[4]
                w = cnt[2]
                nw = 0
                empty = False
                n_lst = start_first.shape[0] if first_row else start.shape[0]
                for k in range(n_lst):
                    q = start_first[k] if first_row else start[k]
                    if q < 0:  # the empty match, less preferred than the threads before it
                        empty = True
                        break
                    v = pos_var[q]
                    if not vmask[i, v]:
                        continue
                    if p_op is not None and prog_lo[v] < prog_hi[v] and not vm_eval_node(
                            p_op, p_ia, p_ib, p_fc, p_ic, prog_lo[v], prog_hi[v], rows, base, g,
                            ctx_i, ctx_f, ci0, init_f, -1, si, sf):
                        continue
                    nid = _thread_node(q, -1, v, g, te, stamp, cnt, n_ev, n_pos, n_pred, n_t,
                                       ctx_i, ctx_f, init_f, ci_kind, ci_var, cf_kind, cf_var,
                                       cf_col, rows, base, ht, ht_gen)
                    if nid >= 0:
                        tp[w + nw] = nid
                        nw += 1
                started = nw > 0 or empty
                if nw == 0 and p_head[p] == -1 and a_mno is None:
                    # no thread and no earlier attempt waiting: resolved at once, as _resolve
                    # would (an empty match, an unmatched row or nothing), with no attempt
                    _resolve_threadless(p, g, empty, modes, p_cover, p_next_allowed, p_matchno,
                                        o_node, o_start, o_pid, o_number, o_confirm, cnt)
                elif started or modes & REPORT_UNMATCHED:  # reported when its attempt fails
                    a = cnt[1]
                    cnt[1] = a + 1
                    a_start_g[a] = g
                    a_start_t[a] = te
                    a_best[a] = EMPTY_MATCH if empty else NO_MATCH
                    a_done[a] = 1 if nw == 0 else 0
                    a_toff[a] = w
                    a_tlen[a] = nw
                    a_tcap[a] = 2 * nw
                    if a_mno is not None:
                        a_mno[a] = p_matchno[p] + 1 + h
                    cnt[2] = w + 2 * nw
                    a_next[a] = -1
                    if p_tail[p] == -1:
                        p_head[p] = a
                    else:
                        a_next[p_tail[p]] = a
                    p_tail[p] = a
                    p_natt[p] += 1
                    p_nthr[p] += nw
            if a_mno is not None:
                # the next attempt's highest possible number: one more if the copy assuming
                # the highest number here started (its match would take that number)
                p_hmax[p] = p_matchno[p] + n_hyp + (1 if started else 0)
        st = _resolve(p, g, skip_kind, skip_member, pos_var, n_ev, n_pos, n_pred, a_start_g, a_best,
                      a_done, a_tlen, a_next, a_mno, p_head, p_tail, p_next_allowed, p_matchno,
                      p_natt, p_nthr, p_cover, modes, o_node, o_start, o_pid, o_number,
                      o_confirm, cnt)
        if st != ST_OK:
            return i, st
    return n, ST_OK


@njit(cache=True)
def _finish_parts(n_parts, skip_kind, skip_member, pos_var, fol_ptr, fol_to, n_ev, n_pos, n_pred,
                  a_start_g, a_best, a_done, a_toff, a_tlen, a_next, a_mno, tp, p_head, p_tail,
                  p_next_allowed, p_matchno, p_natt, p_nthr, p_cover, modes, o_node, o_start,
                  o_pid, o_number, o_confirm, cnt):
    """End of input for every partition: each running attempt ends and its first thread that
    may accept wins; afterwards no attempt is left (the state of a fresh matcher, except for
    match numbers and the skip positions, which only point backwards)."""
    for p in range(n_parts):
        a = p_head[p]
        while a != -1:
            if a_done[a] == 0:
                off = a_toff[a]
                found = False
                for j in range(a_tlen[a]):
                    nd = tp[off + j]
                    ps = n_pos[nd]
                    for k in range(fol_ptr[ps], fol_ptr[ps + 1]):
                        if fol_to[k] < 0:
                            a_best[a] = nd
                            found = True
                            break
                    if found:
                        break
                a_done[a] = 1
                a_tlen[a] = 0
            a = a_next[a]
        p_nthr[p] = 0
        st = _resolve(p, -1, skip_kind, skip_member, pos_var, n_ev, n_pos, n_pred, a_start_g,
                      a_best, a_done, a_tlen, a_next, a_mno, p_head, p_tail, p_next_allowed,
                      p_matchno, p_natt, p_nthr, p_cover, modes, o_node, o_start, o_pid,
                      o_number, o_confirm, cnt)
        if st != ST_OK:
            return st
    return ST_OK


@njit(cache=True)
def sql_finish(n_parts, skip_kind, skip_member, pos_var, fol_ptr, fol_to, n_ev, n_pos, n_pred,
               a_start_g, a_best, a_done, a_toff, a_tlen, a_next, a_mno, tp, p_head, p_tail,
               p_next_allowed, p_matchno, p_natt, p_nthr, p_cover, modes, o_node, o_start,
               o_pid, o_number, o_confirm, cnt):
    """End of input: every running attempt ends; the first thread that may accept wins."""
    return _finish_parts(n_parts, skip_kind, skip_member, pos_var, fol_ptr, fol_to, n_ev, n_pos,
                         n_pred, a_start_g, a_best, a_done, a_toff, a_tlen, a_next, a_mno, tp,
                         p_head, p_tail, p_next_allowed, p_matchno, p_natt, p_nthr, p_cover,
                         modes, o_node, o_start, o_pid, o_number, o_confirm, cnt)


@njit(cache=True)
def sql_paths(o_node, n_out, n_pred, n_ev, n_pos, out_ev, out_pos, out_off):
    """Rows of each reported match (first to last) from its final thread's predecessor chain."""
    total = 0
    out_off[0] = 0
    for m in range(n_out):
        L = 0
        nd = o_node[m]
        while nd >= 0:
            L += 1
            nd = n_pred[nd]
        nd = o_node[m]
        j = total + L - 1
        while nd >= 0:
            out_ev[j] = n_ev[nd]
            out_pos[j] = n_pos[nd]
            j -= 1
            nd = n_pred[nd]
        total += L
        out_off[m + 1] = total
    return total


@njit(cache=True)
def sql_collect(n_nodes, n_att, n_parts, n_ev, n_pos, n_pred, n_t, ctx_i, ctx_f, a_start_g,  # noqa: C901
                a_start_t, a_best, a_done, a_toff, a_tlen, a_tcap, a_next, a_mno, tp, p_head,
                p_tail, new_tp, node_map, att_map):
    """Garbage-collect nodes, attempts and the thread pool; returns (nodes, attempts, pool end,
    min referenced event index or -1). Live: attempts still in a partition list, their threads
    and best threads, and predecessor chains. Order is preserved."""
    for x in range(n_nodes):
        node_map[x] = -1
    for x in range(n_att):
        att_map[x] = -1
    for p in range(n_parts):
        a = p_head[p]
        while a != -1:
            att_map[a] = 0
            for j in range(a_tlen[a]):
                nd = tp[a_toff[a] + j]
                while nd >= 0 and node_map[nd] == -1:
                    node_map[nd] = 0
                    nd = n_pred[nd]
            nd = a_best[a]
            while nd >= 0 and node_map[nd] == -1:
                node_map[nd] = 0
                nd = n_pred[nd]
            a = a_next[a]
    k = 0
    for x in range(n_nodes):
        if node_map[x] == 0:
            node_map[x] = k
            k += 1
    min_ev = -1
    for x in range(n_nodes):
        y = node_map[x]
        if y < 0:
            continue
        n_ev[y] = n_ev[x]
        n_pos[y] = n_pos[x]
        n_pred[y] = node_map[n_pred[x]] if n_pred[x] >= 0 else -1
        n_t[y] = n_t[x]
        for s in range(ctx_i.shape[1]):
            ctx_i[y, s] = ctx_i[x, s]
            if ctx_i[y, s] >= 0 and (min_ev < 0 or ctx_i[y, s] < min_ev):
                min_ev = ctx_i[y, s]
        for s in range(ctx_f.shape[1]):
            ctx_f[y, s] = ctx_f[x, s]
        if min_ev < 0 or n_ev[y] < min_ev:
            min_ev = n_ev[y]
    ka = 0
    for x in range(n_att):
        if att_map[x] == 0:
            att_map[x] = ka
            ka += 1
    pe = 0
    for x in range(n_att):
        y = att_map[x]
        if y < 0:
            continue
        cnt_t = a_tlen[x]
        for j in range(cnt_t):
            new_tp[pe + j] = node_map[tp[a_toff[x] + j]]
        a_start_g[y] = a_start_g[x]
        a_start_t[y] = a_start_t[x]
        a_best[y] = node_map[a_best[x]] if a_best[x] >= 0 else a_best[x]
        a_done[y] = a_done[x]
        a_toff[y] = pe
        a_tlen[y] = cnt_t
        a_tcap[y] = cnt_t + 1
        a_next[y] = att_map[a_next[x]] if a_next[x] >= 0 else -1
        if a_mno is not None:
            a_mno[y] = a_mno[x]
        pe += cnt_t + 1
    for p in range(n_parts):
        if p_head[p] >= 0:
            p_head[p] = att_map[p_head[p]]
            p_tail[p] = att_map[p_tail[p]]
    return k, ka, pe, min_ev
