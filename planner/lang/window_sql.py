"""Windowed aggregation in SQL: windowing table functions in the style of Flink SQL.

Grammar (keywords case-insensitive)::

    query  := SELECT item (, item)*
              FROM TABLE ( tvf ) [[AS] alias]
              [WHERE predicate]
              GROUP BY gkey (, gkey)*
              [ORDER BY (window_start | window_end) [ASC]]
              [;]
    item   := window_start | window_end | key column | aggregate [[AS] alias]
    gkey   := window_start | window_end | key column
    tvf    := TUMBLE      ( TABLE s, DESCRIPTOR(t), size [, offset] [, named...] )
            | HOP         ( TABLE s, DESCRIPTOR(t), slide, size [, offset] [, named...] )
            | TUMBLE_ROWS ( TABLE s, size [, named...] )            -- count windows (extension)
            | HOP_ROWS    ( TABLE s, slide, size [, named...] )     -- count windows (extension)

Arguments may also be written by name, Flink style: ``HOP(DATA => TABLE s, TIMECOL =>
DESCRIPTOR(t), SLIDE => INTERVAL '5' SECOND, SIZE => INTERVAL '1' DAY)``.

Documented decisions:

* **HOP takes the slide before the size**, exactly as Flink's (and Calcite's) ``HOP(data,
  timecol, slide, size [, offset])`` (Spark's ``window(t, size, slide)`` uses the opposite order;
  named arguments avoid the question). ``HOP_ROWS`` follows HOP: slide, then size. As in Flink,
  a slide larger than the size leaves gaps between windows; unlike Flink's window aggregation,
  the size need not be a multiple of the slide (the slide1/slide2 split handles it).
* Durations: ``INTERVAL '5' SECOND``, ``INTERVAL '5 seconds'``, ``5s``, ``5 SECONDS``, or a bare
  number in stream time units; converted with :func:`replaydb.timeunits.to_units` at bind time.
  Count-window sizes are event counts (a positive integer, optionally followed by ``ROWS``).
* Windows are **epoch-aligned** (Flink/Spark convention: ``window_start`` is a multiple of the
  slide plus the optional offset) unless the extension argument ``ALIGN => 'FIRST'`` anchors them
  at the first event that passes WHERE (dissertation Def 2.8). Count windows are always anchored
  at the first event (Def 2.7) and are counted per group with GROUP BY.
* Empty windows are **not reported** (a GROUP BY group without rows has no row), unless the
  extension argument ``EMPTY => 'EMIT'`` asks for one row per window (ungrouped time windows,
  Def 2.11; COUNT is 0 and the other aggregates NULL).
* GROUP BY must list ``window_start`` and ``window_end`` (as Flink requires for window
  aggregation). Every other non-aggregate SELECT item must be a GROUP BY key.
* The result always has the operator's schema: ``window_start``, ``window_end``, the GROUP BY keys
  in GROUP BY order, then the aggregates in SELECT order, named by their aliases (default: the
  aggregate's text, e.g. ``SUM(x)``). Results are ordered by ``window_end``.
* WHERE filters events before windowing and may use event attributes only.
* The time column named by DESCRIPTOR must be the stream's time column ``t``.
* Aggregates: COUNT(*), COUNT(x), SUM, AVG, MIN, MAX, FIRST_VALUE/FIRST, LAST_VALUE/LAST, VAR_POP,
  VAR_SAMP/VARIANCE, STDDEV_POP, STDDEV_SAMP/STDDEV; the argument may be an expression. DISTINCT,
  HAVING and expressions over aggregates are not supported (clear errors).

Contract (``LANG-CONTRACT.md``): :data:`LANGUAGE`, :func:`detect`, :func:`parse`, :func:`bind`.
Example::

    q = parse("SELECT window_start, window_end, SUM(x) FROM TABLE(TUMBLE(TABLE s, "
              "DESCRIPTOR(t), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end")
    op = bind(q, schema, "ms")      # a WindowAggregate
    op.push(batch); op.flush(); op.results()
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pyarrow as pa

from replaydb.errors import ParseError, ReplayDBError, UsageError
from replaydb.operators.expr import Call, Column, Expr, Star, columns, to_text
from replaydb.operators.exprcode.check import check_condition, schema_kinds
from replaydb.operators.window import AGG_FUNCS, AggSpec, WindowAggregate, WindowConfig
from replaydb.operators.window.config import WINDOW_COLUMNS
from replaydb.planner.lang import detect as detection
from replaydb.planner.lang.parser_base import ParserBase
from replaydb.timeunits import MAX_DURATION, to_units

LANGUAGE = "window_sql"

TVFS = ("TUMBLE", "HOP", "TUMBLE_ROWS", "HOP_ROWS")
_POSITIONAL = {
    "TUMBLE": ("DATA", "TIMECOL", "SIZE", "OFFSET"),
    "HOP": ("DATA", "TIMECOL", "SLIDE", "SIZE", "OFFSET"),
    "TUMBLE_ROWS": ("DATA", "SIZE"),
    "HOP_ROWS": ("DATA", "SLIDE", "SIZE"),
}
_REQUIRED = {
    "TUMBLE": ("DATA", "TIMECOL", "SIZE"),
    "HOP": ("DATA", "TIMECOL", "SLIDE", "SIZE"),
    "TUMBLE_ROWS": ("DATA", "SIZE"),
    "HOP_ROWS": ("DATA", "SLIDE", "SIZE"),
}
_EXTENSIONS = ("ALIGN", "EMPTY")

@dataclass(frozen=True)
class Duration:
    """A parsed duration or count: ``amount`` of ``word`` (``''`` = stream units / events)."""

    amount: Fraction
    word: str
    pos: int


@dataclass(frozen=True)
class WindowQuery:
    """The logical windowed-aggregation query (see the module docstring).

    ``group_by`` holds the key columns (window_start/window_end removed); ``aggregates`` the
    aggregates in SELECT order; ``align``/``empty`` are None when the text does not say.
    """

    text: str
    sources: tuple[str, ...]
    tvf: str
    kind: str
    size: Duration
    slide: Duration | None
    offset: Duration | None
    time_column: Column | None
    group_by: tuple[Column, ...]
    aggregates: tuple[AggSpec, ...]
    agg_pos: tuple[int, ...]
    where: Expr | None
    align: str | None = None
    empty: str | None = None
    event_types: tuple[str, ...] = ()

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.group_by)


detect = detection.window_sql


class _Parser(ParserBase):
    def parse_primary_hook(self) -> Expr | None:
        t = self.tok
        if t.kind == "ident" and self.peek().is_op("(") and self.peek(2).is_kw("DISTINCT"):
            raise self.error(f"{t.text.upper()}(DISTINCT ...) is not supported", self.peek(2).pos)
        return None

    # ------------------------------------------------------------------ query
    def parse_query(self) -> WindowQuery:
        self.expect_kw("SELECT")
        items = [self._select_item()]
        while self.accept_op(","):
            items.append(self._select_item())
        self.expect_kw("FROM")
        tvf = self._from_clause()
        where = None
        if self.accept_kw("WHERE"):
            where = self.parse_expr()
            for c in columns(where):
                if c.name.lower() in WINDOW_COLUMNS and c.qualifier is None:
                    raise self.error(
                        f"WHERE filters events before windowing; {c.name} is not an event "
                        f"attribute", c.pos)
        if not self.at_kw("GROUP"):
            if self.at_kw("HAVING"):
                raise self.error("HAVING is not supported")
            raise self.error(f"unexpected {self.tok.describe()}",
                             hint="window aggregation needs GROUP BY window_start, window_end")
        self.advance()
        self.expect_kw("BY")
        gitems = [self._group_item()]
        while self.accept_op(","):
            gitems.append(self._group_item())
        if self.at_kw("HAVING"):
            raise self.error("HAVING is not supported")
        if self.accept_kw("ORDER"):
            self.expect_kw("BY")
            tok = self.tok
            if not tok.is_kw("WINDOW_START", "WINDOW_END"):
                self._expected.extend(["window_start", "window_end"])
                raise self.error(f"unexpected {tok.describe()}",
                                 hint="results are ordered by window_end; only ORDER BY "
                                      "window_start or window_end (ascending) is accepted")
            self.advance()
            self.accept_kw("ASC")
            if self.at_kw("DESC") or self.at_op(","):
                raise self.error("only ascending order by the window is supported")
        self.accept_op(";")
        self.expect_eof()
        return self._assemble(items, tvf, where, gitems)

    def _select_item(self) -> tuple[Expr, str | None, int]:
        pos = self.tok.pos
        if self.at_op("*"):
            raise self.error("SELECT * is not supported; list the window columns, keys and "
                             "aggregates")
        e = self.parse_expr()
        return e, self.parse_alias("FROM"), pos

    def _group_item(self) -> Column:
        tok = self.expect_ident("a column")
        if self.accept_op("."):
            attr = self.expect_ident("a column")
            return Column(str(attr.value), str(tok.value), pos=tok.pos)
        if self.at_op("("):
            raise self.error("GROUP BY takes columns, not expressions", tok.pos)
        return Column(str(tok.value), pos=tok.pos)

    def _from_clause(self) -> dict[str, Any]:
        self.expect_kw("TABLE")
        self.expect_op("(")
        name_tok = self.tok
        if not self.tok.is_kw(*TVFS):
            self._expected.extend(TVFS)
            raise self.error(f"unexpected {self.tok.describe()}")
        fn = self.advance().text.upper()
        self.expect_op("(")
        args: dict[str, Any] = {}
        positional = list(_POSITIONAL[fn])
        while True:
            pos = self.tok.pos
            if self.tok.kind == "ident" and self.peek().is_op("=") and self.peek(2).is_op(">") \
                    and self.peek(2).pos == self.peek().pos + 1:
                pname = self.advance().text.upper()
                self.advance()
                self.advance()
                if pname not in _POSITIONAL[fn] and pname not in _EXTENSIONS:
                    raise self.error(f"{fn} has no parameter {pname}", pos)
            else:
                if any(k in args for k in _EXTENSIONS) or not positional:
                    raise self.error(f"too many arguments for {fn}", pos)
                pname = positional[0]
            if pname in args:
                raise self.error(f"parameter {pname} given twice", pos)
            if pname in positional:
                positional = positional[positional.index(pname) + 1 :]
            args[pname] = self._tvf_arg(fn, pname)
            if self.accept_op(","):
                continue
            self.expect_op(")")
            break
        for req in _REQUIRED[fn]:
            if req not in args:
                raise self.error(f"{fn} needs the {req} argument", name_tok.pos)
        self.expect_op(")")
        args["_fn"] = fn
        args["_alias"] = self.parse_alias("WHERE", "GROUP", "HAVING", "ORDER")
        args["_pos"] = name_tok.pos
        return args

    def _tvf_arg(self, fn: str, pname: str) -> Any:
        if pname == "DATA":
            self.expect_kw("TABLE")
            return str(self.expect_ident("a stream name").value)
        if pname == "TIMECOL":
            self.expect_kw("DESCRIPTOR")
            self.expect_op("(")
            tok = self.expect_ident("the time column")
            self.expect_op(")")
            return Column(str(tok.value), pos=tok.pos)
        if pname in ("ALIGN", "EMPTY"):
            tok = self.tok
            if tok.kind in ("string", "ident"):
                self.advance()
                val = str(tok.value).upper()
                allowed = ("FIRST", "EPOCH") if pname == "ALIGN" else ("EMIT", "SKIP")
                if val in allowed:
                    return val.lower()
            self._expected.extend(repr(a) for a in
                                  (("'FIRST'", "'EPOCH'") if pname == "ALIGN" else
                                   ("'EMIT'", "'SKIP'")))
            raise self.error(f"bad {pname} value {tok.describe()}", tok.pos)
        if fn.endswith("_ROWS"):
            tok = self.expect_number("a number of events")
            if tok.unit or not isinstance(tok.value, int):
                raise self.error(f"{pname} of a count window is a whole number of events",
                                 tok.pos)
            self.accept_kw("ROWS", "EVENTS")
            return Duration(Fraction(tok.value), "", tok.pos)
        amount, word, pos = self.parse_duration()
        return Duration(amount, word, pos)

    # ------------------------------------------------------------------ checks
    def _assemble(self, items: list[tuple[Expr, str | None, int]], tvf: dict[str, Any],
                  where: Expr | None, gitems: list[Column]) -> WindowQuery:
        fn = tvf["_fn"]
        qualifiers = {q for q in (tvf["_alias"], tvf["DATA"]) if q}

        def check_qual(c: Column) -> None:
            if c.qualifier is not None and c.qualifier not in qualifiers:
                raise self.error(f"unknown table {c.qualifier!r}", c.pos)

        for c in columns(where):
            check_qual(c)
        seen_window: set[str] = set()
        keys: list[Column] = []
        for g in gitems:
            check_qual(g)
            lname = g.name.lower()
            if lname in WINDOW_COLUMNS:
                seen_window.add(lname)
            elif any(k.name == g.name for k in keys):
                raise self.error(f"GROUP BY lists {g.name} twice", g.pos)
            else:
                keys.append(Column(g.name, pos=g.pos))
        missing = [w for w in WINDOW_COLUMNS if w not in seen_window]
        if missing:
            raise self.error(
                f"GROUP BY must contain window_start and window_end (missing {missing[0]})",
                gitems[-1].pos,
                hint="window aggregation groups by the window: GROUP BY window_start, "
                     "window_end[, keys]")
        aggs: list[AggSpec] = []
        agg_pos: list[int] = []
        key_names = {k.name for k in keys}
        for e, alias, pos in items:
            if isinstance(e, Column):
                check_qual(e)
                lname = e.name.lower()
                if lname == "window_time":
                    raise self.error("window_time is not supported; use window_end", e.pos)
                if lname in WINDOW_COLUMNS or e.name in key_names:
                    continue
                raise self.error(f"{e.name} must appear in GROUP BY or inside an aggregate",
                                 e.pos)
            if isinstance(e, Call) and e.name in AGG_FUNCS and e.qualifier is None:
                func = AGG_FUNCS[e.name]
                if len(e.args) != 1:
                    raise self.error(f"{e.name} takes exactly one argument", e.pos)
                arg = e.args[0]
                if isinstance(arg, Star) and func != "COUNT":
                    raise self.error(f"{e.name}(*) is not allowed; only COUNT(*)", arg.pos)
                for node in arg.walk():
                    if isinstance(node, Call) and node.name in AGG_FUNCS:
                        raise self.error("aggregates cannot be nested", node.pos)
                    if isinstance(node, Column):
                        check_qual(node)
                        if node.name.lower() in WINDOW_COLUMNS:
                            raise self.error(f"{node.name} cannot be aggregated", node.pos)
                plain = arg if isinstance(arg, Star) else _unqualify(arg)
                aggs.append(AggSpec(func, plain, alias or to_text(e)))
                agg_pos.append(e.pos if e.pos is not None else pos)
                continue
            raise self.error(
                "a SELECT item must be window_start, window_end, a GROUP BY key or one "
                "aggregate call", pos)
        if not aggs:
            raise self.error("the SELECT list has no aggregate", items[0][2])
        names = list(WINDOW_COLUMNS) + [k.name for k in keys]
        for a, p in zip(aggs, agg_pos):
            if a.alias in names:
                raise self.error(f"output column {a.alias!r} appears twice; give it an alias", p)
            names.append(a.alias)
        kind = "count" if fn.endswith("_ROWS") else "time"
        size = tvf["SIZE"]
        slide = tvf.get("SLIDE")
        return WindowQuery(
            text=self.text, sources=(tvf["DATA"],), tvf=fn, kind=kind, size=size, slide=slide,
            offset=tvf.get("OFFSET"), time_column=tvf.get("TIMECOL"), group_by=tuple(keys),
            aggregates=tuple(aggs), agg_pos=tuple(agg_pos), where=_unqualify(where),
            align=tvf.get("ALIGN"), empty=tvf.get("EMPTY"))


def _unqualify(e: Expr | None) -> Expr | None:
    """Drop table qualifiers from column references (one table: they carry no meaning)."""
    if e is None:
        return None
    if isinstance(e, Column):
        return Column(e.name, pos=e.pos) if e.qualifier is not None else e
    changes = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            changes[f.name] = _unqualify(v)
        elif isinstance(v, tuple) and v and all(isinstance(x, Expr) for x in v):
            changes[f.name] = tuple(_unqualify(x) for x in v)
    return dataclasses.replace(e, **changes) if changes else e


def parse(text: str) -> WindowQuery:
    """Parse a windowing query (see the module docstring); ParseError with position on bad text."""
    return _Parser(text).parse_query()


# --------------------------------------------------------------------------- binding
def _units(q: WindowQuery, d: Duration, what: str, time_unit: str | None) -> int:
    if q.kind == "count":
        value = int(d.amount)
        if value > MAX_DURATION:
            raise ParseError(f"window {what} {value} is out of range (at most 2**62 events)",
                             text=q.text, pos=d.pos)
    else:
        try:
            value = to_units(d.amount, d.word, time_unit)
        except UsageError as e:
            raise ParseError(e.message, text=q.text, pos=d.pos, hint=e.hint) from None
    if value <= 0 and what != "offset":
        raise ParseError(f"window {what} must be positive", text=q.text, pos=d.pos)
    return value


def to_config(query: WindowQuery, schema: pa.Schema, time_unit: str | None,
              **options: Any) -> WindowConfig:
    """Validate ``query`` against ``schema`` and build the operator configuration.

    Options: ``align`` ('epoch'|'first') and ``empty`` ('skip'|'emit') apply where the text does
    not say; ``aliases`` maps source time-column names to ``t`` (DESCRIPTOR may use them); others
    are ignored here.
    """
    q = query
    names = set(schema.names)
    hint = f"columns are: {', '.join(schema.names)}"

    def err(msg: str, pos: int | None, h: str | None = None) -> ParseError:
        return ParseError(msg, text=q.text, pos=pos or 0, hint=h)

    aliases = options.get("aliases") or {}
    if q.time_column is not None and q.time_column.name != "t" \
            and aliases.get(q.time_column.name) != "t":
        raise err(f"windows are defined on the stream's time column 't', not "
                  f"{q.time_column.name!r}", q.time_column.pos)
    for c in columns(q.where):
        if c.name not in names:
            raise err(f"unknown column {c.name!r}", c.pos, hint)
    for k in q.group_by:
        if k.name not in names:
            raise err(f"unknown column {k.name!r}", k.pos, hint)
    for a in q.aggregates:
        if a.arg is None:
            continue
        for c in columns(a.arg):
            if c.name not in names:
                raise err(f"unknown column {c.name!r}", c.pos, hint)
            typ = schema.field(c.name).type
            numeric = pa.types.is_integer(typ) or pa.types.is_floating(typ) \
                or pa.types.is_boolean(typ) or pa.types.is_temporal(typ) \
                or pa.types.is_decimal(typ)
            if not numeric and not (a.func == "COUNT" and isinstance(a.arg, Column)):
                raise err(f"{a.func} needs a numeric argument; column {c.name!r} is {typ}",
                          c.pos)
    check_condition(q.where, schema_kinds(schema))
    size = _units(q, q.size, "size", time_unit)
    slide = _units(q, q.slide, "slide", time_unit) if q.slide is not None else size
    offset = _units(q, q.offset, "offset", time_unit) if q.offset is not None else 0
    align = q.align or options.get("align")
    if q.kind == "count":
        align = "first"
    empty = q.empty or options.get("empty") or "skip"
    try:
        return WindowConfig(
            size=size, slide=slide, kind=q.kind, align=align, offset=offset, empty=empty,
            group_by=q.key_names, where=q.where, aggregates=q.aggregates, schema=schema)
    except ReplayDBError as e:
        raise ParseError(e.message, text=q.text, pos=q.size.pos, hint=e.hint) from None


def bind(query: WindowQuery, schema: pa.Schema, time_unit: str | None, *,
         aliases: dict[str, str] | None = None, **options: Any) -> WindowAggregate:
    """A ready :class:`~replaydb.operators.window.WindowAggregate` for ``query`` over ``schema``.

    Options: those of :func:`to_config` (``aliases``: the stream's source time-column names,
    which DESCRIPTOR may name instead of ``t``), and ``state_cap`` (the operator's state cap).
    """
    cfg = to_config(query, schema, time_unit, aliases=aliases or {}, **options)
    kwargs = {"state_cap": options["state_cap"]} if "state_cap" in options else {}
    return WindowAggregate(cfg, **kwargs)
