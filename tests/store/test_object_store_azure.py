"""Stores on Azure Blob Storage, against a real endpoint: the Azurite emulator in its own
process on the loopback interface (:mod:`replaydb.bench.azurite`; installed with npm into the
cache on first use). The same store read and written there answers exactly as its local twin;
two writers never commit one version; failures are one-line errors naming the URI."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import replaydb
from replaydb.cli import main as cli_main
from replaydb.errors import StoreError, UsageError
from replaydb.indexes.manage import create_index
from replaydb.store.mirror import CacheOptions
from replaydb.store.store import Store
from tests.remote_cases import QUERY, batch, race, same, write_twins

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


def _uri(azure) -> str:
    return azure.container(f"w{uuid.uuid4().hex[:10]}") + "/store"


def _open(azure, uri: str, cache: Path, **kw) -> Store:
    return Store(uri, storage_options=azure.options, cache=CacheOptions(dir=str(cache)), **kw)


def _same(local: Store, remote_uri: str, azure, cache: Path) -> None:
    """A fresh reader of the remote store answers as the local twin, with every plan."""
    reader = _open(azure, remote_uri, cache)
    same(local, reader, plans=("replay", "auto", "all", "optimal"))
    same(local, reader, plans=("replay", "auto"), queries=(WINDOW,))


def test_appends_indexes_and_compaction_equal_a_local_twin(azure, tmp_path) -> None:
    uri = _uri(azure)
    remote = _open(azure, uri, tmp_path / "w", create=True)
    local = replaydb.open(tmp_path / "local", create=True)
    write_twins(remote, local)
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
    first = race(lambda u, c, **kw: _open(azure, u, c, **kw), uri, tmp_path)
    assert first.stream("ev").read().num_rows == 3 * 8000


@pytest.mark.spark
def test_cli_ingest_query_check_vacuum(azure, tmp_path, capsys, spark) -> None:
    # the Python workers find the emulator as the driver does (spark.executorEnv on a cluster)
    spark.sparkContext.environment.update(azure.environment)
    uri = _uri(azure)
    src = tmp_path / "events.parquet"
    pq.write_table(pa.concat_tables([batch(p) for p in range(3)]), src)
    flags = [f"--storage-option={k}={v}" for k, v in azure.options.items()]
    flags += ["--cache-dir", str(tmp_path / "cache")]
    assert cli_main(["ingest", uri, "ev", str(src), "--time", "t", "--time-unit", "ms",
                     "--index", "k", "--master", "local[2]", *flags]) == 0
    capsys.readouterr()
    local = replaydb.open(tmp_path / "local", create=True)
    local.append("ev", pa.concat_tables([batch(p) for p in range(3)]), time_unit="ms")
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
