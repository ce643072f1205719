"""Random event streams, patterns and batch splits for TPStream's property and stress tests.

Streams have integer attributes ``x0..x3`` built from sticky Markov chains (runs of many lengths),
a float ``v`` with nulls, a partition column ``p`` and times with ties. Patterns are random
constraint graphs (connected or not) whose constraints are random relation sets, biased towards
whole prefix groups and near-complete sets so the low-latency paths are exercised.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from replaydb.operators.expr import Binary, Column, Literal
from replaydb.operators.tpstream import Constraint, ReturnItem, SituationDef, TPStreamConfig
from replaydb.operators.tpstream.relations import (
    GROUP_EQ,
    GROUP_GT,
    GROUP_LT,
    GROUP_SEQ_AB,
    names_of,
)

GROUPS = [GROUP_EQ, GROUP_LT, GROUP_GT, GROUP_SEQ_AB]


def random_events(rng: np.random.Generator, n: int, n_attrs: int, n_parts: int = 1,
                  tie_prob: float = 0.2, density: float = 0.5) -> dict[str, np.ndarray]:
    """Events with int attributes x0..x{k-1} (0/1 runs, some sticky), times with ties."""
    gaps = rng.choice([0, 1, 1, 2, 3], size=n, p=[tie_prob, (1 - tie_prob) / 2, (1 - tie_prob) / 4,
                                                  (1 - tie_prob) / 8, (1 - tie_prob) / 8])
    t = np.cumsum(gaps).astype(np.int64) + 10
    cols: dict[str, np.ndarray] = {"t": t, "seq": np.arange(n, dtype=np.int64) + 100}
    for j in range(n_attrs):
        # a sticky Markov chain gives runs of various lengths
        x = np.zeros(n, np.int64)
        cur = rng.random() < density
        stay = rng.uniform(0.5, 0.9)
        for i in range(n):
            if rng.random() > stay:
                cur = rng.random() < density
            x[i] = int(cur) * int(rng.integers(1, 10))
        cols[f"x{j}"] = x
    cols["v"] = rng.normal(size=n).round(2)
    cols["v"][rng.random(n) < 0.1] = np.nan
    cols["p"] = rng.integers(0, n_parts, size=n).astype(np.int64)
    return cols


def random_config(rng: np.random.Generator, S: int, *, mode: str = "normal",
                  partitioned: bool = False, with_durations: bool = True,
                  with_returns: bool = True, order: object = "adaptive",
                  end_policy: str | None = None, connected: bool | None = None) -> TPStreamConfig:
    sits = []
    for j in range(S):
        cond = Binary(">", Column(f"x{j % 4}"), Literal(int(rng.integers(0, 5))))
        lo = hi = None
        if with_durations and rng.random() < 0.35:
            r = rng.random()
            if r < 0.4:
                lo = int(rng.integers(1, 6))
            elif r < 0.7:
                hi = int(rng.integers(2, 12))
            else:
                lo = int(rng.integers(1, 4))
                hi = lo + int(rng.integers(0, 8))
        sits.append(SituationDef(f"S{j}", cond, lo, hi))
    names = [s.name for s in sits]
    pairs = [(a, b) for a in range(S) for b in range(a + 1, S)]
    rng.shuffle(pairs)
    cons = []
    if connected is None:
        connected = rng.random() < 0.85
    if connected:
        # a random spanning tree plus extra edges
        perm = rng.permutation(S)
        for k in range(1, S):
            a = int(perm[k])
            b = int(perm[int(rng.integers(0, k))])
            cons.append((a, b))
        for a, b in pairs:
            if rng.random() < 0.25 and (a, b) not in cons and (b, a) not in cons:
                cons.append((a, b))
    else:
        for a, b in pairs[: max(1, int(rng.integers(0, len(pairs) + 1)))]:
            if rng.random() < 0.6:
                cons.append((a, b))
    constraints = []
    for a, b in cons:
        r = rng.random()
        if r < 0.3:
            mask = GROUPS[int(rng.integers(0, len(GROUPS)))]
            if rng.random() < 0.4:
                mask |= 1 << int(rng.integers(0, 13))
        elif r < 0.45:
            mask = (1 << 13) - 1 & ~(1 << int(rng.integers(0, 13)))
        else:
            k = int(rng.integers(1, 5))
            mask = 0
            for q in rng.choice(13, size=k, replace=False):
                mask |= 1 << int(q)
        constraints.append(Constraint(names[a], names[b], names_of(mask)))
    returns = []
    if with_returns:
        funcs = ["first", "last", "count", "sum", "avg", "min", "max"]
        for k in range(int(rng.integers(0, 4))):
            f = funcs[int(rng.integers(0, len(funcs)))]
            sym = names[int(rng.integers(0, S))]
            attr = "v" if rng.random() < 0.7 else f"x{int(rng.integers(0, 4))}"
            if f == "count" and rng.random() < 0.3:
                attr = None
            returns.append(ReturnItem(f, sym, attr, f"r{k}"))
    window = int(rng.choice([3, 8, 15, 40, 1000]))
    return TPStreamConfig(
        situations=tuple(sits), constraints=tuple(constraints), window=window,
        returns=tuple(returns), partition_by=("p",) if partitioned else (), mode=mode,
        order=order, end_policy=end_policy or ("drop" if rng.random() < 0.6 else "close"),
    )


def to_table(events: dict[str, np.ndarray]) -> pa.Table:
    return pa.table({k: pa.array(v, from_pandas=True) for k, v in events.items()})


def split_batches(table: pa.Table, rng: np.random.Generator) -> list[pa.Table]:
    n = table.num_rows
    cuts = sorted(set(rng.integers(0, n + 1, size=int(rng.integers(0, 6))).tolist()))
    bounds = [0, *cuts, n]
    return [table.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]

