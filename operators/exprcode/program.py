"""Programs: the typed form flattened into parallel instruction arrays.

:func:`lower` walks a :class:`~replaydb.operators.exprcode.typed.Typed` tree in post-order and
appends one instruction per node to a :class:`Builder`; :class:`Program` holds the arrays the
evaluators read (``op``, ``a``, ``b``, ``fc``, ``ic``), and each stack's largest depth (what the
callers' scratch stacks must hold). Several programs may share one builder (the pattern matcher
keeps one program per variable in the same arrays, as ``[lo, hi)`` ranges).

GRETA ships a program as two arrays (:meth:`Program.packed`): ``code`` = ``op | b << 8 | a << 16``
and ``arg`` = the constant (``ic`` as a float for ``CI``: its programs hold only small integers).

Complexity: O(program length).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replaydb.operators.exprcode import opcodes as oc
from replaydb.operators.exprcode.typed import Typed

PACK_OP_BITS = 8
PACK_A_SHIFT = 16


@dataclass
class Program:
    """Instruction arrays of one or more programs and the stack depths they need."""

    op: np.ndarray
    a: np.ndarray
    b: np.ndarray
    fc: np.ndarray
    ic: np.ndarray
    depth_i: int = 0
    depth_f: int = 0
    str_literals: list[str] = field(default_factory=list)
    """String literals in the order of their ``CS`` slots (the row machine's ``strc``)."""
    orders_strings: bool = False
    """Whether a ``CMPS`` orders strings (NumPy raises on comparing ``None`` with ``<``)."""
    device: Any = None
    """A device copy of the arrays, kept by the GPU operators."""

    @property
    def n_ops(self) -> int:
        return int(len(self.op))

    def packed(self) -> tuple[np.ndarray, np.ndarray]:
        """``(code, arg)``: the two-array encoding (see module docstring)."""
        if np.any(self.b >> PACK_OP_BITS) or np.any(self.b < 0):  # a may be negative
            raise ValueError("operands out of range for the packed encoding")
        big = (self.op == oc.CI) & (np.abs(self.ic) > 2**53)
        if np.any(big):
            raise ValueError("an integer constant beyond 2**53 in a packed program")
        code = self.op | (self.b << PACK_OP_BITS) | (self.a << PACK_A_SHIFT)
        arg = np.where(self.op == oc.CI, self.ic.astype(np.float64), self.fc)
        return code.astype(np.int64), arg.astype(np.float64)

    def text(self) -> str:
        """One line per instruction (for error messages and tests)."""
        out = []
        for k in range(self.n_ops):
            o = int(self.op[k])
            out.append(f"{k:3d} {oc.NAMES.get(o, str(o)):10s} a={int(self.a[k])} "
                       f"b={int(self.b[k])} fc={float(self.fc[k])!r} ic={int(self.ic[k])}")
        return "\n".join(out)


class Builder:
    """Appends lowered programs to shared instruction lists."""

    def __init__(self) -> None:
        self.ins: list[tuple[int, int, int, float, int]] = []
        self.depth_i = 0
        self.depth_f = 0
        self.orders_strings = False

    def __len__(self) -> int:
        return len(self.ins)

    def add(self, t: Typed) -> tuple[int, int]:
        """Append ``t``'s program; returns its ``[lo, hi)`` range."""
        lo = len(self.ins)
        di, df = self._emit(t, 0, 0)
        if di != 1 or df != 0:  # pragma: no cover - the typer leaves one value
            raise AssertionError(f"a program must leave one int (left {di} int, {df} float)")
        return lo, len(self.ins)

    def add_value(self, t: Typed) -> tuple[int, int]:
        """Append ``t``'s program leaving its value (on either stack)."""
        lo = len(self.ins)
        self._emit(t, 0, 0)
        return lo, len(self.ins)

    def _emit(self, t: Typed, di: int, df: int) -> tuple[int, int]:
        for x in t.args:
            di, df = self._emit(x, di, df)
        self.ins.append((t.op, t.a, t.b, t.fc, t.ic))
        if t.op == oc.CMPS and t.a not in (0, 1):
            self.orders_strings = True
        ei, ef = oc.EFFECT[t.op]
        di, df = di + ei, df + ef
        self.depth_i = max(self.depth_i, di)
        self.depth_f = max(self.depth_f, df)
        return di, df

    def build(self, str_literals: list[str] | None = None) -> Program:
        ins = self.ins
        return Program(
            op=np.array([x[0] for x in ins], dtype=np.int64),
            a=np.array([x[1] for x in ins], dtype=np.int64),
            b=np.array([x[2] for x in ins], dtype=np.int64),
            fc=np.array([x[3] for x in ins], dtype=np.float64),
            ic=np.array([x[4] for x in ins], dtype=np.int64),
            depth_i=self.depth_i, depth_f=self.depth_f,
            str_literals=list(str_literals or []), orders_strings=self.orders_strings,
        )


def lower(t: Typed, str_literals: list[str] | None = None) -> Program:
    """The program of one condition (its value: 0/1 on the int stack)."""
    b = Builder()
    b.add(t)
    return b.build(str_literals)
