"""The quarantine table of a stream: rows set aside by ingestion, with the reason.

A Delta table at ``<stream>/quarantine`` with columns ``batch_id, source, row, column, reason,
raw`` (the offending row as JSON) and ``quarantined_at`` (UTC, ms). It is a side table of the
stream (see :mod:`replaydb.store.sides`): written before the events commit, pinned by the
manifest, rolled back if the events commit never happened.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake

from replaydb.store import sides
from replaydb.store.manifest import SideTableRef
from replaydb.store.mirror import mirror_of
from replaydb.store.normalize import QUARANTINE_SCHEMA
from replaydb.store.remotewrite import commit_remote

NAME = "quarantine"
PATH = "quarantine"
SCHEMA = QUARANTINE_SCHEMA.append(pa.field("quarantined_at", pa.timestamp("ms", tz="UTC")))


class Quarantine:
    """Reader/writer of a stream's quarantine table."""

    def __init__(self, stream_dir: Path, ref: SideTableRef | None, pinned: bool) -> None:
        self.path = stream_dir / (ref.path if ref else PATH)
        self.version = ref.version if (ref and pinned) else None

    @staticmethod
    def ref(version: int) -> SideTableRef:
        return SideTableRef(NAME, "quarantine", PATH, version)

    def latest_version(self) -> int:
        if not (self.path / "_delta_log").is_dir():
            return -1
        return DeltaTable(str(self.path)).version()

    def add(self, rows: pa.Table) -> int:
        """Append quarantine records; returns the new version."""
        now = pa.array([int(time.time() * 1000)] * rows.num_rows, pa.timestamp("ms", tz="UTC"))
        tbl = rows.select(QUARANTINE_SCHEMA.names).append_column("quarantined_at", now)
        remote = mirror_of(self.path)
        if remote is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            commit_remote(*remote, lambda uri, options: write_deltalake(
                uri, tbl.cast(SCHEMA), mode="append", storage_options=options,
                commit_properties=CommitProperties(max_commit_retries=0)))
        else:
            write_deltalake(str(self.path), tbl.cast(SCHEMA), mode="append")
        return DeltaTable(str(self.path)).version()

    def apply(self, events: pa.Table, rewrite_from: int | None, **_: object) -> int | None:
        return None  # quarantine rows are added explicitly with add()

    def restore(self, version: int) -> None:
        if self.latest_version() <= version:
            return
        remote = mirror_of(self.path)
        if remote is not None:
            commit_remote(*remote, lambda uri, options: DeltaTable(
                uri, storage_options=options).restore(
                    version, commit_properties=CommitProperties(max_commit_retries=0)))
        else:
            DeltaTable(str(self.path)).restore(version)

    def read(self) -> pa.Table:
        """Quarantined rows at the pinned version (all of them at the latest otherwise)."""
        if not (self.path / "_delta_log").is_dir():
            return SCHEMA.empty_table()
        dt = DeltaTable(str(self.path), version=self.version)
        return pa.table(dt.to_pyarrow_table()).sort_by([("quarantined_at", "ascending"),
                                                        ("row", "ascending")])

    def check(self, snapshot: object, deep: bool = True) -> list[str]:
        try:
            self.read()
        except Exception as exc:  # any failure to read is a finding, not a crash
            return [f"quarantine table unreadable: {exc}"]
        return []


sides.register(
    "quarantine",
    reader=lambda d, ref: Quarantine(d, ref, pinned=True),
    writer=lambda d, ref: Quarantine(d, ref, pinned=False),
)
