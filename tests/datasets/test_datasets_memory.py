"""Generators stream in bounded memory: peak memory does not grow with the number of events.

Each measurement runs in a fresh interpreter and reports three peaks: Python/NumPy allocations
(tracemalloc; NumPy reports its buffers to it), Arrow's memory pool, and the process's maximum
resident set size. Four times the events must not raise any of them beyond noise. The default run
covers the widest generator (synthetic-normal, 128-byte events) and the stateful ones through the
Parquet writer; the slow run covers every generator at larger sizes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import replaydb.datasets as ds

MiB = 1 << 20

_PROBE = textwrap.dedent(
    """
    import json, resource, sys, tracemalloc
    import pyarrow as pa
    import replaydb.datasets as ds
    name, n, mode, out, opts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
    tracemalloc.start()
    rows = 0
    if mode == "generate":
        for b in ds.generate(name, n, 1, **opts):
            rows += b.num_rows
    else:
        rows = ds.make(name, out, n, 1, overwrite=True, **opts).rows
    print(json.dumps({
        "rows": rows,
        "python": tracemalloc.get_traced_memory()[1],
        "arrow": pa.default_memory_pool().max_memory(),
        "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))
    """
)


def peaks(name: str, n: int, mode: str, out: str, **opts) -> dict[str, int]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, name, str(n), mode, out, json.dumps(opts)],
        capture_output=True, text=True, check=True,
    )
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["rows"] == n
    return res


def assert_bounded(name: str, n_small: int, factor: int, mode: str, tmp_path, **opts) -> None:
    small = peaks(name, n_small, mode, str(tmp_path / "a.parquet"), **opts)
    big = peaks(name, n_small * factor, mode, str(tmp_path / "b.parquet"), **opts)
    for key, slack in (("python", 8 * MiB), ("arrow", 8 * MiB), ("rss", 48 * MiB)):
        assert big[key] <= small[key] * 1.15 + slack, (
            f"{name}: {key} peak grew from {small[key] / MiB:.1f} MiB at {n_small:,} events to "
            f"{big[key] / MiB:.1f} MiB at {n_small * factor:,}"
        )


@pytest.mark.parametrize("name", ["synthetic-normal", "traffic", "cluster"])
def test_generate_memory_does_not_grow_with_events(name, tmp_path):
    # 3 blocks reach the steady state (one block being built while the previous one is
    # still referenced by the last batch handed out)
    assert_bounded(name, 3 * (1 << 18), 3, "generate", tmp_path)


def test_make_memory_does_not_grow_with_events(tmp_path):
    # row groups smaller than a block, so the small run already reaches the steady state
    assert_bounded("stock-greta", 3 * (1 << 18), 3, "make", tmp_path, row_group_size=1 << 17)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["synthetic-normal", "traffic", "cluster", "situations"])
def test_make_memory_does_not_grow_with_events_slow(name, tmp_path):
    assert_bounded(name, 3 * (1 << 18), 4, "make", tmp_path, row_group_size=1 << 17)


@pytest.mark.slow
@pytest.mark.parametrize("name", [i.name for i in ds.list_datasets() if i.kind == "synthetic"])
def test_every_generator_streams_in_bounded_memory(name, tmp_path):
    assert_bounded(name, 5 * (1 << 20), 4, "generate", tmp_path)
