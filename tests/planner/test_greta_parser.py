"""GRETA query language: parsing, detection, binding errors with positions, plan choices."""

from __future__ import annotations

from fractions import Fraction

import pyarrow as pa
import pytest

from replaydb.errors import ParseError, QueryError
from replaydb.operators.expr import Call, Column
from replaydb.operators.greta.config import PNot, PPlus, PSeq, PType
from replaydb.operators.greta.plan import FENWICK, NONE, POINT, SCAN
from replaydb.planner.lang.greta import bind, detect, parse, to_config

SCHEMA = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                    ("company", pa.int64()), ("sector", pa.string()), ("price", pa.float64()),
                    ("volume", pa.int64()), ("job", pa.int64()), ("mapper", pa.int64()),
                    ("cpu", pa.int64()), ("load", pa.int64()), ("vehicle", pa.int64()),
                    ("segment", pa.int64()), ("speed", pa.int64()), ("attr", pa.int64())])

Q1 = ("RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [company, sector] AND "
      "S.price > NEXT(S).price GROUP-BY sector WITHIN 10 minutes SLIDE 10 seconds")
Q2 = ("RETURN mapper, SUM(M.cpu) PATTERN SEQ(Start S, Measurement M+, End E) "
      "WHERE [job, mapper] AND M.load < NEXT(M).load GROUP-BY mapper WITHIN 1 minute "
      "SLIDE 30 seconds")
Q3 = ("RETURN segment, COUNT(*), AVG(P.speed) PATTERN SEQ(NOT Accident A, Position P+) "
      "WHERE [P.vehicle, segment] AND P.speed > NEXT(P).speed GROUP-BY segment "
      "WITHIN 5 minutes SLIDE 1 minute")


def test_paper_queries_parse() -> None:
    q1 = parse(Q1)
    assert q1.pattern == PPlus(PType("Stock", "S"))
    assert q1.group_by == ("sector",)
    assert q1.within[:2] == (Fraction(10), "minutes")
    assert q1.slide[:2] == (Fraction(10), "seconds")
    assert [r.kind for r in q1.returns] == ["attr", "count_star"]
    assert q1.event_types == ("Stock",)
    assert q1.sources == ()
    q2 = parse(Q2)
    assert q2.pattern == PSeq((PType("Start", "S"), PPlus(PType("Measurement", "M")),
                               PType("End", "E")))
    assert q2.returns[1].kind == "sum" and q2.returns[1].var == "M" and q2.returns[1].attr == "cpu"
    q3 = parse(Q3)
    assert q3.pattern.items[0] == PNot(PType("Accident", "A"))
    eq = q3.where.left
    assert isinstance(eq, Call) and eq.name == "EQUIV"
    assert eq.args == (Column("vehicle", "P"), Column("segment"))
    nxt = q3.where.right.right
    assert nxt == Column("speed", "P", ("next", 1))


def test_bind_paper_queries_and_index_choice() -> None:
    op1 = bind(parse(Q1), SCHEMA, "s")
    g = op1.plan.graphs[0]
    assert g.part_attrs == ("sector", "company")
    assert [g.indexes[t.index].kind for t in g.transitions] == [FENWICK]
    assert g.transitions[0].op == ">"
    assert op1.plan.within == 600 and op1.plan.slide == 10 and op1.plan.K == 60
    op2 = bind(parse(Q2), SCHEMA, "ms")
    g2 = op2.plan.graphs[0]
    kinds = {(g2.states[t.src], g2.states[t.dst]): g2.indexes[t.index].kind
             for t in g2.transitions}
    assert kinds == {("S", "M"): NONE, ("M", "M"): FENWICK, ("M", "E"): NONE}
    assert op2.plan.within == 60_000
    op3 = bind(parse(Q3), SCHEMA, "s")
    main, neg = op3.plan.graphs
    assert main.part_attrs == ("segment", "vehicle")
    assert neg.part_attrs == ("segment",)
    assert op3.plan.negations[0].common == ("segment",)
    assert op3.plan.negations[0].negation.case == 3
    assert "graph 1" in op3.explain()


def test_point_and_scan_indexes() -> None:
    base = "RETURN COUNT(*) PATTERN A+ WHERE {} WITHIN 10"
    kinds = {"A.attr = NEXT(A).attr": POINT, "A.attr != NEXT(A).attr": SCAN,
             "A.attr < NEXT(A).attr AND A.volume > NEXT(A).volume": SCAN,
             "ABS(A.attr - NEXT(A).attr) < 3": SCAN,
             "NEXT(A).attr * 2 >= A.attr + 1": FENWICK}
    for pred, kind in kinds.items():
        op = bind(parse(base.format(pred)), SCHEMA, None)
        g = op.plan.graphs[0]
        assert g.indexes[g.transitions[0].index].kind == kind, pred
    op = bind(parse(base.format("NEXT(A).attr * 2 >= A.attr + 1")), SCHEMA, None)
    t = op.plan.graphs[0].transitions[0]
    assert t.op == "<=" and str(t.probe) == "NEXT(A).attr * 2"


def test_detect_and_from_clause() -> None:
    assert detect(Q1)
    assert detect("  return count(*) pattern A+ within 5")
    assert detect("FROM trades RETURN COUNT(*) PATTERN A+ WITHIN 5")
    assert not detect("FROM trades PATTERN SEQ(A a, B b) WITHIN 5")
    assert not detect("SELECT * FROM t")
    assert not detect("RETURN 'unterminated")
    assert parse("FROM trades RETURN COUNT(*) PATTERN A+ WITHIN 5").sources == ("trades",)
    assert parse("RETURN COUNT(*) FROM trades PATTERN A+ WITHIN 5").sources == ("trades",)
    q = parse("return count(*) as n pattern seq(a x, b+) group by attr within 5s slide 1s;")
    assert q.returns[0].alias == "n"
    assert q.group_by == ("attr",)
    assert q.slide[:2] == (Fraction(1), "s")


@pytest.mark.parametrize("text,pos,expected", [
    ("RETURN COUNT(*) PATTERN WITHIN 5", 24, "an event type"),
    ("RETURN COUNT(*) PATTERN A+ WITHIN", 33, "a duration"),
    ("RETURN COUNT(*) PATTERN SEQ(A, B WITHIN 5", 33, "')'"),
    ("RETURN COUNT(* PATTERN A WITHIN 5", 15, "')'"),
    ("RETURN COUNT(*) PATTERN A+ WHERE [a, WITHIN 5", 44, "']'"),
    ("RETURN COUNT(*) PATTERN A+ WHERE NEXT(A.x WITHIN 5", 42, "')'"),
    ("RETURN COUNT(*) PATTERN A+ GROUP-BY WITHIN 5", 36, "an attribute"),
    ("RETURN COUNT(*) PATTERN A+ WITHIN 5 extra", 36, "end of query"),
    ("PATTERN A+ WITHIN 5", 0, "RETURN"),
])
def test_parse_errors_name_the_position(text: str, pos: int, expected: str) -> None:
    with pytest.raises(ParseError) as ei:
        parse(text)
    assert ei.value.pos == pos, str(ei.value)
    assert any(expected.lower() in e.lower() for e in ei.value.expected), ei.value.expected


@pytest.mark.parametrize("text,pos,msg", [
    ("RETURN COUNT(*) PATTERN SEQ(A, A) WITHIN 5", 31, "appears twice"),
    ("RETURN COUNT(*) PATTERN SEQ(A x, B x) WITHIN 5", 33, "used twice"),
    ("RETURN COUNT(*) PATTERN (NOT A)+ WITHIN 5", 31, "NOT P"),
    ("RETURN COUNT(*) PATTERN NOT A WITHIN 5", 24, "outermost"),
    ("RETURN COUNT(*) PATTERN SEQ(A, NOT B, NOT C, D) WITHIN 5", 38, "consecutive"),
    ("RETURN COUNT(*) PATTERN (SEQ(A, NOT B))+ WITHIN 5", 32, "top-level SEQ"),
    ("RETURN COUNT(*) PATTERN SEQ(A, NOT SEQ(NOT B, C), D) WITHIN 5", 39, "top-level SEQ"),
    ("RETURN COUNT(*) PATTERN A+ WHERE A.nope > 1 WITHIN 5", 33, "unknown attribute"),
    ("RETURN COUNT(*) PATTERN A+ WHERE Q.attr > 1 WITHIN 5", 33, "unknown event variable"),
    ("RETURN COUNT(*) PATTERN SEQ(A, B) WHERE B.attr < NEXT(A).attr WITHIN 5", 47,
     "never directly follows"),
    ("RETURN COUNT(*) PATTERN SEQ(A, B) WHERE A.attr < B.attr WITHIN 5", 47, "NEXT"),
    ("RETURN COUNT(*) PATTERN SEQ(A, B) WHERE [A.attr] WITHIN 5", 41, "applies to"),
    ("RETURN SUM(B.attr) PATTERN SEQ(A, NOT B, C) WITHIN 5", 7, "negated"),
    ("RETURN SUM(A.sector) PATTERN A+ WITHIN 5", 7, "numeric"),
    ("RETURN sector, COUNT(*) PATTERN A+ WITHIN 5", 7, "GROUP-BY"),
    ("RETURN COUNT(*), COUNT(*) PATTERN A+ WITHIN 5", 17, "twice"),
    ("RETURN COUNT(*) PATTERN A+ WITHIN 0", 34, "positive"),
])
def test_bind_errors_name_the_position(text: str, pos: int, msg: str) -> None:
    with pytest.raises(QueryError) as ei:
        bind(parse(text), SCHEMA, None)
    assert isinstance(ei.value, ParseError), repr(ei.value)
    assert ei.value.pos == pos, str(ei.value)
    assert msg.lower() in str(ei.value).lower()


def test_duration_needs_time_unit() -> None:
    with pytest.raises(ParseError) as ei:
        bind(parse("RETURN COUNT(*) PATTERN A+ WITHIN 10 minutes"), SCHEMA, None)
    assert ei.value.pos == 34
    cfg = to_config(parse("RETURN COUNT(*) PATTERN A+ WITHIN 10 minutes SLIDE 1 minute"), "ms")
    assert (cfg.within, cfg.slide) == (600_000, 60_000)
    cfg = to_config(parse("RETURN COUNT(*) PATTERN A+ WITHIN 7"), None)
    assert (cfg.within, cfg.slide_units) == (7, 7)


def test_missing_columns() -> None:
    schema = pa.schema([("t", pa.int64()), ("kind", pa.string())])
    with pytest.raises(QueryError, match="no column 'type'"):
        bind(parse("RETURN COUNT(*) PATTERN A+ WITHIN 5"), schema, None)
    op = bind(parse("RETURN COUNT(*) PATTERN A+ WITHIN 5"), schema, None, type_column="kind")
    assert op.output_schema.names == ["window_start", "window_end", "COUNT(*)", "last_seq"]
