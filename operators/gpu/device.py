"""Which device runs an operator, how data gets there, and the numerics both devices share.

Backends
--------
The GPU operators run Numba CUDA kernels on one of two backends, or fall back to the CPU code:

* ``"cuda"`` - a real NVIDIA GPU (``numba.cuda.is_available()``);
* ``"simulator"`` - Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``): the *same kernel source*
  runs on the CPU, thread by thread, in Python. It is slow (seconds for a few thousand threads)
  and exists so the kernels' logic is tested without a GPU;
* ``"cpu"`` - the GPU operator delegates to its CPU parent class (the operator it replaces):
  what ``backend="auto"`` gives on a machine with neither.

:func:`gpu_available` says whether a real device exists (False without a driver, and False under
the simulator, which is not a device). :func:`kernel_backend` names the backend kernels would use.

Device selection (``--device auto|cpu|gpu``)
--------------------------------------------
:func:`select_device` implements the CLI flag. ``cpu`` always gives the CPU; ``gpu`` gives the GPU
or raises :class:`~replaydb.errors.UsageError` naming why none is usable; ``auto`` gives the GPU
only when one is available *and* the work is large enough to amortize moving it there, by this
estimate (:class:`WorkEstimate`, constants in :data:`COST`)::

    cpu_s = events * cpu_ns(op) * work / 1e9
    gpu_s = batches * launch_s + events * bytes_per_event / pcie_bytes_per_s
            + events * gpu_ns(op) * work / 1e9
    choose the GPU  iff  gpu_s * MARGIN < cpu_s

``work`` is the per-event work factor of the operator (1 for a filter or an aggregation, the
other window's size for a join, the expected live partial matches for pattern matching). The
constants are round figures for an H100 on PCIe 5 against one core of the CPU path; the GPU
benchmark (``bench/bench_gpu.py``) measures the real ratios on a GPU machine, and these constants
are meant to be recalibrated from it. ``MARGIN`` (2) keeps borderline cases on the CPU, where
results arrive without device latency.

Transfers
---------
Host-to-device copies go through :class:`Staging`: one reusable *pinned* (page-locked) host buffer
per named input, grown by doubling, so a replay interval or a large batch is copied in one DMA
without re-pinning memory each time. Device arrays are reused the same way
(:class:`DeviceArrays`). Results are compacted on the device (only hits, only matches, only
windows) before they are copied back.

Numerics
--------
NVVM fuses ``a * b + c`` into one fused multiply-add by default, which rounds once where the CPU
rounds twice. Kernels that must reproduce the CPU's float results bit for bit use the arithmetic
of :mod:`replaydb.operators.exprcode.scalar` (``fmul``, ``fadd``, ``fsub``: ``__dmul_rn``-style
intrinsics on the device, which are never fused; plain operators on the CPU and under the
simulator) wherever a product meets a sum.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import config as numba_config
from numba import cuda

from replaydb.errors import UsageError

BACKENDS = ("auto", "cuda", "simulator", "cpu")


def simulator_active() -> bool:
    """True when ``NUMBA_ENABLE_CUDASIM=1`` made ``numba.cuda`` the CPU simulator."""
    return bool(getattr(numba_config, "ENABLE_CUDASIM", 0))


def gpu_available() -> bool:
    """True when a real CUDA device is usable (False without a driver and under the simulator)."""
    if simulator_active():
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # pragma: no cover - broken driver installations
        return False


def kernel_backend() -> str | None:
    """``"cuda"``, ``"simulator"`` or None: where CUDA kernels would run now."""
    if gpu_available():
        return "cuda"
    if simulator_active():
        return "simulator"
    return None


def resolve_backend(backend: str) -> str:
    """Turn an operator's ``backend`` argument into ``"cuda"``, ``"simulator"`` or ``"cpu"``.

    ``auto`` takes the kernel backend when there is one, else the CPU fallback. Asking for
    ``cuda`` or ``simulator`` when it is not there raises :class:`UsageError`.
    """
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    kb = kernel_backend()
    if backend == "auto":
        return kb or "cpu"
    if backend == "cpu":
        return "cpu"
    if kb != backend:
        have = kb or "neither a CUDA GPU nor the CUDA simulator"
        raise UsageError(f"backend {backend!r} requested but this process has {have}",
                         hint="NUMBA_ENABLE_CUDASIM=1 enables the simulator; a GPU needs the "
                              "NVIDIA driver and the 'gpu' extra (numba-cuda)")
    return backend


def block_size() -> int:
    """Threads per block: 256 on a device, 8 under the simulator (one Python thread each, and
    every barrier costs a round of thread switches). ``REPLAYDB_GPU_TPB`` overrides it (a power
    of two)."""
    env = os.environ.get("REPLAYDB_GPU_TPB")
    if env:
        tpb = int(env)
        if tpb < 1 or tpb & (tpb - 1):
            raise UsageError(f"REPLAYDB_GPU_TPB must be a power of two, got {env!r}")
        return tpb
    return 8 if simulator_active() else 256


def _make_simulator_shared_arrays_thread_safe() -> bool:
    """Under the simulator: make ``cuda.shared.array`` allocate once per block, whatever the
    thread interleaving. Returns whether the fix is installed.

    Numba's simulator (``FakeCUDAShared.array``, numba 0.5x-0.6x) looks the allocation up in a
    dict keyed by source line and creates it on a miss - without a lock. The CUDA threads of a
    block are Python threads, so two threads can both miss and each get a *private* array: the
    block then computes with two "shared" arrays and a scan returns wrong, run-dependent values
    (seen as rare, non-reproducible mismatches in the window tests). This wraps the lookup in a
    lock; kernels and results are unchanged, only the simulator's allocation is made atomic.
    On a real GPU nothing is patched.
    """
    if not simulator_active():
        return False
    import threading

    from numba.cuda.simulator import kernelapi

    cls = kernelapi.FakeCUDAShared
    if getattr(cls, "_replaydb_locked", False):
        return True
    orig = cls.array
    lock = threading.Lock()

    def array(self: Any, shape: Any, dtype: Any) -> Any:
        if shape == 0:  # dynamic shared memory: one buffer made in __init__, no race
            return orig(self, shape, dtype)
        import sys
        import traceback

        caller = tuple(traceback.extract_stack(sys._getframe())[-2][0:2])
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                from numba.core import types
                from numba.np import numpy_support

                dt = numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else dtype
                res = np.empty(shape, dt)
                self._allocations[caller] = res
        return res

    cls.array = array
    cls._replaydb_locked = True
    return True


SIMULATOR_SHARED_FIX = _make_simulator_shared_arrays_thread_safe()

TPB = block_size()
"""Threads per block of every kernel in this package (a power of two, fixed at import)."""


def blocks_for(n: int, tpb: int = TPB) -> int:
    return max(1, (int(n) + tpb - 1) // tpb)


# --------------------------------------------------------------------------- device choice
@dataclass(frozen=True)
class OpCost:
    """Per-event costs of one operator kind (nanoseconds per unit of work)."""

    cpu_ns: float
    gpu_ns: float


COST: dict[str, OpCost] = {
    "filter": OpCost(cpu_ns=4.0, gpu_ns=0.05),
    "window": OpCost(cpu_ns=800.0, gpu_ns=2.0),
    "join": OpCost(cpu_ns=5.0, gpu_ns=0.01),
    "pattern": OpCost(cpu_ns=4.0, gpu_ns=0.02),
}
"""Round per-event costs (see the module docstring); ``work`` multiplies them."""

LAUNCH_S = 50e-6
"""Fixed cost per device batch: kernel launches, synchronization, small copies."""

PCIE_BYTES_PER_S = 20e9
"""Effective host-to-device bandwidth from pinned memory (PCIe 5 x16, after overheads)."""

MARGIN = 2.0
"""The GPU must be estimated at least this much faster before ``auto`` picks it."""


@dataclass(frozen=True)
class WorkEstimate:
    """What the planner knows about the work before running it.

    ``operator`` is a key of :data:`COST`; ``events`` the events of the replay interval(s);
    ``bytes_per_event`` what each event sends to the device; ``work`` the per-event work factor
    (see the module docstring); ``batches`` how many device batches the events arrive in.
    """

    operator: str
    events: int
    bytes_per_event: int = 16
    work: float = 1.0
    batches: int = 1

    def cpu_seconds(self) -> float:
        return self.events * COST[self.operator].cpu_ns * self.work / 1e9

    def gpu_seconds(self) -> float:
        c = COST[self.operator]
        return (max(1, self.batches) * LAUNCH_S + self.events * self.bytes_per_event
                / PCIE_BYTES_PER_S + self.events * c.gpu_ns * self.work / 1e9)


@dataclass(frozen=True)
class DeviceChoice:
    """The outcome of :func:`select_device`: ``device`` is ``"cpu"`` or ``"gpu"``."""

    device: str
    backend: str
    reason: str


def select_device(requested: str = "auto", estimate: WorkEstimate | None = None) -> DeviceChoice:
    """Implement ``--device auto|cpu|gpu`` (see the module docstring)."""
    if requested not in ("auto", "cpu", "gpu"):
        raise UsageError(f"--device must be auto, cpu or gpu, got {requested!r}")
    if requested == "cpu":
        return DeviceChoice("cpu", "cpu", "requested")
    kb = kernel_backend()
    if requested == "gpu":
        if kb is None:
            raise UsageError("--device gpu: no CUDA GPU is available "
                             "(numba.cuda.is_available() is False)",
                             hint="install the 'gpu' extra on a machine with an NVIDIA driver, "
                                  "or use --device auto / cpu")
        return DeviceChoice("gpu", kb, "requested" + (" (CUDA simulator)" if kb == "simulator"
                                                      else ""))
    if kb != "cuda":
        return DeviceChoice("cpu", "cpu", "no CUDA GPU available")
    if estimate is None:
        return DeviceChoice("cpu", "cpu", "no work estimate: the CPU avoids device latency")
    if estimate.operator not in COST:
        return DeviceChoice("cpu", "cpu", f"no GPU variant for {estimate.operator!r}")
    cpu_s, gpu_s = estimate.cpu_seconds(), estimate.gpu_seconds()
    if gpu_s * MARGIN < cpu_s:
        return DeviceChoice("gpu", kb, f"estimated {cpu_s / gpu_s:.1f}x faster on the GPU "
                                       f"({gpu_s:.3g} s vs {cpu_s:.3g} s)")
    return DeviceChoice("cpu", "cpu", f"too little work to amortize the transfer "
                                      f"(GPU {gpu_s:.3g} s vs CPU {cpu_s:.3g} s)")


def recommended_batch_rows(device: str) -> int:
    """Replay batch size for an operator on ``device``: big batches amortize the transfer."""
    return 1 << 20 if device == "gpu" else 1 << 16


# --------------------------------------------------------------------------- transfers
class Staging:
    """Reusable pinned host buffers: ``stage(name, array)`` returns a device copy of ``array``.

    Each name keeps one page-locked buffer (grown by doubling) and one device buffer; copying a
    batch costs one memcpy into the pinned buffer plus one DMA, without allocating or pinning
    memory per batch. Under the simulator pinned buffers are ordinary arrays.
    """

    def __init__(self) -> None:
        self._host: dict[str, np.ndarray] = {}
        self._dev: dict[str, Any] = {}
        self.bytes_to_device = 0
        self.bytes_from_device = 0

    def _host_buf(self, name: str, n: int, dtype: np.dtype) -> np.ndarray:
        buf = self._host.get(name)
        if buf is None or buf.dtype != dtype or buf.shape[0] < n:
            cap = max(n, 2 * (buf.shape[0] if buf is not None else 0), 1024)
            try:
                buf = cuda.pinned_array(cap, dtype=dtype)
            except Exception:  # pragma: no cover - pinning can fail under memory pressure
                buf = np.empty(cap, dtype=dtype)
            self._host[name] = buf
        return buf

    def stage(self, name: str, array: np.ndarray) -> Any:
        """Copy a 1-D or 2-D array to the device through the named pinned buffer."""
        a = np.ascontiguousarray(array)
        flat = a.reshape(-1)
        n = flat.shape[0]
        host = self._host_buf(name, max(n, 1), a.dtype)
        host[:n] = flat
        dev = self._dev.get(name)
        if dev is None or dev.dtype != a.dtype or dev.shape[0] < n:
            dev = cuda.device_array(max(n, 1, 2 * (dev.shape[0] if dev is not None else 0)),
                                    dtype=a.dtype)
            self._dev[name] = dev
        if n:
            dev[:n].copy_to_device(host[:n])
        self.bytes_to_device += a.nbytes
        out = dev[:n]
        return out.reshape(a.shape) if a.ndim > 1 else out

    def upload_into(self, name: str, array: np.ndarray, dev_view: Any) -> None:
        """Copy ``array`` into an existing device array (view) through the pinned buffer."""
        a = np.ascontiguousarray(array)
        n = a.shape[0]
        if n == 0:
            return
        host = self._host_buf(name, n, a.dtype)
        host[:n] = a
        dev_view.copy_to_device(host[:n])
        self.bytes_to_device += a.nbytes

    def fetch(self, dev: Any, n: int | None = None) -> np.ndarray:
        """Copy (the first ``n`` entries of) a device array back to a new host array."""
        if n is not None:
            dev = dev[:n]
        out = dev.copy_to_host()
        self.bytes_from_device += out.nbytes
        return out


class DeviceArrays:
    """Named device arrays reused across batches (grown by doubling, never shrunk)."""

    def __init__(self) -> None:
        self._a: dict[str, Any] = {}

    def get(self, name: str, n: int, dtype: Any, cols: int | None = None) -> Any:
        """A device array with at least ``n`` rows (and ``cols`` columns); contents undefined."""
        dt = np.dtype(dtype)
        cur = self._a.get(name)
        rows = cur.shape[0] if cur is not None else 0
        if cur is None or cur.dtype != dt or rows < n or (cols is not None and
                                                          cur.shape[1] != cols):
            cap = max(int(n), 2 * rows, 16)
            cur = cuda.device_array((cap, cols) if cols is not None else cap, dtype=dt)
            self._a[name] = cur
        return cur

    def clear(self) -> None:
        self._a.clear()


def zeros_on_device(n: int, dtype: Any) -> Any:
    return cuda.to_device(np.zeros(max(1, n), dtype=dtype))


def next_pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))
