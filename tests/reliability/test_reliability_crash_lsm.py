"""Crash tests: SIGKILL a writer process during flushes and compactions at random (seeded) times.

A child process applies a deterministic sequence of steps to an index (add a batch + flush,
tail rewrites through seq-range tombstones, full compactions); every commit carries its step
number in the Delta commitInfo. The parent kills the child at a random moment, reopens the
index at its latest committed version, reads the step number of that version and recomputes
the expected entries from the same deterministic generator: the index must hold exactly those
entries (nothing lost, nothing duplicated), pass the invariant checker, and accept more writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from replaydb.indexes import LSMIndex, LSMOptions

CRASH_OPTIONS = LSMOptions(
    l0_max_runs=3, size_ratio=4, l1_max_entries=40_000, row_group_entries=4096
)
BATCH = {"flush": 60_000, "compact": 25_000, "mixed": 30_000}


def step_op(seed: int, step: int, mode: str, next_seq: int) -> tuple[str, int, np.ndarray]:
    """The step-th operation: (kind, s0 for rewrites, keys of the batch)."""
    rng = np.random.default_rng([seed, step])
    n = int(rng.integers(BATCH[mode] // 2, BATCH[mode]))
    keys = rng.normal(0.0, 1.0, n).round(3)
    if mode == "compact" and step % 2 == 0:
        return "compact", 0, keys[:0]
    if mode == "mixed" and step % 3 == 2 and next_seq > 0:
        s0 = int(next_seq - rng.integers(0, min(next_seq, 5000) + 1))
        return "rewrite", s0, keys
    return "add", 0, keys


def expected_after(
    seed: int, last_step: int, mode: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The index's entries after ``last_step`` steps (keys, seqs, ts)."""
    keys = np.empty(0)
    next_seq = 0
    for step in range(1, last_step + 1):
        kind, s0, batch = step_op(seed, step, mode, next_seq)
        if kind == "compact":
            continue
        if kind == "rewrite":
            keys = keys[:s0]
            next_seq = s0
        keys = np.concatenate([keys, batch])
        next_seq += batch.size
    seqs = np.arange(keys.size, dtype=np.int64)
    return keys, seqs, seqs * 3 + 1


def apply_steps(path: str, seed: int, mode: str, first: int, last: int, log=None) -> None:
    """Run steps first..last on the index at ``path`` (the child's and the resume's loop)."""
    idx = LSMIndex.open(path)
    keys, seqs, _ = expected_after(seed, first - 1, mode)
    next_seq = int(seqs.size)
    for step in range(first, last + 1):
        kind, s0, batch = step_op(seed, step, mode, next_seq)
        md = {"step": step}
        if log:
            log(f"phase {kind} {step}")
        if kind == "compact":
            idx.compact(full=True, commit_metadata=md)
        else:
            if kind == "rewrite":
                idx.delete_from_seq(s0)
                next_seq = s0
            s = np.arange(next_seq, next_seq + batch.size, dtype=np.int64)
            idx.add(batch, s, s * 3 + 1)
            if log:
                log(f"phase flush {step}")
            idx.flush(commit_metadata=md)
            next_seq += batch.size
        if log:
            log(f"done {step} {idx.version}")


CHILD = """
import sys
sys.path.insert(0, {tests!r})
from test_reliability_crash_lsm import apply_steps
def log(msg):
    print(msg, flush=True)
apply_steps({path!r}, {seed}, {mode!r}, 1, 2, log)  # warm-up: compiled kernels loaded
log("ready")
apply_steps({path!r}, {seed}, {mode!r}, 3, 10**6, log)
"""


def crash_trial(tmp_path: Path, seed: int, mode: str) -> str:
    """One kill-and-recover trial; returns the phase the child was killed in."""
    path = str(tmp_path / f"ix-{mode}-{seed}")
    LSMIndex.create(path, "float64", options=CRASH_OPTIONS)
    code = CHILD.format(tests=str(Path(__file__).parent), path=path, seed=seed, mode=mode)
    out_path = tmp_path / f"out-{mode}-{seed}.txt"
    with open(out_path, "w") as out:
        child = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while "ready" not in out_path.read_text():
            assert child.poll() is None, out_path.read_text()
            assert time.time() < deadline
            time.sleep(0.02)
        rng = np.random.default_rng(seed)
        time.sleep(float(rng.uniform(0.0, 1.5)))
        alive = child.poll() is None
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    lines = out_path.read_text().splitlines()
    assert alive, "\n".join(lines[-20:])
    phases = [ln for ln in lines if ln.startswith("phase")]
    done = [int(ln.split()[1]) for ln in lines if ln.startswith("done")]
    last_phase = phases[-1].split()[1] if phases else "none"
    if lines and lines[-1].startswith("done"):
        last_phase = "between"

    idx = LSMIndex.open(path)
    step = int(idx.commit_info().get("step", 0))
    last_done = max(done, default=0)
    assert last_done <= step <= last_done + 1, (step, last_done)
    expected = expected_after(seed, step, mode)
    problems = idx.check(expected)
    assert problems == [], (mode, seed, step, last_phase, problems)
    assert idx.range(order="seq").seq.tolist() == expected[1].tolist()
    c = idx.count()
    assert c.low <= expected[1].size <= c.high
    idx.close()
    # the writer can go on after the crash (unreferenced files of the killed one are ignored)
    apply_steps(path, seed, mode, step + 1, step + 2)
    again = LSMIndex.open(path)
    assert again.check(expected_after(seed, step + 2, mode)) == []
    return last_phase


@pytest.mark.parametrize(("mode", "seed"), [("flush", 11), ("compact", 12), ("mixed", 13)])
def test_kill_during_writes_leaves_a_consistent_index(tmp_path, mode, seed):
    crash_trial(tmp_path, seed, mode)


@pytest.mark.slow
def test_kill_during_writes_many_trials(tmp_path):
    phases: dict[str, int] = {}
    for trial in range(24):
        mode = ("flush", "compact", "mixed")[trial % 3]
        phase = crash_trial(tmp_path, 1000 + trial, mode)
        phases[phase] = phases.get(phase, 0) + 1
    print("phases killed in:", phases)
    assert phases.get("compact", 0) >= 1 and phases.get("flush", 0) >= 1, phases
