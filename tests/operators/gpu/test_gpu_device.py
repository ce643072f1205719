"""GPU device selection, backends, staged transfers and swapping operators (no kernels needed).

The decision logic of ``--device auto|cpu|gpu`` is tested for every situation (no GPU, the CUDA
simulator, a real GPU) by pinning what :func:`kernel_backend` reports.
"""

from __future__ import annotations

from replaydb.operators.gpu.testing import use_simulator_unless_gpu

BACKEND = use_simulator_unless_gpu()

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402

from replaydb.errors import UsageError  # noqa: E402
from replaydb.operators.expr import Binary, Call, Column, Literal  # noqa: E402
from replaydb.operators.filter import FilterConfig, FilterOperator  # noqa: E402
from replaydb.operators.gpu import device  # noqa: E402
from replaydb.operators.gpu.device import (  # noqa: E402
    DeviceChoice,
    Staging,
    WorkEstimate,
    gpu_available,
    resolve_backend,
    select_device,
)
from replaydb.operators.gpu.filter import GpuFilterOperator  # noqa: E402
from replaydb.operators.gpu.pattern import GpuPatternOperator  # noqa: E402
from replaydb.operators.gpu.swap import estimate_for, swap_in  # noqa: E402
from replaydb.operators.gpu.testing import probe_cuda_driver  # noqa: E402
from replaydb.operators.pattern.model import PatternSpec, Semantics, Seq, Var, VarDef  # noqa: E402
from replaydb.operators.pattern.operator import PatternConfig, PatternOperator  # noqa: E402


def pin(monkeypatch: pytest.MonkeyPatch, backend: str | None) -> None:
    monkeypatch.setattr(device, "kernel_backend", lambda: backend)


def test_gpu_available_matches_the_driver_probe() -> None:
    if BACKEND == "simulator":
        assert not gpu_available()  # the simulator is not a device
    else:
        assert gpu_available() == probe_cuda_driver()


def test_explicit_cpu_is_always_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    for b in (None, "simulator", "cuda"):
        pin(monkeypatch, b)
        assert select_device("cpu").device == "cpu"


def test_gpu_without_any_backend_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pin(monkeypatch, None)
    with pytest.raises(UsageError, match="no CUDA GPU"):
        select_device("gpu")
    assert select_device("auto").reason == "no CUDA GPU available"
    with pytest.raises(UsageError, match="--device"):
        select_device("tpu")


def test_gpu_under_the_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    pin(monkeypatch, "simulator")
    c = select_device("gpu")
    assert (c.device, c.backend) == ("gpu", "simulator") and "simulator" in c.reason
    # auto never picks the simulator: it is for testing, not for speed
    assert select_device("auto", WorkEstimate("join", 10**9, work=10**6)).device == "cpu"


def test_auto_weighs_transfer_against_work(monkeypatch: pytest.MonkeyPatch) -> None:
    pin(monkeypatch, "cuda")
    assert select_device("auto").device == "cpu"  # no estimate: stay on the CPU
    tiny = WorkEstimate("filter", 1000)
    assert select_device("auto", tiny).device == "cpu"
    assert "amortize" in select_device("auto", tiny).reason
    big_join = WorkEstimate("join", 10**6, work=512 * 1024)
    c = select_device("auto", big_join)
    assert c.device == "gpu" and c.backend == "cuda" and "faster" in c.reason
    # the decision is the documented inequality
    for est in (tiny, big_join, WorkEstimate("window", 10**7), WorkEstimate("pattern", 10**5,
                                                                            work=2**16)):
        exp = est.gpu_seconds() * device.MARGIN < est.cpu_seconds()
        assert (select_device("auto", est).device == "gpu") == exp
    assert select_device("auto", WorkEstimate("greta", 10**9)).device == "cpu"


def test_resolve_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    pin(monkeypatch, None)
    assert resolve_backend("auto") == "cpu"
    assert resolve_backend("cpu") == "cpu"
    with pytest.raises(UsageError, match="backend 'cuda'"):
        resolve_backend("cuda")
    with pytest.raises(UsageError, match="unknown backend"):
        resolve_backend("opencl")
    pin(monkeypatch, "simulator")
    assert resolve_backend("auto") == "simulator"
    with pytest.raises(UsageError):
        resolve_backend("cuda")


def test_staging_round_trip_reuses_buffers() -> None:
    st = Staging()
    a = np.arange(10, dtype=np.int64)
    d = st.stage("x", a)
    assert np.array_equal(st.fetch(d), a)
    m = np.arange(12.0).reshape(3, 4)
    assert np.array_equal(st.stage("m", m).copy_to_host(), m)
    host_buf = st._host["x"]
    d2 = st.stage("x", a[:5] * 2)
    assert st._host["x"] is host_buf  # the pinned buffer is reused
    assert np.array_equal(st.fetch(d2), a[:5] * 2)
    assert st.bytes_to_device == a.nbytes + m.nbytes + a[:5].nbytes
    st.stage("x", np.arange(5000, dtype=np.int64))  # grows
    assert st._host["x"].shape[0] >= 5000
    assert len(st.stage("x", np.zeros(0, np.int64))) == 0


SCH = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("v", pa.int64())])


def test_swap_in_follows_the_device_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = FilterOperator(FilterConfig(Binary(">", Column("v"), Literal(3)), SCH), state_cap=77)
    op, c = swap_in(cpu, "cpu")
    assert op is cpu and c.device == "cpu"
    if BACKEND is None:  # pragma: no cover - the tests always have a kernel backend
        return
    op, c = swap_in(cpu, "gpu")
    assert isinstance(op, GpuFilterOperator) and op.state_cap == 77 and c.device == "gpu"
    assert op.config is cpu.config
    tab = pa.table({"t": [1, 2, 3], "seq": [0, 1, 2], "v": [5, 1, 9]}, schema=SCH)
    assert op.process(tab).equals(cpu.process(tab))


def test_swap_in_keeps_the_cpu_operator_for_refused_features() -> None:
    cpu = FilterOperator(FilterConfig(Binary(">", Call("ROUND", (Column("v"),)), Literal(3))))
    op, c = swap_in(cpu, "gpu")
    assert op is cpu and c.device == "cpu" and "ROUND" in c.reason
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string())])
    spec = PatternSpec(Seq((Var("A"), Var("B"))), (VarDef("A"), VarDef("B")),
                       semantics=Semantics.SQL)
    pcpu = PatternOperator(PatternConfig(spec, sch))
    op, c = swap_in(pcpu, "gpu")
    assert op is pcpu and "MATCH_RECOGNIZE" in c.reason
    spec2 = PatternSpec(Seq((Var("A"), Var("B"))), (VarDef("A"), VarDef("B")))
    op, c = swap_in(PatternOperator(PatternConfig(spec2, sch)), "gpu")
    assert isinstance(op, GpuPatternOperator)


def test_estimates_use_the_operator_config() -> None:
    from replaydb.operators.join import JoinConfig, JoinOperator, Window

    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                     ("v", pa.int64())])
    j = JoinOperator(JoinConfig(sch, "a", "b", Window("count", 4096), Window("count", 512)))
    e = estimate_for(j, 10**6, batches=4)
    assert (e.operator, e.work, e.batches) == ("join", 4096.0, 4)
    f = FilterOperator(FilterConfig(None))
    assert estimate_for(f, 10).work == 1.0
    assert isinstance(DeviceChoice("cpu", "cpu", "x"), DeviceChoice)


def test_block_size_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAYDB_GPU_TPB", "12")
    with pytest.raises(UsageError, match="power of two"):
        device.block_size()
    monkeypatch.setenv("REPLAYDB_GPU_TPB", "64")
    assert device.block_size() == 64
    assert device.blocks_for(130, 64) == 3 and device.blocks_for(0, 64) == 1


@pytest.mark.skipif(BACKEND != "simulator", reason="a fix of the CUDA simulator only")
def test_simulator_shared_arrays_are_one_per_block_under_contention() -> None:
    """All threads of a block get the same shared array, even when they all ask at once (the
    unpatched simulator could hand racing threads private arrays)."""
    import threading

    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    assert device.SIMULATOR_SHARED_FIX
    for _ in range(20):
        shared = FakeCUDAShared(0)
        start = threading.Barrier(16)
        got: list[object] = []

        def ask(shared: FakeCUDAShared, start: threading.Barrier, got: list[object]) -> None:
            start.wait()
            got.append(shared.array(8, np.int64))

        threads = [threading.Thread(target=ask, args=(shared, start, got)) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 16 and all(a is got[0] for a in got)
