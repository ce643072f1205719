"""Rank codes beside run files (:mod:`replaydb.indexes.rankcodes`): the codes are the file's
ranks bucketed, a codes file that does not match its run file is ignored, the invariant check
finds a changed code, vacuum removes codes with their run files, and a member test by codes
answers what a pass over the lookup's seqs answers - on ranges that cut buckets, with
repeated keys, over several runs and parts, and with tombstones."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from replaydb.indexes import LSMIndex, LSMOptions
from replaydb.indexes.membership import members_in_pieces
from replaydb.indexes.rankcodes import (
    ABSENT,
    BUCKETS,
    HEADER_BYTES,
    build_codes,
    check_codes,
    coded,
    codes_name,
    members_by_codes,
    open_codes,
    run_of_codes,
)


def test_codes_are_the_ranks_bucketed() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 7, BUCKETS - 1, BUCKETS, BUCKETS + 1, 200_003):
        seq = rng.permutation(n + n // 3)[:n].astype(np.int64) + 5  # some seqs absent
        lo, hi = int(seq.min()), int(seq.max())
        codes = build_codes(seq, lo, hi)
        assert codes is not None and codes.size == hi - lo + 1
        want = np.full(hi - lo + 1, ABSENT, np.uint16)
        want[seq - lo] = np.arange(n) * BUCKETS // n
        assert np.array_equal(codes, want)
    assert build_codes(np.array([3, 9, 3]), 3, 9) is None  # a repeated seq
    assert build_codes(np.array([0, 100]), 0, 100) is None  # too sparse to keep
    assert build_codes(np.zeros(0, np.int64), 0, 0) is None
    assert run_of_codes(codes_name("run-x.parquet")) == "run-x.parquet"
    assert run_of_codes("run-x.parquet") is None


def _index(path, keys, *, options=None) -> LSMIndex:
    idx = LSMIndex.create(path, "float64", options=options or LSMOptions(row_group_entries=4096))
    seqs = np.arange(keys.size, dtype=np.int64)
    idx.bulk_add(keys, seqs, seqs * 10)
    return idx


def _scan_and_codes(idx: LSMIndex, lo: float, hi: float, targets: np.ndarray, *,
                    lo_inc: bool = True, hi_inc: bool = True, n: int) -> tuple[Any, Any, Any]:
    """The scan's answer, the codes' (None when not coded) and whether the lookup was coded
    (None when it found nothing)."""
    pieces, _, _ = idx.seq_pieces(lo, hi, lo_inclusive=lo_inc, hi_inclusive=hi_inc, max_seq=n)
    want = members_in_pieces(targets, pieces, n) if pieces else np.zeros(targets.size, bool)
    if not pieces:
        return want, None, None
    if not coded(pieces):
        return want, None, False
    return want, members_by_codes(targets, pieces), True


def test_members_by_codes_are_the_lookups_members(tmp_path) -> None:
    """Over 200k entries (three per bucket) with many repeated keys, every range - bounds
    inside, at and between repeated keys, open or closed - tests like the scan."""
    rng = np.random.default_rng(1)
    n = 200_000
    keys = np.round(rng.normal(size=n), 2)  # about 700 distinct keys: ranges cut buckets
    idx = _index(tmp_path / "ix", keys)
    assert all(os.path.exists(os.path.join(idx.path, codes_name(f.name)))
               for r in idx._runs for f in r.files)
    used = 0
    for _ in range(60):
        lo = float(rng.choice(keys)) + float(rng.choice([0.0, 0.0, 0.005, -0.005]))
        hi = lo + float(rng.choice([0.0, 0.01, 0.3, 2.0]))
        targets = np.sort(rng.choice(n + 50, int(rng.integers(1, 3000)), replace=False))
        targets = targets[targets < n]
        want, got, ok = _scan_and_codes(idx, lo, hi, targets, lo_inc=bool(rng.integers(2)),
                                        hi_inc=bool(rng.integers(2)), n=n)
        assert ok is not False  # every lookup that finds entries is coded
        if ok:
            used += 1
            assert np.array_equal(got, want)
    assert used > 30
    assert idx.check((keys, np.arange(n), np.arange(n) * 10)) == []


def test_several_runs_parts_and_tombstones(tmp_path) -> None:
    """Runs flushed apart, a compaction split into parts, and a tombstone: each lookup's
    pieces are coded where they are whole ranges of a file with codes (a piece cut by a
    tombstone is not), and the codes test like the scan wherever they are used."""
    rng = np.random.default_rng(2)
    opts = LSMOptions(row_group_entries=512, auto_compact=False, target_file_entries=3000)
    idx = LSMIndex.create(tmp_path / "ix", "float64", options=opts)
    keys = rng.normal(size=12_000)
    for a in range(0, 8000, 2000):
        s = np.arange(a, a + 2000, dtype=np.int64)
        idx.add(keys[a:a + 2000], s, s)
        idx.flush()
    idx.compact(full=True)
    assert idx.num_files > 1
    s = np.arange(8000, 12_000, dtype=np.int64)
    idx.add(keys[8000:], s, s)
    idx.flush()
    idx.delete_from_seq(11_000)  # late events rewrote the tail
    s = np.arange(11_000, 11_500, dtype=np.int64)
    keys[11_000:11_500] = rng.normal(size=500)
    idx.add(keys[11_000:11_500], s, s)
    idx.flush()
    n = 11_500
    coded_seen = uncoded_seen = 0
    for _ in range(40):
        lo = float(rng.normal())
        hi = lo + float(rng.choice([0.05, 0.5, 3.0]))
        targets = np.sort(rng.choice(n, int(rng.integers(1, 2000)), replace=False))
        want, got, ok = _scan_and_codes(idx, lo, hi, targets, n=n)
        truth = np.isin(targets, np.flatnonzero((keys[:n] >= lo) & (keys[:n] <= hi)))
        assert np.array_equal(want, truth)
        if ok:
            coded_seen += 1
            assert np.array_equal(got, truth)
        elif ok is False:
            uncoded_seen += 1
    assert coded_seen == 0 and uncoded_seen > 30  # every lookup reads the cut run
    # without the tombstone's run in the way (an older snapshot's bound), the files are coded
    for _ in range(20):
        lo = float(rng.normal())
        hi = lo + 0.5
        targets = np.sort(rng.choice(8000, 500, replace=False))
        want, got, ok = _scan_and_codes(idx, lo, hi, targets, n=8000)
        assert ok and np.array_equal(got, want)
    assert idx.check((keys[:n], np.arange(n), np.arange(n))) == []


def test_a_codes_file_that_does_not_match_is_ignored_and_checked(tmp_path) -> None:
    rng = np.random.default_rng(3)
    keys = rng.normal(size=20_000)
    idx = _index(tmp_path / "ix", keys)
    meta = idx._runs[0].files[0]
    path = os.path.join(idx.path, codes_name(meta.name))
    plain = idx._files.plain(os.path.join(idx.path, meta.name))
    seqs = plain.spans(0, meta.num_row_groups, "seq")
    rc = open_codes(idx.path, meta)
    assert rc is not None and check_codes(rc, seqs.array()) == []
    rc.close()
    # codes closed under a lookup (its file left the cache): the test answers None
    pieces, _, _ = idx.seq_pieces(-0.5, 0.5, max_seq=keys.size)
    assert coded(pieces)
    targets = np.arange(0, keys.size, 7)
    assert members_by_codes(targets, pieces) is not None
    idx._files.close()
    assert members_by_codes(targets, pieces) is None
    raw = bytearray(open(path, "rb").read())
    # a changed code: still opened (the header matches), found by the invariant check
    j = HEADER_BYTES + 2 * 10
    raw[j] ^= 1
    open(path, "wb").write(bytes(raw))
    idx._files.close()
    problems = idx.check((keys, np.arange(keys.size), np.arange(keys.size) * 10))
    assert len(problems) == 1 and "rank codes differ" in problems[0]
    # another header, a short file, no file: none usable, and the lookup is not coded
    for bad in (b"XXXXXXXX" + bytes(raw[8:]), bytes(raw[:-2]), None):
        idx._files.close()
        if bad is None:
            os.remove(path)
        else:
            open(path, "wb").write(bad)
        assert open_codes(idx.path, meta) is None
        pieces, _, _ = idx.seq_pieces(-0.5, 0.5, max_seq=keys.size)
        assert not coded(pieces)
    assert idx.check((keys, np.arange(keys.size), np.arange(keys.size) * 10)) == []


@pytest.mark.parametrize("options", [LSMOptions(rank_codes=False),
                                     LSMOptions(compression="snappy")])
def test_no_codes_when_off_or_not_plain(tmp_path, options) -> None:
    keys = np.random.default_rng(4).normal(size=5000)
    idx = _index(tmp_path / "ix", keys, options=options)
    assert not [n for n in os.listdir(idx.path) if n.endswith(".codes")]
    pieces, _, _ = idx.seq_pieces(-0.5, 0.5, max_seq=keys.size)
    assert not coded(pieces)


def test_string_keys_have_no_codes(tmp_path) -> None:
    idx = LSMIndex.create(tmp_path / "ix", "string")
    seqs = np.arange(100, dtype=np.int64)
    idx.bulk_add(np.array([f"k{i % 7}" for i in range(100)], dtype=object), seqs, seqs)
    assert not [n for n in os.listdir(idx.path) if n.endswith(".codes")]
