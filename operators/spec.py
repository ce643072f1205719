"""An operator as a value: its family, its frozen configuration and its constructor options.

A physical plan names the operator it runs by an :class:`OperatorSpec` - plain data that pickles,
compares with ``==`` and travels to Spark executors - never by an operator object or a factory
closure. :meth:`OperatorSpec.build` makes a fresh operator from it, on the CPU or, for the
families that have one, as the GPU variant (same configuration, same results).

Every operator returns the spec it was built from (:meth:`~replaydb.operators.base.Operator.spec`),
so ``op.spec().build()`` is an equal, fresh operator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from replaydb.errors import UsageError

Loader = Callable[[], type]


def _cpu_class(family: str) -> type:
    """The CPU operator class of a built-in family (imported on first use)."""
    if family == "pattern":
        from replaydb.operators.pattern.operator import PatternOperator as cls
    elif family == "window":
        from replaydb.operators.window.operator import WindowAggregate as cls
    elif family == "filter":
        from replaydb.operators.filter import FilterOperator as cls
    elif family == "join":
        from replaydb.operators.join import JoinOperator as cls
    elif family == "tpstream":
        from replaydb.operators.tpstream.operator import TPStream as cls
    elif family == "greta":
        from replaydb.operators.greta.operator import GretaOperator as cls
    else:
        from replaydb.operators.imprecise.operator import ImprecisePatternOperator as cls
    return cls


def _gpu_class(family: str) -> type:
    """The GPU variant of a built-in family that has one (imported on first use)."""
    if family == "pattern":
        from replaydb.operators.gpu.pattern import GpuPatternOperator as cls
    elif family == "window":
        from replaydb.operators.gpu.window import GpuWindowAggregate as cls
    elif family == "filter":
        from replaydb.operators.gpu.filter import GpuFilterOperator as cls
    else:
        from replaydb.operators.gpu.join import GpuJoinOperator as cls
    return cls


def _builtin(family: str, gpu: bool) -> tuple[Loader, Loader | None]:
    return (lambda: _cpu_class(family)), ((lambda: _gpu_class(family)) if gpu else None)


FAMILIES: dict[str, tuple[Loader, Loader | None]] = {
    name: _builtin(name, gpu) for name, gpu in (
        ("pattern", True), ("window", True), ("filter", True), ("join", True),
        ("tpstream", False), ("greta", False), ("imprecise", False))
}
"""family -> (loader of the CPU operator class, of its GPU variant or None)."""

DEVICES = ("cpu", "gpu")


def register_family(name: str, cpu: type, gpu: type | None = None) -> None:
    """Make operators of class ``cpu`` (and its GPU variant ``gpu``) buildable from specs of
    family ``name`` in this process (an operator of one's own, whose class sets ``family =
    name``; Spark executors know only the built-in families). A family cannot be taken by
    another class."""
    if name in FAMILIES and FAMILIES[name][0]() is not cpu:
        raise UsageError(f"operator family {name!r} is taken")
    FAMILIES[name] = ((lambda: cpu), None if gpu is None else (lambda: gpu))


@dataclass(frozen=True)
class OperatorSpec:
    """A buildable description of one operator (see the module docstring).

    ``options`` are the family's further constructor keywords as sorted ``(name, value)``
    pairs (e.g. ``vectorized`` of the pattern operator, the input ``schema`` of GRETA and
    TPStream). ``device`` picks the CPU operator or its GPU variant; ``backend`` is the GPU
    variant's kernel backend (``cuda`` or ``simulator``)."""

    family: str
    config: Any
    state_cap: int | None = None
    options: tuple[tuple[str, Any], ...] = ()
    device: str = "cpu"
    backend: str | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise UsageError(f"unknown operator family {self.family!r}",
                             hint=f"families: {', '.join(sorted(FAMILIES))}")
        if self.device not in DEVICES:
            raise UsageError(f"unknown device {self.device!r}", hint="cpu or gpu")
        if self.device == "gpu" and FAMILIES[self.family][1] is None:
            raise UsageError(f"{self.family} operators have no GPU variant")

    def build(self) -> Any:
        """A fresh operator (never fed) of this spec."""
        cpu, gpu = FAMILIES[self.family]
        if self.device == "gpu":
            assert gpu is not None
            return gpu()(self.config, state_cap=self.state_cap, backend=self.backend)
        return cpu()(self.config, state_cap=self.state_cap, **dict(self.options))

    def on(self, device: str, backend: str | None = None) -> OperatorSpec:
        """The same operator on ``device``."""
        return OperatorSpec(self.family, self.config, self.state_cap, self.options, device,
                            backend if device == "gpu" else None)

    def with_config(self, config: Any) -> OperatorSpec:
        """The same operator with another configuration of its family."""
        return OperatorSpec(self.family, config, self.state_cap, self.options, self.device,
                            self.backend)

    def describe(self) -> dict[str, Any]:
        """What EXPLAIN prints of the operator."""
        out: dict[str, Any] = {"family": self.family, "device": self.device}
        if self.backend:
            out["backend"] = self.backend
        if self.state_cap is not None:
            out["state_cap"] = self.state_cap
        shown = {k: v for k, v in self.options if k != "schema"}
        if shown:
            out["options"] = shown
        return out
