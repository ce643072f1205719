"""EXPLAIN and calibration pictures: the PNGs render, have a sane size, and show what they claim
(replay intervals shaded, result spans drawn, estimated-vs-measured points)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.cli import main
from replaydb.errors import UsageError
from replaydb.indexes.manage import create_index
from replaydb.planner.plot import match_spans, plot_plan, rate_unit
from replaydb.planner.query import QueryOptions, execute, plan_query

QUERY = ("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t ONE ROW PER MATCH "
         "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B) WITHIN 50 "
         "DEFINE A AS A.a > 0.9995, B AS B.b > 0.5)")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("plots") / "store"
    rng = np.random.default_rng(5)
    n = 40_000
    st = replaydb.open(str(d), create=True)
    tbl = pa.table({"t": np.arange(n, dtype=np.int64) * 2, "a": rng.random(n),
                    "b": rng.random(n)})
    st.create_stream("s", tbl.schema, time_unit="s", leaf_capacity=64)
    st.append("s", tbl)
    create_index(st, "s", "a")
    return st


def _image(path) -> np.ndarray:
    import matplotlib.image as mpimg

    img = mpimg.imread(str(path))
    assert img.ndim == 3 and img.shape[0] >= 300 and img.shape[1] >= 600
    assert float(img[..., :3].std()) > 0.02, "the picture is blank"
    return img[..., :3]


def _share_near(img: np.ndarray, rgb: tuple[int, int, int], tol: float = 0.12) -> float:
    target = np.array(rgb, dtype=np.float32) / 255.0
    return float((np.abs(img - target).max(axis=2) < tol).mean())


def test_explain_plot_shows_intervals_and_matches(store, tmp_path) -> None:
    path = tmp_path / "plan.png"
    out = replaydb.explain(store, QUERY, plot=str(path))
    assert out["plot"] == str(path) and out["strategy"] != "replay"
    assert out["replay_intervals"] and out["replay_intervals"] > 1
    img = _image(path)
    reddish = (img[..., 0] > 0.6) & (img[..., 1] < 0.45) & (img[..., 2] < 0.45)
    assert reddish.mean() > 0.0002, "no result spans drawn"
    # planned intervals are shaded green (light, over white)
    assert _share_near(img, (166, 216, 166), tol=0.1) > 0.001, "no replay intervals shaded"


def test_explain_plot_full_replay_and_cli(store, tmp_path) -> None:
    path = tmp_path / "full.png"
    assert main(["explain", str(store.path), QUERY,
                 "--plan", "replay", "--plot", str(path), "--json"]) == 0
    _image(path)


def test_match_spans_columns() -> None:
    assert match_spans(None) is None
    assert match_spans(pa.table({"x": [1]})) is None
    s0, s1, label = match_spans(pa.table({"window_start": [1, 5], "window_end": [4, 9]}))
    assert label == "window_start .. window_end" and s0.tolist() == [1, 5] and s1.tolist() == [4, 9]
    s0, s1, label = match_spans(pa.table({"t": pa.array([3], pa.timestamp("ms"))}))
    assert label == "t" and s0.tolist() == s1.tolist() == [3]


def test_plot_empty_stream_is_a_clear_error(tmp_path) -> None:
    st = replaydb.open(str(tmp_path / "empty"), create=True)
    st.create_stream("s", pa.schema([("t", pa.int64()), ("a", pa.float64()),
                                     ("b", pa.float64())]), time_unit="s")
    plan = plan_query(st, QUERY, QueryOptions())
    with pytest.raises(UsageError, match="no events"):
        plot_plan(plan, tmp_path / "x.png", result=execute(plan).table)


def test_calibrate_plot_renders(store, tmp_path) -> None:
    path = tmp_path / "cal.png"
    root = str(store.path)
    assert main(["calibrate", root, "--queries", "4", "--repeat", "1", "--dry-run", "--json",
                 "--plot", str(path)]) == 0
    img = _image(path)
    assert img.shape[1] >= 600


def test_rate_axis_uses_a_unit_people_read() -> None:
    one_per_hour_in_ms = [np.array([1 / 3_600_000, 0.0, 2 / 3_600_000])]
    assert rate_unit(one_per_hour_in_ms, "ms") == (3_600_000.0, "hour")
    assert rate_unit([np.array([5.0, 7.0])], "s") == (1.0, "second")
    assert rate_unit([np.array([1 / 30.0])], "s") == (60.0, "minute")
    assert rate_unit([np.array([1e-9])], "s") == (86_400.0, "day")  # sparser: still per day
    assert rate_unit([np.array([0.5])], None) == (1.0, "stream unit")
