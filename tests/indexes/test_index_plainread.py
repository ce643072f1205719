"""Direct reads of run files (:mod:`replaydb.indexes.plainread`) and ``LSMIndex.seqs``: the
same entries and counters as ``range``, on plain files and - through Arrow - on files that
are not plain (another codec, string keys), and a damaged page header falls back."""

from __future__ import annotations

import os

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.indexes import LSMIndex, LSMOptions
from replaydb.indexes.bitsets import keys_of_bits, union_bits_of, unique_bits
from replaydb.indexes.kernels import _SMALL_SORT
from replaydb.indexes.plainread import HeaderError, PlainFile, Spans, page_header
from replaydb.indexes.reader import FileCache, join_pieces

OPTS = LSMOptions(l0_max_runs=3, size_ratio=3, l1_max_entries=400, row_group_entries=32,
                  sample_every=4, auto_compact=False)


def _build(tmp_path, key_type: str, seed: int, options: LSMOptions = OPTS,
           tomb: bool = True) -> tuple[LSMIndex, np.ndarray, np.ndarray]:
    """An index of several runs (one with a tombstone); returns it, every live key and seq."""
    rng = np.random.default_rng(seed)
    idx = LSMIndex.create(tmp_path / f"ix-{key_type}-{seed}", key_type, options=options)
    keys, seqs = [], []
    start = 0
    for part in range(4):
        n = int(rng.integers(1, 300))
        k = rng.integers(0, 60, n)
        if key_type == "float64":
            k = k * 0.5
        elif key_type == "string":
            k = np.array([f"k{x:02d}" for x in k], dtype=object)
        s = np.arange(start, start + n, dtype=np.int64)
        idx.add(k, s, s * 3 + 1)
        keys.append(k)
        seqs.append(s)
        start += n
        if tomb and part == 2:
            cut = start - n // 2
            idx.delete_from_seq(cut)
            keep = [x < cut for x in seqs]
            keys = [a[m] for a, m in zip(keys, keep)]
            seqs = [a[m] for a, m in zip(seqs, keep)]
            start = cut
        idx.flush()
    return idx, np.concatenate(keys), np.concatenate(seqs)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), key_type=st.sampled_from(["int64", "float64", "string"]),
       lo=st.integers(-2, 62), width=st.integers(-1, 40), li=st.booleans(), hi_i=st.booleans(),
       open_end=st.sampled_from([None, "lo", "hi", "both"]), max_seq=st.integers(0, 1300))
def test_seqs_equal_range(tmp_path_factory, seed, key_type, lo, width, li, hi_i, open_end,
                          max_seq) -> None:
    tmp = tmp_path_factory.mktemp("plain")
    idx, _, _ = _build(tmp, key_type, seed)

    def key(x: int):
        if key_type == "string":
            return f"k{x:02d}"
        return x * 0.5 if key_type == "float64" else x

    a = None if open_end in ("lo", "both") else key(lo)
    b = None if open_end in ("hi", "both") else key(lo + width)
    ms = None if max_seq > 1200 else max_seq
    idx.reset_counters()
    r = idx.range(a, b, lo_inclusive=li, hi_inclusive=hi_i, order="seq", max_seq=ms)
    c_range = idx.counters.snapshot()
    idx.reset_counters()
    for with_t in (True, False):
        seq, t, cost = idx.seqs(a, b, lo_inclusive=li, hi_inclusive=hi_i, max_seq=ms,
                                with_t=with_t)
        order = np.argsort(seq, kind="stable")
        assert np.array_equal(seq[order], r.seq)
        if with_t:
            assert np.array_equal(t[order], r.t)
        else:
            assert t is None
        for name in ("entries_read", "row_groups_read", "pages_read", "files_read",
                     "runs_consulted", "runs_skipped", "row_groups_skipped"):
            assert getattr(cost, name) == getattr(c_range, name), name
        assert cost.entries_returned == len(r)
    # the same entries in pieces: spans of plain files (not copied) and arrays, one each
    pieces, tps, _ = idx.seq_pieces(a, b, lo_inclusive=li, hi_inclusive=hi_i, max_seq=ms,
                                    with_t=True)
    assert tps is not None and [p.size for p in pieces] == [p.size for p in tps]
    got = join_pieces(pieces)
    order = np.argsort(got, kind="stable")
    assert np.array_equal(got[order], r.seq)
    assert np.array_equal(join_pieces(tps)[order], r.t)
    if key_type != "string" and len(r) and ms is None:  # a max_seq cut copies
        assert any(isinstance(p, Spans) for p in pieces)
    bits = union_bits_of(pieces, max(len(got), 1) * 2 + 1300)
    if bits is not None:
        assert np.array_equal(keys_of_bits(bits, len(got)), np.sort(got))


def test_plain_files_are_read_directly_and_others_through_arrow(tmp_path) -> None:
    """Numeric run files are plain: every chunk of key, seq and t located and equal to
    Arrow's read. A snappy-compressed index still answers the same through Arrow."""
    idx, _, _ = _build(tmp_path, "float64", 3, tomb=False)
    cache = FileCache()
    names = [f.name for r in idx._runs for f in r.files]
    assert names
    for name in names:
        path = os.path.abspath(os.path.join(idx.path, name))
        pf = pq.ParquetFile(path)
        plain = cache.plain(path)
        for g in range(pf.metadata.num_row_groups):
            tbl = pf.read_row_group(g)
            for col in ("key", "seq", "t"):
                got = plain.column(g, col)
                assert got is not None and np.array_equal(got, tbl.column(col).to_numpy())
        both = plain.columns(0, pf.metadata.num_row_groups, "seq")
        assert np.array_equal(both, pf.read(columns=["seq"]).column("seq").to_numpy())
    cache.close()
    snappy = LSMOptions(**{**OPTS.__dict__, "compression": "snappy"})
    z, _, _ = _build(tmp_path / "z", "float64", 3, options=snappy, tomb=False)
    zname = os.path.join(z.path, z._runs[0].files[0].name)
    assert PlainFile(zname, pq.ParquetFile(zname)).column(0, "seq") is None
    for a, b in ((3.0, 20.0), (None, 7.5), (29.5, None)):
        want = np.sort(idx.range(a, b, order="seq").seq)
        seq, _, _ = z.seqs(a, b)
        assert np.array_equal(np.sort(seq), want)


def test_a_damaged_page_header_is_not_taken(tmp_path) -> None:
    """A header that is not valid compact Thrift raises HeaderError in the parser, and a file
    whose page header is damaged makes the plain reader decline (None), never misread."""
    with pytest.raises(HeaderError):
        page_header(b"\x15")  # a field header and nothing after it
    with pytest.raises(HeaderError):
        page_header(b"\x1c\x15\x00")  # a struct cut short
    idx, _, _ = _build(tmp_path, "int64", 4, tomb=False)
    f = idx._runs[0].files[0]
    path = os.path.join(idx.path, f.name)
    md = pq.ParquetFile(path).metadata
    off = md.row_group(0).column(1).data_page_offset
    raw = bytearray(open(path, "rb").read())
    hdr, hlen = page_header(bytes(raw[off:off + 512]))
    assert hdr[1] == 0 and hlen > 0  # a data page
    raw[off] = 0x00  # the header now ends before its first field
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(raw))
    assert PlainFile(str(bad), pq.ParquetFile(str(bad))).column(0, "seq") is None


def test_columns_of_row_group_ranges(tmp_path) -> None:
    """``columns(a, b)`` is the concatenation of Arrow's row groups ``[a, b)`` for random
    ranges and every fixed-width column, located lazily (a range whose chunks were never
    read before); a range holding a damaged chunk declines."""
    idx, _, _ = _build(tmp_path, "float64", 6, tomb=False)
    f = max((f for r in idx._runs for f in r.files), key=lambda f: f.num_row_groups)
    path = os.path.abspath(os.path.join(idx.path, f.name))
    pf = pq.ParquetFile(path)
    ng = pf.metadata.num_row_groups
    assert ng >= 4
    rng = np.random.default_rng(0)
    plain = PlainFile(path, pf)
    for _ in range(40):
        a = int(rng.integers(0, ng))
        b = int(rng.integers(a + 1, ng + 1))
        col = str(rng.choice(["key", "seq", "t"]))
        want = pf.read_row_groups(list(range(a, b)), columns=[col]).column(col).to_numpy()
        got = plain.columns(a, b, col)
        assert got is not None and got.dtype == want.dtype and np.array_equal(got, want)
    assert plain.columns(2, 2, "seq") is None
    # spans, and spans cut at any positions, are the same values without a copy
    for _ in range(40):
        a = int(rng.integers(0, ng))
        b = int(rng.integers(a + 1, ng + 1))
        want = pf.read_row_groups(list(range(a, b)), columns=["seq"]).column("seq").to_numpy()
        sp = plain.spans(a, b, "seq")
        assert sp is not None and sp.size == len(want) and len(sp.offsets) == b - a
        i0 = int(rng.integers(0, len(want) + 1))
        i1 = int(rng.integers(i0, len(want) + 3))
        cut = sp.cut(i0, i1)
        assert np.array_equal(cut.array(), want[i0:i1]) and cut.size == len(want[i0:i1])
        assert (cut.counts > 0).all()
        plain.check()
    md = pf.metadata
    off = md.row_group(2).column(1).data_page_offset
    raw = bytearray(open(path, "rb").read())
    raw[off] = 0x00
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(raw))
    damaged = PlainFile(str(bad), pq.ParquetFile(str(bad)))
    assert damaged.columns(0, 2, "seq") is not None
    assert damaged.columns(1, 4, "seq") is None
    assert damaged.columns(0, ng, "t") is not None
    assert damaged.spans(1, 4, "seq") is None and damaged.spans(0, 2, "seq") is not None
    damaged.check()
    # located in full (one chunk not plain): a range without it is still read in place
    assert damaged.columns(0, ng, "seq") is None
    assert damaged._unlocated[1] == 0 and damaged._not_plain[1] == 1
    assert damaged.spans(3, ng, "seq") is not None and damaged.spans(2, 3, "seq") is None
    damaged.check()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16),
       n=st.one_of(st.integers(0, 300), st.integers(_SMALL_SORT - 10, 3 * _SMALL_SORT)),
       parts=st.integers(1, 6),
       bound_mul=st.sampled_from([1, 2, 5, 300]), repeat=st.booleans())
def test_union_bits_of_pieces_equal_the_bits_of_their_set(tmp_path_factory, seed, n, parts,
                                                          bound_mul, repeat) -> None:
    """Bits set from several pieces - arrays, and int64 values lying in a file's bytes at any
    alignment - are the bits of the set of their values: a value repeated (within a piece or
    across two) is one member, and the scan with ``at_most`` reads each member once. None
    when the values are too sparse for a bitmap; ValueError for a value out of range, either
    way."""
    rng = np.random.default_rng(seed)
    bound = max(n, 1) * bound_mul
    vals = rng.choice(bound, min(n, bound), replace=False).astype(np.int64)
    if repeat and len(vals) > 1:
        for _ in range(int(rng.integers(1, 4))):
            vals[int(rng.integers(0, len(vals)))] = vals[int(rng.integers(0, len(vals)))]
    cuts = np.sort(rng.integers(0, len(vals) + 1, parts - 1))
    chunks = np.split(vals, cuts)
    raw = b"".join(c.tobytes() for c in chunks)
    lead = seed % 8 + 1  # the values at any byte alignment, as in a data page
    buf = np.frombuffer(b"\x00" * lead + raw, np.uint8)
    pieces, at = [], lead
    for k, c in enumerate(chunks):
        if k % 2:
            pieces.append(c)
        else:
            pieces.append(Spans(buf, np.array([at], np.int64), np.array([len(c)], np.int64),
                                np.dtype("<i8")))
        at += c.nbytes
    distinct = np.unique(vals)
    got = union_bits_of(pieces, bound)
    dense = len(vals) >= _SMALL_SORT and bound_mul < 256
    assert (got is not None) == dense  # the bitmap takes them whenever dense enough
    if got is not None:
        want = unique_bits(distinct, bound)
        if want is not None:
            assert np.array_equal(got, want)
        assert np.array_equal(keys_of_bits(got, len(vals), at_most=True), distinct)
        if len(distinct) < len(vals):
            with pytest.raises(ValueError, match="holds"):
                keys_of_bits(got, len(vals))  # the exact count is wrong for a union
        with pytest.raises(ValueError, match="more"):
            keys_of_bits(got, len(distinct) - 1, at_most=True)
    with pytest.raises(ValueError):
        union_bits_of([np.array([bound], np.int64), *pieces], bound)
    with pytest.raises(ValueError):
        union_bits_of([*pieces, np.array([-1], np.int64)], bound)


def test_pieces_outlive_the_closed_file(tmp_path) -> None:
    """Spans a lookup handed out stay readable after the index closes its files (the map is
    released only with the last view of it), and a full compaction meanwhile (new run files)
    does not change what they hold."""
    idx, _, _ = _build(tmp_path, "int64", 8, tomb=False)
    want = np.sort(idx.range(5, 40, order="seq").seq)
    pieces, _, _ = idx.seq_pieces(5, 40)
    assert any(isinstance(p, Spans) for p in pieces)
    idx.close()
    idx.compact(full=True)
    idx.close()
    got = np.sort(join_pieces(pieces))
    assert np.array_equal(got, want)
    bits = union_bits_of(pieces, int(want.max()) + 1)
    if bits is not None:
        assert np.array_equal(keys_of_bits(bits, len(want)), want)


def _split_pieces(vals: np.ndarray, parts: int, seed: int) -> list:
    """``vals`` in ``parts`` pieces: arrays, and (every other one) int64 values lying in a
    file's bytes at an alignment the seed picks."""
    pieces = []
    for j, c in enumerate(np.array_split(vals, parts)):
        lead = (seed + j) % 8
        buf = np.frombuffer(b"\x00" * lead + c.tobytes(), np.uint8)
        pieces.append(c if j % 2 else Spans(buf, np.array([lead], np.int64),
                                            np.array([len(c)], np.int64), np.dtype("<i8")))
    return pieces


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(0, 3000), k=st.integers(0, 400),
       parts=st.integers(1, 4), buffer=st.sampled_from([1, 2, 5, 64, 1 << 13]))
def test_members_in_pieces_equal_isin(seed, n, k, parts, buffer) -> None:
    """Which targets are among the values of pieces (arrays, and int64 values lying in a
    file's bytes at any alignment, repeats allowed) - what ``np.isin`` answers, however
    small the buffer of values passing the coarse bitmap (settled whenever it fills);
    ValueError for a value or a target outside ``[0, bound)``."""
    from replaydb.indexes import membership
    from replaydb.indexes.membership import members_in_pieces

    rng = np.random.default_rng(seed)
    bound = max(n, k, 1) * 3 + 5
    vals = rng.integers(0, bound, n).astype(np.int64)
    targets = np.unique(np.concatenate([rng.integers(0, bound, k), vals[: k // 2]]))
    pieces = _split_pieces(vals, parts, seed)
    old, membership.PASS_BUFFER = membership.PASS_BUFFER, buffer
    try:
        got = members_in_pieces(targets, pieces, bound)
    finally:
        membership.PASS_BUFFER = old
    assert np.array_equal(got, np.isin(targets, vals))
    if len(targets):
        with pytest.raises(ValueError):
            members_in_pieces(targets, [*pieces, np.array([bound], np.int64)], bound)
        with pytest.raises(ValueError):
            members_in_pieces(np.append(targets, bound), pieces, bound + 0)


def test_scan_pays_where_measured() -> None:
    """With the costs measured on the development machine (the planner's defaults until a
    store is calibrated), the scan-or-bitmap choice of a tight block's member test picks, on
    the cases it was fitted to, the way that was faster there: the scan for few targets
    whatever the values, and for many targets against few values; the bitmap for many
    targets against many values. The scan's cost grows with the targets, the bitmap's does
    not."""
    from replaydb.indexes.membership import scan_pays
    from replaydb.planner.pattern.membercosts import DEFAULT_MEMBER_COSTS as dev

    bound = 10_000_000
    assert scan_pays(46, 953_327, bound, dev) and scan_pays(2_429, 173_300, bound, dev)
    assert scan_pays(28_527, 65_448, bound, dev)
    assert not scan_pays(16_096, 885_644, bound, dev)
    assert not scan_pays(30_750, 388_501, bound, dev)
    flips = [scan_pays(t, 500_000, bound, dev) for t in (10, 1_000, 10_000, 100_000, 1_000_000)]
    assert flips == sorted(flips, reverse=True) and flips[0] and not flips[-1]


SCAN_WINS = dict(scan_value=0.0, scan_pass=0.0, bits_value=1.0, bits_bound=1.0,
                 bits_target=1.0, code_target=1.0)
BITS_WIN = dict(scan_value=1e6, scan_pass=1e6, bits_value=0.0, bits_bound=0.0,
                bits_target=0.0, code_target=1.0)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.sampled_from([1, 500, 40_000]),
       k=st.integers(1, 2000), parts=st.integers(1, 3))
def test_scan_pays_follows_the_costs_and_both_ways_agree(seed, n, k, parts) -> None:
    """:func:`scan_pays` takes the way its costs make cheaper - always the scan with a free
    scan, always the bitmap with a free bitmap - and the two ways find the same members of
    the lookup (the bitmap set where the values lie, a bit read per target; the scan
    against the targets' coarse bitmap). :func:`member_test_ns` is the cheaper way's
    cost."""
    from replaydb.indexes.bitsets import member_bits
    from replaydb.indexes.membership import (
        MemberTestCosts,
        member_test_ns,
        members_in_pieces,
        scan_pays,
    )

    rng = np.random.default_rng(seed)
    bound = 4 * n + 64
    vals = np.unique(rng.integers(0, bound, n)).astype(np.int64)
    targets = np.unique(rng.integers(0, bound, k)).astype(np.int64)
    scan_wins, bits_win = MemberTestCosts(**SCAN_WINS), MemberTestCosts(**BITS_WIN)
    assert scan_pays(targets.size, vals.size, bound, scan_wins)
    assert not scan_pays(targets.size, vals.size, bound, bits_win)
    assert member_test_ns(targets.size, vals.size, bound, scan_wins) == 0.0
    assert member_test_ns(targets.size, vals.size, bound, bits_win) == 0.0
    pieces = _split_pieces(vals, parts, seed)
    by_scan = members_in_pieces(targets, pieces, bound)
    bits = union_bits_of(pieces, bound)
    if bits is None:  # too few for the planner's bitmap (it sorts them): one set by hand
        bits = np.zeros((bound + 63) >> 6, np.uint64)
        np.bitwise_or.at(bits, vals >> 6, np.uint64(1) << (vals & 63).astype(np.uint64))
    by_bits = np.isin(targets, member_bits(targets, 0, bits, bound))
    assert np.array_equal(by_scan, by_bits)
    assert np.array_equal(by_scan, np.isin(targets, vals))


def test_member_test_costs_are_costs() -> None:
    """Each way's cost is its linear model; a negative or non-finite cost is refused."""
    from replaydb.indexes.membership import MemberTestCosts

    c = MemberTestCosts(scan_value=1.0, scan_pass=100.0, bits_value=2.0, bits_bound=0.5,
                        bits_target=3.0, code_target=50.0)
    assert c.scan_ns(10, 1000, 80) == 1000 * (1.0 + 100.0 * 1.0)  # every value passes
    assert c.scan_ns(1, 1000, 8000) == 1000 * (1.0 + 100.0 * 8 / 8000)
    assert c.bits_ns(10, 1000, 8000) == 0.5 * 8000 + 2.0 * 1000 + 3.0 * 10
    assert c.codes_ns(10, 3) == 50.0 * 30
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="scan_pass"):
            MemberTestCosts(**{**SCAN_WINS, "scan_pass": bad})


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(0, 3000), k=st.integers(0, 400),
       parts=st.integers(1, 4), shift=st.integers(-5, 5), repeats=st.booleans())
def test_hits_in_bits_equal_a_set_join(seed, n, k, parts, shift, repeats) -> None:
    """The distinct ``v + shift`` of the values of pieces (arrays, and int64 values lying in
    a file's bytes at any alignment) that are members of a bitmap - a set join; None when
    repeated values make more hits than the bitmap's members; ValueError for a value
    outside ``[0, bound)``."""
    from replaydb.indexes.membership import hits_in_bits

    rng = np.random.default_rng(seed)
    bound = max(n, k, 1) * 3 + 5
    vals = rng.choice(bound, min(n, bound), replace=False).astype(np.int64)
    if repeats and vals.size:
        vals = np.concatenate([vals, rng.choice(vals, int(rng.integers(1, vals.size + 1)))])
        rng.shuffle(vals)
    members = np.unique(np.concatenate([rng.integers(0, bound, k), vals[: k // 2] + shift]))
    members = members[(members >= 0) & (members < bound)]
    bits = np.zeros((bound + 63) >> 6, np.uint64)
    np.bitwise_or.at(bits, members >> 6, np.uint64(1) << (members & 63).astype(np.uint64))
    pieces = _split_pieces(vals, parts, seed)
    want = np.intersect1d(np.unique(vals + shift), members)
    got = hits_in_bits(pieces, shift, bits, bound, members.size)
    hits = int(np.isin(vals + shift, members).sum())
    if hits > members.size:
        assert got is None
    else:
        assert got is not None and np.array_equal(got, want)
    assert np.array_equal(hits_in_bits(pieces, shift, bits, bound, max(hits, 1)), want)
    with pytest.raises(ValueError):
        hits_in_bits([*pieces, np.array([bound], np.int64)], shift, bits, bound, vals.size + 1)
    with pytest.raises(ValueError):
        hits_in_bits([np.array([-1], np.int64), *pieces], shift, bits, bound, vals.size + 1)
