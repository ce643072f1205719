"""Code generation for the pattern matchers' cross-event conditions: state slots and programs.

:class:`StateCodegen` allocates the computation state (SASE+'s vector V: the int slots of
:mod:`replaydb.operators.pattern.ctxops` and the float slots of running counts and aggregates)
that the lowered conditions (:mod:`replaydb.operators.pattern.lowering`) read, and emits their
programs for the pattern machine (:mod:`replaydb.operators.pattern.vm`) into a
:class:`~replaydb.operators.pattern.compile.CompiledPattern`. Only what some condition reads is
kept. Complexity: linear in the size of the conditions (plus the slots they ask for).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from replaydb.errors import QueryError
from replaydb.operators.expr import Call, Column, Expr
from replaydb.operators.exprcode import opcodes as oc
from replaydb.operators.exprcode.program import Builder
from replaydb.operators.exprcode.scalar import AGG_AVG, AGG_COUNT, AGG_MAX, AGG_MIN, AGG_SUM
from replaydb.operators.exprcode.typed import Typed, type_condition
from replaydb.operators.pattern.ctxops import (
    CI_AFTER,
    CI_FIRST,
    CI_FIRST_VAR,
    CI_FOLLOW,
    CI_KTH,
    CI_KTH_VAR,
    CI_LAST,
    CI_LAST_VAR,
    CI_NTH_VAR,
    CI_SHIFT,
    CI_SNAP,
)
from replaydb.operators.pattern.lowering import (
    Agg,
    Bound,
    BoundVar,
    Cur,
    LowerContext,
    MatchNumber,
    MovedVar,
    Rows,
)

if TYPE_CHECKING:
    from replaydb.operators.pattern.compile import CompiledPattern

CF_ROWS = 0
CF_AGG = 1  # a block of 4 slots: nn, sum, min, max
MATCHNO_VAR = -2
"""The variable of the float slot holding MATCH_NUMBER(): none, so binding never updates it (the
matcher sets it when an attempt starts)."""
SUBSET_CODE = -3
"""Union variables' codes are ``SUBSET_CODE - mask`` (below every other code)."""

_AGG_FN = {"SUM": AGG_SUM, "AVG": AGG_AVG, "MIN": AGG_MIN, "MAX": AGG_MAX, "COUNT": AGG_COUNT}



def _at(msg: str, pos: int | None) -> str:
    return msg if pos is None else f"{msg} (at position {pos})"


def _holds_events(kind: int) -> bool:
    """Whether slots of ``kind`` hold an event's global index (a ``CI_SHIFT`` slot holds what the
    slot before it holds)."""
    return kind in (CI_LAST, CI_FIRST) or CI_KTH <= kind < CI_KTH_VAR


class StateCodegen:
    """Allocate state slots and emit VM code for every variable's cross-event condition."""

    def __init__(self, cp: CompiledPattern, lctx: LowerContext) -> None:
        self.cp = cp
        self.lctx = lctx
        self.vidx = {v: i for i, v in enumerate(cp.var_names)}
        self.ci: dict[tuple[int, int], int] = {}       # (kind, var) -> slot
        self.ci_slots: list[tuple[int, int]] = []       # slot -> (kind, var)
        self.chains: dict[tuple[int, int], tuple[int, int]] = {}  # (kind, var) -> (slot, len)
        self.cf_rows: dict[int, int] = {}               # var -> slot
        self.cf_agg: dict[tuple[int, int], int] = {}    # (var, bufcol) -> first of 4 slots
        self.cf_kind: list[int] = []
        self.cf_var: list[int] = []
        self.cf_col: list[int] = []
        self.init_f: list[float] = []
        self.bufcol: dict[tuple[str, int], int] = {}

    # ---------------------------------------------------------------- slots and columns
    def col(self, name: str, nav: int) -> int:
        key = (name, nav)
        if key not in self.bufcol:
            self.bufcol[key] = len(self.bufcol)
            self.cp.buf_cols.append(key)
            self.cp.buf_is_string.append(self.is_string(name))
        return self.bufcol[key]

    def is_string(self, name: str) -> bool:
        return self.lctx.kind(name) == "s"

    def var(self, v: str | None) -> int:
        """A variable's code in the state layout: its index, -1 for every row, and for a union
        variable ``SUBSET_CODE - mask`` (``mask``: a bit per primary variable, see
        :func:`replaydb.operators.pattern.ctxops.bind_update`)."""
        if v is None:
            return -1
        members = self.cp.spec.subset_members().get(v)
        if members is None:
            return self.vidx[v]
        return SUBSET_CODE - sum(1 << self.vidx[m] for m in set(members))

    def islot(self, kind: int, var: int) -> int:
        key = (kind, var)
        if key not in self.ci:
            self.ci[key] = len(self.ci_slots)
            self.ci_slots.append(key)
        return self.ci[key]

    def chain_slot(self, kind: int, var: int, k: int) -> int:
        """The slot of the ``k``-th first (``kind`` ``CI_FIRST`` / ``CI_FIRST_VAR``: one counting
        ``CI_KTH`` slot for ``k > 0``) or ``k``-th before the last (``CI_LAST``, ``CI_LAST_VAR``)
        event bound to ``var``: the ``k``-th of a chain of consecutive slots (see
        :mod:`replaydb.operators.pattern.ctxops`); a longer chain replaces a shorter one for
        later requests (slots already handed out keep working)."""
        if k == 0:
            return self.islot(kind, var)
        if kind in (CI_FIRST, CI_FIRST_VAR):
            return self.islot((CI_KTH if kind == CI_FIRST else CI_KTH_VAR) + k, var)
        start, length = self.chains.get((kind, var), (-1, 0))
        if k >= length:
            start = len(self.ci_slots)
            self.ci_slots += [(kind, var)] + [(CI_SHIFT, var)] * k
            self.chains[(kind, var)] = (start, k + 1)
        return start + k

    def first_pred(self, kind: int, var: int, k: int) -> int:
        """``ic`` of a read of the ``k``-th first event that needs the ``k - 1``-th bound (the
        current event is the ``k``-th): that slot plus one, 0 for ``k == 0``."""
        return self.chain_slot(kind, var, k - 1) + 1 if k else 0

    def fresh(self, slots: list[tuple[int, int]]) -> int:
        """Append ``slots`` ((kind, var) pairs, read by nothing else) and return the first's
        index."""
        start = len(self.ci_slots)
        self.ci_slots += slots
        return start

    def fresh_first(self, var: int, k: int) -> int:
        """A new slot holding ``var``'s ``k``-th bound event (read by nothing else)."""
        return self.fresh([(CI_FIRST if k == 0 else CI_KTH + k, var)])

    def rows_slot(self, var: int) -> int:
        if var not in self.cf_rows:
            self.cf_rows[var] = len(self.cf_kind)
            self.cf_kind.append(CF_ROWS)
            self.cf_var.append(var)
            self.cf_col.append(-1)
            self.init_f.append(0.0)
        return self.cf_rows[var]

    def matchno_slot(self) -> int:
        if self.cp.matchno_slot < 0:
            self.cp.matchno_slot = len(self.cf_kind)
            self.cf_kind.append(CF_ROWS)
            self.cf_var.append(MATCHNO_VAR)
            self.cf_col.append(-1)
            self.init_f.append(0.0)
        return self.cp.matchno_slot

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
    def build(self, cross: list[Expr | None]) -> None:
        cp = self.cp
        code = Builder()
        scope = _PatternScope(self)
        lo: list[int] = []
        hi: list[int] = []
        for e in cross:
            start = end = len(code)
            if e is not None:
                start, end = code.add(type_condition(e, scope))
            lo.append(start)
            hi.append(end)
        prog = code.build()
        cp.prog_lo = np.array(lo, dtype=np.int64)
        cp.prog_hi = np.array(hi, dtype=np.int64)
        cp.p_op, cp.p_ia, cp.p_ib, cp.p_fc, cp.p_ic = prog.op, prog.a, prog.b, prog.fc, prog.ic
        cp.depth_i, cp.depth_f = max(1, prog.depth_i), max(1, prog.depth_f)
        cp.ci_kind = np.array([k for k, _ in self.ci_slots], dtype=np.int64)
        cp.ci_var = np.array([v for _, v in self.ci_slots], dtype=np.int64)
        events: list[bool] = []
        for kind, _ in self.ci_slots:  # a shift slot holds what the slot before it holds
            events.append(_holds_events(kind) or (kind == CI_SHIFT and events[-1]))
        cp.ci_events = np.array(events, dtype=np.bool_)
        cp.cf_kind = np.array(self.cf_kind, dtype=np.int64)
        cp.cf_var = np.array(self.cf_var, dtype=np.int64)
        cp.cf_col = np.array(self.cf_col, dtype=np.int64)
        cp.init_f = np.array(self.init_f, dtype=np.float64)

    def kind(self, name: str) -> str:
        """The column's kind in the typed form (its values are float64 in the buffer)."""
        return self.lctx.kind(name)


class _PatternScope:
    """The pattern machine's side of the typed form (:class:`~replaydb.operators.exprcode.typed.
    Scope`): float-domain loads of the lowered leaves; strings compare for equality only (their
    codes are in first-seen order)."""

    float_domain = True
    ordered_strings = False
    boolean_conditions = True

    def __init__(self, gen: StateCodegen) -> None:
        self.gen = gen

    def leaf(self, e: Expr) -> Typed:
        g = self.gen
        if isinstance(e, Cur):
            return Typed(oc.LDF, g.kind(e.col), "F", a=g.col(e.col, e.nav))
        if isinstance(e, Bound):
            kind = CI_FIRST if e.kind in ("first", "firstcur") else CI_LAST
            slot = g.chain_slot(kind, g.var(e.var), e.k)
            if e.kind == "firstcur":  # the current event once the k events before it are bound
                return Typed(oc.LDFIRSTCUR, g.kind(e.col), "F", a=slot, b=g.col(e.col, e.nav),
                             ic=g.first_pred(kind, g.var(e.var), e.k))
            return Typed(oc.LDBOUND, g.kind(e.col), "F", a=slot, b=g.col(e.col, e.nav))
        if isinstance(e, BoundVar):
            return self.bound_var(e)
        if isinstance(e, MovedVar):
            return self.moved_var(e)
        if isinstance(e, Agg):
            if g.is_string(e.col):
                raise self.error(f"{e.fn} over the string column {e.col!r}", e)
            bcol = g.col(e.col, 0)
            slot = g.agg_slot(g.var(e.var), bcol)
            kind = "f" if e.fn == "AVG" else ("i" if e.fn == "COUNT" else g.kind(e.col))
            return Typed(oc.LDAGG, kind, "F", a=slot, b=_AGG_FN[e.fn] * 2 + int(e.include_current),
                         ic=bcol)
        if isinstance(e, Rows):
            return Typed(oc.LDROWS, "i", "F", a=g.rows_slot(g.var(e.var)), b=int(e.include_current))
        if isinstance(e, MatchNumber):
            if not g.cp.sql:
                raise QueryError(_at("MATCH_NUMBER() exists only in MATCH_RECOGNIZE", e.pos))
            return Typed(oc.LDROWS, "i", "F", a=g.matchno_slot(), b=0)
        if isinstance(e, Column):  # pragma: no cover - lowered away
            raise QueryError(f"unresolved column {e.name!r}")
        raise QueryError(f"unsupported expression in a condition: {type(e).__name__}")

    def bound_var(self, e: BoundVar) -> Typed:
        """``CLASSIFIER()`` of a row (:class:`~replaydb.operators.pattern.lowering.BoundVar`):
        ``LDSLOT`` of a variable slot - a variable's index is its name's string code."""
        g = self.gen
        if e.kind == "none":
            return Typed(oc.CF, "s", "F", fc=math.nan)
        kind = CI_FIRST_VAR if e.kind in ("first", "firstcur") else CI_LAST_VAR
        var = g.var(e.var)
        need = -1 if e.need < 0 else g.chain_slot(kind, var, e.need)  # the longer chain first
        if e.kind == "current":
            return Typed(oc.LDSLOT, "s", "F", a=-1, b=g.vidx[e.cur], ic=need + 1)
        slot = g.chain_slot(kind, var, e.k)
        if e.kind == "firstcur":  # the current row once the k rows before it are bound
            return Typed(oc.LDSLOT, "s", "F", a=slot, b=g.vidx[e.cur],
                         ic=g.first_pred(kind, var, e.k))
        return Typed(oc.LDSLOT, "s", "F", a=slot, b=-1, ic=need + 1)

    def moved_var(self, e: MovedVar) -> Typed:
        """``PREV``/``NEXT`` of ``CLASSIFIER(v)`` (:class:`~replaydb.operators.pattern.lowering.
        MovedVar`): the rows of a running match are consecutive, so the variable of the row ``n``
        before or after one of ``v``'s rows is kept in slots updated as rows are bound
        (:mod:`~replaydb.operators.pattern.ctxops`), and read by ``LDSLOT`` - NULL unless the
        row exists and is bound, the current row's variable where the move lands on it.

        * ``PREV`` from the ``k``-th last row: a chain of snapshots, taken at each of ``v``'s
          rows, of every row's ``n - 1``-th last variable (the row ``n`` before it).
        * ``PREV`` from the ``k``-th first row: every row's ``n - 1``-th last variable after each
          bind, frozen once the ``k``-th first row is bound - the row ``n`` before the current
          one until then, which is what a move from the current row needs.
        * ``NEXT`` from the ``k``-th first row: the variables of the ``n`` rows after it.
        * ``NEXT`` from the ``k``-th last row: for each of ``v``'s last ``k + 1`` rows, the
          variables of the ``n`` rows after it (``CI_AFTER`` chains).
        """
        g = self.gen
        var, n, k = g.var(e.var), abs(e.nav), e.k
        if e.nav > 0 and e.sel == "last":
            src = g.chain_slot(CI_LAST_VAR, -1, n - 1)
            start = len(g.ci_slots)
            g.fresh([(CI_SNAP + start - src, var)] + [(CI_SHIFT, var)] * k)
            return Typed(oc.LDSLOT, "s", "F", a=start + k, b=-1, ic=0)
        if e.nav > 0:
            z = len(g.ci_slots)
            g.fresh([(CI_FOLLOW + ((n + 1) << 20) + n, -1)])
            g.fresh([(CI_LAST_VAR, -1)] + [(CI_SHIFT, -1)] * (n - 1))
            nth = g.fresh_first(var, k)  # the k-th first row, once bound: the gate
            need = g.first_pred(CI_FIRST, var, k) if e.own else nth + 1
            return Typed(oc.LDSLOT, "s", "F", a=z, b=-1, ic=need)
        cur = g.vidx[e.cur]
        if e.sel == "first":  # the rows after the k-th first row, once it is bound
            g.fresh_first(var, k)
            last = g.fresh([(CI_NTH_VAR, -1)] * n) + n - 1
            return Typed(oc.LDSLOT, "s", "F", a=last, b=cur, ic=last)
        stride = n + 1
        chains = []
        for j in range(k + 1):
            flag = CI_AFTER + (stride << 2) + int(j == 0)
            chains += [(flag + 2, var)] + [(flag, var)] * n
        start = g.fresh(chains)
        last = start + k * stride + n  # chain k's n-th row after
        return Typed(oc.LDSLOT, "s", "F", a=last, b=cur, ic=last)

    def string(self, value: str, e: Expr) -> Typed:
        return Typed(oc.CF, "s", "F", fc=self.gen.cp.strings.code(value))

    def call(self, e: Call) -> Typed:
        raise self.error(f"the function {e.name}", e)

    def error(self, message: str, e: Expr) -> Exception:
        return QueryError(_at(f"{message} (not supported in a condition that refers to other "
                              "events)", getattr(e, "pos", None)))
