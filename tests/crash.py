"""Crash harness: run a writer in a child process, kill it, verify the store.

Shared by the crash tests of every write path (append, ingest, index flush, compaction).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass
class Run:
    acked: list[str]
    returncode: int
    killed: bool
    stderr: str


def run_and_kill(script: str, args: list[str], *, failpoint: str | None = None,
                 kill_after: float | None = None, timeout: float = 300) -> Run:
    """Run ``script`` (Python code) in a child; kill it after ``kill_after`` seconds (SIGKILL to
    its whole process group) or let a failpoint kill it. Lines ``ACK <id>`` the child prints
    are the acknowledged units of work."""
    env = dict(os.environ)
    env.pop("REPLAYDB_FAILPOINT", None)
    if failpoint:
        env["REPLAYDB_FAILPOINT"] = failpoint
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    killed = False
    try:
        if kill_after is not None:
            try:
                proc.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    acked = [line.split(None, 1)[1] for line in out.splitlines() if line.startswith("ACK ")]
    if proc.returncode == -signal.SIGKILL:
        killed = True
    return Run(acked, proc.returncode, killed, err)


def wait_for_file(path: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
