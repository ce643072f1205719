"""Evaluation of lowered MEASURES (:mod:`replaydb.operators.pattern.measures`) over a frame of
matches: every leaf is computed with NumPy/Arrow over the flat arrays of all matches of a batch
(O(matched rows x measure size)), with O(output) compiled loops for a variable's k-th row and for
running MIN/MAX.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from numba import njit

from replaydb.errors import QueryError
from replaydb.operators import expr as ex
from replaydb.operators.pattern.buffer import EventBuffer, aggregated_values, arrow_to_numpy
from replaydb.operators.pattern.lowering import nav_name
from replaydb.operators.pattern.measures import (
    Frame,
    VarRef,
    _AggLeaf,
    _Sel,
    _Special,
    member_table,
)


# --------------------------------------------------------------------------- evaluation
@njit(cache=True, nogil=True)
def _kth_of_var(var: np.ndarray, start: np.ndarray, end: np.ndarray, member: np.ndarray,
                from_end: bool, k: int) -> np.ndarray:
    """Per row ``i``: the flat row of the ``k``-th occurrence (0-based; counted from
    ``end[i]`` backwards when ``from_end``) of a variable flagged in ``member`` among flat rows
    ``start[i]..end[i]``, or -1 when there are not that many. O(rows passed over)."""
    out = np.full(start.size, -1, np.int64)
    step = -1 if from_end else 1
    for i in range(start.size):
        c = 0
        j = end[i] if from_end else start[i]
        while start[i] <= j <= end[i]:
            if member[var[j]]:
                if c == k:
                    out[i] = j
                    break
                c += 1
            j += step
    return out


@njit(cache=True)
def _running_minmax(vals, mask, off, is_min):
    out = np.empty(vals.shape[0], dtype=np.float64)
    for m in range(off.shape[0] - 1):
        cur = np.nan
        for j in range(off[m], off[m + 1]):
            x = vals[j]
            if mask[j] and x == x:
                if cur != cur or (is_min and x < cur) or (not is_min and x > cur):
                    cur = x
            out[j] = cur
    return out


class Evaluator:
    """Evaluate lowered measures over a :class:`Frame` (one instance per batch of matches)."""

    def __init__(self, frame: Frame, buffer: EventBuffer, var_names: list[str],
                 schema: pa.Schema) -> None:
        self.f = frame
        self.buf = buffer
        self.var_names = var_names
        self.schema = schema
        self._cache: dict[Any, Any] = {}

    def _ends(self, final: bool) -> tuple[np.ndarray, np.ndarray]:
        ms = self.f.ms
        start = ms.off[self.f.mid]
        end = ms.off[self.f.mid + 1] - 1 if final else self.f.cur
        return start, end

    def rows_of(self, var: int | tuple[int, ...]) -> np.ndarray:
        """Per flat row, whether it is bound to ``var``."""
        if isinstance(var, tuple):
            return member_table(var, len(self.var_names))[self.f.ms.var]
        return self.f.ms.var == var

    def select(self, var: VarRef, from_end: bool, k: int, final: bool) -> np.ndarray:
        """Flat row index per output row (-1: none)."""
        key = ("sel", var, from_end, k, final)
        if key in self._cache:
            return self._cache[key]
        start, end = self._ends(final)
        if var is not None and (final or self.f.per_match):
            # each match's rows scanned from the chosen end: O(rows passed over), where
            # finding every occurrence of the variable costs O(all rows) per measure
            ms = self.f.ms
            member = member_table(var, len(self.var_names))
            if self.f.per_match:
                out = _kth_of_var(ms.var, start, end, member, from_end, k)
            else:
                out = _kth_of_var(ms.var, ms.off[:-1], ms.off[1:] - 1, member, from_end,
                                  k)[self.f.mid]
            self._cache[key] = out
            return out
        if var is None:
            idx = end - k if from_end else start + k
            ok = (idx >= start) & (idx <= end)
        else:
            occ = np.flatnonzero(self.rows_of(var))
            lo = np.searchsorted(occ, start, "left")
            hi = np.searchsorted(occ, end, "right")
            cnt = hi - lo
            c = cnt - 1 - k if from_end else np.full(len(start), k)
            ok = (c >= 0) & (c < cnt)
            pos = np.where(ok, lo + c, 0)
            idx = occ[pos] if len(occ) else np.zeros(len(start), dtype=np.int64)
        out = np.where(ok, idx, -1).astype(np.int64)
        self._cache[key] = out
        return out

    def leaf_arrow(self, leaf: _Sel) -> pa.Array:
        flat = self.select(leaf.var, leaf.from_end, leaf.k, leaf.final)
        ev = np.where(flat >= 0, self.f.ms.ev[np.maximum(flat, 0)], -1) if len(self.f.ms.ev) \
            else np.full(len(flat), -1, dtype=np.int64)  # only empty matches
        col = leaf.col
        if leaf.nav > 0:
            col = nav_name(leaf.col, leaf.nav)
        elif leaf.nav < 0:
            ev = np.where(ev >= 0, self.buf.follow_next(ev, -leaf.nav), -1)
        typ = self.schema.field(col).type
        if col in ("t", "seq") and pa.types.is_integer(typ) and self.buf.chunks:
            # the buffer keeps t and seq as NumPy arrays: no Arrow gather over the raw batches
            ok = ev >= 0
            vals = self.buf.at(col, np.where(ok, ev, self.buf.chunks[0][0]))
            return pa.array(vals, type=typ, mask=None if ok.all() else ~ok)
        return self.buf.gather(ev, [col], self.schema)[col]

    def agg(self, leaf: _AggLeaf) -> np.ndarray:
        ms = self.f.ms
        mask = np.ones(len(ms.ev), dtype=bool) if leaf.var is None else self.rows_of(leaf.var)
        if leaf.distinct:
            start, end = self._ends(leaf.final)
            cn = np.concatenate(([0], np.cumsum(self.first_of_value(leaf, mask))))
            return (cn[end + 1] - cn[start]).astype(np.int64)
        if leaf.arg is not None:
            vals = self.row_values(leaf)
        elif leaf.col is None:
            vals = np.ones(len(ms.ev), dtype=np.float64)
        else:
            key = ("vals", leaf.col)
            if key not in self._cache:
                arr = self.buf.gather(ms.ev, [leaf.col], self.schema)[leaf.col]
                v = arrow_to_numpy(arr)
                if v.dtype == object:  # strings: only COUNT (of the non-NULL ones) reads them
                    if leaf.fn != "COUNT":
                        raise QueryError(f"{leaf.fn} over the non-numeric column {leaf.col!r}")
                    v = aggregated_values(v, len(v), None, True)
                self._cache[key] = v.astype(np.float64)
            vals = self._cache[key]
        good = mask & ~np.isnan(vals)
        start, end = self._ends(leaf.final)
        cn = np.concatenate(([0], np.cumsum(good)))
        cnt = cn[end + 1] - cn[start]
        if leaf.fn == "COUNT":
            return cnt.astype(np.int64)
        if leaf.fn in ("SUM", "AVG"):
            cs = np.concatenate(([0.0], np.cumsum(np.where(good, vals, 0.0))))
            s = cs[end + 1] - cs[start]
            with np.errstate(invalid="ignore", divide="ignore"):
                r = s if leaf.fn == "SUM" else s / cnt
            return np.where(cnt > 0, r, np.nan)
        if not len(vals):
            return np.full(len(end), np.nan)
        run = _running_minmax(vals, good, ms.off, leaf.fn == "MIN")
        return np.where(cnt > 0, run[np.maximum(end, 0)], np.nan)  # end < 0: an empty match

    def first_of_value(self, leaf: _AggLeaf, mask: np.ndarray) -> np.ndarray:
        """Per matched row: whether it is covered (``mask``), not NULL, and the first row of its
        match with its value (``COUNT(DISTINCT ...)`` counts these). O(rows log rows)."""
        ms = self.f.ms
        if leaf.arg is not None:
            vals = self.arg_result(leaf)
            if vals.ndim == 0:
                vals = np.full(len(ms.ev), vals.item())
        else:
            assert leaf.col is not None
            vals = arrow_to_numpy(self.buf.gather(ms.ev, [leaf.col], self.schema)[leaf.col])
        null = np.isnan(aggregated_values(vals, len(vals), leaf.arg, True))
        keep = np.flatnonzero(mask & ~null)
        first = np.zeros(len(vals), dtype=np.bool_)
        if not len(keep):
            return first
        _, code = np.unique(vals[keep], return_inverse=True)
        match_of = np.repeat(np.arange(len(ms.off) - 1), np.diff(ms.off))[keep]
        _, at = np.unique(match_of * (int(code.max()) + 1) + code.reshape(-1), return_index=True)
        first[keep[at]] = True
        return first

    def arg_result(self, leaf: _AggLeaf) -> np.ndarray:
        """``leaf.arg`` evaluated on every matched row (any type; a scalar for a constant)."""
        assert leaf.arg is not None
        names = dict(leaf.arg_columns)
        got = self.buf.gather(self.f.ms.ev, sorted(set(names.values())), self.schema) \
            if names else {}
        env = {written: arrow_to_numpy(got[col]) for written, col in names.items()}
        aliases = frozenset(ex.qualifiers(leaf.arg))
        return np.asarray(ex.compile_expr(leaf.arg)(ex.ColumnsEnv(env, aliases)))

    def row_values(self, leaf: _AggLeaf) -> np.ndarray:
        """``leaf.arg`` on every matched row, as float64 (NaN where it is NULL)."""
        assert leaf.arg is not None
        key = ("expr", leaf.arg, leaf.arg_columns)
        if key not in self._cache:
            self._cache[key] = aggregated_values(self.arg_result(leaf), len(self.f.ms.ev),
                                                 leaf.arg, leaf.fn == "COUNT")
        return self._cache[key]

    def special(self, leaf: _Special) -> pa.Array:
        if leaf.what == "match_number":
            return pa.array(self.f.ms.number[self.f.mid], type=pa.int64())
        start, end = self._ends(leaf.final)
        row = end
        from_end, k = leaf.pick if leaf.pick is not None else (True, 0)
        found = None
        if leaf.var is not None:  # CLASSIFIER(v): the k-th of v's rows
            flat = self.select(leaf.var, from_end, k, leaf.final)
            found = flat >= 0
            row = np.where(found, flat, end)
        elif leaf.pick is not None:
            row = end - k if from_end else start + k
        row = row - leaf.shift
        ok = (row >= start) & (row <= end)
        if found is not None:
            ok &= found
        if not len(self.f.ms.var):  # only empty matches
            return pa.nulls(len(row), pa.string())
        names = np.array(self.var_names, dtype=object)
        labels = names[self.f.ms.var[np.where(ok, row, 0)]]
        return pa.array(labels, type=pa.string(), mask=None if ok.all() else ~ok)

    def evaluate(self, e: ex.Expr) -> pa.Array:
        if isinstance(e, _Sel):
            return self.leaf_arrow(e)
        if isinstance(e, _AggLeaf):
            r = self.agg(e)
            return pa.array(r, type=pa.int64()) if e.fn == "COUNT" else \
                pa.array(r, type=pa.float64(), from_pandas=True)
        if isinstance(e, _Special):
            return self.special(e)
        leaves: dict[str, np.ndarray] = {}
        expr = self._replace(e, leaves)
        n = len(self.f.mid)
        r = ex.compile_expr(expr)(ex.ColumnsEnv(leaves))
        arr = np.asarray(r)
        if arr.ndim == 0:
            arr = np.full(n, arr.item() if arr.dtype != object else r, dtype=arr.dtype)
        if arr.dtype == object:
            return pa.array(arr.tolist())
        return pa.array(arr, from_pandas=True)

    def _replace(self, e: ex.Expr, leaves: dict[str, np.ndarray]) -> ex.Expr:
        if isinstance(e, _Sel | _AggLeaf | _Special):
            name = f"\x00leaf{len(leaves)}"
            if isinstance(e, _AggLeaf):
                leaves[name] = self.agg(e)
            else:
                arr = self.leaf_arrow(e) if isinstance(e, _Sel) else self.special(e)
                leaves[name] = arrow_to_numpy(arr)
            return ex.Column(name)
        if isinstance(e, ex.Literal):
            return e
        if isinstance(e, ex.Unary):
            return ex.Unary(e.op, self._replace(e.operand, leaves))
        if isinstance(e, ex.Binary):
            return ex.Binary(e.op, self._replace(e.left, leaves), self._replace(e.right, leaves))
        if isinstance(e, ex.Between):
            return ex.Between(self._replace(e.operand, leaves), self._replace(e.low, leaves),
                           self._replace(e.high, leaves), e.negated)
        if isinstance(e, ex.InList):
            return ex.InList(self._replace(e.operand, leaves),
                          tuple(self._replace(v, leaves) for v in e.values), e.negated)
        if isinstance(e, ex.IsNull):
            return ex.IsNull(self._replace(e.operand, leaves), e.negated)
        if isinstance(e, ex.Call):
            return ex.Call(e.name, tuple(self._replace(a, leaves) for a in e.args))
        raise QueryError(f"cannot evaluate {type(e).__name__}")  # pragma: no cover


def _integer_or_float(typ: pa.DataType) -> pa.DataType:
    return pa.int64() if pa.types.is_integer(typ) else pa.float64()


def infer_type(e: ex.Expr, schema: pa.Schema) -> pa.DataType:
    """The Arrow type a lowered measure produces (results are cast to it)."""
    if isinstance(e, _Sel):
        return schema.field(e.col).type
    if isinstance(e, _AggLeaf):
        if e.fn == "COUNT":
            return pa.int64()
        if e.fn in ("MIN", "MAX") and e.arg is None and e.col in schema.names \
                and pa.types.is_integer(schema.field(e.col).type):
            return schema.field(e.col).type  # MIN/MAX keep an integer column's type (SQL)
        return pa.float64()
    if isinstance(e, _Special):
        return pa.string() if e.what == "classifier" else pa.int64()
    if isinstance(e, ex.Literal):
        v = e.value
        if isinstance(v, bool):
            return pa.bool_()
        if isinstance(v, int):
            return pa.int64()
        if isinstance(v, str):
            return pa.string()
        return pa.float64()
    if isinstance(e, ex.Unary):
        if e.op == "not":
            return pa.bool_()
        return _integer_or_float(infer_type(e.operand, schema))
    if isinstance(e, ex.Binary):
        if e.op in ("and", "or", "=", "!=", "<", "<=", ">", ">="):
            return pa.bool_()
        if e.op in ("+", "-", "*"):  # integers stay integers (SQL); / and % are computed in floats
            left, right = infer_type(e.left, schema), infer_type(e.right, schema)
            if pa.types.is_integer(left) and pa.types.is_integer(right):
                return pa.int64()
        return pa.float64()
    if isinstance(e, ex.Between | ex.InList | ex.IsNull):
        return pa.bool_()
    if isinstance(e, ex.Call):
        if e.name in ("LOWER", "UPPER"):
            return pa.string()
        return pa.float64()
    return pa.float64()  # pragma: no cover
