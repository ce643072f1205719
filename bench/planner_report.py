"""The planner benchmark's report (:mod:`replaydb.bench.bench_planner`): summary tables,
the issue's goals and the plots, from the measurements of :mod:`replaydb.bench.planner_runs`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from replaydb.bench.common import Results, format_speedups, speedup_stats
from replaydb.bench.planner_runs import (
    PLAN_PHASES,
    SKEWED,
    STRATEGIES,
    _plan_id,
    same_plan,
)


# --------------------------------------------------------------------------- summaries
def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return float(np.mean(xs)) if xs else float("nan")


def _geo(xs: list[float]) -> float:
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def err_pio(r: dict[str, Any]) -> float | None:
    """Relative C_PIO error of a plan, ``|leaves - estimated| / leaves``; None without an
    estimate or for plans that read no leaf."""
    if r.get("est_leaves") is None or r["leaves"] <= 0:
        return None
    return abs(r["leaves"] - r["est_leaves"]) / r["leaves"]


def chosen_vs_best(q: dict[str, dict[str, Any]], by_plan: bool = False) -> float:
    """The chosen (auto) plan's CPU time over the fastest measured strategy's.

    ``by_plan``: strategies that replay the same intervals are one plan, timed by the fastest
    of their runs. Their runs differ only in planning work that is the same or nearly (auto
    and optimal run the same code), so what separates them is the noise of timing a 20-60 ms
    plan; this ratio measures the choice of intervals, the other also that noise."""
    best = min(v["cpu"] for v in q.values())
    if not by_plan:
        return q["auto"]["cpu"] / max(best, 1e-9)
    mine = q["auto"].get("plan", _plan_id(None))
    own = min(v["cpu"] for v in q.values() if v.get("plan", _plan_id(None)) == mine)
    return own / max(best, 1e-9)


def through_index(r: dict[str, Any]) -> bool:
    """Whether a strategy's plan read through at least one index (its C_PIO is an estimate;
    a plan without index replays the whole stream or the CPM's regions)."""
    return bool(r.get("indexes")) and r.get("est_leaves") is not None


def poisson_floor(r: dict[str, Any]) -> float | None:
    """The relative C_PIO error that chance alone gives a perfect estimate of the plan: its
    replayed runs (merged intervals, each about the same number of leaves) are a count of
    rare candidates, Poisson with the estimated mean ``lam``, and a Poisson count misses its
    mean by ``E|X - lam| = 2 e^-lam lam^(k+1) / k!`` (``k = floor(lam)``) on average: relative
    to ``lam``, about ``0.8 / sqrt(lam)``. None without an estimate or replayed leaves."""
    lam = r.get("est_runs")
    if lam is None or r["leaves"] <= 0 or lam <= 0:
        return None
    k = math.floor(lam)
    return 2.0 * math.exp(-lam + (k + 1) * math.log(lam) - math.lgamma(k + 1)) / lam


def summarize(res: Results, uni: dict[int, list[dict[str, Any]]],
              skw: dict[str, list[dict[str, Any]]], plans: dict[str, Any] | None) -> dict:
    labels = [s[0] for s in STRATEGIES]
    rows, speed = [], defaultdict(dict)
    for m, qs in uni.items():
        row: list[Any] = [m, _mean([q["replay"]["cpu"] for q in qs])]
        for lab in labels:
            sp = [q["replay"]["cpu"] / max(q[lab]["cpu"], 1e-9) for q in qs]
            speed[lab][m] = sp
            row.append(_mean(sp))
        rows.append(row)
    res.table("Uniform data (A5): mean speedup over full replay (CPU time), per m",
              ["m", "replay s", *labels], rows)
    # optimal vs greedy, all vs replay
    og = {m: [q["greedy"]["cpu"] / max(q["optimal"]["cpu"], 1e-9) for q in qs]
          for m, qs in uni.items()}
    res.table("Optimal vs Greedy and All vs replay (uniform)",
              ["m", "greedy/optimal time, mean", "max", "same plan (queries)",
               "All speedup, mean", "All slower than replay (queries)"],
              [[m, _mean(og[m]), max(og[m]),
                sum(1 for q in uni[m] if same_plan(q["greedy"], q["optimal"])),
                _mean(speed["all"][m]),
                sum(1 for s in speed["all"][m] if s < 1.0)] for m in uni])
    # C_PIO error, over the plans that read through an index
    err_rows = []
    errs_uniform: list[float] = []
    floors: list[float] = []
    left_out = 0
    for m, qs in uni.items():
        indexed = [q for q in qs if through_index(q["optimal"])]
        left_out += len(qs) - len(indexed)
        e = [ev for q in indexed if (ev := err_pio(q["optimal"])) is not None]
        e0 = [ev for q in qs if through_index(q["optimal (no CPM)"])
              and (ev := err_pio(q["optimal (no CPM)"])) is not None]
        fl = [f for q in indexed if (f := poisson_floor(q["optimal"])) is not None]
        errs_uniform += e
        floors += fl
        err_rows.append([m, len(e), len(qs) - len(indexed),
                         float(np.median(e)) if e else float("nan"),
                         float(np.percentile(e, 75)) if e else float("nan"),
                         float(np.median(e0)) if e0 else float("nan"),
                         float(np.median(fl)) if fl else float("nan")])
    res.table("Relative C_PIO error of Optimal's plan (leaves estimated vs replayed), uniform, "
              "over the plans that read through an index (a plan without index replays the "
              "whole stream or the CPM's regions, exact by construction, and is left out)",
              ["m", "plans through an index with leaves", "plans without index (left out)",
               "median", "75th pct", "median without CPM", "chance floor (median)"], err_rows)
    # selection time
    sel_rows = []
    for m, qs in uni.items():
        t = [q["optimal"]["select_s"] for q in qs]
        ex = [q["optimal"]["examined"] for q in qs]
        sel_rows.append([m, _mean(t) * 1000, max(t) * 1000, _mean(ex), 2.0 ** m])
    res.table("Optimal's index selection", ["m", "mean ms", "max ms", "combinations examined",
                                            "all combinations"], sel_rows)
    # chosen vs best measured
    ratios = [chosen_vs_best(q) for qs in uni.values() for q in qs]
    within = float(np.mean([r <= 1.2 for r in ratios])) if ratios else float("nan")
    same = [chosen_vs_best(q, by_plan=True) for qs in uni.values() for q in qs]
    within_plan = float(np.mean([r <= 1.2 for r in same])) if same else float("nan")
    # skewed
    skew_rows, skew_err = [], []
    for a, qs in skw.items():
        sp = {lab: _mean([q["replay"]["cpu"] / max(q[lab]["cpu"], 1e-9) for q in qs])
              for lab, _, _ in SKEWED}
        skew_rows.append([a, *[sp[lab] for lab, _, _ in SKEWED]])
        e_cpm = [ev for q in qs if (ev := err_pio(q["optimal*"])) is not None]
        e_no = [ev for q in qs if (ev := err_pio(q["optimal"])) is not None]
        skew_err.append([a, float(np.median(e_no)) if e_no else float("nan"),
                         float(np.median(e_cpm)) if e_cpm else float("nan"),
                         len(e_no), len(e_cpm)])
    if skw:
        res.table("Skewed data (m = 8, one symbol on the attribute): mean speedup over replay "
                  "(* = with CPM)", ["attribute", *[lab for lab, _, _ in SKEWED]], skew_rows)
        res.table("Skewed data: median relative C_PIO error of Optimal's plan",
                  ["attribute", "without CPM", "with CPM", "queries (no CPM)",
                   "queries (CPM)"], skew_err)
    # all plans of one query
    rho = None
    if plans:
        pr = plans["plans"]
        est = np.array([p["est_cost"] for p in pr])
        cpu = np.array([p["cpu"] for p in pr])
        rank_est = np.argsort(np.argsort(est))
        rank_cpu = np.argsort(np.argsort(cpu))
        rho = float(np.corrcoef(rank_est, rank_cpu)[0, 1]) if len(pr) > 2 else float("nan")
        chosen = [p for p in pr if p["chosen"]]
        chosen_rank = int(np.sum(cpu < chosen[0]["cpu"])) + 1 if chosen else None
        le = [abs(p["leaves"] - p["est_leaves"]) / p["leaves"] for p in pr if p["leaves"] > 0]
        res.table("All index configurations of one query (Fig. 3.12)",
                  ["plans", "Spearman(estimated cost, CPU time)", "measured rank of the chosen",
                   "best CPU s", "chosen CPU s", "median C_PIO error"],
                  [[len(pr), rho, chosen_rank, float(cpu.min()),
                    chosen[0]["cpu"] if chosen else None,
                    float(np.median(le)) if le else None]])
    time_rows = phase_rows(uni, speed["optimal"])
    if time_rows:
        res.table("Where Optimal's time goes: the fewest queries carrying half of the mean "
                  "speedup, mean ms per query (planning and execution CPU; phases wall clock)",
                  ["m", "queries", "share of the sum", "speedup, mean", "replay ms",
                   "total ms", "planning ms", *PLAN_PHASES, "execution ms", "read",
                   "operator"], time_rows)
    big = [m for m in uni if m >= 4]
    opt_speed = {m: _mean(speed["optimal"][m]) for m in big}
    return {"speed": speed, "og": og, "errs_uniform": errs_uniform, "floors": floors,
            "err_rows": err_rows, "err_left_out": left_out,
            "within": within, "within_plan": within_plan,
            "ratios": ratios, "opt_speed": opt_speed, "skew_err": skew_err, "rho": rho}


def phase_rows(uni: dict[int, list[dict[str, Any]]], speed: dict[int, list[float]]
               ) -> list[list[Any]]:
    """Per m: the fewest queries (fastest relative to replay first) whose speedups add up to
    half of the sum of Optimal's speedups - the queries a mean speedup rests on -, and their
    mean times: total, planning and its phases (:data:`PLAN_PHASES`), execution and its
    reads and operator. Runs without phase timings are left out."""
    rows = []
    for m, qs in uni.items():
        sp = speed.get(m)
        if not sp or any("phases" not in q["optimal"] for q in qs):
            continue
        order = sorted(range(len(qs)), key=lambda i: -sp[i])
        total, acc, top = sum(sp), 0.0, []
        for i in order:
            top.append(i)
            acc += sp[i]
            if acc >= total / 2:
                break
        opt = [qs[i]["optimal"] for i in top]
        ms = [1000 * _mean([o["phases"][k] for o in opt]) for k in (*PLAN_PHASES, "read",
                                                                     "operator")]
        plan_ms = 1000 * _mean([o["plan_cpu"] for o in opt])
        cpu_ms = 1000 * _mean([o["cpu"] for o in opt])
        rows.append([m, len(top), acc / total if total else float("nan"),
                     _mean([sp[i] for i in top]),
                     1000 * _mean([qs[i]["replay"]["cpu"] for i in top]), cpu_ms, plan_ms,
                     *ms[:len(PLAN_PHASES)], cpu_ms - plan_ms, *ms[len(PLAN_PHASES):]])
    return rows


def flink_net(gross: float, warm: float) -> float:
    """Flink's time for a query net of its per-job overhead (a trivial job's warm time).
    Decision: a job no slower than the trivial one has no measurable net time; its gross time
    is used instead (a subtraction would give zero or a negative time, and ratios of those mean
    nothing)."""
    return gross - warm if gross > warm else gross


def flink_summary(res: Results, fr: dict[str, Any] | None) -> None:
    if fr is None:
        return
    ours = fr["ours"]
    if "error" in fr:
        res.notes.append(f"Flink comparison not run: {fr['error']}")
        return
    got = fr["flink"]
    warm = (got.get("startup") or {}).get("trivial_warm_s") or 0.0
    rows = []
    for name, o in ours.items():
        q = got["queries"].get(name, {})
        fw = q.get("wall_s")
        err = q.get("error")
        rows.append([name, o["matches"], q.get("matches") if not err else f"error: {err[:40]}",
                     fw, flink_net(fw, warm) if fw is not None else None, o["replay_wall"],
                     o["auto_wall"],
                     flink_net(fw, warm) / o["replay_wall"] if fw else None,
                     flink_net(fw, warm) / o["auto_wall"] if fw else None])
    res.table(f"Flink SQL MATCH_RECOGNIZE (full replay) vs replaydb, {fr['events']:,} events, "
              "wall seconds (Flink net = minus its per-job overhead of a trivial job, "
              f"{warm:.1f} s; a job no slower than that keeps its gross time)",
              ["query", "matches", "Flink matches", "Flink s", "Flink net s", "replaydb replay s",
               "replaydb auto s", "Flink net / replay", "Flink net / auto"], rows)
    res.params["flink_startup"] = got.get("startup")
    res.params["flink_version"] = got.get("flink_version")


SPEEDUP_GOAL = "Optimal's mean speedup over full replay"
HEADLINE_M = 4
"""The m of the headline (the smallest m of the goals, where index plans matter least)."""


def speedups_by_set(res: Results, sets: dict[str, dict[int, list[dict[str, Any]]]]) -> None:
    """Table: for each query set (held-out first), m and strategy, the per-query speedups over
    full replay as median, geometric mean, 10th percentile, total time over total time and
    mean (:func:`replaydb.bench.common.speedup_stats`)."""
    rows = []
    for name, uni in sets.items():
        for m, qs in uni.items():
            base = [q["replay"]["cpu"] for q in qs]
            for lab in ("auto", "optimal"):
                st = speedup_stats(base, [q[lab]["cpu"] for q in qs])
                rows.append([name, m, lab, st["n"], st.get("median"), st.get("geomean"),
                             st.get("p10"), st.get("total"), st.get("mean")])
    res.table("Speedup over full replay (CPU), per query set: median, geometric mean, 10th "
              "percentile, total time / total time and mean",
              ["queries", "m", "strategy", "n", "median", "geomean", "p10", "total/total",
               "mean"], rows)


def headlines(res: Results, uni: dict[int, list[dict[str, Any]]], events: int) -> None:
    """The README row: Optimal's plans over full replay at :data:`HEADLINE_M` on the held-out
    queries, with the verdict of the speedup goal (written by :func:`goals` before)."""
    m = HEADLINE_M if HEADLINE_M in uni else next(iter(uni), None)
    qs = uni.get(m, []) if m is not None else []
    st = speedup_stats([q["replay"]["cpu"] for q in qs], [q["optimal"]["cpu"] for q in qs])
    verdict = next((g["met"] for g in res.goals if g["goal"].startswith(SPEEDUP_GOAL)), None)
    res.headline(f"index-assisted MATCH_RECOGNIZE (Optimal's plan) vs full replay, m = {m}, "
                 "held-out random queries", f"{events:,} events, {len(qs)} queries",
                 "replaydb full replay", format_speedups(st), verdict)


ISSUE_MS = (2, 4, 8, 16, 32)
"""The values of m the issue's goals are stated over."""


def goals(res: Results, s: dict, uni: dict, flink_res: dict | None) -> None:
    """The issue's goals. A goal over the issue's values of m is assessed (met or not) only
    when the run measured all of them, the skewed goal only with skewed queries, the Flink
    goal only when Flink ran (an error counts as not met); otherwise its row says
    "not assessed" (``met`` None) and keeps what the run measured."""
    ms = sorted(uni)
    whole = all(m in uni for m in ISSUE_MS)

    def judged(ok: bool) -> bool | None:
        return ok if whole else None

    opt = s["opt_speed"]
    res.goal(f"{SPEEDUP_GOAL}, uniform held-out queries, m >= 4", ">= 10x each m",
             ", ".join(f"m={m}: {v:.1f}x" for m, v in opt.items()),
             judged(bool(opt) and all(v >= 10 for v in opt.values())))
    large = [m for m in ms if m >= 16]
    all_sp = {m: _mean(s["speed"]["all"][m]) for m in ms}
    res.goal("All slower than replay for large m (the effect the paper shows)",
             "mean All speedup < 1 at m >= 16",
             ", ".join(f"m={m}: {all_sp[m]:.2f}x" for m in ms),
             judged(bool(large) and all(all_sp[m] < 1 for m in large)))
    og_all = [x for m in ms for x in s["og"][m]]
    res.goal("Optimal at least 10% faster than Greedy on average",
             "mean greedy/optimal time >= 1.10", f"{_mean(og_all):.3f} (geo mean "
             f"{_geo(og_all):.3f})", judged(_mean(og_all) >= 1.10))
    e = s["errs_uniform"]
    med = float(np.median(e)) if e else float("nan")
    fl = s.get("floors") or []
    floor = f"; chance alone: {float(np.median(fl)):.1%}" if fl else ""
    per_m = ", ".join(f"m={row[0]}: {row[3]:.1%} of {row[1]}" for row in s.get("err_rows", []))
    res.goal("median relative C_PIO error, uniform, plans through an index", "<= 5%",
             f"{med:.1%} ({len(e)} plans{floor}; {s.get('err_left_out', 0)} plans without "
             f"index left out; {per_m})", judged(med <= 0.05))
    cut = [(a, no, w) for a, no, w, *_ in s["skew_err"] if a in ("A1", "A2", "A3")]
    res.goal("CPM cuts the C_PIO error on skewed attributes (A1-A3)",
             "median error with CPM < without",
             "; ".join(f"{a}: {no:.1%} -> {w:.1%}" for a, no, w in cut) or "no skewed queries",
             all(w < no for _, no, w in cut) if cut else None)
    sel = [q["optimal"]["select_s"] for q in uni.get(32, [])]
    res.goal("index selection time at m = 32", "< 100 ms (mean)",
             f"mean {_mean(sel) * 1000:.1f} ms, max {max(sel) * 1000:.1f} ms" if sel else "-",
             _mean(sel) < 0.1 if sel else None)
    res.goal("chosen plan within 1.2x of the best measured plan",
             ">= 90% of queries", f"{s['within']:.0%} of {len(s['ratios'])} ("
             f"{s['within_plan']:.0%} when strategies that replay the same intervals count as "
             "one plan)", judged(s["within"] >= 0.9))
    if flink_res is None or "error" in flink_res:
        res.goal("replaydb auto >= 10x faster than Flink MATCH_RECOGNIZE (index-friendly "
                 "queries); replaydb replay faster than Flink", "both", "not measured"
                 + (f": {flink_res['error'][:80]}" if flink_res else ""),
                 False if flink_res else None)
    else:
        got = flink_res["flink"]
        warm = (got.get("startup") or {}).get("trivial_warm_s") or 0.0
        timeout = flink_res["timeout_s"]
        r_auto, r_rep = [], []
        for name, o in flink_res["ours"].items():
            q = got["queries"].get(name, {})
            fw = q.get("wall_s")
            # a query Flink did not finish counts with the time limit (a lower bound)
            f_net = flink_net(fw, warm) if fw is not None and not q.get("error") else timeout
            r_auto.append(f_net / max(o["auto_wall"], 1e-9))
            r_rep.append(f_net / max(o["replay_wall"], 1e-9))
        size = (f"on a separate store of {flink_res['events']:,} events, "
                f"{flink_res.get('per_m', '?')} queries per m")
        res.goal(f"replaydb auto >= 10x faster than Flink MATCH_RECOGNIZE (uniform queries, "
                 f"m >= 4; {size})", ">= 10x (geo mean)",
                 f"{_geo(r_auto):.1f}x (min {min(r_auto):.1f}x)",
                 _geo(r_auto) >= 10)
        res.goal(f"replaydb full replay faster than Flink's full replay ({size})",
                 "> 1x on every query",
                 f"geo mean {_geo(r_rep):.1f}x, min {min(r_rep):.2f}x", min(r_rep) > 1)


def plots(res: Results, uni: dict, s: dict, skw: dict, plans: dict | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = sorted(uni)
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for lab, _, _ in STRATEGIES:
        ax[0].plot(ms, [_mean(s["speed"][lab][m]) for m in ms], marker="o", label=lab)
    ax[0].axhline(1.0, color="k", lw=0.8, ls="--")
    ax[0].set_xscale("log", base=2)
    ax[0].set_yscale("log")
    ax[0].set_xlabel("m (basic symbols)")
    ax[0].set_ylabel("mean speedup over full replay")
    ax[0].set_title("uniform data (Fig. 3.9 b)")
    ax[0].legend(fontsize=7)
    data = [[ev for q in uni[m] if (ev := err_pio(q["optimal"])) is not None] or [0.0]
            for m in ms]
    ax[1].boxplot(data, whis=(5, 95), showfliers=False)
    ax[1].set_xticks(range(1, len(ms) + 1), [str(m) for m in ms])
    ax[1].set_xlabel("m")
    ax[1].set_ylabel("relative C_PIO error")
    ax[1].set_title("C_PIO estimation error, Optimal (Fig. 3.10)")
    sel = [_mean([q["optimal"]["select_s"] for q in uni[m]]) * 1000 for m in ms]
    exm = [_mean([q["optimal"]["examined"] for q in uni[m]]) for m in ms]
    ax[2].plot(ms, sel, marker="o", label="selection ms")
    ax[2].set_xscale("log", base=2)
    ax[2].set_yscale("log")
    ax[2].set_xlabel("m")
    ax[2].set_ylabel("mean selection time (ms)")
    ax2 = ax[2].twinx()
    ax2.plot(ms, exm, marker="s", color="C1", label="combinations")
    ax2.set_yscale("log")
    ax2.set_ylabel("combinations examined")
    ax[2].set_title("Optimal's selection (Fig. 3.11)")
    fig.tight_layout()
    fig.savefig(res.plot_path("uniform.png"), dpi=110)
    plt.close(fig)
    if skw:
        fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
        attrs = list(skw)
        x = np.arange(len(attrs))
        for k, (lab, _, _) in enumerate(SKEWED):
            ax[0].bar(x + k * 0.16, [_mean([q["replay"]["cpu"] / max(q[lab]["cpu"], 1e-9)
                                            for q in skw[a]]) for a in attrs], 0.16,
                      label=lab)
        ax[0].set_xticks(x + 0.32, attrs)
        ax[0].set_yscale("log")
        ax[0].set_ylabel("mean speedup over replay")
        ax[0].set_title("skewed data, m = 8 (Fig. 3.13 b)")
        ax[0].legend(fontsize=7)
        for k, (lab, name) in enumerate((("optimal", "without CPM"), ("optimal*", "with CPM"))):
            data = [[ev for q in skw[a] if (ev := err_pio(q[lab])) is not None] or [0.0]
                    for a in attrs]
            ax[1].boxplot(data, positions=x + k * 0.35, widths=0.3, whis=(5, 95),
                          showfliers=False, patch_artist=True,
                          boxprops={"facecolor": f"C{k}"})
            ax[1].plot([], [], color=f"C{k}", lw=6, label=name)
        ax[1].set_xticks(x + 0.17, attrs)
        ax[1].set_yscale("symlog", linthresh=0.01)
        ax[1].set_ylabel("relative C_PIO error")
        ax[1].set_title("C_PIO error with and without CPM (Fig. 3.14)")
        ax[1].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(res.plot_path("skewed.png"), dpi=110)
        plt.close(fig)
    if plans:
        pr = sorted(plans["plans"], key=lambda p: p["est_cost"])
        fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
        xs = np.arange(len(pr))
        le = [abs(p["leaves"] - p["est_leaves"]) / p["leaves"] if p["leaves"] > 0 else 0.0
              for p in pr]
        ax[0].bar(xs, le, color=["C3" if p["chosen"] else "C0" for p in pr])
        ax[0].set_xlabel("plans ranked by estimated cost")
        ax[0].set_ylabel("relative C_PIO error")
        ax[0].set_title("C_PIO error per plan (Fig. 3.12 a)")
        ax[1].plot(xs, [p["cpu"] for p in pr], ".", label="measured CPU s")
        est = np.array([p["est_cost"] for p in pr])
        cpu = np.array([p["cpu"] for p in pr])
        scale = float(np.median(cpu) / max(np.median(est), 1e-300))
        ax[1].plot(xs, est * scale, "-", label="estimated cost (scaled)")
        ch = [i for i, p in enumerate(pr) if p["chosen"]]
        if ch:
            ax[1].plot(ch, [pr[i]["cpu"] for i in ch], "r*", ms=12, label="chosen")
        ax[1].set_yscale("log")
        ax[1].set_xlabel("plans ranked by estimated cost")
        ax[1].set_title("time vs estimated cost (Fig. 3.12 b)")
        ax[1].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(res.plot_path("all_plans.png"), dpi=110)
        plt.close(fig)
