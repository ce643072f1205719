"""The examples of Trino's MATCH_RECOGNIZE documentation, rewritten against a replaydb stream.

The documentation's queries run over an ``orders`` table (``custkey``, ``orderdate``,
``totalprice``); here they run over a stream of orders with the same columns (``t`` is the order
date) whose prices are chosen so that each example's rows follow from its stated semantics. The
expected rows are worked out by hand in the comments, not taken from the operator.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from replaydb.planner.lang import match_recognize as mr

# customer 1: a V (100 falls to 80, rises to 95 within the start, then past it to 110)
# customer 2: falling only; customer 3: a small V (70 falls to 60, rises to 65, then 68)
ORDERS = [(1, 100.0), (1, 90.0), (1, 80.0), (1, 85.0), (1, 95.0), (1, 110.0), (1, 105.0),
          (2, 50.0), (2, 40.0), (2, 30.0),
          (3, 70.0), (3, 60.0), (3, 65.0), (3, 68.0)]


def orders() -> pa.Table:
    n = len(ORDERS)
    return pa.table({"t": pa.array(range(n), pa.int64()), "seq": pa.array(range(n), pa.int64()),
                     "custkey": pa.array([c for c, _ in ORDERS], pa.int64()),
                     "totalprice": pa.array([p for _, p in ORDERS], pa.float64())})


def run(body: str, select: str = "*") -> list[dict[str, Any]]:
    table = orders()
    op = mr.bind(mr.parse(f"SELECT {select} FROM orders MATCH_RECOGNIZE ({body})"),
                 table.schema, None)
    for batch in table.to_batches(max_chunksize=4):
        op.push(batch)
    op.flush()
    return op.results().to_pylist()


V_SHAPE = ("PARTITION BY custkey ORDER BY t MEASURES A.totalprice AS starting_price, "
           "LAST(B.totalprice) AS bottom_price, LAST(U.totalprice) AS top_price {rows} "
           "AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) SUBSET U = (C, D) "
           "DEFINE B AS totalprice < PREV(totalprice), "
           "C AS totalprice > PREV(totalprice) AND totalprice <= A.totalprice, "
           "D AS totalprice > PREV(totalprice)")


def test_the_v_shape_example() -> None:
    # customer 1: A 100, B 90 80, C 85 95 (not 110: above the start), D 110 (not 105);
    # customer 3: A 70, B 60, C 65 (giving up 68, which C also takes, so that D has a row), D 68;
    # customer 2 never rises
    rows = run(V_SHAPE.format(rows="ONE ROW PER MATCH", pattern="A B+ C+ D+"))
    assert [(r["custkey"], r["starting_price"], r["bottom_price"], r["top_price"])
            for r in rows] == [(1, 100.0, 80.0, 110.0), (3, 70.0, 60.0, 68.0)]


def test_all_rows_per_match_and_exclusion() -> None:
    rows = [r for r in run(V_SHAPE.format(rows="ALL ROWS PER MATCH", pattern="A B+ C+ D+"))
            if r["custkey"] == 1]
    # RUNNING semantics: the measures at each row see the match up to it
    assert [(r["totalprice"], r["bottom_price"], r["top_price"]) for r in rows] == [
        (100.0, None, None), (90.0, 90.0, None), (80.0, 80.0, None), (85.0, 80.0, 85.0),
        (95.0, 80.0, 95.0), (110.0, 80.0, 110.0)]
    # the documentation's variation: {- B+ C+ -} leaves the slope rows out of the output
    rows = [r for r in run(V_SHAPE.format(rows="ALL ROWS PER MATCH", pattern="A {- B+ C+ -} D+"))
            if r["custkey"] == 1]
    assert [(r["totalprice"], r["bottom_price"], r["top_price"]) for r in rows] == [
        (100.0, None, None), (110.0, 80.0, 110.0)]


def test_rows_per_match_modifiers_with_empty_matches_and_unmatched_rows() -> None:
    body = ("PARTITION BY custkey ORDER BY t MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c "
            "ALL ROWS PER MATCH {mode} PATTERN ({pattern}) DEFINE B AS totalprice < PREV(totalprice)")
    # B*: customer 2's first row starts an empty match, then B B; customer 1: empty, B B,
    # then rows 85, 95, 110 (empty each), B 105
    shown = run(body.format(mode="SHOW EMPTY MATCHES", pattern="B*"))
    assert [(r["custkey"], r["totalprice"], r["m"], r["c"]) for r in shown
            if r["custkey"] == 2] == [(2, 50.0, 1, None), (2, 40.0, 2, "B"), (2, 30.0, 2, "B")]
    omitted = run(body.format(mode="OMIT EMPTY MATCHES", pattern="B*"))
    assert [(r["custkey"], r["totalprice"], r["m"]) for r in omitted if r["custkey"] == 2] == [
        (2, 40.0, 2), (2, 30.0, 2)]  # the empty match still took number 1
    unmatched = run(body.format(mode="WITH UNMATCHED ROWS", pattern="B+"))
    # every row once with SKIP PAST LAST ROW; a row in no match has NULL measures
    assert len(unmatched) == len(ORDERS)
    assert [(r["totalprice"], r["m"], r["c"]) for r in unmatched if r["custkey"] == 3] == [
        (70.0, None, None), (60.0, 1, "B"), (65.0, None, None), (68.0, None, None)]


def test_permute_prefers_the_lexicographic_order() -> None:
    # customer 2's rows fit both A B C and B A C when every variable is true; PERMUTE(A, B, C)
    # prefers A B C, PERMUTE(C, B, A) prefers C B A
    body = ("PARTITION BY custkey ORDER BY t MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
            "PATTERN (PERMUTE({})) DEFINE A AS TRUE, B AS TRUE, C AS TRUE")
    assert [r["c"] for r in run(body.format("A, B, C")) if r["custkey"] == 2] == ["A", "B", "C"]
    assert [r["c"] for r in run(body.format("C, B, A")) if r["custkey"] == 2] == ["C", "B", "A"]


def test_union_variable_with_an_unknown_mix_and_skip_to_it() -> None:
    # PATTERN ((A | B){5} C+): whether A or B matched is not known up front; LAST(U.totalprice)
    # is the fifth row's price. Customer 1: rows 100 (A: > 95 is false -> B) ... row 5 is 95,
    # then C+ takes 110 and 105 (C: any price above 100)
    body = ("PARTITION BY custkey ORDER BY t MEASURES LAST(U.totalprice) AS last_u, "
            "COUNT(U.*) AS n_u, COUNT(A.*) AS n_a, FINAL COUNT(C.*) AS n_c "
            "AFTER MATCH SKIP TO LAST U PATTERN ((A | B){5} C+) SUBSET U = (A, B) "
            "DEFINE A AS totalprice > 95, B AS totalprice <= 95, C AS totalprice > 100")
    rows = run(body)
    assert [(r["last_u"], r["n_u"], r["n_a"], r["n_c"]) for r in rows] == [(95.0, 5, 1, 2)]


def test_navigation_functions_of_the_documentation() -> None:
    # customer 1's whole V as A+ (every row an A): FIRST(A.totalprice, 2) = 80,
    # LAST(A.totalprice, 2) = 95, PREV(LAST(A.totalprice), 2) = 95 (two rows before 105),
    # PREV(FIRST(A.totalprice, 3), 2) = 90 (two rows before 85), COUNT(A.*) = 7
    body = ("PARTITION BY custkey ORDER BY t MEASURES FIRST(A.totalprice, 2) AS f2, "
            "LAST(A.totalprice, 2) AS l2, PREV(A.totalprice, 2) AS p2, "
            "PREV(FIRST(A.totalprice, 3), 2) AS pf, NEXT(FIRST(A.totalprice), 2) AS nf, "
            "COUNT(A.*) AS n, FINAL AVG(A.totalprice) AS avg_all PATTERN (A+) "
            "DEFINE A AS TRUE")
    first = run(body)[0]
    assert (first["f2"], first["l2"], first["p2"], first["pf"], first["nf"], first["n"]) == (
        80.0, 95.0, 95.0, 90.0, 80.0, 7)
    assert abs(first["avg_all"] - (100 + 90 + 80 + 85 + 95 + 110 + 105) / 7) < 1e-9


def test_the_empty_pattern_matches_every_row() -> None:
    # PATTERN (()): an empty match at every row, numbered 1, 2, ... per partition
    rows = run("PARTITION BY custkey ORDER BY t MEASURES MATCH_NUMBER() AS m, COUNT(*) AS n "
               "PATTERN (()) ")
    assert [(r["custkey"], r["m"], r["n"]) for r in rows if r["custkey"] == 2] == [
        (2, 1, 0), (2, 2, 0), (2, 3, 0)]


def test_the_quantifier_forms_of_the_documentation() -> None:
    # customer 1's falling run 100 90 80 (then 85 rises): B{,5} takes both falls, B{,1} one;
    # {,} is *, {2,} at least two; reluctant {1,5}? and ?? take as few as they may
    def falls(quantifier: str) -> list[int]:
        rows = run("PARTITION BY custkey ORDER BY t MEASURES COUNT(B.*) AS n "
                   f"AFTER MATCH SKIP PAST LAST ROW PATTERN (A B{quantifier}) "
                   "DEFINE B AS totalprice < PREV(totalprice)")
        return [r["n"] for r in rows if r["custkey"] == 1][:1]

    assert falls("{,5}") == [2] and falls("{,1}") == [1] and falls("{,}") == [2]
    assert falls("{2,}") == [2] and falls("{1,5}?") == [1] and falls("??") == [0]
    assert falls("{0}") == [0] and falls("{0,0}") == [0]  # exactly zero repetitions
    assert falls("{3,}") == []  # customer 1's first run falls only twice; its second once
