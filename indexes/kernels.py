"""Compiled sort kernels of the LSM index and the planner.

Entries of an index, sorted by (key, seq): everything here works on NumPy arrays of numeric keys
(int64 or float64) and int64 seqs; string keys are sorted with Arrow instead (see
:mod:`replaydb.indexes.sorting`).

* :func:`sortable_u64` maps int64/float64 keys to uint64 so that unsigned order equals key order
  (int64: flip the sign bit; float64: IEEE total order, with ``-0.0`` normalized to ``+0.0``
  beforehand by the caller). O(n).
* :func:`radix_argsort_u64` is a stable LSD radix argsort with 11-bit digits that skips digits
  which are equal in every key. O(n * d) for d varying digits (d <= 6), one scatter pass per
  digit; 11-bit digits take fewer passes than bytes while a digit's 2048 counters still stay
  in cache.
* :func:`merge_sorted_perm` merges k runs, each sorted by (key, seq), given concatenated; returns
  the permutation of the concatenation that is sorted by (key, seq). Pairwise merge tree:
  O(n log k).

Seqs of an index lookup, integers in ``[0, bound)``: :func:`argsort_bounded` and
:func:`sort_with_payload` radix-sort them packed with their positions in one word;
:func:`sort_unique_with_payload` sorts distinct ones through per-bucket bitmaps. An
:class:`Arena` hands out the planner's temporary arrays from one reused block. Bitmaps of seq
sets are in :mod:`replaydb.indexes.bitsets`, membership tests in
:mod:`replaydb.indexes.membership`.
"""
from __future__ import annotations

import threading
from typing import Any

import numba as nb
import numpy as np
from numba.core import types
from numba.extending import intrinsic

_SMALL_SORT = 1 << 15
"""Below this many entries NumPy's stable sort beats the radix sort's fixed costs."""


@nb.njit(cache=True, nogil=True)
def _f64_to_u64(bits: np.ndarray) -> np.ndarray:
    out = np.empty(bits.size, np.uint64)
    top = np.uint64(0x8000000000000000)
    for i in range(bits.size):
        v = bits[i]
        if v & top:
            out[i] = ~v
        else:
            out[i] = v | top
    return out


@nb.njit(cache=True, nogil=True)
def _i64_to_u64(bits: np.ndarray) -> np.ndarray:
    out = np.empty(bits.size, np.uint64)
    top = np.uint64(0x8000000000000000)
    for i in range(bits.size):
        out[i] = bits[i] ^ top
    return out


def sortable_u64(keys: np.ndarray) -> np.ndarray:
    """Order-preserving map of int64/float64 keys to uint64 (no NaN allowed for floats)."""
    if keys.dtype == np.float64:
        return _f64_to_u64(np.ascontiguousarray(keys).view(np.uint64))
    if keys.dtype == np.int64:
        return _i64_to_u64(np.ascontiguousarray(keys).view(np.uint64))
    raise TypeError(f"sortable_u64: unsupported dtype {keys.dtype}")


_RADIX_BITS = 11
_RADIX_DIGITS = 6  # 6 * 11 = 66 >= 64 bits
_RADIX_BUCKETS = 1 << _RADIX_BITS


@nb.njit(cache=True, nogil=True)
def _radix_argsort(keys: np.ndarray, idx_in: np.ndarray) -> np.ndarray:
    n = keys.size
    mask = np.uint64(_RADIX_BUCKETS - 1)
    hist = np.zeros((_RADIX_DIGITS, _RADIX_BUCKETS), np.int64)
    for i in range(n):
        k = keys[i]
        for d in range(_RADIX_DIGITS):
            hist[d, (k >> np.uint64(_RADIX_BITS * d)) & mask] += 1
    idx = idx_in.copy()
    idx_tmp = np.empty(n, np.int64)
    k_cur = keys.copy()
    k_tmp = np.empty(n, np.uint64)
    offs = np.empty(_RADIX_BUCKETS, np.int64)
    for d in range(_RADIX_DIGITS):
        h = hist[d]
        constant = False
        for b in range(_RADIX_BUCKETS):
            if h[b] == n:
                constant = True
                break
        if constant:
            continue
        s = 0
        for b in range(_RADIX_BUCKETS):
            offs[b] = s
            s += h[b]
        sh = np.uint64(_RADIX_BITS * d)
        for i in range(n):
            k = k_cur[i]
            b = (k >> sh) & mask
            p = offs[b]
            offs[b] = p + 1
            k_tmp[p] = k
            idx_tmp[p] = idx[i]
        k_cur, k_tmp = k_tmp, k_cur
        idx, idx_tmp = idx_tmp, idx
    return idx, k_cur


def radix_sort_u64(
    keys: np.ndarray, idx: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Stable sort of uint64 keys carrying ``idx`` (default 0..n-1) along.

    Returns (idx permuted, keys sorted): ``keys[p]`` ascending for the returned positions p
    (ties keep input order). Releases the GIL (callers may sort chunks in threads).
    """
    n = keys.size
    if idx is None:
        idx = np.arange(n, dtype=np.int64)
    if n < _SMALL_SORT:
        order = np.argsort(keys, kind="stable")
        return idx[order], keys[order]
    return _radix_argsort(np.ascontiguousarray(keys, dtype=np.uint64), idx.astype(np.int64))


def radix_argsort_u64(keys: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
    """Stable argsort of uint64 keys (see :func:`radix_sort_u64`)."""
    return radix_sort_u64(keys, idx)[0]


_PACK_DIGIT = 8
"""Bits per radix pass: 256 buckets keep every pass's scatter in the first-level cache (wider
digits save a pass but scatter into more buckets than the cache holds lines for)."""


@nb.njit(cache=True, nogil=True)
def _packed_sort(values: np.ndarray, ib: int, vbits: int) -> tuple[np.ndarray, np.ndarray]:
    """``(value << ib) | position`` words, LSD-radix sorted on the value bits, and the pass
    buffer the sort no longer needs (same size, free to reuse: a fresh array of megabytes
    costs its page faults again)."""
    n = values.size
    cur = np.empty(n, np.uint64)
    for i in range(n):
        cur[i] = (np.uint64(values[i]) << np.uint64(ib)) | np.uint64(i)
    tmp = np.empty(n, np.uint64)
    nb_ = 1 << _PACK_DIGIT
    mask = np.uint64(nb_ - 1)
    counts = np.empty(nb_ + 1, np.int64)
    shift = ib
    while shift < ib + vbits:
        counts[:] = 0
        sh = np.uint64(shift)
        for i in range(n):
            counts[((cur[i] >> sh) & mask) + 1] += 1
        for b in range(nb_):
            counts[b + 1] += counts[b]
        for i in range(n):
            k = cur[i]
            d = (k >> sh) & mask
            tmp[counts[d]] = k
            counts[d] += 1
        cur, tmp = tmp, cur
        shift += _PACK_DIGIT
    return cur, tmp


@nb.njit(cache=True, nogil=True)
def _packed_argsort(values: np.ndarray, ib: int, vbits: int) -> np.ndarray:
    cur = _packed_sort(values, ib, vbits)[0]
    out = np.empty(values.size, np.int64)
    low = np.uint64((1 << ib) - 1)
    for i in range(values.size):
        out[i] = np.int64(cur[i] & low)
    return out


@nb.njit(cache=True, nogil=True)
def _unpack_with(cur: np.ndarray, keys: np.ndarray, payload: np.ndarray, out: np.ndarray,
                 ib: int) -> None:
    """Sorted packed words ``cur`` into their values (``keys``) and the payload gathered in
    their order (``out``). ``out`` may be ``cur`` itself (viewed as int64): each word is read
    before its slot is written."""
    low = np.uint64((1 << ib) - 1)
    sh = np.uint64(ib)
    for i in range(cur.size):
        w = cur[i]
        keys[i] = np.int64(w >> sh)
        out[i] = payload[np.int64(w & low)]


def sort_with_payload(values: np.ndarray, payload: np.ndarray, bound: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """``values`` (int64 in ``[0, bound)``) sorted stably, and ``payload`` in the same order, in
    one pass: the sorted values come out of the packed words (no gather) and the payload is
    gathered while unpacking, so no permutation array is written and read back (as
    :func:`argsort_bounded` followed by two gathers would). O(n * bits / 8)."""
    values = np.asarray(values)
    payload = np.asarray(payload)
    if payload.shape != values.shape:
        raise ValueError("sort_with_payload: values and payload differ in length")
    ib, vbits = _pack_bits(values, bound, "sort_with_payload")
    if values.size < _SMALL_SORT or ib + vbits > 64:
        perm = _argsort_checked(values, ib, vbits)
        return np.asarray(values, np.int64)[perm], payload[perm]
    cur, spare = _packed_sort(np.ascontiguousarray(values, dtype=np.int64), ib, vbits)
    # the keys go into the spare pass buffer and an int64 payload over the packed words: no
    # array allocated past the sort's two
    keys = spare.view(np.int64)
    out = cur.view(np.int64) if payload.dtype == np.int64 else np.empty(values.size,
                                                                         payload.dtype)
    _unpack_with(cur, keys, np.ascontiguousarray(payload), out, ib)
    return keys, out


@intrinsic
def _popcount(typingctx: Any, x: Any) -> Any:
    """The number of set bits of a uint64 (LLVM's ctpop: one instruction where the CPU has
    it)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.ctpop(args[0])
    return types.uint64(types.uint64), codegen


@nb.njit(cache=True, nogil=True)
def _bucket_sort_unique(values: np.ndarray, payload: np.ndarray, bound: int, shift: int,
                        nbuckets: int, keys: np.ndarray, out: np.ndarray, tv: np.ndarray,
                        tp: np.ndarray) -> int:
    """:func:`sort_unique_with_payload`'s kernel (``tv``, ``tp``: scratch of the input's
    size): 0 when sorted, 1 on a repeated value, 2 on a value outside ``[0, bound)`` (outputs
    undefined then)."""
    n = values.size
    counts = np.zeros(nbuckets + 1, np.int64)
    for i in range(n):
        v = values[i]
        if v < 0 or v >= bound:
            return 2
        counts[(v >> shift) + 1] += 1
    for b in range(nbuckets):
        counts[b + 1] += counts[b]
    start = counts.copy()
    for i in range(n):  # pass 1: (value, payload) pairs into their buckets, in input order
        v = values[i]
        b = v >> shift
        d = counts[b]
        tv[d] = v
        tp[d] = payload[i]
        counts[b] = d + 1
    lw = ((1 << shift) + 63) >> 6
    bm = np.zeros(lw, np.uint64)
    rank = np.empty(lw, np.int64)
    one = np.uint64(1)
    lmask = (1 << shift) - 1
    for b in range(nbuckets):  # pass 2: inside one bucket (in cache), rank by a bitmap
        lo = start[b]
        hi = start[b + 1]
        if hi == lo:
            continue
        for j in range(lo, hi):
            s = tv[j] & lmask
            bit = one << np.uint64(s & 63)
            if bm[s >> 6] & bit:
                return 1
            bm[s >> 6] |= bit
        acc = lo
        for w in range(lw):
            rank[w] = acc
            acc += np.int64(_popcount(bm[w]))
        for j in range(lo, hi):
            s = tv[j] & lmask
            w = s >> 6
            bit = one << np.uint64(s & 63)
            d = rank[w] + np.int64(_popcount(bm[w] & (bit - one)))
            keys[d] = tv[j]
            out[d] = tp[j]
        bm[:] = 0
    return 0


_BUCKET_LOCAL_BITS = 12
"""Values per bucket of :func:`sort_unique_with_payload` (2**12: a 512-byte bitmap)."""
_SCRATCH_MAX_BYTES = 64 << 20
"""Scratch kept between calls, per thread, at most (a larger block is dropped at the next
call)."""
_scratch = threading.local()


def _scratch_arena() -> Arena:
    """This thread's scratch :class:`Arena` for one sort's temporary arrays, reset (blocks
    above ``_SCRATCH_MAX_BYTES`` are not kept): what an earlier sort took from it is free."""
    arena = getattr(_scratch, "scratch", None)
    if arena is None:
        arena = _scratch.scratch = Arena()
    arena.reset(keep_bytes=_SCRATCH_MAX_BYTES)
    return arena


def _dense_enough(values: np.ndarray, bound: int, who: str) -> bool:
    """Whether the bitmap sorts (:func:`sort_unique_with_payload`, :func:`~replaydb.indexes.bitsets.sort_unique`) take
    ``values``: enough of them (``_SMALL_SORT``), dense enough in ``[0, bound)`` (``bound <=
    256 n``). Raises ValueError for non-integers, and - when they are not taken - for values
    outside ``[0, bound)`` (the kernels check the range of those they take)."""
    if values.dtype.kind not in "iu":
        raise ValueError(f"{who}: values must be integers in [0, bound)")
    if not bits_pay(values.size, bound):
        _pack_bits(values, bound, who)
        return False
    return True


def bits_pay(n: int, bound: int) -> bool:
    """Whether ``n`` integers in ``[0, bound)`` are sorted (made a set) by a bitmap of
    ``bound`` bits rather than by a sort: enough of them (``_SMALL_SORT``) and dense enough
    (``bound <= 256 n``). O(1)."""
    return n >= _SMALL_SORT and bound <= 256 * n


def sort_unique_with_payload(values: np.ndarray, payload: np.ndarray, bound: int,
                             alloc: Any = None) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`sort_with_payload` for *distinct* values (the seqs of one index lookup), or None
    when a value repeats or the values are too sparse in ``[0, bound)`` (then call
    :func:`sort_with_payload`).

    Two passes over memory instead of the radix sort's pack, three scatters and a random
    gather of the payload: (1) the (value, payload) pairs are scattered into buckets of
    ``2**12`` consecutive values; (2) inside each bucket, small enough for the first-level
    cache, each value's rank is read off a bitmap of the bucket's values (a prefix popcount),
    and the pair is written to its final place. Distinctness is what makes a bitmap a sort; a
    repeat is detected when its bit is already set. O(n + bound / 64) against the radix
    sort's O(n * bits / 8); used when ``bound <= 256 n``.

    ``alloc(n, dtype)`` makes the two output arrays (default ``np.empty``; the planner passes
    an :class:`Arena`). The range check happens in the kernel's first pass. Raises ValueError
    for values outside ``[0, bound)``, as :func:`sort_with_payload` does."""
    values = np.asarray(values)
    payload = np.asarray(payload)
    if payload.shape != values.shape:
        raise ValueError("sort_unique_with_payload: values and payload differ in length")
    n = values.size
    if not _dense_enough(values, bound, "sort_unique_with_payload"):
        return None
    vbits = max(1, int(max(bound, 1) - 1).bit_length())
    shift = min(vbits, _BUCKET_LOCAL_BITS)
    nbuckets = ((bound - 1) >> shift) + 1
    alloc = alloc or np.empty
    keys = alloc(n, np.dtype(np.int64))
    out = alloc(n, payload.dtype)
    scratch = _scratch_arena()
    tv, tp = scratch.take(n, np.int64), scratch.take(n, payload.dtype)
    status = _bucket_sort_unique(np.ascontiguousarray(values, dtype=np.int64),
                                 np.ascontiguousarray(payload), int(bound), shift, nbuckets,
                                 keys, out, tv, tp)
    if status == 2:
        raise ValueError("sort_unique_with_payload: values must be integers in [0, bound)")
    return (keys, out) if status == 0 else None


class Arena:
    """Grow-only memory for arrays that live for one computation (the planner's sorted index
    results, dropped once the replay intervals are computed): :meth:`take` hands out aligned
    views of one large block, :meth:`reset` makes the block reusable. A fresh array of
    megabytes pays a page fault per 4 KiB on first touch - as much as sorting into it -
    while a reused block is already mapped. Arrays taken before a :meth:`reset` must not be
    used after it. Not thread-safe: use one arena per thread (:func:`thread_arena`)."""

    ALIGN = 64

    def __init__(self) -> None:
        self._buf = np.empty(0, np.uint8)
        self._base = 0  # first aligned offset of the block
        self._off = 0

    def _block(self, size: int) -> None:
        self._buf = np.empty(size + self.ALIGN, np.uint8)
        # the address without ``.ctypes`` (which makes ctypes types: reference cycles)
        self._base = (-self._buf.__array_interface__["data"][0]) % self.ALIGN
        self._off = self._base

    def take(self, n: int, dtype: Any) -> np.ndarray:
        dtype = np.dtype(dtype)
        size = n * dtype.itemsize
        start = self._base + -(-(self._off - self._base) // self.ALIGN) * self.ALIGN
        if start + size > self._buf.size:  # a new, larger block; earlier views keep theirs
            self._block(max(2 * self._buf.size, size, 1 << 20))
            start = self._off
        self._off = start + size
        return self._buf[start:start + size].view(dtype)

    def reset(self, keep_bytes: int = 256 << 20) -> None:
        """Reuse the block from its start (or release it when larger than ``keep_bytes``)."""
        if self._buf.size > keep_bytes:
            self._buf = np.empty(0, np.uint8)
            self._base = 0
        self._off = self._base

    @property
    def nbytes(self) -> int:
        return int(self._buf.size)


def thread_arena() -> Arena:
    """This thread's :class:`Arena`."""
    got = getattr(_scratch, "arena", None)
    if got is None:
        got = _scratch.arena = Arena()
    return got


def _pack_bits(values: np.ndarray, bound: int, who: str) -> tuple[int, int]:
    """(position bits, value bits) of the packed words for ``values``, after checking that they
    are integers in ``[0, bound)``."""
    n = values.size
    if values.dtype.kind not in "iu" or (n and (int(values.min()) < 0
                                                or int(values.max()) >= bound)):
        raise ValueError(f"{who}: values must be integers in [0, bound)")
    return max(1, int(n - 1).bit_length()), max(1, int(max(bound, 1) - 1).bit_length())


def argsort_bounded(values: np.ndarray, bound: int) -> np.ndarray:
    """Stable argsort of integers ``0 <= values < bound``: each value is packed with its position
    into one uint64 (value above, position below) and LSD-radix sorted on the value bits only,
    8 bits per pass, so a seq below 2**24 sorts in three passes over 8-byte words (instead of
    carrying a key array and an index array through every digit of a 64-bit key). Falls back to
    :func:`radix_argsort_u64` when value and position bits do not fit in 64. O(n * bits / 8)."""
    values = np.asarray(values)
    return _argsort_checked(values, *_pack_bits(values, bound, "argsort_bounded"))


def _argsort_checked(values: np.ndarray, ib: int, vbits: int) -> np.ndarray:
    """:func:`argsort_bounded` of checked values with their :func:`_pack_bits`."""
    if values.size < _SMALL_SORT:
        return np.argsort(values, kind="stable").astype(np.int64)
    if ib + vbits > 64:
        return radix_argsort_u64(sortable_u64(values.astype(np.int64)))
    return _packed_argsort(np.ascontiguousarray(values, dtype=np.int64), ib, vbits)


@nb.njit(cache=True, nogil=True)
def _u64_to_f64(u: np.ndarray) -> np.ndarray:
    out = np.empty(u.size, np.uint64)
    top = np.uint64(0x8000000000000000)
    for i in range(u.size):
        v = u[i]
        if v & top:
            out[i] = v ^ top
        else:
            out[i] = ~v
    return out.view(np.float64)


def from_sortable_u64(u: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Inverse of :func:`sortable_u64`."""
    if dtype == np.float64:
        return _u64_to_f64(u)
    return (u ^ np.uint64(0x8000000000000000)).view(np.int64)


@nb.njit(cache=True, nogil=True)
def _merge2(ka, sa, ia, kb, sb, ib):
    na = ka.size
    nb_ = kb.size
    n = na + nb_
    ko = np.empty(n, ka.dtype)
    so = np.empty(n, np.int64)
    io = np.empty(n, np.int64)
    i = 0
    j = 0
    o = 0
    while i < na and j < nb_:
        if ka[i] < kb[j] or (ka[i] == kb[j] and sa[i] <= sb[j]):
            ko[o] = ka[i]
            so[o] = sa[i]
            io[o] = ia[i]
            i += 1
        else:
            ko[o] = kb[j]
            so[o] = sb[j]
            io[o] = ib[j]
            j += 1
        o += 1
    while i < na:
        ko[o] = ka[i]
        so[o] = sa[i]
        io[o] = ia[i]
        i += 1
        o += 1
    while j < nb_:
        ko[o] = kb[j]
        so[o] = sb[j]
        io[o] = ib[j]
        j += 1
        o += 1
    return ko, so, io


def merge_sorted_perm(keys: np.ndarray, seqs: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Permutation that merges k (key, seq)-sorted runs stored back to back.

    ``offsets`` has k + 1 entries: run i is ``keys[offsets[i]:offsets[i+1]]``. Returns int64
    positions into the concatenation, in (key, seq) order. O(n log k), pairwise merge tree.
    """
    parts = []
    for i in range(len(offsets) - 1):
        a, b = int(offsets[i]), int(offsets[i + 1])
        if b > a:
            parts.append((keys[a:b], seqs[a:b], np.arange(a, b, dtype=np.int64)))
    if not parts:
        return np.empty(0, np.int64)
    while len(parts) > 1:
        nxt = []
        for i in range(0, len(parts) - 1, 2):
            nxt.append(_merge2(*parts[i], *parts[i + 1]))
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0][2]


@nb.njit(cache=True, nogil=True)
def is_sorted_by_key_seq(keys: np.ndarray, seqs: np.ndarray) -> bool:
    """True iff (keys[i], seqs[i]) is strictly increasing lexicographically."""
    for i in range(1, keys.size):
        if keys[i] < keys[i - 1]:
            return False
        if keys[i] == keys[i - 1] and seqs[i] <= seqs[i - 1]:
            return False
    return True


@nb.njit(cache=True, nogil=True)
def seq_histogram(seqs: np.ndarray, lo: int, shift: int, nbins: int) -> np.ndarray:
    """Equi-width histogram: bin b counts seqs in [lo + b * 2**shift, lo + (b+1) * 2**shift).

    Seqs past the last bin are counted in the last bin (the caller sizes bins to cover them).
    """
    out = np.zeros(nbins, np.int64)
    for i in range(seqs.size):
        b = (seqs[i] - lo) >> shift
        if b >= nbins:
            b = nbins - 1
        out[b] += 1
    return out


@nb.njit(cache=True, nogil=True)
def partition_scatter(part_ids, nparts, key, seq, t):
    """Stable scatter of (key, seq, t) into ``nparts`` contiguous partitions by ``part_ids``.

    Returns (key, seq, t, offsets): partition p is ``[offsets[p], offsets[p+1])``, entries keep
    their input order inside it. O(n).
    """
    n = key.size
    offsets = np.zeros(nparts + 1, np.int64)
    for i in range(n):
        offsets[part_ids[i] + 1] += 1
    for p in range(nparts):
        offsets[p + 1] += offsets[p]
    pos = offsets[:-1].copy()
    ok = np.empty_like(key)
    os_ = np.empty_like(seq)
    ot = np.empty_like(t)
    for i in range(n):
        p = part_ids[i]
        j = pos[p]
        pos[p] = j + 1
        ok[j] = key[i]
        os_[j] = seq[i]
        ot[j] = t[i]
    return ok, os_, ot, offsets
