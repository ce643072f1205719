"""Calibrating the window cost model on a real store: measured weights, stored, used by the
planner (EXPLAIN, path choice); the line fit."""

from __future__ import annotations

import numpy as np
import pytest

import replaydb
from replaydb.errors import UsageError
from replaydb.operators.window.oracle import make_stream
from replaydb.planner.window_calibrate import calibrate_window, fit_line, weights_of
from replaydb.store.schema import StreamSchema
from tests.helpers import nan_allowing_schema

Q = ("SELECT window_start, window_end, COUNT(*) AS n, SUM(x) AS sx FROM TABLE(HOP(TABLE s, "
     "DESCRIPTOR(t), {slide}, INTERVAL '20' SECOND)) GROUP BY window_start, window_end")


@pytest.fixture()
def store(tmp_path):
    st = replaydb.open(tmp_path / "store", create=True)
    rng = np.random.default_rng(5)
    table = make_stream(rng, 60_000, max_step=3, t0=0).drop_columns("seq")
    st.create_stream("s", nan_allowing_schema(table.schema, leaf_capacity=20, fanout=5))
    st.append("s", table)
    return st


def test_fit_line_is_least_squares_with_non_negative_coefficients() -> None:
    x = np.array([10.0, 20.0, 40.0])
    assert fit_line(x, 3.0 + 0.5 * x) == pytest.approx((3.0, 0.5))
    a, b = fit_line(x, 10.0 - 0.1 * x)          # a falling line: no negative slope
    assert b >= 0 and a >= 0
    assert fit_line(np.array([8.0]), np.array([4.0])) == pytest.approx((0.0, 0.5))


def test_calibration_is_measured_stored_and_used_by_the_planner(store) -> None:
    assert weights_of(store, "s") is None
    before = replaydb.explain(store, Q.format(slide=400))
    assert before["estimates"]["weights"]["calibrated"] is False
    assert any("not calibrated" in line for line in before["window_path"])
    cal = calibrate_window(store, "s", repeat=1)
    assert cal.w_merge > 0 and cal.w_slice >= 0 and cal.replay_s_per_event > 0
    assert cal.probes and all(p["slices"] >= 500 for p in cal.probes)
    assert weights_of(store, "s") == pytest.approx((cal.w_merge, cal.w_slice))
    # the weights survive reopening and reach EXPLAIN and the estimates
    again = replaydb.open(store.path)
    after = replaydb.explain(again, Q.format(slide=400))
    w = after["estimates"]["weights"]
    assert w["calibrated"] and w["w_merge"] == pytest.approx(cal.w_merge)
    assert any(line.startswith("calibrated:") for line in after["window_path"])
    # results do not depend on the weights: every path computes the same windows
    got = replaydb.query(again, Q.format(slide=400)).table
    ref = replaydb.query(again, Q.format(slide=400), plan="replay").table
    assert got.num_rows == ref.num_rows
    assert got.column("n").equals(ref.column("n"))


def test_heavy_weights_send_the_query_to_replay(store) -> None:
    plain = replaydb.explain(store, Q.format(slide=2000))
    assert plain["strategy"] == "window-index"
    conf = dict(store.config.get("calibration") or {})
    conf["window"] = {"s": {"w_merge": 1000.0, "w_slice": 0.0}}
    store.update_config(calibration=conf)
    heavy = replaydb.explain(store, Q.format(slide=2000))
    assert heavy["strategy"] == "window-replay"


def test_dry_run_stores_nothing_and_small_streams_are_refused(store, tmp_path) -> None:
    calibrate_window(store, "s", repeat=1, save=False)
    assert weights_of(store, "s") is None
    tiny = replaydb.open(tmp_path / "tiny", create=True)
    t = make_stream(np.random.default_rng(1), 200, max_step=3, t0=0).drop_columns("seq")
    tiny.create_stream("s", StreamSchema.infer(t.select(["t"]).schema, time_unit="ms"))
    tiny.append("s", t.select(["t"]))
    with pytest.raises(UsageError, match="too small"):
        calibrate_window(tiny, "s")


def test_calibrate_window_cli(store, capsys) -> None:
    import json

    from replaydb.cli import main

    assert main(["calibrate", str(store.path), "s", "--window", "--repeat", "1", "--dry-run",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stream"] == "s" and out["w_merge"] > 0 and out["probes"]
    assert weights_of(replaydb.open(store.path), "s") is None
    assert main(["calibrate", str(store.path), "--window", "--repeat", "1"]) == 0
    text = capsys.readouterr().out
    assert "w_merge" in text and "stored" in text
    assert weights_of(replaydb.open(store.path), "s") is not None
