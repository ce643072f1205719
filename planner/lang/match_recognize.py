"""SQL ``MATCH_RECOGNIZE`` (SQL:2016 row pattern recognition) front end.

Grammar (keywords case-insensitive; clauses in this order, each optional unless noted)::

    SELECT select_list FROM source MATCH_RECOGNIZE (
        [PARTITION BY col, ...]
        [ORDER BY t [ASC] [, seq [ASC]]]
        [MEASURES expr [[AS] name], ...]
        [ONE ROW PER MATCH
         | ALL ROWS PER MATCH [SHOW EMPTY MATCHES | OMIT EMPTY MATCHES | WITH UNMATCHED ROWS]]
        [AFTER MATCH SKIP {PAST LAST ROW | TO NEXT ROW | TO FIRST v | TO LAST v | TO v}]
        PATTERN ( row_pattern )            -- required; see below for the parentheses
        [WITHIN duration]                  -- Flink's / the dissertation's extension
        [SUBSET u = (v, ...), ...]
        DEFINE v AS condition, ...         -- required unless every variable is always true
    ) [[AS] alias] [;]

    source      := stream [[AS] alias]
                 | '(' SELECT ('*' | col, ...) FROM stream [WHERE condition] ')' [[AS] alias]
    row_pattern := alternative ('|' alternative)*
    alternative := term+
    term        := primary [quantifier]
    primary     := v | '(' row_pattern ')' | '^' | '$' | '{-' row_pattern '-}'
                 | PERMUTE '(' row_pattern (',' row_pattern)* ')'
    quantifier  := ('*' | '+' | '?' | '{n}' | '{n,}' | '{,m}' | '{n,m}') ['?']   -- '?': reluctant

``select_list`` is ``*`` or a list of expressions over the output columns (measures, partition
columns, the metadata columns of :mod:`replaydb.operators.pattern.operator`), each with an
optional ``AS alias``. ``duration``: ``30 MINUTES``, ``INTERVAL '5' SECOND``, ``5s`` or a bare
number of stream time units.

The supported subset of SQL:2016 and the decisions taken:

* rows are the stream's events in ``(t, seq)`` order; ORDER BY may only name ``t`` (and ``seq``)
  ascending - the operator is online and never reorders;
* contiguous rows within a partition, greedy and reluctant quantifiers with the standard's
  preferment, alternation, grouping, the anchors ``^`` and ``$``, ``PERMUTE`` (lexicographic
  preference among its orders), exclusion ``{- -}`` (rows left out of ALL ROWS PER MATCH
  output), AFTER MATCH SKIP (with the standard's exceptions when the
  skip target is missing or is the match's first row), ONE ROW / ALL ROWS PER MATCH, CLASSIFIER(),
  MATCH_NUMBER(), RUNNING/FINAL, PREV/NEXT/FIRST/LAST, COUNT/SUM/AVG/MIN/MAX over variables;
  the exact meaning inside DEFINE is in :mod:`replaydb.operators.pattern.lowering`, inside
  MEASURES in :mod:`replaydb.operators.pattern.measures`;
* a pattern that can match zero rows (``A*``, ``A? B?``, ``()``) has empty matches (SHOW /
  OMIT EMPTY MATCHES decide whether ALL ROWS PER MATCH outputs them), and ALL ROWS PER MATCH
  WITH UNMATCHED ROWS outputs the rows in no match; a quantified group that can match zero rows
  (``(B?)+``) follows Trino's matcher (:mod:`replaydb.operators.pattern.automaton`);
* ``SUBSET U = (A, B)``: union variables in MEASURES, DEFINE and AFTER MATCH SKIP;
* not supported (ParseError/QueryError naming the position): NEXT inside DEFINE;
* clauses come in the order above, each at most once; a repeated or misplaced clause is a
  ParseError naming it and the order;
* a row pattern written in parentheses ends at its closing parenthesis: what follows must be
  WITHIN, SUBSET, DEFINE or the end of the body. Without parentheses (the dissertation's form)
  it ends at WITHIN, SUBSET, DEFINE or that end; either way an unquoted clause keyword or a
  word of a condition (AS, AND, OR, NOT, TRUE, FALSE, NULL, ...) is never a variable, so a
  misspelled clause fails instead of becoming always-true variables;
* variable names are case-insensitive unless double-quoted (a quoted reserved word may be a
  variable); column names are matched case-insensitively against the stream when they are not
  exact;
* conditions are type-checked when the query is bound
  (:mod:`replaydb.operators.pattern.typecheck`): a condition is a boolean (or NULL), strings
  compare with strings only, functions must exist;
* a measure written without a name is named by its text (``A.ID``), so the dissertation's
  Listing 3.1 runs as written; typographic quotes (U+2018/U+2019, as copied from PDFs) are read
  as ``'``.

Public API (the language contract): :data:`LANGUAGE`, :func:`detect`, :func:`parse` ->
:class:`MatchRecognizeQuery`, :func:`bind` -> :class:`~replaydb.operators.pattern.operator.PatternOperator`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fractions import Fraction

import pyarrow as pa

from replaydb.errors import ParseError, QueryError, UsageError
from replaydb.operators.base import DEFAULT_STATE_CAP
from replaydb.operators.expr import Column, Expr, to_text
from replaydb.operators.pattern import model as pm
from replaydb.operators.pattern.config import PatternConfig
from replaydb.operators.pattern.operator import PatternOperator
from replaydb.planner.lang import detect as detection
from replaydb.planner.lang.parser_base import MAX_DEPTH, ParserBase
from replaydb.timeunits import to_units

LANGUAGE = "match_recognize"

_END_OF_PATTERN = ("WITHIN", "DEFINE", "SUBSET")
_CLAUSES = {"PARTITION": "PARTITION BY", "ORDER": "ORDER BY", "MEASURES": "MEASURES",
            "ONE": "ONE ROW PER MATCH", "ALL": "ALL ROWS PER MATCH",
            "AFTER": "AFTER MATCH SKIP", "PATTERN": "PATTERN", "WITHIN": "WITHIN",
            "SUBSET": "SUBSET", "DEFINE": "DEFINE"}
"""The words that open a clause of the MATCH_RECOGNIZE body, in the order the clauses come."""
_CLAUSE_ORDER = ("PARTITION BY, ORDER BY, MEASURES, ONE ROW / ALL ROWS PER MATCH, "
                 "AFTER MATCH SKIP, PATTERN, WITHIN, SUBSET, DEFINE")
_RESERVED_VARIABLES = frozenset(_CLAUSES.keys() - {"ONE", "ALL"}) | frozenset(
    ("AS", "AND", "OR", "NOT", "TRUE", "FALSE", "NULL", "SELECT", "FROM", "MATCH_RECOGNIZE"))
"""Words that are never an unquoted pattern variable: a clause keyword or a word of a
condition in a row pattern is a clause out of place or a misspelled one, never a variable."""


@dataclass(frozen=True)
class Duration:
    """A duration as written: amount, unit word ('' = stream units), position in the text."""

    amount: Fraction
    word: str
    pos: int

    def units(self, time_unit: str | None, text: str) -> int:
        try:
            return to_units(self.amount, self.word, time_unit)
        except UsageError as e:
            raise ParseError(str(e), text=text, pos=self.pos) from None


@dataclass(frozen=True)
class MatchRecognizeQuery:
    """The logical query: a :class:`PatternSpec` whose window is still a written duration."""

    spec: pm.PatternSpec
    window: Duration | None
    sources: tuple[str, ...]
    text: str
    event_types: tuple[str, ...] = ()
    order_by: tuple[str, int] = ("t", -1)
    """The ORDER BY column and its position in the text: ``t`` or the stream's source time
    column (an alias of ``t``), checked by :func:`bind` against the stream."""

    def pattern_spec(self, time_unit: str | None) -> pm.PatternSpec:
        """The spec with WITHIN converted into stream units."""
        w = None if self.window is None else self.window.units(time_unit, self.text)
        if w is not None and w < 0:
            raise ParseError("WITHIN must not be negative", text=self.text, pos=self.window.pos)
        return replace(self.spec, window=w)


def is_time_alias(schema: pa.Schema, name: str) -> bool:
    """True when ``name`` is a column the replay added as an alias of ``t``."""
    if name not in schema.names:
        return False
    meta = schema.field(name).metadata or {}
    return meta.get(b"replaydb.alias_of") == b"t"


detect = detection.match_recognize


def _normalize_quotes(text: str) -> str:
    return text.replace("\u2018", "'").replace("\u2019", "'")


class _Parser(ParserBase):
    allow_distinct = True  # COUNT(DISTINCT x) in MEASURES

    def __init__(self, text: str) -> None:
        super().__init__(_normalize_quotes(text))
        self.original = text
        self.clauses_seen: tuple[str, ...] = ()

    # ------------------------------------------------------------------ atoms
    def parse_primary_hook(self) -> Expr | None:
        """``var.*`` (every column of a variable's rows); the tokens tested in place, as
        every primary passes here."""
        toks, i = self.toks, self.i
        t = toks[i]
        if t.kind == "ident" and i + 2 < len(toks):
            dot, star = toks[i + 1], toks[i + 2]
            if dot.kind == "op" and dot.text == "." and star.kind == "op" and star.text == "*":
                self.advance()
                self.advance()
                self.advance()
                return Column("*", self.var_name(t), pos=t.pos)
        return None

    def clause_error(self) -> ParseError | None:
        """The error for a clause keyword where its clause may not come (repeated, or after a
        clause that follows it); None when the current token opens no clause."""
        kw = self.tok.kw
        if kw not in _CLAUSES or (kw in ("ONE", "ALL") and not self.peek().is_kw("ROW", "ROWS")):
            return None
        seen = kw in self.clauses_seen
        what = "appears twice" if seen else "is out of place"
        return self.error(f"{_CLAUSES[kw]} {what}: the clauses of MATCH_RECOGNIZE come in the "
                          f"order {_CLAUSE_ORDER}, each at most once")

    def seen(self, kw: str) -> None:
        """Record that the clause opened by ``kw`` has been read (for :meth:`clause_error`)."""
        self.clauses_seen = (*self.clauses_seen, kw)

    def var_name(self, tok) -> str:  # type: ignore[no-untyped-def]
        """Variables are case-insensitive unless quoted: unquoted names are upper-cased."""
        if tok.text.startswith('"'):
            return str(tok.value)
        return str(tok.value).upper()

    # ------------------------------------------------------------------ query
    def parse_query(self) -> MatchRecognizeQuery:
        self.expect_kw("SELECT")
        select = self.parse_select_list()
        self.expect_kw("FROM")
        src, where, columns = self.parse_source()
        if self.at_kw("AS") and self.peek().kind == "ident" and not self.peek().is_kw(
                "MATCH_RECOGNIZE"):
            self.advance()
            self.advance()
        elif self.tok.kind == "ident" and not self.at_kw("MATCH_RECOGNIZE"):
            self.advance()  # an alias without AS
        self.expect_kw("MATCH_RECOGNIZE")
        self.expect_op("(")
        spec, window = self.parse_body()
        if not self.at_op(")"):
            raise self.clause_error() or self.error(f"unexpected {self.tok.describe()}")
        self.advance()
        if self.accept_kw("AS"):
            self.expect_ident("an alias")
        elif self.tok.kind == "ident":
            self.advance()
        self.accept_op(";")
        self.expect_eof()
        spec = replace(spec, select=select, sources=(str(src.value),), text=self.original,
                       where=where, columns=columns)
        return MatchRecognizeQuery(spec, window, (str(src.value),), self.original,
                                   order_by=getattr(self, "order_by", ("t", -1)))

    def parse_source(self):  # type: ignore[no-untyped-def]
        """``stream`` or ``(SELECT * | col, ... FROM stream [WHERE condition])``: the stream's
        token, the WHERE condition (None) and the selected columns (None: all)."""
        if not self.accept_op("("):
            return self.expect_ident("a stream name or '('"), None, None
        self.expect_kw("SELECT")
        columns: list[str] | None = None
        if not self.accept_op("*"):
            columns = [str(t.value) for t in self.parse_ident_list("a column")]
        self.expect_kw("FROM")
        src = self.expect_ident("a stream name")
        where = self.parse_expr() if self.accept_kw("WHERE") else None
        self.expect_op(")")
        return src, where, None if columns is None else tuple(columns)

    def parse_select_list(self) -> tuple[pm.SelectItem, ...] | None:
        items: list[pm.SelectItem] = []
        while True:
            if self.at_op("*"):
                self.advance()
                items.append(pm.SelectItem(None, None, True))
            else:
                e = self.parse_expr()
                items.append(pm.SelectItem(e, self.parse_alias("FROM")))
            if not self.accept_op(","):
                break
        if len(items) == 1 and items[0].star:
            return None
        return tuple(items)

    def parse_body(self) -> tuple[pm.PatternSpec, Duration | None]:
        partition: list[str] = []
        if self.accept_kw("PARTITION"):
            self.seen("PARTITION")
            self.expect_kw("BY")
            partition = [str(t.value) for t in self.parse_ident_list("a column")]
        if self.accept_kw("ORDER"):
            self.seen("ORDER")
            self.expect_kw("BY")
            self.parse_order_by()
        measures: list[pm.Measure] = []
        if self.accept_kw("MEASURES"):
            self.seen("MEASURES")
            measures = self.parse_measures()
        rows = pm.RowsPerMatch.ONE
        show_empty, unmatched = True, False
        if self.at_kw("ONE"):
            self.seen("ONE")
            self.advance()
            self.expect_kw("ROW")
            self.expect_kw("PER")
            self.expect_kw("MATCH")
        elif self.at_kw("ALL"):
            self.seen("ALL")
            self.advance()
            self.expect_kw("ROWS")
            self.expect_kw("PER")
            self.expect_kw("MATCH")
            rows = pm.RowsPerMatch.ALL
            if self.at_kw("SHOW", "OMIT"):
                show_empty = self.advance().kw == "SHOW"
                self.expect_kw("EMPTY")
                self.expect_kw("MATCHES")
            elif self.accept_kw("WITH"):
                self.expect_kw("UNMATCHED")
                self.expect_kw("ROWS")
                unmatched = True
        skip = pm.AfterMatchSkip()
        if self.accept_kw("AFTER"):
            self.seen("AFTER")
            skip = self.parse_skip()
        if not self.at_kw("PATTERN"):
            raise self.clause_error() or self.error(f"unexpected {self.tok.describe()}")
        self.advance()
        self.seen("PATTERN")
        pattern = self.parse_pattern_clause()
        window = None
        if self.accept_kw("WITHIN"):
            self.seen("WITHIN")
            amount, word, pos = self.parse_duration()
            window = Duration(amount, word, pos)
        subsets: list[pm.Subset] = []
        if self.accept_kw("SUBSET"):
            self.seen("SUBSET")
            subsets = self.parse_subsets()
        defines: list[pm.VarDef] = []
        if self.accept_kw("DEFINE"):
            self.seen("DEFINE")
            while True:
                vt = self.expect_ident("a pattern variable")
                self.expect_kw("AS")
                cond = self.parse_expr()
                defines.append(pm.VarDef(self.var_name(vt), cond, pos=vt.pos))
                if not self.accept_op(","):
                    break
        else:
            self._expected.append("DEFINE")
        spec = pm.PatternSpec(
            pattern=pattern, defines=tuple(defines), window=None, strategy=pm.Strategy.CONTIGUOUS,
            semantics=pm.Semantics.SQL, partition_by=tuple(partition), measures=tuple(measures),
            rows_per_match=rows, after_match_skip=skip, subsets=tuple(subsets),
            show_empty=show_empty, unmatched_rows=unmatched)
        return spec, window

    def parse_subsets(self) -> list[pm.Subset]:
        """``SUBSET U = (A, B), ...``: union variables (checked against the pattern when the
        query is bound)."""
        out: list[pm.Subset] = []
        while True:
            tok = self.expect_ident("a union variable")
            self.expect_op("=")
            self.expect_op("(")
            members = [self.var_name(t) for t in self.parse_ident_list("a pattern variable")]
            self.expect_op(")")
            out.append(pm.Subset(self.var_name(tok), tuple(members), pos=tok.pos))
            if not self.accept_op(","):
                return out

    def parse_order_by(self) -> None:
        """``ORDER BY <time column> [ASC] [, seq [ASC]]``: rows are always in (t, seq) order, so
        the only key allowed is the time (``t`` or the stream's source time column, checked at
        bind time), optionally followed by ``seq``."""
        tok = self.expect_ident("the time column (t)")
        self.order_by = (str(tok.value), tok.pos)
        self._no_desc()
        if self.accept_op(","):
            if not self.at_kw("SEQ"):
                raise self.error("ORDER BY may only name the time column, then seq: rows are "
                                 "always in stream order")
            self.advance()
            self._no_desc()
        if self.at_op(","):
            raise self.error("ORDER BY takes at most the time column and seq")

    def _no_desc(self) -> None:
        if self.at_kw("DESC"):
            raise self.error("ORDER BY ... DESC is not supported: rows are in stream order")
        self.accept_kw("ASC")

    def parse_measures(self) -> list[pm.Measure]:
        out: list[pm.Measure] = []
        while True:
            start = self.tok.pos
            e = self.parse_expr()
            end = self.toks[self.i - 1]
            if self.accept_kw("AS"):
                name = str(self.expect_ident("a measure name").value)
            elif self.tok.kind == "ident" and self.tok.kw not in _CLAUSES:
                name = str(self.advance().value)
            else:
                name = self.text[start: end.pos + len(end.text)].strip()
                name = re.sub(r"\s+", " ", name) if name else to_text(e)
            out.append(pm.Measure(name, e, pos=start))
            if not self.accept_op(","):
                return out

    def parse_skip(self) -> pm.AfterMatchSkip:
        self.expect_kw("MATCH")
        self.expect_kw("SKIP")
        if self.accept_kw("PAST"):
            self.expect_kw("LAST")
            self.expect_kw("ROW")
            return pm.AfterMatchSkip(pm.SkipKind.PAST_LAST_ROW)
        self.expect_kw("TO")
        if self.at_kw("NEXT"):
            self.advance()
            self.expect_kw("ROW")
            return pm.AfterMatchSkip(pm.SkipKind.TO_NEXT_ROW)
        if self.at_kw("FIRST") and self.peek().kind == "ident":
            self.advance()
            return pm.AfterMatchSkip(pm.SkipKind.TO_FIRST, self.var_name(self.expect_ident()))
        if self.at_kw("LAST") and self.peek().kind == "ident":
            self.advance()
            return pm.AfterMatchSkip(pm.SkipKind.TO_LAST, self.var_name(self.expect_ident()))
        tok = self.expect_ident("NEXT ROW, FIRST v, LAST v or a variable")
        return pm.AfterMatchSkip(pm.SkipKind.TO_LAST, self.var_name(tok))

    # ------------------------------------------------------------------ row pattern
    def parse_pattern_clause(self) -> pm.PatternNode:
        if self.at_op("("):
            self.advance()
            # PATTERN (): the empty pattern, an empty match at every row
            p = pm.Seq(()) if self.tok.is_op(")") else self.parse_alt(bare=False)
            self.expect_op(")")
            if self.at_kw(*_END_OF_PATTERN) or self.at_op(")"):
                return p
            raise self.clause_error() or self.error(
                f"unexpected {self.tok.describe()}: the row pattern ends at the parenthesis that "
                "closes PATTERN (", hint="write the whole row pattern inside PATTERN ( ... )")
        return self.parse_alt(bare=True)

    def _pattern_end(self, bare: bool) -> bool:
        t = self.tok
        if t.is_op(")", "|", ",") or t.kind == "eof":
            return True
        if t.is_op("-") and self.peek().is_op("}"):
            return True  # the end of an exclusion {- ... -}
        if t.is_kw(*_END_OF_PATTERN):
            if not bare:
                self._expected.append("')'")
            return True
        return False

    def parse_alt(self, bare: bool) -> pm.PatternNode:
        opts = [self.parse_seq(bare)]
        while self.accept_op("|"):
            opts.append(self.parse_seq(bare))
        return opts[0] if len(opts) == 1 else pm.Alt(tuple(opts))

    def parse_seq(self, bare: bool) -> pm.PatternNode:
        items: list[pm.PatternNode] = []
        while not self._pattern_end(bare):
            items.append(self.parse_term(bare))
        if not items:
            self._expected.extend(["a pattern variable", "'('"])
            raise self.error(f"unexpected {self.tok.describe()} (empty pattern)")
        return items[0] if len(items) == 1 else pm.Seq(tuple(items))

    def parse_term(self, bare: bool) -> pm.PatternNode:
        t = self.tok
        if t.is_op("(") and self.peek().is_op(")"):  # (): the empty pattern
            self.advance()
            self.advance()
            node: pm.PatternNode = pm.Seq(())
        elif t.is_op("("):
            self.advance()
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    raise self.error(f"pattern nested deeper than {MAX_DEPTH} levels", t.pos)
                inner = self.parse_alt(bare=False)
            finally:
                self._depth -= 1
            self.expect_op(")")
            node = inner if isinstance(inner, pm.Seq) else pm.Seq((inner,))
        elif t.is_op("^", "$"):
            self.advance()
            node = pm.Anchor(t.text == "^", pos=t.pos)
        elif t.is_op("{") and self.peek().is_op("-"):
            node = self.parse_exclusion()
        elif t.is_kw("PERMUTE") and self.peek().is_op("("):
            node = self.parse_permute()
        elif t.kind == "ident":
            if t.kw in _RESERVED_VARIABLES:
                raise self.clause_error() or self.error(
                    f"{t.text} is a reserved word, not a pattern variable",
                    hint=f'double-quote it ("{t.text}") to name a variable so')
            self.advance()
            node = pm.Var(self.var_name(t), pos=t.pos)
        else:
            self._expected.extend(["a pattern variable", "'('"])
            raise self.error(f"unexpected {t.describe()}")
        return self.parse_quantifier(node)

    def _nested(self, parse):  # type: ignore[no-untyped-def]
        """``parse()`` one level deeper (the nesting limit of patterns)."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise self.error(f"pattern nested deeper than {MAX_DEPTH} levels")
            return parse()
        finally:
            self._depth -= 1

    def parse_exclusion(self) -> pm.PatternNode:
        """``{- row_pattern -}``: its rows are left out of ALL ROWS PER MATCH output."""
        self.advance()
        self.advance()
        inner = self._nested(lambda: self.parse_alt(bare=False))
        if not (self.at_op("-") and self.peek().is_op("}")):
            self._expected.append("'-}'")
            raise self.error(f"unexpected {self.tok.describe()} (an exclusion ends with -}})")
        self.advance()
        self.advance()
        return pm.Exclude(inner)

    def parse_permute(self) -> pm.PatternNode:
        """``PERMUTE(row_pattern, ...)``: the items in every order, lexicographically
        preferred."""
        self.advance()
        self.expect_op("(")
        items = [self._nested(lambda: self.parse_alt(bare=False))]
        while self.at_op(","):  # at_op lists ',' as expected where the items end
            self.advance()
            items.append(self._nested(lambda: self.parse_alt(bare=False)))
        self.expect_op(")")
        return pm.Permute(tuple(items))

    def parse_quantifier(self, node: pm.PatternNode) -> pm.PatternNode:
        t = self.tok
        if t.is_op("*", "+", "?"):
            self.advance()
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[t.text]
        elif t.is_op("{") and not self.peek().is_op("-"):
            self.advance()
            lo, hi = 0, None
            if self.tok.kind == "number":
                lo = self._int(self.advance())
                if self.accept_op(","):
                    hi = self._int(self.advance()) if self.tok.kind == "number" else None
                else:
                    hi = lo
            else:  # {,n}; {,} is *
                self.expect_op(",")
                if not self.at_op("}"):
                    hi = self._int(self.expect_number("an upper bound"))
            self.expect_op("}")
            if hi is not None and hi < lo:
                raise self.error(f"bad quantifier {{{lo},{hi}}}", t.pos)
        else:
            self._expected.extend(["'*'", "'+'", "'?'", "'{'"])
            return node
        greedy = not self.accept_op("?")
        return pm.Repeat(node, lo, hi, greedy)

    def _int(self, tok) -> int:  # type: ignore[no-untyped-def]
        if not isinstance(tok.value, int) or tok.unit:
            raise self.error("quantifier bounds must be integers", tok.pos)
        return int(tok.value)


def parse(text: str) -> MatchRecognizeQuery:
    """Parse a MATCH_RECOGNIZE query; :class:`~replaydb.errors.ParseError` names the position
    and what was expected."""
    return _Parser(text).parse_query()


def bind(query: MatchRecognizeQuery, schema: pa.Schema, time_unit: str | None, *,
         state_cap: int | None = DEFAULT_STATE_CAP, type_column: str | None = None,
         vectorized: bool = True) -> PatternOperator:
    """Validate ``query`` against ``schema`` and return a ready
    :class:`~replaydb.operators.pattern.operator.PatternOperator`.

    Options: ``state_cap`` (None: no cap); ``type_column`` is accepted and ignored
    (MATCH_RECOGNIZE has no event types); ``vectorized=False`` forces the compiled NFA engines
    (for comparisons). Errors are QueryError/ParseError naming the position.
    """
    if not isinstance(query, MatchRecognizeQuery):
        raise QueryError("bind() expects a parsed MATCH_RECOGNIZE query")
    col, pos = query.order_by
    if col != "t" and not is_time_alias(schema, col):
        raise ParseError(f"ORDER BY {col}: rows are ordered by the stream's time; name t or the "
                         "stream's time column", text=query.text, pos=max(pos, 0),
                         expected=["t"])
    spec = query.pattern_spec(time_unit)
    return PatternOperator(PatternConfig(spec, schema, time_unit), state_cap=state_cap,
                           vectorized=vectorized)
