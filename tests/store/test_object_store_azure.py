"""Stores on Azure Blob Storage, against a real endpoint: the Azurite emulator in its own
process on the loopback interface (:mod:`replaydb.bench.azurite`; installed with npm into the
cache on first use). The same store read and written there answers exactly as its local twin;
two writers never commit one version; failures are one-line errors naming the URI."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import replaydb
from replaydb.cli import main as cli_main
from replaydb.errors import ConcurrentWriterError, StoreError, UsageError
from replaydb.indexes.manage import compact, create_index
from replaydb.store.mirror import CacheOptions
from replaydb.store.store import Store
from replaydb.store.vacuum import vacuum_stream

QUERY = """SELECT * FROM ev MATCH_RECOGNIZE (ORDER BY t MEASURES A.t AS at, B.v AS bv
  ONE ROW PER MATCH PATTERN (A B) DEFINE A AS k = 5, B AS k < 40)"""
WINDOW = """SELECT window_start, COUNT(*) AS n, AVG(v) AS a, MAX(k) AS mk
  FROM TABLE(TUMBLE(DATA => TABLE ev, TIMECOL => DESCRIPTOR(t), SIZE => INTERVAL '5' SECOND))
  GROUP BY window_start, window_end"""


@pytest.fixture(scope="module")
def azure():
    """The emulator, with ``AZURITE_BLOB_STORAGE_URL`` pointing the emulator mode at it."""
    from replaydb.bench.azurite import AzuriteEndpoint, EmulatorUnavailable

    try:
        endpoint = AzuriteEndpoint()
    except EmulatorUnavailable as exc:
        pytest.skip(str(exc))
    saved = {k: os.environ.get(k) for k in endpoint.environment}
    os.environ.update(endpoint.environment)
    yield endpoint
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    endpoint.stop()


def _batch(part: int, n: int = 8000) -> pa.Table:
    rng = np.random.default_rng(part)
    t = (np.arange(n, dtype=np.int64) + part * n) * 5
    return pa.table({"t": t, "k": rng.integers(0, 100, n), "v": rng.random(n)})


def _uri(azure) -> str:
    return azure.container(f"w{uuid.uuid4().hex[:10]}") + "/store"


def _open(azure, uri: str, cache: Path, **kw) -> Store:
    return Store(uri, storage_options=azure.options, cache=CacheOptions(dir=str(cache)), **kw)


def _same(local: Store, remote_uri: str, azure, cache: Path) -> None:
    """A fresh reader of the remote store answers as the local twin, with every plan."""
    reader = _open(azure, remote_uri, cache)
    for plan in ("replay", "auto", "all", "optimal"):
        want = replaydb.query(local, QUERY, plan=plan).table
        assert replaydb.query(reader, QUERY, plan=plan).table.equals(want), plan
    for plan in ("replay", "auto"):
        want = replaydb.query(local, WINDOW, plan=plan).table
        assert replaydb.query(reader, WINDOW, plan=plan).table.equals(want), plan
    assert reader.check() == {"ev": []}
    assert reader.stats("ev")[0]["events"] == local.stats("ev")[0]["events"]


def test_appends_indexes_and_compaction_equal_a_local_twin(azure, tmp_path) -> None:
    uri = _uri(azure)
    remote = _open(azure, uri, tmp_path / "w", create=True)
    local = replaydb.open(tmp_path / "local", create=True)
    for part in range(4):
        for store in (remote, local):
            store.append("ev", _batch(part), time_unit="ms")
            if part == 1:
                create_index(store, "ev", "k")
    for store in (remote, local):
        compact(store, "ev", full=True)
    _same(local, uri, azure, tmp_path / "r")
    assert not list((tmp_path / "w").rglob("part-*.parquet"))
    # a local store copied there reads in place as well (abfss:// names the same objects)
    copied = azure.upload(tmp_path / "local", _uri(azure))
    _same(local, copied, azure, tmp_path / "c")
    container, _, prefix = copied[len("az://"):].partition("/")
    abfss = f"abfss://{container}@devstoreaccount1.dfs.core.windows.net/{prefix}"
    assert _open(azure, abfss, tmp_path / "a").streams() == ["ev"]
    # the Delta table there is standard: delta-rs reads it in place
    from deltalake import DeltaTable

    dt = DeltaTable(f"{uri}/streams/ev/events", storage_options=azure.options)
    assert dt.to_pyarrow_table().num_rows == 4 * 8000


def test_two_writers_never_commit_one_version(azure, tmp_path) -> None:
    uri = _uri(azure)
    first = _open(azure, uri, tmp_path / "a", create=True)
    first.append("ev", _batch(0), time_unit="ms")
    second = _open(azure, uri, tmp_path / "b")
    with first.writer("ev") as w:  # pins version 1 of the stream
        second.append("ev", _batch(1))  # another machine commits version 2 meanwhile
        with pytest.raises(ConcurrentWriterError, match="another writer committed first"):
            w.append(_batch(2))
    reader = _open(azure, uri, tmp_path / "r")
    assert reader.stream("ev").read().num_rows == 2 * 8000  # the loser's rows are nowhere
    assert reader.check() == {"ev": []}
    swept = vacuum_stream(reader, "ev", min_age=0)
    assert any(f.startswith("events/part-") for f in swept["files"])
    first.append("ev", _batch(2))  # a retry commits on top of the winner
    assert _open(azure, uri, tmp_path / "r2").stream("ev").read().num_rows == 3 * 8000


@pytest.mark.spark
def test_cli_ingest_query_check_vacuum(azure, tmp_path, capsys, spark) -> None:
    # the Python workers find the emulator as the driver does (spark.executorEnv on a cluster)
    spark.sparkContext.environment.update(azure.environment)
    uri = _uri(azure)
    src = tmp_path / "events.parquet"
    pq.write_table(pa.concat_tables([_batch(p) for p in range(3)]), src)
    flags = [f"--storage-option={k}={v}" for k, v in azure.options.items()]
    flags += ["--cache-dir", str(tmp_path / "cache")]
    assert cli_main(["ingest", uri, "ev", str(src), "--time", "t", "--time-unit", "ms",
                     "--index", "k", "--master", "local[2]", *flags]) == 0
    capsys.readouterr()
    local = replaydb.open(tmp_path / "local", create=True)
    local.append("ev", pa.concat_tables([_batch(p) for p in range(3)]), time_unit="ms")
    create_index(local, "ev", "k")
    _same(local, uri, azure, tmp_path / "r")
    assert cli_main(["query", uri, QUERY, "--format", "csv", *flags]) == 0
    assert capsys.readouterr().out.count("\n") == replaydb.query(local, QUERY).table.num_rows + 1
    assert cli_main(["check", uri, *flags]) == 0
    capsys.readouterr()
    assert cli_main(["vacuum", uri, "--min-age", "0", "--json", *flags]) == 0
    assert [r["stream"] for r in json.loads(capsys.readouterr().out)] == ["ev"]


def test_clear_errors(azure, tmp_path) -> None:
    from replaydb.bench.s3endpoint import free_port

    azure.container("present")
    cache = CacheOptions(dir=str(tmp_path))
    with pytest.raises(StoreError, match="the container 'absent' does not exist"):
        Store("az://absent/x", storage_options=azure.options, cache=cache)
    with pytest.raises(StoreError, match="no replaydb store at az://present/x"):
        Store("az://present/x", storage_options=azure.options, cache=cache)
    refused = {"AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1",
               "AZURE_STORAGE_ACCOUNT_KEY": "QUJD", "AZURE_STORAGE_ENDPOINT": azure.url}
    with pytest.raises(StoreError, match="az://present/x.*the credentials were refused") as e:
        Store("az://present/x", storage_options=refused, cache=cache)
    assert "AZURE_STORAGE_ACCOUNT_KEY" in (e.value.hint or "")
    keyless = {"AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1",
               "AZURE_STORAGE_ENDPOINT": azure.url}
    with pytest.raises(StoreError, match="az://present/x: no credentials"):
        Store("az://present/x", storage_options=keyless, cache=cache)
    closed = {**refused, "AZURE_STORAGE_ACCOUNT_KEY": azure.options_key,
              "AZURE_STORAGE_ENDPOINT": f"http://127.0.0.1:{free_port()}/devstoreaccount1"}
    with pytest.raises(StoreError, match="cannot be reached") as e:
        Store("az://present/x", storage_options=closed, cache=cache)
    assert "AZURE_STORAGE_ENDPOINT" in (e.value.hint or "")
    saved = {k: os.environ.pop(k, None) for k in ("AZURE_STORAGE_ACCOUNT_NAME",
                                                   "AZURE_STORAGE_ACCOUNT")}
    try:
        with pytest.raises(UsageError, match="no storage account"):
            Store("az://present/x", cache=cache)
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    with pytest.raises(UsageError, match="unknown storage option 'AZURE_NOPE'"):
        Store("az://present/x", storage_options={"AZURE_NOPE": "1"}, cache=cache)
    with pytest.raises(UsageError, match="gs:// are not supported yet"):
        Store("gs://bucket/x", cache=cache)
