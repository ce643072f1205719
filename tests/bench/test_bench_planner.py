"""Helpers of the planner benchmark that decide what its tables report."""

from __future__ import annotations

from replaydb.bench.planner_runs import _plan_id, same_plan


def test_plans_are_the_same_when_their_intervals_are() -> None:
    a, b = ((0, 10), (20, 30)), ((0, 10), (20, 31))
    assert _plan_id(a) == _plan_id(((0, 10), (20, 30)))
    assert _plan_id(a) != _plan_id(b) and _plan_id(None) != _plan_id(())
    x = {"plan": _plan_id(a), "cpu": 0.10, "intervals": 2, "leaves": 4, "events": 900}
    y = {"plan": _plan_id(a), "cpu": 0.12, "intervals": 2, "leaves": 4, "events": 900}
    z = {"plan": _plan_id(b), "cpu": 0.10, "intervals": 2, "leaves": 4, "events": 900}
    assert same_plan(x, y)          # planning time differs, the replay does not
    assert not same_plan(x, z)
    # results written before plans were named: intervals, leaves and events decide
    old = [{k: v for k, v in d.items() if k != "plan"} for d in (x, y)]
    assert same_plan(*old)
    assert not same_plan(old[0], {**old[1], "leaves": 5})


def test_a_plan_over_the_whole_stream_runs_as_full_replay() -> None:
    import numpy as np
    import pyarrow as pa

    from replaydb.bench.planner_runs import _whole_stream
    from replaydb.planner.query import QueryOptions, plan_query
    from tests.planner_cases import stream_store

    n = 500
    s = {"table": pa.table({"t": np.arange(10, 10 + n), "x": np.arange(n) % 37 * 1.0,
                            "k": np.zeros(n, np.int64), "type": ["a"] * n}),
         "indexed": ["x"], "leaf": 16, "fanout": 4}
    q = ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A B) WITHIN 3 "
         "DEFINE A AS x = 36, B AS x = 0)")
    with stream_store(s) as store:
        full = plan_query(store, q, QueryOptions(plan="replay"))
        assert _whole_stream(full)
        part = plan_query(store, q, QueryOptions(plan="all", extra={"weights": {"interval_events": 0.0}}))
        assert part.intervals is not None and len(part.intervals) > 1
        assert not _whole_stream(part)
        part.with_intervals([(10, 10 + n)])
        assert _whole_stream(part)
        part.with_intervals([(11, 10 + n)])
        assert not _whole_stream(part)
        part.with_intervals([(10, 9 + n)])
        assert not _whole_stream(part)


def test_poisson_floor_is_the_mean_absolute_deviation_of_a_poisson_count() -> None:
    """The benchmark's chance floor of the C_PIO error: E|X - lam| / lam for X ~ Poisson(lam),
    checked against simulation; no estimate or no replayed leaves gives none."""
    import numpy as np

    from replaydb.bench.planner_report import poisson_floor

    rng = np.random.default_rng(0)
    for lam in (0.4, 3.0, 12.5, 90.0):
        x = rng.poisson(lam, 400_000)
        want = float(np.abs(x - lam).mean() / lam)
        assert abs(poisson_floor({"est_runs": lam, "leaves": 3}) - want) < 0.01 * want + 1e-3
    assert poisson_floor({"est_runs": None, "leaves": 3}) is None
    assert poisson_floor({"est_runs": 5.0, "leaves": 0}) is None


def test_chosen_vs_best_times_identical_plans_as_one() -> None:
    """The chosen plan's ratio to the fastest strategy; by plan, strategies replaying the same
    intervals share their fastest run (full replay and a replay fallback are one plan)."""
    from replaydb.bench.planner_report import chosen_vs_best

    a, b = _plan_id(((0, 5),)), _plan_id(((0, 9),))
    q = {"replay": {"cpu": 1.0},
         "auto": {"cpu": 0.30, "plan": a},
         "optimal": {"cpu": 0.20, "plan": a},     # the same intervals, timed faster
         "greedy": {"cpu": 0.25, "plan": b}}
    assert chosen_vs_best(q) == 0.30 / 0.20
    assert chosen_vs_best(q, by_plan=True) == 1.0
    q["optimal"]["plan"] = _plan_id(((1, 5),))
    assert chosen_vs_best(q, by_plan=True) == 0.30 / 0.20
    fallback = {"replay": {"cpu": 1.0}, "auto": {"cpu": 1.3, "plan": _plan_id(None)},
                "all": {"cpu": 2.0, "plan": a}}
    assert chosen_vs_best(fallback, by_plan=True) == 1.0


def test_covered_leaves_are_the_leaves_a_replay_reads() -> None:
    """The estimates benchmark counts a plan's leaves without replaying it: the count must be
    what the replay reads (each leaf once, shared leaves of neighbouring intervals too)."""
    import numpy as np
    import pyarrow as pa

    from replaydb.bench.bench_estimates import covered_leaves
    from replaydb.bench.planner_report import err_pio as rel_error
    from replaydb.planner.query import QueryOptions, execute, plan_query
    from tests.planner_cases import stream_store

    n = 2000
    rng = np.random.default_rng(3)
    s = {"table": pa.table({"t": np.arange(n) * 2, "x": rng.integers(0, 40, n) * 1.0,
                            "k": np.zeros(n, np.int64), "type": ["a"] * n}),
         "indexed": ["x"], "leaf": 16, "fanout": 4}
    with stream_store(s) as store:
        checked = 0
        for w, (lo, hi) in [(6, (0, 1)), (20, (0, 3)), (3, (5, 5)), (40, (0, 9))]:
            q = ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A B) WITHIN " + str(w) +
                 f" DEFINE A AS x >= {lo} AND x <= {hi}, B AS x = 39)")
            for strategy in ("all", "replay"):
                p = plan_query(store, q, QueryOptions(
                    plan=strategy, extra={"weights": {"interval_events": 0.0}}))
                snap = p.ctx.snapshots[0]
                got = covered_leaves(snap, p.intervals)
                assert got == execute(p).stats["replay"]["leaves"]
                checked += p.intervals is not None and len(p.intervals) > 1
        assert checked >= 3
        assert covered_leaves(snap, []) == 0
        assert covered_leaves(snap, None) == snap.tree.n_leaves
        # two intervals inside one leaf: that leaf once
        assert covered_leaves(snap, [(0, 1), (2, 3)]) == 1
    assert rel_error({"est_leaves": 90.0, "leaves": 100}) == 0.1
    assert rel_error({"est_leaves": 5.0, "leaves": 0}) is None
    assert rel_error({"est_leaves": None, "leaves": 3}) is None


def test_goals_are_not_assessed_on_a_partial_run(tmp_path) -> None:
    """A run without every m of the issue (or without skewed queries, or Flink) leaves the
    goals stated over them unassessed instead of failing them (the skewed queries' goal keeps
    its verdict: it does not depend on m); the report counts only the assessed ones. Uses the committed run's per-query measurements, whole and cut to m = 2, 4."""
    import json
    from pathlib import Path

    from replaydb.bench import planner_report as bp
    from replaydb.bench.common import Results
    from replaydb.bench.report import build

    q = json.loads((Path(bp.__file__).parent / "results" / "planner" / "queries.json").read_text())
    uniform = {int(m): v for m, v in q["uniform"].items()}
    skewed = q.get("skewed") or {}

    def goals(uni: dict) -> dict[str, bool | None]:
        res = Results("planner", "t", params={})
        bp.goals(res, bp.summarize(res, uni, skewed, None), uni, None)
        return {g["goal"]: g["met"] for g in res.goals}

    assert {2, 4, 8, 16, 32} <= set(uniform)
    whole = goals(uniform)
    for goal, met in whole.items():
        unmeasured = "Flink" in goal or ("skewed" in goal and not skewed)
        assert (met is None) == unmeasured, goal
    part = goals({m: v for m, v in uniform.items() if m in (2, 4)})
    for goal, met in part.items():  # the skewed queries do not depend on the uniform m's
        assert met is (whole[goal] if "skewed" in goal else None), goal
    d = tmp_path / "results" / "x"
    d.mkdir(parents=True)
    goals = [{"goal": "a", "target": "t", "measured": 1, "met": True},
             {"goal": "b", "target": "t", "measured": 2, "met": None},
             {"goal": "c", "target": "t", "measured": 3, "met": False}]
    (d / "results.json").write_text(json.dumps({"title": "x", "goals": goals}))
    text = build(tmp_path / "results")
    assert "1 of 2 met (1 not assessed)" in text and "| not assessed |" in text


def test_a_repeated_execution_is_timed_as_the_first() -> None:
    """The benchmark times every execution of a planned query as its first: planning bound
    the operator (and counts it), so before a repeat the plan gets a freshly bound one,
    outside the timer. The answer stays the same; a full replay plan, whose execution
    binds, is left as it is."""
    import numpy as np

    from replaydb.bench.planner_runs import _as_first_execution
    from replaydb.planner.query import QueryOptions, execute, plan_query
    from tests.planner_cases import xy_range_query, xy_store

    rng = np.random.default_rng(5)
    with xy_store(np.arange(3000, dtype=np.int64) * 2, rng, 64) as store:
        text = xy_range_query("A B* C", [3, 2, 10], 40)
        plan = plan_query(store, text, QueryOptions(plan="optimal"))
        first = execute(plan).table
        assert plan.operator is None  # the planning's operator is used up
        _as_first_execution(plan)
        assert plan.operator is not None  # bound before the timer starts
        assert execute(plan).table.equals(first)
        full = plan_query(store, text, QueryOptions(plan="replay"))
        bound = full.operator
        _as_first_execution(full)
        assert full.operator is bound  # not executed yet: the planning's operator is kept
        assert execute(full).table.equals(first)


def test_the_time_table_takes_the_queries_carrying_half_of_the_mean() -> None:
    """The fewest queries (fastest relative to replay first) whose speedups reach half of the
    sum; their mean total, planning, phases and execution; a run without phases is left
    out."""
    from replaydb.bench.planner_report import phase_rows
    from replaydb.bench.planner_runs import PLAN_PHASES

    def query(replay: float, cpu: float, plan: float, parse: float) -> dict:
        phases = dict.fromkeys((*PLAN_PHASES, "read", "operator"), 0.0)
        phases.update(parse=parse, read=0.001)
        return {"replay": {"cpu": replay},
                "optimal": {"cpu": cpu, "plan_cpu": plan, "phases": phases}}

    qs = [query(1.0, 0.01, 0.006, 0.002),   # 100x
          query(1.0, 0.02, 0.008, 0.004),   # 50x
          query(1.0, 0.5, 0.01, 0.001),     # 2x
          query(1.0, 1.0, 0.01, 0.001)]     # 1x
    speed = {4: [q["replay"]["cpu"] / q["optimal"]["cpu"] for q in qs]}
    (row,) = phase_rows({4: qs}, speed)
    assert row[0] == 4 and row[1] == 1  # 100 of 153 is already half
    assert abs(row[2] - 100 / 153) < 1e-9 and abs(row[3] - 100) < 1e-9
    assert abs(row[5] - 10) < 1e-9 and abs(row[6] - 6) < 1e-9  # total and planning ms
    names = ["m", "queries", "share", "speedup", "replay", "total", "planning",
             *PLAN_PHASES, "execution", "read", "operator"]
    got = dict(zip(names, row))
    assert abs(got["parse"] - 2) < 1e-9 and abs(got["execution"] - 4) < 1e-9
    assert abs(got["read"] - 1) < 1e-9
    speed[4] = [50.0, 50.0, 1.0, 1.0]
    (row,) = phase_rows({4: qs}, speed)
    assert row[1] == 2  # 50 of 102 is short of half: the second is needed
    del qs[0]["optimal"]["phases"]
    assert phase_rows({4: qs}, speed) == []


def test_cpio_error_and_headline_leave_out_nothing_silently() -> None:
    """The C_PIO error is taken over the plans that read through an index, and the table says
    how many plans without index were left out; the headline reports the held-out m = 4
    speedups as median first, mean last, with the speedup goal's verdict."""
    import json
    from pathlib import Path

    from replaydb.bench import planner_report as bp
    from replaydb.bench.common import Results

    q = json.loads((Path(bp.__file__).parent / "results" / "planner" / "queries.json").read_text())
    uni = {int(m): v for m, v in q["uniform"].items()}
    res = Results("planner", "t")
    s = bp.summarize(res, uni, {}, None)
    table = next(t for t in res.tables if t["title"].startswith("Relative C_PIO error"))
    for m, with_leaves, left_out, *_ in table["rows"]:
        indexed = [r for r in uni[m] if bp.through_index(r["optimal"])]
        assert left_out == len(uni[m]) - len(indexed)
        assert with_leaves <= len(indexed)
    assert s["err_left_out"] == sum(row[2] for row in table["rows"])
    bp.goals(res, s, uni, None)
    bp.headlines(res, uni, 10_000_000)
    [head] = res.headlines
    assert head["figure"].startswith("median ") and "mean " in head["figure"]
    assert head["met"] == next(g["met"] for g in res.goals if g["goal"].startswith(bp.SPEEDUP_GOAL))
    assert "m = 4" in head["what"] and f"{len(uni[4])} queries" in head["size"]
