"""Calibrating the cost model's weights on this machine (dissertation 3.4.3 / 3.5.3).

The weights of ``C_query = w_PIO C_PIO + w_SIO C_SIO + w_sort sort`` depend on hardware and
physical layout, so they are fitted from measured plans:

1. random pattern queries over the stream's indexed numeric attributes (m = 1..6 basic symbols,
   each a range over a random fraction of the attribute's key range - 0 to 10% and, for a
   quarter of the symbols, up to 50% so that large index results are measured too -, Kleene
   gaps inserted by the dissertation's recursive split, a window of 300 mean event gaps). The
   first symbol is rare (0.1-2% of the range): the model takes the matcher's cost per replayed
   event as constant (3.4.3), which holds when few partial matches are alive; a frequent first
   symbol with a Kleene gap makes the SQL matcher's work per event grow with the window;
2. for each query several index configurations - full replay (every few queries), All,
   Optimal, the single most selective condition and a random subset - are executed exactly as
   the planner would (index lookups, sort, Algorithm 3.1, replay into the operator), timed
   (best of ``repeat`` runs), and their actual costs counted: bytes of primary leaves replayed
   (the store's counters), bytes of index pages read and ``n log2 n`` of the results sorted
   (the index's counters; a deferred member of a tight block, only tested against the
   block's candidates, counts one pass, ``n``, as the cost model prices it);
3. non-negative least squares (Lawson and Hanson's active-set method, ``nnls``) fits seconds
   against the counted costs
   - leaf bytes replayed (and, for plans that replay index-based intervals, the same bytes
   again: the premium of reading leaves through many short intervals, see :func:`fit`),
   replay intervals, index bytes, sort - plus two nuisance terms that
   are the same for every plan of a query and so never change a ranking: a constant (parsing,
   binding) and the number of matches (building the output). Rows are weighted by the inverse
   of their time, so the fit minimizes relative errors and a few slow plans (a query whose
   matching is expensive) do not dominate it. The seconds per interval become ``interval_events``: the events a replay processes
   in that time (seconds per interval / (w_PIO x event width));
4. the costs of the member tests that choose how a tight block tests its candidates (a scan of
   a deferred member's seqs, their bitmap, or their run files' rank codes) are measured by
   micro-benchmarks of those kernels at the stream's size (:mod:`.membercosts`);
5. the weights and the member tests' costs go into the store's configuration
   (``calibration.pattern``, the costs under ``member_tests``), where the planner finds them;
   the fit quality (R² of log times, median relative error, Spearman correlation of the cost
   model's *estimated* costs with the measured times) is returned and the estimated-vs-measured
   plot saved on request.

Weights are in seconds per byte (PIO, SIO) and per comparison (sort): only their ratios matter
for choosing plans.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from replaydb.errors import UsageError
from replaydb.planner.pattern.cost import PAGE_BYTES, Weights, sort_term
from replaydb.planner.pattern.membercosts import MemberCalibration, measure_member_costs
from replaydb.planner.pattern.nnls import nnls

DEFAULT_QUERIES = 24


@dataclass
class Sample:
    """One measured plan."""

    query: int
    label: str
    seconds: float
    rows: float  # matches: the same for every plan of a query (a nuisance regressor)
    pio_bytes: float  # leaf bytes replayed
    intervals: float
    sio_bytes: float
    sort: float
    est_pio_bytes: float  # estimated leaf bytes (without navigation)
    est_intervals: float
    est_sio_bytes: float
    est_sort: float
    index_plan: bool = False  # replayed index-based intervals (False: full replay)


@dataclass
class Calibration:
    weights: Weights
    interval_seconds: float
    intercept: float
    r2: float
    median_rel_error: float
    spearman_estimated: float
    samples: list[Sample] = field(default_factory=list)
    stream: str = ""
    seconds: float = 0.0
    match_seconds: float = 0.0
    member: MemberCalibration | None = None
    """The member tests' costs measured (their fit is :attr:`Weights.member_costs`)."""

    def as_config(self) -> dict[str, Any]:
        member = {} if self.member is None else {"member_tests": self.member.as_config()}
        return {"w_pio": self.weights.w_pio, "w_pio_interval": self.weights.w_pio_interval,
                "w_sio": self.weights.w_sio,
                "w_sort": self.weights.w_sort, "interval_events": self.weights.interval_events,
                "interval_seconds": self.interval_seconds,
                "intercept_seconds": self.intercept, "match_seconds": self.match_seconds,
                "unit": "seconds per byte (pio, sio) and per n log2 n (sort)",
                "r2": self.r2, "median_relative_error": self.median_rel_error,
                "spearman_estimated": self.spearman_estimated, "samples": len(self.samples),
                "stream": self.stream, **member,
                "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}

    def summary(self) -> dict[str, Any]:
        d = self.as_config()
        w = self.weights
        d["weights_relative"] = {
            "w_pio": 1.0,
            "w_pio_interval": w.pio_weight(True) / w.w_pio if w.w_pio else None,
            "w_sio": w.w_sio / w.w_pio if w.w_pio else None,
            "w_sort": w.w_sort / w.w_pio if w.w_pio else None}
        d["seconds"] = self.seconds
        return d


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def random_queries(stream: str, attrs: dict[str, tuple[float, float]], window: int,
                   count: int, seed: int) -> list[str]:
    """Random MATCH_RECOGNIZE queries over ``attrs`` (name -> key range) for calibration."""
    rng = np.random.default_rng(seed)
    names = sorted(attrs)
    out = []
    for _ in range(count):
        m = int(rng.choice([1, 2, 2, 3, 4, 6]))
        defs = []
        for i in range(1, m + 1):
            a = names[int(rng.integers(len(names)))]
            lo, hi = attrs[a]
            width = hi - lo
            if i == 1:  # a rare first symbol keeps the matcher's work per event small
                frac = float(rng.uniform(0.001, 0.02))
            else:
                frac = float(rng.random()) * (0.5 if rng.random() < 0.25 else 0.1)
            start = lo + float(rng.random()) * width * (1 - frac)
            defs.append(f"S{i} AS S{i}.{a} >= {_fmt(start)} AND S{i}.{a} <= "
                        f"{_fmt(start + frac * width)}")
        stars, lo_i = [], 1
        while lo_i <= m - 1:
            x = int(rng.integers(lo_i, m))
            stars.append(x)
            lo_i = x + 1
        pat = []
        for i in range(1, m + 1):
            pat.append(f"S{i}")
            if i in stars:
                pat.append(f"T{stars.index(i) + 1}*")
        tdefs = [f"T{k} AS TRUE" for k in range(1, len(stars) + 1)]
        out.append(f"SELECT * FROM {stream} MATCH_RECOGNIZE (MEASURES FIRST(S1.seq) AS f "
                   f"ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN ({' '.join(pat)}) "
                   f"WITHIN {window} DEFINE {', '.join(defs + tdefs)})")
    return out


def measure_config(store: Any, text: str, config: frozenset[int] | None, *,
                   cpm: bool = False, repeat: int = 1) -> tuple[float, dict[str, float], Any]:
    """Execute ``text`` with a fixed index configuration (None = full replay), best of
    ``repeat``; returns (seconds, counted costs, plan)."""
    from replaydb.planner.pattern.planner import compute_intervals, finish_intervals
    from replaydb.planner.query import QueryOptions, execute, plan_query

    best = math.inf
    counted: dict[str, float] = {}
    plan = None
    for _ in range(max(1, repeat)):
        plan = plan_query(store, text, QueryOptions(plan="auto",
                                                    extra={"cpm": cpm, "lookups": False}))
        st = plan.pattern_state  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        st.index_reads.clear()
        st.lookup_sizes.clear()
        timings: dict[str, float] = {}
        if config:
            iv = compute_intervals(st, config, st.geo.n_events, timings,
                                   snap=plan.ctx.snapshots[0])
            lookups = {c.lookup for c in st.conds if c.id in config}
        else:
            iv, lookups = None, set()
        iv = finish_intervals(st, iv, timings, use_cpm=cpm)
        plan.with_intervals(None if iv is None else [(int(a), int(b)) for a, b in iv])
        res = execute(plan)
        sec = time.perf_counter() - t0
        if sec < best:
            best = sec
            snap = plan.ctx.snapshots[0]
            leaf_bytes = snap.schema.leaf_capacity * snap.schema.event_width
            # the lookups read in full, and a pass over each deferred member (only tested
            # against the block's candidates), as the cost model counts them
            sort = sum(sort_term(float(st.lookup_sizes.get(lk, 0)), lk in st.deferred)
                       for lk in lookups)
            counted = {"pio_bytes": res.stats["replay"]["leaves"] * leaf_bytes,
                       "intervals": res.stats["replay"]["intervals"],
                       "sio_bytes": st.index_reads.get("pages_read", 0) * PAGE_BYTES,
                       "sort": sort, "rows": res.table.num_rows}
    return best, counted, plan


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 3:
        return float("nan")
    ra = np.argsort(np.argsort(a))
    rb = np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


MIN_REPLAY_SAMPLES = 3
"""Full replays needed before the fit separates a leaf read through index-based intervals
from a leaf of full replay (else one weight serves both)."""


def fit(samples: list[Sample], event_width: float
        ) -> tuple[Weights, float, float, float, float, float, float]:
    """NNLS fit: (weights, seconds per interval, intercept, seconds per match, R², median
    relative error, Spearman of the cost model's estimates with the measured times).

    Leaf bytes are one regressor for every plan plus, when there are at least
    ``MIN_REPLAY_SAMPLES`` full replays to tell them apart, a second one for the plans that
    replay index-based intervals: reading the same leaves through many short intervals costs
    more than one sweep (smaller reads and batches, rows between intervals dropped by a copy,
    one end of input for the operator per batch), which the weight of full replay alone would
    hide: index plans that cover most of the stream would look cheaper than full replay while
    being slower. The premium is non-negative (NNLS); ``w_pio_interval = w_pio + premium``."""
    premium = sum(not s.index_plan for s in samples) >= MIN_REPLAY_SAMPLES and \
        any(s.index_plan for s in samples)
    x = np.array([[s.pio_bytes, s.pio_bytes * s.index_plan, s.intervals, s.sio_bytes, s.sort,
                   1.0, s.rows] for s in samples])
    if not premium:
        x[:, 1] = 0.0
    y = np.array([s.seconds for s in samples])
    scale = np.maximum(x.max(axis=0), 1e-12)
    rw = 1.0 / np.maximum(y, 1e-3)  # relative errors: fast plans count as much as slow ones
    coef, _ = nnls((x / scale) * rw[:, None], y * rw)
    coef = coef / scale
    pred = x @ coef
    # R² of log times: the fit minimizes relative errors, so judge it on a log scale
    ly, lp = np.log(np.maximum(y, 1e-6)), np.log(np.maximum(pred, 1e-6))
    ss_res = float(((ly - lp) ** 2).sum())
    ss_tot = float(((ly - ly.mean()) ** 2).sum()) or 1.0
    rel = np.abs(pred - y) / np.maximum(y, 1e-9)
    w_pio, w_iv, w_int = float(coef[0]), float(coef[0] + coef[1]), float(coef[2])
    ev = w_int / (w_iv * event_width) if w_iv > 0 else Weights().interval_events
    w = Weights(w_pio, float(coef[3]), float(coef[4]), "calibrated", ev,
                w_iv if premium else None)
    est = np.array([w.pio_weight(s.index_plan) * s.est_pio_bytes + w_int * s.est_intervals
                    + w.w_sio * s.est_sio_bytes + w.w_sort * s.est_sort + coef[5]
                    + coef[6] * s.rows for s in samples])
    return w, w_int, float(coef[5]), float(coef[6]), 1.0 - ss_res / ss_tot, \
        float(np.median(rel)), _spearman(est, y)


def calibrate(store: Any, stream: str | None = None, *, queries: int = DEFAULT_QUERIES,
              seed: int = 0, repeat: int = 3, save: bool = True, plot: str | None = None,
              progress: Any = None) -> Calibration:
    """Measure plans on ``stream`` and fit the weights, and measure the member tests' costs
    (see the module docstring)."""
    from replaydb.planner.query import QueryOptions, plan_query

    t_start = time.perf_counter()
    names = store.streams()
    if stream is None:
        if len(names) != 1:
            raise UsageError("the store has several streams; name the one to calibrate on",
                             hint=f"streams: {', '.join(names) or '(none)'}")
        stream = names[0]
    snap = store.stream(stream)
    if snap.n_events < 1000:
        raise UsageError(f"stream {stream!r} has {snap.n_events} events; calibration needs "
                         "at least 1,000 (more gives better weights)")
    attrs: dict[str, tuple[float, float]] = {}
    for col, idx in snap.indexes().items():
        if idx.key_type == "string":
            continue
        st = idx.stats()
        if st["key_min"] is not None and st["key_max"] is not None \
                and st["key_max"] > st["key_min"]:
            attrs[col] = (float(st["key_min"]), float(st["key_max"]))
    if not attrs:
        raise UsageError(f"stream {stream!r} has no index on a numeric attribute",
                         hint="create one first: replaydb index STORE STREAM COLUMN")
    tr = snap.t_range
    gap = max(1, round((tr[1] - tr[0]) / max(1, snap.n_events - 1))) if tr else 1
    texts = random_queries(stream, attrs, 300 * gap, queries, seed)
    rng = np.random.default_rng(seed + 1)
    samples: list[Sample] = []
    for qi, text in enumerate(texts):
        plan = plan_query(store, text, QueryOptions(plan="auto",
                                                    extra={"cpm": False, "lookups": False}))
        st = plan.pattern_state  # type: ignore[attr-defined]
        if st.model is None or not st.conds:
            continue
        model = st.model
        configs: dict[str, frozenset[int] | None] = {}
        if qi % 4 == 0:
            configs["replay"] = None
        ids = [c.id for c in st.conds]
        configs["all"] = frozenset(ids)
        opt = st.selections["optimal"].estimate
        if opt is not None:
            configs["optimal"] = opt.config
        best1 = min(st.conds, key=lambda c: model.phi[c.id])
        configs["single"] = frozenset({best1.id})
        worst1 = max(st.conds, key=lambda c: model.phi[c.id])
        configs["least selective"] = frozenset({worst1.id})
        k = int(rng.integers(1, len(ids) + 1))
        configs["random"] = frozenset(int(i) for i in rng.choice(ids, k, replace=False))
        seen: set[Any] = set()
        for label, cfg in configs.items():
            if cfg in seen:
                continue
            seen.add(cfg)
            sec, counted, _ = measure_config(store, text, cfg, repeat=repeat)
            est = model.estimate(cfg or frozenset())
            samples.append(Sample(qi, label, sec, counted["rows"], counted["pio_bytes"],
                                  counted["intervals"],
                                  counted["sio_bytes"], counted["sort"],
                                  est.pio_leaves * model.leaf_bytes, est.intervals,
                                  est.sio_bytes, est.sort, bool(cfg)))
            if progress is not None:
                progress(qi, label, sec)
    if len(samples) < 4:
        raise UsageError("too few measured plans to fit weights",
                         hint="use a stream with more events or more --queries")
    w, w_int, intercept, per_match, r2, med, rho = fit(samples,
                                                       float(snap.schema.event_width))
    member = measure_member_costs(snap.n_events, repeat=repeat, seed=seed)
    cal = Calibration(replace(w, member_costs=member.costs), w_int, intercept, r2, med, rho,
                      samples, stream, time.perf_counter() - t_start, per_match, member)
    if save:
        cfg = dict(store.config.get("calibration") or {})
        cfg["pattern"] = cal.as_config()
        store.update_config(calibration=cfg)
    if plot:
        save_plot(cal, plot)
    return cal


def save_plot(cal: Calibration, path: str) -> None:
    """Estimated vs measured: the fit on counted costs, and the cost model's estimates."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = cal.samples
    w = cal.weights
    y = np.array([x.seconds for x in s])
    wi = cal.interval_seconds
    fitted = np.array([w.pio_weight(x.index_plan) * x.pio_bytes + wi * x.intervals
                       + w.w_sio * x.sio_bytes + w.w_sort * x.sort + cal.intercept
                       + cal.match_seconds * x.rows for x in s])
    est = np.array([w.pio_weight(x.index_plan) * x.est_pio_bytes + wi * x.est_intervals
                    + w.w_sio * x.est_sio_bytes + w.w_sort * x.est_sort + cal.intercept
                    + cal.match_seconds * x.rows for x in s])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    labels = sorted({x.label for x in s})
    for ax, pred, title in ((axes[0], fitted, f"fit on counted costs (R² = {cal.r2:.3f})"),
                            (axes[1], est, "cost model estimates (Spearman "
                                            f"{cal.spearman_estimated:.3f})")):
        for lab in labels:
            m = np.array([x.label == lab for x in s])
            ax.scatter(y[m], pred[m], s=14, label=lab, alpha=0.8)
        lo = max(1e-4, min(y.min(), pred.min()))
        hi = max(y.max(), pred.max())
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured seconds")
        ax.set_ylabel("estimated seconds")
        ax.set_title(title, fontsize=10)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"cost model calibration on {cal.stream}: w_PIO={w.w_pio:.3g} s/B, "
                 f"w_SIO={w.w_sio:.3g} s/B, w_sort={w.w_sort:.3g} s, "
                 f"{cal.interval_seconds * 1000:.2g} ms/interval", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
