"""Real datasets: flights-3m (npm vega-datasets 3.2.1) and opensky (PyPI traffic 2.13).

The fast tests read the package cache (``$REPLAYDB_CACHE`` or ``~/.cache/replaydb``) and are
skipped, with the reason printed, when it does not hold the packages; fill it once with
``replaydb datasets make flights-3m OUT`` and ``... make opensky OUT`` (needs npm, pip and the
registries). The slow tests fetch both packages into a fresh cache.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import replaydb.datasets as ds
from replaydb.datasets import packages
from replaydb.datasets.flights import _drop_exact_duplicates, load_flights
from replaydb.datasets.opensky import LANDING_QUERY, TAKEOFF_QUERY, load_opensky
from replaydb.errors import DataError

FLIGHT_COLUMNS = ["date", "delay", "distance", "origin", "destination"]
OPENSKY_COLUMNS = ["timestamp", "icao24", "callsign", "latitude", "longitude", "altitude",
                   "geoaltitude", "groundspeed", "track", "vertical_rate", "onground", "squawk",
                   "source"]


def _need(spec: packages.PackageSpec) -> None:
    if packages.cached_file(spec) is None:
        pytest.skip(f"{spec.filename} is not in the package cache {packages.packages_dir()}; "
                    f"run `replaydb datasets make {'flights-3m' if spec.kind == 'npm' else 'opensky'} "
                    "OUT` once where npm/pip reach their registries")


@pytest.fixture(scope="module")
def flights() -> pa.Table:
    _need(packages.VEGA_DATASETS)
    return load_flights()


@pytest.fixture(scope="module")
def opensky() -> pa.Table:
    _need(packages.TRAFFIC)
    return load_opensky()


def starts_of(t: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, w: int) -> np.ndarray:
    """Rows where ``A T* B T* C`` with ``C.t - A.t <= w`` can start (row order = event order).

    The earliest B after an A leaves the most room for C, so existence reduces to two
    searchsorted calls. ``a``/``b``/``c`` are boolean masks over rows of one partition.
    """
    ia, ib, ic = np.flatnonzero(a), np.flatnonzero(b), np.flatnonzero(c)
    jb = np.searchsorted(ib, ia, side="right")
    ok = jb < ib.size
    ia, fb = ia[ok], ib[jb[ok]]
    jc = np.searchsorted(ic, fb, side="right")
    ok = jc < ic.size
    ia, fc = ia[ok], ic[jc[ok]]
    return ia[t[fc] - t[ia] <= w]


# --- flights ------------------------------------------------------------------------------------

def test_flights_columns_units_and_order(flights):
    info = ds.describe("flights-3m")
    assert flights.num_rows == 3_000_000
    assert flights.column_names == FLIGHT_COLUMNS == info.column_names()
    assert (info.time_column, info.time_unit) == ("date", "ms")
    d = flights.column("date").to_numpy()
    assert np.all(np.diff(d) >= 0)
    assert np.all(d % 60_000 == 0)  # whole minutes in ms
    assert d[0] == 978_307_260_000 and d[-1] == 993_945_600_000  # 2001-01-01 00:01 .. 07-01 00:00
    assert flights.column("delay").null_count == 0
    assert pc.min_max(flights.column("delay")).as_py() == {"min": -1116, "max": 1688}
    assert pc.min_max(flights.column("distance")).as_py() == {"min": 21, "max": 4962}
    assert pc.count_distinct(flights.column("origin")).as_py() == 229


def test_flights_dedup_drops_exact_duplicates_only(flights):
    dedup = load_flights(dedup=True)
    assert dedup.num_rows == 2_999_809  # 191 exact duplicates (counted independently)
    assert np.all(np.diff(dedup.column("date").to_numpy()) >= 0)
    # oracle on a prefix: first occurrences by a Python set of row tuples (dedup of a prefix is
    # the prefix of the dedup, as the order is kept)
    head = flights.slice(0, 150_000)
    rows = zip(*(head.column(c).to_pylist() for c in FLIGHT_COLUMNS))
    seen: set[tuple] = set()
    keep = []
    for row in rows:
        keep.append(row not in seen)
        seen.add(row)
    assert sum(keep) < head.num_rows  # the prefix does contain duplicates
    assert _drop_exact_duplicates(head).equals(head.filter(pa.array(keep)))


def test_flights_example_query_has_matches(flights):
    text = ds.describe("flights-3m").example_queries[0].text
    for part in ("A.origin = 'ORD' AND A.delay BETWEEN 30 AND 59",
                 "B.origin = 'ORD' AND B.delay BETWEEN 60 AND 119",
                 "C.origin = 'ORD' AND C.delay >= 120", "WITHIN 3 HOURS", "PATTERN (A T1* B T2* C)"):
        assert part in text
    t = flights.column("date").to_numpy()
    delay = flights.column("delay").to_numpy()
    ord_ = pc.equal(flights.column("origin"), "ORD").to_numpy(zero_copy_only=False)
    s = starts_of(t, ord_ & (delay >= 30) & (delay <= 59), ord_ & (delay >= 60) & (delay <= 119),
                  ord_ & (delay >= 120), 3 * 3600 * 1000)
    assert s.size > 1000  # a cascade of ORD delays is common, not a corner case


def test_flights_make_slice(tmp_path, flights):
    out = tmp_path / "f.parquet"
    res = ds.make("flights-3m", out, 100_000)
    back = pq.read_table(out).replace_schema_metadata(None)
    assert res.rows == 100_000 and back.equals(flights.slice(0, 100_000))


# --- opensky ------------------------------------------------------------------------------------

def test_opensky_columns_units_and_order(opensky):
    info = ds.describe("opensky")
    assert opensky.num_rows == 928_634
    assert opensky.column_names == OPENSKY_COLUMNS == info.column_names()
    assert (info.time_column, info.time_unit, info.key_columns) == ("timestamp", "ms", ("icao24",))
    ts = opensky.column("timestamp").to_numpy()
    assert np.all(np.diff(ts) >= 0)
    assert 1.48e12 < ts[0] and ts[-1] < 1.74e12  # 2017 .. 2024, in ms
    assert pc.count_distinct(opensky.column("icao24")).as_py() == 1134
    assert pc.count_distinct(opensky.column("source")).as_py() == 73
    keys = opensky.group_by(["icao24", "timestamp"]).aggregate([]).num_rows
    assert keys == opensky.num_rows  # no duplicate state vector per aircraft and instant
    for c in ("latitude", "altitude", "groundspeed", "vertical_rate"):
        assert not pc.any(pc.is_nan(opensky.column(c))).as_py()
    sq = opensky.column("squawk").drop_null()
    assert pc.all(pc.equal(pc.utf8_length(sq), 4)).as_py()
    alt = opensky.column("altitude").drop_null().to_numpy()
    assert np.median(alt) > 1000 and alt.max() < 130_000  # feet
    gs = opensky.column("groundspeed").drop_null().to_numpy()
    assert 100 < np.median(gs) < 600  # knots


@pytest.mark.parametrize(("query", "a", "b", "c", "window"), [
    (LANDING_QUERY,
     lambda d: (d["altitude"] >= 3000) & (d["altitude"] <= 6000) & (d["vertical_rate"] < -500),
     lambda d: (d["altitude"] < 2000) & (d["vertical_rate"] < -300),
     lambda d: (d["groundspeed"] < 60) & (d["altitude"] < 2000), 20 * 60_000),
    (TAKEOFF_QUERY,
     lambda d: d["groundspeed"] < 40,
     lambda d: (d["groundspeed"] > 120) & (d["vertical_rate"] > 500),
     lambda d: (d["vertical_rate"] > 1000) & (d["altitude"] > 5000), 10 * 60_000),
])
def test_opensky_example_queries_have_matches_per_aircraft(opensky, query, a, b, c, window):
    assert "PARTITION BY icao24" in query
    assert query in [q.text for q in ds.describe("opensky").example_queries]
    order = np.lexsort((np.arange(opensky.num_rows), opensky.column("timestamp").to_numpy(),
                        pc.dictionary_encode(opensky.column("icao24")).combine_chunks()
                        .indices.to_numpy()))
    t = opensky.take(pa.array(order))
    # nulls become NaN, and every comparison with NaN is False (a null never satisfies DEFINE)
    d = {k: t.column(k).to_numpy(zero_copy_only=False).astype(float)
         for k in ("altitude", "vertical_rate", "groundspeed")}
    ts = t.column("timestamp").to_numpy()
    code = pc.dictionary_encode(t.column("icao24")).combine_chunks().indices.to_numpy()
    bounds = np.flatnonzero(np.diff(code)) + 1
    ma, mb, mc = a(d), b(d), c(d)
    aircraft = 0
    for lo, hi in zip(np.concatenate(([0], bounds)), np.append(bounds, code.size)):
        if starts_of(ts[lo:hi], ma[lo:hi], mb[lo:hi], mc[lo:hi], window).size:
            aircraft += 1
    assert aircraft >= 5


# --- fetching and its errors --------------------------------------------------------------------

def test_missing_npm_gives_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(packages.SourceUnavailable) as info:
        ds.generate("flights-3m", cache_dir=str(tmp_path / "cache"))
    msg = f"{info.value}\n{info.value.hint}"
    assert "npm is not installed" in msg and "npm pack vega-datasets@3.2.1" in msg
    assert "apt-get install npm" in msg


def test_unreachable_index_gives_the_download_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(packages.SourceUnavailable) as info:
        ds.generate("opensky", cache_dir=str(tmp_path / "cache"))
    assert "pip download traffic==2.13 --no-deps --only-binary=:all:" in info.value.hint


def test_a_corrupt_cached_package_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / packages.TRAFFIC.filename).write_bytes(b"not a wheel")
    with pytest.raises(DataError, match="SHA-256") as info:
        ds.generate("opensky", cache_dir=str(cache))
    assert "delete the file" in info.value.hint


def test_cache_location_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(packages.CACHE_ENV, str(tmp_path / "root"))
    assert packages.packages_dir() == tmp_path / "root" / "packages"
    assert packages.prepared_dir() == tmp_path / "root" / "prepared"
    assert packages.packages_dir(tmp_path / "x") == tmp_path / "x"
    monkeypatch.delenv(packages.CACHE_ENV)
    assert packages.packages_dir() == Path.home() / ".cache" / "replaydb" / "packages"


@pytest.mark.slow
def test_fetch_both_packages_into_a_fresh_cache_and_make(tmp_path, monkeypatch):
    monkeypatch.setenv(packages.CACHE_ENV, str(tmp_path / "cache"))
    if os.environ.get("REPLAYDB_OFFLINE"):
        pytest.skip("REPLAYDB_OFFLINE is set")
    try:
        packages.fetch(packages.VEGA_DATASETS)
        packages.fetch(packages.TRAFFIC)
    except packages.SourceUnavailable as exc:
        pytest.skip(f"packages cannot be fetched here: {exc}")
    res = ds.make("flights-3m", tmp_path / "flights.parquet")
    assert res.rows == 3_000_000 and pq.read_schema(res.path).names == FLIGHT_COLUMNS
    res = ds.make("opensky", tmp_path / "opensky.parquet")
    assert res.rows == 928_634 and pq.read_schema(res.path).names == OPENSKY_COLUMNS
    # the cleaned table was kept and a rebuild from the wheel gives the same rows
    assert any((tmp_path / "cache" / "prepared").iterdir())
    rebuilt = load_opensky(use_prepared=False)
    assert rebuilt.equals(pq.read_table(res.path).replace_schema_metadata(None))
