"""The member tests' costs: their defaults, their place in a store's calibration, and their
measurement on this machine.

A tight block tests the candidates it has left against a deferred member one of three ways,
all giving the same candidates: a scan of the member's seqs where they lie, their bitmap, or
their run files' rank codes (:mod:`replaydb.indexes.membership`,
:mod:`replaydb.indexes.rankcodes`). The planner takes the cheapest by the linear model of
:class:`~replaydb.indexes.membership.MemberTestCosts`, whose six costs depend on the machine.
``replaydb calibrate`` measures them (:func:`measure_member_costs`) and stores them with the
other weights (``calibration.pattern.member_tests``, :meth:`MemberCalibration.as_config`); a
store never calibrated, or calibrated before these costs were, uses
:data:`DEFAULT_MEMBER_COSTS`, as it uses the default weights.

Measurement: the real kernels on generated data of the stream's size (its events as the
bound ``B``, clamped to [:data:`MIN_BOUND`, :data:`MAX_BOUND`]), laid out as the planner finds
them - seqs and rank codes in memory-mapped files (written to a temporary directory), the
bitmap in an :class:`~replaydb.indexes.kernels.Arena`. Each design point runs once to map its
pages, then ``repeat`` times after a pass over a buffer twice the largest CPU cache the system
reports (:func:`eviction_bytes`), which evicts the data: cold caches, as a query's planning
finds them after other work. The best of the timed runs counts. The points:

* the scan: ``B/8`` and ``B/32`` seqs against few targets (a pass share of 0.1-0.2%), ``B/64``
  seqs against targets passing 6% and 25% of them;
* the bitmap: ``B/8`` and ``B/64`` seqs against 1024 targets, ``B/64`` against ``B/16``
  targets, and ``B/64`` seqs in a bound of ``B/4`` (all bitmaps the planner sets:
  :func:`~replaydb.indexes.kernels.bits_pay`);
* the rank codes: 512, 1024, 2048 and 8192 targets against one piece of a few buckets (random
  codes in a map of ``B`` seqs). The model is linear in the pieces, each a range of a run file
  with a map of its own, read alike.

Each way's model is fitted by non-negative least squares on relative errors
(:func:`fit_member_costs`). Complexity: O(B) time, memory and temporary disk (about ``3.1 B``
bytes), plus the eviction buffer.
"""

from __future__ import annotations

import glob
import math
import mmap
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import partial
from typing import Any

import numpy as np

from replaydb.indexes.bitsets import member_bits, union_bits_of
from replaydb.indexes.kernels import Arena
from replaydb.indexes.membership import MemberTestCosts, members_in_pieces
from replaydb.indexes.plainread import Spans, release_map
from replaydb.indexes.rankcodes import BUCKETS, RankCodes, members_by_codes
from replaydb.planner.pattern.nnls import nnls

DEFAULT_MEMBER_COSTS = MemberTestCosts(scan_value=1.6, scan_pass=150.0, bits_value=2.3,
                                       bits_bound=0.06, bits_target=3.0, code_target=150.0)
"""The member tests' costs of a store never calibrated (or calibrated before they were), as
:data:`~replaydb.planner.pattern.cost.DEFAULT_WEIGHTS` are its weights: fitted with cold caches
on the machine replaydb was developed on, on a 10M-event stream (the planner benchmark's runs of
commits 4d14255 and 1849887). Their ratios make the choices of that
machine; ``replaydb calibrate`` replaces them by the store's machine's."""

MIN_BOUND = 1 << 21
"""The smallest bound measured: its bitmap points have ``B/64 = 2**15`` seqs, the fewest the
planner sets a bitmap of."""
MAX_BOUND = 1 << 25
"""The largest bound measured: a stream of more events is measured at this size, whose data
(hundreds of megabytes) is already many times the caches, to keep the measurement short."""
UNKNOWN_CACHE_BYTES = 128 << 20
"""The cache size assumed where the system reports none: more than most processors' last
level."""
WAYS = {"scan": ("scan_value", "scan_pass"), "bits": ("bits_bound", "bits_value", "bits_target"),
        "codes": ("code_target",)}
"""The costs each way's runs fit."""


def costs_config(costs: MemberTestCosts) -> dict[str, float]:
    """``costs`` as stored in a calibration (``<cost>_ns``, ns each)."""
    return {f"{f.name}_ns": float(getattr(costs, f.name)) for f in fields(MemberTestCosts)}


def costs_of_config(cfg: Any) -> MemberTestCosts | None:
    """The costs a calibration stored (:func:`costs_config`); None when it holds none, or
    not all of them as costs (a calibration stored before they were measured)."""
    if not isinstance(cfg, dict):
        return None
    try:
        return MemberTestCosts(**{f.name: float(cfg[f"{f.name}_ns"])
                                  for f in fields(MemberTestCosts)})
    except (KeyError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class MemberSample:
    """One design point: the way (``scan``, ``bits`` or ``codes``, :data:`WAYS`), its sizes
    and its best cold time in ns."""

    way: str
    targets: int
    values: int
    bound: int
    pieces: int
    ns: float

    def model_ns(self, costs: MemberTestCosts) -> float:
        """The time ``costs`` predict for this point."""
        if self.way == "scan":
            return costs.scan_ns(self.targets, self.values, self.bound)
        if self.way == "bits":
            return costs.bits_ns(self.targets, self.values, self.bound)
        return costs.codes_ns(self.targets, self.pieces)


@dataclass
class MemberCalibration:
    """Member-test costs measured on this machine (:func:`measure_member_costs`): the fit,
    the bound it was measured at, each way's median relative error and the samples."""

    costs: MemberTestCosts
    bound: int
    relative_error: dict[str, float]
    samples: list[MemberSample]
    seconds: float

    def as_config(self) -> dict[str, Any]:
        """What a calibration stores (``calibration.pattern.member_tests``)."""
        return {**costs_config(self.costs), "bound": self.bound,
                "median_relative_error": dict(self.relative_error), "seconds": self.seconds}


def _unit(name: str) -> MemberTestCosts:
    """Costs of 1 ns for ``name``, 0 for the others: a model's regressor for that cost."""
    return MemberTestCosts(**{f.name: float(f.name == name) for f in fields(MemberTestCosts)})


def fit_member_costs(samples: list[MemberSample]
                     ) -> tuple[MemberTestCosts, dict[str, float]]:
    """The costs fitting ``samples``, and each way's median relative error: per way, the
    model's regressors (its time for 1 ns of one cost, none of the others) against the
    measured times, by non-negative least squares with every row divided by its time, so
    that short and long runs weigh alike. ValueError for a way with fewer samples than
    costs. O(samples)."""
    got: dict[str, float] = {}
    errors: dict[str, float] = {}
    for way, names in WAYS.items():
        rows = [s for s in samples if s.way == way]
        if len(rows) < len(names):
            raise ValueError(f"fit_member_costs: {len(rows)} {way} samples for "
                             f"{len(names)} costs")
        x = np.array([[s.model_ns(_unit(n)) for n in names] for s in rows])
        y = np.array([s.ns for s in rows], np.float64)
        rw = 1.0 / np.maximum(y, 1.0)
        scale = np.maximum(x.max(axis=0), 1e-300)
        coef, _ = nnls((x / scale) * rw[:, None], y * rw)
        coef = coef / scale
        got.update(zip(names, (float(c) for c in coef)))
        errors[way] = float(np.median(np.abs(x @ coef - y) * rw))
    return MemberTestCosts(**got), errors


def largest_cache_bytes() -> int:
    """Bytes of the largest CPU cache the system reports: Linux's sysfs (the caches the
    process's CPUs see), else ``sysconf``; 0 when neither tells."""
    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path) as f:
                m = re.fullmatch(r"(\d+)([KMG]?)", f.read().strip())
        except OSError:
            continue
        if m:
            sizes.append(int(m[1]) << {"": 0, "K": 10, "M": 20, "G": 30}[m[2]])
    if not sizes:
        for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
            try:
                v = os.sysconf(name)
            except (ValueError, OSError):
                continue
            if v > 0:
                sizes.append(int(v))
    return max(sizes, default=0)


def eviction_bytes() -> int:
    """The buffer a pass over which evicts the measured data: twice the largest cache
    (:func:`largest_cache_bytes`, else :data:`UNKNOWN_CACHE_BYTES`), at most 1 GiB."""
    return 2 * min(largest_cache_bytes() or UNKNOWN_CACHE_BYTES, 1 << 29)


def _best_cold(run: Callable[[], Any], evict: np.ndarray, repeat: int) -> float:
    """ns of the fastest of ``repeat`` runs of ``run``, each after a write to every cache
    line of ``evict``; one run first, untimed (it maps the data's pages)."""
    run()
    best = math.inf
    for _ in range(max(1, repeat)):
        evict[::64] += 1
        t0 = time.perf_counter_ns()
        run()
        best = min(best, time.perf_counter_ns() - t0)
    return float(best)


class _Data:
    """Generated seqs (``bound // 8`` in ``[0, bound)``, then ``bound // 64`` in
    ``[0, bound // 4)``) and rank codes (one per seq of ``[0, bound)``), memory-mapped from
    files in ``directory``."""

    def __init__(self, directory: str, bound: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.bound = bound
        self.n = bound // 8
        self._maps: list[mmap.mmap] = []
        seqs = np.concatenate([self.rng.integers(0, bound, self.n),
                               self.rng.integers(0, bound // 4, bound // 64)])
        self.seqs = self._map(directory, "seqs", seqs.astype("<i8"))
        codes = self.rng.integers(0, BUCKETS, bound, dtype=np.uint16)
        self.codes = RankCodes(self._map(directory, "codes", codes).view(np.uint16), bound, 0,
                               bound)

    def _map(self, directory: str, name: str, a: np.ndarray) -> np.ndarray:
        path = os.path.join(directory, name)
        a.tofile(path)
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._maps.append(mm)
        return np.frombuffer(mm, np.uint8)

    def piece(self, start: int, count: int) -> Spans:
        """Seqs ``[start, start + count)`` of the seqs file, where they lie."""
        return Spans(self.seqs, np.array([8 * start], np.int64), np.array([count], np.int64),
                     np.dtype("<i8"))

    def coded_piece(self) -> Spans:
        """A coded lookup's piece: a few buckets of ranks (their seqs in memory)."""
        size = 4 * (self.bound // BUCKETS + 1)
        seqs = self.rng.integers(0, self.bound, size).astype("<i8")
        rank0 = self.bound // 2
        return Spans(seqs.view(np.uint8), np.array([0], np.int64), np.array([size], np.int64),
                     np.dtype("<i8"), rank0, self.codes)

    def targets(self, k: int, bound: int) -> np.ndarray:
        """About ``k`` distinct targets in ``[0, bound)``, ascending."""
        return np.unique(self.rng.integers(0, bound, max(1, k)))

    def close(self) -> None:
        self.codes.close()
        self.seqs = np.empty(0, np.uint8)
        for mm in self._maps:
            release_map(mm)


def _bits_run(arena: Arena, pieces: list[Spans], targets: np.ndarray, bound: int) -> None:
    """The bitmap way, as the planner runs it: the lookup's bitmap set in the arena, a bit
    read per target."""
    arena.reset()
    bits = union_bits_of(pieces, bound, arena.take)
    if bits is None:
        raise ValueError("member-test calibration: a bitmap point the planner would not set")
    member_bits(targets, 0, bits, bound)


def _samples(data: _Data, evict: np.ndarray, repeat: int) -> list[MemberSample]:
    """Every design point of the module docstring, timed."""
    b = data.bound
    out: list[MemberSample] = []
    for values, k in ((b // 8, b // 8192), (b // 32, b // 4096), (b // 64, b // 128),
                      (b // 64, b // 32)):
        piece, tg = data.piece(0, values), data.targets(k, b)
        ns = _best_cold(partial(members_in_pieces, tg, [piece], b), evict, repeat)
        out.append(MemberSample("scan", tg.size, values, b, 1, ns))
    arena = Arena()
    for values, k, bound, start in ((b // 8, 1024, b, 0), (b // 64, 1024, b, 0),
                                    (b // 64, b // 16, b, 0), (b // 64, 1024, b // 4, data.n)):
        piece, tg = data.piece(start, values), data.targets(k, bound)
        ns = _best_cold(partial(_bits_run, arena, [piece], tg, bound), evict, repeat)
        out.append(MemberSample("bits", tg.size, values, bound, 1, ns))
    for k in (512, 1024, 2048, 8192):
        piece, tg = data.coded_piece(), data.targets(k, b)
        ns = _best_cold(partial(members_by_codes, tg, [piece]), evict, repeat)
        out.append(MemberSample("codes", tg.size, 0, b, 1, ns))
    return out


def measure_member_costs(bound: int, *, repeat: int = 3, seed: int = 0) -> MemberCalibration:
    """Measure the member tests' costs on this machine for a stream of ``bound`` events (see
    the module docstring). O(bound)."""
    t0 = time.perf_counter()
    b = min(max(int(bound), MIN_BOUND), MAX_BOUND)
    evict = np.ones(eviction_bytes(), np.uint8)
    with tempfile.TemporaryDirectory(prefix="replaydb-member-costs-") as d:
        data = _Data(d, b, seed)
        try:
            samples = _samples(data, evict, repeat)
        finally:
            data.close()
    costs, errors = fit_member_costs(samples)
    return MemberCalibration(costs, b, errors, samples, time.perf_counter() - t0)
