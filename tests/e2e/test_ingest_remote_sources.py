"""Ingest sources named by object-store URIs, against a real S3 endpoint: a glob of gzipped CSV
files, a folder of Parquet files and a Delta table, read by the Spark tasks through the URI.
The stream must equal the same ingest from the same files on the local disk; re-running it is
recognised as done; a missing source, a pattern outside the last part and an empty glob are
clear errors naming the URI."""

from __future__ import annotations

import gzip
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import replaydb
from replaydb.cli import main as cli_main
from replaydb.errors import UsageError
from replaydb.ingest.job import ingest
from replaydb.store.mirror import CacheOptions
from replaydb.store.store import Store
from tests.remote_cases import batch

pytestmark = pytest.mark.spark


def _sources(root: Path) -> Path:
    """``csv/part-{0,1}.csv.gz`` (one bad row), ``pq/{a,b}.parquet`` plus a ``_SUCCESS``
    marker, and a Delta table ``delta/`` under ``root``; returns ``root``."""
    from deltalake import write_deltalake

    (root / "csv").mkdir(parents=True)
    for p in range(2):
        text = batch(p, 3000).to_pandas().to_csv(index=False)
        if p == 1:
            lines = text.splitlines()
            lines[5] = "never,1,0.5"
            text = "\n".join(lines) + "\n"
        (root / "csv" / f"part-{p}.csv.gz").write_bytes(gzip.compress(text.encode()))
    (root / "pq").mkdir()
    pq.write_table(batch(2, 3000), root / "pq" / "a.parquet")
    pq.write_table(batch(3, 3000), root / "pq" / "b.parquet")
    (root / "pq" / "_SUCCESS").write_bytes(b"")
    write_deltalake(str(root / "delta"), batch(4, 3000))
    write_deltalake(str(root / "delta"), batch(5, 3000), mode="append")
    return root


def _ingest_all(store, prefix: str, spark, **kw) -> list:  # noqa: ANN001
    runs = [([f"{prefix}/csv/*.csv.gz"], "csv"), ([f"{prefix}/pq"], "auto"),
            ([f"{prefix}/delta"], "auto")]
    return [ingest(store, "ev", srcs, fmt=fmt, time_unit="ms", spark=spark, quiet=True, **kw)
            for srcs, fmt in runs]


def test_sources_on_s3_ingest_as_local_files(s3, tmp_path, spark) -> None:
    root = _sources(tmp_path / "raw")
    bucket = f"raw-{uuid.uuid4().hex[:8]}"
    prefix = s3.upload(root, f"s3://{bucket}/in")
    local = replaydb.open(tmp_path / "local", create=True)
    _ingest_all(local, str(root), spark)
    # a local store reading the sources through their URIs, with the options given
    twin = replaydb.open(tmp_path / "twin", create=True)
    got = _ingest_all(twin, prefix, spark, source_options=s3.options)
    assert [r.events for r in got] == [5999, 6000, 6000]
    assert [r.quarantined for r in got] == [1, 0, 0]
    want = local.stream("ev").read()
    assert twin.stream("ev").read().equals(want)
    bad = twin.stream("ev").side("quarantine").read()
    assert bad.column("source").to_pylist() == [f"{prefix}/csv/part-1.csv.gz"]
    assert bad.column("row").to_pylist() == [5]
    # the same sources again: the batch is recognised, nothing changes
    assert all(r.skipped for r in _ingest_all(twin, prefix, spark, source_options=s3.options))
    # a store on S3 takes its own options for sources on S3, through the store
    uri = f"s3://{bucket}/store"
    remote = Store(uri, storage_options=s3.options, create=True,
                   cache=CacheOptions(dir=str(tmp_path / "cache")))
    _ingest_all(remote, prefix, spark, through_store=True)
    reader = Store(uri, storage_options=s3.options, cache=CacheOptions(dir=str(tmp_path / "r")))
    assert reader.stream("ev").read().equals(want)


def test_bad_source_uris_are_clear(s3, tmp_path, spark, capsys) -> None:
    bucket = f"raw-{uuid.uuid4().hex[:8]}"
    s3.bucket(bucket)
    store = replaydb.open(tmp_path / "s", create=True)
    cases = [(f"s3://{bucket}/none.csv", "does not exist"),
             (f"s3://{bucket}/in/*.csv", "no object matches"),
             (f"s3://{bucket}/*/x.csv", "only be in the last part"),
             (f"s3://{bucket}", "names a bucket")]
    for src, words in cases:
        with pytest.raises(UsageError, match=words):
            ingest(store, "ev", [src], spark=spark, quiet=True, source_options=s3.options)
    # from the CLI, with --storage-option for the sources of a local store
    flags = [f"--storage-option={k}={v}" for k, v in s3.options.items()]
    assert cli_main(["ingest", str(tmp_path / "s"), "ev", cases[0][0], *flags]) == 2
    err = capsys.readouterr().err
    assert cases[0][0] in err and "does not exist" in err
    pq.write_table(batch(0, 100), tmp_path / "one.parquet")
    s3.upload(tmp_path / "one.parquet", f"s3://{bucket}/in/one.parquet")
    assert cli_main(["ingest", str(tmp_path / "s"), "ev", f"s3://{bucket}/in/one.parquet",
                     "--time-unit", "ms", "--master", "local[2]", *flags]) == 0
    assert store.stream("ev").read().num_rows == 100
    # options with neither a remote store nor a remote source are a mistake, said so
    assert cli_main(["ingest", str(tmp_path / "s"), "ev", str(tmp_path / "one.parquet"),
                     *flags]) == 2
    assert "neither the store nor a source" in capsys.readouterr().err
    assert pa.types.is_int64(store.stream("ev").read().schema.field("k").type)
