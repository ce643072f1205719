"""EXPLAIN as people read it: the plan's nodes as an indented tree, estimates beside actuals.

:func:`plan_tree` turns the dict of :func:`replaydb.explain` into a few lines::

    match_recognize query over stock (version 4, 4,000 events); strategy cpm
    Output                                   actual rows 4
       times as timestamp[s, UTC]: t, first_t, last_t
    └─ pattern operator on cpu              actual: events in 1,856, results 4, peak state 1,856
       └─ interval scan of stock: 6 intervals (coarse_map) over t 0 .. 3,904
            estimated: leaves 23, bytes 161,280
            actual:    leaves 29, events 1,856, bytes 13,273, read 0.012 s
    device: cpu (no CUDA GPU available ...)
    time: parse 0.4 ms, plan 12 ms, execute 30 ms

The estimate of a node is what the planner recorded for it (the chosen plan's leaves and bytes
for index-assisted patterns, the whole stream for a full scan, the merges per slide of the
window path); its actual, present after ``--analyze``, is what the executor recorded. Everything
else (the cost model's rivals, weights and per-condition selectivities) is in ``--verbose`` and
``--json``. Cost: O(nodes + recorded fields).
"""

from __future__ import annotations

from typing import Any

SOURCE_NAMES = {"full_scan": "full scan", "interval_scan": "interval scan",
                "tree_aggregates": "tree aggregates"}
ACTUAL_KEYS = {
    "source": ("intervals", "leaves", "events", "bytes", "read_seconds", "windows",
               "nodes_merged", "leaf_reads", "piece_events", "io_bytes", "seconds"),
    "operator": ("events_in", "results_out", "peak_state", "peak_live_runs",
                 "peak_state_bytes"),
}
LABELS = {"events_in": "events in", "results_out": "results", "peak_state": "peak state",
          "peak_live_runs": "peak live runs", "peak_state_bytes": "peak state bytes",
          "read_seconds": "read", "seconds": "time", "nodes_merged": "nodes merged",
          "leaf_reads": "leaf reads", "piece_events": "events in pieces",
          "io_bytes": "bytes"}
MAIN_PHASES = ("parse", "plan", "execute")
"""The phases the tree shows (``--verbose`` and ``--json`` list the planner's sub-phases)."""


def plan_tree(out: dict[str, Any]) -> str:
    """The EXPLAIN dict ``out`` as an indented tree (see the module docstring)."""
    plan = out.get("plan") or {}
    lines = [_headline(out)]
    rows = out.get("result_rows")
    lines.append("Output" + (f"{'':34}actual rows {rows:,}" if rows is not None else ""))
    shown = plan.get("output") or {}
    if shown.get("instants"):
        lines.append(f"   times as {shown['times']}: {', '.join(shown['instants'])}")
    op = plan.get("operator") or {}
    lines.append(f"└─ {op.get('family', '?')} operator on {op.get('device', 'cpu')}"
                 + _actual_inline(op.get("actual"), "operator"))
    lines += [f"     {d}" for d in _operator_detail(out, op.get("family"))]
    src = plan.get("source") or {}
    lines.append("   └─ " + _source_line(src, out))
    est = _source_estimate(src, out)
    if est:
        lines.append(f"        estimated: {est}")
    act = _fields(src.get("actual"), ACTUAL_KEYS["source"])
    if act:
        lines.append(f"        actual:    {act}")
    engine = plan.get("engine")
    if engine:
        lines.append(f"engine: {engine.get('name')} ({engine.get('mode')})")
    placement = plan.get("placement") or out.get("device") or {}
    if placement:
        lines.append(f"device: {placement.get('device')}"
                     + (f" ({placement['reason']})" if placement.get("reason") else ""))
    fetched = (out.get("analyze") or {}).get("object_store")
    if fetched:
        lines.append(f"object store: {_num(fetched['requests'])} requests, "
                     f"{_num(fetched['bytes'])} bytes fetched ({_num(fetched['lists'])} "
                     "listings; planning included)")
    timings = (out.get("analyze") or {}).get("timings") or out.get("timings") or {}
    phases = [k for k in MAIN_PHASES if isinstance(timings.get(k), int | float)]
    if phases:
        lines.append("time: " + ", ".join(f"{k} {_seconds(timings[k])}" for k in phases))
    return "\n".join(lines)


def _headline(out: dict[str, Any]) -> str:
    streams = out.get("streams") or []
    names = ", ".join(f"{s.get('name')} (version {s.get('version')}, "
                      f"{_num(s.get('events'))} events)" for s in streams)
    return (f"{out.get('language', '?')} query over {names or '?'}; "
            f"strategy {out.get('strategy')}")


def _operator_detail(out: dict[str, Any], family: str | None) -> list[str]:
    """The operator's matcher and query spec (clipped), as the planner recorded them."""
    section = out.get(family or "") if family else None
    if not isinstance(section, dict):
        return []
    lines = [f"matcher: {section['matcher']}"] if section.get("matcher") else []
    if section.get("why"):
        lines.append("plan: " + _clip(str(section["why"]), 100))
    if section.get("spec"):
        lines.append(_clip(str(section["spec"]), 100))
    return lines


def _source_line(src: dict[str, Any], out: dict[str, Any]) -> str:
    node = SOURCE_NAMES.get(src.get("node", ""), src.get("node", "source"))
    streams = ", ".join(s.get("name", "?") for s in out.get("streams") or [])
    text = f"{node} of {streams}"
    if src.get("node") == "interval_scan":
        n = src.get("intervals")
        text += f": {_num(n)} interval{'' if n == 1 else 's'}"
        if src.get("reason"):
            text += f" ({src['reason']})"
        span = src.get("span")
        if isinstance(span, list | tuple) and len(span) == 2:
            text += f" over t {_time(span[0], out)} .. {_time(span[1], out)}"
        if src.get("feed"):
            text += f", fed as {src['feed']}"
    elif src.get("variant"):
        text += f" ({src['variant']} path)"
    return text


def _time(value: Any, out: dict[str, Any]) -> str:
    """A stream time as a UTC date when the unit is declared and the value a plausible epoch
    time, else the number."""
    from replaydb.timeunits import format_instant

    if isinstance(value, int) and not isinstance(value, bool):
        text = format_instant(value, out.get("time_unit"))
        if text is not None:
            return text
    return _num(value)


def _source_estimate(src: dict[str, Any], out: dict[str, Any]) -> str:
    if src.get("node") == "full_scan":
        total = sum(s.get("events") or 0 for s in out.get("streams") or [])
        return f"events {total:,} (every event)"
    chosen = (out.get("pattern") or {}).get("chosen") or {}
    if src.get("node") == "interval_scan" and chosen:
        return f"leaves {_num(chosen.get('pio_leaves'))}, bytes {_num(chosen.get('pio_bytes'))}"
    est = out.get("estimates") or {}
    if src.get("node") == "interval_scan" and "events" in est:
        return ", ".join(f"{k.replace('_', ' ')} {_num(est[k])}"
                         for k in ("leaves", "events", "events_pushed") if k in est)
    if src.get("node") == "tree_aggregates" and est:
        keys = [k for k in est if k.startswith("merges_per_slide")]
        return ", ".join(f"{k.replace('_', ' ')} {_num(est[k])}" for k in keys)
    return ""


def _actual_inline(actual: Any, kind: str) -> str:
    text = _fields(actual, ACTUAL_KEYS[kind])
    return f"   actual: {text}" if text else ""


def _fields(values: Any, keys: tuple[str, ...]) -> str:
    if not isinstance(values, dict):
        return ""
    parts = []
    for k in keys:
        v = values.get(k)
        if v is None:
            continue
        label = LABELS.get(k, k)
        parts.append(f"{label} {_seconds(v)}" if k in ("read_seconds", "seconds")
                     else f"{label} {_num(v)}")
    return ", ".join(parts)


def _num(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return f"{v:,.0f}" if v.is_integer() or abs(v) >= 100 else f"{v:.3g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _seconds(v: float) -> str:
    return f"{v * 1000:.1f} ms" if v < 1 else f"{v:.2f} s"


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


class Explanation(dict):  # type: ignore[type-arg]
    """The dict :func:`replaydb.explain` returns (every key as before), which also renders in
    a notebook: the plan's tree (:func:`plan_tree`) and, when the plan was drawn
    (``plot=PATH``), the picture inline."""

    def text(self) -> str:
        """The plan's tree as ``replaydb explain`` prints it."""
        return plan_tree(self)

    def _repr_html_(self) -> str:
        import base64
        import html
        from pathlib import Path

        out = f"<pre>{html.escape(self.text())}</pre>"
        plot = self.get("plot")
        if plot and Path(plot).is_file():
            data = base64.b64encode(Path(plot).read_bytes()).decode("ascii")
            out += f'<img src="data:image/png;base64,{data}" alt="plan timeline"/>'
        return out
