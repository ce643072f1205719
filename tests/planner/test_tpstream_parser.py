"""The TPStream query language: the documents' queries, errors with positions, binding."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from replaydb.errors import ParseError, UsageError
from replaydb.operators.expr import Between, Binary, Column, Literal
from replaydb.planner.lang import tpstream as L

DISSERTATION = """FROM CarSensors PARTITION BY car_id
DEFINE A AS accel > 8m/s2 AT LEAST 5s,
       B AS speed > 70 mph BETWEEN 4s AND 30s,
       C AS accel < -9m/s2 AT LEAST 3s
PATTERN A meets;overlaps;starts;during B
    AND B contains;finishes;overlaps;meets C
    AND A before C
WITHIN 5 minutes
RETURN first(B.car_id) AS id,
       avg(B.speed) AS avg_speed;"""

PAPER = """FROM   CarSensors CS PARTITION BY CS.car_id
DEFINE A AS CS.accel > 8m/s2 at least 5s,
       B AS CS.speed > 70 mph between 4s AND 30s,
       C AS CS.accel < -9m/s2 at least 3s
PATTERN A meets B; A overlaps B; A starts B; A during B
        AND C during B; B finishes C; B overlaps C; B meets C
        AND A before C
WITHIN 5 MINUTES
RETURN first(B.car_id) AS id,
        avg(B.speed) AS avg_speed;"""

SCHEMA = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("car_id", pa.int64()),
                    ("speed", pa.float64()), ("accel", pa.float64())])


def test_dissertation_listing_5_1() -> None:
    q = L.parse(DISSERTATION)
    assert q.sources == ("CarSensors",) and q.event_types == () and q.text == DISSERTATION
    assert q.partition_by == ("car_id",)
    assert [d.name for d in q.defines] == ["A", "B", "C"]
    a, b, c = q.defines
    assert a.condition == Binary(">", Column("accel"), Literal(8))
    assert (a.at_least.amount, a.at_least.word, a.at_most) == (5, "s", None)
    assert (b.at_least.amount, b.at_most.amount) == (4, 30)
    assert c.condition == Binary("<", Column("accel"), Literal(-9))
    assert [(x.left, x.right, set(x.relations)) for x in q.constraints] == [
        ("A", "B", {"meets", "overlaps", "starts", "during"}),
        ("B", "C", {"contains", "finishes", "overlaps", "meets"}),
        ("A", "C", {"before"}),
    ]
    assert (q.window.amount, q.window.word) == (5, "minutes")
    assert [(r.func, r.symbol, r.attr, r.alias) for r in q.returns] == [
        ("first", "B", "car_id", "id"), ("avg", "B", "speed", "avg_speed")]


def test_paper_long_form_means_the_same() -> None:
    q1, q2 = L.parse(DISSERTATION), L.parse(PAPER)
    assert q2.alias == "CS"
    op1 = L.bind(q1, SCHEMA, "s")
    op2 = L.bind(q2, SCHEMA, "s")
    assert op1.config.relation_matrix() == op2.config.relation_matrix()
    assert q1.situation_conditions() == q2.situation_conditions()
    assert op1.config.situations[1].min_duration == 4
    assert op1.config.situations[1].max_duration == 30
    assert op1.config.window == 300
    assert L.bind(q1, SCHEMA, "ms").config.window == 300_000


def test_relation_spellings_and_short_form() -> None:
    q = L.parse("FROM s DEFINE A AS x > 1, B AS y > 1 PATTERN A met by;overlapped-by;"
                "finished_by;equal B WITHIN 10")
    assert set(q.constraints[0].relations) == {"met-by", "overlapped-by", "finished-by", "equals"}
    assert q.window.word == ""


@pytest.mark.parametrize("text, pos_of, expect", [
    ("FROM s DEFINE A AS x > 1 PATTERN A sometimes A WITHIN 5", "sometimes", "relation"),
    ("FROM s DEFINE A AS x > 1 PATTERN A before B WITHIN 5", "B WITHIN", "undefined situation"),
    ("FROM s DEFINE A AS x > 1, B AS y PATTERN A before B", "", "WITHIN"),
    ("FROM s DEFINE A AS x > , B AS y PATTERN A before B WITHIN 5", ", B AS", "unexpected"),
    ("FROM s DEFINE A AS B.x > 1, B AS y PATTERN A before B WITHIN 5", "B.x", "another situation"),
    ("FROM s DEFINE A AS x > 1, B AS y PATTERN A before B; B during C WITHIN 5", "C WITHIN",
     "undefined"),
    ("FROM s DEFINE A AS x>1, B AS y, C AS z PATTERN A before B; C during B WITHIN 5", "C during",
     "must relate A and B"),
    ("FROM s DEFINE A AS x > 1 AT LEAST foo PATTERN A before A WITHIN 5", "foo", "duration"),
    ("FROM s DEFINE before AS x > 1 PATTERN before before before WITHIN 5", "before AS",
     "relation"),
    ("FROM s DEFINE A AS x > 1, B AS y PATTERN A before B WITHIN 5 RETURN median(A.x)", "median",
     "aggregate"),
    ("FROM s DEFINE A AS x > 1, B AS y PATTERN A before B WITHIN 5 RETURN avg(A) AS q", ")",
     "needs"),
    ("FROM s DEFINE A AS x > 1, B AS y PATTERN A before A WITHIN 5", "A WITHIN", "different"),
    ("FROM s DEFINE A AS x > 1 AT LEAST 5s AND y PATTERN A before A WITHIN 5", "AND y",
     "after the duration"),
])
def test_errors_name_the_position(text: str, pos_of: str, expect: str) -> None:
    with pytest.raises(ParseError) as ei:
        L.parse(text)
    e = ei.value
    assert expect.lower() in str(e).lower()
    where = text.find(pos_of) if pos_of else len(text)
    assert e.pos == where, (str(e), e.pos, where)


def test_between_is_a_duration_only_with_units() -> None:
    q = L.parse("FROM s DEFINE A AS speed BETWEEN 60 AND 70, B AS x BETWEEN 1s AND 5s "
                "PATTERN A before B WITHIN 100")
    a, b = q.defines
    assert isinstance(a.condition, Between) and a.at_least is None
    assert b.condition == Column("x") and (b.at_least.amount, b.at_most.amount) == (1, 5)
    q = L.parse("FROM s DEFINE A AS speed BETWEEN 60 AND 70 AT MOST 9, B AS y "
                "PATTERN A before B WITHIN 100")
    assert isinstance(q.defines[0].condition, Between) and q.defines[0].at_most.amount == 9


def test_bind_checks_names_and_units() -> None:
    with pytest.raises(ParseError, match="nope") as ei:
        text = "FROM s DEFINE A AS nope > 1, B AS speed > 1 PATTERN A before B WITHIN 5"
        L.bind(L.parse(text), SCHEMA, "s")
    assert ei.value.pos == text.index("nope")
    with pytest.raises(ParseError, match="stream with a declared time unit"):
        L.bind(L.parse(DISSERTATION), SCHEMA, None)
    with pytest.raises(ParseError, match="whole number"):
        L.bind(L.parse("FROM s DEFINE A AS speed > 1, B AS speed > 2 PATTERN A before B "
                       "WITHIN 5 ms"), SCHEMA, "s")
    with pytest.raises(UsageError, match="unknown TPStream option"):
        L.bind(L.parse(DISSERTATION), SCHEMA, "s", colour="red")
    op = L.bind(L.parse(DISSERTATION), SCHEMA, "s", mode="low_latency", order="static")
    assert op.config.mode == "low_latency" and op.config.order == "static"


def test_detect() -> None:
    assert L.detect(DISSERTATION) and L.detect(PAPER)
    assert not L.detect("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B) DEFINE A AS x > 1)")
    assert not L.detect("PATTERN SEQ(A a, B b) WITHIN 5")
    assert not L.detect("")
    assert not L.detect(None)  # type: ignore[arg-type]


def test_range_conditions_for_the_planner() -> None:
    q = L.parse("FROM s DEFINE A AS speed > 70 AND speed <= 120 AND accel >= -3, "
                "B AS (x < 5 OR x BETWEEN 10 AND 20) AND NOT y > 3, C AS flag "
                "PATTERN A before B AND B before C WITHIN 5")
    rc = q.range_conditions()
    a = rc["A"]
    assert a["speed"] == L.AttributeRange("speed", 70, False, 120, True)
    assert a["accel"] == L.AttributeRange("accel", -3, True, None, True)
    assert rc["B"] == {"x": L.AttributeRange("x", None, True, 20, True)}
    assert rc["C"] == {}
    # necessary condition: every event satisfying the condition lies in the ranges
    from replaydb.operators.expr import evaluate_mask

    rng = np.random.default_rng(0)
    cols = {"speed": rng.uniform(0, 200, 500), "accel": rng.uniform(-10, 10, 500),
            "x": rng.uniform(-5, 30, 500), "y": rng.uniform(0, 6, 500), "flag": rng.random(500) > .5}
    for name, cond in q.situation_conditions().items():
        m = evaluate_mask(cond, cols, 500)
        for attr, r in rc[name].items():
            assert all(r.contains(v) for v in cols[attr][m])
    # qualified by the alias: stripped
    q = L.parse(PAPER)
    assert q.situation_conditions()["B"] == Binary(">", Column("speed"), Literal(70))
