"""Crash safety of the index write paths of a stream: creation (back-fill), flush, compaction.

A stream with a base of stored events gets small batches (some events late within the bound, so
index flushes carry seq-range tombstones). A child process runs one of three workloads and is
SIGKILLed at a failpoint or at a random time:

* ``create`` - ``create_index`` (local engine) on three columns, one after the other, with an
  append after each; killed while back-filling, between the back-fill commit and the manifest
  commit (``index.backfilled``) or after it (``index.committed``);
* ``flush`` - appends to a stream with two indexes; killed after one index flush
  (``append.side_applied``) or after both (``append.sides_committed``), before the events
  commit;
* ``compact`` - an append then a full ``compact`` of both indexes, repeated; killed inside a
  compaction, between an index's compaction commit and the manifest commit
  (``compact.index_committed``), after the manifest commit, or at random times.

After every kill: the store opens; ``Store.check`` passes (it compares every pinned index with the
data, entry for entry); the batches present are a prefix containing every acknowledged one, and
the events equal a crash-free reference's at that prefix (checksums over every column); every
acknowledged index is pinned; then the child is run again and completes the work (appends are
exactly-once by batch id, an index already pinned is not built again), after which no index
directory is left that the manifest does not pin, and a final full compaction leaves one run per
index with ``check`` still passing.
"""

from __future__ import annotations

import random
import shutil
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.indexes.manage import compact, create_index
from replaydb.store.schema import Attribute, StreamSchema
from tests.crash import record_kill_trial, run_after_ready, table_digest

BASE = 60_000
BATCHES = 10
SIZE = 50
LATENESS = 100
CREATE_COLUMNS = ("a", "b", "c")


def make_batch(i: int) -> pa.Table:
    """Batch ``i``: ``SIZE`` events with ``a == i``; from the second on, three are late."""
    rng = np.random.default_rng(i)
    t = BASE * 2 + i * 100 + np.arange(SIZE, dtype=np.int64)
    if i >= 1:
        t[:3] -= 60
    t.sort()
    return pa.table({"t": t, "a": np.full(SIZE, i, dtype=np.int64),
                     "b": rng.normal(size=SIZE).round(4),
                     "c": [f"c{(i * 7 + j) % 31}" for j in range(SIZE)]})


def base_table() -> pa.Table:
    rng = np.random.default_rng(99)
    return pa.table({"t": np.arange(BASE, dtype=np.int64) * 2,
                     "a": np.full(BASE, -1, dtype=np.int64),
                     "b": rng.normal(size=BASE).round(4),
                     "c": [f"c{j % 97}" for j in range(BASE)]})


def append_batch(store, i: int):
    return store.append("s", make_batch(i), batch_id=f"b{i}")


def pinned(store, column: str) -> bool:
    return store.stream("s").manifest.side_table(f"index/{column}") is not None


CHILD = textwrap.dedent("""
    import replaydb
    from replaydb.indexes.manage import compact, create_index
    from tests.reliability.test_reliability_crash_index import (BATCHES, CREATE_COLUMNS, append_batch,
                                                    pinned)
    store = replaydb.open(sys.argv[1])
    mode = sys.argv[2]
    print("READY", flush=True)
    if mode == "create":
        for j, col in enumerate(CREATE_COLUMNS):
            if not pinned(store, col):
                print("PHASE create", flush=True)
                create_index(store, "s", col)
            print("ACK index", col, flush=True)
            print("PHASE append", flush=True)
            append_batch(store, j)
            print("ACK batch", j, flush=True)
    for i in range(BATCHES):
        print("PHASE append", flush=True)
        append_batch(store, i)
        print("ACK batch", i, flush=True)
        if mode == "compact":
            print("PHASE compact", flush=True)
            compact(store, "s", full=True)
            print("ACK compact", i, flush=True)
    print("PHASE done", flush=True)
""")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """Stores to copy per trial (with and without indexes) and the crash-free reference:
    the digest of the events after each prefix of batches."""
    root = tmp_path_factory.mktemp("index-template")
    plain = root / "plain"
    store = replaydb.open(plain, create=True)
    store.create_stream("s", StreamSchema(
        (Attribute("a", "int64"), Attribute("b", "float64"), Attribute("c", "string")),
        lateness=LATENESS, leaf_capacity=256, fanout=8))
    store.append("s", base_table(), batch_id="base")
    indexed = root / "indexed"
    shutil.copytree(plain, indexed)
    ix = replaydb.open(indexed)
    create_index(ix, "s", "a")
    create_index(ix, "s", "c")
    shutil.copytree(plain, root / "reference")
    ref = replaydb.open(root / "reference")
    digests = [table_digest(ref.stream("s").read())]
    for i in range(BATCHES):
        append_batch(ref, i)
        digests.append(table_digest(ref.stream("s").read()))
    return {"plain": plain, "indexed": indexed, "digests": digests}


def _acked(run, kind: str) -> list[str]:
    return [a.split()[1] for a in run.acked if a.startswith(kind + " ")]


def verify(path, run_acked: list[str], template, *, complete: bool = False) -> int:
    store = replaydb.open(path)
    assert store.check("s") == {"s": []}
    data = store.stream("s").read(columns=["a"])
    a = data.column("a").to_numpy()
    counts = np.bincount(a[a >= 0], minlength=BATCHES)
    assert int((a == -1).sum()) == BASE, "base events lost or duplicated"
    present = int((counts > 0).sum())
    assert np.all(counts[:present] == SIZE) and np.all(counts[present:] == 0), counts.tolist()
    acked_batches = [a for a in run_acked if a.startswith("batch ")]
    # 'create' acknowledges batches 0..2 twice (once after each index): count distinct ones
    n_acked = len({a.split()[1] for a in acked_batches})
    assert n_acked <= present <= n_acked + 1, (n_acked, present)
    assert table_digest(store.stream("s").read()) == template["digests"][present], \
        "the events differ from the crash-free reference"
    for entry in run_acked:
        if entry.startswith("index "):
            assert pinned(store, entry.split()[1]), f"acknowledged {entry} is not pinned"
    if complete:
        assert present == BATCHES
    return present


def crash_trial(tmp_path, template, mode: str, *, failpoint=None, kill_after=None,
                label="") -> dict:
    path = tmp_path / "s"
    shutil.copytree(template["plain" if mode == "create" else "indexed"], path)
    run = run_after_ready(CHILD, [str(path), mode], failpoint=failpoint, kill_after=kill_after)
    assert run.killed or run.returncode == 0, run.stderr
    present = verify(path, run.acked, template)
    again = run_after_ready(CHILD, [str(path), mode])
    assert again.returncode == 0, again.stderr
    verify(path, again.acked, template, complete=True)
    store = replaydb.open(path)
    snap = store.stream("s")
    columns = CREATE_COLUMNS if mode == "create" else ("a", "c")
    assert sorted(snap.indexes()) == sorted(columns)
    on_disk = sorted(p.name for p in (store.stream_dir("s") / "indexes").iterdir())
    assert on_disk == sorted(columns), f"index directories nobody pins: {on_disk}"
    out = compact(store, "s", full=True)
    assert all(d["runs_after"] <= 1 for d in out["indexes"].values()), out
    assert store.check("s") == {"s": []}
    # an index answer equals a filter of the data it indexes
    snap = store.stream("s")
    data = snap.read(columns=["a"])
    got = snap.side("index/a").range(2, 5, order="seq").seq
    a = data.column("a").to_numpy()
    assert np.array_equal(got, data.column("seq").to_numpy()[(a >= 2) & (a <= 5)])
    result = record_kill_trial(f"index-{mode}", run, present, failpoint=failpoint,
                               kill_after=kill_after, label=label)
    return result


# --------------------------------------------------------------------------- default suite
def test_create_killed_between_backfill_and_pin(tmp_path, template):
    assert crash_trial(tmp_path, template, "create", failpoint="index.backfilled:2")["killed"]


def test_flush_killed_between_the_two_index_flushes(tmp_path, template):
    assert crash_trial(tmp_path, template, "flush", failpoint="append.side_applied:3")["killed"]


def test_compact_killed_between_index_and_manifest_commit(tmp_path, template):
    assert crash_trial(tmp_path, template, "compact",
                       failpoint="compact.index_committed:3")["killed"]


# --------------------------------------------------------------------------- many trials
def seeded_trial(tmp_path, template, workload: str, seed: int, rng: random.Random,
                 points: tuple[tuple[str, int], tuple[str, int]]) -> None:
    """Trial ``seed`` of ``workload``: ``seed % 3`` 0 or 1 kills the child at the first or the
    second of ``points`` (failpoint name, highest hit count: the hit is uniform in 1..that), 2
    kills it after a random time in [0, 4) s."""
    label = f"seed {seed}"
    if seed % 3 < 2:
        name, most = points[seed % 3]
        crash_trial(tmp_path, template, workload, label=label,
                    failpoint=f"{name}:{rng.randint(1, most)}")
    else:
        crash_trial(tmp_path, template, workload, label=label, kill_after=rng.uniform(0.0, 4.0))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_create_many_trials(tmp_path, template, seed):
    seeded_trial(tmp_path, template, "create", seed, random.Random(3000 + seed),
                 (("index.backfilled", 3), ("index.committed", 3)))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_flush_many_trials(tmp_path, template, seed):
    rng = random.Random(4000 + seed)
    if seed % 2 == 0:
        point = f"append.side_applied:{rng.randint(1, 2 * BATCHES)}"
    else:
        point = f"append.sides_committed:{rng.randint(1, BATCHES)}"
    assert crash_trial(tmp_path, template, "flush", failpoint=point,
                       label=f"seed {seed}")["killed"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(21))
def test_compact_many_trials(tmp_path, template, seed):
    seeded_trial(tmp_path, template, "compact", seed, random.Random(5000 + seed),
                 (("compact.index_committed", 2 * BATCHES), ("compact.committed", BATCHES)))
