"""The read-ahead iterator delivers its source's items, order and exceptions, and never leaves
a worker thread behind; started after a first item read on the caller's thread, it delivers
the same; a replay starts a worker exactly when more than one read comes."""

from __future__ import annotations

import contextlib
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.replay.readahead import ReadAhead, first_then_ahead


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


def _drain(reads, take: int | None) -> tuple[list[int], bool]:  # noqa: ANN001
    """The items of ``reads`` (at most ``take``) and whether it raised Boom; closes it."""
    got: list[int] = []
    raised = False
    with reads as items:
        try:
            for k, (seconds, item) in enumerate(items):
                if take is not None and k >= take:
                    break
                assert seconds >= 0.0
                got.append(item)
        except Boom:
            raised = True
    return got, raised


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 30), fail_at=st.none() | st.integers(0, 30),
       depth=st.integers(1, 3), take=st.none() | st.integers(0, 30))
def test_read_ahead_gives_the_source_items_and_its_exception(n, fail_at, depth, take):
    src = Source(n, fail_at)
    got, raised = _drain(ReadAhead(src, lambda x: x * 10, depth=depth), take)
    stop = n if fail_at is None or fail_at > n else fail_at
    want = [10 * i for i in range(stop)][:take]
    assert got == want
    assert raised == (fail_at is not None and fail_at <= n
                      and (take is None or take >= fail_at))  # item take is asked for
    assert src.closed
    assert threading.get_ident() not in src.threads
    assert not _workers()


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 30), fail_at=st.none() | st.integers(0, 30),
       take=st.none() | st.integers(0, 30), last_at=st.none() | st.integers(0, 30))
def test_first_then_ahead_gives_what_read_ahead_gives(n, fail_at, take, last_at):
    """The same items and exception as ReadAhead, whichever item is marked last (even a
    wrong mark); the first on the caller's thread, and a worker only when the first item is
    not marked last."""
    src = Source(n, fail_at)
    got, raised = _drain(contextlib.closing(
        first_then_ahead(src, lambda x: x * 10,
                         lambda out: last_at is not None and out == 10 * last_at)), take)
    assert (got, raised) == _drain(ReadAhead(Source(n, fail_at), lambda x: x * 10), take)
    assert src.closed
    assert not _workers()
    first_is_last = last_at == 0
    if first_is_last or (take is not None and take <= 1) or n == 0 or fail_at in (0, 1):
        return
    assert len(src.threads) == 2  # the first item here, the rest on the worker


def test_a_replay_reads_ahead_only_when_more_than_one_read_comes(tmp_path):
    """A replay starts a read-ahead worker exactly when its intervals take more than one
    read (the snapshot marks the last one)."""
    import numpy as np
    import pyarrow as pa

    import replaydb
    from replaydb.replay.replay import Replay
    from replaydb.store.schema import StreamSchema

    store = replaydb.open(tmp_path / "s", create=True)
    rng = np.random.default_rng(2)
    for part in range(3):  # three data files
        t = np.arange(part * 5000, (part + 1) * 5000, dtype=np.int64)
        tbl = pa.table({"t": t, "x": rng.random(5000)})
        if part == 0:
            store.create_stream("ev", StreamSchema.infer(tbl.schema, time_unit="ms",
                                                         leaf_capacity=256))
        store.append("ev", tbl)
    snap = store.stream("ev")
    started: list[bool] = []
    real = ReadAhead.__init__

    def seen(self, *args, **kwargs):  # the real worker, its start recorded
        started.append(True)
        real(self, *args, **kwargs)

    ReadAhead.__init__ = seen  # type: ignore[method-assign]
    try:
        for intervals, batch_rows, many in (([(10, 21)], 65536, False),
                                            (None, 512, True)):
            started.clear()
            replay = Replay([snap], intervals, batch_rows=batch_rows)
            rows = sum(b.num_rows for _, b in replay.batches())
            assert rows == (11 if not many else 15000)
            assert bool(started) == many
    finally:
        ReadAhead.__init__ = real  # type: ignore[method-assign]


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
