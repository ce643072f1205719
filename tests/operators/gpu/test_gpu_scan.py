"""Device prefix scans (CUDA simulator without a GPU) against NumPy."""

from __future__ import annotations

from replaydb.operators.gpu.testing import fast_thread_switching, use_simulator_unless_gpu

BACKEND = use_simulator_unless_gpu()

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from numba import cuda  # noqa: E402

from replaydb.operators.gpu import scan  # noqa: E402
from replaydb.operators.gpu.device import TPB  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _threads():  # type: ignore[no-untyped-def]
    with fast_thread_switching():
        yield


def ref_scan(x: np.ndarray, L: int, op: int, reverse: bool) -> np.ndarray:
    fn = {scan.ADD: np.add, scan.MIN: np.minimum, scan.MAX: np.maximum}[op]
    out = np.empty_like(x)
    for s in range(0, len(x), L):
        seg = x[s:s + L]
        out[s:s + L] = fn.accumulate(seg[::-1])[::-1] if reverse else fn.accumulate(seg)
    return out


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=3 * TPB * TPB))
def test_exclusive_sum(xs: list[int]) -> None:
    x = np.array(xs, dtype=np.int64)
    out, total = scan.exclusive_sum(cuda.to_device(x if len(x) else np.zeros(1, np.int64)),
                                    len(x))
    assert total == int(x.sum())
    assert np.array_equal(out.copy_to_host()[:len(x)], np.cumsum(x) - x)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 3 * TPB * TPB), st.integers(1, 2 * TPB * TPB),
       st.sampled_from([scan.ADD, scan.MIN, scan.MAX]), st.booleans(), st.booleans(),
       st.integers(0, 2**32 - 1))
def test_segmented_scan_matches_numpy(n: int, L: int, op: int, reverse: bool, floats: bool,
                                      seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(-50, 50, n).astype(np.float64 if floats else np.int64)
    d = cuda.to_device(x)
    scan.segmented_scan(d, n, L, op, reverse=reverse)
    got = d.copy_to_host()
    exp = ref_scan(x, L, op, reverse)
    assert np.array_equal(got, exp)  # small integers: float sums are exact in any order


@pytest.mark.parametrize("op", [scan.FIRST, scan.LAST])
@pytest.mark.parametrize("n,L", [(1, 1), (23, 5), (3 * TPB + 1, 2 * TPB), (TPB * TPB + 3, 40)])
def test_first_last_carry_their_value(op: int, n: int, L: int) -> None:
    rng = np.random.default_rng(n * 7 + L)
    k = rng.permutation(n).astype(np.int64)
    v = rng.random(n)
    dk, dv = cuda.to_device(k), cuda.to_device(v)
    scan.segmented_scan(dk, n, L, op, v=dv)
    gk, gv = dk.copy_to_host(), dv.copy_to_host()
    for s in range(0, n, L):
        for j in range(s, min(n, s + L)):
            seg = k[s:j + 1]
            w = s + int(np.argmin(seg) if op == scan.FIRST else np.argmax(seg))
            assert gk[j] == k[w] and gv[j] == v[w]


def test_identities() -> None:
    assert scan.identity(scan.ADD, np.dtype(np.int64)) == 0
    assert scan.identity(scan.MIN, np.dtype(np.float64)) == np.inf
    assert scan.identity(scan.LAST, np.dtype(np.int64)) == scan.INT_MIN
    scan.segmented_scan(cuda.to_device(np.zeros(1)), 0, 4, scan.ADD)  # n = 0: nothing to do
