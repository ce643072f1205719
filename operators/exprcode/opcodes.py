"""The instruction set of the expression machine.

A program is a post-order sequence of instructions over two stacks, int64 (integers, booleans as
0/1, string codes) and float64 (floats, and every value of the float-domain evaluators; NULL is
NaN). Each instruction has an opcode and three operands: ``a`` and ``b`` (small ints: a column,
source, slot or comparison code) and one constant, ``fc`` (float64) or ``ic`` (int64).

Opcodes below :data:`FIRST_COMPUTE` are *loads*: what they read depends on the evaluator (a batch
row, a pair of rows, a partial match's bound events and running aggregates), and each evaluator
implements the loads its programs use. Every other opcode is computed by
:func:`replaydb.operators.exprcode.machine.exec_op`, the same definition on every target.
"""

from __future__ import annotations

# loads ----------------------------------------------------------------------------------------
LDI = 1          # push int   column a of source b (row machine)
LDF = 2          # push float column a of source b (row machine, GRETA), of the current event
                 # (pattern machine)
CS = 3           # push int   the code of string literal a in this batch
LDBOUND = 4      # push float column b of the event bound in int slot a, NaN when unset
LDFIRSTCUR = 5   # like LDBOUND, the current event when the slot is unset
LDAGG = 6        # push float running aggregate: float slots a..a+3 (count, sum, min, max),
                 # b = function * 2 + (current event included), ic = its column
LDROWS = 7       # push float float slot a + b (a row count, + 1 with the current event)
LDSLOT = 8       # push float int slot a's value (a bound row's variable), b when unset or
                 # a < 0 (NaN when b < 0), NaN when ic > 0 and slot ic - 1 is unset

FIRST_COMPUTE = 10

# constants and conversion ---------------------------------------------------------------------
CI = 10          # push int ic
CF = 11          # push float fc
I2F = 12         # int -> float (NumPy's int64 -> float64 rounding)

# int64 arithmetic (wraps like NumPy): binary, then unary ------------------------------------
ADDI = 20
SUBI = 21
MULI = 22
MODI = 23        # floor modulo; the compiler guarantees a nonzero divisor
MINI = 24
MAXI = 25
NEGI = 26
ABSI = 27

# float64 binary operators ---------------------------------------------------------------------
ADDF = 30
SUBF = 31
MULF = 32
DIVF = 33
MODF = 34        # floor modulo of floats (NumPy's remainder), NULL for a zero divisor
MODFI = 35       # MODF of integers held as floats (+0 for a zero remainder)
POWF = 36
MINF = 37        # NumPy's minimum: NaN propagates
MAXF = 38

# float64 unary functions ----------------------------------------------------------------------
NEGF = 40
ABSF = 41
SQRTF = 42
LNF = 43
LOG10F = 44
EXPF = 45
FLOORF = 46
CEILF = 47
ROUNDF = 48      # NumPy's round to a digits

# comparisons: a = comparison code (scalar.EQ ...), push 0/1 on the int stack ----------------
CMPI = 50
CMPF = 51
CMPS = 52        # string codes: NULL (-1) compares false

# logic and nulls (booleans on the int stack) ------------------------------------------------
AND = 60
OR = 61
NOT = 62
TRUTHF = 63      # float -> 0/1 (NULL and 0 are false)
TRUTHI = 64      # int -> 0/1
ISNULLF = 65     # float -> 0/1
NOTNULLF = 66
ISNULLS = 67     # string code -> 0/1
NOTNULLS = 68

_UNARY_F = (NEGF, ABSF, SQRTF, LNF, LOG10F, EXPF, FLOORF, CEILF, ROUNDF)
_BINARY_F = (ADDF, SUBF, MULF, DIVF, MODF, MODFI, POWF, MINF, MAXF)
_BINARY_I = (ADDI, SUBI, MULI, MODI, MINI, MAXI, AND, OR, CMPI, CMPS)

EFFECT: dict[int, tuple[int, int]] = {
    LDI: (1, 0), CS: (1, 0), CI: (1, 0),
    LDF: (0, 1), LDBOUND: (0, 1), LDFIRSTCUR: (0, 1), LDAGG: (0, 1), LDROWS: (0, 1), LDSLOT: (0, 1),
    CF: (0, 1),
    I2F: (-1, 1), NEGI: (0, 0), ABSI: (0, 0), NOT: (0, 0), TRUTHI: (0, 0), ISNULLS: (0, 0),
    NOTNULLS: (0, 0), CMPF: (1, -2), TRUTHF: (1, -1), ISNULLF: (1, -1), NOTNULLF: (1, -1),
    **{o: (0, 0) for o in _UNARY_F}, **{o: (0, -1) for o in _BINARY_F},
    **{o: (-1, 0) for o in _BINARY_I},
}
"""Net change of (int stack, float stack) depth per opcode."""

NAMES = {v: k for k, v in globals().items() if k.isupper() and isinstance(v, int)
         and k not in ("FIRST_COMPUTE",)}
"""Opcode -> name, for printing programs."""
