"""Loaded at start-up by the Python workers of the test suite's Spark sessions (their
``PYTHONPATH`` names this folder through ``spark.executorEnv.PYTHONPATH``).

Executors run plan values and must import nothing of the planner: every module whose name
starts with one of ``REPLAYDB_FORBID_IMPORTS`` (comma-separated) raises ImportError there, so
any Spark test whose tasks reached for the planner fails.
"""

from __future__ import annotations

import importlib.abc
import os
import sys

FORBIDDEN = tuple(p for p in os.environ.get("REPLAYDB_FORBID_IMPORTS", "").split(",") if p)


class ForbiddenImports(importlib.abc.MetaPathFinder):
    """Refuses the forbidden modules before any other finder looks for them."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
        if any(name == p or name.startswith(p + ".") for p in FORBIDDEN):
            raise ImportError(f"{name} imported on a Spark executor (executors run plan "
                              "values and import nothing of the planner)", name=name)
        return None


if FORBIDDEN and not any(isinstance(f, ForbiddenImports) for f in sys.meta_path):
    sys.meta_path.insert(0, ForbiddenImports())
