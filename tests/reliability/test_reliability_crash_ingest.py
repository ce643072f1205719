"""Crash safety of the Spark ingestion job (``replaydb.ingest.job.ingest``).

A stream with stored events and two secondary indexes receives three source files, one ingest
each, with explicit batch ids. Every file holds good rows, rows late within the lateness bound
(the job rewrites the stored tail and tombstones both indexes), one row later than the bound and
two malformed rows (quarantined). A child process (its own Spark, ``local[1]``) runs the ingests
and is SIGKILLed - the whole process group, JVM included - at the failpoints
``ingest.files_written`` (data files and index runs written, nothing committed) and
``ingest.before_commit`` (index and quarantine tables committed, events not), or at a random
time after Spark is up. After every kill:

* the store opens and ``Store.check`` passes (both indexes checked against the data);
* the batches present are a prefix containing every acknowledged ingest, and the events equal a
  crash-free reference's at that prefix (checksum over every column, seq included);
* every present batch has exactly its quarantined rows, the others none;
* re-running the same ingests (same batch ids) completes the work exactly once.
"""

from __future__ import annotations

import random
import shutil
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import replaydb
from replaydb.ingest.job import ingest
from replaydb.store.schema import Attribute, StreamSchema
from tests.crash import quarantine_counts, record_kill_trial, run_after_ready, table_digest

pytestmark = pytest.mark.spark

FILES = 3
GOOD = 300
BASE = 2000
LATENESS = 100
QUARANTINED = 3  # per file: one later than the bound, one NaN, one without a time
CHILD_ENV = {
    # a faster JVM start for the short-lived child (client compiler only, serial GC)
    "JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "REPLAYDB_SPARK_DRIVER_MEMORY": "1g",
}


def source_table(j: int) -> pa.Table:
    rng = np.random.default_rng(j)
    start = BASE * 2 + 2 + j * 900              # the stream ends 3 or 4 units before start
    t = start + np.arange(GOOD, dtype=np.int64) * 3
    t[:3] = start - 50                            # late, within the bound
    ts: list[int | None] = [start - 500, *t.tolist()]   # later than the bound
    x = [0.0, *rng.normal(size=GOOD).round(4).tolist()]
    ts += [start + 10, None]                      # a NaN value, a missing time
    x += [float("nan"), 1.0]
    n = len(ts)
    return pa.table({"ts": pa.array(ts, pa.int64()), "b": pa.array([j] * n, pa.int64()),
                     "x": pa.array(x, pa.float64()),
                     "k": pa.array(rng.integers(0, 40, n), pa.int64()),
                     "name": pa.array([f"n{(j + i) % 9}" for i in range(n)], pa.string())})


def run_ingest(store, sources: list[str], j: int, spark=None, through_store=None):
    return ingest(store, "ev", [sources[j]], time_column="ts", batch_id=f"i{j}", quiet=True,
                  spark=spark, master=None if spark is not None else "local[1]",
                  rows_per_partition=200, through_store=through_store)


CHILD = textwrap.dedent("""
    import os
    import replaydb
    from replaydb.spark import get_spark
    from tests.reliability.test_reliability_crash_ingest import run_ingest
    store = replaydb.open(sys.argv[1])
    sources = sys.argv[2:]
    through = os.environ.get("CRASH_TRIAL_THROUGH_STORE") == "1" or None  # a cluster's way
    get_spark("local[1]", quiet=True).range(10).count()
    print("READY", flush=True)
    for j in range(len(sources)):
        run_ingest(store, sources, j, through_store=through)
        print("ACK", j, flush=True)
    print("PHASE done", flush=True)
""")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    from replaydb.indexes.manage import create_index

    root = tmp_path_factory.mktemp("ingest-template")
    sources = []
    for j in range(FILES):
        p = root / f"src{j}.parquet"
        pq.write_table(source_table(j), p)
        sources.append(str(p))
    store = replaydb.open(root / "store", create=True)
    store.create_stream("ev", StreamSchema(
        (Attribute("b", "int64"), Attribute("x", "float64"), Attribute("k", "int64"),
         Attribute("name", "string")), time_column="ts", lateness=LATENESS,
        leaf_capacity=64, fanout=4))
    rng = np.random.default_rng(7)
    store.append("ev", pa.table({"ts": np.arange(BASE, dtype=np.int64) * 2,
                                 "b": np.full(BASE, -1), "x": rng.normal(size=BASE),
                                 "k": rng.integers(0, 40, BASE),
                                 "name": [f"n{i % 9}" for i in range(BASE)]}), batch_id="base")
    create_index(store, "ev", "k")
    create_index(store, "ev", "name")
    # the reference: the same files through the in-process append path, which applies the
    # same rules (a cross-check of the two write paths as well)
    shutil.copytree(root / "store", root / "reference")
    ref = replaydb.open(root / "reference")
    digests = [table_digest(ref.stream("ev").read())]
    for j in range(FILES):
        res = ref.append("ev", pq.read_table(sources[j]), batch_id=f"i{j}", bad="quarantine",
                         late="quarantine")
        assert (res.events, res.quarantined, res.late) == (GOOD, QUARANTINED, 3)
        digests.append(table_digest(ref.stream("ev").read()))
    assert ref.check("ev") == {"ev": []}
    return {"store": root / "store", "sources": sources, "digests": digests}


def verify(path, acked: list[str], template, *, complete: bool = False) -> int:
    store = replaydb.open(path)
    assert store.check("ev") == {"ev": []}
    b = store.stream("ev").read(columns=["b"]).column("b").to_numpy()
    assert int((b == -1).sum()) == BASE
    counts = np.bincount(b[b >= 0], minlength=FILES)
    present = int((counts > 0).sum())
    assert np.all(counts[:present] == GOOD) and np.all(counts[present:] == 0), counts.tolist()
    assert len(acked) <= present <= len(acked) + 1, (acked, present)
    assert table_digest(store.stream("ev").read()) == template["digests"][present]
    q = quarantine_counts(store, "ev")
    for j in range(FILES):
        assert q.get(f"i{j}", 0) == (QUARANTINED if j < present else 0), q
    if complete:
        assert present == FILES
    return present


def crash_trial(tmp_path, template, spark, *, failpoint=None, kill_after=None,
                label="") -> dict:
    path = tmp_path / "store"
    shutil.copytree(template["store"], path)
    run = run_after_ready(CHILD, [str(path), *template["sources"]], failpoint=failpoint,
                          kill_after=kill_after, env=CHILD_ENV)
    assert run.killed or run.returncode == 0, run.stderr
    present = verify(path, run.acked, template)
    store = replaydb.open(path)
    for j in range(FILES):  # re-run the same ingests: acknowledged ones are skipped
        res = run_ingest(store, template["sources"], j, spark)
        assert res.skipped == (j < present)
    verify(path, [str(j) for j in range(FILES)], template, complete=True)
    return record_kill_trial("ingest", run, present, failpoint=failpoint, kill_after=kill_after,
                             label=label)


# Every trial starts a Spark driver in a child (tens of seconds on a busy machine), so all of
# them are slow-marked; the default suite covers the same recovery code through the append
# trials and test_ingest.py's killed-ingest test.
@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_ingest_many_trials(tmp_path, template, spark, seed):
    rng = random.Random(6000 + seed)
    if seed == 0:  # the first ingest committed, the second killed just before its commit
        out = crash_trial(tmp_path, template, spark, failpoint="ingest.before_commit:2",
                          label="seed 0")
        assert out["killed"] and out["acked"] == 1
    elif seed % 4 == 0:
        crash_trial(tmp_path, template, spark, label=f"seed {seed}",
                    failpoint=f"ingest.files_written:{rng.randint(1, FILES)}")
    elif seed % 4 == 1:
        crash_trial(tmp_path, template, spark, label=f"seed {seed}",
                    failpoint=f"ingest.before_commit:{rng.randint(1, FILES)}")
    else:
        crash_trial(tmp_path, template, spark, label=f"seed {seed}",
                    kill_after=rng.uniform(0.0, 30.0))
