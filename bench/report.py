"""Build ``bench/results/README.md`` from the benchmarks' result files.

Usage: ``python -m replaydb.bench.report [--results DIR] [--out FILE]``.

Every sub-folder of the results folder is one benchmark. Its section comes from
``results.json`` when there is one, else from the folder's only other JSON file, else from its
markdown files alone:

* the format of :class:`replaydb.bench.common.Results` (``benchmark``, ``title``, ``date``,
  ``machine``, ``params``, ``goals`` as a list of ``{goal, target, measured, met}``, ``plots``)
  is read as is;
* older formats are read as far as they go: the machine from ``machine`` (a dict or a sentence)
  or ``meta``; the date from ``date`` or ``meta.time``; the mode from ``params.mode``,
  ``params.scale``, ``meta.mode``, or a top-level ``mode`` of ``quick``/``full`` (a peer's result
  file uses ``mode`` for something else); goals from a ``goals`` list, or a ``goals`` dict whose
  entries carry ``met`` (target from their ``goal``/``target`` field, measured = their other
  scalar fields) or are booleans.

Nothing is computed or invented: a field the JSON does not hold is shown as "not recorded", and
every section links the benchmark's own markdown and plots (PNG files listed in the JSON, else
those in the folder). Complexity: O(size of the result files).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from replaydb.bench.common import MET_WORDS, REPO, RESULTS, _fmt

NOT_RECORDED = "not recorded"
_GOAL_META = {"goal", "target", "met"}


def _title_from_markdown(path: Path) -> str | None:
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("#"):
                return line.lstrip("#").strip() or None
    except OSError:
        return None
    return None


def _machine(data: dict[str, Any]) -> str:
    m = data.get("machine")
    if isinstance(m, str) and m:
        return m
    if isinstance(m, dict) and m:
        if {"cpu", "cores"} <= set(m):
            parts = [f"{m['cpu']} ({m['cores']} cores"
                     + (f", {m['memory_gib']} GiB" if "memory_gib" in m else "") + ")"]
            parts += [f"Python {m['python']}"] if "python" in m else []
            parts += [m["os"]] if "os" in m else []
            return ", ".join(parts)
        return ", ".join(f"{k} {_fmt(v)}" for k, v in m.items())
    meta = data.get("meta")
    if isinstance(meta, dict):
        parts = [str(meta["machine"])] if "machine" in meta else []
        parts += [f"{meta['cpus']} cpus"] if "cpus" in meta else []
        parts += [f"Python {meta['python']}"] if "python" in meta else []
        if parts:
            return ", ".join(parts)
    return NOT_RECORDED


def _date(data: dict[str, Any]) -> str:
    meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
    for v in (data.get("date"), meta.get("date"), meta.get("time")):
        if v:
            return str(v)
    return NOT_RECORDED


def _mode(data: dict[str, Any]) -> str:
    params = data.get("params") if isinstance(data.get("params"), dict) else {}
    meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
    for v in (params.get("mode"), params.get("scale"), meta.get("mode")):
        if isinstance(v, str) and v:
            return v
    if data.get("mode") in ("quick", "full"):  # other top-level "mode"s mean something else
        return data["mode"]
    return NOT_RECORDED


def _commit(data: dict[str, Any]) -> str:
    sha = data.get("commit")
    if not isinstance(sha, str) or not sha:
        return NOT_RECORDED
    return sha + (" (with local changes)" if data.get("dirty") else "")


def _scalar(v: Any) -> bool:
    return isinstance(v, str | int | float | bool) or v is None


def goals_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The goal rows ``{goal, target, measured, met}`` the JSON holds (see the module doc)."""
    goals = data.get("goals")
    rows: list[dict[str, Any]] = []
    if isinstance(goals, list):
        for g in goals:
            if isinstance(g, dict) and "goal" in g:
                rows.append({"goal": g["goal"], "target": g.get("target", NOT_RECORDED),
                             "measured": g.get("measured", NOT_RECORDED),
                             "met": g["met"] if "met" in g else NOT_RECORDED})
    elif isinstance(goals, dict):
        for name, g in goals.items():
            if isinstance(g, bool):
                rows.append({"goal": name, "target": "true", "measured": g, "met": g})
            elif isinstance(g, dict) and "met" in g:
                target = g.get("target", g.get("goal", NOT_RECORDED))
                measured = [f"{k} {_fmt(v)}" for k, v in g.items()
                            if k not in _GOAL_META and _scalar(v)]
                rows.append({"goal": name, "target": target,
                             "measured": ", ".join(measured) or NOT_RECORDED, "met": g["met"]})
    return rows


def _met(v: Any) -> str:
    return MET_WORDS[v] if v is None or isinstance(v, bool) else NOT_RECORDED


def _cell(v: Any) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        v = int(v)
    return _fmt(v).replace("|", "\\|").replace("\n", " ")


def _load(d: Path) -> tuple[Path | None, dict[str, Any] | None, str | None]:
    """(json file, its data, error) for folder ``d``."""
    path = d / "results.json"
    if not path.is_file():
        others = sorted(d.glob("*.json"))
        full = [p for p in others if "full" in p.stem]  # the papers' sizes over a quick run
        path = others[0] if len(others) == 1 else full[0] if len(full) == 1 else None
    if path is None:
        return None, None, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return path, None, f"{path.name} could not be read: {exc}"
    if not isinstance(data, dict):
        return path, None, f"{path.name} holds no object"
    return path, data, None


def section(d: Path, name: str | None = None) -> tuple[str, dict[str, Any]]:
    """Markdown section for the benchmark folder ``d`` (called ``name``, by default its folder
    name) and its summary row."""
    name = name or d.name
    json_path, data, error = _load(d)
    markdowns = sorted(d.glob("*.md"))
    data = data or {}
    title = data.get("title") or next(
        (t for t in (_title_from_markdown(m) for m in markdowns) if t), None) or name
    goals = goals_of(data)
    plots = [p for p in data.get("plots", []) if isinstance(p, str)] \
        if isinstance(data.get("plots"), list) else []
    if not plots:
        plots = sorted(p.name for p in d.glob("*.png"))
    lines = [f'<a id="{name}"></a>', "", f"## {name}: {title}", ""]
    if error:
        lines += [f"**{error}**", ""]
    lines += [f"- machine: {_machine(data)}", f"- date: {_date(data)}", f"- mode: {_mode(data)}",
              f"- commit: {_commit(data)}"]
    if isinstance(data.get("versions"), dict) and data["versions"]:
        lines.append("- versions: " + ", ".join(f"{k} {_cell(v)}"
                                                for k, v in data["versions"].items()))
    params = data.get("params")
    if isinstance(params, dict):
        shown = [f"{k}={_cell(v)}" for k, v in params.items()
                 if _scalar(v) and k != "mode" and len(str(v)) <= 80]
        if shown:
            lines.append("- parameters: " + ", ".join(shown))
    files = [m.name for m in markdowns] + ([json_path.name] if json_path else [])
    if files:
        lines.append("- details: " + ", ".join(f"[{f}]({name}/{f})" for f in files))
    lines.append("")
    if goals:
        lines += ["| goal | target | measured | met |", "|---|---|---|---|"]
        for g in goals:
            lines.append(f"| {_cell(g['goal'])} | {_cell(g['target'])} | {_cell(g['measured'])} "
                         f"| {_met(g['met'])} |")
        lines.append("")
    elif json_path is not None and not error:
        lines += [f"No goal table in {json_path.name}; see the details above.", ""]
    else:
        lines += ["No JSON results; see the details above.", ""]
    for p in plots:
        lines += [f"![{name}: {p}]({name}/{p})", ""]
    met = sum(1 for g in goals if g["met"] is True)
    assessed = [g for g in goals if g["met"] is not None]
    summary = f"{met} of {len(assessed)} met" if assessed else f"none of {len(goals)} assessed"
    if assessed and len(assessed) < len(goals):
        summary += f" ({len(goals) - len(assessed)} not assessed)"
    row = {"name": name, "mode": _mode(data), "date": _date(data),
           "goals": summary if goals else "-"}
    return "\n".join(lines), row


def _has_results(d: Path) -> bool:
    return any(d.glob("*.json")) or any(d.glob("*.md"))


def _folders(results: Path) -> list[Path]:
    """The benchmark folders under ``results`` (those holding JSON or markdown), by name; a
    folder without result files of its own stands for its sub-folders that have them (the GPU
    benchmark's CPU-only run writes ``gpu/no-gpu``)."""
    found = []
    for d in sorted(results.iterdir()):
        if not d.is_dir() or d.name.startswith("."):
            continue
        if _has_results(d):
            found.append(d)
        else:
            found += [s for s in sorted(d.iterdir()) if s.is_dir() and _has_results(s)]
    return found


def _name(d: Path, results: Path) -> str:
    return d.relative_to(results).as_posix()


def build(results: Path = RESULTS) -> str:
    """The README text for every benchmark folder under ``results``."""
    sections, rows = [], []
    for d in _folders(results):
        text, row = section(d, _name(d, results))
        sections.append(text)
        rows.append(row)
    head = ["# Benchmark results", "",
            "Generated by `python -m replaydb.bench.report` (run by `make bench`) from each "
            "benchmark's result files; do not edit by hand. Numbers are those the benchmarks "
            "recorded, on the machine and date given in each section.", ""]
    if rows:
        head += ["| benchmark | mode | date | goals |", "|---|---|---|---|"]
        head += [f"| [{r['name']}](#{r['name']}) | {r['mode']} | {r['date']} | {r['goals']} |"
                 for r in rows]
        head.append("")
    else:
        head += ["No results yet.", ""]
    return "\n".join(head + sections).rstrip() + "\n"


TABLE_BEGIN = ("<!-- benchmark table: generated by `python -m replaydb.bench.report` from "
               "bench/results; do not edit by hand -->")
TABLE_END = "<!-- end of the generated benchmark table -->"
MET_CELL = {True: "met", False: "**missed**", None: "-"}
"""How a headline's ``met`` reads in the README's table (misses stand out)."""


def headlines_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The headline rows (``what``, ``size``, ``peer``, ``figure``, ``met``) a result file holds
    (see :meth:`replaydb.bench.common.Results.headline`); malformed entries are left out."""
    rows = data.get("headlines")
    keys = ("what", "size", "peer", "figure")
    if not isinstance(rows, list):
        return []
    return [r for r in rows if isinstance(r, dict) and all(isinstance(r.get(k), str) for k in keys)
            and r.get("met") in (True, False, None)]


def readme_table(results: Path = RESULTS, details: str = "bench/results/README.md") -> str:
    """The README's benchmark table: one row per headline of every benchmark folder under
    ``results`` (``details`` is the link target of the per-benchmark sections); a folder whose
    current run recorded no headline gets one row saying so, with its date."""
    lines = [TABLE_BEGIN, "", "| benchmark | measured | size | against | result | goal |",
             "|---|---|---|---|---|---|"]
    for d in _folders(results):
        _, data, _ = _load(d)
        data = data or {}
        name = _name(d, results)
        link = f"[{name}]({details}#{name})"
        heads = headlines_of(data)
        if not heads:
            lines.append(f"| {link} | {_cell(data.get('title') or name)} | {NOT_RECORDED} | "
                         f"{NOT_RECORDED} | no headline recorded by the current run "
                         f"({_date(data)}) | - |")
        for h in heads:
            lines.append(f"| {link} | {_cell(h['what'])} | {_cell(h['size'])} | "
                         f"{_cell(h['peer'])} | {_cell(h['figure'])} | {MET_CELL[h['met']]} |")
    lines += ["", TABLE_END]
    return "\n".join(lines)


def update_readme(readme: Path, results: Path = RESULTS) -> bool:
    """Replace the generated table between :data:`TABLE_BEGIN` and :data:`TABLE_END` in
    ``readme``; returns whether the file changed. Raises ``ValueError`` when the markers are
    missing or out of order."""
    text = readme.read_text(encoding="utf-8")
    begin, end = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if begin < 0 or end < begin:
        raise ValueError(f"{readme}: no generated benchmark table (the markers {TABLE_BEGIN!r} "
                         f"and {TABLE_END!r} in that order)")
    new = text[:begin] + readme_table(results) + text[end + len(TABLE_END):]
    if new != text:
        readme.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description="Build the benchmark results README.")
    ap.add_argument("--results", type=Path, default=RESULTS, help="results folder")
    ap.add_argument("--out", type=Path, default=None, help="README path (default: RESULTS/README.md)")
    ap.add_argument("--readme", type=Path, default=None,
                    help="project README whose benchmark table to regenerate (default: the "
                         "repository's README.md when --results is the default folder)")
    args = ap.parse_args(argv)
    out = args.out or args.results / "README.md"
    out.write_text(build(args.results), encoding="utf-8")
    print(f"wrote {out}")
    readme = args.readme or (REPO / "README.md" if args.results == RESULTS else None)
    if readme is not None and update_readme(readme, args.results):
        print(f"updated the benchmark table of {readme}")
    return out


if __name__ == "__main__":
    main()
