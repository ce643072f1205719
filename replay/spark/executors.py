"""Where the stages run: Spark jobs over a real session.

:class:`SparkExecutor` is the engine: the tasks of a stage are the ids of ``spark.range(n)`` with
one id per partition (one Spark task each), each picking its ``(index, payload)`` row
(:func:`~replaydb.replay.spark.tasks.by_id`); partition-parallel runs
read with one stage, then ``repartition(n, slot)`` (Spark's hash partitioning; the driver picks
slot values that land one per partition, :func:`~replaydb.replay.spark.keys.bijective_slots`),
``sortWithinPartitions(r, j)`` (chunks back in replay order) and run the operators in a second
``mapInArrow`` (results back with ``toArrow()``) - or, without a shuffle, one stage of scan
tasks that each read the planned replay and keep their keys' events. Single-stage work
(interval tasks, scans) runs as an RDD job, ``parallelize(range(n), n).mapPartitions``, whose
result rows come back with ``collect()``: the same tasks, without a DataFrame's planning and
row conversions.

This is the one executor: the stage functions (:mod:`~replaydb.replay.spark.tasks`) always
run as Spark tasks, on a local session or a cluster; nothing replays them in the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pyarrow as pa

from replaydb.replay.spark import tasks as T

RESULT_DDL = "task int, chunk int, kind string, payload binary"
BLOB_DDL = "slot int, r int, j int, payload binary"
PARTITION_BATCH_ROWS = 4
"""Arrow batch size (rows of event chunks) fed to partition tasks: chunks are large."""


class SparkExecutor:
    """Runs the stages as Spark jobs (see the module docstring)."""

    name = "spark"

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.sc = spark.sparkContext

    @property
    def parallelism(self) -> int:
        return max(1, int(self.sc.defaultParallelism))

    def _tasks_df(self, stage: Callable[..., Any], q: T.QueryShipment,
                  rows: list[tuple[int, bytes]], ddl: str) -> Any:
        """One Spark task per row: ``spark.range`` with one id per partition, mapped to the
        task rows by :func:`~replaydb.replay.spark.tasks.by_id`."""
        n = len(rows)
        fn = partial(T.by_id, stage=stage, query=q, rows=tuple((int(i), p) for i, p in rows))
        return self.spark.range(0, n, numPartitions=n).mapInArrow(fn, ddl)

    def interval(self, q: T.QueryShipment, rows: list[tuple[int, bytes]],
                 on_start: Callable[[str], None] | None = None, label: str = "") -> pa.Table:
        if on_start is not None:
            on_start(label)
        return self._tasks_rdd(T.interval_stage, q, rows)

    def scan(self, q: T.QueryShipment, rows: list[tuple[int, bytes]]) -> pa.Table:
        return self._tasks_rdd(T.scan_stage, q, rows)

    def _tasks_rdd(self, stage: Callable[..., Any], q: T.QueryShipment,
                   rows: list[tuple[int, bytes]]) -> pa.Table:
        """One Spark task per row as an RDD job (``parallelize(range(n), n)``, one id per
        partition, :func:`~replaydb.replay.spark.tasks.by_partition`): single-stage jobs need
        no DataFrame, and an RDD job costs less to plan and convert."""
        n = len(rows)
        fn = partial(T.by_partition, stage=stage, query=q,
                     rows=tuple((int(i), p) for i, p in rows))
        return T.result_table(self.sc.parallelize(range(n), n).mapPartitions(fn).collect())

    def partition(self, q: T.QueryShipment, rows: list[tuple[int, bytes]], n_partitions: int,
                  on_start: Callable[[str], None] | None = None, label: str = "") -> pa.Table:
        if on_start is not None:
            on_start(label)
        blobs = self._tasks_df(T.read_stage, q, rows, BLOB_DDL)
        shuffled = blobs.repartition(n_partitions, "slot").sortWithinPartitions("r", "j")
        df = shuffled.mapInArrow(partial(T.partition_stage, query=q), RESULT_DDL)
        key = "spark.sql.execution.arrow.maxRecordsPerBatch"
        old = self.spark.conf.get(key, None)
        self.spark.conf.set(key, str(PARTITION_BATCH_ROWS))
        try:
            return df.toArrow()
        finally:
            if old is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, old)
