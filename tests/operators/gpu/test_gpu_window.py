"""GPU windowed aggregation against the CPU operator and the brute-force oracle.

Float sums are compared with the tolerance documented in :mod:`replaydb.operators.gpu.window`
(the device sums in a different order); counts, minima, maxima, first/last values and integer
sums must be identical.
"""

from __future__ import annotations

from replaydb.operators.gpu.testing import fast_thread_switching, use_simulator_unless_gpu

BACKEND = use_simulator_unless_gpu()

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402
from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from replaydb.operators.expr import Binary, Column, Literal  # noqa: E402
from replaydb.operators.gpu.exprvm import GpuUnsupported  # noqa: E402
from replaydb.operators.gpu.window import DeviceSlideState, GpuWindowAggregate  # noqa: E402
from replaydb.operators.window import AggSpec, WindowAggregate, WindowConfig  # noqa: E402
from replaydb.operators.window.oracle import (  # noqa: E402
    assert_same_rows,
    make_stream,
    oracle,
    split_batches,
)
from tests.helpers import push_all  # noqa: E402

AGGS = (AggSpec("COUNT", None, "n"), AggSpec("SUM", Column("x"), "sx"),
        AggSpec("AVG", Column("x"), "ax"), AggSpec("MIN", Column("y"), "my"),
        AggSpec("MAX", Column("x"), "mx"), AggSpec("FIRST", Column("x"), "fx"),
        AggSpec("LAST", Column("y"), "ly"), AggSpec("VAR_POP", Column("x"), "vx"),
        AggSpec("COUNT", Column("z"), "nz"))
FAST_AGGS = (AggSpec("COUNT", None, "n"), AggSpec("SUM", Column("x"), "sx"),
             AggSpec("MIN", Column("y"), "my"), AggSpec("MAX", Column("x"), "mx"),
             AggSpec("FIRST", Column("x"), "fx"), AggSpec("LAST", Column("y"), "ly"))
"""One aggregate per merge kind (add, min, max, first, last): the default suite's set (every
device scan costs kernel launches, slow in the simulator); the slow tests use :data:`AGGS`."""
APPROX = frozenset({"vx"})
EXACT = ("n", "my", "mx", "fx", "ly", "nz", "window_start", "window_end")


@pytest.fixture(autouse=True, scope="module")
def _threads():  # type: ignore[no-untyped-def]
    with fast_thread_switching():
        yield


def run(cls: type, cfg: WindowConfig, table: pa.Table, seed: int | None, max_len: int = 20,
        check: bool = True) -> tuple[list[dict], object]:
    op = cls(cfg)
    batches = split_batches(table, np.random.default_rng(seed), max_len) if seed is not None \
        else [table]
    return push_all(op, batches, check=check), op


def exact_columns_equal(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        for c in EXACT:
            if c in ra:
                x, y = ra[c], rb[c]
                assert (x == y) or (x != x and y != y), (c, ra, rb)


@st.composite
def configs(draw: st.DrawFn, aggs: tuple[AggSpec, ...] = AGGS) -> WindowConfig:
    kind = draw(st.sampled_from(["time", "time", "count"]))
    size = draw(st.integers(1, 16))
    slide = draw(st.one_of(st.integers(1, size), st.integers(1, 20)))
    align = "first" if kind == "count" else draw(st.sampled_from(["epoch", "first"]))
    offset = draw(st.integers(-5, 5)) if align == "epoch" and kind == "time" else 0
    empty = "emit" if kind == "time" and draw(st.booleans()) else "skip"
    where = draw(st.sampled_from([None, Binary(">", Column("x"), Literal(8.0))]))
    return WindowConfig(size=size, slide=slide, kind=kind, align=align, offset=offset,
                        empty=empty, where=where, aggregates=aggs)


@settings(max_examples=4, deadline=None)
@given(cfg=configs(FAST_AGGS), seed=st.integers(0, 2**32 - 1), n=st.integers(0, 24))
@example(cfg=WindowConfig(size=1, slide=1, aggregates=FAST_AGGS), seed=0, n=24)  # tumbling
def test_gpu_window_matches_cpu_and_oracle(cfg: WindowConfig, seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    table = make_stream(rng, n, keys=1)
    got, op = run(GpuWindowAggregate, cfg, table, seed, max_len=int(rng.integers(5, 40)))
    cpu, _ = run(WindowAggregate, cfg, table, seed, max_len=int(rng.integers(5, 40)))
    assert op.on_device
    assert_same_rows(got, oracle(table, cfg), approx=APPROX)
    exact_columns_equal(got, cpu)


def _windows_vs_batches(size: int, slide: int, kind: str, n: int, small: int,
                        aggs: tuple[AggSpec, ...] = AGGS) -> None:
    rng = np.random.default_rng(size + slide)
    table = make_stream(rng, n, max_step=2, keys=1)
    cfg = WindowConfig(size=size, slide=slide, kind=kind, aggregates=aggs)
    exp = oracle(table, cfg)
    for max_len in (small, n):
        got, _ = run(GpuWindowAggregate, cfg, table, 1 if max_len < n else None, max_len)
        assert_same_rows(got, exp, approx=APPROX)


def test_windows_larger_and_smaller_than_batches() -> None:
    """Batches smaller than the window (ring mostly reused) and larger (several blocks)."""
    _windows_vs_batches(8, 1, "count", 18, 6, FAST_AGGS)


@pytest.mark.slow
@pytest.mark.parametrize("size,slide,kind", [(40, 1, "count"), (41, 2, "count"),
                                             (30, 1, "time"), (7, 3, "time")])
def test_large_windows_small_and_large_batches(size: int, slide: int, kind: str) -> None:
    _windows_vs_batches(size, slide, kind, 150, 11)


def test_integer_sums_are_exact() -> None:
    big = 2**60
    tab = pa.table({"t": np.arange(24), "seq": np.arange(24),
                    "v": pa.array([big if i % 3 else -big + i for i in range(24)], pa.int64())})
    cfg = WindowConfig(size=9, slide=1, kind="count", aggregates=(AggSpec("SUM", Column("v"),
                                                                         "s"),))
    got, _ = run(GpuWindowAggregate, cfg, tab, None)
    cpu, _ = run(WindowAggregate, cfg, tab, None)
    assert got == cpu  # int64 sums (wrapping like NumPy) do not depend on the order


def test_snapshot_restore_equivalence() -> None:
    rng = np.random.default_rng(2)
    table = make_stream(rng, 30, keys=1)
    cfg = WindowConfig(size=8, slide=1, kind="count", aggregates=FAST_AGGS)
    ref, _ = run(GpuWindowAggregate, cfg, table, None, check=False)
    op = GpuWindowAggregate(cfg)
    op.push(table.slice(0, 15))
    snap = op.snapshot()
    op.push(table.slice(15, 8))
    op.restore(snap)
    op.push(table.slice(15))
    op.flush()
    rows = op.results().to_pylist()
    assert_same_rows(rows, ref, approx=APPROX)
    assert isinstance(op.groups[0], DeviceSlideState)


def test_group_by_is_refused_on_the_device_and_runs_on_the_cpu_fallback() -> None:
    """GROUP BY has no device ring per group: the GPU variant refuses it on a kernel backend
    (so the planner keeps the CPU operator and says why), and its CPU fallback answers it."""
    rng = np.random.default_rng(4)
    table = make_stream(rng, 70, keys=3)
    cfg = WindowConfig(size=10, slide=3, group_by=("k",), aggregates=AGGS)
    with pytest.raises(GpuUnsupported, match="GROUP BY"):
        GpuWindowAggregate(cfg, backend=BACKEND)
    op = GpuWindowAggregate(cfg, backend="cpu")
    op.push(table)
    op.flush()
    assert not op.on_device
    assert_same_rows(op.results().to_pylist(), oracle(table, cfg), ("k",), approx=APPROX)


def test_cpu_backend_and_transfer_accounting() -> None:
    rng = np.random.default_rng(6)
    table = make_stream(rng, 50, keys=1)
    cfg = WindowConfig(size=8, slide=2, kind="count", aggregates=AGGS)
    cpu_fallback, op0 = run(GpuWindowAggregate, cfg, table, None)
    assert op0.transfer_bytes()["to_device"] > 0
    op = GpuWindowAggregate(cfg, backend="cpu")
    op.push(table)
    op.flush()
    assert not op.on_device and op.transfer_bytes()["to_device"] == 0
    assert_same_rows(op.results().to_pylist(), cpu_fallback, approx=APPROX)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(cfg=configs(), seed=st.integers(0, 2**32 - 1), n=st.integers(0, 120))
def test_gpu_window_matches_oracle_many(cfg: WindowConfig, seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    table = make_stream(rng, n, keys=1, gap=int(rng.integers(20, 200)))
    got, _ = run(GpuWindowAggregate, cfg, table, seed, max_len=int(rng.integers(1, 60)))
    assert_same_rows(got, oracle(table, cfg), approx=APPROX)


@pytest.mark.gpu
@pytest.mark.skipif(BACKEND != "cuda", reason="needs a CUDA GPU (kernels ran in the simulator)")
def test_window_2_20_on_the_device() -> None:  # pragma: no cover - GPU machines only
    n = 1 << 22
    rng = np.random.default_rng(0)
    tab = pa.table({"t": np.arange(n), "seq": np.arange(n), "x": rng.random(n)})
    cfg = WindowConfig(size=1 << 20, slide=1, kind="count", aggregates=(
        AggSpec("SUM", Column("x"), "s"), AggSpec("MAX", Column("x"), "m")))
    got, _ = run(GpuWindowAggregate, cfg, tab, None, check=False)
    cpu, _ = run(WindowAggregate, cfg, tab, None, check=False)
    assert len(got) == len(cpu)
    assert all(a["m"] == b["m"] and abs(a["s"] - b["s"]) <= 1e-9 * abs(b["s"])
               for a, b in zip(got, cpu))
