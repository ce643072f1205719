"""One typing rule for conditions in all six languages, checked when the query is bound.

A condition (and each operand of AND, OR, NOT) must be a boolean or NULL; a string compares only
with a string; arithmetic needs numbers; a function must exist. Each refusal is a QueryError
naming the position of the offending part. Before, the NumPy evaluator behind TPStream, GRETA,
imprecise patterns and window SQL counted a non-empty string or a nonzero number as true, and
GRETA leaked NumPy's UFuncTypeError for a string in arithmetic.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import replaydb
from replaydb.errors import QueryError
from tests.queries.golden import case_files, load_case
from tests.queries.stores import StoreCache

QUERIES = {
    "match_recognize": ("stock", "SELECT * FROM stock MATCH_RECOGNIZE (ORDER BY t PATTERN (A B) "
                        "DEFINE A AS {c}, B AS B.price > 0)", "price"),
    "sase": ("stock", "FROM stock PATTERN SEQ(Stock a, Stock b) WHERE "
             "skip_till_any_match(a, b) {{ {c} }} WITHIN 10", "a.price"),
    "tpstream": ("situations", "FROM situations DEFINE A AS {c}, B AS s2 PATTERN A overlaps B "
                 "WITHIN 5 minutes", "t"),
    "greta": ("stock_greta", "FROM stock_greta RETURN sector, COUNT(*) AS n PATTERN Stock S+ "
              "WHERE {c} GROUP-BY sector WITHIN 10 seconds", "S.price"),
    "imprecise": ("imprecise", "PATTERN SEQ(E a, E b) WHERE skip_till_any_match(a, b) "
                  "{{ {c} }} WITHIN 10", "a.value"),
    "window_sql": ("window_agg", "SELECT window_start, window_end, COUNT(*) AS n FROM "
                   "TABLE(TUMBLE(TABLE window_agg, DESCRIPTOR(t), INTERVAL '1' MINUTE)) "
                   "WHERE {c} GROUP BY window_start, window_end", "A1"),
}
BAD = [
    ("'nope'", "a string used as a condition"),
    ("{x} + 1", "value used as a condition"),
    ("{x} = 'a'", "a string compared with a non-string"),
    ("{x} > 1 AND 'x'", "a string used as a condition"),
    ("NOT {x}", "value used as a condition"),
    ("{x} + 'a' > 1", "arithmetic on a string value"),
    ("FOO({x}) > 1", "unknown function FOO"),
]
ROW_LANGUAGES = ("greta", "imprecise", "tpstream", "window_sql")
"""Languages whose conditions are over one row (the pattern languages have running aggregates)."""


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cache = StoreCache(tmp_path_factory.mktemp("types"))
    out: dict[str, Any] = {}
    for language, (stream, _, _) in QUERIES.items():
        case = next(c for c in map(load_case, case_files(language + "/"))
                    if c.store.stream == stream)
        spec = dataclasses.replace(case.store, events=min(case.store.events, 400),
                                   ingest="append")
        out[language] = cache.get(spec)
    return out


@pytest.mark.parametrize("language", sorted(QUERIES))
@pytest.mark.parametrize("condition, message", BAD)
def test_ill_typed_conditions_are_refused_with_a_position(stores: dict[str, Any], language: str,
                                                          condition: str, message: str) -> None:
    _, template, x = QUERIES[language]
    text = template.format(c=condition.format(x=x))
    with pytest.raises(QueryError) as info:
        replaydb.query(stores[language], text)
    assert message in str(info.value)
    assert "position" in str(info.value) or "column" in str(info.value)


@pytest.mark.parametrize("language", sorted(QUERIES))
def test_well_typed_conditions_run(stores: dict[str, Any], language: str) -> None:
    _, template, x = QUERIES[language]
    for condition in (f"{x} > 0", f"NOT ({x} < 0) OR NULL", f"ABS({x}) >= 0 AND TRUE"):
        replaydb.query(stores[language], template.format(c=condition))


@pytest.mark.parametrize("language", ROW_LANGUAGES)
def test_aggregates_in_a_row_condition_are_refused(stores: dict[str, Any], language: str) -> None:
    _, template, x = QUERIES[language]
    with pytest.raises(QueryError, match=r"an aggregate \(SUM\) where a row value is required"):
        replaydb.query(stores[language], template.format(c=f"SUM({x}) > 1"))
