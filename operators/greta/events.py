"""GRETA's input side: a run of events as NumPy columns, and dense codes for attribute tuples.

An :class:`EventChunk` converts a batch's columns once and is cut into sub-chunks at window
closes without copies; :func:`encode_keys` maps the tuple of partition attributes of every row
to a dense code (:class:`Keyspace` keeps the codes stable across sub-chunks).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.errors import OperatorError
from replaydb.operators.base import column_np
from replaydb.operators.expr import Column, Expr, compile_expr


class _Env:
    """Expression environment over a sub-chunk's rows; qualifiers and NEXT(...) are ignored (the
    plan has already decided which event each side of a predicate refers to)."""

    def __init__(self, ev: EventChunk, rows: np.ndarray) -> None:
        self.ev, self.rows = ev, rows

    def column(self, ref: Column) -> Any:
        return self.ev.np(ref.name)[self.rows]

    def call(self, node: Any, args: list[Any]) -> Any:
        raise OperatorError(f"unknown function {node.name}")


class EventChunk:
    """Columns of a run of events (NumPy views, computed on demand)."""

    def __init__(self, table: pa.Table, type_column: str) -> None:
        self.table = table
        self.n = table.num_rows
        self.t = np.ascontiguousarray(column_np(table, "t"), dtype=np.int64)
        if "seq" in table.schema.names:
            self.seq = np.ascontiguousarray(column_np(table, "seq"), dtype=np.int64)
        else:
            self.seq = np.arange(self.n, dtype=np.int64)
        tc = table.column(type_column)
        if isinstance(tc, pa.ChunkedArray):
            tc = tc.combine_chunks()
        if not (pa.types.is_string(tc.type) or pa.types.is_large_string(tc.type)
                or pa.types.is_dictionary(tc.type)):
            tc = tc.cast(pa.string())
        enc = tc.dictionary_encode() if not pa.types.is_dictionary(tc.type) else tc
        idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        self.type_codes = idx
        self.type_index = {v: i for i, v in enumerate(enc.dictionary.to_pylist())}
        self._np: dict[str, np.ndarray] = {}
        self._compiled: dict[int, Any] = {}
        self._parent: tuple[EventChunk, int, int] | None = None

    def slice(self, start: int, length: int) -> EventChunk:
        """The events ``start .. start+length-1`` as a chunk that shares this chunk's type
        dictionary, compiled expressions and converted columns (views, no copies): a batch is
        converted once and then cut into sub-chunks at window closes. O(columns converted)."""
        out = type(self).__new__(type(self))
        end = start + length
        out.table = self.table.slice(start, length)
        out.n = length
        out.t = self.t[start:end]
        out.seq = self.seq[start:end]
        out.type_codes = self.type_codes[start:end]
        out.type_index = self.type_index
        out._np = {}
        out._compiled = self._compiled
        out._parent = (self, start, end)
        return out

    def np(self, name: str) -> np.ndarray:
        a = self._np.get(name)
        if a is None and self._parent is not None:
            parent, start, end = self._parent
            a = parent.np(name)[start:end]
            self._np[name] = a
        if a is None:
            a = column_np(self.table, name)
            self._np[name] = a
        return a

    def values(self, expr: Expr, rows: np.ndarray) -> np.ndarray:
        """``expr`` (compiled once from its parsed form) evaluated over ``rows``, vectorized."""
        f = self._compiled.get(id(expr))
        if f is None:
            f = compile_expr(expr)
            self._compiled[id(expr)] = f
        v = f(_Env(self, rows))
        arr = np.asarray(v)
        if arr.ndim == 0:
            arr = np.full(len(rows), arr[()], dtype=arr.dtype if arr.dtype != object else object)
        return arr


def as_bool(v: np.ndarray) -> np.ndarray:
    if v.dtype == bool:
        return v
    if np.issubdtype(v.dtype, np.floating):
        return np.nan_to_num(v, nan=0.0) != 0
    if v.dtype == object:
        return np.array([bool(x) if x is not None else False for x in v], bool)
    return v.astype(bool)


def null_mask(v: np.ndarray) -> np.ndarray:
    if v.dtype == object:
        return np.array([x is None or (isinstance(x, float) and x != x) for x in v], bool)
    if np.issubdtype(v.dtype, np.floating):
        return np.isnan(v)
    return np.zeros(len(v), bool)


def _py(v: Any) -> Any:
    if isinstance(v, float) and v != v:
        return None
    return v

class Keyspace:
    """Dense ids for tuples of attribute values (partitions, groups, negation buckets)."""

    def __init__(self) -> None:
        self.index: dict[tuple, int] = {}
        self.keys: list[tuple] = []

    def __len__(self) -> int:
        return len(self.keys)

    def get(self, key: tuple) -> int:
        i = self.index.get(key)
        if i is None:
            i = len(self.keys)
            self.index[key] = i
            self.keys.append(key)
        return i

    def remap(self, keep: np.ndarray) -> np.ndarray:
        """Keep the ids where ``keep`` is True (renumbered densely); return old -> new (-1)."""
        new = np.full(len(self.keys), -1, np.int64)
        kept = np.flatnonzero(keep)
        new[kept] = np.arange(len(kept))
        self.keys = [self.keys[i] for i in kept]
        self.index = {k: i for i, k in enumerate(self.keys)}
        return new


def encode_keys(ev: EventChunk, rows: np.ndarray, attrs: tuple[str, ...]) -> tuple[np.ndarray,
                                                                                   list[tuple]]:
    """(inverse, unique tuples): the tuple of ``attrs`` values of every row, densely coded.

    Each column is coded on its own - integer columns without nulls in NumPy
    (:func:`_encode_int_keys`), any other through Arrow (:func:`_encode_arrow_keys`), both
    giving the same Python values (a test holds them to it) - and :func:`_join_codes` combines
    the columns. O(n log n) for n rows."""
    if not attrs:
        return np.zeros(len(rows), np.int64), [()]
    cols_np = [ev.np(a) for a in attrs]
    if all(c.dtype.kind in "iu" for c in cols_np):  # a null makes column_np return floats
        return _encode_int_keys([c[rows] for c in cols_np])
    return _encode_arrow_keys(ev, rows, attrs)


def _encode_int_keys(cols: list[np.ndarray]) -> tuple[np.ndarray, list[tuple]]:
    """:func:`encode_keys` of integer columns: each coded by ``np.unique`` (one column needs
    nothing more)."""
    per = [_unique_inverse(c) for c in cols]
    if len(per) == 1:  # np.unique's codes are dense and all used: nothing to join
        return per[0][1].reshape(-1).astype(np.int64), [(v,) for v in per[0][0].tolist()]
    return _join_codes([inv.reshape(-1).astype(np.int64) for _, inv in per],
                       [u.tolist() for u, _ in per])


def _unique_inverse(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(c, return_inverse=True)`` of an integer column: its sorted distinct values
    and every value's position among them (a sort, a comparison and a binary search: fewer
    calls for the small columns of a sub-chunk). O(n log n)."""
    if len(c) == 0:
        return c[:0].copy(), np.zeros(0, np.int64)
    b = np.sort(c)
    keep = np.empty(len(b), bool)
    keep[0] = True
    np.not_equal(b[1:], b[:-1], out=keep[1:])
    u = b[keep]
    return u, np.searchsorted(u, c).astype(np.int64)


def _encode_arrow_keys(ev: EventChunk, rows: np.ndarray, attrs: tuple[str, ...]
                       ) -> tuple[np.ndarray, list[tuple]]:
    """:func:`encode_keys` of any columns through Arrow's dictionary encoding (nulls are keys,
    NaN reads as None)."""
    codes = []
    dicts = []
    idx = pa.array(rows, type=pa.int64())
    for a in attrs:
        col = ev.table.column(a).take(idx)
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        enc = pc.dictionary_encode(col, null_encoding="encode")
        codes.append(enc.indices.to_numpy(zero_copy_only=False).astype(np.int64))
        dicts.append([_py(v) for v in enc.dictionary.to_pylist()])
    return _join_codes(codes, dicts)


def _join_codes(codes: list[np.ndarray], dicts: list[list[Any]]) -> tuple[np.ndarray,
                                                                          list[tuple]]:
    """(inverse, unique tuples) of rows given per column as codes into the value lists
    ``dicts``: the columns' codes joined in mixed radix (rows of codes where that exceeds 62
    bits), coded by one ``np.unique``; only the tuples that occur are returned."""
    radix = 1.0
    for dct in dicts:
        radix *= len(dct) + 1
    if radix < 2.0**62:
        comb = codes[0].copy()
        for c, dct in zip(codes[1:], dicts[1:]):
            comb = comb * (len(dct) + 1) + c
        _, first, inv = np.unique(comb, return_index=True, return_inverse=True)
    else:
        _, first, inv = np.unique(np.stack(codes, axis=1), axis=0, return_index=True,
                                  return_inverse=True)
    cols = [[dct[c] for c in code[first].tolist()] for code, dct in zip(codes, dicts)]
    return inv.reshape(-1).astype(np.int64), list(zip(*cols))
