"""Both real datasets through the whole system: `datasets make` -> Spark `ingest` with indexes ->
`check` -> each documented example query, planned (index-assisted) and fully replayed, giving the
same matches. Slow (the OpenSky sample has 928k events); skipped when the package cache lacks the
packages (see tests/datasets/test_datasets_real.py)."""

from __future__ import annotations

import pytest

import replaydb
from replaydb.cli import main
from replaydb.datasets import packages
from replaydb.datasets.opensky import LANDING_QUERY, TAKEOFF_QUERY

pytestmark = pytest.mark.slow

CASCADE = ("SELECT * FROM flights MATCH_RECOGNIZE (ORDER BY t MEASURES A.t AS first_t, "
           "C.t AS last_t ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
           "PATTERN (A T1* B T2* C) WITHIN 3 HOURS "
           "DEFINE A AS A.origin = 'ORD' AND A.delay BETWEEN 30 AND 59, "
           "B AS B.origin = 'ORD' AND B.delay BETWEEN 60 AND 119, "
           "C AS C.origin = 'ORD' AND C.delay >= 120, T1 AS TRUE, T2 AS TRUE)")


def _rows(table) -> list[tuple]:
    keep = [c for c in table.column_names if c != "match_id"]  # emission-order ids
    return sorted(tuple(r[c] for c in keep) for r in table.select(keep).to_pylist())


def _same_both_ways(store, query: str) -> int:
    auto = replaydb.query(store, query)
    full = replaydb.query(store, query, plan="replay", state_cap=400_000_000)
    assert _rows(auto.table) == _rows(full.table)
    return auto.table.num_rows


@pytest.mark.parametrize("name,stream,time_col,indexes,queries", [
    ("flights-3m", "flights", "date", ["origin", "delay"], [CASCADE]),
    ("opensky", "opensky", "timestamp", ["altitude", "groundspeed"],
     [LANDING_QUERY, TAKEOFF_QUERY]),
])
def test_real_dataset_ingests_and_answers_its_examples(tmp_path, spark, name, stream, time_col,
                                                        indexes, queries) -> None:
    spec = packages.VEGA_DATASETS if name == "flights-3m" else packages.TRAFFIC
    if packages.cached_file(spec) is None:
        pytest.skip(f"{spec.filename} is not in the package cache")
    src = tmp_path / f"{name}.parquet"
    extra = ["--events", "600000"] if name == "flights-3m" else []
    assert main(["datasets", "make", name, str(src), *extra]) == 0
    db = str(tmp_path / "db")
    args = ["ingest", db, stream, str(src), "--time", time_col, "--time-unit", "ms"]
    for col in indexes:
        args += ["--index", col]
    assert main(args) == 0
    assert main(["check", db]) == 0
    store = replaydb.open(db)
    for q in queries:
        assert _same_both_ways(store, q) > 0
