"""``replaydb vacuum`` never removes what a readable version needs - also after Delta's log
cleanup.

Delta keeps a table's history in JSON commits and, every so often, a checkpoint; its log cleanup
(``delta.logRetentionDuration``, run by delta-rs and Spark after a checkpoint) deletes JSON commits
older than the retention that precede a checkpoint. The files those commits added are then listed
only in the checkpoint. The test makes a checkpoint, deletes the older JSON commits as the cleanup
would, and runs vacuum: every version still readable must read the same afterwards, and ``check``
must pass.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable

import replaydb
from replaydb.store.vacuum import vacuum_stream
from tests.crash import table_digest


def test_vacuum_after_log_cleanup_keeps_every_live_file(tmp_path):
    store = replaydb.open(tmp_path / "store", create=True)
    store.create_stream("s", pa.schema([("t", pa.int64()), ("x", pa.float64())]),
                        leaf_capacity=4, fanout=4, lateness=50)
    for i in range(8):  # small appends: files are rewritten and removed as the stream grows
        t = np.arange(i * 100, i * 100 + 20)
        if i % 3 == 2:
            t[:3] -= 40  # late: the tail is rewritten
        store.append("s", pa.table({"t": np.sort(t), "x": np.ones(20) * i}))
    events = store.stream("s").events_dir
    DeltaTable(str(events)).create_checkpoint()
    cp = store.stream("s").version
    for i in range(8, 11):
        store.append("s", pa.table({"t": np.arange(i * 100, i * 100 + 20), "x": np.ones(20)}))
    for f in (events / "_delta_log").glob("*.json"):  # what the log cleanup deletes
        if int(f.name[:20]) < cp:
            f.unlink()
    fresh = replaydb.open(store.path)
    readable = {v: table_digest(fresh.stream("s", v).read())
                for v in range(cp, fresh.stream("s").version + 1)}
    assert fresh.check("s") == {"s": []}
    done = vacuum_stream(fresh, "s")
    after = replaydb.open(store.path)
    assert after.check("s") == {"s": []}, done["files"]
    for v, digest in readable.items():
        assert table_digest(after.stream("s", v).read()) == digest
    assert vacuum_stream(after, "s")["files"] == []


def test_vacuum_removes_uncommitted_index_files_and_keeps_every_version(tmp_path):
    """A run file an index writer wrote but never committed (and its rank codes) is removed;
    the files of every index version - also those a compaction replaced, which older stream
    versions still read - stay, and every version reads the same afterwards."""
    import os

    from replaydb.indexes.lsm import LSMIndex
    from replaydb.indexes.maintenance import compact_stream_indexes
    from replaydb.indexes.manage import create_index

    store = replaydb.open(tmp_path / "store", create=True)
    store.create_stream("s", pa.schema([("t", pa.int64()), ("x", pa.float64())]),
                        leaf_capacity=4, fanout=4)
    rng = np.random.default_rng(0)
    store.append("s", pa.table({"t": np.arange(0, 50), "x": rng.random(50)}))
    create_index(store, "s", "x")
    for i in range(1, 4):
        store.append("s", pa.table({"t": np.arange(i * 50, i * 50 + 50), "x": rng.random(50)}))
    compact_stream_indexes(store.path, "s", full=True)
    ix = store.stream_dir("s") / "indexes" / "x"
    before = sorted(os.listdir(ix))
    # what an index writer that died before its commit leaves: a run file and its codes
    live = [n for n in before if n.endswith(".parquet")][0]
    orphan = "run-0000000099-0000000099-L00-p00000-0123456789abcdef.parquet"
    (ix / orphan).write_bytes((ix / live).read_bytes())
    (ix / (orphan + ".codes")).write_bytes((ix / (live + ".codes")).read_bytes())
    fresh = replaydb.open(store.path)
    versions = [v for v in range(1, fresh.stream("s").version + 1)
                if "x" in fresh.stream("s", v).indexes()]
    assert len(versions) >= 4  # the index's creation, three appends, the compaction
    answers = {v: sorted(fresh.stream("s", v).indexes()["x"].range(0.2, 0.7).seq.tolist())
               for v in versions}
    dry = vacuum_stream(fresh, "s", dry_run=True)
    want = sorted(f"indexes/x/{n}" for n in (orphan, orphan + ".codes"))
    assert sorted(f for f in dry["files"] if f.startswith("indexes/")) == want
    assert (ix / orphan).exists()
    done = vacuum_stream(fresh, "s")
    assert sorted(f for f in done["files"] if f.startswith("indexes/")) == want
    assert sorted(os.listdir(ix)) == before
    after = replaydb.open(store.path)
    assert after.check("s") == {"s": []}
    for v, got in answers.items():
        assert sorted(after.stream("s", v).indexes()["x"].range(0.2, 0.7).seq.tolist()) == got
    assert LSMIndex.open(ix).check() == []
    assert vacuum_stream(after, "s")["files"] == []


def test_cli_vacuum_in_a_fresh_process_removes_uncommitted_index_files(tmp_path):
    """``replaydb vacuum`` in a new process (nothing of the index layer imported yet) still finds
    the index tables' garbage: the store reaches the indexes only through the side-table kind
    ``replaydb`` wires in, never by naming them."""
    import json
    import os
    import subprocess
    import sys

    from replaydb.indexes.manage import create_index

    store = replaydb.open(tmp_path / "store", create=True)
    store.create_stream("s", pa.schema([("t", pa.int64()), ("x", pa.float64())]))
    store.append("s", pa.table({"t": np.arange(0, 50), "x": np.linspace(0, 1, 50)}))
    create_index(store, "s", "x")
    ix = store.stream_dir("s") / "indexes" / "x"
    before = sorted(os.listdir(ix))
    live = [n for n in before if n.endswith(".parquet")][0]
    orphan = "run-0000000099-0000000099-L00-p00000-0123456789abcdef.parquet"
    (ix / orphan).write_bytes((ix / live).read_bytes())
    r = subprocess.run([sys.executable, "-m", "replaydb", "vacuum", str(store.path), "s",
                        "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)[0]["files"] == [f"indexes/x/{orphan}"]
    assert sorted(os.listdir(ix)) == before
