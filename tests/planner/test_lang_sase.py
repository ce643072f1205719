"""SASE+ front end: the paper's queries, translation rules, errors with positions."""

from __future__ import annotations

import pyarrow as pa
import pytest

from replaydb.errors import ParseError, QueryError
from replaydb.operators.pattern import oracle
from replaydb.operators.pattern.model import Neg, Repeat, Seq, Strategy, Var
from replaydb.planner.lang import sase

HOUR = 3600


def table(schema: pa.Schema, rows: list[tuple]) -> pa.Table:
    cols = list(zip(*rows)) if rows else [[] for _ in schema.names[2:]]
    data = {"t": [r[0] for r in rows], "seq": list(range(len(rows)))}
    for name, col in zip(schema.names[2:], cols[1:]):
        data[name] = list(col)
    return pa.table(data, schema=schema)


RFID = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                  ("tag_id", pa.int64())])


def test_query_1_shoplifting_negation_and_equivalence() -> None:
    q = sase.parse("""PATTERN SEQ(SHELF-READING x, ~(COUNTER-READING y), EXIT-READING z)
                      WHERE [tag_id] WITHIN 12 hours""")
    assert q.event_types == ("SHELF-READING", "COUNTER-READING", "EXIT-READING")
    assert q.spec.pattern == Seq((Var("x"), Neg(Var("y")), Var("z")))
    assert q.spec.equivalence == ("tag_id",) and q.sources == ()
    rows = [(1, "SHELF-READING", 1), (2, "SHELF-READING", 2), (3, "COUNTER-READING", 2),
            (4, "SHELF-READING", 3), (5, "COUNTER-READING", 9), (6, "EXIT-READING", 1),
            (7, "EXIT-READING", 2), (20 * HOUR, "EXIT-READING", 3)]
    op = sase.bind(q, RFID, "s")
    out = op.process(table(RFID, rows)).to_pylist()
    assert [(r["tag_id"], r["x.seq"], r["z.seq"]) for r in out] == [(1, 0, 5)]


SHIP = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                  ("kind", pa.string()), ("site", pa.string()), ("from", pa.string()),
                  ("to", pa.string())])


def test_query_2_contamination_skip_till_any_transitive_closure() -> None:
    q = sase.parse("""PATTERN SEQ(Alert a, Shipment+ b[ ])
        WHERE skip_till_any_match(a, b[ ]) {
            a.kind = 'contaminated' and b[1].from = a.site and b[i].from = b[i-1].to }
        WITHIN 3 hours
        RETURN a.site, b[1].from, b[b.len].to AS dest, b.len""")
    assert q.spec.strategy == Strategy.SKIP_TILL_ANY
    rows = [(0, "Alert", "contaminated", "X", None, None),
            (10, "Shipment", None, None, "X", "Y"), (20, "Shipment", None, None, "Y", "Z"),
            (30, "Shipment", None, None, "X", "W"), (40, "Shipment", None, None, "Z", "Q"),
            (4 * HOUR, "Shipment", None, None, "Q", "R")]
    tab = table(SHIP, rows)
    out = sase.bind(q, SHIP, "s").process(tab).to_pylist()
    got = sorted((r["dest"], r["b.len"]) for r in out)
    assert got == [("Q", 3), ("W", 1), ("Y", 1), ("Z", 2)]
    assert all(r["a.site"] == "X" and r["b[1].from"] == "X" for r in out)
    spec = q.pattern_spec("s")
    assert [m[1] for m in oracle.run_operator(spec, tab)] == [m[1] for m in
                                                             oracle.matches(spec, tab)]


STOCK = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                   ("symbol", pa.string()), ("price", pa.float64()), ("volume", pa.float64())])
QUERY_3 = """PATTERN SEQ(Stock+ a[], Stock b)
WHERE skip_till_next_match(a[], b) {
    [symbol]
    and a[1].volume > 1000
    and a[i].price > avg(a[..i-1].price)
    and b.volume < 80% * a[a.len].volume }
WITHIN 1 hour
RETURN a[1].price AS p0, avg(a[].price), b.volume"""


def test_query_3_trend_with_running_average() -> None:
    q = sase.parse(QUERY_3)
    rows = [(0, "Stock", "X", 10.0, 2000.0), (1, "Stock", "Y", 5.0, 2000.0),
            (2, "Stock", "X", 11.0, 500.0), (3, "Stock", "X", 12.0, 600.0),
            (4, "Stock", "Y", 6.0, 100.0), (5, "Stock", "X", 3.0, 100.0)]
    out = sase.bind(q, STOCK, "s").process(table(STOCK, rows)).to_pylist()
    assert [(r["symbol"], r["first_seq"], r["last_seq"], r["p0"], r["avg(a[].price)"])
            for r in out] == [("X", 0, 2, 10.0, 10.0), ("Y", 1, 4, 5.0, 5.0),
                              ("X", 0, 5, 10.0, 11.0)]
    spec = q.pattern_spec("s")
    d = {v.name: v.condition for v in spec.defines}
    assert "COUNT(a.*) = 1 OR" in str(d["a"])        # a[i] > avg(a[..i-1]) only for i > 1
    assert "0.8 * a.volume" in str(d["b"])            # 80% and a[a.len] attached to b


def test_strategies_reproduce_fig_2_6() -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string())])
    tab = pa.table({"t": [1, 2, 3, 4, 5, 6], "seq": list(range(6)), "type": list("abacbc")},
                   schema=sch)
    counts = {}
    for fn in ("strict_contiguity", "skip_till_next_match", "skip_till_any_match"):
        q = sase.parse(f"FROM trace PATTERN SEQ(a x, b* y[], c z) WHERE {fn}(x, y, z)")
        assert q.sources == ("trace",)
        counts[fn] = sase.bind(q, sch, None).process(tab).num_rows
    assert counts == {"strict_contiguity": 1, "skip_till_next_match": 2,
                      "skip_till_any_match": 9}


def test_partition_contiguity_and_any_types() -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                     ("k", pa.int64())])
    tab = pa.table({"t": [1, 2, 3, 4], "seq": [0, 1, 2, 3], "type": ["a", "z", "b", "b"],
                    "k": [1, 2, 1, 2]}, schema=sch)
    q = sase.parse("PATTERN SEQ(a x, ANY(b, c) y) WHERE partition_contiguity(x, y) { [k] }")
    assert q.spec.strategy == Strategy.PARTITION_CONTIGUITY
    assert sase.bind(q, sch, None).process(tab).column("x.seq").to_pylist() == [0]
    q2 = sase.parse("PATTERN SEQ(a x, ANY(b, c) y) WHERE strict_contiguity(x, y) { [k] }")
    assert sase.bind(q2, sch, None).process(tab).num_rows == 0
    q3 = sase.parse("PATTERN SEQ(ANY x, ANY y) WHERE strict_contiguity(x, y) { x.k = y.k }")
    assert q3.event_types == ()
    assert sase.bind(q3, sch, None).process(tab).num_rows == 0


def test_kleene_previous_element_and_len() -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                     ("x", pa.float64())])
    q = sase.parse("""PATTERN SEQ(S a, S+ b[], S c)
        WHERE skip_till_next_match(a, b[], c) {
            b[1].x > a.x and b[i].x > b[i-1].x and c.x < b[b.len].x and b.len >= 2 }""")
    spec = q.spec
    assert spec.pattern == Seq((Var("a"), Repeat(Var("b"), 1, None), Var("c")))
    tab = pa.table({"t": list(range(6)), "seq": list(range(6)), "type": ["S"] * 6,
                    "x": [1.0, 2.0, 0.5, 3.0, 1.0, 0.0]}, schema=sch)
    out = sase.bind(q, sch, None).process(tab).to_pylist()
    assert [(r["a.seq"], r["b.first_seq"], r["b.last_seq"], r["b.len"], r["c.seq"])
            for r in out] == [(0, 1, 3, 2, 4)]
    ms = oracle.matches(q.pattern_spec(None), tab)
    assert [m[1] for m in oracle.run_operator(q.pattern_spec(None), tab)] == [m[1] for m in ms]
    assert all(len([v for v in m[2] if v == "b"]) >= 2 for m in ms)


@pytest.mark.parametrize("text,at,expected", [
    ("PATTERN SEQ(A a, B b", None, "')'"),
    ("PATTERN SEQ(A a) WHERE skip_till_next_match(a) { a.x > }", "}", "a value"),
    ("PATTERN SEQ(A+ a[], B b) WHERE a[j].x > 1", "j", "i"),
    ("PATTERN (A a)", "(", "SEQ"),
    ("PATTERN SEQ(~N n, A a)", "~", None),
    ("PATTERN SEQ(A a, A a)", "a)", None),
    ("PATTERN SEQ(A a, B b) WHERE c.x > 1", "c.x", None),
    ("PATTERN SEQ(A a) WITHIN 5 parsecs", "parsecs", "end of query"),
])
def test_parse_errors_name_position_and_expected(text: str, at: str | None,
                                                 expected: str | None) -> None:
    pos = len(text) if at is None else text.index(at)
    with pytest.raises(ParseError) as ei:
        sase.parse(text)
    assert ei.value.pos == pos, (ei.value.pos, str(ei.value))
    if expected is not None:
        assert expected in ei.value.expected, ei.value.expected


def test_bind_errors_and_options() -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("kind", pa.string()),
                     ("x", pa.float64())])
    q = sase.parse("PATTERN SEQ(A a, B b) WHERE b.x > a.x")
    with pytest.raises(QueryError, match="no 'type' column"):
        sase.bind(q, sch, None)
    op = sase.bind(q, sch, None, type_column="kind")
    tab = pa.table({"t": [1, 2], "seq": [0, 1], "kind": ["A", "B"], "x": [1.0, 2.0]}, schema=sch)
    assert op.process(tab).num_rows == 1
    with pytest.raises(QueryError, match="unknown column 'y'"):
        sase.bind(sase.parse("PATTERN SEQ(A a, B b) WHERE b.y > a.x"), sch, None,
                  type_column="kind")
    with pytest.raises(ParseError, match="declared time unit"):
        sase.bind(sase.parse("PATTERN SEQ(A a, B b) WITHIN 1 hour"), sch, None,
                  type_column="kind")


def test_detect() -> None:
    assert sase.detect("PATTERN SEQ(A a)")
    assert sase.detect("from s pattern SEQ(A a)")
    assert not sase.detect("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS true)")
    assert not sase.detect("")


def test_dataset_example_queries() -> None:
    """The SASE+ example queries the project's dataset generators publish."""
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                     ("symbol", pa.int64()), ("price", pa.float64()), ("volume", pa.float64())])
    q = sase.parse("PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_next_match(a[], b) "
                   "{ [symbol] AND a[1].price % 500 = 0 AND a[i].price > a[i-1].price "
                   "AND b.volume < 150 } WITHIN 500")
    n = 400
    tab = pa.table({"t": list(range(n)), "seq": list(range(n)), "type": ["Stock"] * n,
                    "symbol": [i % 2 for i in range(n)],
                    "price": [float((i * 37) % 1000) for i in range(n)],
                    "volume": [float((i * 53) % 300) for i in range(n)]}, schema=sch)
    spec = q.pattern_spec(None)
    got = oracle.run_operator(spec, tab, batch_rows=64)
    assert got == oracle.matches(spec, tab) and got
    sch2 = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                      ("value", pa.int64())])
    q2 = sase.parse("PATTERN SEQ(E a, E b, E c) WHERE skip_till_any_match(a, b, c) "
                    "{ a.value % 7 = 0 AND b.value % 11 = 0 AND c.value % 13 = 0 } WITHIN 100")
    tab2 = pa.table({"t": list(range(60)), "seq": list(range(60)), "type": ["E"] * 60,
                     "value": list(range(60))}, schema=sch2)
    spec2 = q2.pattern_spec(None)
    got2 = oracle.run_operator(spec2, tab2)
    assert got2 == oracle.matches(spec2, tab2) and got2


def test_end_to_end_types_from_several_streams(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Event types as stored streams: the replay merges them (equal timestamps included) and
    synthesizes the type column; the SASE+ query runs over the store."""
    import replaydb
    from replaydb.store.schema import Attribute, StreamSchema

    store = replaydb.open(tmp_path / "store", create=True)
    data = {"SHELF": [(1, 1), (2, 2), (4, 3)], "COUNTER": [(3, 2), (5, 9)],
            "EXIT": [(6, 1), (6, 2), (20 * HOUR, 3)]}
    for name, rows in data.items():
        store.create_stream(name, StreamSchema((Attribute("tag_id", "int64"),), time_unit="s"))
        store.append(name, pa.table({"t": [r[0] for r in rows], "tag_id": [r[1] for r in rows]}))
    q = "PATTERN SEQ(SHELF x, ~(COUNTER y), EXIT z) WHERE [tag_id] WITHIN 12 hours"
    res = replaydb.query(store, q, time_format="raw").table.to_pylist()
    assert [(r["tag_id"], r["first_t"], r["last_t"]) for r in res] == [(1, 1, 6)]
