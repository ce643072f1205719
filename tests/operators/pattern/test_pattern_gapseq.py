"""The blocks-and-gaps MATCH_RECOGNIZE engine against the general matcher and the oracle."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from replaydb.errors import StateCapExceeded
from replaydb.operators.expr import Binary, Call, Column, Literal
from replaydb.operators.pattern import model as pm
from replaydb.operators.pattern import oracle
from replaydb.operators.pattern.operator import PatternConfig, PatternOperator
from tests.operators.pattern.test_pattern_operator import SCH, random_stream

CONDS = [None, Binary("=", Column("type"), Literal("a")),
         Binary("!=", Column("type"), Literal("b")),
         Binary(">", Column("temp"), Literal(4.0)),
         Binary("<=", Column("temp"), Literal(2.0)),
         Binary(">=", Column("temp"), Call("PREV", (Column("temp"),)))]
MEASURES = (pm.Measure("first_seq", Call("FIRST", (Column("seq", "A"),))),
            pm.Measure("last_seq", Call("LAST", (Column("seq"),))),
            pm.Measure("n", Call("COUNT", (Column("*"),))),
            pm.Measure("cls", Call("CLASSIFIER")),
            pm.Measure("gap", Call("COUNT", (Column("*", "T1"),))))
MORE_MEASURES = (pm.Measure("second_seq", Call("FIRST", (Column("seq"), Literal(1)))),
                 pm.Measure("b_temp", Call("LAST", (Column("temp", "B"), Literal(1)))),
                 pm.Measure("a_sum", Call("SUM", (Column("temp", "A"),))),
                 pm.Measure("avg_temp", Call("AVG", (Column("temp"),))),
                 pm.Measure("gap_temp", Call("LAST", (Column("temp", "T1"),))),
                 pm.Measure("no", Call("MATCH_NUMBER")),
                 pm.Measure("a_count", Call("COUNT", (Column("*", "A"),))))
"""More measures, with :data:`MEASURES` the pool :func:`_gap_specs` draws from: some read
only the blocks' rows (FIRST/LAST of a block variable, with an offset too, SUM over one,
CLASSIFIER, MATCH_NUMBER, FIRST/LAST of the match without an offset), the others a gap row
(COUNT(*), AVG over the match, COUNT and LAST of a gap variable, FIRST of the match with an
offset)."""
GAP_ROW_READERS = {"n", "gap", "second_seq", "avg_temp", "gap_temp"}


def gap_spec(blocks: list[list[int]], conds: list[int], window: int, skip: pm.SkipKind,
             all_rows: bool = False, measures: tuple[pm.Measure, ...] = MEASURES) -> pm.PatternSpec:
    """``B1 T1* B2 T2* ...``: block variables A, B, C, ... with conditions ``CONDS[conds[i]]``;
    gap ``j`` is the always-true variable ``Tj``."""
    items: list = []
    defines: list[pm.VarDef] = []
    names = iter("ABCDEFGHIJKLMNOP")
    ci = iter(conds)
    for j, blk in enumerate(blocks):
        if j:
            items.append(pm.Repeat(pm.Var(f"T{j}"), 0, None))
            defines.append(pm.VarDef(f"T{j}", Literal(True) if j % 2 else None))
        for _ in blk:
            v = next(names)
            items.append(pm.Var(v))
            defines.append(pm.VarDef(v, CONDS[next(ci)]))
    return pm.PatternSpec(pm.Seq(tuple(items)), tuple(defines), window, semantics=pm.Semantics.SQL,
                       after_match_skip=pm.AfterMatchSkip(skip), measures=measures,
                       rows_per_match=pm.RowsPerMatch.ALL if all_rows else pm.RowsPerMatch.ONE)


def _gap_specs():  # type: ignore[no-untyped-def]
    from hypothesis import strategies as st

    @st.composite
    def build(draw):  # type: ignore[no-untyped-def]
        k = draw(st.integers(2, 4))
        blocks = [[0] * draw(st.integers(1, 3)) for _ in range(k)]
        conds = [draw(st.integers(0, len(CONDS) - 1)) for _ in range(sum(map(len, blocks)))]
        window = draw(st.integers(0, 14))
        skip = draw(st.sampled_from([pm.SkipKind.PAST_LAST_ROW, pm.SkipKind.TO_NEXT_ROW]))
        pool = MEASURES + MORE_MEASURES
        measures = tuple(pool[i] for i in draw(st.lists(st.integers(0, len(pool) - 1),
                                                        max_size=4, unique=True)))
        return gap_spec(blocks, conds, window, skip, all_rows=draw(st.booleans()),
                        measures=measures)

    return build()


def _ops(spec: pm.PatternSpec, **kw: object) -> PatternOperator:
    return PatternOperator(PatternConfig(spec, SCH), **kw)  # type: ignore[arg-type]


def _run(op: PatternOperator, tab: pa.Table, chunk: int, breaks: list[int]) -> pa.Table:
    """Batches of ``chunk`` rows with interval ``breaks``, twice with an interval between."""
    n = tab.num_rows
    for _ in range(2):
        done = 0
        for start in range(0, n, chunk):
            rows = min(chunk, n - start)
            mine = [b - start for b in breaks if start <= b < start + rows]
            op.push_intervals(tab.slice(start, rows).to_batches()[0], np.array(mine, np.int64))
            done += len(mine)
            op._check()
        for _ in range(len(breaks) - done):
            op.end_interval()
        op.end_interval()
        tab = pa.table({**tab.to_pydict(),
                        "t": [x + 10**6 for x in tab.column("t").to_pylist()]}, schema=SCH)
    op.flush()
    return op.results()


def test_blocks_and_gaps_equal_the_general_matcher() -> None:
    """Random gap patterns (blocks of 1-3 variables, conditions with PREV, windows 0-14, both
    skips, ONE and ALL ROWS PER MATCH, up to four measures, some reading gap rows, some not)
    over random streams with ties in time, cut into random batches with random interval
    breaks: rows, order and match numbers equal the general matcher's, and the invariant
    checker holds after every batch. Matches leave their gap rows out exactly when no measure
    reads one (ONE ROW PER MATCH)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=150, deadline=None)
    @given(_gap_specs(), st.integers(0, 120), st.integers(0, 10_000), st.integers(1, 50),
           st.lists(st.integers(0, 119), max_size=6), st.integers(0, 3))
    def check(spec: pm.PatternSpec, n: int, seed: int, chunk: int, raw: list[int],
              ties: int) -> None:
        tab = random_stream(n, seed, ties)
        breaks = sorted(b for b in raw if b < n)
        fast, slow = _ops(spec), _ops(spec, vectorized=False)
        assert type(fast._engine).__name__ == "GapSeqEngine"
        assert type(slow._engine).__name__ == "SqlEngine"
        readers = {m.name for m in spec.measures} & GAP_ROW_READERS
        one_row = spec.rows_per_match == pm.RowsPerMatch.ONE
        assert fast._engine.block_rows_only == (one_row and not readers)
        a = _run(fast, tab, chunk, breaks)
        b = _run(slow, tab, chunk, breaks)
        assert a.equals(b)

    check()


def test_blocks_and_gaps_equal_the_oracle() -> None:
    """Operator rows (ALL ROWS PER MATCH with CLASSIFIER) equal the backtracking oracle's."""
    rng = random.Random(5)
    total = 0
    for trial in range(60):
        k = rng.randint(2, 3)
        blocks = [[0] * rng.randint(1, 2) for _ in range(k)]
        conds = [rng.randint(0, len(CONDS) - 1) for _ in range(sum(map(len, blocks)))]
        spec = gap_spec(blocks, conds, rng.randint(0, 10),
                        rng.choice([pm.SkipKind.PAST_LAST_ROW, pm.SkipKind.TO_NEXT_ROW]))
        tab = random_stream(rng.randint(0, 70), trial)
        want = oracle.matches(spec, tab)
        got = oracle.run_operator(spec, tab, batch_rows=rng.randint(1, 30))
        assert [m[1:] for m in got] == [m[1:] for m in want], (trial, spec.to_text())
        total += len(want)
    assert total > 100


def test_a_dense_stream_matches_like_the_general_matcher() -> None:
    """The benchmark's shape on a dense stream: hundreds of attempts alive at once."""
    rng = np.random.default_rng(3)
    n = 4000
    x = rng.random(n)
    tab = pa.table({"t": np.arange(n), "seq": np.arange(n), "type": ["a"] * n,
                    "temp": x * 10}, schema=SCH)
    spec = gap_spec([[0], [0], [0], [0]], [3, 4, 3, 4], 300, pm.SkipKind.TO_NEXT_ROW)
    fast, slow = _ops(spec), _ops(spec, vectorized=False)
    assert type(fast._engine).__name__ == "GapSeqEngine"
    for b in tab.to_batches(max_chunksize=700):
        fast.push(b)
        slow.push(b)
    fast.flush()
    slow.flush()
    a, b = fast.results(), slow.results()
    assert a.num_rows > 1000
    assert a.equals(b)
    assert "matcher: vectorized blocks and gaps, match rows: every row" in fast.explain()
    assert "matcher: automaton" in slow.explain()


def test_matches_without_gap_rows_when_no_measure_reads_them() -> None:
    """The benchmark's measures (FIRST of the first block, LAST of the last) read no gap row:
    each match carries its blocks' rows only, and the rows equal those of matches with every
    row (the same engine made to keep them) and the general matcher's; with COUNT(*) or a gap
    variable's value every row stays."""
    rng = np.random.default_rng(4)
    n = 3000
    tab = pa.table({"t": np.arange(n), "seq": np.arange(n), "type": ["a"] * n,
                    "temp": rng.random(n) * 10}, schema=SCH)
    bench = (pm.Measure("first_seq", Call("FIRST", (Column("seq", "A"),))),
             pm.Measure("last_seq", Call("LAST", (Column("seq", "D"),))))
    spec = gap_spec([[0], [0, 0], [0]], [3, 4, 3, 4], 200, pm.SkipKind.TO_NEXT_ROW,
                    measures=bench)
    fast = _ops(spec)
    assert fast._engine.block_rows_only and fast.match_rows == "block rows"
    assert "match rows: block rows" in fast.explain()
    sizes: list[int] = []
    emit = fast._emit_matches

    def spy(ms):  # type: ignore[no-untyped-def]
        sizes.extend(np.diff(ms.off).tolist())
        emit(ms)

    fast._emit_matches = spy  # type: ignore[method-assign]
    full = _ops(spec)
    full._engine.block_rows_only = False
    got, every, want = (op.process(tab) for op in (fast, full, _ops(spec, vectorized=False)))
    assert got.num_rows > 500 and set(sizes) == {4}
    assert got.equals(every) and got.equals(want)
    for extra in (MEASURES[2], MORE_MEASURES[4]):
        assert not _ops(replace(spec, measures=bench + (extra,)))._engine.block_rows_only


@pytest.mark.parametrize("change", ["reluctant", "gap condition", "partition", "no window",
                                    "skip to", "cross-row", "leading gap", "trailing gap",
                                    "no gap", "bounded gap"])
def test_other_shapes_run_on_the_general_matcher(change: str) -> None:
    spec = gap_spec([[0], [0, 0]], [1, 2, 3], 5, pm.SkipKind.PAST_LAST_ROW)
    items = list(spec.pattern.items)
    defines = list(spec.defines)
    if change == "reluctant":
        items[1] = pm.Repeat(pm.Var("T1"), 0, None, greedy=False)
    elif change == "gap condition":
        defines[1] = pm.VarDef("T1", CONDS[1])
    elif change == "bounded gap":
        items[1] = pm.Repeat(pm.Var("T1"), 0, 5)
    elif change == "leading gap":
        items.insert(0, pm.Repeat(pm.Var("T1"), 0, None))
    elif change == "trailing gap":
        items.append(pm.Repeat(pm.Var("T1"), 0, None))
    elif change == "no gap":
        del items[1]
        del defines[1]
        spec = replace(spec, measures=MEASURES[:4])
    elif change == "cross-row":
        defines[2] = pm.VarDef("B", Binary(">", Column("temp"), Column("temp", "A")))
    spec = replace(spec, pattern=pm.Seq(tuple(items)), defines=tuple(defines))
    if change == "partition":
        spec = replace(spec, partition_by=("type",))
    elif change == "no window":
        spec = replace(spec, window=None)
    elif change == "skip to":
        spec = replace(spec, after_match_skip=pm.AfterMatchSkip(pm.SkipKind.TO_LAST, "B"))
    op = _ops(spec)
    assert type(op._engine).__name__ != "GapSeqEngine"
    tab = random_stream(80, 2)
    try:
        want = oracle.matches(spec, tab)
    except Exception as e:  # the standard's exceptions: both must raise
        with pytest.raises(type(e)):
            op.process(tab)
        return
    assert op.process(tab).num_rows == len(want)


def test_state_cap_counts_the_waiting_rows() -> None:
    """A window much longer than a batch keeps its rows; the state cap stops it."""
    spec = gap_spec([[0], [0]], [0, 0], 10**6, pm.SkipKind.TO_NEXT_ROW)
    n = 5000
    tab = pa.table({"t": np.arange(n), "seq": np.arange(n), "type": ["a"] * n,
                    "temp": np.zeros(n)}, schema=SCH)
    op = _ops(spec, state_cap=1000)
    with pytest.raises(StateCapExceeded):
        for b in tab.to_batches(max_chunksize=100):
            op.push(b)


def test_seeded_stress_keeps_the_invariants() -> None:
    spec = gap_spec([[0, 0], [0], [0]], [2, 5, 3, 1], 20, pm.SkipKind.PAST_LAST_ROW)
    tab = random_stream(20_000, 99, ties=1)
    op = _ops(spec)
    rng = random.Random(1)
    start = 0
    while start < tab.num_rows:
        rows = rng.randint(1, 400)
        op.push(tab.slice(start, rows))
        op._check()
        ct = op._engine.s["ct"]  # at most one window of rows waits (or a block's first rows)
        assert len(ct) < 2 or ct[0] >= ct[-1] - 20
        start += rows
    op.flush()
    assert op.results().equals(_ops(spec, vectorized=False).process(tab))
