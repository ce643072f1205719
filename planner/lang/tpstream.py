"""The TPStream query language (dissertation 5.3; the paper's long form accepted too).

Grammar (keywords case-insensitive; ``[...]`` optional)::

    query       := FROM stream [alias] [PARTITION BY attr (, attr)*]
                   DEFINE definition (, definition)*
                   PATTERN constraint (AND constraint)*
                   WITHIN duration
                   [RETURN output (, output)*] [;]
    definition  := name AS condition [AT LEAST duration | AT MOST duration
                                      | BETWEEN duration AND duration]
    constraint  := name relation (; relation)* name          -- dissertation: A meets;overlaps B
                 | name relation name (; name relation name)* -- paper: A meets B; A overlaps B
    relation    := before | after | meets | met-by | overlaps | overlapped-by | starts
                 | started-by | during | contains | finishes | finished-by | equals
                   (also "met by", "met_by", "metby", ..., and "equal")
    output      := (first|last|count|sum|avg|min|max) ( name.attr ) [AS alias]
                 | count ( name ) [AS alias]
    duration    := number [unit] | number+unit (5s, 10min) | INTERVAL 'n' unit
                   -- a bare number is in the stream's time unit

Decisions (documented, tested):

* ``finishes`` is the documents' relation ``A.ts < B.ts < A.te = B.te`` (see
  :mod:`replaydb.operators.tpstream.relations`).
* Alternatives written in the paper's long form must all relate the same two situations (either
  way round: ``C during B; B finishes C`` is one constraint on {B, C}); several constraints on the
  same pair are intersected.
* Conditions are the shared expression grammar over the stream's attributes, optionally qualified
  by the stream alias or name. They cannot refer to other situations (the documents forbid
  cross-symbol references). A numeric literal may carry a physical unit annotation as in the
  documents' example (``accel > 8m/s2``, ``speed > 70 mph``); it is for readability only - values
  are compared in the stored units.
* The duration constraint is the clause that *ends* a definition. A trailing
  ``BETWEEN x AND y`` is a duration constraint when at least one bound carries a time unit;
  otherwise it is the SQL ``BETWEEN`` of the condition (write ``AT LEAST``/``AT MOST`` or units
  to constrain durations in stream units).
* RETURN is optional here (the dissertation's grammar lists it): without it results carry only
  the situations' intervals. ``AS alias`` may be omitted (default ``func_symbol_attr``).
* Situation names must differ from relation words and may not be quoted keywords of the query.

The logical query (:class:`TPStreamQuery`) exposes every situation's condition as an
:mod:`replaydb.operators.expr` tree (:meth:`TPStreamQuery.situation_conditions`) and the
single-attribute ranges each condition implies (:meth:`TPStreamQuery.range_conditions`), so the
planner can prune replay intervals where a situation stream cannot occur.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pyarrow as pa

from replaydb.errors import ParseError, QueryError, UsageError
from replaydb.operators.expr import (
    Between,
    Binary,
    Column,
    Expr,
    InList,
    Literal,
    Unary,
    columns,
    conjuncts,
)
from replaydb.operators.exprcode.check import check_condition, schema_kinds
from replaydb.operators.tpstream.config import (
    AGGREGATES,
    Constraint,
    ReturnItem,
    SituationDef,
    TPStreamConfig,
)
from replaydb.operators.tpstream.operator import TPStream
from replaydb.operators.tpstream.relations import canonical, inverse_mask, mask_of, names_of
from replaydb.planner.lang import detect as detection
from replaydb.planner.lang.lexer import Token
from replaydb.planner.lang.parser_base import ParserBase
from replaydb.timeunits import duration_word_ns, to_units

LANGUAGE = "tpstream"

KEYWORDS = frozenset({"FROM", "PARTITION", "BY", "DEFINE", "AS", "PATTERN", "WITHIN", "RETURN",
                      "AND", "OR", "NOT", "AT", "LEAST", "MOST", "BETWEEN"})

PHYSICAL_UNITS = frozenset({
    "mph", "kmh", "kph", "kmph", "mps", "knots", "m", "km", "cm", "mm", "mi", "ft", "s", "sec",
    "ms", "h", "min", "g", "kg", "t", "rpm", "hz", "khz", "v", "a", "w", "kw", "pct", "percent",
    "c", "f", "k", "pa", "kpa", "bar", "psi", "l", "ml",
})
"""Words accepted as physical-unit annotations after a numeric literal in a condition."""

_BY_WORDS = {"met", "overlapped", "started", "finished"}


# --------------------------------------------------------------------------- logical query
@dataclass(frozen=True)
class DurationSpec:
    """A duration as written: amount, unit word ('' = stream units), query position."""

    amount: Fraction
    word: str
    pos: int

    def to_units(self, unit: str | None) -> int:
        return to_units(self.amount, self.word, unit)

    def __str__(self) -> str:
        return f"{self.amount} {self.word}".strip()


@dataclass(frozen=True)
class DefineSpec:
    name: str
    condition: Expr
    at_least: DurationSpec | None
    at_most: DurationSpec | None
    pos: int


@dataclass(frozen=True)
class ConstraintSpec:
    left: str
    right: str
    relations: tuple[str, ...]
    pos: int


@dataclass(frozen=True)
class ReturnSpec:
    func: str
    symbol: str
    attr: str | None
    alias: str
    pos: int


@dataclass(frozen=True)
class AttributeRange:
    """``lo (<|<=) attr (<|<=) hi`` (None = unbounded), a necessary condition of a situation."""

    attr: str
    lo: float | None = None
    lo_inclusive: bool = True
    hi: float | None = None
    hi_inclusive: bool = True

    def contains(self, v: float) -> bool:
        if self.lo is not None and (v < self.lo or (v == self.lo and not self.lo_inclusive)):
            return False
        if self.hi is not None and (v > self.hi or (v == self.hi and not self.hi_inclusive)):
            return False
        return True

    def intersect(self, o: AttributeRange) -> AttributeRange:
        lo, loi = self.lo, self.lo_inclusive
        if o.lo is not None and (lo is None or o.lo > lo or (o.lo == lo and not o.lo_inclusive)):
            lo, loi = o.lo, o.lo_inclusive
        hi, hii = self.hi, self.hi_inclusive
        if o.hi is not None and (hi is None or o.hi < hi or (o.hi == hi and not o.hi_inclusive)):
            hi, hii = o.hi, o.hi_inclusive
        return AttributeRange(self.attr, lo, loi, hi, hii)

    def hull(self, o: AttributeRange) -> AttributeRange:
        if self.lo is None or o.lo is None:
            lo, loi = None, True
        elif self.lo < o.lo or (self.lo == o.lo and self.lo_inclusive):
            lo, loi = self.lo, self.lo_inclusive
        else:
            lo, loi = o.lo, o.lo_inclusive
        if self.hi is None or o.hi is None:
            hi, hii = None, True
        elif self.hi > o.hi or (self.hi == o.hi and self.hi_inclusive):
            hi, hii = self.hi, self.hi_inclusive
        else:
            hi, hii = o.hi, o.hi_inclusive
        return AttributeRange(self.attr, lo, loi, hi, hii)

    @property
    def empty(self) -> bool:
        if self.lo is None or self.hi is None:
            return False
        return self.lo > self.hi or (self.lo == self.hi and not (self.lo_inclusive
                                                                  and self.hi_inclusive))


@dataclass(frozen=True)
class TPStreamQuery:
    """A parsed TPStream query (the logical query of the language contract)."""

    text: str
    sources: tuple[str, ...]
    alias: str | None
    partition_by: tuple[str, ...]
    defines: tuple[DefineSpec, ...]
    constraints: tuple[ConstraintSpec, ...]
    window: DurationSpec
    returns: tuple[ReturnSpec, ...]
    event_types: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.defines)

    def situation_conditions(self) -> dict[str, Expr]:
        """Condition of every situation definition (qualifiers by the stream alias removed)."""
        return {d.name: _strip_qualifiers(d.condition) for d in self.defines}

    def range_conditions(self) -> dict[str, dict[str, AttributeRange]]:
        """Per situation, the single-attribute ranges its condition implies (see
        :func:`single_attribute_ranges`). A situation can only exist where events satisfy every
        range of its entry; an empty dict means no usable range."""
        return {n: single_attribute_ranges(e) for n, e in self.situation_conditions().items()}


# --------------------------------------------------------------------------- ranges helper
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


def _num(e: Expr) -> float | None:
    if isinstance(e, Literal) and isinstance(e.value, int | float) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, Unary) and e.op == "neg":
        v = _num(e.operand)
        return None if v is None else -v
    return None


def _atom_range(e: Expr) -> AttributeRange | None:
    if isinstance(e, Binary) and e.op in _FLIP:
        col, lit, op = e.left, e.right, e.op
        if not isinstance(col, Column):
            col, lit, op = e.right, e.left, _FLIP[e.op]
        v = _num(lit)
        if not isinstance(col, Column) or v is None or col.index is not None:
            return None
        a = col.name
        if op == "=":
            return AttributeRange(a, v, True, v, True)
        if op == ">":
            return AttributeRange(a, lo=v, lo_inclusive=False)
        if op == ">=":
            return AttributeRange(a, lo=v)
        if op == "<":
            return AttributeRange(a, hi=v, hi_inclusive=False)
        return AttributeRange(a, hi=v)
    if isinstance(e, Between) and not e.negated and isinstance(e.operand, Column):
        lo, hi = _num(e.low), _num(e.high)
        if lo is not None and hi is not None:
            return AttributeRange(e.operand.name, lo, True, hi, True)
    if isinstance(e, InList) and not e.negated and isinstance(e.operand, Column):
        vals = [_num(v) for v in e.values]
        if vals and all(v is not None for v in vals):
            return AttributeRange(e.operand.name, min(vals), True, max(vals), True)  # type: ignore
    return None


def single_attribute_ranges(expr: Expr) -> dict[str, AttributeRange]:
    """Ranges ``attr in [lo, hi]`` that every event satisfying ``expr`` satisfies.

    Conjunctions intersect the ranges of their parts; a disjunction keeps, for attributes
    constrained in every branch, the hull of the branches' ranges; anything else (NOT, functions,
    comparisons between columns, strings) contributes nothing. The result is a *necessary*
    condition: pruning with it never loses an event the condition accepts. O(size of expr).
    """
    out: dict[str, AttributeRange] = {}
    for c in conjuncts(expr):
        part: dict[str, AttributeRange]
        if isinstance(c, Binary) and c.op == "or":
            left = single_attribute_ranges(c.left)
            right = single_attribute_ranges(c.right)
            part = {a: left[a].hull(right[a]) for a in left.keys() & right.keys()}
        else:
            r = _atom_range(c)
            part = {r.attr: r} if r is not None else {}
        for a, r in part.items():
            out[a] = out[a].intersect(r) if a in out else r
    return out


def _strip_qualifiers(e: Expr) -> Expr:
    import dataclasses

    if isinstance(e, Column):
        return Column(e.name, None, e.index, pos=e.pos) if e.qualifier is not None else e
    kw = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            kw[f.name] = _strip_qualifiers(v)
        elif isinstance(v, tuple) and v and all(isinstance(x, Expr) for x in v):
            kw[f.name] = tuple(_strip_qualifiers(x) for x in v)
    return dataclasses.replace(e, **kw) if kw else e


# --------------------------------------------------------------------------- parser
class TPStreamParser(ParserBase):
    """Recursive-descent parser for the grammar in the module docstring."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._relwords = {"before", "after", "meets", "overlaps", "starts", "during", "contains",
                          "finishes", "equals", "equal", "metby", "met_by", "overlappedby",
                          "overlapped_by", "startedby", "started_by", "finishedby",
                          "finished_by"} | _BY_WORDS

    # -------------------------------------------------------------- primary: unit annotations
    def parse_primary_hook(self) -> Expr | None:
        t = self.tok
        if t.kind != "number":
            return None
        nxt = self.peek()
        annotated = t.unit is not None or (
            nxt.kind == "ident" and not nxt.text.startswith('"')
            and nxt.text.lower() in PHYSICAL_UNITS and nxt.text.upper() not in KEYWORDS)
        if not annotated:
            return None
        self.advance()
        end = t.pos + len(t.text)
        if t.unit is None:
            u = self.advance()
            end = u.pos + len(u.text)
        # adjacent "/unit" chains: 8m/s2
        while self.tok.is_op("/") and self.tok.pos == end and self.peek().kind == "ident" \
                and self.peek().pos == end + 1:
            self.advance()
            u = self.advance()
            end = u.pos + len(u.text)
        return Literal(t.value, pos=t.pos)

    # -------------------------------------------------------------- helpers
    def _name(self, what: str) -> Token:
        t = self.expect_ident(what)
        if not t.text.startswith('"') and t.text.upper() in KEYWORDS:
            raise self.error(f"{t.text!r} is a keyword and cannot be a {what}", t.pos)
        return t

    def _at_relation(self) -> bool:
        t = self.tok
        if t.kind == "ident" and not t.text.startswith('"') and t.text.lower() in self._relwords:
            return True
        self._expected.append("a temporal relation")
        return False

    def _relation(self) -> tuple[str, int]:
        t = self.tok
        if not self._at_relation():
            raise self.error(f"unexpected {t.describe()}")
        self.advance()
        word = t.text.lower()
        if word in _BY_WORDS:
            if self.tok.is_op("-") and self.peek().is_kw("BY"):
                self.advance()
                self.advance()
            elif self.tok.is_kw("BY"):
                self.advance()
            else:
                self._expected.append("'by'")
                raise self.error(f"unexpected {self.tok.describe()}")
            word = f"{word}-by"
        rel = canonical(word)
        if rel is None:  # pragma: no cover - guarded by _relwords
            raise self.error(f"unknown temporal relation {t.text!r}", t.pos)
        return rel, t.pos

    def _region_end(self, start: int) -> int:
        """Index of the token ending a definition: depth-0 ',' or PATTERN or end."""
        depth = 0
        i = start
        while True:
            t = self.toks[i]
            if t.kind == "eof":
                return i
            if t.is_op("(", "["):
                depth += 1
            elif t.is_op(")", "]"):
                depth -= 1
            elif depth == 0 and (t.is_op(",") or t.is_kw("PATTERN")):
                return i
            i += 1

    def _try_duration(self, i: int) -> tuple[DurationSpec, int] | None:
        save_i, save_exp = self.i, list(self._expected)
        self.i = i
        try:
            amount, word, pos = self.parse_duration()
            return DurationSpec(amount, word, pos), self.i
        except ParseError:
            return None
        finally:
            self.i = save_i
            self._expected = save_exp

    def _duration_clause(self, start: int, end: int
                         ) -> tuple[int, DurationSpec | None, DurationSpec | None] | None:
        """Find the trailing duration constraint of the tokens ``[start, end)``."""
        depth = 0
        cands = []
        for i in range(start, end):
            t = self.toks[i]
            if t.is_op("(", "["):
                depth += 1
            elif t.is_op(")", "]"):
                depth -= 1
            elif depth == 0 and (t.is_kw("AT") or t.is_kw("BETWEEN")):
                cands.append(i)
        for i in reversed(cands):
            t = self.toks[i]
            if t.is_kw("AT"):
                kw = self.toks[i + 1]
                if kw.is_kw("LEAST", "MOST"):
                    r = self._try_duration(i + 2)
                    if r is None:
                        self.i = i + 2
                        self._expected.append("a duration")
                        raise self.error(f"unexpected {self.toks[i + 2].describe()}")
                    d, j = r
                    if j != end:
                        self.i = j
                        self._expected.append("',' or PATTERN")
                        raise self.error(f"unexpected {self.toks[j].describe()} after the "
                                         f"duration constraint")
                    return (i, d, None) if kw.is_kw("LEAST") else (i, None, d)
            else:
                r1 = self._try_duration(i + 1)
                if r1 is None:
                    continue
                d1, j = r1
                if not self.toks[j].is_kw("AND"):
                    continue
                r2 = self._try_duration(j + 1)
                if r2 is None:
                    continue
                d2, k = r2
                if k == end and (d1.word or d2.word):
                    return i, d1, d2
        return None

    # -------------------------------------------------------------- clauses
    def parse_query(self) -> TPStreamQuery:
        self.expect_kw("FROM")
        src = self._name("stream name")
        source = str(src.value)
        alias = None
        if self.tok.kind == "ident" and not self.tok.is_kw("PARTITION", "DEFINE"):
            alias = str(self._name("stream alias").value)
        partition: list[str] = []
        if self.accept_kw("PARTITION"):
            self.expect_kw("BY")
            while True:
                a = self.expect_ident("an attribute")
                name = str(a.value)
                if self.accept_op("."):
                    if name not in (source, alias):
                        raise self.error(f"unknown qualifier {name!r} in PARTITION BY", a.pos)
                    name = str(self.expect_ident("an attribute").value)
                partition.append(name)
                if not self.accept_op(","):
                    break
        self.expect_kw("DEFINE")
        defines = [self._definition(source, alias)]
        while self.accept_op(","):
            defines.append(self._definition(source, alias))
        names = [d.name for d in defines]
        self.expect_kw("PATTERN")
        constraints = [self._constraint(names)]
        while self.accept_kw("AND"):
            constraints.append(self._constraint(names))
        self.expect_kw("WITHIN")
        amount, word, pos = self.parse_duration()
        window = DurationSpec(amount, word, pos)
        if word and duration_word_ns(word) is None and word not in ("units", "unit", "ticks",
                                                                     "events"):
            raise self.error(f"unknown time unit {word!r}", pos)
        returns: list[ReturnSpec] = []
        if self.accept_kw("RETURN"):
            returns.append(self._output(names))
            while self.accept_op(","):
                returns.append(self._output(names))
        self.accept_op(";")
        self.expect_eof()
        aliases = [r.alias for r in returns]
        for r in returns:
            if aliases.count(r.alias) > 1:
                raise self.error(f"RETURN name {r.alias!r} is used twice", r.pos)
        return TPStreamQuery(self.text, (source,), alias, tuple(partition), tuple(defines),
                             tuple(constraints), window, tuple(returns))

    def _definition(self, source: str, alias: str | None) -> DefineSpec:
        nt = self._name("situation name")
        name = str(nt.value)
        if name.lower() in self._relwords:
            raise self.error(f"{name!r} is a temporal relation and cannot name a situation",
                             nt.pos)
        self.expect_kw("AS")
        start = self.i
        end = self._region_end(start)
        clause = self._duration_clause(start, end)
        stop = clause[0] if clause else end
        real = self.toks[stop]
        saved = self.toks
        self.toks = saved[:stop] + [Token("stop" if real.kind != "eof" else "eof", real.text,
                                          None, real.pos)]
        try:
            if stop == start:
                self._expected.append("a condition")
                raise self.error(f"unexpected {real.describe()}")
            cond = self.parse_expr()
            if self.i != stop:
                self._expected.extend(["AT LEAST", "AT MOST", "BETWEEN", "','", "PATTERN"])
                raise self.error(f"unexpected {self.tok.describe()}")
        finally:
            self.toks = saved
        self.i = end
        self._expected = []
        at_least = at_most = None
        if clause:
            _, at_least, at_most = clause
        for c in columns(cond):
            if c.qualifier is not None and c.qualifier not in (source, alias):
                raise ParseError(
                    f"situation {name}: {c.qualifier}.{c.name} refers to another situation or "
                    f"stream; a condition may only use attributes of {source}",
                    text=self.text, pos=c.pos if c.pos is not None else nt.pos)
            if c.index is not None:
                raise ParseError(f"situation {name}: indexed references are not allowed",
                                 text=self.text, pos=c.pos or nt.pos)
        return DefineSpec(name, cond, at_least, at_most, nt.pos)

    def _constraint(self, names: list[str]) -> ConstraintSpec:
        def sym() -> Token:
            t = self.expect_ident("a situation name")
            if str(t.value) not in names:
                raise self.error(f"PATTERN refers to undefined situation {t.value!r}", t.pos,
                                 hint=f"defined situations: {', '.join(names)}")
            return t

        first = self.tok.pos
        left = sym()
        rels = [self._relation()[0]]
        while self.tok.is_op(";") and self._peek_relation():
            self.advance()
            rels.append(self._relation()[0])
        right = sym()
        L, R = str(left.value), str(right.value)
        if L == R:
            raise self.error(f"a constraint relates two different situations, got {L} twice",
                             right.pos)
        mask = mask_of(rels)
        while self.tok.is_op(";") and self.peek().kind == "ident" and not self._peek_relation():
            self.advance()
            l2 = sym()
            r2 = [self._relation()[0]]
            while self.tok.is_op(";") and self._peek_relation():
                self.advance()
                r2.append(self._relation()[0])
            rt = sym()
            pair = (str(l2.value), str(rt.value))
            if pair == (L, R):
                mask |= mask_of(r2)
            elif pair == (R, L):
                mask |= inverse_mask(mask_of(r2))
            else:
                raise self.error(f"alternatives of one constraint must relate {L} and {R}; "
                                 f"{pair[0]} .. {pair[1]} starts a new constraint (use AND)",
                                 l2.pos)
        return ConstraintSpec(L, R, names_of(mask), first)

    def _peek_relation(self) -> bool:
        t = self.peek()
        return t.kind == "ident" and not t.text.startswith('"') and t.text.lower() in self._relwords

    def _output(self, names: list[str]) -> ReturnSpec:
        ft = self.expect_ident("an aggregate (first, last, count, sum, avg, min, max)")
        func = ft.text.lower()
        if func not in AGGREGATES:
            raise self.error(f"unknown aggregate {ft.text!r}", ft.pos,
                             hint=f"use one of {', '.join(AGGREGATES)}")
        self.expect_op("(")
        st = self.expect_ident("a situation name")
        sym = str(st.value)
        if sym not in names:
            raise self.error(f"RETURN refers to undefined situation {sym!r}", st.pos)
        attr = None
        if self.accept_op("."):
            attr = str(self.expect_ident("an attribute").value)
        elif func != "count":
            self._expected.append("'.'")
            raise self.error(f"unexpected {self.tok.describe()}; {func} needs {sym}.attribute")
        self.expect_op(")")
        if self.accept_kw("AS"):
            alias = str(self._name("output name").value)
        else:
            alias = f"{func}_{sym}" + (f"_{attr}" if attr else "")
        return ReturnSpec(func, sym, attr, alias, ft.pos)


# --------------------------------------------------------------------------- contract
detect = detection.tpstream


def parse(text: str) -> TPStreamQuery:
    """Parse a TPStream query; :class:`~replaydb.errors.ParseError` names the position."""
    return TPStreamParser(text).parse_query()


def bind(query: TPStreamQuery, schema: pa.Schema, time_unit: str | None,
         **options: Any) -> TPStream:
    """Check names against ``schema``, convert durations, return a ready :class:`TPStream`.

    Options: ``mode`` (``"normal"`` | ``"low_latency"``), ``order`` (``"adaptive"`` |
    ``"static"`` | tuple of situation names), ``end_policy`` (``"drop"`` | ``"close"``),
    ``alpha``, ``threshold``, ``use_triggers``, ``state_cap``.
    """
    text = query.text
    names = set(schema.names)

    def need(col: str, pos: int | None, what: str) -> None:
        if col not in names:
            raise ParseError(f"{what} {col!r} is not a column of the stream",
                             text=text, pos=pos or 0,
                             hint=f"columns are: {', '.join(schema.names)}")

    for c in query.partition_by:
        need(c, text.upper().find("PARTITION"), "PARTITION BY attribute")
    defs = []
    for d in query.defines:
        for c in columns(d.condition):
            need(c.name, c.pos, f"situation {d.name}: attribute")
        check_condition(d.condition, schema_kinds(schema), d.pos)
        try:
            lo = d.at_least.to_units(time_unit) if d.at_least else None
            hi = d.at_most.to_units(time_unit) if d.at_most else None
        except UsageError as e:
            pos = (d.at_least or d.at_most).pos  # type: ignore[union-attr]
            raise ParseError(str(e), text=text, pos=pos) from None
        try:
            defs.append(SituationDef(d.name, d.condition, lo, hi))
        except QueryError as e:
            raise ParseError(e.message, text=text, pos=d.pos) from None
    for r in query.returns:
        if r.attr is not None:
            need(r.attr, r.pos, f"RETURN {r.func}({r.symbol}.{r.attr}):")
    try:
        window = query.window.to_units(time_unit)
    except UsageError as e:
        raise ParseError(str(e), text=text, pos=query.window.pos) from None
    state_cap = options.pop("state_cap", None)
    cfg_kw = {k: options.pop(k) for k in ("mode", "order", "end_policy", "alpha", "threshold",
                                          "use_triggers", "initial_buffer", "cost_model")
              if k in options}
    if options:
        raise UsageError(f"unknown TPStream option(s): {', '.join(sorted(options))}")
    try:
        config = TPStreamConfig(
            situations=tuple(defs),
            constraints=tuple(Constraint(c.left, c.right, c.relations) for c in query.constraints),
            window=window,
            returns=tuple(ReturnItem(r.func, r.symbol, r.attr, r.alias) for r in query.returns),
            partition_by=query.partition_by,
            stream_alias=query.alias or query.sources[0],
            **cfg_kw,
        )
    except QueryError as e:
        raise ParseError(e.message, text=text, pos=0) from None
    kw = {} if state_cap is None else {"state_cap": state_cap}
    return TPStream(config, schema, **kw)
