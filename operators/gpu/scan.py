"""Parallel prefix scans on the device: compaction offsets and segmented window scans.

Two primitives every GPU operator builds on:

* :func:`exclusive_sum` - exclusive prefix sum of int64 counts (hit counts per thread, result
  counts per probe slice, matched partial-match lengths). It turns per-thread counts into output
  offsets so results are written compactly *and in input order*.
* :func:`segmented_scan` - inclusive prefix (or suffix, ``reverse=True``) scan with one of the
  merges of windowed aggregation (:data:`ADD`, :data:`MIN`, :data:`MAX`, :data:`FIRST`,
  :data:`LAST`; the last two carry a linked value array) inside consecutive segments of length
  ``L``. The window combine of the GPU aggregation (van Herk / Gil-Werman) is two such scans
  with ``L`` = the window's slice count.

Algorithm: each block of :data:`~replaydb.operators.gpu.device.TPB` threads scans one tile in
shared memory (Hillis-Steele, ``log2(TPB)`` steps with barriers, no warp intrinsics so the CUDA
simulator runs it too); tile totals are scanned recursively by the same kernels; a last pass
merges each tile's prefix into its elements. Work O(n log TPB), depth O(log n); the recursion has
``log_TPB(n)`` levels.

A tile never spans two segments (tiles are laid out per segment), so arbitrary ``L`` (not only
powers of two) needs no segment flags.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, float64, int64

from replaydb.operators.gpu.device import TPB, blocks_for

ADD = 0
MIN = 1
MAX = 2
FIRST = 3   # keep the smaller key (and its value)
LAST = 4    # keep the larger key (and its value)

INT_MAX = np.iinfo(np.int64).max
INT_MIN = np.iinfo(np.int64).min


# --------------------------------------------------------------------------- exclusive sum
@cuda.jit
def _block_exclusive_i64(x, out, block_sums, n):  # pragma: no cover - runs on the device
    s = cuda.shared.array(TPB, int64)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + tid
    v = x[i] if i < n else 0
    s[tid] = v
    d = 1
    while d < TPB:
        cuda.syncthreads()
        a = s[tid - d] if tid >= d else 0
        cuda.syncthreads()
        s[tid] += a
        d *= 2
    cuda.syncthreads()
    if i < n:
        out[i] = s[tid] - v
    if tid == TPB - 1:
        block_sums[cuda.blockIdx.x] = s[tid]


@cuda.jit
def _add_block_offsets(out, offs, n):  # pragma: no cover - runs on the device
    i = cuda.grid(1)
    if i < n:
        out[i] += offs[i // TPB]


def exclusive_sum(x: Any, n: int, out: Any | None = None) -> tuple[Any, int]:
    """Exclusive prefix sum of the first ``n`` int64 entries of device array ``x``.

    Returns ``(offsets, total)``: ``offsets`` a device array (``out`` when given) with
    ``offsets[i] = x[0] + ... + x[i-1]``, and the total as a Python int (one 8-byte copy back).
    """
    if out is None:
        out = cuda.device_array(max(1, n), dtype=np.int64)
    if n == 0:
        return out, 0
    nb = blocks_for(n)
    sums = cuda.device_array(nb, dtype=np.int64)
    _block_exclusive_i64[nb, TPB](x, out, sums, n)
    if nb == 1:
        return out, int(sums[:1].copy_to_host()[0])
    offs, total = exclusive_sum(sums, nb)
    _add_block_offsets[nb, TPB](out, offs, n)
    return out, total


# --------------------------------------------------------------------------- segmented scans
@cuda.jit(device=True, inline=True)
def combine(op, ak, av, bk, bv):  # pragma: no cover - runs on the device
    """Merge ``a`` (earlier in scan order) with ``b``; returns (key, value)."""
    if op == ADD:  # a lone addition is never contracted into an FMA: exact on both devices
        return ak + bk, av
    if op == MIN:
        if ak != ak:
            return ak, av
        if bk != bk:
            return bk, bv
        return (ak if ak <= bk else bk), av
    if op == MAX:
        if ak != ak:
            return ak, av
        if bk != bk:
            return bk, bv
        return (ak if ak >= bk else bk), av
    if op == FIRST:
        if ak <= bk:
            return ak, av
        return bk, bv
    if ak >= bk:  # LAST
        return ak, av
    return bk, bv


def _make_tile_scan(kt: Any, vt: Any) -> Any:
    """Kernel scanning each tile of each segment; one specialization per (key, value) type."""

    @cuda.jit
    def tile_scan(k, v, n, L, reverse, op, has_v, tiles, ik, iv, tk, tv):  # pragma: no cover
        sk = cuda.shared.array(TPB, kt)
        sv = cuda.shared.array(TPB, vt)
        tid = cuda.threadIdx.x
        b = cuda.blockIdx.x
        seg = b // tiles
        j = b - seg * tiles
        s0 = seg * L
        slen = L if s0 + L <= n else n - s0
        p = j * TPB + tid
        ok = p < slen
        phys = s0 + (slen - 1 - p if reverse else p)
        if ok:
            sk[tid] = k[phys]
            sv[tid] = v[phys] if has_v else iv
        else:
            sk[tid] = ik
            sv[tid] = iv
        d = 1
        while d < TPB:
            cuda.syncthreads()
            ak = ik
            av = iv
            if tid >= d:
                ak = sk[tid - d]
                av = sv[tid - d]
            cuda.syncthreads()
            if tid >= d:
                rk, rv = combine(op, ak, av, sk[tid], sv[tid])
                sk[tid] = rk
                sv[tid] = rv
            d *= 2
        cuda.syncthreads()
        if ok:
            k[phys] = sk[tid]
            if has_v:
                v[phys] = sv[tid]
        last = slen - j * TPB - 1   # the tile's last element (an empty tile: its identity)
        if last > TPB - 1:
            last = TPB - 1
        if last < 0:
            last = 0
        if tid == last:
            tk[b] = sk[tid]
            tv[b] = sv[tid]

    return tile_scan


@cuda.jit
def tile_merge(k, v, n, L, reverse, op, has_v, tiles, tk, tv):  # pragma: no cover
    """Merge each tile's exclusive prefix (the previous tile's inclusive total) into it."""
    tid = cuda.threadIdx.x
    b = cuda.blockIdx.x
    seg = b // tiles
    j = b - seg * tiles
    if j == 0:
        return
    s0 = seg * L
    slen = L if s0 + L <= n else n - s0
    p = j * TPB + tid
    if p >= slen:
        return
    phys = s0 + (slen - 1 - p if reverse else p)
    vv = v[phys] if has_v else tv[b - 1]
    rk, rv = combine(op, tk[b - 1], tv[b - 1], k[phys], vv)
    k[phys] = rk
    if has_v:
        v[phys] = rv


_TILE_SCAN: dict[tuple[str, str], Any] = {}
_NB = {"int64": int64, "float64": float64}


def tile_scan_kernel(kd: str, vd: str) -> Any:
    """The tile-scan kernel for key dtype ``kd`` and value dtype ``vd`` (cached)."""
    kern = _TILE_SCAN.get((kd, vd))
    if kern is None:
        kern = _TILE_SCAN[(kd, vd)] = _make_tile_scan(_NB[kd], _NB[vd])
    return kern


def kernel_by_name(name: str, sig: tuple[Any, ...]) -> Any:
    """Factory-built kernels by name and recorded signature (for the PTX compile check)."""
    if name == "tile_scan":
        return tile_scan_kernel(np.dtype(sig[0][1]).name, np.dtype(sig[1][1]).name)
    raise KeyError(name)


def identity(op: int, dtype: np.dtype) -> Any:
    """The identity element of ``op`` for keys of ``dtype``."""
    f = np.dtype(dtype).kind == "f"
    if op == ADD:
        return np.zeros(1, dtype)[0]
    if op in (MIN, FIRST):
        return np.array(np.inf if f else INT_MAX, dtype)
    return np.array(-np.inf if f else INT_MIN, dtype)


def segmented_scan(k: Any, n: int, L: int, op: int, *, reverse: bool = False,
                   v: Any | None = None) -> None:
    """In place: inclusive scan of device array ``k[:n]`` within segments of length ``L``.

    ``reverse`` scans every segment from its end (a suffix scan). ``v`` is the value array linked
    to ``k`` for :data:`FIRST`/:data:`LAST` (moved along with the winning key).
    """
    if n <= 0:
        return
    kd = np.dtype(k.dtype)
    has_v = v is not None
    vd = np.dtype(v.dtype) if has_v else kd
    kern = tile_scan_kernel(kd.name, vd.name)
    nseg = (n + L - 1) // L
    tiles = (min(L, n) + TPB - 1) // TPB
    grid = nseg * tiles
    ik = identity(op, kd)[()]
    iv = np.zeros(1, vd)[0]
    vv = v if has_v else cuda.device_array(1, dtype=vd)
    tk = cuda.device_array(grid, dtype=kd)
    tv = cuda.device_array(grid, dtype=vd)
    kern[grid, TPB](k, vv, n, L, reverse, op, has_v, tiles, ik, iv, tk, tv)
    if tiles == 1:
        return
    # scan the tile totals of every segment (forward: tiles are already in scan order)
    segmented_scan(tk, grid, tiles, op, v=tv if has_v else None)
    tile_merge[grid, TPB](k, vv, n, L, reverse, op, has_v, tiles, tk, tv)
