"""The store's cache of open Parquet files: LRU bounds by file count and footer bytes, and the
per-file row-group byte counts leaving with their file (seeded stress with the invariant
checker)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.store.parquetcache import IOCounters, ParquetCache


def _files(tmp_path, n):
    paths = []
    for i in range(n):
        p = tmp_path / f"f{i}.parquet"
        rows = 50 * (i + 1)
        pq.write_table(pa.table({"t": np.arange(rows), "x": np.ones(rows)}), p,
                       row_group_size=50)
        paths.append(str(p))
    return paths


def test_seeded_stress_keeps_bounds_and_drops_row_group_counts(tmp_path):
    paths = _files(tmp_path, 12)
    footer = pq.ParquetFile(paths[-1]).metadata.serialized_size
    for seed in range(20):
        rng = random.Random(seed)
        cache = ParquetCache(capacity=rng.randint(1, 8), footer_budget=rng.randint(1, 6) * footer)
        counters = IOCounters()
        seen = set()
        for _ in range(200):
            p = rng.choice(paths)
            seen.add(p)
            pf = cache.get(p, counters)
            got = cache.rg_bytes(p, pf, rng.choice([["t"], ["t", "x"]]))
            assert len(got) == pf.metadata.num_row_groups and (got > 0).all()
            cache.check()
        assert counters.files_opened >= len(seen)  # every file was opened at least once


def test_reopens_only_past_the_bound(tmp_path):
    paths = _files(tmp_path, 5)
    cache = ParquetCache()
    counters = IOCounters()
    for _ in range(3):
        for p in paths:
            cache.get(p, counters)
    assert counters.files_opened == 5
    small = ParquetCache(capacity=4)
    counters = IOCounters()
    for _ in range(3):
        for p in paths:  # a sweep over more files than the bound reopens every file
            small.get(p, counters)
    assert counters.files_opened == 15
    small.check()
