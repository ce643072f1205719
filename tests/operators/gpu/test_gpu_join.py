"""GPU windowed join against the CPU join and the literal oracle of Defs. 2.7-2.13."""

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

from replaydb.errors import DataError  # noqa: E402
from replaydb.operators.expr import Binary, Call, Column, Expr, Literal  # noqa: E402
from replaydb.operators.gpu import join as gjoin  # noqa: E402
from replaydb.operators.gpu.exprvm import GpuUnsupported  # noqa: E402
from replaydb.operators.gpu.join import GpuJoinOperator  # noqa: E402
from replaydb.operators.join import JoinConfig, JoinOperator, Window  # noqa: E402
from tests.operators.test_join import (  # noqa: E402
    SCHEMA,
    check_snapshot_restore,
    join_inputs,
    merged,
    oracle_join,
)

T = 100
PHI = Binary("<=", Column("v", "E1"), Column("v", "E2"))


@pytest.fixture(autouse=True, scope="module")
def _threads():  # type: ignore[no-untyped-def]
    with fast_thread_switching():
        yield


def run(cls: type, cfg: JoinConfig, tab: pa.Table, chunk: int | None = None, **kw: object):
    op = cls(cfg, **kw)
    for b in tab.to_batches(max_chunksize=chunk) if chunk else [tab]:
        op.push(b)
    op.flush()
    return op.results(), op


def test_fig_2_5_event_v6_joins_only_v5() -> None:
    e1 = [(T, "E1", 2), (T + 1, "E1", 7), (T + 3, "E1", 5), (T + 6, "E1", 3), (T + 7, "E1", 4)]
    e2 = [(T + 4, "E2", 6)]
    cfg = JoinConfig(SCHEMA, "E1", "E2", Window("count", 2), Window("count", 2), PHI)
    out, op = run(GpuJoinOperator, cfg, merged(e1 + e2))
    rows = out.to_pylist()
    assert len(rows) == 1 and (rows[0]["E1.v"], rows[0]["E2.v"], rows[0]["probe"]) == (5, 6, "E2")
    assert op.backend == BACKEND


@settings(max_examples=12, deadline=None)
@given(join_inputs(max_chunk=12))
def test_gpu_join_matches_oracle_and_cpu(inp) -> None:  # type: ignore[no-untyped-def]
    evs, lw, rw, cmp, chunk = inp
    tab = merged(evs)
    phi = Binary(cmp, Column("v", "L"), Column("v", "R"))
    cfg = JoinConfig(SCHEMA, "E1", "E2", lw, rw, phi, chunk_pairs=3)
    got, op = run(GpuJoinOperator, cfg, tab, chunk)
    pairs = [(r["left_seq"] if r["probe"] == "E1" else r["right_seq"],
              r["right_seq"] if r["probe"] == "E1" else r["left_seq"], r["t"])
             for r in got.to_pylist()]
    assert pairs == oracle_join(evs, lw, rw, cmp)
    assert same_table(got, run(JoinOperator, cfg, tab, chunk)[0])
    assert op.counters.extra.get("cpu_fallback_batches", 0) == 0


RICH = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                  ("v", pa.int64()), ("x", pa.float64()), ("name", pa.string())])


def rich_stream(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    x[rng.random(n) < 0.15] = np.nan
    return pa.table({"t": np.cumsum(rng.integers(0, 3, n)), "seq": np.arange(n),
                     "type": rng.choice(["A", "B"], n), "v": rng.integers(-3, 6, n),
                     "x": pa.array(x, from_pandas=False),
                     "name": pa.array(rng.choice(["p", "q", "r"], n))}, schema=RICH)


PREDS: list[Expr | None] = [
    None,
    Binary("and", Binary("<", Column("x", "L"), Column("x", "R")),
           Binary("!=", Column("name", "A"), Column("name", "B"))),
    Binary("<=", Call("ABS", (Binary("-", Column("x", "L"), Column("x", "R")),)), Literal(0.5)),
    Binary("=", Binary("%", Column("v", "A"), Literal(3)), Binary("%", Column("v", "B"),
                                                                   Literal(3))),
    Binary("<", Binary("-", Column("t", "R"), Column("t", "L")), Column("v", "L")),
    Binary(">", Column("seq", "L"), Binary("*", Literal(2), Column("seq", "R"))),
    Binary("<", Column("name", "L"), Column("name", "R")),
]


@pytest.mark.parametrize("k", range(len(PREDS)))
def test_predicates_over_both_sides_equal_the_cpu(k: int) -> None:
    tab = rich_stream(36, k)
    for lw, rw in ((Window("count", 7, 2), Window("time", 9, 3, "epoch")),
                   (Window("time", 5), Window("count", 4))):
        cfg = JoinConfig(RICH, "A", "B", lw, rw, PREDS[k])
        gpu, op = run(GpuJoinOperator, cfg, tab, 13)
        cpu, _ = run(JoinOperator, cfg, tab, 13)
        assert gpu.num_rows > 0 and same_table(gpu, cpu)
        assert op.counters.extra.get("cpu_fallback_batches", 0) == 0


def test_output_buffer_too_small_reruns_with_the_exact_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gjoin, "MIN_OUT_CAP", 1)
    tab = rich_stream(50, 3)
    cfg = JoinConfig(RICH, "A", "B", Window("count", 20), Window("count", 20), None)
    gpu, _ = run(GpuJoinOperator, cfg, tab)
    assert same_table(gpu, run(JoinOperator, cfg, tab)[0]) and gpu.num_rows > 50


def test_device_chunks_split_the_probes() -> None:
    tab = rich_stream(50, 4)
    cfg = JoinConfig(RICH, "A", "B", Window("count", 10), Window("time", 6), PREDS[2])
    gpu, _ = run(GpuJoinOperator, cfg, tab, None, device_pairs=7)
    assert same_table(gpu, run(JoinOperator, cfg, tab)[0])


def test_snapshot_restore_equivalence() -> None:
    check_snapshot_restore(GpuJoinOperator)


def test_errors_and_refusals() -> None:
    op = GpuJoinOperator(JoinConfig(SCHEMA, "E1", "E2", Window("count", 2), Window("count", 2)))
    with pytest.raises(DataError, match="neither"):
        op.push(merged([(1, "E3", 1)]))
    with pytest.raises(GpuUnsupported, match="UPPER"):
        GpuJoinOperator(JoinConfig(RICH, "A", "B", Window("count", 2), Window("count", 2),
                                   Binary("=", Call("UPPER", (Column("name", "A"),)),
                                          Column("name", "B"))))


def test_null_strings_in_an_ordering_fall_back_like_the_cpu() -> None:
    tab = rich_stream(30, 9)
    tab = tab.set_column(5, "name", pa.array([None if i % 5 == 0 else f"p{i % 3}"
                                              for i in range(30)], pa.string()))
    cfg = JoinConfig(RICH, "A", "B", Window("count", 3), Window("count", 3),
                     Binary("<", Column("name", "L"), Column("name", "R")))
    cpu, _ = run(JoinOperator, cfg, tab)
    gpu, op = run(GpuJoinOperator, cfg, tab)
    assert cpu.num_rows > 0 and same_table(gpu, cpu)  # NULL orders with nothing, on both
    assert op.counters.extra.get("cpu_fallback_batches", 0) > 0


@pytest.mark.gpu
@pytest.mark.skipif(BACKEND != "cuda", reason="needs a CUDA GPU (kernels ran in the simulator)")
def test_large_windows_on_the_device() -> None:  # pragma: no cover - GPU machines only
    rng = np.random.default_rng(5)
    n = 1 << 15
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                     ("x", pa.float64())])
    tab = pa.table({"t": np.arange(n), "seq": np.arange(n),
                    "type": rng.choice(["L", "R"], n), "x": rng.random(n)}, schema=sch)
    cfg = JoinConfig(sch, "L", "R", Window("count", 4096), Window("count", 4096),
                     Binary("<", Call("ABS", (Binary("-", Column("x", "L"), Column("x", "R")),)),
                            Literal(1e-4)))
    assert same_table(run(GpuJoinOperator, cfg, tab, 8192)[0], run(JoinOperator, cfg, tab,
                                                                    8192)[0])
