"""Non-negative least squares against an oracle that tries every support.

The optimum's positive variables solve the unconstrained problem on their own columns, so the
smallest residual over every subset of columns whose least-squares solution is non-negative is
the optimum's residual: a brute-force answer for small ``n`` sharing nothing with the
active-set method.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.planner.pattern.nnls import nnls


def _oracle_residual(a: np.ndarray, b: np.ndarray) -> float:
    best = float(np.linalg.norm(b))
    for k in range(1, a.shape[1] + 1):
        for cols in itertools.combinations(range(a.shape[1]), k):
            sol = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
            if (sol >= -1e-12).all():
                best = min(best, float(np.linalg.norm(a[:, cols] @ np.maximum(sol, 0) - b)))
    return best


@st.composite
def problems(draw):
    m = draw(st.integers(1, 14))
    n = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(m, n)) * rng.choice([1e-3, 1.0, 1e3], size=n)
    if draw(st.booleans()):
        a = np.abs(a)  # cost regressors are non-negative
    if n > 1 and draw(st.booleans()):
        a[:, -1] = a[:, 0]  # collinear columns
    b = rng.normal(size=m) * 10.0
    return a, b


@settings(max_examples=300, deadline=None)
@given(problems())
def test_nnls_reaches_the_best_nonnegative_residual(problem):
    a, b = problem
    x, residual = nnls(a, b)
    assert (x >= 0).all()
    assert residual == pytest.approx(float(np.linalg.norm(a @ x - b)), rel=1e-9, abs=1e-9)
    oracle = _oracle_residual(a, b)
    assert residual <= oracle * (1 + 1e-7) + 1e-7 * float(np.linalg.norm(b))


def test_nnls_recovers_exact_nonnegative_coefficients():
    rng = np.random.default_rng(7)
    a = np.abs(rng.normal(size=(200, 6)))
    truth = np.array([0.5, 0.0, 2.0, 0.0, 1e-3, 3.0])
    x, residual = nnls(a, a @ truth)
    np.testing.assert_allclose(x, truth, atol=1e-9)
    assert residual < 1e-9


def test_nnls_clamps_a_negative_unconstrained_solution_to_zero():
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    x, _ = nnls(a, np.array([-1.0, 2.0, 1.0]))
    assert x[0] == 0.0 and x[1] == pytest.approx(1.5)


@pytest.mark.parametrize(("a", "b", "match"), [
    (np.ones((3, 2)), np.ones(2), "do not fit"),
    (np.ones(3), np.ones(3), "do not fit"),
    (np.array([[1.0], [np.nan]]), np.ones(2), "finite"),
])
def test_nnls_rejects_bad_input(a, b, match):
    with pytest.raises(ValueError, match=match):
        nnls(a, b)
