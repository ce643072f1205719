"""``--device auto|cpu|gpu``: which device runs a plan's operator, decided at plan time.

:func:`apply_device` runs after the language planner built the plan. It records the decision in
``plan.details["device"]`` (EXPLAIN shows it: requested, chosen device, backend, reason) and,
when the GPU is chosen, places the plan's operator on the GPU
(:class:`~replaydb.replay.plan.Placement`, the operator spec's device) so the executor feeds the
GPU variant of the bound operator (:func:`replaydb.operators.gpu.swap.swap_in`; same configuration, same results) in large
batches (one host-to-device transfer per batch).

* ``cpu`` - always the CPU operator; nothing GPU-related is imported.
* ``gpu`` - the GPU variant; a :class:`~replaydb.errors.UsageError` saying why when no CUDA GPU
  is usable (no driver, no device, numba-cuda missing). Under Numba's CUDA simulator
  (``NUMBA_ENABLE_CUDASIM=1``) the kernels run on the CPU, slowly - for testing. A query whose
  operator has no GPU variant (TPStream, GRETA, imprecise patterns), or uses a feature the GPU
  kernels lack (named in the reason), or whose plan computes from index aggregates without an
  operator (the window index path), runs on the CPU and EXPLAIN says why.
* ``auto`` (default) - the GPU only when one is present *and* the cost estimate
  (:func:`~replaydb.operators.gpu.device.select_device`) expects a gain; otherwise the CPU, with
  the reason ("no CUDA GPU available", "too little work ..."). Without an NVIDIA driver the
  decision is made from a driver probe alone, so CPU-only machines never import ``numba.cuda``.

The work estimate uses the events the plan replays: the pattern planner's covered fraction of the
stream when it chose index-assisted intervals, else all events of the queried streams.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from replaydb.errors import UsageError
from replaydb.replay.plan import Placement, TreeAggregates

DEVICES = ("auto", "cpu", "gpu")


def _cuda_possible() -> bool:
    """Cheap: could ``numba.cuda`` find a device (or is the simulator asked for)?"""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return True
    from replaydb.operators.gpu.testing import probe_cuda_driver

    return probe_cuda_driver()


def replayed_events(plan: Any) -> int:
    """Events the plan is expected to replay (see the module docstring)."""
    if plan.intervals is not None and len(plan.intervals) == 0:
        return 0
    total = sum(int(s.n_events) for s in plan.ctx.snapshots)
    st = getattr(plan, "pattern_state", None)
    chosen = getattr(st, "chosen", None)
    alpha = getattr(chosen, "alpha", None)
    if plan.intervals is not None and alpha is not None:
        return int(round(min(1.0, max(0.0, float(alpha))) * total))
    return total


def _place(plan: Any, info: dict[str, Any], **kw: Any) -> None:
    """Record the decision in the plan value (and in EXPLAIN's details)."""
    est = info.get("estimate")
    plan.physical = replace(plan.physical, placement=Placement(
        requested=info["requested"], device=info["device"], reason=info["reason"],
        backend=info.get("backend"),
        estimate=tuple(sorted(est.items())) if isinstance(est, dict) else (), **kw))


def apply_device(plan: Any) -> None:
    """Decide the device for ``plan`` (see the module docstring); places the operator on the
    GPU in the plan value when chosen."""
    requested = plan.ctx.options.device or "auto"
    if requested not in DEVICES:
        raise UsageError(f"--device must be one of {', '.join(DEVICES)}, got {requested!r}")
    info: dict[str, Any] = {"requested": requested}
    plan.details["device"] = info
    _decide(plan, requested, info)
    if plan.physical.operator.device != "gpu":
        _place(plan, info)


def _decide(plan: Any, requested: str, info: dict[str, Any]) -> None:
    if requested == "cpu":
        info.update(device="cpu", reason="requested")
        return
    if requested == "auto" and not _cuda_possible():
        info.update(device="cpu", reason="no CUDA GPU available (no NVIDIA driver or device "
                                          "found); running on the CPU")
        return
    from replaydb.operators.gpu.device import kernel_backend, recommended_batch_rows, select_device

    if requested == "gpu":
        select_device("gpu")  # raises UsageError naming why no GPU is usable
    elif kernel_backend() != "cuda":  # auto under the simulator: never chosen automatically
        info.update(device="cpu", reason="no CUDA GPU available (only the CUDA simulator); "
                                          "running on the CPU")
        return
    if isinstance(plan.physical.source, TreeAggregates):
        info.update(device="cpu", reason=f"plan {plan.strategy!r} computes without replaying "
                                         "into an operator (CPU); --plan replay runs the "
                                         "operator on the GPU")
        return
    from replaydb.operators.gpu.swap import estimate_for, swap_in

    probe = plan.operator if plan.operator is not None else plan.physical.operator.build()
    events = replayed_events(plan)
    rows = recommended_batch_rows("gpu")
    est = estimate_for(probe, events, batches=max(1, -(-events // rows)))
    chosen, choice = swap_in(probe, requested, est)
    info.update(device=choice.device, backend=choice.backend, reason=choice.reason)
    if est is not None:
        info["estimate"] = {"events": events, "cpu_s": est.cpu_seconds(),
                            "gpu_s": est.gpu_seconds()}
    if requested == "gpu" and choice.device != "gpu":
        info["reason"] = f"GPU requested, but the query runs on the CPU: {choice.reason}"
    if choice.device != "gpu" or chosen is probe:
        return
    plan.operator = chosen
    plan.physical = replace(plan.physical,
                            operator=plan.physical.operator.on("gpu", choice.backend))
    _place(plan, info, batch_rows=rows)
