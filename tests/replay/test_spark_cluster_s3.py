"""A real Spark standalone cluster (a master and two workers started by the test) over a store
that lives only on the S3 endpoint. ``--engine spark`` queries: the local store it was copied
from is deleted first, the driver runs in its own process with its own cache, and the executors
read the data files through the store's URI (no directory is shared with them for the store);
the rows must equal local execution of the same store before it was copied, for every case's
parallel mode. ``replaydb ingest`` on the cluster, from sources on S3: the tasks read the
sources and stage, write and read back through the URIs; then ``replaydb index`` on the
cluster, whose tasks read the data files and upload the runs; the stream must equal a local
twin written by appends.

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
from replaydb.replay.spark.cluster import LocalCluster
from replaydb.store.mirror import CacheOptions
from replaydb.store.store import Store
from tests.conftest import EXECUTOR_GUARD
from tests.remote_cases import QUERY, ingest_sources, ingested_twin, same
from tests.spark_cases import QUERIES, STREAM, make_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("mr_part_one", "sase_equiv", "tps_part")
"""Cases of interval, partition (scan) and partition (key groups) parallelism."""


def test_cluster_reads_a_store_on_s3_only(s3, tmp_path: Path) -> None:
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


def _cli(c, args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:  # noqa: ANN001
    env = {**c.env, "REPLAYDB_SPARK_DRIVER_MEMORY": "1g",
           "REPLAYDB_SPARK_CONF": ";".join(f"{k}={v}" for k, v in EXECUTOR_GUARD.items())}
    proc = subprocess.run([sys.executable, "-m", "replaydb", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def test_cluster_ingests_into_a_store_on_s3_only(s3, tmp_path: Path) -> None:
    uri = "s3://cluster-ingest/store"
    s3.bucket("cluster-ingest")
    src, src2 = ingest_sources(tmp_path)
    raw = s3.upload(src, "s3://cluster-ingest/raw/events.csv")
    raw2 = s3.upload(src2, "s3://cluster-ingest/raw/late.parquet")
    src.unlink()
    src2.unlink()
    cache = tmp_path / "driver-cache"
    flags = [f"--storage-option={k}={v}" for k, v in s3.options.items()]
    flags += ["--cache-dir", str(cache)]
    with LocalCluster(workers=2, cores=1, memory="1g", work_dir=tmp_path / "cluster") as c:
        ingest = ["ingest", uri, "ev", "--time", "t", "--time-unit", "ms", "--lateness",
                  "10000000", "--index", "k", "--rows-per-partition", "5000", "--master", c.url,
                  *flags]
        _cli(c, [*ingest[:3], raw, *ingest[3:]], tmp_path)
        # the workers wrote the index runs and quarantine files: none is in the driver's cache
        assert not list(cache.rglob("indexes/k/*.parquet"))
        assert not list(cache.rglob("quarantine/*.parquet"))
        _cli(c, [*ingest[:3], raw2, *ingest[3:]], tmp_path)  # rewrites the stored tail
        # a Spark-built index: the workers read the data files and upload the runs
        _cli(c, ["index", uri, "ev", "v", "--master", c.url, *flags], tmp_path)
        assert not list(cache.rglob("indexes/v/*.parquet"))
        out = tmp_path / "rows.parquet"
        _cli(c, ["query", uri, QUERY, "--engine", "spark", "--master", c.url, "--format",
                 "parquet", "--output", str(out), *flags], tmp_path)
    local = ingested_twin(tmp_path / "local", ("k", "v"))
    want = replaydb.query(local, QUERY, plan="replay").table
    assert pq.read_table(out).select(want.column_names).cast(want.schema).equals(want)
    reader = Store(uri, storage_options=s3.options, cache=CacheOptions(dir=str(tmp_path / "r")))
    same(local, reader)
    same(local, reader, queries=(QUERY.replace("k < 40", "v < 0.01"),))  # the index on v
    bad = reader.stream("ev").side("quarantine").read()
    assert bad.column("row").to_pylist() == [17]
    assert bad.column("source").to_pylist() == [raw]
    assert not [e for e in reader.location.list("streams/ev", recursive=True)
                if "/_staging/" in e.rel and e.size >= 0]
