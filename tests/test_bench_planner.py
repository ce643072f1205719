"""Helpers of the planner benchmark that decide what its tables report."""

from __future__ import annotations

from replaydb.bench.bench_planner import _plan_id, same_plan


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
