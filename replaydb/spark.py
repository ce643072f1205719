"""The Spark session replaydb's jobs run on.

``local[*]`` by default (an embedded Spark started by the job), or any cluster via a master URL.
Settings can be overridden with environment variables:

* ``REPLAYDB_SPARK_MASTER`` - default master (``local[*]``);
* ``REPLAYDB_SPARK_DRIVER_MEMORY`` - driver memory (``4g``);
* ``REPLAYDB_SPARK_UI`` - ``1`` to enable the web UI (off by default for embedded sessions);
* ``REPLAYDB_SPARK_CONF`` - extra ``key=value`` pairs separated by ``;``, e.g.
  ``spark.executor.memory=8g;spark.sql.shuffle.partitions=64``.

Executors run the same Python as the driver (``PYSPARK_PYTHON``), so replaydb's code is available
to them when the workers share the machine or the environment.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from replaydb.errors import ReplayDBError

_SESSION: Any = None


def is_local_master(master: str) -> bool:
    """Whether Spark master ``master`` runs its executors inside the driver's process
    (``local``, ``local[N]``, ``local[*]``, ``local[N,F]``), on the driver's machine."""
    return master == "local" or master.startswith("local[")


def get_spark(master: str | None = None, app_name: str = "replaydb", *,
              config: dict[str, str] | None = None, quiet: bool | None = None) -> Any:
    """Get (or start) the shared SparkSession."""
    global _SESSION
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - pyspark is a dependency
        raise ReplayDBError("pyspark is not installed", hint="pip install 'pyspark[sql]'") from exc
    master = master or os.environ.get("REPLAYDB_SPARK_MASTER", "local[*]")
    active = SparkSession.getActiveSession()
    if active is not None and getattr(active.sparkContext, "_jsc", None) is None:
        active = None  # stopped elsewhere: start a new one
    if active is not None:
        current = active.sparkContext.master
        if master in (current, None) or (master == "local[*]" and current.startswith("local")):
            active.sparkContext.setJobGroup(app_name, app_name)
            return active
        active.stop()
    cores = os.cpu_count() or 2
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    interactive = sys.stderr.isatty() if quiet is None else not quiet
    conf = {
        "spark.ui.enabled": "true" if os.environ.get("REPLAYDB_SPARK_UI") == "1" else "false",
        "spark.ui.showConsoleProgress": "true" if interactive else "false",
        "spark.driver.memory": os.environ.get("REPLAYDB_SPARK_DRIVER_MEMORY", "4g"),
        "spark.sql.shuffle.partitions": str(max(2, cores * 2)),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": f"-Duser.timezone=UTC -Dlog4j2.configurationFile="
                                         f"file:{_log_config()}",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.python.worker.reuse": "true",
    }
    for item in (os.environ.get("REPLAYDB_SPARK_CONF") or "").split(";"):
        if "=" in item:
            k, v = item.split("=", 1)
            conf[k.strip()] = v.strip()
    conf.update(config or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _SESSION = spark
    return spark


_LOG4J2 = """\
status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
"""


def _log_config() -> str:
    """A log4j2 configuration that shows only errors (the JVM's start-up warnings are noise to a
    CLI user); written once per user into the temporary directory."""
    import tempfile

    path = os.path.join(tempfile.gettempdir(), f"replaydb-log4j2-{os.getuid()}.properties")
    try:
        with open(path) as fh:
            if fh.read() == _LOG4J2:
                return path
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(_LOG4J2)
    os.replace(tmp, path)
    return path


def stop_spark() -> None:
    global _SESSION
    if _SESSION is not None:
        _SESSION.stop()
        _SESSION = None

