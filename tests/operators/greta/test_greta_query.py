"""GRETA through the query hub and ``replaydb query`` on stored streams (full replay).

The stored stream is read back from the store (real Delta tables) and the brute-force oracle runs
on exactly those events; the hub's result, the CLI's output and the live operator must all agree.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

import replaydb
from replaydb.cli import main
from replaydb.errors import QueryError
from replaydb.operators.greta.oracle import GretaOracle
from replaydb.planner.lang.greta import bind, parse, to_config
from replaydb.store.schema import Attribute, StreamSchema
from tests.helpers import int_value

QUERIES = [
    "RETURN g, COUNT(*), COUNT(A), SUM(A.v), MIN(A.v), MAX(A.v), AVG(A.v) "
    "PATTERN SEQ(A+, B) WHERE [g] AND A.v < NEXT(A).v GROUP-BY g "
    "WITHIN 20 ms SLIDE 10 ms",
    "RETURN COUNT(*) AS n, SUM(B.v) PATTERN SEQ(A+, NOT C, B+) WHERE A.v > 2 WITHIN 15 ms",
    "RETURN g, COUNT(*) PATTERN A+ WHERE [g] AND A.v >= NEXT(A).v GROUP-BY g "
    "WITHIN 30 ms SLIDE 5 ms",
]


def _rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [{k: int_value(v) for k, v in r.items() if k != "last_seq"} for r in rows]
    return sorted(out, key=lambda r: (r["window_start"], repr(r.get("g"))))


def _assert_same(got: list[dict[str, Any]], exp: list[dict[str, Any]], text: str) -> None:
    got, exp = _rows(got), _rows(exp)
    assert len(got) == len(exp), (text, got, exp)
    for g, e in zip(got, exp):
        assert set(g) == set(e), (text, g, e)
        for k, v in e.items():
            if isinstance(v, float) or isinstance(g[k], float):
                assert math.isclose(g[k], v, rel_tol=1e-9), (text, k, g, e)
            else:
                assert g[k] == v, (text, k, g, e)


def _events(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.integers(1, 4, n)).astype(np.int64)
    return pa.table({"t": t, "type": np.array(["A", "A", "B", "C"])[rng.integers(0, 4, n)],
                     "v": rng.integers(0, 6, n).astype(np.int64),
                     "g": np.array(["x", "y"])[rng.integers(0, 2, n)]})


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    st = replaydb.open(tmp_path_factory.mktemp("gretaq") / "store", create=True)
    data = _events(120, 7)
    sch = StreamSchema((Attribute("type", "string"), Attribute("v", "int64"),
                        Attribute("g", "string")), time_unit="ms", type_column="type",
                       leaf_capacity=16, fanout=4)
    st.create_stream("ev", sch)
    st.append("ev", data.slice(0, 50))
    st.append("ev", data.slice(50))
    return st


def _stored(store: Any, name: str) -> pa.Table:
    return store.stream(name).read().select(["t", "seq", "type", "v", "g"])


@pytest.mark.parametrize("text", QUERIES)
def test_hub_agrees_with_the_oracle_on_the_stored_events(store: Any, text: str) -> None:
    table = _stored(store, "ev")
    assert table.num_rows == 120
    exp = GretaOracle(to_config(parse(text), "ms"), table, max_events=60).run()
    assert exp, "the query should find trends in this stream"
    res = replaydb.query(store, text, time_format="raw")
    assert res.plan.ctx.language == "greta"
    assert res.plan.strategy == "replay"
    _assert_same(res.table.to_pylist(), exp, text)
    # the same operator live, fed in small batches without a store
    op = bind(parse(text), table.schema, "ms")
    live: list[dict[str, Any]] = []
    for a in range(0, table.num_rows, 7):
        op.push(table.slice(a, 7))
        live.extend(op.results().to_pylist())
    op.flush()
    live.extend(op.results().to_pylist())
    _assert_same(live, exp, text)
    # last_seq names a stored event
    seqs = set(table.column("seq").to_pylist())
    assert set(res.table.column("last_seq").to_pylist()) <= seqs


def test_cli_query_and_explain(store: Any, tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    text = QUERIES[0]
    out = tmp_path / "rows.csv"
    assert main(["query", str(store.path), text, "--format", "csv", "--output", str(out)]) == 0
    cli = pcsv.read_csv(out).to_pylist()
    api = replaydb.query(store, text).table.to_pylist()
    _assert_same(cli, api, text)
    capsys.readouterr()
    assert main(["explain", str(store.path), text, "--analyze", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert "replay" in json.dumps(plan)


def test_one_stored_stream_per_event_type(tmp_path: Any) -> None:
    """Without FROM and with streams named like the types, the streams are merged by (t, seq)."""
    st = replaydb.open(tmp_path / "s", create=True)
    data = _events(90, 11)
    for ty in ("A", "B", "C"):
        part = data.filter(pa.compute.equal(data.column("type"), ty)).drop_columns("type")
        st.create_stream(ty, StreamSchema((Attribute("v", "int64"), Attribute("g", "string")),
                                          time_unit="ms"))
        st.append(ty, part)
    text = QUERIES[1]
    merged = data.append_column("seq", pa.array(np.arange(90), pa.int64()))
    exp = GretaOracle(to_config(parse(text), "ms"), merged, max_events=60).run()
    assert exp
    res = replaydb.query(st, text, time_format="raw")
    assert res.plan.ctx.type_column == "type"
    _assert_same(res.table.to_pylist(), exp, text)


def test_from_clause_picks_the_stream_and_bad_names_are_reported(store: Any) -> None:
    text = "FROM ev RETURN COUNT(*) PATTERN SEQ(A+, B) WITHIN 20 ms"
    rows = replaydb.query(store, text, time_format="raw").table.to_pylist()
    exp = GretaOracle(to_config(parse(text), "ms"), _stored(store, "ev"), max_events=60).run()
    _assert_same(rows, exp, text)
    with pytest.raises(QueryError) as ei:
        replaydb.query(store, "RETURN SUM(A.nope) PATTERN A+ WITHIN 20 ms")
    assert "nope" in str(ei.value)
