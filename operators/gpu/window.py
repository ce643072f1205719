"""GPU windowed aggregation (dissertation 4.3.3): the window combine runs on the device.

:class:`GpuWindowAggregate` takes the same :class:`~replaydb.operators.window.WindowConfig` as
:class:`~replaydb.operators.window.WindowAggregate` and reports the same windows with the same
aggregates. Everything that decides *which* windows exist (slices, the open slice, pending
slices, jumps over empty stretches, ``where``, time/count anchoring) is the CPU operator's own
code; the GPU variant replaces its slide tree with :class:`DeviceSlideState`, whose ring of the
window's ``W`` slice partials lives in device memory.

Per batch the host reduces events into per-slice partial aggregates (NumPy ``reduceat``, O(batch),
as the CPU operator does), then one *window step* for the ``n = k*p`` new slices runs on the
device:

1. the new leaves are copied up (one staged transfer per component) behind the ring:
   ``y = ring ++ new``, ``W + n`` leaves;
2. two segmented scans of ``y`` in blocks of ``W`` leaves (:mod:`.scan`): an inclusive prefix and
   an inclusive suffix scan per block, for every component with its merge (add, min, max, and
   first/last carrying their value);
3. window ``i`` (``i = 1..k``, starting at leaf ``s = i*p``) is ``suffix[s] + prefix[s + W - 1]``
   (van Herk / Gil-Werman: one merge per window, whatever ``W``) - one thread per window;
4. the ring becomes ``y[n : n + W]`` (a device-to-device copy), and the ``k`` window partials are
   copied back for the host to finalize (AVG, variances, NULLs) exactly as on the CPU.

Work per step is O(W + n) on the device (a few scans of the ring, fully parallel) and O(n) on the
host; the result transfer is O(k). Slide 1 with large windows (the dissertation's experiment: the
window is re-evaluated per event) is the case this is built for.

Exactness: COUNT, MIN, MAX, FIRST, LAST and integer SUM are identical to the CPU's (they do not
depend on merge order; int64 addition is associative even when it wraps). Float SUM and AVG, and
the variance family, are sums in a *different order* than the CPU's slide tree (a parallel scan
instead of a left-to-right one), so they agree to within rounding: relative error at most about
``W * 2**-53`` of the sum of absolute values - the tests allow 1e-9 relative (1e-6 for variances,
whose formula cancels), the same tolerance the CPU operator is held to against its oracle.

GROUP BY queries are not taken: a device ring per group would cost kernel launches per group
and batch, which only pays off for few, huge groups, so the GPU variant refuses them
(:class:`~replaydb.operators.gpu.exprvm.GpuUnsupported`) and the planner keeps the CPU operator,
with EXPLAIN naming the reason (documented limitation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from replaydb.operators.base import DEFAULT_STATE_CAP
from replaydb.operators.gpu.device import TPB, DeviceArrays, Staging, blocks_for, resolve_backend
from replaydb.operators.gpu.exprvm import GpuUnsupported
from replaydb.operators.gpu.scan import (
    ADD,
    FIRST,
    LAST,
    MAX,
    MIN,
    combine,
    identity,
    segmented_scan,
)
from replaydb.operators.window.aggregates import Layout, Partials, length, take
from replaydb.operators.window.assign import SliceGeometry
from replaydb.operators.window.config import WindowConfig
from replaydb.operators.window.operator import WindowAggregate
from replaydb.operators.window.sliding import SlideState

_OPS = {"add": ADD, "min": MIN, "max": MAX, "first": FIRST, "last": LAST}


@cuda.jit
def window_pick(pre_k, pre_v, suf_k, suf_v, W, p, k, op, has_v, out_k, out_v):  # pragma: no cover
    """Window ``j`` starts at leaf ``s = (j+1)p``: ``suffix[s] + prefix[s + W - 1]``."""
    j = cuda.grid(1)
    if j >= k:
        return
    s = (j + 1) * p
    e = s + W - 1
    if s % W == 0:  # the window is exactly one block
        out_k[j] = pre_k[e]
        if has_v:
            out_v[j] = pre_v[e]
        return
    rk, rv = combine(op, suf_k[s], suf_v[s], pre_k[e], pre_v[e])
    out_k[j] = rk
    if has_v:
        out_v[j] = rv


class DeviceSlideState(SlideState):
    """:class:`~replaydb.operators.window.sliding.SlideState` with the ring on the device.

    Only the window step (:meth:`_steps`) and what touches the ring differ from the CPU class;
    feeding, pending and open slices, jumps and the choice of windows to report are inherited.
    """

    host_ring = False

    def __init__(self, layout: Layout, geom: SliceGeometry, k_first: int, *,
                 emit_empty: bool = False, staging: Staging, dev: DeviceArrays) -> None:
        # the parent's constructor would build a host FlatFAT of 2W leaves that is never used
        self.layout = layout
        self.geom = geom
        self.k_first = int(k_first)
        self.emit_empty = emit_empty
        W, p = geom.W, geom.p
        self.k_r = self.k_first - (W + p - 1) // p
        self.ring = None  # type: ignore[assignment]
        self.pending = layout.identity(0)
        self.open_slice = None
        self.open_part = None
        self.last_rel = None
        self._staging = staging
        self._dev = dev
        self._pairs = self._component_pairs(layout)
        self._dring = {c.name: cuda.to_device(layout.identity(W)[c.name])
                       for c in layout.components}
        self._ring_n = 0

    @staticmethod
    def _component_pairs(layout: Layout) -> list[tuple[str, str | None, int]]:
        """(key component, linked value component or None, merge op) per scan."""
        vals = {c.link: c.name for c in layout.components if c.kind == "val"}
        return [(c.name, vals.get(c.name), _OPS[c.kind]) for c in layout.components
                if c.kind != "val"]

    # ------------------------------------------------------------------ the ring
    def _ring_idle(self) -> bool:
        return self._ring_n == 0 and int(self.pending["n"].sum()) == 0

    def _steps(self, x: Partials, out_k: list[np.ndarray], out_p: list[Partials]) -> None:
        new = self._whole_steps(x)
        if new is None:
            return
        lay = self.layout
        W, p = self.geom.W, self.geom.p
        use = length(new)
        k = use // p
        m = W + use
        res: Partials = {}
        for key, val, op in self._pairs:
            comps = [key] if val is None else [key, val]
            ys, pres, sufs = {}, {}, {}
            for c in comps:
                dt = np.dtype(lay.component(c).dtype)
                y = self._dev.get(f"y_{c}", m, dt)
                y[:W].copy_to_device(self._dring[c])
                self._staging.upload_into(f"new_{c}", new[c], y[W:m])
                pre = self._dev.get(f"pre_{c}", m, dt)
                suf = self._dev.get(f"suf_{c}", m, dt)
                pre[:m].copy_to_device(y[:m])
                suf[:m].copy_to_device(y[:m])
                ys[c], pres[c], sufs[c] = y, pre, suf
            pv = pres[val] if val is not None else None
            sv = sufs[val] if val is not None else None
            segmented_scan(pres[key], m, W, op, v=pv)
            segmented_scan(sufs[key], m, W, op, reverse=True, v=sv)
            kd = np.dtype(lay.component(key).dtype)
            ok = self._dev.get(f"out_{key}", k, kd)
            if val is not None:
                vd = np.dtype(lay.component(val).dtype)
                ov = self._dev.get(f"out_{val}", k, vd)
            else:  # no linked value: the kernel reads the keys again and writes nothing
                pv, sv = pres[key], sufs[key]
                ov = self._dev.get(f"out_dummy_{kd.name}", 1, kd)
            window_pick[blocks_for(k), TPB](pres[key], pv, sufs[key], sv, W, p, k, op,
                                            val is not None, ok, ov)
            res[key] = self._staging.fetch(ok, k)
            if val is not None:
                res[val] = self._staging.fetch(ov, k)
            for c in comps:
                self._dring[c].copy_to_device(ys[c][use:use + W])
        res = {c.name: res[c.name] for c in lay.components}
        self._ring_n = int(res["n"][-1])
        ks = np.arange(self.k_r + 1, self.k_r + k + 1, dtype=np.int64)
        self.k_r += k
        keep = ks >= self.k_first
        if not self.emit_empty:
            keep &= res["n"] > 0
        if not np.all(keep):
            ks, res = ks[keep], take(res, keep)
        if len(ks):
            out_k.append(ks)
            out_p.append(res)

    def ring_leaves(self) -> Partials:
        """The ring's ``W`` leaves (oldest first) copied to the host."""
        return {c: a.copy_to_host() for c, a in self._dring.items()}

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict:
        return {
            "k_first": self.k_first, "k_r": self.k_r, "ring": self.ring_leaves(),
            "ring_n": self._ring_n, "pending": self.pending, "open_slice": self.open_slice,
            "open_part": self.open_part, "last_rel": self.last_rel,
        }

    def set_state(self, st: dict) -> None:
        self.k_first, self.k_r = st["k_first"], st["k_r"]
        self._dring = {c: cuda.to_device(np.ascontiguousarray(v)) for c, v in st["ring"].items()}
        self._ring_n = st["ring_n"]
        self.pending = st["pending"]
        self.open_slice, self.open_part = st["open_slice"], st["open_part"]
        self.last_rel = st["last_rel"]

    def _check(self) -> None:
        """Invariants: ring of W leaves whose event count is the tracked one; pending and open
        slice as in the CPU class."""
        ring = self.ring_leaves()
        for c, a in ring.items():
            if len(a) != self.geom.W:
                raise AssertionError(f"device ring component {c!r} has {len(a)} leaves")
        if int(ring["n"].sum()) != self._ring_n:
            raise AssertionError("device ring count differs from the tracked count")
        if length(self.pending) >= self.geom.p:
            raise AssertionError("a full window step is pending")
        if self.open_slice is not None:
            if self.open_slice < self.next_slice:
                raise AssertionError("open slice lies before the ring's next slice")
            if self.open_part is None or int(self.open_part["n"][0]) < 1:
                raise AssertionError("open slice without events")


class GpuWindowAggregate(WindowAggregate):
    """Windowed aggregation with the window combine on the GPU (see the module docstring).

    ``backend`` as for :class:`~replaydb.operators.gpu.filter.GpuFilterOperator`; window steps
    run in :class:`DeviceSlideState`. GROUP BY raises
    :class:`~replaydb.operators.gpu.exprvm.GpuUnsupported` unless the backend is the CPU
    fallback.
    """

    device = "gpu"

    def __init__(self, config: WindowConfig, *, state_cap: int | None = DEFAULT_STATE_CAP,
                 backend: str = "auto") -> None:
        self.backend = resolve_backend(backend)
        if config.group_by and self.backend != "cpu":
            raise GpuUnsupported("windowed aggregation",
                                 "GROUP BY (each group would need a device ring of its own)")
        self._staging = Staging()
        self._dev = DeviceArrays()
        super().__init__(config, state_cap=state_cap)

    @property
    def on_device(self) -> bool:
        """Whether window steps run on the device (not the CPU fallback)."""
        return self.backend != "cpu"

    def _new_state(self, k_first: int) -> SlideState:
        if not self.on_device:
            return super()._new_state(k_first)
        assert self._layout is not None
        return DeviceSlideState(self._layout, self.geom, k_first,
                                emit_empty=self.cfg.empty == "emit", staging=self._staging,
                                dev=self._dev)

    def transfer_bytes(self) -> dict[str, Any]:
        """Bytes copied to and from the device so far."""
        return {"to_device": self._staging.bytes_to_device,
                "from_device": self._staging.bytes_from_device}


# identity() is re-exported for tests that build device rings by hand
__all__ = ["DeviceSlideState", "GpuWindowAggregate", "identity"]
