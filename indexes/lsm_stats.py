"""Statistics of an :class:`~replaydb.indexes.lsm.LSMIndex` computed from run metadata: counts
and selectivities of key ranges, what a range read will cost, sizes, runs and levels.

``count``/``selectivity`` come from per-file key samples (equi-depth histograms) with
guaranteed bounds (:mod:`.sketch`), optionally exact by reading one row group per boundary;
sizes are in bytes and in logical 8 KiB pages (:mod:`.options`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from replaydb.indexes.bounds import key_range
from replaydb.indexes.levels import NO_CUTOFF, Run
from replaydb.indexes.options import LSMOptions, entries_per_page
from replaydb.indexes.reader import FileCache, row_group_span
from replaydb.indexes.results import CostCounters, CountEstimate
from replaydb.indexes.stats import estimate_and_pages, exact_in_file


class LSMStatistics:
    """The statistics methods of :class:`~replaydb.indexes.lsm.LSMIndex` (which holds the state
    named below)."""

    path: str
    key_type: str
    options: LSMOptions
    counters: CostCounters
    _files: FileCache
    _runs: list[Run]

    @property
    def entries_per_page(self) -> int:
        """Entries per logical 8 KiB page (341 for numeric keys; see :mod:`.options`)."""
        if self.key_type != "string":
            return entries_per_page(self.key_type)
        n = self.num_physical_entries
        mean = sum(f.key_bytes for r in self._runs for f in r.files) / n if n else 0.0
        return entries_per_page("string", mean)

    def read_plan(
        self,
        lo: Any = None,
        hi: Any = None,
        *,
        lo_inclusive: bool = True,
        hi_inclusive: bool = True,
    ) -> dict[str, int]:
        """What ``range`` with these bounds will read, computed from metadata only.

        Returns runs_consulted, runs_skipped, row_groups_read, entries_read, pages_read and
        bytes_read, equal to the cost counters the query will add (without tombstone-only
        skips). O(R log G).
        """
        kr = key_range(self.key_type, lo, hi, lo_inclusive, hi_inclusive)
        names = ("runs_consulted", "runs_skipped", "row_groups_read", "entries_read", "pages_read")
        plan = dict.fromkeys((*names, "bytes_read"), 0)
        if kr.empty:
            return plan
        epp = self.entries_per_page
        for run in self._runs:
            if not run.n:
                continue
            if not kr.overlaps(run.key_min, run.key_max):
                plan["runs_skipped"] += 1
                continue
            plan["runs_consulted"] += 1
            for f in run.files:
                if not kr.overlaps(f.key_min, f.key_max):
                    continue
                a, b = row_group_span(f, kr)
                plan["row_groups_read"] += b - a
                plan["entries_read"] += int(f.rg_rows[a:b].sum())
                plan["pages_read"] += f.pages_of(a, b, epp)
                plan["bytes_read"] += int(f.rg_bytes[a:b].sum())
        return plan

    def count(
        self,
        lo: Any = None,
        hi: Any = None,
        *,
        lo_inclusive: bool = True,
        hi_inclusive: bool = True,
        max_seq: int | None = None,
        exact: bool = False,
    ) -> CountEstimate:
        """Number of live entries with key in the range, without reading entries.

        From each overlapping file's key sample: bounds guaranteed, error at most
        ``2 * (sample_step - 1)`` entries per file (sample_step = 341 by default, one page),
        plus the seq-histogram uncertainty for files touched by a tombstone or ``max_seq``.
        ``exact=True`` makes the count exact by reading at most one row group's key column per
        boundary per file (files touched by a tombstone or max_seq are read in the range).
        """
        kr = key_range(self.key_type, lo, hi, lo_inclusive, hi_inclusive)
        if kr.empty:
            return CountEstimate(0.0, 0, 0)
        return self._file_stats(kr, max_seq, exact=exact, pages=False)[0]

    def range_stats(
        self,
        lo: Any = None,
        hi: Any = None,
        *,
        lo_inclusive: bool = True,
        hi_inclusive: bool = True,
        max_seq: int | None = None,
    ) -> tuple[CountEstimate, int]:
        """``(count(...), read_plan(...)["pages_read"])`` of one range in one pass over the
        runs' files: what a planner's statistics need of every condition (the estimated
        count, with ``max_seq``, and the pages a range query reads). Equal to the two calls;
        it spares their second pass, key range and the read plan's other sums. O(R log G)."""
        kr = key_range(self.key_type, lo, hi, lo_inclusive, hi_inclusive)
        if kr.empty:
            return CountEstimate(0.0, 0, 0), 0
        return self._file_stats(kr, max_seq, exact=False, pages=True)

    def _file_stats(self, kr: Any, max_seq: int | None, *, exact: bool, pages: bool
                    ) -> tuple[CountEstimate, int]:
        """The one pass over the runs' files of :meth:`count` (estimated, or ``exact``) and,
        with ``pages``, of :meth:`range_stats`: the live entries of the non-empty key range
        ``kr`` below ``max_seq``, and the pages a range query reads (0 without ``pages``)."""
        limit = NO_CUTOFF if max_seq is None else int(max_seq)
        est, low, high, n_pages = 0.0, 0, 0, 0
        epp = self.entries_per_page
        for run in self._runs:
            cut = min(run.cutoff, limit)
            read = pages and bool(run.n) and kr.overlaps(run.key_min, run.key_max)
            for f in run.files:
                # the estimate (unless exact) and the pages in one call (compiled for numbers)
                e, lo_c, hi_c, pg = estimate_and_pages(
                    f, kr, cut, epp, estimate=not exact,
                    pages=read and kr.overlaps(f.key_min, f.key_max))
                if exact:
                    e = lo_c = hi_c = exact_in_file(self.path, f, kr, cut, self._files,
                                                    self.counters, epp)
                est, low, high, n_pages = est + e, low + lo_c, high + hi_c, n_pages + pg
        return CountEstimate(est, low, high), n_pages

    def selectivity(
        self,
        lo: Any = None,
        hi: Any = None,
        *,
        lo_inclusive: bool = True,
        hi_inclusive: bool = True,
        max_seq: int | None = None,
    ) -> float:
        """Estimated fraction of the index's live entries with key in the range (0 if empty)."""
        total = self.count(max_seq=max_seq).estimate
        if total <= 0:
            return 0.0
        c = self.count(
            lo, hi, lo_inclusive=lo_inclusive, hi_inclusive=hi_inclusive, max_seq=max_seq
        )
        return min(1.0, c.estimate / total)

    @property
    def num_entries(self) -> int:
        """Live entries (estimated from the seq histograms while tombstones are pending)."""
        return int(self.count())

    @property
    def num_physical_entries(self) -> int:
        """Entries stored in run files, including ones hidden by tombstones."""
        return sum(r.n for r in self._runs)

    @property
    def size_bytes(self) -> int:
        """Bytes of the run files of this version."""
        return sum(r.size_bytes for r in self._runs)

    @property
    def pages(self) -> int:
        """Size in logical 8 KiB pages: ceil(stored entries / entries_per_page)."""
        return -(-self.num_physical_entries // self.entries_per_page)

    @property
    def num_runs(self) -> int:
        return len(self._runs)

    @property
    def num_files(self) -> int:
        return sum(len(r.files) for r in self._runs)

    @property
    def num_levels(self) -> int:
        """Number of distinct levels holding runs."""
        return len({r.level for r in self._runs})

    def runs(self) -> list[dict[str, Any]]:
        """The runs of this version, newest first."""
        out = []
        for r in self._runs:
            out.append(
                {
                    "level": r.level,
                    "id_lo": r.id_lo,
                    "id_hi": r.id_hi,
                    "files": [f.name for f in r.files],
                    "entries": r.n,
                    "bytes": r.size_bytes,
                    "key_min": _py(r.key_min),
                    "key_max": _py(r.key_max),
                    "tombstone": r.tomb,
                    "cutoff": None if r.cutoff >= NO_CUTOFF else r.cutoff,
                }
            )
        return out

    def levels(self) -> list[dict[str, Any]]:
        """Per level: runs, entries, bytes and capacity (None for level 0)."""
        out: dict[int, dict[str, Any]] = {}
        for r in self._runs:
            d = out.setdefault(
                r.level,
                {
                    "level": r.level,
                    "runs": 0,
                    "entries": 0,
                    "bytes": 0,
                    "capacity": None if r.level == 0 else self.options.level_capacity(r.level),
                },
            )
            d["runs"] += 1
            d["entries"] += r.n
            d["bytes"] += r.size_bytes
        return [out[k] for k in sorted(out)]

    def stats(self) -> dict[str, Any]:
        """Everything ``replaydb stats`` shows about this index."""
        kmins = [r.key_min for r in self._runs if r.n]
        kmaxs = [r.key_max for r in self._runs if r.n]
        return {
            "path": self.path,
            "version": self.version,
            "key_type": self.key_type,
            "entries": self.num_entries,
            "stored_entries": self.num_physical_entries,
            "size_bytes": self.size_bytes,
            "pages": self.pages,
            "entries_per_page": self.entries_per_page,
            "runs": self.num_runs,
            "files": self.num_files,
            "levels": self.levels(),
            "key_min": _py(min(kmins)) if kmins else None,
            "key_max": _py(max(kmaxs)) if kmaxs else None,
            "pending_tombstones": sum(1 for r in self._runs if r.tomb is not None),
            "size_ratio": self.options.size_ratio,
        }

    def reset_counters(self) -> CostCounters:
        """Reset the cost counters; returns their values before the reset."""
        old = self.counters.snapshot()
        self.counters.reset()
        return old


def _py(v: Any) -> Any:
    """NumPy scalars as plain Python values (JSON-friendly)."""
    return v.item() if isinstance(v, np.generic) else v
