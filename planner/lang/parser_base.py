"""A recursive-descent parser base with an expression grammar every language shares.

Language parsers subclass :class:`ParserBase`; they call :meth:`parse_expr` for predicates and
values and may override :meth:`parse_primary_hook` to add their own atoms (``PREV(x)``,
``NEXT(S).price``, ``b[i-1].price``...). Errors are :class:`~replaydb.errors.ParseError` with the
position and the set of tokens that would have been accepted there.

Expression grammar (lowest to highest precedence)::

    expr     := or
    or       := and (OR and)*
    and      := not (AND not)*
    not      := NOT not | cmp
    cmp      := add [(= | == | != | <> | < | <= | > | >=) add
                     | [NOT] BETWEEN add AND add | [NOT] IN (expr, ...) | IS [NOT] NULL]
    add      := mul ((+ | -) mul)*
    mul      := unary ((* | / | %) unary)*
    unary    := - unary | + unary | primary
    primary  := number | string | TRUE | FALSE | NULL | ( expr )
              | name ( args )            -- function call (RUNNING/FINAL prefix allowed)
              | name [. name]            -- column, optionally qualified

The nesting depth is bounded (:data:`MAX_DEPTH`) so a hostile query cannot overflow the stack.
One level of parenthesized expression costs six or seven Python frames (``parse_expr`` down to
``parse_primary`` and its hook; levels of the grammar share functions, see below), so the bound
must keep ``MAX_DEPTH * 10`` well under the interpreter's default recursion limit (1000) with room
for the caller's frames: 50 levels, far more than any real query.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any

from replaydb.errors import ParseError
from replaydb.operators import expr as ex
from replaydb.planner.lang.lexer import Token, tokenize
from replaydb.timeunits import duration_word_ns, instant_ns

MAX_DEPTH = 50

_CMP = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
# what a failed test at each expression level records as expected, in the order it tests
_CMP_EXPECTED = tuple(repr(o) for o in ("=", "<", ">", "<=", ">=", "!="))
_AFTER_OPERAND_EXPECTED = ("BETWEEN", "IN", "IS")
_AFTER_OPERAND = frozenset(("NOT", *_AFTER_OPERAND_EXPECTED))
_ADD = ("+", "-")
_MUL = ("*", "/", "%")
_SIGN = ("-", "+")
_ADD_EXPECTED, _MUL_EXPECTED, _SIGN_EXPECTED = (tuple(repr(o) for o in ops)
                                                for ops in (_ADD, _MUL, _SIGN))
_PRIMARY_WORDS = frozenset(("TRUE", "FALSE", "NULL"))


@lru_cache(maxsize=256)
def _quoted(ops: tuple[str, ...]) -> tuple[str, ...]:
    """The operators as an error message lists them (every failed check records them)."""
    return tuple(repr(o) for o in ops)


class ParserBase:
    """Token cursor, error reporting and the shared expression grammar."""

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError("query text must be a str")
        self.text = text
        self.toks: list[Token] = tokenize(text)
        self.i = 0
        self._expected: list[str] = []
        self._depth = 0

    # ------------------------------------------------------------------ cursor
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def advance(self) -> Token:
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        self._expected = []
        return t

    def at_kw(self, *words: str) -> bool:
        if self.toks[self.i].kw in words:  # Token.is_kw, inlined: the parser's hottest test
            return True
        self._expected.extend(words)
        return False

    def at_op(self, *ops: str) -> bool:
        t = self.toks[self.i]
        if t.kind == "op" and t.text in ops:  # Token.is_op, inlined
            return True
        self._expected.extend(_quoted(ops))
        return False

    def accept_kw(self, *words: str) -> Token | None:
        return self.advance() if self.at_kw(*words) else None

    def accept_op(self, *ops: str) -> Token | None:
        return self.advance() if self.at_op(*ops) else None

    def parse_alias(self, *followers: str) -> str | None:
        """An optional alias: ``AS name``, or a bare identifier that is not one of the keywords
        ``followers`` (those that may follow the aliased item). None without one."""
        if self.accept_kw("AS"):
            return str(self.expect_ident("an alias").value)
        if self.tok.kind == "ident" and not self.tok.is_kw(*followers):
            return str(self.advance().value)
        return None

    def expect_kw(self, *words: str) -> Token:
        if self.at_kw(*words):
            return self.advance()
        raise self.error(f"unexpected {self.tok.describe()}")

    def expect_op(self, *ops: str) -> Token:
        if self.at_op(*ops):
            return self.advance()
        raise self.error(f"unexpected {self.tok.describe()}")

    def expect_ident(self, what: str = "a name") -> Token:
        if self.tok.kind == "ident":
            return self.advance()
        self._expected.append(what)
        raise self.error(f"unexpected {self.tok.describe()}")

    def expect_number(self, what: str = "a number") -> Token:
        if self.tok.kind == "number":
            return self.advance()
        self._expected.append(what)
        raise self.error(f"unexpected {self.tok.describe()}")

    def expect_eof(self) -> None:
        if self.tok.kind != "eof":
            self._expected.append("end of query")
            raise self.error(f"unexpected {self.tok.describe()}")

    def error(self, message: str, pos: int | None = None, *, hint: str | None = None) -> ParseError:
        """A ParseError at ``pos`` (default: the current token) listing what was expected."""
        return ParseError(
            message,
            text=self.text,
            pos=self.tok.pos if pos is None else pos,
            expected=list(self._expected),
            hint=hint,
        )

    def number_value(self, tok: Token) -> int | float:
        """The value of a number literal in an expression: an integer outside int64 is read as
        a float (SQL's approximate numeric); a number beyond the float range is a ParseError."""
        v = tok.value
        if isinstance(v, int) and not -(2**63) <= v < 2**63:
            v = float(v) if abs(v) < 2**1023 else math.inf
        if isinstance(v, float) and math.isinf(v):
            raise self.error(f"number {tok.text} out of range", tok.pos)
        return v  # type: ignore[return-value]

    # ------------------------------------------------------------------ durations
    def _finite_amount(self, num: Token) -> Fraction:
        """The exact value of a number token; a ParseError for one out of range (``1e309``)."""
        try:
            return Fraction(str(num.value))
        except (ValueError, OverflowError):
            raise self.error(f"number {num.text} out of range", num.pos) from None

    def parse_duration(self, default_word: str | None = None) -> tuple[Fraction, str, int]:
        """Parse a duration: ``30 MINUTES``, ``5s``, ``INTERVAL '5' SECOND``, ``300``.

        Returns ``(amount, word, pos)``; the caller converts with
        :func:`replaydb.timeunits.to_units` against the stream's unit. A bare number gets
        ``default_word`` (or ``''``, meaning stream units).
        """
        pos = self.tok.pos
        if self.accept_kw("INTERVAL"):
            if self.tok.kind == "string":
                raw = str(self.advance().value).strip()
                parts = raw.split()
                try:
                    amount = Fraction(parts[0])
                except (ValueError, IndexError, ZeroDivisionError):
                    raise self.error(f"bad interval literal {raw!r}", pos) from None
                if len(parts) == 2:
                    return amount, parts[1], pos
                if len(parts) != 1:
                    raise self.error(f"bad interval literal {raw!r}", pos)
            elif self.tok.kind == "number":
                amount = self._finite_amount(self.advance())
            else:
                self._expected.append("a quoted amount such as '5'")
                raise self.error(f"unexpected {self.tok.describe()}")
            word = self.expect_ident("a time unit such as SECOND").text
            if duration_word_ns(word) is None:
                raise self.error(f"unknown time unit {word!r}", self.toks[self.i - 1].pos)
            # SQL style "INTERVAL '1' DAY TO SECOND" is not supported on purpose.
            return amount, word, pos
        sign = -1 if self.accept_op("-") else 1
        num = self.expect_number("a duration")
        amount = self._finite_amount(num) * sign
        if num.unit:
            if duration_word_ns(num.unit) is None:
                raise self.error(f"unknown time unit {num.unit!r}", num.pos)
            return amount, num.unit, pos
        if self.tok.kind == "ident" and duration_word_ns(self.tok.text) is not None:
            return amount, self.advance().text, pos
        if self.tok.kind == "ident" and self.tok.text.lower() in ("units", "unit", "ticks", "events"):
            return amount, self.advance().text.lower(), pos
        return amount, default_word or "", pos

    # ------------------------------------------------------------------ expressions
    def parse_expr(self) -> ex.Expr:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise self.error(f"expression nested deeper than {MAX_DEPTH} levels")
            return self._parse_or()
        finally:
            self._depth -= 1

    # The levels below test the next token inline (what accept_kw/accept_op do, recording the
    # same expected words when it does not match), and the grammar's levels share functions:
    # OR with AND, NOT with the comparison, + - with * / % and the sign. Every primary passes
    # through all levels, so a call per test or per level was most of the parser's time; the
    # trees are those of one function per level (left-associative, the same positions).
    def _parse_or(self) -> ex.Expr:
        """``and (OR and)*`` with ``and := not (AND not)*``."""
        toks = self.toks
        left: Any = None  # the first term, then the tree so far
        op: Token | None = None  # the OR before the term being parsed
        while True:
            term = self._parse_not()
            while True:
                t = toks[self.i]
                if t.kw != "AND":
                    break
                self.advance()
                term = ex.Binary("and", term, self._parse_not(), pos=t.pos)
            left = term if op is None else ex.Binary("or", left, term, pos=op.pos)
            self._expected.append("AND")
            op = toks[self.i]
            if op.kw != "OR":
                self._expected.append("OR")
                return left
            self.advance()

    def _parse_not(self) -> ex.Expr:
        """``NOT not | cmp``, the comparison level inline."""
        t = self.toks[self.i]
        if t.kw == "NOT":
            self.advance()
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    raise self.error(f"expression nested deeper than {MAX_DEPTH} levels")
                return ex.Unary("not", self._parse_not(), pos=t.pos)
            finally:
                self._depth -= 1
        self._expected.append("NOT")
        left = self._parse_add()
        t = self.toks[self.i]
        if t.kind == "op" and t.text in _CMP:
            self.advance()
            return ex.Binary(_CMP[t.text], left, self._parse_add(), pos=t.pos)
        self._expected.extend(_CMP_EXPECTED)
        kw = t.kw
        if kw is None or kw not in _AFTER_OPERAND:  # none of NOT BETWEEN/IN, BETWEEN, IN, IS
            self._expected.extend(_AFTER_OPERAND_EXPECTED)
            return left
        return self._parse_after_operand(left, kw)

    def _parse_after_operand(self, left: ex.Expr, kw: str) -> ex.Expr:
        """``[NOT] BETWEEN add AND add | [NOT] IN (expr, ...) | IS [NOT] NULL`` after
        ``left`` (the current token's keyword is ``kw``)."""
        negated = False
        if kw == "NOT" and self.peek().is_kw("BETWEEN", "IN"):
            self.advance()
            negated = True
        if self.at_kw("BETWEEN"):
            pos = self.advance().pos
            low = self._parse_add()
            self.expect_kw("AND")
            high = self._parse_add()
            return ex.Between(left, low, high, negated, pos=pos)
        if self.at_kw("IN"):
            pos = self.advance().pos
            self.expect_op("(")
            vals = [self.parse_expr()]
            while self.accept_op(","):
                vals.append(self.parse_expr())
            self.expect_op(")")
            return ex.InList(left, tuple(vals), negated, pos=pos)
        if self.at_kw("IS"):
            pos = self.advance().pos
            neg = self.accept_kw("NOT") is not None
            self.expect_kw("NULL")
            return ex.IsNull(left, neg, pos=pos)
        return left

    def _parse_add(self) -> ex.Expr:
        """``mul ((+ | -) mul)*`` with ``mul := unary ((* | / | %) unary)*``."""
        toks = self.toks
        left: Any = None  # the first term, then the tree so far
        op: Token | None = None  # the + or - before the term being parsed
        while True:
            term = self._parse_unary()
            while True:
                t = toks[self.i]
                if t.kind != "op" or t.text not in _MUL:
                    break
                self.advance()
                term = ex.Binary(t.text, term, self._parse_unary(), pos=t.pos)
            left = term if op is None else ex.Binary(op.text, left, term, pos=op.pos)
            self._expected.extend(_MUL_EXPECTED)
            op = toks[self.i]
            if op.kind != "op" or op.text not in _ADD:
                self._expected.extend(_ADD_EXPECTED)
                return left
            self.advance()

    def _parse_unary(self) -> ex.Expr:
        t = self.toks[self.i]
        if t.kind == "op" and t.text in _SIGN:
            self.advance()
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    raise self.error(f"expression nested deeper than {MAX_DEPTH} levels")
                inner = self._parse_unary()
            finally:
                self._depth -= 1
            if t.text == "+":
                return inner
            if isinstance(inner, ex.Literal) and isinstance(inner.value, int | float) \
                    and not isinstance(inner.value, bool):
                return ex.Literal(-inner.value, pos=t.pos)
            return ex.Unary("neg", inner, pos=t.pos)
        self._expected.extend(_SIGN_EXPECTED)
        return self.parse_primary()

    def parse_primary(self) -> ex.Expr:
        hooked = self.parse_primary_hook()
        if hooked is not None:
            return hooked
        toks = self.toks
        t = toks[self.i]
        kind = t.kind
        if kind == "ident":
            kw = t.kw
            if t.text.upper() in ("TIMESTAMP", "DATE") and self.peek().kind == "string":
                return self.parse_time_literal()
            if kw is not None and kw in _PRIMARY_WORDS:
                nxt = self.peek()
                if kw in ("TRUE", "FALSE") and not nxt.is_op("(", "."):
                    self.advance()
                    return ex.Literal(kw == "TRUE", pos=t.pos)
                if kw == "NULL" and not nxt.is_op("(", "."):
                    self.advance()
                    return ex.Literal(None, pos=t.pos)
            qualifier = None
            if kw is not None and kw in ("RUNNING", "FINAL") and self.peek().kind == "ident" \
                    and self.peek(2).is_op("("):
                qualifier = self.advance().text.upper()
                t = self.tok
            name_tok = self.advance()
            nxt = toks[self.i]
            if nxt.kind == "op" and nxt.text == "(":
                return self.parse_call(name_tok, qualifier)
            self._expected.append("'('")
            if qualifier is not None:
                raise self.error("RUNNING/FINAL must precede a function call", name_tok.pos)
            if nxt.kind == "op" and nxt.text == ".":
                self.advance()
                attr = self.expect_ident("an attribute name")
                return ex.Column(str(attr.value), str(name_tok.value), pos=name_tok.pos)
            self._expected.append("'.'")
            return ex.Column(str(name_tok.value), pos=name_tok.pos)
        if kind == "number":
            self.advance()
            if t.unit:
                raise self.error(f"a duration ({t.text}) is not allowed here", t.pos)
            return ex.Literal(self.number_value(t), pos=t.pos)
        if kind == "string":
            self.advance()
            return ex.Literal(t.value, pos=t.pos)
        if kind == "op" and t.text == "(":
            self.advance()
            e = self.parse_expr()
            self.expect_op(")")
            return e
        self._expected.extend(["a value", "a column", "'('"])
        raise self.error(f"unexpected {t.describe()}")

    def parse_time_literal(self) -> ex.Expr:
        """``TIMESTAMP '...'`` / ``DATE '...'``: checked here (a bad one is a ParseError at its
        position), valued by the planner in the stream's unit and the query's zone."""
        word = self.advance()
        lit = self.advance()
        kind = word.text.upper()
        try:
            instant_ns(str(lit.value), kind)
        except ValueError as exc:
            raise self.error(str(exc), lit.pos) from None
        return ex.TimeLiteral(kind, str(lit.value), pos=word.pos)

    allow_distinct = False
    """Whether ``f(DISTINCT expr)`` parses (a language that evaluates it sets this)."""

    def parse_call(self, name_tok: Token, qualifier: str | None = None) -> ex.Expr:
        """Parse ``( args )`` after a function name (``COUNT(*)`` allowed; ``DISTINCT`` before
        the first argument where :attr:`allow_distinct`)."""
        self.expect_op("(")
        args: list[ex.Expr] = []
        distinct = False
        if self.allow_distinct and self.tok.is_kw("DISTINCT") \
                and not self.peek().is_op(")", ",", "."):
            self.advance()
            distinct = True
        if self.at_op("*"):
            star = self.advance()
            args.append(ex.Star(pos=star.pos))
        elif not self.at_op(")"):
            args.append(self.parse_expr())
            while self.accept_op(","):
                args.append(self.parse_expr())
        self.expect_op(")")
        return ex.Call(str(name_tok.value).upper(), tuple(args), qualifier, pos=name_tok.pos,
                       distinct=distinct)

    def parse_primary_hook(self) -> ex.Expr | None:
        """Override to parse language-specific atoms; return None to fall back to the default."""
        return None

    def parse_ident_list(self, what: str = "a name") -> list[Token]:
        """``name (, name)*``; where the list ends, ``','`` is among the expected tokens."""
        out = [self.expect_ident(what)]
        while self.at_op(","):
            self.advance()
            out.append(self.expect_ident(what))
        return out
