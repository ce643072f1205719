"""Columns of index entries (key, seq, t) and the validation of what callers pass in.

Numeric keys are NumPy arrays (int64 or float64); string keys are Arrow ``string`` arrays (their
order is the byte order of their UTF-8 encoding, which equals Python's ``str`` order). ``seq`` and
``t`` are always int64 NumPy arrays.

Missing keys: entries whose key is null (or NaN in a float64 index) are not indexed, since no
range condition can match them; ``-0.0`` is stored as ``+0.0`` (they compare equal).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.errors import DataError, UsageError
from replaydb.indexes.options import KEY_TYPES

ARROW_KEY_TYPES = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}


def arrow_schema(key_type: str) -> pa.Schema:
    """Schema of run files and of the index's Delta table."""
    return pa.schema(
        [
            pa.field("key", ARROW_KEY_TYPES[key_type], nullable=False),
            pa.field("seq", pa.int64(), nullable=False),
            pa.field("t", pa.int64(), nullable=False),
        ]
    )


def check_key_type(key_type: str) -> str:
    if key_type not in KEY_TYPES:
        raise UsageError(f"unknown index key type {key_type!r}; expected one of {KEY_TYPES}")
    return key_type


def key_type_of_arrow(t: pa.DataType) -> str | None:
    """The index key type that stores values of Arrow type ``t`` (None: not indexable)."""
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return "int64"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "float64"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_dictionary(t):
        return key_type_of_arrow(t.value_type)
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_duration(t):
        return "int64"
    return None


@dataclass
class Entries:
    """A column batch of entries; ``key`` is NumPy (numeric) or an Arrow string array."""

    key: Any
    seq: np.ndarray
    t: np.ndarray

    def __len__(self) -> int:
        return int(self.seq.size)

    @property
    def is_string(self) -> bool:
        return isinstance(self.key, pa.Array)

    def take(self, idx: np.ndarray) -> Entries:
        if self.is_string:
            key = self.key.take(pa.array(idx, type=pa.int64()))
        else:
            key = self.key[idx]
        return Entries(key, self.seq[idx], self.t[idx])

    def filter(self, mask: np.ndarray) -> Entries:
        if mask.all():
            return self
        if self.is_string:
            key = self.key.filter(pa.array(mask, type=pa.bool_()))
        else:
            key = self.key[mask]
        return Entries(key, self.seq[mask], self.t[mask])

    def slice(self, a: int, b: int) -> Entries:
        key = self.key.slice(a, b - a) if self.is_string else self.key[a:b]
        return Entries(key, self.seq[a:b], self.t[a:b])

    def to_table(self, key_type: str) -> pa.Table:
        key = self.key if self.is_string else pa.array(self.key, type=ARROW_KEY_TYPES[key_type])
        return pa.Table.from_arrays(
            [key, pa.array(self.seq, type=pa.int64()), pa.array(self.t, type=pa.int64())],
            schema=arrow_schema(key_type),
        )

    @staticmethod
    def empty(key_type: str) -> Entries:
        if key_type == "string":
            key: Any = pa.array([], type=pa.string())
        else:
            key = np.empty(0, dtype=key_type)
        return Entries(key, np.empty(0, np.int64), np.empty(0, np.int64))

    @staticmethod
    def concat(parts: Sequence[Entries], key_type: str) -> Entries:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Entries.empty(key_type)
        if len(parts) == 1:
            return parts[0]
        if key_type == "string":
            key: Any = pa.concat_arrays([p.key for p in parts])
        else:
            key = np.concatenate([p.key for p in parts])
        return Entries(
            key, np.concatenate([p.seq for p in parts]), np.concatenate([p.t for p in parts])
        )

    @staticmethod
    def from_table(table: pa.Table | pa.RecordBatch, key_type: str) -> Entries:
        """Entries of a (key, seq, t) table read from a run file (no validation)."""
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if key_type == "string":
            key: Any = table.column("key").combine_chunks()
            if key.type != pa.string():
                key = key.cast(pa.string())
        else:
            key = _np(table.column("key"), np.dtype(key_type))
        return Entries(
            key,
            _np(table.column("seq"), np.dtype(np.int64)),
            _np(table.column("t"), np.dtype(np.int64)),
        )


def _np(col: pa.ChunkedArray | pa.Array, dtype: np.dtype) -> np.ndarray:
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            col = col.chunk(0)
        else:
            col = col.combine_chunks()
    arr = col.to_numpy(zero_copy_only=False)
    if arr.dtype != dtype:
        arr = arr.astype(dtype)
    return arr


def _to_arrow(values: Any, column: str) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if isinstance(values, pa.Array):
        return values
    if isinstance(values, np.ndarray):
        if values.dtype == object:
            try:
                return pa.array(values, from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise DataError(f"cannot convert values: {exc}", column=column) from None
        return pa.array(values)
    try:
        return pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise DataError(f"cannot convert values: {exc}", column=column) from None


def _int_column(values: Any, column: str, n: int | None) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype == np.int64:
        arr = values
    else:
        a = _to_arrow(values, column)
        if a.null_count:
            row = int(pc.index(a.is_null(), True).as_py())
            raise DataError("null value", row=row, column=column)
        if pa.types.is_null(a.type):
            a = a.cast(pa.int64())
        if not pa.types.is_integer(a.type):
            raise DataError(f"expected integers, got {a.type}", column=column)
        if pa.types.is_uint64(a.type) and len(a) and pc.max(a).as_py() > np.iinfo(np.int64).max:
            row = int(np.argmax(a.to_numpy() > np.iinfo(np.int64).max))
            raise DataError("value does not fit int64", row=row, column=column)
        arr = a.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if n is not None and arr.size != n:
        raise UsageError(f"column {column!r} has {arr.size} values, key column has {n}")
    return np.ascontiguousarray(arr)


def normalize_entries(key_type: str, keys: Any, seqs: Any, ts: Any) -> Entries:
    """Validate caller input and return entries with missing keys dropped (see module doc).

    Accepts NumPy arrays, Arrow arrays/chunked arrays and sequences. Raises
    :class:`~replaydb.errors.DataError` naming the row and column of a bad value (null seq or t,
    wrong key type, integer overflow).
    """
    if key_type == "string":
        k = _to_arrow(keys, "key")
        if pa.types.is_dictionary(k.type):
            k = k.cast(k.type.value_type)
        if pa.types.is_large_string(k.type):
            k = k.cast(pa.string())
        if pa.types.is_null(k.type):
            k = k.cast(pa.string())
        if not pa.types.is_string(k.type):
            raise DataError(f"string index needs string keys, got {k.type}", column="key")
        n = len(k)
        seq = _int_column(seqs, "seq", n)
        t = _int_column(ts, "t", n)
        if k.null_count:
            valid = np.asarray(k.is_valid())
            return Entries(k.filter(pa.array(valid)), seq[valid], t[valid])
        return Entries(k, seq, t)

    if isinstance(keys, np.ndarray) and keys.dtype != object:
        arr = keys
        valid = None
    else:
        a = _to_arrow(keys, "key")
        if pa.types.is_dictionary(a.type):
            a = a.cast(a.type.value_type)
        if pa.types.is_null(a.type):
            a = a.cast(pa.float64() if key_type == "float64" else pa.int64())
        if not (
            pa.types.is_integer(a.type)
            or pa.types.is_floating(a.type)
            or pa.types.is_boolean(a.type)
            or pa.types.is_decimal(a.type)
            or pa.types.is_timestamp(a.type)
            or pa.types.is_date(a.type)
            or pa.types.is_duration(a.type)
        ):
            raise DataError(f"{key_type} index needs numeric keys, got {a.type}", column="key")
        valid = np.asarray(a.is_valid()) if a.null_count else None
        if (
            pa.types.is_timestamp(a.type)
            or pa.types.is_duration(a.type)
            or pa.types.is_date(a.type)
        ):
            a = a.cast(pa.int64()) if not pa.types.is_date32(a.type) else a.cast(pa.int32())
        if pa.types.is_decimal(a.type):
            a = a.cast(pa.float64())
        if valid is not None:
            a = a.fill_null(0)
        arr = a.to_numpy(zero_copy_only=False)
    n = arr.size
    seq = _int_column(seqs, "seq", n)
    t = _int_column(ts, "t", n)
    if key_type == "int64":
        if arr.dtype.kind == "f":
            bad = ~np.isfinite(arr) | (arr != np.floor(arr))
            if valid is not None:
                bad &= valid
            if bad.any():
                raise DataError(
                    f"non-integer key {arr[np.argmax(bad)]!r} for an int64 index",
                    row=int(np.argmax(bad)),
                    column="key",
                )
        elif arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
            raise DataError(
                "key does not fit int64",
                row=int(np.argmax(arr > np.iinfo(np.int64).max)),
                column="key",
            )
        elif arr.dtype.kind not in "iub":
            raise DataError(f"int64 index needs integer keys, got {arr.dtype}", column="key")
        key = arr.astype(np.int64, copy=False)
    else:
        if arr.dtype.kind not in "iufb":
            raise DataError(f"float64 index needs numeric keys, got {arr.dtype}", column="key")
        key = arr.astype(np.float64, copy=False)
        nan = np.isnan(key)
        if nan.any():
            valid = ~nan if valid is None else (valid & ~nan)
        key = key + 0.0  # -0.0 -> +0.0 (and a private copy)
    if valid is not None:
        return Entries(np.ascontiguousarray(key[valid]), seq[valid], t[valid])
    return Entries(np.ascontiguousarray(key), seq, t)
