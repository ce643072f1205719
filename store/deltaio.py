"""Delta Lake I/O for the events table, through delta-rs (``deltalake``).

replaydb writes the Parquet data files itself (one row group per TAB+-tree leaf) and commits them
with their statistics in one Delta transaction, so the events table is a standard Delta table that
Spark, DuckDB, Polars and delta-rs read. Each commit carries the stream manifest in its
``commitInfo`` (see :mod:`replaydb.store.manifest`) and, for idempotent appends, an application
transaction id (``txn`` action) recorded in the Delta log itself.

Manifests of past versions are read straight from the log's JSON commit files (a documented part
of the Delta protocol), so opening any version costs one small file read.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Schema, Transaction
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

from replaydb.errors import CorruptionError, StoreError
from replaydb.store.manifest import MANIFEST_KEY, Manifest
from replaydb.store.mirror import mirror_of
from replaydb.store.remotewrite import commit_remote

APP_PREFIX = "replaydb:"
DEFAULT_COMPRESSION = "snappy"


LOG_DIR = "_delta_log"
"""The name of a Delta table's log directory."""


def log_dir(table: Path) -> Path:
    return table / LOG_DIR


_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


_LATEST: dict[str, int] = {}
"""Log directory -> the latest version :func:`latest_version` last saw there."""


def latest_version(table: Path) -> int:
    """Latest committed version of a Delta table (-1 if there is no table).

    Read from the log directory's listing: by the Delta protocol version ``v`` is committed
    exactly when ``_delta_log/<v as 20 digits>.json`` exists, and the newest commit file is never
    removed by checkpoints or log clean-up (only older ones are), so the largest such name is the
    latest version. Checkpoints, ``_last_checkpoint``, compacted-log and temporary files do not
    match the name. This is one directory listing per query planned, where opening the table
    through delta-rs reads and replays its log; a log without any commit file falls back to
    delta-rs (which reports what is wrong with it). O(log files); O(1) stats when the
    version it last saw in that directory is still there (Delta log clean-up removes commit
    files oldest first, so the versions from it on are consecutive: the latest is the last
    of them)."""
    key = os.path.join(table, LOG_DIR)  # a str, not log_dir's Path: every planned query asks
    known = _LATEST.get(key)
    if known is not None:
        # commit files are consecutive and clean-up removes the oldest first, so while the
        # last version seen is still there, the latest is the last of the run after it
        # (a stat or two instead of listing the log)
        if os.path.exists(os.path.join(key, f"{known:020d}.json")):
            v = known
            while os.path.exists(os.path.join(key, f"{v + 1:020d}.json")):
                v += 1
            _LATEST[key] = v
            return v
        del _LATEST[key]
    d = Path(key)
    if not d.is_dir():
        return -1
    best = -1
    with os.scandir(d) as it:
        for e in it:
            m = _COMMIT_FILE.match(e.name)
            if m is not None:
                best = max(best, int(m.group(1)))
    if best >= 0:
        if len(_LATEST) >= 4096:
            _LATEST.clear()
        _LATEST[key] = best
        return best
    try:
        return DeltaTable(str(table)).version()
    except Exception as exc:  # deltalake raises its own TableNotFoundError variants
        raise StoreError(f"cannot open Delta table {table.name}: {exc}") from exc


def commit_info(table: Path, version: int) -> dict[str, Any]:
    """The ``commitInfo`` action of one commit (empty dict if the commit has none)."""
    f = log_dir(table) / f"{version:020d}.json"
    if not f.exists():  # a store on an object store mirrors old commits when they are read
        remote = mirror_of(f)
        if remote is not None:
            remote[0].fetch(remote[1])
    try:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line.startswith('{"commitInfo"'):
                    return json.loads(line)["commitInfo"]
                if '"commitInfo"' in line:
                    obj = json.loads(line)
                    if "commitInfo" in obj:
                        return obj["commitInfo"]
    except FileNotFoundError:
        raise StoreError(f"Delta log entry {f.name} is missing (version {version})") from None
    return {}


def read_manifest(table: Path, version: int) -> tuple[Manifest, int]:
    """Manifest valid at ``version``: the one of the newest commit <= version that has one.

    Returns ``(manifest, manifest_version)``; a commit without a manifest (a foreign writer, e.g.
    an OPTIMIZE by another engine) does not change what replaydb sees, and ``replaydb check``
    reports it.
    """
    v = version
    while v >= 0:
        info = commit_info(table, v)
        raw = info.get(MANIFEST_KEY)
        if raw is not None:
            return Manifest.loads(raw), v
        v -= 1
    raise CorruptionError(f"no replaydb manifest in the Delta log of {table}")


def new_file_name(seq_min: int) -> str:
    return f"part-{seq_min:015d}-{uuid.uuid4().hex[:12]}.parquet"


def column_layout(schema: pa.Schema, compression: str = DEFAULT_COMPRESSION,
                  table: pa.Table | None = None, group_rows: int = 0
                  ) -> tuple[dict[str, str], dict[str, str]]:
    """``(encodings, codecs)``: the Parquet encoding and codec of each column of a data file.

    Integer columns (``t``, ``seq`` and every attribute stored as a Parquet INT32 or INT64:
    integers, timestamps, dates, times, durations) are DELTA_BINARY_PACKED and uncompressed:
    a leaf's ``seq`` is a constant step, its ``t`` small gaps, and an attribute's consecutive
    values differ by what its values spread over, which delta packing stores in that many
    bits per value and decodes without a decompressor. Every other column is PLAIN (strings
    dictionary-encoded) under ``compression``, except a floating-point column of ``table``
    (the file's rows, when given, in row groups of ``group_rows``) that the codec does not
    at least halve (:func:`_halved_by`): that one is stored uncompressed, so a read copies
    its values where they lie instead of decompressing each page up to them.

    Decision: with every column snappy-compressed PLAIN, decompressing the integer columns
    (which snappy only halves or thirds) dominates a replay's read; delta-packed they are
    smaller and read without a decompressor. Floats are not delta-packable; where snappy
    saves less than half their bytes, decompressing them costs a read more than the bytes
    save. A single value is still read where it lies (:func:`.pagecodec.value_in_chunk`
    sums the deltas before it). Files written with another
    layout keep it: readers take any standard encoding, so stores need no rewrite.
    """
    encodings: dict[str, str] = {}
    codecs: dict[str, str] = {}
    for f in schema:
        if _delta_packable(f.type):
            encodings[f.name] = "DELTA_BINARY_PACKED"
            codecs[f.name] = "none"
        elif (table is not None and pa.types.is_floating(f.type)
              and not _halved_by(compression, table.column(f.name), group_rows)):
            codecs[f.name] = "none"
        else:
            codecs[f.name] = compression
    return encodings, codecs


def _halved_by(compression: str, column: pa.ChunkedArray, group_rows: int) -> bool:
    """Whether ``compression`` stores the PLAIN bytes of ``column``'s values in at most half
    their size, each row group of ``group_rows`` rows (0: one group) compressed on its own as
    Parquet compresses each page, nulls left out as Parquet leaves them out; a column without
    values keeps the codec. O(bytes of the column)."""
    if compression.lower() in ("none", "uncompressed"):
        return False
    codec = pa.Codec(compression)
    step = group_rows if group_rows > 0 else max(1, len(column))
    raw = packed = 0
    for a in range(0, len(column), step):
        values = pc.drop_null(column.slice(a, step)).to_numpy().tobytes()
        raw += len(values)
        packed += len(codec.compress(values, asbytes=True)) if values else 0
    return raw == 0 or 2 * packed <= raw


def _delta_packable(t: pa.DataType) -> bool:
    """Whether Parquet stores ``t`` as INT32 or INT64, the types delta packing takes."""
    return (pa.types.is_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t)
            or pa.types.is_time(t) or pa.types.is_duration(t))


def write_parquet(path: Path, table: pa.Table, row_group_rows: int,
                  compression: str = DEFAULT_COMPRESSION) -> int:
    """Write ``table`` with row groups of exactly ``row_group_rows`` rows (the last may be
    shorter); returns the file size. Columns are laid out by :func:`column_layout`: integer
    columns delta-packed, strings dictionary-encoded, other columns PLAIN (floats that
    compress poorly uncompressed)."""
    dict_cols = [f.name for f in table.schema if pa.types.is_string(f.type)]
    encodings, codecs = column_layout(table.schema, compression, table, row_group_rows)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(
        table,
        tmp,
        row_group_size=row_group_rows,
        compression=codecs,
        column_encoding=encodings or None,
        use_dictionary=dict_cols or False,
        write_statistics=["t", "seq"],
        write_page_index=False,
    )
    os.replace(tmp, path)
    return path.stat().st_size


def file_stats(table: pa.Table, numeric: dict[str, tuple[Any, Any, int]]) -> str:
    """Delta ``stats`` JSON for a data file: numRecords, min/max of ``t``, ``seq`` and numeric
    attributes (given as ``name -> (min, max, nulls)``), null counts of every column."""
    n = table.num_rows
    t = table.column("t")
    seq = table.column("seq")
    mins: dict[str, Any] = {"t": int(t[0].as_py()) if n else None,
                            "seq": int(seq[0].as_py()) if n else None}
    maxs: dict[str, Any] = {"t": int(t[n - 1].as_py()) if n else None,
                            "seq": int(seq[n - 1].as_py()) if n else None}
    nulls: dict[str, int] = {"t": 0, "seq": 0}
    for name in table.column_names[2:]:
        if name in numeric:
            mn, mx, nn = numeric[name]
            if pa.types.is_boolean(table.schema.field(name).type):  # tree aggregates are 0/1
                mn = None if mn is None else bool(mn)
                mx = None if mx is None else bool(mx)
            if mn is not None and _finite(mn):
                mins[name] = mn
            if mx is not None and _finite(mx):
                maxs[name] = mx
            nulls[name] = nn
        else:
            nulls[name] = table.column(name).null_count
    return json.dumps({"numRecords": n, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def _finite(v: Any) -> bool:
    return not (isinstance(v, float) and not np.isfinite(v))


def add_action(table_root: Path, rel_path: str, size: int, stats: str) -> AddAction:
    return AddAction(rel_path, size, {}, int(time.time() * 1000), True, stats)


def remove_action(rel_path: str, size: int) -> RemoveAction:
    return RemoveAction(rel_path, True, int(time.time() * 1000), size, {})


def commit(
    table: Path,
    arrow_schema: pa.Schema,
    adds: Sequence[AddAction],
    removes: Sequence[RemoveAction],
    manifest: Manifest,
    *,
    app_id: str | None = None,
    create: bool = False,
) -> int:
    """Commit adds/removes with the manifest in one Delta transaction; returns the new version.
    A table of a store on an object store commits there (:mod:`.remotewrite`), without retry:
    a commit that lost its version to another writer fails whole."""
    remote = mirror_of(table)
    props = CommitProperties(
        custom_metadata={MANIFEST_KEY: manifest.dumps()},
        app_transactions=[Transaction(APP_PREFIX + app_id, 1)] if app_id else None,
        max_commit_retries=0 if remote is not None else None,
    )
    if remote is not None:
        def remote_commit(uri: str, options: dict[str, str]) -> int:
            if create:
                create_table_with_add_actions(
                    uri, Schema.from_arrow(arrow_schema), list(adds), mode="error",
                    commit_properties=props, storage_options=options)
                return 0
            base = latest_version(table)
            dt = DeltaTable(uri, version=base, storage_options=options)
            dt.create_write_transaction([*adds, *removes], mode="append", schema=arrow_schema,
                                        partition_by=None, commit_properties=props)
            return base + 1

        table.mkdir(parents=True, exist_ok=True)
        _OPEN.pop(str(table), None)
        return commit_remote(remote[0], remote[1], remote_commit)
    if create:
        table.mkdir(parents=True, exist_ok=True)
        create_table_with_add_actions(
            str(table), Schema.from_arrow(arrow_schema), list(adds), mode="error",
            commit_properties=props,
        )
        return 0
    dt = _writable(table)
    try:
        dt.create_write_transaction(
            [*adds, *removes], mode="append", schema=arrow_schema, partition_by=None,
            commit_properties=props,
        )
    except Exception:
        _OPEN.pop(str(table), None)  # next commit starts from a fresh snapshot
        raise
    dt.update_incremental()
    return dt.version()


_OPEN: dict[str, tuple[tuple[int, int], DeltaTable]] = {}
"""Open tables of this process, by path, with the identity of their first log entry."""
_OPEN_MAX = 64
"""Tables kept open at most (a process writing to many streams re-opens the oldest)."""


def _writable(table: Path) -> DeltaTable:
    """The table brought up to its latest version. Opening a DeltaTable replays its log, which
    costs more than a small append's whole commit; a process that commits to the same table
    again reuses its open table and reads only the new log entries. The cached table is
    trusted only while the log's first entry is the same file (a dropped and re-created table
    starts a new log)."""
    key = str(table)
    first = log_dir(table) / ("0" * 20 + ".json")
    try:
        st = first.stat()
        ident = (st.st_ino, st.st_mtime_ns)
    except OSError:
        ident = (-1, -1)
    hit = _OPEN.get(key)
    if hit is not None and hit[0] == ident and ident != (-1, -1):
        dt = hit[1]
        dt.update_incremental()
        return dt
    dt = DeltaTable(key)
    _OPEN.pop(key, None)
    while len(_OPEN) >= _OPEN_MAX:  # forget the least recently opened table
        _OPEN.pop(next(iter(_OPEN)))
    _OPEN[key] = (ident, dt)
    return dt


def applied(table: Path, app_id: str) -> bool:
    """True if a commit with application transaction ``app_id`` is in the log."""
    if not log_dir(table).is_dir():
        return False
    return DeltaTable(str(table)).transaction_version(APP_PREFIX + app_id) is not None


def table_files(table: Path, version: int) -> set[str]:
    """Relative paths of the data files of a version."""
    dt = DeltaTable(str(table), version=version)
    acts = pa.table(dt.get_add_actions(flatten=False))
    return set(acts.column("path").to_pylist())
