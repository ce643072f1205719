"""``replaydb calibrate``: measured plans, a non-negative least-squares fit, weights stored in
the store's configuration and used by the planner, the estimated-vs-measured plot, the CLI;
the member tests' costs measured, fitted, stored and read back (also from a calibration
stored before they were measured)."""

from __future__ import annotations

import json
import math
import tempfile

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.cli import main
from replaydb.errors import UsageError
from replaydb.indexes.manage import create_index
from replaydb.indexes.membership import MemberTestCosts
from replaydb.planner.pattern.calibrate import Sample, calibrate, fit
from replaydb.planner.pattern.cost import DEFAULT_WEIGHTS, Weights, load_weights
from replaydb.planner.pattern.membercosts import (
    DEFAULT_MEMBER_COSTS,
    MAX_BOUND,
    MIN_BOUND,
    WAYS,
    MemberSample,
    costs_config,
    eviction_bytes,
    fit_member_costs,
)
from replaydb.planner.query import QueryOptions, plan_query


@pytest.fixture(scope="module")
def store_dir():
    with tempfile.TemporaryDirectory() as d:
        rng = np.random.default_rng(1)
        n = 30_000
        store = replaydb.open(f"{d}/store", create=True)
        tbl = pa.table({"t": np.arange(n, dtype=np.int64), "a": rng.random(n),
                        "b": rng.random(n), "c": rng.integers(0, 100, n)})
        store.create_stream("s", tbl.schema, time_unit="s", leaf_capacity=256)
        store.append("s", tbl)
        for col in ("a", "b"):
            create_index(store, "s", col)
        yield f"{d}/store"


def test_fit_recovers_known_weights() -> None:
    rng = np.random.default_rng(0)
    samples = []
    for i in range(60):
        pio, iv, sio, so, rows = (rng.uniform(0, 1e8), rng.integers(0, 500),
                                  rng.uniform(0, 1e7), rng.uniform(0, 1e7), rng.integers(0, 50))
        sec = 2e-9 * pio + 1e-3 * iv + 5e-9 * sio + 1e-8 * so + 0.01 + 1e-4 * rows
        samples.append(Sample(i, "x", sec, rows, pio, iv, sio, so, pio, iv, sio, so))
    w, per_interval, intercept, per_match, r2, med, rho = fit(samples, event_width=100.0)
    assert w.w_pio == pytest.approx(2e-9, rel=1e-6)
    assert w.w_sio == pytest.approx(5e-9, rel=1e-6)
    assert w.w_sort == pytest.approx(1e-8, rel=1e-6)
    assert per_interval == pytest.approx(1e-3, rel=1e-6)
    assert w.interval_events == pytest.approx(1e-3 / (2e-9 * 100), rel=1e-6)
    assert intercept == pytest.approx(0.01, rel=1e-6) and per_match == pytest.approx(1e-4)
    assert r2 > 0.999 and med < 1e-6 and rho > 0.999


def test_fit_separates_the_leaf_weight_of_index_plans() -> None:
    """Leaves replayed through index-based intervals get their own (larger) weight when full
    replays are there to tell them apart; without enough full replays one weight serves."""
    rng = np.random.default_rng(3)
    samples = []
    for i in range(80):
        index_plan = i % 4 != 0
        pio, iv, sio = rng.uniform(1e6, 1e8), int(rng.integers(0, 500)), rng.uniform(0, 1e7)
        sec = (2.5e-9 if index_plan else 2e-9) * pio + 1e-4 * iv + 5e-9 * sio + 0.01
        samples.append(Sample(i, "x", sec, 0, pio, iv, sio, 0.0, pio, iv, sio, 0.0, index_plan))
    w = fit(samples, event_width=100.0)[0]
    assert w.w_pio == pytest.approx(2e-9, rel=1e-6)
    assert w.w_pio_interval == pytest.approx(2.5e-9, rel=1e-6)
    assert w.pio_weight(True) == w.w_pio_interval and w.pio_weight(False) == w.w_pio
    assert w.interval_events == pytest.approx(1e-4 / (2.5e-9 * 100), rel=1e-6)
    only_index = [s for s in samples if s.index_plan] + [s for s in samples
                                                         if not s.index_plan][:2]
    w1 = fit(only_index, event_width=100.0)[0]
    assert w1.w_pio_interval is None and w1.pio_weight(True) == w1.w_pio


def test_interval_weight_makes_most_of_the_stream_index_plans_lose_to_replay() -> None:
    """The planner's side: an index configuration keeping 84% of the leaves is cheaper than
    full replay with one leaf weight, and dearer once its leaves weigh 1.25 x full replay's."""
    from tests.planner.test_planner_cost import model, pattern

    rp = pattern([1, 1], 300)
    for w_iv, cheaper in ((None, True), (1.25e-9, False)):
        w = Weights(w_pio=1e-9, w_sio=1e-12, w_sort=1e-12, interval_events=0.0,
                    w_pio_interval=w_iv)
        m, _ = model(rp, [0.005, 0.5], weights=w)
        est, replay = m.estimate(frozenset({0})), m.replay_estimate()
        assert 0.8 < est.pio_leaves / replay.pio_leaves < 0.9
        assert replay.cost == pytest.approx(1e-9 * replay.pio_bytes)
        assert (est.cost < replay.cost) is cheaper


def test_calibrate_stores_weights_and_planner_uses_them(store_dir, tmp_path) -> None:
    store = replaydb.open(store_dir)
    assert load_weights(store) == Weights()
    plot = tmp_path / "cal.png"
    cal = calibrate(store, queries=6, repeat=1, plot=str(plot))
    assert len(cal.samples) >= 10
    w = cal.weights
    assert min(w.w_pio, w.w_sio, w.w_sort, w.interval_events) >= 0
    assert plot.stat().st_size > 1000
    reopened = replaydb.open(store_dir)
    cfg = reopened.config["calibration"]["pattern"]
    assert cfg["w_pio"] == w.w_pio and cfg["samples"] == len(cal.samples)
    assert load_weights(reopened).source == "calibrated"
    q = ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A B) WITHIN 50 "
         "DEFINE A AS a < 0.01, B AS b < 0.5)")
    p = plan_query(reopened, q, QueryOptions(plan="auto"))
    assert p.details["pattern"]["weights"]["source"] == "calibrated"
    # the member tests' costs: measured at the smallest bound (30,000 events), stored with
    # the weights, read back, shown by EXPLAIN
    m = cal.member
    assert m is not None and m.bound == MIN_BOUND and w.member_costs == m.costs
    assert len(m.samples) == 12 and set(m.relative_error) == set(WAYS)
    c = m.costs
    assert all(math.isfinite(getattr(c, f)) and getattr(c, f) >= 0
               for names in WAYS.values() for f in names)
    assert c.code_target > 0 and c.scan_pass > c.scan_value > 0  # a pass sorts and walks
    assert cfg["member_tests"] == m.as_config()
    assert load_weights(reopened).member_costs == c and load_weights(reopened).member_tests == c
    shown = p.details["pattern"]["weights"]["member_tests"]
    assert shown == {**costs_config(c), "source": "calibrated"}


def test_a_calibration_without_member_costs_still_loads(tmp_path) -> None:
    """A calibration stored before the member tests' costs were measured (or holding them
    otherwise than as costs) keeps its weights and takes the default member costs."""
    store = replaydb.open(tmp_path / "st", create=True)
    store.append("s", pa.table({"t": np.arange(2000, dtype=np.int64),
                                "a": np.random.default_rng(0).random(2000)}), time_unit="s")
    old = {"w_pio": 2e-9, "w_sio": 3e-9, "w_sort": 1e-8, "interval_events": 5.0}
    for member in (None, {"scan_value_ns": 1.0}, {**costs_config(DEFAULT_MEMBER_COSTS),
                                                  "code_target_ns": -1.0}):
        pattern = old if member is None else {**old, "member_tests": member}
        store.update_config(calibration={"pattern": pattern})
        w = load_weights(replaydb.open(tmp_path / "st"))
        assert (w.source, w.w_pio, w.interval_events) == ("calibrated", 2e-9, 5.0)
        assert w.member_costs is None and w.member_tests == DEFAULT_MEMBER_COSTS
        assert w.as_dict()["member_tests"]["source"] == "default"
    assert Weights(**DEFAULT_WEIGHTS).member_tests == DEFAULT_MEMBER_COSTS
    # an override of the weights keeps the calibrated member costs
    mine = MemberTestCosts(1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
    w = Weights(member_costs=mine).overridden({"w_sort": 2.0})
    assert w.source == "option" and w.w_sort == 2.0 and w.member_tests == mine


def test_fit_member_costs_recovers_known_costs() -> None:
    """Each way's model fitted to exact times gives back the costs; too few samples of a
    way for its costs is an error."""
    truth = MemberTestCosts(scan_value=1.7, scan_pass=140.0, bits_value=2.4, bits_bound=0.05,
                            bits_target=2.9, code_target=130.0)
    b = 1 << 22
    points = [("scan", b // 8192, b // 8, b, 1), ("scan", b // 4096, b // 32, b, 1),
              ("scan", b // 128, b // 64, b, 1), ("scan", b // 32, b // 64, b, 1),
              ("bits", 1024, b // 8, b, 1), ("bits", 1024, b // 64, b, 1),
              ("bits", b // 16, b // 64, b, 1), ("bits", 1024, b // 64, b // 4, 1),
              ("codes", 512, 0, b, 1), ("codes", 2048, 0, b, 1), ("codes", 4096, 0, b, 2)]
    samples = [MemberSample(way, k, v, bound, pieces, 0.0) for way, k, v, bound, pieces in points]
    samples = [MemberSample(s.way, s.targets, s.values, s.bound, s.pieces, s.model_ns(truth))
               for s in samples]
    got, errors = fit_member_costs(samples)
    for name in ("scan_value", "scan_pass", "bits_value", "bits_bound", "bits_target",
                 "code_target"):
        assert getattr(got, name) == pytest.approx(getattr(truth, name), rel=1e-6)
    assert max(errors.values()) < 1e-9
    with pytest.raises(ValueError, match="bits samples"):
        fit_member_costs([s for s in samples if s.way != "bits"] + samples[4:6])
    assert MIN_BOUND < MAX_BOUND and eviction_bytes() >= 2 << 20


def test_calibrate_cli(store_dir, capsys, tmp_path) -> None:
    assert main(["calibrate", store_dir, "--queries", "4", "--repeat", "1", "--dry-run",
                 "--json", "--plot", str(tmp_path / "p.png")]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("w_pio", "w_sio", "w_sort", "interval_events", "r2", "spearman_estimated",
                "member_tests"):
        assert key in out
    assert (tmp_path / "p.png").exists()
    assert main(["calibrate", store_dir, "s", "--queries", "3", "--repeat", "1",
                 "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "w_PIO" in text and "dry run" in text and "member tests (ns)" in text


def test_calibrate_needs_an_index(tmp_path) -> None:
    store = replaydb.open(tmp_path / "st", create=True)
    tbl = pa.table({"t": np.arange(2000, dtype=np.int64), "a": np.random.default_rng(0).random(2000)})
    store.append("s", tbl, time_unit="s")
    with pytest.raises(UsageError, match="no index"):
        calibrate(store)
