"""``replaydb shell``: statements over several lines, dot commands, errors that do not end the
session, and every output mode giving the rows ``replaydb.query`` gives."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import replaydb
from replaydb.cli.shell import Settings, Shell, _join_history, feed_all
from replaydb.store.schema import Attribute, StreamSchema

N = 5000
QUERY = ("SELECT * FROM ev MATCH_RECOGNIZE (ORDER BY t MEASURES A.x AS ax, B.x AS bx "
         "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B) "
         "DEFINE A AS A.x > 0.97, B AS B.x < 0.03)")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("shell") / "store"
    store = replaydb.open(root, create=True)
    store.create_stream("ev", StreamSchema((Attribute("x", "float64"), Attribute("k", "int64")),
                                           time_unit="ms", leaf_capacity=256))
    rng = np.random.default_rng(11)
    store.append("ev", pa.table({"t": np.arange(N, dtype=np.int64) * 1000,
                                 "x": rng.random(N), "k": rng.integers(0, 9, N)}))
    return root


@pytest.fixture
def session(store_path):
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(replaydb.open(store_path, read_only=True), out, err, Settings())
    return shell, out, err


def expected(store_path) -> pa.Table:
    return replaydb.query(replaydb.open(store_path, read_only=True), QUERY).table


def test_a_statement_over_several_lines_runs_at_its_semicolon(session, store_path):
    shell, out, err = session
    shell.settings.mode = "csv"
    first, rest = QUERY.split("PATTERN")
    assert shell.feed(first + "\n") is None and shell.prompt.strip() == "...>"
    statement = shell.feed("PATTERN" + rest + ";\n")
    assert statement is not None and "\n" in statement and shell.prompt.startswith("replaydb")
    got = pacsv.read_csv(io.BytesIO(out.getvalue().encode()))
    want = expected(store_path)
    assert want.num_rows > 3 and err.getvalue() == ""
    assert got.column("ax").to_pylist() == want.column("ax").to_pylist()
    assert got.column("bx").to_pylist() == want.column("bx").to_pylist()


def test_json_and_table_modes_and_the_row_limit(session, store_path):
    shell, out, _ = session
    want = expected(store_path)
    feed_all(shell, [".mode json\n", QUERY + ";\n"])
    rows = json.loads(out.getvalue())
    assert [r["ax"] for r in rows] == want.column("ax").to_pylist()
    out.truncate(0), out.seek(0)
    feed_all(shell, [".mode table\n", ".maxrows 2\n", QUERY + ";\n"])
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 + 2 + 1, lines  # header, rule, two rows, the "more rows" line
    assert f"({want.num_rows:,} in all; .maxrows 0" in lines[-1]
    out.truncate(0), out.seek(0)
    feed_all(shell, [".maxrows 0\n", QUERY + ";\n"])
    assert out.getvalue().splitlines()[-1] == f"({want.num_rows:,} rows)"


def test_explain_statements_and_the_explain_mode(session):
    shell, out, err = session
    shell.feed("EXPLAIN " + QUERY + ";")
    plain = out.getvalue()
    assert "query over" in plain and "actual" not in plain and err.getvalue() == ""
    out.truncate(0), out.seek(0)
    shell.feed("explain analyze " + QUERY + ";")
    assert "actual rows" in out.getvalue() and "estimated:" in out.getvalue()
    out.truncate(0), out.seek(0)
    feed_all(shell, [".explain on\n", QUERY + ";\n"])
    assert "query over" in out.getvalue() and "actual rows" not in out.getvalue()
    out.truncate(0), out.seek(0)
    feed_all(shell, [".explain off\n", ".timer on\n", ".mode csv\n", QUERY + ";\n"])
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("time: ") and "execute" in last


def test_errors_are_reported_and_the_session_goes_on(session, store_path):
    shell, out, err = session
    feed_all(shell, ["SELECT nonsense;\n", ".mode xml\n", ".bogus\n", ".maxrows many\n",
                     ".read /no/such/file\n", ".mode csv\n", QUERY + ";\n"])
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("error: ") and "language" in lines[0]
    assert any(ln.startswith("hint: ") for ln in lines)
    assert "error: .mode takes one of table, csv, json, not 'xml'" in lines
    assert "error: unknown command .bogus (.help lists them)" in lines
    assert any(".maxrows takes a number" in ln for ln in lines)
    assert any(".read: no file" in ln for ln in lines)
    assert len(pacsv.read_csv(io.BytesIO(out.getvalue().encode()))) == expected(store_path).num_rows


def test_settings_plan_and_stream_reach_the_query(session, store_path, tmp_path):
    shell, out, err = session
    script = tmp_path / "q.sql"
    script.write_text(".mode csv\n.plan replay\n" + QUERY + ";\n", encoding="utf-8")
    feed_all(shell, [f".read {script}\n", ".show\n"])
    assert err.getvalue() == "", err.getvalue()
    *rows, shown = out.getvalue().splitlines()
    assert len(rows) - 1 == expected(store_path).num_rows
    assert shown == "mode csv, maxrows 50, timer off, explain off, plan replay, stream (from the query)"
    # a query that names no stream reads the one .stream names
    sase = ("PATTERN SEQ(ANY a, ANY b) WHERE skip_till_next_match(a, b) "
            "{ a.x > 0.97 AND b.x < 0.03 } WITHIN 2 SECONDS RETURN a.t AS a_t")
    feed_all(shell, [".stream nosuch\n", sase + ";\n"])
    assert "no stream 'nosuch'" in err.getvalue()
    out.truncate(0), out.seek(0)
    feed_all(shell, [".stream ev\n", sase + ";\n", ".streams\n"])
    lines = out.getvalue().splitlines()
    assert lines[0].endswith('"a_t"') and len(lines) > 2
    assert any(ln.startswith(f"ev: {N:,} events, ") and "UTC" not in ln for ln in lines)


def test_help_lists_every_command(session):
    from replaydb.cli.shell import COMMANDS

    shell, out, _ = session
    shell.feed(".help")
    for name in COMMANDS:
        assert f".{name}" in out.getvalue()


def test_the_shell_process_reads_standard_input(store_path):
    """A real ``replaydb shell`` process fed by a pipe: statements until ``.quit``, a last
    statement without ``;`` at the end of the input still runs."""
    script = f".mode csv\n{QUERY};\nSELECT bad;\n.quit\n{QUERY};\n"
    proc = subprocess.run([sys.executable, "-m", "replaydb", "shell", str(store_path)],
                          input=script, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    want = expected(store_path).num_rows
    assert len(proc.stdout.splitlines()) == 1 + want  # one answer: .quit stops the second
    assert proc.stderr.count("error: ") == 1
    proc = subprocess.run([sys.executable, "-m", "replaydb", "shell", str(store_path),
                           "--mode", "csv"], input=QUERY, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 1 + want, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "replaydb", "shell", str(store_path), "--json"],
                          input=QUERY + ";", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and len(json.loads(proc.stdout)) == want, proc.stderr


def test_a_statement_typed_over_lines_is_one_history_entry():
    readline = pytest.importorskip("readline")
    readline.clear_history()
    for line in ("older;", "SELECT *", "FROM x", "MATCH y;"):
        readline.add_history(line)
    _join_history(readline, 3, "SELECT *\nFROM x\nMATCH y;")
    entries = [readline.get_history_item(i + 1)
               for i in range(readline.get_current_history_length())]
    assert entries == ["older;", "SELECT * FROM x MATCH y;"]
    readline.clear_history()
