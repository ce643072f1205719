"""``replaydb query/explain --device auto|cpu|gpu`` over a real store.

In this process the kernels run in Numba's CUDA simulator unless a GPU is present; the "no GPU"
errors are checked in a child process with the simulator off (skipped on GPU machines).
"""

from __future__ import annotations

from replaydb.operators.gpu.testing import (
    fast_thread_switching,
    probe_cuda_driver,
    use_simulator_unless_gpu,
)

BACKEND = use_simulator_unless_gpu()

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402

import replaydb  # noqa: E402
from replaydb.errors import UsageError  # noqa: E402
from replaydb.store.schema import Attribute, StreamSchema  # noqa: E402

SASE = ("PATTERN SEQ(A a, B+ b[], C c) WHERE skip_till_next_match(a, b[], c) "
        "{ b[i].v >= a.v } WITHIN 6 RETURN a.v, c.v")
WINDOW = ("SELECT window_start, window_end, SUM(v) AS sv, MAX(v) AS mv, COUNT(*) AS n "
          "FROM TABLE(HOP(TABLE ev, DESCRIPTOR(t), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) "
          "GROUP BY window_start, window_end")


@pytest.fixture(autouse=True, scope="module")
def _threads():  # type: ignore[no-untyped-def]
    with fast_thread_switching():
        yield


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    st = replaydb.open(tmp_path_factory.mktemp("gpuq") / "s", create=True)
    sch = StreamSchema((Attribute("type", "string"), Attribute("v", "int64")), time_unit="s",
                       type_column="type")
    st.create_stream("ev", sch)
    n = 40
    rng = np.random.default_rng(1)
    st.append("ev", pa.table({"t": np.arange(n) * 1, "type": rng.choice(["A", "B", "C"], n),
                              "v": rng.integers(0, 9, n)}))
    return st


@pytest.mark.parametrize("text", [SASE, WINDOW], ids=["sase", "window"])
def test_gpu_and_cpu_give_the_same_rows(store, text: str) -> None:  # type: ignore[no-untyped-def]
    cpu = replaydb.query(store, text, device="cpu", plan="replay")
    gpu = replaydb.query(store, text, device="gpu", plan="replay")
    assert cpu.plan.details["device"] == {"requested": "cpu", "device": "cpu",
                                          "reason": "requested"}
    info = gpu.plan.details["device"]
    assert info["device"] == "gpu" and info["backend"] == BACKEND
    assert cpu.table.num_rows > 0 and gpu.table.equals(cpu.table)


def test_gpu_operator_is_the_one_replayed(store) -> None:  # type: ignore[no-untyped-def]
    from replaydb.operators.gpu.pattern import GpuPatternOperator
    from replaydb.planner.query import QueryOptions, plan_query

    plan = plan_query(store, SASE, QueryOptions(device="gpu", plan="replay"))
    assert plan.physical.operator.device == "gpu"
    assert isinstance(plan.operator, GpuPatternOperator)
    assert isinstance(plan.physical.operator.build(), GpuPatternOperator)
    assert plan.batch_rows is not None and plan.batch_rows >= 1 << 16


def test_a_grouped_window_query_stays_on_the_cpu_and_explain_says_so(store) -> None:  # type: ignore[no-untyped-def]
    """GROUP BY <column> has no device variant: the plan keeps the CPU operator, and what
    EXPLAIN reports is the device that runs."""
    from replaydb.planner.query import QueryOptions, plan_query

    grouped = WINDOW.replace("GROUP BY window_start, window_end",
                             "GROUP BY window_start, window_end, type").replace(
        "SELECT window_start, window_end,", "SELECT window_start, window_end, type,")
    plan = plan_query(store, grouped, QueryOptions(device="gpu", plan="replay"))
    assert plan.physical.operator.device == "cpu"
    assert plan.physical.placement.device == "cpu"
    assert "GROUP BY" in plan.physical.placement.reason
    assert type(plan.operator).__name__ == "WindowAggregate"
    out = replaydb.explain(store, grouped, device="gpu", plan="replay")
    assert out["device"]["device"] == "cpu" and out["plan"]["operator"]["device"] == "cpu"
    cpu = replaydb.query(store, grouped, device="cpu", plan="replay")
    gpu = replaydb.query(store, grouped, device="gpu", plan="replay")
    assert cpu.table.num_rows > 0 and gpu.table.equals(cpu.table)


def test_auto_without_a_real_gpu_explains_the_cpu_fallback(store) -> None:  # type: ignore
    if BACKEND == "cuda":
        pytest.skip("a GPU is present: auto may choose it")
    out = replaydb.explain(store, SASE, device="auto")
    assert out["device"]["device"] == "cpu"
    assert "no CUDA GPU" in out["device"]["reason"]


def test_gpu_requested_for_an_unsupported_query_says_why(store) -> None:  # type: ignore
    text = ("SELECT * FROM ev MATCH_RECOGNIZE (ORDER BY t MEASURES A.v AS av ONE ROW PER MATCH "
            "PATTERN (A B) DEFINE A AS type = 'A', B AS type = 'B')")
    out = replaydb.explain(store, text, device="gpu", plan="replay")
    assert out["device"]["device"] == "cpu"
    assert "GPU requested" in out["device"]["reason"]
    assert "MATCH_RECOGNIZE" in out["device"]["reason"]


def test_bad_device_is_a_usage_error(store) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError, match="--device"):
        replaydb.query(store, SASE, device="tpu")


@pytest.mark.skipif(probe_cuda_driver(), reason="a CUDA driver is present")
def test_cli_without_cuda(store) -> None:  # type: ignore[no-untyped-def]
    """No driver and no simulator: ``--device gpu`` fails clearly, ``auto`` runs on the CPU.

    One child process (the simulator choice is fixed per process) runs both CLI commands."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    code = ("import sys\n"
            "from replaydb.cli import main\n"
            "p, q = sys.argv[1], sys.argv[2]\n"
            "rc = main(['query', p, q, '--device', 'gpu'])\n"
            "print('RC', rc, flush=True)\n"
            "sys.exit(main(['explain', p, q, '--device', 'auto']))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(store.path), SASE],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "RC 0" not in proc.stdout and "RC " in proc.stdout
    assert "--device gpu: no CUDA GPU is available" in proc.stderr
    assert "device: cpu" in proc.stdout and "no CUDA GPU available" in proc.stdout
