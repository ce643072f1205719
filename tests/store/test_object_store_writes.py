"""Writing a store on an object store, against a real S3 endpoint.

Every write works on the store's local mirror and commits on the object store with a
conditional put (:mod:`replaydb.store.remotewrite`). A store written there must read exactly as
a local store written with the same calls; two writers on two "machines" (two store objects
with their own caches, so their local locks are unrelated) never both commit one version: the
loser gets a ConcurrentWriterError, nothing of its write becomes visible, and vacuum removes
what it uploaded.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import replaydb
from replaydb.cli import main as cli_main
from replaydb.errors import StoreError, StreamNotFound
from replaydb.indexes.manage import create_index
from replaydb.store.mirror import CacheOptions
from replaydb.store.store import Store
from replaydb.store.vacuum import vacuum_stream
from tests.remote_cases import batch, ingest_sources, ingested_twin, race, same, write_twins


def _uri() -> str:
    return f"s3://writes-{uuid.uuid4().hex[:10]}/store"


def _open(s3, uri: str, cache: Path, **kw) -> Store:
    return Store(uri, storage_options=s3.options, cache=CacheOptions(dir=str(cache)), **kw)


def _same(local: Store, remote_uri: str, s3, cache: Path) -> None:
    """A fresh reader of the remote store answers as the local twin, with every plan."""
    same(local, _open(s3, remote_uri, cache))


def test_appends_indexes_and_compaction_equal_a_local_twin(s3, tmp_path) -> None:
    uri = _uri()
    s3.bucket(uri[5:].split("/")[0])
    remote = _open(s3, uri, tmp_path / "w", create=True)
    local = replaydb.open(tmp_path / "local", create=True)
    write_twins(remote, local)
    _same(local, uri, s3, tmp_path / "r")
    # the mirror holds no data file: they went to the object store
    assert not list((tmp_path / "w").rglob("part-*.parquet"))
    # the Delta table on the object store is standard: delta-rs reads it in place
    from deltalake import DeltaTable

    dt = DeltaTable(f"{uri}/streams/ev/events", storage_options={
        **s3.options, "AWS_ALLOW_HTTP": "true"})
    assert dt.to_pyarrow_table().num_rows == 4 * 8000


def test_two_writers_never_commit_one_version(s3, tmp_path) -> None:
    uri = _uri()
    s3.bucket(uri[5:].split("/")[0])
    first = race(lambda u, c, **kw: _open(s3, u, c, **kw), uri, tmp_path)
    # a writer with an empty cache appends to the indexed stream another one wrote
    create_index(first, "ev", "k")
    _open(s3, uri, tmp_path / "c").append("ev", batch(3))
    again = _open(s3, uri, tmp_path / "r2")
    assert again.stream("ev").read().num_rows == 4 * 8000
    assert again.check() == {"ev": []}


def test_drop_stream_and_store_errors(s3, tmp_path) -> None:
    uri = _uri()
    bucket = uri[5:].split("/")[0]
    s3.bucket(bucket)
    store = _open(s3, uri, tmp_path / "w", create=True)
    store.append("ev", batch(0), time_unit="ms")
    store.append("other", batch(1), time_unit="ms")
    store.drop_stream("ev")
    reader = _open(s3, uri, tmp_path / "r")
    assert reader.streams() == ["other"]
    with pytest.raises(StreamNotFound):
        reader.stream("ev")
    assert not [i for i in s3.fs.get_file_info(
        __import__("pyarrow.fs").fs.FileSelector(f"{bucket}/store/streams/ev", recursive=True,
                                                 allow_not_found=True))]
    with pytest.raises(StoreError, match="is not a store"):
        _open(s3, f"s3://{bucket}/store/streams", tmp_path / "x", create=True)


@pytest.mark.spark
def test_cli_ingest_query_check_vacuum(s3, tmp_path, capsys, spark) -> None:
    uri = _uri()
    s3.bucket(uri[5:].split("/")[0])
    src = tmp_path / "events.parquet"
    pq.write_table(pa.concat_tables([batch(p) for p in range(3)]), src)
    flags = [f"--storage-option={k}={v}" for k, v in s3.options.items()]
    flags += ["--cache-dir", str(tmp_path / "cache")]
    assert cli_main(["ingest", uri, "ev", str(src), "--time", "t", "--time-unit", "ms",
                     "--lateness", "10000000", "--index", "k", "--master", "local[2]",
                     *flags]) == 0
    capsys.readouterr()
    local = replaydb.open(tmp_path / "local", create=True)
    local.create_stream("ev", batch(0).schema, time_unit="ms", lateness=10_000_000)
    local.append("ev", pa.concat_tables([batch(p) for p in range(3)]))
    create_index(local, "ev", "k")
    _same(local, uri, s3, tmp_path / "r")
    # a second ingest whose rows reach back before the stream's end rewrites the stored
    # tail, read from the object store
    late = batch(9, 500).set_column(0, "t", pa.array(np.arange(500, dtype=np.int64) * 97 + 1))
    src2 = tmp_path / "late.parquet"
    pq.write_table(late, src2)
    assert cli_main(["ingest", uri, "ev", str(src2), "--time", "t", "--lateness", "10000000",
                     *flags]) == 0
    local.append("ev", late, lateness=10_000_000)
    _same(local, uri, s3, tmp_path / "r3")
    assert cli_main(["check", uri, *flags]) == 0
    capsys.readouterr()
    assert cli_main(["vacuum", uri, "--min-age", "0", "--json", *flags]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["stream"] for r in out] == ["ev"]
    assert not list((tmp_path / "cache").rglob("part-*.parquet"))


@pytest.mark.slow
def test_a_long_log_is_mirrored_from_its_checkpoint(s3, tmp_path) -> None:
    """A stream of many commits: a new reader fetches the newest checkpoint and the commits
    after it, not the whole log; older versions still read (their commits fetched then)."""
    uri = _uri()
    s3.bucket(uri[5:].split("/")[0])
    writer = _open(s3, uri, tmp_path / "w", create=True)
    rows = 0
    for part in range(105):
        writer.append("ev", batch(part, 20), time_unit="ms")
        rows += 20
    reader = _open(s3, uri, tmp_path / "r")
    before = reader.location.counters.as_dict()
    snap = reader.stream("ev")
    used = reader.location.counters.as_dict()["requests"] - before["requests"]
    assert snap.version == 105 and snap.read().num_rows == rows
    assert used < 30, used  # not one request per commit
    logs = list((tmp_path / "r").rglob("_delta_log/*.json"))
    assert len(logs) < 20
    old = reader.stream("ev", version=5)
    assert old.read().num_rows == 5 * 20
    assert reader.check() == {"ev": []}


def test_ingest_through_the_store_touches_no_driver_directory(s3, tmp_path, spark) -> None:
    """``through_store`` (what a Spark cluster's ingest does): the tasks stage, write and read
    back through the object store. The stream equals its local twin, and the driver's mirror
    never holds what the tasks wrote (index runs, quarantine files; in the mirror's way they
    stay there), nor does staging outlive the job."""
    from replaydb.ingest.job import ingest

    uri = _uri()
    s3.bucket(uri[5:].split("/")[0])
    src, src2 = ingest_sources(tmp_path)
    cache = tmp_path / "cache"
    remote = _open(s3, uri, cache, create=True)
    for path in (src, src2):
        ingest(remote, "ev", [str(path)], time_unit="ms", lateness=10_000_000, index=["k"],
               spark=spark, quiet=True, through_store=True)
        stream = next(cache.rglob("streams/ev"))
        if path == src:  # the second ingest's driver writes a tombstone run (late rows)
            assert not list(stream.rglob("indexes/k/*.parquet"))
        assert not list(stream.rglob("quarantine/*.parquet"))
        assert not [p for p in stream.rglob("_staging/*") if p.is_file()]
    _same(ingested_twin(tmp_path / "local"), uri, s3, tmp_path / "r")
    listed = remote.location.list("streams/ev", recursive=True)
    assert not [e.rel for e in listed if "/_staging/" in e.rel and e.size >= 0]
    bad = _open(s3, uri, tmp_path / "q").stream("ev").side("quarantine").read()
    assert bad.num_rows == 1 and bad.column("row").to_pylist() == [17]
    # what a killed job staged on the object store is vacuum's, once old enough
    remote.location.put("streams/ev/_staging/killed/good-1.parquet", b"rows")
    assert vacuum_stream(remote, "ev")["files"] == []
    swept = vacuum_stream(remote, "ev", min_age=0)["files"]
    assert "_staging/killed/good-1.parquet" in swept
    assert not [e for e in remote.location.list("streams/ev", recursive=True)
                if "/_staging/" in e.rel and e.size >= 0]
    assert not list(cache.rglob("good-1.parquet"))  # never mirrored


def test_a_spark_built_index_of_a_remote_store_equals_a_local_one(s3, tmp_path, spark) -> None:
    """``replaydb index`` on Spark (not ``--local``) of a store on the object store: Python
    tasks read the data files through the URI (Spark's JVM cannot), and the index answers
    every plan as one built in this process on a local twin."""
    uri = _uri()
    s3.bucket(uri[5:].split("/")[0])
    remote = _open(s3, uri, tmp_path / "w", create=True)
    local = replaydb.open(tmp_path / "local", create=True)
    for store in (remote, local):
        for part in range(3):
            store.append("ev", batch(part), time_unit="ms")
    got = create_index(remote, "ev", "k", engine="spark", spark=spark)
    create_index(local, "ev", "k")
    assert got["entries"] == 3 * 8000
    _same(local, uri, s3, tmp_path / "r")
    assert not list((tmp_path / "w").rglob("part-*.parquet"))  # no data file downloaded


def test_an_index_new_at_ingest_is_back_filled_for_a_remote_stream(s3, tmp_path,
                                                                    spark) -> None:
    """``--index v`` at an ingest into a remote stream that already holds events: the stored
    events are indexed in the driver's process (its mirror holds no data file to hand Spark),
    and the index answers as a local twin's."""
    from replaydb.ingest.job import ingest

    uri = _uri()
    s3.bucket(uri[5:].split("/")[0])
    remote = _open(s3, uri, tmp_path / "w", create=True)
    local = replaydb.open(tmp_path / "local", create=True)
    for store in (remote, local):
        store.append("ev", batch(0), time_unit="ms")
    src = tmp_path / "more.parquet"
    pq.write_table(batch(1), src)
    ingest(remote, "ev", [str(src)], index=["v"], spark=spark, quiet=True)
    local.append("ev", batch(1))
    create_index(local, "ev", "v")
    query = """SELECT * FROM ev MATCH_RECOGNIZE (ORDER BY t MEASURES A.t AS at
      ONE ROW PER MATCH PATTERN (A B) DEFINE A AS v < 0.001, B AS k < 40)"""
    same(local, _open(s3, uri, tmp_path / "r"), queries=(query,))
    assert _open(s3, uri, tmp_path / "r2").stream("ev").indexes()["v"].num_entries == 16000
