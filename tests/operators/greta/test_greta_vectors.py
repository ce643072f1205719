"""GRETA: the paper's test vectors, the negation decision, exact big counts, the lifecycle."""

from __future__ import annotations

import random
from decimal import Decimal

import pyarrow as pa
import pytest

from replaydb.errors import DataError, OperatorError, StateCapExceeded
from replaydb.operators.greta import GretaConfig, GretaOperator, PPlus, PType, ReturnItem
from replaydb.operators.greta.oracle import GretaOracle
from replaydb.planner.lang.greta import bind, parse, to_config


def events(spec: list[tuple], **cols: list) -> pa.Table:
    """A stream from (type, time[, attr]) tuples."""
    data = {"t": pa.array([e[1] for e in spec], pa.int64()),
            "seq": pa.array(range(len(spec)), pa.int64()),
            "type": pa.array([e[0] for e in spec], pa.string()),
            "attr": pa.array([e[2] if len(e) > 2 else 0 for e in spec], pa.int64())}
    for k, v in cols.items():
        data[k] = pa.array(v)
    return pa.table(data)


def run(text: str, table: pa.Table, **kw) -> list[dict]:
    op = bind(parse(text), table.schema, None, **kw)
    rows = op.process(table).to_pylist()
    return rows


FIG3 = events([("A", 1, 5), ("B", 2), ("A", 3, 6), ("A", 4, 4), ("B", 7)])
FIG6 = events([("A", 1), ("B", 2), ("C", 2), ("A", 3), ("E", 3), ("A", 4), ("C", 5), ("D", 6),
               ("B", 7), ("A", 8), ("B", 9)])


def test_paper_example_1_all_aggregates() -> None:
    rows = run("RETURN COUNT(*), COUNT(A), MIN(A.attr), MAX(A.attr), SUM(A.attr), AVG(A.attr) "
               "PATTERN (SEQ(A+, B))+ WITHIN 100", FIG3)
    assert len(rows) == 1
    r = rows[0]
    assert r["COUNT(*)"] == 11 and r["COUNT(A)"] == 20
    assert r["MIN(A.attr)"] == 4 and r["MAX(A.attr)"] == 6
    assert r["SUM(A.attr)"] == 100 and r["AVG(A.attr)"] == 5.0
    assert r["last_seq"] == 4
    assert isinstance(r["COUNT(*)"], Decimal)


def test_paper_intermediate_counts_via_prefixes() -> None:
    # a1=1, b2=1, a3=3, a4=6, b7=10: the final count after each END event is the running sum
    text = "RETURN COUNT(*) PATTERN (SEQ(A+, B))+ WITHIN 100"
    assert run(text, FIG3.slice(0, 2))[0]["COUNT(*)"] == 1
    assert run(text, FIG3)[0]["COUNT(*)"] == 11
    assert run("RETURN COUNT(*) PATTERN A+ WITHIN 100", FIG3)[0]["COUNT(*)"] == 7  # a1,a3,a4


def test_paper_figure_6_final_count_43() -> None:
    assert run("RETURN COUNT(*) PATTERN (SEQ(A+, B))+ WITHIN 100", FIG6)[0]["COUNT(*)"] == 43


def test_notes_vector_3_nested_negation_13() -> None:
    text = "RETURN COUNT(*) PATTERN (SEQ(A+, NOT SEQ(C, NOT E, D), B))+ WITHIN 100"
    assert run(text, FIG6)[0]["COUNT(*)"] == 13
    assert GretaOracle(to_config(parse(text), None), FIG6).run()[0]["COUNT(*)"] == 13


def test_sliding_windows_share_one_graph() -> None:
    text = "RETURN COUNT(*) PATTERN (SEQ(A+, B))+ WITHIN 10 SLIDE 3"
    got = [(r["window_start"], int(r["COUNT(*)"])) for r in run(text, FIG6)]
    exp = [(r["window_start"], r["COUNT(*)"])
           for r in GretaOracle(to_config(parse(text), None), FIG6).run()]
    assert got == exp
    assert (0, 43) in got and (3, 13) in got


# ---------------------------------------------------------------------------- negation decision
NEG_STREAM = events([("A", 1), ("A", 2), ("E", 3), ("A", 4), ("A", 5)])


def _paper_runtime_rule(stream: list[tuple[str, int]], case: int) -> int:
    """The literal runtime rule of Sec. 5.2 for SEQ(A+, NOT E) (case 2) and SEQ(NOT E, A+)
    (case 3): an E marks all earlier a's invalid (they are deleted, Fig. 8a) resp. all later a's
    invalid (Fig. 8b)."""
    counts: dict[int, int] = {}
    blocked_future = False
    for i, (ty, _) in enumerate(stream):
        if ty == "E":
            if case == 2:
                counts.clear()
            else:
                blocked_future = True
        elif ty == "A" and not blocked_future:
            counts[i] = 1 + sum(counts.values())
    return sum(counts.values())


@pytest.mark.parametrize("text,case", [
    ("RETURN COUNT(*) PATTERN SEQ(A+, NOT E) WITHIN 100", 2),
    ("RETURN COUNT(*) PATTERN SEQ(NOT E, A+) WITHIN 100", 3),
])
def test_negation_follows_stated_semantics_not_runtime_rule(text: str, case: int) -> None:
    stream = [("A", 1), ("A", 2), ("E", 3), ("A", 4), ("A", 5)]
    oracle = GretaOracle(to_config(parse(text), None), NEG_STREAM).run()[0]["COUNT(*)"]
    got = run(text, NEG_STREAM)[0]["COUNT(*)"]
    assert got == oracle == 12  # 15 A+ trends minus the 3 that end before / start after e3
    assert _paper_runtime_rule(stream, case) == 3  # the rule would lose valid trends


def test_negation_case_1_matches_runtime_rule() -> None:
    text = "RETURN COUNT(*) PATTERN SEQ(A+, NOT E, B) WITHIN 100"
    t = events([("A", 1), ("A", 2), ("E", 3), ("A", 4), ("B", 5)])
    # valid: trends whose last A is a4: {a4}, {a1,a4}, {a2,a4}, {a1,a2,a4} followed by b5
    assert run(text, t)[0]["COUNT(*)"] == 4


def test_negation_case_2_and_3_are_per_window() -> None:
    t = events([("A", 1), ("E", 3), ("A", 6), ("A", 7)])
    text2 = "RETURN COUNT(*) PATTERN SEQ(A+, NOT E) WITHIN 4 SLIDE 2"
    text3 = "RETURN COUNT(*) PATTERN SEQ(NOT E, A+) WITHIN 4 SLIDE 2"
    for text in (text2, text3):
        exp = [(r["window_start"], r["COUNT(*)"])
               for r in GretaOracle(to_config(parse(text), None), t).run()]
        got = [(r["window_start"], int(r["COUNT(*)"])) for r in run(text, t)]
        assert got == exp, text
    # case 2: window [0,4) has a1 then e3 -> no trend; window [-2,2) ends before e3 -> 1 trend
    assert dict(got_ := [(r["window_start"], int(r["COUNT(*)"])) for r in run(text2, t)]
                ).get(0) is None and dict(got_)[-2] == 1


def test_negation_with_coarser_partition_q3_shape() -> None:
    # an accident in segment 1 stops trends of every vehicle of segment 1 from *starting* after it
    # (p5 alone); p2 -> p5 started before it and counts; segment 2 is not affected
    t = events([("Position", 1), ("Position", 2), ("Accident", 3), ("Position", 4),
                ("Position", 5), ("Position", 6)],
               vehicle=[1, 2, 9, 1, 2, 1], segment=[1, 1, 1, 2, 1, 2], speed=[9, 8, 0, 7, 6, 5])
    text = ("RETURN segment, COUNT(*) PATTERN SEQ(NOT Accident A, Position P+) "
            "WHERE [P.vehicle, segment] AND P.speed > NEXT(P).speed GROUP-BY segment WITHIN 100")
    exp = GretaOracle(to_config(parse(text), None), t).run()
    got = run(text, t, exact_type="int64")
    assert [(r["segment"], r["COUNT(*)"]) for r in got] == \
        [(r["segment"], r["COUNT(*)"]) for r in exp] == [(1, 3), (2, 3)]


# ---------------------------------------------------------------------------- exact big counts
def test_counts_beyond_2_64_are_exact() -> None:
    n = 200
    t = events([("A", i, i - 50) for i in range(n)])
    text = ("RETURN COUNT(*), COUNT(A), SUM(A.attr), AVG(A.attr), MIN(A.attr) PATTERN A+ "
            "WITHIN 1000")
    r = run(text, t, exact_type="string")[0]
    xs = [i - 50 for i in range(n)]
    assert int(r["COUNT(*)"]) == 2**n - 1 > 2**64
    assert int(r["COUNT(A)"]) == n * 2 ** (n - 1)
    assert int(r["SUM(A.attr)"]) == sum(xs) * 2 ** (n - 1)
    assert r["AVG(A.attr)"] == sum(xs) / n
    assert r["MIN(A.attr)"] == -50
    with pytest.raises(OperatorError, match="decimal128") as ei:
        run(text, t)  # decimal128 cannot hold 2**200
    assert "exact_type='string'" in ei.value.hint
    with pytest.raises(OperatorError, match="int64"):
        run(text, t, exact_type="int64")


def test_big_negative_sums_and_sliding_windows_exact() -> None:
    n = 130
    t = events([("A", i, -(i % 7) - 1) for i in range(n)])
    text = "RETURN COUNT(*), SUM(A.attr) PATTERN A+ WITHIN 100 SLIDE 30"
    rows = run(text, t, exact_type="string")
    for r in rows:
        lo, hi = max(r["window_start"], 0), min(r["window_end"], n)
        xs = [-(i % 7) - 1 for i in range(lo, hi)]
        m = len(xs)
        assert int(r["COUNT(*)"]) == 2**m - 1
        assert int(r["SUM(A.attr)"]) == sum(xs) * 2 ** (m - 1)
    assert max(int(r["COUNT(*)"]) for r in rows) == 2**100 - 1


def test_limbs_widen_across_batches() -> None:
    n = 300
    t = events([("A", i, 1) for i in range(n)])
    op = bind(parse("RETURN COUNT(*), SUM(A.attr) PATTERN A+ WITHIN 1000"), t.schema, None,
              exact_type="string")
    for a in range(0, n, 7):
        op.push(t.slice(a, 7))
        op._check()
    op.flush()
    r = op.results().to_pylist()[0]
    assert int(r["COUNT(*)"]) == 2**n - 1
    assert int(r["SUM(A.attr)"]) == n * 2 ** (n - 1)


# ---------------------------------------------------------------------------- lifecycle
STOCK = ("RETURN sector, COUNT(*), MAX(S.price) PATTERN Stock S+ WHERE [company, sector] AND "
         "S.price > NEXT(S).price GROUP-BY sector WITHIN 20 SLIDE 5")


def stock_table(n: int, seed: int = 1) -> pa.Table:
    rng = random.Random(seed)
    price = {c: 100.0 for c in range(4)}
    rows = []
    for i in range(n):
        c = rng.randrange(4)
        price[c] = round(price[c] + rng.choice([-1, -0.5, 0, 0.5, 1]), 2)
        rows.append((i // 3, c, f"s{c % 2}", price[c]))
    return pa.table({"t": pa.array([r[0] for r in rows], pa.int64()),
                     "seq": pa.array(range(n), pa.int64()),
                     "type": pa.array(["Stock"] * n),
                     "company": pa.array([r[1] for r in rows], pa.int64()),
                     "sector": pa.array([r[2] for r in rows]),
                     "price": pa.array([r[3] for r in rows], pa.float64())})


def test_batching_does_not_change_results_and_invariants_hold() -> None:
    t = stock_table(400)
    whole = run(STOCK, t, exact_type="string")
    rng = random.Random(7)
    op = bind(parse(STOCK), t.schema, None, exact_type="string")
    got = []
    a = 0
    while a < t.num_rows:
        b = min(t.num_rows, a + rng.randint(1, 40))
        op.push(t.slice(a, b - a))
        op._check()
        got.extend(op.results().to_pylist())
        a = b
    op.flush()
    op._check()
    got.extend(op.results().to_pylist())
    assert got == whole
    assert len(whole) > 40
    assert op.counters.events_in == 400
    assert op.counters.peak_state > 0 and op.counters.extra["peak_state_bytes"] > 0


def test_snapshot_restore_replays_identically() -> None:
    t = stock_table(300, seed=3)
    op = bind(parse(STOCK), t.schema, None, exact_type="string")
    op.push(t.slice(0, 150))
    first = op.results().to_pylist()
    snap = op.snapshot()
    op.push(t.slice(150))
    op.flush()
    rest = op.results().to_pylist()
    op.restore(snap)
    op._check()
    op.push(t.slice(150))
    op.flush()
    assert op.results().to_pylist() == rest
    assert first + rest == run(STOCK, t, exact_type="string")


def test_state_cap() -> None:
    t = stock_table(400)
    op = bind(parse(STOCK), t.schema, None, state_cap=20)
    with pytest.raises(StateCapExceeded, match="state_cap=20"):
        op.push(t)
        op.flush()


def test_bad_input_errors_name_row_and_column() -> None:
    t = events([("A", 1, 1), ("A", 3, 2), ("A", 2, 3)])
    op = bind(parse("RETURN COUNT(*) PATTERN A+ WITHIN 10"), t.schema, None)
    with pytest.raises(DataError, match="row 2") as ei:
        op.push(t)
    assert ei.value.column == "t"
    op = bind(parse("RETURN COUNT(*) PATTERN A+ WITHIN 10"), t.schema, None)
    op.push(t.slice(0, 2))
    with pytest.raises(DataError, match="before the previous batch"):
        op.push(t.slice(2))
    t2 = pa.table({"t": pa.array([1, 2], pa.int64()), "seq": pa.array([0, 1], pa.int64()),
                   "type": ["A", "A"], "attr": pa.array([1, None], pa.int64())})
    op = bind(parse("RETURN SUM(A.attr) PATTERN A+ WITHIN 10"), t2.schema, None)
    with pytest.raises(DataError) as ei:
        op.process(t2)
    assert ei.value.column == "attr" and ei.value.row == 1


def test_lifecycle_results_flush_end_interval() -> None:
    op = bind(parse("RETURN COUNT(*) PATTERN A+ WITHIN 10"), FIG3.schema, None,
              exact_type="int64")
    assert op.results().num_rows == 0
    assert op.results().schema == op.output_schema
    op.push(FIG3.slice(0, 3))  # a1 b2 a3
    op.end_interval()  # a gap only leaves events out: trends span it (skip-till-any-match)
    op.push(FIG3.slice(3))  # a4 b7
    op.flush()
    assert [r["COUNT(*)"] for r in op.results().to_pylist()] == [7]
    assert op.counters.intervals == 1 and op.traits().skips_gaps
    assert not op.traits().interval_safe
    with pytest.raises(OperatorError, match="push after flush"):
        op.push(FIG3)
    op.reset()
    assert op.process(FIG3).to_pylist()[0]["COUNT(*)"] == 7


def test_config_without_parser_live_use() -> None:
    cfg = GretaConfig(pattern=PPlus(PType("A", "A")),
                      returns=(ReturnItem("count_star"), ReturnItem("sum", "A", "attr")),
                      within=100, exact_type="int64")
    op = GretaOperator(cfg, schema=FIG3.schema)
    for i in range(FIG3.num_rows):
        op.push(FIG3.slice(i, 1))
    op.flush()
    r = op.results().to_pylist()[0]
    assert (r["COUNT(*)"], r["SUM(A.attr)"]) == (7, 5 * 4 + 6 * 4 + 4 * 4)
    lazy = GretaOperator(cfg)  # plan compiled from the first batch
    assert lazy.process(FIG3).to_pylist()[0]["COUNT(*)"] == 7
