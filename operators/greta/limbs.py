"""Exact multi-limb integers and the value rows of GRETA's tables, compiled (inlined into the
kernels at Numba's IR level).

An exact value is a two's complement number of ``L`` limbs of :data:`LIMB` bits stored in int64
(least significant first; :func:`normalize` carries). A value row holds, per window slot ``k``
of ``K``, the exact channels (``Cb`` numbers), the integer min/max (``Cmi``), the float sums
(``Cf``) and the float min/max (``Cmf``); ``G`` is the kernel's plan tuple
(:class:`~replaydb.operators.greta.runtime.GC`). Every helper is O(channels x slots x L).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

LIMB = 30
MASK = (1 << LIMB) - 1
HALF = 1 << (LIMB - 1)
I64_MIN = np.iinfo(np.int64).min
I64_MAX = np.iinfo(np.int64).max


@nb.njit(cache=True, inline="always")
def normalize(a, r, base, L):
    """Propagate carries of the L limbs at a[r, base:base+L] (two's complement mod 2**(30L))."""
    carry = 0
    for i in range(L):
        v = a[r, base + i] + carry
        carry = v >> LIMB
        a[r, base + i] = v & MASK


@nb.njit(cache=True, inline="always")
def magnitude_bits(a, r, base, L):
    """An upper bound on the bit length of |value| of the limbs at a[r, base:base+L]."""
    neg = a[r, base + L - 1] >= HALF
    fill = MASK if neg else 0
    for i in range(L - 1, -1, -1):
        v = a[r, base + i]
        if v != fill:
            if neg:
                v = MASK - v
            b = math.frexp(v)[1] if v > 0 else 0  # bit length of v (exact: v < 2**30)
            return LIMB * i + b + 1
    return 1


@nb.njit(cache=True, inline="always")
def is_zero(a, r, base, L):
    for i in range(L):
        if a[r, base + i] != 0:
            return False
    return True


@nb.njit(cache=True, inline="always")
def to_float(a, r, base, L):
    """Value of non-negative limbs as float64 (inf when too large)."""
    v = 0.0
    for i in range(L - 1, -1, -1):
        v = v * 1073741824.0 + a[r, base + i]
    return v


@nb.njit(cache=True, inline="always")
def mul_small(src, sr, sbase, L, attr, dst, dr, dbase):
    """dst[dr, dbase:+L] += src[sr, sbase:+L] * attr (exact modulo 2**(30L)); then normalize."""
    neg = attr < 0
    if neg:
        m = np.uint64(-(attr + 1)) + np.uint64(1)
    else:
        m = np.uint64(attr)
    m0 = np.int64(m & np.uint64(MASK))
    m1 = np.int64((m >> np.uint64(LIMB)) & np.uint64(MASK))
    m2 = np.int64(m >> np.uint64(2 * LIMB))
    carry = 0
    # product limbs, column by column
    tmp0 = 0
    for k in range(L):
        acc = carry
        acc += src[sr, sbase + k] * m0
        if k >= 1:
            acc += src[sr, sbase + k - 1] * m1
        if k >= 2:
            acc += src[sr, sbase + k - 2] * m2
        carry = acc >> LIMB
        tmp0 = acc & MASK
        if neg:
            # accumulate the negated product: subtract limb by limb (normalized afterwards)
            dst[dr, dbase + k] -= tmp0
        else:
            dst[dr, dbase + k] += tmp0
    normalize(dst, dr, dbase, L)


# ---------------------------------------------------------------------------- value rows
@nb.njit(cache=True, inline="always")
def keep_extreme(d, r, col, v, is_max):
    """``d[r, col]`` := the larger (``is_max``) or smaller of itself and ``v``."""
    if is_max:
        if v > d[r, col]:
            d[r, col] = v
    elif v < d[r, col]:
        d[r, col] = v


@nb.njit(cache=True, inline="always")
def reset_row(vi, vf, r, G):
    K, L, Cb = G.K, G.L, G.Cb
    nb_ = Cb * K * L
    for j in range(nb_):
        vi[r, j] = 0
    for c in range(G.Cmi):
        s = I64_MIN if G.cmi_max[c] else I64_MAX
        for k in range(K):
            vi[r, nb_ + c * K + k] = s
    for j in range(G.Cf * K):
        vf[r, j] = 0.0
    for c in range(G.Cmf):
        s = -np.inf if G.cmf_max[c] else np.inf
        for k in range(K):
            vf[r, G.Cf * K + c * K + k] = s


@nb.njit(cache=True, inline="always")
def acc_row(dI, dF, dr, sI, sF, sr, G, wa, wb, carry):
    """Aggregate row ``s`` into row ``d`` for the slots of windows wa..wb."""
    K, L, Cb = G.K, G.L, G.Cb
    nb_ = Cb * K * L
    k = wa % K - 1
    for _w in range(wa, wb + 1):
        k += 1  # w % K, without a division per window
        if k == K:
            k = 0
        for c in range(Cb):
            base = (c * K + k) * L
            for i in range(L):
                dI[dr, base + i] += sI[sr, base + i]
            if carry:
                normalize(dI, dr, base, L)
        for c in range(G.Cmi):
            col = nb_ + c * K + k
            keep_extreme(dI, dr, col, sI[sr, col], G.cmi_max[c])
        for c in range(G.Cf):
            col = c * K + k
            dF[dr, col] += sF[sr, col]
        for c in range(G.Cmf):
            col = G.Cf * K + c * K + k
            keep_extreme(dF, dr, col, sF[sr, col], G.cmf_max[c])


@nb.njit(cache=True, inline="always")
def sub_row(dI, dF, dr, sI, sF, sr, G):
    """Subtract the sums of row ``s`` from row ``d`` (all slots); min/max are not touched."""
    K, L = G.K, G.L
    for k in range(K):
        for c in range(G.Cb):
            base = (c * K + k) * L
            for i in range(L):
                dI[dr, base + i] -= sI[sr, base + i]
            normalize(dI, dr, base, L)
        for c in range(G.Cf):
            dF[dr, c * K + k] -= sF[sr, c * K + k]


@nb.njit(cache=True, inline="always")
def copy_row(dI, dF, dr, sI, sF, sr):
    for j in range(sI.shape[1]):
        dI[dr, j] = sI[sr, j]
    for j in range(sF.shape[1]):
        dF[dr, j] = sF[sr, j]
