"""Shared fixtures: temporary stores and a session-wide local Spark (started only when asked)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=100
)
settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


EXECUTOR_GUARD = {
    "spark.executorEnv.PYTHONPATH": str(Path(__file__).parent / "spark_guard"),
    "spark.executorEnv.REPLAYDB_FORBID_IMPORTS": "replaydb.planner",
}
"""Spark settings under which an executor that imports the planner fails its task
(``tests/spark_guard/sitecustomize.py``): executors run plan values only."""


@pytest.fixture
def store_path(tmp_path):
    """A fresh, not yet created store directory."""
    return tmp_path / "store"


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every test that needs it (start-up costs seconds)."""
    from replaydb.spark import get_spark, stop_spark

    session = get_spark("local[2]", app_name="replaydb-tests", quiet=True,
                        config={"spark.sql.shuffle.partitions": "4",
                                "spark.default.parallelism": "2",
                                "spark.driver.memory": "2g", **EXECUTOR_GUARD})
    yield session
    stop_spark()


@pytest.fixture(scope="session")
def s3():
    """A real S3-compatible endpoint (its own process, on the loopback interface) for every
    test that needs one (:mod:`replaydb.bench.s3endpoint`)."""
    from replaydb.bench.s3endpoint import S3Endpoint

    endpoint = S3Endpoint()
    yield endpoint
    endpoint.stop()
