"""Runs of a pinned index version, their age order, tombstone cut-offs and the level policy.

Age order: a run covers the flush counters ``id_lo..id_hi``; runs never overlap in that interval,
and a higher ``id_hi`` is newer. A run's tombstone hides entries of every older run, so the
cut-off of a run is the smallest tombstone among strictly newer runs: its entries with
seq >= cut-off are deleted.

Level policy (leveling, size ratio T = ``size_ratio``): newer runs sit on lower levels (levels
never decrease from newest to oldest). Level 0 takes flushed runs; when it holds more than
``l0_max_runs`` runs, or a level i >= 1 holds more than one run or more than
``l1_max_entries * T**(i-1)`` entries, a compaction merges levels s..d into one run on level d:
s is the first level that overflows, d the first level after it whose capacity holds the merged
entries (as if L_s were pushed into L_{s+1}, then L_{s+1} into L_{s+2}, ... but in one merge and
one commit). The merged runs are contiguous in age, so tombstones stay correct. Amortized write
cost per entry: O(T * number of levels) like any leveled LSM-tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replaydb.indexes.options import LSMOptions
from replaydb.indexes.runfile import RunFileMeta

NO_CUTOFF = 1 << 62


@dataclass
class Run:
    """A run: files (parts) sharing level and age interval, in part order."""

    level: int
    id_lo: int
    id_hi: int
    files: list[RunFileMeta] = field(default_factory=list)
    cutoff: int = NO_CUTOFF

    @property
    def n(self) -> int:
        return sum(f.n for f in self.files)

    @property
    def tomb(self) -> int | None:
        tombs = [f.tomb for f in self.files if f.tomb is not None]
        return min(tombs) if tombs else None

    @property
    def seq_min(self) -> int:
        """Smallest seq of the run (a huge value for an empty run)."""
        return min((f.seq_min for f in self.files if f.n), default=NO_CUTOFF)

    @property
    def seq_max(self) -> int | None:
        vals = [f.seq_max for f in self.files if f.n]
        return max(vals) if vals else None

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)

    @property
    def key_min(self) -> Any:
        vals = [f.key_min for f in self.files if f.n]
        return vals[0] if vals else None

    @property
    def key_max(self) -> Any:
        vals = [f.key_max for f in self.files if f.n]
        return vals[-1] if vals else None


def group_runs(files: list[RunFileMeta]) -> list[Run]:
    """Group files into runs, newest first, and compute every run's tombstone cut-off."""
    by_id: dict[tuple[int, int, int], Run] = {}
    for f in files:
        key = (f.id_hi, f.id_lo, f.level)
        run = by_id.get(key)
        if run is None:
            run = by_id[key] = Run(f.level, f.id_lo, f.id_hi)
        run.files.append(f)
    runs = sorted(by_id.values(), key=lambda r: (r.id_hi, r.id_lo), reverse=True)
    cut = NO_CUTOFF
    for run in runs:
        run.files.sort(key=lambda f: f.part)
        run.cutoff = cut
        if run.tomb is not None:
            cut = min(cut, run.tomb)
    return runs


@dataclass(frozen=True)
class CompactionPlan:
    """Merge ``inputs`` (contiguous in age, newest first) into one run on ``level``."""

    inputs: list[Run]
    level: int
    reason: str


def plan_compaction(
    runs: list[Run], options: LSMOptions, *, full: bool = False
) -> CompactionPlan | None:
    """What the level policy asks to merge now (see module docstring); None if nothing."""
    if not runs:
        return None
    if full:
        total = sum(r.n for r in runs)
        only = runs[0] if len(runs) == 1 else None
        if only is not None and only.tomb is None and only.level == options.fit_level(total):
            return None
        return CompactionPlan(list(runs), options.fit_level(total), "full")
    by_level: dict[int, list[Run]] = {}
    for r in runs:
        by_level.setdefault(r.level, []).append(r)

    def entries(level: int) -> int:
        return sum(r.n for r in by_level.get(level, []))

    start = None
    reason = ""
    if len(by_level.get(0, [])) > options.l0_max_runs:
        start, reason = 0, f"level 0 holds {len(by_level[0])} runs > {options.l0_max_runs}"
    else:
        for level in sorted(k for k in by_level if k >= 1):
            if len(by_level[level]) > 1:
                start, reason = level, f"level {level} holds {len(by_level[level])} runs"
                break
            if entries(level) > options.level_capacity(level):
                start = level
                reason = f"level {level} holds {entries(level)} > {options.level_capacity(level)} entries"
                break
    if start is None:
        return None
    d = start + 1 if start >= 1 else 1
    total = entries(start) + (entries(d) if d != start else 0)
    while total > options.level_capacity(d):
        d += 1
        total += entries(d)
    inputs = [r for r in runs if start <= r.level <= d]
    # contiguity in age (guaranteed by the level order invariant; fall back to a full merge)
    ages = [i for i, r in enumerate(runs) if start <= r.level <= d]
    if ages != list(range(ages[0], ages[0] + len(ages))):
        return CompactionPlan(
            list(runs), options.fit_level(sum(r.n for r in runs)), "repair: levels out of age order"
        )
    return CompactionPlan(inputs, d, reason)
