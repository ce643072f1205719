"""replaydb.replay.spark: queries replayed on Spark executors (``engine="spark"``).

The planner plans on the driver as usual; :func:`run_plan` ships the planned replay to Spark
tasks - interval-parallel, partition-parallel or in one task - and gathers results equal to local
execution (see :mod:`replaydb.replay.spark.engine`). :mod:`replaydb.replay.spark.cluster` starts
a Spark standalone cluster on this machine (tests, benchmarks).
"""

from replaydb.replay.spark.engine import MODES, run_plan

__all__ = ["MODES", "run_plan"]
