"""GPU filter (dissertation 4.3.2): the CPU filter's semantics, predicate evaluated by a kernel.

:class:`GpuFilterOperator` takes the same :class:`~replaydb.operators.filter.FilterConfig` as
:class:`~replaydb.operators.filter.FilterOperator` and produces identical results (same rows, same
order, same schema). Per batch:

1. the predicate's columns are converted exactly as the CPU filter converts them
   (:mod:`.columns`) and copied to the device in one staged (pinned) transfer per matrix;
2. the *eval* kernel gives each thread 8 consecutive events; it runs the predicate program
   (:mod:`.exprvm`) on each and writes one byte of a hit bitmap plus its hit count;
3. an exclusive scan of the counts (:func:`~replaydb.operators.gpu.scan.exclusive_sum`) gives
   every thread its first output slot, and the *write* kernel stores the indices of its hits
   there - results are compacted on the device and come out in input order;
4. only the hit indices travel back; the host takes those rows of the Arrow batch (strings and
   every other column type stay on the host and are never copied).

Batches whose column kinds the device machine does not model fall back to the CPU code for that
batch (``counters.extra["cpu_fallback_batches"]``); features it lacks are refused when the
operator is built (:class:`~replaydb.operators.gpu.exprvm.GpuUnsupported`).

Complexity: O(batch x predicate) device work, O(batch) host work for the column conversion,
O(hits) for the result.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from numba import cuda, float64, int64

from replaydb.errors import QueryError
from replaydb.operators.base import DEFAULT_STATE_CAP, column_np
from replaydb.operators.exprcode.machine import eval_rows
from replaydb.operators.exprcode.program import Program
from replaydb.operators.filter import FilterConfig, FilterOperator
from replaydb.operators.gpu.columns import ColumnSet, Source, is_string_type
from replaydb.operators.gpu.device import TPB, DeviceArrays, Staging, blocks_for, resolve_backend
from replaydb.operators.gpu.exprvm import (
    DEPTH,
    NotCompilable,
    check_expr,
    compile_predicate,
    on_device,
)
from replaydb.operators.gpu.scan import exclusive_sum


@cuda.jit
def filter_eval(op, a, b, fc, ic, n_ops, strc, im, fm, n, bitmap, counts):  # pragma: no cover
    """One thread per 8 events: hit bitmap byte and hit count."""
    t = cuda.grid(1)
    nthr = (n + 7) // 8
    if t >= nthr:
        return
    si = cuda.local.array(DEPTH, int64)
    sf = cuda.local.array(DEPTH, float64)
    byte = 0
    c = 0
    for j in range(8):
        i = t * 8 + j
        if i < n and eval_rows(op, a, b, fc, ic, 0, n_ops, strc, im, fm, i, im, fm, i, si, sf):
            byte |= 1 << j
            c += 1
    bitmap[t] = byte
    counts[t] = c


@cuda.jit
def filter_write(bitmap, offs, nthr, out):  # pragma: no cover - runs on the device
    """Each thread writes its hits' indices from its scanned offset on (input order)."""
    t = cuda.grid(1)
    if t >= nthr:
        return
    o = offs[t]
    byte = bitmap[t]
    for j in range(8):
        if (byte >> j) & 1:
            out[o] = t * 8 + j
            o += 1


def device_filter(prog: Program, strc: np.ndarray, im: np.ndarray, fm: np.ndarray, n: int,
                  staging: Staging, dev: DeviceArrays) -> np.ndarray:
    """Indices (ascending) of the rows whose predicate holds; matrices are (columns, n)."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    d_im = staging.stage("im", im)
    d_fm = staging.stage("fm", fm)
    d_strc = staging.stage("strc", strc)
    nthr = (n + 7) // 8
    bitmap = dev.get("bitmap", nthr, np.uint8)
    counts = dev.get("counts", nthr, np.int64)
    op, a, b, fc, ic = on_device(prog)
    filter_eval[blocks_for(nthr), TPB](op, a, b, fc, ic, prog.n_ops, d_strc, d_im, d_fm, n,
                                       bitmap, counts)
    offs, total = exclusive_sum(counts, nthr, out=dev.get("offs", nthr, np.int64))
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    out = dev.get("hits", total, np.int64)
    filter_write[blocks_for(nthr), TPB](bitmap, offs, nthr, out)
    return staging.fetch(out, total)


class GpuFilterOperator(FilterOperator):
    """sigma_phi with the predicate evaluated on the GPU (see the module docstring).

    ``backend``: ``auto`` (the GPU, else the CUDA simulator when enabled, else the CPU code),
    ``cuda``, ``simulator`` or ``cpu``.
    """

    device = "gpu"

    def __init__(self, config: FilterConfig, *, state_cap: int | None = DEFAULT_STATE_CAP,
                 backend: str = "auto") -> None:
        check_expr(config.predicate, "filter")
        super().__init__(config, state_cap=state_cap)
        self.backend = resolve_backend(backend)
        self._programs: dict[Any, Program | NotCompilable] = {}
        self._staging = Staging()
        self._dev = DeviceArrays()

    def _push_batch(self, batch: pa.RecordBatch) -> None:
        if self.backend == "cpu":
            super()._push_batch(batch)
            return
        if self._schema is None:
            self._schema = self._out_schema(batch.schema)
        src = Source(batch.num_rows)
        for name in self._names:
            if name not in batch.schema.names:
                raise QueryError(f"filter: unknown column {name!r}",
                                 hint=f"columns are: {', '.join(batch.schema.names)}")
            col = batch.column(name)
            if is_string_type(col.type):
                src.add(name, col.to_numpy(zero_copy_only=False), col.type, col.null_count)
            else:
                src.add(name, column_np(batch, name), col.type, col.null_count)
        cs = ColumnSet([src])
        try:
            prog = self._program(cs)
            if prog.orders_strings and cs.string_nulls():
                raise NotCompilable("ordering strings with NULLs")
        except NotCompilable:
            self.counters.extra["cpu_fallback_batches"] = \
                self.counters.extra.get("cpu_fallback_batches", 0) + 1
            super()._push_batch(batch)
            return
        strc = cs.finish(prog.str_literals)
        im, fm = cs.matrices(0)
        idx = device_filter(prog, strc, im, fm, batch.num_rows, self._staging, self._dev)
        out = batch.take(pa.array(idx, type=pa.int64()))
        if self.config.columns is not None:
            out = out.select(list(self.config.columns))
        self._emit(out)

    def _program(self, cs: ColumnSet) -> Program:
        key = cs.signature()
        got = self._programs.get(key)
        if got is None:
            def resolve(c: Any) -> Any:
                if c.qualifier is not None:  # the CPU's ColumnsEnv rejects it: let it say so
                    raise NotCompilable("a qualified column")
                return cs.slot(0, c.name)

            try:
                got = compile_predicate(self.config.predicate, resolve)
            except NotCompilable as e:
                got = e
            self._programs[key] = got
        if isinstance(got, NotCompilable):
            raise got
        return got

    def _get_state(self) -> Any:
        return {}
