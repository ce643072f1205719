"""Every kernel compiles to PTX for the H100/H200 (compute capability 9.0) with the argument
types the operators really pass.

The CUDA simulator runs kernels as Python and never type-checks them. This test records the
signature of every kernel launch while the operators run in the simulator (one child process),
then compiles each recorded kernel with Numba's real CUDA target and NVVM (another child process;
no GPU needed, only NVVM; skipped without it). About a minute, in the fast suite: the kernels
run on no machine of the continuous integration, so this is what keeps them compiling.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

RECORD = """
import pickle, sys
from replaydb.operators.gpu.testing import (exercise_kernels, fast_thread_switching,
                                            record_launches, use_simulator_unless_gpu)
assert use_simulator_unless_gpu() == "simulator"
with fast_thread_switching(), record_launches() as seen:
    exercise_kernels()
with open(sys.argv[1], "wb") as fh:
    pickle.dump(seen, fh)
"""

COMPILE = """
import json, pickle, sys
from replaydb.operators.gpu.testing import compile_records
with open(sys.argv[1], "rb") as fh:
    recs = pickle.load(fh)
print(json.dumps(compile_records(recs, cc=(9, 0))))
"""


def _nvvm() -> bool:
    code = "from numba.cuda.cudadrv import nvvm; nvvm.NVVM()"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    return subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, timeout=120).returncode == 0


def test_every_recorded_kernel_compiles_to_ptx(tmp_path) -> None:  # type: ignore
    import json

    if not _nvvm():
        pytest.skip("NVVM (the CUDA toolkit's compiler library) is not installed")
    recs = tmp_path / "records.pkl"
    sim = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", RECORD, str(recs)], env=sim,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    real = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    c = subprocess.run([sys.executable, "-c", COMPILE, str(recs)], env=real,
                       capture_output=True, text=True, timeout=900)
    assert c.returncode == 0, c.stderr[-2000:]
    sizes = json.loads(c.stdout.strip().splitlines()[-1])
    modules = {k.rsplit(".", 1)[0] for k in sizes}
    assert {"replaydb.operators.gpu.scan", "replaydb.operators.gpu.join",
            "replaydb.operators.gpu.pattern_kernels"} <= modules
    assert len(sizes) >= 20 and all(v > 0 for v in sizes.values())
