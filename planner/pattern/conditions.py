"""Single-attribute range conditions extracted from a symbol's condition (dissertation 3.4.4).

A secondary index answers range queries on one attribute, so the planner keeps, of every
symbol's condition, only the parts that are such ranges and replaces everything else by TRUE
(the rewrite only widens: every event satisfying the original condition satisfies the kept
ranges). What is kept, per top-level conjunct of the condition:

* ``col op literal`` and ``literal op col`` with op in ``= < <= > >=`` (``!=`` on numeric
  columns becomes two open ranges), where ``col`` is the *current* event's column: unqualified,
  or qualified by the symbol's own variable, with no subscript (SASE+ ``b[i].x`` of the own
  component has none either). ``A.x`` inside ``B``'s condition refers to another event: TRUE;
* ``col BETWEEN lo AND hi`` (not negated) and ``col IN (literals)`` (not negated; several point
  ranges);
* OR and AND nested inside one conjunct, when every branch is a range on the same column
  (union / intersection of the ranges); anything else in the conjunct makes it TRUE;
* conjuncts on the same column are intersected (``x >= 1 AND x <= 2`` is one range).

Never kept (TRUE): NOT (a comparison with NULL is False, so NOT of it is True: the complement
range would drop those events), IS NULL, navigation (PREV, FIRST, ...), aggregates, CLASSIFIER,
comparisons between columns, arithmetic, comparisons with NULL, boolean and ``t``/``seq``
columns, mixed types (a string literal against a numeric column). Strings keep ``=``, ``IN`` and
ordered comparisons (Python's str order, which is the string index's UTF-8 byte order).

Column names resolve against the stream's schema like the pattern operator does: the exact
name, else the only case-insensitive match.

A :class:`Condition` whose range list is empty can never hold (``x > 5 AND x < 3``): a symbol
carrying one makes the whole pattern unsatisfiable.

Complexity: linear in the size of the condition tree (plus sorting the ranges of an IN list).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from replaydb.operators import expr as ex

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


@dataclass(frozen=True, order=True)
class Range:
    """``lo <= key <= hi`` with inclusiveness flags; None is unbounded."""

    lo: Any
    hi: Any
    lo_inclusive: bool = True
    hi_inclusive: bool = True

    def is_empty(self) -> bool:
        if self.lo is None or self.hi is None:
            return False
        return self.lo > self.hi or (self.lo == self.hi and not (self.lo_inclusive
                                                                 and self.hi_inclusive))

    def text(self, col: str) -> str:
        if self.lo is not None and self.lo == self.hi:
            return f"{col} = {_lit(self.lo)}"
        parts = []
        if self.lo is not None:
            parts.append(f"{_lit(self.lo)} {'<=' if self.lo_inclusive else '<'} ")
        parts.append(col)
        if self.hi is not None:
            parts.append(f" {'<=' if self.hi_inclusive else '<'} {_lit(self.hi)}")
        return "".join(parts) if (self.lo is not None or self.hi is not None) else f"{col} any"


def _lit(v: Any) -> str:
    return "'" + v.replace("'", "''") + "'" if isinstance(v, str) else repr(v)


def _lo_key(r: Range) -> tuple[int, Any, int]:
    # None (unbounded) sorts first; an inclusive bound starts before an exclusive one
    return (0, 0, 0) if r.lo is None else (1, r.lo, 0 if r.lo_inclusive else 1)


def _intersect(a: Range, b: Range) -> Range | None:
    lo, lo_inc = a.lo, a.lo_inclusive
    if b.lo is not None and (lo is None or b.lo > lo or (b.lo == lo and not b.lo_inclusive)):
        lo, lo_inc = b.lo, b.lo_inclusive
    hi, hi_inc = a.hi, a.hi_inclusive
    if b.hi is not None and (hi is None or b.hi < hi or (b.hi == hi and not b.hi_inclusive)):
        hi, hi_inc = b.hi, b.hi_inclusive
    r = Range(lo, hi, lo_inc, hi_inc)
    return None if r.is_empty() else r


def _touches(a: Range, b: Range) -> bool:
    """Whether b (starting at or after a's start) overlaps or abuts a (no key between them)."""
    if a.hi is None or b.lo is None:
        return True
    return b.lo < a.hi or (b.lo == a.hi and (a.hi_inclusive or b.lo_inclusive))


def normalize(ranges: list[Range] | tuple[Range, ...]) -> tuple[Range, ...]:
    """Sorted, disjoint, non-empty ranges covering the same keys."""
    rs = sorted((r for r in ranges if not r.is_empty()), key=_lo_key)
    out: list[Range] = []
    for r in rs:
        if out and _touches(out[-1], r):
            p = out[-1]
            if p.hi is None or (r.hi is not None and (r.hi < p.hi or (
                    r.hi == p.hi and (p.hi_inclusive or not r.hi_inclusive)))):
                continue  # r inside p
            out[-1] = Range(p.lo, r.hi, p.lo_inclusive, r.hi_inclusive)
        else:
            out.append(r)
    return tuple(out)


def intersect(a: tuple[Range, ...], b: tuple[Range, ...]) -> tuple[Range, ...]:
    out = [r for x in a for y in b if (r := _intersect(x, y)) is not None]
    return normalize(out)


@dataclass(frozen=True)
class Condition:
    """A single-attribute range condition: ``column`` lies in one of ``ranges``.

    ``kind`` is "numeric" or "string". ``ranges == ()`` means unsatisfiable.
    """

    column: str
    ranges: tuple[Range, ...]
    kind: str = "numeric"

    def __hash__(self) -> int:
        """The fields' hash, computed once: conditions key the planner's per-condition
        tables (statistics, lookups, CPM shares), looked up thousands of times a plan."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.column, self.ranges, self.kind))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the remembered hash: string hashes differ between processes."""
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @property
    def satisfiable(self) -> bool:
        return bool(self.ranges)

    def text(self) -> str:
        if not self.ranges:
            return "FALSE"
        return " OR ".join(r.text(self.column) for r in self.ranges)


def resolve_column(names: list[str], name: str) -> str | None:
    """The schema's column for ``name``: exact, else the only case-insensitive match."""
    if name in names:
        return name
    low = [n for n in names if n.lower() == name.lower()]
    return low[0] if len(low) == 1 else None


class _Extractor:
    """Ranges of one variable's condition against one stream schema."""

    def __init__(self, var: str, kinds: dict[str, str], sql: bool,
                 also: tuple[str, ...] = ()) -> None:
        self.var = var
        self.also = also
        self.kinds = kinds  # column -> "numeric" | "string" (only indexable kinds)
        self.names = list(kinds)
        self.sql = sql

    def column(self, e: ex.Expr) -> str | None:
        if not isinstance(e, ex.Column) or e.index is not None or e.name == "*":
            return None
        if e.qualifier is not None:
            q, v = e.qualifier, self.var
            if not (q == v or q in self.also or (self.sql and q.upper() == v.upper())):
                return None
        return resolve_column(self.names, e.name)

    def literal(self, e: ex.Expr, kind: str) -> tuple[bool, Any]:
        if isinstance(e, ex.Unary) and e.op == "neg" and isinstance(e.operand, ex.Literal):
            ok, v = self.literal(e.operand, kind)
            return (ok, -v) if ok and kind == "numeric" else (False, None)
        if not isinstance(e, ex.Literal) or e.value is None or isinstance(e.value, bool):
            return False, None
        v = e.value
        if kind == "string":
            return (True, v) if isinstance(v, str) else (False, None)
        if isinstance(v, int | float) and not (isinstance(v, float) and math.isnan(v)):
            return True, v
        return False, None

    def ranges(self, e: ex.Expr) -> tuple[str, tuple[Range, ...]] | None:
        """``(column, ranges)`` equivalent to (or wider than nothing: exactly) ``e``, or None."""
        if isinstance(e, ex.Binary) and e.op in ("and", "or"):
            a, b = self.ranges(e.left), self.ranges(e.right)
            if a is None or b is None or a[0] != b[0]:
                return None
            rs = intersect(a[1], b[1]) if e.op == "and" else normalize(a[1] + b[1])
            return a[0], rs
        if isinstance(e, ex.Binary) and e.op in _FLIP:
            col, other, op = self.column(e.left), e.right, e.op
            if col is None:
                col, other, op = self.column(e.right), e.left, _FLIP[e.op]
            if col is None:
                return None
            kind = self.kinds[col]
            ok, v = self.literal(other, kind)
            if not ok:
                return None
            if op == "=":
                return col, (Range(v, v),)
            if op == "!=":
                if kind != "numeric":
                    return None
                return col, normalize([Range(None, v, True, False), Range(v, None, False, True)])
            if op in ("<", "<="):
                return col, normalize([Range(None, v, True, op == "<=")])
            return col, normalize([Range(v, None, op == ">=", True)])
        if isinstance(e, ex.Between) and not e.negated:
            col = self.column(e.operand)
            if col is None:
                return None
            kind = self.kinds[col]
            ok1, lo = self.literal(e.low, kind)
            ok2, hi = self.literal(e.high, kind)
            if not (ok1 and ok2):
                return None
            return col, normalize([Range(lo, hi)])
        if isinstance(e, ex.InList) and not e.negated:
            col = self.column(e.operand)
            if col is None:
                return None
            kind = self.kinds[col]
            vals = []
            for x in e.values:
                ok, v = self.literal(x, kind)
                if not ok:
                    return None
                vals.append(v)
            return col, normalize([Range(v, v) for v in vals])
        return None


def extract_conditions(var: str, condition: ex.Expr | None, kinds: dict[str, str], *,
                       sql: bool = False,
                       extra: list[tuple[str, tuple[Range, ...]]] | None = None,
                       also: tuple[str, ...] = ()
                       ) -> tuple[tuple[Condition, ...], list[str]]:
    """The range conditions of ``var``'s ``condition`` (see the module docstring).

    ``kinds`` maps the stream's indexable columns to "numeric"/"string"; ``sql`` makes variable
    qualifiers case-insensitive (MATCH_RECOGNIZE). ``extra`` adds ranges known from elsewhere
    (SASE+ event types on the type column); ``also``: other names that qualify the variable's
    own columns (GRETA: ``Stock.price`` for the variable ``S`` of type ``Stock``). Returns the conditions (one per column, sorted by
    column) and the texts of the conjuncts that were dropped (replaced by TRUE).
    """
    extractor = _Extractor(var, kinds, sql, also)
    per: dict[str, tuple[Range, ...]] = {}
    dropped: list[str] = []
    for c in ex.conjuncts(condition):
        if isinstance(c, ex.Literal) and c.value is True:
            continue
        got = extractor.ranges(c)
        if got is None:
            dropped.append(ex.to_text(c))
            continue
        col, rs = got
        per[col] = intersect(per[col], rs) if col in per else rs
    for col, rs in extra or ():
        if col in kinds:
            per[col] = intersect(per[col], rs) if col in per else normalize(list(rs))
    conds = tuple(Condition(col, per[col], kinds[col]) for col in sorted(per))
    return conds, dropped
