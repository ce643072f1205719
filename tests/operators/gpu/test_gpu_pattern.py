"""GPU pattern matching against the CPU operator and the brute-force oracle.

The same random patterns and streams as the CPU operator's oracle tests (sequences, alternation,
quantifiers incl. Kleene plus, conditions on the current event, on PREV, on bound events and on
running aggregates, windows, partitions) under the three all-runs strategies; the GPU operator's
results must equal the CPU operator's table exactly (same rows, same order).
"""

from __future__ import annotations

from replaydb.operators.gpu.testing import fast_thread_switching, use_simulator_unless_gpu

BACKEND = use_simulator_unless_gpu()

from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from replaydb.errors import OperatorError, StateCapExceeded  # noqa: E402
from replaydb.operators.expr import Binary, Call, Column, Literal  # noqa: E402
from replaydb.operators.gpu.exprvm import GpuUnsupported  # noqa: E402
from replaydb.operators.gpu.pattern import GpuAllRunsEngine, GpuPatternOperator  # noqa: E402
from replaydb.operators.pattern import oracle  # noqa: E402
from replaydb.operators.pattern.model import (  # noqa: E402
    Measure,
    Neg,
    PatternSpec,
    Repeat,
    RowsPerMatch,
    Semantics,
    Seq,
    Strategy,
    Var,
    VarDef,
)
from replaydb.operators.pattern.operator import PatternConfig, PatternOperator  # noqa: E402
from tests.operators.pattern.test_pattern_operator import (  # noqa: E402
    ABC,
    SCH,
    SPECS,
    is_type,
    random_stream,
    typed,
)
from tests.operators.pattern.test_pattern_oracle import specs, streams  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _threads():  # type: ignore[no-untyped-def]
    with fast_thread_switching():
        yield


def run(cls: type, spec: PatternSpec, tab: pa.Table, chunk: int | None = None,
        check: bool = False, **kw: object) -> tuple[pa.Table, PatternOperator]:
    op = cls(PatternConfig(spec, tab.schema), **kw)
    for b in tab.to_batches(max_chunksize=chunk) if chunk else [tab]:
        op.push(b)
        if check:
            op._check()
    op.flush()
    return op.results(), op


def with_rows(spec: PatternSpec) -> PatternSpec:
    """ALL ROWS PER MATCH with the variable of every row: results show every matched event."""
    return replace(spec, rows_per_match=RowsPerMatch.ALL, select=None,
                   measures=(Measure("cls", Call("CLASSIFIER")),))


@pytest.mark.parametrize("strategy", [Strategy.CONTIGUOUS, Strategy.SKIP_TILL_NEXT,
                                      Strategy.SKIP_TILL_ANY])
@pytest.mark.parametrize("chunk", [None, 2])
def test_fig_2_6_all_strategies(strategy: Strategy, chunk: int | None) -> None:
    spec = with_rows(PatternSpec(ABC, (is_type("A"), is_type("B"), is_type("C")),
                                 strategy=strategy))
    tab = typed("abacbc")
    gpu, op = run(GpuPatternOperator, spec, tab, chunk)
    cpu, _ = run(PatternOperator, spec, tab, chunk)
    assert op.backend == BACKEND and isinstance(op._engine, GpuAllRunsEngine)
    assert gpu.num_rows > 0 and gpu.equals(cpu)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(specs(Semantics.ALL_RUNS), streams(), st.integers(1, 4))
def test_gpu_matches_cpu_and_oracle(spec: PatternSpec, table: pa.Table, batch: int) -> None:
    try:
        expected = oracle.matches(spec, table)
    except OperatorError:
        return  # the oracle refuses (e.g. a state blow-up); the CPU tests cover the error
    s2 = with_rows(spec)
    try:
        gpu, _ = run(GpuPatternOperator, s2, table, batch, check=True)
    except GpuUnsupported:
        return
    cpu, _ = run(PatternOperator, s2, table, batch)
    assert gpu.equals(cpu), (spec.to_text(), table.to_pydict())
    seq_to_row = {s: i for i, s in enumerate(table.column("seq").to_pylist())}
    rows: dict[tuple, list[int]] = {}
    for r in gpu.to_pylist():  # match numbers count per partition
        key = (tuple(r[c] for c in spec.partition_by), r["match_number"])
        rows.setdefault(key, []).append(seq_to_row[r["seq"]])
    assert sorted(rows.values()) == sorted(list(m[1]) for m in expected)


@pytest.mark.parametrize("name", ["any", "next"])
def test_batch_sizes_and_invariants(name: str) -> None:
    spec = SPECS[name]
    tab = random_stream(30, 3)
    ref, _ = run(PatternOperator, spec, tab)
    assert ref.num_rows > 0
    for chunk in (7, 30):
        got, _ = run(GpuPatternOperator, spec, tab, chunk, check=True)
        assert got.equals(ref), chunk


def test_snapshot_restore_equivalence() -> None:
    spec = SPECS["any"]
    tab = random_stream(36, 7)
    ref, _ = run(PatternOperator, spec, tab)
    assert ref.num_rows > 0
    op = GpuPatternOperator(PatternConfig(spec, SCH))
    batches = tab.to_batches(max_chunksize=9)
    for b in batches[:2]:
        op.push(b)
    snap = op.snapshot()
    op.push(batches[2])
    op.restore(snap)
    for b in batches[2:]:
        op.push(b)
    op.flush()
    assert op.results().equals(ref)


def test_device_arrays_grow_and_history_is_collected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny initial arrays force every overflow path (roll back, grow, rerun) and the GC."""
    for name, value in (("INITIAL_STATE", 1), ("INITIAL_HIST", 2), ("INITIAL_MATCHES", 1),
                        ("INITIAL_WORK", 1), ("GC_MIN", 4)):
        monkeypatch.setattr(GpuAllRunsEngine, name, value)
    spec = SPECS["any"]
    tab = random_stream(30, 11)
    ref, _ = run(PatternOperator, spec, tab, 10)
    got, op = run(GpuPatternOperator, spec, tab, 10, check=True)
    assert got.equals(ref) and ref.num_rows > 0
    assert op._gpu_engine is not None and op._gpu_engine.gc_at >= 4


def test_state_cap_stops_skip_till_any_blow_up() -> None:
    spec = PatternSpec(Seq((Var("A"), Repeat(Var("B"), 1, None), Var("C"))),
                       (is_type("A"), is_type("B"), is_type("C")),
                       strategy=Strategy.SKIP_TILL_ANY)
    with pytest.raises(StateCapExceeded, match="state_cap"):
        run(GpuPatternOperator, spec, typed("a" + "b" * 12 + "c"), state_cap=500)


def test_refusals_name_the_feature() -> None:
    sql = SPECS["sql"]
    with pytest.raises(GpuUnsupported, match="MATCH_RECOGNIZE"):
        GpuPatternOperator(PatternConfig(sql, SCH))
    neg = PatternSpec(Seq((Var("A"), Neg(Var("B")), Var("C"))),
                      (is_type("A"), is_type("B"), is_type("C")),
                      strategy=Strategy.SKIP_TILL_NEXT)
    with pytest.raises(GpuUnsupported, match="negation"):
        GpuPatternOperator(PatternConfig(neg, SCH))


def test_cpu_backend_is_the_cpu_operator() -> None:
    spec = SPECS["next"]
    tab = random_stream(40, 5)
    got, op = run(GpuPatternOperator, spec, tab, backend="cpu")
    assert op.transfer_bytes()["to_device"] == 0
    assert got.equals(run(PatternOperator, spec, tab)[0])


@pytest.mark.slow
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(specs(Semantics.ALL_RUNS), streams(12), st.integers(1, 6))
def test_gpu_matches_cpu_many(spec: PatternSpec, table: pa.Table, batch: int) -> None:
    s2 = with_rows(spec)
    try:
        gpu, _ = run(GpuPatternOperator, s2, table, batch)
    except (GpuUnsupported, OperatorError):
        return
    assert gpu.equals(run(PatternOperator, s2, table, batch)[0])


@pytest.mark.gpu
@pytest.mark.skipif(BACKEND != "cuda", reason="needs a CUDA GPU (kernels ran in the simulator)")
def test_window_2_16_skip_till_any_on_the_device() -> None:  # pragma: no cover - GPU only
    n = 1 << 18
    rng = np.random.default_rng(0)
    tab = pa.table({"t": np.arange(n), "seq": np.arange(n),
                    "type": rng.choice(list("abcdefgh"), n), "temp": rng.random(n)}, schema=SCH)
    spec = PatternSpec(Seq((Var("A"), Repeat(Var("B"), 1, None), Var("C"))),
                       (is_type("A"), VarDef("B", Binary(">", Column("temp"), Literal(0.999))),
                        is_type("C")), window=1 << 16, strategy=Strategy.SKIP_TILL_NEXT)
    assert run(GpuPatternOperator, spec, tab, 1 << 16)[0].equals(
        run(PatternOperator, spec, tab, 1 << 16)[0])


@pytest.mark.parametrize("name", ["any", "next"])
def test_end_interval_on_the_gpu_like_the_cpu(name: str) -> None:
    """Replay intervals reset the GPU engine as they reset the CPU one (regression: the
    interval reset called a CPU-only form of ``_reset_state`` and failed on the GPU operator)."""
    spec = SPECS[name]
    tab = random_stream(300, 4)
    pieces = [tab.slice(i, 40) for i in range(0, tab.num_rows, 50)]
    out = []
    for cls in (PatternOperator, GpuPatternOperator):
        op = cls(PatternConfig(spec, tab.schema))
        for k, p in enumerate(pieces):
            if k:
                op.end_interval()
            op.push(p)
            op._check()
        op.flush()
        out.append(op.results())
        assert op.counters.intervals == len(pieces) - 1
    assert out[0].num_rows > 0
    assert out[1].equals(out[0])
