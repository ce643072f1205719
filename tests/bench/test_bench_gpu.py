"""The GPU benchmark script runs end to end at smoke sizes; without a GPU it says so."""

from __future__ import annotations

import json

from replaydb.bench import bench_gpu


def test_smoke_run_writes_tables_goals_and_plot(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = bench_gpu.main(["--smoke", "--only", "filter,aggregation", "--repeat", "1",
                          "--out", str(tmp_path / "gpu")])
    data = json.loads((out / "results.json").read_text())
    assert (out / "results.md").is_file() and (out / "gpu.png").stat().st_size > 0
    titles = [t["title"] for t in data["tables"]]
    assert any("Filter" in t for t in titles) and any("aggregation" in t for t in titles)
    assert len(data["goals"]) == 3
    filt = next(t for t in data["tables"] if "Filter" in t["title"])
    hits = {r[0]: r[-1] for r in filt["rows"]}
    assert hits[1.0] == filt["rows"][0][2]  # selectivity 1 keeps every event
    if bench_gpu.cuda_gpu() is None:
        assert "GPU NOT MEASURED" in data["params"]["gpu"]
        assert all(g["measured"] == "not measured (no GPU)" and not g["met"]
                   for g in data["goals"])
        timed = [t for t in data["tables"] if "speedup" in t["columns"]]
        assert len(timed) == 2
        assert all(r[col] == "not measured" for t in timed for r in t["rows"]
                   for col in (-3, -2))
        calib = next(t for t in data["tables"] if "calibration" in t["title"])
        assert {r[0] for r in calib["rows"]} == {"filter", "window"}
        assert all(r[2] == "not measured" and r[1] > 0 for r in calib["rows"])
        assert "not measured" in (out / "results.md").read_text()
