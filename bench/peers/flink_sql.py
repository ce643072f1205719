"""Translate replaydb's MATCH_RECOGNIZE dialect into Flink SQL.

replaydb's dialect (see the MATCH_RECOGNIZE front end of the planner) and Flink SQL's
MATCH_RECOGNIZE are both SQL:2016 row pattern recognition; they differ in a few clauses only,
so the translation is a clause-aware rewrite of the tokens (the shared lexer of
:mod:`replaydb.planner.lang.lexer`, the shared duration grammar of
:class:`~replaydb.planner.lang.parser_base.ParserBase`). User text is never evaluated and
never pasted in unchecked: every identifier is re-emitted quoted with backticks, every string
literal re-escaped, and every operator checked against a fixed list.

The rules (each one tested in ``tests/bench/test_flink_peer.py``):

1. ``FROM stream [AS alias]`` becomes ``FROM `table```; a trailing ``;`` is dropped.
2. ``ORDER BY t [ASC] [, seq [ASC]]`` (or no ORDER BY at all) becomes
   ``ORDER BY `rowtime`, `seq```: Flink orders by the event-time attribute, a computed column
   ``TO_TIMESTAMP_LTZ(t - offset, 3)`` of the source table, and breaks timestamp ties by
   ``seq`` as replaydb does with its ``(t, seq)`` order. ``DESC`` or another column is an error.
3. ``WITHIN d`` (``300``, ``5s``, ``30 MINUTES``, ``INTERVAL '5' SECOND``) is converted into
   ``w`` stream units with :func:`replaydb.timeunits.to_units` and becomes
   ``WITHIN INTERVAL '<(w+1)/1000>' SECOND(9, 3)``. One stream unit is one Flink millisecond,
   and **Flink's WITHIN is strict**: its NFA drops a partial match as soon as
   ``row.ts - first.ts >= interval``, so it keeps exactly the matches with
   ``last.ts - first.ts < interval``, while replaydb keeps ``last.t - first.t <= w``. With
   integer times both are the same set when the interval is ``w + 1`` units (measured: a pair
   of adjacent rows one unit apart is not found with ``WITHIN INTERVAL '0.001' SECOND``).
4. A greedy looping quantifier (``*``, ``+``, ``{n,}``, ``{,m}``, ``{n,m}`` with ``m > n``) on a
   variable that is always true (not in DEFINE, or defined as ``TRUE``) becomes reluctant
   (``T*`` -> ``T*?``). Flink's greedy quantifiers do not backtrack: a greedy loop lets the
   next variable match only rows the loop's own condition rejects, so ``S1 T* S2`` with
   ``T AS TRUE`` finds no match at all in Flink (measured), whereas SQL:2016 backtracks. The
   reluctant gap finds, for every start row, the earliest-ending match; a start row has a
   match under greedy preference exactly when it has one under reluctant preference, so with
   ``ONE ROW PER MATCH`` and ``AFTER MATCH SKIP TO NEXT ROW`` (the benchmarks' shape) the
   match starts and the match count are the same as replaydb's; the last row of a match is
   the first possible one instead of the last one within the window. Greedy loops over other
   conditions are kept; they agree with SQL:2016 when the loop's condition rejects the rows
   the following variable accepts (otherwise Flink's non-backtracking semantics apply).
5. Variables are case-insensitive in replaydb (unquoted names are upper-cased) and
   case-sensitive in Flink: every variable is emitted upper-cased (double-quoted ones as
   written) in backticks. Column names are resolved against the table's columns (exact
   match first, then the one case-insensitive match) and emitted in backticks.
   Double-quoted identifiers become backtick-quoted; typographic quotes become ``'``.
6. A measure without a name gets its text as its name (as replaydb names it), e.g.
   ``FIRST(S1.seq)`` is emitted as ``FIRST(`S1`.`seq`) AS `FIRST(S1.seq)```.
7. ``==`` becomes ``=``, ``!=`` becomes ``<>``.
8. Without DEFINE (every variable true) ``DEFINE <first variable> AS TRUE`` is added (Flink
   requires the clause). ``AFTER MATCH SKIP TO v`` becomes ``SKIP TO LAST v`` (the standard's
   meaning). Without AFTER MATCH SKIP, ``AFTER MATCH SKIP PAST LAST ROW`` (the standard's
   default, replaydb's) is written out: Flink's default is ``SKIP TO NEXT ROW`` (measured: a
   query without the clause finds Flink's overlapping matches).
9. Rejected with a :class:`~replaydb.errors.ParseError` naming the position, because Flink
   does not support them: ``ALL ROWS PER MATCH``, alternation ``|``, quantified groups
   ``(A B)+``, ``PERMUTE``, ``SUBSET``, ``MATCH_NUMBER()``, ``CLASSIFIER()``, anchors and
   exclusions. Also rejected: an unqualified column inside navigation or an aggregate of a
   DEFINE condition (``LAST(x, 1)``, ``SUM(x)``): replaydb reads the whole match's rows there,
   and rule 5's ``v.x`` would read only the variable's (measured: ``LAST(x, 1)`` became
   ``LAST(B.x, 1)``, NULL on B's first row, and the matches were lost).

Complexity: linear in the number of tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from replaydb.errors import ParseError, UsageError
from replaydb.planner.lang.lexer import Token, tokenize
from replaydb.planner.lang.parser_base import ParserBase
from replaydb.timeunits import to_units

# Words of the expression grammar that stay keywords (never read as columns).
_SQL_WORDS = frozenset({
    "AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "LIKE", "ESCAPE",
    "CASE", "WHEN", "THEN", "ELSE", "END", "CAST", "AS", "DISTINCT", "FINAL", "RUNNING",
})
_OPS = {"==": "=", "!=": "<>"}
_ALLOWED_OPS = frozenset({"=", "<>", "<", ">", "<=", ">=", "+", "-", "*", "/", "%", "(", ")",
                          ",", "."})
_MATCH_ROW_FUNCS = frozenset({"FIRST", "LAST", "PREV", "NEXT", "COUNT", "SUM", "AVG", "MIN",
                               "MAX"})
"""Functions over which an unqualified column of a DEFINE condition reads the match's rows."""
_UNSUPPORTED_FUNCS = {"MATCH_NUMBER": "MATCH_NUMBER()", "CLASSIFIER": "CLASSIFIER()"}
# Clause starts inside MATCH_RECOGNIZE ( ... ): first word, second word or None.
_CLAUSES = (("PARTITION", "BY"), ("ORDER", "BY"), ("MEASURES", None), ("ONE", "ROW"),
            ("ALL", "ROWS"), ("AFTER", "MATCH"), ("PATTERN", None), ("WITHIN", None),
            ("SUBSET", None), ("DEFINE", None))
MAX_WITHIN_SECONDS = 999_999_999
"""Largest WITHIN Flink's ``SECOND(9, 3)`` interval literal holds (about 31 years)."""


def quote(name: str) -> str:
    """``name`` as a Flink SQL identifier in backticks (backticks inside doubled)."""
    return "`" + name.replace("`", "``") + "`"


def _string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class FlinkTranslation:
    """The Flink SQL text of one replaydb query and what the translation changed.

    ``window`` is the WITHIN of the replaydb query in stream units (None without WITHIN),
    ``flink_window_ms`` Flink's (strict) interval in milliseconds, ``window + 1``.
    ``relaxed`` names the always-true variables whose greedy loop became reluctant (rule 4).
    """

    sql: str
    window: int | None
    flink_window_ms: int | None
    relaxed: tuple[str, ...]


class _Translator:
    def __init__(self, text: str, table: str, time_column: str, time_unit: str | None,
                 rowtime: str, seq_column: str | None, columns: list[str] | None) -> None:
        self.text = text.replace("\u2018", "'").replace("\u2019", "'")
        self.toks = tokenize(self.text)
        self.table = table
        self.time_column = time_column
        self.time_unit = time_unit
        self.rowtime = rowtime
        self.columns = list(columns) if columns is not None else None
        if seq_column is not None and self.columns is not None \
                and seq_column not in self.columns:
            seq_column = None
        self.seq_column = seq_column
        self.trivial: set[str] = set()  # variables defined as TRUE
        self.defined: set[str] = set()  # variables with a DEFINE entry
        self.first_var: str | None = None

    # ------------------------------------------------------------------ helpers
    def error(self, message: str, tok: Token, expected: list[str] | None = None) -> ParseError:
        return ParseError(message, text=self.text, pos=tok.pos, expected=expected)

    def unsupported(self, what: str, tok: Token) -> ParseError:
        return ParseError(f"{what} is not supported by Flink's MATCH_RECOGNIZE", text=self.text,
                          pos=tok.pos, hint="run this query on replaydb only")

    @staticmethod
    def var_name(tok: Token) -> str:
        return str(tok.value) if tok.text.startswith('"') else str(tok.value).upper()

    def column(self, tok: Token) -> str:
        name = str(tok.value)
        if self.columns is None or name in self.columns:
            return quote(name)
        if not tok.text.startswith('"'):
            hits = [c for c in self.columns if c.lower() == name.lower()]
            if len(hits) == 1:
                return quote(hits[0])
        raise self.error(f"unknown column {name!r}", tok,
                         expected=[repr(c) for c in self.columns])

    def is_column(self, tok: Token) -> bool:
        if self.columns is None:
            return False
        name = str(tok.value)
        if tok.text.startswith('"'):
            return name in self.columns
        return any(c.lower() == name.lower() for c in self.columns)

    # ------------------------------------------------------------------ top level
    def run(self) -> FlinkTranslation:
        toks = self.toks
        i = 0
        if not toks[i].is_kw("SELECT"):
            raise self.error(f"unexpected {toks[i].describe()}", toks[i], ["SELECT"])
        i += 1
        depth, j = 0, i
        while not (depth == 0 and toks[j].is_kw("FROM")):
            if toks[j].kind == "eof":
                raise self.error("unexpected end of query", toks[j], ["FROM"])
            depth += toks[j].is_op("(") - toks[j].is_op(")")
            j += 1
        select = self.expr(toks[i:j], columns=False)
        i = j + 1
        if toks[i].kind != "ident":
            raise self.error(f"unexpected {toks[i].describe()}", toks[i], ["a stream name"])
        i += 1
        if toks[i].is_kw("AS") and toks[i + 1].kind == "ident" \
                and not toks[i + 1].is_kw("MATCH_RECOGNIZE"):
            i += 2
        if not toks[i].is_kw("MATCH_RECOGNIZE"):
            raise self.error(f"unexpected {toks[i].describe()}", toks[i], ["MATCH_RECOGNIZE"])
        i += 1
        if not toks[i].is_op("("):
            raise self.error(f"unexpected {toks[i].describe()}", toks[i], ["'('"])
        open_i = i
        depth, j = 0, i
        while True:
            t = toks[j]
            if t.kind == "eof":
                raise self.error("unclosed MATCH_RECOGNIZE (", toks[open_i], ["')'"])
            depth += t.is_op("(") - t.is_op(")")
            if depth == 0:
                break
            j += 1
        body = self.body(open_i + 1, j)
        i = j + 1
        alias = ""
        if toks[i].is_kw("AS"):
            i += 1
            if toks[i].kind != "ident":
                raise self.error(f"unexpected {toks[i].describe()}", toks[i], ["an alias"])
        if toks[i].kind == "ident":
            alias = " AS " + quote(str(toks[i].value))
            i += 1
        if toks[i].is_op(";"):
            i += 1
        if toks[i].kind != "eof":
            raise self.error(f"unexpected {toks[i].describe()}", toks[i], ["end of query"])
        sql = (f"SELECT {select}\nFROM {quote(self.table)}\nMATCH_RECOGNIZE (\n"
               + body.sql + f"\n){alias}")
        return FlinkTranslation(sql, body.window, body.flink_window_ms, body.relaxed)

    # ------------------------------------------------------------------ body
    def split_clauses(self, lo: int, hi: int) -> dict[str, tuple[int, int, Token]]:
        toks = self.toks
        starts: list[tuple[int, str]] = []
        depth = 0
        for k in range(lo, hi):
            t = toks[k]
            depth += t.is_op("(") - t.is_op(")")
            if depth != 0 or t.kind != "ident" or (k > lo and toks[k - 1].is_op(".")):
                continue
            if t.text.startswith('"'):
                continue
            for first, second in _CLAUSES:
                if t.is_kw(first) and (second is None or toks[k + 1].is_kw(second)):
                    starts.append((k, first))
                    break
        if not starts or starts[0][0] != lo:
            raise self.error(f"unexpected {toks[lo].describe()}", toks[lo],
                             [" ".join(w for w in c if w) for c in _CLAUSES])
        out: dict[str, tuple[int, int, Token]] = {}
        for n, (k, name) in enumerate(starts):
            end = starts[n + 1][0] if n + 1 < len(starts) else hi
            if name in out:
                raise self.error(f"{name} appears twice", toks[k])
            out[name] = (k, end, toks[k])
        return out

    def body(self, lo: int, hi: int) -> FlinkTranslation:
        clauses = self.split_clauses(lo, hi)
        toks = self.toks
        for name in ("ALL", "SUBSET"):
            if name in clauses:
                what = "ALL ROWS PER MATCH" if name == "ALL" else "SUBSET"
                raise self.unsupported(what, clauses[name][2])
        if "PATTERN" not in clauses:
            raise self.error("missing PATTERN", toks[hi], ["PATTERN"])
        defines = self.define(*clauses["DEFINE"][:2]) if "DEFINE" in clauses else None
        pattern, relaxed = self.pattern(*clauses["PATTERN"][:2])
        if defines is None:
            defines = f"DEFINE {quote(self.first_var or 'A')} AS TRUE"
        parts: list[str] = []
        if "PARTITION" in clauses:
            parts.append(self.partition(*clauses["PARTITION"][:2]))
        if "ORDER" in clauses:
            self.check_order(*clauses["ORDER"][:2])
        order = f"ORDER BY {quote(self.rowtime)}"
        if self.seq_column is not None:
            order += f", {quote(self.seq_column)}"
        parts.append(order)
        if "MEASURES" in clauses:
            parts.append(self.measures(*clauses["MEASURES"][:2]))
        if "ONE" in clauses:
            k, end, _ = clauses["ONE"]
            words = [t.text.upper() for t in toks[k:end]]
            if words != ["ONE", "ROW", "PER", "MATCH"]:
                raise self.error("expected ONE ROW PER MATCH", toks[k])
        parts.append("ONE ROW PER MATCH")
        if "AFTER" in clauses:
            parts.append(self.skip(*clauses["AFTER"][:2]))
        else:
            parts.append("AFTER MATCH SKIP PAST LAST ROW")
        parts.append(pattern)
        window = flink_ms = None
        if "WITHIN" in clauses:
            window, flink_ms, within = self.within(*clauses["WITHIN"][:2])
            parts.append(within)
        parts.append(defines)
        return FlinkTranslation("\n".join("  " + p for p in parts), window, flink_ms, relaxed)

    def items(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """Split toks[lo:hi] at depth-0 commas."""
        out, depth, start = [], 0, lo
        for k in range(lo, hi):
            t = self.toks[k]
            depth += t.is_op("(") - t.is_op(")")
            if depth == 0 and t.is_op(","):
                out.append((start, k))
                start = k + 1
        out.append((start, hi))
        for a, b in out:
            if a == b:
                tok = self.toks[a]
                raise self.error(f"unexpected {tok.describe()}", tok, ["an item"])
        return out

    def partition(self, lo: int, hi: int) -> str:
        cols = []
        for a, b in self.items(lo + 2, hi):
            if b - a != 1 or self.toks[a].kind != "ident":
                raise self.error("PARTITION BY takes column names", self.toks[a])
            cols.append(self.column(self.toks[a]))
        return "PARTITION BY " + ", ".join(cols)

    def check_order(self, lo: int, hi: int) -> None:
        allowed = [self.time_column, "seq"]
        for n, (a, b) in enumerate(self.items(lo + 2, hi)):
            tok = self.toks[a]
            name = str(tok.value)
            ok = n < len(allowed) and tok.kind == "ident" and (
                name == allowed[n] or (not tok.text.startswith('"')
                                       and name.lower() == allowed[n].lower()))
            if not ok:
                raise self.error(
                    f"ORDER BY may only name {self.time_column} (then seq): rows are in stream "
                    "order", tok, expected=allowed[n:n + 1])
            rest = self.toks[a + 1:b]
            if rest and not (len(rest) == 1 and rest[0].is_kw("ASC")):
                raise self.error("ORDER BY ... DESC is not supported: rows are in stream order",
                                 rest[0])

    def measures(self, lo: int, hi: int) -> str:
        out = []
        for a, b in self.items(lo + 1, hi):
            toks = self.toks[a:b]
            name: str | None = None
            if len(toks) >= 3 and toks[-2].is_kw("AS") and toks[-1].kind == "ident":
                name, toks = str(toks[-1].value), toks[:-2]
            elif len(toks) >= 2 and toks[-1].kind == "ident" and not toks[-2].is_op(".") \
                    and (toks[-2].is_op(")") or toks[-2].kind in ("ident", "number", "string")):
                name, toks = str(toks[-1].value), toks[:-1]
            if name is None:
                first, last = toks[0], toks[-1]
                name = " ".join(self.text[first.pos:last.pos + len(last.text)].split())
            out.append(f"{self.expr(toks, columns=True, measures=True)} AS {quote(name)}")
        return "MEASURES " + ", ".join(out)

    def skip(self, lo: int, hi: int) -> str:
        toks = self.toks[lo:hi]
        words = [t.text.upper() if t.kind == "ident" else t.text for t in toks]
        if words[:3] != ["AFTER", "MATCH", "SKIP"]:
            raise self.error("expected AFTER MATCH SKIP", toks[0])
        rest = toks[3:]
        w = words[3:]
        if w == ["PAST", "LAST", "ROW"]:
            return "AFTER MATCH SKIP PAST LAST ROW"
        if w == ["TO", "NEXT", "ROW"]:
            return "AFTER MATCH SKIP TO NEXT ROW"
        if len(w) == 3 and w[0] == "TO" and w[1] in ("FIRST", "LAST") and rest[2].kind == "ident":
            return f"AFTER MATCH SKIP TO {w[1]} {quote(self.var_name(rest[2]))}"
        if len(w) == 2 and w[0] == "TO" and rest[1].kind == "ident":
            return f"AFTER MATCH SKIP TO LAST {quote(self.var_name(rest[1]))}"
        tok = rest[0] if rest else self.toks[hi]
        raise self.error(f"unexpected {tok.describe()}", tok,
                         ["PAST LAST ROW", "TO NEXT ROW", "TO FIRST v", "TO LAST v"])

    def define(self, lo: int, hi: int) -> str:
        out = []
        for a, b in self.items(lo + 1, hi):
            toks = self.toks[a:b]
            if len(toks) < 3 or toks[0].kind != "ident" or not toks[1].is_kw("AS"):
                raise self.error("expected: variable AS condition", toks[0])
            var = self.var_name(toks[0])
            if var in self.defined:
                raise self.error(f"variable {var} is defined twice", toks[0])
            self.defined.add(var)
            cond = toks[2:]
            if len(cond) == 1 and cond[0].is_kw("TRUE"):
                self.trivial.add(var)
            out.append(f"{quote(var)} AS {self.expr(cond, columns=True, current=var)}")
        return "DEFINE " + ", ".join(out)

    def pattern(self, lo: int, hi: int) -> tuple[str, tuple[str, ...]]:
        """Re-emit the row pattern; greedy loops over always-true variables become reluctant."""
        toks = self.toks
        k = lo + 1
        out: list[str] = []
        relaxed: list[str] = []
        prev_var: str | None = None  # variable directly before a quantifier
        while k < hi:
            t = toks[k]
            if t.kind == "ident":
                if t.is_kw("PERMUTE") and toks[k + 1].is_op("("):
                    raise self.unsupported("PERMUTE", t)
                var = self.var_name(t)
                if self.first_var is None:
                    self.first_var = var
                out.append(quote(var))
                prev_var = var
                k += 1
                continue
            if t.is_op("("):
                out.append("(")
                prev_var = None
                k += 1
                continue
            if t.is_op(")"):
                out.append(")")
                nxt = toks[k + 1]
                if k + 1 < hi and (nxt.is_op("*", "+", "?") or nxt.is_op("{")):
                    raise self.unsupported("a quantifier on a group", nxt)
                prev_var = None
                k += 1
                continue
            if t.is_op("|"):
                raise self.unsupported("alternation '|'", t)
            if t.is_op("^", "$"):
                raise self.unsupported("the anchor " + t.text, t)
            if t.is_op("*", "+", "?", "{"):
                if prev_var is None:
                    raise self.error(f"unexpected {t.describe()}", t, ["a pattern variable"])
                quant, k, looping = self.quantifier(k, hi)
                greedy = not (k < hi and toks[k].is_op("?"))
                if not greedy:
                    k += 1
                    quant += "?"
                always_true = prev_var in self.trivial or prev_var not in self.defined
                if greedy and looping and always_true:
                    quant += "?"
                    relaxed.append(prev_var)
                out[-1] += quant
                prev_var = None
                continue
            raise self.error(f"unexpected {t.describe()}", t, ["a pattern variable", "'('"])
        text = " ".join(out).replace("( ", "(").replace(" )", ")")
        if not out:
            raise self.error("empty pattern", toks[lo])
        if text.startswith("(") and text.endswith(")") and self._balanced_outer(text):
            return "PATTERN " + text, tuple(dict.fromkeys(relaxed))
        return f"PATTERN ({text})", tuple(dict.fromkeys(relaxed))

    @staticmethod
    def _balanced_outer(text: str) -> bool:
        depth = 0
        for n, c in enumerate(text):
            depth += (c == "(") - (c == ")")
            if depth == 0 and n < len(text) - 1:
                return False
        return True

    def quantifier(self, k: int, hi: int) -> tuple[str, int, bool]:
        """Parse a quantifier at toks[k]; returns (text, next index, loops more than once)."""
        t = self.toks[k]
        if t.is_op("*"):
            return "*", k + 1, True
        if t.is_op("+"):
            return "+", k + 1, True
        if t.is_op("?"):
            return "?", k + 1, False
        # { n } | { n , } | { , m } | { n , m }
        toks = self.toks
        k += 1
        lo_txt = hi_txt = ""
        comma = False
        if toks[k].kind == "number":
            lo_txt = self._bound(toks[k])
            k += 1
        if toks[k].is_op(","):
            comma = True
            k += 1
            if toks[k].kind == "number":
                hi_txt = self._bound(toks[k])
                k += 1
        if not toks[k].is_op("}") or (not lo_txt and not hi_txt):
            raise self.error(f"bad quantifier at {toks[k].describe()}", toks[k], ["'}'"])
        k += 1
        if not comma:
            return "{" + lo_txt + "}", k, False
        looping = not (lo_txt and hi_txt and int(lo_txt) == int(hi_txt))
        return "{" + lo_txt + "," + hi_txt + "}", k, looping

    def _bound(self, tok: Token) -> str:
        if not isinstance(tok.value, int) or tok.unit:
            raise self.error("quantifier bounds must be integers", tok)
        return str(tok.value)

    def within(self, lo: int, hi: int) -> tuple[int, int, str]:
        p = ParserBase(self.text)
        p.i = lo + 1
        amount, word, pos = p.parse_duration()
        if p.i != hi:
            tok = self.toks[p.i]
            raise self.error(f"unexpected {tok.describe()} after WITHIN", tok, ["DEFINE"])
        try:
            w = to_units(amount, word, self.time_unit)
        except UsageError as e:
            raise ParseError(str(e), text=self.text, pos=pos) from None
        if w < 0:
            raise ParseError("WITHIN must not be negative", text=self.text, pos=pos)
        ms = w + 1
        seconds = Decimal(ms) / 1000
        if seconds > MAX_WITHIN_SECONDS:
            raise ParseError(f"WITHIN {w} units is longer than Flink's interval literal holds",
                             text=self.text, pos=pos)
        return w, ms, f"WITHIN INTERVAL '{seconds:.3f}' SECOND(9, 3)"

    # ------------------------------------------------------------------ expressions
    def expr(self, toks: list[Token], *, columns: bool, current: str | None = None,
             measures: bool = False) -> str:
        """Re-emit an expression: identifiers quoted, columns resolved, operators checked.

        ``current``: the variable a DEFINE condition is for; its unqualified columns are the
        current row's, i.e. ``current.column`` (Flink's planner fails on unqualified columns).
        Inside navigation or an aggregate (``LAST(x, 1)``, ``SUM(x)``) an unqualified column
        means the rows of the whole match, which Flink cannot express: it is rejected.
        ``measures``: unqualified columns are rejected (they would mean the match's last row;
        write ``LAST(v.column)``).
        """
        out: list[str] = []
        skip_paren = False  # the '(' of a call, already emitted with the function name
        calls: list[str | None] = []  # per open '(': the function it belongs to, or None
        for n, t in enumerate(toks):
            if skip_paren:
                skip_paren = False
                continue
            if t.is_op("("):
                calls.append(None)
            elif t.is_op(")") and calls:
                calls.pop()
            prev = toks[n - 1] if n > 0 else None
            nxt = toks[n + 1] if n + 1 < len(toks) else None
            if t.kind == "ident":
                quoted = t.text.startswith('"')
                if nxt is not None and nxt.is_op("(") and not quoted \
                        and t.text.upper() not in _SQL_WORDS:
                    name = t.text.upper()
                    if name in _UNSUPPORTED_FUNCS:
                        raise self.unsupported(_UNSUPPORTED_FUNCS[name], t)
                    out.append(name + "(")
                    calls.append(name)
                    skip_paren = True
                elif nxt is not None and nxt.is_op("."):
                    out.append(quote(self.var_name(t)))
                elif prev is not None and prev.is_op("."):
                    out.append(self.column(t) if columns else quote(str(t.value)))
                elif not quoted and t.text.upper() in _SQL_WORDS:
                    out.append(t.text.upper())
                elif columns and self.is_column(t):
                    if measures:
                        raise self.error(
                            f"qualify the column {t.text} with a pattern variable", t,
                            expected=["v." + t.text])
                    if current is not None:
                        if any(c in _MATCH_ROW_FUNCS for c in calls):
                            raise self.error(
                                f"qualify the column {t.text} with a pattern variable: "
                                "unqualified inside navigation or an aggregate it means the "
                                "whole match's rows, which Flink cannot express", t,
                                expected=[f"{current}.{t.text}"])
                        out.append(quote(current) + "." + self.column(t))
                    else:
                        out.append(self.column(t))
                else:
                    out.append(quote(str(t.value)) if quoted else t.text)
            elif t.kind == "string":
                out.append(_string(str(t.value)))
            elif t.kind == "number":
                if t.unit:
                    raise self.error(f"a duration ({t.text}) is not allowed here", t)
                out.append(t.text)
            elif t.kind == "op":
                op = _OPS.get(t.text, t.text)
                if op not in _ALLOWED_OPS:
                    raise self.error(f"unexpected {t.describe()}", t)
                out.append(op)
            else:
                raise self.error(f"unexpected {t.describe()}", t)
        return _join(out)


def _join(parts: list[str]) -> str:
    """Join expression pieces with single spaces, but none after a call's or a group's '(',
    around '.', or before ')' and ','. Pieces are whole tokens (a string literal is one piece,
    so its inner commas and spaces are never touched)."""
    s = ""
    for n, p in enumerate(parts):
        if n == 0:
            s = p
        elif p in (".", ",", ")") or parts[n - 1] == "." or parts[n - 1].endswith("("):
            s += p
        else:
            s += " " + p
    return s


def translate(query_text: str, table: str, time_column: str = "t",
              time_unit: str | None = None, *, rowtime: str = "rowtime",
              seq_column: str | None = "seq",
              columns: list[str] | None = None) -> FlinkTranslation:
    """Translate one replaydb MATCH_RECOGNIZE query into Flink SQL (rules in the module doc).

    ``table`` is the Flink table the query reads, ``time_column``/``time_unit`` the stream's
    time column and unit (None: a unit-less stream, WITHIN takes bare numbers only),
    ``rowtime`` the name of the source table's event-time attribute, ``seq_column`` the
    tie-breaking column (dropped from ORDER BY when ``columns`` lacks it), ``columns`` the
    table's column names (None: names are quoted as written, not resolved).
    """
    tr = _Translator(query_text, table, time_column, time_unit, rowtime, seq_column, columns)
    return tr.run()


def to_flink_sql(query_text: str, table: str, time_column: str = "t",
                 time_unit: str | None = None, **options: object) -> str:
    """The Flink SQL text of ``query_text``; see :func:`translate` for the options."""
    return translate(query_text, table, time_column, time_unit, **options).sql  # type: ignore[arg-type]
