"""Match confidence and time range, generic over the number type (exact ``Fraction`` or float).

These are the reference implementations (exact mode, and the float fallback for skip-till-next
matches whose spoilers touch several gaps); :mod:`.kernels` holds the compiled float versions of
the common cases, tested against these.

Event-based confidence (paper 003, Algorithm 2 generalized): given the points ``(t, p)`` of each
matched event inside its valid interval,

* skip-till-any: ``C = sum over t_1 < ... < t_l, t_l - t_1 < W of prod_j p_j(t_j)``;
* skip-till-next (Eq. 2): each point match is further weighted by the probability that no
  *spoiler* - an unmatched candidate ``c`` of component ``j`` given ``(e_1..e_{j-1})`` - occurs
  strictly inside a gap ``(t_{j-1}, t_j)`` it is a candidate for. A spoiler of one gap contributes
  the factor ``1 - P[c in (t_{j-1}, t_j)]`` to that gap (Eq. 3, memoized per gap); a spoiler of
  several gaps is conditioned on: its points are enumerated and each fixes an indicator on the
  gaps (Eq. 4). Matched events never spoil (their points are outside every gap).

The DP runs per start point ``t_1`` (the window couples only the first and last points), each an
``O(l * |I|^2)`` chain. The time range is taken over point matches of positive probability.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from replaydb.errors import StateCapExceeded

Points = Sequence[tuple[int, Any]]
"""``(instant, probability)`` pairs of one event, probability > 0, ascending instants."""


def _inside_mass(pts: Points, s: int, t: int) -> tuple[Any, bool]:
    """``(P[point in (s, t)], every point in (s, t))`` for an event's points."""
    mass: Any = 0
    allin = True
    for tau, p in pts:
        if s < tau < t:
            mass = mass + p
        else:
            allin = False
    return mass, allin


def chain_confidence(comp_pts: Sequence[Points], window: int,
                     gap_weight: Callable[[int, int, int], Any] | None = None
                     ) -> tuple[Any, int | None, int | None]:
    """``(C, t_start, t_end)``: mass of increasing point chains within the window.

    ``gap_weight(g, s, t)`` multiplies the transition from component ``g - 1`` at ``s`` to
    ``g`` at ``t`` (``1 <= g < l``). ``t_start``/``t_end`` are the smallest first point and the
    largest last point over chains of positive weight (None when ``C == 0``).
    """
    total: Any = 0
    t0: int | None = None
    t1: int | None = None
    l_ = len(comp_pts)
    for s0, p0 in comp_pts[0]:
        f: dict[int, Any] = {s0: p0}
        for g in range(1, l_):
            nf: dict[int, Any] = {}
            for t, p in comp_pts[g]:
                if t - s0 >= window:
                    break
                acc: Any = 0
                for s, v in f.items():
                    if s < t:
                        w = v if gap_weight is None else v * gap_weight(g, s, t)
                        acc = acc + w
                if acc != 0:
                    nf[t] = acc * p
            f = nf
            if not f:
                break
        if not f:
            continue
        sub = sum(f.values())
        if sub != 0:
            total = total + sub
            t0 = s0 if t0 is None else min(t0, s0)
            last = max(t for t, v in f.items() if v != 0)
            t1 = last if t1 is None else max(t1, last)
    return total, t0, t1


def single_gap_weight(gap_spoilers: Sequence[Sequence[Points]]
                      ) -> Callable[[int, int, int], Any]:
    """``gap_weight`` for spoilers of one gap each (Eq. 3), memoized per ``(g, s, t)``."""
    memo: dict[tuple[int, int, int], Any] = {}

    def weight(g: int, s: int, t: int) -> Any:
        key = (g, s, t)
        w = memo.get(key)
        if w is None:
            w = 1
            for pts in gap_spoilers[g]:
                mass, allin = _inside_mass(pts, s, t)
                if allin:
                    w = 0
                    break
                w = w * (1 - mass)
            memo[key] = w
        return w

    return weight


def next_confidence(comp_pts: Sequence[Points], window: int,
                    spoilers: Sequence[tuple[Points, frozenset[int]]],
                    max_enumeration: int = 1_000_000) -> tuple[Any, int | None, int | None]:
    """Skip-till-next confidence (Eq. 2-4) of one signature; see the module docstring.

    ``spoilers`` are ``(points, gaps)``: an unmatched candidate and the gaps ``g`` (between
    components ``g - 1`` and ``g``) it is a candidate for. A component without points (e.g. a
    valid interval holding only zero-weight instants) admits no chain: ``(0, None, None)``, as
    :func:`chain_confidence` gives.
    """
    if any(not pts for pts in comp_pts):
        return 0, None, None
    l_ = len(comp_pts)
    lo_g = [comp_pts[g - 1][0][0] if g >= 1 else 0 for g in range(l_)]
    hi_g = [comp_pts[g][-1][0] for g in range(l_)]
    single: list[list[Points]] = [[] for _ in range(l_)]
    multi: list[tuple[list[tuple[int, Any]], Any, frozenset[int]]] = []
    for pts, gaps in spoilers:
        live = frozenset(g for g in gaps if any(lo_g[g] < tau < hi_g[g] for tau, _ in pts))
        if not live:
            continue
        if len(live) == 1:
            single[next(iter(live))].append(pts)
            continue
        inside = [(tau, p) for tau, p in pts if any(lo_g[g] < tau < hi_g[g] for g in live)]
        outside: Any = 0
        for tau, p in pts:
            if not any(lo_g[g] < tau < hi_g[g] for g in live):
                outside = outside + p
        multi.append((inside, outside, live))
    if not multi:
        return chain_confidence(comp_pts, window, single_gap_weight(single))
    combos = 1
    for inside, outside, _ in multi:
        combos *= len(inside) + (1 if outside != 0 else 0)
    if combos > max_enumeration:
        raise StateCapExceeded("imprecise pattern", "point combinations of multi-gap spoilers",
                               combos, max_enumeration, "max_enumeration")
    base = single_gap_weight(single)
    total: Any = 0
    t0: int | None = None
    t1: int | None = None

    def rec(k: int, weight: Any, fixed: list[tuple[int, frozenset[int]]]) -> None:
        nonlocal total, t0, t1
        if k == len(multi):
            def gw(g: int, s: int, t: int) -> Any:
                for tau, gaps in fixed:
                    if g in gaps and s < tau < t:
                        return 0
                return base(g, s, t)

            c, a, b = chain_confidence(comp_pts, window, gw)
            if c != 0:
                total = total + weight * c
                t0 = a if t0 is None else min(t0, a)  # type: ignore[type-var]
                t1 = b if t1 is None else max(t1, b)  # type: ignore[type-var]
            return
        inside, outside, gaps = multi[k]
        for tau, p in inside:
            rec(k + 1, weight * p, [*fixed, (tau, gaps)])
        if outside != 0:
            rec(k + 1, weight * outside, fixed)

    rec(0, 1, [])
    rec = None  # type: ignore[assignment]  # empties the recursive closure's own cell: no
    # reference cycle (function - cell - function) left for the garbage collector
    return total, t0, t1


def collapse_point_matches(times: Sequence[Sequence[int]], comp_prob: Sequence[dict[int, Any]],
                           spoilers: Sequence[tuple[Points, frozenset[int]]] = (),
                           max_enumeration: int = 1_000_000
                           ) -> tuple[Any, int | None, int | None]:
    """Point-based collapse of one signature's point matches (paper 003, Eq. 1-4).

    ``times`` are the point matches (one instant per component), ``comp_prob[j][t]`` the
    probability of component ``j``'s event at ``t``. Without spoilers this is Eq. 1 (the sum of
    the point matches' probabilities); with them every point match is weighted by the probability
    that no spoiler falls in a gap it is a candidate for: one factor per gap for spoilers of one
    gap (Eq. 3, memoized per ``(g, t_{g-1}, t_g)``), enumeration of the points of spoilers of
    several gaps (Eq. 4). Returns ``(C, t_start, t_end)`` over point matches of positive weight.
    """
    single: list[list[Points]] = [[] for _ in range(len(comp_prob))]
    multi: list[tuple[Points, frozenset[int]]] = []
    for pts, gaps in spoilers:
        if len(gaps) == 1:
            single[next(iter(gaps))].append(pts)
        else:
            multi.append((pts, gaps))
    base = single_gap_weight(single)
    l_ = len(comp_prob)
    prob = []
    for tt in times:
        p: Any = 1
        for j in range(l_):
            p = p * comp_prob[j][tt[j]]
        prob.append(p)
    combos = 1
    for pts, _ in multi:
        combos *= len(pts)
    if combos > max_enumeration:
        raise StateCapExceeded("imprecise pattern", "point combinations of multi-gap spoilers",
                               combos, max_enumeration, "max_enumeration")
    weight = [0] * len(times)

    def rec(k: int, w: Any, fixed: list[tuple[int, frozenset[int]]]) -> None:
        if k == len(multi):
            for i, tt in enumerate(times):
                x = w * prob[i]
                for g in range(1, l_):
                    s, t = tt[g - 1], tt[g]
                    if any(g in gs and s < tau < t for tau, gs in fixed):
                        x = 0
                        break
                    x = x * base(g, s, t)
                    if x == 0:
                        break
                weight[i] = weight[i] + x
            return
        pts, gaps = multi[k]
        for tau, p in pts:
            rec(k + 1, w * p, [*fixed, (tau, gaps)])

    rec(0, 1, [])
    rec = None  # type: ignore[assignment]  # empties the recursive closure's own cell: no
    # reference cycle (function - cell - function) left for the garbage collector
    total: Any = 0
    t0: int | None = None
    t1: int | None = None
    for tt, x in zip(times, weight):
        if x != 0:
            total = total + x
            t0 = tt[0] if t0 is None else min(t0, tt[0])
            t1 = tt[-1] if t1 is None else max(t1, tt[-1])
    return total, t0, t1


def restrict(pts: Points, lo: int, hi: int) -> list[tuple[int, Any]]:
    """The points of ``pts`` inside ``[lo, hi]``."""
    return [(t, p) for t, p in pts if lo <= t <= hi]


def fraction_text(x: Fraction | int) -> str:
    """``'p/q'`` text of an exact probability (``'0/1'`` style, always with a denominator)."""
    f = Fraction(x)
    return f"{f.numerator}/{f.denominator}"
