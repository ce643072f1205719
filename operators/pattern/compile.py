"""Compile a :class:`~replaydb.operators.pattern.model.PatternSpec` against a stream schema.

The result, :class:`CompiledPattern`, is everything the matchers' compiled loops need, as flat
NumPy arrays:

* the position automaton (:mod:`replaydb.operators.pattern.automaton`) as CSR arrays;
* per variable, a *local* condition (the conjuncts that refer only to the current event,
  evaluated vectorized per batch into one boolean column per variable - event-type tests and
  ``PREV`` of the current row included) and a *cross-event* program (the other conjuncts in the
  shared typed form of :mod:`replaydb.operators.exprcode`, run by
  :mod:`replaydb.operators.pattern.vm`; see :mod:`replaydb.operators.pattern.lowering`);
* the layout of the computation state (SASE+'s vector V): int slots holding the index of the
  last/first event bound to a variable, float slots holding running row counts and
  (non-null count, sum, min, max) blocks per (variable, column). Only what some cross-event
  condition reads is kept, so runs that agree on it can be merged;
* the columns the programs read (``buf_cols``: (column, rows back)), strings among them
  dictionary coded, and the stack depths the programs need (``depth_i``, ``depth_f``).

Decisions: SASE+ ``[attr]`` equivalence becomes partition keys for the non-contiguous strategies
(an event of another partition can never extend a run there, so both are the same) and, under
strict contiguity, the condition ``attr = FIRST(attr)`` on every variable (an event of another
partition breaks contiguity there). ``PARTITION_CONTIGUITY`` is ``CONTIGUOUS`` with partition keys.

Complexity: linear in the size of the spec plus the automaton construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from replaydb.errors import QueryError
from replaydb.operators.expr import (
    Binary,
    Call,
    Column,
    Expr,
    InList,
    Literal,
    and_all,
    conjuncts,
)
from replaydb.operators.pattern.automaton import ACCEPT, ACCEPT_END, Automaton, build_automaton
from replaydb.operators.pattern.codegen import StateCodegen
from replaydb.operators.pattern.lowering import (
    LowerContext,
    derive_row_functions,
    is_local,
    lower_condition,
    order_strings,
    to_batch_expr,
)
from replaydb.operators.pattern.model import (
    Neg,
    PatternNode,
    PatternSpec,
    RowsPerMatch,
    Semantics,
    SkipKind,
    Strategy,
    Var,
)
from replaydb.operators.pattern.strings import OrderKeys, StringCodes
from replaydb.operators.pattern.typecheck import check_condition

STRAT_CONTIGUOUS = 0
STRAT_NEXT = 1
STRAT_ANY = 2

SKIP_PAST_LAST = 0
SKIP_NEXT_ROW = 1
SKIP_TO_FIRST = 2
SKIP_TO_LAST = 3


@dataclass
class CompiledPattern:
    """Flat arrays for the matchers (see module docstring); built by :func:`compile_pattern`."""

    spec: PatternSpec
    automaton: Automaton
    var_names: list[str]
    local_exprs: list[Expr | None]
    partition_by: tuple[str, ...]
    strategy: int
    window: int
    navs: set[tuple[str, int]]
    buf_cols: list[tuple[str, int]]
    buf_is_string: list[bool]
    strings: StringCodes
    # automaton (CSR)
    pos_var: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    start: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    start_first: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    pos_excluded: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    fol_ptr: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    fol_to: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    fol_neg: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    pos_final: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    pos_has_next: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    pos_negmask: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    neg_var: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    # programs
    prog_lo: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    prog_hi: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    p_op: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    p_ia: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    p_ib: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    p_fc: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    p_ic: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    depth_i: int = 1
    depth_f: int = 1
    # computation state layout
    ci_kind: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    ci_var: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    ci_events: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    """Per int slot, whether it holds an event's global index (else a variable: the buffer need
    not keep events for it)."""
    cf_kind: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    cf_var: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    cf_col: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    init_f: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    skip_kind: int = SKIP_PAST_LAST
    skip_member: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    """AFTER MATCH SKIP TO v: per variable, whether ``v`` (a union variable: each of its
    variables) is it."""
    skip_name: str = ""
    derived: dict[str, tuple[Expr, bool]] = field(default_factory=dict)
    """Derived per-row columns of DEFINE's aggregates over expressions (see
    :attr:`replaydb.operators.pattern.lowering.LowerContext.derived`)."""
    row_functions: dict[str, Expr] = field(default_factory=dict)
    """Derived per-row string columns of functions in cross-event conditions (see
    :attr:`replaydb.operators.pattern.lowering.LowerContext.row_functions`)."""
    order_columns: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    """Order-key columns of strings ordered across rows (see
    :attr:`replaydb.operators.pattern.lowering.LowerContext.order_columns`)."""
    order_keys: OrderKeys = field(default_factory=OrderKeys)
    sql: bool = False
    unambiguous: bool = True
    matchno_slot: int = -1
    """The float state slot holding the attempt's assumed MATCH_NUMBER() (-1: no condition
    reads it)."""

    @property
    def every_row(self) -> bool:
        """Whether every row not skipped has a result: an empty match (the pattern can match
        zero rows) or an unmatched row (WITH UNMATCHED ROWS)."""
        return self.automaton.nullable or self.spec.unmatched_rows

    @property
    def n_vars(self) -> int:
        return len(self.var_names)

    def var_index(self, name: str) -> int:
        return self.var_names.index(name)


def _strategy_code(s: Strategy) -> int:
    return {Strategy.CONTIGUOUS: STRAT_CONTIGUOUS, Strategy.PARTITION_CONTIGUITY: STRAT_CONTIGUOUS,
            Strategy.SKIP_TILL_NEXT: STRAT_NEXT, Strategy.SKIP_TILL_ANY: STRAT_ANY}[s]


def check_spec(spec: PatternSpec, schema: pa.Schema) -> None:
    """Semantic checks that do not need compilation (clear QueryErrors)."""
    pvars = spec.variables()
    negs = spec.negated_variables()
    for d in spec.defines:
        if d.name not in pvars:
            raise QueryError(_at(f"DEFINE names variable {d.name!r} that is not in the pattern",
                                 d.pos))
    names = [d.name for d in spec.defines]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        second = next(d for i, d in enumerate(spec.defines) if d.name in names[:i])
        raise QueryError(_at(f"variable(s) {', '.join(sorted(dup))} defined twice", second.pos))
    both = negs & {n.name for n in _positive_vars(spec)}
    if both:
        raise QueryError(f"variable(s) {', '.join(sorted(both))} used both negated and not")
    if spec.semantics == Semantics.SQL:
        if spec.strategy not in (Strategy.CONTIGUOUS, Strategy.PARTITION_CONTIGUITY):
            raise QueryError("SQL MATCH_RECOGNIZE semantics requires contiguous rows")
        if negs:
            raise QueryError("negation is not part of SQL MATCH_RECOGNIZE")
        if spec.unmatched_rows and spec.excludes():
            raise QueryError("exclusion {- -} cannot be used with ALL ROWS PER MATCH WITH "
                             "UNMATCHED ROWS: an excluded row would be neither output nor "
                             "unmatched")
        if spec.unmatched_rows and spec.rows_per_match != RowsPerMatch.ALL:
            raise QueryError("WITH UNMATCHED ROWS needs ALL ROWS PER MATCH")
    elif spec.anchored() or spec.excludes():
        raise QueryError("anchors ^ $ and exclusion {- -} are MATCH_RECOGNIZE constructs: they "
                         "need its semantics (one match per attempt, rows of a partition)")
    if spec.strategy == Strategy.PARTITION_CONTIGUITY and not (spec.partition_by
                                                              or spec.equivalence):
        raise QueryError("partition contiguity needs partition keys ([attr] or PARTITION BY)")
    for k in (*spec.partition_by, *spec.equivalence):
        LowerContext(pvars, schema).resolve_column(k, None)
    if spec.window is not None and spec.window < 0:
        raise QueryError(f"window must be >= 0, got {spec.window}")
    _check_subsets(spec, pvars)
    if spec.after_match_skip.kind in (SkipKind.TO_FIRST, SkipKind.TO_LAST):
        v = spec.after_match_skip.var
        if v not in pvars and v not in spec.subset_members():
            raise QueryError(f"AFTER MATCH SKIP names unknown variable {v!r}")


MAX_SUBSET_VARIABLES = 60
"""Most primary variables a pattern with SUBSET may have (their bits fit a state code)."""


def _check_subsets(spec: PatternSpec, pvars: list[str]) -> None:
    """Union variables name primary variables of the pattern, once each, and are not one."""
    seen: set[str] = set()
    for u in spec.subsets:
        if u.name in pvars or u.name in seen:
            raise QueryError(_at(f"union variable {u.name!r} is already a variable", u.pos))
        seen.add(u.name)
        for m in u.members:
            if m not in pvars:
                raise QueryError(_at(f"SUBSET {u.name} names {m!r}, not a variable of the "
                                     "pattern", u.pos))
    if spec.subsets and len(pvars) > MAX_SUBSET_VARIABLES:
        raise QueryError(f"a pattern with SUBSET may have at most {MAX_SUBSET_VARIABLES} "
                         f"variables, not {len(pvars)}")


def _positive_vars(spec: PatternSpec) -> list[Var]:
    """The pattern's variables outside a negation, in pattern order (a walk with an explicit
    stack: a recursive closure is a reference cycle that only a garbage collection frees)."""
    out: list[Var] = []
    stack: list[tuple[PatternNode, bool]] = [(spec.pattern, False)]
    while stack:
        n, neg = stack.pop()
        if isinstance(n, Var):
            if not neg:
                out.append(n)
            continue
        inner = neg or isinstance(n, Neg)
        stack.extend((c, inner) for c in reversed(tuple(n.children())))
    return out


def _at(msg: str, pos: int | None) -> str:
    return msg if pos is None else f"{msg} (at position {pos})"


def compile_pattern(spec: PatternSpec, schema: pa.Schema) -> CompiledPattern:
    """Compile ``spec`` for streams with ``schema`` (see module docstring)."""
    check_spec(spec, schema)
    auto = build_automaton(spec.pattern, allow_empty=spec.semantics == Semantics.SQL)
    auto._check()
    var_names = spec.variables()
    lctx = LowerContext(var_names, schema,
                        case_insensitive_vars=spec.semantics == Semantics.SQL,
                        subsets=spec.subset_members())
    strategy = _strategy_code(spec.strategy)
    partition_by = tuple(lctx.resolve_column(k, None) for k in spec.partition_by)
    equiv = tuple(lctx.resolve_column(k, None) for k in spec.equivalence)
    equiv_conds: list[Expr] = []
    if equiv:
        if strategy == STRAT_CONTIGUOUS and spec.strategy != Strategy.PARTITION_CONTIGUITY:
            equiv_conds = [Binary("=", Column(a), Call("FIRST", (Column(a),))) for a in equiv]
        else:
            partition_by = partition_by + tuple(a for a in equiv if a not in partition_by)

    local_exprs: list[Expr | None] = []
    cross: list[Expr | None] = []
    for v in var_names:
        d = spec.define(v)
        parts = conjuncts(d.condition) + list(equiv_conds)
        locs: list[Expr] = []
        crs: list[Expr] = []
        if d.event_types:
            tcol = lctx.resolve_column(spec.type_column, d.pos)
            lits = tuple(Literal(t) for t in d.event_types)
            locs.append(Binary("=", Column(tcol), lits[0]) if len(lits) == 1
                        else InList(Column(tcol), lits))
        for c in parts:
            low = lower_condition(c, v, lctx)
            if not is_local(low):  # LOWER(A.name) = B.name: per-row columns of the functions
                low = order_strings(derive_row_functions(low, lctx), lctx)
            check_condition(low, schema, c.pos if c.pos is not None else d.pos, lctx)
            if is_local(low):
                locs.append(to_batch_expr(low))
            else:
                crs.append(low)
        local_exprs.append(and_all(locs) if locs else None)
        cross.append(and_all(crs) if crs else None)

    cp = CompiledPattern(
        spec=spec, automaton=auto, var_names=var_names, local_exprs=local_exprs,
        partition_by=partition_by, strategy=strategy,
        window=-1 if spec.window is None else int(spec.window), navs=set(lctx.navs),
        buf_cols=[], buf_is_string=[], strings=StringCodes(var_names),
        sql=spec.semantics == Semantics.SQL, unambiguous=auto.unambiguous_labels(),
        derived=lctx.derived, row_functions=lctx.row_functions,
        order_columns=lctx.order_columns,
    )
    _fill_automaton(cp, auto, var_names)
    cp.skip_member = np.zeros(len(var_names), dtype=np.bool_)
    StateCodegen(cp, lctx).build(cross)
    if cp.sql:
        sk = spec.after_match_skip
        cp.skip_kind = {SkipKind.PAST_LAST_ROW: SKIP_PAST_LAST, SkipKind.TO_NEXT_ROW: SKIP_NEXT_ROW,
                        SkipKind.TO_FIRST: SKIP_TO_FIRST, SkipKind.TO_LAST: SKIP_TO_LAST}[sk.kind]
        if sk.var is not None:
            skip_to = lctx.resolve_var(sk.var, None)
            cp.skip_name = skip_to
            for v in lctx.members(skip_to) or ():
                cp.skip_member[cp.var_index(v)] = True
    elif spec.rows_per_match not in (RowsPerMatch.ONE, RowsPerMatch.ALL):  # pragma: no cover
        raise QueryError("bad rows per match")
    return cp


def _fill_automaton(cp: CompiledPattern, auto: Automaton, var_names: list[str]) -> None:
    vidx = {v: i for i, v in enumerate(var_names)}
    P = auto.n_positions
    cp.pos_var = np.array([vidx[v] for v in auto.pos_var], dtype=np.int64)
    cp.start = np.array(auto.start, dtype=np.int64)
    cp.start_first = np.array(auto.start_first, dtype=np.int64)
    cp.pos_excluded = np.zeros(P, dtype=np.bool_)
    cp.pos_excluded[list(auto.excluded)] = True
    ptr = [0]
    to: list[int] = []
    neg: list[int] = []
    for p in range(P):
        to.extend(auto.follow[p])
        neg.extend(auto.follow_neg[p])
        ptr.append(len(to))
    cp.fol_ptr = np.array(ptr, dtype=np.int64)
    cp.fol_to = np.array(to, dtype=np.int64)
    cp.fol_neg = np.array(neg, dtype=np.int64)
    cp.pos_final = np.array([auto.is_final(p) for p in range(P)], dtype=np.bool_)
    cp.pos_has_next = np.array([auto.has_next(p) for p in range(P)], dtype=np.bool_)
    negmask = np.zeros(P, dtype=np.int64)
    for p in range(P):
        for m in auto.follow_neg[p]:
            negmask[p] |= m
    cp.pos_negmask = negmask
    cp.neg_var = np.array([vidx[v] for v in auto.negations], dtype=np.int64)
    assert all(q in (ACCEPT, ACCEPT_END) or q >= 0 for q in to)
