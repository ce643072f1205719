"""Writes to a store on an object store.

A writer works on the store's mirror (:mod:`.mirror`) exactly as on a local store: it writes its
data files, tree segments and index runs there, under the stream's writer lock. Each Delta
commit is where the object store learns of them (:func:`commit_remote`):

1. **publish**: every file of the stream's directory in the mirror that the object store does
   not hold is uploaded (one listing of the stream, then the uploads, concurrently); the files
   are immutable and uniquely named, so an upload never replaces anything a reader uses;
2. **commit**: delta-rs commits the actions to the table on the object store, with conditional
   puts (:meth:`.location.RemoteLocation.write_options`) and no retry, so when another writer -
   on any machine - committed that version first, this commit fails as a whole
   (:class:`~replaydb.errors.ConcurrentWriterError`) and nothing it wrote becomes visible;
3. **mirror**: the new commit is mirrored, and the local copies of the uploaded data files are
   deleted (data files are read by ranges, never from the mirror).

A crash between 1 and 2 leaves uploaded files no commit references (``replaydb vacuum`` removes
them); a crash after 2 leaves nothing to repair (the next sync mirrors the commit).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from deltalake.exceptions import CommitFailedError

from replaydb.errors import ConcurrentWriterError, StoreError
from replaydb.store.mirror import FOOTERS, MARKER, StoreMirror

LOG_DIR = "_delta_log"
STAGING = "_staging"
"""An ingest's working folder in a stream (never uploaded)."""
_LOCAL_ONLY = ("_writer.lock", ".fetch-", MARKER, ".config-")
"""Names (or prefixes) of files in a mirror that are never uploaded."""


def commit_remote(mirror: StoreMirror, rel: str, commit: Callable[[str, dict[str, str]], Any]
                  ) -> Any:
    """Publish the files of the stream holding table ``rel``, then run ``commit(uri,
    storage_options)`` (a delta-rs commit of the table at ``uri`` that does not retry), then
    mirror its log; returns what ``commit`` returns. A commit that lost the race for its
    version is a ConcurrentWriterError."""
    parts = rel.split("/")
    if len(parts) < 3 or parts[0] != "streams":
        raise StoreError(f"{mirror.location.uri_of(rel)}: not a table of a stream")
    stream = "/".join(parts[:2])
    publish(mirror, stream)
    uri = mirror.location.uri_of(rel)
    try:
        got = commit(uri, mirror.location.write_options())
    except CommitFailedError:
        raise ConcurrentWriterError(
                f"{uri}: another writer committed first; this write was not committed",
            hint="retry it (an append with an idempotency key is safe to retry)") from None
    mirror.sync(f"{rel}/{LOG_DIR}", recursive=False)
    _drop_local_data(mirror, stream)
    return got


def publish(mirror: StoreMirror, stream: str) -> None:
    """Upload the files of the mirror's directory ``stream`` that the object store does not
    hold (Delta logs and local-only files excepted)."""
    held = {e.rel for e in mirror.location.list(stream, recursive=True) if e.size >= 0}
    root = mirror.root
    todo = []
    for dirpath, dirs, names in os.walk(mirror.local(stream)):
        dirs[:] = [d for d in dirs if d not in (LOG_DIR, FOOTERS, STAGING)]
        for n in names:
            if n.startswith(_LOCAL_ONLY):
                continue
            rel = Path(dirpath, n).relative_to(root).as_posix()
            if rel not in held:
                todo.append(rel)
    if not todo:
        return

    def upload(rel: str) -> None:
        mirror.location.put(rel, mirror.local(rel).read_bytes())

    with ThreadPoolExecutor(min(8, len(todo))) as pool:
        list(pool.map(upload, todo))


def _drop_local_data(mirror: StoreMirror, stream: str) -> None:
    """Delete the mirror's copies of the stream's data files (uploaded by :func:`publish`)."""
    events = mirror.local(f"{stream}/events")
    if not events.is_dir():
        return
    with os.scandir(events) as it:
        for e in it:
            if e.is_file() and e.name.endswith(".parquet"):
                try:
                    os.unlink(e.path)
                except FileNotFoundError:
                    pass


def delete_stream(mirror: StoreMirror, stream: str) -> None:
    """Delete the stream directory ``stream`` from the object store: its events table's
    ``_last_checkpoint``, then its log newest entry first, then everything else under it."""
    loc = mirror.location
    log = f"{stream}/events/{LOG_DIR}/"
    objects = [e.rel for e in loc.list(stream, recursive=True) if e.size >= 0]
    logs = [r for r in objects if r.startswith(log)]
    first = [r for r in logs if r.endswith("_last_checkpoint")]
    rest_logs = sorted((r for r in logs if not r.endswith("_last_checkpoint")),
                       key=_version_of, reverse=True)
    loc.delete([*first, *rest_logs])
    loc.delete_tree(stream)


def _version_of(rel: str) -> int:
    """The version a Delta log file belongs to (-1 for other names)."""
    head = rel.rsplit("/", 1)[-1].split(".", 1)[0]
    return int(head) if head.isdigit() else -1


def is_data_file(stream: str, rel: str) -> bool:
    """Whether ``rel`` is a data file of the events table of ``stream`` (``streams/<name>``)."""
    head = f"{stream}/events/"
    return rel.startswith(head) and "/" not in rel[len(head):] and rel.endswith(".parquet")
