"""SASE+ pattern queries over streams with imprecise (interval) timestamps (paper 003).

This parser covers the subset of SASE+ that paper 003 evaluates - sequences of single events, no
Kleene closure or negation - with the same keywords, the same event-selection syntax and the
shared expression grammar (:mod:`replaydb.planner.lang.parser_base`), so it can later be folded
into the general SASE+ front end::

    [FROM stream]
    PATTERN SEQ(T1 v1, T2 v2, ...)
    [WHERE skip_till_any_match(v1, v2, ...) { predicate AND ... }     -- SASE+ style
         | predicate AND ... AND skip_till_next_match(v1, v2, ...)    -- paper 003 style
         | predicate AND ...]                                         -- default strategy
    WITHIN duration                                                   -- 100, 15 seconds, 5s ...
    [RETURN v1, v2.attr, ...]

Predicates compare attributes of one event to constants (``v1.v % 3 = 0``) or attributes of
several events (``v2.v > v1.v``); every attribute is qualified by a pattern variable. ``[attr]``
is the SASE+ equivalence test: all events of a match agree on ``attr``.

Decisions:

* The default strategy (no strategy function written) is ``skip_till_any_match``, the strategy
  paper 003 studies first; the strategy function must list every pattern variable in order.
* ``WITHIN`` is required: it bounds the operator's state and the possible worlds considered.
* ``strict_contiguity`` and ``partition_contiguity`` are rejected: under temporal uncertainty
  there is no order in which contiguity could be judged (paper 003 defines only the two
  skip-till strategies).
* :func:`detect` returns False for every text: a SASE+ query is routed here by the stream being
  declared imprecise (lower/upper columns), not by its text, which is plain SASE+.

Use on a live stream::

    from replaydb.planner.lang.imprecise import parse, bind
    op = bind(parse("PATTERN SEQ(A a, B b) WHERE b.v > a.v WITHIN 10"), schema, None)
    op.push(batch); op.flush(); op.results()
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction

import pyarrow as pa

from replaydb.errors import ParseError, QueryError, UsageError
from replaydb.operators.base import DEFAULT_STATE_CAP
from replaydb.operators.expr import Binary, Call, Column, Expr, columns, conjuncts
from replaydb.operators.exprcode.check import check_condition, schema_kinds
from replaydb.operators.imprecise import (
    DEFAULT_FRAMEWORK,
    DEFAULT_METHOD,
    Component,
    ImpreciseConfig,
    ImprecisePatternOperator,
    ReturnItem,
)
from replaydb.planner.lang.parser_base import ParserBase
from replaydb.timeunits import to_units

LANGUAGE = "sase-imprecise"

STRATEGY_FUNCTIONS = ("SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH")
UNSUPPORTED_STRATEGIES = ("STRICT_CONTIGUITY", "PARTITION_CONTIGUITY")
PARTITION_CALL = "__EQUIVALENCE__"
"""Call name the parser gives the ``[attr]`` equivalence test inside expressions."""


@dataclass(frozen=True)
class PatternComponent:
    type_name: str
    var: str
    pos: int


@dataclass(frozen=True)
class ReturnSpec:
    var: str
    attr: str | None
    pos: int


@dataclass(frozen=True)
class ImpreciseQuery:
    """The logical query (see the module docstring for the grammar).

    ``predicates`` are the WHERE conjuncts without the strategy function and without the
    equivalence tests, which are in ``equivalence`` (attribute name, position).
    ``window`` is ``(amount, unit word, position)`` as written; :func:`bind` converts it.
    """

    text: str
    components: tuple[PatternComponent, ...]
    strategy: str
    strategy_pos: int | None
    predicates: tuple[Expr, ...]
    equivalence: tuple[tuple[str, int], ...]
    window: tuple[Fraction, str, int]
    returns: tuple[ReturnSpec, ...]
    sources: tuple[str, ...] = ()

    @property
    def event_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.type_name for c in self.components))

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(c.var for c in self.components)


def detect(text: str) -> bool:
    """Always False: imprecise evaluation is chosen by the stream's declaration, not the text."""
    return False


class _Parser(ParserBase):
    def fail(self, message: str, pos: int | None = None, hint: str | None = None) -> ParseError:
        """A semantic error at ``pos`` (no 'expected' list: the tokens themselves parsed)."""
        self._expected = []
        return self.error(message, pos, hint=hint)

    def parse_primary_hook(self) -> Expr | None:
        # ``[attr]``: the SASE+ equivalence test, allowed as a top-level conjunct of WHERE.
        if self.tok.is_op("["):
            start = self.advance()
            name = self.expect_ident("an attribute name")
            self.expect_op("]")
            return Call(PARTITION_CALL, (Column(str(name.value), pos=name.pos),), pos=start.pos)
        return None

    def parse_query(self) -> ImpreciseQuery:
        sources: tuple[str, ...] = ()
        if self.accept_kw("FROM"):  # as in SASE+: names the stored stream to read
            sources = (str(self.expect_ident("a stream name").value),)
        self.expect_kw("PATTERN")
        components = self._parse_seq()
        strategy, strategy_pos = "skip_till_any_match", None
        preds: list[Expr] = []
        equiv: list[tuple[str, int]] = []
        if self.accept_kw("WHERE"):
            strategy, strategy_pos, preds, equiv = self._parse_where(components)
        if not self.at_kw("WITHIN"):
            raise self.error(
                f"unexpected {self.tok.describe()}",
                hint="imprecise patterns need a window, e.g. WITHIN 100 or WITHIN 15 seconds",
            )
        self.advance()
        window = self.parse_duration()
        returns: list[ReturnSpec] = []
        if self.accept_kw("RETURN"):
            returns.append(self._parse_return_item())
            while self.accept_op(","):
                returns.append(self._parse_return_item())
        self.accept_op(";")
        self.expect_eof()
        return ImpreciseQuery(
            text=self.text,
            components=tuple(components),
            strategy=strategy,
            strategy_pos=strategy_pos,
            predicates=tuple(preds),
            equivalence=tuple(equiv),
            window=window,
            returns=tuple(returns),
            sources=sources,
        )

    def _parse_seq(self) -> list[PatternComponent]:
        self.expect_kw("SEQ")
        self.expect_op("(")
        comps = [self._parse_component()]
        while self.accept_op(","):
            comps.append(self._parse_component())
        self.expect_op(")")
        seen: dict[str, int] = {}
        for c in comps:
            if c.var.upper() in seen:
                raise self.fail(f"variable {c.var!r} is declared twice", c.pos)
            seen[c.var.upper()] = c.pos
        return comps

    def _parse_component(self) -> PatternComponent:
        if self.tok.is_op("~", "!"):
            raise self.fail(
                "negation is not supported over imprecise timestamps",
                hint="paper 003 evaluates sequences of single events (no negation, no Kleene +)",
            )
        type_tok = self.expect_ident("an event type")
        if self.tok.is_op("+"):
            raise self.fail(
                "Kleene closure is not supported over imprecise timestamps",
                hint="paper 003 evaluates sequences of single events (no negation, no Kleene +)",
            )
        var_tok = self.expect_ident("a variable name")
        if self.tok.is_op("["):
            raise self.fail("Kleene closure (array variables) is not supported over imprecise "
                             "timestamps")
        return PatternComponent(str(type_tok.value), str(var_tok.value), type_tok.pos)

    def _parse_strategy_call(self, components: list[PatternComponent]) -> tuple[str, int]:
        name_tok = self.advance()
        name = name_tok.text.upper()
        if name in UNSUPPORTED_STRATEGIES:
            raise self.fail(
                f"{name_tok.text} is not supported over imprecise timestamps", name_tok.pos,
                hint="use skip_till_any_match or skip_till_next_match",
            )
        self.expect_op("(")
        args = self.parse_ident_list("a pattern variable")
        self.expect_op(")")
        self._check_strategy_args(name_tok.text, name_tok.pos, [str(a.value) for a in args],
                                  components)
        return name.lower(), name_tok.pos

    def _check_strategy_args(self, name: str, pos: int | None, args: list[str],
                             components: list[PatternComponent]) -> None:
        want = [c.var for c in components]
        if [a.upper() for a in args] != [w.upper() for w in want]:
            raise self.fail(
                f"{name} must list every pattern variable in order "
                f"({', '.join(want)}), got ({', '.join(args)})",
                pos,
                hint="mixing strategies per component is not supported",
            )

    def _at_strategy(self) -> bool:
        return (self.tok.kind == "ident"
                and self.tok.text.upper() in STRATEGY_FUNCTIONS + UNSUPPORTED_STRATEGIES
                and self.peek().is_op("("))

    def _parse_where(self, components: list[PatternComponent]
                     ) -> tuple[str, int | None, list[Expr], list[tuple[str, int]]]:
        strategy, strategy_pos = "skip_till_any_match", None
        if self._at_strategy():
            strategy, strategy_pos = self._parse_strategy_call(components)
            body: Expr | None = None
            if self.accept_op("{"):
                if not self.at_op("}"):
                    body = self.parse_expr()
                self.expect_op("}")
            parts = conjuncts(body)
        else:
            parts = conjuncts(self.parse_expr())
        preds: list[Expr] = []
        equiv: list[tuple[str, int]] = []
        for p in parts:
            if isinstance(p, Call) and p.name in STRATEGY_FUNCTIONS + UNSUPPORTED_STRATEGIES:
                if p.name in UNSUPPORTED_STRATEGIES:
                    raise self.fail(f"{p.name.lower()} is not supported over imprecise "
                                     "timestamps", p.pos,
                                     hint="use skip_till_any_match or skip_till_next_match")
                if strategy_pos is not None:
                    raise self.fail("the event selection strategy is given twice", p.pos)
                args = []
                for a in p.args:
                    if not (isinstance(a, Column) and a.qualifier is None):
                        raise self.fail("the strategy function takes pattern variables",
                                         a.pos if a.pos is not None else p.pos)
                    args.append(a.name)
                self._check_strategy_args(p.name.lower(), p.pos, args, components)
                strategy, strategy_pos = p.name.lower(), p.pos
            elif isinstance(p, Call) and p.name == PARTITION_CALL:
                col = p.args[0]
                assert isinstance(col, Column)
                equiv.append((col.name, p.pos if p.pos is not None else 0))
            else:
                for node in p.walk():
                    if isinstance(node, Call) and node.name in (
                            STRATEGY_FUNCTIONS + UNSUPPORTED_STRATEGIES + (PARTITION_CALL,)):
                        what = ("an equivalence test [attr]" if node.name == PARTITION_CALL
                                else "the strategy function")
                        raise self.fail(f"{what} must be a top-level conjunct of WHERE",
                                         node.pos)
                preds.append(p)
        return strategy, strategy_pos, preds, equiv

    def _parse_return_item(self) -> ReturnSpec:
        var = self.expect_ident("a pattern variable")
        attr = None
        if self.accept_op("."):
            attr = str(self.expect_ident("an attribute name").value)
        return ReturnSpec(str(var.value), attr, var.pos)


def parse(text: str) -> ImpreciseQuery:
    """Parse a query text; :class:`~replaydb.errors.ParseError` (with position) on bad text."""
    return _Parser(text).parse_query()


# --------------------------------------------------------------------------- binding
def _err(query: ImpreciseQuery, message: str, pos: int | None, hint: str | None = None
         ) -> ParseError:
    return ParseError(message, text=query.text, pos=pos or 0, hint=hint)


def _resolve_vars(query: ImpreciseQuery) -> dict[str, str]:
    """Case-insensitive variable lookup: upper-case name -> declared spelling."""
    return {c.var.upper(): c.var for c in query.components}


def _canonical_expr(query: ImpreciseQuery, expr: Expr, schema: pa.Schema,
                    variables: dict[str, str]) -> Expr:
    """Check the columns of ``expr`` and rewrite qualifiers to the declared variable spelling."""
    return _fix_qualifiers(expr, query, schema, set(schema.names), variables)


def _fix_qualifiers(node: Expr, query: ImpreciseQuery, schema: pa.Schema, names: set[str],
                    variables: dict[str, str]) -> Expr:
    """:func:`_canonical_expr` of one node, its children first (a module-level recursion: a
    recursive closure would be a reference cycle that only a garbage collection frees)."""
    if isinstance(node, Column):
        if node.qualifier is None:
            raise _err(query, f"attribute {node.name!r} must be qualified by a pattern "
                       f"variable", node.pos,
                       hint=f"write e.g. {query.components[0].var}.{node.name}")
        var = variables.get(node.qualifier.upper())
        if var is None:
            raise _err(query, f"unknown pattern variable {node.qualifier!r}", node.pos,
                       hint=f"variables are: {', '.join(query.variables)}")
        if node.name not in names:
            raise _err(query, f"unknown attribute {node.name!r}", node.pos,
                       hint=f"columns are: {', '.join(schema.names)}")
        return dataclasses.replace(node, qualifier=var)
    changes = {}
    for f in dataclasses.fields(node):
        v = getattr(node, f.name)
        if isinstance(v, Expr):
            changes[f.name] = _fix_qualifiers(v, query, schema, names, variables)
        elif isinstance(v, tuple) and v and all(isinstance(x, Expr) for x in v):
            changes[f.name] = tuple(_fix_qualifiers(x, query, schema, names, variables)
                                    for x in v)
    return dataclasses.replace(node, **changes) if changes else node


def bind(
    query: ImpreciseQuery,
    schema: pa.Schema,
    time_unit: str | None,
    *,
    lower_col: str = "t_lower",
    upper_col: str = "t_upper",
    pmf_col: str | None = None,
    pmf: str = "uniform",
    framework: str = "auto",
    method: str = "auto",
    type_column: str = "type",
    max_uncertainty: int | None = None,
    exact: bool = False,
    state_cap: int | None = DEFAULT_STATE_CAP,
    max_enumeration: int = 1_000_000,
) -> ImprecisePatternOperator:
    """Validate ``query`` against the stream ``schema`` and return a ready operator.

    ``framework``: ``"event"`` (valid intervals), ``"point"`` (stream expansion) or ``"auto"``
    (event-based, the faster one in bench/results/imprecise). ``method`` (event-based only): ``"query_order"``
    (sort into query order), ``"any_state"``, ``"selectivity"`` or ``"auto"`` (query order).
    See :class:`replaydb.operators.imprecise.ImpreciseConfig` for the other options.
    """
    if not isinstance(query, ImpreciseQuery):
        raise UsageError(f"bind expects a parsed imprecise query, got {type(query).__name__}")
    names = schema.names
    for what, col in (("lower", lower_col), ("upper", upper_col)):
        if col not in names:
            raise QueryError(
                f"the stream has no {what}-bound column {col!r} (columns: {', '.join(names)})",
                hint=f"declare the uncertainty interval columns, e.g. {what}_col='t_{what}'",
            )
        if not pa.types.is_integer(schema.field(col).type):
            raise QueryError(f"the {what}-bound column {col!r} must be an integer column, "
                             f"not {schema.field(col).type}")
    if pmf_col is not None:
        if pmf_col not in names:
            raise QueryError(f"the stream has no pmf column {pmf_col!r}")
        t = schema.field(pmf_col).type
        if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
            raise QueryError(f"the pmf column {pmf_col!r} must be a list of weights, not {t}")
    if type_column not in names:
        raise QueryError(
            f"the stream has no event type column {type_column!r} (columns: {', '.join(names)})",
            hint="name the column holding event types with type_column=...",
        )
    variables = _resolve_vars(query)
    preds = [_canonical_expr(query, p, schema, variables) for p in query.predicates]
    kind_of = schema_kinds(schema)
    for p in preds:
        check_condition(p, kind_of)
    for attr, pos in query.equivalence:
        if attr not in names:
            raise _err(query, f"unknown attribute {attr!r} in the equivalence test", pos)
        first = query.components[0].var
        for c in query.components[1:]:
            preds.append(Binary("=", Column(attr, first, pos=pos), Column(attr, c.var, pos=pos),
                                pos=pos))
    amount, word, wpos = query.window
    try:
        window = to_units(amount, word, time_unit)
    except UsageError as e:
        raise _err(query, e.message, wpos, e.hint) from None
    if window < 1:
        raise _err(query, "the window must be at least one time unit", wpos)
    returns = []
    for r in query.returns:
        var = variables.get(r.var.upper())
        if var is None:
            raise _err(query, f"unknown pattern variable {r.var!r} in RETURN", r.pos)
        if r.attr is None:
            returns.append(ReturnItem(var))
        else:
            if r.attr not in names:
                raise _err(query, f"unknown attribute {r.attr!r} in RETURN", r.pos)
            returns.append(ReturnItem(var, r.attr, schema.field(r.attr).type))
    for p in preds:
        for c in columns(p):
            if c.index is not None:
                raise _err(query, "indexed variables need Kleene closure, which is not "
                           "supported here", c.pos)
    if framework == "auto":
        framework = DEFAULT_FRAMEWORK
    if method == "auto":
        method = DEFAULT_METHOD
    config = ImpreciseConfig(
        components=tuple(Component(c.var, c.type_name) for c in query.components),
        window=window,
        strategy=query.strategy,
        predicates=tuple(preds),
        returns=tuple(returns),
        lower_column=lower_col,
        upper_column=upper_col,
        pmf_column=pmf_col,
        pmf=pmf,
        type_column=type_column,
        framework=framework,
        method=method,
        max_uncertainty=max_uncertainty,
        exact=exact,
        max_enumeration=max_enumeration,
    )
    return ImprecisePatternOperator(config, state_cap=state_cap)
