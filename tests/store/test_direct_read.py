"""Direct reads of data files (store/directread.py, store/pagecodec.py) against Arrow's reader:
every layout pyarrow writes either decodes to Arrow's table or is declined (None), the store's
own layout is always decoded, and corrupt bytes never crash the decoder or pass as data Arrow
rejects."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.store import snappy
from replaydb.store.deltaio import write_parquet
from replaydb.store.directread import DirectFile
from replaydb.store.parquetcache import IOCounters, ParquetCache
from replaydb.store.schema import StreamSchema
from replaydb.store.store import Store

_I64 = np.iinfo(np.int64)


def _table(rng: np.random.Generator, n: int, nulls: float) -> pa.Table:
    """Columns of every fixed width the reader takes, strings and binary (with nulls, empty
    values, few and many distinct values), plus a bool it declines."""
    def holes(arr: pa.Array) -> pa.Array:
        if nulls == 0:
            return arr
        mask = rng.random(n) < nulls
        return pa.array(arr.to_numpy(zero_copy_only=False), type=arr.type,
                        mask=mask)

    t = np.cumsum(rng.integers(0, 5, n)).astype(np.int64)
    wide = rng.integers(_I64.min, _I64.max, n, dtype=np.int64, endpoint=True)
    return pa.table({
        "t": pa.array(t),
        "seq": pa.array(np.arange(n, dtype=np.int64) + 7),
        "wide": holes(pa.array(wide)),
        "f64": holes(pa.array(rng.normal(size=n))),
        "f32": holes(pa.array(rng.normal(size=n).astype(np.float32))),
        "i32": holes(pa.array(rng.integers(-2**31, 2**31 - 1, n).astype(np.int32))),
        "small": pa.array(rng.integers(-3, 3, n).astype(np.int32)),
        "ts": pa.array(t, type=pa.timestamp("us")),
        "day": pa.array(rng.integers(0, 20000, n).astype(np.int32), type=pa.date32()),
        "u64": pa.array(rng.integers(0, 2**63, n, dtype=np.uint64)),
        "name": pa.array([f"s{i % 7}" for i in range(n)]),
        "label": holes(pa.array([f"v{x}" * int(x % 4) for x in rng.integers(0, 300, n)])),
        "blob": holes(pa.array([bytes(rng.integers(0, 256, int(x)).astype(np.uint8))
                                for x in rng.integers(0, 9, n)], pa.binary())),
        "flag": pa.array(rng.random(n) < 0.5),
    })


DECODED = ["t", "seq", "wide", "f64", "f32", "i32", "small", "ts", "day", "u64"]
BYTES = ["name", "label", "blob"]
INTS = ["t", "seq", "wide", "i32", "small", "ts", "day", "u64"]


def _write(path, tbl: pa.Table, rng: random.Random) -> dict:
    opts = {
        "compression": rng.choice(["none", "snappy", "snappy", "zstd"]),
        "data_page_version": rng.choice(["1.0", "1.0", "2.0"]),
        "row_group_size": rng.choice([7, 64, 100, 1000]),
        "data_page_size": rng.choice([64, 1 << 20]),
        "write_statistics": rng.random() < 0.5,
        # a small dictionary limit makes the writer fall back to PLAIN pages mid-chunk
        "dictionary_pagesize_limit": rng.choice([64, 1 << 20]),
    }
    dictionary = rng.random() < 0.2
    if dictionary:
        opts["use_dictionary"] = True
    else:
        opts["use_dictionary"] = rng.choice([["name"], ["name", "label", "blob"]])
        delta = [c for c in INTS if rng.random() < 0.6]
        opts["column_encoding"] = {c: "DELTA_BINARY_PACKED" for c in delta}
    pq.write_table(tbl, path, **opts)
    opts["dictionary"] = dictionary
    return opts


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 700),
       nulls=st.sampled_from([0.0, 0.1, 0.9]))
def test_direct_read_equals_arrow_or_declines(tmp_path_factory, seed, n, nulls):
    rng = random.Random(seed)
    tbl = _table(np.random.default_rng(seed), n, nulls)
    path = tmp_path_factory.mktemp("d") / "f.parquet"
    opts = _write(path, tbl, rng)
    pf = pq.ParquetFile(path)
    d = DirectFile(str(path), pf)
    k = pf.metadata.num_row_groups
    for _ in range(4):
        groups = rng.sample(range(k), rng.randint(1, k))
        cols = rng.sample(list(tbl.column_names), rng.randint(1, 4))
        want = pf.read_row_groups(groups, columns=cols, use_threads=False)
        got = d.read(groups, cols)
        decodable = (set(cols) <= set(DECODED + BYTES)
                     and opts["compression"] in ("none", "snappy")
                     and opts["data_page_version"] == "1.0"
                     and (not opts["dictionary"] or set(cols) <= set(BYTES)))
        if decodable:
            assert got is not None, (opts, cols)
        if got is not None:
            assert got.schema.equals(want.schema), (got.schema, want.schema)
            assert got.equals(want), (opts, cols, groups)
        d.check()


def test_delta_packing_of_extreme_values(tmp_path):
    """Every bit width 0..64 in a miniblock, wrap-around deltas, int32 and int64."""
    vals = [np.zeros(300, np.int64),
            np.array([_I64.min, _I64.max] * 200, np.int64),
            np.array([_I64.max, _I64.min, 0, -1, 1] * 80, np.int64)]
    # every width of the bit-buffer path (1..56) and of the wide one, partial miniblocks
    vals += [np.cumsum(np.random.default_rng(w).integers(0, 2**w, 300 + w, dtype=np.int64))
             for w in range(0, 63)]
    for i, v in enumerate(vals):
        v32 = (v & 0x7FFFFFFF).astype(np.int32) - (1 << 30)
        tbl = pa.table({"a": v, "b": v32})
        p = tmp_path / f"x{i}.parquet"
        pq.write_table(tbl, p, use_dictionary=False, compression="none", row_group_size=128,
                       column_encoding={"a": "DELTA_BINARY_PACKED",
                                        "b": "DELTA_BINARY_PACKED"})
        pf = pq.ParquetFile(p)
        got = DirectFile(str(p), pf).read(list(range(pf.metadata.num_row_groups)), ["a", "b"])
        assert got is not None and got.equals(pq.read_table(p)), i


def test_single_values_of_delta_packed_pages(tmp_path):
    """A value read where it lies in a delta-packed page (the first value plus the deltas
    before it, summed without decoding into an array) equals the column's, at every bit
    width, across blocks and miniblocks, for int64 and int32 (the slot's low half)."""
    from replaydb.store import pagecodec

    rng = np.random.default_rng(11)
    cols = {f"w{w}": np.cumsum(rng.integers(0, 2**w, 1000, dtype=np.int64)) - (1 << 40)
            for w in (0, 1, 7, 13, 31, 55, 56, 57, 62)}
    cols["wrap"] = np.array([_I64.min, _I64.max, 0, -1] * 250, np.int64)
    cols["i32"] = rng.integers(-2**31, 2**31 - 1, 1000).astype(np.int32)
    tbl = pa.table(cols)
    p = tmp_path / "probe.parquet"
    pq.write_table(tbl, p, use_dictionary=False, compression="none", row_group_size=1000,
                   column_encoding={c: "DELTA_BINARY_PACKED" for c in cols})
    pf = pq.ParquetFile(p)
    d = DirectFile(str(p), pf)
    top, dph = np.empty(4, np.int64), np.empty(4, np.int64)
    for name, want in cols.items():
        start, size, codec, width, optional = d.chunks(np.array([0]), name)
        for r in list(range(0, 1000, 13)) + [999]:
            st_, v = pagecodec.value_in_chunk(d.buffer, int(start[0]), int(start[0] + size[0]),
                                              int(codec[0]), int(width), bool(optional), r,
                                              top, dph)
            slot = (np.uint64(np.uint32(want[r])) if want.dtype.itemsize == 4
                    else np.uint64(want[r].view(np.uint64)))
            assert st_ == pagecodec.OK and v == slot, (name, r)
        st_, _ = pagecodec.value_in_chunk(d.buffer, int(start[0]), int(start[0] + size[0]),
                                          int(codec[0]), int(width), bool(optional), 1000,
                                          top, dph)
        assert st_ == pagecodec.CORRUPT  # past the chunk's values


def test_store_layout_is_always_decoded(tmp_path):
    rng = np.random.default_rng(3)
    n = 5000
    tbl = pa.table({"t": np.cumsum(rng.integers(0, 3, n)), "seq": np.arange(n),
                    "x": rng.normal(size=n),
                    "k": pa.array(rng.normal(size=n), mask=rng.random(n) < .2),
                    "type": pa.array(np.array(["ATL", "ORD", "", "LAX"])[rng.integers(0, 4, n)],
                                     mask=rng.random(n) < .1)})
    p = tmp_path / "s.parquet"
    write_parquet(p, tbl, 512)
    pf = pq.ParquetFile(p)
    d = DirectFile(str(p), pf)
    cols = ["t", "seq", "x", "k", "type"]
    for groups in ([0], [3, 1], list(range(pf.metadata.num_row_groups))):
        got = d.read(groups, cols)
        assert got is not None
        assert got.equals(pf.read_row_groups(groups, columns=cols))


def test_corrupt_bytes_never_crash_or_pass_as_data(tmp_path):
    """Random byte flips in a file of the store's layout: the decoder answers a table equal to
    what Arrow reads from the same bytes, or None; it never reads outside the file."""
    rng = np.random.default_rng(11)
    n = 2000
    tbl = pa.table({"t": np.cumsum(rng.integers(0, 3, n)), "seq": np.arange(n),
                    "x": pa.array(rng.normal(size=n), mask=rng.random(n) < .3),
                    "s": pa.array([f"v{v}" * int(v % 3) for v in rng.integers(0, 40, n)],
                                  mask=rng.random(n) < .2)})
    clean = tmp_path / "clean.parquet"
    write_parquet(clean, tbl, 256)
    raw = clean.read_bytes()
    md = pq.ParquetFile(clean).metadata
    last = md.row_group(md.num_row_groups - 1).column(3)
    body = (last.dictionary_page_offset or last.data_page_offset) + last.total_compressed_size
    declined = 0
    for i in range(300):
        data = bytearray(raw)
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(4, body))] = int(rng.integers(0, 256))
        p = tmp_path / f"c{i}.parquet"
        p.write_bytes(bytes(data))
        pf = pq.ParquetFile(p)  # the footer is intact
        groups = list(range(md.num_row_groups))
        got = DirectFile(str(p), pf).read(groups, ["t", "seq", "x", "s"])
        try:
            want = pf.read_row_groups(groups, columns=["t", "seq", "x", "s"])
        except (OSError, ValueError, pa.ArrowException):
            want = None
        if got is None:
            declined += 1
        elif want is not None:
            assert got.equals(want)
    assert declined > 0  # the flips did hit headers and levels


def test_snappy_decoder_on_arrow_blocks():
    codec = pa.Codec("snappy")
    rng = np.random.default_rng(5)
    for data in (b"", b"a" * 1000, bytes(rng.integers(0, 4, 5000).astype(np.uint8)),
                 rng.bytes(3000), b"abcabcabcabd" * 300):
        comp = np.frombuffer(codec.compress(data, asbytes=True), np.uint8)
        out = np.empty(len(data), np.uint8)
        assert snappy.snappy_decompress(comp, 0, comp.size, out) == len(data)
        assert out.tobytes() == data
        bad = np.empty(len(data) + 1, np.uint8)  # a wrong length is refused
        assert snappy.snappy_decompress(comp, 0, comp.size, bad) == -1
        if comp.size > 2:
            assert snappy.snappy_decompress(comp, 0, comp.size - 1, out) == -1 or \
                len(data) == 0


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), pieces=st.integers(1, 40), lead=st.integers(0, 9))
def test_snappy_decoder_on_mixed_literals_and_copies(seed, pieces, lead):
    """Literals and back-references of every length (not multiples of 8, overlapping copies
    that repeat a short run, long copies from far back), the block at any byte offset of its
    buffer: the bytes Arrow compressed."""
    rng = np.random.default_rng(seed)
    data = bytearray()
    for _ in range(pieces):
        kind = rng.integers(0, 3)
        n = int(rng.integers(1, 300))
        if kind == 0 or not data:
            data += rng.bytes(n)
        elif kind == 1:  # a repeat of a short run: overlapping copies
            run = bytes(data[-int(rng.integers(1, min(8, len(data)) + 1)):])
            data += (run * (n // len(run) + 1))[:n]
        else:  # a copy from anywhere before
            at = int(rng.integers(0, len(data)))
            data += bytes(data[at:at + n])
    data = bytes(data)
    comp = np.frombuffer(b"\xff" * lead + pa.Codec("snappy").compress(data, asbytes=True),
                         np.uint8)
    out = np.empty(len(data), np.uint8)
    assert snappy.snappy_decompress(comp, lead, comp.size, out) == len(data)
    assert out.tobytes() == data


def test_cache_reads_directly_and_evicts_with_the_file(tmp_path):
    paths = []
    for i in range(4):
        p = tmp_path / f"f{i}.parquet"
        write_parquet(p, pa.table({"t": np.arange(300) + i, "seq": np.arange(300),
                                   "x": np.ones(300) * i}), 100)
        paths.append(str(p))
    for direct in (True, False):
        cache = ParquetCache(capacity=2, direct=direct)
        counters = IOCounters()
        for _ in range(3):
            for p in paths:
                pf = cache.get(p, counters)
                got = cache.read_row_groups(p, pf, np.array([2, 0]), ["t", "x"])
                assert got.equals(pf.read_row_groups([2, 0], columns=["t", "x"]))
                cache.check()
        assert (len(cache._direct) > 0) == direct


@pytest.mark.parametrize("direct", [True, False])
def test_store_reads_alike_with_and_without_direct_reads(tmp_path, direct):
    store = Store(tmp_path / "s", create=True)
    rng = np.random.default_rng(2)
    n = 3000
    tbl = pa.table({"t": np.cumsum(rng.integers(0, 4, n)), "x": rng.normal(size=n),
                    "y": pa.array(rng.normal(size=n), mask=rng.random(n) < .1)})
    store.create_stream("s", StreamSchema.infer(tbl.schema, time_unit="ms", leaf_capacity=64,
                                                fanout=4))
    store.append("s", tbl)
    store.parquet_cache.direct = direct
    snap = store.stream("s")
    got = snap.read(100, 5000, ["x", "y"])
    leaves = snap.read_leaves(1, 4)
    agg = snap.aggregate(17, 4111)
    assert (len(store.parquet_cache._direct) > 0) == direct
    store.parquet_cache.direct = not direct
    other = store.stream("s")
    assert got.equals(other.read(100, 5000, ["x", "y"]))
    assert leaves.equals(other.read_leaves(1, 4))
    assert agg == other.aggregate(17, 4111)
    assert snap.counters.as_dict() == other.counters.as_dict()


def test_read_files_equals_concatenated_reads(tmp_path):
    """Row groups of several files decoded into one table are ``concat_tables`` of the
    per-file reads; a wrong row total, or a file the reader declines, answers None."""
    rng = np.random.default_rng(5)
    paths = []
    for i in range(3):
        p = tmp_path / f"f{i}.parquet"
        n = 250 + 40 * i
        tbl = pa.table({
            "t": np.arange(n) + 1000 * i, "seq": np.arange(n) + 1000 * i,
            "x": pa.array(rng.normal(size=n), mask=rng.random(n) < .2),
            "k": pa.array(rng.integers(0, 9, n).astype(np.int32)),
            "s": pa.array([f"f{i}-{v}" for v in rng.integers(0, 5, n)],
                          mask=rng.random(n) < .2)})
        required_t = tbl.schema.set(0, pa.field("t", pa.int64(), nullable=False))
        write_parquet(p, tbl.cast(required_t), 64)  # a required time column, as stored
        paths.append(str(p))
    cache, counters = ParquetCache(), IOCounters()
    cols = ("t", "x", "k", "s")
    picks = [np.array([3, 0]), np.array([1]), np.array([0, 2, 4])]
    pieces = [(p, cache.get(p, counters), g) for p, g in zip(paths, picks)]
    want = pa.concat_tables([pf.read_row_groups(g.tolist(), columns=list(cols))
                             for _, pf, g in pieces])
    got = cache.read_files(pieces, cols, want.num_rows)
    assert got is not None and got.equals(want)
    assert got.column("x").null_count == want.column("x").null_count > 0
    assert got.column("s").null_count == want.column("s").null_count > 0
    # only the rows inside time intervals, strings included (each file's own dictionary)
    lo, hi = np.array([10, 1010, 2030]), np.array([20, 1100, 2300])
    ordered = [(p, pf, np.sort(g)) for p, pf, g in pieces]
    whole = pa.concat_tables([pf.read_row_groups(g.tolist(), columns=list(cols))
                              for _, pf, g in ordered])
    kept = cache.read_files_kept(ordered, cols, whole.num_rows, lo, hi)
    assert kept is not None
    t = whole.column("t").to_numpy()
    inside = np.zeros(len(t), bool)
    for a, b in zip(lo, hi):
        inside |= (t >= a) & (t < b)
    assert kept[0].equals(whole.filter(pa.array(inside)))
    assert kept[0].column("s").null_count > 0
    assert cache.read_files(pieces, cols, want.num_rows + 1) is None
    assert cache.read_files(pieces, cols, want.num_rows - 1) is None
    declined = tmp_path / "dict.parquet"
    pq.write_table(pa.table({"t": np.arange(100), "x": np.ones(100), "k":
                             np.zeros(100, np.int32), "s": ["a"] * 100}), declined,
                   use_dictionary=True)
    pf = cache.get(str(declined), counters)
    assert cache.read_files(pieces + [(str(declined), pf, np.array([0]))], cols,
                            want.num_rows + 100) is None
    assert ParquetCache(direct=False).read_files(pieces, cols, want.num_rows) is None


def test_interval_reads_across_files_alike_with_and_without_direct_reads(tmp_path):
    """Many short intervals whose leaves lie in many data files (one table per read, gathered
    from several files): the same tables, parts and counters as reading file by file
    through Arrow."""
    store = Store(tmp_path / "s", create=True)
    rng = np.random.default_rng(9)
    schema = None
    t0 = 0
    for _ in range(6):  # six appends: six data files
        n = 700
        t = t0 + np.cumsum(rng.integers(1, 4, n))
        t0 = int(t[-1])
        tbl = pa.table({"t": t, "x": rng.normal(size=n),
                        "y": pa.array(rng.normal(size=n), mask=rng.random(n) < .1),
                        "z": pa.array([f"z{v}" for v in rng.integers(0, 9, n)],
                                      mask=rng.random(n) < .1)})
        if schema is None:
            schema = StreamSchema.infer(tbl.schema, time_unit="ms", leaf_capacity=64, fanout=4)
            store.create_stream("s", schema)
        store.append("s", tbl)
    starts = np.sort(rng.choice(t0, 40, replace=False))
    ivs = [(int(a), int(a) + 30) for a in starts]
    ivs = [iv for k, iv in enumerate(ivs) if k == 0 or iv[0] >= ivs[k - 1][1]]
    out = {}
    for direct in (True, False):
        fresh = Store(tmp_path / "s")
        fresh.parquet_cache.direct = direct
        snap = fresh.stream("s")
        out[direct] = ([(tbl, parts) for tbl, parts in
                        snap.read_interval_groups(ivs, ["x", "y"], max_leaves=16)],
                       snap.counters.as_dict())
    (a, ca), (b, cb) = out[True], out[False]
    assert len(a) == len(b) > 1
    for (ta, pa_), (tb, pb) in zip(a, b):
        assert ta.equals(tb) and pa_ == pb
    assert ca == cb


@pytest.fixture(scope="module")
def nullable_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six data files of 700 events (repeated timestamps) with nullable columns, one of them
    strings."""
    path = tmp_path_factory.mktemp("kept") / "s"
    store = Store(path, create=True)
    rng = np.random.default_rng(11)
    t0 = 0
    for k in range(6):
        n = 700
        t = t0 + np.cumsum(rng.integers(0, 3, n))  # steps of 0: a time repeats across leaves
        t0 = int(t[-1])
        tbl = pa.table({"t": t, "x": rng.normal(size=n),
                        "y": pa.array(rng.normal(size=n), mask=rng.random(n) < .1),
                        "z": pa.array([f"z{v}" for v in rng.integers(0, 9, n)],
                                      mask=rng.random(n) < .1)})
        if k == 0:
            store.create_stream("s", StreamSchema.infer(tbl.schema, time_unit="ms",
                                                        leaf_capacity=64, fanout=4))
        store.append("s", tbl)
    return path


@settings(max_examples=60, deadline=None)
@given(points=st.lists(st.integers(-20, 2200), min_size=2, max_size=60),
       max_leaves=st.sampled_from([1, 4, 16, 64]), direct=st.booleans(),
       cols=st.sampled_from([["x", "y"], ["y"], [], ["z"], ["z", "x"]]))
def test_kept_rows_reads_hold_exactly_the_intervals_rows(nullable_store, points, max_leaves,
                                                        direct, cols) -> None:
    """``kept_only`` reads (the direct reader decoding only the rows inside the intervals,
    or whole leaves cut down): each interval's events, nulls included, as the whole-leaves
    read slices them, its parts one after the other from row 0 of one-chunk tables, and the
    same counters (what was decoded)."""
    pts = sorted(set(points))
    ivs = [(pts[i], pts[i + 1]) for i in range(0, len(pts) - 1, 2)]
    got: dict[bool, tuple[dict[int, list[pa.Table]], dict]] = {}
    decoded: list[bool] = []
    real = ParquetCache.read_files_kept

    def watched(self, *args):  # the real read; whether the direct reader decoded it
        out = real(self, *args)
        decoded.append(out is not None)
        return out

    ParquetCache.read_files_kept = watched  # type: ignore[method-assign]
    try:
        _read_both(nullable_store, ivs, cols, max_leaves, direct, got)
    finally:
        ParquetCache.read_files_kept = real  # type: ignore[method-assign]
    assert decoded == [direct] * len(decoded)  # the direct reader takes every kept read
    (whole, cw), (kept_, ck) = got[False], got[True]
    assert whole.keys() == kept_.keys()
    for k in whole:
        a, b = pa.concat_tables(whole[k]), pa.concat_tables(kept_[k])
        assert a.equals(b)
        assert a.column("t").to_numpy().min() >= ivs[k][0]
        assert a.column("t").to_numpy().max() < ivs[k][1]
    assert cw == ck


def _read_both(path: Path, ivs: list[tuple[int, int]], cols: list[str], max_leaves: int,
               direct: bool, got: dict) -> None:
    """Whole-leaves and kept-rows interval reads of a fresh store, per interval, with the
    counters of each."""
    for kept in (False, True):
        fresh = Store(path)
        fresh.parquet_cache.direct = direct
        snap = fresh.stream("s")
        per: dict[int, list[pa.Table]] = {}
        for tbl, parts in snap.read_interval_groups(ivs, cols, max_leaves=max_leaves,
                                                     kept_only=kept):
            if kept:
                assert [o for _, o, _ in parts] == np.cumsum(
                    [0] + [r for _, _, r in parts[:-1]]).tolist()
                assert sum(r for _, _, r in parts) == tbl.num_rows
                assert all(c.num_chunks == 1 for c in tbl.columns)
            for k, off, rows in parts:
                per.setdefault(k, []).append(tbl.slice(off, rows))
        got[kept] = (per, snap.counters.as_dict())


def test_only_intervals_that_cut_a_leaf_take_the_kept_rows_read(nullable_store) -> None:
    """Full replay (one unbounded interval) and intervals holding whole leaves read whole
    leaves, straight into the read's buffers; an interval that starts inside a leaf takes
    the kept-rows read."""
    snap = Store(nullable_store).stream("s")
    lv = snap.tree.leaves
    calls: list[int] = []
    real = ParquetCache.read_files_kept

    def counted(self, *args):  # the real read, counted
        calls.append(1)
        return real(self, *args)

    t_min, t_max = lv.col("t_min"), lv.col("t_max")
    # leaf boundaries where the time steps (no timestamp shared by the two leaves)
    clean = [i for i in range(1, lv.n) if t_max[i - 1] < t_min[i]]
    a, b = clean[0], clean[2]
    whole = [(int(t_min[a]), int(t_min[b]))]  # leaves a .. b - 1, whole
    inside = [(int(t_min[a]) + 1, int(t_min[b]))]  # starts inside leaf a
    assert t_min[a] + 1 <= t_max[a]
    ParquetCache.read_files_kept = counted  # type: ignore[method-assign]
    try:
        for ivs in ([(None, None)], whole):
            got = list(snap.read_interval_groups(ivs, ["x"], kept_only=True))
            assert got and calls == []
        got = list(snap.read_interval_groups(inside, ["x"], kept_only=True))
        assert calls == [1]
        assert sum(r for _, parts in got for _, _, r in parts) == \
            snap.read(inside[0][0], inside[0][1], ["x"]).num_rows
    finally:
        ParquetCache.read_files_kept = real  # type: ignore[method-assign]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), pieces=st.integers(1, 30),
       stops=st.lists(st.integers(0, 9000), min_size=1, max_size=4))
def test_snappy_prefix_writes_the_blocks_first_bytes_and_resumes(seed, pieces, stops):
    """Decompressing a block in stages (each stop a byte count to reach) writes at least that
    many of its bytes, exactly its bytes, and ends where one full decompression does."""
    rng = np.random.default_rng(seed)
    data = bytearray()
    for _ in range(pieces):
        n = int(rng.integers(1, 300))
        data += rng.bytes(n) if rng.random() < 0.5 or not data else bytes(data[-n:]) * 2
    data = bytes(data)
    comp = np.frombuffer(pa.Codec("snappy").compress(data, asbytes=True), np.uint8)
    out = np.zeros(len(data), np.uint8)
    _, total, pos = snappy._varint(comp, 0, comp.size)
    assert total == len(data)
    got = 0
    for upto in sorted(stops) + [len(data)]:
        pos, got = snappy.snappy_prefix(comp, pos, comp.size, out, got, upto)
        assert pos >= 0 and got >= min(upto, len(data))
        assert out[:got].tobytes() == data[:got]
    assert got == len(data) and pos == comp.size


def _arrow_slots(arr: pa.ChunkedArray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """``(slots, valid)`` of a fixed-width Arrow column as the direct reader writes them:
    each value's ``width`` bytes as a uint64 (its bits, zero-extended), read from Arrow's
    own value buffer; a null's slot is left 0."""
    a = arr.combine_chunks()
    raw = np.frombuffer(a.buffers()[1], np.uint64 if width == 8 else np.uint32,
                        len(a) + a.offset)[a.offset:].astype(np.uint64)
    valid = np.asarray(a.is_valid().to_numpy(zero_copy_only=False), np.uint8)
    return np.where(valid == 1, raw, 0).astype(np.uint64), valid


def _prefix(chunk: tuple[np.ndarray, int, int, int], need: int, codec: int, width: int,
            optional: bool, scratch: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """``(status, slots, valid)`` of the first ``need`` rows of ``chunk`` = ``(file bytes,
    start, end, rows)`` decoded by :func:`.pageprefix.chunk_prefix`: each slot's low
    ``width`` bytes (a delta-packed INT32 leaves its sign in the high ones, which the table
    builder drops), nulls' slots 0."""
    from replaydb.store.pageprefix import chunk_prefix

    buf, start, end, rows = chunk
    out, valid = np.zeros(rows, np.uint64), np.ones(rows, np.uint8)
    st_, _ = chunk_prefix(buf, start, end, rows, need, codec, width, optional, out, valid,
                          scratch, np.empty(0, np.uint64))
    wanted = np.arange(rows) < need
    low = np.uint64(0xFFFFFFFF if width == 4 else 0xFFFFFFFFFFFFFFFF)  # the bytes readers use
    return (st_, np.where(wanted & (valid == 1), out & low, 0).astype(np.uint64),
            np.where(wanted, valid, 1))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 700),
       nulls=st.sampled_from([0.0, 0.1, 0.9]))
def test_chunk_prefix_equals_arrows_first_rows(tmp_path_factory, seed, n, nulls):
    """The first rows of every fixed-width column chunk, decoded alone (store/pageprefix.py),
    equal Arrow's values of those rows, and so does the whole chunk (every row wanted, the
    whole-chunk decoder), for every layout (several pages per chunk, nulls, snappy or not,
    PLAIN or delta-packed, pages v1 or v2, dictionaries); a chunk it declines is one whose
    whole decoding it declines too."""
    from replaydb.store.pagecodec import OK

    rng = random.Random(seed)
    tbl = _table(np.random.default_rng(seed), n, nulls)
    path = tmp_path_factory.mktemp("p") / "f.parquet"
    _write(path, tbl, rng)
    pf = pq.ParquetFile(path)
    d = DirectFile(str(path), pf)
    buf = d.buffer
    for col in DECODED:
        got = d.chunks(np.arange(pf.metadata.num_row_groups), col)
        if got is None:
            continue
        offs, sizes, codecs, width, optional = got
        for g in range(pf.metadata.num_row_groups):
            if offs[g] < 0:
                continue
            rows = pf.metadata.row_group(g).num_rows
            want, wvalid = _arrow_slots(pf.read_row_group(g, columns=[col]).column(0), width)
            scratch = np.empty(max(1, int(pf.metadata.row_group(g).column(
                pf.schema_arrow.get_field_index(col)).total_uncompressed_size)), np.uint8)

            chunk = (buf, int(offs[g]), int(offs[g] + sizes[g]), rows)
            st_full, full, fvalid = _prefix(chunk, rows, codecs[g], width, optional, scratch)
            need = rng.randint(0, rows)
            st_part, part, pvalid = _prefix(chunk, need, codecs[g], width, optional, scratch)
            if st_full != OK:
                assert st_part != OK or need == 0
                continue
            np.testing.assert_array_equal(full, want)
            np.testing.assert_array_equal(fvalid, wvalid)
            assert st_part == OK, (col, g, need)
            np.testing.assert_array_equal(part[:need], want[:need])
            np.testing.assert_array_equal(pvalid[:need], wvalid[:need])
