"""Loaded at start-up by the Python workers of the test suite's Spark sessions (their
``PYTHONPATH`` names this folder through ``spark.executorEnv.PYTHONPATH``).

Executors run plan values and must import nothing of the planner: every module whose name
starts with one of ``REPLAYDB_FORBID_IMPORTS`` (comma-separated) raises ImportError there, so
any Spark test whose tasks reached for the planner fails. The workers Spark starts on the driver
to plan a read of a Python data source (:data:`PLANNING_WORKERS`) are exempt: planning is the
driver's work.
"""

from __future__ import annotations

import importlib.abc
import os
import sys

FORBIDDEN = tuple(p for p in os.environ.get("REPLAYDB_FORBID_IMPORTS", "").split(",") if p)


PLANNING_WORKERS = "pyspark.sql.worker."
"""Main modules of the Python workers Spark starts on the driver to plan a query over a Python
data source (its schema, partitions, pushed filters): they run the driver's side of
``replaydb.spark_source`` and may import the planner; task workers may not."""


def _planning_worker() -> bool:
    """Whether the import runs under one of the planning workers' functions (a forked worker's
    ``__main__`` is Spark's daemon, so the call stack tells)."""
    frame = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(PLANNING_WORKERS):
            return True
        frame = frame.f_back
    return False


class ForbiddenImports(importlib.abc.MetaPathFinder):
    """Refuses the forbidden modules before any other finder looks for them."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
        if any(name == p or name.startswith(p + ".") for p in FORBIDDEN) \
                and not _planning_worker():
            raise ImportError(f"{name} imported on a Spark executor (executors run plan "
                              "values and import nothing of the planner)", name=name)
        return None


if FORBIDDEN and not any(isinstance(f, ForbiddenImports) for f in sys.meta_path):
    sys.meta_path.insert(0, ForbiddenImports())
