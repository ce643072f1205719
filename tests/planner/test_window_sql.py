"""Window SQL front end: parsing, binding, errors with positions, and results vs oracle/DuckDB."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.errors import ParseError
from replaydb.operators.window import WindowAggregate
from replaydb.operators.window.oracle import assert_same_rows, make_stream, oracle
from replaydb.planner.lang import window_sql
from replaydb.planner.lang.window_sql import bind, detect, parse, to_config

SCHEMA = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("x", pa.float64()),
                    ("y", pa.int64()), ("k", pa.string())])
ISSUE_QUERY = ("SELECT window_start, window_end, key, SUM(x), AVG(x), COUNT(*) FROM TABLE(HOP("
               "TABLE s, DESCRIPTOR(t), INTERVAL '5' SECOND, INTERVAL '1' DAY)) "
               "GROUP BY window_start, window_end, key")


def test_contract_surface() -> None:
    assert window_sql.LANGUAGE == "window_sql"
    q = parse(ISSUE_QUERY)
    assert q.sources == ("s",) and q.event_types == () and q.text == ISSUE_QUERY


def test_detect() -> None:
    assert detect(ISSUE_QUERY)
    assert detect("-- hourly\nselect count(*) from table ( tumble(table s, descriptor(t), 5))"
                  " group by window_start, window_end")
    assert detect("SELECT COUNT(*) FROM TABLE(HOP_ROWS(TABLE s, 10, 100)) GROUP BY "
                  "window_start, window_end")
    assert not detect("SELECT * FROM crimes MATCH_RECOGNIZE (PATTERN (A B) DEFINE A AS x > 1)")
    assert not detect("PATTERN SEQ(A a, B b) WITHIN 10")
    assert not detect("")
    assert not detect(None)  # type: ignore[arg-type]


def test_hop_takes_slide_then_size_like_flink() -> None:
    cfg = to_config(parse(ISSUE_QUERY.replace("key", "k")), SCHEMA, "ms")
    assert (cfg.slide, cfg.size) == (5_000, 86_400_000)
    assert cfg.align == "epoch" and cfg.empty == "skip" and cfg.group_by == ("k",)
    assert [a.alias for a in cfg.aggregates] == ["SUM(x)", "AVG(x)", "COUNT(*)"]


def test_named_arguments_offset_and_extensions() -> None:
    q = parse("SELECT window_end, SUM(x) AS total, max(y) m FROM TABLE(HOP(DATA => TABLE s, "
              "SIZE => INTERVAL '10' MINUTES, SLIDE => 5 minutes, TIMECOL => DESCRIPTOR(t), "
              "OFFSET => 30s, EMPTY => 'EMIT')) AS w WHERE w.x > 0 AND k <> 'z' "
              "GROUP BY w.window_start, window_end;")
    cfg = to_config(q, SCHEMA, "s")
    assert (cfg.size, cfg.slide, cfg.offset, cfg.empty) == (600, 300, 30, "emit")
    assert [a.alias for a in cfg.aggregates] == ["total", "m"]
    q2 = parse("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE s, "
               "DESCRIPTOR(t), INTERVAL '1 hour', ALIGN => FIRST)) GROUP BY window_start, "
               "window_end ORDER BY window_start")
    cfg2 = to_config(q2, SCHEMA, "ms")
    assert (cfg2.size, cfg2.slide, cfg2.align) == (3_600_000, 3_600_000, "first")


def test_count_window_extension() -> None:
    cfg = to_config(parse("SELECT window_start, window_end, k, AVG(x) FROM TABLE(HOP_ROWS("
                          "TABLE s, 10, 100 ROWS)) GROUP BY window_start, window_end, k"),
                    SCHEMA, "ms")
    assert (cfg.kind, cfg.slide, cfg.size, cfg.align) == ("count", 10, 100, "first")
    cfg = to_config(parse("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE_ROWS("
                          "TABLE s, 7)) GROUP BY window_start, window_end"), SCHEMA, None)
    assert (cfg.kind, cfg.slide, cfg.size) == ("count", 7, 7)


def test_options_apply_where_text_is_silent() -> None:
    q = parse("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE s, "
              "DESCRIPTOR(t), 10)) GROUP BY window_start, window_end")
    op = bind(q, SCHEMA, None, align="first", empty="emit", state_cap=123, plan="replay")
    assert isinstance(op, WindowAggregate)
    assert (op.cfg.align, op.cfg.empty, op.state_cap, op.cfg.size) == ("first", "emit", 123, 10)


@settings(max_examples=30)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 20), slide=st.integers(1, 25),
       grouped=st.booleans(), tumble=st.booleans())
def test_sql_results_match_oracle_and_duckdb(seed: int, size: int, slide: int, grouped: bool,
                                             tumble: bool) -> None:
    rng = np.random.default_rng(seed)
    table = make_stream(rng, 80, keys=3, null_p=0.0, t0=0)
    if tumble:
        tvf = f"TUMBLE(TABLE s, DESCRIPTOR(t), {size})"
        slide = size
    else:
        tvf = f"HOP(TABLE s, DESCRIPTOR(t), {slide}, {size})"
    key = ", k" if grouped else ""
    text = (f"SELECT window_start, window_end{key}, SUM(x) AS sx, COUNT(*) AS n, MIN(y) AS mn, "
            f"MAX(x) AS mx, AVG(y) AS ay FROM TABLE({tvf}) WHERE y > -50 "
            f"GROUP BY window_start, window_end{key}")
    op = bind(parse(text), table.schema, None)
    got = op.process(table).to_pylist()
    gb = ("k",) if grouped else ()
    assert_same_rows(got, oracle(table, op.cfg), gb)
    con = duckdb.connect()
    con.register("ev", table)
    kcol = ", k" if grouped else ""
    rows = con.execute(f"""
        WITH w AS (
            SELECT *, unnest(range(CAST(floor((t - {size}) / {slide}) AS BIGINT) + 1,
                                   CAST(floor(t / {slide}) AS BIGINT) + 1)) AS wk
            FROM ev WHERE y > -50)
        SELECT wk * {slide} AS window_start, wk * {slide} + {size} AS window_end{kcol},
               sum(x) AS sx, count(*) AS n, min(y) AS mn, max(x) AS mx, avg(y) AS ay
        FROM w GROUP BY wk{kcol}""").to_arrow_table().to_pylist()
    assert_same_rows(got, rows, gb)


def test_sql_over_batches_equals_whole() -> None:
    rng = np.random.default_rng(5)
    table = make_stream(rng, 500, keys=4)
    text = ("SELECT window_start, window_end, k, FIRST_VALUE(x), LAST_VALUE(y), STDDEV(x) "
            "FROM TABLE(HOP(TABLE s, DESCRIPTOR(t), 4, 11)) GROUP BY window_start, window_end, k")
    whole = bind(parse(text), table.schema, None).process(table).to_pylist()
    op = bind(parse(text), table.schema, None)
    for b in table.to_batches(max_chunksize=13):
        op.push(b)
    op.flush()
    assert_same_rows(op.results().to_pylist(), whole, ("k",))
    assert list(whole[0]) == ["window_start", "window_end", "k", "FIRST_VALUE(x)",
                              "LAST_VALUE(y)", "STDDEV(x)"]


BASE = ("SELECT window_start, window_end, SUM(x) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), "
        "INTERVAL '5' SECOND)) GROUP BY window_start, window_end")


@pytest.mark.parametrize("text,at,msg", [
    (BASE.replace("GROUP BY window_start, window_end", "GROUP BY window_start"),
     "BY window_start", "window_end"),
    (BASE.replace("SUM(x)", "k, SUM(x)"), "k, SUM", "must appear in GROUP BY"),
    (BASE.replace("SUM(x)", "COUNT(DISTINCT x)"), "DISTINCT", "DISTINCT"),
    (BASE.replace("SUM(x)", "SUM(*)"), "*)", "only COUNT(*)"),
    (BASE.replace("SUM(x)", "SUM(MAX(x))"), "MAX(x))", "nested"),
    (BASE.replace("SUM(x)", "SUM(x) + 1"), "SUM(x) + 1", "one aggregate"),
    (BASE.replace("SUM(x)", "*"), "*", "SELECT *"),
    (BASE.replace("SUM(x)", "window_time, SUM(x)"), "window_time", "window_end"),
    (BASE.replace("TUMBLE(", "SESSION("), "SESSION", "TUMBLE"),
    (BASE.replace("DESCRIPTOR(t), ", ""), "INTERVAL", "DESCRIPTOR"),
    (BASE.replace("INTERVAL '5' SECOND", "INTERVAL '5' FORTNIGHT"), "FORTNIGHT", "unknown"),
    (BASE.replace("INTERVAL '5' SECOND", "5, 6, 7"), "7", "too many"),
    (BASE.replace("TUMBLE(TABLE s, DESCRIPTOR(t), INTERVAL '5' SECOND)",
                  "TUMBLE(TABLE s, DESCRIPTOR(t))"), "TUMBLE", "SIZE"),
    (BASE.replace("TUMBLE(TABLE s,", "TUMBLE(TABLE s, SIZE => 5, SIZE => 6,"), "SIZE => 6",
     "twice"),
    (BASE + " HAVING SUM(x) > 1", "HAVING", "HAVING"),
    (BASE + " ORDER BY k", "k", "window_end"),
    (BASE.replace("GROUP BY", "WHERE window_start > 0 GROUP BY"), "window_start >",
     "before windowing"),
    (BASE.replace("SUM(x)", "SUM(x), COUNT(*) AS window_end"), "COUNT(*) AS", "twice"),
    (BASE.replace("SUM(x)", "SUM(q.x)"), "q.x", "unknown table"),
    ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE_ROWS(TABLE s, 5s)) "
     "GROUP BY window_start, window_end", "5s", "whole number"),
    ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), 5, "
     "ALIGN => 'LATEST')) GROUP BY window_start, window_end", "'LATEST'", "ALIGN"),
])
def test_parse_errors_name_the_position(text: str, at: str, msg: str) -> None:
    with pytest.raises(ParseError) as ei:
        parse(text)
    expected = text.index(at) + (3 if at.startswith("BY ") else 0)
    assert ei.value.pos == expected, (ei.value, text[ei.value.pos:])
    assert msg in str(ei.value) or msg in " ".join(ei.value.expected)
    assert ei.value.line == 1 and ei.value.col == ei.value.pos + 1


@pytest.mark.parametrize("text,at,msg,unit", [
    (BASE.replace("SUM(x)", "SUM(z)"), "z)", "unknown column", "ms"),
    (BASE.replace("SUM(x)", "SUM(k)"), "k)", "numeric", "ms"),
    (BASE.replace("DESCRIPTOR(t)", "DESCRIPTOR(y)"), "y)", "time column", "ms"),
    (BASE.replace("GROUP BY window_start, window_end", "GROUP BY window_start, window_end, kk")
     .replace("SUM(x)", "kk, SUM(x)"), "kk\n", "unknown column", "ms"),
    (BASE.replace("INTERVAL '5' SECOND", "INTERVAL '5' MILLISECOND"), "INTERVAL '5' MILL",
     "whole number", "s"),
    (BASE.replace("INTERVAL '5' SECOND", "INTERVAL '5' SECOND"), "INTERVAL", "declared", None),
    (BASE.replace("INTERVAL '5' SECOND", "0"), "0)", "positive", "ms"),
    (BASE.replace("GROUP BY", "WHERE nope = 1 GROUP BY"), "nope", "unknown column", "ms"),
])
def test_bind_errors_name_the_position(text: str, at: str, msg: str, unit: str | None) -> None:
    text = text.replace(", kk", ",\n kk") if "kk" in text else text
    with pytest.raises(ParseError) as ei:
        bind(parse(text), SCHEMA, unit)
    assert ei.value.pos == text.index(at.replace("kk\n", "kk", 1) if at == "kk\n" else at,
                                      text.index("GROUP") if at == "kk\n" else 0)
    assert msg in str(ei.value) or (ei.value.hint and msg in ei.value.hint)


def test_count_sql_end_to_end() -> None:
    rng = np.random.default_rng(9)
    table = make_stream(rng, 300, keys=3)
    text = ("SELECT window_start, window_end, k, SUM(y) AS s, COUNT(x) AS c FROM TABLE(HOP_ROWS("
            "TABLE s, 3, 8)) GROUP BY window_start, window_end, k")
    op = bind(parse(text), table.schema, "ms")
    assert_same_rows(op.process(table).to_pylist(), oracle(table, op.cfg), ("k",))
