"""Predicates of the GPU filter and join: the shared typed form, compiled for the device.

The CPU operators evaluate :mod:`replaydb.operators.expr` trees with NumPy; the filter and join
kernels evaluate the same trees, one event (or pair) per GPU thread, with the shared expression
machine (:func:`replaydb.operators.exprcode.machine.eval_rows`): a tree is typed and lowered on the
host (:mod:`replaydb.operators.exprcode`) for the *kinds* of the columns in the current batch, as
the CPU sees them (:func:`kind_of`): ``i`` int64, ``n`` a narrower integer (compared only), ``b``
bool, ``f`` float64 (an integer column with nulls arrives as float64 with NaN, exactly as
:func:`~replaydb.operators.base.column_np` gives it to NumPy), ``s`` strings (codes of one sorted
dictionary per batch, so ``<`` on codes is Python's string order; NULL is -1). Results equal the
CPU's bit for bit (the machine's scalar semantics, :mod:`replaydb.operators.exprcode.scalar`, are
NumPy's; ``exp``/``log``/``log10``/``pow`` on a real device may differ in the last unit of
precision, the one documented way a device result may differ). User text is never ``eval``-ed.

Two kinds of "no":

* :class:`GpuUnsupported` (a :class:`~replaydb.errors.QueryError`), raised when an operator is
  *bound*: the tree uses a feature the device operators do not have (``ROUND``, ``LOWER``,
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

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda

from replaydb.errors import QueryError
from replaydb.operators.expr import Binary, Call, Column, Expr, Literal, Star, Unary
from replaydb.operators.exprcode import opcodes as oc
from replaydb.operators.exprcode.program import Program, lower
from replaydb.operators.exprcode.scalar import CMP_CODES
from replaydb.operators.exprcode.typed import Typed, type_condition

DEPTH = 24
"""Stack depth of the device machine (each of the two stacks)."""

DEVICE_CALLS = frozenset({"ABS", "SQRT", "LN", "LOG10", "EXP", "FLOOR", "CEIL", "POWER", "LEAST",
                          "GREATEST"})
"""Row-wise functions the device operators take (the others refuse at bind time)."""


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
        elif isinstance(node, Binary) and node.op not in (*CMP_CODES, "+", "-", "*", "/", "%",
                                                          "and", "or"):
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
ColumnKey = Any  # the filter uses names, the join (source, name)


@dataclass
class ColumnSlot:
    """Where a column lives for the machine: source (0/1), matrix ('i'/'f'), row, kind."""

    src: int
    matrix: str
    row: int
    kind: str


class _RowScope:
    """The device side of the typed form: columns of one or two sources' int and float
    matrices, string literals as codes of this batch's dictionary (in string order)."""

    float_domain = False
    ordered_strings = True
    boolean_conditions = False

    def __init__(self, resolve: Any) -> None:
        self.resolve = resolve  # Column -> ColumnSlot (raises NotCompilable / QueryError)
        self.strs: dict[str, int] = {}

    def leaf(self, e: Expr) -> Typed:
        if not isinstance(e, Column):
            raise NotCompilable(f"the node {type(e).__name__}")
        s = self.resolve(e)
        if s.kind == "x":
            raise NotCompilable(f"column {e.name!r} has a type the device does not model")
        if s.matrix == "i":
            return Typed(oc.LDI, s.kind, "I", a=s.row, b=s.src)
        return Typed(oc.LDF, s.kind, "F", a=s.row, b=s.src)

    def string(self, value: str, e: Expr) -> Typed:
        return Typed(oc.CS, "s", "I", a=self.strs.setdefault(value, len(self.strs)))

    def call(self, e: Call) -> Typed:  # pragma: no cover - check_expr refuses earlier
        raise NotCompilable(f"the function {e.name}")

    def error(self, message: str, e: Expr) -> Exception:
        return NotCompilable(message)


def compile_predicate(expr: Expr | None, resolve: Any) -> Program:
    """Compile a predicate for the current kinds; ``resolve(Column) -> ColumnSlot``.

    Raises :class:`NotCompilable` when the kinds need behaviour the machine does not model.
    """
    scope = _RowScope(resolve)
    prog = lower(type_condition(expr, scope), sorted(scope.strs, key=scope.strs.__getitem__))
    if prog.depth_i > DEPTH or prog.depth_f > DEPTH:
        raise NotCompilable(f"the predicate needs a stack deeper than {DEPTH}")
    return prog


def on_device(prog: Program) -> tuple[Any, ...]:
    """The program's five instruction arrays as device arrays (copied once per program)."""
    if prog.device is None:
        prog.device = tuple(cuda.to_device(x if len(x) else np.zeros(1, x.dtype))
                            for x in (prog.op, prog.a, prog.b, prog.fc, prog.ic))
    return prog.device


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


