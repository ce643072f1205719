"""Edge predicates that no index can answer, compiled to a tiny stack program run inside Numba.

An edge predicate relates the previous event ``p`` of a trend (columns written ``E.attr``) to the
next event ``e`` (``NEXT(F).attr``). When it is not a single comparison between an expression of
``p`` and an expression of ``e`` (which an index answers), the GRETA kernel scans the candidate
predecessors and evaluates this program per pair, in compiled code.

Values are float64 (booleans are 1.0/0.0, nulls NaN); comparisons involving NaN are false, ``NOT``
of a false comparison is true, ``!=`` with a NaN operand is false, ``/`` by zero gives inf/NaN, and
``%`` is floor modulo on integral operands and ``fmod`` otherwise - the same two-valued logic as
:mod:`replaydb.operators.expr`. Supported: literals (numbers, booleans, NULL), columns of numeric or
boolean type, ``+ - * / %``, unary minus, comparisons, ``AND OR NOT``, ``BETWEEN``, ``IN``,
``IS [NOT] NULL``, ``ABS``, ``LEAST``, ``GREATEST``. Anything else raises :class:`ExprError` at bind
time.

Complexity: O(program length) per evaluated pair.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from replaydb.operators.expr import (
    Between,
    Binary,
    Call,
    Column,
    Expr,
    ExprError,
    InList,
    IsNull,
    Literal,
    Unary,
)

OP_PREV, OP_NEXT, OP_CONST = 1, 2, 3
OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_NEG, OP_ABS, OP_MIN2, OP_MAX2 = 10, 11, 12, 13, 14, 15, 16, 17, 18
OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE = 20, 21, 22, 23, 24, 25
OP_AND, OP_OR, OP_NOT, OP_ISNULL = 30, 31, 32, 33

MAX_STACK = 64

_BIN = {"+": OP_ADD, "-": OP_SUB, "*": OP_MUL, "/": OP_DIV, "%": OP_MOD, "=": OP_EQ,
        "!=": OP_NE, "<": OP_LT, "<=": OP_LE, ">": OP_GT, ">=": OP_GE, "and": OP_AND,
        "or": OP_OR}


class EdgeProgram:
    """A compiled edge predicate: ``code``/``arg`` arrays and the columns it reads."""

    def __init__(self, expr: Expr, columns: list[str]) -> None:
        self.columns = columns  # shared list: column index -> name (extended while compiling)
        self.code: list[int] = []
        self.arg: list[float] = []
        self._depth = 0
        self.max_depth = 0
        self._emit_expr(expr)
        if self.max_depth > MAX_STACK:
            raise ExprError(f"edge predicate too deep ({self.max_depth} > {MAX_STACK} operands)",
                            getattr(expr, "pos", None))

    def _push(self, op: int, arg: float = 0.0, delta: int = 1) -> None:
        self.code.append(op)
        self.arg.append(arg)
        self._depth += delta
        self.max_depth = max(self.max_depth, self._depth)

    def _col(self, name: str) -> int:
        if name not in self.columns:
            self.columns.append(name)
        return self.columns.index(name)

    def _emit_expr(self, e: Expr) -> None:
        if isinstance(e, Literal):
            v = e.value
            if v is None:
                self._push(OP_CONST, math.nan)
            elif isinstance(v, bool | int | float):
                self._push(OP_CONST, float(v))
            else:
                raise ExprError("only numeric literals are supported in this edge predicate", e.pos)
        elif isinstance(e, Column):
            is_next = e.index is not None and e.index[0] == "next"
            self._push(OP_NEXT if is_next else OP_PREV, float(self._col(e.name)))
        elif isinstance(e, Unary):
            self._emit_expr(e.operand)
            self._push(OP_NOT if e.op == "not" else OP_NEG, 0.0, 0)
        elif isinstance(e, Binary):
            op = _BIN.get(e.op)
            if op is None:
                raise ExprError(f"operator {e.op!r} is not supported in edge predicates", e.pos)
            self._emit_expr(e.left)
            self._emit_expr(e.right)
            self._push(op, 0.0, -1)
        elif isinstance(e, Between):
            # (x >= lo AND x <= hi), negated: NOT(...) AND NOT isnull(x)
            self._emit_expr(e.operand)
            self._emit_expr(e.low)
            self._push(OP_GE, 0.0, -1)
            self._emit_expr(e.operand)
            self._emit_expr(e.high)
            self._push(OP_LE, 0.0, -1)
            self._push(OP_AND, 0.0, -1)
            if e.negated:
                self._negate_not_null(e.operand)
        elif isinstance(e, InList):
            for k, v in enumerate(e.values):
                self._emit_expr(e.operand)
                self._emit_expr(v)
                self._push(OP_EQ, 0.0, -1)
                if k:
                    self._push(OP_OR, 0.0, -1)
            if e.negated:
                self._negate_not_null(e.operand)
        elif isinstance(e, IsNull):
            self._emit_expr(e.operand)
            self._push(OP_ISNULL, 0.0, 0)
            if e.negated:
                self._push(OP_NOT, 0.0, 0)
        elif isinstance(e, Call) and e.qualifier is None and e.name in ("ABS", "LEAST", "GREATEST"):
            if e.name == "ABS":
                if len(e.args) != 1:
                    raise ExprError("ABS takes one argument", e.pos)
                self._emit_expr(e.args[0])
                self._push(OP_ABS, 0.0, 0)
            else:
                if not e.args:
                    raise ExprError(f"{e.name} needs arguments", e.pos)
                self._emit_expr(e.args[0])
                for a in e.args[1:]:
                    self._emit_expr(a)
                    self._push(OP_MIN2 if e.name == "LEAST" else OP_MAX2, 0.0, -1)
        else:
            raise ExprError(f"{type(e).__name__} is not supported in edge predicates that are "
                            "not a single comparison", getattr(e, "pos", None))

    def _negate_not_null(self, operand: Expr) -> None:
        self._push(OP_NOT, 0.0, 0)
        self._emit_expr(operand)
        self._push(OP_ISNULL, 0.0, 0)
        self._push(OP_NOT, 0.0, 0)
        self._push(OP_AND, 0.0, -1)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.code, np.int64), np.asarray(self.arg, np.float64)


@nb.njit(cache=True, error_model="numpy")
def _truthy(v: float) -> bool:
    return v == v and v != 0.0


@nb.njit(cache=True, error_model="numpy")
def eval_edge(code, arg, start, length, prev, prow, nxt, nrow, stack) -> bool:
    """Evaluate the program ``code[start:start+length]`` for one (previous, next) pair."""
    sp = 0
    for k in range(start, start + length):
        op = code[k]
        if op == OP_PREV:
            stack[sp] = prev[prow, int(arg[k])]
            sp += 1
        elif op == OP_NEXT:
            stack[sp] = nxt[nrow, int(arg[k])]
            sp += 1
        elif op == OP_CONST:
            stack[sp] = arg[k]
            sp += 1
        elif op == OP_NEG:
            stack[sp - 1] = -stack[sp - 1]
        elif op == OP_ABS:
            stack[sp - 1] = abs(stack[sp - 1])
        elif op == OP_NOT:
            stack[sp - 1] = 0.0 if _truthy(stack[sp - 1]) else 1.0
        elif op == OP_ISNULL:
            v = stack[sp - 1]
            stack[sp - 1] = 1.0 if v != v else 0.0
        else:
            b = stack[sp - 1]
            a = stack[sp - 2]
            sp -= 1
            r = 0.0
            if op == OP_ADD:
                r = a + b
            elif op == OP_SUB:
                r = a - b
            elif op == OP_MUL:
                r = a * b
            elif op == OP_DIV:
                r = a / b
            elif op == OP_MOD:
                if a == np.floor(a) and b == np.floor(b) and b != 0.0:
                    r = a - np.floor(a / b) * b
                elif b == 0.0:
                    r = np.nan
                else:
                    r = np.fmod(a, b)
            elif op == OP_MIN2:
                r = a if a < b else b
            elif op == OP_MAX2:
                r = a if a > b else b
            elif op == OP_EQ:
                r = 1.0 if a == b else 0.0
            elif op == OP_NE:
                r = 1.0 if (a != b and a == a and b == b) else 0.0
            elif op == OP_LT:
                r = 1.0 if a < b else 0.0
            elif op == OP_LE:
                r = 1.0 if a <= b else 0.0
            elif op == OP_GT:
                r = 1.0 if a > b else 0.0
            elif op == OP_GE:
                r = 1.0 if a >= b else 0.0
            elif op == OP_AND:
                r = 1.0 if (_truthy(a) and _truthy(b)) else 0.0
            elif op == OP_OR:
                r = 1.0 if (_truthy(a) or _truthy(b)) else 0.0
            stack[sp - 1] = r
    return _truthy(stack[0])
