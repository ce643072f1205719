"""The `datasets` command group, run through argparse as the main CLI will mount it."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from replaydb.datasets import cli
from replaydb.errors import UsageError


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="replaydb")
    parser.add_argument("--json", action="store_true")  # a global flag of the main CLI
    sub = parser.add_subparsers(dest="command")
    cli.add_arguments(sub)
    return parser.parse_args(argv)


def test_list_text_and_json(capsys):
    assert cli.run(parse(["datasets", "list"])) == 0
    out = capsys.readouterr().out
    for name in ("synthetic-normal", "traffic", "flights-3m", "opensky"):
        assert name in out
    assert cli.run(parse(["datasets", "list", "--json"])) == 0
    data = json.loads(capsys.readouterr().out)
    names = {d["name"] for d in data}
    assert {"cluster", "stock", "stock-greta", "imprecise", "gpu-bench", "window-agg"} <= names
    sn = next(d for d in data if d["name"] == "synthetic-normal")
    assert sn["time_column"] == "t" and sn["event_bytes"] == 128
    assert sn["options"][0]["flag"] == "--out-of-range"


def test_global_json_flag_is_not_reset_by_the_subcommand(capsys):
    args = parse(["--json", "datasets", "list", "opensky"])
    assert args.json is True
    cli.run(args)
    data = json.loads(capsys.readouterr().out)
    assert data[0]["time_unit"] == "ms" and data[0]["key_columns"] == ["icao24"]


def test_list_details(capsys):
    cli.run(parse(["datasets", "list", "flights-3m", "traffic"]))
    out = capsys.readouterr().out
    assert "--time-unit ms" in out and "PARTITION BY car_id" in out and "--dedup" in out


def test_make_with_generator_options(tmp_path, capsys):
    out = tmp_path / "tr.parquet"
    args = parse(["datasets", "make", "traffic", str(out), "--events", "5000", "--seed", "3",
                  "--cars", "100", "--accident-rate", "0"])
    assert args.func is cli.run
    assert cli.run(args) == 0
    text = capsys.readouterr().out
    assert "wrote 5,000 events of traffic" in text
    assert f"replaydb ingest STORE traffic {out} --time t --time-unit s" in text
    t = pq.read_table(out)
    assert t.num_rows == 5000 and set(t.column("type").to_pylist()) == {"Position"}
    meta = json.loads(t.schema.metadata[b"replaydb.dataset"])
    assert meta["options"]["cars"] == 100 and meta["seed"] == 3


def test_make_json_bool_and_tuple_options(tmp_path, capsys):
    out = tmp_path / "sn.parquet"
    cli.run(parse(["datasets", "make", "synthetic-normal", str(out), "-n", "1000", "--no-pad",
                   "--sigmas", "0,0.1", "--json", "--compression", "zstd"]))
    res = json.loads(capsys.readouterr().out)
    assert res["rows"] == 1000 and res["options"]["pad"] is False
    assert pq.read_schema(out).names == ["t", "A1", "A2"]


def test_make_rejects_an_option_of_another_dataset(tmp_path):
    args = parse(["datasets", "make", "stock", str(tmp_path / "s.parquet"), "--cars", "5"])
    with pytest.raises(UsageError, match="no option 'cars'") as info:
        cli.run(args)
    assert "p_up" in info.value.hint
    assert not (tmp_path / "s.parquet").exists()


def test_make_existing_file_needs_force(tmp_path):
    out = tmp_path / "i.parquet"
    cli.run(parse(["datasets", "make", "imprecise", str(out), "-n", "10"]))
    with pytest.raises(UsageError, match="exists"):
        cli.run(parse(["datasets", "make", "imprecise", str(out), "-n", "10"]))
    assert cli.run(parse(["datasets", "make", "imprecise", str(out), "-n", "20", "--force"])) == 0


def test_queries_command(capsys):
    cli.run(parse(["datasets", "queries", "--m", "3", "--count", "2", "--seed", "5",
                   "--attributes", "A5"]))
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and all("S3.A5" in q and "MATCH_RECOGNIZE" in q for q in lines)
    cli.run(parse(["datasets", "queries", "--m", "2", "--count", "1", "--json"]))
    data = json.loads(capsys.readouterr().out)
    assert data[0]["pattern"][0] == "S1" and len(data[0]["symbols"]) == 2


def test_standalone_module_reports_errors_with_hint():
    proc = subprocess.run([sys.executable, "-m", "replaydb.datasets", "make", "nope", "x.parquet"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "unknown dataset 'nope'" in proc.stderr and "hint: known datasets" in proc.stderr
