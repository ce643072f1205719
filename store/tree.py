"""The TAB+-tree: an append-only B+-tree over time with lightweight aggregates (dissertation 3.2).

This module is the in-memory structure only (no I/O). Level 0 holds one *leaf entry* per leaf (a
leaf is a block of at most B consecutive events, stored as one Parquet row group): the leaf's time
range, first seq, event count, where its events live (file id, row group), and for every numeric
attribute min, max, sum and non-null count. Level ``k+1`` node ``j`` aggregates level-``k`` nodes
``[j*D, (j+1)*D)`` - the implicit layout of a bulk-loaded B+-tree whose rightmost path is the only
one that is ever partial. The top level has a single node (the root), unless the tree is empty.

Why it is append-only: events arrive in time order and are appended to the rightmost leaf, so only
the rightmost node of each level changes. Late events within the stream's lateness bound rewrite a
*suffix* of the leaves; :meth:`TABTree.replace_leaves_from` recomputes exactly the nodes above the
changed suffix. Nothing is ever rebuilt from scratch.

Aggregate conventions: NaN and null values are skipped (``n`` counts the values that are neither);
the min/max of an attribute with no value in a node are +inf/-inf (float) or the int64 max/min
sentinels, with ``n == 0`` telling the truth. Sums are float64 for float attributes and int64 for
integer and bool attributes (exact; overflow beyond int64 raises).

Complexity (n events, L = n/B leaves, fan-out D, height h = ceil(log_D L) + 1):

* append of k new leaves: O(k + h * D) array work;
* leaf lookup by time or seq: O(log L) (binary search on the leaf level);
* aggregation over a run of leaves: O(h * D) using inner nodes (plus the caller's two partial
  leaves) - :meth:`TABTree.aggregate_leaves`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numba as nb
import numpy as np

from replaydb.errors import CorruptionError, DataError

I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min
_SUM_LIMIT = 2.0**62

BASE_COLUMNS = ("t_min", "t_max", "seq_min", "count")
LEAF_COLUMNS = ("file_id", "rg")


@dataclass(frozen=True)
class AggSpec:
    """A numeric attribute carried in the tree: ``kind`` is float64, int64 or bool."""

    name: str
    kind: str

    @property
    def is_float(self) -> bool:
        return self.kind == "float64"

    @property
    def value_dtype(self) -> np.dtype:
        return np.dtype(np.float64) if self.is_float else np.dtype(np.int64)

    @property
    def empty_min(self) -> float | int:
        return np.inf if self.is_float else I64_MAX

    @property
    def empty_max(self) -> float | int:
        return -np.inf if self.is_float else I64_MIN


def node_dtypes(specs: Iterable[AggSpec], leaf: bool) -> dict[str, np.dtype]:
    """Column dtypes of a tree level (leaf levels also carry file id and row group)."""
    d: dict[str, np.dtype] = {c: np.dtype(np.int64) for c in BASE_COLUMNS}
    if leaf:
        d["file_id"] = np.dtype(np.int32)
        d["rg"] = np.dtype(np.int32)
    for s in specs:
        d[f"{s.name}.min"] = s.value_dtype
        d[f"{s.name}.max"] = s.value_dtype
        d[f"{s.name}.sum"] = s.value_dtype
        d[f"{s.name}.n"] = np.dtype(np.int64)
    return d


class NodeLevel:
    """A growable struct of arrays: one row per node of a level.

    ``col(name)`` returns a view of the live rows; appends double the capacity when needed.
    """

    __slots__ = ("_cols", "n")

    def __init__(self, dtypes: dict[str, np.dtype], capacity: int = 16) -> None:
        self._cols = {k: np.empty(max(capacity, 1), dtype=v) for k, v in dtypes.items()}
        self.n = 0

    def __len__(self) -> int:
        return self.n

    @property
    def names(self) -> list[str]:
        return list(self._cols)

    def col(self, name: str) -> np.ndarray:
        return self._cols[name][: self.n]

    def as_dict(self, start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
        stop = self.n if stop is None else stop
        return {k: v[start:stop] for k, v in self._cols.items()}

    def truncate(self, n: int) -> None:
        if n < 0 or n > self.n:
            raise ValueError(f"cannot truncate a level of {self.n} nodes to {n}")
        self.n = n

    def set_from(self, start: int, arrs: dict[str, np.ndarray]) -> None:
        """Overwrite rows from ``start`` on with ``arrs`` (all the same length), then truncate
        the level to ``start + len``."""
        if start > self.n:
            raise ValueError(f"gap: level has {self.n} nodes, writing at {start}")
        k = len(next(iter(arrs.values()))) if arrs else 0
        need = start + k
        cap = len(next(iter(self._cols.values())))
        if need > cap:
            new_cap = max(need, 2 * cap)
            for name, arr in self._cols.items():
                grown = np.empty(new_cap, dtype=arr.dtype)
                grown[: self.n] = arr[: self.n]
                self._cols[name] = grown
        for name, arr in self._cols.items():
            arr[start:need] = arrs[name]
        self.n = need

    def copy(self) -> NodeLevel:
        out = NodeLevel({k: v.dtype for k, v in self._cols.items()}, capacity=max(self.n, 1))
        out.set_from(0, self.as_dict())
        return out


# ----------------------------------------------------------------------------- summaries
def summarize_leaves(
    t: np.ndarray,
    seq0: int,
    values: dict[str, tuple[np.ndarray, np.ndarray | None]],
    specs: list[AggSpec],
    starts: np.ndarray,
) -> dict[str, np.ndarray]:
    """Leaf entries for consecutive events split into leaves at ``starts`` (vectorized).

    ``t`` holds the events' times (sorted), ``seq0`` the seq of ``t[0]``; ``values[name]`` is
    ``(array, valid_mask_or_None)`` for each numeric attribute. Returns the level-0 columns except
    ``file_id``/``rg`` (the caller sets them).
    """
    n = len(t)
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.append(starts[1:], n)
    out: dict[str, np.ndarray] = {
        "t_min": t[starts].astype(np.int64),
        "t_max": t[ends - 1].astype(np.int64),
        "seq_min": (seq0 + starts).astype(np.int64),
        "count": (ends - starts).astype(np.int64),
    }
    for s in specs:
        x, valid = values[s.name]
        if s.is_float:
            x = np.asarray(x, dtype=np.float64)
            ok = ~np.isnan(x) if valid is None else (valid & ~np.isnan(x))
        else:
            x = np.asarray(x, dtype=np.int64)
            ok = np.ones(n, dtype=bool) if valid is None else valid
        all_ok = bool(ok.all())
        mn_src = x if all_ok else np.where(ok, x, s.empty_min)
        mx_src = x if all_ok else np.where(ok, x, s.empty_max)
        sm_src = x if all_ok else np.where(ok, x, 0)
        out[f"{s.name}.min"] = np.minimum.reduceat(mn_src, starts)
        out[f"{s.name}.max"] = np.maximum.reduceat(mx_src, starts)
        out[f"{s.name}.sum"] = np.add.reduceat(sm_src, starts)
        out[f"{s.name}.n"] = np.add.reduceat(ok.astype(np.int64), starts)
        if not s.is_float:
            _check_int_sums(sm_src, starts, s.name)
    return out


def _check_int_sums(x: np.ndarray, starts: np.ndarray, name: str) -> None:
    if len(x) and len(starts) and np.abs(np.add.reduceat(x.astype(np.float64), starts)).max() > _SUM_LIMIT:
        raise DataError("integer sum of a leaf exceeds the int64 range the tree can hold",
                        column=name)


def combine_rows(level: NodeLevel, starts: np.ndarray, stop: int, specs: list[AggSpec]) -> dict[str, np.ndarray]:
    """Parent rows over groups of ``level`` rows starting at ``starts`` (the last group ends at
    ``stop``): the aggregate every inner node stores for its children."""
    cols = level.as_dict(0, stop)
    if len(starts) == 0:
        return {k: v[:0] for k, v in cols.items() if k not in LEAF_COLUMNS}
    out = {
        "t_min": np.minimum.reduceat(cols["t_min"], starts),
        "t_max": np.maximum.reduceat(cols["t_max"], starts),
        "seq_min": cols["seq_min"][starts],
        "count": np.add.reduceat(cols["count"], starts),
    }
    for s in specs:
        out[f"{s.name}.min"] = np.minimum.reduceat(cols[f"{s.name}.min"], starts)
        out[f"{s.name}.max"] = np.maximum.reduceat(cols[f"{s.name}.max"], starts)
        sm = cols[f"{s.name}.sum"]
        out[f"{s.name}.sum"] = np.add.reduceat(sm, starts)
        if not s.is_float:
            _check_int_sums(sm, starts, s.name)
        out[f"{s.name}.n"] = np.add.reduceat(cols[f"{s.name}.n"], starts)
    return out


# ----------------------------------------------------------------------------- partial aggregates
@nb.njit(cache=True, nogil=True)
def _fold_float_rows(xs: np.ndarray, valid: np.ndarray, masked: bool
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``xs``: min, max, sum and count of the values that are not NaN (and, when
    ``masked``, valid). Rows without such values answer +inf, -inf, 0, 0. O(xs.size)."""
    k, n = xs.shape
    mn = np.full(k, np.inf)
    mx = np.full(k, -np.inf)
    sm = np.zeros(k)
    cnt = np.zeros(k, np.int64)
    for i in range(k):
        lo, hi, total, c = np.inf, -np.inf, 0.0, 0
        for j in range(n):
            x = xs[i, j]
            if x != x or (masked and not valid[i, j]):
                continue
            lo = min(lo, x)
            hi = max(hi, x)
            total += x
            c += 1
        mn[i], mx[i], sm[i], cnt[i] = lo, hi, total, c
    return mn, mx, sm, cnt


@dataclass
class Partial:
    """A mergeable aggregate over a set of events: count plus per-attribute min/max/sum/n."""

    count: int
    t_min: int | None
    t_max: int | None
    attrs: dict[str, list]  # name -> [min, max, sum, n]

    @classmethod
    def empty(cls, specs: list[AggSpec]) -> Partial:
        return cls(0, None, None, {s.name: [s.empty_min, s.empty_max, 0.0 if s.is_float else 0, 0]
                                   for s in specs})

    def merge_arrays(self, cols: dict[str, np.ndarray], specs: list[AggSpec]) -> None:
        """Fold node rows (a slice of a level, or leaf summaries) into this aggregate."""
        if len(cols["count"]) == 0:
            return
        self.count += int(cols["count"].sum())
        tmn, tmx = int(cols["t_min"].min()), int(cols["t_max"].max())
        self.t_min = tmn if self.t_min is None else min(self.t_min, tmn)
        self.t_max = tmx if self.t_max is None else max(self.t_max, tmx)
        for s in specs:
            a = self.attrs[s.name]
            a[0] = min(a[0], cols[f"{s.name}.min"].min().item())
            a[1] = max(a[1], cols[f"{s.name}.max"].max().item())
            a[2] = a[2] + cols[f"{s.name}.sum"].sum().item()
            a[3] += int(cols[f"{s.name}.n"].sum())

    def merge_ranges(self, levels: list[NodeLevel], ranges: list[tuple[int, int, int]],
                     specs: list[AggSpec]) -> None:
        """Fold the nodes ``levels[k][lo:hi]`` for every ``(k, lo, hi)`` in ``ranges``: one
        concatenation and one reduction per column, whatever the number of ranges."""
        if not ranges:
            return

        def gather(name: str) -> np.ndarray:
            parts = [levels[k]._cols[name][lo:hi] for k, lo, hi in ranges]
            return parts[0] if len(parts) == 1 else np.concatenate(parts)

        self.merge_arrays({"count": gather("count"), "t_min": gather("t_min"),
                           "t_max": gather("t_max"),
                           **{f"{s.name}.{op}": gather(f"{s.name}.{op}")
                              for s in specs for op in ("min", "max", "sum", "n")}}, specs)

    def merge_values(self, t: np.ndarray, values: dict[str, tuple[np.ndarray, np.ndarray | None]],
                     specs: list[AggSpec]) -> None:
        """Fold raw events (times and attribute values with validity masks). Float attributes
        are folded together by one compiled pass (:func:`_fold_float_rows`; NaN and masked
        values skipped), integer ones exactly, one at a time. O(events x attributes)."""
        if len(t) == 0:
            return
        n = len(t)
        self.count += n
        tmn, tmx = int(t.min()), int(t.max())
        self.t_min = tmn if self.t_min is None else min(self.t_min, tmn)
        self.t_max = tmx if self.t_max is None else max(self.t_max, tmx)
        floats = [s for s in specs if s.is_float]
        if floats:
            xs = np.empty((len(floats), n), np.float64)
            vs = np.ones((len(floats), n), np.bool_)
            masked = False
            for i, s in enumerate(floats):
                x, valid = values[s.name]
                xs[i] = x
                if valid is not None:
                    vs[i] = valid
                    masked = True
            mn, mx, sm, cnt = _fold_float_rows(xs, vs, masked)
            for i, s in enumerate(floats):
                if cnt[i]:
                    a = self.attrs[s.name]
                    a[0] = min(a[0], float(mn[i]))
                    a[1] = max(a[1], float(mx[i]))
                    a[2] = a[2] + float(sm[i])
                    a[3] += int(cnt[i])
        for s in specs:
            if s.is_float:
                continue
            x, valid = values[s.name]
            if valid is not None and not valid.all():
                x = x[valid]
            if len(x) == 0:
                continue
            a = self.attrs[s.name]
            a[0] = min(a[0], x.min().item())
            a[1] = max(a[1], x.max().item())
            a[2] = a[2] + x.sum().item()
            a[3] += len(x)

    def result(self, specs: list[AggSpec]) -> dict[str, object]:
        """``{'count': n, 't_min':..., 't_max':..., 'x': {'min','max','sum','avg','n'}, ...}``;
        min/max/avg are None where no value was seen."""
        out: dict[str, object] = {"count": self.count, "t_min": self.t_min, "t_max": self.t_max}
        for s in specs:
            mn, mx, sm, n = self.attrs[s.name]
            out[s.name] = {
                "min": (mn if s.is_float else int(mn)) if n else None,
                "max": (mx if s.is_float else int(mx)) if n else None,
                "sum": sm if s.is_float else int(sm),
                "avg": (sm / n) if n else None,
                "n": n,
            }
        return out


# ----------------------------------------------------------------------------- the tree
class TABTree:
    """In-memory TAB+-tree over leaf entries (see the module docstring).

    ``levels[0]`` are the leaf entries, ``levels[-1]`` the root level (one node).
    """

    def __init__(self, specs: list[AggSpec], fanout: int, leaf_capacity: int) -> None:
        if fanout < 2:
            raise ValueError("fanout must be >= 2")
        self.specs = list(specs)
        self.fanout = fanout
        self.leaf_capacity = leaf_capacity
        self.levels: list[NodeLevel] = [NodeLevel(node_dtypes(self.specs, leaf=True))]

    # ------------------------------------------------------------------ shape
    @property
    def leaves(self) -> NodeLevel:
        return self.levels[0]

    @property
    def n_leaves(self) -> int:
        return len(self.levels[0])

    @property
    def height(self) -> int:
        """Number of levels including the leaf level (0 for an empty tree)."""
        return 0 if self.n_leaves == 0 else len(self.levels)

    @property
    def n_events(self) -> int:
        lv = self.levels[-1]
        return int(lv.col("count").sum()) if len(lv) else 0

    @property
    def t_range(self) -> tuple[int, int] | None:
        if self.n_leaves == 0:
            return None
        lv = self.leaves
        return int(lv.col("t_min")[0]), int(lv.col("t_max")[-1])

    def copy(self) -> TABTree:
        out = TABTree(self.specs, self.fanout, self.leaf_capacity)
        out.levels = [lv.copy() for lv in self.levels]
        return out

    # ------------------------------------------------------------------ updates
    def replace_leaves_from(self, start: int, leaves: dict[str, np.ndarray]) -> list[int]:
        """Replace leaf entries ``[start:]`` by ``leaves`` and recompute the nodes above them.

        Returns, per level, the index of the first node that changed (for persistence).
        """
        if start > self.n_leaves:
            raise ValueError(f"cannot write leaves at {start}: tree has {self.n_leaves}")
        self.levels[0].set_from(start, leaves)
        first = [start]
        k = 0
        while len(self.levels[k]) > 1:
            child = self.levels[k]
            if k + 1 == len(self.levels):
                self.levels.append(NodeLevel(node_dtypes(self.specs, leaf=False)))
            parent = self.levels[k + 1]
            p = min(first[-1] // self.fanout, len(parent))
            lo = p * self.fanout
            starts = np.arange(lo, len(child), self.fanout, dtype=np.int64)
            rows = combine_rows(child, starts, len(child), self.specs)
            parent.set_from(p, rows)
            first.append(p)
            k += 1
        # drop levels above a single-node level (the tree got shorter)
        del self.levels[k + 1 :]
        return first

    def truncate_leaves(self, n: int) -> list[int]:
        """Drop every leaf from ``n`` on (and the nodes above that only covered them)."""
        empty = {k: v[:0] for k, v in self.levels[0].as_dict().items()}
        if n == 0:
            self.levels = [NodeLevel(node_dtypes(self.specs, leaf=True))]
            return [0]
        return self.replace_leaves_from(n, empty)

    # ------------------------------------------------------------------ lookups
    def leaf_range_for_time(self, t0: int | None, t1: int | None) -> tuple[int, int]:
        """Leaves ``[i, j)`` whose events may lie in ``[t0, t1)`` (None = unbounded)."""
        lv = self.leaves
        i = 0 if t0 is None else int(np.searchsorted(lv.col("t_max"), t0, side="left"))
        j = lv.n if t1 is None else int(np.searchsorted(lv.col("t_min"), t1, side="left"))
        return i, max(i, j)

    def leaf_ranges_for_times(self, t0: np.ndarray, t1: np.ndarray
                              ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`leaf_range_for_time` of many ``[t0, t1)`` at once (int64 arrays; the int64
        minimum / maximum stand for unbounded)."""
        lv = self.leaves
        i = np.searchsorted(lv.col("t_max"), t0, side="left")
        return i, np.maximum(i, np.searchsorted(lv.col("t_min"), t1, side="left"))

    def leaf_range_for_seq(self, s0: int, s1: int) -> tuple[int, int]:
        """Leaves ``[i, j)`` holding events with seq in ``[s0, s1)``."""
        sm = self.leaves.col("seq_min")
        if len(sm) == 0 or s1 <= s0:
            return 0, 0
        i = max(0, int(np.searchsorted(sm, s0, side="right")) - 1)
        j = int(np.searchsorted(sm, s1, side="left"))
        return i, max(i, j)

    def leaf_of_seq(self, s: int) -> int:
        return int(np.searchsorted(self.leaves.col("seq_min"), s, side="right")) - 1

    # ------------------------------------------------------------------ aggregation
    def aggregate_leaves(self, i: int, j: int, acc: Partial | None = None,
                         specs: list[AggSpec] | None = None) -> tuple[Partial, int]:
        """Aggregate leaves ``[i, j)`` from the highest covering nodes.

        Returns ``(partial, nodes_touched)``. Standard decomposition of a range into O(h) runs of
        at most D nodes per level: O(h * D).
        """
        specs = self.specs if specs is None else specs
        acc = acc or Partial.empty(specs)
        ranges = self.cover(i, j)
        acc.merge_ranges(self.levels, ranges, specs)
        return acc, sum(hi - lo for _, lo, hi in ranges)

    def cover(self, i: int, j: int) -> list[tuple[int, int, int]]:
        """The nodes covering leaves ``[i, j)`` exactly, as ``(level, lo, hi)`` runs: at most
        two runs of fewer than D nodes per level, O(h) runs in all."""
        ranges: list[tuple[int, int, int]] = []
        k, lo, hi = 0, i, j
        d = self.fanout
        top = len(self.levels) - 1
        while lo < hi:
            if k == top:
                ranges.append((k, lo, hi))
                break
            left_end = min(hi, -(-lo // d) * d)
            if lo < left_end:
                ranges.append((k, lo, left_end))
            if left_end >= hi:
                break
            right_start = max(left_end, (hi // d) * d)
            if right_start < hi:
                ranges.append((k, right_start, hi))
            lo, hi = left_end // d, right_start // d
            k += 1
        return ranges

    def histogram(self, level: int) -> dict[str, np.ndarray]:
        """Level ``level`` (0 = leaf entries) as columns: a temporal histogram of the stream."""
        if not 0 <= level < len(self.levels):
            raise ValueError(f"level {level} does not exist (height {self.height})")
        return self.levels[level].as_dict()

    def level_for_buckets(self, max_buckets: int) -> int:
        """The lowest level with at most ``max_buckets`` nodes."""
        for k, lv in enumerate(self.levels):
            if len(lv) <= max_buckets:
                return k
        return len(self.levels) - 1

    # ------------------------------------------------------------------ invariants
    def check(self) -> list[str]:
        """Every structural invariant; returns the problems found (empty list = healthy).

        Checks: leaf order (``t_min <= t_max <= next t_min``), seq contiguity, counts within
        ``1..B``, every inner node equal to the aggregate of its children (sums within 1e-9
        relative), level sizes ``ceil(n/D)`` up to a single root.
        """
        problems: list[str] = []
        lv = self.leaves
        if lv.n == 0:
            if len(self.levels) != 1:
                problems.append("empty tree has inner levels")
            return problems
        tmin, tmax, smin, cnt = (lv.col(c) for c in BASE_COLUMNS)
        bad = np.nonzero(tmin > tmax)[0]
        if len(bad):
            problems.append(f"leaf {bad[0]}: t_min {tmin[bad[0]]} > t_max {tmax[bad[0]]}")
        bad = np.nonzero(tmax[:-1] > tmin[1:])[0]
        if len(bad):
            problems.append(f"leaves {bad[0]}/{bad[0] + 1} out of time order")
        bad = np.nonzero(smin[1:] != smin[:-1] + cnt[:-1])[0]
        if len(bad):
            problems.append(f"seq gap or overlap between leaves {bad[0]} and {bad[0] + 1}")
        if smin[0] != 0:
            problems.append(f"first leaf starts at seq {smin[0]}, not 0")
        bad = np.nonzero((cnt < 1) | (cnt > self.leaf_capacity))[0]
        if len(bad):
            problems.append(f"leaf {bad[0]} holds {cnt[bad[0]]} events (capacity {self.leaf_capacity})")
        for k in range(len(self.levels) - 1):
            child, parent = self.levels[k], self.levels[k + 1]
            expect_n = -(-child.n // self.fanout)
            if parent.n != expect_n:
                problems.append(f"level {k + 1} has {parent.n} nodes, expected {expect_n}")
                continue
            starts = np.arange(0, child.n, self.fanout, dtype=np.int64)
            want = combine_rows(child, starts, child.n, self.specs)
            for name, arr in want.items():
                got = parent.col(name)
                if name.endswith(".sum") and arr.dtype == np.float64:
                    ok = np.isclose(got, arr, rtol=1e-9, atol=1e-9) | (got == arr)
                else:
                    ok = got == arr
                if not ok.all():
                    b = int(np.nonzero(~ok)[0][0])
                    problems.append(f"level {k + 1} node {b}: {name} = {got[b]!r}, "
                                    f"children say {arr[b]!r}")
        if len(self.levels[-1]) != 1:
            problems.append(f"top level has {len(self.levels[-1])} nodes, expected 1")
        return problems

    def assert_ok(self) -> None:
        problems = self.check()
        if problems:
            raise CorruptionError("TAB+-tree invariant violated: " + "; ".join(problems[:5]))
