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
from replaydb.indexes.plainread import HeaderError, PlainFile, page_header
from replaydb.indexes.reader import FileCache

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
