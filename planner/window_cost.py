"""Cost model of windowed aggregation: replay versus the TAB+-tree index path (dissertation 3.3.2).

Both paths feed the same slide tree, one leaf per slice, so their only difference is how many
partial aggregates are merged to build one slice (Table 3.1 symbols):

* ``r`` event rate (events per stream time unit), ``h`` height of the TAB+-tree (levels, leaves
  included), ``B`` leaf capacity (events per leaf), ``D`` fan-out, ``L = slide * r / B`` leaves per
  slide.
* Replay merges every event once: ``C_replay(slide) = slide * r``.
* The index path answers a slice with one temporal aggregation. With the split level
  ``l_s = ceil(log_D(L))`` (0 = the leaf level; ``l_s = 0`` when ``L <= 1``)::

      C_index(slide) = (h - 1 - l_s)                           (1) one merge per level above the split
                     + min(1, l_s) * ceil(L / D**(l_s - 1))   (2) merges on the split level
                     + max(0, l_s - 1) * D                     (3) ~D/2 per path per level below
                     + min(1, L) * B                           (4) the leaf level

  Term (4) is ``B`` once the slice spans a leaf and ``slide * r`` below that - exactly the text's
  exception "if slide * r < B the query visits a single path, add slide * r instead of B", since
  ``min(1, L) * B = L * B = slide * r`` for ``L < 1``.
* Arbitrary slides (size not a multiple of slide) split every slide into ``slide1 = slide -
  (size mod slide)`` and ``slide2 = size mod slide`` (3.3.3); the index cost per slide is
  ``C_index(slide1) + C_index(slide2)``; replay still merges ``slide * r`` events per slide.
* The naive index path (one temporal aggregation per window, no slide tree; our addition for
  EXPLAIN) costs ``C_index(size)`` per window, i.e. per slide.
* Calibration (our addition, :mod:`replaydb.planner.window_calibrate`): an index-path merge and a
  replay merge do not cost the same (single boundary-leaf reads, tree walks, one temporal
  aggregation per slice), so a calibrated stream weighs the index path as ``w_merge * merges +
  w_slice`` per slice, in replay merges. Without calibration ``w_merge = 1, w_slice = 0``: the
  dissertation's model.

Decisions where the text is silent (documented and tested):

* ``l_s`` is computed exactly with integers/floats as the smallest ``l >= 0`` with ``D**l >= L``.
* Term (1) is clamped at 0 when ``l_s > h - 1`` (a slice larger than the whole tree).
* Count windows use the same formulas with ``r = 1`` (slides counted in events).
* The break-even slide is the smallest slide (in stream units) at which the index path merges
  fewer partial aggregates than replay, for slides that divide the size (Fig. 3.8's line); the
  decision for one query uses the exact arbitrary-slide costs.
* :func:`choose_path` prefers replay on ties, and falls back to replay whenever the index path is
  not applicable (the caller says so with ``index_ok``), unless the user forces a path with
  ``plan='replay'|'index'|'naive'``.

All functions are O(1) except :func:`break_even_slide` (O(log max_slide) evaluations).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from replaydb.errors import UsageError

PLANS = ("auto", "replay", "index", "naive")


@dataclass(frozen=True)
class TreeStats:
    """What the cost model needs to know about a stream: ``r`` events per time unit, and the
    TAB+-tree's height ``h`` (levels incl. leaves), leaf capacity ``B`` and fan-out ``D``."""

    r: float
    h: int
    B: int  # noqa: N815 - the dissertation's symbol
    D: int  # noqa: N815
    w_merge: float = 1.0
    """Cost of one index-path merge in replay merges (1 = the dissertation's model)."""
    w_slice: float = 0.0
    """Fixed cost of one temporal aggregation (slice) in replay merges (0 = the dissertation's)."""

    def __post_init__(self) -> None:
        if self.r < 0 or self.h < 0 or self.B < 1 or self.D < 2:
            raise UsageError(f"invalid tree statistics {self}")
        if not (self.w_merge > 0 and self.w_slice >= 0 and math.isfinite(self.w_merge)
                and math.isfinite(self.w_slice)):
            raise UsageError(f"invalid cost weights w_merge={self.w_merge}, "
                             f"w_slice={self.w_slice}")

    @property
    def calibrated(self) -> bool:
        return self.w_merge != 1.0 or self.w_slice != 0.0

    def weighted(self, weights: tuple[float, float] | None) -> TreeStats:
        """The same tree with calibrated ``(w_merge, w_slice)`` (None keeps these)."""
        if weights is None:
            return self
        return TreeStats(self.r, self.h, self.B, self.D, float(weights[0]), float(weights[1]))

    @classmethod
    def of_snapshot(cls, snap: object) -> TreeStats:
        """From a :class:`replaydb.store.snapshot.StreamSnapshot` (rate over its time span)."""
        tree = snap.tree  # type: ignore[attr-defined]
        n = tree.n_events
        tr = tree.t_range
        span = (tr[1] - tr[0] + 1) if tr else 1
        return cls(r=n / max(1, span), h=tree.height, B=tree.leaf_capacity, D=tree.fanout)


def split_level(L: float, D: int) -> int:  # noqa: N803
    """``l_s = ceil(log_D(L))``: the smallest ``l >= 0`` with ``D**l >= L`` (0 when ``L <= 1``)."""
    if L <= 1:
        return 0
    l_s = max(0, math.ceil(math.log(L, D)))
    while D ** l_s < L:  # guard float rounding in log
        l_s += 1
    while l_s > 0 and D ** (l_s - 1) >= L:
        l_s -= 1
    return l_s


def c_replay(slide: float, st: TreeStats) -> float:
    """Merges per slide on the replay path: ``slide * r``."""
    return slide * st.r


def c_index(slide: float, st: TreeStats) -> float:
    """Cost per slice of length ``slide`` on the index path in replay merges: the merges of the
    formula of 3.3.2, times ``w_merge``, plus ``w_slice`` (uncalibrated: the merges)."""
    if slide <= 0:
        return 0.0
    return st.w_merge * index_merges(slide, st) + st.w_slice


def index_merges(slide: float, st: TreeStats) -> float:
    """Merges per slice of length ``slide`` on the index path (the formula of 3.3.2)."""
    if slide <= 0:
        return 0.0
    L = slide * st.r / st.B  # noqa: N806
    l_s = split_level(L, st.D)
    t1 = max(0, st.h - 1 - l_s)
    t2 = min(1, l_s) * math.ceil(L / st.D ** (l_s - 1)) if l_s > 0 else 0
    t3 = max(0, l_s - 1) * st.D
    t4 = min(1.0, L) * st.B
    return float(t1 + t2 + t3 + t4)


def slide_parts(size: int, slide: int) -> tuple[int, ...]:
    """The slices of one slide: ``(slide,)`` or ``(slide1, slide2)`` (3.3.3)."""
    m = size % slide
    return (slide,) if m == 0 else (slide - m, m)


def c_index_window(size: int, slide: int, st: TreeStats) -> float:
    """Index-path merges per slide for windows of ``size`` sliding by ``slide``."""
    return sum(c_index(s, st) for s in slide_parts(size, slide))


def c_naive_window(size: int, slide: int, st: TreeStats) -> float:
    """Naive index path: one temporal aggregation over the whole window per slide."""
    return c_index(size, st)


def break_even_slide(st: TreeStats, *, max_slide: int = 2**50) -> int | None:
    """The smallest slide (stream units) from which the index path merges fewer partial
    aggregates per slide than replay for every larger slide up to ``max_slide`` - the vertical
    line of Fig. 3.8 (slides dividing the size). ``None`` if there is none.

    Exact, without scanning every slide: within one split level ``l_s = k`` (slides with
    ``D**(k-1) < L <= D**k``) ``C_replay - C_index`` only decreases where
    ``ceil(L / D**(k-1))`` steps up - at most ``D`` points - and increases everywhere else. So per
    level we evaluate those step points, take the last one where the index path loses, and
    binary-search the monotone stretch after it. Levels are walked from the top down while the
    index path wins on a whole level. While a slide stays within one leaf (``L <= 1``) the index
    path is not considered (uncalibrated it pays ``h - 1`` extra merges; in any case it then
    reads every leaf, as replay does). Weights keep the structure: ``w_merge`` scales the step
    function and ``w_slice`` is a constant per level. For realistic trees (``(D-1)(B-1) > h``)
    there is a single crossing; tiny trees can cross back, which this handles.
    """
    if st.r <= 0 or max_slide < 1:
        return None

    def wins(s: int) -> bool:
        return c_index(s, st) < c_replay(s, st)

    unit = st.B / st.r  # slides per leaf
    k_max = split_level(max_slide / unit, st.D)
    ans: int | None = None
    for k in range(k_max, 0, -1):
        a = max(1, math.floor(st.D ** (k - 1) * unit) + 1)
        b = min(max_slide, math.floor(st.D**k * unit))
        while a > 1 and split_level((a - 1) / unit, st.D) >= k:  # float guard
            a -= 1
        while split_level(a / unit, st.D) < k:
            a += 1
        if a > b:
            continue
        if not wins(b):
            break
        step = st.D ** (k - 1) * unit  # slides per step of the ceil term
        points = [a] + [p for j in range(1, st.D + 2)
                        if a < (p := math.floor(j * step) + 1) <= b]
        losing = [p for p in points if not wins(p)]
        if not losing:
            ans = a
            continue
        lo = losing[-1]  # loses; everything after the next step point wins
        nxt = [p for p in points if p > lo]
        hi = nxt[0] if nxt else b
        if not wins(hi):  # pragma: no cover - defensive
            hi = b
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if wins(mid):
                hi = mid
            else:
                lo = mid
        ans = hi
        break
    return ans


@dataclass(frozen=True)
class PathChoice:
    """The planner's decision for one windowed aggregation, with every estimate (for EXPLAIN).

    Costs are merges per slide (3.3.2); ``path`` is ``replay``, ``index`` or ``naive``;
    ``forced`` says whether the user chose it.
    """

    path: str
    forced: bool
    c_replay: float
    c_index: float
    c_naive: float
    break_even: int | None
    stats: TreeStats
    reason: str

    def explain(self, unit: str | None = None) -> list[str]:
        from replaydb.timeunits import format_duration

        be = "none in range" if self.break_even is None else format_duration(self.break_even, unit)
        return [
            f"window path: {self.path}{' (forced)' if self.forced else ''} - {self.reason}",
            f"estimated merges per slide: replay {self.c_replay:,.1f}, index {self.c_index:,.1f}"
            f", naive {self.c_naive:,.1f}",
            f"break-even slide (index cheaper from): {be}",
            f"tree: h={self.stats.h} B={self.stats.B} D={self.stats.D} "
            f"r={self.stats.r:.6g} events/unit",
            (f"calibrated: an index merge costs {self.stats.w_merge:.3g} replay merges, a slice "
             f"{self.stats.w_slice:,.1f} more" if self.stats.calibrated else
             "not calibrated: index and replay merges weigh the same "
             "(replaydb calibrate --window)"),
        ]


def choose_path(size: int, slide: int, st: TreeStats, *, plan: str = "auto",
                index_ok: bool = True, why_not: str = "") -> PathChoice:
    """Pick the cheaper path (or the forced one) for windows of ``size`` sliding by ``slide``.

    ``index_ok`` False (aggregate not materialized, WHERE filter, GROUP BY, ...) keeps the
    automatic choice on replay; forcing ``index``/``naive`` then raises :class:`UsageError`
    carrying ``why_not``.
    """
    if plan not in PLANS:
        raise UsageError(f"unknown plan {plan!r}", hint=f"use one of {', '.join(PLANS)}")
    cr = c_replay(slide, st)
    ci = c_index_window(size, slide, st)
    cn = c_naive_window(size, slide, st)
    be = break_even_slide(st)
    if plan != "auto":
        if plan != "replay" and not index_ok:
            raise UsageError(f"--plan {plan} is not possible for this query: {why_not}")
        return PathChoice(plan, True, cr, ci, cn, be, st, "forced by the user")
    if not index_ok:
        return PathChoice("replay", False, cr, ci, cn, be, st, f"index path not applicable: "
                          f"{why_not}")
    if ci < cr:
        return PathChoice("index", False, cr, ci, cn, be, st, "fewer merges per slide")
    return PathChoice("replay", False, cr, ci, cn, be, st,
                      "replay merges no more than the index path")
