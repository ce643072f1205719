"""GPU windowed join (dissertation 4.3.4): each arriving event probes the other window on the GPU.

:class:`GpuJoinOperator` takes the same :class:`~replaydb.operators.join.JoinConfig` as
:class:`~replaydb.operators.join.JoinOperator` and gives identical results (same rows, same
order). Window bookkeeping (which events of the other stream form the active window of each
arriving event, Defs. 2.7-2.9) stays on the host, vectorized exactly as in the CPU operator; what
moves to the device is the part that costs O(probes x window): evaluating the join predicate on
every (arriving event, window event) pair and producing the matching pairs.

Per batch and probing side:

1. the predicate's columns of the batch and of the other side's retained events are converted as
   the CPU operator converts them and copied to the device (one staged transfer per matrix);
2. each probe's window range is cut into *slices* of ``TPB`` events (the dissertation's 64-event
   slices; one block of threads per slice, grid-stride over all slices). Every thread evaluates
   the predicate (:mod:`.exprvm`) on one pair; a block-level prefix scan of the hit flags ranks
   the slice's hits in window order, and **one atomic add per slice reserves the slice's output
   slots** in a shared output buffer;
3. *commit in order*: an exclusive scan of the per-slice hit counts in slice order (probe order,
   then window order) gives each slice its final position, and a second kernel moves every
   slice's pairs from its reserved slots to that position. The output is compacted on the device
   and ordered as the CPU operator orders it;
4. the (probe row, window event) index pairs travel back; the host assembles result rows with the
   CPU operator's own row builder.

If the output buffer was too small (hits are unknown in advance) the chunk is run again with the
exact size the atomics counted. Probes are processed in chunks of at most ``device_pairs``
candidate pairs to bound the per-slice bookkeeping.

Complexity: O(pairs x predicate) device work; O(window + batch) host work per batch for the
column conversion (as the CPU operator); O(results) transfer back.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from numba import cuda, float64, int64

from replaydb.operators.base import DEFAULT_STATE_CAP, column_np
from replaydb.operators.expr import columns
from replaydb.operators.exprcode.machine import eval_rows
from replaydb.operators.exprcode.program import Program
from replaydb.operators.gpu.columns import ColumnSet, Source
from replaydb.operators.gpu.device import TPB, DeviceArrays, Staging, resolve_backend
from replaydb.operators.gpu.exprvm import (
    DEPTH,
    NotCompilable,
    check_expr,
    compile_predicate,
    on_device,
)
from replaydb.operators.gpu.scan import exclusive_sum
from replaydb.operators.join import JoinConfig, JoinOperator, _np

MAX_GRID = 1 << 15
"""Most blocks of one launch (grid-stride loops cover the rest)."""
MIN_OUT_CAP = 1 << 16
"""Smallest output buffer of a launch; too small a buffer costs one rerun with the exact size."""


@cuda.jit
def join_slices(op, a, b, fc, ic, n_ops, strc, im0, fm0, im1, fm1, probe_left,  # pragma: no cover
                pidx, lo, cnt, slice_off, n_probes, n_slices, out_p, out_o, cap, gcount,
                s_base, s_cnt):
    """Evaluate the pairs of every slice; reserve output slots with one atomic per slice."""
    rank = cuda.shared.array(TPB, int64)
    info = cuda.shared.array(3, int64)
    si = cuda.local.array(DEPTH, int64)
    sf = cuda.local.array(DEPTH, float64)
    tid = cuda.threadIdx.x
    sl = cuda.blockIdx.x
    while sl < n_slices:
        if tid == 0:  # the probe owning this slice: last j with slice_off[j] <= sl
            lo_j = 0
            hi_j = n_probes - 1
            while lo_j < hi_j:
                mid = (lo_j + hi_j + 1) // 2
                if slice_off[mid] <= sl:
                    lo_j = mid
                else:
                    hi_j = mid - 1
            info[0] = lo_j
        cuda.syncthreads()
        j = info[0]
        k = sl - slice_off[j]
        pos = k * TPB + tid
        hit = 0
        o = lo[j] + pos
        p = pidx[j]
        if pos < cnt[j]:
            if probe_left:
                ok = eval_rows(op, a, b, fc, ic, 0, n_ops, strc, im0, fm0, p, im1, fm1, o, si,
                               sf)
            else:
                ok = eval_rows(op, a, b, fc, ic, 0, n_ops, strc, im0, fm0, o, im1, fm1, p, si,
                               sf)
            if ok:
                hit = 1
        rank[tid] = hit
        d = 1
        while d < TPB:  # inclusive block scan of the hit flags
            cuda.syncthreads()
            x = rank[tid - d] if tid >= d else 0
            cuda.syncthreads()
            rank[tid] += x
            d *= 2
        cuda.syncthreads()
        if tid == TPB - 1:
            total = rank[tid]
            base = cuda.atomic.add(gcount, 0, total) if total > 0 else 0
            s_base[sl] = base
            s_cnt[sl] = total
            info[1] = base
        cuda.syncthreads()
        if hit:
            w = info[1] + rank[tid] - 1
            if w < cap:
                out_p[w] = p
                out_o[w] = o
        cuda.syncthreads()
        sl += cuda.gridDim.x


@cuda.jit
def join_commit(s_base, s_cnt, fin_off, n_slices, out_p, out_o, fin_p, fin_o):  # pragma: no cover
    """Move every slice's pairs from its reserved slots to its in-order position."""
    tid = cuda.threadIdx.x
    sl = cuda.blockIdx.x
    while sl < n_slices:
        c = s_cnt[sl]
        src = s_base[sl]
        dst = fin_off[sl]
        r = tid
        while r < c:
            fin_p[dst + r] = out_p[src + r]
            fin_o[dst + r] = out_o[src + r]
            r += TPB
        sl += cuda.gridDim.x


def device_pairs(prog: Program, strc: np.ndarray, mats: list[tuple[np.ndarray, np.ndarray]],
                 probe_left: bool, pidx: np.ndarray, lo: np.ndarray, cnt: np.ndarray,
                 staging: Staging, dev: DeviceArrays) -> tuple[np.ndarray, np.ndarray]:
    """Matching (probe row, other row) pairs, ordered by probe then other row."""
    nslices = (cnt + TPB - 1) // TPB
    n_slices = int(nslices.sum())
    n_probes = len(pidx)
    if n_slices == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    slice_off = np.concatenate(([0], np.cumsum(nslices)[:-1])).astype(np.int64)
    d = {k: staging.stage(k, v) for k, v in (("j_pidx", pidx), ("j_lo", lo), ("j_cnt", cnt),
                                             ("j_soff", slice_off), ("j_strc", strc))}
    (im0, fm0), (im1, fm1) = mats
    d_im0, d_fm0 = staging.stage("j_im0", im0), staging.stage("j_fm0", fm0)
    d_im1, d_fm1 = staging.stage("j_im1", im1), staging.stage("j_fm1", fm1)
    op, a, b, fc, ic = on_device(prog)
    s_base = dev.get("j_sbase", n_slices, np.int64)
    s_cnt = dev.get("j_scnt", n_slices, np.int64)
    pairs = int(cnt.sum())
    cap = max(1, min(pairs, max(MIN_OUT_CAP, pairs // 16)))
    grid = min(n_slices, MAX_GRID)
    while True:
        gcount = cuda.to_device(np.zeros(1, dtype=np.int64))
        out_p = dev.get("j_outp", cap, np.int64)
        out_o = dev.get("j_outo", cap, np.int64)
        join_slices[grid, TPB](op, a, b, fc, ic, prog.n_ops, d["j_strc"], d_im0, d_fm0, d_im1,
                               d_fm1, probe_left, d["j_pidx"], d["j_lo"], d["j_cnt"],
                               d["j_soff"], n_probes, n_slices, out_p, out_o, cap, gcount,
                               s_base, s_cnt)
        total = int(gcount.copy_to_host()[0])
        if total <= cap:
            break
        cap = total  # the atomics counted the exact size: run the chunk again
    if total == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    fin_off, _ = exclusive_sum(s_cnt, n_slices, out=dev.get("j_foff", n_slices, np.int64))
    fin_p = dev.get("j_finp", total, np.int64)
    fin_o = dev.get("j_fino", total, np.int64)
    join_commit[grid, TPB](s_base, s_cnt, fin_off, n_slices, out_p, out_o, fin_p, fin_o)
    return staging.fetch(fin_p, total), staging.fetch(fin_o, total)


class GpuJoinOperator(JoinOperator):
    """Windowed join with the pair evaluation on the GPU (see the module docstring).

    ``backend`` as for :class:`~replaydb.operators.gpu.filter.GpuFilterOperator`;
    ``device_pairs`` bounds the candidate pairs of one device launch.
    """

    device = "gpu"

    def __init__(self, config: JoinConfig, *, state_cap: int | None = DEFAULT_STATE_CAP,
                 backend: str = "auto", device_pairs: int = 1 << 28) -> None:
        check_expr(config.predicate, "join")
        super().__init__(config, state_cap=state_cap)
        self.backend = resolve_backend(backend)
        self.device_pairs = int(device_pairs)
        self._programs: dict[Any, Program | NotCompilable] = {}
        self._staging = Staging()
        self._dev = DeviceArrays()
        self._pred_names = sorted({c.name for c in columns(config.predicate)})

    def _join(self, batch: pa.RecordBatch, idx: np.ndarray, probe: str, other_key: str,
              lo: np.ndarray, hi: np.ndarray, t: np.ndarray) -> tuple[list, list]:
        if self.backend == "cpu":
            return super()._join(batch, idx, probe, other_key, lo, hi, t)
        cfg = self.config
        other = self._sides[other_key]
        other_tab = pa.Table.from_batches(other.batches, schema=other.batches[0].schema) \
            if other.batches else None
        counts = hi - lo
        if other_tab is None or counts.sum() == 0:
            return [], []
        probe_rows = batch.select(cfg.attributes)
        psrc, osrc = Source(batch.num_rows), Source(len(other.t))
        for n in self._pred_names:
            if n == "t":
                psrc.add(n, column_np(batch, "t"))
                osrc.add(n, other.t)
            elif n == "seq":
                psrc.add(n, column_np(batch, "seq"))
                osrc.add(n, other.seq)
            else:
                pc = probe_rows.column(n)
                psrc.add(n, _np(pc), pc.type, pc.null_count)
                oc = other_tab.column(n)
                osrc.add(n, _np(oc), oc.type, oc.null_count)
        probe_left = probe == "L"
        cs = ColumnSet([psrc, osrc] if probe_left else [osrc, psrc])
        try:
            prog = self._program(cs)
            if prog.orders_strings and cs.string_nulls():
                raise NotCompilable("ordering strings with NULLs")
        except NotCompilable:
            self.counters.extra["cpu_fallback_batches"] = \
                self.counters.extra.get("cpu_fallback_batches", 0) + 1
            return super()._join(batch, idx, probe, other_key, lo, hi, t)
        strc = cs.finish(prog.str_literals)
        mats = [cs.matrices(0), cs.matrices(1)]
        rel_lo = (lo - other.base).astype(np.int64)
        outs, keys = [], []
        start = 0
        while start < len(idx):
            csum = np.cumsum(counts[start:])
            end = start + max(1, int(np.searchsorted(csum, self.device_pairs, "right")))
            pi, rel = device_pairs(prog, strc, mats, probe_left, idx[start:end].astype(np.int64),
                                   rel_lo[start:end], counts[start:end].astype(np.int64),
                                   self._staging, self._dev)
            if len(pi):
                outs.append(self._rows(probe, batch, pi, other_tab, rel, other, t))
                keys.append(np.stack([pi, rel + other.base], axis=1))
            start = end
        return outs, keys

    def _program(self, cs: ColumnSet) -> Program:
        key = cs.signature()
        got = self._programs.get(key)
        if got is None:
            cfg = self.config

            def resolve(c: Any) -> Any:
                if c.qualifier in (cfg.left, "L"):
                    return cs.slot(0, c.name)
                if c.qualifier in (cfg.right, "R"):
                    return cs.slot(1, c.name)
                raise NotCompilable(f"column {c.name!r} without a side")

            try:
                got = compile_predicate(cfg.predicate, resolve)
            except NotCompilable as e:
                got = e
            self._programs[key] = got
        if isinstance(got, NotCompilable):
            raise got
        return got
