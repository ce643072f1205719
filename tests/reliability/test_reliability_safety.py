"""Safety: no eval, no SQL built from strings, names that cannot escape the store, read-only
stores that stay unchanged.

* The project's source tree is parsed (``ast``): no call of ``eval``/``exec`` (also not through
  ``builtins``), no ``compile(..., "exec")``, and no ``.sql(...)``/``.execute(...)`` whose query
  is an f-string, a ``%``/``+`` concatenation or a ``.format`` call.
* Stream names (and column names, which become index directories) are checked by every API and
  CLI command that takes one: ``..``, absolute paths, separators, NUL bytes, newlines, very long
  names are usage errors, and nothing is created outside - or inside - the store.
* A manifest whose side-table or tree paths point outside the stream (a tampered or foreign
  Delta log) is reported as corruption; no writer follows it.
* A store opened read-only refuses every write (append, ingest, index, compact, vacuum,
  create_stream, drop_stream, update_config) with ``ReadOnlyError``, and the CLI's reading
  commands (stats, check, query, explain) open stores read-only; the files on disk - every byte,
  every timestamp - are unchanged afterwards. On a read-only file system (a read-only bind mount,
  where the test may mount one) the CLI's writing commands fail with one clear line, the reading
  ones work.
"""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import replaydb
from replaydb.cli import main
from replaydb.errors import CorruptionError, ReadOnlyError, UsageError
from replaydb.store.schema import Attribute, StreamSchema
from tests.crash import REPO_ROOT

PROJECT_DIRS = ("replaydb", "store", "indexes", "planner", "replay", "operators", "datasets",
                "bench")


# --------------------------------------------------------------------------- no eval / exec
def project_files() -> list[Path]:
    root = Path(REPO_ROOT)
    return sorted(p for d in PROJECT_DIRS for p in (root / d).rglob("*.py")
                  if "results" not in p.parts)


def _is_built_string(node: ast.AST) -> bool:
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return True
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format")


def unsafe_calls(source: str, filename: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
            else None
        where = f"{filename}:{node.lineno}"
        builtin = isinstance(f, ast.Name) or (
            isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id in ("builtins", "__builtins__"))
        if name in ("eval", "exec") and builtin:  # not methods that happen to be named so
            found.append(f"{where}: {name}()")
        elif name == "compile" and isinstance(f, ast.Name) and any(
                isinstance(a, ast.Constant) and a.value in ("exec", "eval", "single")
                for a in node.args[2:3]):
            found.append(f"{where}: compile(..., mode)")
        elif name in ("sql", "execute", "executemany") and node.args and \
                _is_built_string(node.args[0]):
            found.append(f"{where}: {name}() with a query built from strings")
    return found


def test_the_checker_finds_what_it_looks_for():
    bad = ("eval(x)\nbuiltins.exec(y)\ncompile(s, 'f', 'exec')\nspark.sql(f'select {c}')\n"
           "con.execute('select ' + c)\ncon.execute('select {}'.format(c))\n")
    assert len(unsafe_calls(bad, "t.py")) == 6
    ok = "con.execute('select ?', [c])\nre.compile(p)\nspark.sql('select 1')\nenv.eval(node)\n"
    assert unsafe_calls(ok, "t.py") == []


def test_no_eval_exec_or_string_built_sql_in_project_code():
    files = project_files()
    assert len(files) > 40
    found = [hit for p in files
             for hit in unsafe_calls(p.read_text(encoding="utf-8"), str(p.relative_to(REPO_ROOT)))]
    assert found == []


# --------------------------------------------------------------------------- path traversal
EVIL_NAMES = ["..", ".", "../x", "../../etc", "/var/x", "/", "a/b", "a\\b", "x\x00y", "s\n",
              "\ns", " s", "s ", "x" * 129, "x" * 5000, "", "ü", "s.t", "-rf", "~", "$HOME",
              "%2e%2e", "s\t"]


def tree_state(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file and directory under ``root``: size, mtime and content hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns, digest)
    return out


@pytest.fixture
def store(tmp_path):
    s = replaydb.open(tmp_path / "store", create=True)
    s.create_stream("s", StreamSchema((Attribute("x", "float64"), Attribute("k", "int64")),
                                      leaf_capacity=8, fanout=4))
    s.append("s", pa.table({"t": np.arange(40), "x": np.arange(40) * 0.5,
                            "k": np.arange(40) % 5}))
    from replaydb.indexes.manage import create_index

    create_index(s, "s", "k")
    return s


def _api_calls(store, name: str, tmp_path: Path):
    from replaydb.indexes.manage import compact, create_index
    from replaydb.store.vacuum import vacuum_stream

    batch = pa.table({"t": [1, 2], "x": [1.0, 2.0], "k": [1, 2]})
    return {
        "create_stream": lambda: store.create_stream(name, batch.schema),
        "append": lambda: store.append(name, batch),
        "stream": lambda: store.stream(name),
        "writer": lambda: store.writer(name),
        "has_stream": lambda: store.has_stream(name),
        "drop_stream": lambda: store.drop_stream(name),
        "stats": lambda: store.stats(name),
        "check": lambda: store.check(name),
        "create_index": lambda: create_index(store, name, "k"),
        "index column": lambda: create_index(store, "s", name),
        "compact": lambda: compact(store, name),
        "vacuum": lambda: vacuum_stream(store, name),
        "stream_dir": lambda: store.stream_dir(name),
    }


@pytest.mark.parametrize("name", EVIL_NAMES, ids=[repr(n)[:20] for n in EVIL_NAMES])
def test_evil_names_are_rejected_by_every_api(store, tmp_path, name):
    before = tree_state(tmp_path)
    calls = _api_calls(store, name, tmp_path)
    if name == "":  # stats("") and check("") mean every stream, like stats() and check()
        del calls["stats"], calls["check"]
    for what, call in calls.items():
        with pytest.raises(UsageError) as ei:
            call()
        assert "invalid" in str(ei.value) or "cannot index" in str(ei.value), (what, ei.value)
    assert tree_state(tmp_path) == before


def test_evil_column_names_in_data_are_rejected(store, tmp_path):
    before = tree_state(tmp_path)
    for col in ["../x", "a/b", "x\x00", "k\n"]:
        batch = pa.table({"t": [1], col: [1.0]})
        with pytest.raises(UsageError):
            store.append("fresh", batch)
        with pytest.raises(UsageError):
            store.create_stream("fresh", batch.schema)
    assert tree_state(tmp_path) == before


def test_spark_ingest_rejects_evil_stream_names(store, tmp_path):
    from replaydb.ingest.job import ingest

    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"t": [100, 101], "x": [1.0, 2.0], "k": [1, 2]}), src)
    before = tree_state(tmp_path)
    for name in ["../x", "/var/x", "a/b", "s\n"]:
        with pytest.raises(UsageError):  # refused before Spark starts
            ingest(store, name, [str(src)], time_column="t", quiet=True)
    assert tree_state(tmp_path) == before


CLI_NAME_COMMANDS = [
    ("ingest", lambda store, name, src: ["ingest", store, name, src, "--master", "local[1]"]),
    ("stats", lambda store, name, src: ["stats", store, name]),
    ("check", lambda store, name, src: ["check", store, name]),
    ("index", lambda store, name, src: ["index", store, name, "k", "--local"]),
    ("index column", lambda store, name, src: ["index", store, "s", name, "--local"]),
    ("compact", lambda store, name, src: ["compact", store, name]),
    ("vacuum", lambda store, name, src: ["vacuum", store, name]),
]


@pytest.mark.parametrize("name", ["../x", "../../etc", "/var/x", "a/b", "s\n", "x" * 300],
                         ids=["dotdot", "dotdot2", "absolute", "separator", "newline", "long"])
def test_evil_names_at_the_cli(store, tmp_path, capsys, name):
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"t": [100, 101], "x": [1.0, 2.0], "k": [1, 2]}), src)
    before = tree_state(tmp_path)
    for what, argv in CLI_NAME_COMMANDS:
        code = main(argv(str(store.path), name, str(src)))
        err = capsys.readouterr().err
        assert code == 2, (what, err)
        assert err.startswith("error: invalid") or err.startswith("error: cannot index"), err
        assert "Traceback" not in err
    assert tree_state(tmp_path) == before


def test_nul_byte_names_at_the_cli_subprocess(store, tmp_path):
    """A NUL byte cannot even be passed as an argument; an escaped one is just a bad name."""
    r = subprocess.run([os.sys.executable, "-m", "replaydb", "stats", str(store.path), "s\\x00"],
                       capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert r.returncode == 2 and "invalid stream name" in r.stderr and "Traceback" not in r.stderr


def test_tampered_manifest_paths_are_corruption_not_followed(store, tmp_path):
    """A manifest naming side tables or tree segments outside the stream is refused."""
    from dataclasses import replace

    from replaydb.store import deltaio
    from replaydb.store.manifest import Manifest

    snap = store.stream("s")
    outside = tmp_path / "outside"
    for bad in [replace(snap.manifest, side=tuple(replace(r, path="../../../outside/idx")
                                                  for r in snap.manifest.side)),
                replace(snap.manifest, tree_head="../../../outside/seg.parquet")]:
        with pytest.raises(CorruptionError):
            Manifest.loads(bad.dumps())
    # commit the first one as a foreign writer would, then try to read and to write
    bad = replace(snap.manifest, side=tuple(replace(r, path="../../../outside/idx")
                                            for r in snap.manifest.side))
    deltaio.commit(snap.events_dir, snap.schema.arrow_schema, [], [], bad)
    fresh = replaydb.open(store.path)
    with pytest.raises(CorruptionError):
        fresh.stream("s")
    with pytest.raises(CorruptionError):
        fresh.append("s", pa.table({"t": [100], "x": [1.0], "k": [1]}))
    problems = fresh.check("s")["s"]
    assert problems and "manifest" in problems[0]
    assert not outside.exists()


# --------------------------------------------------------------------------- read-only
def test_read_only_store_refuses_every_write(store, tmp_path):
    from replaydb.indexes.manage import compact, create_index
    from replaydb.ingest.job import ingest
    from replaydb.store.vacuum import vacuum_stream

    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"t": [100, 101], "x": [1.0, 2.0], "k": [1, 2]}), src)
    before = tree_state(tmp_path)
    ro = replaydb.open(store.path, read_only=True)
    batch = pa.table({"t": [100], "x": [1.0], "k": [1]})
    writes = {
        "append": lambda: ro.append("s", batch),
        "append to a new stream": lambda: ro.append("new", batch),
        "create_stream": lambda: ro.create_stream("new", batch.schema),
        "drop_stream": lambda: ro.drop_stream("s"),
        "update_config": lambda: ro.update_config(calibration={"x": 1}),
        "writer": lambda: ro.writer("s"),
        "ingest": lambda: ingest(ro, "s", [str(src)], quiet=True),
        "ingest a new stream": lambda: ingest(ro, "new", [str(src)], quiet=True),
        "create_index": lambda: create_index(ro, "s", "x"),
        "compact": lambda: compact(ro, "s", full=True),
        "vacuum": lambda: vacuum_stream(ro, "s"),
    }
    for what, call in writes.items():
        with pytest.raises(ReadOnlyError, match="read-only"):
            call()
        assert tree_state(tmp_path) == before, f"{what} changed the store"
    # reads still work, and nothing on disk changed - not even a lock file or a timestamp
    assert ro.stream("s").n_events == 40 and ro.check("s") == {"s": []}
    assert tree_state(tmp_path) == before
    with pytest.raises(ReadOnlyError):
        replaydb.open(tmp_path / "brand-new", create=True, read_only=True)
    assert not (tmp_path / "brand-new").exists()


@pytest.fixture
def probe(monkeypatch):
    from tests.reliability.test_reliability_limits import register_probe

    register_probe(monkeypatch)


def test_cli_reading_commands_change_nothing(store, tmp_path, capsys, probe):
    before = tree_state(tmp_path)
    path = str(store.path)
    for argv in (["stats", path], ["stats", path, "s", "--json"], ["check", path],
                 ["check", path, "s", "--quick"], ["query", path, "PROBE K 1 3"],
                 ["query", path, "PROBE", "--json"], ["explain", path, "PROBE K 0 1"],
                 ["explain", path, "PROBE", "--analyze"]):
        assert main(argv) == 0, argv
    capsys.readouterr()
    assert tree_state(tmp_path) == before


@pytest.fixture
def read_only_mount(store, tmp_path):
    """The store seen through a read-only bind mount (skipped where mounting is not allowed)."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    ok = subprocess.run(["mount", "--bind", str(store.path), str(mnt)], capture_output=True)
    if ok.returncode != 0:
        pytest.skip("cannot bind-mount here (needs mount privileges)")
    try:
        r = subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], capture_output=True)
        if r.returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_cli_on_a_read_only_file_system(store, tmp_path, capsys, probe, read_only_mount):
    mnt = str(read_only_mount)
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"t": [100, 101], "x": [1.0, 2.0], "k": [1, 2]}), src)
    before = tree_state(store.path)
    for argv in (["stats", mnt], ["check", mnt], ["query", mnt, "PROBE K 1 3"],
                 ["explain", mnt, "PROBE", "--analyze"]):
        assert main(argv) == 0, argv
    capsys.readouterr()
    for argv in (["index", mnt, "s", "x", "--local"], ["compact", mnt, "s", "--full"],
                 ["vacuum", mnt, "s"],
                 ["ingest", mnt, "s", str(src), "--master", "local[1]", "--batch-id", "b"],
                 ["ingest", mnt, "fresh", str(src), "--master", "local[1]"]):
        code = main(argv)
        err = capsys.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 1 and "Traceback" not in err and "internal error" not in err, (argv, err)
        assert lines[0].startswith("error: ") and "read-only" in lines[0], (argv, err)
    assert tree_state(store.path) == before
