"""An operator as a value: its family, its frozen configuration and its constructor options.

A physical plan names the operator it runs by an :class:`OperatorSpec` - plain data that pickles,
compares with ``==`` and travels to Spark executors - never by an operator object or a factory
closure. :meth:`OperatorSpec.build` makes a fresh operator from it, on the CPU or, for the
families that have one, as the GPU variant (same configuration, same results).

Every operator returns the spec it was built from (:meth:`~replaydb.operators.base.Operator.spec`),
so ``op.spec().build()`` is an equal, fresh operator.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from replaydb.errors import UsageError

FAMILIES: dict[str, tuple[str, str | None]] = {
    "pattern": ("replaydb.operators.pattern.operator:PatternOperator",
                "replaydb.operators.gpu.pattern:GpuPatternOperator"),
    "window": ("replaydb.operators.window.operator:WindowAggregate",
               "replaydb.operators.gpu.window:GpuWindowAggregate"),
    "filter": ("replaydb.operators.filter:FilterOperator",
               "replaydb.operators.gpu.filter:GpuFilterOperator"),
    "join": ("replaydb.operators.join:JoinOperator",
             "replaydb.operators.gpu.join:GpuJoinOperator"),
    "tpstream": ("replaydb.operators.tpstream.operator:TPStream", None),
    "greta": ("replaydb.operators.greta.operator:GretaOperator", None),
    "imprecise": ("replaydb.operators.imprecise.operator:ImprecisePatternOperator", None),
}
"""family -> (``module:class`` of the CPU operator, of its GPU variant or None)."""

DEVICES = ("cpu", "gpu")


def _load(path: str) -> type:
    mod, _, name = path.partition(":")
    cls: type = getattr(importlib.import_module(mod), name)
    return cls


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
            return _load(gpu)(self.config, state_cap=self.state_cap, backend=self.backend)
        return _load(cpu)(self.config, state_cap=self.state_cap, **dict(self.options))

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
