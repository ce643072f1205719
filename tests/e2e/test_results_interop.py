"""Results leave replaydb in every form users take them: the Arrow PyCapsule stream (Polars and
DuckDB consume a result with no pyarrow call here), pandas, Polars, HTML for notebooks, and the
CLI's table, CSV, JSON and Parquet for one query of every language. Queries also run over
in-memory tables (Arrow, pandas, Polars) and Parquet files with no store, and give the golden
corpus's rows for the same query on a store."""

from __future__ import annotations

import csv
import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import duckdb
import polars
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import replaydb
from replaydb.cli import main as cli_main
from replaydb.errors import UsageError
from tests.queries.golden import ROOT, Outcome, check, load_case, table_lines
from tests.queries.stores import StoreCache

ONE_PER_LANGUAGE = [
    "match_recognize/stock_fixed_sequence",
    "sase/stock_kleene_return",
    "tpstream/traffic_speeding_braking",
    "greta/stock_q1_downtrends",
    "imprecise/cross_event_predicate",
    "window_sql/count_windows",
]
CASES = {name: load_case(ROOT / f"{name}.case") for name in ONE_PER_LANGUAGE}


def _table_options(name: str) -> dict[str, Any]:
    return CASES[name].store.table_options()


def _in_memory(name: str, source: Any) -> Outcome:
    case = CASES[name]
    res = replaydb.query(source, case.query, **case.options, **_table_options(name))
    return Outcome(table_lines(res.table, case.ignore, case.order), None)


@pytest.mark.parametrize("name", ONE_PER_LANGUAGE)
def test_in_memory_table_gives_the_stores_rows(name: str) -> None:
    case = CASES[name]
    got = _in_memory(name, case.store.source_table())
    problems = check(case, got, "spark")  # rows only: the plan shape is the store's
    assert not problems, "\n".join(problems)


def test_pandas_polars_and_parquet_sources_match(tmp_path: Path) -> None:
    name = "match_recognize/stock_fixed_sequence"
    case = CASES[name]
    table = case.store.source_table()
    path = tmp_path / "stock.parquet"
    pq.write_table(table, path)
    for source in (table.to_pandas(), polars.from_arrow(table), str(path), path,
                   {"stock": table}):
        problems = check(case, _in_memory(name, source), "spark")
        assert not problems, f"{type(source).__name__}: " + "\n".join(problems)


def test_in_memory_errors_name_the_problem() -> None:
    table = pa.table({"ts": [1, 2, 3], "x": [1.0, 2.0, 3.0]})
    query = "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t PATTERN (A) DEFINE A AS A.x > 1)"
    with pytest.raises(UsageError, match="no time column 't'.*ts, x"):
        replaydb.query(table, query)
    with pytest.raises(UsageError, match="time_colum"):
        replaydb.query(table, query, time_colum="ts")
    res = replaydb.query(table, query, time_column="ts")
    assert res.num_rows == 2


@pytest.fixture(scope="module")
def stock_result() -> Any:
    case = CASES["sase/stock_kleene_return"]
    return replaydb.query(case.store.source_table(), case.query,
                          **_table_options("sase/stock_kleene_return"))


def test_polars_and_duckdb_take_the_result_through_the_capsule(stock_result: Any) -> None:
    frame = polars.DataFrame(stock_result)
    assert frame.height == 26
    assert frame.columns == stock_result.to_polars().columns
    # DuckDB's replacement scan finds the Python variable by its name
    [(count, first, last)] = duckdb.sql(
        "SELECT count(*), min(t), max(t) FROM stock_result").fetchall()
    pandas_frame = stock_result.to_pandas()
    assert (count, first, last) == (26, pandas_frame["t"].min(), pandas_frame["t"].max())
    assert frame["t"].to_list() == pandas_frame["t"].tolist()
    # the times arrive as each library's timestamp type, in UTC
    assert str(pandas_frame["t"].dtype).endswith(", UTC]")
    assert frame.schema["t"] == polars.Datetime(time_zone="UTC", time_unit="ms")
    assert stock_result.to_arrow() is stock_result.table


def test_notebook_html_shows_rows_and_plan(stock_result: Any) -> None:
    page = stock_result._repr_html_()
    assert page.startswith("<table><thead><tr><th>t</th>")
    assert page.count("<tr>") == 21  # header + the first 20 rows
    assert "26 rows; plan: replay" in page and "(6 more not shown)" in page


@pytest.mark.parametrize("name", ONE_PER_LANGUAGE)
def test_every_output_format(request: pytest.FixtureRequest, golden_stores: StoreCache,
                             tmp_path: Path, name: str) -> None:
    case = CASES[name]
    store = golden_stores.for_test(request, case.store)
    expected = replaydb.query(store, case.query, **case.options).table
    rows = expected.num_rows

    def cli(*extra: str) -> str:
        buf = io.StringIO()
        with redirect_stdout(buf):
            assert cli_main(["query", str(store.path), case.query, *extra]) == 0
        return buf.getvalue()

    table = cli("--format", "table")
    assert table.split()[:len(expected.column_names)] == expected.column_names
    assert (f"({rows:,} rows)" if rows <= 50 else f"({rows:,} in all;") in table
    text = cli("--format", "csv")
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert len(parsed) == rows and list(parsed[0]) == expected.column_names
    records = json.loads(cli("--format", "json"))
    assert len(records) == rows and list(records[0]) == expected.column_names
    out = tmp_path / "result.parquet"
    cli("--format", "parquet", "--output", str(out))
    # Parquet has no timestamps in seconds: they come back in milliseconds, the same instants
    assert pq.read_table(out).cast(expected.schema).equals(expected)
    for field in expected.schema:
        if pa.types.is_list(field.type):  # nested values: one JSON value per CSV cell
            first = expected.column(field.name)[0].as_py()
            assert json.loads(parsed[0][field.name]) == first
