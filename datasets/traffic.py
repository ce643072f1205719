"""``traffic``: a Linear-Road-shaped stream of car position reports with accidents.

Sources: TPStream (paper 6.1, dissertation 5.7.1) uses Linear Road data "simulating 5 hours of
traffic on a single expressway with 1000 active cars per hour. Every active car reports its state
once per second" with car id, location, speed and acceleration, for the aggressive-drivers query;
GRETA (section 10) uses Linear Road position reports (time in seconds, vehicle, position, speed)
for query Q3, ``SEQ(NOT Accident A, Position P+)`` grouped by segment. The Linear Road simulator
itself is not available here, so this generator produces a stream of the same shape.

Model (decisions, documented because no text fixes them):

* One expressway of 100 one-mile segments, two directions, ``cars`` concurrently active cars
  (default 1000). Every active car sends one ``Position`` report per second, so the stream has
  ``cars`` reports per second; reports of one second are ordered by the car's slot.
* Each car's speed (mph, in ``[0, 100]``) is piecewise linear: a sequence of *phases* with
  constant acceleration. Phase kinds: cruise (10-60 s, drifting towards a target speed
  N(current, 8^2) clipped to [20, 85]), hard acceleration (5-10 s at 8.5-11.5 mph/s, capped so the
  speed stays <= 100) and hard braking (3-6 s at 9.5-12.5 mph/s, capped at 0). A new phase is a
  hard acceleration with probability ``p_accel``, hard braking with ``p_brake``, else cruise;
  after a hard acceleration, with probability ``p_chain`` the car cruises for 2-10 s and then
  brakes hard (the aggressive driving the TPStream query looks for).
* ``accel`` is the speed change over the last second (mph/s), ``speed - previous speed``, so it is
  consistent with ``speed`` exactly.
* Position in feet (``0..527,999``, Linear Road's unit) advances by the mean speed of the second
  (1 mph = 5280/3600 ft/s); eastbound cars (``dir`` 0) count up, westbound (1) count down;
  ``segment = position // 5280``. A trip covers 5-30 miles; when a car passes its exit, a new car
  (new id) enters the slot at a random position at the slot's current speed. Car ids are
  ``slot + cars * trip_number``, unique over the stream. ``lane`` (1-3) is fixed per trip.
* Accidents: a Poisson process of ``accident_rate`` accidents per hour; each is one ``Accident``
  event at a uniformly random second, direction, segment, position and lane, placed after the
  position reports of its second; ``car_id``, ``speed`` and ``accel`` are null on it. Traffic
  does not react to accidents.

Complexity: O(N) vectorized work plus one vectorized step per simulated second (a Python loop
over seconds, each step handling all cars at once); memory one block of about 2^18 reports.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.datasets import base
from replaydb.datasets.base import ColumnInfo, DatasetInfo, ExampleQuery, OptionInfo, register
from replaydb.errors import UsageError

NAME = "traffic"
BLOCK_EVENTS = 1 << 18
SEGMENTS = 100
FEET_PER_MILE = 5280
LENGTH_FT = SEGMENTS * FEET_PER_MILE
FT_PER_S_PER_MPH = FEET_PER_MILE / 3600.0
MAX_SPEED = 100.0
TYPES = ["Position", "Accident"]

CRUISE, ACCEL, BRAKE, SHORT = 0, 1, 2, 3

COLUMNS = (
    ColumnInfo("t", "int64", "s", "report time, seconds from start"),
    ColumnInfo("type", "string", None, "'Position' (a car's report) or 'Accident'"),
    ColumnInfo("car_id", "int64", None, "vehicle id (null on Accident)"),
    ColumnInfo("dir", "int8", None, "direction: 0 eastbound, 1 westbound"),
    ColumnInfo("lane", "int8", None, "travel lane 1-3"),
    ColumnInfo("segment", "int32", None, "one-mile segment 0-99 = position // 5280"),
    ColumnInfo("position", "int32", "ft", "position on the expressway, 0-527999"),
    ColumnInfo("speed", "double", "mph", "speed at the end of the second, 0-100 (null on Accident)"),
    ColumnInfo("accel", "double", "mph/s", "speed change over the last second (null on Accident)"),
)
SCHEMA = base.arrow_schema(
    COLUMNS, required=("t", "type", "dir", "lane", "segment", "position")
)


class _Cars:
    """Per-slot state of the simulation (all arrays of length ``cars``)."""

    def __init__(self, n: int, rng: np.random.Generator) -> None:
        self.n = n
        self.trip = np.zeros(n, dtype=np.int64)
        self.car_id = np.arange(n, dtype=np.int64)
        self.speed = rng.uniform(40.0, 70.0, n)
        self.kind = np.full(n, CRUISE, dtype=np.int8)
        self.rate = np.zeros(n)
        self.left = rng.integers(1, 61, n)
        self.chain = np.zeros(n, dtype=bool)
        self.dir = np.empty(n, dtype=np.int8)
        self.lane = np.empty(n, dtype=np.int8)
        self.x = np.empty(n)
        self.exit_at = np.empty(n)
        self._new_trips(np.arange(n), rng, mid_trip=True)

    def _new_trips(self, slots: np.ndarray, rng: np.random.Generator, mid_trip: bool) -> None:
        k = slots.size
        length = rng.uniform(5.0, 30.0, k) * FEET_PER_MILE
        entry = rng.random(k) * (LENGTH_FT - 1 - length)
        done = rng.random(k) if mid_trip else np.zeros(k)
        self.dir[slots] = rng.integers(0, 2, k)
        self.lane[slots] = rng.integers(1, 4, k)
        self.x[slots] = entry + done * length
        self.exit_at[slots] = entry + length

    def renew_phases(self, rng: np.random.Generator, opts: dict[str, Any]) -> None:
        idx = np.flatnonzero(self.left <= 0)
        k = idx.size
        if k == 0:
            return
        # One uniform matrix and one normal vector per renewal step (few RNG calls per second).
        r = rng.random((8, k))
        u, chain_draw = r[0], r[1]
        cruise_d = 10 + (r[2] * 51).astype(np.int64)  # uniform {10..60}
        cruise_target = np.clip(self.speed[idx] + 8.0 * rng.standard_normal(k), 20.0, 85.0)
        accel_d = 5 + (r[3] * 6).astype(np.int64)  # {5..10}
        accel_r = 8.5 + 3.0 * r[4]  # [8.5, 11.5)
        brake_d = 3 + (r[5] * 4).astype(np.int64)  # {3..6}
        brake_r = 9.5 + 3.0 * r[6]  # [9.5, 12.5)
        short_d = 2 + (r[7] * 9).astype(np.int64)  # {2..10}

        kind = np.where(
            u < opts["p_accel"], ACCEL, np.where(u < opts["p_accel"] + opts["p_brake"], BRAKE, CRUISE)
        ).astype(np.int8)
        after_accel = (self.kind[idx] == ACCEL) & (chain_draw < opts["p_chain"])
        kind[after_accel] = SHORT
        kind[self.chain[idx]] = BRAKE  # the end of an aggressive chain

        v = self.speed[idx]
        dur = np.select([kind == ACCEL, kind == BRAKE, kind == SHORT], [accel_d, brake_d, short_d],
                        cruise_d)
        rate = np.select(
            [kind == ACCEL, kind == BRAKE, kind == SHORT],
            [
                np.minimum(accel_r, (MAX_SPEED - v) / dur),
                -np.minimum(brake_r, v / dur),
                np.zeros(k),
            ],
            (cruise_target - v) / dur,
        )
        self.kind[idx] = kind
        self.chain[idx] = kind == SHORT
        self.left[idx] = dur
        self.rate[idx] = rate

    def step(self) -> np.ndarray:
        """Advance one second; returns the acceleration of that second."""
        old = self.speed
        new = np.clip(old + self.rate, 0.0, MAX_SPEED)
        self.x = self.x + (old + new) * (0.5 * FT_PER_S_PER_MPH)
        self.speed = new
        self.left = self.left - 1
        return new - old

    def position(self) -> np.ndarray:
        x = np.clip(self.x, 0.0, LENGTH_FT - 1).astype(np.int32)
        return np.where(self.dir == 0, x, LENGTH_FT - 1 - x).astype(np.int32)

    def finish_trips(self, rng: np.random.Generator) -> None:
        done = np.flatnonzero(self.x >= self.exit_at)
        if done.size:
            self.trip[done] += 1
            self.car_id[done] = done + self.n * self.trip[done]
            self._new_trips(done, rng, mid_trip=False)


def _check(opts: dict[str, Any]) -> None:
    if opts["cars"] < 1:
        raise UsageError(f"{NAME}: cars must be >= 1, got {opts['cars']}")
    for p in ("p_accel", "p_brake", "p_chain"):
        if not 0.0 <= opts[p] <= 1.0:
            raise UsageError(f"{NAME}: {p} must lie in [0, 1], got {opts[p]}")
    if opts["p_accel"] + opts["p_brake"] > 1.0:
        raise UsageError(f"{NAME}: p_accel + p_brake must be <= 1")
    if opts["accident_rate"] < 0:
        raise UsageError(f"{NAME}: accident_rate must be >= 0, got {opts['accident_rate']}")


def _blocks(events: int | None, seed: int, opts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    assert events is not None
    _check(opts)
    n = opts["cars"]
    secs = max(1, BLOCK_EVENTS // n)
    tag = base.dataset_tag(NAME)
    cars = _Cars(n, base.initial_rng(seed, NAME))
    produced = 0
    b = 0
    while produced < events:
        rng = base.block_rng(seed, tag, b)
        t0 = opts["start"] + b * secs
        rows = secs * n
        car_id = np.empty(rows, dtype=np.int64)
        dirs = np.empty(rows, dtype=np.int8)
        lane = np.empty(rows, dtype=np.int8)
        pos = np.empty(rows, dtype=np.int32)
        speed = np.empty(rows)
        accel = np.empty(rows)
        for s in range(secs):
            cars.renew_phases(rng, opts)
            a = cars.step()
            sl = slice(s * n, (s + 1) * n)
            car_id[sl] = cars.car_id
            dirs[sl] = cars.dir
            lane[sl] = cars.lane
            pos[sl] = cars.position()
            speed[sl] = cars.speed
            accel[sl] = a
            cars.finish_trips(rng)
        t = np.repeat(np.arange(t0, t0 + secs, dtype=np.int64), n)
        kind = np.zeros(rows, dtype=np.int8)
        valid = np.ones(rows, dtype=bool)

        n_acc = int(rng.poisson(opts["accident_rate"] * secs / 3600.0))
        if n_acc:
            at = np.sort(rng.integers(0, secs, n_acc))
            where = (at + 1) * n  # after the reports of that second
            a_dir = rng.integers(0, 2, n_acc).astype(np.int8)
            a_pos = rng.integers(0, LENGTH_FT, n_acc).astype(np.int32)
            a_lane = rng.integers(1, 4, n_acc).astype(np.int8)
            t = np.insert(t, where, t0 + at)
            kind = np.insert(kind, where, 1)
            valid = np.insert(valid, where, False)
            car_id = np.insert(car_id, where, -1)
            dirs = np.insert(dirs, where, a_dir)
            lane = np.insert(lane, where, a_lane)
            pos = np.insert(pos, where, a_pos)
            speed = np.insert(speed, where, np.nan)
            accel = np.insert(accel, where, np.nan)
        null = ~valid
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(t),
                base.strings_from_codes(TYPES, kind),
                pa.array(car_id, mask=null),
                pa.array(dirs),
                pa.array(lane),
                pa.array((pos // FEET_PER_MILE).astype(np.int32)),
                pa.array(pos),
                pa.array(speed, mask=null),
                pa.array(accel, mask=null),
            ],
            schema=SCHEMA,
        )
        produced += t.size
        b += 1


INFO = DatasetInfo(
    name=NAME,
    kind="synthetic",
    title="Linear-Road-shaped car position reports with accidents",
    source="TPStream paper 6.1 / dissertation 5.7.1 (aggressive drivers); GRETA section 10 (Q3)",
    description=(
        "Cars on one expressway report position, speed and acceleration every second; hard "
        "accelerations, speeding and hard braking occur as in aggressive driving; Accident "
        "events mark accidents by segment. Workload of TPStream's aggressive-drivers query "
        "(PARTITION BY car_id) and GRETA's Q3 (position trends per car and segment without "
        "accidents)."
    ),
    columns=COLUMNS,
    time_column="t",
    time_unit="s",
    key_columns=("car_id", "segment"),
    default_events=18_000_000,
    suggested_indexes=("speed", "accel", "car_id", "segment", "type"),
    example_queries=(
        ExampleQuery(
            "tpstream",
            "FROM traffic PARTITION BY car_id "
            "DEFINE A AS accel > 8 AT LEAST 5s, B AS speed > 70 BETWEEN 4s AND 30s, "
            "C AS accel < -9 AT LEAST 3s "
            "PATTERN A meets;overlaps;starts;during B AND B contains;finishes;overlaps;meets C "
            "AND A before C WITHIN 5 minutes "
            "RETURN first(B.car_id) AS id, avg(B.speed) AS avg_speed",
            "TPStream's aggressive drivers (dissertation Listing 5.1)",
        ),
        ExampleQuery(
            "greta",
            "RETURN segment, COUNT(*), AVG(P.speed) PATTERN SEQ(NOT Accident A, Position P+) "
            "WHERE [P.car_id, segment] AND P.speed > NEXT(P).speed "
            "GROUP-BY segment WITHIN 5 minutes SLIDE 1 minute",
            "GRETA Q3: slowing-down trends per car and segment not preceded by an accident",
        ),
    ),
    options=(
        OptionInfo("cars", int, 1000, "concurrently active cars (= reports per second)"),
        OptionInfo("accident_rate", float, 6.0, "accidents per hour (Poisson)"),
        OptionInfo("p_accel", float, 0.05, "probability that a new phase is a hard acceleration"),
        OptionInfo("p_brake", float, 0.05, "probability that a new phase is hard braking"),
        OptionInfo("p_chain", float, 0.5,
                   "probability that a hard acceleration is followed by a short cruise and hard braking"),
        OptionInfo("start", int, 0, "timestamp of the first second"),
    ),
    block_events=f"{BLOCK_EVENTS} // cars seconds",
    notes=(
        "default: TPStream's 5 hours of 1000 cars reporting every second (18M reports)",
        "GRETA's Linear Road stream (3 hours, rate rising to 4000 reports/s) is approximated "
        "by --cars 4000 --events 43200000 (a constant rate, no ramp)",
    ),
)

DATASET = register(INFO, SCHEMA, _blocks)
