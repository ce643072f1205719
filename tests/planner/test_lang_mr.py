"""SQL MATCH_RECOGNIZE front end: parsing, errors with positions, binding, Listing 3.1."""

from __future__ import annotations

import pyarrow as pa
import pytest

from replaydb.errors import ParseError, QueryError
from replaydb.operators.pattern import model as pm
from replaydb.operators.pattern import oracle
from replaydb.planner.lang import match_recognize as mr

# Listing 3.1 of the dissertation, as printed (typographic quotes and comments included).
LISTING_3_1 = """SELECT * FROM CRIMES MATCH_RECOGNIZE (
MEASURES A.ID, B.ID, C.ID
PATTERN A T* B T* C WITHIN 30 MINUTES
DEFINE
A AS A.PRIMARY = \u2019ROBBERY\u2019 AND A.BEAT = 2232,
-- Variant 2: X1 <= A.LAT <= X2 AND Y1 <= A.LON <= Y2,
B AS B.PRIMARY = \u2019BATTERY\u2019 AND B.BEAT = A.BEAT,
-- Variant 2: X1 <= B.LAT <= X2 AND Y1 <= B.LON <= Y2,
C AS C.PRIMARY = \u2019VEHICLE THEFT\u2019 AND C.BEAT = A.BEAT
-- Variant 2: X1 <= C.LAT <= X2 AND Y1 <= C.LON <= Y2,
)"""

CRIMES = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("ID", pa.int64()),
                    ("PRIMARY", pa.string()), ("BEAT", pa.int64()), ("LAT", pa.float64()),
                    ("LON", pa.float64())])
MIN = 60  # stream in seconds


def crimes(rows: list[tuple[int, str, int]]) -> pa.Table:
    n = len(rows)
    return pa.table({"t": [r[0] for r in rows], "seq": list(range(n)),
                     "ID": [100 + i for i in range(n)], "PRIMARY": [r[1] for r in rows],
                     "BEAT": [r[2] for r in rows], "LAT": [41.8] * n, "LON": [-87.6] * n},
                    schema=CRIMES)


def test_listing_3_1_parses_and_runs_as_written() -> None:
    assert mr.detect(LISTING_3_1)
    q = mr.parse(LISTING_3_1)
    assert q.sources == ("CRIMES",) and q.event_types == () and q.text == LISTING_3_1
    spec = q.spec
    assert spec.pattern == pm.Seq((pm.Var("A"), pm.Repeat(pm.Var("T"), 0, None), pm.Var("B"),
                                pm.Repeat(pm.Var("T"), 0, None), pm.Var("C")))
    assert [m.name for m in spec.measures] == ["A.ID", "B.ID", "C.ID"]
    assert q.pattern_spec("s").window == 30 * MIN
    assert q.pattern_spec("ms").window == 30 * MIN * 1000
    rows = [(0, "ROBBERY", 2232), (5 * MIN, "THEFT", 2232), (10 * MIN, "BATTERY", 2232),
            (12 * MIN, "BATTERY", 1111), (20 * MIN, "VEHICLE THEFT", 2232),
            (40 * MIN, "ROBBERY", 2232), (50 * MIN, "BATTERY", 2232),
            (80 * MIN, "VEHICLE THEFT", 2232),           # 40 minutes after its robbery
            (90 * MIN, "ROBBERY", 2232), (95 * MIN, "BATTERY", 7),
            (99 * MIN, "VEHICLE THEFT", 2232)]            # battery in another beat
    op = mr.bind(q, CRIMES, "s")
    out = op.process(crimes(rows)).to_pylist()
    assert [(r["A.ID"], r["B.ID"], r["C.ID"]) for r in out] == [(100, 102, 104)]
    assert out[0]["first_t"] == 0 and out[0]["t"] == 20 * MIN
    # the same query through the brute-force oracle
    spec30 = q.pattern_spec("s")
    assert [m[1] for m in oracle.matches(spec30, crimes(rows))] == [(0, 1, 2, 3, 4)]


def test_clauses_and_quantifiers() -> None:
    q = mr.parse("""SELECT mn, n AS cnt FROM s MATCH_RECOGNIZE (
        PARTITION BY k ORDER BY t, seq
        MEASURES MATCH_NUMBER() AS mn, COUNT(B.*) n, FINAL LAST(B.x) AS lb
        ALL ROWS PER MATCH SHOW EMPTY MATCHES
        AFTER MATCH SKIP TO FIRST b
        PATTERN ((a | c) b{2,}? d{,3} e{2})
        WITHIN INTERVAL '5' SECOND
        DEFINE a AS x > 0, b AS x > PREV(x, 2)
    ) AS m;""")
    s = q.spec
    assert s.semantics == pm.Semantics.SQL and s.partition_by == ("k",)
    assert s.rows_per_match == pm.RowsPerMatch.ALL
    assert (s.after_match_skip.kind, s.after_match_skip.var) == (pm.SkipKind.TO_FIRST, "B")
    assert s.pattern == pm.Seq((pm.Seq((pm.Alt((pm.Var("A"), pm.Var("C"))),)), pm.Repeat(pm.Var("B"), 2, None, False),
                             pm.Repeat(pm.Var("D"), 0, 3), pm.Repeat(pm.Var("E"), 2, 2)))
    assert [m.name for m in s.measures] == ["mn", "n", "lb"]
    assert q.window is not None and q.pattern_spec("ms").window == 5000
    assert [i.alias for i in s.select] == [None, "cnt"]


def test_select_list_projection() -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("x", pa.float64())])
    q = mr.parse("SELECT first_seq, A.x AS ax, last_t - first_t AS span, mx * 2 FROM s "
                 "MATCH_RECOGNIZE (MEASURES A.x, MAX(x) AS mx PATTERN (A B+) "
                 "DEFINE B AS B.x > PREV(B.x))")
    op = mr.bind(q, sch, None)
    tab = pa.table({"t": [1, 2, 3, 4, 5], "seq": [0, 1, 2, 3, 4], "x": [1.0, 2.0, 3.0, 1.0, 4.0]},
                   schema=sch)
    out = op.process(tab)
    assert out.schema.names == ["first_seq", "ax", "span", "mx * 2"]
    assert out.to_pylist() == [{"first_seq": 0, "ax": 1.0, "span": 2, "mx * 2": 6.0},
                               {"first_seq": 3, "ax": 1.0, "span": 1, "mx * 2": 8.0}]


@pytest.mark.parametrize("text,pos,expected", [
    ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A B) DEFINE A AS)", 58, "a value"),
    ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A B DEFINE A AS x > 1)", 46, "')'"),
    ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A |) DEFINE A AS x > 1)", 45, "a pattern variable"),
    ("SELECT * FROM s MATCH_RECOGNIZE (DEFINE A AS x > 1)", 33, "PATTERN"),
    ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) WITHIN 5 parsecs DEFINE A AS true)", 54,
     "DEFINE"),
    ("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t, x PATTERN (A) DEFINE A AS true)", 45, "SEQ"),
    ("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t DESC PATTERN (A) DEFINE A AS true)", 44, None),
    ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) SUBSET U (A) DEFINE A AS true)", 54, "'='"),
    ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A {- B) DEFINE A AS true)", 48, "'-}'"),
    ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (PERMUTE(A, B DEFINE A AS true)", 55, "','"),
    ("SELECT * s MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS true)", 9, "FROM"),
])
def test_parse_errors_name_position_and_expected(text: str, pos: int, expected: str | None) -> None:
    with pytest.raises(ParseError) as ei:
        mr.parse(text)
    err = ei.value
    assert err.pos == pos, (err.pos, str(err))
    if expected is not None:
        assert expected in err.expected, err.expected
    assert f"column {pos + 1}" in str(err)


def test_bind_errors() -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("x", pa.float64())])
    with pytest.raises(QueryError, match="unknown column 'y'.*position 57"):
        mr.bind(mr.parse("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS y > 1)"),
                sch, None)
    # a quantified group that can match zero rows binds (its rule: docs/decisions.md)
    mr.bind(mr.parse("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A (B?)+) DEFINE A AS x > 1)"),
            sch, None)
    with pytest.raises(QueryError, match="cannot be used with ALL ROWS PER MATCH WITH UNMATCHED"):
        mr.bind(mr.parse("SELECT * FROM s MATCH_RECOGNIZE (ALL ROWS PER MATCH WITH UNMATCHED ROWS "
                         "PATTERN (A {- B -}) DEFINE A AS x > 1)"), sch, None)
    with pytest.raises(QueryError, match="unknown pattern variable 'Z'"):
        mr.bind(mr.parse("SELECT * FROM s MATCH_RECOGNIZE (MEASURES Z.x AS z PATTERN (A) "
                         "DEFINE A AS x > 1)"), sch, None)
    with pytest.raises(ParseError, match="whole number"):
        mr.bind(mr.parse("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) WITHIN 1 ms "
                         "DEFINE A AS x > 1)"), sch, "s")
    with pytest.raises(ParseError, match="declared time unit"):
        mr.bind(mr.parse("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) WITHIN 1 minute "
                         "DEFINE A AS x > 1)"), sch, None)
    with pytest.raises(TypeError, match="bogus"):
        mr.bind(mr.parse("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x > 1)"),
                sch, None, bogus=1)


def test_detect() -> None:
    assert mr.detect("  select * from s match_recognize (pattern (a) define a as true)")
    assert not mr.detect("PATTERN SEQ(A a)")
    assert not mr.detect("SELECT * FROM s")
    assert not mr.detect("")


def test_case_insensitive_variables_and_columns() -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("Price", pa.float64())])
    q = mr.parse("select * from s match_recognize (measures last(up.price) as p "
                 "pattern (start up+) define up as up.PRICE > prev(Price))")
    op = mr.bind(q, sch, None)
    tab = pa.table({"t": [1, 2, 3, 4], "seq": [0, 1, 2, 3], "Price": [3.0, 4.0, 5.0, 1.0]},
                   schema=sch)
    assert op.process(tab).column("p").to_pylist() == [5.0]


def test_reluctant_versus_greedy() -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("x", pa.float64())])
    tab = pa.table({"t": [1, 2, 3, 4], "seq": [0, 1, 2, 3], "x": [1.0, 1.0, 1.0, 1.0]},
                   schema=sch)
    greedy = mr.bind(mr.parse("SELECT * FROM s MATCH_RECOGNIZE (MEASURES COUNT(*) AS n "
                              "PATTERN (A B+) DEFINE A AS true)"), sch, None)
    reluctant = mr.bind(mr.parse("SELECT * FROM s MATCH_RECOGNIZE (MEASURES COUNT(*) AS n "
                                 "PATTERN (A B+?) DEFINE A AS true)"), sch, None)
    assert greedy.process(tab).column("n").to_pylist() == [4]
    assert reluctant.process(tab).column("n").to_pylist() == [2, 2]


DATASET_QUERIES = [
    # the example queries the project's dataset generators publish
    ("SELECT * FROM flights MATCH_RECOGNIZE (ORDER BY t "
     "MEASURES A.t AS first_t, C.t AS last_t, A.delay AS first_delay, C.delay AS last_delay "
     "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
     "PATTERN (A T1* B T2* C) WITHIN 3 HOURS "
     "DEFINE A AS A.origin = 'ORD' AND A.delay BETWEEN 30 AND 59, "
     "B AS B.origin = 'ORD' AND B.delay BETWEEN 60 AND 119, "
     "C AS C.origin = 'ORD' AND C.delay >= 120, T1 AS TRUE, T2 AS TRUE)",
     [("origin", pa.string()), ("delay", pa.float64())]),
    ("SELECT * FROM flights MATCH_RECOGNIZE (PARTITION BY origin ORDER BY t "
     "MEASURES FIRST(D.t) AS first_t, LAST(D.t) AS last_t, COUNT(D.delay) AS delayed_departures "
     "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (D{5,}) WITHIN 1 HOUR "
     "DEFINE D AS D.delay >= 60)", [("origin", pa.string()), ("delay", pa.float64())]),
    ("SELECT * FROM gpu_bench MATCH_RECOGNIZE (ORDER BY t "
     "MEASURES FIRST(A.t) AS a_t, LAST(C.t) AS c_t ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
     "PATTERN (A B* C) WITHIN 65536 "
     "DEFINE A AS A.v1 < 0.01, B AS B.v2 > PREV(B.v2), C AS C.v3 >= A.v3 + 0.5)",
     [("v1", pa.float32()), ("v2", pa.float32()), ("v3", pa.float32())]),
    ("SELECT * FROM synthetic MATCH_RECOGNIZE (ORDER BY t "
     "MEASURES FIRST(S1.seq) AS first_seq, LAST(S3.seq) AS last_seq "
     "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (S1 S2 T1* S3) WITHIN 300 "
     "DEFINE S1 AS S1.A3 >= 0.41 AND S1.A3 <= 0.47, S2 AS S2.A1 >= 0.1 AND S2.A1 <= 0.2, "
     "S3 AS S3.A3 >= 0.5 AND S3.A3 <= 0.9, T1 AS TRUE)",
     [("A1", pa.float64()), ("A3", pa.float64())]),
    ("SELECT * FROM stock MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY t "
     "MEASURES FIRST(A.price) AS start_price, LAST(A.price) AS top_price, "
     "B.volume AS drop_volume ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
     "PATTERN (A{5,} B) WITHIN 500 DEFINE A AS A.price >= PREV(A.price), B AS B.volume < 150)",
     [("symbol", pa.int64()), ("price", pa.float64()), ("volume", pa.float64())]),
]


@pytest.mark.parametrize("text,cols", DATASET_QUERIES)
def test_dataset_example_queries_bind_and_run(text: str, cols: list) -> None:
    import numpy as np

    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), *cols])
    rng = np.random.default_rng(1)
    n = 300
    data = {"t": np.arange(n, dtype=np.int64) * 60, "seq": np.arange(n, dtype=np.int64)}
    for name, typ in cols:
        if pa.types.is_string(typ):
            data[name] = rng.choice(["ORD", "JFK"], n).tolist()
        elif pa.types.is_integer(typ):
            data[name] = rng.integers(0, 2, n)
        else:
            data[name] = (rng.random(n) * (150 if name in ("delay", "price", "volume") else 1))
    tab = pa.table(data, schema=sch)
    q = mr.parse(text)
    op = mr.bind(q, sch, "s")
    out = op.process(tab)
    assert out.schema == op.output_schema
    assert out.num_rows == len(oracle.matches(q.pattern_spec("s"), tab))


def test_listing_3_1_end_to_end_through_the_store(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import replaydb
    from replaydb.store.schema import Attribute, StreamSchema

    store = replaydb.open(tmp_path / "store", create=True)
    store.create_stream("CRIMES", StreamSchema(
        (Attribute("ID", "int64"), Attribute("PRIMARY", "string"), Attribute("BEAT", "int64"),
         Attribute("LAT", "float64"), Attribute("LON", "float64")), time_unit="s"))
    rows = [(0, "ROBBERY", 2232), (5 * MIN, "THEFT", 2232), (10 * MIN, "BATTERY", 2232),
            (20 * MIN, "VEHICLE THEFT", 2232), (40 * MIN, "ROBBERY", 2232),
            (50 * MIN, "BATTERY", 2232), (80 * MIN, "VEHICLE THEFT", 2232)]
    tab = crimes(rows)
    store.append("CRIMES", tab.drop_columns(["seq"]))
    res = replaydb.query(store, LISTING_3_1, time_format="raw").table.to_pylist()
    assert [(r["A.ID"], r["B.ID"], r["C.ID"], r["t"]) for r in res] == [(100, 102, 103, 20 * MIN)]


def test_order_by_names_the_time_column_checked_at_bind():
    """ORDER BY may name t or the stream's source time column (an alias replay marks)."""
    q = mr.parse("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY x PATTERN (A) DEFINE A AS true)")
    plain = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("x", pa.float64())])
    with pytest.raises(ParseError) as ei:
        mr.bind(q, plain, None)
    assert ei.value.pos == 42 and "t" in ei.value.expected
    aliased = pa.schema([("t", pa.int64()), ("seq", pa.int64()),
                         pa.field("x", pa.int64(), metadata={"replaydb.alias_of": "t"})])
    assert mr.bind(q, aliased, None) is not None


def test_aggregates_over_expressions_in_measures() -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("price", pa.float64()),
                     ("volume", pa.int64())])
    q = mr.parse("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t MEASURES "
                 "SUM(B.price * B.volume) AS turnover, AVG(price - 1) AS avg_less, "
                 "MAX(ABS(B.price - A.price * 0 - 10)) AS dev, COUNT(B.price * 2) AS nb "
                 "ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS B.price > PREV(B.price))")
    with pytest.raises(QueryError, match="must all be of one pattern variable"):
        mr.bind(q, sch, None)
    tab = pa.table({"t": [1, 2, 3, 4, 5], "seq": [0, 1, 2, 3, 4],
                    "price": [10.0, 11.0, 13.0, 9.0, 12.0], "volume": [5, 6, 7, 8, 9]},
                   schema=sch)
    q = mr.parse("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t MEASURES "
                 "SUM(B.price * B.volume) AS turnover, AVG(price - 1) AS avg_less, "
                 "MAX(ABS(B.price - 12)) AS dev, COUNT(B.price * 2) AS nb "
                 "ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS B.price > PREV(B.price))")
    out = mr.bind(q, sch, None).process(tab).select(["turnover", "avg_less", "dev", "nb"])
    assert out.to_pylist() == [
        {"turnover": 11.0 * 6 + 13.0 * 7, "avg_less": (9.0 + 10.0 + 12.0) / 3, "dev": 1.0,
         "nb": 2},
        {"turnover": 12.0 * 9, "avg_less": (8.0 + 11.0) / 2, "dev": 0.0, "nb": 1}]


@pytest.mark.parametrize("measure,message", [
    ("SUM(PREV(B.price) * 2)", "PREV cannot be nested in SUM"),
    ("SUM(B.price + SUM(B.price))", "SUM cannot be nested in SUM"),
    ("SUM(B.price + CLASSIFIER())", "CLASSIFIER cannot be nested in SUM"),
    ("SUM(A.price * B.price)", "must all be of one pattern variable, not A, B"),
])
def test_aggregates_over_expressions_reject_what_sql_forbids(measure: str, message: str) -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("price", pa.float64())])
    q = mr.parse(f"SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t MEASURES {measure} AS m "
                 "PATTERN (A B+) DEFINE B AS B.price > PREV(B.price))")
    with pytest.raises(QueryError, match=message):
        mr.bind(q, sch, None).process(
            pa.table({"t": [1, 2], "seq": [0, 1], "price": [1.0, 2.0]}, schema=sch))
