"""Each generator against its paper's parameters: exact formulas, means, variances, durations, rates.

Tolerances are a few standard errors of the statistic at the sample size used, so a generator with
a wrong parameter (another sigma, rate, range or probability) cannot pass.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import replaydb.datasets as ds
from replaydb.datasets.cluster import END, MEASURE, START, lifecycle_types
from replaydb.datasets.stock import floored_walks
from replaydb.datasets.synthetic_normal import BELOW_ONE


def gen(name: str, events: int, seed: int = 0, **opts) -> dict[str, np.ndarray]:
    t = pa.Table.from_batches(list(ds.generate(name, events, seed, **opts)))
    out = {}
    for c in t.column_names:
        col = t.column(c)
        if pa.types.is_string(col.type):
            out[c] = np.asarray(col.to_pylist(), dtype=object)
        elif col.null_count:
            out[c] = col.to_numpy(zero_copy_only=False)
        else:
            out[c] = col.to_numpy()
    return out


def within(x: float, expect: float, se: float, k: float = 5.0) -> bool:
    return abs(x - expect) <= k * se


def chi2_uniform_ok(values: np.ndarray, categories: np.ndarray) -> bool:
    counts = np.array([(values == c).sum() for c in categories])
    assert counts.sum() == values.size, "values outside the categories"
    expected = counts.sum() / counts.size
    return chi2_upper_tail(float(((counts - expected) ** 2).sum() / expected),
                           counts.size - 1) > 1e-4


def chi2_upper_tail(x: float, df: int) -> float:
    """P(X >= x) for X chi-square with ``df`` degrees of freedom: exact for one degree, the
    Wilson-Hilferty normal approximation (a few percent of the p-value) above."""
    if df == 1:
        return math.erfc(math.sqrt(x / 2.0))
    v = 2.0 / (9.0 * df)
    z = ((x / df) ** (1.0 / 3.0) - (1.0 - v)) / math.sqrt(v)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def ks_statistic(x: np.ndarray, cdf) -> float:
    """Kolmogorov-Smirnov distance between the sample ``x`` and the distribution ``cdf``."""
    f = cdf(np.sort(x))
    n = x.size
    return float(max((np.arange(1, n + 1) / n - f).max(), (f - np.arange(n) / n).max()))


def ks_pvalue(x: np.ndarray, cdf) -> float:
    """The one-sample KS test's p-value by the Kolmogorov distribution with Stephens'
    small-sample correction of the statistic."""
    n = x.size
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * ks_statistic(x, cdf)
    k = np.arange(1, 101)
    return float(min(1.0, max(0.0, 2.0 * ((-1.0) ** (k - 1) * np.exp(-2.0 * k**2 * lam**2))
                                      .sum())))


def uniform_cdf(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0.0, 1.0)


def normal_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.vectorize(math.erf)(np.asarray(z) / math.sqrt(2.0)))


def test_the_statistics_helpers_reject_what_they_should():
    rng = np.random.default_rng(3)
    u = rng.random(5000)
    assert ks_pvalue(u, uniform_cdf) > 1e-3
    assert ks_pvalue(u**1.1, uniform_cdf) < 1e-3
    assert chi2_upper_tail(3.84, 1) == pytest.approx(0.05, abs=1e-3)
    assert chi2_upper_tail(18.31, 10) == pytest.approx(0.05, abs=3e-3)
    assert chi2_upper_tail(29.59, 10) == pytest.approx(0.001, abs=3e-4)


# --- synthetic-normal ---------------------------------------------------------------------------

N_SN = 1_000_000


@pytest.fixture(scope="module")
def normal_reject():
    return gen("synthetic-normal", N_SN, seed=1, pad=True)


def test_synthetic_normal_time_and_a1_exact(normal_reject):
    d = normal_reject
    i = np.arange(1, N_SN + 1)
    assert np.array_equal(d["t"], i)
    expect = i / N_SN
    expect[-1] = BELOW_ONE
    assert np.array_equal(d["A1"], expect)


def test_synthetic_normal_values_in_unit_interval(normal_reject):
    for j in range(1, 6):
        a = normal_reject[f"A{j}"]
        assert a.min() >= 0.0 and a.max() < 1.0


@pytest.mark.parametrize(("col", "sigma", "lo", "hi"), [
    ("A2", 0.001, 0.01, 0.99), ("A3", 0.01, 0.05, 0.95), ("A4", 0.1, 0.45, 0.55),
])
def test_synthetic_normal_spread_around_the_linear_mean(normal_reject, col, sigma, lo, hi):
    i = np.arange(1, N_SN + 1)
    mean = i / N_SN
    mid = (mean >= lo) & (mean <= hi)  # far from 0 and 1: truncation is negligible here
    r = normal_reject[col][mid] - mean[mid]
    n = r.size
    assert within(r.mean(), 0.0, sigma / np.sqrt(n))
    # sd of a sample sd ~ sigma / sqrt(2n)
    assert within(r.std(), sigma, sigma / np.sqrt(2 * n))


def test_synthetic_normal_a5_is_a_truncated_normal_not_uniform(normal_reject):
    mean = np.arange(1, N_SN + 1) / N_SN
    sel = mean <= 0.01  # mu ~ 0.005: truncated N(mu, 1) on [0, 1) is visibly non-uniform
    x = normal_reject["A5"][sel]
    mu = 0.005
    lo, hi = normal_cdf(np.array([0 - mu, 1 - mu]))

    def truncated_cdf(v: np.ndarray) -> np.ndarray:
        return (normal_cdf(np.clip(v, 0.0, 1.0) - mu) - lo) / (hi - lo)

    assert ks_pvalue(x, truncated_cdf) > 1e-3
    assert ks_statistic(x, uniform_cdf) > 0.03  # wrong handling (wrap/uniform) fails
    # and the truncated-normal density tilts: more mass in [0, .5) than in [.5, 1)
    assert (x < 0.5).mean() > 0.55


def test_synthetic_normal_near_zero_values_are_redrawn_not_clipped(normal_reject):
    a2 = normal_reject["A2"][:2000]  # mean i/N < 0.002, sigma 0.001: many raw draws were < 0
    assert (a2 == 0.0).sum() == 0
    assert a2.min() >= 0.0


def test_synthetic_normal_wrap_mode_is_uniform():
    d = gen("synthetic-normal", 200_000, seed=2, pad=False, out_of_range="wrap")
    mean = np.arange(1, 200_001) / 200_000
    x = d["A5"][mean <= 0.1]
    assert ks_pvalue(x, uniform_cdf) > 1e-3
    # near 0, sigma 0.001 draws below 0 wrap to just under 1
    assert (d["A2"][:100] > 0.99).any()


def test_synthetic_normal_padding_gives_128_byte_events(normal_reject):
    sch = ds.schema("synthetic-normal")
    widths = [f.type.bit_width // 8 for f in sch]
    assert sum(widths) + 8 == 128  # + the 8-byte seq the store assigns
    assert ds.describe("synthetic-normal").event_bytes == 128
    p = np.stack([normal_reject[f"P{k}"] for k in range(1, 10)])
    assert within(p.mean(), 0.5, np.sqrt(1 / 12 / p.size))
    assert within(p.var(), 1 / 12, 0.0889 / np.sqrt(p.size))
    assert ds.schema("synthetic-normal", pad=False).names == ["t", "A1", "A2", "A3", "A4", "A5"]


# --- window-agg ---------------------------------------------------------------------------------

def test_window_agg_rate_and_week_size():
    d = gen("window-agg", 300_000, seed=3, attributes=9)
    assert np.array_equal(d["t"], np.arange(300_000) * 10)
    vals = np.stack([d[f"A{j}"] for j in range(1, 10)])
    assert within(vals.mean(), 0.5, np.sqrt(1 / 12 / vals.size))
    assert within(vals.var(), 1 / 12, 0.0889 / np.sqrt(vals.size))
    assert ds.describe("window-agg").default_events == 7 * 86_400 * 100
    assert ds.schema("window-agg").names == ["t", "A1"]  # 16-byte events by default
    d = gen("window-agg", 1000, rate=3, start=5)
    assert np.array_equal(d["t"], 5 + (np.arange(1000) * 1000) // 3)


# --- situations ---------------------------------------------------------------------------------

def runs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, starts, lengths) of the maximal runs of a boolean array."""
    change = np.flatnonzero(x[1:] != x[:-1]) + 1
    starts = np.concatenate(([0], change))
    lengths = np.diff(np.append(starts, x.size))
    return x[starts], starts, lengths


def test_situations_durations_gaps_and_rate():
    n = 2_000_000
    d = gen("situations", n, seed=4, streams=3)
    assert np.array_equal(d["t"], np.arange(n))  # 1 Hz
    for j in (1, 2, 3):
        vals, _, lengths = runs(d[f"s{j}"])
        assert not vals[0]  # every stream starts with a gap
        inner_vals, inner = vals[1:-1], lengths[1:-1]  # the ends may be cut
        sit, gap = inner[inner_vals], inner[~inner_vals]
        assert sit.min() >= 10 and sit.max() <= 100 and gap.min() >= 10 and gap.max() <= 50
        assert within(sit.mean(), 55.0, np.sqrt((91**2 - 1) / 12 / sit.size))
        assert within(gap.mean(), 30.0, np.sqrt((41**2 - 1) / 12 / gap.size))
        assert chi2_uniform_ok(sit, np.arange(10, 101))
        assert chi2_uniform_ok(gap, np.arange(10, 51))
        assert np.all(vals[1:] != vals[:-1])
    # independent streams
    c = np.corrcoef(d["s1"].astype(float), d["s2"].astype(float))[0, 1]
    assert abs(c) < 0.02


def test_situations_custom_ranges():
    d = gen("situations", 100_000, seed=5, streams=1, min_duration=3, max_duration=3,
            min_gap=2, max_gap=2)
    vals, _, lengths = runs(d["s1"])
    assert set(lengths[1:-1][vals[1:-1]]) == {3} and set(lengths[1:-1][~vals[1:-1]]) == {2}


# --- traffic ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def traffic():
    return gen("traffic", 400 * 1500, seed=6, cars=400, accident_rate=240.0)


def test_traffic_reports_every_second_per_car(traffic):
    d = traffic
    pos = d["type"] == "Position"
    t = d["t"]
    assert np.all(np.diff(t) >= 0)
    per_second = np.bincount(t[pos])
    assert np.all(per_second[:-1] == 400)  # the last second may be cut by N
    assert set(np.unique(d["type"])) == {"Position", "Accident"}


def test_traffic_kinematics_are_consistent(traffic):
    d = traffic
    pos = d["type"] == "Position"
    speed = d["speed"][pos].astype(float)
    accel = d["accel"][pos].astype(float)
    car = d["car_id"][pos].astype(np.int64)
    t = d["t"][pos]
    position = d["position"][pos]
    assert speed.min() >= 0 and speed.max() <= 100
    assert position.min() >= 0 and position.max() <= 527_999
    assert np.array_equal(d["segment"], d["position"] // 5280)
    order = np.lexsort((t, car))
    c, tt, v, a, x, dr = car[order], t[order], speed[order], accel[order], position[order], \
        d["dir"][pos][order]
    same = (c[1:] == c[:-1]) & (tt[1:] == tt[:-1] + 1)
    # accel is exactly the speed change since the previous report of the same car
    assert np.allclose(a[1:][same], v[1:][same] - v[:-1][same], atol=1e-9)
    # eastbound positions grow, westbound shrink, never by more than 100 mph for one second
    step = np.diff(x.astype(np.int64))[same]
    east = dr[1:][same] == 0
    assert np.all(step[east] >= 0) and np.all(step[~east] <= 0)
    assert np.abs(step).max() <= 100 * 5280 / 3600 + 1
    # a car id never changes direction (a new trip gets a new id)
    per_car = {}
    for cid, ddir in zip(c[::97], dr[::97]):
        assert per_car.setdefault(cid, ddir) == ddir


def test_traffic_has_aggressive_episodes(traffic):
    d = traffic
    pos = d["type"] == "Position"
    car = d["car_id"][pos].astype(np.int64)
    order = np.lexsort((d["t"][pos], car))
    a = d["accel"][pos].astype(float)[order]
    c = car[order]
    # runs of accel > 8 lasting >= 5 s of one car (TPStream's situation A)
    hot = a > 8
    vals, starts, lengths = runs(hot)
    long_a = [(s, n) for v, s, n in zip(vals, starts, lengths) if v and n >= 5 and c[s] == c[s + n - 1]]
    # model: a new phase is a hard acceleration with p 0.05, phases last ~30 s on average, so
    # 400 cars over 1500 s start ~1000 of them; those capped below 8 mph/s or cut short drop out
    assert 50 < len(long_a) < 2000
    brake = a < -9
    vals, starts, lengths = runs(brake)
    long_c = sum(1 for v, s, n in zip(vals, starts, lengths) if v and n >= 3)
    assert long_c > 50


def test_traffic_accidents_are_a_poisson_process(traffic):
    d = traffic
    acc = d["type"] == "Accident"
    k = int(acc.sum())
    expect = 240.0 * 1500 / 3600  # 100
    assert within(k, expect, np.sqrt(expect))
    assert np.all(np.isnan(d["speed"][acc].astype(float)))
    assert np.all(np.isnan(d["car_id"][acc].astype(float)))
    # an accident follows the position reports of its second
    idx = np.flatnonzero(acc)
    nxt = idx + 1
    nxt = nxt[nxt < d["t"].size]
    assert np.all((d["t"][nxt] > d["t"][nxt - 1]) | (d["type"][nxt] == "Accident"))


# --- stock (SASE) -------------------------------------------------------------------------------

def steps_per_symbol(d):
    out = []
    for s in np.unique(d["symbol"]):
        p = d["price"][d["symbol"] == s]
        out.append(np.diff(p))
    return np.concatenate(out)


def test_stock_price_moves_with_probability_p():
    n = 400_000
    d = gen("stock", n, seed=7)
    assert np.array_equal(d["t"], np.arange(n)) and set(d["type"]) == {"Stock"}
    st_ = steps_per_symbol(d)
    assert set(np.unique(st_)) <= {-1, 0, 1}
    m = st_.size
    for value, p in ((1, 0.7), (-1, 0.15), (0, 0.15)):
        frac = (st_ == value).mean()
        assert within(frac, p, np.sqrt(p * (1 - p) / m))
    assert chi2_uniform_ok(d["symbol"], np.array([1, 2]))
    v = d["volume"]
    assert v.min() >= 1 and v.max() <= 1000
    assert within(v.mean(), 500.5, np.sqrt((1000**2 - 1) / 12 / n))


def test_stock_price_is_floored_at_one():
    d = gen("stock", 200_000, seed=8, p_up=0.1, symbols=3, max_price=50)
    assert d["price"].min() == 1
    st_ = steps_per_symbol(d)
    assert set(np.unique(st_)) <= {-1, 0, 1}
    for s in (1, 2, 3):
        p = d["price"][d["symbol"] == s]
        at_floor = p[:-1] == 1
        assert set(np.unique(p[1:][at_floor])) <= {1, 2}
    assert chi2_uniform_ok(d["symbol"], np.array([1, 2, 3]))


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.integers(-3, 3), max_size=60),
    keys=st.lists(st.integers(0, 3), min_size=60, max_size=60),
    start=st.lists(st.integers(1, 6), min_size=4, max_size=4),
)
def test_floored_walks_match_the_recursion(steps, keys, start):
    k = np.array(keys[: len(steps)], dtype=np.int64)
    s = np.array(steps, dtype=np.int64)
    st0 = np.array(start, dtype=np.int64)
    got, new = floored_walks(s, k, st0, 1)
    cur = st0.copy()
    expect = []
    for step, key in zip(s, k):
        cur[key] = max(1, cur[key] + step)
        expect.append(cur[key])
    assert got.tolist() == expect
    assert new.tolist() == cur.tolist()


# --- stock-greta --------------------------------------------------------------------------------

def test_stock_greta_companies_sectors_and_returns():
    n = 500_000
    d = gen("stock-greta", n, seed=9)
    assert np.array_equal(d["t"], np.arange(n) // 100)
    assert np.array_equal(d["tid"], np.arange(n))
    assert np.array_equal(d["sector"], d["company"] % 3)
    assert chi2_uniform_ok(d["company"], np.arange(10))
    assert within((d["side"] == "buy").mean(), 0.5, np.sqrt(0.25 / n))
    assert np.all(d["volume"] % 100 == 0) and d["volume"].min() >= 100 and d["volume"].max() <= 10_000
    rets = []
    for c in range(10):
        p = d["price"][d["company"] == c]
        assert np.allclose(p, np.round(p, 2))
        rets.append(np.diff(np.log(p)))
    r = np.concatenate(rets)
    # cent rounding adds ~3e-5 noise at these prices, negligible next to the 0.002 volatility
    assert within(r.std(), 0.002, 0.002 / np.sqrt(2 * r.size) + 2e-5)
    assert within(r.mean(), 0.0, 0.002 / np.sqrt(r.size))


# --- cluster ------------------------------------------------------------------------------------

def lifecycle_ok(types: list[str]) -> bool:
    s = "".join({"Start": "S", "Measurement": "M", "End": "E"}[x] for x in types)
    return re.fullmatch(r"(SM*E)*(SM*)?", s) is not None


def test_cluster_attributes_and_lifecycle():
    n = 600_000
    d = gen("cluster", n, seed=10)
    assert np.array_equal(d["t"], np.arange(n) // 3000)
    assert chi2_uniform_ok(d["job"], np.arange(11)) and chi2_uniform_ok(d["mapper"], np.arange(11))
    for c in ("cpu", "memory"):
        x = d[c]
        assert x.min() >= 0 and x.max() < 1000
        assert within(x.mean(), 500.0, np.sqrt(1000**2 / 12 / n))
        assert within(x.var(), 1000**2 / 12, 1000**2 * 0.0889 / np.sqrt(n))
    load = d["load"]
    assert within(load.mean(), 100.0, np.sqrt(100 / n))
    assert within(load.var(), 100.0, 100 * np.sqrt(2 / n) * 1.2)
    pair = d["job"] * 11 + d["mapper"]
    measurements = []
    for p in range(121):
        ty = d["type"][pair == p].tolist()
        assert lifecycle_ok(ty), f"pair {p}"
        s = "".join(x[0] for x in ty)
        measurements += [len(m) for m in re.findall(r"S(M*)E", s)]
    m = np.array(measurements)
    # M ~ Geometric(1/101) - 1: mean 100, sd ~ 100.5
    assert within(m.mean(), 100.0, 100.5 / np.sqrt(m.size))


@settings(max_examples=150, deadline=None)
@given(
    blocks=st.lists(st.lists(st.integers(0, 4), max_size=40), min_size=1, max_size=5),
    mean=st.sampled_from([0.0, 0.5, 3.0]),
    seed=st.integers(0, 2**16),
)
def test_cluster_lifecycle_is_valid_across_blocks(blocks, mean, seed):
    rng = np.random.default_rng(seed)
    left = np.zeros(5, dtype=np.int64)
    seqs: dict[int, list[int]] = {p: [] for p in range(5)}
    for blk in blocks:
        pair = np.array(blk, dtype=np.int64)
        types, left = lifecycle_types(pair, left, rng, mean)
        for p, ty in zip(pair, types):
            seqs[int(p)].append(int(ty))
        for p in range(5):
            s = seqs[p]
            # the carried count equals the events still due in the open job (its End included)
            if not s or s[-1] == END:
                assert left[p] == 0
            else:
                assert left[p] >= 1
    names = {START: "Start", MEASURE: "Measurement", END: "End"}
    for s in seqs.values():
        assert lifecycle_ok([names[x] for x in s])
    if mean == 0.0:  # jobs are exactly Start, End
        for s in seqs.values():
            assert re.fullmatch(r"(SE)*S?", "".join("SME"[x] for x in s))


# --- gpu-bench and imprecise --------------------------------------------------------------------

def test_gpu_bench_payload():
    n = 300_000
    t = pa.Table.from_batches(list(ds.generate("gpu-bench", n, seed=11)))
    assert t.schema.field("v1").type == pa.float32()
    assert np.array_equal(t.column("t").to_numpy(), np.arange(n))
    vals = np.stack([t.column(f"v{j}").to_numpy() for j in range(1, 7)]).astype(float)
    assert vals.min() >= 0 and vals.max() < 1
    assert within(vals.mean(), 0.5, np.sqrt(1 / 12 / vals.size))
    assert within(vals.var(), 1 / 12, 0.0889 / np.sqrt(vals.size))
    assert abs(np.corrcoef(vals[0], vals[1])[0, 1]) < 5 / np.sqrt(n)


def test_imprecise_values_wrap_and_intervals():
    n = 2500
    d = gen("imprecise", n, delta=7, step=2, start=100)
    i = np.arange(n)
    assert np.array_equal(d["t"], 100 + 2 * i)
    assert np.array_equal(d["value"], i % 1000 + 1)
    assert d["value"][999] == 1000 and d["value"][1000] == 1
    assert np.array_equal(d["lower"], d["t"] - 7) and np.array_equal(d["upper"], d["t"] + 7)
    assert Counter(d["type"]) == {"E": n}
    d0 = gen("imprecise", 10)
    assert d0["upper"][0] - d0["lower"][0] == 10  # default delta 5
