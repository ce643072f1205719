"""Brute-force possible-worlds semantics (paper 003, section 2.3), exact, for small inputs.

Every combination of one instant per event (of positive weight) is a world; its probability is
the product of the events' point probabilities. In each world the pattern is matched
deterministically - runs start at every event of the first component and move to the next
component on:

* skip-till-any: every later candidate (within the window), each in its own run;
* skip-till-next: the earliest later candidate (several when they share that instant); a run whose
  earliest later candidate lies outside the window dies.

Matches are grouped by signature (the events' ``seq``); the confidence is the sum of the
probabilities of the worlds returning the signature, the range spans their first and last points.
Worlds are processed as NumPy arrays (one row per world), so a few thousand worlds are cheap.
Events that match no component cannot influence any world's matches and are left out of the
enumeration (summing them out is exact).

Cost: O(worlds * candidate prefixes); meant for at most ~10^5 worlds.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from replaydb.operators.imprecise.config import ImpreciseConfig
from replaydb.operators.imprecise.predicates import PredicatePlan


@dataclass(frozen=True)
class OracleEvent:
    """One event: ``weights`` are integer weights per instant of ``[lo, hi]`` (None: uniform)."""

    seq: int
    lo: int
    hi: int
    type: str
    attrs: dict[str, Any] = field(default_factory=dict)
    weights: tuple[int, ...] | None = None

    def support(self, shape: str = "uniform") -> list[tuple[int, int]]:
        n = self.hi - self.lo + 1
        if self.weights is not None:
            w = list(self.weights)
        elif shape == "triangular":
            w = [min(k + 1, n - k) for k in range(n)]
        else:
            w = [1] * n
        return [(self.lo + k, x) for k, x in enumerate(w) if x > 0]


def possible_worlds(events: Sequence[OracleEvent], config: ImpreciseConfig,
                    max_worlds: int = 2_000_000
                    ) -> dict[tuple[int, ...], tuple[Fraction, int, int]]:
    """``{signature (seqs): (confidence, t_start, t_end)}`` over all possible worlds."""
    plan = PredicatePlan(config.variables, config.predicates)
    l_ = config.length
    names = plan.attribute_names
    n = len(events)
    cols = {a: np.array([e.attrs.get(a) for e in events]) for a in names}
    for a, v in cols.items():
        if v.dtype == object and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                     for x in v):
            cols[a] = v.astype(float)
    match = np.zeros((n, l_), bool)
    for j, c in enumerate(config.components):
        types = np.array([e.type == c.type_name for e in events], bool)
        match[:, j] = types & plan.single_mask(j, cols, n)
    rel = [i for i in range(n) if match[i].any()]
    supports = [events[i].support(config.pmf) for i in rel]
    n_worlds = 1
    for s in supports:
        n_worlds *= len(s)
    if n_worlds > max_worlds:
        raise ValueError(f"{n_worlds} worlds exceed max_worlds={max_worlds}")
    denom = 1
    for s in supports:
        denom *= sum(w for _, w in s)
    col_of = {i: k for k, i in enumerate(rel)}
    if rel:
        combos = list(itertools.product(*supports))
        times = np.array([[t for t, _ in c] for c in combos], np.int64).reshape(len(combos),
                                                                                len(rel))
        wts = np.array([int(np.prod([w for _, w in c], dtype=object)) for c in combos],
                       dtype=object)
    else:
        times = np.zeros((1, 0), np.int64)
        wts = np.array([1], dtype=object)
    nxt = config.skip_till_next
    w = config.window
    out: dict[tuple[int, ...], tuple[Fraction, int, int]] = {}

    def cross_ok(j: int, prefix: list[int]) -> bool:
        if not plan.cross[j]:
            return True
        idx = {k: np.array([prefix[k]]) for k in range(j + 1)}
        return bool(plan.cross_mask(j, cols, idx, 1)[0])

    def rec(prefix: list[int], alive: np.ndarray) -> None:
        j = len(prefix)
        if j == l_:
            sig = tuple(events[i].seq for i in prefix)
            conf = Fraction(int(wts[alive].sum()), denom)
            t0 = int(times[alive, col_of[prefix[0]]].min())
            t1 = int(times[alive, col_of[prefix[-1]]].max())
            out[sig] = (conf, t0, t1)
            return
        cands = [c for c in rel if c not in prefix and match[c, j] and cross_ok(j, prefix + [c])]
        if j == 0:
            for c in cands:
                rec([c], alive.copy())
            return
        tl = times[:, col_of[prefix[-1]]]
        tf = times[:, col_of[prefix[0]]]
        later = {c: alive & (times[:, col_of[c]] > tl) for c in cands}
        if nxt and cands:
            big = np.iinfo(np.int64).max
            first = np.min(np.stack([np.where(later[c], times[:, col_of[c]], big)
                                     for c in cands]), axis=0)
        for c in cands:
            tc = times[:, col_of[c]]
            child = later[c] & (tc - tf < w)
            if nxt:
                child &= tc == first
            if child.any():
                rec(prefix + [c], child)

    rec([], np.ones(times.shape[0], bool))
    return out


def events_table(events: Sequence[OracleEvent], order_key: Sequence[int] | None = None,
                 attrs: Sequence[str] = ("v",), pmf_column: str | None = None) -> Any:
    """An Arrow table of ``events`` in the operator's input layout (``t`` = ``order_key`` or the
    lower bound, ``seq``, ``type``, ``t_lower``, ``t_upper``, attributes, optional pmf list)."""
    import pyarrow as pa

    data: dict[str, Any] = {
        "t": [e.lo for e in events] if order_key is None else list(order_key),
        "seq": [e.seq for e in events],
        "type": [e.type for e in events],
        "t_lower": [e.lo for e in events],
        "t_upper": [e.hi for e in events],
    }
    for a in attrs:
        data[a] = [e.attrs.get(a) for e in events]
    if pmf_column is not None:
        data[pmf_column] = pa.array(
            [list(e.weights) if e.weights is not None else [1] * (e.hi - e.lo + 1)
             for e in events], pa.list_(pa.int64()))
    return pa.table(data)
