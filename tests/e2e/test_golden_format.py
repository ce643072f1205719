"""The golden corpus's own machinery (``tests/queries/``): case files are in the form the
regeneration writes, comparisons fail where they must and tolerate only float reassociation,
cells survive the text table, plan shapes read EXPLAIN, and regeneration fills in a new case."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pytest

from tests.queries.golden import (
    ROOT,
    Outcome,
    case_files,
    check,
    format_value,
    load_case,
    plan_shape,
    render,
    rows_equal,
    split_cells,
    table_lines,
)
from tests.queries.regen import regenerate
from tests.queries.stores import StoreCache


def test_every_case_file_is_in_canonical_form() -> None:
    files = case_files()
    assert files
    for path in files:
        case = load_case(path)
        text = render(case, case.expected_plan, case.expected_rows, case.expected_error)
        assert text == path.read_text(), f"{path} is not as regeneration writes it"


def test_rows_compare_floats_within_tolerance_only() -> None:
    base = table_lines(pa.table({"k": [2, 1], "x": [0.1 + 0.2, 1.0]}))
    assert base[:2] == ["k     | x", "int64 | double"]
    assert rows_equal(base, table_lines(pa.table({"k": [2, 1], "x": [0.3, 1.0]})), "exact")
    off = table_lines(pa.table({"k": [2, 1], "x": [0.3 + 1e-6, 1.0]}))
    assert not rows_equal(base, off, "exact")
    swapped = table_lines(pa.table({"k": [1, 2], "x": [1.0, 0.3]}))
    assert not rows_equal(base, swapped, "exact") and rows_equal(base, swapped, "any")
    other_int = table_lines(pa.table({"k": [3, 1], "x": [0.3, 1.0]}))
    assert not rows_equal(base, other_int, "any")
    narrower = table_lines(pa.table({"k": pa.array([2, 1], pa.int32()), "x": [0.3, 1.0]}))
    assert not rows_equal(base, narrower, "exact")  # the type line differs
    assert not rows_equal(base, base[:-1], "exact")


def test_cells_survive_the_text_table() -> None:
    values = ["a|b", "back\\slash", "", "NULL", None, "two\nlines", "plain"]
    lines = table_lines(pa.table({"s": values, "n": list(range(len(values)))}))
    cells = [split_cells(line)[0] for line in lines[2:]]
    assert cells == [format_value(v) for v in values]
    assert len(set(cells)) == len(values)  # NULL, '' and the text NULL stay apart
    assert format_value(float("nan")) == "NaN" and format_value(-math.inf) == "-inf"
    assert format_value([1, None, "x"]) == "[1, NULL, x]" and format_value(True) == "true"
    assert format_value(1 / 3) == "0.333333333333"


def test_check_reports_every_difference() -> None:
    case = load_case(ROOT / "match_recognize/stock_rare_volumes.case")
    assert case.expected_rows is not None and case.expected_plan is not None
    good = Outcome(list(case.expected_rows), case.expected_plan["all"])
    assert check(case, good, "all") == []
    assert check(case, good, "spark") == []  # Spark runs compare rows only
    wrong_plan = Outcome(list(case.expected_rows), "language=match_recognize strategy=x")
    assert "plan shape of all" in check(case, wrong_plan, "all")[0]
    fewer = Outcome(case.expected_rows[:-1], good.plan)
    assert "rows differ" in check(case, fewer, "all")[0]
    assert "unexpected error" in check(case, Outcome(error="QueryError: x"), "all")[0]
    err = load_case(ROOT / "match_recognize/error_unknown_variable.case")
    assert err.expected_error is not None
    assert check(err, Outcome(error=err.expected_error), "auto") == []
    assert check(err, Outcome(error="ParseError: unknown pattern variable 'Z'"), "auto")
    assert check(err, Outcome(error="QueryError: another message"), "auto")
    assert check(err, good, "auto")


def _explain(language: str, strategy: str, source: dict, family: str, **extra: object) -> dict:
    """An EXPLAIN dict as the hub returns it: the plan value's nodes under ``plan``."""
    return {"language": language, "strategy": strategy,
            "plan": {"strategy": strategy, "source": source,
                     "operator": {"family": family, "device": "cpu"},
                     "placement": {"requested": "auto", "device": "cpu", "reason": "..."}},
            **extra}


def test_plan_shape_reads_explain() -> None:
    pattern = _explain("match_recognize", "optimal",
                       {"node": "interval_scan", "reason": "index", "intervals": 3}, "pattern",
                       pattern={"chosen": {"indexes": ["#0 A: volume <= 10",
                                                       "#2 C: origin = 'ORD' OR origin = 'X'"],
                                           "cost": 12.5}})
    assert plan_shape(pattern) == ("language=match_recognize strategy=optimal "
                                   "source=interval_scan(index) operator=pattern "
                                   "indexes=A.volume,C.origin device=cpu")
    window = _explain("window_sql", "window-naive",
                      {"node": "tree_aggregates", "variant": "naive"}, "window")
    assert "source=tree_aggregates(naive) operator=window" in plan_shape(window)
    tps = _explain("tpstream", "pruned",
                   {"node": "interval_scan", "reason": "situations", "intervals": 2,
                    "guard": "situation cuts"}, "tpstream",
                   tpstream={"situations": {"A": {"source": "index+tree", "index": "accel"},
                                            "B": {"source": "tree", "index": "none (...)"}}})
    assert plan_shape(tps) == ("language=tpstream strategy=pruned "
                               "source=interval_scan(situations+guard) operator=tpstream "
                               "indexes=A.accel situations=A:index+tree,B:tree device=cpu")
    replay = _explain("greta", "replay", {"node": "full_scan"}, "greta")
    assert plan_shape(replay) == ("language=greta strategy=replay source=full_scan "
                                  "operator=greta device=cpu")


def test_malformed_cases_name_the_problem(tmp_path: Path) -> None:
    head = "dataset: stock events=300 seed=1\nstore: stock time=t unit=s type=type\n"
    bad = {
        "colour: red\n": "expected one of",
        "spark: sometimes\n": "spark:",
        "xfail: greedy no such run\n": "xfail names runs",
        "\nrows: 3\nt\nint64\n1\n": "rows: 3 but 1 row lines",
    }
    for extra, message in bad.items():
        path = tmp_path / "bad.case"
        path.write_text(head + extra + "\nquery:\nFROM stock PATTERN SEQ(Stock a) WITHIN 5\n")
        with pytest.raises(ValueError, match=message):
            load_case(path)


def test_regeneration_fills_in_a_new_case(tmp_path: Path) -> None:
    path = tmp_path / "new.case"
    path.write_text("# a new case\ndataset: stock events=300 seed=1\n"
                    "store: stock time=t unit=s type=type index=volume leaf=16 fanout=4\n"
                    "strategies: auto all\n\nquery:\nFROM stock PATTERN SEQ(Stock a, Stock b)\n"
                    "WHERE skip_till_any_match(a, b) { a.volume < 50 AND b.volume > 950 }\n"
                    "WITHIN 10\n")
    cache = StoreCache(tmp_path / "stores")
    text, mismatches = regenerate(load_case(path), cache)
    assert mismatches == []
    path.write_text(text)
    case = load_case(path)
    assert case.expected_plan is not None and set(case.expected_plan) == {"replay", "auto",
                                                                           "all"}
    assert case.expected_rows is not None and case.expected_rows[0].startswith("t ")
    assert ("source=interval_scan(index) operator=pattern indexes=a.volume,b.volume"
            in case.expected_plan["all"])
    assert regenerate(case, cache)[0] == text  # nothing changes a second time
