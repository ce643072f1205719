"""Time buckets of the ingest's sort stage: how many partitions, where their boundaries lie,
and the labels that send each bucket to its own partition.

Each bucket is written whole by one task (:func:`replaydb.ingest.tasks.write_partition`), so
equal times never split across buckets and every bucket's seqs are known before the write.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MIN_ROWS_PER_PARTITION = 250_000


def partition_count(total: int, rows_per_partition: int, cores: int) -> int:
    """Sort/write partitions for ``total`` rows: at most about ``rows_per_partition`` rows each;
    every core gets work once there are :data:`MIN_ROWS_PER_PARTITION` rows per core; and the
    count is a multiple of ``cores`` (whole waves of tasks: no core idles while the last
    partition is written)."""
    cores = max(1, cores)
    p = max(1, -(-total // max(1, rows_per_partition)))
    p = max(p, min(cores, total // MIN_ROWS_PER_PARTITION))
    return -(-p // cores) * cores if p > 1 else 1


def time_bounds(summary: list[dict], parts: int) -> list[int]:
    """Bucket boundaries for ``parts`` time buckets of about equal size, from the parse tasks'
    samples (each task's sample points stand for ``n_good / len(sample)`` rows).

    Bucket ``b`` holds the times ``t`` with exactly ``b`` boundaries at or below ``t``. The
    boundaries are strictly increasing times, so equal times always share a bucket (ties in
    time never split across buckets; a time held by very many events makes its bucket larger,
    never wrong). Returns at most ``parts - 1`` boundaries. O(samples log samples)."""
    vals, weights = [], []
    for r in summary:
        sample = r.get("sample") or []
        if r["n_good"] and sample:
            vals.append(np.asarray(sample, dtype=np.int64))
            weights.append(np.full(len(sample), r["n_good"] / len(sample)))
    if parts <= 1 or not vals:
        return []
    v = np.concatenate(vals)
    wt = np.concatenate(weights)
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(wt[order])
    targets = cum[-1] * np.arange(1, parts) / parts
    picks = v[np.minimum(np.searchsorted(cum, targets, side="left") + 1, len(v) - 1)]
    bounds = np.unique(picks)
    return [int(b) for b in bounds if b > v[0]]


def partition_labels(spark: Any, n: int) -> list[int]:
    """One long label per time bucket such that Spark's hash partitioning into ``n`` partitions
    (``pmod(murmur3(label), n)``, what ``repartition(n, col)`` uses) sends bucket ``i`` to
    partition ``i``: every partition then gets exactly one bucket, with no sampling job (range
    partitioning samples its input first). Found by one small Spark query over candidate longs.
    The write tasks do not rely on it (they split whatever buckets they get), so a mismatch
    could only unbalance the work, never change the result."""
    from pyspark.sql import functions as F

    found: dict[int, int] = {}
    span = 64 * n
    lo = 0
    while len(found) < n:
        tbl = spark.range(lo, lo + span).select(
            "id", F.pmod(F.hash(F.col("id")), F.lit(n)).alias("p")).toArrow()
        for i, p in zip(tbl.column("id").to_pylist(), tbl.column("p").to_pylist()):
            found.setdefault(p, i)
        lo += span
    return [found[i] for i in range(n)]


def bucket_expr(F: Any, t: Any, bounds: list[int], labels: list[int]) -> Any:
    """A Spark column giving the label of ``t``'s bucket (see :func:`time_bounds`): a balanced
    tree of comparisons with integer literals, O(log buckets) per row."""
    def build(lo: int, hi: int) -> Any:  # buckets lo..hi
        if lo == hi:
            return F.lit(labels[lo]).cast("long")
        mid = (lo + hi + 1) // 2  # bucket mid starts at bounds[mid - 1]
        return F.when(t < F.lit(bounds[mid - 1]), build(lo, mid - 1)).otherwise(build(mid, hi))
    return build(0, len(bounds))
