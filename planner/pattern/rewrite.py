"""Rewrite a pattern query into basic symbols and Kleene-star gaps (dissertation 3.4.1, 3.4.4).

The planner works on a *rewritten* pattern: a sequence of basic symbols (BS, mandatory, each
binding exactly one event, with single-attribute range conditions - see :mod:`.conditions`)
and ``true*`` gaps (any number of events, possibly none). Maximal runs of BSs without a gap are
basic blocks (BB): inside a BB the events are consecutive in the stream, so their seq distances
are fixed.

Rules (Table 3.2, applied top-down, recursively; every rule only widens - each match of the
original pattern is a match of the rewritten one, with the BS events among its events):

* a variable -> a BS with the variable's range conditions;
* a sequence -> the concatenation of its items' rewrites;
* ``P{n,m}`` / ``P+`` -> ``(P' x n, true*)`` (``P'`` the rewrite of ``P``); ``P{n}`` (fixed
  count) -> ``P' x n`` without a gap; ``P*``, ``P?``, ``P{0,m}`` -> ``true*``. Repetitions are
  expanded at most ``MAX_COPIES`` times (then ``true*`` follows): a widening too;
* an alternation -> ``true`` (one unconstrained BS) in the table. We keep more: when every
  option has the same fixed length L, L unconstrained BSs (so seq distances around it stay
  fixed); otherwise ``min length`` unconstrained BSs followed by ``true*``;
* ``PERMUTE(...)`` -> as an alternation of its orders; an exclusion ``{- P -}`` -> ``P``'s
  rewrite (it changes only what is output); an anchor binds no event and adds nothing;
* a SASE+ negation -> ``true*``. The table maps negation to ``true``, but a SASE+ negation binds
  no event (it forbids events between its neighbours), so a ``true`` would wrongly demand one;
* adjacent gaps are merged.

Every basic symbol also carries the range conditions of MATCH_RECOGNIZE's subquery WHERE
(``FROM (SELECT ... WHERE origin = 'ORD')``): every row of the pattern passes it.

Strategies other than contiguous, ``PARTITION BY``, a subquery's WHERE and partition contiguity
(and several merged streams) break fixed seq distances: events of a match are then not adjacent in the stream, so a
gap is put between every two BSs (every BS its own BB, Table 3.2 / 3.4.4). SASE+ ``[attr]``
equivalence under *strict* contiguity keeps fixed distances: the operator enforces stream
contiguity there (the equivalence is an extra condition; see
:mod:`replaydb.operators.pattern.compile`).

``lead_star`` / ``trail_star`` record a gap before the first / after the last BS: then the match
need not start (end) with the first (last) BS, which the special cases S1-S3 of Interval(c, w)
depend on.

Complexity: linear in the size of the pattern after expansion (at most ``MAX_SYMBOLS`` BSs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replaydb.operators import expr as ex
from replaydb.operators.pattern import model as pm
from replaydb.planner.pattern.conditions import Condition, Range, extract_conditions

MAX_COPIES = 16
"""Most copies a quantifier's body is expanded into (the rest becomes ``true*``)."""
MAX_SYMBOLS = 256
"""Most basic symbols a rewritten pattern keeps (later ones are folded into ``true*``)."""

_STAR = "*"


@dataclass(frozen=True)
class BasicSymbol:
    """One mandatory event of the rewritten pattern.

    ``index``: 0-based position among all BSs; ``block``/``offset``: its BB and position inside
    it; ``var``: the variable it stands for (None for an unconstrained placeholder of an
    alternation); ``conditions``: AND of single-attribute range conditions.
    """

    index: int
    block: int
    offset: int
    var: str | None
    conditions: tuple[Condition, ...] = ()

    @property
    def satisfiable(self) -> bool:
        return all(c.satisfiable for c in self.conditions)

    def text(self) -> str:
        name = self.var or "true"
        if not self.conditions:
            return name
        return f"{name}[{' AND '.join(c.text() for c in self.conditions)}]"


@dataclass(frozen=True)
class RewrittenPattern:
    """Basic symbols grouped into basic blocks separated by ``true*`` gaps.

    ``tight``: inside a block, consecutive BSs are adjacent in the stream (contiguous matching of
    one stream, unpartitioned). ``window``: WITHIN in stream units (None: no window).
    ``dropped``: per variable, the condition parts replaced by TRUE.
    """

    symbols: tuple[BasicSymbol, ...]
    blocks: tuple[tuple[int, ...], ...]
    lead_star: bool
    trail_star: bool
    tight: bool
    window: int | None
    dropped: dict[str, list[str]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.symbols)

    @property
    def satisfiable(self) -> bool:
        return all(s.satisfiable for s in self.symbols)

    def block_len(self, b: int) -> int:
        return len(self.blocks[b])

    def text(self) -> str:
        parts = ["true*"] if self.lead_star else []
        for b, blk in enumerate(self.blocks):
            if b:
                parts.append("true*")
            parts.extend(self.symbols[i].text() for i in blk)
        if self.trail_star:
            parts.append("true*")
        return " ".join(parts) if parts else "true*"

    def _check(self) -> None:
        """Invariants: symbols numbered in order; blocks partition them in order with
        consecutive offsets; every symbol knows its block; without fixed distances every
        block holds one symbol."""
        seen = []
        for b, blk in enumerate(self.blocks):
            assert blk, "empty basic block"
            for o, i in enumerate(blk):
                s = self.symbols[i]
                assert s.index == i and s.block == b and s.offset == o, s
            seen.extend(blk)
            assert self.tight or len(blk) == 1, "a multi-symbol block without fixed distances"
        assert seen == list(range(len(self.symbols))), "blocks do not partition the symbols"

    def block_texts(self) -> list[str]:
        return [" ".join(self.symbols[i].var or "true" for i in blk) for blk in self.blocks]


def length_bounds(n: pm.PatternNode) -> tuple[int, float]:
    """(min, max) number of events a match of ``n`` binds (max may be inf)."""
    if isinstance(n, pm.Var):
        return 1, 1
    if isinstance(n, pm.Neg | pm.Anchor):
        return 0, 0
    if isinstance(n, pm.Exclude):
        return length_bounds(n.body)
    if isinstance(n, pm.Permute):
        return length_bounds(pm.Seq(n.items))
    if isinstance(n, pm.Seq):
        lo, hi = 0, 0.0
        for i in n.items:
            a, b = length_bounds(i)
            lo, hi = lo + a, hi + b
        return lo, hi
    if isinstance(n, pm.Alt):
        bounds = [length_bounds(o) for o in n.options]
        return min(b[0] for b in bounds), max(b[1] for b in bounds)
    if isinstance(n, pm.Repeat):
        a, b = length_bounds(n.body)
        return a * n.min, (float("inf") if n.max is None and b > 0 else b * (n.max or 0))
    raise TypeError(f"unknown pattern node {n!r}")  # pragma: no cover


def _items(n: pm.PatternNode) -> list[str | None]:
    """Flat rewrite: variable names (BS), None (unconstrained BS) and ``_STAR`` (gap)."""
    if isinstance(n, pm.Var):
        return [n.name]
    if isinstance(n, pm.Neg):
        return [_STAR]
    if isinstance(n, pm.Anchor):
        return []
    if isinstance(n, pm.Exclude):
        return _items(n.body)
    if isinstance(n, pm.Permute):  # its orders: an alternation
        return _items(pm.Alt((pm.Seq(n.items),)))
    if isinstance(n, pm.Seq):
        out: list[str | None] = []
        for i in n.items:
            out.extend(_items(i))
        return out
    if isinstance(n, pm.Alt):
        lo, hi = length_bounds(n)
        if lo == hi:
            return [None] * lo
        return [None] * lo + [_STAR]
    if isinstance(n, pm.Repeat):
        if n.min == 0:
            return [_STAR]
        body = _items(n.body)
        copies = min(n.min, MAX_COPIES)
        out = body * copies
        if n.max != n.min or n.min > MAX_COPIES:
            out.append(_STAR)
        return out
    raise TypeError(f"unknown pattern node {n!r}")  # pragma: no cover


def is_tight(spec: pm.PatternSpec, n_streams: int = 1) -> bool:
    """Whether consecutive BSs of a block are adjacent in the (single) stream."""
    if n_streams != 1 or spec.partition_by or spec.where is not None:
        return False  # the rows between two matched ones may be another partition's or filtered
    if spec.semantics == pm.Semantics.SQL:
        return spec.strategy == pm.Strategy.CONTIGUOUS
    return spec.strategy == pm.Strategy.CONTIGUOUS


def rewrite(spec: pm.PatternSpec, kinds: dict[str, str], *, n_streams: int = 1,
            type_column: str | None = None) -> RewrittenPattern:
    """Rewrite ``spec`` (see the module docstring).

    ``kinds``: the stream's indexable columns ("numeric"/"string"); ``type_column``: where SASE+
    event types live (their names become point ranges on it).
    """
    sql = spec.semantics == pm.Semantics.SQL
    tight = is_tight(spec, n_streams)
    raw = _items(spec.pattern)
    notes: list[str] = []
    # merge gaps; without fixed distances every BS is its own block
    seq: list[str | None] = []
    for it in raw:
        if it == _STAR and seq and seq[-1] == _STAR:
            continue
        if it != _STAR and not tight and seq and seq[-1] != _STAR:
            seq.append(_STAR)
        seq.append(it)
    n_bs = sum(1 for it in seq if it != _STAR)
    if n_bs > MAX_SYMBOLS:
        notes.append(f"pattern expands to {n_bs} basic symbols; kept the first {MAX_SYMBOLS}")
        kept: list[str | None] = []
        count = 0
        for it in seq:
            if it != _STAR:
                count += 1
                if count > MAX_SYMBOLS:
                    kept.append(_STAR)
                    break
            kept.append(it)
        seq = kept
    lead = bool(seq) and seq[0] == _STAR
    trail = bool(seq) and seq[-1] == _STAR
    defs = {d.name: d for d in spec.defines}
    cache: dict[str, tuple[tuple[Condition, ...], list[str]]] = {}
    dropped: dict[str, list[str]] = {}

    def conds(var: str) -> tuple[Condition, ...]:
        if var not in cache:
            d = defs.get(var)
            if d is None and sql:
                d = next((x for x in spec.defines if x.name.upper() == var.upper()), None)
            extra: list[tuple[str, tuple[Range, ...]]] = []
            if d is not None and d.event_types and type_column:
                extra.append((type_column, tuple(Range(t, t) for t in d.event_types)))
            cond = d.condition if d else None
            if spec.where is not None:  # every row of the pattern passes the subquery's WHERE
                cond = spec.where if cond is None else ex.Binary("and", spec.where, cond)
            cache[var] = extract_conditions(var, cond, kinds, sql=sql, extra=extra)
            if cache[var][1]:
                dropped[var] = cache[var][1]
        return cache[var][0]

    symbols: list[BasicSymbol] = []
    blocks: list[tuple[int, ...]] = []
    cur: list[int] = []
    for it in seq:
        if it == _STAR:
            if cur:
                blocks.append(tuple(cur))
                cur = []
            continue
        idx = len(symbols)
        symbols.append(BasicSymbol(idx, len(blocks), len(cur), it,
                                   conds(it) if it is not None else ()))
        cur.append(idx)
    if cur:
        blocks.append(tuple(cur))
    return RewrittenPattern(tuple(symbols), tuple(blocks), lead, trail, tight, spec.window,
                            dropped, tuple(notes))
