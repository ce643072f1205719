"""A tiny stack machine that evaluates cross-event predicates inside Numba kernels.

Conditions that refer only to the current event are evaluated vectorized with NumPy over a batch
(one boolean column per variable, see :mod:`replaydb.operators.pattern.compile`). Conditions that
refer to earlier bound events (``C.temp >= A.temp + 5``, ``abs(b.x - LAST(b.x, 1)) <= d``,
``price > AVG(b.price)``) depend on the partial match, so they are compiled from the parsed
expression into this machine's code and run per (partial match, event) inside the matchers'
compiled loops. User text is never ``eval``-ed: a program is a list of opcodes built from the AST.

Values are float64 (bools as 0/1, strings as codes of one dictionary shared by all string
columns, NULL as NaN); integers are exact up to 2**53. Logic is two-valued like
:mod:`replaydb.operators.expr`: a comparison with NULL is false, NOT of it is true.

A program is four parallel arrays ``op, ia, ib, fc`` (opcode, two int operands, one float
operand). Operand meaning per opcode is documented next to the constants. ``ctx_i`` (int64 slots:
event indices of bound rows) and ``ctx_f`` (float64 slots: running counts, sums, minima, maxima)
are the partial match's computation state (SASE+'s vector V); node ``-1`` means the empty state of
a run that is just starting (``init_f`` gives its float slots).

Complexity: O(program length) per evaluation, no allocation.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# opcodes -------------------------------------------------------------------------------------
OP_CONST = 0      # push fc
OP_CUR = 1        # push buf[ia, g - base]                      (current event's column ia)
OP_BOUND = 2      # push buf[ib, ctx_i[slot ia] - base] or NaN  (a bound row's column)
OP_FIRSTCUR = 3   # like OP_BOUND but the current event when the slot is unset
OP_AGG = 4        # aggregate over float slots ia..ia+3 (nn, sum, min, max); ib = fn*2 + include
                  # current; fc = column (as float) whose current value is included
OP_ROWS = 5       # push ctx_f[ia] + ib                         (row count, + 1 with current)
OP_ADD = 10
OP_SUB = 11
OP_MUL = 12
OP_DIV = 13
OP_MOD = 14
OP_NEG = 15
OP_EQ = 20
OP_NE = 21
OP_LT = 22
OP_LE = 23
OP_GT = 24
OP_GE = 25
OP_AND = 30
OP_OR = 31
OP_NOT = 32
OP_ISNULL = 33
OP_NOTNULL = 34
OP_ABS = 40
OP_SQRT = 41
OP_FLOOR = 42
OP_CEIL = 43
OP_EXP = 44
OP_LN = 45
OP_POW = 46
OP_MIN2 = 47
OP_MAX2 = 48
OP_ROUND = 49
OP_LOG10 = 50
OP_TRUTH = 51     # coerce to 0/1

AGG_SUM = 0
AGG_AVG = 1
AGG_MIN = 2
AGG_MAX = 3
AGG_COUNT = 4

STACK_SIZE = 256


@njit(cache=True, inline="always")
def _truth(x: float) -> bool:
    return x == x and x != 0.0


@njit(cache=True, error_model="numpy")
def vm_eval(op, ia, ib, fc, lo, hi, buf, base, g, ctx_i, ctx_f, init_f, node, stack):  # noqa: C901
    """Run program ``[lo, hi)`` for event ``g`` against partial match ``node``; returns bool."""
    sp = 0
    nan = np.nan
    for k in range(lo, hi):
        o = op[k]
        if o == OP_CONST:
            stack[sp] = fc[k]
            sp += 1
        elif o == OP_CUR:
            stack[sp] = buf[ia[k], g - base]
            sp += 1
        elif o == OP_BOUND or o == OP_FIRSTCUR:
            idx = -1
            if node >= 0:
                idx = ctx_i[node, ia[k]]
            if idx < 0 and o == OP_FIRSTCUR:
                idx = g
            if idx < 0:
                stack[sp] = nan
            else:
                stack[sp] = buf[ib[k], idx - base]
            sp += 1
        elif o == OP_AGG:
            s0 = ia[k]
            if node >= 0:
                nn = ctx_f[node, s0]
                sm = ctx_f[node, s0 + 1]
                mn = ctx_f[node, s0 + 2]
                mx = ctx_f[node, s0 + 3]
            else:
                nn = init_f[s0]
                sm = init_f[s0 + 1]
                mn = init_f[s0 + 2]
                mx = init_f[s0 + 3]
            fn = ib[k] >> 1
            if ib[k] & 1:
                x = buf[int(fc[k]), g - base]
                if x == x:
                    nn += 1.0
                    sm += x
                    if x < mn:
                        mn = x
                    if x > mx:
                        mx = x
            if fn == AGG_COUNT:
                r = nn
            elif nn == 0.0:
                r = nan
            elif fn == AGG_SUM:
                r = sm
            elif fn == AGG_AVG:
                r = sm / nn
            elif fn == AGG_MIN:
                r = mn
            else:
                r = mx
            stack[sp] = r
            sp += 1
        elif o == OP_ROWS:
            if node >= 0:
                stack[sp] = ctx_f[node, ia[k]] + ib[k]
            else:
                stack[sp] = init_f[ia[k]] + ib[k]
            sp += 1
        elif o < 20:
            if o == OP_NEG:
                stack[sp - 1] = -stack[sp - 1]
                continue
            b = stack[sp - 1]
            a = stack[sp - 2]
            sp -= 1
            if o == OP_ADD:
                r = a + b
            elif o == OP_SUB:
                r = a - b
            elif o == OP_MUL:
                r = a * b
            elif o == OP_DIV:
                r = a / b
            else:  # OP_MOD: floor modulo on integral values, fmod otherwise
                if b == 0.0 or a != a or b != b:
                    r = nan
                elif a == math.floor(a) and b == math.floor(b):
                    r = a - b * math.floor(a / b)
                else:
                    r = np.fmod(a, b)
            stack[sp - 1] = r
        elif o < 30:
            b = stack[sp - 1]
            a = stack[sp - 2]
            sp -= 1
            if a != a or b != b:
                r = 0.0
            elif o == OP_EQ:
                r = 1.0 if a == b else 0.0
            elif o == OP_NE:
                r = 1.0 if a != b else 0.0
            elif o == OP_LT:
                r = 1.0 if a < b else 0.0
            elif o == OP_LE:
                r = 1.0 if a <= b else 0.0
            elif o == OP_GT:
                r = 1.0 if a > b else 0.0
            else:
                r = 1.0 if a >= b else 0.0
            stack[sp - 1] = r
        elif o == OP_AND or o == OP_OR:
            b = stack[sp - 1]
            a = stack[sp - 2]
            sp -= 1
            if o == OP_AND:
                stack[sp - 1] = 1.0 if (_truth(a) and _truth(b)) else 0.0
            else:
                stack[sp - 1] = 1.0 if (_truth(a) or _truth(b)) else 0.0
        elif o == OP_NOT:
            stack[sp - 1] = 0.0 if _truth(stack[sp - 1]) else 1.0
        elif o == OP_TRUTH:
            stack[sp - 1] = 1.0 if _truth(stack[sp - 1]) else 0.0
        elif o == OP_ISNULL:
            x = stack[sp - 1]
            stack[sp - 1] = 1.0 if x != x else 0.0
        elif o == OP_NOTNULL:
            x = stack[sp - 1]
            stack[sp - 1] = 0.0 if x != x else 1.0
        elif o == OP_ABS:
            stack[sp - 1] = abs(stack[sp - 1])
        elif o == OP_SQRT:
            stack[sp - 1] = math.sqrt(stack[sp - 1]) if stack[sp - 1] >= 0 else nan
        elif o == OP_FLOOR:
            stack[sp - 1] = math.floor(stack[sp - 1]) if stack[sp - 1] == stack[sp - 1] else nan
        elif o == OP_CEIL:
            stack[sp - 1] = math.ceil(stack[sp - 1]) if stack[sp - 1] == stack[sp - 1] else nan
        elif o == OP_EXP:
            stack[sp - 1] = math.exp(stack[sp - 1])
        elif o == OP_LN:
            x = stack[sp - 1]
            stack[sp - 1] = math.log(x) if x > 0 else (-np.inf if x == 0 else nan)
        elif o == OP_LOG10:
            x = stack[sp - 1]
            stack[sp - 1] = math.log10(x) if x > 0 else (-np.inf if x == 0 else nan)
        elif o == OP_ROUND:
            x = stack[sp - 1]
            stack[sp - 1] = np.round(x, ia[k]) if x == x else nan
        elif o == OP_POW or o == OP_MIN2 or o == OP_MAX2:
            b = stack[sp - 1]
            a = stack[sp - 2]
            sp -= 1
            if o == OP_POW:
                r = a ** b
            elif a != a or b != b:
                r = nan
            elif o == OP_MIN2:
                r = a if a < b else b
            else:
                r = a if a > b else b
            stack[sp - 1] = r
    if sp == 0:
        return True
    return _truth(stack[sp - 1])


@njit(cache=True, error_model="numpy")
def vm_eval_many(op, ia, ib, fc, lo, hi, buf, base, g, ctx_i, ctx_f, init_f,  # noqa: C901
                 nodes, sel, m, st, out):
    """Run program ``[lo, hi)`` for event ``g`` against ``m`` partial matches at once.

    Candidate ``c`` (``0 <= c < m``) is partial match ``nodes[sel[c]]``; the result goes to
    ``out[sel[c]]``. Column-at-a-time: every opcode is one tight loop over the candidates, so
    the interpretation cost is paid once per opcode, not once per (opcode, partial match).
    ``st`` is a scratch of shape (stack depth, >= m).
    """
    sp = 0
    nan = np.nan
    for k in range(lo, hi):
        o = op[k]
        if o == OP_CONST:
            x = fc[k]
            for c in range(m):
                st[sp, c] = x
            sp += 1
        elif o == OP_CUR:
            x = buf[ia[k], g - base]
            for c in range(m):
                st[sp, c] = x
            sp += 1
        elif o == OP_BOUND or o == OP_FIRSTCUR:
            s0 = ia[k]
            col = ib[k]
            for c in range(m):
                nd = nodes[sel[c]]
                idx = ctx_i[nd, s0] if nd >= 0 else -1
                if idx < 0 and o == OP_FIRSTCUR:
                    idx = g
                st[sp, c] = nan if idx < 0 else buf[col, idx - base]
            sp += 1
        elif o == OP_AGG:
            s0 = ia[k]
            fn = ib[k] >> 1
            inc = ib[k] & 1
            x = buf[int(fc[k]), g - base] if inc else nan
            for c in range(m):
                nd = nodes[sel[c]]
                if nd >= 0:
                    nn = ctx_f[nd, s0]
                    sm = ctx_f[nd, s0 + 1]
                    mn = ctx_f[nd, s0 + 2]
                    mx = ctx_f[nd, s0 + 3]
                else:
                    nn = init_f[s0]
                    sm = init_f[s0 + 1]
                    mn = init_f[s0 + 2]
                    mx = init_f[s0 + 3]
                if inc and x == x:
                    nn += 1.0
                    sm += x
                    if x < mn:
                        mn = x
                    if x > mx:
                        mx = x
                if fn == AGG_COUNT:
                    r = nn
                elif nn == 0.0:
                    r = nan
                elif fn == AGG_SUM:
                    r = sm
                elif fn == AGG_AVG:
                    r = sm / nn
                elif fn == AGG_MIN:
                    r = mn
                else:
                    r = mx
                st[sp, c] = r
            sp += 1
        elif o == OP_ROWS:
            s0 = ia[k]
            add = ib[k]
            for c in range(m):
                nd = nodes[sel[c]]
                st[sp, c] = (ctx_f[nd, s0] if nd >= 0 else init_f[s0]) + add
            sp += 1
        elif o == OP_NEG:
            for c in range(m):
                st[sp - 1, c] = -st[sp - 1, c]
        elif o < 20:
            sp -= 1
            for c in range(m):
                a = st[sp - 1, c]
                b = st[sp, c]
                if o == OP_ADD:
                    r = a + b
                elif o == OP_SUB:
                    r = a - b
                elif o == OP_MUL:
                    r = a * b
                elif o == OP_DIV:
                    r = a / b
                elif b == 0.0 or a != a or b != b:
                    r = nan
                elif a == math.floor(a) and b == math.floor(b):
                    r = a - b * math.floor(a / b)
                else:
                    r = np.fmod(a, b)
                st[sp - 1, c] = r
        elif o < 30:
            sp -= 1
            for c in range(m):
                a = st[sp - 1, c]
                b = st[sp, c]
                if a != a or b != b:
                    r = 0.0
                elif o == OP_EQ:
                    r = 1.0 if a == b else 0.0
                elif o == OP_NE:
                    r = 1.0 if a != b else 0.0
                elif o == OP_LT:
                    r = 1.0 if a < b else 0.0
                elif o == OP_LE:
                    r = 1.0 if a <= b else 0.0
                elif o == OP_GT:
                    r = 1.0 if a > b else 0.0
                else:
                    r = 1.0 if a >= b else 0.0
                st[sp - 1, c] = r
        elif o == OP_AND or o == OP_OR:
            sp -= 1
            for c in range(m):
                ta = _truth(st[sp - 1, c])
                tb = _truth(st[sp, c])
                st[sp - 1, c] = 1.0 if ((ta and tb) if o == OP_AND else (ta or tb)) else 0.0
        elif o == OP_POW or o == OP_MIN2 or o == OP_MAX2:
            sp -= 1
            for c in range(m):
                a = st[sp - 1, c]
                b = st[sp, c]
                if o == OP_POW:
                    r = a ** b
                elif a != a or b != b:
                    r = nan
                elif o == OP_MIN2:
                    r = a if a < b else b
                else:
                    r = a if a > b else b
                st[sp - 1, c] = r
        else:
            for c in range(m):
                x = st[sp - 1, c]
                if o == OP_NOT:
                    r = 0.0 if _truth(x) else 1.0
                elif o == OP_TRUTH:
                    r = 1.0 if _truth(x) else 0.0
                elif o == OP_ISNULL:
                    r = 1.0 if x != x else 0.0
                elif o == OP_NOTNULL:
                    r = 0.0 if x != x else 1.0
                elif o == OP_ABS:
                    r = abs(x)
                elif o == OP_SQRT:
                    r = math.sqrt(x) if x >= 0 else nan
                elif o == OP_FLOOR:
                    r = math.floor(x) if x == x else nan
                elif o == OP_CEIL:
                    r = math.ceil(x) if x == x else nan
                elif o == OP_EXP:
                    r = math.exp(x)
                elif o == OP_LN:
                    r = math.log(x) if x > 0 else (-np.inf if x == 0 else nan)
                elif o == OP_LOG10:
                    r = math.log10(x) if x > 0 else (-np.inf if x == 0 else nan)
                else:  # OP_ROUND
                    r = np.round(x, ia[k]) if x == x else nan
                st[sp - 1, c] = r
    for c in range(m):
        out[sel[c]] = True if sp == 0 else _truth(st[sp - 1, c])


def max_stack_depth(op: np.ndarray, lo: int, hi: int) -> int:
    """Largest stack depth program ``[lo, hi)`` reaches (for sizing scratch space)."""
    push = {OP_CONST, OP_CUR, OP_BOUND, OP_FIRSTCUR, OP_AGG, OP_ROWS}
    binary = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT,
              OP_GE, OP_AND, OP_OR, OP_POW, OP_MIN2, OP_MAX2}
    sp = best = 0
    for k in range(lo, hi):
        o = int(op[k])
        if o in push:
            sp += 1
        elif o in binary:
            sp -= 1
        best = max(best, sp)
    return best
