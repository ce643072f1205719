"""The GRETA query language (event trend aggregation, paper Fig. 2) - parser and binder.

Grammar (keywords case-insensitive)::

    query   := [FROM stream] RETURN item (, item)* [FROM stream]
               PATTERN pattern [WHERE predicate] [GROUP-BY attr (, attr)*]
               WITHIN duration [SLIDE duration] [;]
    item    := COUNT(*) | COUNT(var) | (MIN | MAX | SUM | AVG)(var.attr) | attr   [AS name]
    pattern := NOT pattern | atom +*
    atom    := SEQ(pattern, pattern, ...) | ( pattern ) | EventType [var]
    predicate := the shared expression grammar plus
                 [attr, var.attr, ...]     equivalence: all events of a trend share these values
                 NEXT(var).attr            the attribute of the next event of a trend (edge predicate)

``FROM stream`` (an extension; the paper's queries read "the" stream) names the stored stream to
read; without it the caller chooses the stream. ``GROUP BY`` is accepted for ``GROUP-BY``.
``SLIDE`` defaults to ``WITHIN`` (tumbling windows). Durations: ``10 minutes``, ``10s``,
``INTERVAL '5' SECOND`` or a bare number of stream units. Semantics are documented in
:mod:`replaydb.operators.greta`.

Example::

    RETURN sector, COUNT(*) PATTERN Stock S+
    WHERE [company, sector] AND S.price > NEXT(S).price
    GROUP-BY sector WITHIN 10 minutes SLIDE 10 seconds
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pyarrow as pa

from replaydb.errors import ParseError, QueryError, UsageError
from replaydb.operators.base import DEFAULT_STATE_CAP
from replaydb.operators.expr import Call, Column, Expr, ExprError
from replaydb.operators.exprcode.check import check_condition, schema_kinds
from replaydb.operators.greta.config import (
    GretaConfig,
    Pattern,
    PNot,
    PPlus,
    PSeq,
    PType,
    ReturnItem,
    pattern_types,
)
from replaydb.planner.lang import detect as detection
from replaydb.planner.lang.parser_base import ParserBase
from replaydb.timeunits import to_units

LANGUAGE = "greta"

_CLAUSE_WORDS = ("RETURN", "FROM", "PATTERN", "WHERE", "GROUP", "WITHIN", "SLIDE", "AS", "NOT",
                 "SEQ", "AND", "OR")
_AGGS = ("COUNT", "MIN", "MAX", "SUM", "AVG")


@dataclass(frozen=True)
class GretaQuery:
    """A parsed GRETA query (the logical form; see the module docstring).

    ``within``/``slide`` are ``(amount, unit word, position)`` as written; :func:`bind` converts
    them into stream units.
    """

    text: str
    sources: tuple[str, ...]
    event_types: tuple[str, ...]
    pattern: Pattern
    returns: tuple[ReturnItem, ...]
    where: Expr | None
    group_by: tuple[str, ...]
    group_by_pos: tuple[int, ...]
    within: tuple[Fraction, str, int]
    slide: tuple[Fraction, str, int] | None
    language: str = LANGUAGE


detect = detection.greta


class _Parser(ParserBase):
    def parse_query(self) -> GretaQuery:
        sources: list[str] = []
        if self.accept_kw("FROM"):
            sources.append(str(self.expect_ident("a stream name").value))
        self.expect_kw("RETURN")
        returns = [self._return_item()]
        while self.accept_op(","):
            returns.append(self._return_item())
        if self.accept_kw("FROM"):
            if sources:
                raise self.error("FROM given twice", self.toks[self.i - 1].pos)
            sources.append(str(self.expect_ident("a stream name").value))
        self.expect_kw("PATTERN")
        pattern = self._pattern()
        where = None
        if self.accept_kw("WHERE"):
            where = self.parse_expr()
        group_by: list[str] = []
        group_pos: list[int] = []
        if self.at_kw("GROUP"):
            self.advance()
            if self.accept_op("-"):
                self.expect_kw("BY")
            else:
                self.expect_kw("BY")
            while True:
                if self.tok.is_kw(*_CLAUSE_WORDS):
                    self._expected.append("an attribute")
                    raise self.error(f"unexpected {self.tok.describe()}")
                tok = self.expect_ident("an attribute")
                name = str(tok.value)
                if self.accept_op("."):
                    name = str(self.expect_ident("an attribute").value)
                group_by.append(name)
                group_pos.append(tok.pos)
                if not self.accept_op(","):
                    break
        self.expect_kw("WITHIN")
        within = self.parse_duration()
        slide = None
        if self.accept_kw("SLIDE"):
            slide = self.parse_duration()
        self.accept_op(";")
        self.expect_eof()
        types = tuple(dict.fromkeys(t.type for t in pattern_types(pattern)))
        return GretaQuery(
            text=self.text, sources=tuple(sources), event_types=types, pattern=pattern,
            returns=tuple(returns), where=where, group_by=tuple(group_by),
            group_by_pos=tuple(group_pos), within=within, slide=slide,
        )

    # ------------------------------------------------------------------ RETURN
    def _return_item(self) -> ReturnItem:
        tok = self.tok
        if tok.kind == "ident" and tok.is_kw(*_AGGS) and self.peek().is_op("("):
            kind = tok.text.lower()
            self.advance()
            self.expect_op("(")
            if kind == "count":
                if self.accept_op("*"):
                    item = ReturnItem("count_star", pos=tok.pos)
                else:
                    var = self.expect_ident("'*' or an event variable")
                    item = ReturnItem("count", var=str(var.value), pos=tok.pos)
            else:
                var = self.expect_ident("an event variable")
                self.expect_op(".")
                attr = self.expect_ident("an attribute")
                item = ReturnItem(kind, var=str(var.value), attr=str(attr.value), pos=tok.pos)
            self.expect_op(")")
        else:
            if self.tok.is_kw(*_CLAUSE_WORDS):
                self._expected.append("an aggregate or a grouping attribute")
                raise self.error(f"unexpected {self.tok.describe()}")
            name_tok = self.expect_ident("an aggregate or a grouping attribute")
            name = str(name_tok.value)
            if self.accept_op("."):
                name = str(self.expect_ident("an attribute").value)
            item = ReturnItem("attr", attr=name, pos=name_tok.pos)
        if self.accept_kw("AS"):
            alias = self.expect_ident("an output column name")
            item = ReturnItem(item.kind, item.var, item.attr, str(alias.value), item.pos)
        return item

    # ------------------------------------------------------------------ PATTERN
    def _pattern(self) -> Pattern:
        self._depth += 1
        try:
            if self._depth > 200:
                raise self.error("pattern nested too deeply")
            tok = self.accept_kw("NOT")
            if tok is not None:
                return PNot(self._pattern(), tok.pos)
            p = self._atom()
            while self.at_op("+"):
                p = PPlus(p, self.advance().pos)
            return p
        finally:
            self._depth -= 1

    def _atom(self) -> Pattern:
        tok = self.tok
        if tok.is_kw("SEQ") and self.peek().is_op("("):
            self.advance()
            self.expect_op("(")
            items = [self._pattern()]
            while self.accept_op(","):
                items.append(self._pattern())
            self.expect_op(")")
            return PSeq(tuple(items), tok.pos)
        if self.accept_op("("):
            p = self._pattern()
            self.expect_op(")")
            return p
        if tok.kind != "ident" or tok.is_kw(*_CLAUSE_WORDS):
            self._expected.extend(["an event type", "SEQ", "NOT", "'('"])
            raise self.error(f"unexpected {tok.describe()}")
        self.advance()
        type_name = str(tok.value)
        alias = type_name
        nxt = self.tok
        if nxt.kind == "ident" and not nxt.is_kw(*_CLAUSE_WORDS):
            alias = str(self.advance().value)
        return PType(type_name, alias, tok.pos)

    # ------------------------------------------------------------------ WHERE atoms
    def parse_primary_hook(self) -> Expr | None:
        tok = self.tok
        if tok.is_op("["):
            self.advance()
            cols: list[Column] = []
            while True:
                name = self.expect_ident("an attribute")
                if self.accept_op("."):
                    attr = self.expect_ident("an attribute")
                    cols.append(Column(str(attr.value), str(name.value), pos=name.pos))
                else:
                    cols.append(Column(str(name.value), pos=name.pos))
                if not self.accept_op(","):
                    break
            self.expect_op("]")
            return Call("EQUIV", tuple(cols), pos=tok.pos)
        if tok.is_kw("NEXT") and self.peek().is_op("("):
            self.advance()
            self.expect_op("(")
            var = self.expect_ident("an event variable")
            if self.accept_op("."):
                attr = self.expect_ident("an attribute")
                self.expect_op(")")
            else:
                self.expect_op(")")
                self.expect_op(".")
                attr = self.expect_ident("an attribute")
            return Column(str(attr.value), str(var.value), ("next", 1), pos=tok.pos)
        return None


def parse(text: str) -> GretaQuery:
    """Parse a GRETA query; :class:`~replaydb.errors.ParseError` names the position on bad text."""
    return _Parser(text).parse_query()


def _units(q: GretaQuery, dur: tuple[Fraction, str, int], unit: str | None, what: str) -> int:
    amount, word, pos = dur
    try:
        v = to_units(amount, word, unit)
    except UsageError as e:
        raise ParseError(str(e), text=q.text, pos=pos, hint=e.hint) from None
    if v <= 0:
        raise ParseError(f"{what} must be positive", text=q.text, pos=pos)
    return v


def to_config(q: GretaQuery, time_unit: str | None, *, type_column: str = "type",
              exact_type: str = "decimal") -> GretaConfig:
    """The operator configuration of a parsed query (durations converted to stream units)."""
    within = _units(q, q.within, time_unit, "WITHIN")
    slide = _units(q, q.slide, time_unit, "SLIDE") if q.slide is not None else None
    return GretaConfig(
        pattern=q.pattern, returns=q.returns, within=within, slide=slide, where=q.where,
        group_by=q.group_by, type_column=type_column, exact_type=exact_type, text=q.text,
    )


def bind(query: GretaQuery, schema: pa.Schema, time_unit: str | None, *,
         type_column: str = "type", exact_type: str = "decimal",
         state_cap: int | None = DEFAULT_STATE_CAP, **_options: object):
    """Validate ``query`` against ``schema`` and return a ready
    :class:`~replaydb.operators.greta.GretaOperator`.

    Errors name the query position (:class:`ParseError`). Unknown options are ignored so that the
    caller can pass options meant for other languages.
    """
    from replaydb.operators.greta.operator import GretaOperator

    cfg = to_config(query, time_unit, type_column=type_column, exact_type=exact_type)
    check_condition(query.where, schema_kinds(schema), calls={"EQUIV": "b"})
    try:
        return GretaOperator(cfg, schema=schema, state_cap=state_cap)
    except ExprError as e:
        if e.pos is not None:
            raise ParseError(e.reason, text=query.text, pos=e.pos, hint=e.hint) from None
        raise
    except QueryError:
        raise


__all__ = ["LANGUAGE", "GretaQuery", "bind", "detect", "parse", "to_config"]

