"""Progress of a local replay: the executor reports the events pushed so far, never decreasing,
ending at every event of a full scan, or at the events inside the planned intervals (at most
what the replay read: whole leaves)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

import replaydb
from replaydb.indexes.manage import create_index
from replaydb.planner.query import execute, plan_query, query_options

QUERY = ("SELECT * FROM ev MATCH_RECOGNIZE (ORDER BY t MEASURES A.v AS av ONE ROW PER MATCH "
         "PATTERN (A B) WITHIN 20 DEFINE A AS A.v = 7, B AS B.v = 9)")


def _store(path):
    rng = np.random.default_rng(3)
    n = 200_000
    store = replaydb.open(path, create=True)
    store.create_stream("ev", pa.schema([("t", pa.int64()), ("v", pa.int64())]),
                        time_unit="s", leaf_capacity=256)
    store.append("ev", pa.table({"t": np.arange(n, dtype=np.int64) * 2,
                                 "v": rng.integers(0, 1000, n)}))
    create_index(store, "ev", "v")
    return replaydb.open(path, read_only=True)


def test_progress_counts_the_events_replayed(tmp_path) -> None:
    store = _store(tmp_path / "s")
    for plan_name in ("replay", "optimal"):
        seen: list[int] = []
        plan = plan_query(store, QUERY, query_options({"plan": plan_name}))
        res = execute(plan, progress=seen.append)
        assert seen and seen == sorted(seen), plan_name
        read = res.stats["replay"]["events"]  # whole leaves; pushed: the intervals' events
        if plan_name == "replay":
            assert seen[-1] == read == 200_000 and len(seen) > 2  # reported batch by batch
        else:
            assert 0 < seen[-1] <= read < 200_000
