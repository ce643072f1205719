"""The single-writer lock of a stream (an advisory ``flock`` on ``<stream>/_writer.lock``).

Appends, ingests, index builds and compactions of one stream take it; readers never do (they
read pinned Delta versions). The lock is released by the OS if the process dies, so a crash never
leaves a stream locked.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from replaydb.errors import ConcurrentWriterError, ReadOnlyError


class WriterLock:
    """Context manager holding the writer lock; ``timeout`` seconds to wait (0 = fail at once)."""

    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None

    def __enter__(self) -> WriterLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            raise ReadOnlyError(
                f"cannot write stream {self.path.parent.name!r}: the store is read-only here "
                f"({exc.strerror})",
                hint="writing needs write access to the store directory; reading works "
                     "without it") from None
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise ConcurrentWriterError(
                        f"another process is writing stream {self.path.parent.name!r}",
                        hint="wait for it to finish; readers are never blocked",
                    ) from None
                time.sleep(0.05)
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
