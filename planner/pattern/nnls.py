"""Non-negative least squares, the fit behind the cost calibrations.

``nnls(a, b)`` minimizes ``||a x - b||_2`` subject to ``x >= 0`` with the active-set method of
Lawson and Hanson (Solving Least Squares Problems, 1974, chapter 23): variables move from the
active set (held at zero) to the passive set (solved for freely) one at a time, the one whose
gradient most wants to grow first; when an unconstrained solution on the passive set leaves a
variable negative, the step is cut back to the boundary and the variables reaching zero return
to the active set. The problems here are small (a few thousand rows, at most a dozen columns).
Each iteration solves one least-squares problem on the passive columns: O(m n^2), at most
``10 n`` iterations, then RuntimeError. A variable whose entry rounding makes useless (its
solution is not positive although its gradient was) is refused until another one moves, so the
method cannot cycle on it.
"""

from __future__ import annotations

import numpy as np

MAX_ITERATIONS_PER_VARIABLE = 10
"""Iterations allowed per column before the method gives up (the usual bound is 3; refused
entries, see :func:`nnls`, take iterations too)."""


def nnls(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    """The ``x >= 0`` minimizing ``||a x - b||_2`` and that norm, for ``a`` of shape (m, n)
    and ``b`` of shape (m,). ValueError for shapes that do not fit or values that are not
    finite; RuntimeError when the method does not converge in ``10 n`` iterations."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 1 or a.shape[0] != b.shape[0]:
        raise ValueError(f"nnls: a of shape {a.shape} and b of shape {b.shape} do not fit")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("nnls: a and b must be finite")
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    refused = np.zeros(n, dtype=bool)
    tol = 10.0 * np.finfo(np.float64).eps * max(a.shape) * max(np.abs(a).sum(axis=0).max(
        initial=0.0), 1.0)
    for _ in range(MAX_ITERATIONS_PER_VARIABLE * n + 1):
        gradient = a.T @ (b - a @ x)
        wanting = ~passive & ~refused & (gradient > tol)
        if not wanting.any():
            return x, float(np.linalg.norm(a @ x - b))
        j = int(np.argmax(np.where(wanting, gradient, -np.inf)))
        passive[j] = True
        s = _passive_solution(a, b, passive)
        if s[j] <= 0.0:  # rounding: the variable cannot grow after all; not again until x moves
            passive[j] = False
            refused[j] = True
            continue
        refused[:] = False
        x, passive = _inner_loop(a, b, x, s, passive, tol)
    raise RuntimeError(f"nnls: no convergence in {MAX_ITERATIONS_PER_VARIABLE * n} iterations")


def _inner_loop(a: np.ndarray, b: np.ndarray, x: np.ndarray, s: np.ndarray,
                passive: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """From ``s``, the solution on the passive columns: while it leaves a passive variable
    below zero, step from ``x`` towards it as far as every variable stays non-negative, move
    the variables that reach zero to the active set and solve again. Returns the new ``x``
    and passive set."""
    while True:
        blocking = passive & (s < 0.0)
        if not blocking.any():
            return s, passive
        ratios = np.full(len(x), np.inf)
        ratios[blocking] = x[blocking] / (x[blocking] - s[blocking])
        first = int(np.argmin(ratios))
        x = x + ratios[first] * (s - x)
        x[first] = 0.0
        passive = passive & (x > tol)
        x[~passive] = 0.0
        if not passive.any():
            return x, passive
        s = _passive_solution(a, b, passive)


def _passive_solution(a: np.ndarray, b: np.ndarray, passive: np.ndarray) -> np.ndarray:
    """The unconstrained least-squares solution on the passive columns, zero elsewhere."""
    s = np.zeros(a.shape[1])
    s[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
    return s
