"""The three workloads of the GRETA paper (Sec. 10.1), generated with NumPy, and their queries.

Small stand-ins until ``replaydb.datasets`` provides the generators; each returns an Arrow table
with ``t`` (seconds), ``seq``, ``type`` and attributes, ``events_per_window`` events per query
window on average, spanning ``windows`` window lengths.

* stock: NYSE-like trades of 10 companies in 3 sectors, price a random walk per company (cents),
  volume Poisson(1000); query Q1 (down-trends per sector).
* linear road: position reports of vehicles every 30 s on a 100-segment expressway (speed 0-100
  mph drifting, position advancing with the speed, so slow vehicles stay in a segment for many
  reports) plus rare accidents per segment; query Q3 (slowing-down trends without an accident
  before them).
* linear road, segment trends: the same stream and Q3 without the vehicle in the equivalence
  predicate (a variation in the spirit of the paper's nine variations of each query): slowing
  trends across the vehicles of a segment, exponentially many.
* cluster: job start / measurement / end events, job and mapper ids uniform 0-10, cpu and memory
  uniform 0-1000, load Poisson(100); query Q2 (cpu of increasing-load trends per mapper).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class Workload:
    name: str
    query: str
    within_s: int
    base: str | None = None  # generator, when the name differs

    def generate(self, events_per_window: int, windows: float = 2.0, seed: int = 0,
                 reference: int | None = None) -> pa.Table:
        """A stream with ``events_per_window`` events per window on average. With
        ``reference`` (>= events_per_window) the stream is a uniform random subset of the
        stream generated for ``reference``, so streams of different sizes are nested and the
        number of trends grows monotonically with the size."""
        gen = GENERATORS[self.base or self.name]
        if reference is None or reference <= events_per_window:
            return gen(events_per_window, self.within_s, windows, seed)
        full = gen(reference, self.within_s, windows, seed)
        u = np.random.default_rng(seed + 7919).random(full.num_rows)
        keep = np.flatnonzero(u < events_per_window / reference)
        out = full.take(pa.array(keep))
        return out.set_column(out.schema.get_field_index("seq"), "seq",
                              pa.array(np.arange(len(keep), dtype=np.int64)))


def _times(n: int, duration_s: int, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.integers(0, duration_s, n)).astype(np.int64)


def stock(events_per_window: int, within_s: int, windows: float, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    duration = int(within_s * windows)
    n = int(events_per_window * windows)
    t = _times(n, duration, rng)
    company = rng.integers(0, 10, n)
    steps = rng.choice(np.array([-2, -1, -1, 0, 1, 1, 2]), n)
    price_cents = np.zeros(n, np.int64)
    for c in range(10):
        m = company == c
        price_cents[m] = 10_000 + np.cumsum(steps[m])
    sectors = np.array(["energy", "finance", "tech"])
    return pa.table({
        "t": pa.array(t), "seq": pa.array(np.arange(n, dtype=np.int64)),
        "type": pa.array(np.full(n, "Stock")),
        "company": pa.array(company.astype(np.int64)),
        "sector": pa.array(sectors[company % 3]),
        "price": pa.array(price_cents / 100.0),
        "volume": pa.array(rng.poisson(1000, n).astype(np.int64)),
    })


def linear_road(events_per_window: int, within_s: int, windows: float, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    duration = int(within_s * windows)
    reports_per_window = max(1, within_s // 30)
    vehicles = max(1, events_per_window // reports_per_window)
    # each vehicle reports every 30 s from a random phase on a 100-mile expressway (one segment
    # per mile); its speed (mph) drifts by -8..+7 per report within 0-100, so slow vehicles
    # (traffic jams) stay in a segment for many reports
    n_rep = duration // 30
    veh = np.repeat(np.arange(vehicles, dtype=np.int64), n_rep)
    k = np.tile(np.arange(n_rep, dtype=np.int64), vehicles)
    phase = rng.integers(0, 30, vehicles)
    t = k * 30 + phase[veh]
    drift = rng.integers(-8, 8, (vehicles, n_rep))
    speed = np.clip(rng.integers(10, 80, vehicles)[:, None] + np.cumsum(drift, axis=1), 0, 100)
    miles = rng.uniform(0, 100, vehicles)[:, None] + np.cumsum(speed / 120.0, axis=1)
    segment = (np.floor(miles).astype(np.int64) % 100).reshape(-1)
    speed = speed.reshape(-1).astype(np.int64)
    n_acc = max(1, duration // 120)
    acc_t = rng.integers(0, duration, n_acc)
    acc_seg = rng.integers(0, 100, n_acc)
    types = np.concatenate([np.full(veh.size, "Position"), np.full(n_acc, "Accident")])
    t_all = np.concatenate([t, acc_t]).astype(np.int64)
    order = np.argsort(t_all, kind="stable")
    n = t_all.size
    return pa.table({
        "t": pa.array(t_all[order]), "seq": pa.array(np.arange(n, dtype=np.int64)),
        "type": pa.array(types[order]),
        "vehicle": pa.array(np.concatenate([veh, np.full(n_acc, -1)])[order]),
        "segment": pa.array(np.concatenate([segment, acc_seg])[order].astype(np.int64)),
        "speed": pa.array(np.concatenate([speed, np.zeros(n_acc, np.int64)])[order]),
    })


def cluster(events_per_window: int, within_s: int, windows: float, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    duration = int(within_s * windows)
    n = int(events_per_window * windows)
    t = _times(n, duration, rng)
    kind = rng.choice(np.array(["Start", "Measurement", "End"]), n, p=[0.02, 0.96, 0.02])
    return pa.table({
        "t": pa.array(t), "seq": pa.array(np.arange(n, dtype=np.int64)),
        "type": pa.array(kind),
        "job": pa.array(rng.integers(0, 11, n).astype(np.int64)),
        "mapper": pa.array(rng.integers(0, 11, n).astype(np.int64)),
        "cpu": pa.array(rng.integers(0, 1001, n).astype(np.int64)),
        "memory": pa.array(rng.integers(0, 1001, n).astype(np.int64)),
        "load": pa.array(rng.poisson(100, n).astype(np.int64)),
    })


GENERATORS = {"stock": stock, "linear_road": linear_road, "cluster": cluster}

WORKLOADS = {
    "stock": Workload(
        "stock",
        "RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [company, sector] AND "
        "S.price > NEXT(S).price GROUP-BY sector WITHIN 10 minutes SLIDE 5 minutes",
        600),
    "linear_road": Workload(
        "linear_road",
        "RETURN segment, COUNT(*), AVG(P.speed) PATTERN SEQ(NOT Accident A, Position P+) "
        "WHERE [P.vehicle, segment] AND P.speed > NEXT(P).speed GROUP-BY segment "
        "WITHIN 5 minutes SLIDE 1 minute",
        300),
    "linear_road_segment": Workload(
        "linear_road_segment",
        "RETURN segment, COUNT(*), AVG(P.speed) PATTERN SEQ(NOT Accident A, Position P+) "
        "WHERE [segment] AND P.speed > NEXT(P).speed GROUP-BY segment "
        "WITHIN 5 minutes SLIDE 1 minute",
        300, base="linear_road"),
    "cluster": Workload(
        "cluster",
        "RETURN mapper, SUM(M.cpu) PATTERN SEQ(Start S, Measurement M+, End E) "
        "WHERE [job, mapper] AND M.load < NEXT(M).load GROUP-BY mapper "
        "WITHIN 1 minute SLIDE 30 seconds",
        60),
}
