"""GRETA on awkward inputs: string keys, nulls, ties, empty windows, gaps, float sums."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from replaydb.operators.greta.oracle import GretaOracle
from replaydb.planner.lang.greta import bind, parse, to_config


def _norm(v: Any) -> Any:
    return int(v) if isinstance(v, Decimal) else v


def compare(text: str, table: pa.Table, batch: int = 3) -> list[dict]:
    exp = GretaOracle(to_config(parse(text), None), table, max_events=60).run()
    op = bind(parse(text), table.schema, None)
    got: list[dict] = []
    for a in range(0, table.num_rows, batch):
        op.push(table.slice(a, batch))
        op._check()
        got.extend(op.results().to_pylist())
    op.flush()
    got.extend(op.results().to_pylist())
    got = [{k: _norm(v) for k, v in r.items()} for r in got]
    key = lambda r: (r["window_start"], repr([r.get(k) for k in sorted(r)]))  # noqa: E731
    exp_s, got_s = sorted(exp, key=key), sorted(got, key=key)
    assert len(exp_s) == len(got_s), (text, exp_s, got_s)
    for e, g in zip(exp_s, got_s):
        for k, v in e.items():
            if isinstance(v, float):
                assert math.isclose(v, g[k], rel_tol=1e-9, abs_tol=1e-12), (text, e, g)
            else:
                assert g[k] == v, (text, e, g)
    return got


def rand_table(n: int, seed: int, nulls: bool = False) -> pa.Table:
    rng = random.Random(seed)
    t, types, name, x, y, g = [], [], [], [], [], []
    cur = 0
    for _ in range(n):
        cur += rng.choice([0, 1, 1, 2])
        t.append(cur)
        types.append(rng.choice(["A", "A", "B", "E", None] if nulls else ["A", "A", "B", "E"]))
        name.append(rng.choice(["ant", "bee", "cat", "dog", None] if nulls else
                               ["ant", "bee", "cat", "dog"]))
        x.append(rng.choice([None, 1, 2, 3, 4]) if nulls else rng.randint(1, 4))
        y.append(rng.choice([0.5, 1.25, -2.0, 3.0]))
        g.append(rng.choice(["north", "south", None] if nulls else ["north", "south"]))
    return pa.table({"t": pa.array(t, pa.int64()), "seq": pa.array(range(n), pa.int64()),
                     "type": pa.array(types, pa.string()), "name": pa.array(name, pa.string()),
                     "x": pa.array(x, pa.int64()), "y": pa.array(y, pa.float64()),
                     "g": pa.array(g, pa.string())})


@pytest.mark.parametrize("seed", range(6))
def test_string_keys_in_edge_predicates(seed: int) -> None:
    t = rand_table(16, seed)
    compare("RETURN COUNT(*), COUNT(A) PATTERN A+ WHERE A.name < NEXT(A).name WITHIN 8 SLIDE 4", t)
    compare("RETURN COUNT(*) PATTERN SEQ(A+, B) WHERE A.name = NEXT(B).name WITHIN 8 SLIDE 3", t)
    compare("RETURN g, COUNT(*), SUM(A.y), MAX(A.y) PATTERN A+ WHERE A.name >= NEXT(A).name "
            "GROUP-BY g WITHIN 10", t)


@pytest.mark.parametrize("seed", range(6))
def test_nulls_in_keys_types_and_groups(seed: int) -> None:
    t = rand_table(16, seed, nulls=True)
    # null x never satisfies a comparison; null types are no event of the pattern; null groups
    # are one group; nulls in edge keys never connect
    compare("RETURN g, COUNT(*) PATTERN A+ WHERE A.x < NEXT(A).x GROUP-BY g WITHIN 8 SLIDE 4", t)
    compare("RETURN COUNT(*), MIN(A.y) PATTERN SEQ(A+, B) WHERE A.x = NEXT(B).x AND [name] "
            "WITHIN 9 SLIDE 3", t)
    compare("RETURN COUNT(*) PATTERN SEQ(A, NOT E, B+) WHERE ABS(A.x - NEXT(B).x) <= 1 "
            "WITHIN 9 SLIDE 3", t)


@pytest.mark.parametrize("seed", range(4))
def test_scanned_edge_predicates_share_the_expression_semantics(seed: int) -> None:
    """Edge predicates that no index answers run the shared expression machine: LEAST and
    GREATEST of a NULL are NULL (so the comparison is false), ``%`` is floor modulo on negative
    floats, like the oracle's NumPy evaluation."""
    t = rand_table(16, seed, nulls=True)
    compare("RETURN COUNT(*) PATTERN A+ WHERE LEAST(A.x, NEXT(A).y) < 2 WITHIN 8 SLIDE 4", t)
    compare("RETURN COUNT(*) PATTERN A+ WHERE GREATEST(NEXT(A).x, A.y) >= 3 WITHIN 8 SLIDE 4",
            t)
    compare("RETURN COUNT(*) PATTERN A+ WHERE (A.y - NEXT(A).y) % 2 < 1 WITHIN 8 SLIDE 4", t)


def test_equal_timestamps_never_follow_each_other() -> None:
    t = pa.table({"t": pa.array([1, 1, 1, 2, 2], pa.int64()),
                  "seq": pa.array(range(5), pa.int64()),
                  "type": ["A", "A", "B", "A", "B"], "x": pa.array([1] * 5, pa.int64())})
    rows = compare("RETURN COUNT(*) PATTERN SEQ(A+, B) WITHIN 10", t, batch=1)
    # trends: (a@1, b@2) x2, (a@1, a@2, b@2)? no: a@2 and b@2 tie -> only A's at 1 before b@2,
    # and a@1 -> a@2 cannot end at b@2. So: {a1,b4}, {a2,b4} = 2, plus b@1 has no predecessor
    assert rows[0]["COUNT(*)"] == 2


def test_gaps_empty_windows_and_hopping_windows() -> None:
    t = pa.table({"t": pa.array([0, 1, 50, 51, 52, 1000], pa.int64()),
                  "seq": pa.array(range(6), pa.int64()),
                  "type": ["A"] * 6, "x": pa.array([1] * 6, pa.int64())})
    compare("RETURN COUNT(*) PATTERN A+ WITHIN 10 SLIDE 5", t, batch=2)
    compare("RETURN COUNT(*) PATTERN A+ WITHIN 2 SLIDE 5", t, batch=1)  # windows with gaps
    rows = compare("RETURN COUNT(*) PATTERN A+ WITHIN 100", t, batch=4)
    assert [(r["window_start"], r["COUNT(*)"]) for r in rows] == [(0, 31), (1000, 1)]


def test_negative_timestamps_and_large_times() -> None:
    base = 10**15
    t = pa.table({"t": pa.array([base - 7, base - 3, base - 3, base + 2], pa.int64()),
                  "seq": pa.array(range(4), pa.int64()), "type": ["A", "B", "A", "B"],
                  "x": pa.array([1, 2, 3, 4], pa.int64())})
    compare("RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A+, B) WITHIN 8 SLIDE 4", t, batch=1)
    neg = pa.table({"t": pa.array([-9, -8, -4, -1], pa.int64()),
                    "seq": pa.array(range(4), pa.int64()), "type": ["A", "B", "A", "B"],
                    "x": pa.array([1, 2, 3, 4], pa.int64())})
    compare("RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A+, B) WITHIN 6 SLIDE 2", neg, batch=1)


def test_float_sums_and_avg_over_float_attributes() -> None:
    t = rand_table(14, 3)
    compare("RETURN COUNT(*), SUM(A.y), AVG(A.y), MIN(A.y), MAX(A.y) PATTERN A+ WITHIN 12", t)


def test_no_events_of_the_pattern() -> None:
    t = pa.table({"t": pa.array([1, 2], pa.int64()), "seq": pa.array([0, 1], pa.int64()),
                  "type": ["X", "Y"]})
    op = bind(parse("RETURN COUNT(*) PATTERN A+ WITHIN 5"), t.schema, None)
    assert op.process(t).num_rows == 0


@pytest.mark.parametrize("L", [1, 2, 3, 4, 5])
def test_vectorized_limb_conversion_equals_the_scalar_one(L: int) -> None:
    """Output conversion of L-limb two's complement numbers: the int64 path (every value of at
    most 60 bits) and the 60-bit-word path (odd and even L) give :func:`limbs_to_int` of every
    row."""
    import numpy as np

    from replaydb.operators.greta import kernel as kn
    from replaydb.operators.greta.limbrows import limb_rows_to_ints, limbs_to_int

    rng = np.random.default_rng(L)
    vals = [0, 1, -1, 5, -5, (1 << 59) - 1, -(1 << 59), 1 << 59, -(1 << 59) - 1,
            (1 << 30) - 1, -(1 << 30), 1 << 61, -(1 << 75)]
    vals += [int(x) for x in rng.integers(-(1 << 62), 1 << 62, 50)]
    vals += [int(rng.integers(0, 1 << 62)) << int(rng.integers(0, 40)) for _ in range(20)]
    vals = [v for v in vals if -(1 << (kn.LIMB * L - 1)) <= v < 1 << (kn.LIMB * L - 1)]
    rows = np.array([[(v >> (kn.LIMB * i)) & kn.MASK for i in range(L)] for v in vals],
                    np.int64).reshape(len(vals), L)
    assert [limbs_to_int(r) for r in rows] == vals
    assert limb_rows_to_ints(rows) == vals
    assert limb_rows_to_ints(rows[:0]) == []
    small = [i for i, v in enumerate(vals) if -(1 << 59) <= v < 1 << 59]
    assert limb_rows_to_ints(rows[small]) == [vals[i] for i in small]


@pytest.mark.parametrize(("l0", "L", "channels"), [(1, 2, 1), (1, 4, 2), (2, 3, 3), (3, 3, 2)])
def test_widened_rows_keep_their_values(l0: int, L: int, channels: int) -> None:
    """Closed windows of fewer limbs, sign-extended to L limbs so that windows of several limb
    counts convert as one batch: every exact channel keeps its value, and the min/max columns
    after the channels are kept as they are."""
    import numpy as np

    from replaydb.operators.greta import kernel as kn
    from replaydb.operators.greta.limbrows import limbs_to_int
    from replaydb.operators.greta.operator import _Closed, _widened

    rng = random.Random(l0 * 10 + L)
    half = 1 << (kn.LIMB * l0 - 1)
    vals = [[rng.randrange(-half, half) for _ in range(channels)] for _ in range(40)]
    vals += [[-1] * channels, [half - 1] * channels, [-half] * channels]
    vi = np.array([[(v >> (kn.LIMB * i)) & kn.MASK for v in row for i in range(l0)]
                   + [int(row[0]) % 97, -int(row[0]) % 89] for row in vals], np.int64)
    closed = _Closed(np.arange(len(vals)), [()] * len(vals), vi, np.zeros((len(vals), 0)),
                     np.arange(len(vals)), l0)
    got = _widened(closed, L, channels)
    assert got.L == L and got.vi.shape == (len(vals), channels * L + 2)
    for row, wide in zip(vals, got.vi):
        assert [limbs_to_int(wide[c * L:(c + 1) * L]) for c in range(channels)] == row
    assert (got.vi[:, channels * L:] == vi[:, channels * l0:]).all()
    assert (_widened(closed, l0, channels).vi == vi).all()


@pytest.mark.parametrize("ty", [pa.decimal128(38, 0), pa.decimal128(19, 0), pa.int64()])
def test_exact_columns_from_int64_equal_arrows_cast(ty: pa.DataType) -> None:
    """Exact aggregates that fit in int64 become their output column as Arrow's cast makes
    it (decimals of scale 0 with room for 19 digits are built from their words)."""
    import numpy as np

    from replaydb.operators.greta.limbrows import exact_of_int64

    vals = np.array([0, 1, -1, 7, -(1 << 63), (1 << 63) - 1, 10**18, -(10**18)], np.int64)
    got = exact_of_int64(vals, ty)
    got.validate(full=True)
    assert got.equals(pa.array(vals).cast(ty))
    # a decimal too narrow for int64 is cast, which checks the range
    with pytest.raises(pa.ArrowInvalid):
        exact_of_int64(vals, pa.decimal128(10, 0))


def _rows(text: str, table: pa.Table, batch: int) -> list[dict]:
    op = bind(parse(text), table.schema, None)
    got: list[dict] = []
    for a in range(0, table.num_rows, batch):
        op.push(table.slice(a, batch))
        got.extend(op.results().to_pylist())
    op.flush()
    return got + op.results().to_pylist()


@pytest.mark.parametrize("batch", [1, 4, 100])
def test_a_windows_rows_follow_their_group_values_not_first_sight(batch: int) -> None:
    """Group 9 is first seen in window 0, where it has no trend; group 2 only in window 1.
    Full replay and a replay without window 0's events (what a pruned plan reads) give the
    same rows in the same order: by window, then by GROUP-BY value (nulls last)."""
    rows = [(1, "A", 9), (2, "A", 9),                      # window [0, 10): no B, no trend
            (11, "A", 2), (12, "A", 9), (13, "A", None), (14, "B", 9), (15, "B", 2),
            (16, "B", None), (21, "A", 5), (22, "A", 1), (23, "B", 5), (24, "B", 1)]
    table = pa.table({"t": pa.array([r[0] for r in rows], pa.int64()),
                      "seq": pa.array(range(len(rows)), pa.int64()),
                      "type": [r[1] for r in rows], "k": pa.array([r[2] for r in rows],
                                                                  pa.int64())})
    text = "RETURN k, COUNT(*) PATTERN SEQ(A+, B) WHERE [k] GROUP-BY k WITHIN 10"
    full = _rows(text, table, batch)
    pruned = _rows(text, table.slice(2), batch)
    assert [(r["window_start"], r["k"]) for r in full] == [(10, 2), (10, 9), (10, None),
                                                           (20, 1), (20, 5)]
    assert pruned == full
