"""The expression machine: one definition of every non-load instruction, for every target.

:func:`exec_op` runs one instruction of :mod:`~replaydb.operators.exprcode.opcodes` through the
scalar helpers of :mod:`~replaydb.operators.exprcode.scalar`, for evaluation ``c`` of ``m``
evaluations that run side by side: the stacks are flat arrays, int64 ``si`` and float64 ``sf``,
whose entry ``p`` of evaluation ``c`` is at ``p * m + c`` (a matcher that tests one event against
many partial matches fetches each instruction once for all of them; a single evaluation is
``m = 1, c = 0`` and indexes plain stacks). An evaluator is a loop over a program that performs
its own loads (what a column means differs: a batch row, a pair of rows, a partial match's bound
events) and hands every other instruction to :func:`exec_op`:

* :func:`eval_rows` - one row of one or two sources of column matrices (the GPU filter and
  join);
* :func:`replaydb.operators.greta.edgecode.eval_edge` - a (previous, next) pair of GRETA events;
* :func:`replaydb.operators.pattern.vm.vm_eval` / ``vm_eval_node`` - partial matches and the
  current event (the CPU matchers and the GPU pattern kernels).

These functions are plain Python registered with Numba for every target (``register_jitable``):
``numba.njit`` code and ``numba.cuda`` kernels compile the same source, and the CUDA simulator
runs it as Python; :func:`exec_op` and the evaluators are inlined into their callers (Numba IR
inlining), so a program runs as one loop. The stacks are the caller's scratch arrays (sized by
the program's depths, :attr:`~replaydb.operators.exprcode.program.Program.depth_i` /
``depth_f``), so nothing allocates. Complexity: O(1) per instruction and evaluation.

Numba caches compiled code per calling file: after changing a definition here, remove the
callers' ``__pycache__/*.nbi`` / ``*.nbc`` files (a fresh checkout has none).
"""

from __future__ import annotations

from numba.core.extending import register_jitable

from replaydb.operators.exprcode.opcodes import (
    ABSF,
    ADDF,
    ADDI,
    AND,
    CEILF,
    CF,
    CI,
    CMPF,
    CMPI,
    CMPS,
    CS,
    DIVF,
    EXPF,
    FIRST_COMPUTE,
    FLOORF,
    I2F,
    ISNULLF,
    ISNULLS,
    LDF,
    LDI,
    LNF,
    LOG10F,
    MAXF,
    MINF,
    MINI,
    MODF,
    MODFI,
    MODI,
    MULF,
    MULI,
    NEGF,
    NEGI,
    NOT,
    NOTNULLF,
    OR,
    POWF,
    ROUNDF,
    SQRTF,
    SUBF,
    SUBI,
    TRUTHF,
    TRUTHI,
)
from replaydb.operators.exprcode.scalar import (
    cmp_f,
    cmp_i,
    cmp_s,
    fadd,
    fceil,
    fdiv,
    fexp,
    ffloor,
    fmul,
    fpow,
    fsub,
    ln_f,
    log10_f,
    max_f,
    min_f,
    mod_f,
    mod_fi,
    mod_i,
    round_f,
    sqrt_f,
    truth,
)

_JIT = {"error_model": "numpy"}


@register_jitable(**_JIT)
def _int_op(o, si, pi, m):
    """Int64 arithmetic (wrapping like NumPy); returns the new int depth."""
    if o >= NEGI:
        for c in range((pi - 1) * m, pi * m):
            u = si[c]
            si[c] = -u if (o == NEGI or u < 0) else u
        return pi
    pi -= 1
    for c in range(m):
        u = si[(pi - 1) * m + c]
        v = si[pi * m + c]
        if o == ADDI:
            w = u + v
        elif o == SUBI:
            w = u - v
        elif o == MULI:
            w = u * v
        elif o == MODI:
            w = mod_i(u, v)
        elif o == MINI:
            w = u if u <= v else v
        else:
            w = u if u >= v else v
        si[(pi - 1) * m + c] = w
    return pi


@register_jitable(**_JIT)
def _float_binary(o, sf, pf, m):
    """Float64 operators; returns the new float depth."""
    pf -= 1
    for c in range(m):
        x = sf[(pf - 1) * m + c]
        y = sf[pf * m + c]
        if o == ADDF:
            r = fadd(x, y)
        elif o == SUBF:
            r = fsub(x, y)
        elif o == MULF:
            r = fmul(x, y)
        elif o == DIVF:
            r = fdiv(x, y)
        elif o == MODF:
            r = mod_f(x, y)
        elif o == MODFI:
            r = mod_fi(x, y)
        elif o == POWF:
            r = fpow(x, y)
        elif o == MINF:
            r = min_f(x, y)
        else:
            r = max_f(x, y)
        sf[(pf - 1) * m + c] = r
    return pf


@register_jitable(**_JIT)
def _float_unary(o, a, sf, pf, m):
    """Float64 functions of one value (``a``: ROUND's digits)."""
    for c in range((pf - 1) * m, pf * m):
        x = sf[c]
        if o == NEGF:
            r = -x
        elif o == ABSF:
            r = abs(x)
        elif o == SQRTF:
            r = sqrt_f(x)
        elif o == LNF:
            r = ln_f(x)
        elif o == LOG10F:
            r = log10_f(x)
        elif o == EXPF:
            r = fexp(x)
        elif o == FLOORF:
            r = ffloor(x)
        elif o == CEILF:
            r = fceil(x)
        else:
            r = round_f(x, a)
        sf[c] = r


@register_jitable(**_JIT)
def _float_test(o, a, si, sf, pi, pf, m):
    """Float comparisons, truth and NULL tests (booleans 0/1 onto the int stack); returns the
    new depths."""
    if o == CMPF:
        pf -= 2
        for c in range(m):
            si[pi * m + c] = cmp_f(a, sf[pf * m + c], sf[(pf + 1) * m + c])
        return pi + 1, pf
    pf -= 1
    for c in range(m):
        x = sf[pf * m + c]
        if o == TRUTHF:
            si[pi * m + c] = 1 if truth(x) else 0
        else:
            si[pi * m + c] = 1 if (x != x) == (o == ISNULLF) else 0
    return pi + 1, pf


@register_jitable(**_JIT)
def _int_logic(o, a, si, pi, m):
    """Int comparisons, logic and string NULL tests (booleans 0/1); returns the new int
    depth."""
    if o == CMPI or o == CMPS or o == AND or o == OR:
        pi -= 1
        for c in range(m):
            u = si[(pi - 1) * m + c]
            v = si[pi * m + c]
            if o == CMPI:
                w = cmp_i(a, u, v)
            elif o == CMPS:
                w = cmp_s(a, u, v)
            elif o == AND:
                w = 1 if (u != 0 and v != 0) else 0
            else:
                w = 1 if (u != 0 or v != 0) else 0
            si[(pi - 1) * m + c] = w
        return pi
    for c in range((pi - 1) * m, pi * m):
        u = si[c]
        if o == NOT:
            w = 0 if u != 0 else 1
        elif o == TRUTHI:
            w = 1 if u != 0 else 0
        elif o == ISNULLS:
            w = 1 if u < 0 else 0
        else:  # NOTNULLS
            w = 0 if u < 0 else 1
        si[c] = w
    return pi


@register_jitable(**_JIT)
def exec_op(o, a, fc, ic, si, sf, pi, pf, m):
    """Run instruction ``o`` (operands ``a``, ``fc``, ``ic``) for the ``m`` evaluations that
    share the int stack ``si`` (depth ``pi``) and the float stack ``sf`` (depth ``pf``); returns
    the new depths (the same for every evaluation). O(m)."""
    if o == CF:
        for c in range(m):
            sf[pf * m + c] = fc
        return pi, pf + 1
    if o == CI:
        for c in range(m):
            si[pi * m + c] = ic
        return pi + 1, pf
    if o == I2F:
        for c in range(m):
            sf[pf * m + c] = float(si[(pi - 1) * m + c])
        return pi - 1, pf + 1
    if o < ADDF:
        return _int_op(o, si, pi, m), pf
    if o <= MAXF:
        return pi, _float_binary(o, sf, pf, m)
    if o <= ROUNDF:
        _float_unary(o, a, sf, pf, m)
        return pi, pf
    if o == CMPF or o == TRUTHF or o == ISNULLF or o == NOTNULLF:
        return _float_test(o, a, si, sf, pi, pf, m)
    return _int_logic(o, a, si, pi, m), pf


@register_jitable(**_JIT)
def eval_rows(op, a, b, fc, ic, lo, hi, strc, im0, fm0, r0, im1, fm1, r1, si, sf):
    """Evaluate program ``[lo, hi)`` on row ``r0`` of source 0 and row ``r1`` of source 1;
    returns the final boolean (``si``/``sf``: the stacks of one evaluation).

    A source is an int64 and a float64 matrix of shape (columns, rows): ``LDI``/``LDF`` read
    column ``a`` of source ``b``; ``CS`` pushes ``strc[a]``, a string literal's code.
    """
    pi = 0
    pf = 0
    for k in range(lo, hi):
        o = op[k]
        if o >= FIRST_COMPUTE:
            pi, pf = exec_op(o, a[k], fc[k], ic[k], si, sf, pi, pf, 1)
        elif o == LDI:
            si[pi] = im0[a[k], r0] if b[k] == 0 else im1[a[k], r1]
            pi += 1
        elif o == LDF:
            sf[pf] = fm0[a[k], r0] if b[k] == 0 else fm1[a[k], r1]
            pf += 1
        elif o == CS:
            si[pi] = strc[a[k]]
            pi += 1
    return pi == 0 or si[pi - 1] != 0
