"""GRETA vs a direct quadratic dynamic program on streams too long for trend enumeration.

For ``A+`` with one comparison edge predicate and for ``SEQ(A+, B)`` the aggregates per window
follow from ``count(e) = 1 + sum over compatible earlier events`` (paper Thm. 4.3/9.1), computed
here naively with Python integers in O(n^2) per window. Streams have hundreds of events, many
distinct keys per partition (large Fenwick trees, index rebuilds and reuse across sub-chunks),
counts far beyond 2**40 (exactness beyond 2**64 is tested in test_greta_vectors), and random
batch splits.
"""

from __future__ import annotations

import bisect
import operator
import random

import pyarrow as pa
import pytest

from replaydb.planner.lang.greta import bind, parse

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
       "=": operator.eq}


def dp_reference(ts: list[int], types: list[str], xs: list[int], ks: list[int], op: str,
                 within: int, slide: int, with_b: bool) -> dict[tuple[int, int], tuple]:
    """(window_start, k) -> (COUNT(*), COUNT(A), SUM(A.x), MIN(A.x), MAX(A.x)); ``ts``
    ascending."""
    cmp = OPS[op]
    lo_w = (min(ts) - within) // slide + 1
    hi_w = max(ts) // slide
    out = {}
    for w in range(lo_w, hi_w + 1):
        ws, we = w * slide, w * slide + within
        inside = range(bisect.bisect_left(ts, ws), bisect.bisect_left(ts, we))
        for k in sorted(set(ks)):
            idx = [i for i in inside if ks[i] == k]
            cnt, ce, sm, mn, mx = {}, {}, {}, {}, {}
            total = [0, 0, 0, None, None]
            for e in idx:
                if types[e] == "A":
                    c = 1
                    e_ce = 0
                    e_sm = 0
                    e_mn, e_mx = xs[e], xs[e]
                    for p in idx:
                        if ts[p] < ts[e] and types[p] == "A" and cmp(xs[p], xs[e]) and cnt[p]:
                            c += cnt[p]
                            e_ce += ce[p]
                            e_sm += sm[p]
                            e_mn, e_mx = min(e_mn, mn[p]), max(e_mx, mx[p])
                    cnt[e], ce[e], sm[e] = c, e_ce + c, e_sm + xs[e] * c
                    mn[e], mx[e] = e_mn, e_mx
                    ends = [] if with_b else [e]
                else:
                    if not with_b:
                        continue
                    c = e_ce = e_sm = 0
                    e_mn = e_mx = None
                    for p in idx:
                        if ts[p] < ts[e] and types[p] == "A" and cnt[p]:
                            c += cnt[p]
                            e_ce += ce[p]
                            e_sm += sm[p]
                            e_mn = mn[p] if e_mn is None else min(e_mn, mn[p])
                            e_mx = mx[p] if e_mx is None else max(e_mx, mx[p])
                    if not c:
                        continue
                    cnt[e], ce[e], sm[e], mn[e], mx[e] = c, e_ce, e_sm, e_mn, e_mx
                    ends = [e]
                for q in ends:
                    total[0] += cnt[q]
                    total[1] += ce[q]
                    total[2] += sm[q]
                    total[3] = mn[q] if total[3] is None else min(total[3], mn[q])
                    total[4] = mx[q] if total[4] is None else max(total[4], mx[q])
            if total[0]:
                out[(ws, k)] = tuple(total)
    return out


def _case(ts: list[int], types: list[str], xs: list[int], ks: list[int], op: str,
          within: int, slide: int, with_b: bool) -> tuple[str, pa.Table, dict]:
    """The query, the table and :func:`dp_reference`'s rows of one drawn stream."""
    pat = "SEQ(A+, B)" if with_b else "A+"
    text = (f"RETURN k, COUNT(*), COUNT(A), SUM(A.x), MIN(A.x), MAX(A.x) PATTERN {pat} "
            f"WHERE [k] AND A.x {op} NEXT(A).x GROUP-BY k WITHIN {within} SLIDE {slide}")
    table = pa.table({"t": pa.array(ts, pa.int64()),
                      "seq": pa.array(range(len(ts)), pa.int64()),
                      "type": types, "x": pa.array(xs, pa.int64()),
                      "k": pa.array(ks, pa.int64())})
    return text, table, dp_reference(ts, types, xs, ks, op, within, slide, with_b)


@pytest.mark.parametrize("case", range(14))
def test_long_streams_against_quadratic_reference(case: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(100 + case)
    moving = case >= 10  # partitions come and go; dead ones are forgotten (compaction)
    if moving:
        from replaydb.operators.greta.runtime import GraphState

        monkeypatch.setattr(GraphState, "COMPACT_MIN_PARTITIONS", 2)
    op = ["<", "<=", ">", ">=", "="][case % 5]
    with_b = case % 2 == 1
    n = 260
    ts, t = [], 0
    for _ in range(n):
        t += rng.choice([0, 1, 1, 2])
        ts.append(t)
    types = [("B" if rng.random() < 0.15 else "A") if with_b else "A" for _ in range(n)]
    # a random walk drifting the way the predicate goes: long trends, counts beyond 2**64
    step = {"<": (-1, 3), "<=": (-1, 2), ">": (-3, 1), ">=": (-2, 1), "=": (-1, 1)}[op]
    xs, x = [], 0
    for _ in range(n):
        x += rng.randint(*step)
        xs.append(x)
    ks = [i // 40 + rng.randint(0, 1) for i in range(n)] if moving else \
        [rng.randint(0, 1) for _ in range(n)]
    within, slide = rng.choice([(150, 50), (180, 60), (200, 200), (240, 80)])
    text, table, expected = _case(ts, types, xs, ks, op, within, slide, with_b)
    opr = bind(parse(text), table.schema, None, exact_type="string")
    got = []
    a = 0
    while a < n:
        b = min(n, a + rng.randint(1, 60))
        opr.push(table.slice(a, b - a))
        opr._check()
        got.extend(opr.results().to_pylist())
        a = b
    opr.flush()
    got.extend(opr.results().to_pylist())
    res = {(r["window_start"], r["k"]): (int(r["COUNT(*)"]), int(r["COUNT(A)"]),
                                         int(r["SUM(A.x)"]), r["MIN(A.x)"], r["MAX(A.x)"])
           for r in got}
    assert res == expected
    if op != "=":
        assert max(v[0] for v in expected.values()) > (2**20 if moving else 2**40)


def _pushed(text: str, table: pa.Table, sizes: list[int]) -> dict[tuple[int, int], tuple]:
    """The operator's rows for ``table`` pushed in batches of the given sizes, as
    :func:`dp_reference` keys them."""
    opr = bind(parse(text), table.schema, None, exact_type="string")
    got, a = [], 0
    for size in sizes:
        opr.push(table.slice(a, size))
        got.extend(opr.results().to_pylist())
        a += size
    opr.flush()
    opr._check()
    got.extend(opr.results().to_pylist())
    return {(r["window_start"], r["k"]): (int(r["COUNT(*)"]), int(r["COUNT(A)"]),
                                         int(r["SUM(A.x)"]), r["MIN(A.x)"], r["MAX(A.x)"])
            for r in got}


@pytest.mark.parametrize("case", range(4))
def test_thousands_of_windows_prepared_together(case: int) -> None:
    """A stream of 20,000 events over thousands of short (hopping) windows, with long gaps
    between bursts: pushed at once, the windows are prepared in groups of several thousand
    events (slots reused many times inside one group, untouched windows passed over);
    pushed in small batches, about one window at a time. Both equal the reference."""
    rng = random.Random(500 + case)
    op = ["<", ">", "<=", ">="][case]
    with_b = case % 2 == 0
    n = 20_000
    ts, t = [], 0
    for _ in range(n):
        t += rng.choice([0, 1, 1, 2]) if rng.random() > 0.002 else rng.randint(50, 400)
        ts.append(t)
    types = [("B" if rng.random() < 0.2 else "A") if with_b else "A" for _ in range(n)]
    xs = [rng.randint(0, 30) for _ in range(n)]
    ks = [rng.randint(0, 2) for _ in range(n)]
    within, slide = [(12, 4), (10, 10), (15, 5), (9, 3)][case]
    text, table, expected = _case(ts, types, xs, ks, op, within, slide, with_b)
    assert len(expected) > 1000
    assert _pushed(text, table, [n]) == expected
    small = []
    while sum(small) < n:
        small.append(min(n - sum(small), rng.randint(1, 30)))
    assert _pushed(text, table, small) == expected
