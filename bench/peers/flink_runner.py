"""Run MATCH_RECOGNIZE queries on Apache Flink's local mini-cluster and time them.

This script runs INSIDE the separate Flink environment (``.venv-flink``, built by
``make bench-env-flink``): it imports only the standard library and ``pyflink``, never
replaydb. The replaydb side (:mod:`replaydb.bench.peers.flink`) writes the events as a CSV
file plus a JSON job file, starts this script with that environment's interpreter, and reads
back the JSON result.

Usage::

    python flink_runner.py JOB.json

Job file (all keys required unless a default is given)::

    {
      "csv": "events.csv",                 # headerless CSV, columns in the order below
      "columns": [{"name": "t", "type": "BIGINT"}, ...],   # Flink SQL types
      "table": "events",                   # name the queries read FROM
      "time_column": "t",                  # int64 stream time
      "time_offset": 0,                    # subtracted before the time becomes milliseconds
      "rowtime": "rowtime",                # name of the computed event-time attribute
      "parallelism": 2,                    # parallelism.default of the mini-cluster
      "mode": "count",                     # "count" | "blackhole" | "rows"
      "output_dir": "out",                 # rows mode: one CSV folder per query
      "queries": [{"name": "q1", "sql": "SELECT * FROM events MATCH_RECOGNIZE (...)"}],
      "query_timeout_s": 600,              # per query; the job is cancelled after it
      "batch": 1,                          # rows mode: queries sharing one job (see below)
      "startup_probe": true,               # time a trivial job twice (cold, warm)
      "result": "result.json"
    }

The source is a filesystem CSV table whose event-time attribute is
``rowtime AS TO_TIMESTAMP_LTZ(t - time_offset, 3)`` with
``WATERMARK FOR rowtime AS rowtime - INTERVAL '0.001' SECOND``: one stream time unit is one
Flink millisecond (the queries' WITHIN intervals are written in those milliseconds by the
translator). The CSV is sorted by ``(t, seq)`` and read in order, so the only rows that could
arrive at or behind the watermark are timestamp ties. Flink's SQL watermark is the expression
itself (no ``- 1`` as in the DataStream API's bounded out-of-orderness), and the CEP operator
drops a row whose timestamp is not above the current watermark as late: with a watermark equal
to ``rowtime`` the second row of a tie is silently lost whenever a watermark was emitted
between the two (measured: matches went missing or spanned a dropped row). One unit of delay
keeps every tie; the operator then buffers the rows until the watermark passes them and sorts
each timestamp's rows by ``ORDER BY rowtime, seq``.

Modes (each query is its own Flink job, timed from submission - planning included - until
the job has finished):

* ``count``: ``SELECT COUNT(*) FROM (query)`` collected with mini-batch aggregation on, so the
  client receives a handful of changelog rows; the last one is the number of matches.
* ``blackhole``: ``INSERT INTO`` a blackhole sink; the purest timing, no match count.
* ``rows``: ``INSERT INTO`` a filesystem CSV sink in ``output_dir/<name>/``; the matches are
  counted from the written files and the output column names and types are reported.

``batch`` (rows mode only, default 1): consecutive queries run ``batch`` at a time as ONE job, a
statement set with a sink per query. A job costs seconds whatever it does (a mini-cluster,
submission, code generation: measured 5-9 s a job against 1.6 s a query in a job of ten), so a
batch cuts the cost per query several times; it is meant for comparisons of many small queries,
not for timing (each query's ``wall_s`` is then the whole job's, ``batched`` the number of
queries that shared it). A query the planner rejects gets its error and stays out of the job;
when the job itself fails (a query's runtime error, e.g. an AFTER MATCH SKIP target that bound
no row), the batch is split in halves and each half run again, down to single queries, so every
error lands on its own query.

The start-up costs are reported apart: ``gateway_s`` (JVM and TableEnvironment start) and a
trivial MATCH_RECOGNIZE job over a one-row table run twice (``trivial_cold_s`` includes
class loading and JIT warm-up, ``trivial_warm_s`` is the fixed cost every further job pays).

Result file::

    {"flink_version": ..., "parallelism": ..., "mode": ...,
     "startup": {"gateway_s": ..., "trivial_cold_s": ..., "trivial_warm_s": ...},
     "queries": {"q1": {"wall_s": ..., "matches": ..., "error": null,
                        "columns": [[name, type], ...], "output_dir": ...}, ...}}

It is rewritten after every query, so a run killed from outside still leaves what finished.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time


def _quote(name: str) -> str:
    """A Flink SQL identifier in backticks (backticks inside are doubled)."""
    return "`" + name.replace("`", "``") + "`"


def _literal(text: str) -> str:
    """A Flink SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _error_text(exc: BaseException) -> str:
    """The useful part of a (Java) exception: the chain of causes, without stack traces."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        parts = []
        while java is not None and len(parts) < 8:
            text = str(java.toString())
            if "NullPointerException" in text and os.environ.get("REPLAYDB_FLINK_TRACE"):
                text += " at " + " < ".join(str(f) for f in list(java.getStackTrace())[:12])
            parts.append(text)
            java = java.getCause()
        return " | caused by: ".join(parts)[:4000]
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    keep = [ln for ln in lines if not ln.startswith("at ") and not ln.startswith("...")]
    head = keep[:3]
    causes = [ln for ln in keep if ln.startswith("Caused by:")]
    text = " | ".join(head + causes[-2:]) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:4000]


class Runner:
    """Runs the job's queries in turn, each as its own job in a fresh TableEnvironment."""

    def __init__(self, job: dict) -> None:
        self.job = job
        self.mode = job.get("mode", "count")
        if self.mode not in ("count", "blackhole", "rows"):
            raise ValueError(f"unknown mode {self.mode!r}")
        self.timeout_s = float(job.get("query_timeout_s", 600))
        self.result: dict = {
            "mode": self.mode,
            "parallelism": int(job.get("parallelism", 1)),
            "startup": {},
            "queries": {},
        }
        self._sinks = 0

    # ------------------------------------------------------------------ set-up
    def start(self) -> None:
        t0 = time.perf_counter()
        self.new_env([])
        self.result["startup"]["gateway_s"] = time.perf_counter() - t0
        try:
            from pyflink.version import __version__ as version
        except ImportError:  # pragma: no cover - layout of older releases
            version = "unknown"
        self.result["flink_version"] = version

    def new_env(self, ddls: list[str]) -> None:
        """A fresh TableEnvironment with the job's settings and the given tables.

        Every query gets its own. PyFlink talks to the JVM through Py4J, whose calls may be
        served by another Java thread than the one that created the planner, and Flink's
        planner keeps Calcite's metadata provider in a thread-local: once the serving thread
        has changed, every later query of that TableEnvironment fails in the optimizer with
        ``NullPointerException: metadataHandlerProvider`` (measured, intermittent). A new
        TableEnvironment sets the provider up on the current thread. Local execution starts
        a mini-cluster per job anyway, so nothing is lost.
        """
        from pyflink.table import EnvironmentSettings, TableEnvironment

        self.env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
        conf = self.env.get_config()
        conf.set("parallelism.default", str(self.result["parallelism"]))
        if self.mode == "count":
            conf.set("table.exec.mini-batch.enabled", "true")
            conf.set("table.exec.mini-batch.allow-latency", "1 s")
            conf.set("table.exec.mini-batch.size", "100000")
        for ddl in ddls:
            self.env.execute_sql(ddl)

    def source_ddl(self, name: str, csv_path: str) -> str:
        job = self.job
        cols = [f"{_quote(c['name'])} {c['type']}" for c in job["columns"]]
        rt = _quote(job.get("rowtime", "rowtime"))
        offset = int(job.get("time_offset", 0))
        t = _quote(job["time_column"])
        shifted = f"{t} - {offset}" if offset else t
        return (
            f"CREATE TEMPORARY TABLE {_quote(name)} (\n  " + ",\n  ".join(cols)
            + f",\n  {rt} AS TO_TIMESTAMP_LTZ({shifted}, 3),\n"
            + f"  WATERMARK FOR {rt} AS {rt} - INTERVAL '0.001' SECOND\n)"
            + " WITH ('connector' = 'filesystem', 'format' = 'csv', 'csv.null-literal' = '', "
            + f"'path' = {_literal(os.path.abspath(csv_path))})"
        )

    # ------------------------------------------------------------------ jobs
    def _watchdog(self, table_result,  # noqa: ANN001 - pyflink type
                  timeout_s: float | None = None) -> threading.Timer:
        """Cancel the job when it runs past ``timeout_s`` (default: the per-query timeout)."""

        def cancel() -> None:
            try:
                client = table_result.get_job_client()
                if client is not None:
                    client.cancel()
            except Exception:  # noqa: S110 - the job may have finished meanwhile
                pass

        timer = threading.Timer(timeout_s or self.timeout_s, cancel)
        timer.daemon = True
        timer.start()
        return timer

    def _new_sink(self, table, connector: str, path: str | None = None) -> str:  # noqa: ANN001
        from pyflink.table import Schema, TableDescriptor

        self._sinks += 1
        name = f"replaydb_sink_{self._sinks}"
        schema = Schema.new_builder().from_row_data_type(
            table.get_schema().to_row_data_type()).build()
        desc = TableDescriptor.for_connector(connector).schema(schema)
        if connector == "filesystem":
            desc = desc.option("path", path).format("csv")
        self.env.create_temporary_table(name, desc.build())
        return name

    def run_query(self, sql: str, ddls: list[str], output_dir: str | None = None) -> dict:
        """Run one query as its own job in a fresh TableEnvironment; returns its entry.

        ``env_s`` (creating that TableEnvironment) is not part of ``wall_s``. A failure with
        the thread-local symptom of :meth:`new_env` is retried, at most twice, in another
        fresh TableEnvironment; ``retries`` counts those.
        """
        out: dict = {}
        for attempt in range(3):
            t0 = time.perf_counter()
            self.new_env(ddls)
            env_s = time.perf_counter() - t0
            out = self._run(sql, output_dir)
            out["env_s"] = env_s
            out["retries"] = attempt
            if out["error"] is None or "metadataHandlerProvider" not in out["error"]:
                break
        return out

    def _run(self, sql: str, output_dir: str | None) -> dict:
        out: dict = {"wall_s": None, "matches": None, "error": None}
        t0 = time.perf_counter()
        timer = None
        try:
            table = self.env.sql_query(sql)
            schema = table.get_schema()
            out["columns"] = [[n, str(ty)] for n, ty in
                              zip(schema.get_field_names(), schema.get_field_data_types())]
            if self.mode == "count":
                res = self.env.execute_sql(f"SELECT COUNT(*) AS n FROM ({sql})")
                timer = self._watchdog(res)
                from pyflink.common import RowKind

                n = 0
                with res.collect() as rows:
                    for row in rows:
                        if row.get_row_kind() in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                            n = int(row[0])
                out["matches"] = n
            elif self.mode == "blackhole":
                res = table.execute_insert(self._new_sink(table, "blackhole"))
                timer = self._watchdog(res)
                res.wait()
            else:
                assert output_dir is not None
                shutil.rmtree(output_dir, ignore_errors=True)
                res = table.execute_insert(self._new_sink(table, "filesystem", output_dir))
                timer = self._watchdog(res)
                res.wait()
                out["output_dir"] = output_dir
                out["files"] = _data_files(output_dir)
                out["matches"] = _count_lines(out["files"])
            out["wall_s"] = time.perf_counter() - t0
        except Exception as exc:  # the next query still runs
            out["error"] = _error_text(exc)
            if time.perf_counter() - t0 >= self.timeout_s:
                out["error"] = f"timed out after {self.timeout_s:g} s: {out['error']}"
        finally:
            if timer is not None:
                timer.cancel()
        return out

    def run_batch(self, queries: list[dict], ddls: list[str], output_root: str) -> dict:
        """Run ``queries`` (rows mode) as one job; split in halves when it fails (module doc).

        Returns the entries by query name.
        """
        if len(queries) == 1:
            q = queries[0]
            return {q["name"]: self.run_query(q["sql"], ddls,
                                              os.path.join(output_root, q["name"]))}
        out, retry, attempts = None, True, 0
        while retry and attempts < 3:
            out, retry = self._run_batch(queries, ddls, output_root)
            attempts += 1
        if out is not None:
            for entry in out.values():
                entry["retries"] = attempts - 1
            return out
        half = len(queries) // 2
        out = self.run_batch(queries[:half], ddls, output_root)
        out.update(self.run_batch(queries[half:], ddls, output_root))
        return out

    def _run_batch(self, queries: list[dict], ddls: list[str],
                   output_root: str) -> tuple[dict | None, bool]:
        """One attempt of :meth:`run_batch`: (entries or None when the job failed, whether the
        failure is the thread-local symptom of :meth:`new_env`, worth a fresh attempt)."""
        t0 = time.perf_counter()
        self.new_env(ddls)
        env_s = time.perf_counter() - t0
        out: dict = {}
        members: list[tuple[dict, str]] = []
        statements = self.env.create_statement_set()
        for q in queries:
            entry: dict = {"wall_s": None, "matches": None, "error": None, "env_s": env_s}
            out[q["name"]] = entry
            try:
                table = self.env.sql_query(q["sql"])
                schema = table.get_schema()
                entry["columns"] = [[n, str(ty)] for n, ty in zip(
                    schema.get_field_names(), schema.get_field_data_types())]
                out_dir = os.path.join(output_root, q["name"])
                shutil.rmtree(out_dir, ignore_errors=True)
                statements.add_insert(self._new_sink(table, "filesystem", out_dir), table)
                members.append((entry, out_dir))
            except Exception as exc:  # rejected by the planner: the others still run
                entry["error"] = _error_text(exc)
                if "metadataHandlerProvider" in entry["error"]:
                    return None, True
        if not members:
            return out, False
        t0 = time.perf_counter()
        timer = None
        try:
            res = statements.execute()
            timer = self._watchdog(res, self.timeout_s * len(members))
            res.wait()
        except Exception as exc:
            return None, "metadataHandlerProvider" in _error_text(exc)
        finally:
            if timer is not None:
                timer.cancel()
        wall = time.perf_counter() - t0
        for entry, out_dir in members:
            entry.update(wall_s=wall, batched=len(members), output_dir=out_dir,
                         files=_data_files(out_dir))
            entry["matches"] = _count_lines(entry["files"])
        return out, False

    def probe(self, workdir: str) -> None:
        """Time a trivial MATCH_RECOGNIZE job twice: cold (first job) and warm."""
        path = os.path.join(workdir, "probe.csv")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("0,0\n")
        name = "replaydb_probe"
        t, rt = _quote("t"), _quote("rowtime")
        ddl = (f"CREATE TEMPORARY TABLE {name} ({t} BIGINT, `seq` BIGINT, "
               f"{rt} AS TO_TIMESTAMP_LTZ({t}, 3), "
               f"WATERMARK FOR {rt} AS {rt} - INTERVAL '0.001' SECOND) WITH "
               f"('connector' = 'filesystem', 'format' = 'csv', 'path' = {_literal(path)})")
        sql = (f"SELECT * FROM {name} MATCH_RECOGNIZE (ORDER BY {rt}, `seq` "
               "MEASURES FIRST(`A`.`seq`) AS `s` ONE ROW PER MATCH "
               "AFTER MATCH SKIP TO NEXT ROW PATTERN (`A`) DEFINE `A` AS TRUE)")
        for key in ("trivial_cold_s", "trivial_warm_s"):
            out_dir = os.path.join(workdir, f"probe-{key}")
            r = self.run_query(sql, [ddl], out_dir)
            if r["error"] is not None:
                raise RuntimeError(f"the start-up probe failed: {r['error']}")
            if r["matches"] not in (None, 1):
                raise RuntimeError(f"the start-up probe found {r['matches']} matches, not 1")
            self.result["startup"][key] = r["wall_s"]


def _data_files(folder: str) -> list[str]:
    """The files a filesystem sink wrote (in-progress files included, dot-files too)."""
    out = []
    for root, _dirs, files in os.walk(folder):
        for f in files:
            if f.endswith(".crc") or f.startswith("_"):
                continue
            out.append(os.path.join(root, f))
    return sorted(out)


def _count_lines(files: list[str]) -> int:
    n = 0
    for f in files:
        with open(f, "rb") as fh:
            for line in fh:
                if line.strip():
                    n += 1
    return n


def _write(result: dict, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: flink_runner.py JOB.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as fh:
        job = json.load(fh)
    runner = Runner(job)
    result_path = job["result"]
    try:
        runner.start()
        with tempfile.TemporaryDirectory(prefix="flink-probe-") as work:
            if job.get("startup_probe", True):
                runner.probe(work)
            _write(runner.result, result_path)
            ddls = [runner.source_ddl(job["table"], job["csv"])]
            batch = max(1, int(job.get("batch", 1))) if runner.mode == "rows" else 1
            queries = job["queries"]
            for k in range(0, len(queries), batch):
                group = queries[k:k + batch]
                if batch > 1:
                    runner.result["queries"].update(
                        runner.run_batch(group, ddls, job["output_dir"]))
                else:
                    q = group[0]
                    out_dir = None
                    if runner.mode == "rows":
                        out_dir = os.path.join(job["output_dir"], q["name"])
                    runner.result["queries"][q["name"]] = runner.run_query(q["sql"], ddls,
                                                                           out_dir)
                _write(runner.result, result_path)
    except Exception as exc:
        runner.result["fatal"] = _error_text(exc)
        _write(runner.result, result_path)
        return 1
    _write(runner.result, result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
