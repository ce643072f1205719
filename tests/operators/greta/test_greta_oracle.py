"""GRETA operator vs the brute-force trend enumerator on random small streams and queries.

Each case draws a pattern (SEQ, +, nested, with NOT in all three positions and nested NOT), local,
edge (indexed, point, scanned) and equivalence predicates, GROUP-BY, sliding windows, aggregates,
a stream with timestamp ties, and a random split into batches; the operator's rows must equal the
oracle's rows exactly (floats to 1e-9). The default run covers a few hundred cases; the slow run
thousands.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.operators.greta.oracle import GretaOracle
from replaydb.operators.greta.template import split_pattern
from replaydb.planner.lang.greta import bind, parse, to_config
from tests.helpers import int_value

TYPES = ["A", "B", "C", "D", "E", "F", "G"]


class RandomChooser:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, xs: list) -> Any:
        return xs[self.rng.randrange(len(xs))]

    def prob(self, p: float) -> bool:
        return self.rng.random() < p


class DataChooser:
    """The same interface over hypothesis' ``data`` (so failures shrink)."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def choice(self, xs: list) -> Any:
        return xs[self.data.draw(st.integers(0, len(xs) - 1))]

    def prob(self, p: float) -> bool:
        return self.data.draw(st.integers(0, 99)) < int(p * 100)


def _text(node: tuple) -> str:
    kind = node[0]
    if kind == "T":
        return node[1]
    if kind == "+":
        inner = node[1]
        return f"{_text(inner)}+" if inner[0] in ("T", "SEQ") else f"({_text(inner)})+"
    if kind == "NOT":
        return f"NOT {_text(node[1])}"
    return "SEQ(" + ", ".join(_text(x) for x in node[1]) + ")"


def _positive(ch: Any, types: list[str], depth: int) -> tuple:
    if depth <= 0 or len(types) < 2 or ch.prob(0.35):
        node: tuple = ("T", types.pop(0))
        return ("+", node) if ch.prob(0.4) else node
    if ch.prob(0.3):
        return ("+", _positive(ch, types, depth - 1))
    n = ch.int(2, 3)
    items = []
    for _ in range(n):
        if not types:
            break
        items.append(_positive(ch, types, depth - 1))
    node = ("SEQ", items) if len(items) > 1 else items[0]
    return ("+", node) if ch.prob(0.25) else node


def _negative(ch: Any, types: list[str]) -> tuple | None:
    if not types:
        return None
    if len(types) >= 2 and ch.prob(0.3):
        a, b = types.pop(0), types.pop(0)
        if types and ch.prob(0.4):
            return ("SEQ", [("T", a), ("NOT", ("T", types.pop(0))), ("T", b)])
        return ("SEQ", [("T", a), ("+", ("T", b)) if ch.prob(0.3) else ("T", b)])
    x = ("T", types.pop(0))
    return ("+", x) if ch.prob(0.2) else x


def _insert_negations(ch: Any, node: tuple, types: list[str], top: bool) -> tuple:
    kind = node[0]
    if kind == "T":
        return node
    if kind == "+":
        return ("+", _insert_negations(ch, node[1], types, False))
    items = [_insert_negations(ch, x, types, False) for x in node[1]]
    if ch.prob(0.5):
        positions = list(range(1, len(items)))
        if top:
            positions += [0, len(items)]
        pos = ch.choice(positions)
        neg = _negative(ch, types)
        if neg is not None:
            items.insert(pos, ("NOT", neg))
    return ("SEQ", items)


def _pattern(ch: Any) -> tuple[str, list[str]]:
    npos = ch.choice([1, 1, 2, 2, 2, 3, 3, 4])
    types = list(TYPES[:npos])
    pos = _positive(ch, types, 2)
    while types:  # use every drawn type
        pos = ("SEQ", [pos, ("T", types.pop(0))])
    types = list(TYPES[npos:])
    used_pos = TYPES[:npos]
    if ch.prob(0.5):
        if pos[0] != "SEQ" and ch.prob(0.5):
            neg = _negative(ch, types)
            if neg is not None:
                pos = ("SEQ", [("NOT", neg), pos] if ch.prob(0.5) else [pos, ("NOT", neg)])
        else:
            pos = _insert_negations(ch, pos, types, True)
    return _text(pos), used_pos


def random_case(ch: Any, max_events: int = 16) -> tuple[str, pa.Table, list[int]]:
    """(query text, table, batch split points) of one random case."""
    pat, used_pos = _pattern(ch)
    sp = split_pattern(parse(f"RETURN COUNT(*) PATTERN {pat} WITHIN 5").pattern)
    all_types = [t for tpl in sp.templates for t in tpl.types]
    where: list[str] = []
    if ch.prob(0.4):
        x = ch.choice(all_types)
        where.append(ch.choice([f"{x}.x > {ch.int(-2, 3)}", f"{x}.x <= {ch.int(0, 5)}",
                                f"x >= {ch.int(-3, 0)}"]))
    trans = [(t.src, t.dst) for tpl in sp.templates for t in tpl.transitions]
    for _ in range(ch.int(0, 2)):
        if not trans or not ch.prob(0.6):
            break
        s, d = ch.choice(trans)
        where.append(ch.choice([
            f"{s}.x < NEXT({d}).x", f"{s}.x >= NEXT({d}).x", f"{s}.x = NEXT({d}).x",
            f"NEXT({d}).x > {s}.x - 1", f"{s}.x * 2 <= NEXT({d}).x + 3",
            f"{s}.x < NEXT({d}).x AND {s}.y > NEXT({d}).y",
            f"ABS({s}.x - NEXT({d}).x) <= 2", f"{s}.x != NEXT({d}).x",
        ]))
    if ch.prob(0.35):
        if ch.prob(0.7):
            where.append("[k]")
        else:
            where.append("[" + ", ".join(f"{a}.k" for a in used_pos) + "]")
    group = ch.prob(0.35)
    rets = ["COUNT(*)"]
    for _ in range(ch.int(0, 3)):
        x = ch.choice(used_pos)
        rets.append(ch.choice([f"COUNT({x})", f"SUM({x}.x)", f"AVG({x}.x)", f"MIN({x}.x)",
                               f"MAX({x}.x)", f"MAX({x}.y)", f"SUM({x}.y)", f"MIN({x}.y)"]))
    rets = list(dict.fromkeys(rets))
    if group:
        rets.insert(0, "g")
    within = ch.int(4, 12)
    slide = ch.int(1, within) if ch.prob(0.85) else ch.int(within, within + 3)
    text = (f"RETURN {', '.join(rets)} PATTERN {pat}"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + (" GROUP-BY g" if group else "")
            + f" WITHIN {within} SLIDE {slide}")
    n = ch.int(3, max_events)
    neg_types = [x for x in all_types if x not in used_pos]
    stream_types = used_pos * 4 + neg_types * 2 + ["Z"]
    t = ch.int(-4, 4)
    cursor = 0
    rows: dict[str, list] = {"t": [], "seq": [], "type": [], "x": [], "y": [], "g": [], "k": []}
    for i in range(n):
        t += ch.choice([0, 1, 1, 1, 2])
        rows["t"].append(t)
        rows["seq"].append(i)
        if ch.prob(0.7):  # mostly follow the pattern's order so that trends exist
            rows["type"].append(used_pos[cursor % len(used_pos)])
            cursor += ch.choice([0, 1, 1])
        else:
            rows["type"].append(ch.choice(stream_types))
        rows["x"].append(ch.int(-3, 6))
        rows["y"].append(ch.int(-20, 20) / 4)
        rows["g"].append(ch.int(0, 1))
        rows["k"].append(ch.int(0, 1))
    table = pa.table({"t": pa.array(rows["t"], pa.int64()), "seq": pa.array(rows["seq"], pa.int64()),
                      "type": pa.array(rows["type"], pa.string()),
                      "x": pa.array(rows["x"], pa.int64()), "y": pa.array(rows["y"], pa.float64()),
                      "g": pa.array(rows["g"], pa.int64()), "k": pa.array(rows["k"], pa.int64())})
    splits = sorted({ch.int(1, n - 1) for _ in range(ch.int(0, 3))}) if n > 1 else []
    return text, table, splits


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) or (a != a and b != b)
    return a == b


def run_operator(text: str, table: pa.Table, splits: list[int], exact_type: str = "string",
                 snapshot_at: int | None = None) -> list[dict]:
    q = parse(text)
    op = bind(q, table.schema, None, exact_type=exact_type)
    bounds = [0, *splits, table.num_rows]
    out = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        if snapshot_at is not None and i == snapshot_at:
            snap = op.snapshot()
            op.push(table.slice(a, b - a))
            op.restore(snap)
        op.push(table.slice(a, b - a))
        out.extend(op.results().to_pylist())
    op.flush()
    out.extend(op.results().to_pylist())
    return [{k: int_value(v) for k, v in r.items()} for r in out]


def check_case(text: str, table: pa.Table, splits: list[int], snapshot_at: int | None = None,
               ) -> None:
    expected = GretaOracle(to_config(parse(text), None), table, max_events=60).run()
    got = run_operator(text, table, splits, snapshot_at=snapshot_at)

    def key(r: dict) -> tuple:
        return (r["window_start"], r.get("g"))

    exp = {key(r): r for r in expected}
    res = {key(r): r for r in got}
    assert len(res) == len(got), f"duplicate rows\n{text}\n{got}"
    assert set(exp) == set(res), (f"{text}\nwindows/groups differ:\n expected {sorted(exp)}\n"
                                  f" got      {sorted(res)}\n{table.to_pydict()}")
    for k in exp:
        for col, v in exp[k].items():
            assert _same(res[k][col], v), (f"{text}\n{k} {col}: expected {v}, got {res[k][col]}\n"
                                           f"{table.to_pydict()}")


def _seeded(seed: int) -> None:
    rng = random.Random(seed)
    ch = RandomChooser(rng)
    text, table, splits = random_case(ch)
    snap = rng.randrange(len(splits) + 1) if rng.random() < 0.2 else None
    check_case(text, table, splits, snapshot_at=snap)


@pytest.mark.parametrize("block", range(6))
def test_random_cases_against_oracle(block: int) -> None:
    for seed in range(block * 50, block * 50 + 50):
        _seeded(seed)


@pytest.mark.slow
@pytest.mark.parametrize("block", range(40))
def test_random_cases_against_oracle_many(block: int) -> None:
    for seed in range(10_000 + block * 100, 10_000 + block * 100 + 100):
        _seeded(seed)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_hypothesis_cases_against_oracle(data: Any) -> None:
    text, table, splits = random_case(DataChooser(data), max_events=11)
    check_case(text, table, splits)


@pytest.mark.parametrize("text", [
    "RETURN g, COUNT(*), SUM(A.x) PATTERN SEQ(A+, B) WHERE [k] AND A.x < NEXT(A).x GROUP-BY g "
    "WITHIN 6 SLIDE 2",
    "RETURN COUNT(*), MAX(A.x) PATTERN SEQ(NOT E, A+, B) WHERE [k] WITHIN 5 SLIDE 1",
    "RETURN COUNT(*) PATTERN SEQ(A+, NOT E, B) WHERE [A.k, B.k] AND A.x >= NEXT(A).x "
    "WITHIN 6 SLIDE 3",
    "RETURN COUNT(*), COUNT(B) PATTERN SEQ(A+, B, NOT E) WHERE [k] WITHIN 4 SLIDE 2",
])
def test_partition_compaction_keeps_results(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Streams whose partitions come and go: forgetting dead partitions changes nothing."""
    from replaydb.operators.greta.runtime import GraphState

    rng = random.Random(5)
    n = 90
    types = [rng.choice("AAABE") for _ in range(n)]
    table = pa.table({"t": pa.array([i // 2 for i in range(n)], pa.int64()),
                      "seq": pa.array(range(n), pa.int64()), "type": types,
                      "x": pa.array([rng.randint(0, 5) for _ in range(n)], pa.int64()),
                      "y": pa.array([0.0] * n), "g": pa.array([i % 2 for i in range(n)], pa.int64()),
                      "k": pa.array([i // 6 for i in range(n)], pa.int64())})
    expected = GretaOracle(to_config(parse(text), None), table, max_events=60).run()
    monkeypatch.setattr(GraphState, "COMPACT_MIN_PARTITIONS", 4)
    op = bind(parse(text), table.schema, None, exact_type="int64")
    got = []
    for a in range(0, n, 10):
        op.push(table.slice(a, 10))
        op._check()
        got.extend(op.results().to_pylist())
    op.flush()
    got.extend(op.results().to_pylist())
    assert len(op._rt.graphs[0].parts) < 15  # dead partitions were forgotten
    key = [c for c in expected[0] if c != "last_seq"] if expected else []
    assert sorted([r[c] for c in key] for r in got) == sorted([r[c] for c in key]
                                                              for r in expected)
    assert len(got) == len(expected) > 5
