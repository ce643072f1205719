"""Position automaton of a pattern: one state per variable occurrence, ordered by preference.

The construction is Glushkov's (no epsilon edges): every occurrence of a variable in the
(bounded-repetition-expanded) pattern is a *position*; a run that has just bound an event at
position ``p`` may next bind an event at any position in ``follow[p]``. This is exactly the NFA of
the dissertation (Fig. 4.6: one state per symbol plus a start state) and of SASE+'s NFA^b without
its epsilon proceed edges: a loop ``p -> p`` is the *self transition* of the operational table, any
other edge a *forward transition*.

Two additions make one automaton serve both semantics:

* **Preference order.** ``start`` and every ``follow[p]`` are *ordered* lists that may contain
  :data:`ACCEPT` ("the match may end here"). The order is the order in which a backtracking
  matcher tries the alternatives (SQL:2016 preferment): alternation left to right, a greedy
  quantifier prefers one more iteration over leaving, a reluctant one the reverse. The SQL engine
  walks these lists in order; the all-runs engine ignores the order.
* **Negation.** ``follow_neg[p][k]`` is a bit mask of the negations (``Neg`` nodes) the edge
  ``p -> follow[p][k]`` jumps over: the edge may only be taken if no event satisfying one of those
  negated variables arrived since the run bound its last event.

* **Anchors and exclusion** (MATCH_RECOGNIZE). ``^`` and ``$`` bind no row; an option that
  passes over ``^`` may only be taken by the first row of a partition, so it survives only in
  :attr:`Automaton.start_first` (the start list for a partition's first row); an option that
  passes over ``$`` may only end the match after the partition's last row, so it becomes
  :data:`ACCEPT_END` when it accepts and is dropped when it binds another row. The positions
  inside an exclusion ``{- -}`` are listed in :attr:`Automaton.excluded`.
* **PERMUTE** is built as the alternation of its orders, lexicographically.

**Quantified groups that can match zero rows** (``(B?)+``, ``(A* B*)*``, ``(^ | A)+``; the
rule, Trino's, is in ``docs/decisions.md``). ``R{m,M}`` is its copies written out: ``m``
copies, then ``M - m`` nested optional ones; ``R{m,}`` is ``max(m, 1) - 1`` copies, then a
*repeated part* (:meth:`_Builder.loop`). A copy may bind no row like any other item; the
repeated part's first iteration ends the quantifier when it binds no row; a later iteration must
bind a row. Why the lists give exactly the oracle's preference order under that rule:

* Invariant: a fragment's ``first`` lists, in preference order, every way the fragment can start,
  as the position of its first row, or ACCEPT (with the anchors passed) for a way that binds no
  row; ``follow[p]`` lists likewise every way to go on after a row bound at ``p``. Two ways to
  one position keep the first (:func:`_dedupe`): what may follow a row bound at ``q`` depends on
  ``q`` alone - copies written out have their own positions, and in a repeated part the
  iteration holding ``q`` has bound a row, so whether it was the first no longer matters - hence
  the later way can only give matches the earlier one gave first.
* ``optional`` (greedy ``x?``): the ways of entering ``x`` in ``x``'s order, an empty way of
  ``x`` keeping its place, then skipping ``x``; the skip lands where an empty way of ``x``
  lands, so an empty way of ``x`` that passes no anchor makes it redundant. Reluctant: skipping
  first.
* ``loop``: the first iteration's ways are the body's own, an empty one (ACCEPT) where the body
  puts it: it ends the quantifier. After a row at a position ``p`` that may end an iteration,
  ``follow[p]`` replaces the ACCEPT of that end by ``again``: for greedy, every way of a new
  iteration that binds a row (the body's ``first`` without its ACCEPT: an empty later iteration
  is no way to match), then leaving; for reluctant, leaving, then those ways. ``x*`` has no
  mandatory iteration: greedy, the first iteration's ways then zero iterations; reluctant,
  zero iterations first.

These follow a backtracking matcher's order step by step (the oracle,
:func:`replaydb.operators.pattern.oracle_sql._bt_rep`, is that matcher); the property tests
compare them on random patterns with nested such groups.

Restrictions (raise :class:`~replaydb.errors.QueryError`): the pattern must not match the empty
sequence (unless ``allow_empty``: MATCH_RECOGNIZE's empty matches); a negation must sit between
two positive items of a sequence and negate a single variable; at most 62 negations and
:data:`MAX_POSITIONS` positions after expanding bounded repetitions.

Complexity: O(positions^2) time and space to build.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from math import factorial

from replaydb.errors import QueryError
from replaydb.operators.pattern.model import (
    Alt,
    Anchor,
    Exclude,
    Neg,
    PatternNode,
    Permute,
    Repeat,
    Seq,
    Var,
)

ACCEPT = -1
"""Marker in ``start``/``follow`` lists: the match may end here."""
ACCEPT_END = -2
"""Marker in ``follow`` lists: the match may end here if its last row is its partition's last."""

_AT_START = 1 << 62
"""Option mask bit: the option passes over ``^`` (negations use bits 0-61)."""
_AT_END = 1 << 63
"""Option mask bit: the option passes over ``$``."""
_ANCHORS = _AT_START | _AT_END

MAX_POSITIONS = 4096

Item = tuple[int, int]  # (target position or ACCEPT, negation mask)


@dataclass(frozen=True)
class Automaton:
    """The compiled position automaton (see module docstring).

    Attributes:
        pos_var: variable name of each position.
        start: ordered first positions; ACCEPT among them when the pattern can match zero rows
            (an empty match, less preferred than the options before it; MATCH_RECOGNIZE only).
        follow: per position, ordered options (positions, ACCEPT or ACCEPT_END).
        follow_neg: per position, the negation mask of each option.
        negations: the negated variable of each negation id.
        start_first: the start list for a partition's first row (``start`` plus the options
            that pass over ``^``).
        excluded: the positions inside an exclusion ``{- -}``.
        anchored: whether the pattern has ``^`` or ``$``.
    """

    pos_var: tuple[str, ...]
    start: tuple[int, ...]
    follow: tuple[tuple[int, ...], ...]
    follow_neg: tuple[tuple[int, ...], ...]
    negations: tuple[str, ...]
    start_first: tuple[int, ...] = ()
    excluded: frozenset[int] = frozenset()
    anchored: bool = False

    @property
    def n_positions(self) -> int:
        return len(self.pos_var)

    @property
    def nullable(self) -> bool:
        """Whether the pattern can match zero rows (an empty match)."""
        return ACCEPT in self.start or ACCEPT in self.start_first

    def is_final(self, p: int) -> bool:
        return ACCEPT in self.follow[p] or ACCEPT_END in self.follow[p]

    def has_next(self, p: int) -> bool:
        return any(q >= 0 for q in self.follow[p])

    def unambiguous_labels(self) -> bool:
        """True if no two positions reachable from one state share a variable.

        Then every (events, variables) labelling corresponds to exactly one position path, so
        the all-runs engine never reports the same labelled match twice.
        """
        lists = [self.start, self.start_first, *self.follow]
        for lst in lists:
            names = [self.pos_var[q] for q in lst if q >= 0]
            if len(names) != len(set(names)):
                return False
        return True

    def _check(self) -> None:
        """Invariant checker: indices in range, no duplicate options, lists aligned."""
        n = len(self.pos_var)
        assert len(self.follow) == n and len(self.follow_neg) == n
        for lst in (self.start, self.start_first):
            assert len(lst) == len(set(lst))
            for q in lst:
                assert q == ACCEPT or 0 <= q < n
        for p in range(n):
            assert len(self.follow[p]) == len(self.follow_neg[p])
            assert len(self.follow[p]) == len(set(self.follow[p]))
            for q in self.follow[p]:
                assert q in (ACCEPT, ACCEPT_END) or 0 <= q < n
        assert all(0 <= p < n for p in self.excluded)


@dataclass
class _Frag:
    first: list[Item]
    last: set[int]

    @property
    def nullable(self) -> bool:
        return any(t == ACCEPT for t, _ in self.first)


def _dedupe(items: list[Item]) -> list[Item]:
    """The first of the options with one target and one set of anchors (their negation masks
    are those of the first)."""
    seen: set[tuple[int, int]] = set()
    out: list[Item] = []
    for t, m in items:
        key = (t, m & _ANCHORS)
        if key not in seen:
            seen.add(key)
            out.append((t, m))
    return out


def _resolve_anchors(items: list[Item], first_row: bool, start: bool = False) -> list[Item]:
    """The options with their anchors decided (see the module docstring): ``first_row`` says
    whether the next row is its partition's first (only start lists of first rows); in a
    ``start`` list no row has been bound, so an empty match cannot end after a partition's
    last row."""
    out: list[Item] = []
    seen: set[int] = set()
    for t, m in items:
        if m & _AT_START and not first_row:
            continue
        if m & _AT_END:
            if t != ACCEPT or start:
                continue
            t = ACCEPT_END
        if t not in seen:
            seen.add(t)
            out.append((t, m & ~_ANCHORS))
    return out


def _splice(items: list[Item], repl: list[Item]) -> list[Item]:
    """Replace each ACCEPT item (mask m) by ``repl`` with m or-ed into every mask."""
    out: list[Item] = []
    for t, m in items:
        if t == ACCEPT:
            out.extend((t2, m | m2) for t2, m2 in repl)
        else:
            out.append((t, m))
    return _dedupe(out)


def _at_node(message: str, node: PatternNode) -> str:
    """``message`` with the position of ``node``'s first variable in the query text, if known."""
    pos = next((n.pos for n in node.walk() if isinstance(n, Var) and n.pos is not None), None)
    return message if pos is None else f"{message} (at position {pos})"


class _Builder:
    def __init__(self) -> None:
        self.root: PatternNode | None = None
        self.pos_var: list[str] = []
        self.follow: list[list[Item]] = []
        self.negations: list[str] = []
        self.excluded: set[int] = set()
        self.anchored = False

    def new_pos(self, var: str) -> int:
        if len(self.pos_var) >= MAX_POSITIONS:
            msg = (f"pattern has more than {MAX_POSITIONS} positions after expanding bounded "
                   "repetitions and PERMUTE")
            raise QueryError(msg if self.root is None else _at_node(msg, self.root),
                             hint="use smaller {n,m} bounds")
        self.pos_var.append(var)
        self.follow.append([(ACCEPT, 0)])
        return len(self.pos_var) - 1

    # --------------------------------------------------------------- composition
    def seq2(self, x: _Frag, y: _Frag, mask: int = 0) -> _Frag:
        yfirst = [(t, m | mask) for t, m in y.first]
        for p in x.last:
            self.follow[p] = _splice(self.follow[p], yfirst)
        first = _splice(x.first, yfirst)
        last = set(y.last) | (set(x.last) if y.nullable else set())
        return _Frag(first, last)

    def loop(self, x: _Frag, greedy: bool, at_least_once: bool) -> _Frag:
        """The repeated copy of an unbounded quantifier (``x+``, or ``x*`` without
        ``at_least_once``). After an iteration that bound a row, another iteration must bind
        one (``again`` has no ACCEPT of the body: an empty iteration there is no way to match);
        the first iteration keeps the body's ACCEPT where the body's order puts it (an empty
        first iteration ends the loop). See the module docstring."""
        body_first = [(t, m) for t, m in x.first if t != ACCEPT]
        leave = [(ACCEPT, 0)]
        again = body_first + leave if greedy else leave + body_first
        for p in x.last:
            self.follow[p] = _splice(self.follow[p], again)
        if at_least_once:
            return _Frag(list(x.first), set(x.last))
        return _Frag(_dedupe(x.first + leave if greedy else leave + x.first), set(x.last))

    def optional(self, x: _Frag, greedy: bool) -> _Frag:
        """``x?`` (greedy) or ``x??``: greedy enters ``x`` first, so a body that can match zero
        rows keeps its own ACCEPT where its order puts it (that path and skipping the body lead
        to the same place; the first one found is kept)."""
        skip = [(ACCEPT, 0)]
        return _Frag(_dedupe(x.first + skip if greedy else skip + x.first), set(x.last))

    # --------------------------------------------------------------- recursion
    def build(self, node: PatternNode) -> _Frag:
        if isinstance(node, Var):
            p = self.new_pos(node.name)
            return _Frag([(p, 0)], {p})
        if isinstance(node, Seq):
            return self.build_seq(node)
        if isinstance(node, Alt):
            if not node.options:
                raise QueryError("empty alternation")
            frags = [self.build(o) for o in node.options]
            first: list[Item] = []
            last: set[int] = set()
            for f in frags:
                first.extend(f.first)
                last |= f.last
            return _Frag(_dedupe(first), last)
        if isinstance(node, Repeat):
            return self.build_repeat(node)
        if isinstance(node, Permute):
            if factorial(len(node.items)) > MAX_POSITIONS:
                raise QueryError(_at_node(
                    f"PERMUTE of {len(node.items)} items has {factorial(len(node.items))} orders, "
                    f"more than the {MAX_POSITIONS} positions a pattern may have", node),
                    hint="permute fewer items, or write the orders that matter as alternatives")
            orders = [Seq(tuple(node.items[i] for i in order))
                      for order in permutations(range(len(node.items)))]
            return self.build(Alt(tuple(orders)))
        if isinstance(node, Exclude):
            first_pos = len(self.pos_var)
            frag = self.build(node.body)
            self.excluded.update(range(first_pos, len(self.pos_var)))
            return frag
        if isinstance(node, Anchor):
            self.anchored = True
            return _Frag([(ACCEPT, _AT_START if node.start else _AT_END)], set())
        if isinstance(node, Neg):
            raise QueryError("a negation must stand between two positive items of a sequence")
        raise QueryError(f"unknown pattern node {type(node).__name__}")  # pragma: no cover

    def build_seq(self, node: Seq) -> _Frag:
        items = list(node.items)
        if not items:
            return _Frag([(ACCEPT, 0)], set())
        if isinstance(items[0], Neg) or isinstance(items[-1], Neg):
            raise QueryError(
                "a negation must stand between two positive items of a sequence "
                "(not first or last)",
                hint="negation at the start or end of a pattern is not supported")
        frag: _Frag | None = None
        mask = 0
        for it in items:
            if isinstance(it, Neg):
                body = it.body
                while isinstance(body, Seq) and len(body.items) == 1:
                    body = body.items[0]
                if not isinstance(body, Var):
                    raise QueryError("a negation must negate a single variable, e.g. ~(Type v)")
                if len(self.negations) >= 62:
                    raise QueryError("at most 62 negations are supported")
                self.negations.append(body.name)
                mask |= 1 << (len(self.negations) - 1)
                continue
            f = self.build(it)
            if frag is None:
                frag = f
            else:
                if mask and f.nullable:
                    raise QueryError("the item after a negation must not be optional")
                frag = self.seq2(frag, f, mask)
            mask = 0
        assert frag is not None
        return frag

    def build_repeat(self, node: Repeat) -> _Frag:
        lo, hi = node.min, node.max
        if lo < 0 or (hi is not None and hi < lo):
            raise QueryError(f"bad quantifier bounds {{{lo},{hi if hi is not None else ''}}}")
        if hi == 0:  # R{0}: no row, as the empty pattern (R's variables bind nothing)
            return self.build(Seq(()))
        frag: _Frag | None = None

        def cat(a: _Frag | None, b: _Frag) -> _Frag:
            return b if a is None else self.seq2(a, b)

        mandatory = lo if hi is None and lo == 0 else (lo - 1 if hi is None else lo)
        for _ in range(mandatory):
            frag = cat(frag, self.build(node.body))
        if hi is None:
            at_least_once = lo >= 1
            frag = cat(frag, self.loop(self.build(node.body), node.greedy, at_least_once))
            return frag
        # bounded: nested optionals X (X (X)?)? ... so that k copies are tried greedily
        opt_count = hi - lo
        if opt_count:
            tail: _Frag | None = None
            # build innermost first: opt(X opt(X ...))
            frags = [self.build(node.body) for _ in range(opt_count)]
            for f in reversed(frags):
                inner = f if tail is None else self.seq2(f, tail)
                tail = self.optional(inner, node.greedy)
            assert tail is not None
            frag = cat(frag, tail)
        assert frag is not None
        return frag


def build_automaton(pattern: PatternNode, *, allow_empty: bool = False) -> Automaton:
    """Compile a pattern tree into its ordered position automaton (see module docstring).
    ``allow_empty``: a pattern that can match zero rows is allowed (MATCH_RECOGNIZE's empty
    matches); a quantified group that can match zero rows always is, a whole pattern that can
    only with ``allow_empty``."""
    b = _Builder()
    b.root = pattern
    frag = b.build(pattern)
    if frag.nullable and not allow_empty:
        raise QueryError(
            _at_node(f"pattern ({pattern}) can match zero events", pattern),
            hint="every match must contain at least one event; make some item mandatory")
    if any(m & ~_ANCHORS for _, m in frag.first):  # pragma: no cover - excluded by build_seq
        raise QueryError("a pattern must not start with a negation")
    follow = [_resolve_anchors(f, first_row=False) for f in b.follow]
    return Automaton(
        pos_var=tuple(b.pos_var),
        start=tuple(t for t, _ in _resolve_anchors(frag.first, first_row=False, start=True)),
        follow=tuple(tuple(t for t, _ in f) for f in follow),
        follow_neg=tuple(tuple(m for _, m in f) for f in follow),
        negations=tuple(b.negations),
        start_first=tuple(t for t, _ in _resolve_anchors(frag.first, first_row=True,
                                                        start=True)),
        excluded=frozenset(b.excluded),
        anchored=b.anchored,
    )
