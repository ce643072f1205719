"""Unit tests of the LSM index: API contract, persistence, levels, tombstones, reads, counters."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.errors import DataError, ReadOnlyError, UsageError
from replaydb.indexes import ENTRIES_PER_PAGE, LSMIndex, LSMOptions, prefix_successor
from replaydb.indexes.kernels import (
    Arena,
    argsort_bounded,
    merge_sorted_perm,
    radix_argsort_u64,
    sort_unique_with_payload,
    sort_with_payload,
    sortable_u64,
    thread_arena,
)
from replaydb.indexes.runfile import META_KEY, parse_run_file_name

SMALL = LSMOptions(
    l0_max_runs=2, size_ratio=3, l1_max_entries=100, row_group_entries=16, sample_every=4
)


def make(tmp_path, key_type="float64", options=SMALL, name="ix"):
    return LSMIndex.create(tmp_path / name, key_type, options=options)


def add_range(idx, keys, start):
    seqs = np.arange(start, start + len(keys), dtype=np.int64)
    idx.add(keys, seqs, seqs * 10)
    return seqs


# ---------------------------------------------------------------- kernels
@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_radix_argsort_is_stable_and_sorted(dtype):
    rng = np.random.default_rng(3)
    n = 100_000  # above the small-input cut-over, so the compiled radix sort runs
    if dtype == "int64":
        keys = rng.integers(-(2**62), 2**62, n)
        keys[::7] = rng.integers(-3, 3, keys[::7].size)  # many ties, negative values
    else:
        keys = rng.normal(0, 1e3, n)
        keys[::5] = rng.choice([-2.5, 0.0, 7.0, -1e300, 1e300, -np.inf, np.inf], keys[::5].size)
    perm = radix_argsort_u64(sortable_u64(keys))
    assert np.array_equal(perm, np.argsort(keys, kind="stable"))


def test_merge_sorted_perm_orders_by_key_then_seq():
    rng = np.random.default_rng(4)
    runs = []
    for _ in range(5):
        k = rng.integers(0, 20, 300)
        s = rng.permutation(100_000)[:300]
        o = np.lexsort((s, k))
        runs.append((k[o], s[o]))
    keys = np.concatenate([r[0] for r in runs])
    seqs = np.concatenate([r[1] for r in runs]).astype(np.int64)
    off = np.cumsum([0] + [len(r[0]) for r in runs])
    perm = merge_sorted_perm(keys, seqs, off)
    assert np.array_equal(perm, np.lexsort((seqs, keys)))


# ---------------------------------------------------------------- create / open / versions
def test_create_open_and_persisted_layout(tmp_path):
    idx = make(tmp_path)
    assert idx.version == 0 and idx.num_runs == 0
    add_range(idx, np.array([3.0, 1.0, 2.0]), 0)
    v = idx.flush(commit_metadata={"stream_version": 7})
    assert v == 1
    dt = DeltaTable(str(tmp_path / "ix"))
    assert dt.version() == 1
    files = dt.file_uris()
    assert len(files) == 1
    parsed = parse_run_file_name(os.path.basename(files[0]))
    assert parsed == {"id_lo": 1, "id_hi": 1, "level": 0, "part": 0}
    table = pq.read_table(files[0])
    assert table.column("key").to_pylist() == [1.0, 2.0, 3.0]
    meta = json.loads(pq.read_metadata(files[0]).metadata[META_KEY.encode()])
    assert meta["n"] == 3 and meta["level"] == 0 and meta["tomb"] is None
    stats = pa.table(dt.get_add_actions(flatten=True))
    assert stats.column("min.key").to_pylist() == [1.0]
    assert stats.column("max.seq").to_pylist() == [2]
    assert idx.commit_info(1)["stream_version"] == 7
    again = LSMIndex.open(tmp_path / "ix")
    assert again.options == SMALL and again.key_type == "float64"
    assert again.range().key.tolist() == [1.0, 2.0, 3.0]


def test_create_refuses_existing_and_open_refuses_missing(tmp_path):
    make(tmp_path)
    with pytest.raises(UsageError):
        make(tmp_path)
    assert LSMIndex.create(tmp_path / "ix", "float64", exist_ok=True).version == 0
    with pytest.raises(UsageError):
        LSMIndex.create(tmp_path / "ix", "int64", exist_ok=True)
    with pytest.raises(UsageError):
        LSMIndex.open(tmp_path / "nothing")
    with pytest.raises(UsageError):
        LSMIndex.create(tmp_path / "bad", "date")


def test_pinned_versions_are_snapshots_and_read_only(tmp_path):
    idx = make(tmp_path)
    add_range(idx, np.array([1.0, 2.0]), 0)
    v1 = idx.flush()
    reader = LSMIndex.open(tmp_path / "ix", version=v1)
    assert reader.writable  # at the latest version
    add_range(idx, np.array([1.5]), 2)
    v2 = idx.flush()
    assert reader.range().seq.tolist() == [0, 1]  # still pinned to v1
    assert not LSMIndex.open(tmp_path / "ix", version=v1).writable
    with pytest.raises(ReadOnlyError):
        LSMIndex.open(tmp_path / "ix", version=v1).add([1.0], [9], [9])
    assert idx.at_version(v2).range().seq.tolist() == [0, 2, 1]
    # a stale writer may not commit on top of a newer version
    reader.add([4.0], [3], [30])
    with pytest.raises(Exception, match="moved"):
        reader.flush()
    with pytest.raises(UsageError):
        reader.refresh()  # unflushed entries
    other = LSMIndex.open(tmp_path / "ix", version=v1)
    assert other.refresh() == v2 and other.writable


def test_empty_flush_is_a_noop(tmp_path):
    idx = make(tmp_path)
    assert idx.flush() == 0
    idx.add([], [], [])
    assert idx.flush() == 0


# ---------------------------------------------------------------- input validation
def test_null_and_nan_keys_are_not_indexed(tmp_path):
    idx = make(tmp_path)
    keys = pa.array([1.0, None, float("nan"), -0.0])
    assert idx.add(keys, [0, 1, 2, 3], [0, 10, 20, 30]) == 2
    idx.flush()
    res = idx.range()
    assert res.seq.tolist() == [3, 0] and res.key.tolist() == [0.0, 1.0]
    assert np.signbit(res.key).tolist() == [False, False]  # -0.0 stored as +0.0
    assert idx.check(([1.0, None, float("nan"), -0.0], [0, 1, 2, 3], [0, 10, 20, 30])) == []


def test_bad_input_names_row_and_column(tmp_path):
    idx = make(tmp_path, "int64")
    with pytest.raises(DataError, match="row 1.*'seq'"):
        idx.add([1, 2], pa.array([0, None]), [0, 0])
    with pytest.raises(DataError, match="row 2.*'key'"):
        idx.add(np.array([1.0, 2.0, 2.5]), [0, 1, 2], [0, 0, 0])
    with pytest.raises(UsageError, match="'t' has 1 values"):
        idx.add([1, 2], [0, 1], [0])
    sidx = make(tmp_path, "string", name="s")
    with pytest.raises(DataError, match="string keys"):
        sidx.add([1, 2], [0, 1], [0, 0])


# ---------------------------------------------------------------- reads
def test_range_bounds_orders_and_max_seq(tmp_path):
    idx = make(tmp_path, "int64")
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 50, 400)
    seqs = add_range(idx, keys, 0)
    idx.flush()
    add_range(idx, rng.integers(0, 50, 100), 400)
    idx.flush()
    allk = np.concatenate([keys, idx.range(order="seq").key[400:]])
    allseq = np.arange(500)
    for lo, hi, li, hi_i in [
        (10, 20, True, True),
        (10, 20, False, False),
        (10.5, 19.5, True, True),
        (None, 5, True, False),
        (45, None, False, True),
        (20, 10, True, True),
    ]:
        r = idx.range(lo, hi, lo_inclusive=li, hi_inclusive=hi_i, order="seq", max_seq=450)
        m = allseq < 450
        if lo is not None:
            m &= (allk > lo) | ((allk == lo) & li)
        if hi is not None:
            m &= (allk < hi) | ((allk == hi) & hi_i)
        assert r.seq.tolist() == allseq[m].tolist()
    assert len(idx.point(7)) == int(np.sum(allk == 7))
    assert len(idx.range(float("-inf"), float("inf"))) == 500
    assert len(idx.range(float("inf"), None)) == 0
    assert len(idx.range(2**70, None)) == 0 and len(idx.range(-(2**70), None)) == 500
    with pytest.raises(UsageError):
        idx.range("a", "b")
    with pytest.raises(UsageError):
        idx.range(float("nan"), 1)
    with pytest.raises(UsageError):
        idx.range(order="time")
    assert seqs.size == 400


def test_string_keys_use_byte_order_and_prefix(tmp_path):
    idx = make(tmp_path, "string")
    words = ["b", "a", "ab", "abc", "\u00e9", "z", "", "\U0001f600", "abd", "ab"]
    add_range(idx, pa.array(words, pa.large_string()), 0)
    idx.flush()
    res = idx.range()
    assert res.key.tolist() == sorted(words, key=lambda w: w.encode())
    assert idx.prefix("ab").key.tolist() == ["ab", "ab", "abc", "abd"]
    assert idx.prefix("").seq.size == len(words)
    assert idx.range("ab", "b", hi_inclusive=False).key.tolist() == ["ab", "ab", "abc", "abd"]
    assert idx.point("ab").seq.tolist() == [2, 9]
    assert res.to_arrow().column("key").type == pa.string()
    assert prefix_successor("a\U0010ffff") == "b" and prefix_successor("\U0010ffff") is None
    assert prefix_successor("a\ud7ff") == "a\ue000"


def test_reads_skip_runs_and_row_groups(tmp_path):
    opts = LSMOptions(l0_max_runs=8, row_group_entries=100, auto_compact=False)
    idx = make(tmp_path, "int64", options=opts)
    for r in range(4):  # four runs with disjoint key ranges
        add_range(idx, np.arange(r * 1000, r * 1000 + 1000), r * 1000)
        idx.flush()
    idx.reset_counters()
    res = idx.range(1250, 1349)
    assert len(res) == 100
    c = idx.counters
    assert c.runs_consulted == 1 and c.runs_skipped == 3
    assert c.row_groups_read == 2 and c.row_groups_skipped == 8  # 1200-1299, 1300-1399
    assert c.entries_read == 200 and c.entries_returned == 100
    assert c.pages_read == 2 * int(np.ceil(100 / ENTRIES_PER_PAGE))
    assert c.bytes_read > 0 and res.cost.entries_read == 200
    plan = idx.read_plan(1250, 1349)
    assert plan["entries_read"] == 200 and plan["runs_skipped"] == 3
    assert plan["pages_read"] == c.pages_read
    assert idx.reset_counters().queries == 1 and idx.counters.queries == 0


# ---------------------------------------------------------------- levels and compaction
def test_level_policy_and_compaction_keep_content(tmp_path):
    idx = make(tmp_path)
    rng = np.random.default_rng(6)
    total = []
    start = 0
    for _ in range(12):
        keys = rng.normal(0, 1, 40)
        add_range(idx, keys, start)
        total.append(keys)
        start += 40
        idx.flush()
        assert idx.check(policy=True) == []
        lv = idx.levels()
        assert all(level["runs"] == 1 for level in lv if level["level"] >= 1)
        assert all(level["entries"] <= level["capacity"] for level in lv if level["level"] >= 1)
    keys = np.concatenate(total)
    assert idx.num_levels >= 2
    expected = (keys, np.arange(start), np.arange(start) * 10)
    assert idx.check(expected) == []
    v = idx.compact(full=True)
    assert v is not None and idx.num_runs == 1
    assert idx.compact(full=True) is None
    assert idx.check(expected) == []
    assert idx.num_physical_entries == start


def test_multi_part_runs(tmp_path):
    opts = LSMOptions(target_file_entries=100, row_group_entries=32, l0_max_runs=1)
    idx = make(tmp_path, "int64", options=opts)
    keys = np.random.default_rng(7).integers(0, 30, 450)
    add_range(idx, keys, 0)
    with pytest.raises(UsageError):
        idx.bulk_add(np.arange(10), np.arange(450, 460), np.arange(10))
    idx.flush()
    idx.bulk_add(np.arange(10), np.arange(450, 460), np.arange(10))  # level 0, then compacted
    assert idx.num_runs == 1 and idx.num_files == 5
    assert [r["level"] for r in idx.runs()] == [1]
    assert idx.compact(full=True) is None
    allk = np.concatenate([keys, np.arange(10)])
    assert (
        idx.check((allk, np.arange(460), np.concatenate([np.arange(450) * 10, np.arange(10)])))
        == []
    )
    r = idx.range(5, 6, order="key")
    assert r.key.tolist() == sorted(allk[(allk >= 5) & (allk <= 6)].tolist())


# ---------------------------------------------------------------- tombstones
def test_tail_rewrite_tombstone_commits_with_flush_and_is_dropped(tmp_path):
    opts = LSMOptions(l0_max_runs=4, auto_compact=False, row_group_entries=8)
    idx = make(tmp_path, options=opts)
    add_range(idx, np.arange(100.0), 0)
    idx.flush()
    add_range(idx, np.arange(100.0, 150.0), 100)
    v_before = idx.flush()
    # late events: from seq 120 on, the tail gets new seqs
    idx.delete_from_seq(120)
    add_range(idx, np.array([5.5, 125.0, 500.0]), 120)
    v = idx.flush()
    assert v == v_before + 1  # tombstone and new run: one commit
    assert idx.runs()[0]["tombstone"] == 120
    res = idx.range(order="seq")
    assert res.seq.tolist() == list(range(123))
    assert idx.range(120, 130).seq.tolist() == [121]  # old keys 120..129 (seqs >= 120) are gone
    assert idx.at_version(v_before).range().seq.size == 150
    exp = (
        np.concatenate([np.arange(120.0), [5.5, 125.0, 500.0]]),
        np.arange(123),
        np.arange(123) * 10,
    )
    assert idx.check(exp) == []
    idx.compact(full=True)
    assert idx.runs()[0]["tombstone"] is None
    assert idx.num_physical_entries == 123
    assert idx.check(exp) == []


def test_tombstone_only_flush_and_memtable_deletes(tmp_path):
    idx = make(tmp_path, options=LSMOptions(auto_compact=False))
    add_range(idx, np.array([1.0, 2.0, 3.0]), 0)
    idx.flush()
    add_range(idx, np.array([4.0, 5.0]), 3)
    idx.delete_from_seq(4)  # removes memtable entry seq 4 only
    assert idx.memtable_entries == 1
    idx.delete_from_seq(1)  # the tail from seq 1 on is gone, committed and buffered
    v = idx.flush()
    assert idx.range().seq.tolist() == [0]
    assert idx.num_runs == 2 and idx.runs()[0]["entries"] == 0
    c = idx.count()
    assert c.low <= 1 <= c.high
    # a tombstone that hides nothing committed is not written at all
    idx.delete_from_seq(100)
    assert idx.flush() == v


def test_compaction_keeps_tombstone_needed_by_older_runs(tmp_path):
    opts = LSMOptions(l0_max_runs=2, size_ratio=100, l1_max_entries=20, auto_compact=False)
    idx = make(tmp_path, options=opts)
    add_range(idx, np.arange(50.0), 0)
    idx.flush()
    idx.compact(full=True)  # 50 entries: level 2 (level 1 holds 20)
    add_range(idx, np.arange(50.0, 60.0), 50)
    idx.flush()
    idx.delete_from_seq(40)  # late events: seqs 40.. are rewritten
    add_range(idx, np.array([-1.0]), 40)
    idx.flush()
    add_range(idx, np.array([-2.0]), 41)
    idx.flush()  # level 0 now holds 3 runs > 2
    exp = (np.concatenate([np.arange(40.0), [-1.0, -2.0]]), np.arange(42), np.arange(42) * 10)
    assert idx.check(exp) == []
    assert idx.compact() is not None
    runs = idx.runs()
    assert [r["level"] for r in runs] == [1, 2]
    assert runs[0]["tombstone"] == 40  # the level-2 run still holds seqs 40..49
    assert runs[0]["entries"] == 2  # the merged run 50..59 was cut by the tombstone
    assert idx.check(exp) == []
    assert idx.range(order="seq").seq.tolist() == list(range(42))
    assert idx.range(45, 49).seq.size == 0
    idx.compact(full=True)
    assert idx.runs()[0]["tombstone"] is None and idx.num_physical_entries == 42
    assert idx.check(exp) == []


# ---------------------------------------------------------------- restore and check
def test_restore_makes_an_older_state_current(tmp_path):
    idx = make(tmp_path)
    add_range(idx, np.array([1.0]), 0)
    v1 = idx.flush()
    add_range(idx, np.array([2.0]), 1)
    idx.flush()
    v3 = idx.restore(v1, commit_metadata={"reason": "recovery"})
    assert v3 == v1 + 2 and idx.range().seq.tolist() == [0]
    assert idx.commit_info()["reason"] == "recovery"
    assert idx.restore(v3) == v3
    with pytest.raises(UsageError):
        idx.restore(v3 + 5)
    add_range(idx, np.array([3.0]), 1)
    idx.flush()
    assert idx.check(([1.0, 3.0], [0, 1], [0, 10])) == []
    assert idx.restore(0) > 0 and idx.num_runs == 0


def test_check_detects_missing_extra_and_wrong_entries(tmp_path):
    idx = make(tmp_path, "int64")
    add_range(idx, np.array([5, 6, 7]), 0)
    idx.flush()
    assert idx.check(([5, 6, 7], [0, 1, 2], [0, 10, 20])) == []
    problems = idx.check(([5, 6, 7, 8], [0, 1, 2, 3], [0, 10, 20, 30]))
    assert any("missing" in p for p in problems)
    problems = idx.check(([5, 6], [0, 1], [0, 10]))
    assert any("not in the primary" in p for p in problems)
    problems = idx.check(([5, 9, 7], [0, 1, 2], [0, 10, 21]))
    assert any("wrong key" in p for p in problems) and any("wrong t" in p for p in problems)
    # the same seq indexed twice (a writer bug the checker must catch)
    add_range(idx, np.array([9]), 1)
    idx.flush()
    assert any("more than once" in p for p in idx.check())
    with pytest.raises(Exception, match="more than once"):
        idx._check()


def test_check_detects_a_tampered_run_file(tmp_path):
    idx = make(tmp_path, "int64")
    add_range(idx, np.arange(40), 0)
    idx.flush()
    name = idx.runs()[0]["files"][0]
    full = os.path.join(idx.path, name)
    md = pq.read_metadata(full).metadata
    table = pq.read_table(full)
    # rewrite the file with keys out of order but the same footer and size accounting
    bad = table.set_column(0, "key", pa.array(np.arange(40)[::-1].copy()))
    with pq.ParquetWriter(full, bad.schema, store_schema=False, use_dictionary=False) as w:
        w.write_table(bad, row_group_size=16)
        w.add_key_value_metadata(md)
    fresh = LSMIndex.open(idx.path)
    problems = fresh.check()
    assert any("not strictly sorted" in p for p in problems)


def test_stats_and_page_model(tmp_path):
    idx = make(tmp_path, "int64")
    add_range(idx, np.arange(1000), 0)
    idx.flush()
    s = idx.stats()
    assert s["entries"] == 1000 and s["entries_per_page"] == ENTRIES_PER_PAGE == 341
    assert s["pages"] == 3 and s["size_bytes"] == idx.size_bytes > 0
    assert s["key_min"] == 0 and s["key_max"] == 999 and isinstance(s["key_min"], int)
    json.dumps(s)
    sidx = make(tmp_path, "string", name="s")
    add_range(sidx, ["x" * 44] * 10, 0)
    sidx.flush()
    assert sidx.entries_per_page == 8192 // (16 + 4 + 44)


def test_parallel_sort_and_write_of_big_runs(tmp_path):
    from replaydb.indexes.entries import Entries
    from replaydb.indexes.parallel import sort_partitioned

    rng = np.random.default_rng(8)
    n = 120_000
    keys = rng.integers(0, 50, n).astype(np.float64)  # heavy ties: equal keys stay in one part
    seqs = rng.permutation(n).astype(np.int64)
    parts = sort_partitioned(Entries(keys, seqs, seqs * 2), 3, 3)
    assert len(parts) >= 2
    for a, b in zip(parts, parts[1:]):
        assert a.key[-1] < b.key[0]
    got = Entries.concat(parts, "float64")
    order = np.lexsort((seqs, keys))
    assert np.array_equal(got.key, keys[order]) and np.array_equal(got.seq, seqs[order])
    assert np.array_equal(got.t, seqs[order] * 2)

    opts = LSMOptions(threads=2, parallel_min_entries=10_000, row_group_entries=4096)
    idx = make(tmp_path, "float64", options=opts)
    idx.bulk_add(keys, np.arange(n), np.arange(n))
    assert idx.num_runs == 1 and idx.num_files == 2
    assert idx.check((keys, np.arange(n), np.arange(n))) == []
    assert idx.point(7.0).seq.tolist() == np.flatnonzero(keys == 7.0).tolist()


def test_vacuum_keeps_files_of_kept_versions(tmp_path):
    idx = make(tmp_path, "int64", options=LSMOptions(auto_compact=False))
    for i in range(3):
        add_range(idx, np.arange(10 * i, 10 * i + 10), 10 * i)
        idx.flush()
    v_before = idx.version
    idx.compact(full=True)
    orphan = os.path.join(idx.path, "run-0000000099-0000000099-L00-p00000-deadbeef.parquet")
    open(orphan, "wb").close()  # left by a crashed writer
    assert idx.vacuum(v_before, dry_run=True) == [os.path.basename(orphan)]
    doomed = idx.vacuum(idx.version)
    # the three compacted runs and the orphan, and the rank codes of the three runs
    assert len([d for d in doomed if d.endswith(".parquet")]) == 4
    assert sorted(d for d in doomed if d.endswith(".codes")) == sorted(
        d + ".codes" for d in doomed if d.endswith(".parquet") and d != os.path.basename(orphan))
    assert not os.path.exists(orphan)
    left = sorted(os.listdir(idx.path))
    assert [n + ".codes" for n in left if n.endswith(".parquet")] == [
        n for n in left if n.endswith(".codes")]  # the live run keeps its codes
    assert idx.check((np.arange(30), np.arange(30), np.arange(30) * 10)) == []
    assert idx.vacuum(idx.version) == []


def test_store_maintenance_helpers(tmp_path):
    from replaydb.indexes.maintenance import (
        compact_stream_indexes,
        index_dir,
        index_stats,
        list_indexes,
    )

    store = tmp_path / "store"
    opts = LSMOptions(auto_compact=False)
    for stream, col in [("s1", "price"), ("s1", "city"), ("s2", "price")]:
        kt = "string" if col == "city" else "float64"
        idx = LSMIndex.create(index_dir(store, stream, col), kt, options=opts)
        for i in range(3):
            keys = [f"c{i}{j}" for j in range(5)] if kt == "string" else np.arange(5.0) + i
            add_range(idx, keys, 5 * i)
            idx.flush()
    (store / "streams" / "s2" / "indexes" / "junk").mkdir()  # not an index: ignored
    assert [(x.stream, x.column) for x in list_indexes(store)] == [
        ("s1", "city"),
        ("s1", "price"),
        ("s2", "price"),
    ]
    assert compact_stream_indexes(store, "s1") == {("s1", "city"): None, ("s1", "price"): None}
    done = compact_stream_indexes(store, full=True)
    assert all(v is not None for v in done.values()) and len(done) == 3
    stats = index_stats(store, "s2")
    assert stats[0]["column"] == "price" and stats[0]["runs"] == 1 and stats[0]["entries"] == 15
    assert list_indexes(tmp_path / "nothing") == []


@settings(max_examples=80, deadline=None)
@given(n=st.integers(0, 70_000), bound_bits=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_argsort_bounded_is_a_stable_argsort(n: int, bound_bits: int, seed: int) -> None:
    """The packed radix argsort (value and position in one word) equals NumPy's stable argsort,
    below and above the small-input cut-over, with ties and wide values (fallback path)."""
    bound = 1 << bound_bits
    rng = np.random.default_rng(seed)
    v = rng.integers(0, bound, n, dtype=np.int64)
    assert np.array_equal(argsort_bounded(v, bound), np.argsort(v, kind="stable"))
    if n:
        with pytest.raises(ValueError):
            argsort_bounded(v, int(v.max()))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 70_000), bound_bits=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_sort_with_payload_equals_a_stable_argsort_and_gathers(n: int, bound_bits: int,
                                                               seed: int) -> None:
    """Sorted values and their payload in one pass equal a stable argsort and two gathers."""
    bound = 1 << bound_bits
    rng = np.random.default_rng(seed)
    v = rng.integers(0, bound, n, dtype=np.int64)
    pay = rng.integers(-(2**62), 2**62, n, dtype=np.int64)
    perm = np.argsort(v, kind="stable")
    keys, out = sort_with_payload(v, pay, bound)
    assert np.array_equal(keys, v[perm]) and np.array_equal(out, pay[perm])
    k32, o32 = sort_with_payload(v, pay.astype(np.int32), bound)  # the allocating path
    assert np.array_equal(k32, v[perm]) and np.array_equal(o32, pay.astype(np.int32)[perm])
    if n:
        with pytest.raises(ValueError):
            sort_with_payload(v, pay, int(v.max()))
        with pytest.raises(ValueError):
            sort_with_payload(v, pay[:-1], bound)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 90_000), spread=st.integers(1, 300), extra=st.integers(0, 5000),
       dup=st.booleans(), seed=st.integers(0, 2**16))
def test_sort_unique_with_payload_sorts_distinct_values_or_declines(
        n: int, spread: int, extra: int, dup: bool, seed: int) -> None:
    """Distinct values in ``[0, bound)`` come back sorted with their payload (equal to an
    argsort and two gathers) whenever the bucket sort takes them (enough values, dense enough);
    a repeated value or a sparse range makes it decline (None), never answer wrongly."""
    rng = np.random.default_rng(seed)
    bound = n * spread + extra + 1
    v = rng.choice(bound, min(n, bound), replace=False).astype(np.int64)
    if dup and v.size > 1:
        v[rng.integers(0, v.size)] = v[rng.integers(0, v.size)]
    pay = rng.integers(-(2**62), 2**62, v.size, dtype=np.int64)
    got = sort_unique_with_payload(v, pay, bound)
    distinct = np.unique(v).size == v.size
    if got is None:
        assert not distinct or v.size < 1 << 15 or bound > 256 * v.size
        return
    assert distinct
    perm = np.argsort(v, kind="stable")
    assert np.array_equal(got[0], v[perm]) and np.array_equal(got[1], pay[perm])
    f = sort_unique_with_payload(v, pay.astype(np.float64), bound)  # another payload dtype
    assert f is not None and np.array_equal(f[1], pay.astype(np.float64)[perm])
    with pytest.raises(ValueError):
        sort_unique_with_payload(v, pay, int(v.max()))


def test_sort_unique_with_payload_takes_large_dense_inputs() -> None:
    """The planner's case (a lookup's seqs in a 10M-event stream) goes through the bucket
    sort, and a non-power-of-two bound keeps its last partial bucket."""
    rng = np.random.default_rng(3)
    for bound, n in ((10_000_000, 300_000), (1_000_003, 1_000_003), (70_001, 40_000)):
        v = rng.choice(bound, n, replace=False).astype(np.int64)
        got = sort_unique_with_payload(v, v * 7, bound)
        assert got is not None
        assert np.array_equal(got[0], np.sort(v)) and np.array_equal(got[1], np.sort(v) * 7)


def test_arena_hands_out_aligned_views_that_survive_growth() -> None:
    """Views taken before the arena grows keep their values (the old block stays theirs);
    after a reset the block is reused from its start; a block above the kept size is
    released."""
    a = Arena()
    x = a.take(1000, np.int64)
    x[:] = np.arange(1000)
    y = a.take(3, np.float64)
    assert x.ctypes.data % Arena.ALIGN == 0 and y.ctypes.data % Arena.ALIGN == 0
    big = a.take(400_000, np.int64)  # larger than the first block: a new one
    big[:] = 7
    assert np.array_equal(x, np.arange(1000)) and a.nbytes >= 400_000 * 8
    a.reset()
    z = a.take(10, np.int32)
    assert z.ctypes.data == big.ctypes.data  # reused from the start
    a.reset(keep_bytes=1024)
    assert a.nbytes == 0
    assert thread_arena() is thread_arena()


@pytest.mark.parametrize("key_type", ["float64", "int64"])
def test_compiled_file_stats_equal_the_python_ones(tmp_path, key_type):
    """A numeric file's estimate and pages from one compiled call (``estimate_and_pages``)
    equal the Python functions' (``estimate_in_file``, ``row_group_span``, ``pages_of``):
    seeded ranges with open ends, both inclusivities, bounds between, on and outside the
    sampled keys (duplicates among them), seq cut-offs before, inside and after the file."""
    from replaydb.indexes.bounds import key_range
    from replaydb.indexes.reader import row_group_span
    from replaydb.indexes.stats import estimate_and_pages, estimate_in_file

    opts = LSMOptions(l0_max_runs=4, auto_compact=False, row_group_entries=8, sample_every=4)
    idx = make(tmp_path, key_type=key_type, options=opts)
    rng = np.random.default_rng(23)
    for start, n in ((0, 300), (300, 41), (341, 1)):
        keys = rng.normal(0, 3, n)
        keys = np.round(keys) if key_type == "int64" else np.round(keys, 1)  # duplicates
        add_range(idx, keys.astype(key_type), start)
        idx.flush()
    files = [f for run in idx._runs for f in run.files]
    assert len(files) == 3
    pool = [None, *np.round(rng.normal(0, 4, 16), 1).tolist(), -100.0, 100.0, 0.0]
    if key_type == "int64":
        pool = [None if b is None else int(round(b)) for b in pool]
    epp = idx.entries_per_page
    checked = 0
    for _ in range(600):
        lo, hi = (pool[int(rng.integers(len(pool)))] for _ in range(2))
        kr = key_range(key_type, lo, hi, bool(rng.integers(2)), bool(rng.integers(2)))
        if kr.empty:
            continue
        f = files[int(rng.integers(len(files)))]
        cut = int(rng.choice([0, f.seq_min, f.seq_min + 1, (f.seq_min + f.seq_max) // 2,
                              f.seq_max, f.seq_max + 1, 10_000]))
        a, b = row_group_span(f, kr)
        for est, pages in ((True, True), (True, False), (False, True)):
            got = estimate_and_pages(f, kr, cut, epp, estimate=est, pages=pages)
            want = (estimate_in_file(f, kr, cut) if est else (0.0, 0, 0)) + (
                f.pages_of(a, b, epp) if pages else 0,)
            assert got == pytest.approx(want, rel=1e-12, abs=1e-9), (lo, hi, kr, cut)
            assert [type(x) for x in got] == [float, int, int, int]
        checked += 1
    assert checked > 250


def test_range_stats_are_the_count_and_the_read_plans_pages(tmp_path):
    """One pass gives what count() and read_plan() give for a range - over several runs, a
    tombstone, ``max_seq`` cuts, open and empty ranges, both inclusivities."""
    opts = LSMOptions(l0_max_runs=4, auto_compact=False, row_group_entries=8, sample_every=4)
    idx = make(tmp_path, options=opts)
    rng = np.random.default_rng(11)
    add_range(idx, rng.normal(0, 1, 300), 0)
    idx.flush()
    add_range(idx, rng.normal(1, 2, 200), 300)
    idx.flush()
    idx.delete_from_seq(450)
    add_range(idx, rng.normal(-1, 1, 80), 450)
    idx.flush()
    bounds = [None, *rng.normal(0, 2, 12).tolist()]
    for _ in range(200):
        lo, hi = (bounds[int(rng.integers(len(bounds)))] for _ in range(2))
        lo_inc, hi_inc = bool(rng.integers(2)), bool(rng.integers(2))
        max_seq = [None, 100, 400, 460, 10_000][int(rng.integers(5))]
        est, pages = idx.range_stats(lo, hi, lo_inclusive=lo_inc, hi_inclusive=hi_inc,
                                     max_seq=max_seq)
        want = idx.count(lo, hi, lo_inclusive=lo_inc, hi_inclusive=hi_inc, max_seq=max_seq)
        plan = idx.read_plan(lo, hi, lo_inclusive=lo_inc, hi_inclusive=hi_inc)
        assert (est.estimate, est.low, est.high) == (want.estimate, want.low, want.high)
        assert pages == plan["pages_read"]
