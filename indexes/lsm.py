"""LSMIndex: an LSM-tree secondary index of (key, seq, t) entries persisted as a Delta table.

One index per (stream, attribute) (dissertation 3.2 and 3.4.1: ChronicleDB's heavyweight indexes
are LSM-trees; for pattern planning an entry is the triple (key, seq, t)).

Write path: ``add`` sorts each batch by (key, seq) (radix sort) into the memtable, a list of
sorted arrays; ``delete_from_seq(s0)`` drops memtable entries with seq >= s0 and records a
seq-range tombstone; ``flush`` merges the memtable into one immutable sorted run file on level 0
carrying the tombstone, and commits it (one Delta version); ``compact`` merges runs per the level
policy (:mod:`replaydb.indexes.levels`) in one commit (removes of the inputs + adds of the
output), applying tombstones and dropping them once no older run needs them.

Read path: every reader is pinned to one Delta version (snapshot isolation; the store records
which index version belongs to each stream version). ``range`` consults only runs whose key range
overlaps [lo, hi], reads only the overlapping row groups of their files (:mod:`.reader`), drops
entries hidden by tombstones (seq >= the run's cut-off) or at/after ``max_seq``, and merges the
per-run answers by (key, seq) or sorts them by seq. Cost: O(R log G) to locate, plus the rows of
the row groups read (at most the answer plus two row groups per consulted file). ``seqs`` answers
the same ranges with seqs (and optionally times) alone, in no order, read directly from the
memory-mapped run files (:mod:`.plainread`): for callers that sort by seq themselves.

Statistics: ``count``/``selectivity`` from per-file key samples (equi-depth histograms) with
guaranteed bounds (:mod:`.sketch`), optionally exact by reading one row group per boundary;
sizes in bytes and logical 8 KiB pages (:mod:`.options`); cost counters per index object.

The write path is in :mod:`.lsm_write`, the statistics in :mod:`.lsm_stats` (both mixed into
:class:`LSMIndex`); this module opens indexes and answers range reads.

Concurrency: one writer per index (the store's writer lock); writes are refused unless this
object is at the table's latest version. Readers of pinned versions never see later commits.
Decisions where the papers are silent: null/NaN keys are not indexed; seqs are unique per
index (checked by :meth:`check`); the memtable is not visible to reads (reads see committed
versions only).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from replaydb.errors import CorruptionError, UsageError
from replaydb.indexes import deltalog
from replaydb.indexes.bounds import key_range, prefix_successor
from replaydb.indexes.entries import Entries, check_key_type
from replaydb.indexes.levels import NO_CUTOFF, Run, group_runs
from replaydb.indexes.lsm_stats import LSMStatistics
from replaydb.indexes.lsm_write import LSMWrites
from replaydb.indexes.options import LSMOptions
from replaydb.indexes.reader import (
    FileCache,
    Piece,
    as_array,
    join_pieces,
    read_file_range,
    read_file_seq_pieces,
)
from replaydb.indexes.results import CostCounters, IndexResult
from replaydb.indexes.runfile import (
    RunFileMeta,
    load_run_meta,
)
from replaydb.indexes.sorting import merge_entries, order_by_seq


class LSMIndex(LSMWrites, LSMStatistics):
    """An LSM secondary index at ``path`` (a Delta table), pinned to one version.

    Create with :meth:`create`, open with :meth:`open`. See the module docstring.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        dt: Any,
        key_type: str,
        options: LSMOptions,
        *,
        writable: bool,
        files: FileCache | None = None,
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self._dt = dt
        self.key_type = key_type
        self.options = options
        self._writable = writable
        self._files = files or FileCache()
        self.counters = CostCounters()
        self._mem: list[Entries] = []
        self._mem_n = 0
        self._pending_tomb: int | None = None
        self._load_snapshot()

    # ------------------------------------------------------------------ opening
    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        key_type: str,
        *,
        options: LSMOptions | None = None,
        exist_ok: bool = False,
        commit_metadata: dict[str, Any] | None = None,
    ) -> LSMIndex:
        """Create an empty index (Delta version 0) for keys of ``key_type``.

        ``key_type`` is "int64", "float64" or "string". With ``exist_ok`` an existing index of
        the same key type is opened instead.
        """
        check_key_type(key_type)
        options = options or LSMOptions()
        if deltalog.is_index_table(path):
            if not exist_ok:
                raise UsageError(f"an index already exists at {path}")
            idx = cls.open(path)
            if idx.key_type != key_type:
                raise UsageError(f"index at {path} has key type {idx.key_type}, not {key_type}")
            return idx
        deltalog.create_table(path, key_type, options, commit_metadata=commit_metadata)
        return cls.open(path, options=options)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        version: int | None = None,
        *,
        options: LSMOptions | None = None,
    ) -> LSMIndex:
        """Open the index at ``version`` (default: latest).

        The object is writable when it is at the latest version. ``options`` overrides the
        options stored at creation for this object only (e.g. ``auto_compact``).
        """
        if not deltalog.is_index_table(path):
            raise UsageError(f"no index at {path}")
        dt = deltalog.load(path, version)
        key_type, stored = deltalog.describe(dt)
        writable = version is None or deltalog.load(path).version() == dt.version()
        return cls(path, dt, key_type, options or stored, writable=writable)

    @staticmethod
    def exists(path: str | os.PathLike[str]) -> bool:
        return deltalog.is_index_table(path)

    def at_version(self, version: int) -> LSMIndex:
        """A read-only view of ``version`` sharing this object's open files."""
        dt = deltalog.load(self.path, version)
        return LSMIndex(
            self.path, dt, self.key_type, self.options, writable=False, files=self._files
        )

    def refresh(self) -> int:
        """Move this object to the table's latest version (memtable must be empty)."""
        if self._mem_n or self._pending_tomb is not None:
            raise UsageError("refresh() with unflushed entries; flush() first")
        self._dt = deltalog.load(self.path)
        self._writable = True
        self._load_snapshot()
        return self.version

    def close(self) -> None:
        self._files.close()

    def __enter__(self) -> LSMIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"LSMIndex({self.path!r}, key_type={self.key_type}, version={self.version}, "
            f"runs={self.num_runs}, entries={self.num_physical_entries})"
        )

    def _load_snapshot(self) -> None:
        self._live = deltalog.live_files(self._dt)
        metas = [load_run_meta(self.path, f.name, f.size) for f in self._live]
        self._runs: list[Run] = group_runs(metas)
        self._version = int(self._dt.version())

    @property
    def version(self) -> int:
        """The Delta version this object reads (and writes on top of)."""
        return self._version

    @property
    def writable(self) -> bool:
        return self._writable

    def latest_version(self) -> int:
        return int(deltalog.load(self.path).version())

    def commit_info(self, version: int | None = None) -> dict[str, Any]:
        """Delta commitInfo of ``version`` (default: this object's), with commit metadata."""
        return deltalog.commit_info(self._dt, version)

    # ------------------------------------------------------------------ reading
    def _result(self, ent: Entries, order: str, before: CostCounters) -> IndexResult:
        self.counters.entries_returned += len(ent)
        cost = self.counters.snapshot() - before
        if ent.is_string:
            return IndexResult(
                ent.key.to_numpy(zero_copy_only=False), ent.seq, ent.t, order, cost, ent.key
            )
        return IndexResult(ent.key, ent.seq, ent.t, order, cost)

    def _runs_to_read(self, kr: Any, max_seq: int | None
                      ) -> Iterator[tuple[int, list[RunFileMeta]]]:
        """For each run a range read consults: its cut-off (entries at or after it are hidden
        by a tombstone or ``max_seq``) and its files whose keys overlap ``kr``. Runs outside
        the key range, or wholly hidden, are skipped (counted in ``runs_skipped``; the others
        in ``runs_consulted``). Shared by :meth:`range` and :meth:`seqs`. O(runs + files)."""
        limit = NO_CUTOFF if max_seq is None else int(max_seq)
        for run in self._runs:
            if not run.n:
                continue
            cut = min(run.cutoff, limit)
            if not kr.overlaps(run.key_min, run.key_max) or cut <= run.seq_min:
                self.counters.runs_skipped += 1
                continue
            self.counters.runs_consulted += 1
            yield cut, [f for f in run.files if kr.overlaps(f.key_min, f.key_max)]

    def range(
        self,
        lo: Any = None,
        hi: Any = None,
        *,
        lo_inclusive: bool = True,
        hi_inclusive: bool = True,
        order: str = "key",
        max_seq: int | None = None,
    ) -> IndexResult:
        """Entries with lo <= key <= hi (bounds per the flags; None = unbounded).

        ``order="key"``: sorted by (key, seq); ``order="seq"``: sorted by seq. ``max_seq``:
        only entries with seq < max_seq. Skips runs and row groups outside the range.
        """
        if order not in ("key", "seq"):
            raise UsageError(f"order must be 'key' or 'seq', got {order!r}")
        kr = key_range(self.key_type, lo, hi, lo_inclusive, hi_inclusive)
        before = self.counters.snapshot()
        self.counters.queries += 1
        if kr.empty:
            return self._result(Entries.empty(self.key_type), order, before)
        epp = self.entries_per_page
        parts: list[Entries] = []
        for cut, files in self._runs_to_read(kr, max_seq):
            run_parts = []
            for f in files:
                e = read_file_range(self.path, f, kr, self._files, self.counters, epp)
                if cut <= f.seq_max and len(e):
                    e = e.filter(e.seq < cut)
                run_parts.append(e)
            parts.append(Entries.concat(run_parts, self.key_type))
        if order == "key":
            out = merge_entries(parts, self.key_type)
        else:
            out = order_by_seq(Entries.concat(parts, self.key_type))
        return self._result(out, order, before)

    def seqs(
        self,
        lo: Any = None,
        hi: Any = None,
        *,
        lo_inclusive: bool = True,
        hi_inclusive: bool = True,
        max_seq: int | None = None,
        with_t: bool = False,
    ) -> tuple[np.ndarray, np.ndarray | None, CostCounters]:
        """Seqs (and times, ``with_t``; else None) of the entries that :meth:`range` returns,
        *in no particular order*, and the I/O spent: for callers that sort by seq themselves.
        Skips what ``range`` spends on keys: numeric run files are read directly
        (:func:`.reader.read_file_seq_pieces`), keys only of the two row groups at the range's ends,
        and runs are not merged by key. Same entries as ``range``, same counters (but
        ``bytes_read``, which counts only the columns read). The pieces of
        :meth:`seq_pieces` in one new array."""
        seqs, ts, cost = self.seq_pieces(lo, hi, lo_inclusive=lo_inclusive,
                                         hi_inclusive=hi_inclusive, max_seq=max_seq,
                                         with_t=with_t)
        seq = join_pieces(seqs)
        return seq, (join_pieces(ts) if ts is not None else None), cost

    def seq_pieces(
        self,
        lo: Any = None,
        hi: Any = None,
        *,
        lo_inclusive: bool = True,
        hi_inclusive: bool = True,
        max_seq: int | None = None,
        with_t: bool = False,
    ) -> tuple[list[Piece], list[Piece] | None, CostCounters]:
        """:meth:`seqs` in pieces, one per run file read (none for a file without entries in
        the range): where a file is plain, a piece is where its values lie in the
        memory-mapped file (:class:`.plainread.Spans`, not copied), else an array. For the
        pattern planner, which sets the seqs' bits straight from the file
        (:func:`.bitsets.union_bits_of`): a copy of a million seqs into fresh memory costs
        about as much as setting their bits. The seqs and times pieces match one to one."""
        kr = key_range(self.key_type, lo, hi, lo_inclusive, hi_inclusive)
        before = self.counters.snapshot()
        self.counters.queries += 1
        seqs: list[Piece] = []
        ts: list[Piece] = []
        n = 0
        if not kr.empty:
            epp = self.entries_per_page
            for cut, files in self._runs_to_read(kr, max_seq):
                for f in files:
                    s, t = read_file_seq_pieces(self.path, f, kr, self._files, self.counters,
                                                epp, with_t)
                    if cut <= f.seq_max and s.size:
                        s = as_array(s)
                        keep = s < cut
                        s = s[keep]
                        t = None if t is None else as_array(t)[keep]
                    if s.size:
                        n += s.size
                        seqs.append(s)
                        if t is not None:
                            ts.append(t)
        self.counters.entries_returned += n
        return seqs, (ts if with_t else None), self.counters.snapshot() - before

    def point(self, value: Any, *, order: str = "key", max_seq: int | None = None) -> IndexResult:
        """Entries whose key equals ``value``."""
        return self.range(value, value, order=order, max_seq=max_seq)

    def prefix(self, prefix: str, *, order: str = "key", max_seq: int | None = None) -> IndexResult:
        """Entries of a string index whose key starts with ``prefix``."""
        if self.key_type != "string":
            raise UsageError("prefix() needs a string index")
        hi = prefix_successor(prefix)
        return self.range(prefix, hi, hi_inclusive=False, order=order, max_seq=max_seq)

    # ------------------------------------------------------------------ checking
    def check(
        self, expected: tuple[Any, Any, Any] | None = None, *, policy: bool = False
    ) -> list[str]:
        """Invariant problems of this version (empty list: consistent). Reads every entry.

        See :func:`replaydb.indexes.check.check_index`.
        """
        from replaydb.indexes.check import check_index

        return check_index(self, expected, policy=policy)

    def _check(self, expected: tuple[Any, Any, Any] | None = None, *, policy: bool = False) -> None:
        problems = self.check(expected, policy=policy)
        if problems:
            raise CorruptionError(f"index {self.path} v{self.version}: " + "; ".join(problems[:10]))

    def live_entries(self, *, order: str = "seq") -> IndexResult:
        """All live entries (a full range query)."""
        return self.range(order=order)

