"""The benchmark's two-step baseline (construct every trend, then aggregate) is a correct rival:
it agrees with the brute-force oracle and with GRETA, and its limits stop it with a status."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from replaydb.bench.bench_greta import WORKLOADS, _digest
from replaydb.bench.greta_twostep import TwoStepBaseline
from replaydb.operators.greta.oracle import GretaOracle
from replaydb.planner.lang.greta import bind, parse, to_config

QUERIES = [
    "RETURN g, COUNT(*), COUNT(A), SUM(A.x), MIN(A.x), MAX(A.x) PATTERN SEQ(A+, B) "
    "WHERE [g] AND A.x < NEXT(A).x GROUP-BY g WITHIN 8 SLIDE 3",
    "RETURN COUNT(*), AVG(A.x) PATTERN SEQ(A+, NOT E, B) WHERE A.x >= NEXT(A).x WITHIN 7 SLIDE 2",
    "RETURN COUNT(*), SUM(A.x) PATTERN SEQ(NOT E, A+) WITHIN 6 SLIDE 2",
    "RETURN g, COUNT(*) PATTERN SEQ(A+, NOT E) WHERE [g] GROUP-BY g WITHIN 6",
    "RETURN COUNT(*), COUNT(B), MAX(B.x) PATTERN SEQ(A, B+, C) WHERE [k] AND B.x != NEXT(B).x "
    "WITHIN 12 SLIDE 4",
]


def _stream(n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    t, ty = [], []
    cur = rng.randint(-3, 3)
    for _ in range(n):
        cur += rng.choice([0, 1, 1, 2])
        t.append(cur)
        ty.append(rng.choice("AAABBBCCE"))
    return pa.table({"t": pa.array(t, pa.int64()), "seq": pa.array(range(n), pa.int64()),
                     "type": pa.array(ty), "x": [rng.randint(0, 5) for _ in range(n)],
                     "g": [rng.randint(0, 1) for _ in range(n)],
                     "k": [rng.randint(0, 1) for _ in range(n)]})


def _norm(rows: list[dict[str, Any]]) -> list[tuple]:
    out = []
    for r in rows:
        items = []
        for k, v in sorted(r.items()):
            if k == "last_seq":
                continue
            if isinstance(v, Decimal | str) and str(v).lstrip("-").isdigit():
                v = int(v)
            if isinstance(v, float):
                v = round(v, 9)
            items.append((k, v))
        out.append(tuple(items))
    return sorted(out, key=repr)


@pytest.mark.parametrize("text", QUERIES)
@pytest.mark.parametrize("seed", range(8))
def test_baseline_agrees_with_the_oracle(text: str, seed: int) -> None:
    table = _stream(random.Random(seed).randint(5, 28), seed)
    exp = GretaOracle(to_config(parse(text), None), table, max_events=60).run()
    res = TwoStepBaseline(text, table.schema, None).run(table)
    assert res.status == "ok"
    assert _norm(res.rows) == _norm(exp), (text, table.to_pydict())
    if text.startswith("RETURN COUNT(*)") and "SEQ(A+, NOT E, B)" not in text:
        assert res.trends >= sum(r["COUNT(*)"] for r in exp)


def test_the_random_cases_find_trends() -> None:
    """Guard against a vacuous comparison: every query has rows on some of the streams."""
    for text in QUERIES:
        rows = [GretaOracle(to_config(parse(text), None),
                            _stream(random.Random(s).randint(5, 28), s), max_events=60).run()
                for s in range(8)]
        assert sum(1 for r in rows if r) >= 3, text


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_baseline_and_greta_agree_on_the_benchmark_workloads(name: str) -> None:
    w = WORKLOADS[name]
    table = w.generate(150, windows=2.0, seed=3)
    res = TwoStepBaseline(w.query, table.schema, "s", trend_cap=10**8).run(table)
    assert res.status == "ok"
    got = bind(parse(w.query), table.schema, "s", exact_type="string").process(table).to_pylist()
    assert _digest(res.rows) == _digest(got)
    if "COUNT(*)" in w.query:
        assert res.trends == sum(int(r["COUNT(*)"]) for r in got)


def test_trend_cap_and_time_limit_stop_the_baseline() -> None:
    w = WORKLOADS["stock"]
    table = w.generate(400, windows=2.0, seed=0)
    capped = TwoStepBaseline(w.query, table.schema, "s", trend_cap=1000).run(table)
    assert capped.status == "trend cap" and capped.trends > 1000
    late = TwoStepBaseline(w.query, table.schema, "s", trend_cap=10**12,
                           time_limit_s=0.05).run(table)
    assert late.status == "timeout"
