"""Selectivity statistics: count estimates from key samples, their bounds and their error."""

from __future__ import annotations

import numpy as np
import pytest

from replaydb.indexes import LSMIndex, LSMOptions
from replaydb.indexes.sketch import (
    SeqHistogram,
    byte_ranges,
    rank,
    sample_positions,
    seq_hist_shift,
)


def test_rank_bounds_are_guaranteed_on_ties():
    keys = np.sort(np.random.default_rng(1).integers(0, 12, 1000))
    for step in (1, 3, 50, 999, 5000):
        pos = sample_positions(keys.size, step)
        samples = keys[pos]
        for x in range(-1, 14):
            for strict in (True, False):
                true = int(np.searchsorted(keys, x, side="left" if strict else "right"))
                r = rank(samples, pos, keys.size, x, strict=strict)
                assert r.low <= true <= r.high and r.low <= r.estimate <= r.high
                assert r.high - r.low <= max(0, step - 1)
                if step == 1:
                    assert r.low == r.high == true


def test_string_rank_interpolates_after_the_common_prefix():
    keys = sorted(f"user{i:05d}" for i in range(10_000))
    pos = sample_positions(len(keys), 1000)
    samples = [keys[p] for p in pos]
    ranges = byte_ranges(samples)
    for i in (4321, 17, 9876, 5000):
        r = rank(samples, pos, len(keys), f"user{i:05d}", strict=True, ranges=ranges)
        assert r.low <= i <= r.high
        assert abs(r.estimate - i) < 50  # digits interpolated in base ~10, not 256
    plain = rank(samples, pos, len(keys), "user04321", strict=True)
    assert plain.low <= 4321 <= plain.high


def test_seq_histogram_bounds():
    rng = np.random.default_rng(2)
    seqs = np.sort(rng.choice(100_000, 5_000, replace=False))
    shift = seq_hist_shift(int(seqs[0]), int(seqs[-1]), 64)
    nb = ((int(seqs[-1]) - int(seqs[0])) >> shift) + 1
    assert nb <= 64
    counts = np.bincount((seqs - seqs[0]) >> shift, minlength=nb)
    h = SeqHistogram(int(seqs[0]), shift, counts)
    for c in rng.integers(-10, 100_010, 200).tolist() + [int(seqs[0]), int(seqs[-1])]:
        true = int(np.sum(seqs >= c))
        r = h.at_or_above(c)
        assert r.low <= true <= r.high and r.low <= r.estimate <= r.high


def _index_with_runs(tmp_path, keys):
    """Keys spread over a bulk-loaded run plus several flushed runs (different levels)."""
    opts = LSMOptions(l0_max_runs=3, size_ratio=4, l1_max_entries=40_000, row_group_entries=4096)
    idx = LSMIndex.create(tmp_path / "ix", "float64", options=opts)
    n = keys.size
    bulk = n // 2
    s = np.arange(n, dtype=np.int64)
    idx.bulk_add(keys[:bulk], s[:bulk], s[:bulk])
    for a in range(bulk, n, 25_000):
        b = min(n, a + 25_000)
        idx.add(keys[a:b], s[a:b], s[a:b])
        idx.flush()
    return idx


def test_selectivity_estimate_error_is_small(tmp_path):
    rng = np.random.default_rng(3)
    n = 300_000
    keys = np.concatenate([rng.normal(0.3, 0.05, n // 2), rng.uniform(0, 1, n // 2)])
    rng.shuffle(keys)
    idx = _index_with_runs(tmp_path, keys)
    assert idx.num_runs >= 2
    sorted_keys = np.sort(keys)
    errors = []
    for _ in range(300):
        target = 10 ** rng.uniform(-4, -1)  # 0.01% .. 10% of the entries
        width = max(1, int(target * n))
        i = int(rng.integers(0, n - width))
        lo, hi = float(sorted_keys[i]), float(sorted_keys[i + width - 1])
        true = int(np.count_nonzero((keys >= lo) & (keys <= hi)))
        est = idx.count(lo, hi)
        assert est.low <= true <= est.high
        errors.append(abs(est.estimate - true) / true)
        sel = idx.selectivity(lo, hi)
        assert abs(sel - est.estimate / n) < 1e-12
    errors = np.array(errors)
    # goal from the issue: median relative error under 5% for ranges above 0.01%
    assert np.median(errors) < 0.05, np.median(errors)
    assert idx.counters.entries_read == 0  # estimates read no entries


def test_exact_count_reads_only_boundary_row_groups(tmp_path):
    rng = np.random.default_rng(4)
    keys = rng.uniform(0, 1, 200_000)
    idx = _index_with_runs(tmp_path, keys)
    idx.reset_counters()
    c = idx.count(0.2, 0.7, exact=True)
    assert c.low == c.high == int(np.count_nonzero((keys >= 0.2) & (keys <= 0.7)))
    files = idx.num_files
    assert idx.counters.row_groups_read <= 2 * files
    assert idx.counters.entries_read <= 2 * files * 4096 < 0.5 * keys.size * 0.5


def test_counts_with_tombstones_and_max_seq_stay_bounded(tmp_path):
    rng = np.random.default_rng(5)
    opts = LSMOptions(auto_compact=False, row_group_entries=1024)
    idx = LSMIndex.create(tmp_path / "ix", "int64", options=opts)
    keys = rng.integers(0, 1000, 50_000)
    s = np.arange(50_000)
    idx.add(keys, s, s)
    idx.flush()
    idx.delete_from_seq(30_000)
    new = rng.integers(0, 1000, 5_000)
    idx.add(new, np.arange(30_000, 35_000), np.arange(30_000, 35_000))
    idx.flush()
    live = np.concatenate([keys[:30_000], new])
    lseq = np.arange(35_000)
    for lo, hi, max_seq in [(100, 300, None), (0, 999, None), (500, 520, 32_000), (0, 50, 10_000)]:
        m = (live >= lo) & (live <= hi)
        if max_seq is not None:
            m &= lseq < max_seq
        true = int(m.sum())
        est = idx.count(lo, hi, max_seq=max_seq)
        assert est.low <= true <= est.high, (lo, hi, est, true)
        assert abs(est.estimate - true) <= max(0.1 * true, 50)
        assert idx.count(lo, hi, max_seq=max_seq, exact=True).estimate == true
    assert idx.num_entries == pytest.approx(35_000, rel=0.01)
