"""Stable partition ids for PARTITION BY keys (one or more columns of any Arrow type).

Ids are dense (0, 1, ...), assigned batch by batch as keys first appear (keys new in the same
batch get ids in key order for a single integer column, in order of appearance otherwise), and never
change, so per-partition state can be kept in arrays indexed or sorted by id. Mapping a batch costs one ``pandas.factorize`` (hash,
O(n)) plus a dictionary lookup per *distinct* key of the batch (a single string column without
nulls: Arrow's dictionary encoding of the column instead, its strings never Python objects);
the common single integer column
takes a dense lookup table over the known keys' span (O(n); a sorted array and
``np.searchsorted``, O(n log k), for new keys or spans over 4M values).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.operators.valuemask import dictionary_of

LUT_MAX = 1 << 22
"""Largest key span served by the dense lookup table (int64 entries: 32 MiB)."""


class PartitionMap:
    """Maps key tuples to int64 ids (first appearance order) and back to Arrow values."""

    def __init__(self, columns: tuple[str, ...]) -> None:
        self.columns = columns
        self.reset()

    def reset(self) -> None:
        self._ids: dict[tuple, int] = {}
        self._values: list[list] = [[] for _ in self.columns]
        self._sorted_keys = np.empty(0, np.int64)
        self._sorted_ids = np.empty(0, np.int64)
        self._int_path: bool | None = None
        self._arrow: list[pa.Array] | None = None
        self._lut: np.ndarray | None = None
        self._lut_lo = 0

    def __len__(self) -> int:
        return len(self._ids) if not self._int_path else len(self._sorted_keys)

    def ids(self, cols: list[np.ndarray | pa.Array]) -> np.ndarray:
        """Partition id of every row of a batch given its key columns (NumPy arrays; a single
        string key may come as its Arrow array, which is never turned into Python objects)."""
        if len(cols) == 1 and isinstance(cols[0], pa.Array):
            got = self._ids_dictionary(cols[0])
            if got is not None:
                return got
        cols = [_numpy_keys(c) for c in cols]
        if self._int_path is None:
            self._int_path = len(cols) == 1 and cols[0].dtype.kind in "iu"
        if self._int_path and len(cols) == 1 and cols[0].dtype.kind in "iu":
            return self._ids_int(cols[0].astype(np.int64, copy=False))
        if self._int_path:  # dtype changed (e.g. nulls made it float): migrate to the dict path
            self._migrate()
        return self._ids_generic(cols)

    def _ids_int(self, v: np.ndarray) -> np.ndarray:
        if not len(v):
            return np.empty(0, np.int64)
        lo, hi = int(v.min()), int(v.max())
        keys = self._sorted_keys
        lo0, hi0 = (int(keys[0]), int(keys[-1])) if len(keys) else (lo, hi)
        new_lo, new_hi = min(lo, lo0), max(hi, hi0)
        if new_hi - new_lo + 1 > LUT_MAX:
            self._lut = None
            return self._ids_sorted(v)
        if self._lut is None or new_lo < self._lut_lo or \
                new_hi >= self._lut_lo + len(self._lut):
            # (re)build the dense table over the span, with some room to grow upwards
            span = new_hi - new_lo + 1
            lut = np.full(min(LUT_MAX, span + span // 2 + 1024), -1, np.int64)
            if len(self._sorted_keys):
                lut[self._sorted_keys - new_lo] = self._sorted_ids
            self._lut, self._lut_lo = lut, new_lo
        ids = self._lut[v - self._lut_lo]
        miss = ids < 0
        if miss.any():
            # distinct new keys without sorting: mark them in a scratch table over the span
            seen = np.zeros(len(self._lut), bool)
            seen[v[miss] - self._lut_lo] = True
            new = np.flatnonzero(seen) + self._lut_lo          # ascending key order
            base = len(self._values[0])
            new_ids = np.arange(base, base + len(new), dtype=np.int64)
            self._lut[new - self._lut_lo] = new_ids
            self._values[0].extend(new.tolist())
            allk = np.concatenate([self._sorted_keys, new])
            alli = np.concatenate([self._sorted_ids, new_ids])
            o = np.argsort(allk, kind="stable")
            self._sorted_keys, self._sorted_ids = allk[o], alli[o]
            self._arrow = None
            ids[miss] = self._lut[v[miss] - self._lut_lo]
        return ids

    def _ids_sorted(self, v: np.ndarray) -> np.ndarray:
        keys = self._sorted_keys
        pos = np.searchsorted(keys, v)
        posc = np.minimum(pos, max(len(keys) - 1, 0))
        found = (pos < len(keys)) & (keys[posc] == v) if len(keys) else np.zeros(len(v), bool)
        if not found.all():
            new = np.unique(v[~found])                 # new keys get ids in key order
            new_ids = np.arange(len(keys), len(keys) + len(new), dtype=np.int64)
            allk = np.concatenate([keys, new])
            alli = np.concatenate([self._sorted_ids, new_ids])
            o = np.argsort(allk, kind="stable")
            self._sorted_keys, self._sorted_ids = allk[o], alli[o]
            self._values[0].extend(new.tolist())
            self._arrow = None
            keys = self._sorted_keys
            pos = np.searchsorted(keys, v)
            return self._sorted_ids[pos]
        return self._sorted_ids[pos]

    def _ids_dictionary(self, arr: pa.Array) -> np.ndarray | None:
        """Ids of one string key column from its dictionary encoding: the dictionary entries
        the rows use, in order of first appearance (the order new keys get their ids in; an
        encoding made here lists them so, one given may not), a lookup each, then a gather.
        None when the column has nulls (the generic path places a NULL key among the new ones
        by its first row) or is not a string column."""
        given = pa.types.is_dictionary(arr.type)
        typ = arr.type.value_type if given else arr.type
        if not (pa.types.is_string(typ) or pa.types.is_large_string(typ)) or arr.null_count:
            return None
        enc = dictionary_of(arr)
        if self._int_path:
            self._migrate()
        self._int_path = False
        values = enc.dictionary.to_pylist()
        used = pc.unique(enc.indices).to_pylist() if given else range(len(values))
        ids_of = np.full(len(values), -1, np.int64)
        for j in used:
            ids_of[j] = self._id_of((values[j],))
        return ids_of[enc.indices.to_numpy(zero_copy_only=False).astype(np.intp, copy=False)]

    def _migrate(self) -> None:
        vals = self._values[0]
        self._ids = {(v,): i for i, v in enumerate(vals)}
        self._int_path = False

    def _ids_generic(self, cols: list[np.ndarray]) -> np.ndarray:
        n = len(cols[0])
        codes = np.zeros(n, np.int64)
        uniques = []
        for c in cols:
            cc, uu = pd.factorize(c, use_na_sentinel=False)
            codes = codes * (len(uu) + 1) + cc
            uniques.append(uu)
        comb, first = np.unique(codes, return_index=True)
        comb_codes = np.searchsorted(comb, codes)
        ids_of = np.empty(len(comb), np.int64)
        for k in np.argsort(first, kind="stable"):
            row = first[k]
            ids_of[k] = self._id_of(tuple(_py(c[row]) for c in cols))
        return ids_of[comb_codes]

    def _id_of(self, key: tuple) -> int:
        """The id of ``key`` on the dictionary path, the next one (its values recorded) when it
        is new."""
        pid = self._ids.get(key)
        if pid is None:
            pid = self._ids[key] = len(self._ids)
            for j, v in enumerate(key):
                self._values[j].append(v)
            self._arrow = None
        return pid

    def arrow_values(self, types: list[pa.DataType]) -> list[pa.Array]:
        """Key columns indexed by partition id."""
        if self._arrow is None or len(self._arrow[0]) != len(self._values[0]):
            self._arrow = [pa.array(vals, type=t) for vals, t in zip(self._values, types)]
        return self._arrow

    def get_state(self) -> dict:
        return {"ids": dict(self._ids), "values": [list(v) for v in self._values],
                "sk": self._sorted_keys.copy(), "si": self._sorted_ids.copy(),
                "int": self._int_path}

    def set_state(self, st: dict) -> None:
        self._ids = dict(st["ids"])
        self._values = [list(v) for v in st["values"]]
        self._sorted_keys = st["sk"].copy()
        self._sorted_ids = st["si"].copy()
        self._int_path = st["int"]
        self._arrow = None
        self._lut = None


def _numpy_keys(c: np.ndarray | pa.Array) -> np.ndarray:
    """A key column as NumPy: an Arrow string (or other) array as Python objects."""
    if isinstance(c, pa.Array):
        return np.asarray(c.to_pylist(), dtype=object)
    return c


def _py(x: object) -> object:
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and x != x:
        return None
    return x
