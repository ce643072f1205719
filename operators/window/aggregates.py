"""Aggregate functions of windowed aggregation as mergeable partial aggregates.

A *partial aggregate* summarizes a set of events (one slice of the stream, one node of the slide
tree, one window) so that two partials of disjoint sets combine into the partial of their union.
Partials are kept as a struct of arrays, :data:`Partials` (component name -> NumPy array, all of one
length), so that thousands of slices are reduced, scanned and combined with single NumPy calls.

Components (one *slot* per distinct aggregate argument expression ``i``):

=========  ============  =====================================================================
name       merge         meaning
=========  ============  =====================================================================
``n``      add           number of events (``COUNT(*)``); always present
``nn{i}``  add           number of non-null values of argument ``i``
``sum{i}`` add           sum of the non-null values (int64 for integer columns, else float64)
``min{i}`` min           minimum non-null value (identity: the dtype's largest value)
``max{i}`` max           maximum non-null value
``fk{i}``  first         ``seq`` of the first non-null value; ``fv{i}`` holds that value
``lk{i}``  last          ``seq`` of the last non-null value; ``lv{i}`` holds that value
``s1{i}``  add           sum of ``x - c`` (``c`` a per-slot shift, see variance below)
``s2{i}``  add           sum of ``(x - c)**2``
``tmin``   min           smallest event time (count windows: the window's start stamp)
``tmax``   max           largest event time (count windows: the window's end stamp)
=========  ============  =====================================================================

Every merge is associative **and commutative**: FIRST and LAST carry the event's ``seq`` (the
stream's total order) so that "the earlier of two" does not depend on operand order. This is what
lets the slide tree answer a window from its root in O(1) even when its ring buffer wraps around.

Aggregate functions and their results (``nn`` = non-null count of the argument):

* ``COUNT(*)`` -> ``n``; ``COUNT(x)`` -> ``nn`` (int64, 0 for an empty window).
* ``SUM(x)``, ``MIN(x)``, ``MAX(x)``, ``FIRST(x)``, ``LAST(x)`` -> NULL when ``nn = 0``.
  FIRST/LAST are the values of the first/last event in ``(t, seq)`` order whose value is not null
  (nulls are skipped, as in Flink's FIRST_VALUE/LAST_VALUE).
* ``AVG(x)`` -> ``sum / nn`` (float64), NULL when ``nn = 0``.
* ``VAR_POP``, ``VAR_SAMP``, ``STDDEV_POP``, ``STDDEV_SAMP`` -> from ``nn``, ``s1``, ``s2`` with
  ``var_pop = (s2 - s1**2 / nn) / nn`` (``VAR_SAMP`` divides by ``nn - 1`` and is NULL for
  ``nn < 2``). The shift ``c`` (the first non-null value the operator saw for that slot) keeps the
  textbook formula numerically sound for data far from zero; results are clamped at 0.

Nulls: Arrow nulls and floating-point NaN are both null (as everywhere in replaydb) and are ignored
by every aggregate except ``COUNT(*)``.

Complexity: reducing ``N`` events into ``S`` slices is O(N) NumPy work per component (``reduceat``);
scans and element-wise merges are O(length) per component.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from replaydb.errors import OperatorError
from replaydb.operators.expr import Expr, Star

Partials = dict[str, np.ndarray]
"""Struct of arrays: component name -> array; all arrays have the same length."""

INT_MAX = np.iinfo(np.int64).max
INT_MIN = np.iinfo(np.int64).min

AGG_FUNCS: dict[str, str] = {
    "COUNT": "COUNT",
    "SUM": "SUM",
    "AVG": "AVG",
    "MEAN": "AVG",
    "MIN": "MIN",
    "MAX": "MAX",
    "FIRST": "FIRST",
    "FIRST_VALUE": "FIRST",
    "LAST": "LAST",
    "LAST_VALUE": "LAST",
    "VAR_POP": "VAR_POP",
    "VAR_SAMP": "VAR_SAMP",
    "VARIANCE": "VAR_SAMP",
    "STDDEV_POP": "STDDEV_POP",
    "STDDEV_SAMP": "STDDEV_SAMP",
    "STDDEV": "STDDEV_SAMP",
}
"""Accepted aggregate names (upper case) -> canonical name."""

# Which components each canonical aggregate needs (besides ``n``), by component prefix.
_NEEDS: dict[str, tuple[str, ...]] = {
    "COUNT": ("nn",),
    "SUM": ("nn", "sum"),
    "AVG": ("nn", "sum"),
    "MIN": ("nn", "min"),
    "MAX": ("nn", "max"),
    "FIRST": ("nn", "fk", "fv"),
    "LAST": ("nn", "lk", "lv"),
    "VAR_POP": ("nn", "s1", "s2"),
    "VAR_SAMP": ("nn", "s1", "s2"),
    "STDDEV_POP": ("nn", "s1", "s2"),
    "STDDEV_SAMP": ("nn", "s1", "s2"),
}

INDEXABLE_FUNCS = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX"})
"""Aggregates the TAB+-tree's per-node count/sum/min/max can answer (the index path)."""


@dataclass(frozen=True)
class AggSpec:
    """One aggregate of a query: ``func(arg) AS alias``.

    ``func`` is a canonical name (a value of :data:`AGG_FUNCS`); ``arg`` is ``None`` (or a
    :class:`~replaydb.operators.expr.Star`) for ``COUNT(*)``, else an expression over the event's
    attributes; ``alias`` names the result column.
    """

    func: str
    arg: Expr | None
    alias: str

    def __post_init__(self) -> None:
        canon = AGG_FUNCS.get(self.func.upper())
        if canon is None:
            raise OperatorError(
                f"unknown aggregate {self.func!r}; known: {', '.join(sorted(set(AGG_FUNCS.values())))}"
            )
        object.__setattr__(self, "func", canon)
        if isinstance(self.arg, Star):
            object.__setattr__(self, "arg", None)
        if self.arg is None and canon != "COUNT":
            raise OperatorError(f"{canon} needs an argument (only COUNT accepts '*')")

    @property
    def is_count_star(self) -> bool:
        return self.arg is None


@dataclass(frozen=True)
class Component:
    """One array of a partial aggregate: its merge kind and dtype.

    ``kind`` is ``add``, ``min``, ``max``, ``first`` (keep the smaller key), ``last`` (keep the
    larger key), or ``val`` (a value that follows the key component ``link``).
    """

    name: str
    kind: str
    dtype: str
    link: str | None = None

    @property
    def identity(self) -> int | float:
        dt = np.dtype(self.dtype)
        if self.kind == "add" or self.kind == "val":
            return 0
        if self.kind in ("min", "first"):
            return np.inf if dt.kind == "f" else INT_MAX
        if self.kind in ("max", "last"):
            return -np.inf if dt.kind == "f" else INT_MIN
        raise AssertionError(self.kind)  # pragma: no cover


@dataclass(frozen=True)
class Layout:
    """The components of one query's partial aggregates and how aggregates read them.

    Built by :func:`make_layout`; ``slots`` lists the distinct argument expressions and
    ``slot_dtypes`` their value dtype (``int64`` or ``float64``).
    """

    components: tuple[Component, ...]
    aggs: tuple[AggSpec, ...]
    slots: tuple[Expr, ...]
    slot_dtypes: tuple[str, ...]
    agg_slot: tuple[int, ...]  # slot index per aggregate (-1 for COUNT(*))
    with_time: bool = False
    _by_name: dict[str, Component] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({c.name: c for c in self.components})

    def component(self, name: str) -> Component:
        return self._by_name[name]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.components)

    # ------------------------------------------------------------------ construction
    def identity(self, n: int) -> Partials:
        """``n`` empty partials."""
        return {c.name: np.full(n, c.identity, dtype=c.dtype) for c in self.components}

    # ------------------------------------------------------------------ merging
    def combine(self, a: Partials, b: Partials) -> Partials:
        """Element-wise merge of two partial arrays (NumPy broadcasting: a length-1 side broadcasts)."""
        out: Partials = {}
        for c in self.components:
            x, y = a[c.name], b[c.name]
            if c.kind == "add":
                out[c.name] = x + y
            elif c.kind == "min":
                out[c.name] = np.minimum(x, y)
            elif c.kind == "max":
                out[c.name] = np.maximum(x, y)
            elif c.kind == "first":
                out[c.name] = np.minimum(x, y)
            elif c.kind == "last":
                out[c.name] = np.maximum(x, y)
        for c in self.components:
            if c.kind == "val":
                key = self._by_name[c.link]  # type: ignore[index]
                ka, kb = a[key.name], b[key.name]
                take_a = ka <= kb if key.kind == "first" else ka >= kb
                out[c.name] = np.where(take_a, a[c.name], b[c.name])
        return out

    def scan(self, p: Partials, *, reverse: bool = False, axis: int = -1) -> Partials:
        """Inclusive prefix merge along ``axis`` (suffix merge with ``reverse=True``).

        ``out[j] = p[0] + ... + p[j]`` (``+`` being the merge); reverse: ``p[j] + ... + p[-1]``.
        """
        if reverse:
            flipped = {k: np.flip(v, axis=axis) for k, v in p.items()}
            res = self.scan(flipped, axis=axis)
            return {k: np.flip(v, axis=axis) for k, v in res.items()}
        out: Partials = {}
        args: dict[str, np.ndarray] = {}
        for c in self.components:
            x = p[c.name]
            if c.kind == "add":
                out[c.name] = np.add.accumulate(x, axis=axis)
            elif c.kind in ("min", "first"):
                out[c.name] = np.minimum.accumulate(x, axis=axis)
            elif c.kind in ("max", "last"):
                out[c.name] = np.maximum.accumulate(x, axis=axis)
            if c.kind in ("first", "last"):
                # Index of the element holding the running extreme: the last position at which
                # the element equals the running extreme (keys are unique, ties only between
                # empty elements whose values do not matter).
                n = x.shape[axis]
                shape = [1] * x.ndim
                shape[axis] = n
                pos = np.arange(n).reshape(shape)
                holder = np.where(x == out[c.name], pos, 0)
                args[c.name] = np.maximum.accumulate(holder, axis=axis)
        for c in self.components:
            if c.kind == "val":
                out[c.name] = np.take_along_axis(p[c.name], args[c.link], axis=axis)  # type: ignore[index]
        return out

    def total(self, p: Partials) -> Partials:
        """Merge of all elements (a length-1 partial)."""
        n = len(p["n"])
        if n == 0:
            return self.identity(1)
        return {k: v[-1:] for k, v in self.scan(p).items()} if n > 1 else {
            k: v.copy() for k, v in p.items()
        }


def take(p: Partials, idx: np.ndarray | slice) -> Partials:
    """Select elements (fancy index or slice) of every component."""
    return {k: v[idx] for k, v in p.items()}


def concat(parts: list[Partials]) -> Partials:
    """Concatenate partial arrays (all with the same components)."""
    parts = [q for q in parts if len(q["n"])] or parts[:1]
    if len(parts) == 1:
        return parts[0]
    return {k: np.concatenate([q[k] for q in parts]) for k in parts[0]}


def length(p: Partials) -> int:
    return int(len(p["n"]))


def make_layout(aggs: tuple[AggSpec, ...], slot_dtypes: dict[Expr, str] | None = None,
                *, with_time: bool = False) -> Layout:
    """The components needed by ``aggs``.

    ``slot_dtypes`` maps an argument expression to ``"int64"`` (integer, bool, temporal plain
    columns: sums, minima and maxima stay exact) or ``"float64"``; missing entries are float64.
    ``with_time`` adds ``tmin``/``tmax`` (count windows are stamped with their events' times).
    """
    slot_dtypes = slot_dtypes or {}
    slots: list[Expr] = []
    agg_slot: list[int] = []
    needs: dict[int, set[str]] = {}
    for a in aggs:
        if a.arg is None:
            agg_slot.append(-1)
            continue
        if a.arg not in slots:
            slots.append(a.arg)
        i = slots.index(a.arg)
        agg_slot.append(i)
        needs.setdefault(i, set()).update(_NEEDS[a.func])
    dtypes = tuple(slot_dtypes.get(s, "float64") for s in slots)
    comps: list[Component] = [Component("n", "add", "int64")]
    order = ("nn", "sum", "min", "max", "fk", "fv", "lk", "lv", "s1", "s2")
    for i, s_dt in enumerate(dtypes):
        for pre in order:
            if pre not in needs.get(i, ()):
                continue
            name = f"{pre}{i}"
            if pre == "nn":
                comps.append(Component(name, "add", "int64"))
            elif pre == "sum":
                comps.append(Component(name, "add", s_dt))
            elif pre == "min":
                comps.append(Component(name, "min", s_dt))
            elif pre == "max":
                comps.append(Component(name, "max", s_dt))
            elif pre == "fk":
                comps.append(Component(name, "first", "int64"))
            elif pre == "lk":
                comps.append(Component(name, "last", "int64"))
            elif pre == "fv":
                comps.append(Component(name, "val", s_dt, link=f"fk{i}"))
            elif pre == "lv":
                comps.append(Component(name, "val", s_dt, link=f"lk{i}"))
            else:  # s1, s2
                comps.append(Component(name, "add", "float64"))
    if with_time:
        comps.append(Component("tmin", "min", "int64"))
        comps.append(Component("tmax", "max", "int64"))
    return Layout(tuple(comps), tuple(aggs), tuple(slots), dtypes, tuple(agg_slot), with_time)


def reduce_segments(
    layout: Layout,
    starts: np.ndarray,
    n_rows: int,
    values: list[tuple[np.ndarray, np.ndarray | None]],
    seq: np.ndarray | None,
    t: np.ndarray | None = None,
    shifts: list[float] | None = None,
) -> Partials:
    """Reduce ``n_rows`` events into one partial per segment.

    ``starts`` are the (strictly increasing, first = 0) row offsets where segments begin;
    ``values[i]`` is ``(array, valid mask or None)`` for slot ``i``; ``seq`` orders FIRST/LAST
    (None when the layout has neither);
    ``t`` feeds ``tmin``/``tmax``; ``shifts[i]`` is the variance shift of slot ``i``.
    O(n_rows) per component.
    """
    ends = np.append(starts[1:], n_rows)
    out: Partials = {"n": (ends - starts).astype(np.int64)}
    names = set(layout.names)
    for i, (v, valid) in enumerate(values):
        dt = np.dtype(layout.slot_dtypes[i])
        if f"nn{i}" in names:
            out[f"nn{i}"] = out["n"].copy() if valid is None else \
                np.add.reduceat(valid.astype(np.int64), starts)
        if f"sum{i}" in names:
            vv = v if valid is None else np.where(valid, v, 0)
            out[f"sum{i}"] = np.add.reduceat(vv.astype(dt, copy=False), starts)
        for pre, fn in (("min", np.minimum), ("max", np.maximum)):
            if f"{pre}{i}" in names:
                ident = layout.component(f"{pre}{i}").identity
                vv = v if valid is None else np.where(valid, v, ident)
                out[f"{pre}{i}"] = fn.reduceat(vv.astype(dt, copy=False), starts)
        if f"fk{i}" in names:
            pos = np.arange(n_rows) if valid is None else np.where(valid, np.arange(n_rows), n_rows)
            first = np.minimum.reduceat(pos, starts)
            ok = first < n_rows
            safe = np.where(ok, first, 0)
            out[f"fk{i}"] = np.where(ok, seq[safe], INT_MAX)
            out[f"fv{i}"] = np.where(ok, v[safe], 0).astype(dt)
        if f"lk{i}" in names:
            pos = np.arange(n_rows) if valid is None else np.where(valid, np.arange(n_rows), -1)
            last = np.maximum.reduceat(pos, starts)
            ok = last >= 0
            safe = np.where(ok, last, 0)
            out[f"lk{i}"] = np.where(ok, seq[safe], INT_MIN)
            out[f"lv{i}"] = np.where(ok, v[safe], 0).astype(dt)
        if f"s1{i}" in names:
            c = shifts[i] if shifts is not None else 0.0
            d = v.astype(np.float64) - c
            if valid is not None:
                d = np.where(valid, d, 0.0)
            out[f"s1{i}"] = np.add.reduceat(d, starts)
            out[f"s2{i}"] = np.add.reduceat(d * d, starts)
    if layout.with_time:
        assert t is not None
        out["tmin"] = t[starts].astype(np.int64)
        out["tmax"] = t[ends - 1].astype(np.int64)
    return {c.name: out[c.name].astype(c.dtype, copy=False) for c in layout.components}


def finalize(layout: Layout, p: Partials, shifts: list[float] | None = None) -> list[np.ndarray]:
    """Result arrays, one per aggregate (masked arrays mark NULL results).

    Returns NumPy masked arrays so the caller can build Arrow arrays with nulls.
    """
    out: list[np.ndarray] = []
    for a, i in zip(layout.aggs, layout.agg_slot):
        if a.func == "COUNT":
            out.append(np.ma.masked_array(p["n"] if i < 0 else p[f"nn{i}"]))
            continue
        nn = p[f"nn{i}"]
        empty = nn == 0
        if a.func == "SUM":
            res = np.ma.masked_array(p[f"sum{i}"], mask=empty)
        elif a.func == "AVG":
            with np.errstate(divide="ignore", invalid="ignore"):
                res = np.ma.masked_array(p[f"sum{i}"] / np.where(empty, 1, nn), mask=empty)
        elif a.func == "MIN":
            res = np.ma.masked_array(p[f"min{i}"], mask=empty)
        elif a.func == "MAX":
            res = np.ma.masked_array(p[f"max{i}"], mask=empty)
        elif a.func == "FIRST":
            res = np.ma.masked_array(p[f"fv{i}"], mask=empty)
        elif a.func == "LAST":
            res = np.ma.masked_array(p[f"lv{i}"], mask=empty)
        else:
            s1, s2 = p[f"s1{i}"], p[f"s2{i}"]
            nnf = np.where(empty, 1, nn).astype(np.float64)
            m2 = np.maximum(s2 - s1 * s1 / nnf, 0.0)
            if a.func in ("VAR_SAMP", "STDDEV_SAMP"):
                bad = nn < 2
                var = m2 / np.where(bad, 1, nn - 1)
            else:
                bad = empty
                var = m2 / nnf
            if a.func.startswith("STDDEV"):
                var = np.sqrt(var)
            res = np.ma.masked_array(var, mask=bad)
        out.append(res)
    return out
