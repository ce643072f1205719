"""The two-step baseline for GRETA: construct every trend, then aggregate (what SASE and Flink do).

Like SASE (paper Sec. 10.1), events are kept per partition in time order; for every window, a
depth-first search from each END event walks backwards over compatible predecessors (same
transitions, edge predicates and negation rules as GRETA) and *constructs* each trend as a list of
events, which is then aggregated. Work and memory are proportional to the number and length of
the trends, i.e. exponential in the number of events per window.

Limits: ``trend_cap`` (trends constructed in total) and ``time_limit_s``; hitting either stops the
run with status ``"trend cap"`` / ``"timeout"``. Negation is supported when each negated
sub-pattern is a single event type (enough for the paper's queries). Counts are int64 (they are
bounded by the trend cap).

The DFS runs in Numba, so the comparison with GRETA (also Numba) is between algorithms, not
languages.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numba as nb
import numpy as np
import pyarrow as pa

from replaydb.operators.greta.edgecode import eval_edge
from replaydb.operators.greta.events import EventChunk, encode_keys, null_mask
from replaydb.operators.greta.plan import FENWICK, NONE, POINT, SCAN, CompiledPlan, compile_plan
from replaydb.operators.greta.runtime import occurrences
from replaydb.planner.lang.greta import parse, to_config

_OPS = {"<": 0, "<=": 1, ">": 2, ">=": 3, "=": 4}
STEP_CHUNK = 1 << 24


@dataclass
class TwoStepResult:
    rows: list[dict[str, Any]]
    status: str  # "ok" | "trend cap" | "timeout"
    trends: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


@nb.njit(cache=True, error_model="numpy")
def _dfs_window(idx, lo, hi, ws, we, t, state, key, probe, gcols, tr_src_of, tr_ptr, tr_list,
                tr_kind, tr_op, tr_neg, bc_code, bc_arg, bc_start, bc_len, start, end, neg_t,
                neg_off, neg_len, case2, case3, agg_state, agg_attr_i, agg_kind, attr_i, cap,
                budget, buf, out_i, stack_buf, path, nextc, st):
    """Construct every trend of window [ws, we) among events idx[lo:hi] (one partition, time
    order) and aggregate it. Resumable: ``st`` = (END position being expanded, depth), with
    ``path``/``nextc`` the DFS stack; start with st = (hi - lo, -1). Returns (trends, steps,
    status): status 0 done, 1 trend cap reached, 2 step budget used (call again)."""
    trends = 0
    steps = 0
    e = st[0]
    depth = st[1]
    while True:
        if depth < 0:
            # next END event (from the latest backwards)
            e -= 1
            while e >= 0:
                ge = idx[lo + e]
                if state[ge] == end:
                    bad = False
                    if case2 >= 0:
                        for q in range(neg_off[case2], neg_off[case2] + neg_len[case2]):
                            if neg_t[q] > t[ge] and neg_t[q] < we:
                                bad = True
                                break
                    if not bad:
                        break
                e -= 1
            if e < 0:
                st[0] = -1
                st[1] = -1
                return trends, steps, 0
            depth = 0
            path[0] = e
            nextc[0] = e - 1
        cur = path[depth]
        gc = idx[lo + cur]
        if nextc[depth] == cur - 1 and state[gc] == start:
            # first visit of a START event: the path START..END is a trend; construct it
            ok = True
            if case3 >= 0:
                for q in range(neg_off[case3], neg_off[case3] + neg_len[case3]):
                    if neg_t[q] >= ws and neg_t[q] < t[gc]:
                        ok = False
                        break
            if ok:
                ln = depth + 1
                for d in range(ln):
                    buf[d] = idx[lo + path[depth - d]]
                trends += 1
                out_i[0] += 1
                for a in range(agg_state.shape[0]):
                    s_ = agg_state[a]
                    k = agg_kind[a]
                    for d in range(ln):
                        ev = buf[d]
                        if state[ev] == s_:
                            if k == 0:
                                out_i[1 + a] += 1
                            elif k == 1:
                                out_i[1 + a] += attr_i[ev, agg_attr_i[a]]
                            elif k == 2:
                                if attr_i[ev, agg_attr_i[a]] < out_i[1 + a]:
                                    out_i[1 + a] = attr_i[ev, agg_attr_i[a]]
                            elif attr_i[ev, agg_attr_i[a]] > out_i[1 + a]:
                                out_i[1 + a] = attr_i[ev, agg_attr_i[a]]
                if trends > cap:
                    st[0] = e
                    st[1] = depth
                    return trends, steps, 1
        # extend the path backwards by one compatible predecessor
        advanced = False
        c = nextc[depth]
        while c >= 0:
            steps += 1
            gp = idx[lo + c]
            c -= 1
            if t[gp] >= t[gc] or t[gp] < ws:
                continue
            okp = False
            for q in range(tr_ptr[state[gc]], tr_ptr[state[gc] + 1]):
                T = tr_list[q]
                if tr_src_of[T] != state[gp]:
                    continue
                kind = tr_kind[T]
                good = True
                if kind == 1 or kind == 2:
                    kv = key[gp, T]
                    pv = probe[gc, T]
                    op = tr_op[T]
                    if op == 0:
                        good = kv < pv
                    elif op == 1:
                        good = kv <= pv
                    elif op == 2:
                        good = kv > pv
                    elif op == 3:
                        good = kv >= pv
                    else:
                        good = kv == pv
                elif kind == 3:
                    good = eval_edge(bc_code, bc_arg, bc_start[T], bc_len[T], gcols, gp,
                                     gcols, gc, stack_buf)
                if good and tr_neg[T] >= 0:
                    nn = tr_neg[T]
                    for q2 in range(neg_off[nn], neg_off[nn] + neg_len[nn]):
                        if neg_t[q2] > t[gp] and neg_t[q2] < t[gc]:
                            good = False
                            break
                if good:
                    okp = True
                    break
            if okp:
                nextc[depth] = c
                depth += 1
                path[depth] = c + 1
                nextc[depth] = c
                advanced = True
                break
        if not advanced:
            nextc[depth] = -1
            depth -= 1
        if steps > budget:
            st[0] = e
            st[1] = depth
            return trends, steps, 2


class TwoStepBaseline:
    """Enumerate-then-aggregate evaluation of a GRETA query (see the module docstring)."""

    def __init__(self, text: str, schema: pa.Schema, time_unit: str | None, *,
                 trend_cap: int = 10_000_000, time_limit_s: float = 60.0) -> None:
        self.plan: CompiledPlan = compile_plan(to_config(parse(text), time_unit), schema)
        self.trend_cap = trend_cap
        self.time_limit_s = time_limit_s
        g = self.plan.graphs[0]
        for ng in self.plan.negations:
            child = self.plan.graphs[ng.negation.child]
            if len(child.states) != 1 or ng.negation.parent != 0:
                raise NotImplementedError("baseline: only single-type negations are supported")
        for out in self.plan.outputs:
            if out.source not in ("big", "mmi", "avg_big"):
                raise NotImplementedError("baseline: only integer aggregates are supported")
        self.g = g

    def run(self, table: pa.Table) -> TwoStepResult:
        t0 = time.perf_counter()
        plan, g = self.plan, self.g
        ev = EventChunk(table, plan.config.type_column)
        rows, xs = occurrences(ev, g)
        n = len(rows)
        inv, keys = encode_keys(ev, rows, g.part_attrs)
        inp = _inputs(ev, plan, g, rows, xs)
        neg_events = _negative_events(ev, plan)
        results: dict[tuple, dict[str, Any]] = {}
        total_trends = 0
        status = "ok"
        part_order = np.argsort(inv, kind="stable")
        bounds = np.flatnonzero(np.diff(inv[part_order])) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [n]])
        for a, b in zip(starts, ends):
            if status != "ok":
                break
            idx = part_order[a:b]
            if not len(idx):
                continue
            status, total_trends = self._partition(inp, idx, keys[inv[idx[0]]], neg_events,
                                                   results, total_trends, t0)
        rows_out = _result_rows(plan, results) if status == "ok" else []
        return TwoStepResult(rows_out, status, total_trends, time.perf_counter() - t0,
                             {"log10_trends": math.log10(max(total_trends, 1))})

    def _partition(self, inp: _Inputs, idx: np.ndarray, pkey: tuple,
                   neg_events: list[dict[tuple, list[int]]], results: dict[tuple, dict[str, Any]],
                   total_trends: int, t0: float) -> tuple[str, int]:
        """Enumerate and aggregate the trends of every window of one partition (its events
        ``idx``, in time order), folding them into ``results``: (status, trends so far)."""
        plan, g = self.plan, self.g
        d, s = plan.within, plan.slide
        gkey = pkey[:len(plan.group_by)]
        neg_t, neg_off, neg_len = _partition_negatives(g, plan.negations, neg_events, pkey)
        tp = inp.t[idx]
        w_lo = (int(tp[0]) - d) // s + 1
        w_hi = int(tp[-1]) // s
        for w in range(w_lo, w_hi + 1):
            ws, we = w * s, w * s + d
            lo = int(np.searchsorted(tp, ws, "left"))
            hi = int(np.searchsorted(tp, we, "left"))
            if hi <= lo:
                continue
            if time.perf_counter() - t0 > self.time_limit_s:
                return "timeout", total_trends
            out_i = np.zeros(1 + len(inp.agg_kind), np.int64)
            for q, kk in enumerate(inp.agg_kind):
                out_i[1 + q] = np.iinfo(np.int64).max if kk == 2 else (
                    np.iinfo(np.int64).min if kk == 3 else 0)
            st_arr = np.array([hi - lo, -1], np.int64)
            path = np.empty(hi - lo + 1, np.int64)
            nextc = np.empty(hi - lo + 1, np.int64)
            while True:
                trends, steps, st = _dfs_window(
                    idx, lo, hi, ws, we, inp.t, inp.xs, inp.key, inp.probe, inp.gcols,
                    inp.tr_src, inp.tr_ptr, np.asarray(inp.tr_list or [0], np.int64), inp.kinds,
                    inp.ops, inp.tr_neg_local, inp.bc_code, inp.bc_arg, inp.bstart, inp.blen,
                    g.start, g.end, neg_t, neg_off, neg_len, inp.case2, inp.case3,
                    np.asarray(inp.agg_state, np.int64), np.asarray(inp.agg_attr, np.int64),
                    np.asarray(inp.agg_kind, np.int64), inp.attr_i,
                    self.trend_cap - total_trends, STEP_CHUNK, inp.buf, out_i, inp.stack_buf,
                    path, nextc, st_arr)
                total_trends += int(trends)
                if st != 2:
                    break
                if time.perf_counter() - t0 > self.time_limit_s:
                    break
            if st == 1:
                return "trend cap", total_trends
            if st == 2:
                return "timeout", total_trends
            if out_i[0] == 0:
                continue
            _fold(results.setdefault((ws, gkey), {"count": 0, "agg": None}), out_i,
                  inp.agg_kind)
        return "ok", total_trends


@dataclass
class _Inputs:
    """The main graph's occurrences as the trend enumeration reads them: time, state, edge
    keys and probes per transition, grouping columns, compiled edge predicates, aggregates,
    and scratch buffers."""

    t: np.ndarray
    xs: np.ndarray
    key: np.ndarray
    probe: np.ndarray
    kinds: np.ndarray
    ops: np.ndarray
    gcols: np.ndarray
    tr_ptr: np.ndarray
    tr_list: list[int]
    bc_code: np.ndarray
    bc_arg: np.ndarray
    bstart: np.ndarray
    blen: np.ndarray
    agg_state: list[int]
    agg_attr: list[int]
    agg_kind: list[int]
    attr_i: np.ndarray
    tr_src: np.ndarray
    tr_neg_local: np.ndarray
    case2: int
    case3: int
    buf: np.ndarray
    stack_buf: np.ndarray


def _inputs(ev: EventChunk, plan: CompiledPlan, g: Any, rows: np.ndarray, xs: np.ndarray
            ) -> _Inputs:
    """The :class:`_Inputs` of the occurrences ``rows`` (states ``xs``)."""
    n = len(rows)
    T = len(g.transitions)
    key = np.full((n, max(T, 1)), np.nan)
    probe = np.full((n, max(T, 1)), np.nan)
    kinds = np.zeros(max(T, 1), np.int64)
    ops = np.zeros(max(T, 1), np.int64)
    for tr in g.transitions:
        ix = g.indexes[tr.index]
        kinds[tr.id] = {NONE: 0, FENWICK: 1, POINT: 2, SCAN: 3}[ix.kind]
        if ix.kind in (FENWICK, POINT):
            ops[tr.id] = _OPS[tr.op]
            src = np.flatnonzero(xs == tr.src)
            v = ev.values(ix.key, rows[src])
            key[src, tr.id] = np.where(null_mask(v), np.nan, v).astype(np.float64)
            dst = np.flatnonzero(xs == tr.dst)
            v = ev.values(tr.probe, rows[dst])
            probe[dst, tr.id] = np.where(null_mask(v), np.nan, v).astype(np.float64)
    gcols = np.zeros((n, max(len(g.gcols), 1)))
    for j, name in enumerate(g.gcols):
        gcols[:, j] = ev.np(name)[rows].astype(np.float64)
    tr_ptr = np.zeros(len(g.states) + 1, np.int64)
    tr_list: list[int] = []
    for k in range(len(g.states)):
        tr_list.extend(g.in_tr[k])
        tr_ptr[k + 1] = len(tr_list)
    codes, args, bstart, blen = [], [], np.zeros(max(T, 1), np.int64), np.zeros(max(T, 1),
                                                                               np.int64)
    for tr in g.transitions:
        if tr.program is not None:
            c, a = tr.program.arrays()
            bstart[tr.id], blen[tr.id] = len(codes), len(c)
            codes.extend(c.tolist())
            args.extend(a.tolist())
    agg_state, agg_attr, agg_kind, attr_cols = _aggregates(plan, g)
    attr_i = np.zeros((n, max(len(attr_cols), 1)), np.int64)
    for j, name in enumerate(attr_cols):
        attr_i[:, j] = ev.np(name)[rows].astype(np.int64)
    return _Inputs(
        t=ev.t[rows], xs=xs, key=key, probe=probe, kinds=kinds, ops=ops, gcols=gcols,
        tr_ptr=tr_ptr, tr_list=tr_list, bc_code=np.asarray(codes or [0], np.int64),
        bc_arg=np.asarray(args or [0.0], np.float64), bstart=bstart, blen=blen,
        agg_state=agg_state, agg_attr=agg_attr, agg_kind=agg_kind, attr_i=attr_i,
        tr_src=np.array([tr.src for tr in g.transitions] or [0], np.int64),
        tr_neg_local=np.array([tr.negation if tr.negation is not None else -1
                               for tr in g.transitions] or [-1], np.int64),
        case2=g.case2 if g.case2 is not None else -1,
        case3=g.case3 if g.case3 is not None else -1,
        buf=np.zeros(n + 1, np.int64), stack_buf=np.zeros(64))


def _aggregates(plan: CompiledPlan, g: Any) -> tuple[list[int], list[int], list[int], list[str]]:
    """(state, attribute column, kind) of every aggregate the outputs need (integer only: kind
    0 count(E), 1 sum, 2 min, 3 max; AVG takes a sum and a count), and the attribute columns."""
    agg_state, agg_attr, agg_kind = [], [], []
    attr_cols: list[str] = []
    for out in plan.outputs:
        it = out.item
        if it.kind == "count_star":
            continue
        alias = it.var if it.var in g.states else g.states[g.types.index(it.var)]
        s_ = g.states.index(alias)
        kinds_needed = {"count": [0], "sum": [1], "avg": [1, 0], "min": [2], "max": [3]}
        for kk in kinds_needed[it.kind]:
            col = -1
            if kk != 0:
                if it.attr not in attr_cols:
                    attr_cols.append(it.attr)
                col = attr_cols.index(it.attr)
            agg_state.append(s_)
            agg_attr.append(col)
            agg_kind.append(kk)
    return agg_state, agg_attr, agg_kind, attr_cols


def _negative_events(ev: EventChunk, plan: CompiledPlan) -> list[dict[tuple, list[int]]]:
    """Per negation, the times of its events per bucket (values of the shared attributes)."""
    neg_events: list[dict[tuple, list[int]]] = []
    for ng in plan.negations:
        child = plan.graphs[ng.negation.child]
        code = ev.type_index.get(child.types[0])
        nrows = np.flatnonzero(ev.type_codes == code) if code is not None else \
            np.zeros(0, np.int64)
        if child.local[0] is not None and nrows.size:
            nrows = nrows[np.asarray(ev.values(child.local[0], nrows), bool)]
        ninv, nkeys = encode_keys(ev, nrows, ng.common)
        by_bucket: dict[tuple, list[int]] = {}
        for r, i in zip(nrows.tolist(), ninv.tolist()):
            by_bucket.setdefault(nkeys[i], []).append(int(ev.t[r]))
        neg_events.append(by_bucket)
    return neg_events


def _partition_negatives(g: Any, negs: Any, neg_events: list[dict[tuple, list[int]]],
                         pkey: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(times, offset per negation, count per negation) of the negative events of the buckets
    of the partition ``pkey``, one negation after the other."""
    neg_t_l, neg_off, neg_len = [], np.zeros(max(len(negs), 1), np.int64), \
        np.zeros(max(len(negs), 1), np.int64)
    pos = 0
    for j, ng in enumerate(negs):
        common_pos = [g.part_attrs.index(x) for x in ng.common]
        bkey = tuple(pkey[q] for q in common_pos)
        ts = np.array(neg_events[j].get(bkey, []), np.int64)
        neg_t_l.append(ts)
        neg_off[j], neg_len[j] = pos, len(ts)
        pos += len(ts)
    neg_t = np.concatenate(neg_t_l) if neg_t_l else np.zeros(1, np.int64)
    if not len(neg_t):
        neg_t = np.zeros(1, np.int64)
    return neg_t, neg_off, neg_len


def _fold(acc: dict[str, Any], out_i: np.ndarray, agg_kind: list[int]) -> None:
    """Add one window's trend count and aggregates ``out_i`` to its group's ``acc``."""
    acc["count"] += int(out_i[0])
    vals = out_i[1:]
    if acc["agg"] is None:
        acc["agg"] = vals.copy()
        return
    for q, kk in enumerate(agg_kind):
        if kk in (0, 1):
            acc["agg"][q] += vals[q]
        elif kk == 2:
            acc["agg"][q] = min(acc["agg"][q], vals[q])
        else:
            acc["agg"][q] = max(acc["agg"][q], vals[q])


def _result_rows(plan: CompiledPlan, results: dict[tuple, dict[str, Any]]
                 ) -> list[dict[str, Any]]:
    """The output rows of the accumulated windows, by window start and group."""
    d = plan.within
    rows_out = []
    for (ws, gkey), acc in sorted(results.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        r: dict[str, Any] = {"window_start": ws, "window_end": ws + d}
        for a_, v in zip(plan.group_by, gkey):
            r[a_] = v
        q = 0
        for out in plan.outputs:
            it = out.item
            if it.kind == "count_star":
                r[out.name] = acc["count"]
            elif it.kind == "avg":
                r[out.name] = float(acc["agg"][q]) / float(acc["agg"][q + 1])
                q += 2
            else:
                r[out.name] = int(acc["agg"][q])
                q += 1
        rows_out.append(r)
    return rows_out
