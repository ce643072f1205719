"""GPU variants of the online operators (dissertation chapter 4), written with Numba CUDA.

Each GPU operator takes the same frozen configuration as the CPU operator it replaces and gives
the same results, so the planner can swap it in for ``--device gpu`` (or ``auto`` when a GPU is
present and the work is large enough, :func:`~.device.select_device`):

* :class:`~.filter.GpuFilterOperator` - filter (bitmap eval kernel, in-order compaction);
* :class:`~.window.GpuWindowAggregate` - windowed aggregation (per-slice partials, window
  combine by segmented prefix/suffix scans on a device ring);
* :class:`~.join.GpuJoinOperator` - windowed join (per-event probe of the other window in slices,
  output slots reserved with atomics, results committed in order);
* :class:`~.pattern.GpuPatternOperator` - sequential pattern matching (partial-match arrays per
  NFA state, check/propagate kernels, compaction on the device).

Modules: :mod:`.device` (backends, device choice, staged transfers, exact float helpers),
:mod:`.scan` (prefix scans), :mod:`.exprvm` and :mod:`.columns` (predicates on the device),
:mod:`.pattern_kernels`, :mod:`.swap` (:func:`~.swap.swap_in`), :mod:`.testing` (choosing the
simulator for tests, recording kernel signatures).

Without a GPU the kernels run unchanged under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``,
slow: tests use small inputs) or the operators fall back to their CPU code. Importing this package
does not import ``numba.cuda``; the submodules do (so the simulator can still be chosen first).
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {  # name -> the submodule that defines it
    "GpuFilterOperator": "filter",
    "GpuJoinOperator": "join",
    "GpuWindowAggregate": "window",
    "GpuPatternOperator": "pattern",
    "GpuUnsupported": "exprvm",
    "gpu_available": "device",
    "select_device": "device",
    "WorkEstimate": "device",
    "DeviceChoice": "device",
    "swap_in": "swap",
    "estimate_for": "swap",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'replaydb.operators.gpu' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
