"""TPStream vs the brute-force oracle on random streams and patterns.

Covers both modes, every kind of evaluation order (adaptive, static, every fixed priority),
low-latency with and without the trigger analysis, partitions, ties in time, duration
constraints, both end-of-input policies, RETURN aggregates and arbitrary batch splits. The
default run checks a few hundred cases; ``-m slow`` runs thousands.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.operators.tpstream import TPStream, oracle
from replaydb.operators.tpstream.config import TPStreamConfig
from replaydb.operators.tpstream.testing import (
    random_config,
    random_events,
    split_batches,
    to_table,
)


def run_operator(cfg: TPStreamConfig, tab, rng: np.random.Generator, check: bool = True):  # noqa: ANN001
    op = TPStream(cfg, tab.schema)
    for b in split_batches(tab, rng):
        op.push(b)
        if check:
            op._check()
    op.flush()
    return op.results().to_pylist()


def keys(rows: list[dict], cfg: TPStreamConfig) -> list[tuple]:
    return sorted(oracle.result_key(r, cfg) for r in rows)


case = st.fixed_dictionaries({
    "seed": st.integers(0, 2**32 - 1),
    "S": st.integers(1, 4),
    "n": st.integers(1, 70),
    "parts": st.integers(1, 3),
    "partitioned": st.booleans(),
    "tie": st.sampled_from([0.0, 0.2, 0.5]),
})


def make(c: dict, mode: str, **kw: object) -> tuple[TPStreamConfig, dict, np.random.Generator]:
    rng = np.random.default_rng(c["seed"])
    cfg = random_config(rng, c["S"], mode=mode, partitioned=c["partitioned"], **kw)
    ev = random_events(rng, c["n"], 4, n_parts=c["parts"], tie_prob=c["tie"])
    return cfg, ev, rng


def check_case(c: dict, mode: str, **kw: object) -> None:
    cfg, ev, rng = make(c, mode, **kw)
    tab = to_table(ev)
    got = keys(run_operator(cfg, tab, rng), cfg)
    exp = keys(oracle.match(ev, cfg), cfg)
    assert got == exp


def check_low_latency(c: dict, use_triggers: bool) -> None:
    """``check_case`` in low-latency mode, with or without triggers."""
    cfg, ev, rng = make(c, "low_latency")
    cfg = TPStreamConfig(**{**cfg.__dict__, "use_triggers": use_triggers})
    tab = to_table(ev)
    assert keys(run_operator(cfg, tab, rng), cfg) == keys(oracle.match(ev, cfg), cfg)


@settings(max_examples=150)
@given(case)
def test_normal_mode_matches_oracle(c: dict) -> None:
    check_case(c, "normal")


@settings(max_examples=150)
@given(case, st.booleans())
def test_low_latency_matches_oracle(c: dict, use_triggers: bool) -> None:
    check_low_latency(c, use_triggers)


def check_orders(c: dict, mode: str) -> None:
    cfg, ev, rng = make(c, mode)
    tab = to_table(ev)
    exp = keys(oracle.match(ev, cfg), cfg)
    orders: list[object] = ["adaptive", "static"]
    orders += list(itertools.permutations(cfg.names))[:24]
    for order in orders:
        cfg_o = TPStreamConfig(**{**cfg.__dict__, "order": order})
        got = keys(run_operator(cfg_o, tab, np.random.default_rng(c["seed"] + 1), check=False),
                   cfg_o)
        assert got == exp, order


@settings(max_examples=40)
@given(case, st.sampled_from(["normal", "low_latency"]))
def test_every_evaluation_order_gives_the_same_matches(c: dict, mode: str) -> None:
    check_orders(c, mode)


@pytest.mark.slow
@settings(max_examples=3000)
@given(case)
def test_normal_mode_matches_oracle_many(c: dict) -> None:
    check_case(c, "normal")


@pytest.mark.slow
@settings(max_examples=3000)
@given(case, st.booleans())
def test_low_latency_matches_oracle_many(c: dict, use_triggers: bool) -> None:
    check_low_latency(c, use_triggers)


@pytest.mark.slow
@settings(max_examples=600)
@given(case, st.sampled_from(["normal", "low_latency"]))
def test_every_evaluation_order_many(c: dict, mode: str) -> None:
    check_orders(c, mode)
