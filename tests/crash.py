"""Crash harness: run a writer in a child process, kill it, verify the store.

Shared by the crash tests of every write path (append, ingest, index flush, compaction).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field


@dataclass
class Run:
    acked: list[str]
    returncode: int
    killed: bool
    stderr: str
    stdout: list[str] = field(default_factory=list)

    @property
    def phase(self) -> str:
        """The last ``PHASE <name>`` line the child printed (where a kill hit it)."""
        phases = [ln.split(None, 1)[1] for ln in self.stdout if ln.startswith("PHASE ")]
        return phases[-1] if phases else "start"


def _child_env(failpoint: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment plus ``extra``, with ``REPLAYDB_FAILPOINT`` set to
    ``failpoint`` (removed when None)."""
    env = dict(os.environ)
    env.pop("REPLAYDB_FAILPOINT", None)
    env.update(extra or {})
    if failpoint:
        env["REPLAYDB_FAILPOINT"] = failpoint
    return env


def _kill_after(proc: subprocess.Popen, seconds: float | None) -> bool:
    """Wait up to ``seconds`` for ``proc`` (not at all when None), then SIGKILL its process
    group; whether it was killed."""
    if seconds is None:
        return False
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return True
    return False


def _reap(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s process group if it still runs, and wait for it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_for_file(path: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


# --------------------------------------------------------------------------- extensions
# Children that announce readiness, kill timers that start then, a trial log, and the
# checks every crash test makes after a kill.

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRELUDE = f"import sys\nsys.path.insert(0, {REPO_ROOT!r})\n"
"""Prepend to a child script so it can import ``tests.*`` helpers."""

READY = "READY"


def run_after_ready(script: str, args: list[str], *, failpoint: str | None = None,
                    kill_after: float | None = None, timeout: float = 600,
                    env: dict[str, str] | None = None, ready_timeout: float = 300) -> Run:
    """Run ``script`` (Python code) in a child; kill it ``kill_after`` seconds after it prints
    ``READY`` (SIGKILL to its whole process group; after its imports, warm-up or Spark start-up,
    so ``kill_after`` measures time inside the work itself), or let a failpoint kill it. Lines
    ``ACK <id>`` the child prints are the acknowledged units of work. Output is read by threads, so a chatty child never blocks on a full pipe."""
    import threading

    proc = subprocess.Popen([sys.executable, "-c", PRELUDE + script, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_child_env(failpoint, env), start_new_session=True)
    out: list[str] = []
    err: list[str] = []
    ready = threading.Event()

    def pump_out() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            out.append(line.rstrip("\n"))
            if line.strip() == READY:
                ready.set()
        ready.set()  # the child ended (or closed stdout) without saying READY

    def pump_err() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            err.append(line)
            if len(err) > 4000:
                del err[:2000]

    threads = [threading.Thread(target=pump_out, daemon=True),
               threading.Thread(target=pump_err, daemon=True)]
    for th in threads:
        th.start()
    killed = False
    try:
        ready.wait(ready_timeout)
        killed = _kill_after(proc, kill_after)
        proc.wait(timeout=timeout)
    finally:
        _reap(proc)
        for th in threads:
            th.join(10)
    acked = [line.split(None, 1)[1] for line in out if line.startswith("ACK ")]
    if proc.returncode == -signal.SIGKILL:
        killed = True
        try:  # the whole group: a Spark JVM must not outlive its killed driver
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return Run(acked, proc.returncode, killed, "".join(err[-200:]), out)


def record_trial(path: str, **fields: object) -> None:
    """Append one trial's outcome to ``$REPLAYDB_CRASH_LOG`` (JSON lines) when it is set; the
    figures in docs/reliability.md are summed from such a log."""
    import json

    log = os.environ.get("REPLAYDB_CRASH_LOG")
    if not log:
        return
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"path": path, **fields}, sort_keys=True, default=str) + "\n")


def record_kill_trial(path: str, run: Run, present: int, *, failpoint: str | None,
                      kill_after: float | None, label: str | None) -> dict[str, object]:
    """Log a kill trial with :func:`record_trial` and return what was logged: whether the child
    was killed, the units it acknowledged and those present after the kill, the phase the kill
    hit (``finished`` when it was not killed) and how it was to be killed."""
    out: dict[str, object] = {
        "killed": run.killed, "acked": len(run.acked), "present": present,
        "phase": run.phase if run.killed else "finished",
        "failpoint": failpoint, "kill_after": kill_after, "label": label}
    record_trial(path, **out)
    return out


def table_digest(tbl: object) -> str:
    """A checksum of a table's schema and values (independent of how it is chunked)."""
    import hashlib

    import pyarrow as pa

    data = tbl.combine_chunks()  # type: ignore[attr-defined]
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write_table(data)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


def stream_digest(store: object, name: str) -> str:
    """A checksum of everything a stream shows: its events (every column, in order), its
    quarantined rows, its event count and the side tables it pins."""
    import hashlib

    snap = store.stream(name)  # type: ignore[attr-defined]
    h = hashlib.sha256(table_digest(snap.read()).encode())
    if snap.manifest.side_table("quarantine") is not None:
        q = snap.side("quarantine").read().drop(["quarantined_at"])
        h.update(repr(q.to_pylist()).encode())
    h.update(repr((snap.n_events, snap.manifest.t_min, snap.manifest.t_max,
                   [(s.name, s.version) for s in snap.manifest.side])).encode())
    return h.hexdigest()


def quarantine_counts(store: object, name: str) -> dict[str, int]:
    """Quarantined rows per batch id at the stream's latest version."""
    snap = store.stream(name)  # type: ignore[attr-defined]
    if snap.manifest.side_table("quarantine") is None:
        return {}
    ids = snap.side("quarantine").read().column("batch_id").to_pylist()
    out: dict[str, int] = {}
    for b in ids:
        out[b] = out.get(b, 0) + 1
    return out


def summarize(log: str) -> str:
    """A markdown table of a ``$REPLAYDB_CRASH_LOG``: trials, kills, how they were killed and
    whether anything was lost (a trial that lost anything fails, so it is never logged)."""
    import json
    from collections import defaultdict

    rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    readers: list[dict] = []
    with open(log, encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if r["path"] == "readers":
                readers.append(r)
                continue
            d = rows[r["path"]]
            d["trials"] += 1
            d["killed"] += bool(r.get("killed"))
            d["at a failpoint"] += bool(r.get("failpoint")) and bool(r.get("killed"))
            d["at a random time"] += bool(r.get("kill_after") is not None and r.get("killed"))
            d["mid-work"] += bool(r.get("killed")) and r.get("phase") != "done"
            d["acknowledged units"] += int(r.get("acked", 0))
    cols = ["trials", "killed", "mid-work", "at a failpoint", "at a random time",
            "acknowledged units"]
    out = ["| write path | " + " | ".join(cols) + " | lost or duplicated |",
           "|---" * (len(cols) + 2) + "|"]
    for path in sorted(rows):
        out.append(f"| {path} | " + " | ".join(str(rows[path][c]) for c in cols) + " | 0 |")
    for r in readers:
        out.append(f"\nreaders: {r['readers']} threads, {r['rounds']} checked rounds over "
                   f"{r['versions']} versions while the writer committed up to version {r['final']} "
                   f"({', '.join(r['operations'])})")
    return "\n".join(out)


if __name__ == "__main__":  # python tests/crash.py LOG
    print(summarize(sys.argv[1]))
