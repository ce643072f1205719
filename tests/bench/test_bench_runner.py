"""The benchmark runner (``replaydb.bench.run_all``) and the results report (``replaydb.bench.report``).

Fast: the runner is exercised on tiny benchmark modules written to a temporary folder (real
subprocesses, real exit codes), the report on synthetic result files.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from replaydb.bench import report, run_all

BENCH_DIR = Path(run_all.__file__).resolve().parent


# ------------------------------------------------------------------------------------- run_all
def test_list_finds_every_bench_module(capsys):
    assert run_all.main(["--list"]) == 0
    listed = {line.split()[1] for line in capsys.readouterr().out.splitlines() if line.strip()}
    on_disk = {p.name for p in BENCH_DIR.glob("bench_*.py")}
    assert on_disk, "no benchmark modules found"
    assert on_disk <= listed
    assert "bench_ingest.py" in listed
    extras = {f"{m}.py" for m in run_all.EXTRA_MODULES if (BENCH_DIR / f"{m}.py").exists()}
    assert listed == on_disk | extras


def test_every_benchmark_takes_the_mode_flags_it_is_given():
    """Each discovered module's source declares the flags the runner passes it (``--quick`` and
    ``--full``, directly or through ``common.arguments``) unless MODE_FLAGS maps it."""
    for b in run_all.discover():
        text = b.path.read_text(encoding="utf-8")
        for mode in ("quick", "full"):
            flags = run_all.MODE_FLAGS.get(b.name, {}).get(mode, [f"--{mode}"])
            for flag in (f for f in flags if f.startswith("--")):
                assert f'"{flag}"' in text or "arguments(" in text, (b.name, flag)
        cmd = b.command("quick", BENCH_DIR)
        assert cmd[:3] == [sys.executable, "-m", f"replaydb.bench.{b.path.stem}"]


def _write_bench(folder: Path, name: str, body: str) -> None:
    (folder / f"bench_{name}.py").write_text(textwrap.dedent(f"""\
        import sys
        from pathlib import Path
        here = Path(__file__).resolve().parent
        (here / "ran-{name}.txt").write_text(" ".join(sys.argv[1:]))
        {body}
        """))


def test_run_all_continues_past_a_failing_benchmark(tmp_path, capsys):
    _write_bench(tmp_path, "alpha", "print('alpha done')")
    _write_bench(tmp_path, "broken", "raise SystemExit(3)")
    _write_bench(tmp_path, "crash", "raise RuntimeError('boom')")
    _write_bench(tmp_path, "zulu", "print('zulu done')")
    rc = run_all.main(["--full", "--bench-dir", str(tmp_path), "--no-report"])
    assert rc == 1
    for name in ("alpha", "broken", "crash", "zulu"):
        assert (tmp_path / f"ran-{name}.txt").read_text() == "--full", name
    out = capsys.readouterr().out
    summary = out[out.index("benchmarks (full):"):]
    assert re.search(r"alpha\s+[\d.]+\s+ok", summary)
    assert re.search(r"broken\s+[\d.]+\s+failed \(exit 3\)", summary)
    assert re.search(r"crash\s+[\d.]+\s+failed \(exit 1\)", summary)
    assert re.search(r"zulu\s+[\d.]+\s+ok", summary)
    assert "2 of 4 succeeded; failed: broken, crash" in summary


def test_only_timeout_and_report(tmp_path, capsys):
    benches = tmp_path / "benches"
    benches.mkdir()
    _write_bench(benches, "fast", "")
    _write_bench(benches, "slow", "import time; time.sleep(30)")
    _write_bench(benches, "other", "")
    results = tmp_path / "results"
    (results / "fast").mkdir(parents=True)
    (results / "fast" / "results.md").write_text("# Fast one\n")
    rc = run_all.main(["--only", "slow", "fast", "--timeout", "2", "--bench-dir", str(benches),
                       "--results", str(results)])
    assert rc == 1
    assert not (benches / "ran-other.txt").exists()
    assert (benches / "ran-fast.txt").read_text() == "--quick"  # quick is the default mode
    assert re.search(r"slow\s+[\d.]+\s+timeout after 2 s", capsys.readouterr().out)
    assert "## fast: Fast one" in (results / "README.md").read_text()
    assert run_all.main(["--only", "fast", "--bench-dir", str(benches),
                         "--no-report"]) == 0


def test_unknown_benchmark_names_are_refused(tmp_path):
    _write_bench(tmp_path, "one", "")
    with pytest.raises(SystemExit, match="unknown benchmark.*nope.*known: one"):
        run_all.main(["--only", "nope", "--bench-dir", str(tmp_path), "--no-report"])


# -------------------------------------------------------------------------------------- report
def _standard(name: str, goals: list[dict], plots: list[str]) -> dict:
    return {"benchmark": name, "title": f"The {name} benchmark", "date": "2030-01-02 03:04 UTC",
            "machine": {"cpu": "Test CPU", "cores": 3, "memory_gib": 5.5, "python": "3.99",
                        "os": "TestOS 1"},
            "params": {"mode": "quick", "events": 1234567, "long": "x" * 200},
            "tables": [], "goals": goals, "plots": plots, "notes": []}


def test_report_builds_readme_from_results(tmp_path):
    root = tmp_path / "results"
    a = root / "alpha"
    a.mkdir(parents=True)
    (a / "results.json").write_text(json.dumps(_standard("alpha", [
        {"goal": "ratio vs baseline", "target": "<= 2x", "measured": 1.73, "met": True},
        {"goal": "peak memory", "target": "< 8 GiB", "measured": "9.12 GiB", "met": False},
    ], ["alpha.png"])))
    (a / "results.md").write_text("# The alpha benchmark\n")
    (a / "alpha.png").write_bytes(b"png")
    # an older format: goals as a dict, machine in meta, no date
    b = root / "beta"
    b.mkdir()
    (b / "results.json").write_text(json.dumps({
        "meta": {"mode": "full", "machine": "x86_64", "cpus": 7, "python": "3.98"},
        "goals": {"speed_at_defaults": {"events_per_s": 4321.5, "goal": 1000.0, "met": True},
                  "agree": False, "no_verdict": {"ratio": 3.0}},
        "rows": [{"x": 1}]}))
    (b / "results.md").write_text("intro\n# Beta heading\n")
    (b / "b1.png").write_bytes(b"png")
    # markdown only
    c = root / "gamma"
    c.mkdir()
    (c / "peer.md").write_text("## Gamma peer\n")
    (root / "empty").mkdir()  # no result files: no section
    (root / "delta").mkdir()
    (root / "delta" / "results.json").write_text("{not json")

    out = report.main(["--results", str(root)])
    assert out == root / "README.md"
    text = out.read_text()

    assert "| [alpha](#alpha) | quick | 2030-01-02 03:04 UTC | 1 of 2 met |" in text
    assert "| [beta](#beta) | full | not recorded | 1 of 2 met |" in text
    assert "| [gamma](#gamma) | not recorded | not recorded | - |" in text
    assert "empty" not in text
    assert "## alpha: The alpha benchmark" in text
    assert "- machine: Test CPU (3 cores, 5.5 GiB), Python 3.99, TestOS 1" in text
    assert "- parameters: events=1,234,567" in text and "x" * 100 not in text
    assert "| ratio vs baseline | <= 2x | 1.73 | yes |" in text
    assert "| peak memory | < 8 GiB | 9.12 GiB | no |" in text
    assert "![alpha: alpha.png](alpha/alpha.png)" in text
    assert "[results.md](alpha/results.md), [results.json](alpha/results.json)" in text

    assert "## beta: Beta heading" in text
    assert "- machine: x86_64, 7 cpus, Python 3.98" in text
    assert "| speed_at_defaults | 1,000 | events_per_s 4,322 | yes |" in text
    assert "| agree | true | False | no |" in text
    assert "no_verdict" not in text  # no "met": not a goal row
    assert "![beta: b1.png](beta/b1.png)" in text

    assert "## gamma: Gamma peer" in text and "[peer.md](gamma/peer.md)" in text
    assert "No JSON results" in text
    assert "results.json could not be read" in text


def test_report_of_the_committed_results_runs(tmp_path):
    """The real results folder (every existing format) turns into a README without errors."""
    text = report.build(report.RESULTS)
    for d in report.RESULTS.iterdir():
        if d.is_dir() and (any(d.glob("*.json")) or any(d.glob("*.md"))):
            assert f'<a id="{d.name}"></a>' in text


# --------------------------------------------------------------------- the README's table
def test_readme_benchmark_table_is_the_generated_one():
    """Every figure in the README's benchmark table comes from the current result files."""
    readme = (report.REPO / "README.md").read_text(encoding="utf-8")
    assert report.readme_table(report.RESULTS) in readme


def test_readme_table_shows_headlines_misses_and_missing_ones(tmp_path):
    from replaydb.bench.common import Results

    res = Results("alpha", "Alpha title")
    res.headline("scan vs peer", "1M events", "DuckDB 1.0", "3.1x (held-out median)", True)
    res.headline("latency", "10 queries", "-", "0.4 s", False)
    res.headline("no goal here", "1 file", "pyarrow", "2x")
    data = {"title": "Alpha title", "headlines": res.headlines}
    (tmp_path / "alpha").mkdir()
    (tmp_path / "alpha" / "results.json").write_text(json.dumps(data))
    (tmp_path / "beta").mkdir()
    (tmp_path / "beta" / "results.json").write_text(json.dumps({"title": "Beta", "date": "d1"}))
    (tmp_path / "gpu" / "no-gpu").mkdir(parents=True)
    (tmp_path / "gpu" / "no-gpu" / "results.json").write_text(json.dumps({"title": "G"}))
    table = report.readme_table(tmp_path)
    rows = [r for r in table.splitlines() if r.startswith("| [")]
    assert rows == [
        "| [alpha](bench/results/README.md#alpha) | scan vs peer | 1M events | DuckDB 1.0 | "
        "3.1x (held-out median) | met |",
        "| [alpha](bench/results/README.md#alpha) | latency | 10 queries | - | 0.4 s | "
        "**missed** |",
        "| [alpha](bench/results/README.md#alpha) | no goal here | 1 file | pyarrow | 2x | - |",
        "| [beta](bench/results/README.md#beta) | Beta | not recorded | not recorded | "
        "no headline recorded by the current run (d1) | - |",
        "| [gpu/no-gpu](bench/results/README.md#gpu/no-gpu) | G | not recorded | not recorded | "
        "no headline recorded by the current run (not recorded) | - |"]
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.TABLE_BEGIN}\nstale\n{report.TABLE_END}\nafter\n")
    assert report.update_readme(readme, tmp_path)
    assert readme.read_text() == f"intro\n{table}\nafter\n"
    assert not report.update_readme(readme, tmp_path)  # unchanged the second time
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="no generated benchmark table"):
        report.update_readme(readme, tmp_path)


def test_result_files_record_commit_versions_and_headlines(tmp_path):
    from replaydb.bench import common

    res = common.Results("x", "X", results_root=tmp_path)
    res.headline("a", "b", "c", "d", None)
    data = json.loads((res.write() / "results.json").read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", data["commit"]) and isinstance(data["dirty"], bool)
    assert {"numpy", "pyarrow", "duckdb"} <= set(data["versions"])
    assert data["headlines"] == [{"what": "a", "size": "b", "peer": "c", "figure": "d",
                                  "met": None}]
    assert f"Commit {data['commit']}" in (tmp_path / "x" / "results.md").read_text()
    # peak memory beside every run: this process holds at least the interpreter and numpy
    assert 0.01 < data["memory"]["process"] < 64
    assert f"process: {data['memory']['process']:.2f} GiB" in \
        (tmp_path / "x" / "results.md").read_text()


def test_speedup_statistics_do_not_flatter():
    from replaydb.bench.common import format_speedups, speedup_stats

    base = [100.0, 10.0, 10.0, 10.0, 10.0, 5.0]
    other = [1.0, 10.0, 5.0, 10.0, 20.0, 0.0]  # speedups 100, 1, 2, 1, 0.5; one left out
    s = speedup_stats(base, other)
    assert s["n"] == 5 and s["left_out"] == 1
    assert s["median"] == 1.0 and s["mean"] == pytest.approx(20.9)
    assert s["geomean"] == pytest.approx(100 ** 0.2)
    assert s["p10"] == pytest.approx(0.7)  # between 0.5 and 1 (sorted 0.5, 1, 1, 2, 100)
    assert s["total"] == pytest.approx(140 / 46)
    assert format_speedups(s).startswith("median 1.00x, geomean 2.51x, p10 0.70x")
    assert speedup_stats([1.0], [0.0]) == {"n": 0, "left_out": 1}
