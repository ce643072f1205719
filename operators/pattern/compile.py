"""Compile a :class:`~replaydb.operators.pattern.model.PatternSpec` against a stream schema.

The result, :class:`CompiledPattern`, is everything the matchers' compiled loops need, as flat
NumPy arrays:

* the position automaton (:mod:`replaydb.operators.pattern.automaton`) as CSR arrays;
* per variable, a *local* condition (the conjuncts that refer only to the current event,
  evaluated vectorized per batch into one boolean column per variable - event-type tests and
  ``PREV`` of the current row included) and a *cross-event* VM program (the other conjuncts, see
  :mod:`replaydb.operators.pattern.vm` and :mod:`replaydb.operators.pattern.lowering`);
* the layout of the computation state (SASE+'s vector V): int slots holding the index of the
  last/first event bound to a variable, float slots holding running row counts and
  (non-null count, sum, min, max) blocks per (variable, column). Only what some cross-event
  condition reads is kept, so runs that agree on it can be merged;
* the columns the VM reads (``buf_cols``: (column, rows back)), strings among them dictionary
  coded.

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
    Between,
    Binary,
    Call,
    Column,
    Expr,
    InList,
    IsNull,
    Literal,
    Unary,
    and_all,
    conjuncts,
)
from replaydb.operators.pattern import vm
from replaydb.operators.pattern.automaton import ACCEPT, Automaton, build_automaton
from replaydb.operators.pattern.lowering import (
    Agg,
    Bound,
    Cur,
    LowerContext,
    Rows,
    is_local,
    lower_condition,
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

STRAT_CONTIGUOUS = 0
STRAT_NEXT = 1
STRAT_ANY = 2

SKIP_PAST_LAST = 0
SKIP_NEXT_ROW = 1
SKIP_TO_FIRST = 2
SKIP_TO_LAST = 3

CI_LAST = 0
CI_FIRST = 1
CF_ROWS = 0
CF_AGG = 1  # a block of 4 slots: nn, sum, min, max

_AGG_FN = {"SUM": vm.AGG_SUM, "AVG": vm.AGG_AVG, "MIN": vm.AGG_MIN, "MAX": vm.AGG_MAX,
           "COUNT": vm.AGG_COUNT}


class StringCodes:
    """One dictionary string -> float code shared by every string column the VM reads."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}

    def code(self, s: str) -> float:
        c = self.codes.get(s)
        if c is None:
            c = len(self.codes)
            self.codes[s] = c
        return float(c)


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
    # computation state layout
    ci_kind: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    ci_var: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    cf_kind: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    cf_var: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    cf_col: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    init_f: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    skip_kind: int = SKIP_PAST_LAST
    skip_var: int = -1
    sql: bool = False
    unambiguous: bool = True

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
        raise QueryError(f"variable(s) {', '.join(sorted(dup))} defined twice")
    both = negs & {n.name for n in _positive_vars(spec)}
    if both:
        raise QueryError(f"variable(s) {', '.join(sorted(both))} used both negated and not")
    if spec.semantics == Semantics.SQL:
        if spec.strategy not in (Strategy.CONTIGUOUS, Strategy.PARTITION_CONTIGUITY):
            raise QueryError("SQL MATCH_RECOGNIZE semantics requires contiguous rows")
        if negs:
            raise QueryError("negation is not part of SQL MATCH_RECOGNIZE")
    if spec.strategy == Strategy.PARTITION_CONTIGUITY and not (spec.partition_by
                                                              or spec.equivalence):
        raise QueryError("partition contiguity needs partition keys ([attr] or PARTITION BY)")
    for k in (*spec.partition_by, *spec.equivalence):
        LowerContext(pvars, schema).resolve_column(k, None)
    if spec.window is not None and spec.window < 0:
        raise QueryError(f"window must be >= 0, got {spec.window}")
    if spec.after_match_skip.kind in (SkipKind.TO_FIRST, SkipKind.TO_LAST):
        v = spec.after_match_skip.var
        if v not in pvars:
            raise QueryError(f"AFTER MATCH SKIP names unknown variable {v!r}")


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
    auto = build_automaton(spec.pattern)
    auto._check()
    var_names = spec.variables()
    lctx = LowerContext(var_names, schema,
                        case_insensitive_vars=spec.semantics == Semantics.SQL)
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
        buf_cols=[], buf_is_string=[], strings=StringCodes(),
        sql=spec.semantics == Semantics.SQL, unambiguous=auto.unambiguous_labels(),
    )
    _fill_automaton(cp, auto, var_names)
    _Codegen(cp, schema).build(cross)
    if cp.sql:
        sk = spec.after_match_skip
        cp.skip_kind = {SkipKind.PAST_LAST_ROW: SKIP_PAST_LAST, SkipKind.TO_NEXT_ROW: SKIP_NEXT_ROW,
                        SkipKind.TO_FIRST: SKIP_TO_FIRST, SkipKind.TO_LAST: SKIP_TO_LAST}[sk.kind]
        if sk.var is not None:
            cp.skip_var = cp.var_index(lctx.resolve_var(sk.var, None))
    elif spec.rows_per_match not in (RowsPerMatch.ONE, RowsPerMatch.ALL):  # pragma: no cover
        raise QueryError("bad rows per match")
    return cp


def _fill_automaton(cp: CompiledPattern, auto: Automaton, var_names: list[str]) -> None:
    vidx = {v: i for i, v in enumerate(var_names)}
    P = auto.n_positions
    cp.pos_var = np.array([vidx[v] for v in auto.pos_var], dtype=np.int64)
    cp.start = np.array(auto.start, dtype=np.int64)
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
    assert all(q == ACCEPT or q >= 0 for q in to)


class _Codegen:
    """Allocate state slots and emit VM code for every variable's cross-event condition."""

    def __init__(self, cp: CompiledPattern, schema: pa.Schema) -> None:
        self.cp = cp
        self.schema = schema
        self.vidx = {v: i for i, v in enumerate(cp.var_names)}
        self.ci: dict[tuple[int, int], int] = {}       # (kind, var) -> slot
        self.cf_rows: dict[int, int] = {}               # var -> slot
        self.cf_agg: dict[tuple[int, int], int] = {}    # (var, bufcol) -> first of 4 slots
        self.cf_kind: list[int] = []
        self.cf_var: list[int] = []
        self.cf_col: list[int] = []
        self.init_f: list[float] = []
        self.bufcol: dict[tuple[str, int], int] = {}
        self.op: list[int] = []
        self.ia: list[int] = []
        self.ib: list[int] = []
        self.fc: list[float] = []

    # ---------------------------------------------------------------- slots and columns
    def col(self, name: str, nav: int) -> int:
        key = (name, nav)
        if key not in self.bufcol:
            self.bufcol[key] = len(self.bufcol)
            self.cp.buf_cols.append(key)
            self.cp.buf_is_string.append(self.is_string(name))
        return self.bufcol[key]

    def is_string(self, name: str) -> bool:
        t = self.schema.field(name).type
        return pa.types.is_string(t) or pa.types.is_large_string(t) or \
            (pa.types.is_dictionary(t) and (pa.types.is_string(t.value_type)
                                            or pa.types.is_large_string(t.value_type)))

    def var(self, v: str | None) -> int:
        return -1 if v is None else self.vidx[v]

    def islot(self, kind: int, var: int) -> int:
        key = (kind, var)
        if key not in self.ci:
            self.ci[key] = len(self.ci)
        return self.ci[key]

    def rows_slot(self, var: int) -> int:
        if var not in self.cf_rows:
            self.cf_rows[var] = len(self.cf_kind)
            self.cf_kind.append(CF_ROWS)
            self.cf_var.append(var)
            self.cf_col.append(-1)
            self.init_f.append(0.0)
        return self.cf_rows[var]

    def agg_slot(self, var: int, bcol: int) -> int:
        key = (var, bcol)
        if key not in self.cf_agg:
            self.cf_agg[key] = len(self.cf_kind)
            for j, init in enumerate((0.0, 0.0, np.inf, -np.inf)):
                self.cf_kind.append(CF_AGG + j)
                self.cf_var.append(var)
                self.cf_col.append(bcol)
                self.init_f.append(init)
        return self.cf_agg[key]

    # ---------------------------------------------------------------- code
    def emit(self, op: int, ia: int = 0, ib: int = 0, fc: float = 0.0) -> None:
        self.op.append(op)
        self.ia.append(ia)
        self.ib.append(ib)
        self.fc.append(fc)

    def build(self, cross: list[Expr | None]) -> None:
        cp = self.cp
        lo: list[int] = []
        hi: list[int] = []
        for e in cross:
            lo.append(len(self.op))
            if e is not None:
                kind = self.gen(e)
                if kind == "str":
                    raise QueryError("a condition must be true or false, not a string")
                self.emit(vm.OP_TRUTH)
            hi.append(len(self.op))
        cp.prog_lo = np.array(lo, dtype=np.int64)
        cp.prog_hi = np.array(hi, dtype=np.int64)
        cp.p_op = np.array(self.op, dtype=np.int64)
        cp.p_ia = np.array(self.ia, dtype=np.int64)
        cp.p_ib = np.array(self.ib, dtype=np.int64)
        cp.p_fc = np.array(self.fc, dtype=np.float64)
        ci_items = sorted(self.ci.items(), key=lambda kv: kv[1])
        cp.ci_kind = np.array([k[0] for k, _ in ci_items], dtype=np.int64)
        cp.ci_var = np.array([k[1] for k, _ in ci_items], dtype=np.int64)
        cp.cf_kind = np.array(self.cf_kind, dtype=np.int64)
        cp.cf_var = np.array(self.cf_var, dtype=np.int64)
        cp.cf_col = np.array(self.cf_col, dtype=np.int64)
        cp.init_f = np.array(self.init_f, dtype=np.float64)

    def gen(self, e: Expr) -> str:  # noqa: C901 - one case per node type
        """Emit code for ``e``; returns its kind: 'num' | 'str' | 'bool'."""
        if isinstance(e, Literal):
            v = e.value
            if isinstance(v, str):
                self.emit(vm.OP_CONST, fc=self.cp.strings.code(v))
                return "str"
            if v is None:
                self.emit(vm.OP_CONST, fc=np.nan)
                return "num"
            if isinstance(v, bool):
                self.emit(vm.OP_CONST, fc=1.0 if v else 0.0)
                return "bool"
            self.emit(vm.OP_CONST, fc=float(v))
            return "num"
        if isinstance(e, Cur):
            self.emit(vm.OP_CUR, ia=self.col(e.col, e.nav))
            return "str" if self.is_string(e.col) else "num"
        if isinstance(e, Bound):
            kind = CI_FIRST if e.kind in ("first", "firstcur") else CI_LAST
            slot = self.islot(kind, self.var(e.var))
            self.emit(vm.OP_FIRSTCUR if e.kind == "firstcur" else vm.OP_BOUND, ia=slot,
                      ib=self.col(e.col, e.nav))
            return "str" if self.is_string(e.col) else "num"
        if isinstance(e, Agg):
            if self.is_string(e.col):
                raise QueryError(f"{e.fn} over the string column {e.col!r} is not supported")
            bcol = self.col(e.col, 0)
            slot = self.agg_slot(self.var(e.var), bcol)
            self.emit(vm.OP_AGG, ia=slot, ib=_AGG_FN[e.fn] * 2 + int(e.include_current),
                      fc=float(bcol))
            return "num"
        if isinstance(e, Rows):
            self.emit(vm.OP_ROWS, ia=self.rows_slot(self.var(e.var)), ib=int(e.include_current))
            return "num"
        if isinstance(e, Unary):
            k = self.gen(e.operand)
            if e.op == "not":
                self.emit(vm.OP_NOT)
                return "bool"
            self._num(k, e)
            self.emit(vm.OP_NEG)
            return "num"
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Between):
            # x >= lo AND x <= hi (NOT BETWEEN: NOT(...) AND x IS NOT NULL)
            self._cmp_pair(e.operand, e.low, vm.OP_GE, e)
            self._cmp_pair(e.operand, e.high, vm.OP_LE, e)
            self.emit(vm.OP_AND)
            if e.negated:
                self.emit(vm.OP_NOT)
                self.gen(e.operand)
                self.emit(vm.OP_NOTNULL)
                self.emit(vm.OP_AND)
            return "bool"
        if isinstance(e, InList):
            for i, v in enumerate(e.values):
                self._cmp_pair(e.operand, v, vm.OP_EQ, e)
                if i:
                    self.emit(vm.OP_OR)
            if e.negated:
                self.emit(vm.OP_NOT)
                self.gen(e.operand)
                self.emit(vm.OP_NOTNULL)
                self.emit(vm.OP_AND)
            return "bool"
        if isinstance(e, IsNull):
            self.gen(e.operand)
            self.emit(vm.OP_NOTNULL if e.negated else vm.OP_ISNULL)
            return "bool"
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Column):  # pragma: no cover - lowered away
            raise QueryError(f"unresolved column {e.name!r}")
        raise QueryError(f"unsupported expression in a condition: {type(e).__name__}")

    def _num(self, kind: str, e: Expr) -> None:
        if kind == "str":
            raise QueryError(_at("arithmetic on strings is not supported in a condition that "
                                 "refers to other events", getattr(e, "pos", None)))

    def _cmp_pair(self, a: Expr, b: Expr, op: int, e: Expr) -> None:
        ka = self.gen(a)
        kb = self.gen(b)
        if "str" in (ka, kb) and (ka != kb or op not in (vm.OP_EQ, vm.OP_NE)):
            raise QueryError(_at("only = and != compare strings in a condition that refers to "
                                 "other events", getattr(e, "pos", None)))
        self.emit(op)

    def binary(self, e: Binary) -> str:
        if e.op in ("and", "or"):
            self.gen(e.left)
            self.gen(e.right)
            self.emit(vm.OP_AND if e.op == "and" else vm.OP_OR)
            return "bool"
        cmp = {"=": vm.OP_EQ, "!=": vm.OP_NE, "<": vm.OP_LT, "<=": vm.OP_LE, ">": vm.OP_GT,
               ">=": vm.OP_GE}
        if e.op in cmp:
            self._cmp_pair(e.left, e.right, cmp[e.op], e)
            return "bool"
        arith = {"+": vm.OP_ADD, "-": vm.OP_SUB, "*": vm.OP_MUL, "/": vm.OP_DIV, "%": vm.OP_MOD}
        if e.op not in arith:
            raise QueryError(_at(f"unknown operator {e.op!r}", e.pos))
        self._num(self.gen(e.left), e)
        self._num(self.gen(e.right), e)
        self.emit(arith[e.op])
        return "num"

    def call(self, e: Call) -> str:
        unary = {"ABS": vm.OP_ABS, "SQRT": vm.OP_SQRT, "FLOOR": vm.OP_FLOOR, "CEIL": vm.OP_CEIL,
                 "EXP": vm.OP_EXP, "LN": vm.OP_LN, "LOG10": vm.OP_LOG10}
        if e.name in unary:
            if len(e.args) != 1:
                raise QueryError(_at(f"{e.name} takes one argument", e.pos))
            self._num(self.gen(e.args[0]), e)
            self.emit(unary[e.name])
            return "num"
        if e.name == "POWER":
            if len(e.args) != 2:
                raise QueryError(_at("POWER takes two arguments", e.pos))
            for a in e.args:
                self._num(self.gen(a), e)
            self.emit(vm.OP_POW)
            return "num"
        if e.name in ("LEAST", "GREATEST"):
            if not e.args:
                raise QueryError(_at(f"{e.name} needs arguments", e.pos))
            for i, a in enumerate(e.args):
                self._num(self.gen(a), e)
                if i:
                    self.emit(vm.OP_MIN2 if e.name == "LEAST" else vm.OP_MAX2)
            return "num"
        if e.name == "ROUND":
            if len(e.args) not in (1, 2):
                raise QueryError(_at("ROUND takes 1 or 2 arguments", e.pos))
            nd = 0
            if len(e.args) == 2:
                a1 = e.args[1]
                if not (isinstance(a1, Literal) and isinstance(a1.value, int)):
                    raise QueryError(_at("ROUND's digits must be an integer literal", e.pos))
                nd = int(a1.value)
            self._num(self.gen(e.args[0]), e)
            self.emit(vm.OP_ROUND, ia=nd)
            return "num"
        raise QueryError(_at(f"function {e.name} is not supported in a condition that refers to "
                             "other events", e.pos))
