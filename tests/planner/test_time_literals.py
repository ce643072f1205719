"""Time literals and instant typing, piece by piece: the literal's instant (zones, offsets,
fractions, daylight saving), its value in a stream's unit, the replacement inside a parsed query,
and which output expressions are instants."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest

from replaydb.errors import QueryError
from replaydb.operators.expr import Binary, Call, Column, Literal, TimeLiteral
from replaydb.operators.instants import is_instant
from replaydb.planner.lang.match_recognize import parse
from replaydb.planner.time_literals import resolve_time_literals
from replaydb.timeunits import instant_ns, instant_units


def _ns(*args: int, tz: dt.tzinfo = dt.timezone.utc) -> int:
    delta = dt.datetime(*args, tzinfo=tz) - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1_000


def test_literal_forms_name_their_instant() -> None:
    base = _ns(2001, 3, 1, 8, 0)
    assert instant_ns("2001-03-01 08:00") == base
    assert instant_ns("2001-03-01T08:00:00Z") == base
    assert instant_ns(" 2001-3-1 8:00:00 ") == base
    assert instant_ns("2001-03-01 09:00 +01:00") == base
    assert instant_ns("2001-03-01 03:00-05") == base
    assert instant_ns("2001-03-01 08:00:00.000000001") == base + 1
    assert instant_ns("2001-03-01 08:00:00.25") == base + 250_000_000
    assert instant_ns("2001-03-01", "DATE") == _ns(2001, 3, 1)
    # a zone name follows daylight saving: 08:00 in Berlin is 07:00 UTC in winter, 06:00 in
    # summer; a literal without a zone is read in the query's zone
    assert instant_ns("2001-03-01 08:00 Europe/Berlin") == _ns(2001, 3, 1, 7, 0)
    assert instant_ns("2001-07-01 08:00 Europe/Berlin") == _ns(2001, 7, 1, 6, 0)
    assert instant_ns("2001-07-01 08:00", zone="Europe/Berlin") == _ns(2001, 7, 1, 6, 0)
    assert instant_ns("1969-12-31 23:59:59") == -10**9


def test_literal_values_in_a_unit() -> None:
    assert instant_units("2001-03-01 08:00", "TIMESTAMP", "s") == _ns(2001, 3, 1, 8) // 10**9
    assert instant_units("2001-03-01 08:00:00.5", "TIMESTAMP", "ms") == \
        _ns(2001, 3, 1, 8) // 10**6 + 500
    with pytest.raises(ValueError, match=r"finer than the stream's time unit \(s\)"):
        instant_units("2001-03-01 08:00:00.5", "TIMESTAMP", "s")
    with pytest.raises(ValueError, match="needs a stream with a declared time unit"):
        instant_units("2001-03-01", "DATE", None)


@dataclass(frozen=True)
class _Holder:
    exprs: tuple[object, ...]
    note: str = "kept"


def test_replacement_reaches_nested_dataclasses_and_keeps_the_rest() -> None:
    lit = TimeLiteral("TIMESTAMP", "1970-01-01 00:01:00", pos=7)
    tree = _Holder((Binary(">=", Column("t"), lit), [lit], {"k": lit}, "text"))
    out = resolve_time_literals(tree, "t >= TIMESTAMP '1970-01-01 00:01:00'", "s", "UTC")
    assert out.exprs[0] == Binary(">=", Column("t"), Literal(60))
    assert out.exprs[1] == [Literal(60)] and out.exprs[2] == {"k": Literal(60)}
    assert out.exprs[3] == "text" and out.note == "kept"
    assert tree.exprs[0].right is lit  # the parsed query itself is not changed
    untouched = _Holder((Column("t"),))
    assert resolve_time_literals(untouched, "no literal here", "s", "UTC") is untouched
    finer = _Holder((TimeLiteral("TIMESTAMP", "1970-01-01 00:00:00.5", pos=7),))
    with pytest.raises(QueryError, match="finer than.*at position 7"):
        resolve_time_literals(finer, "TIMESTAMP '1970-01-01 00:00:00.5'", "s", "UTC")


def test_a_parsed_query_keeps_its_literal_until_planned() -> None:
    q = parse("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t PATTERN (A) "
              "DEFINE A AS A.t < DATE '1970-01-02')")
    assert "TimeLiteral(kind='DATE', text='1970-01-02'" in repr(q)
    resolved = resolve_time_literals(q, q.text, "ms", "UTC")
    assert "TimeLiteral" not in repr(resolved)
    assert "Literal(value=86400000" in repr(resolved)
    assert "TimeLiteral" in repr(q)  # the parsed query itself is unchanged


@pytest.mark.parametrize("expr, instant", [
    (Column("t"), True), (Column("t", "A"), True), (Column("price", "A"), False),
    (Call("FIRST", (Column("t", "A"),)), True), (Call("LAST", (Column("t"), Literal(2))), True),
    (Call("MIN", (Column("t", "B"),)), True), (Call("SUM", (Column("t"),)), False),
    (Call("COUNT", (Column("t"),)), False), (Call("AVG", (Column("t"),)), False),
    (Call("LEAST", (Column("t", "A"), Column("t", "B"))), True),
    (Call("LEAST", (Column("t", "A"), Literal(5))), False),
    (Binary("+", Call("LAST", (Column("t"),)), Literal(60)), True),
    (Binary("+", Literal(60), Column("t")), True),
    (Binary("-", Column("t", "B"), Literal(60)), True),
    (Binary("-", Column("t", "B"), Column("t", "A")), False),
    (Binary("+", Column("t", "B"), Column("t", "A")), False),
    (Binary("*", Column("t"), Literal(2)), False),
    (Column("date"), False),
])
def test_which_expressions_are_instants(expr: object, instant: bool) -> None:
    assert is_instant(expr, {"t"}) is instant  # type: ignore[arg-type]
    if expr == Column("date"):
        assert is_instant(expr, {"t", "date"})  # type: ignore[arg-type]
