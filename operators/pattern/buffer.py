"""Event-side state of the pattern operator: partitions, PREV carry, and the event buffer.

* :class:`PartitionMap` maps partition key values to dense ids (``0`` for an unpartitioned
  query), persistently across batches. Null keys form their own partition.
* :class:`NavCarry` computes the ``PREV(col, k)`` columns of a batch (the value ``k`` rows back
  in the same partition, NULL before the partition's first row) and carries the last ``k`` values
  of every partition to the next batch. Materializing them per event keeps physical navigation
  exact without keeping old events alive.
* :class:`NavAhead` computes the ``NEXT(col, k)`` columns DEFINE reads, holding rows back
  until the rows after them in their partition have arrived.
* :class:`EventBuffer` holds the events live runs may still read: a float64 matrix of the columns
  the VM reads (strings dictionary-coded), ``t``/``seq``/partition id and the successor in the
  partition (for ``NEXT`` in measures) per event, and the raw Arrow batches (with the PREV
  columns appended) for computing measures and ALL ROWS output. Events are addressed by their
  *global index* (0-based position in the pushed input). Old events are trimmed below the oldest
  index any run still references.

Complexity: O(batch) vectorized per batch plus O(distinct partitions in the batch) Python work.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from numba import njit

from replaydb.errors import QueryError
from replaydb.operators import expr as ex
from replaydb.operators.pattern.lowering import nav_name
from replaydb.operators.pattern.strings import StringCodes
from replaydb.operators.valuemask import dictionary_of


@njit(cache=True)
def first_disorder(t: np.ndarray) -> int:
    """First row ``r`` with ``t[r] < t[r-1]``, or -1. One pass."""
    for r in range(1, t.shape[0]):
        if t[r] < t[r - 1]:
            return r
    return -1


def arrow_to_numpy(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """NumPy view of a column: numbers as float64/int64 (nulls as NaN), strings as objects."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = col.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_duration(t) \
            or pa.types.is_time(t):
        col = col.cast(pa.int64()) if not pa.types.is_date32(t) else col.cast(pa.int32())
        t = col.type
    if pa.types.is_boolean(t):
        if col.null_count:
            return col.cast(pa.float64()).to_numpy(zero_copy_only=False)
        return col.to_numpy(zero_copy_only=False)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        if pa.types.is_decimal(t):
            col = col.cast(pa.float64())
        if col.null_count:
            return col.cast(pa.float64()).to_numpy(zero_copy_only=False)
        return col.to_numpy(zero_copy_only=False)
    return col.to_numpy(zero_copy_only=False)


def to_float_column(col: pa.Array, is_string: bool, strings: StringCodes) -> np.ndarray:
    """A column as float64 for the VM (strings as codes, nulls NaN)."""
    if is_string:
        col = dictionary_of(col)
        dict_vals = col.dictionary.to_pylist()
        codes = np.array([strings.code(s) for s in dict_vals] + [np.nan], dtype=np.float64)
        idx = col.indices.fill_null(len(dict_vals)).to_numpy(zero_copy_only=False)
        return codes[idx.astype(np.int64)]
    a = arrow_to_numpy(col)
    if a.dtype == object:  # pragma: no cover - unsupported types
        raise TypeError(f"cannot use a column of type {col.type} in a condition")
    return a.astype(np.float64, copy=False)


def object_to_float(values: np.ndarray, is_string: bool, strings: StringCodes) -> np.ndarray:
    """Like :func:`to_float_column` for a NumPy array (used for PREV columns)."""
    if is_string:
        out = np.empty(len(values), dtype=np.float64)
        for i, s in enumerate(values):
            out[i] = np.nan if s is None else strings.code(s)
        return out
    if values.dtype == object:
        return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    return values.astype(np.float64, copy=False)


def derived_column(batch: pa.RecordBatch, expr: Any, count_only: bool) -> np.ndarray:
    """A DEFINE aggregate's argument expression (over ``batch``'s columns) on every row, as
    float64 with NaN for NULL; ``count_only`` (COUNT): 1.0 where it is not NULL. A numeric
    aggregate over a non-numeric expression is a QueryError. O(rows x expression size)."""
    names = sorted({c.name for c in expr.walk() if isinstance(c, ex.Column)})
    env = ex.ColumnsEnv({n: arrow_to_numpy(batch.column(n)) for n in names})
    return aggregated_values(np.asarray(ex.compile_expr(expr)(env)), batch.num_rows, expr,
                             count_only)


def row_function_codes(expr: Any, batch: pa.RecordBatch, navs: dict[str, np.ndarray], k: int,
                       strings: StringCodes) -> np.ndarray:
    """A string function of one row's columns (``LOWER(name)``) on every row of ``batch`` -
    ``k`` rows back in its partition (``navs``: the columns navigated so, by
    :func:`~replaydb.operators.pattern.lowering.nav_name`) - as the machine's string codes, NaN
    for NULL. O(rows x expression size)."""
    values = pa.array(row_function_values(expr, batch, navs, k), type=pa.string(),
                      from_pandas=True)
    return to_float_column(values, True, strings)  # one code lookup per distinct value


def row_function_values(expr: Any, batch: pa.RecordBatch, navs: dict[str, np.ndarray],
                        k: int) -> np.ndarray:
    """The strings (None for NULL) of a function of one row's columns on every row of
    ``batch``, ``k`` rows back (see :func:`row_function_codes`). O(rows x expression size)."""
    names = sorted({c.name for c in expr.walk() if isinstance(c, ex.Column)})
    cols = {n: arrow_to_numpy(batch.column(n)) if k == 0 else navs[nav_name(n, k)]
            for n in names}
    r = np.asarray(ex.compile_expr(expr)(ex.ColumnsEnv(cols)))
    if r.ndim == 0:
        r = np.full(batch.num_rows, r.item(), dtype=object)
    return r.astype(object)


def aggregated_values(r: np.ndarray, n: int, expr: Any, count_only: bool) -> np.ndarray:
    """An aggregate's argument values ``r`` (an expression's result over ``n`` rows) as the
    float64 the aggregate runs over, NaN for NULL; ``count_only`` (COUNT): 1.0 where not NULL,
    any type; else a numeric aggregate over a non-numeric expression is a QueryError. Shared by
    DEFINE (per batch) and MEASURES (per match), so both read an argument alike."""
    if r.ndim == 0:
        r = np.full(n, r.item(), dtype=r.dtype)
    if count_only:
        nulls = np.array([v is None or v != v for v in r.tolist()], dtype=np.bool_) \
            if r.dtype == object else (np.isnan(r) if r.dtype.kind == "f" else
                                       np.zeros(len(r), dtype=np.bool_))
        return np.where(nulls, np.nan, 1.0)
    if r.dtype == object or r.dtype.kind in "USb":
        raise QueryError(f"an aggregate over the non-numeric expression {ex.to_text(expr)}")
    return r.astype(np.float64)


class PartitionMap:
    """Partition key values -> dense ids, stable for the operator's lifetime."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.ids: dict[Any, int] = {}

    @property
    def count(self) -> int:
        return max(1, len(self.ids))

    def assign(self, batch: pa.RecordBatch, encoded: dict[str, pa.Array] | None = None
               ) -> np.ndarray:
        """The partition id of every row of ``batch`` (``encoded``: the batch's
        dictionary-encoded columns so far, used and filled here, shared with the conditions'
        masks of the batch)."""
        n = batch.num_rows
        if not self.keys:
            if not self.ids:
                self.ids[()] = 0
            return np.zeros(n, dtype=np.int64)
        encoded = {} if encoded is None else encoded
        codes: list[np.ndarray] = []
        dicts: list[list[Any]] = []
        for k in self.keys:
            if k not in encoded:
                encoded[k] = dictionary_of(batch.column(k))
            enc = encoded[k]
            vals = enc.dictionary.to_pylist() + [None]
            idx = enc.indices.fill_null(len(vals) - 1).to_numpy(zero_copy_only=False)
            codes.append(idx.astype(np.int64))
            dicts.append(vals)
        if len(codes) == 1:  # one key: its dictionary codes are already dense
            return self._ids_of_codes(codes[0], dicts[0])
        combo = codes[0]
        for c, d in zip(codes[1:], dicts[1:]):
            combo = combo * len(d) + c
        uniq, inv = np.unique(combo, return_inverse=True)
        ids = np.empty(len(uniq), dtype=np.int64)
        for j, u in enumerate(uniq.tolist()):
            parts = []
            rest = u
            for d in reversed(dicts[1:]):
                parts.append(d[rest % len(d)])
                rest //= len(d)
            parts.append(dicts[0][rest])
            ids[j] = self._id_of(tuple(reversed(parts)))
        return ids[inv.reshape(-1)]

    def _id_of(self, key: tuple[Any, ...]) -> int:
        """The id of partition ``key``, the next one when it is new."""
        pid = self.ids.get(key)
        if pid is None:
            pid = self.ids[key] = len(self.ids)
        return pid

    def _ids_of_codes(self, codes: np.ndarray, values: list[Any]) -> np.ndarray:
        """Ids of one key column's rows from their codes into ``values``: the values present
        get ids in code order (as the several-key path orders them), then a gather. O(rows +
        distinct values)."""
        present = np.bincount(codes, minlength=len(values)) > 0
        ids = np.full(len(values), -1, dtype=np.int64)
        for j in np.flatnonzero(present).tolist():
            ids[j] = self._id_of((values[j],))
        return ids[codes]

    def key_values(self, pids: np.ndarray) -> list[list[Any]]:
        """Per key column, the key values of partitions ``pids``."""
        inv = list(self.ids)
        rows = [inv[p] for p in pids.tolist()] if self.keys else []
        return [[r[j] for r in rows] for j in range(len(self.keys))]


class NavCarry:
    """``PREV(col, k)`` columns per batch with the last values of each partition carried over
    (the ``(col, k)`` of ``navs`` with ``k > 0``; NEXT's are :class:`NavAhead`'s)."""

    def __init__(self, navs: set[tuple[str, int]]) -> None:
        navs = {(c, k) for c, k in navs if k > 0}
        self.depth: dict[str, int] = {}
        for col, k in navs:
            self.depth[col] = max(self.depth.get(col, 0), k)
        self.carry: dict[str, dict[int, list[Any]]] = {c: {} for c in self.depth}
        self.navs = sorted(navs)

    def compute(self, cols: dict[str, np.ndarray], pid: np.ndarray) -> dict[str, np.ndarray]:
        """Return ``{nav_name(col, k): values}`` for the batch; updates the carry."""
        out: dict[str, np.ndarray] = {}
        if not self.navs:
            return out
        n = len(pid)
        order = np.argsort(pid, kind="stable")
        sp = pid[order]
        bounds = np.flatnonzero(np.diff(sp)) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.concatenate((bounds, [n]))
        rank = np.arange(n) - np.repeat(starts, ends - starts)
        gpid = sp[starts].tolist()
        for col, K in self.depth.items():
            vals = cols[col]
            svals = vals[order]
            is_obj = vals.dtype == object
            carry = self.carry[col]
            for k in range(1, K + 1):
                if (col, k) not in self.navs:
                    continue
                res = np.empty(n, dtype=object if is_obj else np.float64)
                take = rank >= k
                src = np.arange(n) - k
                res[take] = svals[src[take]]
                # rows within the first k of their group read the carry
                for gi, s in enumerate(starts.tolist()):
                    e = min(ends[gi], s + k)
                    prev = carry.get(gpid[gi], [])
                    for j in range(s, e):
                        back = k - (j - s)  # how many rows before the group start
                        res[j] = prev[-back] if back <= len(prev) else (None if is_obj else np.nan)
                full = np.empty(n, dtype=res.dtype)
                full[order] = res
                out[nav_name(col, k)] = full
            for gi, s in enumerate(starts.tolist()):
                grp = svals[s:ends[gi]]
                prev = carry.get(gpid[gi], [])
                merged = (list(prev) + grp[-K:].tolist())[-K:]
                carry[gpid[gi]] = merged
        return out


def _group_ranks(pid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, rank, size)``: a stable sort of the rows by partition, each sorted row's rank
    in its partition and its partition's row count."""
    n = len(pid)
    order = np.argsort(pid, kind="stable")
    bounds = np.flatnonzero(np.diff(pid[order])) + 1
    starts = np.concatenate(([0], bounds))
    sizes = np.diff(np.concatenate((starts, [n])))
    rank = np.arange(n) - np.repeat(starts, sizes)
    return order, rank, np.repeat(sizes, sizes)


class NavAhead:
    """``NEXT(col, k)`` columns (``k`` rows later in the same partition, NULL after its last
    row) for DEFINE, which reads them while matching: a row is held back until its partition
    shows the ``K`` rows after it (``K`` the largest offset), or the input (an interval) ends.

    Rows are released as soon as they are resolved, in input order among themselves: a
    partition's rows stay in order, while a partition's last ``K`` rows wait without holding
    back the other partitions (so at most ``K`` rows per partition are held). Complexity:
    O((held + batch) log(held + batch)) per batch."""

    def __init__(self, navs: set[tuple[str, int]]) -> None:
        self.navs = sorted((c, k) for c, k in navs if k < 0)
        self.reach = max((-k for _, k in self.navs), default=0)
        self.held: pa.RecordBatch | None = None

    @property
    def size(self) -> int:
        return 0 if self.held is None else self.held.num_rows

    def push(self, batch: pa.RecordBatch | None, pmap: PartitionMap, *, final: bool = False
             ) -> tuple[pa.RecordBatch | None, dict[str, np.ndarray]]:
        """Take ``batch`` (None: nothing new); return the rows now released (None if none)
        with their ``{nav_name(col, k): values}``; ``final``: the input ends, release all."""
        parts = [b for b in (self.held, batch) if b is not None and b.num_rows]
        if not parts:
            return None, {}
        rows = parts[0] if len(parts) == 1 else pa.concat_batches(parts)
        order, rank, size = _group_ranks(pmap.assign(rows))
        n = rows.num_rows
        ready = np.ones(n, dtype=np.bool_)
        if not final:
            ready[order] = rank + self.reach < size
        self.held = None if ready.all() else rows.filter(pa.array(~ready))
        if not ready.any():
            return None, {}
        out: dict[str, np.ndarray] = {}
        for col, k in self.navs:
            vals = arrow_to_numpy(rows.column(col))[order]
            ahead = np.flatnonzero(rank - k < size)  # k < 0: the row -k later exists
            res = np.full(n, None if vals.dtype == object else np.nan,
                          dtype=object if vals.dtype == object else np.float64)
            res[ahead] = vals[ahead - k]
            full = np.empty(n, dtype=res.dtype)
            full[order] = res
            out[nav_name(col, k)] = full[ready]
        return (rows if ready.all() else rows.filter(pa.array(ready))), out


class EventBuffer:
    """Events live runs may still read (see module docstring)."""

    def __init__(self, n_cols: int, capacity: int = 1024, track_next: bool = True) -> None:
        self.n_cols = n_cols
        self.track_next = track_next
        self.base = 0            # global index of column 0 of ``vm`` / ``next_g``
        self.end = 0             # global index after the last event
        self.vm = np.empty((n_cols, capacity if n_cols else 0), dtype=np.float64)
        self.next_g = np.empty(capacity if track_next else 0, dtype=np.int64)
        # per batch, kept without copying: (first global index, t, seq, partition ids)
        self.chunks: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        self.raw: list[tuple[int, pa.RecordBatch]] = []
        self.last_g: dict[int, int] = {}

    @property
    def size(self) -> int:
        return self.end - (self.chunks[0][0] if self.chunks else self.end)

    def _ensure(self, n: int) -> None:
        """Room for ``n`` more events in the contiguous arrays (vm, next links)."""
        used = self.end - self.base
        cap = self.vm.shape[1] if self.n_cols else self.next_g.shape[0]
        if not (self.n_cols or self.track_next) or used + n <= cap:
            return
        cap = max(2 * cap, used + n)
        if self.n_cols:
            v = np.empty((self.n_cols, cap), dtype=np.float64)
            v[:, :used] = self.vm[:, :used]
            self.vm = v
        if self.track_next:
            b = np.empty(cap, dtype=np.int64)
            b[:used] = self.next_g[:used]
            self.next_g = b

    def remap_keys(self, rows: list[int], old: np.ndarray, new: np.ndarray) -> None:
        """Rewrite the buffered values of VM columns ``rows`` (order keys) from the sorted keys
        ``old`` to ``new`` (NaN stays NaN). O(buffered events x len(rows))."""
        used = self.end - self.base
        for j in rows:
            vals = self.vm[j, :used]
            known = ~np.isnan(vals)
            vals[known] = new[np.searchsorted(old, vals[known])]

    def append(self, batch: pa.RecordBatch, vmcols: np.ndarray, t: np.ndarray, seq: np.ndarray,
               pid: np.ndarray) -> int:
        """Append a batch; returns its first global index. O(batch) only for VM columns."""
        n = len(t)
        g0 = self.end
        self._ensure(n)
        off = g0 - self.base
        if self.n_cols:
            self.vm[:, off: off + n] = vmcols
        self.chunks.append((g0, t, seq, pid))
        self.end = g0 + n
        if self.track_next:
            self.next_g[off: off + n] = -1
            self._link(g0, n, pid)
        self.raw.append((g0, batch))
        return g0

    def _link(self, g0: int, n: int, pid: np.ndarray) -> None:
        """Successor links within the partition (for NEXT in measures)."""
        g = np.arange(g0, g0 + n, dtype=np.int64)
        sl = slice(g0 - self.base, g0 - self.base + n)
        order = np.argsort(pid, kind="stable")
        sp = pid[order]
        same = sp[1:] == sp[:-1]
        nxt = np.full(n, -1, dtype=np.int64)
        nxt[order[:-1][same]] = g[order[1:][same]]
        self.next_g[sl] = nxt
        bounds = np.concatenate(([0], np.flatnonzero(~same) + 1))
        lasts = np.concatenate((np.flatnonzero(~same), [n - 1])) if n else np.array([], int)
        for b, e in zip(bounds.tolist(), lasts.tolist()):
            p = int(sp[b])
            prev = self.last_g.get(p)
            if prev is not None and prev >= self.base:
                self.next_g[prev - self.base] = g[order[b]]
            self.last_g[p] = int(g[order[e]])

    def at(self, what: str, g: np.ndarray) -> np.ndarray:
        """``t``, ``seq`` or ``pid`` of the events at global indices ``g`` (all kept)."""
        k = {"t": 1, "seq": 2, "pid": 3}[what]
        g = np.asarray(g, dtype=np.int64)
        if len(self.chunks) == 1:
            return self.chunks[0][k][g - self.chunks[0][0]]
        out = np.empty(len(g), dtype=np.int64)
        starts = np.array([c[0] for c in self.chunks], dtype=np.int64)
        which = np.searchsorted(starts, g, "right") - 1
        for ci in np.unique(which).tolist():
            sel = which == ci
            c = self.chunks[ci]
            out[sel] = c[k][g[sel] - c[0]]
        return out

    def trim(self, keep_from: int) -> None:
        """Forget events with global index < ``keep_from`` (amortized O(kept))."""
        keep_from = min(max(keep_from, self.base), self.end)
        while self.raw and self.raw[0][0] + self.raw[0][1].num_rows <= keep_from:
            self.raw.pop(0)
        while self.chunks and self.chunks[0][0] + len(self.chunks[0][1]) <= keep_from:
            self.chunks.pop(0)
        drop = keep_from - self.base
        if drop <= 0:
            return
        used = self.end - self.base
        if drop * 2 >= used or drop > 1 << 16:
            keep = used - drop
            if self.n_cols:
                self.vm[:, :keep] = self.vm[:, drop:used].copy()
            if self.track_next:
                self.next_g[:keep] = self.next_g[drop:used].copy()
            self.base = keep_from

    def gather(self, g: np.ndarray, names: list[str],
               schema: pa.Schema | None = None) -> dict[str, pa.Array]:
        """Columns ``names`` of the raw events at global indices ``g`` (-1: NULL)."""
        if not self.raw or not len(g):
            sch = schema if schema is not None else (self.raw[0][1].schema if self.raw else None)
            return {n: pa.array([None] * len(g), type=sch.field(n).type if sch else pa.null())
                    for n in names}
        raw_base = self.raw[0][0]
        table = pa.Table.from_batches([b.select(names) for _, b in self.raw])
        rel = np.asarray(g, dtype=np.int64) - raw_base
        missing = (np.asarray(g) < 0) | (rel < 0) | (rel >= table.num_rows)
        idx = pa.array(np.where(missing, 0, rel), type=pa.int64(),
                       mask=missing if missing.any() else None)
        taken = table.take(idx)
        return {n: taken.column(n).combine_chunks() for n in names}

    def follow_next(self, g: np.ndarray, k: int) -> np.ndarray:
        """The event ``k`` rows after each of ``g`` in its partition (-1 if not seen yet)."""
        cur = np.asarray(g, dtype=np.int64).copy()
        for _ in range(k):
            ok = (cur >= self.base) & (cur < self.end)
            nxt = np.full(len(cur), -1, dtype=np.int64)
            nxt[ok] = self.next_g[cur[ok] - self.base]
            cur = nxt
        return cur

    def local_index(self, g: np.ndarray) -> np.ndarray:
        return g - self.base
