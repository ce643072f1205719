"""A Spark standalone cluster on this machine, started from the pyspark installation.

:class:`LocalCluster` launches a standalone master and ``workers`` workers (each with ``cores``
cores and ``memory``) as child processes through ``$SPARK_HOME/bin/spark-class`` (SPARK_HOME is
the installed pyspark package), on free ports of 127.0.0.1, waits until every worker has
registered (the master's JSON status page), and stops them again - terminate, then kill - even
when the code using it fails. Logs and the workers' work directories go under ``work_dir``.

Used by the cluster tests and the Spark benchmark; a real deployment starts its cluster with
Spark's own scripts and passes ``--master spark://host:port``.

Example::

    with LocalCluster(workers=2, cores=1) as cluster:
        replaydb.query(store, text, engine="spark", master=cluster.url)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from replaydb.errors import ReplayDBError

HOST = "127.0.0.1"


def spark_home() -> Path:
    """The pyspark installation (it carries bin/spark-class and the jars)."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists():
        raise ReplayDBError(f"no bin/spark-class in the pyspark installation at {home}")
    return home


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class LocalCluster:
    """A standalone master plus workers on 127.0.0.1 (see the module docstring)."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g",
                 work_dir: str | Path | None = None, start_timeout: float = 120.0) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="replaydb-spark-cluster-"))
        self.start_timeout = start_timeout
        self.procs: list[subprocess.Popen[bytes]] = []
        self.port = 0
        self.ui_port = 0
        self.worker_dirs: list[Path] = []

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": HOST,
                    "SPARK_LOG_DIR": str(self.work_dir / "logs"),
                    "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"})
        return env

    def _launch(self, name: str, args: list[str]) -> None:
        log = open(self.work_dir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                start_new_session=True)
        proc._replaydb_log = log  # type: ignore[attr-defined]
        self.procs.append(proc)

    def status(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=5) as r:
            return json.loads(r.read().decode())

    def start(self) -> LocalCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port, self.ui_port = free_port(), free_port()
        try:
            self._launch("master", ["org.apache.spark.deploy.master.Master", "--host", HOST,
                                    "--port", str(self.port), "--webui-port",
                                    str(self.ui_port)])
            for i in range(self.workers):
                wdir = self.work_dir / f"worker-{i}"
                wdir.mkdir(exist_ok=True)
                self.worker_dirs.append(wdir)
                self._launch(f"worker-{i}", [
                    "org.apache.spark.deploy.worker.Worker", "--host", HOST,
                    "--port", str(free_port()), "--webui-port", str(free_port()),
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--work-dir", str(wdir), self.url])
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last = "no answer from the master"
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise ReplayDBError(f"a Spark process exited with {p.returncode} while "
                                        f"starting; see the logs in {self.work_dir}")
            try:
                st = self.status()
                alive = [w for w in st.get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= self.workers:
                    return
                last = f"{len(alive)} of {self.workers} workers registered"
            except OSError as exc:
                last = str(exc)
            time.sleep(0.5)
        raise ReplayDBError(f"the Spark cluster did not start in {self.start_timeout:g} s "
                            f"({last}); see the logs in {self.work_dir}")

    def stop(self) -> None:
        """Stop every process started (workers first), even half-started ones."""
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=15)
            log = getattr(p, "_replaydb_log", None)
            if log is not None:
                log.close()
        self.procs = []

    def remove(self) -> None:
        """Delete the work directory (when this object created it)."""
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.remove()
