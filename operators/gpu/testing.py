"""Support for testing the GPU operators on machines with and without a GPU.

* :func:`use_simulator_unless_gpu` - called before anything imports ``numba.cuda``: with a CUDA
  driver and a device present it leaves Numba alone (kernels run on the GPU); otherwise it turns
  on Numba's CUDA simulator so the same kernels run on the CPU. The GPU is detected through the
  driver library directly (``cuInit``/``cuDeviceGetCount`` via ctypes), because importing
  ``numba.cuda`` fixes the mode for the whole process.
* :func:`record_launches` / :func:`compile_records` - under the simulator, record the argument
  types of every kernel launch; in a process with the real CUDA target and NVVM (the ``gpu``
  extra) compile each recorded kernel to PTX for a given compute capability. The simulator runs
  kernels as Python and never type-checks them; this proves the device code compiles for the
  GPU with the types the operators actually pass.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@functools.lru_cache(maxsize=1)
def probe_cuda_driver() -> bool:
    """True when the CUDA driver library loads, initializes and reports at least one device.
    Probed once per process (the planner asks for every query, and loading the library, or
    failing to, is a fixed cost too large to pay per query)."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if lib.cuInit(0) != 0:
                return False
            n = ctypes.c_int(0)
            if lib.cuDeviceGetCount(ctypes.byref(n)) != 0:
                return False
            return n.value > 0
        except AttributeError:  # pragma: no cover - not the driver
            return False
    return False


def use_simulator_unless_gpu() -> str:
    """Choose how kernels run in this process: ``"cuda"`` or ``"simulator"`` (see module doc).

    If ``numba.cuda`` is already imported the choice was made earlier and is only reported.
    ``NUMBA_ENABLE_CUDASIM`` set explicitly in the environment is respected.
    """
    if "numba.cuda" in sys.modules:
        from replaydb.operators.gpu.device import kernel_backend

        return kernel_backend() or "none"
    explicit = os.environ.get("NUMBA_ENABLE_CUDASIM")
    if explicit is None:
        if probe_cuda_driver():
            return "cuda"
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if "numba" in sys.modules:
        import numba

        numba.config.reload_config()
    return "simulator" if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0") \
        else "cuda"


def _describe(a: Any) -> tuple[Any, ...]:
    import numpy as np

    arr = getattr(a, "_ary", None)  # the simulator's device arrays wrap a NumPy array
    if arr is None and hasattr(a, "_item"):
        arr = getattr(a, "_item", None)
    if arr is None and isinstance(a, np.ndarray):
        arr = a
    if isinstance(arr, np.ndarray):
        layout = "C" if arr.flags.c_contiguous else ("F" if arr.flags.f_contiguous else "A")
        return ("array", arr.dtype.str, arr.ndim, layout)
    if isinstance(a, bool | np.bool_):
        return ("scalar", "bool")
    if isinstance(a, int | np.integer):
        return ("scalar", "int64")
    if isinstance(a, float | np.floating):
        return ("scalar", "float64")
    raise TypeError(f"cannot describe kernel argument of type {type(a).__name__}")


@contextmanager
def record_launches() -> Iterator[set[tuple[str, str, tuple[Any, ...]]]]:
    """Under the simulator: collect ``(module, kernel name, argument types)`` of every launch."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    seen: set[tuple[str, str, tuple[Any, ...]]] = set()
    orig = FakeCUDAKernel.__call__

    def call(self: Any, *args: Any) -> Any:
        if not self._device:
            seen.add((self.fn.__module__, self.fn.__name__,
                      tuple(_describe(a) for a in args)))
        return orig(self, *args)

    FakeCUDAKernel.__call__ = call  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        FakeCUDAKernel.__call__ = orig  # type: ignore[method-assign]


def _numba_type(d: tuple[Any, ...]) -> Any:
    import numpy as np
    from numba import from_dtype, types

    if d[0] == "array":
        return types.Array(from_dtype(np.dtype(d[1])), d[2], d[3])
    return {"bool": types.boolean, "int64": types.int64, "float64": types.float64}[d[1]]


def _kernel_module(mod: str) -> Any:
    """The module of this package a recorded kernel was defined in (imported if not yet)."""
    if not mod.startswith(f"{__package__}."):
        raise ValueError(f"{mod!r} is not a module of {__package__}")
    return importlib.import_module(f"{__package__}.{mod[len(__package__) + 1:]}")


def compile_records(records: set[tuple[str, str, tuple[Any, ...]]],
                    cc: tuple[int, int] = (9, 0)) -> dict[str, int]:
    """Compile every recorded kernel to PTX (real CUDA target; needs NVVM). Returns the PTX
    size per ``module.kernel(signature index)``; raises on the first kernel that fails."""
    from numba import cuda
    from numba.cuda import dispatcher

    class _Device:  # device functions compile for "the current device": pretend one exists
        compute_capability = cc

    orig = getattr(dispatcher, "get_current_device", None)
    if orig is not None:
        dispatcher.get_current_device = lambda: _Device()  # type: ignore[attr-defined]
    try:
        out: dict[str, int] = {}
        for i, (mod, name, sig) in enumerate(sorted(records)):
            module = _kernel_module(mod)
            kernel = getattr(module, name, None)
            if kernel is None:  # kernels built by a factory (one per dtype combination)
                kernel = module.kernel_by_name(name, sig)
            ptx, _ = cuda.compile_ptx(kernel.py_func, tuple(_numba_type(d) for d in sig), cc=cc)
            out[f"{mod}.{name}#{i}"] = len(ptx)
        return out
    finally:
        if orig is not None:
            dispatcher.get_current_device = orig  # type: ignore[attr-defined]


def exercise_kernels() -> None:
    """Run every kernel of the package once on tiny inputs (used to record launch signatures).

    Covers the filter (ints, floats, strings), the join, the window step with add/min/max/
    first/last components, the pattern matcher (start, state, worklist, path, min and GC
    kernels) and multi-level scans.
    """
    import numpy as np
    import pyarrow as pa
    from numba import cuda

    from replaydb.operators.expr import Binary, Call, Column, Literal
    from replaydb.operators.filter import FilterConfig
    from replaydb.operators.gpu import scan
    from replaydb.operators.gpu.filter import GpuFilterOperator
    from replaydb.operators.gpu.join import GpuJoinOperator
    from replaydb.operators.gpu.pattern import GpuPatternOperator
    from replaydb.operators.gpu.window import GpuWindowAggregate
    from replaydb.operators.join import JoinConfig, Window
    from replaydb.operators.pattern.model import PatternSpec, Repeat, Seq, Strategy, Var, VarDef
    from replaydb.operators.pattern.operator import PatternConfig
    from replaydb.operators.window import AggSpec, WindowConfig

    n = 40
    rng = np.random.default_rng(0)
    tab = pa.table({"t": np.arange(n, dtype=np.int64), "seq": np.arange(n, dtype=np.int64),
                    "type": rng.choice(["a", "b", "c"], n), "v": rng.integers(0, 9, n),
                    "x": rng.random(n)})
    pred = Binary("and", Binary(">", Binary("%", Column("v"), Literal(4)), Literal(1)),
                  Binary("or", Binary("=", Column("type"), Literal("a")),
                         Binary("<", Call("SQRT", (Column("x"),)), Literal(0.5))))
    GpuFilterOperator(FilterConfig(pred)).process(tab)
    jc = JoinConfig(tab.schema.remove(tab.schema.get_field_index("type")).insert(
        2, pa.field("type", pa.string())), "a", "b", Window("count", 5), Window("time", 4, 2),
        Binary("<=", Column("x", "a"), Column("x", "b")))
    jt = tab.set_column(2, "type", pa.array(np.where(np.arange(n) % 2 == 0, "a", "b")))
    GpuJoinOperator(jc).process(jt)
    aggs = (AggSpec("COUNT", None, "n"), AggSpec("SUM", Column("x"), "s"),
            AggSpec("SUM", Column("v"), "sv"), AggSpec("MIN", Column("x"), "mn"),
            AggSpec("MAX", Column("v"), "mx"), AggSpec("FIRST", Column("x"), "f"),
            AggSpec("LAST", Column("v"), "l"), AggSpec("VAR_POP", Column("x"), "var"))
    GpuWindowAggregate(WindowConfig(size=12, slide=1, kind="count", aggregates=aggs)).process(tab)
    spec = PatternSpec(Seq((Var("A"), Repeat(Var("B"), 1, None), Var("C"))), (
        VarDef("A", Binary("=", Column("type"), Literal("a"))),
        VarDef("B", Binary(">=", Column("x"), Call("AVG", (Column("x", "B"),)))),
        VarDef("C", Binary(">", Column("x", "C"), Column("x", "A")))), window=6,
        strategy=Strategy.SKIP_TILL_ANY)
    op = GpuPatternOperator(PatternConfig(spec, tab.schema))
    for b in tab.to_batches(max_chunksize=n // 4):  # later batches run the state kernels
        op.push(b)
        op._gpu_engine.collect()  # type: ignore[union-attr]
    op.flush()
    for dt in (np.int64, np.float64):
        a = cuda.to_device(np.arange(300).astype(dt))
        scan.segmented_scan(a, 300, 250, scan.ADD)
    scan.exclusive_sum(cuda.to_device(np.ones(300, np.int64)), 300)


@contextmanager
def fast_thread_switching(interval: float = 1e-5) -> Iterator[None]:
    """Switch Python threads more often while simulated kernels run.

    The simulator runs every CUDA thread as a Python thread and a busy-polling manager thread;
    with the default 5 ms switch interval each barrier waits for several interval expiries.
    """
    old = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def same_table(a: Any, b: Any) -> bool:
    """Equal schemas and values, NaN equal to NaN (Arrow's ``equals`` says NaN != NaN), NULL
    equal only to NULL."""
    import math

    if a.schema != b.schema or a.num_rows != b.num_rows:
        return False
    for name in a.schema.names:
        for x, y in zip(a.column(name).to_pylist(), b.column(name).to_pylist()):
            if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
                continue
            if x != y or (x is None) != (y is None):
                return False
    return True
