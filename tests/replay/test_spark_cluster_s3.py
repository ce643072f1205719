"""``--engine spark`` queries on a real Spark standalone cluster (a master and two workers started
by the test) over a store that lives only on the S3 endpoint: the local store it was copied from
is deleted first, the driver runs in its own process with its own cache, and the executors read
the data files through the store's URI (no directory is shared with them for the store). The
rows must equal local execution of the same store before it was copied, for every case's
parallel mode.

Slow (a cluster, a driver JVM, fresh Python workers): ``make test-all``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import replaydb
from tests.conftest import EXECUTOR_GUARD
from tests.spark_cases import QUERIES, STREAM, make_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("mr_part_one", "sase_equiv", "tps_part")
"""Cases of interval, partition (scan) and partition (key groups) parallelism."""


def test_cluster_reads_a_store_on_s3_only(s3, tmp_path: Path) -> None:
    from replaydb.replay.spark.cluster import LocalCluster

    local_path = tmp_path / "s"
    store = make_store(local_path, seed=33, n=5000)
    want = {n: replaydb.query(store, QUERIES[n], plan="replay",
                              **({"stream": STREAM[n]} if STREAM.get(n) else {})).table
            for n in NAMES}
    uri = s3.upload(local_path, "s3://cluster-only/store")
    shutil.rmtree(local_path)
    flags = [f"--storage-option={k}={v}" for k, v in s3.options.items()]
    with LocalCluster(workers=2, cores=1, memory="1g", work_dir=tmp_path / "cluster") as c:
        env = {**c.env, "REPLAYDB_SPARK_DRIVER_MEMORY": "1g",
               "REPLAYDB_SPARK_CONF": ";".join(f"{k}={v}" for k, v in EXECUTOR_GUARD.items())}
        for name in NAMES:
            out = tmp_path / f"{name}.parquet"
            cmd = [sys.executable, "-m", "replaydb", "query", uri, QUERIES[name], "--engine",
                   "spark", "--master", c.url, "--plan", "replay", "--format", "parquet",
                   "--output", str(out), "--cache-dir", str(tmp_path / "driver-cache"), *flags]
            if STREAM.get(name):
                cmd += ["--stream", STREAM[name]]
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=600)
            assert proc.returncode == 0, proc.stderr[-4000:]
            got = pq.read_table(out)
            expected = want[name]
            assert got.num_rows == expected.num_rows > 0, name
            cols = [c for c in expected.column_names if c in got.column_names]
            key = [(c, "ascending") for c in cols if not c.startswith("match")]
            assert got.select(cols).sort_by(key).equals(
                expected.cast(got.schema).select(cols).sort_by(key)), name
    assert not list((tmp_path / "driver-cache").rglob("part-*.parquet"))
