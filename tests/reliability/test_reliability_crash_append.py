"""Crash safety of appends that touch every side table at once.

Each batch of the writer carries, in one append: good events, events late within the lateness
bound (they rewrite the stored tail, so both secondary indexes get a seq-range tombstone), one
event later than the bound and two malformed rows (all three quarantined with their reasons).
The stream has indexes on two columns (an int and a string key). A child process appends the
batches with batch ids and is SIGKILLed at a failpoint between the commit steps or at a random
time; after every kill:

* the store opens and ``Store.check`` passes (tree, Delta table, both indexes against the data);
* the batches present form a prefix of the sequence, every acknowledged batch is among them,
  and the stream equals, event for event (t, seq and every attribute), a reference store that
  appended the same prefix without crashing - nothing lost, nothing duplicated, nothing partial;
* each present batch has exactly its quarantined rows, each absent batch none;
* re-running the writer (same batch ids) completes the sequence exactly once.
"""

from __future__ import annotations

import random
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.store.failpoints import POINTS
from replaydb.store.schema import Attribute, StreamSchema
from tests.crash import quarantine_counts, record_kill_trial, run_after_ready

BATCHES = 20
GOOD = 40
LATENESS = 150


def make_batch(i: int) -> tuple[pa.Table, int, int]:
    """Batch ``i``: (table, events it stores, rows it quarantines). Every row has ``k == i``."""
    t = (np.arange(GOOD, dtype=np.int64) + i * 100) * 2
    if i >= 1:
        t[:4] -= 120            # late, within the bound: rewrites the stored tail
    t.sort()
    x = np.round(np.sin(np.arange(GOOD) + i), 3)
    names = [f"n{(i + j) % 7}" for j in range(GOOD)]
    ts: list[int | None] = t.tolist()
    xs = x.tolist()
    ks = [i] * GOOD
    quarantined = 2
    # malformed rows: a NaN value and a missing time
    ts = ts[:10] + [int(t[10]), None] + ts[10:]
    xs = xs[:10] + [float("nan"), 1.0] + xs[10:]
    ks = ks[:10] + [i, i] + ks[10:]
    names = names[:10] + ["bad", "bad"] + names[10:]
    if i >= 1:                   # later than the bound: first row, so only stored events count
        ts = [i * 200 - 400, *ts]
        xs = [0.5, *xs]
        ks = [i, *ks]
        names = ["late", *names]
        quarantined += 1
    tbl = pa.table({"t": pa.array(ts, pa.int64()), "x": pa.array(xs, pa.float64()),
                    "k": pa.array(ks, pa.int64()), "name": pa.array(names, pa.string())})
    return tbl, GOOD, quarantined


def append_batch(store, i: int):
    tbl, _, _ = make_batch(i)
    return store.append("s", tbl, batch_id=f"b{i}", bad="quarantine", late="quarantine")


def make_store(path) -> None:
    from replaydb.indexes.manage import create_index

    store = replaydb.open(path, create=True)
    store.create_stream("s", StreamSchema(
        (Attribute("x", "float64"), Attribute("k", "int64"), Attribute("name", "string")),
        lateness=LATENESS, leaf_capacity=16, fanout=4))
    create_index(store, "s", "k")
    create_index(store, "s", "name")


WRITER = textwrap.dedent("""
    import shutil
    import pyarrow as pa
    import replaydb
    from tests.reliability.test_reliability_crash_append import append_batch
    shutil.rmtree(sys.argv[1] + "-warm", ignore_errors=True)
    warm = replaydb.open(sys.argv[1] + "-warm", create=True)  # load every code path once
    warm.append("w", pa.table({"t": [1, 2], "x": [0.5, 1.0], "k": [1, 2], "name": ["a", "b"]}))
    from replaydb.indexes.manage import create_index
    create_index(warm, "w", "k")
    warm.append("w", pa.table({"t": [3], "x": [0.5], "k": [3], "name": ["c"]}))
    store = replaydb.open(sys.argv[1])
    print("READY", flush=True)
    for i in range(int(sys.argv[2])):
        append_batch(store, i)
        print("ACK", i, flush=True)
    print("PHASE done", flush=True)
""")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The stream after each prefix of batches, appended without any crash."""
    path = tmp_path_factory.mktemp("reference") / "s"
    make_store(path)
    store = replaydb.open(path)
    states = [store.stream("s").read()]
    quarantine = []
    for i in range(BATCHES):
        r = append_batch(store, i)
        _, good, bad = make_batch(i)
        assert (r.events, r.quarantined) == (good, bad)
        states.append(store.stream("s").read())
        quarantine.append(bad)
    assert store.check("s") == {"s": []}
    return states, quarantine


def verify(path, acked: list[str], reference, *, complete: bool = False) -> int:
    """The checks after a kill (module docstring); returns how many batches are present."""
    states, quarantine = reference
    store = replaydb.open(path)
    assert store.check("s") == {"s": []}
    data = store.stream("s").read()
    k = data.column("k").to_numpy()
    counts = np.bincount(k, minlength=BATCHES) if len(k) else np.zeros(BATCHES, int)
    present = int((counts > 0).sum())
    assert np.all(counts[:present] == GOOD) and np.all(counts[present:] == 0), \
        f"batches present are not a prefix of whole batches: {counts.tolist()}"
    assert present >= len(acked), f"acknowledged {len(acked)} batches, {present} present"
    assert present <= len(acked) + 1
    assert data.equals(states[present]), "the stream differs from the crash-free reference"
    q = quarantine_counts(store, "s")
    for i in range(BATCHES):
        want = quarantine[i] if i < present else 0
        assert q.get(f"b{i}", 0) == want, f"batch {i}: {q.get(f'b{i}', 0)} quarantined rows"
    if complete:
        assert present == BATCHES
    return present


def crash_trial(tmp_path, reference, *, failpoint=None, kill_after=None, label="") -> dict:
    path = str(tmp_path / "s")
    make_store(path)
    run = run_after_ready(WRITER, [path, str(BATCHES)], failpoint=failpoint,
                          kill_after=kill_after)
    assert run.killed or run.returncode == 0, run.stderr
    present = verify(path, run.acked, reference)
    again = run_after_ready(WRITER, [path, str(BATCHES)])
    assert again.returncode == 0, again.stderr
    verify(path, [str(i) for i in range(BATCHES)], reference, complete=True)
    return record_kill_trial("append", run, present, failpoint=failpoint, kill_after=kill_after,
                             label=label)


APPEND_POINTS = [p for p in POINTS if p.startswith("append.")]


COMMIT_STEP_KILLS = [
    ("append.files_written", 3),
    ("append.sides_committed", 1),  # the first quarantine commit: table created, never pinned
    ("append.side_applied", 5),     # between the two index flushes of one append
    ("append.segment_written", 4),
    ("append.committed", 6),
]
"""A kill at every commit step of an append: (failpoint, the step's n-th pass)."""


def test_commit_step_kills_cover_every_append_step():
    assert {p for p, _ in COMMIT_STEP_KILLS} == set(APPEND_POINTS)


@pytest.mark.parametrize(("point", "n"), COMMIT_STEP_KILLS)
def test_kill_at_commit_steps(tmp_path, reference, point, n):
    out = crash_trial(tmp_path, reference, failpoint=f"{point}:{n}")
    assert out["killed"]


def test_kill_at_random_time(tmp_path, reference):
    """A kill at a random time inside the work (the slow suite draws many more)."""
    crash_trial(tmp_path, reference, kill_after=random.Random(7).uniform(0.05, 2.0))


def test_vacuum_removes_only_crash_leftovers(tmp_path):
    """After a kill between writing an append's files and committing it, vacuum finds the
    leftover event files and tree segment, removes exactly what its dry run listed, and every
    version of the stream still reads as before."""
    from replaydb.store.vacuum import vacuum_stream

    path = str(tmp_path / "s")
    make_store(path)
    run = run_after_ready(WRITER, [path, str(BATCHES)], failpoint="append.segment_written:4")
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


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(24))
def test_kill_many_trials(tmp_path, reference, seed):
    rng = random.Random(2000 + seed)
    if seed % 2 == 0:
        point = APPEND_POINTS[(seed // 2) % len(APPEND_POINTS)]
        crash_trial(tmp_path, reference, failpoint=f"{point}:{rng.randint(1, BATCHES)}",
                    label=f"seed {seed}")
    else:
        crash_trial(tmp_path, reference, kill_after=rng.uniform(0.05, 4.0), label=f"seed {seed}")
