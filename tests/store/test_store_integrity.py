"""`check` finds corruption; readers never see a partial batch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import replaydb
from replaydb.store.schema import Attribute, StreamSchema
from tests.helpers import batch


def _store(tmp_path, n=400):
    store = replaydb.open(tmp_path / "s", create=True)
    store.create_stream("s", StreamSchema((Attribute("x", "float64"), Attribute("k", "int64")),
                                          time_column="ts", leaf_capacity=10, fanout=4))
    for i in range(4):
        t = np.arange(i * n, (i + 1) * n)
        store.append("s", batch(t, t * 0.5, t % 7))
    return store


def test_check_catches_corrupted_aggregate(tmp_path):
    store = _store(tmp_path)
    assert store.check("s")["s"] == []
    snap = store.stream("s")
    seg = snap.dir / snap.manifest.tree_head
    tbl = pq.read_table(seg)
    x_sum = tbl.column("x.sum").to_numpy().copy()
    x_sum[3] += 1.0
    bad = tbl.set_column(tbl.schema.get_field_index("x.sum"), "x.sum", pa.array(x_sum))
    pq.write_table(bad.replace_schema_metadata(tbl.schema.metadata), seg)
    fresh = replaydb.open(tmp_path / "s")
    problems = fresh.check("s")["s"]
    assert problems and any("x.sum" in p for p in problems), problems


def test_check_catches_missing_file(tmp_path):
    store = _store(tmp_path)
    snap = store.stream("s")
    victim = sorted(snap.files.values(), key=lambda f: f.seq_min)[1]
    (snap.events_dir / victim.path).unlink()
    problems = replaydb.open(tmp_path / "s").check("s")["s"]
    assert any(victim.path in p and "missing" in p for p in problems), problems


def test_check_catches_data_changed_under_the_tree(tmp_path):
    store = _store(tmp_path)
    snap = store.stream("s")
    f = sorted(snap.files.values(), key=lambda f: f.seq_min)[0]
    path = snap.events_dir / f.path
    tbl = pq.read_table(path)
    x = tbl.column("x").to_numpy().copy()
    x[5] = 1e9
    changed = tbl.set_column(tbl.schema.get_field_index("x"), "x", pa.array(x))
    pq.write_table(changed, path, row_group_size=10)
    problems = replaydb.open(tmp_path / "s").check("s")["s"]
    assert problems, "a changed value must be found"


def test_check_reports_pages_it_cannot_decode(tmp_path):
    """A data file whose pages are garbage (footer intact) is a problem named by its file, not
    a crash of ``check``; the other files are still checked."""
    from tests.helpers import destroy_column

    store = _store(tmp_path)
    snap = store.stream("s")
    assert destroy_column(snap, "x") > 0  # every file's x pages
    problems = replaydb.open(tmp_path / "s").check("s")["s"]
    unreadable = [p for p in problems if "unreadable" in p]
    assert len(unreadable) == len(snap.files), problems
    assert all(any(f.path in p for p in unreadable) for f in snap.files.values())


WRITER = textwrap.dedent("""
    import os, sys, time, numpy as np, pyarrow as pa, replaydb
    store = replaydb.open(sys.argv[1])
    deadline = time.monotonic() + 120
    while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
        time.sleep(0.01)  # the reader has read once (and loaded its code): start writing
    for i in range(40):
        n = 97
        t = np.arange(i * n, (i + 1) * n)
        store.append("s", pa.table({"ts": t, "x": np.full(n, float(i)), "k": np.full(n, i)}))
""")


def test_reader_never_sees_a_partial_batch(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    store.create_stream("s", StreamSchema((Attribute("x", "float64"), Attribute("k", "int64")),
                                          time_column="ts", leaf_capacity=16, fanout=4))
    go = tmp_path / "go"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "s"), str(go)])
    seen = set()
    try:
        while proc.poll() is None or len(seen) < 2:
            reader = replaydb.open(tmp_path / "s", read_only=True)
            snap = reader.stream("s")
            n = snap.n_events
            seen.add(n)
            assert n % 97 == 0, f"version {snap.version} shows {n} events: a partial batch"
            data = snap.read()
            assert data.num_rows == n
            k = data.column("k").to_numpy()
            assert np.array_equal(k, np.repeat(np.arange(n // 97), 97))
            go.touch()  # the writer waits for the first read, so writes happen under reads
            if proc.poll() is not None:
                break
            time.sleep(0.01)
    finally:
        proc.wait(timeout=120)
    assert proc.returncode == 0
    assert replaydb.open(tmp_path / "s").stream("s").n_events == 40 * 97
    assert len(seen) >= 2
