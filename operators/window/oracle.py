"""Brute-force reference for windowed aggregation (small inputs only; used by the tests).

Also the tests' random streams (:func:`make_stream`) and result comparison
(:func:`assert_same_rows`), shared by the operator, SQL and index-path tests.

It enumerates the windows of Defs 2.7/2.8 directly - for every window, select its events with a
mask and aggregate them with plain Python/NumPy - sharing no code with the slice/slide-tree
machinery of the operator. Semantics are those documented in
:mod:`replaydb.operators.window.operator`.

Complexity: O(windows x events) - fine for the few thousand events property tests use.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.operators.base import column_np
from replaydb.operators.expr import (
    Binary,
    Column,
    ColumnsEnv,
    columns,
    compile_expr,
    evaluate_mask,
)
from replaydb.operators.window.aggregates import AggSpec
from replaydb.operators.window.config import WindowConfig


def _arg_values(table: pa.Table, expr: Any) -> list[Any]:
    """Python values of an aggregate argument per row (None for null/NaN)."""
    if isinstance(expr, Column) and expr.name in table.column_names:
        col = table.column(expr.name)
        if pa.types.is_temporal(col.type) or pa.types.is_boolean(col.type):
            col = col.cast(pa.int64())
        vals = col.to_pylist()
    else:
        cols = {c.name: column_np(table, c.name) for c in columns(expr)}
        r = compile_expr(expr)(ColumnsEnv(cols))
        vals = np.broadcast_to(np.asarray(r, dtype=np.float64), (table.num_rows,)).tolist()
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in vals]


def _aggregate(a: AggSpec, vals: list[Any]) -> Any:
    if a.func == "COUNT":
        return len(vals) if a.arg is None else sum(v is not None for v in vals)
    nn = [v for v in vals if v is not None]
    if not nn:
        return None
    if a.func == "SUM":
        return math.fsum(nn) if any(isinstance(v, float) for v in nn) else sum(nn)
    if a.func == "AVG":
        return math.fsum(nn) / len(nn)
    if a.func == "MIN":
        return min(nn)
    if a.func == "MAX":
        return max(nn)
    if a.func == "FIRST":
        return nn[0]
    if a.func == "LAST":
        return nn[-1]
    ddof = 1 if a.func in ("VAR_SAMP", "STDDEV_SAMP") else 0
    if len(nn) <= ddof:
        return None
    var = float(np.var(np.asarray(nn, dtype=np.float64), ddof=ddof))
    return math.sqrt(var) if a.func.startswith("STDDEV") else var


def oracle(data: pa.Table | pa.RecordBatch, cfg: WindowConfig) -> list[dict[str, Any]]:
    """Every result row of ``cfg`` over ``data`` (one table, in ``(t, seq)`` order).

    Rows are dicts keyed like the operator's output columns, sorted by
    ``(window_end, window_start, group key text)``.
    """
    table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    t_input_last = int(table.column("t")[-1].as_py()) if table.num_rows else 0
    if cfg.where is not None and table.num_rows:
        cols = {c.name: column_np(table, c.name) for c in columns(cfg.where)}
        table = table.filter(pa.array(evaluate_mask(cfg.where, cols, table.num_rows)))
    n = table.num_rows
    if n == 0:
        return []
    t = table.column("t").to_numpy().astype(np.int64)
    args = {a.arg: _arg_values(table, a.arg) for a in cfg.aggregates if a.arg is not None}
    keys = list(zip(*[table.column(k).to_pylist() for k in cfg.group_by])) if cfg.group_by \
        else [()] * n
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    size, slide = int(cfg.size), int(cfg.slide)  # type: ignore[arg-type]
    rows: list[dict[str, Any]] = []

    def emit(key: tuple, start: int, end: int, idx: list[int]) -> None:
        row: dict[str, Any] = {"window_start": start, "window_end": end}
        row.update(zip(cfg.group_by, key))
        contiguous = bool(idx) and idx[-1] - idx[0] == len(idx) - 1
        for a in cfg.aggregates:
            if a.arg is None:
                vals: list[Any] = [None] * len(idx)
            elif contiguous:
                vals = args[a.arg][idx[0] : idx[-1] + 1]
            else:
                vals = [args[a.arg][i] for i in idx]
            row[a.alias] = _aggregate(a, vals)
        rows.append(row)

    if cfg.kind == "count":
        for key, idx in groups.items():
            k = 0
            while k * slide + size <= len(idx):
                win = idx[k * slide : k * slide + size]
                emit(key, int(t[win[0]]), int(t[win[-1]]), win)
                k += 1
    else:
        anchor = int(t[0]) if cfg.align == "first" else int(cfg.offset)
        for key, idx in groups.items():
            rel = t[idx] - anchor
            if cfg.empty == "emit":
                k_lo = (int(rel[0]) - size) // slide + 1
                k_hi = (t_input_last - anchor) // slide
                ks = range(k_lo, k_hi + 1)
            else:
                cand: set[int] = set()
                for x in rel.tolist():
                    cand.update(range((x - size) // slide + 1, x // slide + 1))
                ks = sorted(cand)
            for k in ks:
                if cfg.align == "first" and k < 0:
                    continue
                lo = k * slide
                a, b = np.searchsorted(rel, [lo, lo + size], "left")  # rel is sorted
                sel = idx[a:b]
                if sel or cfg.empty == "emit":
                    emit(key, anchor + lo, anchor + lo + size, sel)
    rows.sort(key=lambda r: (r["window_end"], r["window_start"],
                             repr([r[k] for k in cfg.group_by])))
    return rows


# --------------------------------------------------------------------------- test support

X, Y = Column("x"), Column("y")

RICH_AGGS = (
    AggSpec("COUNT", None, "n"),
    AggSpec("COUNT", X, "nx"),
    AggSpec("SUM", X, "sx"),
    AggSpec("AVG", X, "ax"),
    AggSpec("MIN", Y, "my"),
    AggSpec("MAX", X, "mx"),
    AggSpec("FIRST", X, "fx"),
    AggSpec("LAST", Y, "ly"),
    AggSpec("SUM", Y, "sy"),
    AggSpec("VAR_POP", X, "vx"),
    AggSpec("STDDEV_SAMP", Y, "dy"),
    AggSpec("SUM", Binary("+", X, Y), "sxy"),
    AggSpec("COUNT", Column("z"), "nz"),
)
INDEX_AGGS = (
    AggSpec("COUNT", None, "n"),
    AggSpec("SUM", X, "sx"),
    AggSpec("AVG", X, "ax"),
    AggSpec("MIN", X, "mnx"),
    AggSpec("MAX", X, "mx"),
)


def make_stream(rng: np.random.Generator, n: int, *, max_step: int = 4, gap_p: float = 0.03,
                gap: int = 200, null_p: float = 0.1, keys: int = 3, t0: int | None = None
                ) -> pa.Table:
    """A random stream: non-decreasing ``t`` with ties and occasional long gaps, float ``x``
    (with NaN and nulls), int ``y`` (with nulls), string key ``k`` (with nulls)."""
    steps = rng.integers(0, max_step + 1, n)
    steps[rng.random(n) < gap_p] = gap
    start = int(rng.integers(-50, 50)) if t0 is None else t0
    t = start + np.cumsum(steps)
    x = rng.normal(10, 5, n).round(3)
    x[rng.random(n) < null_p / 2] = np.nan
    xmask = rng.random(n) < null_p / 2
    y = rng.integers(-100, 100, n)
    ymask = rng.random(n) < null_p
    kv = np.array(["a", "b", "c", "d", "e"][: max(1, keys)], dtype=object)[rng.integers(0, max(1, keys), n)]
    kmask = rng.random(n) < (0.05 if keys > 1 else 0)
    return pa.table({
        "t": pa.array(t, pa.int64()),
        "seq": pa.array(np.arange(n) + 1000, pa.int64()),
        "x": pa.array(x, pa.float64(), mask=xmask),
        "y": pa.array(y, pa.int64(), mask=ymask),
        "k": pa.array(kv.tolist(), pa.string(), mask=kmask),
        "z": pa.array(np.where(rng.random(n) < null_p, np.nan, 1.5), pa.float64(),
                      mask=rng.random(n) < null_p),
    })


def split_batches(table: pa.Table, rng: np.random.Generator, max_len: int = 20) -> list[pa.Table]:
    out, i = [], 0
    while i < table.num_rows:
        j = i + int(rng.integers(1, max_len + 1))
        out.append(table.slice(i, j - i))
        i = j
    return out


def _key(r: dict[str, Any], group_by: tuple[str, ...]) -> tuple:
    return (r["window_end"], r["window_start"], repr([r[k] for k in group_by]))


def _close(a: Any, b: Any, rel: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9 * max(1.0, abs(a), abs(b)))
    return a == b


def assert_same_rows(actual: list[dict[str, Any]], expected: list[dict[str, Any]],
                     group_by: tuple[str, ...] = (), rel: float = 1e-9,
                     approx: frozenset[str] = frozenset()) -> None:
    """Same rows (order-insensitive by window and key); floats within ``rel``.

    Columns in ``approx`` (variances) get a looser tolerance (1e-6), their formula differs.
    """
    a = sorted(actual, key=lambda r: _key(r, group_by))
    e = sorted(expected, key=lambda r: _key(r, group_by))
    assert len(a) == len(e), f"{len(a)} rows, expected {len(e)}:\n{a[:6]}\n{e[:6]}"
    for ra, re_ in zip(a, e):
        assert set(ra) == set(re_), (ra, re_)
        for col in ra:
            tol = 1e-6 if col in approx else rel
            assert _close(ra[col], re_[col], tol), f"column {col}: {ra} != {re_}"
