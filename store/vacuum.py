"""``replaydb vacuum``: remove what no committed version references.

A writer that dies before its events commit leaves data files, tree segments and temporary files
behind; they are invisible (no manifest names them) but take space. Vacuum removes, per stream:

* data files in ``events/`` that no Delta version of the table adds (the JSON commits still in
  the log, every checkpoint and the latest version are consulted);
* tree segments that no version's manifest chain reaches;
* files of the stream's side tables that no committed version of theirs references, as each
  side-table kind lists them (:func:`replaydb.store.sides.garbage`): for the secondary indexes,
  run files and their rank codes left by an index writer that died before its commit;
* ``*.tmp`` files;
* the staging folders of ingests that did not finish (``_staging/*``).

It never removes anything a committed version references, so time travel to any version keeps
working. On an object store it first mirrors the stream's files but its data files, applies the
same rules, and deletes what they name there too, except files written in the last hour
(:data:`REMOTE_MIN_AGE`): the writer lock holds on one machine only, and a writer on another
machine uploads its files before its commit references them. It holds the stream's writer lock, so files of a write in progress are never taken for
garbage. Complexity: O(log entries + files).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from replaydb.store import sides
from replaydb.store.manifest import MANIFEST_KEY, Manifest

if TYPE_CHECKING:
    from replaydb.store.store import Store


def _log_entries(table: Path) -> tuple[set[str], list[str]]:
    """Paths added by any commit, and the tree heads of every manifest."""
    added: set[str] = set()
    heads: list[str] = []
    for f in sorted((table / "_delta_log").glob("*.json")):
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                obj = json.loads(line)
                if "add" in obj:
                    added.add(obj["add"]["path"])
                elif "commitInfo" in obj and MANIFEST_KEY in obj["commitInfo"]:
                    head = Manifest.loads(obj["commitInfo"][MANIFEST_KEY]).tree_head
                    if head:
                        heads.append(head)
    return added, heads


def _checkpointed_files(table: Path) -> set[str]:
    """Files live at every checkpointed version and at the latest version."""
    from replaydb.store import deltaio

    versions = {int(f.name[:20]) for f in (table / "_delta_log").glob("*.checkpoint*.parquet")}
    versions.add(deltaio.latest_version(table))
    out: set[str] = set()
    for v in sorted(versions):
        if v >= 0:
            out |= deltaio.table_files(table, v)
    return out


def _reachable_segments(stream_dir: Path, heads: list[str]) -> set[str]:
    seen: set[str] = set()
    for head in heads:
        name: str | None = head
        while name is not None and name not in seen:
            seen.add(name)
            try:
                meta = pq.read_schema(stream_dir / name).metadata or {}
                name = json.loads(meta[b"replaydb.segment"])["parent"]
            except (OSError, KeyError, ValueError):
                break
    return seen


def _mirror_for_vacuum(store: Store, name: str, min_age: float
                       ) -> tuple[dict[str, int], set[str]]:
    """For a store on an object store: mirror every file of stream ``name`` but its data
    files and staged rows, so the local rules below see what the object store holds; returns
    those not mirrored (paths relative to the stream) with their sizes, and the files younger
    than ``min_age`` seconds (kept: a writer on another machine may be about to commit them).
    Empty for a local store."""
    if store.mirror is None:
        return {}, set()
    from replaydb.store.remotewrite import is_data_file

    stream = f"streams/{name}"

    def remote_only(rel: str) -> bool:
        return is_data_file(stream, rel) or rel.startswith(f"{stream}/_staging/")

    listed = store.mirror.sync(stream, keep=lambda e: not remote_only(e.rel))
    cut = time.time() - min_age
    young = {e.rel[len(stream) + 1:] for e in listed if e.size >= 0 and e.mtime > cut}
    return ({e.rel[len(stream) + 1:]: e.size for e in listed
             if e.size >= 0 and remote_only(e.rel)}, young)


REMOTE_MIN_AGE = 3600.0
"""On an object store, files younger than this (seconds) are never removed."""


def vacuum_stream(store: Store, name: str, *, dry_run: bool = False,
                  min_age: float = REMOTE_MIN_AGE) -> dict[str, Any]:
    """Remove unreferenced files of one stream; returns what was (or would be) removed.
    On an object store only files older than ``min_age`` seconds: the writer lock holds on
    one machine only, and a writer elsewhere uploads its files before it commits them."""
    d = store.stream_dir(name)
    removed: list[str] = []
    size = 0
    with store.writer(name):
        remote_only, young = _mirror_for_vacuum(store, name, min_age)
        added, heads = _log_entries(d / "events")
        # Delta's log cleanup drops JSON commits older than a checkpoint: the files they added
        # are listed only in the checkpoint, so keep what the checkpoints and the latest version
        # reference too
        added |= _checkpointed_files(d / "events")
        live_segments = _reachable_segments(d, heads)
        candidates: list[Path] = []
        for f in (d / "events").glob("*.parquet"):
            if f.name not in added:
                candidates.append(f)
        gone = {r: sz for r, sz in remote_only.items() if r not in young
                and (r.startswith("_staging/") or r.removeprefix("events/") not in added)}
        for f in (d / "tree").glob("seg-*.parquet"):
            if f"tree/{f.name}" not in live_segments:
                candidates.append(f)
        candidates += sides.garbage(d)
        candidates += list(d.rglob("*.tmp"))
        candidates += [f for f in (d / "_staging").rglob("*") if f.is_file()]
        candidates = [f for f in candidates if str(f.relative_to(d)) not in young]
        for f in candidates:
            size += f.stat().st_size
            removed.append(str(f.relative_to(d)))
            if not dry_run:
                f.unlink()
        removed += [r for r in gone if r not in removed]
        size += sum(gone.values())
        if store.location is not None and not dry_run:
            store.location.delete([f"streams/{name}/{r}" for r in removed])
        if not dry_run:
            for sub in sorted((d / "_staging").glob("*"), reverse=True):
                if sub.is_dir():
                    shutil.rmtree(sub, ignore_errors=True)
    return {"stream": name, "files": sorted(removed), "bytes": size, "dry_run": dry_run}
