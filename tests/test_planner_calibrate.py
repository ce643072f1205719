"""``replaydb calibrate``: measured plans, a non-negative least-squares fit, weights stored in
the store's configuration and used by the planner, the estimated-vs-measured plot, the CLI."""

from __future__ import annotations

import json
import tempfile

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.cli import main
from replaydb.errors import UsageError
from replaydb.indexes.manage import create_index
from replaydb.planner.pattern.calibrate import Sample, calibrate, fit
from replaydb.planner.pattern.cost import Weights, load_weights
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


def test_calibrate_cli(store_dir, capsys, tmp_path) -> None:
    assert main(["calibrate", store_dir, "--queries", "4", "--repeat", "1", "--dry-run",
                 "--json", "--plot", str(tmp_path / "p.png")]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("w_pio", "w_sio", "w_sort", "interval_events", "r2", "spearman_estimated"):
        assert key in out
    assert (tmp_path / "p.png").exists()
    assert main(["calibrate", store_dir, "s", "--queries", "3", "--repeat", "1",
                 "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "w_PIO" in text and "dry run" in text


def test_calibrate_needs_an_index(tmp_path) -> None:
    store = replaydb.open(tmp_path / "st", create=True)
    tbl = pa.table({"t": np.arange(2000, dtype=np.int64), "a": np.random.default_rng(0).random(2000)})
    store.append("s", tbl, time_unit="s")
    with pytest.raises(UsageError, match="no index"):
        calibrate(store)
