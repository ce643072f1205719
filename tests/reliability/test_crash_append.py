"""Crash safety of the append path: SIGKILL at every commit step and at random times.

After each kill: the store opens, ``check`` passes, every acknowledged batch is present exactly
once, no batch is partially visible, and re-running the writer completes the work exactly once.
"""

from __future__ import annotations

import random
import textwrap

import numpy as np
import pytest

import replaydb
from replaydb.store.failpoints import POINTS
from replaydb.store.schema import Attribute, StreamSchema
from tests.crash import run_and_kill

BATCHES = 24
SIZE = 50

WRITER = textwrap.dedent("""
    import sys, numpy as np, pyarrow as pa, replaydb
    store = replaydb.open(sys.argv[1])
    for i in range(int(sys.argv[2])):
        t = np.arange(i * 100, i * 100 + 50) * 2
        if i % 3 == 2:
            t[:5] = t[:5] - 120   # late events within the bound: rewrites the stored tail
        t.sort()
        b = pa.table({"t": t, "x": np.full(50, i * 0.5), "k": np.full(50, i)})
        store.append("s", b, batch_id=f"b{i}")
        print("ACK", i, flush=True)
""")


def _make(tmp_path):
    from replaydb.indexes.manage import create_index

    store = replaydb.open(tmp_path / "s", create=True)
    store.create_stream("s", StreamSchema((Attribute("x", "float64"), Attribute("k", "int64")),
                                          lateness=150, leaf_capacity=16, fanout=4))
    create_index(store, "s", "k")  # every append also commits the index first
    return store


def _verify(path, acked, complete=False):
    store = replaydb.open(path)
    assert store.check("s") == {"s": []}  # includes the index against the data
    k = store.stream("s").read().column("k").to_numpy()
    counts = np.bincount(k, minlength=BATCHES) if len(k) else np.zeros(BATCHES, int)
    for i in acked:
        assert counts[int(i)] == SIZE, f"acknowledged batch {i} has {counts[int(i)]} events"
    assert set(np.unique(counts)) <= {0, SIZE}, "a batch is partially visible"
    if complete:
        assert np.all(counts == SIZE)
    return counts


def _trial(tmp_path, failpoint=None, kill_after=None):
    _make(tmp_path)
    path = str(tmp_path / "s")
    run = run_and_kill(WRITER, [path, str(BATCHES)], failpoint=failpoint, kill_after=kill_after)
    assert run.killed or run.returncode == 0, run.stderr
    _verify(path, run.acked)
    again = run_and_kill(WRITER, [path, str(BATCHES)])
    assert again.returncode == 0, again.stderr
    _verify(path, [str(i) for i in range(BATCHES)], complete=True)


@pytest.mark.parametrize("point", [p for p in POINTS if p.startswith("append.")])
def test_kill_at_each_commit_step(tmp_path, point):
    _trial(tmp_path, failpoint=f"{point}:{random.Random(point).randint(1, 6)}")


@pytest.mark.parametrize("seed", range(2))
def test_kill_at_random_time(tmp_path, seed):
    _trial(tmp_path, kill_after=random.Random(seed).uniform(1.0, 3.0))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_kill_at_random_point_many_trials(tmp_path, seed):
    rng = random.Random(1000 + seed)
    if rng.random() < 0.5:
        points = [p for p in POINTS if p.startswith("append.")]
        _trial(tmp_path, failpoint=f"{rng.choice(points)}:{rng.randint(1, BATCHES)}")
    else:
        _trial(tmp_path, kill_after=rng.uniform(0.8, 4.0))


def test_vacuum_removes_only_crash_leftovers(tmp_path):
    from replaydb.store.vacuum import vacuum_stream

    _make(tmp_path)
    path = str(tmp_path / "s")
    run = run_and_kill(WRITER, [path, str(BATCHES)], failpoint="append.segment_written:4")
    assert run.killed
    store = replaydb.open(path)
    before = store.stream("s").read()
    dry = vacuum_stream(store, "s", dry_run=True)
    assert any(f.startswith("events/") for f in dry["files"])
    assert any(f.startswith("tree/") for f in dry["files"])
    done = vacuum_stream(store, "s")
    assert done["files"] == dry["files"]
    fresh = replaydb.open(path)
    assert fresh.check("s") == {"s": []}
    assert fresh.stream("s").read().equals(before)
    for v in range(fresh.stream("s").version + 1):  # every version still reads
        fresh.stream("s", v).read()
    assert vacuum_stream(fresh, "s")["files"] == []
