"""GPU filter against the CPU filter: the CPU operator's cases, expression semantics, random
streams. Kernels run on the GPU when there is one, else under the CUDA simulator."""

from __future__ import annotations

from replaydb.operators.gpu.testing import (
    fast_thread_switching,
    same_table,
    use_simulator_unless_gpu,
)

BACKEND = use_simulator_unless_gpu()

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from replaydb.errors import QueryError  # noqa: E402
from replaydb.operators.expr import (  # noqa: E402
    Between,
    Binary,
    Call,
    Column,
    Expr,
    InList,
    IsNull,
    Literal,
    Unary,
)
from replaydb.operators.filter import FilterConfig, FilterOperator  # noqa: E402
from replaydb.operators.gpu.exprvm import GpuUnsupported  # noqa: E402
from replaydb.operators.gpu.filter import GpuFilterOperator  # noqa: E402
from tests.helpers import rerun_from_snapshot  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _threads():  # type: ignore[no-untyped-def]
    with fast_thread_switching():
        yield


def both(cfg: FilterConfig, data: pa.Table, chunk: int | None = None) -> tuple:
    """Results (or the error type) of the CPU and the GPU operator, and the GPU operator."""
    out = []
    gpu = GpuFilterOperator(cfg)
    for op in (FilterOperator(cfg), gpu):
        try:
            for b in data.to_batches(max_chunksize=chunk) if chunk else [data]:
                op.push(b)
            op.flush()
            out.append(op.results())
        except Exception as e:  # the GPU operator must fail the same way
            out.append(type(e))
    return out[0], out[1], gpu


def test_kernels_run_on_a_kernel_backend() -> None:
    assert GpuFilterOperator(FilterConfig(None)).backend == BACKEND


def test_fig_2_3_filter_v_greater_3() -> None:
    t = 100
    tab = pa.table({"t": [t, t + 1, t + 3, t + 6, t + 7], "seq": [0, 1, 2, 3, 4],
                    "v": [2, 7, 5, 3, 4]})
    out = GpuFilterOperator(FilterConfig(Binary(">", Column("v"), Literal(3)))).process(tab)
    assert out.column("v").to_pylist() == [7, 5, 4]
    assert out.column("t").to_pylist() == [t + 1, t + 3, t + 7]
    assert out.schema == tab.schema


def test_batches_projection_and_nulls() -> None:
    tab = pa.table({"t": [1, 2, 3, 4], "seq": [0, 1, 2, 3], "v": [1.0, None, 5.0, 4.0],
                    "s": ["a", "b", "a", None]})
    cfg = FilterConfig(Binary("=", Column("s"), Literal("a")), tab.schema, ("t", "v"))
    cpu, gpu, _ = both(cfg, tab, chunk=1)
    assert gpu.to_pydict() == {"t": [1, 3], "v": [1.0, 5.0]} and gpu.equals(cpu)
    cpu, gpu, _ = both(FilterConfig(Binary(">", Column("v"), Literal(0))), tab)
    assert gpu.column("t").to_pylist() == [1, 3, 4] and gpu.equals(cpu)


def test_errors_name_the_column() -> None:
    tab = pa.table({"t": [1], "seq": [0], "v": [1]})
    op = GpuFilterOperator(FilterConfig(Binary(">", Column("w"), Literal(3))))
    with pytest.raises(QueryError, match="'w'"):
        op.push(tab)


def test_snapshot_restore_and_interval() -> None:
    tab = pa.table({"t": [1, 2, 3, 4, 5], "seq": [0, 1, 2, 3, 4], "v": [2, 7, 5, 3, 4]})
    op = GpuFilterOperator(FilterConfig(Binary(">", Column("v"), Literal(3))))
    full = rerun_from_snapshot(op, tab, 2, end_interval=True)
    assert op.results().equals(full)


SEM = pa.table({
    "t": [1, 2, 3, 4, 5, 6, 7],
    "seq": [0, 1, 2, 3, 4, 5, 6],
    "i": pa.array([3, -7, 2, 9, 10, 0, -1], pa.int64()),
    "j": pa.array([2, 2, None, -3, 5, 0, 4], pa.int64()),       # ints with a null: float64
    "x": [1.5, float("nan"), -0.0, 4.0, None, -2.5, 1e300],
    "b": [True, False, True, True, False, False, True],
    "s": ["b", "a", None, "ab", "c", "", "a"],
    "s2": ["b", "b", "c", "d", "c", "", "z"],
    "n32": pa.array([1, 2, 3, 4, 5, 6, 7], pa.int32()),
})

PREDICATES: list[Expr] = [
    Binary(">", Column("i"), Literal(0)),
    Binary(">", Binary("%", Column("i"), Literal(3)), Literal(0)),
    Binary("=", Binary("%", Column("i"), Literal(-4)), Literal(-3)),
    Binary(">", Binary("%", Column("x"), Literal(2)), Literal(0)),          # fmod on floats
    Binary("<", Binary("%", Column("i"), Column("x")), Literal(1)),         # mixed: fmod
    Binary(">=", Binary("/", Column("i"), Column("j")), Literal(0)),        # x/0, null
    Binary("=", Binary("/", Column("i"), Literal(0)), Literal(float("inf"))),
    Binary("<", Binary("*", Column("i"), Column("i")), Binary("+", Column("j"), Literal(40))),
    Binary("!=", Column("x"), Literal(4.0)),                                  # NaN != 4: false
    Binary("!=", Column("j"), Column("i")),
    Binary("=", Column("b"), Literal(True)),
    Binary("and", Column("b"), Binary("<", Column("i"), Literal(5))),
    Unary("not", Column("x")),                                               # NaN is false
    Binary("or", Column("i"), IsNull(Column("x"))),
    Binary("=", Column("s"), Literal("a")),
    Binary("!=", Column("s"), Literal("a")),
    Binary("=", Column("s"), Column("s2")),
    Binary("!=", Column("s"), Column("s2")),
    Binary("=", Column("s"), Literal("zz")),                                 # absent literal
    InList(Column("s"), (Literal("a"), Literal("c"))),
    InList(Column("s"), (Literal("a"), Literal("c")), negated=True),
    InList(Column("i"), (Literal(3), Literal(10), Literal(2.0))),
    IsNull(Column("s")),
    IsNull(Column("j"), negated=True),
    IsNull(Column("i")),
    Between(Column("i"), Literal(0), Literal(9.5)),
    Between(Column("x"), Literal(-3), Literal(2), negated=True),
    Binary("<", Column("s2"), Literal("c")),                                 # no nulls: ordered
    Binary("<", Column("s"), Literal("b")),                                  # CPU raises
    Binary("<=", Column("s"), Column("s2")),                                 # CPU raises
    Binary(">", Call("SQRT", (Column("i"),)), Literal(1.5)),
    Binary(">", Call("LN", (Column("x"),)), Literal(0)),
    Binary("<", Call("LOG10", (Column("i"),)), Literal(0.5)),
    Binary(">", Call("EXP", (Column("x"),)), Literal(2)),
    Binary("=", Call("FLOOR", (Column("x"),)), Literal(1)),
    Binary("=", Call("CEIL", (Column("i"),)), Literal(3.0)),
    Binary(">", Call("ABS", (Column("i"),)), Literal(2)),
    Binary(">", Call("POWER", (Column("i"), Literal(2))), Literal(50)),
    Binary(">", Call("LEAST", (Column("i"), Column("x"), Literal(3))), Literal(0)),
    Binary("<", Call("GREATEST", (Column("i"), Column("j"))), Literal(3)),
    Binary(">", Unary("neg", Column("x")), Literal(0)),
    Binary("<", Column("n32"), Literal(4)),
    Binary(">", Column("t"), Column("seq")),
    Literal(True),
    Literal(None),
    None,
]


@pytest.mark.parametrize("k", range(len(PREDICATES)))
def test_expression_semantics_match_numpy(k: int) -> None:
    """Every predicate runs on the device (ordering NULL strings, where NumPy raises, falls back
    to the CPU code, which raises the same error)."""
    cfg = FilterConfig(PREDICATES[k])
    cpu, gpu, op = both(cfg, SEM)
    fell_back = op.counters.extra.get("cpu_fallback_batches", 0)
    assert fell_back == (not isinstance(cpu, pa.Table))
    if isinstance(cpu, pa.Table):
        assert isinstance(gpu, pa.Table) and same_table(gpu, cpu), (cpu.to_pydict(),
                                                                   gpu.to_pydict())
    else:
        assert gpu == cpu


def test_kinds_the_device_does_not_model_fall_back_per_batch() -> None:
    tab = pa.table({"t": [1, 2, 3], "seq": [0, 1, 2], "f": pa.array([0.1, 0.2, 0.3],
                                                                    pa.float32()),
                    "b": pa.array([True, None, False]), "n": pa.array([1, 2, 3], pa.int16())})
    for pred in (Binary(">", Column("f"), Literal(0.1)),                   # float32 rounding
                 Binary("=", Column("b"), Literal(True)),                  # bool with nulls
                 Binary(">", Binary("+", Column("n"), Literal(1)), Literal(2)),  # narrow int add
                 Binary(">", Binary("%", Column("t"), Column("seq")), Literal(0))):
        cpu, gpu, op = both(FilterConfig(pred), tab)
        assert op.counters.extra["cpu_fallback_batches"] == 1
        if isinstance(cpu, pa.Table):
            assert same_table(gpu, cpu)
        else:
            assert gpu == cpu


@pytest.mark.parametrize("pred,feature", [
    (Binary(">", Call("ROUND", (Column("v"),)), Literal(1)), "ROUND"),
    (Binary("=", Call("LOWER", (Column("s"),)), Literal("a")), "LOWER"),
    (Binary("=", Call("PREV", (Column("v"),)), Literal(1)), "PREV"),
    (Binary(">", Call("SUM", (Column("v"),), "RUNNING"), Literal(1)), "RUNNING SUM"),
    (Binary(">", Column("v", "b", ("prev", 1)), Literal(1)), "subscripted"),
])
def test_unsupported_features_are_refused_by_name(pred: Expr, feature: str) -> None:
    with pytest.raises(GpuUnsupported, match=feature) as ei:
        GpuFilterOperator(FilterConfig(pred))
    assert "GPU filter" in str(ei.value) and ei.value.hint


def test_cpu_backend_is_the_cpu_filter() -> None:
    tab = pa.table({"t": [1, 2], "seq": [0, 1], "v": [1, 5]})
    op = GpuFilterOperator(FilterConfig(Binary(">", Column("v"), Literal(3))), backend="cpu")
    assert op.process(tab).column("v").to_pylist() == [5]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5), st.one_of(st.none(), st.floats(-4, 4)),
                          st.sampled_from(["x", "y", "xy", None])), max_size=40),
       st.integers(-5, 5), st.integers(1, 25), st.integers(0, 5))
def test_random_streams_equal_the_cpu(rows: list, c: int, chunk: int, which: int) -> None:
    n = len(rows)
    tab = pa.table({"t": np.arange(n, dtype=np.int64), "seq": np.arange(n, dtype=np.int64),
                    "v": pa.array([r[0] for r in rows], pa.int64()),
                    "w": pa.array([r[1] for r in rows], pa.float64()),
                    "s": pa.array([r[2] for r in rows], pa.string())})
    pred = [Binary(">=", Column("v"), Literal(c)),
            Binary("<", Binary("+", Column("w"), Column("v")), Literal(c)),
            Binary("or", Binary("=", Column("s"), Literal("xy")), IsNull(Column("w"))),
            Between(Column("w"), Literal(c), Literal(c + 2.5)),
            Binary("and", Binary(">", Binary("%", Column("v"), Literal(2)), Literal(0)),
                   Binary("!=", Column("s"), Literal("x"))),
            InList(Column("v"), (Literal(c), Literal(c + 1)), negated=True)][which]
    cpu, gpu, op = both(FilterConfig(pred, tab.schema), tab, chunk)
    assert gpu.equals(cpu)
    assert op.counters.events_in == n and op.counters.results_out == gpu.num_rows
    assert op.counters.extra.get("cpu_fallback_batches", 0) == 0


@pytest.mark.gpu
@pytest.mark.skipif(BACKEND != "cuda", reason="needs a CUDA GPU (kernels ran in the simulator)")
def test_large_batches_on_the_device() -> None:  # pragma: no cover - GPU machines only
    rng = np.random.default_rng(1)
    n = 1 << 22
    tab = pa.table({"t": np.arange(n), "seq": np.arange(n), "x": rng.random(n),
                    "y": rng.random(n)})
    for sel in (1.0, 1e-3, 1e-5):
        pred = Binary("<", Binary("+", Binary("*", Column("x"), Column("x")),
                                  Binary("*", Column("y"), Column("y"))), Literal(sel))
        cpu, gpu, _ = both(FilterConfig(pred), tab, chunk=1 << 20)
        assert gpu.equals(cpu)
