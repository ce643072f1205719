"""Time as time: every language's result columns that hold stream times are Arrow timestamps of
the stream's unit (UTC unless the query says otherwise), `raw` keeps integers, a stream without
a unit stays numeric, and every language takes TIMESTAMP / DATE literals where a time constant
can stand. Queries run over the golden corpus's source tables (in memory, real operators)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import replaydb
from replaydb.cli import main as cli_main
from replaydb.errors import ParseError, QueryError, UsageError
from tests.queries.golden import ROOT, load_case

INSTANTS = {
    "match_recognize/stock_fixed_sequence": {"t", "first_t", "last_t"},
    "sase/stock_kleene_return": {"t", "first_t", "last_t", "a_t", "c_t"},
    "tpstream/traffic_speeding_braking": {"detection_time", "S_ts", "S_te", "H_ts", "H_te"},
    "greta/stock_q1_downtrends": {"window_start", "window_end"},
    "imprecise/cross_event_predicate": {"t", "t_start", "t_end"},
    "window_sql/count_windows": {"window_start", "window_end"},
}
CASES = {name: load_case(ROOT / f"{name}.case") for name in INSTANTS}


def _source(name: str) -> tuple[pa.Table, dict[str, Any]]:
    spec = CASES[name].store
    return spec.source_table(), spec.table_options()


def _run(name: str, query: str | None = None, **options: Any) -> pa.Table:
    table, opts = _source(name)
    case = CASES[name]
    return replaydb.query(table, query or case.query, **case.options, **opts,
                          **options).table


@pytest.mark.parametrize("name", list(INSTANTS))
def test_each_language_returns_its_times_as_timestamps(name: str) -> None:
    unit = CASES[name].store.unit
    shown = _run(name)
    raw = _run(name, time_format="raw")
    assert shown.num_rows == raw.num_rows > 0
    stamps = {f.name for f in shown.schema if pa.types.is_timestamp(f.type)}
    assert stamps == INSTANTS[name]
    for col in stamps:
        assert shown.schema.field(col).type == pa.timestamp(unit, tz="UTC")
        assert raw.schema.field(col).type == pa.int64()
        assert shown.column(col).cast(pa.int64()).equals(raw.column(col))
    assert not any(pa.types.is_timestamp(f.type) for f in raw.schema)
    others = [n for n in raw.column_names if n not in stamps]
    assert shown.select(others).equals(raw.select(others))


def test_a_time_zone_is_carried_and_reads_literals() -> None:
    name = "match_recognize/stock_fixed_sequence"
    berlin = _run(name, time_zone="Europe/Berlin")
    assert berlin.schema.field("t").type == pa.timestamp("s", tz="Europe/Berlin")
    query = ("SELECT * FROM stock MATCH_RECOGNIZE (ORDER BY t MEASURES A.price AS p "
             "PATTERN (A) DEFINE A AS A.t = TIMESTAMP '1970-01-01 01:00:10')")
    # a wall-clock time in Berlin (UTC+1 in January) is 00:00:10 UTC: t = 10 seconds
    got = _run(name, query, time_zone="Europe/Berlin", time_format="raw")
    assert got.column("t").to_pylist() == [10]
    assert _run(name, query, time_format="raw").column("t").to_pylist() == [3610]
    with pytest.raises(UsageError, match="unknown time zone 'Mars/Base'"):
        _run(name, time_zone="Mars/Base")
    with pytest.raises(UsageError, match="unknown time format 'iso'"):
        _run(name, time_format="iso")


def test_numbers_stay_numbers_unless_they_are_declared_times(tmp_path: Path) -> None:
    """No unit (``time_unit=None``), or a numeric time column whose unit was not declared (the
    default milliseconds): results keep numbers and time literals are refused. A source time
    column of timestamps declares itself."""
    table, _ = _source("match_recognize/stock_fixed_sequence")
    store = replaydb.open(tmp_path / "store", create=True)
    store.append("no_unit", table, time_column="t", time_unit=None, type_column="type")
    store.append("undeclared", table, time_column="t", type_column="type")
    stamped = table.set_column(0, "t", table.column("t").cast(pa.timestamp("s")))
    store.append("stamped", stamped, time_column="t", type_column="type")
    assert store.stream("undeclared").schema.time_unit == "ms"
    query = ("SELECT * FROM {} MATCH_RECOGNIZE (ORDER BY t MEASURES A.t AS a_t "
             "PATTERN (A B) DEFINE A AS A.price > 990, B AS B.price < A.price)")
    for name in ("no_unit", "undeclared"):
        res = replaydb.query(store, query.format(name))
        assert res.num_rows > 0
        assert all(not pa.types.is_timestamp(f.type) for f in res.table.schema), name
        literal = query.format(name).replace("A.price > 990",
                                             "A.t > TIMESTAMP '1970-01-01 00:00:00'")
        with pytest.raises(QueryError, match="needs a stream with a declared time unit"):
            replaydb.query(store, literal)
    res = replaydb.query(store, query.format("stamped"))
    assert res.table.schema.field("a_t").type == pa.timestamp("ms", tz="UTC")
    want = replaydb.query(store, query.format("undeclared")).table.column("a_t")
    # the timestamp column was converted to the stream's default unit, milliseconds
    assert res.table.column("a_t").cast(pa.int64()).to_pylist() == \
        [v * 1000 for v in want.to_pylist()]


LITERALS = [
    # (case whose table is used, query with literals, the same with integers)
    ("match_recognize/stock_fixed_sequence",
     "SELECT * FROM stock MATCH_RECOGNIZE (ORDER BY t MEASURES A.t AS a_t PATTERN (A B) "
     "DEFINE A AS A.t BETWEEN TIMESTAMP '1970-01-01 00:10:00' AND TIMESTAMP "
     "'1970-01-01T00:20:00Z' AND A.price > 900, B AS B.price < A.price)",
     "SELECT * FROM stock MATCH_RECOGNIZE (ORDER BY t MEASURES A.t AS a_t PATTERN (A B) "
     "DEFINE A AS A.t BETWEEN 600 AND 1200 AND A.price > 900, B AS B.price < A.price)"),
    ("match_recognize/stock_fixed_sequence",
     "SELECT * FROM (SELECT t, price FROM stock WHERE t < TIMESTAMP '1970-01-01 00:30:00 "
     "+00:00') MATCH_RECOGNIZE (ORDER BY t PATTERN (A B) DEFINE A AS A.price > 990, "
     "B AS B.price < A.price)",
     "SELECT * FROM (SELECT t, price FROM stock WHERE t < 1800) MATCH_RECOGNIZE (ORDER BY t "
     "PATTERN (A B) DEFINE A AS A.price > 990, B AS B.price < A.price)"),
    ("sase/stock_kleene_return",
     "FROM stock PATTERN SEQ(Stock a, Stock b) WHERE skip_till_next_match(a, b) { [symbol] "
     "AND a.volume < 10 AND a.t >= DATE '1970-01-01' AND b.t < TIMESTAMP '1970-01-01 00:40' "
     "AND b.price > a.price } WITHIN 30 RETURN a.t AS a_t, b.t AS b_t",
     "FROM stock PATTERN SEQ(Stock a, Stock b) WHERE skip_till_next_match(a, b) { [symbol] "
     "AND a.volume < 10 AND a.t >= 0 AND b.t < 2400 "
     "AND b.price > a.price } WITHIN 30 RETURN a.t AS a_t, b.t AS b_t"),
    ("window_sql/count_windows",
     "SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE window_agg, "
     "DESCRIPTOR(t), INTERVAL '10' SECONDS)) WHERE t BETWEEN TIMESTAMP '1970-01-01 00:00:05' "
     "AND TIMESTAMP '1970-01-01 00:00:42.5' GROUP BY window_start, window_end",
     "SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE window_agg, "
     "DESCRIPTOR(t), INTERVAL '10' SECONDS)) WHERE t BETWEEN 5000 AND 42500 "
     "GROUP BY window_start, window_end"),
    ("greta/stock_q1_downtrends",
     "RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [company, sector] AND "
     "S.price > NEXT(S).price AND S.t < TIMESTAMP '1970-01-01 00:01:00' "
     "GROUP-BY sector WITHIN 30 seconds",
     "RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [company, sector] AND "
     "S.price > NEXT(S).price AND S.t < 60 GROUP-BY sector WITHIN 30 seconds"),
    ("tpstream/traffic_speeding_braking",
     "FROM traffic PARTITION BY car_id DEFINE S AS speed > 85 AND t > TIMESTAMP "
     "'1970-01-01 00:02:00', H AS accel < -10 PATTERN S overlaps;before;meets H "
     "WITHIN 60 seconds RETURN max(S.speed) AS top_speed",
     "FROM traffic PARTITION BY car_id DEFINE S AS speed > 85 AND t > 120, H AS accel < -10 "
     "PATTERN S overlaps;before;meets H WITHIN 60 seconds RETURN max(S.speed) AS top_speed"),
    ("imprecise/cross_event_predicate",
     "PATTERN SEQ(E a, E b) WHERE a.value % 200 = 0 AND b.value > a.value + 7 AND "
     "b.value < a.value + 9 AND a.t >= TIMESTAMP '1970-01-01 00:05' AND "
     "skip_till_any_match(a, b) WITHIN 20 RETURN a.value, b.value",
     "PATTERN SEQ(E a, E b) WHERE a.value % 200 = 0 AND b.value > a.value + 7 AND "
     "b.value < a.value + 9 AND a.t >= 300 AND "
     "skip_till_any_match(a, b) WITHIN 20 RETURN a.value, b.value"),
]


@pytest.mark.parametrize("name, with_literals, with_integers", LITERALS,
                         ids=[f"{i}-{c.split('/')[0]}" for i, (c, _, _) in enumerate(LITERALS)])
def test_time_literals_equal_the_integers_they_name(name: str, with_literals: str,
                                                    with_integers: str) -> None:
    want = _run(name, with_integers)
    got = _run(name, with_literals)
    assert want.num_rows > 0
    assert got.equals(want)


def test_bad_time_literals_are_errors_at_their_position() -> None:
    name = "match_recognize/stock_fixed_sequence"
    base = ("SELECT * FROM stock MATCH_RECOGNIZE (ORDER BY t PATTERN (A) "
            "DEFINE A AS A.t > {})")
    for literal, message in [
        ("TIMESTAMP '2001-13-01'", "month must be in 1..12"),
        ("TIMESTAMP 'yesterday'", "expected YYYY-MM-DD"),
        ("DATE '2001-03-01 08:00'", "a date has no time or zone"),
        ("TIMESTAMP '2001-03-01 08:00 Mars/Base'", "unknown time zone"),
    ]:
        query = base.format(literal)
        with pytest.raises(ParseError, match=message) as err:
            _run(name, query)
        assert err.value.pos == query.index(literal) + literal.index("'")
    finer = base.format("TIMESTAMP '1970-01-01 00:00:01.5'")
    with pytest.raises(QueryError, match=r"finer than the stream's time unit \(s\).*position"):
        _run(name, finer)


def test_output_formats_show_dates(tmp_path: Path) -> None:
    """The terminal table shows dates, JSON ISO-8601, CSV and Parquet keep the type."""
    name = "window_sql/count_windows"
    table, opts = _source(name)
    store_dir = tmp_path / "store"
    replaydb.open(store_dir, create=True).append("window_agg", table, **opts)
    query = ("SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE "
             "window_agg, DESCRIPTOR(t), INTERVAL '1' MINUTE)) GROUP BY window_start, "
             "window_end")

    def cli(*args: str) -> str:
        out = io.StringIO()
        with redirect_stdout(out):
            assert cli_main(["query", str(store_dir), query, *args]) == 0
        return out.getvalue()

    text = cli()
    assert "1970-01-01 00:00:00  1970-01-01 00:01:00" in text
    rows = json.loads(cli("--format", "json"))
    assert rows[0]["window_start"] == "1970-01-01T00:00:00Z"
    assert json.loads(cli("--format", "json", "--time-format", "raw"))[0]["window_end"] == 60000
    assert cli("--format", "csv").splitlines()[1].startswith(
        '1970-01-01 00:00:00.000Z,1970-01-01 00:01:00.000Z,')
    berlin = json.loads(cli("--format", "json", "--time-zone", "+02:00"))
    assert berlin[0]["window_end"] == "1970-01-01T02:01:00+02:00"
    out = tmp_path / "w.parquet"
    cli("--format", "parquet", "--output", str(out))
    import pyarrow.parquet as pq

    back = pq.read_table(out)
    assert back.schema.field("window_start").type == pa.timestamp("ms", tz="UTC")
    assert pc.min(back.column("window_start")).cast(pa.int64()).as_py() == 0
