"""Crash safety of ``Store.drop_stream``: a stream is either all there or all gone.

A child process drops a stream (with an index and quarantined rows, so several Delta tables and
many files) and is SIGKILLed just before the directory is renamed out of the catalog, or at the
k-th file it deletes (``os.unlink`` is wrapped in the child to die there: a failpoint inside the
standard library's ``rmtree``). After every kill the stream is either intact (``check`` passes,
same events) or absent (not listed, cannot be opened, ``check`` of the store is clean), and the
store stays usable: the stream can be dropped again or created anew, and the next drop removes
the leftovers of the killed one.
"""

from __future__ import annotations

import random
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.errors import StreamNotFound
from tests.crash import record_trial, run_after_ready, table_digest

CHILD = textwrap.dedent("""
    import os, signal, replaydb
    mode, k = sys.argv[2], int(sys.argv[3])
    store = replaydb.open(sys.argv[1])
    real = {"unlink": os.unlink, "rename": os.rename}
    seen = [0]
    def dying(name):
        def wrapper(*a, **kw):
            seen[0] += 1
            if seen[0] >= k:
                os.kill(os.getpid(), signal.SIGKILL)
            return real[name](*a, **kw)
        return wrapper
    setattr(os, mode, dying(mode))
    print("READY", flush=True)
    store.drop_stream("s")
    print("ACK dropped", flush=True)
""")


def make_store(path):
    from replaydb.indexes.manage import create_index

    store = replaydb.open(path, create=True)
    for i in range(6):
        t = np.arange(i * 100, i * 100 + 100)
        x = np.where(t % 37 == 0, np.nan, t * 0.5)
        store.append("s", pa.table({"t": t, "x": x, "k": t % 7}), bad="quarantine")
        if i == 1:
            create_index(store, "s", "k")
    store.append("other", pa.table({"t": [1, 2, 3], "x": [1.0, 2.0, 3.0]}))
    return store


def n_files(path) -> int:
    return sum(1 for p in (path / "streams" / "s").rglob("*") if p.is_file())


def crash_trial(tmp_path, mode: str, k: int) -> dict:
    path = tmp_path / "store"
    store = make_store(path)
    before = table_digest(store.stream("s").read())
    other = table_digest(store.stream("other").read())
    run = run_after_ready(CHILD, [str(path), mode, str(k)])
    assert run.killed, run.stderr
    fresh = replaydb.open(path)
    assert table_digest(fresh.stream("other").read()) == other
    if fresh.has_stream("s"):
        assert mode == "rename", "a half-deleted stream is visible"
        assert fresh.check() == {"other": [], "s": []}
        assert table_digest(fresh.stream("s").read()) == before
        state = "intact"
    else:
        assert fresh.streams() == ["other"] and fresh.check() == {"other": []}
        with pytest.raises(StreamNotFound):
            fresh.stream("s")
        state = "gone"
    # the store goes on: drop again (or create anew), and the leftovers disappear
    if fresh.has_stream("s"):
        fresh.drop_stream("s")
    fresh.append("s", pa.table({"t": [5], "x": [1.0], "k": [1]}))
    assert fresh.stream("s").n_events == 1 and fresh.check()["s"] == []
    fresh.drop_stream("s")
    assert list((path / ".trash").iterdir()) == []
    out = {"killed": run.killed, "failpoint": f"{mode}:{k}", "state": state}
    record_trial("drop_stream", **out)
    return out


def test_killed_before_the_rename_leaves_the_stream_intact(tmp_path):
    assert crash_trial(tmp_path, "rename", 1)["state"] == "intact"


def test_killed_while_deleting_files_leaves_no_stream(tmp_path):
    assert crash_trial(tmp_path, "unlink", 7)["state"] == "gone"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_drop_many_trials(tmp_path, seed):
    rng = random.Random(7000 + seed)
    if seed % 5 == 0:
        crash_trial(tmp_path, "rename", 1)
    else:
        probe = make_store(tmp_path / "probe")
        total = n_files(probe.path)
        crash_trial(tmp_path, "unlink", rng.randint(1, total))
