"""The dissertation's query shapes through the whole stack, and EXPLAIN.

* the insider-trading pattern ``A B C* D`` of Fig. 3.6/3.7 on a price/volume stream with both
  attributes indexed: every strategy equals full replay, and - as in Fig. 3.7 - adding B's index
  to A's prunes replay intervals while adding D's as well prunes nothing more here;
* Listing 3.1 (related crimes, string and integer conditions, three Kleene gaps, 30 minutes);
* the generated queries of 3.5.3 (``replaydb.datasets.queries``) on a small synthetic-normal
  stream with an index on each of A1..A5, m = 2, 4, 8: every strategy equals full replay and the
  automatic plan replays far fewer events;
* EXPLAIN and EXPLAIN ANALYZE carry the rewritten pattern, blocks, per-symbol selectivity, the
  chosen index set and its rivals with costs, interval counts and covered fractions; the CLI
  prints it (text and JSON).
"""

from __future__ import annotations

import json
import tempfile

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.cli import main
from replaydb.datasets.api import generate
from replaydb.datasets.queries import random_queries
from replaydb.indexes.manage import create_index
from replaydb.planner.query import QueryOptions, execute, explain, plan_query
from replaydb.store.schema import Attribute, StreamSchema
from tests.planner_cases import same_as_full_replay

INSIDER = ("SELECT * FROM trades MATCH_RECOGNIZE (MEASURES A.t AS a_t, D.t AS d_t "
           "PATTERN (A B C* D) WITHIN 60 "
           "DEFINE A AS price < 6, B AS volume > 950, D AS price > 34)")


@pytest.fixture(scope="module")
def trades():
    with tempfile.TemporaryDirectory() as d:
        rng = np.random.default_rng(4)
        n = 20_000
        price = rng.uniform(5, 35, n)
        volume = rng.uniform(0, 1000, n)
        store = replaydb.open(f"{d}/store", create=True)
        store.create_stream("trades", StreamSchema(
            (Attribute("price", "float64"), Attribute("volume", "float64")), time_unit="s"))
        store.append("trades", pa.table({"t": np.arange(n, dtype=np.int64),
                                         "price": price, "volume": volume}))
        create_index(store, "trades", "price")
        create_index(store, "trades", "volume")
        yield store


def test_insider_trading_pattern(trades) -> None:
    assert same_as_full_replay(trades, INSIDER) > 0
    st = plan_query(trades, INSIDER, QueryOptions(plan="all")).pattern_state
    ids = {(c.bs, c.condition.column): c.id for c in st.conds}
    from replaydb.planner.pattern.planner import compute_intervals

    def covered(keys):
        cfg = frozenset(ids[k] for k in keys)
        iv = compute_intervals(st, cfg, st.geo.n_events, {})
        return int((iv[:, 1] - iv[:, 0]).sum())

    a, ab, abd = (covered([(0, "price")]), covered([(0, "price"), (1, "volume")]),
                  covered([(0, "price"), (1, "volume"), (2, "price")]))
    assert ab < a / 3  # B adjacent to A prunes most of A's intervals (Fig. 3.7 b)
    assert abd <= ab


LISTING = """SELECT * FROM CRIMES MATCH_RECOGNIZE (
 MEASURES A.ID, B.ID, C.ID
 PATTERN (A T* B T* C) WITHIN 30 MINUTES
 DEFINE
 A AS A.PRIMARY = 'ROBBERY' AND A.BEAT = 2232,
 B AS B.PRIMARY = 'BATTERY' AND B.BEAT = A.BEAT,
 C AS C.PRIMARY = 'VEHICLE THEFT' AND C.BEAT = A.BEAT)"""


def test_listing_3_1_related_crimes() -> None:
    rng = np.random.default_rng(8)
    n = 20_000
    cats = rng.choice(["ROBBERY", "BATTERY", "VEHICLE THEFT", "THEFT", "ASSAULT"], n,
                      p=[0.05, 0.1, 0.05, 0.5, 0.3])
    beats = rng.integers(2200, 2250, n)
    for i in rng.choice(n - 5, 6, replace=False):  # plant related crimes in beat 2232
        cats[i], cats[i + 2], cats[i + 4] = "ROBBERY", "BATTERY", "VEHICLE THEFT"
        beats[i] = beats[i + 2] = beats[i + 4] = 2232
    t = np.cumsum(rng.integers(0, 300, n))
    with tempfile.TemporaryDirectory() as d:
        store = replaydb.open(f"{d}/store", create=True)
        store.create_stream("CRIMES", StreamSchema(
            (Attribute("ID", "int64"), Attribute("PRIMARY", "string"),
             Attribute("BEAT", "int64")), time_unit="s", leaf_capacity=64))
        store.append("CRIMES", pa.table({"t": t, "ID": np.arange(n), "PRIMARY": cats,
                                         "BEAT": beats}))
        for c in ("PRIMARY", "BEAT"):
            create_index(store, "CRIMES", c)
        assert same_as_full_replay(store, LISTING) > 0
        # without joining intervals (no navigation cost) All replays a few leaves only
        p = plan_query(store, LISTING, QueryOptions(plan="all",
                                                    extra={"weights": {"interval_events": 0}}))
        res = execute(p)
        assert res.stats["replay"]["events"] < n / 20
        auto = plan_query(store, LISTING, QueryOptions(plan="auto")).details["pattern"]
        costs = {r["strategy"]: r["cost"] for r in auto["rivals"]}
        assert auto["chosen"]["cost"] == min(costs["no index"], costs["optimal"])


@pytest.fixture(scope="module")
def synthetic():
    with tempfile.TemporaryDirectory() as d:
        store = replaydb.open(f"{d}/store", create=True)
        tbl = pa.Table.from_batches(list(generate("synthetic-normal", 30_000, seed=3,
                                                  pad=False)))
        store.create_stream("synthetic", tbl.schema, time_unit="s", leaf_capacity=256)
        store.append("synthetic", tbl)
        for c in ("A1", "A2", "A3", "A4", "A5"):
            create_index(store, "synthetic", c)
        yield store


@pytest.mark.parametrize("m", [2, 4, 8])
def test_generated_queries_of_3_5_3(synthetic, m) -> None:
    events_auto = events_full = 0
    for q in random_queries(m, 3, seed=m, attributes=("A1", "A2", "A3", "A4", "A5")):
        same_as_full_replay(synthetic, q)
        p = plan_query(synthetic, q, QueryOptions(plan="auto"))
        events_auto += execute(p).stats["replay"]["events"]
        events_full += synthetic.stream("synthetic").n_events
    assert events_auto < events_full / 3


def test_explain_and_analyze(synthetic, capsys) -> None:
    q = random_queries(4, 1, seed=11, attributes=("A5",))[0]
    out = explain(synthetic, q, plan="auto")
    pat = out["pattern"]
    for key in ("rewritten", "basic_blocks", "symbols", "chosen", "rivals", "weights",
                "estimated_covered_fraction", "cpm"):
        assert key in pat, key
    sym = pat["symbols"][0]["conditions"][0]
    assert sym["indexed"] and 0 <= sym["selectivity"] <= 1
    assert pat["matcher"] == "vectorized blocks and gaps"  # the generator's shape
    assert pat["match_rows"] == "block rows"  # FIRST(S1.seq), LAST(Sk.seq) read no gap row
    names = {r["strategy"] for r in pat["rivals"]}
    assert names == {"no index", "all", "greedy", "budget", "optimal"}
    assert all("cost" in r for r in pat["rivals"])
    out = explain(synthetic, q, plan="optimal", analyze=True)
    an = out["analyze"]["pattern"]
    assert 0 < an["actual_covered_fraction"] < 1
    assert an["index_entries_read"] > 0 and an["leaves_replayed"] > 0
    assert set(an["phases_seconds"]) == {"index_lookups", "sort", "merge", "replay",
                                         "matching"}
    assert out["pattern"]["replay_intervals"] == out["analyze"]["replay"]["intervals"]
    path = str(synthetic.path)
    assert main(["explain", path, q, "--analyze", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["strategy"] in ("optimal", "cpm", "replay")
    assert main(["explain", path, q, "--plan", "greedy"]) == 0
    text = capsys.readouterr().out  # the tree: the operator's matcher, the source's intervals
    assert "strategy greedy" in text and "matcher:" in text and "interval scan" in text
    assert "rivals:" not in text
    assert main(["explain", path, q, "--plan", "greedy", "--verbose"]) == 0
    text = capsys.readouterr().out
    assert "rewritten:" in text and "rivals:" in text and "matcher:" in text
