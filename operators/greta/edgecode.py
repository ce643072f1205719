"""Edge predicates that no index can answer, run per (previous, next) pair inside Numba.

An edge predicate relates the previous event ``p`` of a trend (columns written ``E.attr``) to the
next event ``e`` (``NEXT(F).attr``). When it is not a single comparison between an expression of
``p`` and an expression of ``e`` (which an index answers), the GRETA kernel scans the candidate
predecessors and evaluates the predicate per pair, in compiled code.

The predicate is lowered into the shared typed form (:mod:`replaydb.operators.exprcode`), so its
semantics are every other evaluator's: the NumPy evaluator's two-valued logic (a comparison with
NULL is false, ``NOT`` of it true, ``!=`` with NULL false), true division (``/ 0`` gives inf or
NaN), ``%`` as floor modulo (``% 0`` is NULL), NaN propagating through LEAST/GREATEST. The machine is float-domain: the kernel holds the columns as
float64 (integers exact up to 2**53, NULL as NaN). Supported: numeric literals and NULL, numeric
columns, ``+ - * / %``, unary minus, comparisons, ``AND OR NOT``, ``BETWEEN``, ``IN``,
``IS [NOT] NULL`` and the row-wise functions of the typed form (ABS, LEAST, GREATEST, SQRT, ...).
Anything else raises :class:`ExprError` at bind time.

A program ships as two arrays (:meth:`EdgeProgram.arrays`, the packed encoding of
:meth:`~replaydb.operators.exprcode.program.Program.packed`): ``LDF`` with source 0 reads column
``a`` of the previous event, with source 1 of the next event.

Complexity: O(program length) per evaluated pair.
"""

from __future__ import annotations

from collections.abc import Callable

import numba as nb
import numpy as np

from replaydb.operators.expr import Call, Column, Expr, ExprError
from replaydb.operators.exprcode import opcodes as oc
from replaydb.operators.exprcode.machine import borrowed, exec_op
from replaydb.operators.exprcode.program import PACK_A_SHIFT, PACK_OP_BITS, lower
from replaydb.operators.exprcode.typed import Typed, type_condition

MAX_STACK = 32
"""Entries of each of the two stacks of an edge program."""
STACK_SLOTS = 2 * MAX_STACK
"""float64 entries of the scratch array :func:`eval_edge` takes (both stacks)."""

_OP_MASK = (1 << PACK_OP_BITS) - 1


class _EdgeScope:
    """GRETA's side of the typed form: ``E.attr`` and ``NEXT(F).attr`` columns as float64."""

    float_domain = True
    ordered_strings = False
    boolean_conditions = False

    def __init__(self, columns: list[str], kind: Callable[[str], str]) -> None:
        self.columns = columns
        self.kind = kind

    def leaf(self, e: Expr) -> Typed:
        if not isinstance(e, Column):
            raise self.error(f"{type(e).__name__} is not supported in edge predicates that are "
                             "not a single comparison", e)
        if e.name not in self.columns:
            self.columns.append(e.name)
        is_next = e.index is not None and e.index[0] == "next"
        return Typed(oc.LDF, self.kind(e.name), "F", a=self.columns.index(e.name),
                     b=1 if is_next else 0)

    def string(self, value: str, e: Expr) -> Typed:
        raise self.error("only numeric literals are supported in this edge predicate", e)

    def call(self, e: Call) -> Typed:
        raise self.error(f"{e.name} is not supported in edge predicates that are not a single "
                         "comparison", e)

    def error(self, message: str, e: Expr) -> Exception:
        return ExprError(message, getattr(e, "pos", None))


class EdgeProgram:
    """A compiled edge predicate and the columns it reads.

    ``columns`` is shared by a graph's programs (column index -> name, extended while
    compiling); ``kind(name)`` gives a column's kind in the typed form (``i`` for integers, ``f``
    otherwise; the default).
    """

    def __init__(self, expr: Expr, columns: list[str],
                 kind: Callable[[str], str] | None = None) -> None:
        self.columns = columns
        self.program = lower(type_condition(expr, _EdgeScope(columns, kind or (lambda _: "f"))))
        self.max_depth = max(self.program.depth_i, self.program.depth_f)
        if self.max_depth > MAX_STACK:
            raise ExprError(f"edge predicate too deep ({self.max_depth} > {MAX_STACK} operands)",
                            getattr(expr, "pos", None))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(code, arg)``: the packed program (see module docstring)."""
        return self.program.packed()


@nb.njit(cache=True, error_model="numpy")
def eval_edge(code, arg, start, length, prev, prow, nxt, nrow, stack) -> bool:
    """Evaluate the program ``code[start:start+length]`` for one (previous, next) pair.

    ``prev[prow]`` and ``nxt[nrow]`` are the two events' columns; ``stack`` is a float64 scratch
    of :data:`STACK_SLOTS` entries (its second half holds the int stack)."""
    h = stack.shape[0] // 2
    sf = borrowed(stack[:h])
    si = borrowed(stack[h:2 * h].view(np.int64))
    pi = 0
    pf = 0
    for k in range(start, start + length):
        w = code[k]
        o = w & _OP_MASK
        a = w >> PACK_A_SHIFT
        if o == oc.LDF:
            sf[pf] = prev[prow, a] if (w >> PACK_OP_BITS) & _OP_MASK == 0 else nxt[nrow, a]
            pf += 1
        else:
            pi, pf = exec_op(o, a, arg[k], np.int64(arg[k]) if o == oc.CI else 0, si, sf, pi,
                             pf, 1)
    return pi == 0 or si[pi - 1] != 0
