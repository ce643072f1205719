"""The write path of a stream: append batches, commit atomically, recover after crashes.

:class:`StreamWriter` holds the stream's writer lock (see :mod:`replaydb.store.lock`). On entry it
*recovers*: a side table (index, quarantine) whose Delta version is newer than the manifest pins
was committed by a writer that died before its events commit, so it is rolled back to the pinned
version. Then every change follows the commit protocol of :mod:`replaydb.store.manifest`: data
files, tree segment and side-table commits first, the events commit (with the manifest) last.
A reader never sees half a batch.

Append semantics (``StreamWriter.append``):

* Input rows are normalized and validated (:mod:`replaydb.store.normalize`); bad rows raise a
  :class:`~replaydb.errors.DataError` naming the row and column (``bad="error"``, the default) or
  go to the stream's quarantine table (``bad="quarantine"``).
* Lateness: a row is *late* if its time is below the newest time seen before it (stored events
  and earlier rows of the batch). Late rows within the stream's ``lateness`` bound are accepted
  and stored in (t, arrival) order - ties keep arrival order, so earlier-stored events come first.
  Rows later than the bound raise :class:`~replaydb.errors.LateEventError` (``late="error"``) or
  are quarantined (``late="quarantine"``).
* ``seq`` is the absolute position in (t, arrival) order. A late event therefore shifts the seq
  of the stored events after it: the store rewrites the affected suffix (from the start of the data
  file holding the first displaced event; bounded by the lateness bound plus one file) and tells
  the side tables ``rewrite_from`` so indexes stay exact.
* Small appends: if the last data file holds fewer than ``4 * B`` events it is rewritten together
  with the new events, so files (and leaves) stay well filled.
* ``batch_id``: an append with a batch id already in the Delta log (an application transaction
  id) is a no-op - retries are exactly-once.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from replaydb.batches import as_batches
from replaydb.errors import LateEventError, ReadOnlyError, UsageError
from replaydb.store import deltaio
from replaydb.store.failpoints import failpoint
from replaydb.store.lock import WriterLock
from replaydb.store.manifest import FileInfo, Manifest, SideTableRef
from replaydb.store.normalize import QUARANTINE_SCHEMA, first_error, normalize
from replaydb.store.quarantine import Quarantine
from replaydb.store.sides import writer_side
from replaydb.store.snapshot import StreamSnapshot, values_of
from replaydb.store.tree import summarize_leaves
from replaydb.store.treeio import write_segment

if TYPE_CHECKING:
    from replaydb.store.store import Store

SMALL_FILE_LEAVES = 4
MAX_FILE_LEAVES = 1024


@dataclass
class AppendResult:
    """What an append did."""

    stream: str
    version: int
    events: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    t_min: int | None = None
    t_max: int | None = None
    late: int = 0
    rewritten: int = 0
    quarantined: int = 0
    files_written: int = 0
    skipped: bool = False
    batch_id: str | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.update(d.pop("extra"))
        return d


@dataclass
class PreparedFile:
    """A data file written but not yet committed, with its leaf entries (file_id unset)."""

    info: FileInfo
    leaves: dict[str, np.ndarray]
    stats: str


def _to_table(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    return pa.Table.from_batches(as_batches(data))


class StreamWriter:
    """Exclusive writer of one stream (a context manager; see the module docstring)."""

    def __init__(self, store: Store, name: str, timeout: float = 30.0) -> None:
        if store.read_only:
            raise ReadOnlyError(f"store {store.uri} is open read-only; cannot write {name!r}")
        self.store = store
        self.name = name
        self.dir: Path = store.stream_dir(name)
        self.events_dir = self.dir / "events"
        self._lock = WriterLock(self.dir / "_writer.lock", timeout)
        self.snap: StreamSnapshot | None = None

    # ------------------------------------------------------------------ context
    def __enter__(self) -> StreamWriter:
        self._lock.__enter__()
        try:
            self.snap = self.store._writer_snapshot(self.name)
            self.recover()
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._lock.__exit__(exc_type, exc, tb)

    @property
    def manifest(self) -> Manifest:
        assert self.snap is not None
        return self.snap.manifest

    def recover(self) -> list[str]:
        """Roll back side tables committed past the manifest's pins (a writer died before its
        events commit). Returns what was done."""
        done = []
        for ref in self.manifest.side:
            side = writer_side(self.dir, ref)
            latest = side.latest_version()
            if latest > ref.version:
                side.restore(ref.version)
                done.append(f"{ref.name}: rolled back from version {latest} to {ref.version}")
        # A side table no manifest pins was created by a writer that died before its events
        # commit (manifests never drop a side table, so no version can reference it): remove
        # it, or the next commit would pin it together with the dead writer's rows.
        pinned = {ref.path for ref in self.manifest.side}
        for d in [self.dir / "quarantine", *sorted((self.dir / "indexes").glob("*"))]:
            rel = d.relative_to(self.dir).as_posix()
            if d.is_dir() and rel not in pinned:
                shutil.rmtree(d)
                done.append(f"{rel}: removed (never committed)")
        return done

    # ------------------------------------------------------------------ append
    def append(
        self,
        data: Any,
        *,
        batch_id: str | None = None,
        late: str = "error",
        bad: str = "error",
        time_column: str | None = None,
        source_unit: str | None = None,
        time_format: str | None = None,
        extra: str = "error",
        duplicates: str = "keep",
        source: str | None = None,
    ) -> AppendResult:
        """Append events (see the module docstring for the semantics)."""
        if late not in ("error", "quarantine") or bad not in ("error", "quarantine"):
            raise UsageError("late and bad must be 'error' or 'quarantine'")
        start = time.perf_counter()
        snap = self.snap
        assert snap is not None
        if batch_id is not None and deltaio.applied(self.events_dir, batch_id):
            return AppendResult(self.name, snap.version, skipped=True, batch_id=batch_id,
                                seconds=time.perf_counter() - start)
        schema = snap.schema
        table = _to_table(data)
        norm = normalize(table, schema, time_column=time_column, source_unit=source_unit,
                         time_format=time_format, extra=extra, duplicates=duplicates,
                         batch_id=batch_id, source=source)
        if bad == "error":
            err = first_error(norm)
            if err is not None:
                raise err
        good, rows = norm.good, norm.good_rows
        quarantine = [norm.bad] if norm.n_bad else []

        # ---- lateness
        t = good.column("t").to_numpy()
        n_stored = snap.n_events
        stored_max = snap.t_range[1] if n_stored else None
        n_late = 0
        if len(t):
            prev = np.iinfo(np.int64).min if stored_max is None else stored_max
            cm = np.maximum.accumulate(t)
            before = np.empty_like(t)
            before[0] = prev
            before[1:] = np.maximum(cm[:-1], prev)
            late_mask = t < before
            n_late = int(late_mask.sum())
            if n_late:
                too_late = late_mask & (t < before - schema.lateness)
                if too_late.any():
                    k = int(np.argmax(too_late))
                    if late == "error":
                        raise LateEventError(
                            f"t={int(t[k])} is {int(before[k] - t[k])} time units older than the "
                            f"newest event (lateness bound {schema.lateness})",
                            row=int(rows[k]), column=schema.time_column,
                            hint="raise the stream's lateness bound, or append with "
                                 "late='quarantine'")
                    quarantine.append(_late_rows(table, rows[too_late], batch_id, source,
                                                 schema.time_column))
                    keep = ~too_late
                    good = good.filter(pa.array(keep))
                    rows = rows[keep]
                    late_mask = late_mask[keep]
                    t = t[keep]
                    n_late = int(late_mask.sum())
                if late_mask.any():
                    order = np.argsort(t, kind="stable")
                    good = good.take(pa.array(order))
                    t = t[order]
        n_new = good.num_rows
        if n_new == 0 and not quarantine:
            return AppendResult(self.name, snap.version, batch_id=batch_id,
                                seconds=time.perf_counter() - start)

        # ---- where the rewrite starts
        B = schema.leaf_capacity
        f0 = n_stored
        files_sorted = sorted(snap.files.values(), key=lambda f: f.seq_min)
        needs_sort = bool(n_new and n_stored and int(t[0]) < stored_max)
        if needs_sort:
            leaf = int(np.searchsorted(snap.tree.leaves.col("t_max"), int(t[0]), side="right"))
            fid = int(snap.tree.leaves.col("file_id")[leaf])
            f0 = snap.files[fid].seq_min
        elif n_new and files_sorted and files_sorted[-1].rows < SMALL_FILE_LEAVES * B:
            f0 = files_sorted[-1].seq_min
        if f0 < n_stored:
            tail = snap.read_seq(f0, n_stored).drop(["seq"])
            merged = pa.concat_tables([tail, good.select(tail.column_names).cast(tail.schema)])
            if needs_sort:
                mt = merged.column("t").to_numpy()
                merged = merged.take(pa.array(np.argsort(mt, kind="stable")))
        else:
            merged = good
        n_rewritten = n_stored - f0
        removed = [f for f in files_sorted if f.seq_min >= f0]

        # ---- files, leaves, tree
        prepared = self.write_files(merged, f0) if merged.num_rows else []
        new_files, leaves = self.assign_file_ids(prepared)
        result = self.commit(
            f0, new_files, leaves, [f.id for f in removed], prepared_stats=prepared,
            events=_with_seq(merged, f0) if merged.num_rows else None,
            rewrite_from=f0 if f0 < n_stored else None,
            quarantine=pa.concat_tables(quarantine) if quarantine else None,
            batch_id=batch_id, operation="append",
        )
        result.events = n_new
        result.late = n_late
        result.rewritten = n_rewritten
        if n_new:
            result.t_min = int(t.min())
            result.t_max = int(t.max())
            result.first_seq = f0 if f0 < n_stored else n_stored
            result.last_seq = n_stored + n_new - 1
        result.seconds = time.perf_counter() - start
        return result

    # ------------------------------------------------------------------ building blocks
    def write_files(self, events: pa.Table, seq0: int) -> list[PreparedFile]:
        """Write ``events`` (columns ``t`` + attributes, in order, first seq ``seq0``) as data
        files of at most ``MAX_FILE_LEAVES`` leaves; not yet committed."""
        schema = self.snap.schema if self.snap else None
        assert schema is not None
        return write_event_files(self.events_dir, schema, events, seq0, self.snap.specs)

    def assign_file_ids(self, prepared: list[PreparedFile]) -> tuple[list[FileInfo], dict[str, np.ndarray]]:
        """Give prepared files their ids; returns the infos and the concatenated leaf entries."""
        next_id = self.manifest.next_file_id
        infos, parts = [], []
        for p in prepared:
            info = replace(p.info, id=next_id)
            infos.append(info)
            lv = dict(p.leaves)
            lv["file_id"] = np.full(len(lv["count"]), next_id, dtype=np.int32)
            parts.append(lv)
            next_id += 1
        if not parts:
            return infos, {}
        return infos, {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def commit(
        self,
        first_seq: int,
        new_files: list[FileInfo],
        leaves: dict[str, np.ndarray],
        removed_ids: list[int],
        *,
        prepared_stats: list[PreparedFile] | None = None,
        stats: list[str] | None = None,
        events: pa.Table | None = None,
        rewrite_from: int | None = None,
        quarantine: pa.Table | None = None,
        batch_id: str | None = None,
        operation: str = "append",
        side_versions: dict[str, int] | None = None,
        new_sides: list[SideTableRef] | None = None,
    ) -> AppendResult:
        """Commit new files/leaves replacing everything from ``first_seq`` on.

        Side tables are applied first (``events`` with final seqs), then the tree segment is
        written, then the events commit makes all of it visible. ``side_versions`` lets a caller
        that already committed side tables itself (the Spark job) pass their new versions, and
        ``new_sides`` adds side tables created by this commit.
        """
        snap = self.snap
        assert snap is not None
        manifest = snap.manifest
        for ref in new_sides or ():
            manifest = manifest.with_side(ref)
        tree = snap.tree.copy()
        files = dict(snap.files)
        leaf0 = tree.n_leaves if first_seq >= snap.n_events else tree.leaf_of_seq(first_seq)
        if leaf0 < tree.n_leaves and int(tree.leaves.col("seq_min")[leaf0]) != first_seq:
            raise AssertionError("rewrite must start at a leaf boundary")
        if leaves:
            first_changed = tree.replace_leaves_from(leaf0, leaves)
        else:
            first_changed = tree.truncate_leaves(leaf0)
        for fid in removed_ids:
            files.pop(fid, None)
        for f in new_files:
            files[f.id] = f

        failpoint("append.files_written")
        # side tables first (indexes, quarantine)
        side_versions = dict(side_versions or {})
        for ref in manifest.side:
            if ref.name in side_versions or ref.kind == "quarantine":
                continue
            if events is not None and events.num_rows:
                v = writer_side(self.dir, ref).apply(events, rewrite_from, batch_id=batch_id)
                if v is not None:
                    side_versions[ref.name] = v
                failpoint("append.side_applied")
        n_quarantined = 0
        if quarantine is not None and quarantine.num_rows:
            ref = manifest.side_table("quarantine") or Quarantine.ref(-1)
            side_versions["quarantine"] = Quarantine(self.dir, ref, pinned=False).add(quarantine)
            n_quarantined = quarantine.num_rows
            if manifest.side_table("quarantine") is None:
                manifest = manifest.with_side(Quarantine.ref(side_versions["quarantine"]))
        new_side = tuple(replace(r, version=side_versions.get(r.name, r.version))
                         for r in manifest.side)

        failpoint("append.sides_committed")
        seg, chain = write_segment(self.dir, tree, first_changed, files, new_files, removed_ids,
                                   manifest.tree_head, manifest.chain)
        failpoint("append.segment_written")
        tr = tree.t_range
        gap_min, gap_max = stream_gaps(files)
        new_manifest = replace(
            manifest,
            n_events=tree.n_events,
            t_min=tr[0] if tr else None,
            t_max=tr[1] if tr else None,
            tree_head=seg,
            chain=chain,
            next_file_id=max([manifest.next_file_id, *[f.id + 1 for f in new_files]]),
            side=new_side,
            batch_id=batch_id,
            operation=operation,
            gap_min=gap_min,
            gap_max=gap_max,
        )
        if stats is None:
            stats = [p.stats for p in (prepared_stats or [])]
        adds = [deltaio.add_action(self.events_dir, f.path, f.size, s)
                for f, s in zip(new_files, stats)]
        removes = [deltaio.remove_action(snap.files[fid].path, snap.files[fid].size)
                   for fid in removed_ids]
        version = deltaio.commit(self.events_dir, snap.schema.arrow_schema, adds, removes,
                                 new_manifest, app_id=batch_id)
        failpoint("append.committed")
        self.snap = StreamSnapshot(self.store, self.name, version, new_manifest, version,
                                   tree=tree, files=files)
        self.store._remember_writer_snapshot(self.snap)
        return AppendResult(self.name, version, quarantined=n_quarantined,
                            files_written=len(new_files), batch_id=batch_id)

    def set_manifest(self, manifest: Manifest, operation: str) -> int:
        """Commit a manifest-only change (new side table, new pins); no data files move."""
        snap = self.snap
        assert snap is not None
        m = replace(manifest, operation=operation, batch_id=None)
        version = deltaio.commit(self.events_dir, snap.schema.arrow_schema, [], [], m)
        self.snap = StreamSnapshot(self.store, self.name, version, m, version,
                                   tree=snap.tree, files=snap.files)
        self.store._remember_writer_snapshot(self.snap)
        return version

    def add_side(self, ref: SideTableRef) -> int:
        """Pin a newly built side table (e.g. an index back-filled for existing events)."""
        return self.set_manifest(self.manifest.with_side(ref), f"add {ref.name}")


def write_event_files(events_dir: Path, schema: Any, events: pa.Table, seq0: int,
                      specs: list[Any]) -> list[PreparedFile]:
    """Write events (``t`` + attributes, sorted, first seq ``seq0``) as data files with one row
    group per leaf; returns each file's info (id unset) and leaf entries. Usable on Spark
    executors: it only touches files under ``events_dir``."""
    B = schema.leaf_capacity
    max_rows = B * MAX_FILE_LEAVES
    arrow_schema = schema.arrow_schema
    out: list[PreparedFile] = []
    n = events.num_rows
    events_dir.mkdir(parents=True, exist_ok=True)
    for a in range(0, n, max_rows):
        b = min(n, a + max_rows)
        part = _with_seq(events.slice(a, b - a), seq0 + a).cast(arrow_schema)
        name = deltaio.new_file_name(seq0 + a)
        size = deltaio.write_parquet(events_dir / name, part, B)
        t = part.column("t").to_numpy()
        starts = np.arange(0, b - a, B, dtype=np.int64)
        vals = {s.name: values_of(part.column(s.name), s) for s in specs}
        leaves = summarize_leaves(t, seq0 + a, vals, specs, starts)
        leaves["rg"] = np.arange(len(starts), dtype=np.int32)
        leaves["file_id"] = np.zeros(len(starts), dtype=np.int32)
        numeric = {}
        for s in specs:
            nn = int(leaves[f"{s.name}.n"].sum())
            mn = leaves[f"{s.name}.min"].min().item() if nn else None
            mx = leaves[f"{s.name}.max"].max().item() if nn else None
            if s.kind == "bool" and nn:  # Delta statistics of bool columns are booleans
                mn, mx = bool(mn), bool(mx)
            numeric[s.name] = (mn, mx, part.column(s.name).null_count)
        stats = deltaio.file_stats(part, numeric)
        gaps = np.diff(t)
        info = FileInfo(id=-1, path=name, rows=b - a, size=size, seq_min=seq0 + a,
                        t_min=int(t[0]), t_max=int(t[-1]), row_groups=len(starts),
                        gap_min=int(gaps.min()) if len(gaps) else None,
                        gap_max=int(gaps.max()) if len(gaps) else None)
        out.append(PreparedFile(info, leaves, stats))
    return out


def stream_gaps(files: dict[int, FileInfo]) -> tuple[int | None, int | None]:
    """Smallest and largest gap between consecutive events of the stream: inside files (from
    their recorded gaps) and across consecutive files. O(files)."""
    fs = sorted(files.values(), key=lambda f: f.seq_min)
    gaps: list[int] = [g for f in fs for g in (f.gap_min, f.gap_max) if g is not None]
    gaps += [b.t_min - a.t_max for a, b in zip(fs, fs[1:])]
    return (min(gaps), max(gaps)) if gaps else (None, None)


def _with_seq(events: pa.Table, seq0: int) -> pa.Table:
    seq = pa.array(np.arange(seq0, seq0 + events.num_rows, dtype=np.int64))
    cols = [c for c in events.column_names if c not in ("t", "seq")]
    return pa.table([events.column("t"), seq, *[events.column(c) for c in cols]],
                    names=["t", "seq", *cols])


def _late_rows(src: pa.Table, rows: np.ndarray, batch_id: str | None, source: str | None,
               column: str) -> pa.Table:
    import json

    raw = [json.dumps(r, default=str, sort_keys=True) for r in src.take(pa.array(rows)).to_pylist()]
    n = len(rows)
    return pa.table({
        "batch_id": pa.array([batch_id] * n, pa.string()),
        "source": pa.array([source] * n, pa.string()),
        "row": pa.array(rows, pa.int64()),
        "column": pa.array([column] * n, pa.string()),
        "reason": pa.array(["late event"] * n, pa.string()),
        "raw": pa.array(raw, pa.string()),
    }, schema=QUARANTINE_SCHEMA)
