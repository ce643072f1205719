"""MATCH_RECOGNIZE queries that were once answered with a silent misreading: each now runs as
the standard (and Trino) define it, or fails with a replaydb error naming its position.

Each query is written as it was found, on a stream ``s`` with columns ``t``, ``x``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from replaydb.errors import ParseError, QueryError, ReplayDBError
from replaydb.planner.lang import match_recognize as mr
from replaydb.planner.lang import sase

X = [1, 2, 1, 2, 2, 1, 3, 1, 2, 2]
STREAM = pa.table({"t": list(range(len(X))), "seq": list(range(len(X))), "x": X,
                   "name": [f"n{i}" for i in range(len(X))]})
HEAD = "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t "


def run(text: str) -> list[dict[str, Any]]:
    op = mr.bind(mr.parse(text), STREAM.schema, None)
    op.push(STREAM.to_batches()[0])
    op.flush()
    return op.results().to_pylist()


def error_of(text: str) -> ReplayDBError:
    with pytest.raises(ReplayDBError) as info:
        run(text)
    return info.value


# --------------------------------------------------------------------------- 1. clause boundaries
@pytest.mark.parametrize("text, message", [
    ("PATTERN (A) PATTERN (B) DEFINE A AS x = 1, B AS x = 2)", "PATTERN appears twice"),
    ("MEASURES A.x AS i PATTERN (A B) MEASURES J AS Y DEFINE A AS x = 1)",
     "MEASURES appears twice"),
    ("PATTERN (A B) DEFINE A AS x = 1 DEFINE B AS x = 2)", "DEFINE appears twice"),
    ("PATTERN (A) PARTITION BY x DEFINE A AS x = 1)", "PARTITION BY is out of place"),
    ("PATTERN (A) ORDER BY t DEFINE A AS x = 1)", "ORDER BY appears twice"),
    ("PATTERN (rising+) DEFINES AUTO)", "the row pattern ends at the parenthesis"),
    ("PATTERN (A | B) C DEFINE A AS x = 1)", "the row pattern ends at the parenthesis"),
    ("PATTERN rising+ DEFINES rising AS x > PREV(x))", "AS is a reserved word"),
])
def test_words_after_the_pattern_are_never_variables(text: str, message: str) -> None:
    err = error_of(HEAD + text)
    assert isinstance(err, ParseError)
    assert message in str(err)
    assert "line 1, column" in str(err)


def test_the_clause_order_is_named_in_the_error() -> None:
    err = error_of(HEAD + "PATTERN (A) PATTERN (B) DEFINE A AS x = 1, B AS x = 2)")
    assert "PARTITION BY, ORDER BY, MEASURES" in str(err)
    assert err.pos == len(HEAD) + len("PATTERN (A) ")


def test_a_parenthesis_free_pattern_and_quoted_reserved_words_still_run() -> None:
    bare = run(HEAD + "MEASURES A.t AS a PATTERN A B+ DEFINE A AS x = 1, B AS x = 2)")
    wrapped = run(HEAD + "MEASURES A.t AS a PATTERN (A B+) DEFINE A AS x = 1, B AS x = 2)")
    assert bare == wrapped and [r["a"] for r in bare] == [0, 2, 7]
    quoted = run(HEAD + 'MEASURES "AS".t AS a PATTERN ("AS" B+) DEFINE "AS" AS x = 1, '
                 "B AS x = 2)")
    assert [r["a"] for r in quoted] == [0, 2, 7]


# --------------------------------------------------------------------------- 2. CLASSIFIER()
def test_navigation_of_classifier_in_define_reads_the_running_match() -> None:
    # x: 1 2 1 2 2 1 3 1 2 2; B's row must follow an A row of the match
    rows = run(HEAD + "MEASURES A.t AS a PATTERN (A B) "
               "DEFINE A AS x = 1, B AS PREV(CLASSIFIER()) = 'A' AND x = 2)")
    assert [r["a"] for r in rows] == [0, 2, 7]
    assert run(HEAD + "MEASURES A.t AS a PATTERN (A B) "
               "DEFINE A AS x = 1, B AS PREV(CLASSIFIER()) = 'B')") == []
    # A B+ where a B row's row two back is A (or none yet): at most two B rows
    rows = run(HEAD + "MEASURES A.t AS a, COUNT(B.*) AS bs PATTERN (A B+) "
               "DEFINE A AS x = 1, B AS x = 2 AND (LAST(CLASSIFIER(), 2) IS NULL "
               "OR LAST(CLASSIFIER(), 2) = 'A'))")
    assert [(r["a"], r["bs"]) for r in rows] == [(0, 1), (2, 2), (7, 2)]
    rows = run(HEAD + "MEASURES A.t AS a, COUNT(B.*) AS bs PATTERN (A B+) "
               "DEFINE A AS x = 1, B AS x = 2 AND NEXT(FIRST(CLASSIFIER())) = 'B' "
               "AND CLASSIFIER(A) = 'A' AND FIRST(CLASSIFIER(B)) = 'B')")
    assert [(r["a"], r["bs"]) for r in rows] == [(0, 1), (2, 2), (7, 2)]
    # a navigation from a row the running match does not have yet is NULL, though the row it
    # would move to exists: FIRST(CLASSIFIER(), 2) needs three rows
    rows = run(HEAD + "MEASURES A.t AS a, COUNT(B.*) AS bs PATTERN (A B+) "
               "DEFINE A AS x = 1, B AS x = 2 AND PREV(FIRST(CLASSIFIER(), 2)) IS NULL "
               "AND NEXT(LAST(CLASSIFIER(), 2)) IS NULL)")
    assert [(r["a"], r["bs"]) for r in rows] == [(0, 1), (2, 1), (7, 1)]
    # a move from another variable's row: NULL until the row it lands on is bound
    rows = run(HEAD + "MEASURES A.t AS a, COUNT(B.*) AS bs PATTERN (A B+) "
               "DEFINE A AS x = 1, B AS x = 2 AND NEXT(CLASSIFIER(A), 2) IS NULL "
               "AND NEXT(CLASSIFIER(A)) = 'B' AND PREV(CLASSIFIER(A)) IS NULL)")
    assert [(r["a"], r["bs"]) for r in rows] == [(0, 1), (2, 1), (7, 1)]


def test_string_functions_of_other_rows_in_define() -> None:
    # name: n0 .. n9; B's name, upper-cased, must differ from A's, lower-cased ("N1" != "n0")
    rows = run(HEAD + "MEASURES A.t AS a, B.t AS b PATTERN (A B) "
               "DEFINE A AS x = 1, B AS UPPER(B.name) != LOWER(A.name) "
               "AND LOWER(UPPER(B.name)) = LOWER(NEXT(PREV(name))) "
               "AND UPPER(PREV(name)) = UPPER(A.name))")
    assert [(r["a"], r["b"]) for r in rows] == [(0, 1), (2, 3), (5, 6), (7, 8)]
    none = run(HEAD + "MEASURES A.t AS a PATTERN (A B) "
               "DEFINE A AS x = 1, B AS LOWER(B.name) = UPPER(A.name))")
    assert none == []


def test_navigation_of_classifier_in_measures_one_row() -> None:
    rows = run(HEAD + "MEASURES PREV(CLASSIFIER()) AS p, FIRST(CLASSIFIER()) AS f, "
               "LAST(CLASSIFIER()) AS l, FIRST(CLASSIFIER(), 1) AS f1, "
               "PREV(CLASSIFIER(), 5) AS far, NEXT(CLASSIFIER()) AS nx "
               "PATTERN (A B+) DEFINE A AS x = 1, B AS x = 2)")
    got = [(r["p"], r["f"], r["l"], r["f1"], r["far"], r["nx"]) for r in rows]
    # matches: rows 0-1 (A B), 2-4 (A B B), 7-9 (A B B)
    assert got == [("A", "A", "B", "B", None, None), ("B", "A", "B", "B", None, None),
                   ("B", "A", "B", "B", None, None)]


def test_navigation_of_classifier_in_measures_all_rows_is_running() -> None:
    rows = run(HEAD + "MEASURES CLASSIFIER() AS c, PREV(CLASSIFIER()) AS p, "
               "NEXT(CLASSIFIER()) AS n, FINAL LAST(CLASSIFIER()) AS fl, "
               "FIRST(CLASSIFIER(), 1) AS f1 ALL ROWS PER MATCH "
               "PATTERN (A B+) DEFINE A AS x = 1, B AS x = 2)")
    first = [(r["t"], r["c"], r["p"], r["n"], r["fl"], r["f1"]) for r in rows[:3]]
    assert first == [(0, "A", None, None, "B", None), (1, "B", "A", None, "B", "B"),
                     (2, "A", None, None, "B", None)]


# --------------------------------------------------------------------------- 3. typed conditions
@pytest.mark.parametrize("condition, message", [
    ("'nope'", "a string used as a condition"),
    ("x", "an integer value used as a condition"),
    ("x + 1", "an integer value used as a condition"),
    ("x = 'a'", "a string compared with a non-string"),
    ("name > 1", "a string compared with a non-string"),
    ("x = 1 AND name", "a string used as a condition"),
    ("NOT x", "an integer value used as a condition"),
    ("FOO(x) = 1", "unknown function FOO"),
])
def test_a_condition_must_be_boolean(condition: str, message: str) -> None:
    err = error_of(HEAD + f"PATTERN (A) DEFINE A AS {condition})")
    assert isinstance(err, QueryError)
    assert message in str(err) and "position" in str(err)


def test_a_condition_over_earlier_rows_is_typed_alike() -> None:
    err = error_of(HEAD + "PATTERN (A B) DEFINE A AS x = 1, B AS A.name)")
    assert "a string used as a condition" in str(err) and "position" in str(err)


def test_well_typed_conditions_still_run() -> None:
    assert len(run(HEAD + "PATTERN (A) DEFINE A AS NULL)")) == 0
    assert len(run(HEAD + "PATTERN (A) DEFINE A AS TRUE AND name = 'n1')")) == 1
    assert len(run(HEAD + "PATTERN (A) DEFINE A AS LOWER(name) = 'n2' OR x = 3)")) == 2


# --------------------------------------------------------------------------- 4. no leaks
@pytest.mark.parametrize("measure", [
    "FIRST(x, 18446744073709551615)", "LAST(x, 18446744073709551615)",
    "PREV(x, 18446744073709551615)", "NEXT(x, 99999999999)",
    "FIRST(CLASSIFIER(), 18446744073709551615)",
])
def test_huge_offsets_are_replaydb_errors(measure: str) -> None:
    err = error_of(HEAD + f"MEASURES {measure} AS s PATTERN (A) DEFINE A AS x = 1)")
    assert isinstance(err, QueryError) and f"the offset of {measure.split('(')[0]}" in str(err)
    assert "position" in str(err)


# --------------------------------------------------------------------------- 5. decisions
def test_define_of_a_variable_not_in_the_pattern_is_rejected_as_trino_does() -> None:
    err = error_of(HEAD + "PATTERN (A) DEFINE A AS x = 1, D AS x = 2)")
    assert "DEFINE names variable 'D' that is not in the pattern" in str(err)


def test_match_number_in_define_is_the_number_the_match_would_get() -> None:
    """Trino's reading: one more than the partition's matches before the attempt."""
    rows = run(HEAD + "MEASURES MATCH_NUMBER() AS mn, A.t AS at "
                      "PATTERN (A) DEFINE A AS MATCH_NUMBER() = 1)")
    assert [(r["mn"], r["at"]) for r in rows] == [(1, 0)]
    # x = 1 2 1 2 2 1 3 ...: rows 0, 1 and 6 hold the number their match gets; the attempts
    # that fail in between take no number
    rows = run(HEAD + "MEASURES MATCH_NUMBER() AS mn, A.t AS at "
                      "PATTERN (A) DEFINE A AS x = MATCH_NUMBER())")
    assert [(r["mn"], r["at"]) for r in rows] == [(1, 0), (2, 1), (3, 6)]


def test_match_number_in_define_with_overlapping_attempts() -> None:
    """SKIP TO NEXT ROW runs the attempt of row r + 1 while row r's is undecided: its number
    depends on the outcome, so the matcher tries both (x[r + 1] = number + 1 holds at rows 1
    and 6 only as 2 = 1 + 1 and 3 = 2 + 1)."""
    rows = run(HEAD + "MEASURES MATCH_NUMBER() AS mn, A.t AS at AFTER MATCH SKIP TO NEXT ROW "
                      "PATTERN (A B) DEFINE A AS TRUE, B AS x = MATCH_NUMBER() + 1)")
    assert [(r["mn"], r["at"]) for r in rows] == [(1, 0), (2, 5)]


@pytest.mark.parametrize("define, message", [
    ("PREV(MATCH_NUMBER()) = 1", "MATCH_NUMBER() cannot be navigated"),
    ("MATCH_NUMBER(x) = 1", "MATCH_NUMBER() takes no arguments"),
    ("MATCH_NUMBER() = 'one'", "position"),
])
def test_match_number_in_define_misused(define: str, message: str) -> None:
    err = error_of(HEAD + f"PATTERN (A) DEFINE A AS {define})")
    assert message in str(err)
    assert "position" in str(err)


def test_sase_has_no_match_number() -> None:
    text = "PATTERN SEQ(ANY a, ANY b) WHERE skip_till_any_match(a, b) { MATCH_NUMBER() = 1 }"
    with pytest.raises(QueryError, match="MATCH_NUMBER.. exists only in MATCH_RECOGNIZE"
                                         ".*position"):
        sase.bind(sase.parse(text), STREAM.schema, None)
