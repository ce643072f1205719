"""The SASE+ subset parser for imprecise patterns and its binding to a stream schema."""

from __future__ import annotations

from fractions import Fraction

import pyarrow as pa
import pytest

from replaydb.errors import ParseError, QueryError
from replaydb.operators.expr import Binary, Column, Literal
from replaydb.operators.imprecise import ImprecisePatternOperator
from replaydb.planner.lang import imprecise as lang
from replaydb.planner.lang.imprecise import LANGUAGE, bind, detect, parse

SCHEMA = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                    ("t_lower", pa.int64()), ("t_upper", pa.int64()), ("v", pa.int64()),
                    ("node", pa.string()), ("w", pa.list_(pa.int64()))])


def test_sase_style_and_paper_style_agree():
    a = parse("PATTERN SEQ(TaskStart a, CPU b, TaskFinish c) "
              "WHERE skip_till_next_match(a, b, c) { b.v > 95 AND c.node = a.node } "
              "WITHIN 15 seconds RETURN a, b.v")
    b = parse("PATTERN SEQ(TaskStart a, CPU b, TaskFinish c) "
              "WHERE b.v > 95 AND c.node = a.node AND skip_till_next_match(a, b, c) "
              "WITHIN 15 seconds RETURN a, b.v")
    for q in (a, b):
        assert q.strategy == "skip_till_next_match"
        assert [(c.type_name, c.var) for c in q.components] == [
            ("TaskStart", "a"), ("CPU", "b"), ("TaskFinish", "c")]
        assert q.window[:2] == (Fraction(15), "seconds")
        assert [(r.var, r.attr) for r in q.returns] == [("a", None), ("b", "v")]
        assert q.event_types == ("TaskStart", "CPU", "TaskFinish")
        assert q.sources == ()
    assert a.predicates == b.predicates
    assert a.predicates[0] == Binary(">", Column("v", "b"), Literal(95))


def test_defaults_and_contract():
    q = parse("PATTERN SEQ(A a, B b) WITHIN 10")
    assert q.strategy == "skip_till_any_match"
    assert q.predicates == () and q.returns == () and q.equivalence == ()
    assert q.text == "PATTERN SEQ(A a, B b) WITHIN 10"
    assert LANGUAGE == "sase-imprecise"
    assert detect("PATTERN SEQ(A a) WITHIN 5") is False
    assert detect(None) is False  # type: ignore[arg-type]
    q2 = parse("pattern seq(A a) where skip_till_any_match(a) {} within 5 units;")
    assert q2.window[:2] == (Fraction(5), "units")
    assert hash(q2) == hash(parse("pattern seq(A a) where skip_till_any_match(a) {} "
                                  "within 5 units;"))


def test_equivalence_test_expands_at_bind():
    q = parse("PATTERN SEQ(A a, B b, C c) WHERE skip_till_any_match(a, b, c) { [node] AND "
              "a.v > 1 } WITHIN 10")
    assert q.equivalence == (("node", q.text.index("[")),)
    op = bind(q, SCHEMA, None)
    assert isinstance(op, ImprecisePatternOperator)
    preds = [str(p) for p in op.cfg.predicates]
    assert preds == ["a.v > 1", "a.node = b.node", "a.node = c.node"]


def test_window_units_convert_with_the_stream_unit():
    q = parse("PATTERN SEQ(A a, B b) WITHIN 2 seconds")
    assert bind(q, SCHEMA, "ms").cfg.window == 2000
    assert bind(parse("PATTERN SEQ(A a) WITHIN 5s"), SCHEMA, "s").cfg.window == 5
    with pytest.raises(ParseError) as ei:
        bind(q, SCHEMA, None)
    assert ei.value.pos == q.text.index("2 seconds")


@pytest.mark.parametrize("text, where, fragment", [
    ("PATTERN SEQ(A a, B b)", "end", "WITHIN"),
    ("PATTERN SEQ(A a, B+ b[]) WITHIN 5", "+", "Kleene"),
    ("PATTERN SEQ(A a, ~B b) WITHIN 5", "~", "negation"),
    ("PATTERN SEQ(A a, B b) WHERE strict_contiguity(a, b) WITHIN 5", "strict", "not supported"),
    ("PATTERN SEQ(A a, B b) WHERE a.v = 1 AND partition_contiguity(a, b) WITHIN 5", "partition",
     "not supported"),
    ("PATTERN SEQ(A a, B b) WHERE skip_till_any_match(b, a) WITHIN 5", "skip",
     "every pattern variable"),
    ("PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { skip_till_next_match(a, b) } "
     "WITHIN 5", "skip_till_next", "twice"),
    ("PATTERN SEQ(A a, B b) WHERE a.v = 1 OR skip_till_any_match(a, b) WITHIN 5", "skip",
     "top-level"),
    ("PATTERN SEQ(A a, B a) WITHIN 5", "B a", "declared twice"),
    ("PATTERN SEQ(A a, B b) WHERE a.v = 1 WITHIN 5 RETURN", "end", "unexpected"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 extra", "extra", "unexpected"),
    ("PATTERN SEQ(A a) WHERE NOT [v] WITHIN 5", "[", "top-level"),
])
def test_parse_errors_name_the_position(text, where, fragment):
    with pytest.raises(ParseError) as ei:
        parse(text)
    err = ei.value
    pos = len(text) if where == "end" else text.index(where)
    assert err.pos == pos, (err, pos)
    assert fragment in str(err) or fragment in (err.hint or "")


@pytest.mark.parametrize("text, fragment, at", [
    ("PATTERN SEQ(A a, B b) WHERE x.v = 1 WITHIN 5", "unknown pattern variable", "x.v"),
    ("PATTERN SEQ(A a, B b) WHERE v = 1 WITHIN 5", "must be qualified", "v = 1"),
    ("PATTERN SEQ(A a, B b) WHERE a.nope = 1 WITHIN 5", "unknown attribute", "a.nope"),
    ("PATTERN SEQ(A a, B b) WHERE [nope] WITHIN 5", "unknown attribute", "[nope]"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 RETURN c", "unknown pattern variable", "c"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 RETURN a.nope", "unknown attribute", "a.nope"),
])
def test_bind_errors_name_the_position(text, fragment, at):
    with pytest.raises(ParseError) as ei:
        bind(parse(text), SCHEMA, None)
    assert fragment in str(ei.value)
    assert ei.value.pos == text.rindex(at)


def test_bind_checks_the_stream_columns():
    q = parse("PATTERN SEQ(A a) WITHIN 5")
    with pytest.raises(QueryError, match="lower-bound column 'lo'"):
        bind(q, SCHEMA, None, lower_col="lo")
    with pytest.raises(QueryError, match="integer"):
        bind(q, SCHEMA, None, upper_col="node")
    with pytest.raises(QueryError, match="type column 'kind'"):
        bind(q, SCHEMA, None, type_column="kind")
    with pytest.raises(QueryError, match="list of weights"):
        bind(q, SCHEMA, None, pmf_col="v")
    with pytest.raises(QueryError, match="no pmf column"):
        bind(q, SCHEMA, None, pmf_col="nope")
    op = bind(q, SCHEMA, None, pmf_col="w", framework="point", exact=True)
    assert op.cfg.framework == "point" and op.cfg.pmf_column == "w" and op.cfg.exact
    assert bind(q, SCHEMA, None).cfg.framework == lang.DEFAULT_FRAMEWORK == "event"
    assert bind(q, SCHEMA, None).cfg.method == lang.DEFAULT_METHOD == "query_order"


def test_case_insensitive_keywords_and_variables():
    q = parse("pattern SEQ(A Ab, B bB) where SKIP_TILL_ANY_MATCH(ab, BB) { AB.v < bb.v } "
              "within 3 return AB")
    op = bind(q, SCHEMA, None)
    assert [str(p) for p in op.cfg.predicates] == ["Ab.v < bB.v"]
    assert op.output_schema.names[-1] == "Ab_seq"


def test_output_schema_follows_return():
    op = bind(parse("PATTERN SEQ(A a, B b) WITHIN 5 RETURN b, a.node, b.v"), SCHEMA, None,
              exact=True)
    assert op.output_schema.names == ["t", "t_start", "t_end", "confidence", "confidence_exact",
                                      "signature", "b_seq", "a_node", "b_v"]
    assert op.output_schema.field("a_node").type == pa.string()
    default = bind(parse("PATTERN SEQ(A a, B b) WITHIN 5"), SCHEMA, None)
    assert default.output_schema.names == ["t", "t_start", "t_end", "confidence", "signature",
                                           "a_seq", "b_seq"]


def test_from_names_the_stream_as_in_sase():
    q = parse("FROM readings PATTERN SEQ(E a, E b) WHERE a.v = 7 WITHIN 10")
    assert q.sources == ("readings",)
    assert parse("PATTERN SEQ(E a, E b) WITHIN 10").sources == ()
    with pytest.raises(ParseError):
        parse("FROM PATTERN SEQ(E a, E b) WITHIN 10")
