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

from replaydb.errors import CorruptionError, ReadOnlyError, UsageError
from replaydb.indexes import deltalog
from replaydb.indexes.bounds import key_range, prefix_successor
from replaydb.indexes.entries import Entries, check_key_type, normalize_entries
from replaydb.indexes.levels import NO_CUTOFF, Run, group_runs, plan_compaction
from replaydb.indexes.options import LSMOptions, entries_per_page
from replaydb.indexes.parallel import effective_threads, run_threads, sort_partitioned, split_sorted
from replaydb.indexes.rankcodes import run_of_codes
from replaydb.indexes.reader import (
    FileCache,
    Piece,
    as_array,
    join_pieces,
    read_file_range,
    read_file_seq_pieces,
    row_group_span,
)
from replaydb.indexes.results import CostCounters, CountEstimate, IndexResult
from replaydb.indexes.runfile import (
    RunFileMeta,
    load_run_meta,
    parse_run_file_name,
    read_whole_file,
    write_run_file,
)
from replaydb.indexes.sorting import merge_entries, order_by_seq, sort_entries
from replaydb.indexes.stats import estimate_and_pages, exact_in_file


class LSMIndex:
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

    # ------------------------------------------------------------------ writing
    def _require_writable(self) -> None:
        if not self._writable:
            raise ReadOnlyError(
                f"index {self.path} is open at version {self.version}, not the latest; "
                "it is read-only"
            )

    @property
    def memtable_entries(self) -> int:
        """Entries added since the last flush (not yet visible to reads)."""
        return self._mem_n

    def add(self, keys: Any, seqs: Any, ts: Any) -> int:
        """Buffer entries (vectorized: one radix sort per batch). Returns the entries kept.

        Entries with a null key (or NaN in a float64 index) are not indexed. O(n) per batch.
        """
        self._require_writable()
        ent = normalize_entries(self.key_type, keys, seqs, ts)
        if not len(ent):
            return 0
        self._mem.append(self._sort(ent))
        self._mem_n += len(ent)
        return len(ent)

    def _threads(self, n: int) -> int:
        if n < self.options.parallel_min_entries:
            return 1
        return effective_threads(self.options.threads)

    def _sort(self, ent: Entries) -> Entries:
        threads = self._threads(len(ent))
        if threads > 1 and not ent.is_string:
            return Entries.concat(sort_partitioned(ent, threads, threads), self.key_type)
        return sort_entries(ent)

    def delete_from_seq(self, s0: int) -> None:
        """Delete every entry with seq >= s0: from the memtable now, from committed runs by a
        tombstone that the next ``flush`` commits together with the memtable (one version)."""
        self._require_writable()
        s0 = int(s0)
        self._mem = [m.filter(m.seq < s0) for m in self._mem]
        self._mem = [m for m in self._mem if len(m)]
        self._mem_n = sum(len(m) for m in self._mem)
        self._pending_tomb = s0 if self._pending_tomb is None else min(self._pending_tomb, s0)

    def _next_id(self) -> int:
        return max((r.id_hi for r in self._runs), default=0) + 1

    def _commit(
        self,
        adds: list[dict[str, Any]],
        removes: list[RunFileMeta],
        operation: str,
        commit_metadata: dict[str, Any] | None,
    ) -> int:
        live = [deltalog.LiveFile(m.name, m.size_bytes, m.n) for m in removes]
        deltalog.commit(self._dt, self.key_type, adds, live, operation, commit_metadata)
        self._load_snapshot()
        return self.version

    def flush(self, *, commit_metadata: dict[str, Any] | None = None) -> int:
        """Write the memtable (and a pending tombstone) as one level-0 run in ONE commit.

        Returns the index's version afterwards (unchanged when there was nothing to flush; after
        an automatic compaction when ``options.auto_compact``). ``commit_metadata`` goes into
        the Delta commitInfo (e.g. the stream version the store is writing).
        """
        self._require_writable()
        tomb = self._pending_tomb
        if tomb is not None and not any(
            r.seq_max is not None and r.seq_max >= tomb for r in self._runs
        ):
            tomb = None  # no committed entry is affected
        if self._mem_n == 0 and tomb is None:
            self._mem, self._pending_tomb = [], None
            return self.version
        entries = merge_entries(self._mem, self.key_type)
        rid = self._next_id()
        adds = [a for _, a in self._write_parts(entries, level=0, id_lo=rid, id_hi=rid, tomb=tomb)]
        self._commit(adds, [], "flush", commit_metadata)
        self._mem, self._mem_n, self._pending_tomb = [], 0, None
        if self.options.auto_compact:
            for _ in range(8):
                if self.compact(commit_metadata=commit_metadata) is None:
                    break
        return self.version

    def bulk_add(
        self, keys: Any, seqs: Any, ts: Any, *, commit_metadata: dict[str, Any] | None = None
    ) -> int:
        """Write entries directly as one sorted run (no memtable), in one commit.

        On an empty index the run goes to the level that fits it; otherwise to level 0 (it is
        the newest run). Returns the new version. The memtable must be empty.
        """
        self._require_writable()
        if self._mem_n or self._pending_tomb is not None:
            raise UsageError("bulk_add() with unflushed entries; flush() first")
        ent = self._sort(normalize_entries(self.key_type, keys, seqs, ts))
        if not len(ent):
            return self.version
        level = self.options.fit_level(len(ent)) if not self._runs else 0
        rid = self._next_id()
        adds = [
            add for _, add in self._write_parts(ent, level=level, id_lo=rid, id_hi=rid, tomb=None)
        ]
        self._commit(adds, [], "bulk", commit_metadata)
        if level == 0 and self.options.auto_compact:
            self.compact(commit_metadata=commit_metadata)
        return self.version

    def _write_parts(
        self, ent: Entries, *, level: int, id_lo: int, id_hi: int, tomb: int | None
    ) -> list[tuple[RunFileMeta, dict[str, Any]]]:
        """Write sorted entries as the parts of one run (in threads for big runs)."""
        n = len(ent)
        threads = self._threads(n)
        if self.options.target_file_entries:
            size = self.options.target_file_entries
            parts = [ent.slice(a, min(n, a + size)) for a in range(0, n, size)] or [ent]
        else:
            parts = split_sorted(ent, threads)
        jobs = [
            lambda part=part, chunk=chunk: write_run_file(
                self.path,
                chunk,
                key_type=self.key_type,
                level=level,
                id_lo=id_lo,
                id_hi=id_hi,
                part=part,
                tomb=tomb,
                options=self.options,
            )
            for part, chunk in enumerate(parts)
        ]
        return run_threads(jobs, threads)

    def needs_compaction(self) -> bool:
        return plan_compaction(self._runs, self.options) is not None

    def compact(
        self, *, full: bool = False, commit_metadata: dict[str, Any] | None = None
    ) -> int | None:
        """Merge runs per the level policy (or all runs with ``full``) in ONE commit.

        Applies tombstones to the merged entries and keeps the output's tombstone only while an
        older run still holds an entry it hides. Returns the new version, or None when the
        policy asks for nothing. Cost: reads and rewrites the merged runs, O(n log k).
        """
        self._require_writable()
        plan = plan_compaction(self._runs, self.options, full=full)
        if plan is None:
            return None
        inputs = plan.inputs
        merged_runs = []
        for run in inputs:
            parts = []
            for f in run.files:
                if not f.n:
                    continue
                e = read_whole_file(self.path, f)
                if run.cutoff <= f.seq_max:
                    e = e.filter(e.seq < run.cutoff)
                parts.append(e)
            merged_runs.append(Entries.concat(parts, self.key_type))
        merged = merge_entries(merged_runs, self.key_type)
        last = self._runs.index(inputs[-1])
        older = self._runs[last + 1 :]
        tombs = [r.tomb for r in inputs if r.tomb is not None]
        tomb = min(tombs) if tombs else None
        if tomb is not None and not any(r.seq_max is not None and r.seq_max >= tomb for r in older):
            tomb = None
        adds = []
        if len(merged) or tomb is not None:
            id_lo = min(r.id_lo for r in inputs)
            id_hi = max(r.id_hi for r in inputs)
            adds = [
                a
                for _, a in self._write_parts(
                    merged, level=plan.level, id_lo=id_lo, id_hi=id_hi, tomb=tomb
                )
            ]
        removes = [f for r in inputs for f in r.files]
        return self._commit(adds, removes, "compact", commit_metadata)

    def restore(self, version: int, *, commit_metadata: dict[str, Any] | None = None) -> int:
        """Make the latest state equal to ``version`` by a new commit; returns its version.

        No commit when the current state already is ``version``. The memtable must be empty.
        """
        self._require_writable()
        if self._mem_n or self._pending_tomb is not None:
            raise UsageError("restore() with unflushed entries")
        version = int(version)
        if version < 0 or version > self.version:
            raise UsageError(
                f"cannot restore index {self.path} to version {version} (at {self.version})"
            )
        if version == self.version:
            return self.version
        deltalog.restore(self._dt, version, commit_metadata)
        self._load_snapshot()
        return self.version

    def vacuum(self, keep_from_version: int, *, dry_run: bool = False) -> list[str]:
        """Delete run files no version >= ``keep_from_version`` references (and their rank
        codes); returns their names.

        Removes the inputs of past compactions and files left by crashed writers. Readers pinned
        to versions before ``keep_from_version`` can no longer read afterwards: the store passes
        the oldest index version its manifest still refers to. Must run on the writer (no other
        process may be writing run files). O(versions kept x files).
        """
        self._require_writable()
        keep_from_version = int(keep_from_version)
        if not 0 <= keep_from_version <= self.version:
            raise UsageError(f"keep_from_version {keep_from_version} outside 0..{self.version}")
        needed: set[str] = set()
        for v in range(keep_from_version, self.version + 1):
            needed.update(f.name for f in deltalog.live_files(deltalog.load(self.path, v)))
        doomed = sorted(
            name
            for name in os.listdir(self.path)
            if (parse_run_file_name(name) is not None and name not in needed)
            or ((run := run_of_codes(name)) is not None
                and parse_run_file_name(run) is not None and run not in needed)
        )
        if not dry_run:
            self._files.close()
            for name in doomed:
                os.remove(os.path.join(self.path, name))
        return doomed

    # ------------------------------------------------------------------ reading
    def _result(self, ent: Entries, order: str, before: CostCounters) -> IndexResult:
        self.counters.entries_returned += len(ent)
        cost = self.counters.snapshot() - before
        if ent.is_string:
            return IndexResult(
                ent.key.to_numpy(zero_copy_only=False), ent.seq, ent.t, order, cost, ent.key
            )
        return IndexResult(ent.key, ent.seq, ent.t, order, cost)

    @property
    def entries_per_page(self) -> int:
        """Entries per logical 8 KiB page (341 for numeric keys; see :mod:`.options`)."""
        if self.key_type != "string":
            return entries_per_page(self.key_type)
        n = self.num_physical_entries
        mean = sum(f.key_bytes for r in self._runs for f in r.files) / n if n else 0.0
        return entries_per_page("string", mean)

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
                e = read_file_range(
                    self.path,
                    f,
                    kr.lo,
                    kr.hi,
                    kr.lo_inclusive,
                    kr.hi_inclusive,
                    self._files,
                    self.counters,
                    epp,
                )
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
                    s, t = read_file_seq_pieces(self.path, f, kr.lo, kr.hi, kr.lo_inclusive,
                                                kr.hi_inclusive, self._files, self.counters,
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
                a, b = row_group_span(f, kr.lo, kr.hi, kr.lo_inclusive, kr.hi_inclusive)
                plan["row_groups_read"] += b - a
                plan["entries_read"] += int(f.rg_rows[a:b].sum())
                plan["pages_read"] += f.pages_of(a, b, epp)
                plan["bytes_read"] += int(f.rg_bytes[a:b].sum())
        return plan

    # ------------------------------------------------------------------ statistics
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


def _py(v: Any) -> Any:
    """NumPy scalars as plain Python values (JSON-friendly)."""
    return v.item() if isinstance(v, np.generic) else v
