"""Strings in the pattern machine: the codes it compares for equality and the order keys it
compares for order.

The machine holds every value as a float64 (:mod:`replaydb.operators.pattern.vm`). A string is
the code of one dictionary shared by every string column (:class:`StringCodes`, in first-seen
order: equal strings, equal codes); a string ordered against another row's string also has an
order key (:class:`OrderKeys`: keys in the strings' order, kept as new strings arrive).
"""

from __future__ import annotations

import bisect

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class StringCodes:
    """One dictionary string -> float code shared by every string column the VM reads. The
    pattern's variable names come first, so a variable's index is its name's code (what
    ``CLASSIFIER()`` of a bound row loads from a state slot)."""

    def __init__(self, first: list[str] | tuple[str, ...] = ()) -> None:
        self.codes: dict[str, int] = {}
        for s in first:
            self.code(s)

    def code(self, s: str) -> float:
        c = self.codes.get(s)
        if c is None:
            c = len(self.codes)
            self.codes[s] = c
        return float(c)


class OrderKeys:
    """Order-keeping float keys of strings, for conditions that order strings of different
    rows (``A.name < B.name``): ``a < b`` exactly when ``key(a) < key(b)``, for every string
    seen so far. A new string takes the midpoint of its neighbours' keys; when no float lies
    between them, every key is re-spread (:data:`SPREAD` apart) and :meth:`keys` reports the
    old -> new mapping, so the keys already stored can be rewritten. Inserting ``u`` new
    strings among ``s`` known ones costs O(u (log s + s)) (list insertion), a re-spread O(s)."""

    SPREAD = 2.0**20

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.values: list[float] = []
        self.index: dict[str, float] = {}

    def keys(self, values: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
        """The keys of ``values`` (objects: str or None; NaN for None) and, when known keys
        moved, ``(old keys, their new keys)`` sorted by the old."""
        enc = pc.dictionary_encode(pa.array(values, type=pa.string(), from_pandas=True))
        distinct = enc.dictionary.to_pylist()
        moved = None
        for v in sorted(v for v in distinct if v not in self.index):
            if not self._insert(v):
                moved = self._respread(moved)
                self._insert(v)
        table = np.array([self.index[v] for v in distinct] + [np.nan], dtype=np.float64)
        idx = enc.indices.fill_null(len(distinct)).to_numpy(zero_copy_only=False)
        return table[idx.astype(np.int64)], moved

    def _insert(self, v: str) -> bool:
        p = bisect.bisect_left(self.strings, v)
        lo = self.values[p - 1] if p > 0 else None
        hi = self.values[p] if p < len(self.values) else None
        if lo is None and hi is None:
            key = 0.0
        elif lo is None:
            key = hi - self.SPREAD
        elif hi is None:
            key = lo + self.SPREAD
        else:
            key = (lo + hi) / 2
            if not lo < key < hi:
                return False
        self.strings.insert(p, v)
        self.values.insert(p, key)
        self.index[v] = key
        return True

    def _respread(self, moved: tuple[np.ndarray, np.ndarray] | None
                  ) -> tuple[np.ndarray, np.ndarray]:
        old = np.array(self.values, dtype=np.float64)
        self.values = [i * self.SPREAD for i in range(len(self.strings))]
        self.index = dict(zip(self.strings, self.values))
        new = np.array(self.values, dtype=np.float64)
        if moved is not None:  # a second re-spread in one call: compose the mappings
            first_old, first_new = moved
            return first_old, new[np.searchsorted(old, first_new)]
        return old, new
