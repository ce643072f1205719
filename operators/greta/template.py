"""Pattern analysis: normalization, the pattern split (paper Alg. 3) and GRETA templates (Alg. 1).

A pattern is split into one positive sub-pattern (graph 0) and one sub-pattern per ``NOT``
(graphs 1..). Each sub-pattern becomes a *template*: its states are its event types (identified by
their aliases), ``start``/``end`` are its first and last types, and transitions connect types that
may be adjacent in a trend: ``SEQ(P1, ..., Pn)`` gives ``end(Pi) -> start(Pi+1)``, ``P+`` gives
``end(P) -> start(P)``. With each type appearing once, a trend is exactly a sequence of events that
starts with a START event, ends with an END event and whose adjacent events follow transitions (the
language of a linear regular expression is local), so aggregating over paths of the graph is exact.

Normalization (documented decisions):

* ``P++`` is ``P+``; a one-element ``SEQ(P)`` is ``P``.
* A ``SEQ`` directly inside a ``SEQ`` is spliced into it (``SEQ(A, SEQ(B, C))`` is
  ``SEQ(A, B, C)``), so a ``NOT`` is classified after splicing.
* ``(NOT P)+`` is rejected (the paper notes it means ``NOT P``; write that); ``NOT NOT P``,
  consecutive negations (``SEQ(A, NOT B, NOT C, D)``; write ``NOT SEQ(B, C)``), a ``NOT`` outside a
  ``SEQ`` and a ``SEQ`` with no positive element are rejected.

Negation cases (paper Sec. 5.1), classified by the position of ``NOT N`` in its ``SEQ``:

1. between two positive elements ``SEQ(.., Pi, NOT N, Pj, ..)``: allowed anywhere (also under
   ``+`` and inside negative sub-patterns);
2. last ``SEQ(.., Pi, NOT N)`` and 3. first ``SEQ(NOT N, Pj, ..)``: they refer to the window's
   end / start, so they are allowed only in the top-level ``SEQ`` of the query's pattern.

Complexity: linear in the size of the pattern (plus the quadratic start/end computation of Alg. 1,
irrelevant for patterns of realistic size).
"""

from __future__ import annotations

from dataclasses import dataclass

from replaydb.operators.expr import ExprError
from replaydb.operators.greta.config import Pattern, PNot, PPlus, PSeq, PType, pattern_text


@dataclass(frozen=True)
class Transition:
    """A template transition ``src -> dst`` (aliases). ``negation`` names a case-1 ``NOT`` whose
    trends invalidate this adjacency (paper Def. 5), or is None."""

    src: str
    dst: str
    label: str
    negation: int | None = None


@dataclass(frozen=True)
class Negation:
    """One ``NOT N``: its case (1, 2, 3), the graph it constrains (``parent``), the graph of ``N``
    (``child``) and the parent's states it connects: ``previous = end(Pi)``,
    ``following = start(Pj)`` (None where the case has none)."""

    id: int
    case: int
    parent: int
    child: int
    previous: str | None
    following: str | None
    pos: int | None = None


@dataclass(frozen=True)
class Template:
    """The GRETA template of one (positive) sub-pattern."""

    graph: int
    pattern: Pattern
    states: tuple[str, ...]
    types: tuple[str, ...]
    start: str
    end: str
    transitions: tuple[Transition, ...]
    negations: tuple[int, ...]
    negation: int | None

    def type_of(self, alias: str) -> str:
        return self.types[self.states.index(alias)]

    def pred_transitions(self, alias: str) -> list[Transition]:
        """Transitions into ``alias`` (its predecessor types, paper ``P.predTypes``)."""
        return [t for t in self.transitions if t.dst == alias]

    def describe(self) -> str:
        arrows = ", ".join(
            f"{t.src}->{t.dst}" + (f" [NOT #{t.negation}]" if t.negation is not None else "")
            for t in self.transitions
        )
        return (f"graph {self.graph}: {pattern_text(self.pattern)}; start={self.start} "
                f"end={self.end}; transitions: {arrows or 'none'}")


@dataclass(frozen=True)
class SplitPattern:
    """The result of the split: ``templates[0]`` is the positive pattern of the query."""

    pattern: Pattern
    templates: tuple[Template, ...]
    negations: tuple[Negation, ...]

    @property
    def main(self) -> Template:
        return self.templates[0]

    def alias_map(self) -> dict[str, tuple[int, str]]:
        """alias -> (graph, type) for every state of every graph."""
        out: dict[str, tuple[int, str]] = {}
        for tpl in self.templates:
            for a, ty in zip(tpl.states, tpl.types):
                out[a] = (tpl.graph, ty)
        return out

    def describe(self) -> str:
        lines = [tpl.describe() for tpl in self.templates]
        for ng in self.negations:
            lines.append(f"NOT #{ng.id}: case {ng.case}, graph {ng.child} constrains graph "
                         f"{ng.parent} (previous={ng.previous}, following={ng.following})")
        return "\n".join(lines)


def start_of(p: Pattern) -> str:
    """``start(P)`` of Alg. 1 (on a NOT-free pattern)."""
    if isinstance(p, PType):
        return p.alias
    if isinstance(p, PPlus):
        return start_of(p.inner)
    if isinstance(p, PSeq):
        return start_of(p.items[0])
    raise AssertionError("start of a negation")


def end_of(p: Pattern) -> str:
    """``end(P)`` of Alg. 1 (on a NOT-free pattern)."""
    if isinstance(p, PType):
        return p.alias
    if isinstance(p, PPlus):
        return end_of(p.inner)
    if isinstance(p, PSeq):
        return end_of(p.items[-1])
    raise AssertionError("end of a negation")


def normalize(p: Pattern) -> Pattern:
    """Apply the normalization rules of the module docstring."""
    if isinstance(p, PType):
        return p
    if isinstance(p, PPlus):
        inner = normalize(p.inner)
        if isinstance(inner, PNot):
            raise ExprError("(NOT P)+ is the same as NOT P; write the negation without '+'", p.pos)
        if isinstance(inner, PPlus):
            return inner
        return PPlus(inner, p.pos)
    if isinstance(p, PNot):
        inner = normalize(p.inner)
        if isinstance(inner, PNot):
            raise ExprError("NOT NOT P is not allowed; write P", p.pos)
        return PNot(inner, p.pos)
    items: list[Pattern] = []
    for it in p.items:
        n = normalize(it)
        if isinstance(n, PSeq):
            items.extend(n.items)
        else:
            items.append(n)
    if not items:
        raise ExprError("SEQ needs at least one element", p.pos)
    if len(items) == 1 and not isinstance(items[0], PNot):
        return items[0]
    return PSeq(tuple(items), p.pos)


def _check_unique(p: Pattern) -> None:
    seen_types: dict[str, PType] = {}
    seen_alias: dict[str, PType] = {}

    # pre-order with an explicit stack (a recursive closure is a reference cycle that only a
    # garbage collection frees)
    stack: list[Pattern] = [p]
    while stack:
        q = stack.pop()
        if isinstance(q, PType):
            if q.type in seen_types:
                raise ExprError(
                    f"event type {q.type!r} appears twice in the pattern; GRETA requires each "
                    "event type at most once (paper Sec. 2)", q.pos)
            if q.alias in seen_alias:
                raise ExprError(f"variable {q.alias!r} is used twice in the pattern", q.pos)
            seen_types[q.type] = q
            seen_alias[q.alias] = q
        elif isinstance(q, PPlus | PNot):
            stack.append(q.inner)
        else:
            stack.extend(reversed(q.items))
    for a, q in seen_alias.items():
        if a in seen_types and seen_types[a] is not q:
            raise ExprError(f"variable {a!r} is also the name of another event type", q.pos)


class _Splitter:
    def __init__(self) -> None:
        self.templates: list[Template | None] = []
        self.negations: list[Negation] = []

    def graph(self, p: Pattern, negation: int | None) -> int:
        gid = len(self.templates)
        self.templates.append(None)
        is_main = negation is None
        transitions: list[Transition] = []
        child_negs: list[int] = []
        if isinstance(p, PNot):
            raise ExprError("a pattern cannot be only a negation", p.pos)
        positive = self._strip(p, gid, is_main, True, False, transitions, child_negs)
        states = [t.alias for t in _types(positive)]
        types = [t.type for t in _types(positive)]
        uniq: dict[tuple[str, str], Transition] = {}
        for t in transitions:
            key = (t.src, t.dst)
            old = uniq.get(key)
            if old is not None and old.negation != t.negation:  # pragma: no cover - impossible
                raise ExprError(f"transition {t.src}->{t.dst} arises twice with different "
                                "negations", p.pos)
            uniq[key] = t
        self.templates[gid] = Template(
            graph=gid, pattern=positive, states=tuple(states), types=tuple(types),
            start=start_of(positive), end=end_of(positive), transitions=tuple(uniq.values()),
            negations=tuple(child_negs), negation=negation,
        )
        return gid

    def _strip(self, p: Pattern, gid: int, is_main: bool, at_root: bool, under_plus: bool,
               transitions: list[Transition], child_negs: list[int]) -> Pattern:
        if isinstance(p, PType):
            return p
        if isinstance(p, PNot):
            raise ExprError("NOT must appear inside SEQ(...) next to a positive element", p.pos)
        if isinstance(p, PPlus):
            inner = self._strip(p.inner, gid, is_main, False, True, transitions, child_negs)
            transitions.append(Transition(end_of(inner), start_of(inner), "+"))
            return PPlus(inner, p.pos)
        items = list(p.items)
        for a, b in zip(items, items[1:]):
            if isinstance(a, PNot) and isinstance(b, PNot):
                raise ExprError("consecutive negations; write NOT SEQ(...) over them", b.pos)
        if all(isinstance(it, PNot) for it in items):
            raise ExprError("SEQ needs a positive element besides its negations", p.pos)
        pos_items: list[Pattern] = []
        pending_nots: list[tuple[PNot, int]] = []  # (NOT node, index of next positive item)
        for it in items:
            if isinstance(it, PNot):
                pending_nots.append((it, len(pos_items)))
            else:
                pos_items.append(self._strip(it, gid, is_main, False, under_plus, transitions,
                                             child_negs))
        neg_between: dict[int, int] = {}
        for node, nxt in pending_nots:
            if nxt == 0:
                case = 3
            elif nxt == len(pos_items):
                case = 2
            else:
                case = 1
            if case != 1 and not (is_main and at_root):
                where = "first" if case == 3 else "last"
                raise ExprError(
                    f"NOT as the {where} element of a SEQ is only allowed in the top-level SEQ of "
                    "the query's pattern (it refers to the window's "
                    f"{'start' if case == 3 else 'end'}); put it between two positive elements",
                    node.pos)
            prev = end_of(pos_items[nxt - 1]) if case != 3 else None
            foll = start_of(pos_items[nxt]) if case != 2 else None
            nid = len(self.negations)
            self.negations.append(Negation(nid, case, gid, -1, prev, foll, node.pos))
            child_negs.append(nid)
            child = self.graph(node.inner, nid)
            self.negations[nid] = Negation(nid, case, gid, child, prev, foll, node.pos)
            if case == 1:
                neg_between[nxt] = nid
        for k in range(1, len(pos_items)):
            transitions.append(Transition(end_of(pos_items[k - 1]), start_of(pos_items[k]),
                                          "SEQ", neg_between.get(k)))
        if len(pos_items) == 1:
            return pos_items[0]
        return PSeq(tuple(pos_items), p.pos)


def _types(p: Pattern) -> list[PType]:
    if isinstance(p, PType):
        return [p]
    if isinstance(p, PPlus | PNot):
        return _types(p.inner)
    out: list[PType] = []
    for it in p.items:
        out.extend(_types(it))
    return out


def split_pattern(p: Pattern) -> SplitPattern:
    """Normalize ``p``, check it, and split it into templates and negations (Alg. 1 and 3)."""
    norm = normalize(p)
    if isinstance(norm, PNot):
        raise ExprError("negation may not be the outermost operator of a pattern", norm.pos)
    _check_unique(norm)
    sp = _Splitter()
    sp.graph(norm, None)
    return SplitPattern(norm, tuple(t for t in sp.templates if t is not None),
                        tuple(sp.negations))
