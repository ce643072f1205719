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

from numba.core.extending import intrinsic, overload, register_jitable
from numba.np.arrayobj import populate_array

from replaydb.operators.exprcode.opcodes import (
    ABSF,
    ABSI,
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
    MAXI,
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
    NOTNULLS,
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
    cmp_f_in,
    cmp_in,
    cmp_mask,
    cmp_s_in,
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


def borrowed(arr):  # type: ignore[no-untyped-def]
    """``arr`` itself, for an evaluator's scratch stacks. Compiled for the CPU it is a view
    without a reference count (no memory-info pointer), so handing the stacks to
    :func:`exec_op` once per instruction costs no atomic reference counting; the caller owns
    ``arr`` for as long as the view is used (an evaluation's stacks). On the GPU and in the
    CUDA simulator it is the array. O(1)."""
    return arr


@intrinsic
def _view_without_refcount(typingctx, arr):  # type: ignore[no-untyped-def]
    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        out = context.make_array(sig.return_type)(context, builder)
        populate_array(out, data=ary.data, shape=ary.shape, strides=ary.strides,
                       itemsize=ary.itemsize, meminfo=None)
        return out._getvalue()

    return arr(arr), codegen


@overload(borrowed, target="cpu", inline="always")
def _borrowed_cpu(arr):  # type: ignore[no-untyped-def]
    return lambda arr: _view_without_refcount(arr)


@overload(borrowed, target="cuda")
def _borrowed_cuda(arr):  # type: ignore[no-untyped-def]
    return lambda arr: arr
_SCALAR = {"inline": "always", "error_model": "numpy"}


@register_jitable(**_SCALAR)
def int_binary(o, u, v):
    """Int64 operator ``o`` of two values (wrapping like NumPy; logic gives 0/1)."""
    if o == ADDI:
        return u + v
    if o == SUBI:
        return u - v
    if o == MULI:
        return u * v
    if o == MODI:
        return mod_i(u, v)
    if o == MINI:
        return u if u <= v else v
    if o == MAXI:
        return u if u >= v else v
    if o == AND:
        return 1 if (u != 0 and v != 0) else 0
    return 1 if (u != 0 or v != 0) else 0  # OR


@register_jitable(**_SCALAR)
def int_unary(o, u):
    """Int64 function ``o`` of one value (negation, absolute value, logic and string NULL
    tests: 0/1)."""
    if o == NEGI:
        return -u
    if o == ABSI:
        return -u if u < 0 else u
    if o == NOT:
        return 0 if u != 0 else 1
    if o == TRUTHI:
        return 1 if u != 0 else 0
    if o == ISNULLS:
        return 1 if u < 0 else 0
    return 0 if u < 0 else 1  # NOTNULLS


@register_jitable(**_SCALAR)
def float_binary(o, x, y):
    """Float64 operator ``o`` of two values."""
    if o == ADDF:
        return fadd(x, y)
    if o == SUBF:
        return fsub(x, y)
    if o == MULF:
        return fmul(x, y)
    if o == DIVF:
        return fdiv(x, y)
    if o == MODF:
        return mod_f(x, y)
    if o == MODFI:
        return mod_fi(x, y)
    if o == POWF:
        return fpow(x, y)
    if o == MINF:
        return min_f(x, y)
    return max_f(x, y)


@register_jitable(**_SCALAR)
def float_unary(o, a, x):
    """Float64 function ``o`` of one value (``a``: ROUND's digits)."""
    if o == NEGF:
        return -x
    if o == ABSF:
        return abs(x)
    if o == SQRTF:
        return sqrt_f(x)
    if o == LNF:
        return ln_f(x)
    if o == LOG10F:
        return log10_f(x)
    if o == EXPF:
        return fexp(x)
    if o == FLOORF:
        return ffloor(x)
    if o == CEILF:
        return fceil(x)
    return round_f(x, a)


@register_jitable(**_SCALAR)
def float_test(o, x):
    """0/1: the truth of ``x`` (NULL and 0 are false) or whether it is (not) NULL."""
    if o == TRUTHF:
        return 1 if truth(x) else 0
    return 1 if (x != x) == (o == ISNULLF) else 0


@register_jitable(**_SCALAR)
def exec_op(o, a, fc, ic, si, sf, pi, pf, m):
    """Run instruction ``o`` (operands ``a``, ``fc``, ``ic``) for the ``m`` evaluations that
    share the int stack ``si`` (depth ``pi``) and the float stack ``sf`` (depth ``pf``): entry
    ``p`` of evaluation ``c`` is at ``p * m + c``. Returns the new depths (the same for every
    evaluation). The scalar functions above compute every value; this one moves them on the
    stacks, one loop over the evaluations per instruction. O(m)."""
    ti = (pi - 1) * m  # top of the int stack
    tf = (pf - 1) * m  # top of the float stack
    if o == CF:
        for c in range(m):
            sf[tf + m + c] = fc
        return pi, pf + 1
    if o == CI:
        for c in range(m):
            si[ti + m + c] = ic
        return pi + 1, pf
    if o == I2F:
        for c in range(m):
            sf[tf + m + c] = float(si[ti + c])
        return pi - 1, pf + 1
    if o == NEGI or o == ABSI or o == NOT or o == TRUTHI or o == ISNULLS or o == NOTNULLS:
        for c in range(m):
            si[ti + c] = int_unary(o, si[ti + c])
        return pi, pf
    if o <= MAXI or o == AND or o == OR:
        for c in range(m):
            si[ti - m + c] = int_binary(o, si[ti - m + c], si[ti + c])
        return pi - 1, pf
    if o == CMPI:
        mask = cmp_mask(a)
        for c in range(m):
            si[ti - m + c] = cmp_in(mask, si[ti - m + c], si[ti + c])
        return pi - 1, pf
    if o == CMPS:
        mask = cmp_mask(a)
        for c in range(m):
            si[ti - m + c] = cmp_s_in(mask, si[ti - m + c], si[ti + c])
        return pi - 1, pf
    if o == SUBF:  # the common arithmetic gets its own loop (no dispatch per evaluation)
        for c in range(m):
            sf[tf - m + c] = fsub(sf[tf - m + c], sf[tf + c])
        return pi, pf - 1
    if o == ADDF:
        for c in range(m):
            sf[tf - m + c] = fadd(sf[tf - m + c], sf[tf + c])
        return pi, pf - 1
    if o <= MAXF:
        for c in range(m):
            sf[tf - m + c] = float_binary(o, sf[tf - m + c], sf[tf + c])
        return pi, pf - 1
    if o == ABSF:
        for c in range(m):
            sf[tf + c] = abs(sf[tf + c])
        return pi, pf
    if o <= ROUNDF:
        for c in range(m):
            sf[tf + c] = float_unary(o, a, sf[tf + c])
        return pi, pf
    if o == CMPF:
        mask = cmp_mask(a)
        for c in range(m):
            si[ti + m + c] = cmp_f_in(mask, sf[tf - m + c], sf[tf + c])
        return pi + 1, pf - 2
    for c in range(m):  # TRUTHF, ISNULLF, NOTNULLF
        si[ti + m + c] = float_test(o, sf[tf + c])
    return pi + 1, pf - 1


@register_jitable(**_JIT)
def eval_rows(op, a, b, fc, ic, lo, hi, strc, im0, fm0, r0, im1, fm1, r1, si, sf):
    """Evaluate program ``[lo, hi)`` on row ``r0`` of source 0 and row ``r1`` of source 1;
    returns the final boolean (``si``/``sf``: the stacks of one evaluation).

    A source is an int64 and a float64 matrix of shape (columns, rows): ``LDI``/``LDF`` read
    column ``a`` of source ``b``; ``CS`` pushes ``strc[a]``, a string literal's code.
    """
    si = borrowed(si)
    sf = borrowed(sf)
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
