"""EXPLAIN pictures: a stream's timeline with the plan drawn on it (``replaydb explain --plot``).

:func:`plot_plan` writes one PNG with up to three aligned panels over the time axis:

1. **events** - events per bucket of every queried stream, taken from the TAB+-tree (the lowest
   level with at most ``max_buckets`` nodes; no event is read), with the **planned replay
   intervals** shaded. A full replay shades the whole stream and says so in the title.
2. **coarse pattern map** - the regions the pattern planner's CPM kept (where a match can be);
   drawn only when the plan has a CPM (pattern queries on indexed/summarized attributes).
3. **matches** - one horizontal bar per result row from its first to its last event time. The
   time columns are found by name: ``first_t``/``last_t`` (patterns), ``window_start``/
   ``window_end`` (windows), ``ts``/``te`` (situations, trends); otherwise ``t`` as points. Up to
   ``max_matches`` rows are drawn; the title says how many there were.

Times are the stream's int64 units; when the unit is known and the values are plausible epoch
times (years 1971-2200) the axis shows dates. Cost: one tree level per stream plus the result
rows (O(buckets + matches) drawing work); the plot never reads event data itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.timeunits import EPOCH_SECONDS

MATCH_COLUMNS: tuple[tuple[str, str], ...] = (
    ("first_t", "last_t"), ("window_start", "window_end"), ("ts", "te"), ("start", "end"),
)
"""Column pairs recognized as a result row's time span, in order of preference."""

_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def match_spans(table: pa.Table | None) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(starts, ends, label) of a result table's rows, or None when it has no time column."""
    if table is None or table.num_rows == 0:
        return None
    names = set(table.column_names)
    for a, b in MATCH_COLUMNS:
        if a in names and b in names:
            return _ints(table.column(a)), _ints(table.column(b)), f"{a} .. {b}"
    if "t" in names:
        t = _ints(table.column("t"))
        return t, t, "t"
    return None


def _ints(col: Any) -> np.ndarray:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_timestamp(arr.type) or pa.types.is_date(arr.type):
        arr = arr.cast(pa.int64())
    return np.asarray(arr.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)


class _Axis:
    """Maps stream times to plotted x values (dates when the values look like epoch times)."""

    def __init__(self, unit: str | None, lo: int, hi: int) -> None:
        self.per_s = _PER_SECOND.get(unit or "", 0)
        self.dates = bool(self.per_s) and EPOCH_SECONDS[0] <= lo / self.per_s \
            and hi / self.per_s <= EPOCH_SECONDS[1]
        self.unit = unit

    def __call__(self, t: np.ndarray | int) -> Any:
        if not self.dates:
            return np.asarray(t, dtype=np.float64)
        ns = np.asarray(t, dtype=np.int64) * (1_000_000_000 // self.per_s)
        return ns.astype("datetime64[ns]")

    @property
    def label(self) -> str:
        return "time" if self.dates else f"time ({self.unit or 'stream units'})"


def _timeline(snap: Any, max_buckets: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    h = snap.histogram(max_buckets=max_buckets)
    if h.num_rows == 0 or "count" not in h.column_names:
        e = np.empty(0, np.int64)
        return e, e, e
    return (h.column("t_min").to_numpy(), h.column("t_max").to_numpy(),
            h.column("count").to_numpy())


def plot_plan(plan: Any, path: str | Path, *, result: pa.Table | None = None,
              max_buckets: int = 2000, max_matches: int = 5000) -> Path:
    """Draw ``plan`` (a :class:`~replaydb.planner.query.Plan`) and ``result`` into a PNG at
    ``path``; returns the path. Raises :class:`~replaydb.errors.UsageError` when the streams are
    empty (there is no timeline to draw)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from replaydb.errors import UsageError

    ctx = plan.ctx
    lines = [(s.name, *_timeline(s, max_buckets)) for s in ctx.snapshots]
    starts = [tmin[0] for _, tmin, _, _ in lines if tmin.size]
    ends = [tmax[-1] for _, _, tmax, _ in lines if tmax.size]
    if not starts:
        raise UsageError("the queried streams hold no events: nothing to plot")
    lo, hi = int(min(starts)), int(max(ends))
    ax_t = _Axis(ctx.time_unit, lo, hi)

    state = getattr(plan, "pattern_state", None)
    scope = getattr(state, "scope", None)
    cpm = scope.regions if scope is not None and getattr(scope, "level", None) is not None \
        else None
    spans = match_spans(result)

    panels = ["events"] + (["cpm"] if cpm is not None else []) + \
        (["matches"] if spans is not None else [])
    heights = {"events": 3.0, "cpm": 0.7, "matches": 1.6}
    fig, axes = plt.subplots(len(panels), 1, sharex=True, squeeze=False,
                             figsize=(11, 1.2 + sum(heights[p] for p in panels)),
                             gridspec_kw={"height_ratios": [heights[p] for p in panels]})
    axes = {p: axes[i][0] for i, p in enumerate(panels)}

    ax = axes["events"]
    drawn = [(name, tmin, np.maximum(tmax - tmin, 1), cnt) for name, tmin, tmax, cnt in lines
             if tmin.size]
    rates = [cnt / width for _, _, width, cnt in drawn]
    scale, per = rate_unit(rates, ctx.time_unit)
    for (name, tmin, width, _), rate in zip(drawn, rates):
        xs = ax_t(np.column_stack([tmin, tmin + width]).ravel())
        ax.plot(xs, np.repeat(rate * scale, 2), lw=0.8, label=name)
    _shade(ax, plan.intervals, lo, hi, ax_t)
    ax.set_ylabel(f"events per {per}")
    if _wide(rates):
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    if len(lines) > 1:
        ax.legend(loc="upper right", fontsize=8)

    if cpm is not None:
        a = axes["cpm"]
        for r0, r1 in np.asarray(cpm, dtype=np.int64):
            a.axvspan(ax_t(int(r0)), ax_t(int(r1)), color="tab:orange", alpha=0.6, lw=0)
        a.set_yticks([])
        a.set_ylabel("CPM", rotation=0, ha="right", va="center")

    if spans is not None:
        a = axes["matches"]
        s0, s1, label = spans
        n = s0.size
        take = np.linspace(0, n - 1, min(n, max_matches)).astype(np.int64) if n else s0
        ys = np.arange(take.size) % 20
        a.hlines(ys, ax_t(s0[take]), ax_t(np.maximum(s1[take], s0[take])), color="tab:red",
                 lw=2)
        a.plot(ax_t(s0[take]), ys, "|", color="tab:red", ms=10, mew=2)
        a.set_yticks([])
        a.set_ylabel(f"results\n({label})", rotation=0, ha="right", va="center", fontsize=8)

    n_iv = "full replay" if plan.intervals is None else f"{len(plan.intervals):,} intervals"
    covered = _coverage(plan.intervals, lo, hi)
    title = f"{ctx.language} - strategy {plan.strategy}: {n_iv}, {covered:.1%} of the time span"
    if spans is not None:
        title += f"; {spans[0].size:,} results"
    fig.suptitle(title, fontsize=10)
    axes[panels[-1]].set_xlabel(ax_t.label)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


RATE_UNITS = (("second", 1), ("minute", 60), ("hour", 3_600), ("day", 86_400))
"""Units of the event-rate axis, finest first."""


def rate_unit(rates: list[np.ndarray], unit: str | None) -> tuple[float, str]:
    """(factor, name): the rate axis's unit for ``rates`` (events per stream time unit): the
    finest of second, minute, hour and day in which the median positive rate is at least 1
    (day when none is); ``(1, unit)`` when the stream's unit is not a known time unit."""
    per_s = _PER_SECOND.get(unit or "", 0)
    if not per_s:
        return 1.0, unit or "stream unit"
    r = np.concatenate(rates) if rates else np.empty(0)
    r = r[r > 0]
    median = float(np.median(r)) if r.size else 0.0
    for name, seconds in RATE_UNITS[:-1]:
        if median * per_s * seconds >= 1:
            return float(per_s * seconds), name
    name, seconds = RATE_UNITS[-1]
    return float(per_s * seconds), name


def _shade(ax: Any, intervals: Sequence[tuple[int, int]] | None, lo: int, hi: int,
           ax_t: _Axis) -> None:
    if intervals is None:
        ax.axvspan(ax_t(lo), ax_t(hi), color="tab:green", alpha=0.12, lw=0,
                   label="replayed (all)")
        return
    for i, (a, b) in enumerate(intervals):
        ax.axvspan(ax_t(max(a, lo)), ax_t(min(b, hi + 1)), color="tab:green", alpha=0.35, lw=0,
                   label="replayed" if i == 0 else None)


def _coverage(intervals: Sequence[tuple[int, int]] | None, lo: int, hi: int) -> float:
    if intervals is None:
        return 1.0
    span = max(hi + 1 - lo, 1)
    return sum(max(0, min(b, hi + 1) - max(a, lo)) for a, b in intervals) / span


def _wide(rates: list[np.ndarray]) -> bool:
    """Log scale when event rates differ by more than 100x (bursty streams)."""
    if not rates:
        return False
    r = np.concatenate(rates)
    r = r[r > 0]
    return bool(r.size) and float(r.max()) > 100 * float(r.min())
