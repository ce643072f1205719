"""The one logical model of a sequential pattern query.

Both front ends (SQL ``MATCH_RECOGNIZE`` in :mod:`replaydb.planner.lang.match_recognize` and
SASE+ in :mod:`replaydb.planner.lang.sase`) parse into a :class:`PatternSpec`; the planner rewrites
it (dissertation Table 3.2: single-attribute range conditions, Kleene-star gaps) and the operator
(:class:`replaydb.operators.pattern.operator.PatternOperator`) runs it.

The pattern itself is a small regular-expression tree over *variables* (symbols):

* :class:`Var` - one event bound to a variable (a basic symbol);
* :class:`Seq` - concatenation (also what a parenthesized group is: ``(A B)`` is ``Seq``);
* :class:`Alt` - alternation ``A | B`` (earlier options are preferred, SQL:2016 preferment);
* :class:`Repeat` - quantifier ``{min, max}`` with ``max=None`` unbounded, ``greedy`` or
  reluctant (``*`` is ``Repeat(x, 0, None)``, ``+`` is ``Repeat(x, 1, None)``, ``?`` is
  ``Repeat(x, 0, 1)``);
* :class:`Neg` - SASE+ negation ``~X`` / ``!(X)``: no event satisfying the negated variable's
  condition may occur between the neighbouring positive components (allowed only between two
  positive components of a sequence);
* :class:`Permute` - ``PERMUTE(X, Y, ...)``: the items in any order; the orders are preferred
  lexicographically by the items' positions in the list (SQL:2016, as Trino);
* :class:`Exclude` - ``{- X -}``: matches as ``X``; the rows it binds are left out of ALL ROWS
  PER MATCH output (they stay part of the match for DEFINE and MEASURES);
* :class:`Anchor` - ``^`` (the partition's start) or ``$`` (its end): binds no row.

Every variable's condition is an :mod:`replaydb.operators.expr` tree in the *running* dialect of
SQL:2016 row pattern recognition (see :mod:`replaydb.operators.pattern.compile` for the exact
meaning of ``A.x``, ``PREV``, ``FIRST``, ``LAST`` and aggregates inside a condition). SASE+
conditions are translated into that dialect by the SASE front end.

Everything in this module is a frozen dataclass: specs are hashable, comparable and printable
(:meth:`PatternNode.to_text`) for EXPLAIN.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum

from replaydb.operators.expr import Expr, to_text


class Strategy(str, Enum):
    """Event selection (matching) strategy.

    * ``CONTIGUOUS`` - strict contiguity (Def. 2.17): matched events are adjacent in the stream
      (adjacent within the partition when the query is partitioned - that is partition contiguity).
    * ``PARTITION_CONTIGUITY`` - SASE+ partition contiguity: contiguous within each partition; the
      same as ``CONTIGUOUS`` with partition keys (it requires them).
    * ``SKIP_TILL_NEXT`` - skip-till-next-match: irrelevant events are ignored, relevant ones taken.
    * ``SKIP_TILL_ANY`` - skip-till-any-match: every relevant event is both taken and ignored.

    The normative operational table (window exceeded / no transition / self / forward transition)
    is implemented in :mod:`replaydb.operators.pattern.nfa_cep`.
    """

    CONTIGUOUS = "contiguous"
    PARTITION_CONTIGUITY = "partition_contiguity"
    SKIP_TILL_NEXT = "skip_till_next"
    SKIP_TILL_ANY = "skip_till_any"


class Semantics(str, Enum):
    """Which family of match semantics a spec uses.

    * ``ALL_RUNS`` - the dissertation / SASE+ semantics: every accepting run of the automaton is a
      match (subject to the strategy); every event that satisfies a first symbol starts a run.
    * ``SQL`` - SQL:2016 ``MATCH_RECOGNIZE``: rows are contiguous within a partition; at each
      starting row the most preferred match (greedy/reluctant quantifiers, alternation order) is
      chosen; after a match, AFTER MATCH SKIP picks where the next attempt starts.
    """

    ALL_RUNS = "all_runs"
    SQL = "sql"


class RowsPerMatch(str, Enum):
    ONE = "one"
    ALL = "all"


class SkipKind(str, Enum):
    PAST_LAST_ROW = "past_last_row"
    TO_NEXT_ROW = "to_next_row"
    TO_FIRST = "to_first"
    TO_LAST = "to_last"


# --------------------------------------------------------------------------- pattern tree
@dataclass(frozen=True)
class PatternNode:
    """Base class of pattern tree nodes."""

    def children(self) -> tuple[PatternNode, ...]:
        return ()

    def walk(self) -> Iterator[PatternNode]:
        """All nodes, pre-order."""
        yield self
        for c in self.children():
            yield from c.walk()

    def variables(self) -> list[str]:
        """Variable names in order of first occurrence (negated ones included)."""
        seen: dict[str, None] = {}
        for n in self.walk():
            if isinstance(n, Var):
                seen.setdefault(n.name, None)
        return list(seen)

    def to_text(self) -> str:
        return pattern_text(self)

    def __str__(self) -> str:
        return pattern_text(self)


@dataclass(frozen=True)
class Var(PatternNode):
    """One event bound to variable ``name``."""

    name: str
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Seq(PatternNode):
    """Concatenation (a parenthesized group is a ``Seq``, possibly of one item)."""

    items: tuple[PatternNode, ...]

    def children(self) -> tuple[PatternNode, ...]:
        return self.items


@dataclass(frozen=True)
class Alt(PatternNode):
    """Alternation; earlier options are preferred (SQL:2016 preferment)."""

    options: tuple[PatternNode, ...]

    def children(self) -> tuple[PatternNode, ...]:
        return self.options


@dataclass(frozen=True)
class Repeat(PatternNode):
    """Quantifier: between ``min`` and ``max`` (None: unbounded) repetitions of ``body``."""

    body: PatternNode
    min: int
    max: int | None
    greedy: bool = True

    def children(self) -> tuple[PatternNode, ...]:
        return (self.body,)


@dataclass(frozen=True)
class Neg(PatternNode):
    """SASE+ negation: no event bound to ``body`` (a :class:`Var`) occurs at this point."""

    body: PatternNode
    pos: int | None = field(default=None, compare=False)

    def children(self) -> tuple[PatternNode, ...]:
        return (self.body,)


@dataclass(frozen=True)
class Permute(PatternNode):
    """``PERMUTE(items)``: every order of the items, most preferred first in lexicographic
    order of the items' indices (``PERMUTE(A, B, C)``: ``A B C``, ``A C B``, ``B A C``, ...)."""

    items: tuple[PatternNode, ...]

    def children(self) -> tuple[PatternNode, ...]:
        return self.items


@dataclass(frozen=True)
class Exclude(PatternNode):
    """``{- body -}``: matches as ``body``; its rows are not output with ALL ROWS PER MATCH."""

    body: PatternNode

    def children(self) -> tuple[PatternNode, ...]:
        return (self.body,)


@dataclass(frozen=True)
class Anchor(PatternNode):
    """``^`` (``start=True``): only before a partition's first row; ``$``: only after its last
    row. Binds no row."""

    start: bool
    pos: int | None = field(default=None, compare=False)


def pattern_text(n: PatternNode, parent: str = "") -> str:
    """Text of a pattern in MATCH_RECOGNIZE syntax (for EXPLAIN and error messages)."""
    if isinstance(n, Var):
        return n.name
    if isinstance(n, Seq):
        s = " ".join(pattern_text(i, "seq") for i in n.items)
        return f"({s})" if parent in ("rep",) or (parent == "seq" and len(n.items) > 1) else s
    if isinstance(n, Alt):
        s = " | ".join(pattern_text(o, "alt") for o in n.options)
        return f"({s})" if parent else s
    if isinstance(n, Repeat):
        inner = pattern_text(n.body, "rep")
        if (n.min, n.max) == (0, None):
            q = "*"
        elif (n.min, n.max) == (1, None):
            q = "+"
        elif (n.min, n.max) == (0, 1):
            q = "?"
        elif n.max is None:
            q = f"{{{n.min},}}"
        elif n.min == n.max:
            q = f"{{{n.min}}}"
        else:
            q = f"{{{n.min},{n.max}}}"
        return inner + q + ("" if n.greedy else "?")
    if isinstance(n, Neg):
        return "~" + pattern_text(n.body, "rep")
    if isinstance(n, Permute):
        return "PERMUTE(" + ", ".join(pattern_text(i, "alt") for i in n.items) + ")"
    if isinstance(n, Exclude):
        return "{- " + pattern_text(n.body) + " -}"
    if isinstance(n, Anchor):
        return "^" if n.start else "$"
    raise TypeError(f"unknown pattern node {n!r}")  # pragma: no cover


# --------------------------------------------------------------------------- spec parts
@dataclass(frozen=True)
class VarDef:
    """A variable's condition and, for SASE+ components, its event type(s).

    ``condition`` is None for an always-true variable. ``event_types`` restricts the variable to
    events whose type column holds one of the names (``()``: any type).
    """

    name: str
    condition: Expr | None = None
    event_types: tuple[str, ...] = ()
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Measure:
    """One output column: ``expr AS name``. ``expr`` uses the MEASURES dialect."""

    name: str
    expr: Expr
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Subset:
    """``SUBSET name = (members)``: a union variable standing for the rows bound to any of its
    primary variables (in MEASURES, DEFINE and AFTER MATCH SKIP)."""

    name: str
    members: tuple[str, ...]
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AfterMatchSkip:
    kind: SkipKind = SkipKind.PAST_LAST_ROW
    var: str | None = None

    def to_text(self) -> str:
        k = {SkipKind.PAST_LAST_ROW: "PAST LAST ROW", SkipKind.TO_NEXT_ROW: "TO NEXT ROW",
             SkipKind.TO_FIRST: "TO FIRST", SkipKind.TO_LAST: "TO LAST"}[self.kind]
        return f"AFTER MATCH SKIP {k}" + (f" {self.var}" if self.var else "")


@dataclass(frozen=True)
class SelectItem:
    """An item of the SQL select list over the MATCH_RECOGNIZE output (``*`` when ``star``)."""

    expr: Expr | None
    alias: str | None = None
    star: bool = False


@dataclass(frozen=True)
class PatternSpec:
    """A complete sequential pattern query, independent of the language it was written in.

    Attributes:
        pattern: the pattern tree.
        defines: one :class:`VarDef` per variable of the pattern (variables without a definition
            are always true, as in SQL:2016).
        window: WITHIN in stream time units (``last.t - first.t <= window``), None for none.
        strategy: event selection strategy (``SQL`` semantics requires contiguous rows).
        semantics: :class:`Semantics`.
        partition_by: partition key columns (matches never mix partitions).
        measures: output measures.
        rows_per_match: ONE or ALL (ALL only with ``SQL`` semantics).
        after_match_skip: where the next match attempt starts (``SQL`` semantics).
        equivalence: SASE+ ``[attr]`` tests: all events of a match agree on these attributes.
        type_column: the column holding event type names (for ``VarDef.event_types``).
        select: SQL select list over the output (None: ``*``).
        subsets: MATCH_RECOGNIZE's union variables (``SUBSET``).
        show_empty: whether empty matches (of a pattern that can match zero rows) are output
            (``SHOW EMPTY MATCHES``, the default; ``OMIT EMPTY MATCHES``: not).
        unmatched_rows: ``ALL ROWS PER MATCH WITH UNMATCHED ROWS``: every row that is in no
            match and starts no empty match is output once, with NULL measures.
        where: MATCH_RECOGNIZE over ``(SELECT ... FROM s WHERE where)``: only the rows passing
            it are rows of the pattern (the others do not break contiguity); None: every row.
        columns: the subquery's selected columns (None: all); ``t`` and ``seq``, the stream's
            order, are always rows' columns.
        sources: streams named in a FROM clause.
        text: the original query text.
    """

    pattern: PatternNode
    defines: tuple[VarDef, ...] = ()
    window: int | None = None
    strategy: Strategy = Strategy.CONTIGUOUS
    semantics: Semantics = Semantics.ALL_RUNS
    partition_by: tuple[str, ...] = ()
    measures: tuple[Measure, ...] = ()
    rows_per_match: RowsPerMatch = RowsPerMatch.ONE
    after_match_skip: AfterMatchSkip = AfterMatchSkip()
    equivalence: tuple[str, ...] = ()
    type_column: str = "type"
    select: tuple[SelectItem, ...] | None = None
    sources: tuple[str, ...] = ()
    text: str = ""
    subsets: tuple[Subset, ...] = ()
    show_empty: bool = True
    unmatched_rows: bool = False
    where: Expr | None = None
    columns: tuple[str, ...] | None = None

    def subset_members(self) -> dict[str, tuple[str, ...]]:
        """Each union variable's primary variables."""
        return {s.name: s.members for s in self.subsets}

    def variables(self) -> list[str]:
        """Variables in order of first occurrence in the pattern."""
        return self.pattern.variables()

    def define(self, var: str) -> VarDef:
        for d in self.defines:
            if d.name == var:
                return d
        return VarDef(var)

    def anchored(self) -> bool:
        """Whether the pattern has an anchor ``^`` or ``$``."""
        return any(isinstance(n, Anchor) for n in self.pattern.walk())

    def excludes(self) -> bool:
        """Whether the pattern has an exclusion ``{- -}``."""
        return any(isinstance(n, Exclude) for n in self.pattern.walk())

    def negated_variables(self) -> set[str]:
        out: set[str] = set()
        for n in self.pattern.walk():
            if isinstance(n, Neg):
                out.update(v.name for v in n.body.walk() if isinstance(v, Var))
        return out

    @property
    def event_types(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for d in self.defines:
            for t in d.event_types:
                seen.setdefault(t, None)
        return tuple(seen)

    def to_text(self) -> str:
        """A readable one-line summary (EXPLAIN)."""
        parts = [f"PATTERN ({self.pattern.to_text()})"]
        if self.partition_by:
            parts.insert(0, f"PARTITION BY {', '.join(self.partition_by)}")
        if self.window is not None:
            parts.append(f"WITHIN {self.window}")
        if self.subsets:
            parts.append("SUBSET " + ", ".join(f"{u.name} = ({', '.join(u.members)})"
                                               for u in self.subsets))
        parts.append(f"STRATEGY {self.strategy.value}")
        defs = [f"{d.name} AS {to_text(d.condition) if d.condition is not None else 'TRUE'}"
                + (f" [type in {list(d.event_types)}]" if d.event_types else "")
                for d in self.defines]
        if defs:
            parts.append("DEFINE " + ", ".join(defs))
        return " ".join(parts)
