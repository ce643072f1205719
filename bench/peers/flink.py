"""Apache Flink SQL MATCH_RECOGNIZE as a benchmark peer of replaydb (full replay in Flink).

Flink cannot live in replaydb's environment (apache-flink pulls apache-beam, which needs a
pyarrow older than pyspark's), so it runs in its own virtual environment ``.venv-flink``
built by ``make bench-env-flink``. This module, in replaydb's environment, prepares a run and
reads its result; :mod:`replaydb.bench.peers.flink_runner` does the Flink work in a child
process of that environment's interpreter.

A run (:func:`run_flink`):

1. writes the events (an Arrow table ordered by ``(t, seq)``) as a headerless CSV file;
2. translates each replaydb MATCH_RECOGNIZE query into Flink SQL
   (:func:`to_flink_sql`, rules in :mod:`replaydb.bench.peers.flink_sql`);
3. writes a JSON job file and starts ``.venv-flink/bin/python flink_runner.py JOB`` in its own
   process group (killed as a whole on timeout, the JVM included);
4. reads the JSON result: start-up costs, and per query wall seconds, matches, error, and in
   ``rows`` mode the matches themselves as an Arrow table.

Time mapping: one stream time unit is one Flink millisecond (``rowtime =
TO_TIMESTAMP_LTZ(t - t_min, 3)``), whatever the stream's declared unit; WITHIN durations are
converted to stream units first, so the mapping is exact. The stream's time span must fit in
Flink's timestamps (``MAX_SPAN`` units, year 9999 in milliseconds).

Cost: writing the CSV is O(n) (about 1 s per million events of five doubles); Flink's own
start-up (JVM, mini-cluster) is seconds, reported apart in ``startup``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from replaydb.bench.peers.flink_sql import FlinkTranslation, to_flink_sql, translate
from replaydb.errors import DataError, ReplayDBError, UsageError

__all__ = [
    "FLINK_VERSION", "FlinkUnavailable", "FlinkTranslation", "ensure_env", "env_python",
    "flink_type", "run_flink", "to_flink_sql", "translate",
]

FLINK_VERSION = "2.3.0"
"""The pinned apache-flink release (the Makefile's ``FLINK_VERSION``)."""
ROOT = Path(__file__).resolve().parents[2]
"""Repository root (holds the Makefile and ``.venv-flink``)."""
RUNNER = Path(__file__).resolve().with_name("flink_runner.py")
MAX_SPAN = 253_402_300_799_999
"""Largest time span (max t - min t) Flink's millisecond timestamps hold (year 9999)."""
_HINT = ("run `make bench-env-flink` (it installs apache-flink==" + FLINK_VERSION
         + " from PyPI, about 840 MB, into .venv-flink; it needs Java 17 on PATH)")

_TYPES = {
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT", pa.int64(): "BIGINT",
    pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN",
    pa.string(): "STRING", pa.large_string(): "STRING",
}
_BACK = {"TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(),
         "INTEGER": pa.int32(), "BIGINT": pa.int64(), "FLOAT": pa.float32(),
         "DOUBLE": pa.float64(), "BOOLEAN": pa.bool_(), "STRING": pa.string()}


class FlinkUnavailable(ReplayDBError):
    """The Flink environment is missing and cannot be built, or Flink itself failed to start."""


def env_dir(root: Path | None = None) -> Path:
    """The Flink virtual environment (``REPLAYDB_FLINK_VENV`` overrides the default)."""
    override = os.environ.get("REPLAYDB_FLINK_VENV")
    if override:
        return Path(override)
    return (root or ROOT) / ".venv-flink"


def env_python(root: Path | None = None) -> Path:
    """The interpreter of the Flink environment (it may not exist yet)."""
    return env_dir(root) / "bin" / "python"


def _env_ready(root: Path | None) -> bool:
    d = env_dir(root)
    return (d / "bin" / "python").exists() and (d / f".installed-{FLINK_VERSION}").exists()


def ensure_env(root: Path | None = None, *, build: bool = True) -> Path:
    """Return the Flink environment's interpreter, building it with ``make bench-env-flink``
    when it is missing (minutes, once). Raises :class:`FlinkUnavailable` with a hint when Java
    is missing or the build fails (e.g. PyPI cannot be reached)."""
    root = root or ROOT
    if shutil.which("java") is None:
        raise FlinkUnavailable("Java is not installed; Flink needs Java 17",
                               hint="install OpenJDK 17 (e.g. apt-get install openjdk-17-jre)")
    if _env_ready(root):
        return env_python(root)
    if not build:
        raise FlinkUnavailable(f"the Flink environment {env_dir(root)} is missing", hint=_HINT)
    if os.environ.get("REPLAYDB_FLINK_VENV"):
        raise FlinkUnavailable(f"the Flink environment {env_dir(root)} is not complete",
                               hint="rebuild it, or unset REPLAYDB_FLINK_VENV")
    if shutil.which("make") is None or not (root / "Makefile").exists():
        raise FlinkUnavailable("cannot build the Flink environment: no make or Makefile",
                               hint=_HINT)
    proc = subprocess.run(["make", "--no-print-directory", "bench-env-flink"], cwd=root,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not _env_ready(root):
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise FlinkUnavailable(f"building the Flink environment failed:\n{tail}", hint=_HINT)
    return env_python(root)


def flink_type(t: pa.DataType, column: str) -> str:
    """The Flink SQL type of an Arrow column type (DataError for types the CSV cannot carry)."""
    try:
        return _TYPES[t]
    except KeyError:
        raise DataError(f"type {t} has no Flink CSV mapping", column=column,
                        hint="cast it to an integer, float, bool or string column") from None


def _check_events(events: pa.Table, time_column: str, seq_column: str | None) -> int:
    """Validate the events; returns min(t). O(n), vectorized."""
    names = events.column_names
    if time_column not in names:
        raise DataError("the time column is missing", column=time_column)
    t = events.column(time_column)
    if not pa.types.is_integer(t.type):
        raise DataError(f"the time column must be an integer, not {t.type}", column=time_column)
    if t.null_count:
        raise DataError("the time column has nulls", column=time_column)
    for c in names:
        flink_type(events.schema.field(c).type, c)
    if events.num_rows == 0:
        return 0
    ta = t.to_numpy()
    bad = (ta[1:] < ta[:-1]).nonzero()[0]
    if len(bad):
        raise DataError("events are not ordered by time", row=int(bad[0]) + 1,
                        column=time_column, hint="sort the events by (t, seq)")
    if seq_column is not None and seq_column in names:
        s = events.column(seq_column).to_numpy()
        tie = (ta[1:] == ta[:-1]) & (s[1:] <= s[:-1])
        bad = tie.nonzero()[0]
        if len(bad):
            raise DataError("events with equal times are not ordered by seq",
                            row=int(bad[0]) + 1, column=seq_column)
    lo, hi = int(ta[0]), int(ta[-1])
    if hi - lo > MAX_SPAN:
        raise DataError(f"the time span {hi - lo} is longer than Flink's timestamps hold "
                        f"({MAX_SPAN} units as milliseconds)", column=time_column)
    return lo


def _rowtime_name(names: list[str]) -> str:
    name = "rowtime"
    while name in names:
        name += "_"
    return name


def _read_rows(files: list[str], columns: list[list[str]]) -> pa.Table:
    names = [c[0] for c in columns]
    types = {}
    for name, ty in columns:
        base = ty.split("(")[0].replace(" NOT NULL", "").strip().upper()
        if base in _BACK:
            types[name] = _BACK[base]
    schema = pa.schema([(n, types.get(n, pa.string())) for n in names])
    tables = []
    for f in files:
        if os.path.getsize(f) == 0:
            continue
        tables.append(pacsv.read_csv(
            f, read_options=pacsv.ReadOptions(column_names=names),
            convert_options=pacsv.ConvertOptions(column_types=types)))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables).cast(schema)


def run_flink(events: pa.Table, queries: dict[str, str], *, time_column: str = "t",
              time_unit: str | None = None, seq_column: str | None = "seq",
              table: str = "events", mode: str = "count", parallelism: int = 2,
              timeout_s: float = 3600.0, query_timeout_s: float | None = None,
              startup_probe: bool = True, workdir: str | os.PathLike[str] | None = None,
              keep_files: bool = False, build_env: bool = True,
              batch: int = 1) -> dict[str, Any]:
    """Run replaydb MATCH_RECOGNIZE ``queries`` (name -> text) over ``events`` in Flink.

    ``mode``: ``"count"`` (matches counted by Flink, cheap), ``"blackhole"`` (timing only,
    ``matches`` None) or ``"rows"`` (matches written to CSV and returned as ``rows``).
    ``parallelism``: the mini-cluster's default parallelism (the match operator itself runs
    with parallelism 1 unless the query partitions). ``timeout_s`` bounds the whole run (the
    process group is killed), ``query_timeout_s`` each query (its job is cancelled; default
    ``timeout_s``). ``batch`` (``rows`` mode only): queries run that many at a time as one Flink
    job, several times cheaper per query, for comparisons rather than timing (each ``wall_s`` is
    then the shared job's; see :mod:`replaydb.bench.peers.flink_runner`). A query Flink rejects
    gets its ``error`` and the others still run; a query the translator rejects raises
    :class:`~replaydb.errors.ParseError` before anything starts.

    Returns ``{"flink_version", "mode", "parallelism", "events", "startup": {"gateway_s",
    "trivial_cold_s", "trivial_warm_s"}, "csv_write_s", "process_s", "queries": {name:
    {"sql", "window", "flink_window_ms", "relaxed", "wall_s", "matches", "error"[, "rows"]}}}``.
    """
    if mode not in ("count", "blackhole", "rows"):
        raise UsageError(f"unknown mode {mode!r}", hint="use count, blackhole or rows")
    if not queries:
        raise UsageError("no queries to run")
    if batch < 1 or (batch > 1 and mode != "rows"):
        raise UsageError(f"batch={batch} needs mode='rows' and a positive size",
                         hint="batch only shares jobs between queries whose rows are written")
    names = list(events.column_names)
    offset = _check_events(events, time_column, seq_column)
    rowtime = _rowtime_name(names)
    translations = {
        name: translate(text, table, time_column, time_unit, rowtime=rowtime,
                        seq_column=seq_column, columns=names)
        for name, text in queries.items()
    }
    python = ensure_env(build=build_env)
    work = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="flink-run-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        csv_path = work / "events.csv"
        t0 = time.perf_counter()
        pacsv.write_csv(events, csv_path, write_options=pacsv.WriteOptions(include_header=False))
        csv_s = time.perf_counter() - t0
        job = {
            "csv": str(csv_path),
            "columns": [{"name": n, "type": flink_type(events.schema.field(n).type, n)}
                        for n in names],
            "table": table, "time_column": time_column, "time_offset": offset,
            "rowtime": rowtime, "parallelism": int(parallelism), "mode": mode,
            "output_dir": str(work / "out"),
            "queries": [{"name": n, "sql": tr.sql} for n, tr in translations.items()],
            "query_timeout_s": float(query_timeout_s or timeout_s),
            "startup_probe": bool(startup_probe), "batch": int(batch),
            "result": str(work / "result.json"),
        }
        (work / "job.json").write_text(json.dumps(job, indent=1), encoding="utf-8")
        t0 = time.perf_counter()
        rc, log_tail = _spawn(python, work, timeout_s)
        process_s = time.perf_counter() - t0
        result_path = work / "result.json"
        if not result_path.exists():
            raise FlinkUnavailable(f"the Flink runner produced no result (exit {rc}):\n{log_tail}",
                                   hint=_HINT)
        result = json.loads(result_path.read_text(encoding="utf-8"))
        if rc == "timeout":
            result["fatal"] = f"the run took longer than {timeout_s:g} s and was killed"
        elif "fatal" in result:
            result["fatal"] += "\n" + log_tail
        result["events"] = events.num_rows
        if keep_files or workdir is not None:
            result["workdir"] = str(work)
        result["csv_write_s"] = csv_s
        result["process_s"] = process_s
        out = result.setdefault("queries", {})
        for name, tr in translations.items():
            entry = out.setdefault(name, {"wall_s": None, "matches": None,
                                          "error": "not run (the runner stopped before it)"})
            entry.update(sql=tr.sql, window=tr.window, flink_window_ms=tr.flink_window_ms,
                         relaxed=list(tr.relaxed))
            if mode == "rows" and entry.get("error") is None:
                entry["rows"] = _read_rows(entry.get("files", []), entry["columns"])
                entry.pop("files", None)
        return result
    finally:
        if not keep_files and workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _spawn(python: Path, work: Path, timeout_s: float) -> tuple[int | str, str]:
    """Run the runner in its own process group; kill the group on timeout."""
    log = work / "runner.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([str(python), str(RUNNER), str(work / "job.json")],
                                stdout=fh, stderr=subprocess.STDOUT, cwd=work,
                                start_new_session=True)
        try:
            rc: int | str = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = "timeout"
        except BaseException:  # interrupted: take the runner and its JVM down too
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            # the runner's JVM is in the same group: never leave it behind
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    return rc, "\n".join(lines[-30:])

