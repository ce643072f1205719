"""The configuration of a GRETA operator: pattern nodes, RETURN items and :class:`GretaConfig`.

The parser (``replaydb.planner.lang.greta``) builds these objects; the operator compiles them. They
live in the operators layer so that the operator can be configured without the planner (live use).

Pattern nodes follow the grammar of the GRETA paper (Fig. 2)::

    P := EventType [Alias] | P+ | NOT P | SEQ(P, P [, P ...])

``SEQ`` is n-ary. An event type appears at most once in a pattern (paper Sec. 2); the alias names
the event type's state in predicates and aggregates (it defaults to the type's name).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replaydb.operators.expr import Expr


@dataclass(frozen=True)
class PType:
    """One event type (a state of the template), e.g. ``Stock S``."""

    type: str
    alias: str
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PPlus:
    """Kleene plus ``P+``."""

    inner: Pattern
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PNot:
    """Negation ``NOT P`` (only inside a ``SEQ``)."""

    inner: Pattern
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PSeq:
    """Event sequence ``SEQ(P1, ..., Pn)``."""

    items: tuple[Pattern, ...]
    pos: int | None = field(default=None, compare=False)


Pattern = PType | PPlus | PNot | PSeq


def pattern_text(p: Pattern) -> str:
    """Canonical text of a pattern (for EXPLAIN and messages)."""
    if isinstance(p, PType):
        return p.type if p.alias == p.type else f"{p.type} {p.alias}"
    if isinstance(p, PPlus):
        inner = pattern_text(p.inner)
        return f"{inner}+" if isinstance(p.inner, PType | PSeq) and not (
            isinstance(p.inner, PType) and p.inner.alias != p.inner.type) else f"({inner})+"
    if isinstance(p, PNot):
        return f"NOT {pattern_text(p.inner)}"
    return "SEQ(" + ", ".join(pattern_text(i) for i in p.items) + ")"


def pattern_types(p: Pattern) -> list[PType]:
    """Every event-type leaf of the pattern, in textual order."""
    if isinstance(p, PType):
        return [p]
    if isinstance(p, PPlus | PNot):
        return pattern_types(p.inner)
    out: list[PType] = []
    for item in p.items:
        out.extend(pattern_types(item))
    return out


AGG_KINDS = ("count_star", "count", "min", "max", "sum", "avg")


@dataclass(frozen=True)
class ReturnItem:
    """One RETURN item: a grouping attribute (``kind='attr'``) or an aggregate.

    ``var`` is the pattern variable (alias or type name) of ``COUNT(E)`` / ``MIN(E.attr)`` ...;
    ``attr`` the attribute of MIN/MAX/SUM/AVG or the name of a grouping attribute.
    """

    kind: str
    var: str | None = None
    attr: str | None = None
    alias: str | None = None
    pos: int | None = field(default=None, compare=False)

    def default_name(self) -> str:
        if self.kind == "attr":
            return str(self.attr)
        if self.kind == "count_star":
            return "COUNT(*)"
        if self.kind == "count":
            return f"COUNT({self.var})"
        return f"{self.kind.upper()}({self.var}.{self.attr})"

    @property
    def name(self) -> str:
        return self.alias or self.default_name()


EXACT_TYPES = ("decimal", "string", "int64")


@dataclass(frozen=True)
class GretaConfig:
    """Frozen configuration of :class:`~replaydb.operators.greta.GretaOperator`.

    ``within`` and ``slide`` are in stream time units (already converted). ``where`` is the WHERE
    predicate as an expression tree, with equivalence lists as ``Call('EQUIV', columns)`` and
    ``NEXT(E).attr`` as ``Column(attr, E, index=('next', 1))``. ``exact_type`` chooses the Arrow type
    of exact integer results (COUNT, SUM of integers): ``'decimal'`` (decimal128(38, 0), the
    default), ``'string'`` (decimal digits, unlimited) or ``'int64'``; a value that does not fit the
    chosen type raises :class:`~replaydb.errors.OperatorError` (never a silent overflow).
    ``text`` is the query text, used only in messages.
    """

    pattern: Pattern
    returns: tuple[ReturnItem, ...]
    within: int
    slide: int | None = None
    where: Expr | None = None
    group_by: tuple[str, ...] = ()
    type_column: str = "type"
    exact_type: str = "decimal"
    text: str = ""

    @property
    def slide_units(self) -> int:
        return self.within if self.slide is None else self.slide
