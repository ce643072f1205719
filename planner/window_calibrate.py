"""Calibrating the windowed-aggregation cost model on one stream (``replaydb calibrate --window``).

The model of :mod:`replaydb.planner.window_cost` (dissertation 3.3.2) counts *merges*: replay
merges every event once, the index path merges ``index_merges(slice)`` partial aggregates per
slice. Counting both in the same unit assumes that a merge costs the same on both paths. It does
not quite: replay decodes its leaves in long sequential runs, while the index path reads single
boundary leaves (one row group each, with the per-read overhead of the file format), walks tree
levels and starts one temporal aggregation per slice. How much more an index merge costs depends
on the machine and on the stream's layout (event width, leaf size), so - as for the pattern
planner, whose weights "must be re-calibrated per setting" - the ratio is measured:

1. a sample of the stream (by default up to 2M events from its middle) is replayed in one
   window: ``c_r`` seconds per event;
2. the index path answers tumbling windows over the same sample at up to three slides, chosen
   so that a slice spans about 2, ``D`` and ``D**2`` leaves and its bounds fall inside leaves
   (each slice is one temporal aggregation; slides with fewer than 500 slices are skipped):
   seconds per slice ``y`` against the model's merges per slice ``x``;
3. a least-squares line ``y = a + b * x`` (``a, b >= 0``; with one probe ``a = 0``) gives the
   weights in units of a replay merge: ``w_merge = b / c_r`` (cost of one index-path merge) and ``w_slice = a / c_r``
   (fixed cost of one temporal aggregation).

The weighted model is ``C_index = w_merge * merges + w_slice`` per slice and ``C_replay = slide *
r`` per slide; the uncalibrated model (``w_merge = 1``, ``w_slice = 0``) is the dissertation's.
The weights are stored per stream in the store configuration (``calibration.window.<stream>``)
and used by the planner's path choice, its break-even slide and EXPLAIN.

Cost: one replay of the sample and three index-path runs over it, ``repeat`` times each:
O(sample events). The aggregates measured are ``COUNT(*)`` and ``SUM`` of the first
numeric attribute - what the tree materializes for every numeric column.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import UsageError
from replaydb.planner.window_cost import TreeStats, index_merges

SAMPLE_EVENTS = 2_000_000
"""Events of the calibration sample (from the middle of the stream)."""
MIN_SLICES = 500
"""A probe slide needs at least this many slices in the sample: with fewer, the run's fixed cost
(setting up the walk, the first leaves, the output) shows up as cost per slice and the fitted
line is skewed."""
W_MIN = 1e-3
"""Smallest ``w_merge`` stored (the fit may put all of a slice's cost into ``w_slice``)."""


@dataclass
class WindowCalibration:
    """Fitted weights of one stream and the measurements behind them."""

    stream: str
    w_merge: float
    w_slice: float
    replay_s_per_event: float
    events: int
    probes: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0

    def as_config(self) -> dict[str, Any]:
        """What the store configuration keeps (``calibration.window.<stream>``)."""
        return {"w_merge": self.w_merge, "w_slice": self.w_slice,
                "replay_s_per_event": self.replay_s_per_event, "events": self.events,
                "measured": time.time()}

    def summary(self) -> dict[str, Any]:
        return asdict(self)


def weights_of(store: Any, stream: str) -> tuple[float, float] | None:
    """``(w_merge, w_slice)`` stored for ``stream``, or None when it was never calibrated."""
    cal = (store.config.get("calibration") or {}).get("window") or {}
    got = cal.get(stream)
    if not got:
        return None
    return float(got["w_merge"]), float(got["w_slice"])


def _numeric_attribute(snap: Any) -> str | None:
    for f in snap.arrow_schema:
        if f.name not in ("t", "seq") and (pa.types.is_integer(f.type)
                                           or pa.types.is_floating(f.type)):
            return f.name
    return None


def _best(fn: Any, repeat: int) -> float:
    best = math.inf
    for _ in range(max(1, repeat)):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best


def fit_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares ``y = a + b x`` with ``a, b >= 0`` (the better of the free fit, clamped, and
    the two one-parameter fits)."""
    cands: list[tuple[float, float]] = []
    if len(x) >= 2 and np.ptp(x) > 0:
        b, a = np.polyfit(x, y, 1)
        if a >= 0 and b >= 0:
            cands.append((float(a), float(b)))
    cands.append((0.0, float(max(0.0, (x @ y) / max(x @ x, 1e-300)))))
    cands.append((float(max(0.0, y.mean())), 0.0))
    return min(cands, key=lambda ab: float(((ab[0] + ab[1] * x - y) ** 2).sum()))


def calibrate_window(store: Any, stream: str | None = None, *, sample_events: int = SAMPLE_EVENTS,
                     repeat: int = 2, save: bool = True) -> WindowCalibration:
    """Measure replay and the index path on a sample of ``stream`` and fit the weights (module
    docstring); stores them unless ``save`` is False."""
    from replaydb.operators.expr import Column
    from replaydb.operators.window import AggSpec, WindowConfig
    from replaydb.replay import tree_aggregates

    t_start = time.perf_counter()
    if stream is None:
        names = store.streams()
        if len(names) != 1:
            raise UsageError("name the stream to calibrate on",
                             hint=f"the store has {len(names)} streams")
        stream = names[0]
    snap = store.stream(stream)
    tr = snap.t_range
    n = snap.n_events
    if tr is None or n < 1000:
        raise UsageError(f"stream {stream!r} is too small to calibrate on ({n} events)")
    st = TreeStats.of_snapshot(snap)
    frac = min(1.0, sample_events / n)
    span = tr[1] - tr[0] + 1
    t0 = tr[0] + int(span * (1 - frac) / 2)
    t1 = t0 + max(1, int(span * frac))
    attr = _numeric_attribute(snap)
    aggs = (AggSpec("COUNT", None, "n"),) + ((AggSpec("SUM", Column(attr), "s"),) if attr else ())
    width = t1 - t0

    def cfg(slide: int) -> Any:
        return WindowConfig(size=slide, slide=slide, aggregates=aggs, schema=snap.arrow_schema)

    events = int(round(n * frac))
    whole = cfg(width)
    rep_s = _best(lambda: tree_aggregates.run_replay(snap, whole, t0=t0, t1=t1), repeat)
    c_r = rep_s / max(1, events)
    probes = []
    unit = st.B / max(st.r, 1e-300)  # stream units per leaf
    for leaves in (2, st.D, st.D * st.D):
        # a third of a leaf off the leaf grid: slice bounds then fall inside leaves, as with real
        # timestamps (bounds on leaf edges would read no leaf at all on regular synthetic data)
        slide = max(1, int(round((leaves + 1 / 3) * unit)))
        slices = width // slide
        if slices < MIN_SLICES:
            continue
        sec = _best(lambda slide=slide: tree_aggregates.run_index(snap, cfg(slide), t0=t0, t1=t1),
                    repeat)
        probes.append({"slide": float(slide), "leaves_per_slice": float(leaves),
                       "slices": float(slices), "merges_per_slice": index_merges(slide, st),
                       "seconds": sec, "s_per_slice": sec / slices})
    if not probes:
        raise UsageError(f"stream {stream!r} is too small to calibrate the window cost model",
                         hint="the sample must hold at least 500 slices of two leaves")
    x = np.array([p["merges_per_slice"] for p in probes])
    y = np.array([p["s_per_slice"] for p in probes])
    a, b = fit_line(x, y)
    cal = WindowCalibration(stream=stream, w_merge=max(b / c_r, W_MIN) if c_r > 0 else 1.0,
                            w_slice=a / c_r if c_r > 0 else 0.0, replay_s_per_event=c_r,
                            events=events, probes=probes,
                            seconds=time.perf_counter() - t_start)
    if save:
        conf = dict(store.config.get("calibration") or {})
        win = dict(conf.get("window") or {})
        win[stream] = cal.as_config()
        conf["window"] = win
        store.update_config(calibration=conf)
    return cal
