"""Parallel execution equals sequential execution; K-slack re-ordering."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from replaydb.operators.tpstream import TPStream, TPStreamConfig
from replaydb.operators.tpstream.kslack import KSlack
from replaydb.operators.tpstream.parallel import run_partitioned, run_unpartitioned, step_aligned
from replaydb.operators.tpstream.testing import random_config, random_events, to_table


def close(a: pa.Table, b: pa.Table) -> bool:
    """Equal, bit for bit: float sums do not depend on how the stream is cut into chunks."""
    return a.schema == b.schema and a.equals(b)


EXECUTORS = [("thread", 8), ("process", 1), pytest.param("process", 6, marks=pytest.mark.slow)]
"""(executor, number of random cases) of the parallel runs."""


def cases(n: int, partitioned: bool) -> list[tuple[TPStreamConfig, pa.Table]]:
    out = []
    for seed in range(n):
        rng = np.random.default_rng(1000 + seed)
        cfg = random_config(rng, int(rng.integers(2, 4)), mode=["normal", "low_latency"][seed % 2],
                            partitioned=partitioned, end_policy="drop")
        out.append((cfg, to_table(random_events(rng, 2500, 4, n_parts=9))))
    return out


@pytest.mark.parametrize("executor, n", EXECUTORS)
def test_partitioned_parallel_equals_sequential(executor: str, n: int) -> None:
    for cfg, tab in cases(n, partitioned=True):
        ref = TPStream(cfg, tab.schema).process(tab)
        got, stats = run_partitioned(cfg, tab.to_batches(max_chunksize=333), tab.schema,
                                     workers=2, executor=executor)
        assert close(got, ref)
        assert stats["late_results"] == 0 and stats["events"] == tab.num_rows


@pytest.mark.parametrize("executor, n", EXECUTORS)
def test_unpartitioned_pipeline_equals_sequential(executor: str, n: int) -> None:
    for cfg, tab in cases(n, partitioned=False):
        ref = TPStream(cfg, tab.schema).process(tab)
        got, _ = run_unpartitioned(cfg, tab.to_batches(max_chunksize=500), tab.schema,
                                   workers=2, executor=executor, chunk_events=301)
        assert close(got, ref)


def test_pipeline_with_close_policy_and_partitions() -> None:
    for cfg, tab in cases(4, partitioned=True):
        cfg = TPStreamConfig(**{**cfg.__dict__, "end_policy": "close"})
        ref = TPStream(cfg, tab.schema).process(tab)
        got, _ = run_unpartitioned(cfg, [tab], tab.schema, workers=2, executor="thread",
                                   chunk_events=211)
        assert close(got, ref)


def test_step_aligned_chunks_keep_timestamps_together() -> None:
    t = np.repeat(np.arange(50), np.random.default_rng(0).integers(1, 6, 50))
    tab = pa.table({"t": t, "seq": np.arange(len(t))})
    chunks = list(step_aligned(tab.to_batches(max_chunksize=7), 10))
    assert sum(c.num_rows for c in chunks) == len(t)
    for a, b in zip(chunks[:-1], chunks[1:]):
        assert a.column("t")[-1].as_py() < b.column("t")[0].as_py()


def test_kslack_orders_within_slack_and_counts_late_rows() -> None:
    rng = np.random.default_rng(2)
    keys = np.arange(200)
    perm = keys.copy()
    # displace each element by at most 5 positions
    for i in range(0, 200, 6):
        rng.shuffle(perm[i:i + 6])
    tab = pa.table({"k": perm, "s": np.zeros(200, np.int64)})
    ks = KSlack(6, ["k", "s"])
    out = [ks.push(tab.slice(i, 1)) for i in range(200)] + [ks.flush()]
    got = pa.concat_tables(out).column("k").to_numpy()
    assert got.tolist() == keys.tolist() and ks.late == 0
    # too little slack: late rows are counted and emitted (or dropped)
    for policy in ("emit", "drop"):
        ks = KSlack(1, ["k", "s"], on_late=policy)
        rev = pa.table({"k": np.arange(10)[::-1].copy(), "s": np.zeros(10, np.int64)})
        out = [ks.push(rev.slice(i, 1)) for i in range(10)] + [ks.flush()]
        n = sum(o.num_rows for o in out)
        assert ks.late == 8
        assert n == (10 if policy == "emit" else 2)


def test_partitioned_parallel_with_string_keys_splits_in_the_producer() -> None:
    for cfg, tab in cases(3, partitioned=True):
        keys = np.array(["north", "south", "east", "west", "up", "down", "in", "out", "x"])
        tab = tab.set_column(tab.schema.get_field_index("p"), "p",
                             pa.array(keys[tab.column("p").to_numpy()]))
        ref = TPStream(cfg, tab.schema).process(tab)
        got, _ = run_partitioned(cfg, tab.to_batches(max_chunksize=400), tab.schema, workers=3,
                                 executor="thread")
        assert close(got, ref)
