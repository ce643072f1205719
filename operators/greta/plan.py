"""Binding a GRETA query to a schema: predicate classification, indexes, channels, output schema.

Predicates (paper Sec. 6) are the top-level conjuncts of WHERE:

* **equivalence** ``[a, E.b, ...]``: every event of a trend carries the same value of each listed
  attribute. An unqualified attribute applies to every event type of the query (positive and
  negative); ``E.b`` applies to the events of variable ``E`` only. Together with GROUP-BY (which
  applies to every event) they *partition* each graph: graph ``g`` is partitioned by the
  attributes that apply to all of its states. An attribute that applies to some but not all states
  of a graph is rejected (it would not be a partition).
  A negative trend constrains a parent trend only when they agree on the partition attributes the
  two graphs share (e.g. ``[P.vehicle, segment]`` with ``NOT Accident A``: an accident invalidates
  position trends of every vehicle in its segment).
* **local** (vertex) predicates reference one variable (``S.price > 10``; unqualified columns in
  it mean the same event) or none (``price > 0``: applies to every event type of the query).
* **edge** predicates reference ``NEXT(F)`` and at most one other variable ``E``; they constrain
  every adjacent pair (an ``E`` event directly followed by an ``F`` event) of a trend, so
  ``E -> F`` must be a transition of the template. Several edge predicates of one transition are
  ANDed.

Predecessor search per transition ``E -> F`` (paper Sec. 7 "vertex trees"):

* no edge predicate: one running aggregate per (partition, window) - O(1) per event;
* one comparison ``f(E) op g(NEXT(F))`` with op in ``< <= > >=``: a Fenwick tree over the ranks of
  ``f`` per partition, prefix aggregates answer ``sum over predecessors with f < g(e)`` in
  O(log n);
* ``f(E) = g(NEXT(F))``: per-key aggregates, O(1);
* anything else: a scan of the partition's candidate predecessors with a compiled predicate
  (:mod:`~replaydb.operators.greta.edgecode`), O(n) per event (the paper's O(n^2) worst case).

Channels are the aggregates propagated through the graph (paper Thm. 9.1): the trend count, one
occurrence count per ``COUNT(E)``/``AVG``, one sum per ``SUM``/``AVG`` (exact for integer
attributes, float64 for floating ones), one min/max per ``MIN``/``MAX``; negative graphs carry one
channel, the latest start time of the trends ending at a vertex.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from replaydb.operators.expr import (
    Binary,
    Call,
    Column,
    Expr,
    ExprError,
    and_all,
    columns,
    conjuncts,
    to_text,
)
from replaydb.operators.greta.config import EXACT_TYPES, GretaConfig, ReturnItem
from replaydb.operators.greta.edgecode import EdgeProgram
from replaydb.operators.greta.template import Negation, SplitPattern, Template, split_pattern

NONE, FENWICK, POINT, SCAN = 0, 1, 2, 3
KIND_NAMES = {NONE: "aggregate", FENWICK: "fenwick", POINT: "point", SCAN: "scan"}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


@dataclass
class IndexSpec:
    """Where the vertices of one state are kept for one kind of predecessor search."""

    id: int
    src: int
    kind: int
    key: Expr | None = None
    key_text: str = ""
    desc: bool = False
    has_records: bool = False


@dataclass
class TransSpec:
    """A transition with its predecessor search: ``index`` of the source state, the comparison
    ``op`` and ``probe`` expression of the next event, the case-1 ``negation`` and, for scans, the
    compiled edge predicate."""

    id: int
    src: int
    dst: int
    index: int
    op: str | None = None
    probe: Expr | None = None
    negation: int | None = None
    program: EdgeProgram | None = None


@dataclass
class GraphPlan:
    gid: int
    template: Template
    states: list[str]
    types: list[str]
    start: int
    end: int
    local: list[Expr | None]
    part_attrs: tuple[str, ...]
    indexes: list[IndexSpec] = field(default_factory=list)
    transitions: list[TransSpec] = field(default_factory=list)
    in_tr: list[list[int]] = field(default_factory=list)
    out_ix: list[list[int]] = field(default_factory=list)
    children: list[int] = field(default_factory=list)
    case1: list[int] = field(default_factory=list)
    case2: int | None = None
    case3: int | None = None
    big: list[tuple[str, int, int]] = field(default_factory=list)
    fsum: list[tuple[int, int]] = field(default_factory=list)
    mmi: list[tuple[int, int, bool]] = field(default_factory=list)
    mmf: list[tuple[int, int, bool]] = field(default_factory=list)
    attr_i: list[str] = field(default_factory=list)
    attr_f: list[str] = field(default_factory=list)
    gcols: list[str] = field(default_factory=list)

    @property
    def is_main(self) -> bool:
        return self.gid == 0

    def describe(self) -> str:
        lines = [self.template.describe(), f"  partitioned by: {list(self.part_attrs) or '-'}"]
        for t in self.transitions:
            ix = self.indexes[t.index]
            how = KIND_NAMES[ix.kind]
            if ix.kind in (FENWICK, POINT):
                how += f" on {ix.key_text} {t.op} {to_text(t.probe)}" if t.probe else ""
            lines.append(f"  {self.states[t.src]}->{self.states[t.dst]}: {how}"
                         + (f", NOT #{t.negation}" if t.negation is not None else ""))
        return "\n".join(lines)


@dataclass
class NegPlan:
    negation: Negation
    common: tuple[str, ...]
    transition: int | None  # parent transition id (case 1)


@dataclass
class OutputItem:
    """How a RETURN aggregate is read from the main graph's channels."""

    item: ReturnItem
    name: str
    source: str  # 'big' | 'fsum' | 'mmi' | 'mmf' | 'avg_big' | 'avg_f'
    channel: int
    channel2: int = -1  # COUNT(E) channel of AVG


@dataclass
class CompiledPlan:
    config: GretaConfig
    split: SplitPattern
    graphs: list[GraphPlan]
    negations: list[NegPlan]
    outputs: list[OutputItem]
    output_schema: pa.Schema
    group_by: tuple[str, ...]
    group_types: tuple[pa.DataType, ...]
    within: int
    slide: int
    K: int
    columns_needed: tuple[str, ...]
    equiv: dict[str, frozenset[str] | None]
    edge_preds: dict[tuple[str, str], Expr]

    def describe(self) -> str:
        lines = [g.describe() for g in self.graphs]
        for n in self.negations:
            ng = n.negation
            lines.append(f"NOT #{ng.id} (case {ng.case}): graph {ng.child} -> graph {ng.parent}, "
                         f"matched on {list(n.common) or 'nothing'}")
        lines.append(f"windows: WITHIN {self.within} SLIDE {self.slide} ({self.K} per event)")
        return "\n".join(lines)


def _is_next(c: Column) -> bool:
    return c.index is not None and c.index[0] == "next"


def _is_integer(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_boolean(t)


def _is_numeric(t: pa.DataType) -> bool:
    return _is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


@dataclass
class _Where:
    """The conjuncts of WHERE by kind: equivalence attributes (the variables each applies to,
    None for all; and where it was first written), local predicates of every event and per
    variable, and edge predicates per (variable, NEXT variable)."""

    equiv: dict[str, set[str] | None] = field(default_factory=dict)
    equiv_pos: dict[str, int | None] = field(default_factory=dict)
    local_all: list[Expr] = field(default_factory=list)
    local: dict[str, list[Expr]] = field(default_factory=dict)
    edges: dict[tuple[str, str], list[Expr]] = field(default_factory=dict)


class _Binder:
    def __init__(self, cfg: GretaConfig, schema: pa.Schema) -> None:
        self.cfg = cfg
        self.schema = schema
        self.names = set(schema.names)
        if cfg.exact_type not in EXACT_TYPES:
            raise ExprError(f"exact_type must be one of {', '.join(EXACT_TYPES)}, "
                            f"not {cfg.exact_type!r}")
        if cfg.within <= 0 or cfg.slide_units <= 0:
            raise ExprError("WITHIN and SLIDE must be positive")
        for need in ("t", cfg.type_column):
            if need not in self.names:
                raise ExprError(f"the stream has no column {need!r} "
                                f"(columns: {', '.join(schema.names)})")
        self.split = split_pattern(cfg.pattern)
        self.alias_graph: dict[str, tuple[int, int]] = {}
        self.type_alias: dict[str, str] = {}
        for tpl in self.split.templates:
            for k, (a, ty) in enumerate(zip(tpl.states, tpl.types)):
                self.alias_graph[a] = (tpl.graph, k)
                self.type_alias[ty] = a

    # ------------------------------------------------------------------ helpers
    def field_type(self, name: str, pos: int | None) -> pa.DataType:
        if name not in self.names:
            raise ExprError(f"unknown attribute {name!r}", pos,
                            hint=f"columns are: {', '.join(self.schema.names)}")
        return self.schema.field(name).type

    def resolve_var(self, var: str, pos: int | None) -> str:
        if var in self.alias_graph:
            return var
        if var in self.type_alias:
            return self.type_alias[var]
        raise ExprError(f"unknown event variable {var!r}", pos,
                        hint=f"variables are: {', '.join(self.alias_graph)}")

    def check_columns(self, e: Expr) -> None:
        for c in columns(e):
            self.field_type(c.name, c.pos)
            if c.qualifier is not None:
                self.resolve_var(c.qualifier, c.pos)
        for node in e.walk():
            if isinstance(node, Call) and node.name == "EQUIV":
                raise ExprError("an equivalence list [...] must be a top-level AND term of WHERE",
                                node.pos)

    # ------------------------------------------------------------------ main
    def bind(self) -> CompiledPlan:
        cfg = self.cfg
        templates = self.split.templates
        graphs = [GraphPlan(gid=t.graph, template=t, states=list(t.states), types=list(t.types),
                            start=t.states.index(t.start), end=t.states.index(t.end),
                            local=[None] * len(t.states), part_attrs=())
                  for t in templates]
        for gb, pos in zip(cfg.group_by, [None] * len(cfg.group_by)):
            self.field_type(gb, pos)
        if len(set(cfg.group_by)) != len(cfg.group_by):
            raise ExprError("an attribute is listed twice in GROUP-BY")
        w = self._classify_where()
        # local predicates per state
        for g in graphs:
            for k, a in enumerate(g.states):
                parts = w.local_all + w.local.get(a, [])
                g.local[k] = and_all(parts) if parts else None
        self._partition_attrs(graphs, w)
        negs = self._negations(graphs)
        self._transitions(graphs, w.edges, negs)
        outputs, out_fields, group_types = self._outputs(graphs[0])
        for g in graphs[1:]:
            g.mmi.append((-2, -1, True))  # latest start time of the trends ending here
        s = cfg.slide_units
        K = max(1, -(-cfg.within // s))
        return CompiledPlan(
            config=cfg, split=self.split, graphs=graphs, negations=negs, outputs=outputs,
            output_schema=pa.schema(out_fields), group_by=tuple(cfg.group_by),
            group_types=group_types, within=cfg.within, slide=s, K=K,
            columns_needed=self._columns_needed(graphs),
            equiv={a: (None if v is None else frozenset(v)) for a, v in w.equiv.items()},
            edge_preds={k: and_all(v) for k, v in w.edges.items()},
        )

    def _classify_where(self) -> _Where:
        """The top-level conjuncts of WHERE sorted into equivalence attributes, local
        predicates (of every event, or of one variable) and edge predicates per (variable,
        NEXT variable); errors for any that is none of these."""
        w = _Where()
        for cj in conjuncts(self.cfg.where):
            if isinstance(cj, Call) and cj.name == "EQUIV":
                self._add_equiv(cj, w)
                continue
            self.check_columns(cj)
            cols = columns(cj)
            nxt = {self.resolve_var(c.qualifier, c.pos) for c in cols
                   if _is_next(c) and c.qualifier is not None}
            prev = {self.resolve_var(c.qualifier, c.pos) for c in cols
                    if not _is_next(c) and c.qualifier is not None}
            unq = [c for c in cols if c.qualifier is None]
            if not nxt:
                if len(prev) > 1:
                    raise ExprError(
                        "a predicate relating two event variables must be an edge predicate "
                        "using NEXT(var).attr", getattr(cj, "pos", None))
                if prev:
                    w.local.setdefault(next(iter(prev)), []).append(cj)
                else:
                    w.local_all.append(cj)
                continue
            if len(nxt) > 1:
                raise ExprError("an edge predicate may reference only one NEXT(...) variable",
                                getattr(cj, "pos", None))
            if unq:
                raise ExprError(f"unqualified attribute {unq[0].name!r} in an edge predicate; "
                                "qualify it with an event variable", unq[0].pos)
            if len(prev) != 1:
                raise ExprError("an edge predicate must reference the previous event (E.attr) "
                                "and the next one (NEXT(F).attr)", getattr(cj, "pos", None))
            src, dst = next(iter(prev)), next(iter(nxt))
            w.edges.setdefault((src, dst), []).append(cj)
        return w

    def _add_equiv(self, cj: Call, w: _Where) -> None:
        """Record the attributes of an equivalence list ``[a, E.b, ...]`` (an unqualified one
        applies to every variable: None)."""
        for col in cj.args:
            assert isinstance(col, Column)
            self.field_type(col.name, col.pos)
            if col.index is not None:
                raise ExprError("NEXT(...) is not allowed in an equivalence list", col.pos)
            w.equiv_pos.setdefault(col.name, col.pos)
            if col.qualifier is None:
                w.equiv[col.name] = None
            else:
                a = self.resolve_var(col.qualifier, col.pos)
                cur = w.equiv.get(col.name, set())
                if cur is not None:
                    cur.add(a)
                    w.equiv[col.name] = cur

    def _partition_attrs(self, graphs: list[GraphPlan], w: _Where) -> None:
        """Each graph's partition attributes: GROUP-BY, then the equivalence attributes that
        apply to all of its states (one that applies to some of them only is an error)."""
        for g in graphs:
            attrs = list(self.cfg.group_by)
            for attr, who in w.equiv.items():
                if attr in attrs:
                    continue
                if who is None:
                    attrs.append(attr)
                    continue
                inside = who & set(g.states)
                if not inside:
                    continue
                if inside != set(g.states):
                    missing = sorted(set(g.states) - who)
                    raise ExprError(
                        f"equivalence attribute {attr!r} applies to {sorted(inside)} but not to "
                        f"{missing} of the same (sub-)pattern; qualify it for every variable or "
                        "leave it unqualified", w.equiv_pos.get(attr))
                attrs.append(attr)
            g.part_attrs = tuple(attrs)

    def _negations(self, graphs: list[GraphPlan]) -> list[NegPlan]:
        """One plan per negation (the partition attributes parent and child share), registered
        with its parent graph by case."""
        negs: list[NegPlan] = []
        for ng in self.split.negations:
            parent, child = graphs[ng.parent], graphs[ng.child]
            common = tuple(a for a in parent.part_attrs if a in child.part_attrs)
            negs.append(NegPlan(ng, common, None))
            parent.children.append(ng.id)
            if ng.case == 1:
                parent.case1.append(ng.id)
            elif ng.case == 2:
                parent.case2 = ng.id
            else:
                parent.case3 = ng.id
        return negs

    def _transitions(self, graphs: list[GraphPlan], edges: dict[tuple[str, str], list[Expr]],
                     negs: list[NegPlan]) -> None:
        """Every graph's transitions and the indexes their predecessor searches use (one index
        shared by the transitions with the same source, kind, key and direction, unless one
        needs its own records); an edge predicate on a pair that never follows directly is an
        error."""
        used_edges: set[tuple[str, str]] = set()
        for g in graphs:
            g.in_tr = [[] for _ in g.states]
            g.out_ix = [[] for _ in g.states]
            shared: dict[tuple, int] = {}
            for tr in g.template.transitions:
                used_edges.add((tr.src, tr.dst))
                self._transition(g, tr, edges.get((tr.src, tr.dst), []), shared, negs)
        for (src, dst), preds in edges.items():
            if (src, dst) not in used_edges:
                raise ExprError(
                    f"edge predicate {src} -> {dst}: an event of {dst} never directly follows an "
                    f"event of {src} in a trend of this pattern", getattr(preds[0], "pos", None))

    def _transition(self, g: GraphPlan, tr: Any, preds: list[Expr], shared: dict[tuple, int],
                    negs: list[NegPlan]) -> None:
        """Add template transition ``tr`` (edge predicates ``preds``) to ``g`` with its index."""
        src, dst = g.states.index(tr.src), g.states.index(tr.dst)
        tid = len(g.transitions)
        spec = TransSpec(tid, src, dst, -1, negation=tr.negation)
        kind, key, op, probe = self._index_kind(preds)
        dedicated = tr.negation is not None or kind == SCAN
        desc = op in (">", ">=")
        key_text = to_text(key) if key is not None else ""
        share_key = (src, kind, key_text, desc)
        if not dedicated and share_key in shared:
            ix_id = shared[share_key]
        else:
            ix_id = len(g.indexes)
            g.indexes.append(IndexSpec(ix_id, src, kind, key, key_text, desc,
                                       has_records=dedicated))
            g.out_ix[src].append(ix_id)
            if not dedicated:
                shared[share_key] = ix_id
        spec.index = ix_id
        spec.op = op
        spec.probe = probe
        if kind == SCAN:
            spec.program = EdgeProgram(
                and_all(preds), g.gcols,
                lambda c: "i" if _is_integer(self.field_type(c, None)) else "f")
            for cname in g.gcols:
                ft = self.field_type(cname, None)
                if not _is_numeric(ft):
                    raise ExprError(
                        f"attribute {cname!r} ({ft}) cannot be used in an edge predicate "
                        "that is not a single comparison", getattr(preds[0], "pos", None))
        g.transitions.append(spec)
        g.in_tr[dst].append(tid)
        if tr.negation is not None:
            negs[tr.negation].transition = tid

    def _outputs(self, main: GraphPlan
                 ) -> tuple[list[OutputItem], list[pa.Field], tuple[pa.DataType, ...]]:
        """(output items, output fields, GROUP-BY types) of RETURN, adding the channels the
        items need to the main graph (the trend count first)."""
        cfg = self.cfg
        main.big.append(("count", -1, -1))
        outputs: list[OutputItem] = []
        out_fields: list[pa.Field] = [pa.field("window_start", pa.int64()),
                                      pa.field("window_end", pa.int64())]
        group_types = tuple(self.field_type(a, None) for a in cfg.group_by)
        for a, ty in zip(cfg.group_by, group_types):
            out_fields.append(pa.field(a, ty))
        exact = {"decimal": pa.decimal128(38, 0), "string": pa.string(),
                 "int64": pa.int64()}[cfg.exact_type]
        names = set(cfg.group_by) | {"window_start", "window_end", "last_seq"}
        if not cfg.returns:
            raise ExprError("RETURN needs at least one item")
        for it in cfg.returns:
            if it.kind == "attr":
                if it.attr not in cfg.group_by:
                    raise ExprError(f"RETURN attribute {it.attr!r} is not a GROUP-BY attribute",
                                    it.pos)
                continue
            name = it.name
            if name in names:
                raise ExprError(f"output column {name!r} appears twice; use AS to rename", it.pos)
            names.add(name)
            item, ftype = self._output(main, it, name, exact)
            outputs.append(item)
            out_fields.append(pa.field(name, ftype))
        out_fields.append(pa.field("last_seq", pa.int64()))
        return outputs, out_fields, group_types

    def _output(self, main: GraphPlan, it: ReturnItem, name: str, exact: pa.DataType
                ) -> tuple[OutputItem, pa.DataType]:
        """The output item of aggregate ``it`` (named ``name``) and its type, adding the
        channels it reads to the main graph."""
        if it.kind == "count_star":
            return OutputItem(it, name, "big", 0), exact
        alias = self.resolve_var(str(it.var), it.pos)
        gid, state = self.alias_graph[alias]
        if gid != 0:
            raise ExprError(f"aggregate over {alias!r}, a variable of a negated sub-pattern",
                            it.pos)
        if it.kind == "count":
            ch = self._big(main, "counte", state, -1)
            return OutputItem(it, name, "big", ch), exact
        ft = self.field_type(str(it.attr), it.pos)
        if not (_is_integer(ft) or pa.types.is_floating(ft)):
            raise ExprError(f"{it.kind.upper()} needs a numeric attribute; {it.attr!r} is "
                            f"{ft}", it.pos)
        integer = _is_integer(ft)
        if it.kind in ("min", "max"):
            is_max = it.kind == "max"
            if integer:
                col = _col(main.attr_i, str(it.attr))
                ch = _chan(main.mmi, (state, col, is_max))
                return OutputItem(it, name, "mmi", ch), pa.int64()
            col = _col(main.attr_f, str(it.attr))
            ch = _chan(main.mmf, (state, col, is_max))
            return OutputItem(it, name, "mmf", ch), pa.float64()
        if integer:
            col = _col(main.attr_i, str(it.attr))
            ch = self._big(main, "sumi", state, col)
            src = "big"
        else:
            col = _col(main.attr_f, str(it.attr))
            ch = _chan(main.fsum, (state, col))
            src = "fsum"
        if it.kind == "sum":
            return OutputItem(it, name, src, ch), (exact if integer else pa.float64())
        ce = self._big(main, "counte", state, -1)
        return OutputItem(it, name, "avg_big" if integer else "avg_f", ch, ce), pa.float64()

    def _columns_needed(self, graphs: list[GraphPlan]) -> tuple[str, ...]:
        """The input columns the runtime reads: time, type, seq (when present), then every
        column a graph partitions by, aggregates or evaluates."""
        cfg = self.cfg
        needed: list[str] = ["t", cfg.type_column]
        if "seq" in self.names:
            needed.append("seq")
        for g in graphs:
            for nm in (*g.part_attrs, *g.attr_i, *g.attr_f, *g.gcols):
                if nm not in needed:
                    needed.append(nm)
            for e in [*(x for x in g.local if x is not None),
                      *(ix.key for ix in g.indexes if ix.key is not None),
                      *(t.probe for t in g.transitions if t.probe is not None)]:
                for c in columns(e):
                    if c.name not in needed:
                        needed.append(c.name)
        return tuple(needed)

    def _big(self, g: GraphPlan, kind: str, state: int, col: int) -> int:
        return _chan(g.big, (kind, state, col))

    def _index_kind(self, preds: list[Expr]) -> tuple[int, Expr | None, str | None, Expr | None]:
        """(kind, key expression, op, probe expression) for a transition's edge predicates."""
        if not preds:
            return NONE, None, None, None
        if len(preds) == 1 and isinstance(preds[0], Binary) and preds[0].op in _FLIP:
            b = preds[0]
            lcols, rcols = columns(b.left), columns(b.right)
            l_prev = bool(lcols) and all(not _is_next(c) for c in lcols)
            l_next = bool(lcols) and all(_is_next(c) for c in lcols)
            r_prev = bool(rcols) and all(not _is_next(c) for c in rcols)
            r_next = bool(rcols) and all(_is_next(c) for c in rcols)
            if l_prev and r_next:
                key, op, probe = b.left, b.op, b.right
            elif l_next and r_prev:
                key, op, probe = b.right, _FLIP[b.op], b.left
            else:
                return SCAN, None, None, None
            return (POINT if op == "=" else FENWICK), key, op, probe
        return SCAN, None, None, None


def _col(cols: list[str], name: str) -> int:
    if name not in cols:
        cols.append(name)
    return cols.index(name)


def _chan(chans: list, spec: tuple) -> int:
    if spec not in chans:
        chans.append(spec)
    return chans.index(spec)


def compile_plan(cfg: GretaConfig, schema: pa.Schema) -> CompiledPlan:
    """Check ``cfg`` against ``schema`` and compile it (raises ExprError with query positions)."""
    return _Binder(cfg, schema).bind()
