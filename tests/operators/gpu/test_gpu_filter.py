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
from replaydb.operators import expr as ex  # noqa: E402
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
    out = GpuFilterOperator(FilterConfig(ex.Binary(">", ex.Column("v"), ex.Literal(3)))).process(tab)
    assert out.column("v").to_pylist() == [7, 5, 4]
    assert out.column("t").to_pylist() == [t + 1, t + 3, t + 7]
    assert out.schema == tab.schema


def test_batches_projection_and_nulls() -> None:
    tab = pa.table({"t": [1, 2, 3, 4], "seq": [0, 1, 2, 3], "v": [1.0, None, 5.0, 4.0],
                    "s": ["a", "b", "a", None]})
    cfg = FilterConfig(ex.Binary("=", ex.Column("s"), ex.Literal("a")), tab.schema, ("t", "v"))
    cpu, gpu, _ = both(cfg, tab, chunk=1)
    assert gpu.to_pydict() == {"t": [1, 3], "v": [1.0, 5.0]} and gpu.equals(cpu)
    cpu, gpu, _ = both(FilterConfig(ex.Binary(">", ex.Column("v"), ex.Literal(0))), tab)
    assert gpu.column("t").to_pylist() == [1, 3, 4] and gpu.equals(cpu)


def test_errors_name_the_column() -> None:
    tab = pa.table({"t": [1], "seq": [0], "v": [1]})
    op = GpuFilterOperator(FilterConfig(ex.Binary(">", ex.Column("w"), ex.Literal(3))))
    with pytest.raises(QueryError, match="'w'"):
        op.push(tab)


def test_snapshot_restore_and_interval() -> None:
    tab = pa.table({"t": [1, 2, 3, 4, 5], "seq": [0, 1, 2, 3, 4], "v": [2, 7, 5, 3, 4]})
    op = GpuFilterOperator(FilterConfig(ex.Binary(">", ex.Column("v"), ex.Literal(3))))
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

PREDICATES: list[ex.Expr] = [
    ex.Binary(">", ex.Column("i"), ex.Literal(0)),
    ex.Binary(">", ex.Binary("%", ex.Column("i"), ex.Literal(3)), ex.Literal(0)),
    ex.Binary("=", ex.Binary("%", ex.Column("i"), ex.Literal(-4)), ex.Literal(-3)),
    ex.Binary(">", ex.Binary("%", ex.Column("x"), ex.Literal(2)), ex.Literal(0)),          # fmod on floats
    ex.Binary("<", ex.Binary("%", ex.Column("i"), ex.Column("x")), ex.Literal(1)),         # mixed: fmod
    ex.Binary(">=", ex.Binary("/", ex.Column("i"), ex.Column("j")), ex.Literal(0)),        # x/0, null
    ex.Binary("=", ex.Binary("/", ex.Column("i"), ex.Literal(0)), ex.Literal(float("inf"))),
    ex.Binary("<", ex.Binary("*", ex.Column("i"), ex.Column("i")), ex.Binary("+", ex.Column("j"), ex.Literal(40))),
    ex.Binary("!=", ex.Column("x"), ex.Literal(4.0)),                                  # NaN != 4: false
    ex.Binary("!=", ex.Column("j"), ex.Column("i")),
    ex.Binary("=", ex.Column("b"), ex.Literal(True)),
    ex.Binary("and", ex.Column("b"), ex.Binary("<", ex.Column("i"), ex.Literal(5))),
    ex.Unary("not", ex.Column("x")),                                               # NaN is false
    ex.Binary("or", ex.Column("i"), ex.IsNull(ex.Column("x"))),
    ex.Binary("=", ex.Column("s"), ex.Literal("a")),
    ex.Binary("!=", ex.Column("s"), ex.Literal("a")),
    ex.Binary("=", ex.Column("s"), ex.Column("s2")),
    ex.Binary("!=", ex.Column("s"), ex.Column("s2")),
    ex.Binary("=", ex.Column("s"), ex.Literal("zz")),                                 # absent literal
    ex.InList(ex.Column("s"), (ex.Literal("a"), ex.Literal("c"))),
    ex.InList(ex.Column("s"), (ex.Literal("a"), ex.Literal("c")), negated=True),
    ex.InList(ex.Column("i"), (ex.Literal(3), ex.Literal(10), ex.Literal(2.0))),
    ex.IsNull(ex.Column("s")),
    ex.IsNull(ex.Column("j"), negated=True),
    ex.IsNull(ex.Column("i")),
    ex.Between(ex.Column("i"), ex.Literal(0), ex.Literal(9.5)),
    ex.Between(ex.Column("x"), ex.Literal(-3), ex.Literal(2), negated=True),
    ex.Binary("<", ex.Column("s2"), ex.Literal("c")),                                 # no nulls: ordered
    ex.Binary("<", ex.Column("s"), ex.Literal("b")),                                  # CPU raises
    ex.Binary("<=", ex.Column("s"), ex.Column("s2")),                                 # CPU raises
    ex.Binary(">", ex.Call("SQRT", (ex.Column("i"),)), ex.Literal(1.5)),
    ex.Binary(">", ex.Call("LN", (ex.Column("x"),)), ex.Literal(0)),
    ex.Binary("<", ex.Call("LOG10", (ex.Column("i"),)), ex.Literal(0.5)),
    ex.Binary(">", ex.Call("EXP", (ex.Column("x"),)), ex.Literal(2)),
    ex.Binary("=", ex.Call("FLOOR", (ex.Column("x"),)), ex.Literal(1)),
    ex.Binary("=", ex.Call("CEIL", (ex.Column("i"),)), ex.Literal(3.0)),
    ex.Binary(">", ex.Call("ABS", (ex.Column("i"),)), ex.Literal(2)),
    ex.Binary(">", ex.Call("POWER", (ex.Column("i"), ex.Literal(2))), ex.Literal(50)),
    ex.Binary(">", ex.Call("LEAST", (ex.Column("i"), ex.Column("x"), ex.Literal(3))), ex.Literal(0)),
    ex.Binary("<", ex.Call("GREATEST", (ex.Column("i"), ex.Column("j"))), ex.Literal(3)),
    ex.Binary(">", ex.Unary("neg", ex.Column("x")), ex.Literal(0)),
    ex.Binary("<", ex.Column("n32"), ex.Literal(4)),
    ex.Binary(">", ex.Column("t"), ex.Column("seq")),
    ex.Literal(True),
    ex.Literal(None),
    None,
]


def _orders_null_strings(e: ex.Expr | None) -> bool:
    """An ordering of a string column that holds NULLs in :data:`SEM` (the device's code
    refuses it; the batch runs on the CPU)."""
    nullable = {f.name for f in SEM.schema
                if pa.types.is_string(f.type) and SEM.column(f.name).null_count}
    return e is not None and any(
        isinstance(n, ex.Binary) and n.op in ("<", "<=", ">", ">=")
        and any(isinstance(c, ex.Column) and c.name in nullable for c in (n.left, n.right))
        for n in e.walk())


@pytest.mark.parametrize("k", range(len(PREDICATES)))
def test_expression_semantics_match_numpy(k: int) -> None:
    """Every predicate runs on the device, except orderings of NULL strings, which fall back to
    the CPU code (NULL orders with nothing there); the results equal the CPU operator's."""
    cfg = FilterConfig(PREDICATES[k])
    cpu, gpu, op = both(cfg, SEM)
    fell_back = op.counters.extra.get("cpu_fallback_batches", 0)
    assert bool(fell_back) == _orders_null_strings(PREDICATES[k])
    if isinstance(cpu, pa.Table):
        assert isinstance(gpu, pa.Table) and same_table(gpu, cpu), (cpu.to_pydict(),
                                                                   gpu.to_pydict())
    else:
        assert gpu == cpu


def test_kinds_the_device_does_not_model_fall_back_per_batch() -> None:
    tab = pa.table({"t": [1, 2, 3], "seq": [0, 1, 2], "f": pa.array([0.1, 0.2, 0.3],
                                                                    pa.float32()),
                    "b": pa.array([True, None, False]), "n": pa.array([1, 2, 3], pa.int16())})
    for pred in (ex.Binary(">", ex.Column("f"), ex.Literal(0.1)),                   # float32 rounding
                 ex.Binary("=", ex.Column("b"), ex.Literal(True)),                  # bool with nulls
                 ex.Binary(">", ex.Binary("+", ex.Column("n"), ex.Literal(1)), ex.Literal(2)),  # narrow int add
                 ex.Binary(">", ex.Binary("%", ex.Column("t"), ex.Column("seq")), ex.Literal(0))):
        cpu, gpu, op = both(FilterConfig(pred), tab)
        assert op.counters.extra["cpu_fallback_batches"] == 1
        if isinstance(cpu, pa.Table):
            assert same_table(gpu, cpu)
        else:
            assert gpu == cpu


@pytest.mark.parametrize("pred,feature", [
    (ex.Binary(">", ex.Call("ROUND", (ex.Column("v"),)), ex.Literal(1)), "ROUND"),
    (ex.Binary("=", ex.Call("LOWER", (ex.Column("s"),)), ex.Literal("a")), "LOWER"),
    (ex.Binary("=", ex.Call("PREV", (ex.Column("v"),)), ex.Literal(1)), "PREV"),
    (ex.Binary(">", ex.Call("SUM", (ex.Column("v"),), "RUNNING"), ex.Literal(1)), "RUNNING SUM"),
    (ex.Binary(">", ex.Column("v", "b", ("prev", 1)), ex.Literal(1)), "subscripted"),
])
def test_unsupported_features_are_refused_by_name(pred: ex.Expr, feature: str) -> None:
    with pytest.raises(GpuUnsupported, match=feature) as ei:
        GpuFilterOperator(FilterConfig(pred))
    assert "GPU filter" in str(ei.value) and ei.value.hint


def test_cpu_backend_is_the_cpu_filter() -> None:
    tab = pa.table({"t": [1, 2], "seq": [0, 1], "v": [1, 5]})
    op = GpuFilterOperator(FilterConfig(ex.Binary(">", ex.Column("v"), ex.Literal(3))), backend="cpu")
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
    pred = [ex.Binary(">=", ex.Column("v"), ex.Literal(c)),
            ex.Binary("<", ex.Binary("+", ex.Column("w"), ex.Column("v")), ex.Literal(c)),
            ex.Binary("or", ex.Binary("=", ex.Column("s"), ex.Literal("xy")), ex.IsNull(ex.Column("w"))),
            ex.Between(ex.Column("w"), ex.Literal(c), ex.Literal(c + 2.5)),
            ex.Binary("and", ex.Binary(">", ex.Binary("%", ex.Column("v"), ex.Literal(2)), ex.Literal(0)),
                   ex.Binary("!=", ex.Column("s"), ex.Literal("x"))),
            ex.InList(ex.Column("v"), (ex.Literal(c), ex.Literal(c + 1)), negated=True)][which]
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
        pred = ex.Binary("<", ex.Binary("+", ex.Binary("*", ex.Column("x"), ex.Column("x")),
                                  ex.Binary("*", ex.Column("y"), ex.Column("y"))), ex.Literal(sel))
        cpu, gpu, _ = both(FilterConfig(pred), tab, chunk=1 << 20)
        assert gpu.equals(cpu)
