"""Deriving situations from event batches, vectorized (Def. 5.1-5.3, Alg. 5.1 at batch level).

A situation of definition ``d`` is a maximal run of consecutive events (of one partition) that
satisfy ``d``'s condition: ``[e_i.t, e_{j+1}.t)`` where ``e_{j+1}`` is the first event after the
run. It is kept when ``te > ts`` and ``min_duration <= te - ts <= max_duration``.

Batch algorithm (per definition, all partitions at once; O(n log n) for the partition sort, then
O(n) NumPy passes):

1. Stable-sort the batch by partition id (skipped for unpartitioned streams); events of one
   partition are then contiguous and still in ``(t, seq)`` order.
2. Run detection on the condition mask: a run starts where the mask is true and the previous
   event of the same partition is not (or there is none), and its last event is where the next
   event of the same partition is false (or there is none). ``te`` is the time of the event after
   the last one; a run reaching the partition's last event in the batch is *open*.
3. Aggregates of all runs at once with ``ufunc.reduceat`` over the run events
   (:mod:`.aggregates`).
4. Carry: each definition keeps, per partition, the run still open at the end of the previous
   batch (start, partial aggregates, when it became known). A run starting at the partition's
   first event continues it (primitives combined); otherwise the carried run ends at the
   partition's first event of this batch. Partitions absent from the batch keep their carry.

Input batches must consist of *complete time steps*: every event with a given timestamp is in the
same batch (the operator holds the last timestamp back until a later one arrives). So a run is
never split between events of equal time, and a degenerate run ``[t, t)`` (events at ``t`` that
satisfy the condition followed by one at the same ``t`` that does not) is recognised and dropped:
situations need ``ts < te``.

**Known time** (for low-latency matching; Section 5.5.3 "duration constraints"): the earliest
time step at which the situation is certain to exist.

* no duration constraint: its start ``ts``;
* a maximum (AT MOST or BETWEEN): its end ``te`` (it may still grow too long before that);
* only a minimum ``AT LEAST dmin``: the first event time ``k`` of the run with
  ``k + 1 - ts >= dmin`` while the run is still open after step ``k`` (then ``te >= k + 1``),
  or ``te`` if no such event exists (the deferred start of the paper).

End of input (:meth:`Deriver.close`): open runs are dropped (``"drop"``) or closed with
``te = t_last + 1`` where ``t_last`` is the time of the partition's last event (``"close"``: the
half-open interval then contains the last event, and this end is consistent with what the
low-latency matcher assumed while the run was open: ``te > t_last``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replaydb.operators.tpstream import kernel
from replaydb.operators.tpstream.aggregates import AggSpec

INF = np.iinfo(np.int64).max
"""End of a situation that is still open (later than any time)."""

_INT_FIELDS = ("part", "stream", "ts", "te", "ts_seq", "te_seq", "known", "known_seq",
               "first_pos", "last_pos")


@dataclass
class Runs:
    """Situations touched by one batch (columnar; one row per situation).

    ``te`` is :data:`INF` for situations still open at the end of the batch (only reported in
    low-latency mode). ``known_new`` marks situations whose known time lies inside this batch
    while they were still open (a *start* event for the low-latency matcher). ``first_pos`` /
    ``last_pos`` locate the situation's events of this batch in the batch's partition-sorted
    order (-1 when it has none); ``pre`` are the aggregate primitives of its events in earlier
    batches (``has_pre``), used for partial aggregates of situations reported while ongoing.
    """

    part: np.ndarray
    stream: np.ndarray
    ts: np.ndarray
    te: np.ndarray
    ts_seq: np.ndarray
    te_seq: np.ndarray
    known: np.ndarray
    known_seq: np.ndarray
    known_new: np.ndarray
    first_pos: np.ndarray
    last_pos: np.ndarray
    has_pre: np.ndarray
    prims: list = field(default_factory=list)
    pre: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def finished(self) -> np.ndarray:
        return self.te != INF


@dataclass
class BatchContext:
    """The sorted view of the last batch (for partial aggregates in low-latency mode)."""

    t_sorted: np.ndarray
    values_sorted: list


@dataclass
class Fragments:
    """Phase-1 output for one batch (see :meth:`Deriver.fragments`): per definition the runs of
    the batch with head/open flags, plus each partition's first event (where a carried run that
    does not continue ends)."""

    n: int
    defs: list
    grp_pid: np.ndarray | None = None
    grp_t0: np.ndarray | None = None
    grp_q0: np.ndarray | None = None
    dtypes: list = field(default_factory=list)
    ctx: BatchContext | None = None


def _partition_groups(pid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stable order of a batch by partition id, the sorted position where each partition's
    events start, and the partitions' ids. Ids are dense, so usually a compiled counting sort
    (O(n + span)); otherwise a radix sort on 16-bit keys with groups from a bincount, or a
    general stable argsort."""
    lo, hi = int(pid.min()), int(pid.max())
    if hi - lo < 4 * len(pid) + 1024:
        return kernel.counting_order(pid.astype(np.int64, copy=False), lo, hi - lo + 1)
    if hi - lo < 1 << 16:
        key = (pid - lo).astype(np.uint16)
        order = np.argsort(key, kind="stable")
        counts = np.bincount(key, minlength=hi - lo + 1)
        present = np.flatnonzero(counts)
        starts = np.zeros(len(present), np.int64)
        np.cumsum(counts[present][:-1], out=starts[1:])
        return order, starts, present.astype(np.int64) + lo
    order = np.argsort(pid, kind="stable")
    ps = pid[order]
    newgrp = np.empty(len(ps), bool)
    newgrp[0] = True
    np.not_equal(ps[1:], ps[:-1], out=newgrp[1:])
    starts = np.flatnonzero(newgrp)
    return order, starts, ps[starts]


def _first_reaching(tc: np.ndarray, qc: np.ndarray, run_c: np.ndarray, offsets: np.ndarray,
                    lengths: np.ndarray, thr: np.ndarray, te: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per run: time/seq of its first event with ``t >= thr`` and ``t < te`` (INF/-1 if none)."""
    k = len(offsets)
    known = np.full(k, INF, np.int64)
    known_q = np.full(k, -1, np.int64)
    if k == 0:
        return known, known_q
    ok = (tc >= thr[run_c]) & (tc < te[run_c])
    P = np.flatnonzero(ok)
    if len(P):
        first = np.searchsorted(P, offsets)
        firstc = np.minimum(first, len(P) - 1)
        found = (first < len(P)) & (P[firstc] < offsets + lengths)
        at = P[firstc[found]]
        known[found] = tc[at]
        known_q[found] = qc[at]
    return known, known_q


class _Parts:
    """Accumulates row pieces of a :class:`Runs` for all definitions."""

    def __init__(self, n_items: int) -> None:
        self.cols: dict[str, list[np.ndarray]] = {f: [] for f in _INT_FIELDS}
        self.known_new: list[np.ndarray] = []
        self.has_pre: list[np.ndarray] = []
        self.prims: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n_items)]
        self.pre: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n_items)]

    def add(self, sel: np.ndarray | slice, rows: dict[str, np.ndarray], prims: dict, pre: dict,
            aggs: list[AggSpec]) -> None:
        n = len(rows["ts"][sel])
        if n == 0:
            return
        for f in _INT_FIELDS:
            self.cols[f].append(np.asarray(rows[f][sel], dtype=np.int64))
        self.known_new.append(rows["known_new"][sel])
        self.has_pre.append(rows["has_pre"][sel])
        for i, agg in enumerate(aggs):
            if i in prims:
                a, b = prims[i]
                pa_, pb_ = pre[i]
                self.prims[i].append((a[sel], b[sel]))
                self.pre[i].append((pa_[sel], pb_[sel]))
            else:
                self.prims[i].append(agg.empty(n))
                self.pre[i].append(agg.empty(n))

    def build(self, aggs: list[AggSpec]) -> Runs:
        def cat(xs: list[np.ndarray], dtype: object) -> np.ndarray:
            return np.concatenate(xs) if xs else np.empty(0, dtype=dtype)

        cols = {f: cat(v, np.int64) for f, v in self.cols.items()}
        prims, pre = [], []
        for i, agg in enumerate(aggs):
            for src, dst in ((self.prims[i], prims), (self.pre[i], pre)):
                if src:
                    a = np.concatenate([p[0] for p in src])
                    b = np.concatenate([p[1] for p in src])
                else:
                    a, b = agg.empty(0)
                dst.append((a, b))
        return Runs(known_new=cat(self.known_new, bool), has_pre=cat(self.has_pre, bool),
                    prims=prims, pre=pre, **cols)


class Deriver:
    """Stateful, vectorized situation deriver for ``n_defs`` definitions.

    ``min_dur`` / ``max_dur``: per definition, inclusive duration bounds or None.
    ``aggs``: RETURN items (each tied to one definition by ``agg.stream``).
    ``with_open``: also report open runs (low-latency mode).
    """

    def __init__(self, min_dur: list[int | None], max_dur: list[int | None], aggs: list[AggSpec],
                 with_open: bool) -> None:
        self.n_defs = len(min_dur)
        self.min_dur = min_dur
        self.max_dur = max_dur
        self.aggs = aggs
        self.with_open = with_open
        self.items_of = [[i for i, a in enumerate(aggs) if a.stream == d] for d in range(self.n_defs)]
        self.ctx: BatchContext | None = None
        self.reset()

    def reset(self) -> None:
        self.carry: list[dict[str, np.ndarray]] = [self._empty_carry(d) for d in range(self.n_defs)]

    def _empty_carry(self, d: int) -> dict[str, np.ndarray]:
        c = {f: np.empty(0, np.int64) for f in ("pid", "ts", "ts_seq", "known", "known_seq",
                                                 "last_t", "last_seq")}
        for i in self.items_of[d]:
            a, b = self.aggs[i].empty(0)
            c[f"a{i}"], c[f"b{i}"] = a, b
        return c

    def earliest_close(self) -> tuple[np.ndarray, np.ndarray]:
        """Per partition with an open run: the earliest ``t_last + 1`` (sorted by partition)."""
        pids = np.concatenate([c["pid"] for c in self.carry])
        if not len(pids):
            return pids, pids
        close = np.concatenate([c["last_t"] for c in self.carry]) + 1
        o = np.lexsort((close, pids))
        pids, close = pids[o], close[o]
        first = np.ones(len(pids), bool)
        first[1:] = pids[1:] != pids[:-1]
        return pids[first], close[first]

    def open_count(self) -> int:
        return sum(len(c["pid"]) for c in self.carry)

    # ------------------------------------------------------------------ known times
    def _kind(self, d: int) -> str:
        if self.max_dur[d] is not None:
            return "end"
        if self.min_dur[d] is not None and self.min_dur[d] > 1:
            return "deferred"
        return "start"

    def _duration_ok(self, d: int, ts: np.ndarray, te: np.ndarray) -> np.ndarray:
        dur = te - ts
        ok = dur > 0
        if self.min_dur[d] is not None:
            ok &= dur >= self.min_dur[d]
        if self.max_dur[d] is not None:
            ok &= dur <= self.max_dur[d]
        return ok

    # ------------------------------------------------------------------ one batch
    def derive(self, t: np.ndarray, seq: np.ndarray, pid: np.ndarray | None,
               masks: list[np.ndarray], values: list[np.ndarray | None]) -> Runs:
        """Situations touched by a batch of complete time steps (see module docstring).

        ``pid``: partition id per event (None: one partition, id 0). ``masks``: condition per
        definition. ``values``: per RETURN item, the attribute column (None for ``count(S)``).
        Equivalent to ``absorb(fragments(...))``.
        """
        return self.absorb(self.fragments(t, seq, pid, masks, values))

    def fragments(self, t: np.ndarray, seq: np.ndarray, pid: np.ndarray | None,
                  masks: list[np.ndarray], values: list[np.ndarray | None],
                  keep_context: bool = True) -> Fragments:
        """Phase 1 (pure, parallelisable): the runs of one batch, without the carry.

        A run starting at its partition's first event of the batch is a *head* (it may continue
        a carried run); a run reaching the partition's last event is open (a *tail*).
        """
        n = len(t)
        fr = Fragments(n=n, defs=[])
        if n == 0:
            fr.grp_pid = np.empty(0, np.int64)
            fr.grp_t0 = np.empty(0, np.int64)
            fr.grp_q0 = np.empty(0, np.int64)
            fr.ctx = BatchContext(t, [None] * len(self.aggs)) if keep_context else None
            return fr
        if pid is not None:
            order, grp_start, grp_pid = _partition_groups(pid)
        else:
            order = None
            grp_start = np.zeros(1, np.int64)
            grp_pid = np.zeros(1, np.int64)
        newgrp = np.zeros(n, bool)
        newgrp[grp_start] = True
        lastgrp = np.zeros(n, bool)
        lastgrp[grp_start[1:] - 1] = True
        lastgrp[-1] = True

        def at(a: np.ndarray, pos: np.ndarray) -> np.ndarray:
            """``a`` in partition-sorted order, at sorted positions ``pos`` (no full gather)."""
            return a[order[pos]] if order is not None else a[pos]

        fr.grp_pid = grp_pid
        fr.grp_t0 = at(t, grp_start)
        fr.grp_q0 = at(seq, grp_start)
        for i, v in enumerate(values):
            if v is not None:
                self.aggs[i].set_dtype(v.dtype)
        fr.dtypes = [a.dtype for a in self.aggs]
        if keep_context and self.with_open and self.aggs:
            fr.ctx = BatchContext(t[order] if order is not None else t,
                                  [None if v is None else (v[order] if order is not None else v)
                                   for v in values])
        else:
            fr.ctx = None

        for d in range(self.n_defs):
            m = masks[d][order] if order is not None else masks[d]
            m = np.asarray(m, dtype=bool)
            prev = np.empty(n, bool)
            prev[0] = False
            prev[1:] = m[:-1]
            prev &= ~newgrp
            nxt = np.empty(n, bool)
            nxt[-1] = False
            nxt[:-1] = m[1:]
            nxt &= ~lastgrp
            starts = np.flatnonzero(m & ~prev)
            lasts = np.flatnonzero(m & ~nxt)
            k = len(starts)
            is_open = lastgrp[lasts]
            nxt_idx = np.minimum(lasts + 1, n - 1)
            f: dict[str, Any] = {
                "part": at(pid, starts) if pid is not None else np.zeros(k, np.int64),
                "ts": at(t, starts),
                "ts_seq": at(seq, starts),
                "te": np.where(is_open, INF, at(t, nxt_idx)),
                "te_seq": np.where(is_open, -1, at(seq, nxt_idx)),
                "first_pos": starts.astype(np.int64),
                "last_pos": lasts.astype(np.int64),
                "last_t": at(t, lasts),
                "last_seq": at(seq, lasts),
                "is_head": newgrp[starts],
                "is_open": is_open,
            }
            f["prims"] = {i: self.aggs[i].runs(values[i], order, m, starts, lasts)
                          for i in self.items_of[d]}
            seq_items = [i for i in self.items_of[d] if self.aggs[i].sequential]
            if seq_items:
                # head runs may continue a carried run: keep their values so that phase 2 can
                # continue the carried float sum event by event (AggSpec.continue_sums)
                heads = np.flatnonzero(f["is_head"])
                hl = lasts[heads] - starts[heads] + 1
                offs = np.zeros(len(heads) + 1, np.int64)
                np.cumsum(hl, out=offs[1:])
                pos = np.repeat(starts[heads] - offs[:-1], hl) + np.arange(offs[-1])
                f["seq_heads"] = heads
                f["seq_offs"] = offs
                f["seq_vals"] = {i: at(values[i], pos) for i in seq_items}
            if self._kind(d) == "deferred":
                # first event with k + 1 - ts >= dmin (k < te), with the batch-local start;
                # head runs keep their event times so the carried start can be applied later
                lengths = lasts - starts + 1
                offsets = np.cumsum(lengths) - lengths
                pos_c = np.flatnonzero(m)
                run_c = np.repeat(np.arange(k), lengths)
                tc = at(t, pos_c)
                qc = at(seq, pos_c)
                f["known"], f["known_seq"] = _first_reaching(
                    tc, qc, run_c, offsets, lengths, f["ts"] + (self.min_dur[d] - 1), f["te"])
                heads = np.flatnonzero(f["is_head"])
                sel = np.concatenate([np.arange(offsets[h], offsets[h] + lengths[h])
                                      for h in heads]) if len(heads) else np.empty(0, np.int64)
                f["head_idx"] = heads
                f["head_len"] = lengths[heads]
                f["head_t"] = tc[sel]
                f["head_q"] = qc[sel]
            fr.defs.append(f)
        return fr

    def absorb(self, fr: Fragments) -> Runs:
        """Phase 2 (sequential, in batch order): merge the carry, known times, duration filter."""
        parts = _Parts(len(self.aggs))
        self.ctx = fr.ctx
        if fr.n == 0:
            return parts.build(self.aggs)
        for a, dt in zip(self.aggs, fr.dtypes):
            a.set_dtype(dt)
        grp_pid = fr.grp_pid
        for d in range(self.n_defs):
            f = fr.defs[d]
            k = len(f["ts"])
            rows: dict[str, np.ndarray] = {
                "part": f["part"], "stream": np.full(k, d, np.int64), "ts": f["ts"].copy(),
                "ts_seq": f["ts_seq"].copy(), "te": f["te"], "te_seq": f["te_seq"],
                "first_pos": f["first_pos"], "last_pos": f["last_pos"],
                "has_pre": np.zeros(k, bool),
            }
            is_open, is_head = f["is_open"], f["is_head"]
            items = self.items_of[d]
            prims = {i: (f["prims"][i][0].copy(), f["prims"][i][1].copy()) for i in items}
            pre = {i: self.aggs[i].empty(k) for i in items}
            kind = self._kind(d)
            if kind == "deferred":
                known = f["known"].copy()
                known_q = f["known_seq"].copy()
                known_new = known != INF
            c = self.carry[d]
            keep = np.ones(len(c["pid"]), bool)
            if len(c["pid"]):
                gpos = np.searchsorted(grp_pid, c["pid"])
                gposc = np.minimum(gpos, len(grp_pid) - 1)
                present = (gpos < len(grp_pid)) & (grp_pid[gposc] == c["pid"])
                head_idx = np.flatnonzero(is_head)
                hp = rows["part"][head_idx]
                cpos = np.searchsorted(c["pid"], hp)
                cposc = np.minimum(cpos, len(c["pid"]) - 1)
                matched = (cpos < len(c["pid"])) & (c["pid"][cposc] == hp)
                ridx, cidx = head_idx[matched], cposc[matched]
                # continuing runs: take the carried start, known time and primitives
                rows["ts"][ridx] = c["ts"][cidx]
                rows["ts_seq"][ridx] = c["ts_seq"][cidx]
                rows["has_pre"][ridx] = True
                for i in items:
                    ca, cb = c[f"a{i}"][cidx], c[f"b{i}"][cidx]
                    ra, rb = prims[i]
                    na, nb = self.aggs[i].combine((ca, cb), (ra[ridx], rb[ridx]))
                    if self.aggs[i].sequential and len(ridx):
                        hq = np.searchsorted(f["seq_heads"], ridx)
                        na = self.aggs[i].continue_sums(ca, f["seq_vals"][i],
                                                        f["seq_offs"][hq], f["seq_offs"][hq + 1])
                    if ra.dtype != na.dtype:
                        ra = ra.astype(na.dtype)
                    ra[ridx] = na
                    rb[ridx] = nb
                    prims[i] = (ra, rb)
                    pa_, pb_ = pre[i]
                    if pa_.dtype != ca.dtype:
                        pa_ = pa_.astype(np.result_type(pa_.dtype, ca.dtype))
                    pa_[ridx] = ca
                    pb_[ridx] = cb
                    pre[i] = (pa_, pb_)
                if kind == "deferred" and len(ridx):
                    self._rekey_heads(d, f, ridx, c["known"][cidx], c["known_seq"][cidx],
                                      rows["ts"], known, known_q, known_new)
                continued = np.zeros(len(c["pid"]), bool)
                continued[cidx] = True
                ended = present & ~continued
                keep = ~present
                if ended.any():
                    self._carried_finish(d, c, ended, fr.grp_t0[gposc[ended]],
                                         fr.grp_q0[gposc[ended]], parts)

            # known times
            if kind == "start":
                known = rows["ts"].copy()
                known_q = rows["ts_seq"].copy()
                known_new = ~rows["has_pre"] & (rows["ts"] < rows["te"])
            elif kind == "end":
                known = rows["te"].copy()
                known_q = rows["te_seq"].copy()
                known_new = np.zeros(k, bool)
            else:
                still = (known == INF) & ~is_open
                known[still] = rows["te"][still]
                known_q[still] = rows["te_seq"][still]
                known_new = known_new & (known < rows["te"])
            rows["known"], rows["known_seq"], rows["known_new"] = known, known_q, known_new

            ok = ~is_open & self._duration_ok(d, rows["ts"], rows["te"])
            parts.add(ok | is_open if self.with_open else ok, rows, prims, pre, self.aggs)

            # new carry: untouched partitions + runs still open
            oi = np.flatnonzero(is_open)
            newc = {fld: np.concatenate([c[fld][keep], x]) for fld, x in (
                ("pid", rows["part"][oi]), ("ts", rows["ts"][oi]), ("ts_seq", rows["ts_seq"][oi]),
                ("known", known[oi] if kind != "end" else np.full(len(oi), INF, np.int64)),
                ("known_seq", known_q[oi]), ("last_t", f["last_t"][oi]),
                ("last_seq", f["last_seq"][oi]))}
            for i in items:
                a, b = prims[i]
                ca = c[f"a{i}"][keep]
                dt = np.result_type(ca.dtype, a.dtype) if ca.dtype != object else object
                newc[f"a{i}"] = np.concatenate([ca.astype(dt), a[oi].astype(dt)])
                newc[f"b{i}"] = np.concatenate([c[f"b{i}"][keep], b[oi]])
            if len(newc["pid"]) > 1:
                o = np.argsort(newc["pid"], kind="stable")
                newc = {fld: v[o] for fld, v in newc.items()}
            self.carry[d] = newc
        return parts.build(self.aggs)

    def _rekey_heads(self, d: int, f: dict[str, Any], ridx: np.ndarray, c_known: np.ndarray,
                     c_known_q: np.ndarray, ts_true: np.ndarray, known: np.ndarray,
                     known_q: np.ndarray, known_new: np.ndarray) -> None:
        """Known times of head runs continuing a carried run (AT LEAST only): the carried known
        time if reached before, else the first head event reaching ``dmin`` from the true start.
        At most one head per partition and definition, so the loop is short."""
        pos_of = {int(h): q for q, h in enumerate(f["head_idx"])}
        offs = np.concatenate([[0], np.cumsum(f["head_len"])])
        for r, ck, ckq in zip(ridx.tolist(), c_known.tolist(), c_known_q.tolist()):
            if ck != INF:
                known[r], known_q[r], known_new[r] = ck, ckq, False
                continue
            q = pos_of[r]
            ht = f["head_t"][offs[q]:offs[q + 1]]
            thr = ts_true[r] + self.min_dur[d] - 1
            ok = np.flatnonzero((ht >= thr) & (ht < f["te"][r]))
            if len(ok):
                known[r], known_q[r] = ht[ok[0]], f["head_q"][offs[q] + ok[0]]
                known_new[r] = True
            else:
                known[r], known_q[r], known_new[r] = INF, -1, False

    def _carried_finish(self, d: int, c: dict[str, np.ndarray], sel: np.ndarray,
                        te: np.ndarray, te_seq: np.ndarray, parts: _Parts) -> None:
        """Carried runs ending at the first event of their partition in this batch."""
        n = int(sel.sum())
        ts = c["ts"][sel]
        known = c["known"][sel].copy()
        known_q = c["known_seq"][sel].copy()
        kind = self._kind(d)
        if kind == "end":
            known, known_q = te.copy(), te_seq.copy()
        else:
            miss = known == INF
            known[miss] = te[miss]
            known_q[miss] = te_seq[miss]
        rows = {
            "part": c["pid"][sel], "stream": np.full(n, d, np.int64), "ts": ts, "te": te,
            "ts_seq": c["ts_seq"][sel], "te_seq": te_seq, "known": known, "known_seq": known_q,
            "known_new": np.zeros(n, bool), "first_pos": np.full(n, -1, np.int64),
            "last_pos": np.full(n, -1, np.int64), "has_pre": np.ones(n, bool),
        }
        prims = {i: (c[f"a{i}"][sel], c[f"b{i}"][sel]) for i in self.items_of[d]}
        ok = self._duration_ok(d, ts, te)
        parts.add(ok, rows, prims, prims, self.aggs)

    # ------------------------------------------------------------------ end of input
    def close(self, policy: str) -> Runs:
        """End of input: drop open runs, or close them at ``t_last + 1`` (policy ``"close"``)."""
        parts = _Parts(len(self.aggs))
        self.ctx = None
        if policy == "close":
            for d in range(self.n_defs):
                c = self.carry[d]
                if len(c["pid"]):
                    sel = np.ones(len(c["pid"]), bool)
                    self._carried_finish(d, c, sel, c["last_t"] + 1, c["last_seq"], parts)
        self.reset()
        return parts.build(self.aggs)

    # ------------------------------------------------------------------ state
    def get_state(self) -> list[dict[str, np.ndarray]]:
        return [{k: v.copy() for k, v in c.items()} for c in self.carry]

    def set_state(self, state: list[dict[str, np.ndarray]]) -> None:
        self.carry = [{k: v.copy() for k, v in c.items()} for c in state]

    def _check(self) -> None:
        """Invariants: carry sorted by partition, one open run per (partition, definition)."""
        for c in self.carry:
            p = c["pid"]
            assert np.all(p[1:] > p[:-1]), "carry not strictly sorted by partition"
            assert np.all(c["ts"] <= c["last_t"]), "open run ends before it starts"
