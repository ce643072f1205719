"""The index's Delta table: creation, pinned snapshots, atomic commits, restore.

Every change of an index is one Delta commit made with delta-rs (``deltalake``) from run files
written beforehand: ``create_table_with_add_actions`` creates the table (version 0, no files) and
``DeltaTable.create_write_transaction`` commits AddActions and RemoveActions together (a flush:
one add; a compaction: removes of its inputs plus adds of its output). A crash before the commit
leaves only unreferenced files (never read); after it, the new version is complete.

The table description holds ``{"format": "replaydb-lsm-index", "key_type": ..., "options":
{...}}`` (delta-rs rejects unknown table properties, so the description carries them).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, Schema
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    RemoveAction,
    create_table_with_add_actions,
)

from replaydb.errors import CorruptionError, StoreError
from replaydb.indexes.entries import arrow_schema
from replaydb.indexes.options import LSMOptions
from replaydb.store.mirror import mirror_of
from replaydb.store.remotewrite import commit_remote

TABLE_FORMAT = "replaydb-lsm-index"


@dataclass(frozen=True)
class LiveFile:
    """A data file of a pinned version, as the Delta log lists it."""

    name: str
    size: int
    num_records: int | None


def is_index_table(path: str | os.PathLike[str]) -> bool:
    return os.path.isdir(os.path.join(path, "_delta_log")) and DeltaTable.is_deltatable(str(path))


def create_table(
    path: str | os.PathLike[str],
    key_type: str,
    options: LSMOptions,
    adds: list[dict[str, Any]] | None = None,
    commit_metadata: dict[str, Any] | None = None,
) -> None:
    """Create the index table at ``path`` (version 0), optionally with initial run files."""
    Path(path).mkdir(parents=True, exist_ok=True)
    description = json.dumps(
        {"format": TABLE_FORMAT, "key_type": key_type, "options": json.loads(options.to_json())}
    )
    remote = mirror_of(path)

    def create(uri: str, storage_options: dict[str, str] | None = None) -> None:
        create_table_with_add_actions(
            uri,
            Schema.from_arrow(arrow_schema(key_type)),
            [to_add_action(a) for a in adds or []],
            mode="error",
            name="replaydb-lsm-index",
            description=description,
            commit_properties=_props("create", commit_metadata, remote is not None),
            storage_options=storage_options,
        )

    if remote is not None:
        commit_remote(*remote, create)
    else:
        create(str(path))


def load(path: str | os.PathLike[str], version: int | None = None) -> DeltaTable:
    try:
        if version is None:
            return DeltaTable(str(path))
        return DeltaTable(str(path), version=version)
    except Exception as exc:  # delta-rs raises several internal error types
        raise StoreError(f"cannot open index table {path} (version {version}): {exc}") from None


def describe(dt: DeltaTable) -> tuple[str, LSMOptions]:
    """Key type and stored options of an index table."""
    desc = dt.metadata().description or ""
    try:
        d = json.loads(desc)
    except json.JSONDecodeError:
        d = {}
    if not isinstance(d, dict) or d.get("format") != TABLE_FORMAT:
        raise CorruptionError(f"{dt.table_uri} is a Delta table but not a replaydb LSM index")
    return str(d["key_type"]), LSMOptions.from_json(json.dumps(d.get("options", {})))


def live_files(dt: DeltaTable) -> list[LiveFile]:
    """Data files of the table's loaded version."""
    t = pa.table(dt.get_add_actions(flatten=True))
    names = t.column("path").to_pylist()
    sizes = t.column("size_bytes").to_pylist()
    nrec = (
        t.column("num_records").to_pylist()
        if "num_records" in t.column_names
        else [None] * len(names)
    )
    return [
        LiveFile(n, int(s), None if r is None else int(r)) for n, s, r in zip(names, sizes, nrec)
    ]


def to_add_action(a: dict[str, Any]) -> AddAction:
    return AddAction(
        a["path"],
        int(a["size"]),
        dict(a.get("partition_values") or {}),
        int(a["modification_time"]),
        bool(a.get("data_change", True)),
        a["stats"],
    )


def _props(operation: str, commit_metadata: dict[str, Any] | None,
           once: bool = False) -> CommitProperties:
    """The commit's properties; ``once``: fail instead of retrying on a conflict (a table on
    an object store, where only the conditional commit orders writers)."""
    md = {"replaydb.operation": operation}
    if commit_metadata:
        md.update({str(k): v for k, v in commit_metadata.items()})
    return CommitProperties(custom_metadata=md, max_commit_retries=0 if once else None)


def commit(
    dt: DeltaTable,
    key_type: str,
    adds: list[dict[str, Any]],
    removes: list[LiveFile],
    operation: str,
    commit_metadata: dict[str, Any] | None = None,
) -> int:
    """Commit adds and removes as ONE Delta version on top of ``dt``'s version; returns it.

    Refuses (StoreError) when the table moved past ``dt``'s version (another writer).
    """
    head = load(dt.table_uri).version()
    if head != dt.version():
        raise StoreError(
            f"index {dt.table_uri} moved from version {dt.version()} to {head} under this writer",
            hint="only one writer per index (the store's writer lock); reopen and retry",
        )
    now = int(time.time() * 1000)
    actions: list[Any] = [to_add_action(a) for a in adds]
    actions += [RemoveAction(f.name, True, now, f.size, {}) for f in removes]
    remote = mirror_of(dt.table_uri)
    if remote is not None:
        def write(uri: str, storage_options: dict[str, str]) -> None:
            DeltaTable(uri, version=dt.version(), storage_options=storage_options
                       ).create_write_transaction(
                actions, mode="append", schema=arrow_schema(key_type),
                commit_properties=_props(operation, commit_metadata, True))

        commit_remote(*remote, write)
    else:
        dt.create_write_transaction(
            actions,
            mode="append",
            schema=arrow_schema(key_type),
            commit_properties=_props(operation, commit_metadata),
        )
    dt.update_incremental()
    return dt.version()


def restore(dt: DeltaTable, version: int, commit_metadata: dict[str, Any] | None = None) -> int:
    """New commit whose files equal those of ``version``; returns the new version."""
    remote = mirror_of(dt.table_uri)
    if remote is not None:
        commit_remote(*remote, lambda uri, storage_options: DeltaTable(
            uri, version=dt.version(), storage_options=storage_options).restore(
                version, commit_properties=_props("restore", commit_metadata, True)))
    else:
        dt.restore(version, commit_properties=_props("restore", commit_metadata))
    dt.update_incremental()
    return dt.version()


def commit_info(dt: DeltaTable, version: int | None = None) -> dict[str, Any]:
    """The commitInfo of ``version`` (default: the loaded one), with our custom metadata."""
    v = dt.version() if version is None else version
    for h in dt.history(limit=max(1, dt.version() - v + 1)):
        if int(h.get("version", -1)) == v:
            return h
    return {}
