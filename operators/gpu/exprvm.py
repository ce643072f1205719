"""Predicates on the device: a typed stack machine that reproduces the CPU's NumPy semantics.

The CPU operators evaluate :mod:`replaydb.operators.expr` trees with NumPy; the filter and join
kernels evaluate the same trees with this machine, one event (or pair) per GPU thread. A tree is
compiled on the host into four parallel arrays (opcode, two int operands, a float and an int
constant); :func:`run` interprets them in a kernel. User text is never ``eval``-ed.

Exactness: results must equal the CPU's bit for bit, so the machine is *typed* like NumPy:

* two stacks, int64 (integers, booleans as 0/1, string codes) and float64;
* a program is compiled for the *kinds* of the columns in the current batch, as the CPU sees
  them (:func:`kind_of`): ``i`` int64, ``n`` a narrower integer (compared only), ``b`` bool,
  ``f`` float64 (an integer column with nulls arrives as float64 with NaN, exactly as
  :func:`~replaydb.operators.base.column_np` gives it to NumPy), ``s`` strings (codes of one
  sorted dictionary per batch, so ``<`` on codes is Python's string order; NULL is -1);
* integer arithmetic stays int64 (wrapping like NumPy), ``/`` is true division, ``%`` is floor
  modulo on integers and ``fmod`` on floats, mixed operands convert the integer to float64
  (NumPy's promotion), comparisons with NULL are false and ``!=`` with NULL is false too
  (two-valued logic of :mod:`replaydb.operators.expr`);
* products and sums use non-fusing intrinsics (:func:`~replaydb.operators.gpu.device.fmul`), and
  ``exp``/``log``/``sqrt``/``pow``/``fmod`` are NumPy's own functions under the simulator. On a
  real device they are CUDA's libdevice functions, which may differ from NumPy's in the last
  unit of precision: a comparison exactly at such a boundary is the one documented way a device
  result may differ from the CPU.

Two kinds of "no":

* :class:`GpuUnsupported` (a :class:`~replaydb.errors.QueryError`), raised when an operator is
  *bound*: the tree uses a feature the device machine does not have (``ROUND``, ``LOWER``,
  ``UPPER``, a language-specific call, a subscripted column). The message names the feature; the
  planner then runs the CPU operator.
* :class:`NotCompilable`, raised per batch: the column kinds make the CPU's result depend on
  NumPy behaviour the machine does not model (arithmetic on booleans or strings, ``%`` between two
  integer columns, float32/unsigned/temporal/decimal columns, ordering of strings with NULLs).
  The GPU operator then evaluates that batch with the CPU code (counted in
  ``counters.extra["cpu_fallback_batches"]``), so results stay identical.

Complexity: compiling O(tree); evaluating O(program) per event, no allocation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda

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
    Star,
    Unary,
)
from replaydb.operators.gpu.device import fadd, fmul, fsub, simulator_active

DEPTH = 24
"""Stack depth of the device machine (each of the two stacks)."""

# opcodes ----------------------------------------------------------------------------------------
LDI = 1      # push imat[src b][row a]          (int stack)
LDF = 2      # push fmat[src b][row a]          (float stack)
CI = 3       # push ic                          (int)
CF = 4       # push fc                          (float)
CS = 5       # push strc[a]                     (int: a string literal's code in this batch)
I2F = 6      # pop int, push float
I2F2 = 7     # pop two ints (x, y), push float(x), float(y)
ADDI = 10
SUBI = 11
MULI = 12
NEGI = 13
ABSI = 14
MODI = 15    # floor modulo by a nonzero constant
MINI = 16
MAXI = 17
ADDF = 20
SUBF = 21
MULF = 22
DIVF = 23
NEGF = 24
ABSF = 25
MODF = 26    # fmod
POWF = 27
SQRTF = 28
LNF = 29
LOG10F = 30
EXPF = 31
FLOORF = 32
CEILF = 33
MINF = 34    # np.minimum: NaN propagates
MAXF = 35
CMPI = 40    # a = comparison; pushes 0/1 on the int stack
CMPF = 41
CMPS = 42    # string codes: NULL (-1) compares false
AND = 50
OR = 51
NOT = 52
TRUTHF = 53  # float -> 0/1 (NaN and 0 are false)
TRUTHI = 54
ISNULLF = 55
ISNULLS = 56
NOTNULLF = 57
NOTNULLS = 58
CONST0I = 59  # pop int, push 0 (IS NULL of a never-null integer)
CONST1I = 60  # pop int, push 1

EQ, NE, LT, LE, GT, GE = 0, 1, 2, 3, 4, 5
_CMP = {"=": EQ, "!=": NE, "<": LT, "<=": LE, ">": GT, ">=": GE}

DEVICE_CALLS = frozenset({"ABS", "SQRT", "LN", "LOG10", "EXP", "FLOOR", "CEIL", "POWER", "LEAST",
                          "GREATEST"})
"""Row-wise functions the device machine implements (the others refuse at bind time)."""

INTISH = ("i", "n", "b")


class GpuUnsupported(QueryError):
    """The GPU variant of an operator cannot run this query (the message names the feature)."""

    def __init__(self, operator: str, feature: str, pos: int | None = None) -> None:
        at = f" (at position {pos})" if pos is not None else ""
        super().__init__(f"the GPU {operator} does not support {feature}{at}",
                         hint="run it with --device cpu (the planner does so with --device auto)")
        self.feature = feature
        self.operator = operator


class NotCompilable(Exception):
    """This batch's column kinds need NumPy behaviour the device machine does not model."""


# --------------------------------------------------------------------------- host: checks
def check_expr(expr: Expr | None, operator: str) -> None:
    """Raise :class:`GpuUnsupported` for features the device machine lacks (bind time)."""
    if expr is None:
        return
    for node in expr.walk():
        if isinstance(node, Call):
            if node.qualifier is not None:
                raise GpuUnsupported(operator, f"{node.qualifier} {node.name}(...)", node.pos)
            if node.name not in DEVICE_CALLS:
                raise GpuUnsupported(operator, f"the function {node.name}", node.pos)
        elif isinstance(node, Star):
            raise GpuUnsupported(operator, "'*' in a predicate", node.pos)
        elif isinstance(node, Column) and node.index is not None:
            raise GpuUnsupported(operator, "subscripted columns", node.pos)
        elif isinstance(node, Literal) and not (node.value is None or isinstance(
                node.value, bool | int | float | str)):
            raise GpuUnsupported(operator, f"literals of type {type(node.value).__name__}",
                                 node.pos)
        elif isinstance(node, Unary) and node.op not in ("neg", "not"):
            raise GpuUnsupported(operator, f"the operator {node.op}", node.pos)
        elif isinstance(node, Binary) and node.op not in (*_CMP, "+", "-", "*", "/", "%", "and",
                                                          "or"):
            raise GpuUnsupported(operator, f"the operator {node.op}", node.pos)


def kind_of(values: np.ndarray) -> str:
    """The kind (see module docstring) of a column as the CPU code holds it."""
    dt = values.dtype
    if dt == np.int64:
        return "i"
    if dt.kind == "i":
        return "n"
    if dt == np.float64:
        return "f"
    if dt == np.bool_:
        return "b"
    if dt.kind == "O":
        return "s"
    return "x"


# --------------------------------------------------------------------------- host: compile
@dataclass
class Program:
    """A compiled predicate: parallel arrays plus what the caller must supply per batch."""

    op: np.ndarray
    a: np.ndarray
    b: np.ndarray
    fc: np.ndarray
    ic: np.ndarray
    str_literals: list[str] = field(default_factory=list)
    orders_strings: bool = False
    """Whether the program orders strings (``<`` on codes): NumPy raises there on NULL."""
    device: tuple[Any, ...] | None = None

    @property
    def n_ops(self) -> int:
        return int(len(self.op))

    def on_device(self) -> tuple[Any, ...]:
        """The five arrays as device arrays (copied once per program)."""
        if self.device is None:
            self.device = tuple(cuda.to_device(x if len(x) else np.zeros(1, x.dtype))
                                for x in (self.op, self.a, self.b, self.fc, self.ic))
        return self.device


ColumnKey = Any  # the filter uses names, the join (source, name)


@dataclass
class ColumnSlot:
    """Where a column lives for the machine: source (0/1), matrix ('i'/'f'), row, kind."""

    src: int
    matrix: str
    row: int
    kind: str


class _Gen:
    def __init__(self, resolve: Any) -> None:
        self.resolve = resolve  # Column -> ColumnSlot (raises NotCompilable / QueryError)
        self.ops: list[tuple[int, int, int, float, int]] = []
        self.si = self.sf = self.max_i = self.max_f = 0
        self.strs: dict[str, int] = {}
        self.orders_strings = False

    # stack bookkeeping
    def emit(self, op: int, a: int = 0, b: int = 0, fc: float = 0.0, ic: int = 0,
             di: int = 0, df: int = 0) -> None:
        self.ops.append((op, a, b, fc, ic))
        self.si += di
        self.sf += df
        self.max_i = max(self.max_i, self.si)
        self.max_f = max(self.max_f, self.sf)

    def to_float(self, k: str) -> str:
        if k == "f":
            return "f"
        if k != "i":
            raise NotCompilable(f"arithmetic on a {_KIND_NAME[k]} value")
        self.emit(I2F, di=-1, df=1)
        return "f"

    def gen(self, e: Expr) -> str:  # noqa: C901 - one case per node type
        if isinstance(e, Literal):
            v = e.value
            if v is None:
                self.emit(CF, fc=math.nan, df=1)
                return "f"
            if isinstance(v, bool):
                self.emit(CI, ic=int(v), di=1)
                return "b"
            if isinstance(v, int):
                if not -(2**63) <= v < 2**63:
                    raise NotCompilable("an integer literal outside int64")
                self.emit(CI, ic=v, di=1)
                return "i"
            if isinstance(v, float):
                self.emit(CF, fc=v, df=1)
                return "f"
            if isinstance(v, str):
                slot = self.strs.setdefault(v, len(self.strs))
                self.emit(CS, a=slot, di=1)
                return "s"
            raise NotCompilable(f"a literal of type {type(v).__name__}")
        if isinstance(e, Column):
            s = self.resolve(e)
            if s.kind == "x":
                raise NotCompilable(f"column {e.name!r} has a type the device does not model")
            if s.matrix == "i":
                self.emit(LDI, a=s.row, b=s.src, di=1)
            else:
                self.emit(LDF, a=s.row, b=s.src, df=1)
            return s.kind
        if isinstance(e, Unary):
            k = self.gen(e.operand)
            if e.op == "not":
                self.truth(k)
                self.emit(NOT)
                return "b"
            if k == "i":
                self.emit(NEGI)
                return "i"
            if k == "f":
                self.emit(NEGF)
                return "f"
            raise NotCompilable(f"negation of a {_KIND_NAME[k]} value")
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Between):
            self.cmp(e.operand, e.low, GE)
            self.cmp(e.operand, e.high, LE)
            self.emit(AND, di=-1)
            if e.negated:
                self.emit(NOT)
                self.notnull(e.operand)
                self.emit(AND, di=-1)
            return "b"
        if isinstance(e, InList):
            for i, v in enumerate(e.values):
                self.cmp(e.operand, v, EQ)
                if i:
                    self.emit(OR, di=-1)
            if not e.values:
                self.emit(CI, ic=0, di=1)
            if e.negated:
                self.emit(NOT)
                self.notnull(e.operand)
                self.emit(AND, di=-1)
            return "b"
        if isinstance(e, IsNull):
            if e.negated:
                self.notnull(e.operand)
            else:
                self.isnull(e.operand)
            return "b"
        if isinstance(e, Call):
            return self.call(e)
        raise NotCompilable(f"the node {type(e).__name__}")

    def truth(self, k: str) -> None:
        """Coerce the top value to 0/1 on the int stack (``_as_bool``)."""
        if k == "f":
            self.emit(TRUTHF, di=1, df=-1)
        elif k in ("i", "n", "b"):
            self.emit(TRUTHI)
        else:
            raise NotCompilable("a string used as a condition")

    def isnull(self, x: Expr) -> None:
        k = self.gen(x)
        if k == "f":
            self.emit(ISNULLF, di=1, df=-1)
        elif k == "s":
            self.emit(ISNULLS)
        else:
            self.emit(CONST0I)

    def notnull(self, x: Expr) -> None:
        k = self.gen(x)
        if k == "f":
            self.emit(NOTNULLF, di=1, df=-1)
        elif k == "s":
            self.emit(NOTNULLS)
        else:
            self.emit(CONST1I)

    def cmp(self, left: Expr, right: Expr, c: int) -> None:
        kl = self.gen(left)
        kr = self.gen(right)
        if kl == "s" or kr == "s":
            if kl != kr:
                raise NotCompilable("a string compared with a non-string")
            if c not in (EQ, NE):
                self.orders_strings = True
            self.emit(CMPS, a=c, di=-1)
            return
        if kl in INTISH and kr in INTISH:
            self.emit(CMPI, a=c, di=-1)
            return
        self.promote(kl, kr)
        self.emit(CMPF, a=c, di=1, df=-2)

    def promote(self, kl: str, kr: str) -> None:
        """Bring the two top operands (left below right) to float64."""
        if kl in INTISH and kr in INTISH:
            self.emit(I2F2, di=-2, df=2)
        elif kl in INTISH or kr in INTISH:  # exactly one int: it is the int stack's top
            self.emit(I2F, di=-1, df=1)
            if kr in INTISH:  # converted value is the right operand: already in order
                pass
            else:  # the left operand was converted after the right one was pushed: swap
                self.emit(SWAPF)

    def binary(self, e: Binary) -> str:
        if e.op in ("and", "or"):
            self.truth(self.gen(e.left))
            self.truth(self.gen(e.right))
            self.emit(AND if e.op == "and" else OR, di=-1)
            return "b"
        if e.op in _CMP:
            self.cmp(e.left, e.right, _CMP[e.op])
            return "b"
        kl = self.gen(e.left)
        kr = self.gen(e.right)
        for k in (kl, kr):
            if k not in ("i", "f"):
                raise NotCompilable(f"arithmetic on a {_KIND_NAME[k]} value")
        if e.op == "%" and kl == "i" and kr == "i":
            r = e.right
            if not (isinstance(r, Literal) and isinstance(r.value, int)
                    and not isinstance(r.value, bool) and r.value != 0):
                raise NotCompilable("'%' between integers needs a nonzero integer literal "
                                    "divisor on the device")
            self.emit(MODI, di=-1)
            return "i"
        if kl == "i" and kr == "i" and e.op in ("+", "-", "*"):
            self.emit({"+": ADDI, "-": SUBI, "*": MULI}[e.op], di=-1)
            return "i"
        self.promote(kl, kr)
        self.emit({"+": ADDF, "-": SUBF, "*": MULF, "/": DIVF, "%": MODF}[e.op], df=-1)
        return "f"

    def call(self, e: Call) -> str:
        name = e.name
        if name not in DEVICE_CALLS:  # pragma: no cover - check_expr refuses earlier
            raise NotCompilable(f"the function {name}")
        args = e.args
        if name in ("LEAST", "GREATEST"):
            if not args:
                raise NotCompilable(f"{name} without arguments")
            k = self.gen(args[0])
            for a in args[1:]:
                kr = self.gen(a)
                if k not in ("i", "f") or kr not in ("i", "f"):
                    raise NotCompilable(f"{name} of a non-numeric value")
                if k == "i" and kr == "i":
                    self.emit(MINI if name == "LEAST" else MAXI, di=-1)
                else:
                    self.promote(k, kr)
                    self.emit(MINF if name == "LEAST" else MAXF, df=-1)
                    k = "f"
            if k not in ("i", "f"):
                raise NotCompilable(f"{name} of a non-numeric value")
            return k
        if name == "POWER":
            if len(args) != 2:
                raise NotCompilable("POWER takes two arguments")
            kl = self.gen(args[0])
            kr = self.gen(args[1])
            if kl not in ("i", "f") or kr not in ("i", "f"):
                raise NotCompilable("POWER of a non-numeric value")
            self.promote(kl, kr)
            self.emit(POWF, df=-1)
            return "f"
        if len(args) != 1:
            raise NotCompilable(f"{name} takes one argument")
        k = self.gen(args[0])
        if name == "ABS":
            if k == "i":
                self.emit(ABSI)
                return "i"
            if k == "f":
                self.emit(ABSF)
                return "f"
            raise NotCompilable("ABS of a non-numeric value")
        self.to_float(k)
        self.emit({"SQRT": SQRTF, "LN": LNF, "LOG10": LOG10F, "EXP": EXPF, "FLOOR": FLOORF,
                   "CEIL": CEILF}[name])
        return "f"


SWAPF = 8  # swap the two top floats

_KIND_NAME = {"i": "int64", "n": "narrow integer", "b": "boolean", "f": "float64",
              "s": "string", "x": "unsupported"}


def compile_predicate(expr: Expr | None, resolve: Any) -> Program:
    """Compile a predicate for the current kinds; ``resolve(Column) -> ColumnSlot``.

    Raises :class:`NotCompilable` when the kinds need behaviour the machine does not model.
    """
    g = _Gen(resolve)
    if expr is None:
        g.emit(CI, ic=1, di=1)
    else:
        k = g.gen(expr)
        g.truth(k)
    if g.max_i > DEPTH or g.max_f > DEPTH:
        raise NotCompilable(f"the predicate needs a stack deeper than {DEPTH}")
    ops = g.ops
    # MODI takes its divisor from the literal just pushed: keep it in ic of the MODI op too
    out_ic = [o[4] for o in ops]
    for j, o in enumerate(ops):
        if o[0] == MODI:
            out_ic[j] = ops[j - 1][4]
    prog = Program(
        op=np.array([o[0] for o in ops], dtype=np.int64),
        a=np.array([o[1] for o in ops], dtype=np.int64),
        b=np.array([o[2] for o in ops], dtype=np.int64),
        fc=np.array([o[3] for o in ops], dtype=np.float64),
        ic=np.array(out_ic, dtype=np.int64),
        str_literals=sorted(g.strs, key=g.strs.__getitem__),
        orders_strings=g.orders_strings,
    )
    return prog


# --------------------------------------------------------------------------- host: strings
def encode_strings(columns: list[np.ndarray], literals: list[str]) -> tuple[list[np.ndarray],
                                                                           np.ndarray]:
    """Codes of one sorted dictionary over string columns and literals (NULL: -1).

    Returns the code arrays (int64) and the literals' codes. Sorting makes code order equal to
    Python's string order, so ``<`` on codes is ``<`` on strings. Vectorized with Arrow: the
    Python work is O(distinct strings log distinct strings).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays = [pa.array(c, type=pa.large_string(), from_pandas=False) for c in columns]
    uniq: set[str] = set(literals)
    for a in arrays:
        uniq.update(x for x in pc.unique(a).to_pylist() if x is not None)
    ordered = pa.array(sorted(uniq), type=pa.large_string())
    out = []
    for a in arrays:
        idx = pc.index_in(a, value_set=ordered)
        out.append(idx.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64))
    pos = {v: i for i, v in enumerate(ordered.to_pylist())}
    lit = np.array([pos[v] for v in literals], dtype=np.int64)
    return out, lit


# --------------------------------------------------------------------------- device math
if simulator_active():  # NumPy's own functions: the CPU's exact results

    @cuda.jit(device=True)
    def _fmod(a, b):  # type: ignore[no-untyped-def]
        with np.errstate(all="ignore"):
            return np.fmod(np.float64(a), np.float64(b))

    @cuda.jit(device=True)
    def _pow(a, b):  # type: ignore[no-untyped-def]
        with np.errstate(all="ignore"):
            return np.power(np.float64(a), np.float64(b))

    @cuda.jit(device=True)
    def _sqrt(x):  # type: ignore[no-untyped-def]
        with np.errstate(all="ignore"):
            return np.sqrt(np.float64(x))

    @cuda.jit(device=True)
    def _ln(x):  # type: ignore[no-untyped-def]
        with np.errstate(all="ignore"):
            return np.log(np.float64(x))

    @cuda.jit(device=True)
    def _log10(x):  # type: ignore[no-untyped-def]
        with np.errstate(all="ignore"):
            return np.log10(np.float64(x))

    @cuda.jit(device=True)
    def _exp(x):  # type: ignore[no-untyped-def]
        with np.errstate(all="ignore"):
            return np.exp(np.float64(x))

    @cuda.jit(device=True)
    def _div(a, b):  # type: ignore[no-untyped-def]
        with np.errstate(all="ignore"):
            return np.true_divide(np.float64(a), np.float64(b))

    @cuda.jit(device=True)
    def _floor(x):  # type: ignore[no-untyped-def]
        return np.floor(np.float64(x))

    @cuda.jit(device=True)
    def _ceil(x):  # type: ignore[no-untyped-def]
        return np.ceil(np.float64(x))

else:  # pragma: no cover - device code
    from numba.cuda import libdevice

    @cuda.jit(device=True)
    def _fmod(a, b):  # type: ignore[no-untyped-def]
        return math.fmod(a, b)

    @cuda.jit(device=True)
    def _pow(a, b):  # type: ignore[no-untyped-def]
        return math.pow(a, b)

    @cuda.jit(device=True)
    def _sqrt(x):  # type: ignore[no-untyped-def]
        return math.sqrt(x)

    @cuda.jit(device=True)
    def _ln(x):  # type: ignore[no-untyped-def]
        return math.log(x)

    @cuda.jit(device=True)
    def _log10(x):  # type: ignore[no-untyped-def]
        return math.log10(x)

    @cuda.jit(device=True)
    def _exp(x):  # type: ignore[no-untyped-def]
        return math.exp(x)

    @cuda.jit(device=True)
    def _div(a, b):  # type: ignore[no-untyped-def]
        return a / b

    @cuda.jit(device=True)
    def _floor(x):  # type: ignore[no-untyped-def]
        return libdevice.floor(x)

    @cuda.jit(device=True)
    def _ceil(x):  # type: ignore[no-untyped-def]
        return libdevice.ceil(x)


@cuda.jit(device=True, inline=True)
def _cmp_f(c, x, y):  # pragma: no cover - device code
    if x != x or y != y:
        return 0
    if c == EQ:
        return 1 if x == y else 0
    if c == NE:
        return 1 if x != y else 0
    if c == LT:
        return 1 if x < y else 0
    if c == LE:
        return 1 if x <= y else 0
    if c == GT:
        return 1 if x > y else 0
    return 1 if x >= y else 0


@cuda.jit(device=True, inline=True)
def _cmp_i(c, x, y):  # pragma: no cover - device code
    if c == EQ:
        return 1 if x == y else 0
    if c == NE:
        return 1 if x != y else 0
    if c == LT:
        return 1 if x < y else 0
    if c == LE:
        return 1 if x <= y else 0
    if c == GT:
        return 1 if x > y else 0
    return 1 if x >= y else 0


@cuda.jit(device=True)
def run(op, a, b, fc, ic, n_ops, strc, im0, fm0, r0, im1, fm1, r1, si, sf):  # noqa: C901
    """Evaluate a program for row ``r0`` of source 0 and row ``r1`` of source 1; 0/1.

    ``si``/``sf`` are the caller's int64/float64 scratch stacks of :data:`DEPTH` entries (local
    arrays of the calling kernel: device functions of this module never touch ``cuda.*``, which
    the simulator swaps per call).
    """
    pi = 0
    pf = 0
    for k in range(n_ops):
        o = op[k]
        if o == LDI:
            if b[k] == 0:
                si[pi] = im0[a[k], r0]
            else:
                si[pi] = im1[a[k], r1]
            pi += 1
        elif o == LDF:
            if b[k] == 0:
                sf[pf] = fm0[a[k], r0]
            else:
                sf[pf] = fm1[a[k], r1]
            pf += 1
        elif o == CI:
            si[pi] = ic[k]
            pi += 1
        elif o == CF:
            sf[pf] = fc[k]
            pf += 1
        elif o == CS:
            si[pi] = strc[a[k]]
            pi += 1
        elif o == I2F:
            pi -= 1
            sf[pf] = float(si[pi])
            pf += 1
        elif o == I2F2:
            sf[pf] = float(si[pi - 2])
            sf[pf + 1] = float(si[pi - 1])
            pi -= 2
            pf += 2
        elif o == SWAPF:
            x = sf[pf - 1]
            sf[pf - 1] = sf[pf - 2]
            sf[pf - 2] = x
        elif o < 20:
            if o == NEGI:
                si[pi - 1] = -si[pi - 1]
            elif o == ABSI:
                if si[pi - 1] < 0:
                    si[pi - 1] = -si[pi - 1]
            else:
                y = si[pi - 1]
                x = si[pi - 2]
                pi -= 1
                if o == ADDI:
                    r = x + y
                elif o == SUBI:
                    r = x - y
                elif o == MULI:
                    r = x * y
                elif o == MODI:
                    d = ic[k]
                    r = x % d
                    if r != 0 and (r < 0) != (d < 0):
                        r += d
                elif o == MINI:
                    r = x if x <= y else y
                else:
                    r = x if x >= y else y
                si[pi - 1] = r
        elif o < 40:
            if o == NEGF:
                sf[pf - 1] = -sf[pf - 1]
            elif o == ABSF:
                sf[pf - 1] = abs(sf[pf - 1])
            elif o == SQRTF:
                x = sf[pf - 1]
                sf[pf - 1] = _sqrt(x) if x >= 0 else math.nan
            elif o == LNF:
                x = sf[pf - 1]
                sf[pf - 1] = _ln(x) if x > 0 else (-math.inf if x == 0 else math.nan)
            elif o == LOG10F:
                x = sf[pf - 1]
                sf[pf - 1] = _log10(x) if x > 0 else (-math.inf if x == 0 else math.nan)
            elif o == EXPF:
                sf[pf - 1] = _exp(sf[pf - 1])
            elif o == FLOORF:
                sf[pf - 1] = _floor(sf[pf - 1])
            elif o == CEILF:
                sf[pf - 1] = _ceil(sf[pf - 1])
            else:
                y = sf[pf - 1]
                x = sf[pf - 2]
                pf -= 1
                if o == ADDF:
                    r = fadd(x, y)
                elif o == SUBF:
                    r = fsub(x, y)
                elif o == MULF:
                    r = fmul(x, y)
                elif o == DIVF:
                    r = _div(x, y)
                elif o == MODF:
                    r = _fmod(x, y)
                elif o == POWF:
                    r = _pow(x, y)
                elif o == MINF:
                    if x != x or y != y:
                        r = math.nan
                    else:
                        r = x if x <= y else y
                else:
                    if x != x or y != y:
                        r = math.nan
                    else:
                        r = x if x >= y else y
                sf[pf - 1] = r
        elif o == CMPI or o == CMPS:
            y = si[pi - 1]
            x = si[pi - 2]
            pi -= 1
            if o == CMPS and (x < 0 or y < 0):
                si[pi - 1] = 0
            else:
                si[pi - 1] = _cmp_i(a[k], x, y)
        elif o == CMPF:
            y = sf[pf - 1]
            x = sf[pf - 2]
            pf -= 2
            si[pi] = _cmp_f(a[k], x, y)
            pi += 1
        elif o == AND:
            pi -= 1
            si[pi - 1] = 1 if (si[pi - 1] != 0 and si[pi] != 0) else 0
        elif o == OR:
            pi -= 1
            si[pi - 1] = 1 if (si[pi - 1] != 0 or si[pi] != 0) else 0
        elif o == NOT:
            si[pi - 1] = 0 if si[pi - 1] != 0 else 1
        elif o == TRUTHF:
            pf -= 1
            x = sf[pf]
            si[pi] = 1 if (x == x and x != 0.0) else 0
            pi += 1
        elif o == TRUTHI:
            si[pi - 1] = 1 if si[pi - 1] != 0 else 0
        elif o == ISNULLF or o == NOTNULLF:
            pf -= 1
            x = sf[pf]
            nul = x != x
            si[pi] = 1 if (nul if o == ISNULLF else not nul) else 0
            pi += 1
        elif o == ISNULLS:
            si[pi - 1] = 1 if si[pi - 1] < 0 else 0
        elif o == NOTNULLS:
            si[pi - 1] = 0 if si[pi - 1] < 0 else 1
        elif o == CONST0I:
            si[pi - 1] = 0
        elif o == CONST1I:
            si[pi - 1] = 1
    return si[pi - 1] != 0
