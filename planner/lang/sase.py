"""SASE+ front end (Agrawal et al., SIGMOD 2008; the notation of the paper's queries).

Grammar (keywords case-insensitive, variables case-sensitive)::

    [FROM stream]
    PATTERN SEQ( component, ... )
    [WHERE [strategy ( var, ... )] { condition [AND condition]... }  |  WHERE condition...]
    [WITHIN duration]
    [RETURN expr [AS name], ...]

    component := Type var | Type+ var[] | Type* var[] | ~Type var | ~(Type var) | !(Type var)
               | !Type var
    Type      := name (hyphens allowed: SHELF-READING) | ANY (any type) | ANY(T1, T2, ...)
    strategy  := strict_contiguity | partition_contiguity | skip_till_next_match
               | skip_till_any_match
    condition := [attr, ...] (equivalence: all events of a match agree on attr) | expression

``Type* var[]`` (zero or more) is an extension of SASE+ (which has only ``+``), so that the
dissertation's ``A B* C`` can be written. Event types are the values of the stream's type column (``type`` unless the operator is bound
with ``type_column=``). ``FROM stream`` is optional: it names the stored stream to read (the
language contract's ``sources``); without it the caller chooses the stream.

Expressions: ``a.x``; for a Kleene variable ``b[]``: ``b[i].x`` (the event being bound),
``b[i-1].x`` (the previous one), ``b[1].x`` (the first), ``b[b.len].x`` / ``b.x`` (the last, from
a later component), ``b.len`` (how many), aggregates ``avg/sum/min/max/count(b[..i-1].x)`` over the
previous ones (or ``(b[].x)`` over all, from a later component or in RETURN); ``80%`` is 0.8;
``==`` is ``=``.

Translation into the one logical model (documented decisions):

* each condition (a conjunct of WHERE) is attached to the component it mentions that comes last
  in SEQ (SASE+'s "last identifier" rule), or, if it mentions a negated component, to that
  negation (it may then mention only earlier components); a condition that mentions no variable
  applies to the first component. A condition that mentions ``b`` only as ``b[b.len]`` or
  ``b.len`` and nothing later than ``b`` constrains the finished closure: it belongs to the
  component after ``b`` (SASE+ puts it on the proceed edge);
* a condition using ``b[i-1]`` or ``b[..i-1]`` applies only from the second ``b`` on (SASE+'s
  ``i > 1``): it becomes ``COUNT(b.*) = 1 OR condition``; ``b[1]`` inside ``b``'s own
  condition is the first ``b`` (the current event while binding the first one);
* ``[attr]`` becomes the spec's equivalence (partitioning, see
  :mod:`replaydb.operators.pattern.compile`);
* the default strategy (no strategy function) is skip_till_next_match;
* RETURN without items returns, per positive component, ``v.seq`` (singleton) or
  ``FIRST(v.seq)``, ``LAST(v.seq)`` and ``COUNT(v.*)`` (Kleene), named ``v.seq``,
  ``v.first_seq``, ``v.last_seq``, ``v.len``;
* the output is every match (SASE+'s default format); the non-overlap format is not offered.

Public API (the language contract): :data:`LANGUAGE`, :func:`detect`, :func:`parse` ->
:class:`SaseQuery`, :func:`bind` -> :class:`~replaydb.operators.pattern.operator.PatternOperator`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

import pyarrow as pa

from replaydb.errors import ParseError, QueryError, UsageError
from replaydb.operators import expr as ex
from replaydb.operators.base import DEFAULT_STATE_CAP
from replaydb.operators.pattern import model as pm
from replaydb.operators.pattern.config import PatternConfig
from replaydb.operators.pattern.operator import PatternOperator
from replaydb.planner.lang import detect as detection
from replaydb.planner.lang.parser_base import ParserBase
from replaydb.timeunits import to_units

LANGUAGE = "sase"

STRATEGIES = {
    "STRICT_CONTIGUITY": pm.Strategy.CONTIGUOUS,
    "PARTITION_CONTIGUITY": pm.Strategy.PARTITION_CONTIGUITY,
    "SKIP_TILL_NEXT_MATCH": pm.Strategy.SKIP_TILL_NEXT,
    "SKIP_TILL_ANY_MATCH": pm.Strategy.SKIP_TILL_ANY,
}
_AGGS = ("AVG", "SUM", "MIN", "MAX", "COUNT")


@dataclass(frozen=True)
class Component:
    """One SEQ component as written."""

    var: str
    types: tuple[str, ...]
    kleene: bool
    negated: bool
    pos: int
    star: bool = False


@dataclass(frozen=True)
class SaseQuery:
    """The logical query: a :class:`PatternSpec` whose window is still a written duration."""

    spec: pm.PatternSpec
    window: tuple[Fraction, str, int] | None
    components: tuple[Component, ...]
    sources: tuple[str, ...]
    event_types: tuple[str, ...]
    text: str

    def pattern_spec(self, time_unit: str | None, type_column: str = "type") -> pm.PatternSpec:
        w = None
        if self.window is not None:
            amount, word, pos = self.window
            try:
                w = to_units(amount, word, time_unit)
            except UsageError as e:
                raise ParseError(str(e), text=self.text, pos=pos) from None
            if w < 0:
                raise ParseError("WITHIN must not be negative", text=self.text, pos=pos)
        return replace(self.spec, window=w, type_column=type_column)


detect = detection.sase


class _Parser(ParserBase):
    # ------------------------------------------------------------------ atoms
    def parse_primary_hook(self) -> ex.Expr | None:
        t = self.tok
        if t.kind == "number" and self.peek().is_op("%") and not self._starts_primary(2):
            self.advance()
            self.advance()
            return ex.Literal(t.value / 100, pos=t.pos)
        if t.kind == "ident" and self.peek().is_op("["):
            return self.parse_subscripted()
        return None

    def _starts_primary(self, k: int) -> bool:
        nt = self.peek(k)
        return nt.kind in ("ident", "number", "string") or nt.is_op("(")

    def parse_subscripted(self) -> ex.Expr:
        vt = self.advance()
        var = str(vt.value)
        self.expect_op("[")
        if self.accept_op("]"):
            index: tuple[str, int] = ("all", 0)
        elif self.at_op(".."):
            self.advance()
            it = self.expect_ident("i")
            if str(it.value) != "i":
                raise self.error("expected i in [..i-1]", it.pos)
            self.expect_op("-")
            one = self.expect_number("1")
            if one.value != 1:
                raise self.error("only [..i-1] is supported", one.pos)
            self.expect_op("]")
            index = ("all_prev", 0)
        elif self.tok.kind == "number":
            n = self.advance()
            if not isinstance(n.value, int) or n.value < 1:
                raise self.error("a Kleene subscript must be a positive integer", n.pos)
            self.expect_op("]")
            index = ("abs", int(n.value))
        elif self.tok.kind == "ident" and str(self.tok.value) == "i":
            self.advance()
            if self.accept_op("-"):
                one = self.expect_number("1")
                if one.value != 1:
                    raise self.error("only b[i-1] is supported", one.pos)
                index = ("prev", 1)
            else:
                index = ("current", 0)
            self.expect_op("]")
        elif self.tok.kind == "ident" and str(self.tok.value) == var and self.peek().is_op("."):
            self.advance()
            self.advance()
            ln = self.expect_ident("len")
            if str(ln.value).lower() != "len":
                raise self.error(f"expected {var}.len", ln.pos)
            self.expect_op("]")
            index = ("last", 0)
        else:
            self._expected.extend(["i", "i-1", "..i-1", "a number", f"{var}.len", "']'"])
            raise self.error(f"unexpected {self.tok.describe()} in a Kleene subscript")
        if self.accept_op("."):
            attr = self.expect_ident("an attribute name")
            return ex.Column(str(attr.value), var, index, pos=vt.pos)
        return ex.Column("*", var, index, pos=vt.pos)

    # ------------------------------------------------------------------ query
    def parse_query(self) -> SaseQuery:
        sources: tuple[str, ...] = ()
        if self.accept_kw("FROM"):
            sources = (str(self.expect_ident("a stream name").value),)
        self.expect_kw("PATTERN")
        self.expect_kw("SEQ")
        self.expect_op("(")
        comps = [self.parse_component()]
        while self.accept_op(","):
            comps.append(self.parse_component())
        self.expect_op(")")
        names = [c.var for c in comps]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise self.error(f"variable {dup[0]} declared twice",
                             [c.pos for c in comps if c.var == dup[0]][1])
        strategy = pm.Strategy.SKIP_TILL_NEXT
        conds: list[ex.Expr] = []
        equiv: list[str] = []
        if self.accept_kw("WHERE"):
            if self.tok.kind == "ident" and self.tok.text.upper() in STRATEGIES \
                    and self.peek().is_op("("):
                strategy = STRATEGIES[self.advance().text.upper()]
                self.expect_op("(")
                while not self.at_op(")"):
                    self.expect_ident("a variable")
                    if self.accept_op("["):
                        self.expect_op("]")
                    if not self.accept_op(","):
                        break
                self.expect_op(")")
                if self.accept_op("{"):
                    if not self.at_op("}"):
                        self.parse_conditions(conds, equiv)
                    self.expect_op("}")
                elif not self.at_kw("WITHIN", "RETURN") and self.tok.kind != "eof":
                    self.parse_conditions(conds, equiv)
            else:
                braced = self.accept_op("{") is not None
                self.parse_conditions(conds, equiv)
                if braced:
                    self.expect_op("}")
        window = None
        if self.accept_kw("WITHIN"):
            window = self.parse_duration()
        returns: list[tuple[ex.Expr, str | None, int]] = []
        if self.accept_kw("RETURN"):
            while True:
                start = self.tok.pos
                e = self.parse_expr()
                last = self.toks[self.i - 1]
                alias = None
                if self.accept_kw("AS"):
                    alias = str(self.expect_ident("a name").value)
                else:
                    alias = " ".join(self.text[start: last.pos + len(last.text)].split())
                returns.append((e, alias, start))
                if not self.accept_op(","):
                    break
        self.accept_op(";")
        self.expect_eof()
        return _Translator(self, comps, conds, equiv, strategy, returns, window, sources).build()

    def parse_component(self) -> Component:
        pos = self.tok.pos
        negated = False
        if self.at_op("~", "!"):
            self.advance()
            negated = True
        if negated and self.at_op("("):
            self.advance()
            c = self.parse_component()
            self.expect_op(")")
            if c.negated:
                raise self.error("double negation", pos)
            return replace(c, negated=True, pos=pos)
        types = self.parse_type()
        star = self.accept_op("*") is not None
        kleene = star or self.accept_op("+") is not None
        vt = self.expect_ident("a variable name")
        if self.accept_op("["):
            self.expect_op("]")
            if not kleene:
                raise self.error("only a Kleene component (Type+ v[]) declares v[]", vt.pos)
        if kleene and negated:
            raise self.error("a negated component cannot be a Kleene closure", pos)
        return Component(str(vt.value), types, kleene, negated, pos if negated else vt.pos, star)

    def parse_type(self) -> tuple[str, ...]:
        if self.at_kw("ANY"):
            self.advance()
            if self.accept_op("("):
                names = [self._type_name()]
                while self.accept_op(","):
                    names.append(self._type_name())
                self.expect_op(")")
                return tuple(names)
            return ()
        return (self._type_name(),)

    def _type_name(self) -> str:
        t = self.expect_ident("an event type")
        name = str(t.value)
        end = t.pos + len(t.text)
        # hyphenated names written without spaces (SHELF-READING)
        while self.tok.is_op("-") and self.tok.pos == end and self.peek().kind == "ident" \
                and self.peek().pos == end + 1:
            self.advance()
            nt = self.advance()
            name += "-" + str(nt.value)
            end = nt.pos + len(nt.text)
        return name

    def parse_conditions(self, conds: list[ex.Expr], equiv: list[str]) -> None:
        while True:
            if self.at_op("["):
                self.advance()
                equiv.extend(str(t.value) for t in self.parse_ident_list("an attribute"))
                self.expect_op("]")
            else:
                e = self.parse_expr()
                conds.extend(_split_and(e))
            if not self.accept_kw("AND"):
                return


def _split_and(e: ex.Expr) -> list[ex.Expr]:
    if isinstance(e, ex.Binary) and e.op == "and":
        return _split_and(e.left) + _split_and(e.right)
    return [e]


class _Translator:
    """SASE+ components and conditions -> :class:`PatternSpec` (see module docstring)."""

    def __init__(self, p: _Parser, comps: list[Component], conds: list[ex.Expr], equiv: list[str],
                 strategy: pm.Strategy, returns: list[tuple[ex.Expr, str | None, int]],
                 window: tuple[Fraction, str, int] | None, sources: tuple[str, ...]) -> None:
        self.p = p
        self.comps = comps
        self.conds = conds
        self.equiv = equiv
        self.strategy = strategy
        self.returns = returns
        self.window = window
        self.sources = sources
        self.order = {c.var: i for i, c in enumerate(comps)}
        self.by_var = {c.var: c for c in comps}

    def err(self, msg: str, pos: int | None) -> ParseError:
        return ParseError(msg, text=self.p.text, pos=pos if pos is not None else 0)

    def build(self) -> SaseQuery:
        comps = self.comps
        if comps[0].negated or comps[-1].negated:
            c = comps[0] if comps[0].negated else comps[-1]
            raise self.err("a negated component must stand between two positive ones", c.pos)
        items: list[pm.PatternNode] = []
        for c in comps:
            v = pm.Var(c.var, pos=c.pos)
            if c.negated:
                items.append(pm.Neg(v, pos=c.pos))
            elif c.kleene:
                items.append(pm.Repeat(v, 0 if c.star else 1, None))
            else:
                items.append(v)
        attached: dict[str, list[ex.Expr]] = {c.var: [] for c in comps}
        for cond in self.conds:
            target, e = self.attach(cond)
            attached[target].append(e)
        defines = tuple(pm.VarDef(c.var, ex.and_all(attached[c.var]) if attached[c.var] else None,
                               c.types, pos=c.pos) for c in comps)
        measures = self.measures()
        strategy = self.strategy
        spec = pm.PatternSpec(
            pattern=pm.Seq(tuple(items)) if len(items) > 1 else items[0], defines=defines,
            strategy=strategy, semantics=pm.Semantics.ALL_RUNS, measures=tuple(measures),
            equivalence=tuple(dict.fromkeys(self.equiv)), sources=self.sources,
            text=self.p.text)
        types = tuple(dict.fromkeys(t for c in comps for t in c.types))
        return SaseQuery(spec, self.window, tuple(comps), self.sources, types, self.p.text)

    # ------------------------------------------------------------------ conditions
    def refs(self, e: ex.Expr) -> list[ex.Column]:
        out = []
        for n in e.walk():
            if isinstance(n, ex.Column) and n.qualifier is not None:
                if n.qualifier not in self.by_var:
                    raise self.err(f"unknown variable {n.qualifier!r}", n.pos)
                out.append(n)
        return out

    def attach(self, cond: ex.Expr) -> tuple[str, ex.Expr]:
        refs = self.refs(cond)
        positives = [c for c in self.comps if not c.negated]
        if not refs:
            return positives[0].var, self.rewrite(cond, positives[0].var)
        negs = {r.qualifier for r in refs if self.by_var[r.qualifier].negated}
        if len(negs) > 1:
            raise self.err("a condition may mention only one negated component",
                           getattr(cond, "pos", None))
        if negs:
            target = negs.pop()
            for r in refs:
                if r.qualifier != target and self.order[r.qualifier] > self.order[target]:
                    raise self.err("a negated component's condition may only mention earlier "
                                   "components", r.pos)
            return target, self.rewrite(cond, target)
        last = max(refs, key=lambda r: self.order[r.qualifier]).qualifier
        assert last is not None
        comp = self.by_var[last]
        closing = all((r.index is not None and r.index[0] == "last")
                      or (r.index is None and r.name == "len") for r in refs
                      if r.qualifier == last)
        if comp.kleene and closing:
            later = [c for c in self.comps[self.order[last] + 1:] if not c.negated]
            if not later:
                raise self.err(f"{last}[{last}.len] is only supported when a component follows "
                               f"{last}", next(r.pos for r in refs if r.qualifier == last))
            last = later[0].var
        return last, self.rewrite(cond, last)

    def rewrite(self, e: ex.Expr, target: str) -> ex.Expr:
        guard = [False]
        out = self._rw(e, target, guard)
        if guard[0]:
            return ex.Binary("or", ex.Binary("=", ex.Call("COUNT", (ex.Column("*", target),)), ex.Literal(1)),
                          out)
        return out

    def _rw(self, e: ex.Expr, target: str, guard: list[bool]) -> ex.Expr:  # noqa: C901
        if isinstance(e, ex.Column):
            return self._col(e, target, guard)
        if isinstance(e, ex.Call):
            if e.name in _AGGS and len(e.args) == 1 and isinstance(e.args[0], ex.Column) \
                    and e.args[0].qualifier is not None:
                a = e.args[0]
                comp = self.by_var[a.qualifier]
                idx = a.index[0] if a.index else None
                if idx == "all_prev":
                    if a.qualifier != target:
                        raise self.err(f"{a.qualifier}[..i-1] is only allowed in "
                                       f"{a.qualifier}'s own conditions", a.pos)
                    guard[0] = True
                    return ex.Call(e.name, (ex.Column(a.name, a.qualifier, ("all_prev", 0),
                                                pos=a.pos),), pos=e.pos)
                if idx in ("all", None) and (comp.kleene or idx is None):
                    name = "*" if a.name == "*" else a.name
                    if name == "*" and e.name != "COUNT":
                        raise self.err(f"{e.name}({a.qualifier}[]) needs an attribute", a.pos)
                    return ex.Call(e.name, (ex.Column(name, a.qualifier, pos=a.pos),), pos=e.pos)
                raise self.err(f"cannot aggregate {ex.to_text(a)}", a.pos)
            return ex.Call(e.name, tuple(self._rw(x, target, guard) for x in e.args), e.qualifier,
                        pos=e.pos)
        if isinstance(e, ex.Literal | ex.Star | ex.TimeLiteral):
            return e
        if isinstance(e, ex.Unary):
            return ex.Unary(e.op, self._rw(e.operand, target, guard), pos=e.pos)
        if isinstance(e, ex.Binary):
            return ex.Binary(e.op, self._rw(e.left, target, guard), self._rw(e.right, target, guard),
                          pos=e.pos)
        if isinstance(e, ex.Between):
            return ex.Between(self._rw(e.operand, target, guard), self._rw(e.low, target, guard),
                           self._rw(e.high, target, guard), e.negated, pos=e.pos)
        if isinstance(e, ex.InList):
            return ex.InList(self._rw(e.operand, target, guard),
                          tuple(self._rw(v, target, guard) for v in e.values), e.negated,
                          pos=e.pos)
        if isinstance(e, ex.IsNull):
            return ex.IsNull(self._rw(e.operand, target, guard), e.negated, pos=e.pos)
        raise self.err(f"unsupported expression {type(e).__name__}", None)

    def _col(self, c: ex.Column, target: str, guard: list[bool]) -> ex.Expr:
        if c.qualifier is None:
            return c
        v = c.qualifier
        comp = self.by_var[v]
        idx = c.index[0] if c.index else None
        if c.name == "*" and idx is not None:
            raise self.err(f"{ex.to_text(c)} needs an attribute", c.pos)
        if not comp.kleene:
            if idx is not None:
                raise self.err(f"{v} is not a Kleene component; write {v}.{c.name}", c.pos)
            return ex.Column(c.name, v, pos=c.pos)
        own = v == target
        if idx is None and c.name == "len":
            return ex.Call("COUNT", (ex.Column("*", v),), pos=c.pos)
        if idx == "current" or (idx is None and own):
            if not own:
                raise self.err(f"{v}[i] is only allowed in {v}'s own conditions", c.pos)
            return ex.Column(c.name, v, pos=c.pos)
        if idx == "prev":
            if not own:
                raise self.err(f"{v}[i-1] is only allowed in {v}'s own conditions", c.pos)
            guard[0] = True
            return ex.Call("LAST", (ex.Column(c.name, v, pos=c.pos), ex.Literal(1)), pos=c.pos)
        if idx == "abs":
            if c.index[1] != 1:  # type: ignore[index]
                raise self.err(f"only {v}[1] is supported as an absolute subscript", c.pos)
            return ex.Call("FIRST", (ex.Column(c.name, v, pos=c.pos),), pos=c.pos)
        if idx in ("last", None):
            if own:
                raise self.err(f"{v}[{v}.len] inside {v}'s own condition is ambiguous; use "
                               f"{v}[i-1] or {v}[i]", c.pos)
            return ex.Column(c.name, v, pos=c.pos)
        raise self.err(f"{ex.to_text(c)} is only allowed inside an aggregate", c.pos)

    # ------------------------------------------------------------------ RETURN
    def measures(self) -> list[pm.Measure]:
        out: list[pm.Measure] = []
        if not self.returns:
            for c in self.comps:
                if c.negated:
                    continue
                if c.kleene:
                    out += [pm.Measure(f"{c.var}.first_seq", ex.Call("FIRST", (ex.Column("seq", c.var),))),
                            pm.Measure(f"{c.var}.last_seq", ex.Call("LAST", (ex.Column("seq", c.var),))),
                            pm.Measure(f"{c.var}.len", ex.Call("COUNT", (ex.Column("*", c.var),)))]
                else:
                    out.append(pm.Measure(f"{c.var}.seq", ex.Column("seq", c.var)))
            return out
        for e, alias, pos in self.returns:
            m = self._ret(e)
            out.append(pm.Measure(alias or ex.to_text(e), m, pos=pos))
        return out

    def _ret(self, e: ex.Expr) -> ex.Expr:
        if isinstance(e, ex.Column):
            if e.qualifier is None:
                return e
            if e.qualifier not in self.by_var:
                raise self.err(f"unknown variable {e.qualifier!r}", e.pos)
            comp = self.by_var[e.qualifier]
            if comp.negated:
                raise self.err("a negated component binds no event to return", e.pos)
            idx = e.index[0] if e.index else None
            if comp.kleene and idx is None and e.name == "len":
                return ex.Call("COUNT", (ex.Column("*", e.qualifier),))
            if idx in (None, "last"):
                return ex.Column(e.name, e.qualifier, pos=e.pos)
            if idx == "abs":
                return ex.Call("FIRST", (ex.Column(e.name, e.qualifier),
                                      ex.Literal(e.index[1] - 1)), pos=e.pos)  # type: ignore[index]
            raise self.err(f"{ex.to_text(e)} cannot be returned; use v[1], v[v.len] or an "
                           "aggregate over v[]", e.pos)
        if isinstance(e, ex.Call):
            if e.name in _AGGS and len(e.args) == 1 and isinstance(e.args[0], ex.Column):
                a = e.args[0]
                if a.index is not None and a.index[0] not in ("all",):
                    raise self.err(f"cannot aggregate {ex.to_text(a)} in RETURN", a.pos)
                return ex.Call(e.name, (ex.Column(a.name, a.qualifier, pos=a.pos),), pos=e.pos)
            return ex.Call(e.name, tuple(self._ret(a) for a in e.args), e.qualifier, pos=e.pos)
        if isinstance(e, ex.Unary):
            return ex.Unary(e.op, self._ret(e.operand), pos=e.pos)
        if isinstance(e, ex.Binary):
            return ex.Binary(e.op, self._ret(e.left), self._ret(e.right), pos=e.pos)
        return e


def parse(text: str) -> SaseQuery:
    """Parse a SASE+ query; :class:`~replaydb.errors.ParseError` names position and expected."""
    return _Parser(text).parse_query()


def bind(query: SaseQuery, schema: pa.Schema, time_unit: str | None, *,
         type_column: str | None = "type", state_cap: int | None = DEFAULT_STATE_CAP,
         vectorized: bool = True) -> PatternOperator:
    """Validate ``query`` against ``schema`` and return a ready
    :class:`~replaydb.operators.pattern.operator.PatternOperator`.

    Options: ``type_column`` (default ``"type"``), ``state_cap`` (None: no cap),
    ``vectorized=False`` forces the compiled NFA engines (for comparisons).
    """
    if not isinstance(query, SaseQuery):
        raise QueryError("bind() expects a parsed SASE+ query")
    type_column = type_column or "type"
    if query.event_types and type_column not in schema.names:
        raise QueryError(f"the query names event types but the stream has no {type_column!r} "
                         "column", hint="bind with type_column=<the column holding event types>")
    spec = query.pattern_spec(time_unit, type_column)
    return PatternOperator(PatternConfig(spec, schema, time_unit), state_cap=state_cap,
                           vectorized=vectorized)
