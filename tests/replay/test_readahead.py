"""The read-ahead iterator delivers its source's items, order and exceptions, and never leaves
a worker thread behind."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.replay.readahead import ReadAhead


class Boom(Exception):
    pass


class Source:
    """Items 0..n-1, raising Boom at ``fail_at``; records which thread advanced it and whether
    it was closed."""

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n, self.fail_at = n, fail_at
        self.i = 0
        self.threads: set[int] = set()
        self.closed = False

    def __iter__(self):
        return self

    def __next__(self) -> int:
        self.threads.add(threading.get_ident())
        if self.i == self.fail_at:
            raise Boom(self.i)
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i - 1

    def close(self) -> None:
        self.closed = True


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "replaydb-read-ahead"]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 30), fail_at=st.none() | st.integers(0, 30),
       depth=st.integers(1, 3), take=st.none() | st.integers(0, 30))
def test_read_ahead_gives_the_source_items_and_its_exception(n, fail_at, depth, take):
    src = Source(n, fail_at)
    got: list[int] = []
    raised = False
    with ReadAhead(src, lambda x: x * 10, depth=depth) as reads:
        try:
            for k, (seconds, item) in enumerate(reads):
                if take is not None and k >= take:
                    break
                assert seconds >= 0.0
                got.append(item)
        except Boom:
            raised = True
    stop = n if fail_at is None or fail_at > n else fail_at
    want = [10 * i for i in range(stop)][:take]
    assert got == want
    assert raised == (fail_at is not None and fail_at <= n
                      and (take is None or take >= fail_at))  # item take is asked for
    assert src.closed
    assert threading.get_ident() not in src.threads
    assert not _workers()


def test_a_closed_read_ahead_stops_and_stays_stopped():
    src = Source(1000)
    reads = ReadAhead(src, lambda x: x)
    assert next(reads)[1] == 0
    reads.close()
    assert src.i <= 3  # the worker read at most depth + 1 items past the one taken
    with pytest.raises(StopIteration):
        next(reads)
    assert not _workers()


def test_read_ahead_rejects_a_depth_below_one():
    with pytest.raises(ValueError, match="depth"):
        ReadAhead(iter([]), lambda x: x, depth=0)


def test_heap_padding_is_asked_for_once_and_never_over_the_users_choice(monkeypatch):
    import os

    from replaydb.replay import readahead

    monkeypatch.setenv("MALLOC_TOP_PAD_", "1")
    readahead.keep_heap_padding.cache_clear()
    assert readahead.keep_heap_padding() is False  # the user's setting stands
    monkeypatch.delenv("MALLOC_TOP_PAD_")
    readahead.keep_heap_padding.cache_clear()
    glibc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    assert readahead.keep_heap_padding() is glibc.startswith("glibc")
    assert readahead.keep_heap_padding.cache_info().currsize == 1
