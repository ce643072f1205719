"""Sorting and merging entries by (key, seq), vectorized.

Numeric keys: a stable radix argsort of the order-preserving uint64 image of the key
(:mod:`replaydb.indexes.kernels`). Stability gives (key, seq) order for free when the input is in
seq order, which is the common case (events arrive in seq order); otherwise the input is first
ordered by seq. String keys: Arrow's multi-column ``sort_indices`` (byte order of UTF-8).
Merging sorted runs: a compiled pairwise merge tree, O(n log k).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.indexes.entries import Entries
from replaydb.indexes.kernels import (
    from_sortable_u64,
    is_sorted_by_key_seq,
    merge_sorted_perm,
    radix_argsort_u64,
    radix_sort_u64,
    sortable_u64,
)


def _seq_is_contiguous(seq: np.ndarray) -> bool:
    """seq == seq[0] + arange(n) (checked in O(n), vectorized)."""
    n = seq.size
    if n == 0:
        return True
    if int(seq[-1]) - int(seq[0]) != n - 1:
        return False
    return bool(np.all(np.diff(seq) == 1))


def sort_perm(entries: Entries) -> np.ndarray:
    """Positions that order ``entries`` by (key, seq). O(n) radix (numeric), O(n log n) strings."""
    n = len(entries)
    if n == 0:
        return np.empty(0, np.int64)
    if entries.is_string:
        table = pa.table({"key": entries.key, "seq": entries.seq})
        idx = pc.sort_indices(table, sort_keys=[("key", "ascending"), ("seq", "ascending")])
        return idx.to_numpy().astype(np.int64, copy=False)
    seq = entries.seq
    if n > 1 and not bool(np.all(seq[1:] > seq[:-1])):
        by_seq = np.argsort(seq, kind="stable")
        return radix_argsort_u64(sortable_u64(entries.key[by_seq]), by_seq)
    return radix_argsort_u64(sortable_u64(entries.key))


def sort_entries(entries: Entries) -> Entries:
    """``entries`` ordered by (key, seq).

    Numeric keys: the radix sort returns the sorted keys along with the permutation (no gather
    of the key column), and seq is computed instead of gathered when it is contiguous; only t
    is gathered. O(n).
    """
    n = len(entries)
    if n <= 1:
        return entries
    if entries.is_string:
        return entries.take(sort_perm(entries))
    if is_sorted_by_key_seq(entries.key, entries.seq):
        return entries
    seq = entries.seq
    if bool(np.all(seq[1:] > seq[:-1])):
        perm, ukeys = radix_sort_u64(sortable_u64(entries.key))
    else:
        by_seq = np.argsort(seq, kind="stable")
        perm, ukeys = radix_sort_u64(sortable_u64(entries.key[by_seq]), by_seq)
    keys = from_sortable_u64(ukeys, entries.key.dtype)
    if _seq_is_contiguous(seq):
        new_seq = perm + seq[0]
    else:
        new_seq = seq[perm]
    return Entries(keys, new_seq, entries.t[perm])


def merge_entries(runs: Sequence[Entries], key_type: str) -> Entries:
    """Merge runs that are each sorted by (key, seq) into one sorted run. O(n log k)."""
    runs = [r for r in runs if len(r)]
    if not runs:
        return Entries.empty(key_type)
    if len(runs) == 1:
        return runs[0]
    cat = Entries.concat(runs, key_type)
    if key_type == "string":
        return cat.take(sort_perm(cat))
    offsets = np.cumsum([0] + [len(r) for r in runs])
    perm = merge_sorted_perm(cat.key, cat.seq, offsets)
    return cat.take(perm)


def order_by_seq(entries: Entries) -> Entries:
    """``entries`` ordered by seq (seqs are unique within an index). O(n) radix sort."""
    if len(entries) <= 1 or bool(np.all(entries.seq[1:] > entries.seq[:-1])):
        return entries
    perm, useq = radix_sort_u64(sortable_u64(entries.seq))
    key = entries.key.take(pa.array(perm)) if entries.is_string else entries.key[perm]
    return Entries(key, from_sortable_u64(useq, np.dtype(np.int64)), entries.t[perm])
