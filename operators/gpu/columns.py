"""Host-side preparation of columns for the device machine (:mod:`.exprvm`).

A predicate reads columns; the CPU operators turn Arrow columns into NumPy arrays in a particular
way (:func:`~replaydb.operators.base.column_np`, object arrays for strings). :class:`ColumnSet`
does exactly that, records each column's *kind* as NumPy will treat it, and packs the columns
into the two matrices the kernels read: int64 (integers, booleans, string codes) and float64.
String columns of all sources share one sorted dictionary per call (so ``=`` across columns and
``<`` on codes both mean what they mean on Python strings).

Complexity: O(rows x columns) NumPy work; strings O(rows) Python work for the dictionary codes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.operators.gpu.exprvm import ColumnSlot, NotCompilable, encode_strings, kind_of


def is_string_type(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


@dataclass
class Source:
    """The columns of one source (a batch, or one side of a join) as NumPy arrays."""

    n: int
    values: dict[str, np.ndarray] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    nulls: dict[str, bool] = field(default_factory=dict)

    def add(self, name: str, values: np.ndarray, arrow_type: pa.DataType | None = None,
            null_count: int = 0) -> None:
        if arrow_type is not None and is_string_type(arrow_type):
            kind = "s"
        else:
            kind = kind_of(values)
            if kind == "s":  # an object array that is not a string column (decimals, lists)
                kind = "x"
        self.values[name] = values
        self.kinds[name] = kind
        self.nulls[name] = bool(null_count)


class ColumnSet:
    """Up to two sources packed into int64/float64 matrices, with a slot per column."""

    def __init__(self, sources: list[Source]) -> None:
        self.sources = sources
        self.slots: dict[tuple[int, str], ColumnSlot] = {}
        self._imats: list[list[np.ndarray]] = [[] for _ in sources]
        self._fmats: list[list[np.ndarray]] = [[] for _ in sources]
        strings: list[tuple[int, str]] = []
        for si, src in enumerate(sources):
            for name, vals in src.values.items():
                kind = src.kinds[name]
                if kind == "s":
                    strings.append((si, name))
                    continue
                if kind == "f":
                    self.slots[(si, name)] = ColumnSlot(si, "f", len(self._fmats[si]), kind)
                    self._fmats[si].append(vals.astype(np.float64, copy=False))
                elif kind in ("i", "n", "b"):
                    self.slots[(si, name)] = ColumnSlot(si, "i", len(self._imats[si]), kind)
                    self._imats[si].append(vals.astype(np.int64, copy=False))
                else:
                    self.slots[(si, name)] = ColumnSlot(si, "i", -1, "x")
        row = [len(m) for m in self._imats]
        for si, name in strings:  # codes are appended by finish(), in this order
            self.slots[(si, name)] = ColumnSlot(si, "i", row[si], "s")
            row[si] += 1
        self._strings = strings

    def string_nulls(self) -> bool:
        """Whether a string column holds NULLs (from the Arrow null counts)."""
        return any(self.sources[si].nulls.get(n, False) for si, n in self._strings)

    def finish(self, literals: list[str]) -> np.ndarray:
        """Encode string columns (one sorted dictionary) and return the literals' codes."""
        cols = [self.sources[si].values[n] for si, n in self._strings]
        codes, lit = encode_strings(cols, literals)
        for (si, _name), c in zip(self._strings, codes):
            self._imats[si].append(c)
        return lit if len(lit) else np.zeros(1, dtype=np.int64)

    def has_strings(self) -> bool:
        return bool(self._strings)

    def slot(self, src: int, name: str) -> ColumnSlot:
        s = self.slots.get((src, name))
        if s is None:
            raise NotCompilable(f"column {name!r} is not available")
        return s

    def matrices(self, src: int) -> tuple[np.ndarray, np.ndarray]:
        n = max(1, self.sources[src].n)
        im = np.stack(self._imats[src]) if self._imats[src] else np.zeros((1, n), np.int64)
        fm = np.stack(self._fmats[src]) if self._fmats[src] else np.zeros((1, n), np.float64)
        return im, fm

    def signature(self) -> tuple[Any, ...]:
        return tuple((si, n, s.kind) for (si, n), s in sorted(self.slots.items()))
