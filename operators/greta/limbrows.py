"""Rows of exact GRETA values as limbs (two's complement, base 2**30, least significant first)
and their conversion to Python ints, int64 and Arrow columns. The kernel keeps every exact
aggregate as ``L`` limbs (:mod:`.limbs`); the operator turns closed windows' rows into output
columns with these. Vectorized, O(rows x limbs) each.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from replaydb.operators.greta import kernel as kn


def limbs_to_int(limbs: np.ndarray) -> int:
    """Python int of two's complement limbs (base 2**30, least significant first)."""
    v = 0
    for x in limbs[::-1]:
        v = (v << kn.LIMB) | int(x)
    if int(limbs[-1]) >= kn.HALF:
        v -= 1 << (kn.LIMB * len(limbs))
    return v


def limb_rows_to_int64(limbs: np.ndarray) -> np.ndarray | None:
    """:func:`limbs_to_int` of every row of ``limbs`` (n x L) as int64 when every value fits
    in 60 bits (the limbs above the second only extend the sign), else None. O(n L)."""
    n, L = limbs.shape
    limbs = limbs.astype(np.int64)
    if L == 1:
        v = limbs[:, 0]
        return np.where(v >= kn.HALF, v - (1 << kn.LIMB), v)
    neg2 = limbs[:, 1] >= kn.HALF  # sign of the low 60 bits
    if L == 2 or bool(np.where(neg2[:, None], limbs[:, 2:] == kn.MASK, limbs[:, 2:] == 0).all()):
        return limbs[:, 0] + (limbs[:, 1] << kn.LIMB) - np.where(
            neg2, np.int64(1) << (2 * kn.LIMB), 0)
    return None


def limb_rows_to_ints(limbs: np.ndarray) -> list[int]:
    """:func:`limbs_to_int` of every row of ``limbs`` (n x L), vectorized: NumPy's int64
    values where they all fit in 60 bits (:func:`limb_rows_to_int64`), else
    :func:`wide_rows_to_ints`. O(n L)."""
    small = limb_rows_to_int64(limbs)
    return small.tolist() if small is not None else wide_rows_to_ints(limbs)


def wide_rows_to_ints(limbs: np.ndarray) -> list[int]:
    """:func:`limbs_to_int` of every row of ``limbs`` (n x L), whatever their width: NumPy
    joins the limbs in pairs into non-negative 60-bit words, and Python combines a row's
    ceil(L/2) words into one int (then subtracts 2**(30L) where the top limb is negative).
    O(n L)."""
    n, L = limbs.shape
    if n == 0:
        return []
    limbs = limbs.astype(np.int64)
    neg = limbs[:, -1] >= kn.HALF
    words = [limbs[:, i] + ((limbs[:, i + 1] << kn.LIMB) if i + 1 < L else 0)
             for i in range(0, L, 2)]
    shift = 2 * kn.LIMB
    acc = words[-1].tolist()
    for w in reversed(words[:-1]):
        acc = [(a << shift) | b for a, b in zip(acc, w.tolist())]
    full = 1 << (kn.LIMB * L)
    return [a - full if s else a for a, s in zip(acc, neg.tolist())]


def normalize_limbs(a: np.ndarray, L: int) -> np.ndarray:
    """Carry-propagate rows of concatenated L-limb numbers (two's complement, mod 2**(30L))."""
    out = a.copy()
    n, w = out.shape
    for base in range(0, w, L):
        carry = np.zeros(n, np.int64)
        for i in range(L):
            v = out[:, base + i] + carry
            carry = v >> kn.LIMB
            out[:, base + i] = v & kn.MASK
    return out


def widened_limbs(vi: np.ndarray, l0: int, L: int, Cb: int) -> np.ndarray:
    """Rows ``vi`` whose ``Cb`` exact channels hold ``l0`` limbs each, then other integer
    columns: each channel sign-extended to ``L`` limbs (two's complement: the same values),
    the other columns after them. O(rows x columns)."""
    if l0 == L:
        return vi
    out = np.empty((vi.shape[0], Cb * L + vi.shape[1] - Cb * l0), vi.dtype)
    for c in range(Cb):
        limbs = vi[:, c * l0:(c + 1) * l0]
        out[:, c * L:c * L + l0] = limbs
        out[:, c * L + l0:(c + 1) * L] = np.where(limbs[:, -1:] >= kn.HALF, kn.MASK, 0)
    out[:, Cb * L:] = vi[:, Cb * l0:]
    return out


def exact_of_int64(vals: np.ndarray, ty: pa.DataType) -> pa.Array:
    """An exact aggregate column of type ``ty`` from int64 values: a decimal128 of scale 0
    with room for every int64 (19 digits) built from its 16-byte two's complement words (no
    cast kernel), other types cast (which checks their range). O(rows)."""
    if pa.types.is_decimal128(ty) and ty.scale == 0 and ty.precision >= 19:
        words = np.empty((len(vals), 2), np.int64)
        words[:, 0] = vals
        words[:, 1] = vals >> 63
        return pa.Array.from_buffers(ty, len(vals), [None, pa.py_buffer(words)])
    return pa.array(vals, pa.int64()).cast(ty)
