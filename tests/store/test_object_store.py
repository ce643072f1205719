"""Stores on an object store, against a real S3 endpoint.

A store built locally is copied to the endpoint (:mod:`replaydb.bench.s3endpoint`) and opened there by its ``s3://`` URI: every
query, with every plan strategy, must give the local store's rows; the data files are read by
byte ranges only (never mirrored); the local cache mirrors the small files once; failures of the
object store are one-line errors naming the URI.
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import replaydb
from replaydb.cli import main as cli_main
from replaydb.errors import ReadOnlyError, StoreError, UsageError
from replaydb.indexes.manage import create_index
from replaydb.planner.pattern.planner import PLAN_CHOICES
from replaydb.store.location import RemoteLocation, remote_error
from replaydb.store.mirror import CacheOptions, parse_size
from replaydb.store.remotefile import RemoteDataFile, _coalesce
from replaydb.store.store import Store

N = 60_000
PATTERN = """SELECT * FROM ev MATCH_RECOGNIZE (ORDER BY t
  MEASURES A.t AS at, B.t AS bt, B.v AS bv, B.s AS bs ONE ROW PER MATCH
  PATTERN (A B) DEFINE A AS k = 5, B AS k < 700)"""
WINDOW = """SELECT window_start, COUNT(*) AS n, AVG(v) AS a, MAX(k) AS mk
  FROM TABLE(TUMBLE(DATA => TABLE ev, TIMECOL => DESCRIPTOR(t), SIZE => INTERVAL '5' SECOND))
  GROUP BY window_start, window_end"""


@pytest.fixture(scope="module")
def local_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """A local store: one stream of N events in many leaves, two appends, an index on k."""
    root = tmp_path_factory.mktemp("objstore") / "store"
    store = replaydb.open(root, create=True)
    rng = np.random.default_rng(7)
    for part in range(2):
        n = N // 2
        t = (np.arange(n, dtype=np.int64) + part * n) * 3
        tbl = pa.table({"t": t, "k": rng.integers(0, 1000, n), "v": rng.random(n),
                        "s": pa.array([f"s{i % 11}" for i in range(n)])})
        if part == 0:
            store.create_stream("ev", tbl.schema, time_unit="ms", leaf_capacity=256, fanout=8)
        store.append("ev", tbl)
    create_index(store, "ev", "k")
    return store


@pytest.fixture(scope="module")
def uri(s3, local_store: Store) -> str:
    return s3.upload(local_store.path, f"s3://stores-{uuid.uuid4().hex[:8]}/team/events")


def _remote(s3, uri: str, cache: Path) -> Store:
    return Store(uri, storage_options=s3.options, cache=CacheOptions(dir=str(cache)))


def test_every_pattern_strategy_equals_the_local_store(s3, uri, local_store, tmp_path) -> None:
    remote = _remote(s3, uri, tmp_path)
    assert remote.streams() == ["ev"]
    for plan in PLAN_CHOICES:
        want = replaydb.query(local_store, PATTERN, plan=plan).table
        got = replaydb.query(remote, PATTERN, plan=plan).table
        assert want.num_rows > 20
        assert got.equals(want), plan


def test_a_replay_fetches_the_first_chunks_of_every_file_at_once(s3, uri, local_store,
                                                                 tmp_path) -> None:
    """Planning a replay over both data files starts fetching each file's first planned
    chunks before the first read; the replay then reads them and answers as locally."""
    remote = _remote(s3, uri, tmp_path / "cache")
    snap = remote.stream("ev")
    before = remote.location.counters.requests
    snap._plan_fetches(np.arange(snap.tree.leaves.n), ["t", "k"])
    cache = snap._cache
    assert cache._prefetcher is not None and len(cache._remote) == 2  # both files
    cache._prefetcher.shutdown(wait=True)
    assert remote.location.counters.requests - before >= 2
    for path, rf in cache._remote.items():
        groups, columns = cache._planned[path]
        assert rf.missing_bytes(groups[:1], columns) == 0
    want = replaydb.query(local_store, PATTERN, plan="replay").table
    assert replaydb.query(_remote(s3, uri, tmp_path / "cache2"), PATTERN,
                          plan="replay").table.equals(want)


def test_window_paths_equal_the_local_store(s3, uri, local_store, tmp_path) -> None:
    remote = _remote(s3, uri, tmp_path)
    for plan in ("replay", "auto", "index", "naive"):
        want = replaydb.query(local_store, WINDOW, plan=plan).table
        assert replaydb.query(remote, WINDOW, plan=plan).table.equals(want), plan


def test_data_files_are_read_by_ranges_and_the_cache_holds_small_files(s3, uri, local_store,
                                                                       tmp_path) -> None:
    rare = PATTERN.replace("B AS k < 700", "B AS k < 20")
    remote = _remote(s3, uri, tmp_path)
    res = replaydb.query(remote, rare, plan="optimal")
    want = replaydb.query(local_store, rare, plan="optimal")
    assert res.table.equals(want.table)
    data_bytes = sum(f.stat().st_size for f in local_store.path.rglob("part-*.parquet"))
    run_bytes = sum(f.stat().st_size for f in local_store.path.rglob("run-*.parquet"))
    first = res.stats["object_store"]
    # footers, the chunks of the index and data row groups the plan reads: a small part
    # of the data files and of the index runs
    assert first["range_bytes"] < (data_bytes + run_bytes) / 3
    # a second store object on the same cache: no footer, log or tree fetched again
    again = _remote(s3, uri, tmp_path)
    second = replaydb.query(again, rare, plan="optimal").stats["object_store"]
    assert second["bytes"] - second["range_bytes"] < 10_000  # the configuration
    assert second["lists"] == 1  # the events log, for new commits; tree and index: synced
    assert second["range_bytes"] == 0  # every chunk it reads was kept by the first
    assert second["requests"] == 1  # the listing of the events log (new commits?)
    third = _remote(s3, uri, tmp_path)
    res3 = replaydb.query(third, PATTERN, plan="optimal")  # another query: new chunks only
    assert 0 < res3.stats["object_store"]["range_bytes"] < first["range_bytes"] + data_bytes
    # neither data files nor index runs are mirrored
    assert not [p for p in tmp_path.rglob("*")
                if p.name.startswith(("part-", "run-")) and p.name.endswith(".parquet")]


def test_stats_explain_and_check_work_remotely(s3, uri, local_store, tmp_path) -> None:
    remote = _remote(s3, uri, tmp_path)
    want, got = local_store.stats("ev")[0], remote.stats("ev")[0]
    for key in ("events", "version", "t_min", "t_max", "leaves", "tree_height", "indexes"):
        assert got.get(key) == want.get(key), key
    ex = replaydb.explain(remote, PATTERN, analyze=True)
    assert "interval scan of ev" in ex.text()
    fetched = ex["analyze"]["object_store"]
    assert fetched["requests"] > 0 and fetched["bytes"] > 0
    assert f"object store: {fetched['requests']:,} requests" in ex.text()
    res = replaydb.query(remote, PATTERN)
    again = res.stats["object_store"]  # the same chunks again: held in this process
    assert again["bytes"] == 0 and again["lists"] >= 1  # one listing: the latest commit
    assert remote.check() == {"ev": []}


@settings(max_examples=25)
@given(st.data())
def test_ranges_read_equal_the_file(s3, uri, local_store, data) -> None:
    files = sorted(local_store.path.glob("streams/ev/events/part-*.parquet"))
    f = data.draw(st.sampled_from(files))
    rel = f"streams/ev/events/{f.name}"
    local = pq.ParquetFile(f)
    n = local.metadata.num_row_groups
    groups = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8, unique=True))
    cols = data.draw(st.lists(st.sampled_from(["t", "seq", "k", "v", "s"]), min_size=1,
                              max_size=5, unique=True))
    rf = RemoteDataFile(RemoteLocation(uri, s3.options), rel)
    rf.fetch(groups, cols)
    got = rf.parquet.read_row_groups(groups, columns=cols)
    assert got.equals(local.read_row_groups(groups, columns=cols))
    assert rf.fetched <= f.stat().st_size


def _one_file(s3, uri: str, local_store: Store) -> tuple[RemoteDataFile, pq.ParquetFile]:
    f = sorted(local_store.path.glob("streams/ev/events/part-*.parquet"))[0]
    rf = RemoteDataFile(RemoteLocation(uri, s3.options), f"streams/ev/events/{f.name}")
    return rf, pq.ParquetFile(f)


def test_concurrent_fetches_fetch_each_chunk_once(s3, uri, local_store) -> None:
    """Eight threads fetch overlapping row groups of one file at once: every read equals the
    local file's, and no chunk is fetched twice (a chunk pending in one fetch is waited for
    by the others)."""
    rf, local = _one_file(s3, uri, local_store)
    n, cols = local.metadata.num_row_groups, ["t", "k", "s"]
    rng = np.random.default_rng(11)
    asks = [np.sort(rng.choice(n, 40, replace=False)) for _ in range(8)]
    before = rf.location.counters.range_bytes
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda g: rf.fetch(g, cols), asks))
    wanted = np.unique(np.concatenate(asks))
    cells = np.ix_(wanted, [rf._names[c] for c in cols])
    assert rf._have[cells].all() and not rf._pending.any()
    # each ask spans the whole file: fetched by every thread, that would be 8 files' worth
    assert rf.location.counters.range_bytes - before < 2 * rf.size
    for g in asks:
        got = rf.parquet.read_row_groups(g.tolist(), columns=cols)
        assert got.equals(local.read_row_groups(g.tolist(), columns=cols))


def test_a_long_run_is_read_in_windows_ahead_of_the_reader(s3, uri, local_store) -> None:
    """A read finding nothing fetched ahead takes a first window with it and leaves the next
    to the background; later reads take a new window only while less than one window is
    fetched or pending ahead of them."""
    rf, local = _one_file(s3, uri, local_store)
    n, cols = local.metadata.num_row_groups, ["t", "k"]
    planned = np.arange(n, dtype=np.int64)
    per_group = int((rf._end - rf._start)[0, [0, 2]].sum())
    first, ahead = 10 * per_group, 30 * per_group
    now, later = rf.windows(planned[:1], planned, cols, first, ahead)
    assert now[0] == 0 and 8 <= now.size <= 12  # the read and about ten groups more
    assert later[0] == now[-1] + 1 and 25 <= later.size <= 35
    rf.fetch(now, cols)
    rf.fetch_claimed(rf.claim(later, cols))
    # the reader inside the first window: more than a window ahead is held, nothing to add
    assert rf.windows(planned[2:3], planned, cols, first, ahead)[1].size == 0
    # near the end of what is held: the next window, right after it
    at = int(later[-5])
    got_now, got_later = rf.windows(planned[at:at + 1], planned, cols, first, ahead)
    assert got_now.tolist() == [at] and got_later[0] == later[-1] + 1
    # a claimed (pending) window counts as held
    rf.claim(got_later, cols)
    assert rf.windows(planned[at:at + 1], planned, cols, first, ahead)[1].size == 0


def test_a_failed_background_fetch_leaves_the_chunks_to_the_read(s3, uri, local_store
                                                                  ) -> None:
    """Chunks whose background fetch fails are pending no more: the read that needs them
    fetches them itself (and would report its own failure)."""
    rf, local = _one_file(s3, uri, local_store)
    cols = ["t", "v"]
    claimed = rf.claim([3, 4, 5], cols)
    good = rf.location
    rf.location = RemoteLocation(uri.replace("s3://", "s3://missing-"), s3.options)
    rf._file = None
    with pytest.raises(StoreError):
        rf.fetch_claimed(claimed)
    assert not rf._pending.any() and not rf._have.any()
    rf.location, rf._file = good, None
    rf.fetch([3, 4, 5], cols)
    assert rf.parquet.read_row_groups([3, 4, 5], columns=cols).equals(
        local.read_row_groups([3, 4, 5], columns=cols))


def test_a_shut_down_prefetcher_leaves_nothing_pending(s3, uri, local_store, tmp_path
                                                       ) -> None:
    """A background fetch that can no longer be scheduled gives its claims back, so the
    replay that needs the chunks fetches them instead of waiting for them."""
    remote = _remote(s3, uri, tmp_path)
    snap = remote.stream("ev")
    snap._plan_fetches(np.arange(snap.tree.leaves.n), ["t", "k"])
    cache = snap._cache
    assert cache._prefetcher is not None
    cache._prefetcher.shutdown(wait=True)
    for rf in cache._remote.values():
        cache._in_background(rf, [np.arange(rf.parquet.metadata.num_row_groups)], ["t", "k"])
        assert not rf._pending.any()
    want = replaydb.query(local_store, PATTERN, plan="replay").table
    assert replaydb.query(remote, PATTERN, plan="replay").table.equals(want)


def test_chunk_offsets_are_kept_beside_the_footer(s3, uri, local_store, tmp_path) -> None:
    """A second open of a data file takes its chunk offsets from the cache; a kept file of
    the wrong size is ignored and written again."""
    from replaydb.store.mirror import StoreMirror
    from replaydb.store.remotefile import CHUNKS

    f = sorted(local_store.path.glob("streams/ev/events/part-*.parquet"))[0]
    rel = f"streams/ev/events/{f.name}"
    location = RemoteLocation(uri, s3.options)
    mirror = StoreMirror(location, CacheOptions(dir=str(tmp_path)))
    first = RemoteDataFile(location, rel, mirror)
    kept = list(mirror.footers.glob(f"*{CHUNKS}"))
    assert len(kept) == 1
    second = RemoteDataFile(location, rel, mirror)
    assert np.array_equal(first._start, second._start)
    assert np.array_equal(first._end, second._end)
    kept[0].write_bytes(b"short")
    third = RemoteDataFile(location, rel, mirror)
    assert np.array_equal(first._start, third._start) and np.array_equal(first._end, third._end)
    assert kept[0].stat().st_size == first._start.size * 16
    third.fetch([0, 1], ["t", "k"])
    assert third.parquet.read_row_groups([0, 1], columns=["t", "k"]).equals(
        pq.ParquetFile(f).read_row_groups([0, 1], columns=["t", "k"]))


def test_coalesce_joins_close_ranges() -> None:
    starts = np.array([100, 0, 50, 1000])
    ends = np.array([150, 40, 90, 1100])
    # needed 230 bytes; gaps 10, 10, 850
    assert _coalesce(starts, ends, 1 << 20, slack=0.1, hole=0) == [(0, 150), (1000, 1100)]
    assert _coalesce(starts, ends, 1 << 20, slack=0.05, hole=0) == [(0, 90), (100, 150),
                                                                   (1000, 1100)]
    assert _coalesce(starts, ends, 5, slack=1.0, hole=0) == [(0, 40), (50, 90), (100, 150),
                                                             (1000, 1100)]
    assert _coalesce(starts, ends, 1 << 20, slack=4.0, hole=0) == [(0, 1100)]
    assert _coalesce(starts, ends, 1, slack=0.0, hole=10) == [(0, 150), (1000, 1100)]
    assert _coalesce(np.array([0, 10]), np.array([20, 15]), 1, slack=0.0, hole=0) == [(0, 20)]


def test_spark_engine_reads_the_object_store(s3, uri, local_store, tmp_path, spark) -> None:
    remote = _remote(s3, uri, tmp_path)
    want = replaydb.query(local_store, PATTERN).table
    got = replaydb.query(remote, PATTERN, engine="spark").table
    assert got.sort_by("at").equals(want.sort_by("at"))


def test_cli_query_stats_and_explain(s3, uri, tmp_path, capsys) -> None:
    flags = [f"--storage-option={k}={v}" for k, v in s3.options.items()]
    flags += ["--cache-dir", str(tmp_path)]
    assert cli_main(["query", uri, PATTERN, "--json", *flags]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows["rows"]) > 20
    assert cli_main(["stats", uri, "--json", *flags]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["store"] == uri and out["streams"][0]["events"] == N
    assert cli_main(["explain", uri, PATTERN, "--analyze", *flags]) == 0
    assert "interval scan" in capsys.readouterr().out


def test_clear_errors(s3, uri, tmp_path, capsys) -> None:
    cache = CacheOptions(dir=str(tmp_path))
    with pytest.raises(StoreError, match="bucket .no-such-bucket-here. does not exist"):
        Store("s3://no-such-bucket-here/x", storage_options=s3.options, cache=cache)
    with pytest.raises(StoreError, match="no replaydb store at"):
        Store(uri + "-missing", storage_options=s3.options, cache=cache)
    closed = {**s3.options, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}"}
    with pytest.raises(StoreError, match="cannot be reached"):
        Store(uri, storage_options=closed, cache=cache)
    with pytest.raises(UsageError, match="unknown storage option"):
        Store(uri, storage_options={"AWS_NO_SUCH_KEY": "1"}, cache=cache)
    with pytest.raises(UsageError, match="not supported yet"):
        Store("gs://bucket/store", cache=cache)
    remote = Store(uri, storage_options=s3.options, cache=cache, read_only=True)
    with pytest.raises(ReadOnlyError, match="read-only"):
        remote.append("ev", pa.table({"t": [10**9], "k": [1], "v": [0.5], "s": ["x"]}))
    with pytest.raises(ReadOnlyError, match="read-only"):
        Store(uri + "-new", storage_options=s3.options, cache=cache, create=True,
              read_only=True)
    # the CLI prints one line and a hint, no traceback
    flags = [f"--storage-option={k}={v}" for k, v in closed.items()]
    assert cli_main(["stats", uri, *flags, "--cache-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "cannot be reached" in err and "Traceback" not in err


def test_error_texts_name_what_to_set() -> None:
    e = remote_error("s3://b/x", OSError("AWS Error ACCESS_DENIED during GetObject"))
    assert "permission denied" in str(e) and "AWS_ACCESS_KEY_ID" in (e.hint or "")
    e = remote_error("s3://b/x", OSError("AWS Error INVALID_ACCESS_KEY_ID"))
    assert str(e) == "s3://b/x: the credentials were refused"


def test_cache_is_bounded(s3, uri, local_store, tmp_path) -> None:
    """Two stores sharing a small cache evict each other's files, least recently used
    first; an evicted file comes back when a query needs it, with the same results."""
    small = CacheOptions(dir=str(tmp_path), max_bytes=200_000, keep_seconds=0.0)
    want = replaydb.query(local_store, PATTERN, plan="optimal").table
    first = Store(uri, storage_options=s3.options, cache=small)
    assert replaydb.query(first, PATTERN, plan="optimal").table.equals(want)
    codes = lambda store: list(store.path.rglob("*.codes"))  # noqa: E731
    other = Store(s3.upload(local_store.path, uri + "-copy"), storage_options=s3.options,
                  cache=small)
    assert replaydb.query(other, PATTERN, plan="optimal").table.equals(want)
    assert not codes(first)  # the least recently used went
    again = Store(uri, storage_options=s3.options, cache=small)
    assert replaydb.query(again, PATTERN, plan="optimal").table.equals(want)
    held = sum(p.stat().st_blocks * 512 for p in tmp_path.rglob("*")
               if p.is_file() and "_delta_log" not in p.parts)
    assert held <= 200_000 + 200_000 // 8 + 256 * 1024


def test_kept_chunks_stay_within_the_cache_bound(s3, uri, local_store, tmp_path) -> None:
    """Full replays keep their chunks only while the cache has room: evicting what no query
    uses, then keeping no more; the results do not change."""
    data_bytes = sum(f.stat().st_size for f in local_store.path.rglob("part-*.parquet"))
    bound = data_bytes // 2  # a full replay's chunks do not fit
    small = CacheOptions(dir=str(tmp_path), max_bytes=bound, keep_seconds=0.0)
    want = replaydb.query(local_store, PATTERN, plan="replay").table
    for _ in range(2):
        store = Store(uri, storage_options=s3.options, cache=small)
        assert replaydb.query(store, PATTERN, plan="replay").table.equals(want)
    pages = sum(p.stat().st_blocks * 512 for p in tmp_path.rglob("*.pages"))
    assert pages <= bound + bound // 8 + 64 * 1024 < data_bytes


def test_page_store_keeps_ranges_and_drops_bad_ones(tmp_path) -> None:
    from replaydb.store.pagestore import PageStore

    size = 1000
    data = np.random.default_rng(1).integers(0, 256, size).astype(np.uint8)
    ps = PageStore(tmp_path / "f.1000", size)
    assert ps.load(np.zeros(size, np.uint8)) == []
    ps.store(10, data[10:100].tobytes())
    ps.store(500, data[500:900].tobytes())
    other = PageStore(tmp_path / "f.1000", size)  # another process, same file
    other.store(950, data[950:1000].tobytes())
    buf = np.zeros(size, np.uint8)
    assert ps.load(buf) == [(10, 100), (500, 900), (950, 1000)]
    for a, b in ((10, 100), (500, 900), (950, 1000)):
        assert np.array_equal(buf[a:b], data[a:b])
    # the pages file evicted and started again by another process: old ranges do not match
    ps.pages.unlink()
    ps.store(0, data[0:5].tobytes())
    fresh = np.zeros(size, np.uint8)
    assert ps.load(fresh) == [(0, 5)]
    with open(ps.ranges, "a") as fh:
        fh.write("garbage line\n20 2000 1\n")
    assert ps.load(np.zeros(size, np.uint8)) == [(0, 5)]


def test_parse_size() -> None:
    assert parse_size("2GiB") == 2 << 30 and parse_size("500MB") == 500 * 10**6
    assert parse_size(123) == 123
    with pytest.raises(UsageError):
        parse_size("lots")


def test_local_stores_take_file_uris(local_store) -> None:
    s = replaydb.open(f"file://{local_store.path}", read_only=True)
    assert s.streams() == ["ev"]
    with pytest.raises(UsageError, match="object stores"):
        replaydb.open(local_store.path, storage_options={"AWS_REGION": "x"})


def _closed_port() -> int:
    from replaydb.bench.s3endpoint import free_port

    return free_port()



def test_single_values_are_probed_by_ranges(s3, uri, local_store, tmp_path) -> None:
    remote = _remote(s3, uri, tmp_path)
    seqs = np.sort(np.random.default_rng(3).choice(N, 500, replace=False)).astype(np.int64)
    want = local_store.stream("ev").values_at("v", seqs)
    got = remote.stream("ev").values_at("v", seqs)
    assert want is not None and got is not None
    assert np.array_equal(got, want)


def test_refused_credentials_are_clear(local_store, tmp_path, monkeypatch) -> None:
    """On an endpoint that checks every request: a user without permission, unknown keys and
    no keys at all each get a one-line error naming the URI and what to set."""
    from replaydb.bench.s3endpoint import S3Endpoint

    endpoint = S3Endpoint(auth=True)
    try:
        uri = endpoint.upload(local_store.path, "s3://guarded/store")
        cache = CacheOptions(dir=str(tmp_path))
        ok = Store(uri, storage_options=endpoint.options, cache=cache)
        assert ok.streams() == ["ev"]
        with pytest.raises(StoreError, match="permission denied") as denied:
            Store(uri, storage_options=endpoint.options_of("nobody"), cache=cache)
        assert "AWS_ACCESS_KEY_ID" in (denied.value.hint or "")
        unknown = {**endpoint.options, "AWS_ACCESS_KEY_ID": "AKIAUNKNOWNKEY000000"}
        with pytest.raises(StoreError, match="permission denied"):
            Store(uri, storage_options=unknown, cache=cache)
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
            monkeypatch.delenv(k, raising=False)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        with pytest.raises(StoreError, match="no credentials") as none:
            Store(uri, storage_options={"AWS_ENDPOINT_URL": endpoint.url}, cache=cache)
        assert str(none.value) == f"{uri}/replaydb.json: no credentials"
    finally:
        endpoint.stop()
