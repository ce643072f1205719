"""The hypoexponential distribution of candidate lengths (dissertation 3.4.3, "Probability
Distribution L").

Under the cost model's assumptions (symbols independent and uniform, constant time between
events) the waiting time for the next occurrence of a basic block with arrival rate ``lambda``
is exponential, and a candidate over several Kleene-star separated blocks waits for each in
turn: its length is the sum of independent exponentials, hypoexponential with rates
``lambda_2 .. lambda_k``. The planner needs, for the (shortened) window ``x``:

* ``P(X <= x)`` - the fraction of first-block occurrences that start a candidate, and
* ``E[X | X <= x]`` - the mean length of those candidates (``mu_c``).

Both come from the survival function ``S``: ``E[X; X <= x] = int_0^x S(t) dt - x S(x)``.

Computation: with well separated rates the closed form ``S(t) = sum_i C_i exp(-lambda_i t)``,
``C_i = prod_{j != i} lambda_j / (lambda_j - lambda_i)`` is used (O(k^2)). When rates are
equal or close (the closed form cancels catastrophically) the phase-type representation is used
instead: sub-generator ``T`` (``-lambda_i`` on the diagonal, ``lambda_i`` above it),
``S(t) = e_1^T expm(T t) 1`` and ``int_0^t S = e_1^T T^{-1} (expm(T t) - I) 1``. The matrix
exponential of this small triangular matrix is computed here by scaling and squaring with a
degree-14 Taylor polynomial (error below 1e-12 after scaling to norm <= 1/2) in plain NumPy, and
the integral through the augmented matrix ``[[T, 1], [0, 0]]`` (Van Loan), so no LAPACK call is
needed: SciPy's ``expm`` pays a BLAS thread start-up per call, more than the whole computation
for such small matrices. O(k^3 log(max rate * t)) for k phases.

Results are memoized on the exact rates: index selection evaluates many configurations that
share their blocks' rates.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

_MAX_COEF = 1e6


def hypo_window(rates: tuple[float, ...] | list[float], x: float) -> tuple[float, float]:
    """``(P(X <= x), E[X | X <= x])`` for ``X ~ Hypo(rates)``; no rates means ``X = 0``.

    A zero rate never arrives (probability 0). ``x = inf`` gives ``(1, E[X])``.
    """
    key = (tuple(rates), x)
    got = _FAST.get(key)
    if got is not None:
        return got
    out = _hypo_window(rates, x)
    if len(_FAST) > 65536:
        _FAST.clear()
    _FAST[key] = out
    return out


_FAST: dict[tuple[tuple[float, ...], float], tuple[float, float]] = {}


def _hypo_window(rates: tuple[float, ...] | list[float], x: float) -> tuple[float, float]:
    if x < 0:
        return 0.0, 0.0
    rs = tuple(sorted(float(r) for r in rates))
    if not rs:
        return 1.0, 0.0
    if rs[0] <= 0.0:
        return 0.0, 0.0
    if math.isinf(x):
        return 1.0, sum(1.0 / r for r in rs)
    return _hypo(rs, float(x))


@lru_cache(maxsize=65536)
def _hypo(rs: tuple[float, ...], x: float) -> tuple[float, float]:
    s, integral = _closed_form(rs, x)
    if s is None:
        s, integral = _phase_type(rs, x)
    s = min(1.0, max(0.0, s))
    p = 1.0 - s
    if p <= 1e-300:
        return 0.0, 0.0
    partial = max(0.0, integral - x * s)  # E[X; X <= x]
    return p, min(x, partial / p)


def _closed_form(rs: tuple[float, ...], x: float) -> tuple[float | None, float]:
    if len(rs) == 1:
        lam = rs[0]
        e = math.exp(-lam * x)
        return e, (1.0 - e) / lam
    coefs = []
    for i, li in enumerate(rs):
        c = 1.0
        for j, lj in enumerate(rs):
            if i != j:
                d = lj - li
                if abs(d) <= 1e-9 * max(lj, li):
                    return None, 0.0
                c *= lj / d
        coefs.append(c)
    if max(abs(c) for c in coefs) > _MAX_COEF:
        return None, 0.0
    s = sum(c * math.exp(-li * x) for c, li in zip(coefs, rs))
    integral = sum(c * (1.0 - math.exp(-li * x)) / li for c, li in zip(coefs, rs))
    return s, integral


def expm_small(a: np.ndarray) -> np.ndarray:
    """``exp(a)`` for a small square matrix: scaling and squaring, Taylor degree 14."""
    norm = float(np.abs(a).sum(axis=0).max()) if a.size else 0.0
    sq = max(0, math.ceil(math.log2(norm)) + 1) if norm > 0.5 else 0
    b = a / (2.0**sq)
    n = a.shape[0]
    out = np.eye(n)
    term = np.eye(n)
    for i in range(1, 15):
        term = term @ b / i
        out = out + term
    for _ in range(sq):
        out = out @ out
    return out


def _phase_type(rs: tuple[float, ...], x: float) -> tuple[float, float]:
    k = len(rs)
    # augmented generator [[T, 1], [0, 0]]: its exponential holds expm(Tx) and
    # int_0^x expm(Tu) du 1 in the last column (Van Loan)
    g = np.zeros((k + 1, k + 1))
    for i, lam in enumerate(rs):
        g[i, i] = -lam
        if i + 1 < k:
            g[i, i + 1] = lam
    g[:k, k] = 1.0
    e = expm_small(g * x)
    return float(e[0, :k].sum()), float(e[0, k])
