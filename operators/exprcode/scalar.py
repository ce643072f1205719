"""The scalar semantics of expressions, defined once for every compiled evaluator.

Each function here is plain Python that Numba compiles for whichever target calls it: the CPU
machines (``numba.njit`` loops of the pattern matchers and GRETA) and the CUDA kernels (filter,
join, pattern matcher) call the *same* definitions, and the CUDA simulator runs them as Python.
The vectorized NumPy evaluator (:mod:`replaydb.operators.expr`) is the reference they agree with
(``tests/operators/test_expr_machines.py`` holds every evaluator to it on random expressions and data).

Two layers:

* **Target primitives** (:func:`fadd` ... :func:`frint`): one IEEE operation each. The Python body
  is NumPy's (what the simulator and plain Python run); a ``cpu`` overload gives the C library /
  LLVM operation and a ``cuda`` overload the libdevice one. Sums and products use round-to-nearest
  intrinsics on the device, which NVVM never contracts into a fused multiply-add, so arithmetic is
  bit for bit the CPU's. ``exp``, ``log``, ``log10`` and ``pow`` may differ from NumPy's in the
  last unit of precision (NumPy, the C library and libdevice are three implementations), and
  ``pow`` in the sign of a zero (NumPy's ``power(-0.0, 0.5)`` is -0.0, C's +0.0); a
  comparison exactly at such a boundary is the one documented way evaluators may disagree.
* **Semantic helpers** (:func:`truth` ... :func:`agg_value`): the documented decisions
  (``docs/decisions.md``, *Expressions*) - two-valued logic (a comparison with NULL/NaN is false,
  ``NOT`` of it true, ``!=`` with NULL false), true division (``x / 0`` is +-inf or NaN, never an
  error), ``%`` as floor modulo (the divisor's sign; ``x % 0`` is NULL) on every number, NaN
  propagating through LEAST/GREATEST, NumPy's ``round`` (half to even, by scaling).

No function raises, allocates, or touches ``numba.cuda`` (importing this module does not import
it, so a process can still choose the CUDA simulator afterwards). All are O(1).
"""

from __future__ import annotations

import math

import numpy as np
from numba.core.extending import overload, register_jitable

NAN = math.nan
INF = math.inf

EQ, NE, LT, LE, GT, GE = 0, 1, 2, 3, 4, 5
"""Comparison codes (the ``a`` operand of the compare instructions)."""
CMP_CODES = {"=": EQ, "!=": NE, "<": LT, "<=": LE, ">": GT, ">=": GE}

AGG_SUM, AGG_AVG, AGG_MIN, AGG_MAX, AGG_COUNT = 0, 1, 2, 3, 4
"""Running-aggregate functions of :func:`agg_value`."""

_JIT = {"error_model": "numpy"}


def _targets(cpu_impl, cuda_impl=None, *, total=False):  # type: ignore[no-untyped-def]
    """Register ``cpu_impl`` (a function of the primitive's arguments) for the CPU target and
    ``cuda_impl(libdevice)`` (which returns one; None: ``cpu_impl`` too) for the CUDA target.

    A ``total`` primitive (no argument makes it raise: sums, differences, products, floor,
    ceiling, rounding) is inlined into its callers on the CPU; the others are compiled apart
    with NumPy's error model, so a division by zero is inf or NaN whatever the caller's model."""

    def wrap(fn):  # type: ignore[no-untyped-def]
        options = {"inline": "always"} if total else {"jit_options": _JIT}
        overload(fn, target="cpu", strict=False, **options)(lambda *args: cpu_impl)

        def for_cuda(*args):  # type: ignore[no-untyped-def]
            if cuda_impl is None:
                return cpu_impl
            from numba.cuda import libdevice

            return cuda_impl(libdevice)

        overload(fn, target="cuda", strict=False)(for_cuda)
        return fn

    return wrap


# --------------------------------------------------------------------------- target primitives
@_targets(lambda a, b: a + b, lambda ld: lambda a, b: ld.dadd_rn(a, b), total=True)
def fadd(a: float, b: float) -> float:
    """``a + b`` (never fused with a product)."""
    return np.float64(a) + np.float64(b)


@_targets(lambda a, b: a - b, lambda ld: lambda a, b: ld.dadd_rn(a, -b), total=True)
def fsub(a: float, b: float) -> float:
    """``a - b`` (never fused with a product)."""
    return np.float64(a) - np.float64(b)


@_targets(lambda a, b: a * b, lambda ld: lambda a, b: ld.dmul_rn(a, b), total=True)
def fmul(a: float, b: float) -> float:
    """``a * b`` (never fused with a sum)."""
    with np.errstate(all="ignore"):
        return np.float64(a) * np.float64(b)


@_targets(lambda a, b: a / b, lambda ld: lambda a, b: ld.ddiv_rn(a, b))
def fdiv(a: float, b: float) -> float:
    """IEEE division: ``x / 0`` is +-inf, ``0 / 0`` NaN."""
    with np.errstate(all="ignore"):
        return np.true_divide(np.float64(a), np.float64(b))


@_targets(lambda a, b: np.fmod(a, b), lambda ld: lambda a, b: ld.fmod(a, b))
def ffmod(a: float, b: float) -> float:
    """C's ``fmod`` (the sign of ``a``; NaN for ``b == 0`` or infinite ``a``)."""
    with np.errstate(all="ignore"):
        return np.fmod(np.float64(a), np.float64(b))


@_targets(lambda a, b: math.pow(a, b), lambda ld: lambda a, b: ld.pow(a, b))
def fpow(a: float, b: float) -> float:
    with np.errstate(all="ignore"):
        return np.power(np.float64(a), np.float64(b))


@_targets(lambda x: math.sqrt(x), lambda ld: lambda x: ld.sqrt(x))
def fsqrt(x: float) -> float:
    with np.errstate(all="ignore"):
        return np.sqrt(np.float64(x))


@_targets(lambda x: math.exp(x), lambda ld: lambda x: ld.exp(x))
def fexp(x: float) -> float:
    with np.errstate(all="ignore"):
        return np.exp(np.float64(x))


@_targets(lambda x: math.log(x), lambda ld: lambda x: ld.log(x))
def fln(x: float) -> float:
    with np.errstate(all="ignore"):
        return np.log(np.float64(x))


@_targets(lambda x: math.log10(x), lambda ld: lambda x: ld.log10(x))
def flog10(x: float) -> float:
    with np.errstate(all="ignore"):
        return np.log10(np.float64(x))


@_targets(lambda x: np.floor(x), lambda ld: lambda x: ld.floor(x), total=True)
def ffloor(x: float) -> float:
    """Floor as a float (infinities and NaN pass through; no integer conversion)."""
    return np.floor(np.float64(x))


@_targets(lambda x: np.ceil(x), lambda ld: lambda x: ld.ceil(x), total=True)
def fceil(x: float) -> float:
    return np.ceil(np.float64(x))


@_targets(lambda x: np.rint(x), lambda ld: lambda x: ld.rint(x), total=True)
def frint(x: float) -> float:
    """Round half to even, as a float."""
    return np.rint(np.float64(x))


# --------------------------------------------------------------------------- semantic helpers
@register_jitable(**_JIT)
def truth(x: float) -> bool:
    """A float used as a condition: NULL (NaN) and 0 are false."""
    return x == x and x != 0.0


@register_jitable(**_JIT)
def cmp_mask(c: int) -> int:
    """The orderings of two values for which comparison ``c`` holds, as bits: 1 for ``<``, 2
    for ``=``, 4 for ``>``."""
    if c == EQ:
        return 2
    if c == NE:
        return 5
    if c == LT:
        return 1
    if c == LE:
        return 3
    if c == GT:
        return 4
    return 6  # GE


@register_jitable(**_JIT)
def cmp_in(mask: int, x, y) -> int:  # type: ignore[no-untyped-def]
    """0/1: whether the ordering of ``x`` and ``y`` (two numbers, neither NaN) is one of
    ``mask``'s (:func:`cmp_mask`). Branch-free, so a loop over many pairs with one mask
    vectorizes."""
    return (mask >> (int(x >= y) + int(x > y))) & 1


@register_jitable(**_JIT)
def cmp_f_in(mask: int, x: float, y: float) -> int:
    """:func:`cmp_in` of two floats: 0 when either is NULL (NaN), ``!=`` included."""
    return cmp_in(mask, x, y) & int(x == x) & int(y == y)


@register_jitable(**_JIT)
def cmp_f(c: int, x: float, y: float) -> int:
    """Comparison ``c`` of two floats: 0 when either is NULL (NaN), ``!=`` included."""
    return cmp_f_in(cmp_mask(c), x, y)


@register_jitable(**_JIT)
def cmp_s_in(mask: int, x: int, y: int) -> int:
    """:func:`cmp_in` of two string codes (of one sorted dictionary): 0 when either is NULL
    (-1)."""
    return cmp_in(mask, x, y) & int(x >= 0) & int(y >= 0)


@register_jitable(**_JIT)
def mod_f(a: float, b: float) -> float:
    """``%`` on floats: floor modulo, NumPy's ``remainder`` (Python's ``%``): the result has the
    divisor's sign (a zero remainder too); NULL (NaN) for a zero divisor or a NULL operand."""
    if b == 0.0:
        return NAN
    r = ffmod(a, b)
    if r != 0.0:
        if (r < 0.0) != (b < 0.0):
            r = fadd(r, b)
    else:
        r = math.copysign(0.0, b)
    return r


@register_jitable(**_JIT)
def mod_fi(a: float, b: float) -> float:
    """``%`` on integers held as floats: :func:`mod_f`, with +0 for a zero remainder (as an
    integer 0)."""
    return fadd(mod_f(a, b), 0.0)


@register_jitable(**_JIT)
def mod_i(a: int, b: int) -> int:
    """``%`` on int64: floor modulo (the divisor's sign); callers guarantee ``b != 0``."""
    if b == 0 or b == -1:
        return 0
    r = a % b
    if r != 0 and (r < 0) != (b < 0):
        r += b
    return r


@register_jitable(**_JIT)
def min_f(a: float, b: float) -> float:
    """NumPy's ``minimum``: NaN if either is NaN, else ``a`` if ``a < b`` else ``b``."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a < b else b


@register_jitable(**_JIT)
def max_f(a: float, b: float) -> float:
    """NumPy's ``maximum``: NaN if either is NaN, else ``a`` if ``a > b`` else ``b``."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a > b else b


@register_jitable(**_JIT)
def sqrt_f(x: float) -> float:
    """Square root; NaN below zero (-0.0 gives -0.0)."""
    return fsqrt(x) if x >= 0.0 else NAN


@register_jitable(**_JIT)
def ln_f(x: float) -> float:
    """Natural logarithm: -inf at 0, NaN below (and for NaN)."""
    if x > 0.0:
        return fln(x)
    return -INF if x == 0.0 else NAN


@register_jitable(**_JIT)
def log10_f(x: float) -> float:
    if x > 0.0:
        return flog10(x)
    return -INF if x == 0.0 else NAN


@register_jitable(**_JIT)
def pow10(n: int) -> float:
    """``10.0 ** n`` for ``n >= 0`` by repeated multiplication (exact up to 10**22, and equal to
    NumPy's ``round`` scale beyond)."""
    f = 1.0
    for _ in range(n):
        f = fmul(f, 10.0)
    return f


@register_jitable(**_JIT)
def round_f(x: float, nd: int) -> float:
    """NumPy's ``round(x, nd)``: scale by ``10**nd``, round half to even, scale back."""
    if x != x:
        return x
    if nd >= 0:
        f = pow10(nd)
        return fdiv(frint(fmul(x, f)), f)
    f = pow10(-nd)
    return fmul(frint(fdiv(x, f)), f)


@register_jitable(**_JIT)
def agg_value(fn: int, nn: float, sm: float, mn: float, mx: float, x: float) -> float:
    """A running aggregate from its (non-null count, sum, min, max) block, with the current
    value ``x`` included unless it is NULL (pass NaN to exclude it). SUM/AVG/MIN/MAX of no
    values are NULL; COUNT counts the non-null values."""
    if x == x:
        nn += 1.0
        sm = fadd(sm, x)
        if x < mn:
            mn = x
        if x > mx:
            mx = x
    if fn == AGG_COUNT:
        return nn
    if nn == 0.0:
        return NAN
    if fn == AGG_SUM:
        return sm
    if fn == AGG_AVG:
        return fdiv(sm, nn)
    if fn == AGG_MIN:
        return mn
    return mx
