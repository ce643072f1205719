"""The typed expression form: a parsed expression with a type and an instruction per node.

:func:`type_expr` turns an :class:`~replaydb.operators.expr.Expr` into a :class:`Typed` tree once;
:func:`~replaydb.operators.exprcode.program.lower` flattens it into a program for the machine. The
rules below are the NumPy evaluator's (:mod:`replaydb.operators.expr`), made static:

* kinds: ``b`` bool, ``i`` integer, ``n`` narrow integer (compared only: NumPy wraps its
  arithmetic at its own width), ``f`` float, ``s`` string. A value lives on the int stack (``I``:
  integers, booleans as 0/1, string codes) or the float stack (``F``). A *float-domain* scope (the
  pattern matcher's and GRETA's machines, whose columns are float64 with NULL as NaN) keeps every
  number on the float stack; integers there are exact up to 2**53;
* ``+ - *`` of two integers on the int stack stay int64 (wrapping); otherwise both operands become
  float64 (NumPy's promotion); ``/`` is true division; ``%`` is floor modulo (the divisor's
  sign; ``x % 0`` NULL, so on the int stack only by a nonzero literal);
  arithmetic on booleans or strings is refused (NumPy's ``bool + bool`` is OR, Python's is 2);
* comparisons: with NULL false (``!=`` too); strings compare with strings only, and order only
  where the scope's string codes are in string order;
* a condition is a value's truth: NULL and 0 are false; a string is refused, and a number too
  where the scope says ``boolean_conditions`` (a condition, or an operand of AND, OR, NOT,
  must then be a boolean or NULL);
* functions: ABS, SQRT, LN, LOG10, EXP, FLOOR, CEIL, POWER, LEAST, GREATEST (NaN propagates),
  ROUND (digits: an integer literal); any other call goes to the scope.

A :class:`Scope` supplies what differs between evaluators: the loads of columns and
language-specific leaves, string literals, and the exception a refusal raises. Complexity:
O(size of the tree).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from replaydb.operators.expr import (
    Between,
    Binary,
    Call,
    Expr,
    InList,
    IsNull,
    Literal,
    Unary,
)
from replaydb.operators.exprcode import opcodes as oc
from replaydb.operators.exprcode.scalar import CMP_CODES, EQ, GE, LE, NE

NUMERIC = ("i", "f")
INTISH = ("i", "n", "b")
KIND_NAMES = {"b": "boolean", "i": "integer", "n": "narrow integer", "f": "float",
              "s": "string"}


@dataclass(frozen=True)
class Typed:
    """A node of the typed form: the instruction that computes it from ``args`` (evaluated
    first, in order), its operands, its kind and the stack (``rep``: 'I' or 'F') it is on."""

    op: int
    kind: str
    rep: str
    args: tuple[Typed, ...] = ()
    a: int = 0
    b: int = 0
    fc: float = 0.0
    ic: int = 0


class Scope(Protocol):
    """What one evaluator's compiler supplies (see module docstring)."""

    float_domain: bool
    """Every number is held as float64 (integer literals become float constants)."""
    ordered_strings: bool
    """String codes are in string order, so ``<`` on strings may be compiled."""
    boolean_conditions: bool
    """A condition must be a boolean (or NULL); else a number is a truth value."""

    def leaf(self, node: Expr) -> Typed:
        """The load of a column reference or of a language-specific leaf."""

    def string(self, value: str, node: Expr) -> Typed:
        """The load of a string literal."""

    def call(self, node: Call) -> Typed:
        """A call the core does not know (raise :meth:`error` to refuse it)."""

    def error(self, message: str, node: Expr) -> Exception:
        """The exception that refuses ``node`` (raised by the caller)."""


def const_i(v: int) -> Typed:
    return Typed(oc.CI, "b" if isinstance(v, bool) else "i", "I", ic=int(v))


def const_f(v: float, kind: str = "f") -> Typed:
    return Typed(oc.CF, kind, "F", fc=float(v))


NULL = const_f(math.nan)


def type_expr(expr: Expr, scope: Scope) -> Typed:
    """The typed form of ``expr`` (see module docstring); raises ``scope.error(...)``."""
    return _Typer(scope).expr(expr)


def type_condition(expr: Expr | None, scope: Scope) -> Typed:
    """The typed form of a condition: ``expr``'s truth (0/1 on the int stack); None is TRUE."""
    if expr is None:
        return const_i(True)
    t = _Typer(scope)
    return t.truth(t.expr(expr), expr)


class _Typer:
    def __init__(self, scope: Scope) -> None:
        self.s = scope

    def fail(self, message: str, node: Expr) -> Exception:
        return self.s.error(message, node)

    # ------------------------------------------------------------------ nodes
    def expr(self, e: Expr) -> Typed:  # noqa: C901 - one case per node type
        if isinstance(e, Literal):
            return self.literal(e)
        if isinstance(e, Unary):
            x = self.expr(e.operand)
            if e.op == "not":
                return Typed(oc.NOT, "b", "I", (self.truth(x, e),))
            if e.op != "neg":
                raise self.fail(f"the operator {e.op}", e)
            self.numeric(x, e, "negation")
            if x.rep == "F" and x.kind == "i":  # an integer held as a float: 0 - x, no -0.0
                return Typed(oc.SUBF, "i", "F", (_ZERO, x))
            return Typed(oc.NEGI if x.rep == "I" else oc.NEGF, x.kind, x.rep, (x,))
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Between):
            r = Typed(oc.AND, "b", "I", (self.compare(e.operand, e.low, GE, e),
                                         self.compare(e.operand, e.high, LE, e)))
            return self.negated(r, e.operand) if e.negated else r
        if isinstance(e, InList):
            r = const_i(False)
            for i, v in enumerate(e.values):
                c = self.compare(e.operand, v, EQ, e)
                r = c if i == 0 else Typed(oc.OR, "b", "I", (r, c))
            return self.negated(r, e.operand) if e.negated else r
        if isinstance(e, IsNull):
            return self.isnull(self.expr(e.operand), not e.negated)
        if isinstance(e, Call) and e.qualifier is None and e.name in _FUNCTIONS:
            return _FUNCTIONS[e.name](self, e)
        if isinstance(e, Call):
            return self.s.call(e)
        return self.s.leaf(e)

    def literal(self, e: Literal) -> Typed:
        v = e.value
        if v is None:
            return NULL
        if isinstance(v, bool):
            return const_i(v)
        if isinstance(v, int):
            if self.s.float_domain:
                return const_f(v, "i")
            if not -(2**63) <= v < 2**63:
                raise self.fail("an integer literal outside int64", e)
            return const_i(v)
        if isinstance(v, float):
            return const_f(v)
        if isinstance(v, str):
            return self.s.string(v, e)
        raise self.fail(f"literals of type {type(v).__name__}", e)

    # ------------------------------------------------------------------ helpers
    def numeric(self, x: Typed, e: Expr, what: str = "arithmetic") -> None:
        if x.kind not in NUMERIC:
            raise self.fail(f"{what} on a {KIND_NAMES[x.kind]} value", e)

    def to_float(self, x: Typed) -> Typed:
        """``x`` on the float stack (an int constant is converted here, not by the machine)."""
        if x.rep == "F":
            return x
        if x.op == oc.CI:
            return const_f(float(x.ic), x.kind)
        return Typed(oc.I2F, x.kind, "F", (x,))

    def truth(self, x: Typed, e: Expr) -> Typed:
        """``x`` as a condition: 0/1 on the int stack."""
        if x.kind == "s":
            raise self.fail("a string used as a condition", e)
        if x.kind != "b" and x is not NULL and self.s.boolean_conditions:
            name = KIND_NAMES[x.kind]
            raise self.fail(f"{'an' if name[0] in 'aeiou' else 'a'} {name} value used as a "
                            "condition", e)
        if x.rep == "F":
            return Typed(oc.TRUTHF, "b", "I", (x,))
        return x if x.kind == "b" else Typed(oc.TRUTHI, "b", "I", (x,))

    def isnull(self, x: Typed, null: bool) -> Typed:
        if x.rep == "F":
            return Typed(oc.ISNULLF if null else oc.NOTNULLF, "b", "I", (x,))
        if x.kind == "s":
            return Typed(oc.ISNULLS if null else oc.NOTNULLS, "b", "I", (x,))
        return const_i(not null)  # integers and booleans on the int stack are never NULL

    def negated(self, r: Typed, operand: Expr) -> Typed:
        """NOT BETWEEN / NOT IN: ``NOT r AND operand IS NOT NULL``."""
        return Typed(oc.AND, "b", "I", (Typed(oc.NOT, "b", "I", (r,)),
                                        self.isnull(self.expr(operand), False)))

    def compare(self, left: Expr, right: Expr, c: int, e: Expr) -> Typed:
        x, y = self.expr(left), self.expr(right)
        if "s" in (x.kind, y.kind):
            if x.kind != y.kind:
                raise self.fail("a string compared with a non-string", e)
            if c not in (EQ, NE) and not self.s.ordered_strings:
                raise self.fail("ordering strings", e)
            return Typed(oc.CMPS if x.rep == "I" else oc.CMPF, "b", "I", (x, y), a=c)
        if x.rep == "I" and y.rep == "I":
            return Typed(oc.CMPI, "b", "I", (x, y), a=c)
        return Typed(oc.CMPF, "b", "I", (self.to_float(x), self.to_float(y)), a=c)

    def binary(self, e: Binary) -> Typed:
        if e.op in ("and", "or"):
            x = self.truth(self.expr(e.left), e.left)
            y = self.truth(self.expr(e.right), e.right)
            return Typed(oc.AND if e.op == "and" else oc.OR, "b", "I", (x, y))
        if e.op in CMP_CODES:
            return self.compare(e.left, e.right, CMP_CODES[e.op], e)
        if e.op not in _ARITH:
            raise self.fail(f"the operator {e.op}", e)
        x, y = self.expr(e.left), self.expr(e.right)
        self.numeric(x, e)
        self.numeric(y, e)
        ints = x.kind == "i" and y.kind == "i"
        if e.op == "%" and ints and x.rep == "I" and y.rep == "I":
            if not (y.op == oc.CI and y.ic != 0):
                raise self.fail("'%' between integers needs a nonzero integer literal divisor "
                                "on this device", e)
            return Typed(oc.MODI, "i", "I", (x, y))
        if e.op in ("+", "-", "*") and ints and x.rep == "I" and y.rep == "I":
            return Typed(_ARITH_I[e.op], "i", "I", (x, y))
        if e.op == "%" and ints:
            op = oc.MODFI
        else:
            op = _ARITH[e.op]
        kind = "i" if ints and e.op != "/" else "f"
        r = Typed(op, kind, "F", (self.to_float(x), self.to_float(y)))
        if op == oc.MULF and kind == "i":  # integers have no -0.0 (0 * -1): add +0.0
            return Typed(oc.ADDF, "i", "F", (r, _ZERO))
        return r

    def minmax(self, e: Call) -> Typed:
        if not e.args:
            raise self.fail(f"{e.name} needs arguments", e)
        r = self.expr(e.args[0])
        self.numeric(r, e, e.name)
        for arg in e.args[1:]:
            y = self.expr(arg)
            self.numeric(y, e, e.name)
            kind = "i" if r.kind == "i" and y.kind == "i" else "f"
            if r.rep == "I" and y.rep == "I":
                r = Typed(oc.MINI if e.name == "LEAST" else oc.MAXI, kind, "I", (r, y))
            else:
                r = Typed(oc.MINF if e.name == "LEAST" else oc.MAXF, kind, "F",
                          (self.to_float(r), self.to_float(y)))
        return r

    def unary_call(self, e: Call) -> Typed:
        if len(e.args) != 1:
            raise self.fail(f"{e.name} takes one argument", e)
        x = self.expr(e.args[0])
        self.numeric(x, e, e.name)
        if e.name == "ABS":
            return Typed(oc.ABSI if x.rep == "I" else oc.ABSF, x.kind, x.rep, (x,))
        return Typed(_UNARY_F[e.name], "f", "F", (self.to_float(x),))

    def power(self, e: Call) -> Typed:
        if len(e.args) != 2:
            raise self.fail("POWER takes two arguments", e)
        x, y = self.expr(e.args[0]), self.expr(e.args[1])
        self.numeric(x, e, "POWER")
        self.numeric(y, e, "POWER")
        return Typed(oc.POWF, "f", "F", (self.to_float(x), self.to_float(y)))

    def round(self, e: Call) -> Typed:
        if len(e.args) not in (1, 2):
            raise self.fail("ROUND takes 1 or 2 arguments", e)
        nd = 0
        if len(e.args) == 2:
            d = e.args[1]
            if not (isinstance(d, Literal) and isinstance(d.value, int)
                    and not isinstance(d.value, bool)):
                raise self.fail("ROUND's digits must be an integer literal", e)
            nd = d.value
        x = self.expr(e.args[0])
        self.numeric(x, e, "ROUND")
        if x.kind == "i" and nd >= 0:  # NumPy leaves integers as they are
            return x
        if x.rep == "I":
            raise self.fail("ROUND of an integer to negative digits", e)
        return Typed(oc.ROUNDF, "f", "F", (x,), a=nd)


_ZERO = Typed(oc.CF, "i", "F", fc=0.0)
"""The float constant +0.0 (an integer held as a float)."""
_ARITH = {"+": oc.ADDF, "-": oc.SUBF, "*": oc.MULF, "/": oc.DIVF, "%": oc.MODF}
_ARITH_I = {"+": oc.ADDI, "-": oc.SUBI, "*": oc.MULI}
_UNARY_F = {"SQRT": oc.SQRTF, "LN": oc.LNF, "LOG10": oc.LOG10F, "EXP": oc.EXPF,
            "FLOOR": oc.FLOORF, "CEIL": oc.CEILF}
_FUNCTIONS = {
    "ABS": _Typer.unary_call, **{name: _Typer.unary_call for name in _UNARY_F},
    "POWER": _Typer.power, "LEAST": _Typer.minmax, "GREATEST": _Typer.minmax,
    "ROUND": _Typer.round,
}
"""The row-wise functions every compiled evaluator implements."""
