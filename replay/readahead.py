"""Reads one step ahead of the operator: :class:`ReadAhead` (and :func:`first_then_ahead`,
which starts it only once a second item is coming).

A replay alternates between reading (decoding a store's pages, which releases the GIL) and
pushing what it read into an operator. :class:`ReadAhead` computes the next item of a source
iterator on a worker thread while the caller works on the current one, so on a machine with a
second core the two overlap and a replay takes about the longer of its read and operator times
instead of their sum.

Semantics: the items, their order and any exception raised by the source are those of the
source, delivered to the caller as if it iterated the source itself (an exception arrives when
the caller asks for the item that raised it). At most ``depth`` items are computed ahead and
held. The source is only ever advanced by the worker thread, one call at a time, so a source
that is not thread-safe stays safe as long as nothing else uses it meanwhile. :meth:`close`
(also on exhaustion, on an exception, and as a context manager) stops the worker after the
item it is computing, joins it and closes the source; the worker never outlives the replay.

Memory: the worker allocates each read's arrays and the caller frees them, on another thread,
which makes the C library's heap (glibc) return freed memory at the top of a heap to the system
and fault it in again, page by page, on the next read (docs/decisions.md). The first
:class:`ReadAhead` of a process therefore asks glibc to keep :data:`HEAP_PADDING` bytes at the
top of its heaps (``mallopt(M_TOP_PAD)``, what ``MALLOC_TOP_PAD_`` sets; left alone when that
variable is set or the C library is not glibc): freed memory up to that much stays mapped for
the next read instead of being returned.
"""

from __future__ import annotations

import ctypes
import functools
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_DONE = object()
_POLL_SECONDS = 0.05

HEAP_PADDING = 64 << 20
"""Bytes glibc keeps at the top of a heap when trimming and adds when growing one."""
_M_TOP_PAD = -2  # glibc's malloc.h


@functools.cache
def keep_heap_padding() -> bool:
    """Ask glibc once per process to keep :data:`HEAP_PADDING` bytes at the top of its heaps
    (see the module docstring); whether the setting was made. Nothing is done where
    ``MALLOC_TOP_PAD_`` is set (the user's choice) or the C library is not glibc."""
    if "MALLOC_TOP_PAD_" in os.environ or not _glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_TOP_PAD, HEAP_PADDING))


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (AttributeError, ValueError, OSError):
        return False


class ReadAhead(Generic[T]):
    """Iterate ``(seconds, item)``: the items of ``source`` (each passed through ``make``),
    computed up to ``depth`` ahead on a worker thread, with the seconds the worker spent on
    each (reading and ``make``)."""

    def __init__(self, source: Iterator[Any], make: Callable[[Any], T], depth: int = 1,
                 name: str = "replaydb-read-ahead") -> None:
        if depth < 1:
            raise ValueError(f"ReadAhead: depth must be at least 1, got {depth}")
        keep_heap_padding()
        self._source = source
        self._make = make
        self._queue: queue.Queue[tuple[float, Any, BaseException | None]] = queue.Queue(depth)
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while not self._stop.is_set():
            t0 = time.perf_counter()
            try:
                item = next(self._source, _DONE)
                out = item if item is _DONE else self._make(item)
            except BaseException as exc:  # delivered to the caller, who re-raises it
                self._put((time.perf_counter() - t0, _DONE, exc))
                return
            self._put((time.perf_counter() - t0, out, None))
            if out is _DONE:
                return

    def _put(self, entry: tuple[float, Any, BaseException | None]) -> None:
        """Hand ``entry`` over, waiting while the caller has ``depth`` items unread; gives up
        when :meth:`close` asks the worker to stop."""
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=_POLL_SECONDS)
                return
            except queue.Full:
                continue

    def __iter__(self) -> ReadAhead[T]:
        return self

    def __next__(self) -> tuple[float, T]:
        if self._finished:
            raise StopIteration
        seconds, out, exc = self._queue.get()
        if exc is not None or out is _DONE:
            self.close()
            if exc is not None:
                raise exc
            raise StopIteration
        return seconds, out

    def close(self) -> None:
        """Stop the worker after its current item, join it and close the source."""
        if self._finished:
            return
        self._finished = True
        self._stop.set()
        while self._thread.is_alive():
            try:  # unblock a worker waiting to hand an item over
                self._queue.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                pass
        self._thread.join()
        close = getattr(self._source, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> ReadAhead[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def first_then_ahead(source: Iterator[Any], make: Callable[[Any], T],
                     last: Callable[[T], bool]) -> Iterator[tuple[float, T]]:
    """What :class:`ReadAhead` yields, with the first item computed on the caller's thread
    (the caller waits for it in any case): when that item is the source's last
    (``last(item)``), no worker is started, which could overlap nothing and would only add
    its start-up; otherwise the items after it are read ahead by a :class:`ReadAhead`, which
    computes the second while the caller works on the first. The same items, order and
    exceptions as the source's; items after one marked last (none, where ``last`` is right)
    are still delivered, on the caller's thread. Closing the iterator closes the source."""
    try:
        t0 = time.perf_counter()
        item = next(source, _DONE)
        if item is _DONE:
            return
        out = make(item)
        yield time.perf_counter() - t0, out
        if last(out):
            for item in source:
                t0 = time.perf_counter()
                out = make(item)
                yield time.perf_counter() - t0, out
            return
        with ReadAhead(source, make) as reads:
            yield from reads
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
