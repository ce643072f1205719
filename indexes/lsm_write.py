"""The write path of an :class:`~replaydb.indexes.lsm.LSMIndex`: memtable, flush, bulk runs,
compaction, restore and vacuum.

``add`` sorts each batch by (key, seq) into the memtable, a list of sorted arrays;
``delete_from_seq(s0)`` drops memtable entries with seq >= s0 and records a seq-range tombstone;
``flush`` merges the memtable into one immutable sorted run file on level 0 carrying the
tombstone, and commits it (one Delta version); ``compact`` merges runs per the level policy
(:mod:`replaydb.indexes.levels`) in one commit (removes of the inputs + adds of the output),
applying tombstones and dropping them once no older run needs them. Every write needs the index
object to be at the table's latest version.
"""

from __future__ import annotations

import os
from typing import Any

from replaydb.errors import ReadOnlyError, UsageError
from replaydb.indexes import deltalog
from replaydb.indexes.entries import Entries, normalize_entries
from replaydb.indexes.levels import Run, plan_compaction
from replaydb.indexes.options import LSMOptions
from replaydb.indexes.parallel import effective_threads, run_threads, sort_partitioned, split_sorted
from replaydb.indexes.rankcodes import run_of_codes
from replaydb.indexes.reader import FileCache
from replaydb.indexes.runfile import (
    RunFileMeta,
    parse_run_file_name,
    read_whole_file,
    write_run_file,
)
from replaydb.indexes.sorting import merge_entries, sort_entries


class LSMWrites:
    """The write methods of :class:`~replaydb.indexes.lsm.LSMIndex` (which holds the state
    named below and reloads its runs after a commit, ``_load_snapshot``)."""

    path: str
    key_type: str
    options: LSMOptions
    _dt: Any
    _writable: bool
    _files: FileCache
    _mem: list[Entries]
    _mem_n: int
    _pending_tomb: int | None
    _runs: list[Run]

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
