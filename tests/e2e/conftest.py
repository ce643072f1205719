"""Fixtures of the end-to-end tests: the golden corpus's stores, built once per session."""

from __future__ import annotations

from typing import Any

import pytest

from tests.queries.stores import StoreCache


@pytest.fixture(scope="session")
def golden_stores(tmp_path_factory: pytest.TempPathFactory) -> StoreCache:
    """Every golden store description built once for the session (on first use)."""
    def spark() -> Any:  # the session of the `spark` fixture, which the test requested
        from replaydb.spark import get_spark

        return get_spark("local[2]")

    return StoreCache(tmp_path_factory.mktemp("golden"), spark)
