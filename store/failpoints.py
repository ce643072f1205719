"""Failpoints: named places where a test can make the process die, to prove crash safety.

Set ``REPLAYDB_FAILPOINT=name[:n]`` and the process SIGKILLs itself the ``n``-th time (default
the first) it passes :func:`failpoint(name) <failpoint>`. Unset, a failpoint costs one dict lookup.
The points sit between the steps of every commit protocol (see :mod:`replaydb.store.manifest`), so
the crash tests can kill a writer exactly between "files written" and "commit", for example, as
well as at random times.
"""

from __future__ import annotations

import os
import signal

_SPEC = os.environ.get("REPLAYDB_FAILPOINT", "")
_NAME, _, _N = _SPEC.partition(":")
_COUNT = int(_N) if _N.isdigit() else 1
_seen = 0

POINTS = (
    "append.files_written",   # data files written, nothing committed
    "append.side_applied",    # one more side table (index) committed, events not yet
    "append.sides_committed", # side tables (indexes, quarantine) committed, events not yet
    "append.segment_written", # tree segment written, events not yet committed
    "append.committed",       # events committed, caller not yet told
    "ingest.files_written",   # Spark tasks wrote data files and index runs
    "ingest.before_commit",   # index and quarantine tables committed, events not yet
    "index.backfilled",       # a new index built and committed, not yet pinned by the stream
    "index.committed",        # the stream pins the new index, caller not yet told
    "compact.index_committed",  # one more index compacted (committed), manifest not yet
    "compact.committed",      # the manifest pins the compacted indexes, caller not yet told
)


def failpoint(name: str) -> None:
    """Die here (SIGKILL) if the environment asks for it."""
    global _seen
    if _NAME and name == _NAME:
        _seen += 1
        if _seen >= _COUNT:
            os.kill(os.getpid(), signal.SIGKILL)
