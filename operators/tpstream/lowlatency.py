"""Low-latency matching (Section 5.5.3, Alg. 5.4): what is known when, and who triggers.

**Semantics.** A match is reported once, at its *earliest detection time*: the first time step
``tau`` (an event time of the partition, after all events with that time are processed) at which
the events seen so far make it certain - every member situation exists and every constraint holds
for every possible continuation of the members still ongoing. A situation is *known* from its
known time (:mod:`.deriver`: start, deferred start for AT LEAST, end for AT MOST); while ongoing,
its end is only known to be later than ``tau``. For one pair of situations this gives exactly the
dissertation's analysis:

* once one of them has ended (or both), the relation is determined: ``t_rmin`` (Table 5.2);
* while both are ongoing, only the order of their starts is known, so the possible relations are
  one *prefix group* (A.ts = B.ts: {starts, equals, started-by}; A.ts < B.ts: {overlaps,
  finishes, contains}; B.ts < A.ts: the inverses) - a constraint containing the whole group is
  certain at the second start (``t_gmin``);

and for a pattern ``t_pmin = max`` over its constraints and members' known times
(:func:`detection_time`). Certainty of a conjunction is the conjunction of certainties, so the
per-constraint analysis is exact.

**Window.** ``WITHIN w`` bounds the detection: ``t_detect - min(ts) <= w``. In normal mode the
detection time is ``max(te)`` (Def. 5.7 exactly); in low-latency mode a match is reported before
its last situations end, which is the point of the mode, so an ongoing member may later outlast
``min(ts) + w`` (the paper's low-latency matcher purges by ``ts < t - w`` at the detection time
``t``, i.e. the same rule). Consequently the low-latency results are the normal-mode results plus
the matches whose last situation ends beyond the window; on every match both modes report, the
configurations agree and the low-latency detection time is ``<=`` the normal one.

**Triggers** (the paper's *trigger situations*): the matcher only needs to run at changes that
can be a detection time. A stream's *start* (known time) triggers if the stream has no
constraint, has an AT LEAST bound (deferred start), or is the later starter of a relation whose
``t_rmin`` is its start (``Y before|meets X``) or of a whole prefix group; its *end* triggers if
it has a maximum duration or an AT LEAST bound (it may become known only then), or it is the
earlier-ending side of a relation whose ``t_rmin`` is its end (overlaps, starts, during, equals,
finishes, finished-by seen from it). :func:`trigger_streams` computes this; the result is a
superset of what is needed, and skipping non-triggers never causes duplicates (the matcher
checks certainty one step earlier before publishing).

**Exactly once.** Within a time step, changes are processed in a fixed order; the matcher run for
a change excludes the changes processed before it in the same step, and a found configuration is
only published if it was not already certain at ``tau - 1``. Partial aggregates: RETURN values of
a member still ongoing at detection are computed over its events up to the detection time, and its
``te`` column is null.
"""

from __future__ import annotations

import numpy as np

from replaydb.operators.tpstream.relations import (
    BEFORE,
    DURING,
    EQUALS,
    FINISHED_BY,
    FINISHES,
    GROUP_EQ,
    GROUP_GT,
    GROUP_LT,
    MEETS,
    OVERLAPS,
    RELATIONS,
    STARTS,
    T_RMIN,
    classify,
)

_END_FIRST = (1 << OVERLAPS) | (1 << STARTS) | (1 << DURING) | (1 << EQUALS) | (1 << FINISHES) \
    | (1 << FINISHED_BY)
"""Relations ``X R Y`` decided at ``X.te`` (t_rmin = X.te)."""
_LATER_START = (1 << BEFORE) | (1 << MEETS)
"""Relations ``Y R X`` decided at ``X.ts`` (t_rmin = X.ts)."""
assert _END_FIRST == sum(1 << i for i, r in enumerate(RELATIONS) if T_RMIN[r] == ("A", "te"))
assert _LATER_START == sum(1 << i for i, r in enumerate(RELATIONS) if T_RMIN[r] == ("B", "ts"))


def known_kind(min_duration: int | None, max_duration: int | None) -> str:
    """``'start'``, ``'deferred'`` (AT LEAST only) or ``'end'`` (any maximum)."""
    if max_duration is not None:
        return "end"
    if min_duration is not None and min_duration > 1:
        return "deferred"
    return "start"


def trigger_streams(relm: np.ndarray, kinds: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Which streams' starts / ends can be a detection time (see module docstring)."""
    S = relm.shape[0]
    start = np.zeros(S, bool)
    end = np.zeros(S, bool)
    for x in range(S):
        if kinds[x] == "end":
            end[x] = True
            continue
        if kinds[x] == "deferred":
            start[x] = end[x] = True
            continue
        constrained = False
        for y in range(S):
            if y == x or relm[x, y] == 0:
                continue
            constrained = True
            m_xy = int(relm[x, y])      # x R y
            m_yx = int(relm[y, x])      # y R x
            if m_yx & _LATER_START:
                start[x] = True
            if (GROUP_EQ & ~m_xy) == 0 or (GROUP_LT & ~m_yx) == 0:
                start[x] = True
            if m_xy & _END_FIRST:
                end[x] = True
        if not constrained:
            start[x] = True
    return start, end


def pair_detection_time(mask: int, a: tuple[int, int, int], b: tuple[int, int, int]) -> int | None:
    """Earliest time ``A mask B`` is certain; ``a``/``b`` = ``(ts, te, known)``; None if never."""
    a_ts, a_te, a_k = a
    b_ts, b_te, b_k = b
    rel = int(classify(a_ts, a_te, b_ts, b_te))
    both_known = max(a_k, b_k)
    best: int | None = None
    if (mask >> rel) & 1:
        sym, end = T_RMIN[RELATIONS[rel]]
        t3 = {("A", "ts"): a_ts, ("A", "te"): a_te, ("B", "ts"): b_ts, ("B", "te"): b_te}[(sym, end)]
        best = max(t3, both_known)
    group = GROUP_EQ if a_ts == b_ts else GROUP_LT if a_ts < b_ts else GROUP_GT
    if (group & ~mask) == 0 and both_known < min(a_te, b_te):
        best = both_known if best is None else min(best, both_known)
    return best


def detection_time(relm: np.ndarray, members: list[tuple[int, int, int]]) -> int | None:
    """``t_pmin`` of a configuration (members as ``(ts, te, known)`` per stream): the max over
    members' known times and constraints' detection times; None if the pattern does not hold."""
    S = len(members)
    t = max(m[2] for m in members)
    for x in range(S):
        for y in range(x + 1, S):
            if relm[x, y] == 0:
                continue
            d = pair_detection_time(int(relm[x, y]), members[x], members[y])
            if d is None:
                return None
            t = max(t, d)
    return t
