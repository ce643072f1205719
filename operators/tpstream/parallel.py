"""Parallel TPStream on one machine (dissertation 5.6): partitioned and unpartitioned streams.

**Partitioned streams** (:func:`run_partitioned`, Fig. 5.5): every partition belongs to one
worker. For a single integer key, partition ``k`` goes to worker ``k mod workers`` and the
producer *broadcasts* each input chunk - the same Arrow table to worker threads, one
shared-memory copy to worker processes - and every worker selects its own rows, so the split
runs in parallel. Otherwise partitions are assigned round-robin in order of first appearance
(``partition id % workers``) and the producer splits each chunk (one counting sort + zero-copy
slices). Each worker receives its partitions' events in ``(t, seq)`` order. Every worker runs an ordinary :class:`TPStream` operator -
one deriver and matcher state per partition, as in the sequential case - and returns its results
per chunk; the results pass a :class:`.kslack.KSlack` buffer that restores the global order
``(detection_time, detection_seq, ...)``. Workers are processes (``executor="process"``, the
default; data travels as pickled Arrow batches) or threads (``"thread"``: NumPy and the compiled
matcher release the GIL for the heavy parts).

**Unpartitioned streams** (:func:`run_unpartitioned`, Fig. 5.6): the input is cut into batches of
complete time steps; workers *derive* the situations of batches in parallel (condition
evaluation, run detection, aggregates - :meth:`.deriver.Deriver.fragments`); the coordinator
*synchronizes* them in batch order (merges situations crossing batch boundaries: the previous
batch's open tail with the next batch's head, Alg. 5.5) and *matches* each batch. Matching runs
in the coordinator while the workers derive the following batches (pipeline parallelism), so the
results are produced in order and the situation buffers need no locking; the logical addressing
of the dissertation's shared ring buffer is the operator's table of situations.

Both produce exactly the sequential operator's results (tested), in the same order.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import OperatorError
from replaydb.operators.tpstream import kernel
from replaydb.operators.tpstream.config import TPStreamConfig
from replaydb.operators.tpstream.deriver import BatchContext
from replaydb.operators.tpstream.kslack import KSlack
from replaydb.operators.tpstream.operator import TPStream
from replaydb.operators.tpstream.partitions import PartitionMap


def result_keys(config: TPStreamConfig) -> list[str]:
    """The K-slack sort key: the operator's documented result order."""
    return ["detection_time", "detection_seq", *[f"{n}_ts" for n in config.names]]


def _as_tables(source: Iterable[Any]) -> Iterator[pa.Table]:
    for b in source:
        if isinstance(b, pa.RecordBatch):
            yield pa.Table.from_batches([b])
        elif isinstance(b, pa.Table):
            yield b
        else:
            raise OperatorError(f"cannot run on {type(b).__name__}: expected Arrow batches")


def step_aligned(source: Iterable[Any], chunk_events: int) -> Iterator[pa.Table]:
    """Re-cut a stream of tables into chunks of about ``chunk_events`` events that end at a
    timestamp change (every chunk holds complete time steps)."""
    pending: list[pa.Table] = []
    size = 0
    for tab in _as_tables(source):
        if tab.num_rows == 0:
            continue
        pending.append(tab)
        size += tab.num_rows
        while size >= chunk_events:
            whole = pa.concat_tables(pending) if len(pending) > 1 else pending[0]
            t = whole.column("t").to_numpy()
            cut = int(np.searchsorted(t, t[min(chunk_events, len(t) - 1)], side="left"))
            if cut == 0:   # a single timestamp longer than the chunk: cut after it
                cut = int(np.searchsorted(t, t[0], side="right"))
                if cut == len(t):
                    pending, size = [whole], whole.num_rows
                    break
            yield whole.slice(0, cut)
            rest = whole.slice(cut)
            pending, size = [rest], rest.num_rows
    if size:
        yield pa.concat_tables(pending) if len(pending) > 1 else pending[0]


# ----------------------------------------------------------------------------- partitioned
def _own_rows(tab: pa.Table, key: str, workers: int, wid: int) -> pa.Table:
    """The rows of a broadcast chunk whose partition belongs to worker ``wid`` (key mod W)."""
    k = tab.column(key).to_numpy()
    return tab.filter(pa.array(np.mod(k, workers) == wid))


def _from_shm(name: str, layout: list[tuple[str, str, int, int]], n: int, key: str,
              workers: int, wid: int) -> pa.Table:
    """Attach a broadcast chunk in shared memory and copy out this worker's rows."""
    from multiprocessing import shared_memory

    # (spawned workers share the coordinator's resource tracker, which unlinks the block)
    shm = shared_memory.SharedMemory(name=name)
    try:
        views = {c: np.ndarray(n, dtype=np.dtype(dt), buffer=shm.buf, offset=off)
                 for c, dt, off, _ in layout}
        sel = np.flatnonzero(np.mod(views[key], workers) == wid)
        cols = {c: v[sel] for c, v in views.items()}     # copies: the views can go
        del views
    finally:
        shm.close()
    return pa.table(cols)


def _worker_loop(config: TPStreamConfig, schema: pa.Schema, state_cap: int | None,
                 inq: Any, outq: Any, wid: int, workers: int) -> None:
    try:
        op = TPStream(config, schema, state_cap=state_cap)
        op.process(schema.empty_table())      # load the compiled code before reporting ready
        op.reset()
        outq.put(("ready", wid, None))
        key = config.partition_by[0]
        busy = 0.0
        while True:
            msg = inq.get()
            if msg is None:
                t0 = time.perf_counter()
                op.flush()
                res = op.results()
                busy += time.perf_counter() - t0
                outq.put(("res", wid, res))
                outq.put(("done", wid, {"busy_s": busy, **op.stats(),
                                        "events_in": op.counters.events_in}))
                return
            t0 = time.perf_counter()
            if isinstance(msg, tuple) and msg[0] == "table":
                mine = _own_rows(msg[1], key, workers, wid)
            elif isinstance(msg, tuple) and msg[0] == "shm":
                mine = _from_shm(msg[1], msg[2], msg[3], key, workers, wid)
                outq.put(("ack", wid, msg[1]))
            else:
                mine = msg
            op.push(mine)
            res = op.results()
            busy += time.perf_counter() - t0
            if res.num_rows:
                outq.put(("res", wid, res))
    except BaseException as e:  # noqa: BLE001 - reported to the coordinator
        outq.put(("error", wid, repr(e)))


def _broadcastable(tab: pa.Table, key: str, columns: list[str], shm: bool) -> bool:
    """Can workers pick their own rows (integer key) - and, for processes, can the chunk go
    through shared memory (fixed-width columns without nulls)?"""
    kt = tab.schema.field(key).type
    if not pa.types.is_integer(kt) or tab.column(key).null_count:
        return False
    if not shm:
        return True
    for c in columns:
        f = tab.schema.field(c)
        if not (pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
                or pa.types.is_boolean(f.type)) or tab.column(c).null_count:
            return False
    return True


def _to_shm(tab: pa.Table, columns: list[str], shms: dict[str, list[Any]],
            free: list[Any]) -> tuple:
    """Copy the needed columns of a chunk into one shared-memory block (one copy for all
    workers). A block returns to ``free`` once every worker acknowledged it and is reused
    (fresh blocks cost page faults)."""
    from multiprocessing import shared_memory

    arrays = []
    for c in columns:
        a = tab.column(c).combine_chunks()
        arrays.append((c, np.ascontiguousarray(a.to_numpy(zero_copy_only=False))))
    size = max(sum(a.nbytes for _, a in arrays), 1)
    fit = [b for b in free if b.size >= size]
    if fit:
        blk = fit[0]
        free.remove(blk)
    else:
        blk = shared_memory.SharedMemory(create=True, size=size)
    layout = []
    off = 0
    for c, a in arrays:
        np.ndarray(a.shape, a.dtype, buffer=blk.buf, offset=off)[:] = a
        layout.append((c, a.dtype.str, off, a.nbytes))
        off += a.nbytes
    shms[blk.name] = [blk, 0]
    return ("shm", blk.name, layout, tab.num_rows)


def _new_workers(config: TPStreamConfig, schema: pa.Schema, state_cap: int | None,
                 workers: int, executor: str) -> tuple[list[Any], Any, list[Any]]:
    """(input queue per worker, the output queue, the workers) of ``executor`` ("process":
    spawned processes, "thread": threads), not started yet."""
    if executor == "process":
        ctx = mp.get_context("spawn")
        inqs = [ctx.Queue(maxsize=4) for _ in range(workers)]
        outq: Any = ctx.Queue()
        procs = [ctx.Process(target=_worker_loop, args=(config, schema, state_cap, inqs[w], outq,
                                                        w, workers), daemon=True)
                 for w in range(workers)]
    elif executor == "thread":
        inqs = [queue.Queue(maxsize=4) for _ in range(workers)]
        outq = queue.Queue()
        procs = [threading.Thread(target=_worker_loop, args=(config, schema, state_cap, inqs[w],
                                                             outq, w, workers), daemon=True)
                 for w in range(workers)]
    else:
        raise OperatorError(f"unknown executor {executor!r}; use process or thread")
    return inqs, outq, procs


def _by_worker(tab: pa.Table, partition_by: Sequence[str], pmap: PartitionMap, workers: int
               ) -> tuple[pa.Table, np.ndarray]:
    """The rows of ``tab`` ordered by worker (partition id mod ``workers``, stable), and the
    number of rows of each worker. O(rows)."""
    keys = []
    for c in partition_by:
        arr = tab.column(c).combine_chunks()
        if pa.types.is_integer(arr.type) and arr.null_count == 0:
            keys.append(arr.to_numpy())
        else:
            keys.append(np.asarray(arr.to_pylist(), dtype=object))
    wk = pmap.ids(keys) % workers
    order, _, _ = kernel.counting_order(wk, 0, workers)
    counts = np.bincount(wk, minlength=workers)
    return tab.take(pa.array(order)), counts


def run_partitioned(config: TPStreamConfig, source: Iterable[Any], schema: pa.Schema, *,
                    workers: int = 2, executor: str = "process", chunk_events: int = 1 << 20,
                    k_slack: int | None = None, state_cap: int | None = 10_000_000
                    ) -> tuple[pa.Table, dict[str, Any]]:
    """Run a PARTITION BY query over ``source`` with ``workers`` workers (see module docstring).

    ``k_slack``: size of the re-ordering buffer (default: unbounded - exact order at the end).
    Returns ``(results, stats)``.
    """
    if not config.partition_by:
        raise OperatorError("run_partitioned needs a PARTITION BY query; use run_unpartitioned")
    if workers < 1:
        raise OperatorError("workers must be >= 1")
    inqs, outq, procs = _new_workers(config, schema, state_cap, workers, executor)
    t_start = time.perf_counter()
    for p in procs:
        p.start()
    ready = 0
    while ready < workers:           # start-up (spawn, imports, compiled code) measured apart
        kind, wid, payload = outq.get(timeout=600)
        if kind == "error":
            raise OperatorError(f"worker {wid} failed: {payload}")
        ready += kind == "ready"
    startup_s = time.perf_counter() - t_start
    t_start = time.perf_counter()
    ks = KSlack(k_slack if k_slack is not None else 1 << 62, result_keys(config))
    out: list[pa.Table] = []
    done: dict[int, dict] = {}
    pmap = PartitionMap(config.partition_by)
    split_s = 0.0
    events = 0

    def drain(block: bool) -> None:
        while True:
            try:
                kind, wid, payload = outq.get(block=block, timeout=600 if block else None) \
                    if block else outq.get_nowait()
            except queue.Empty:
                return
            if kind == "error":
                raise OperatorError(f"worker {wid} failed: {payload}")
            if kind == "res":
                rel = ks.push(payload)
                if rel.num_rows:
                    out.append(rel)
            elif kind == "ack":
                entry = shms[payload]
                entry[1] += 1
                if entry[1] == workers:
                    free_blocks.append(entry[0])
                    del shms[payload]
            elif kind == "done":
                done[wid] = payload
            if block:
                return

    needed = ["t", "seq", *TPStream(config, schema)._needed_columns()]
    key = config.partition_by[0]
    shms: dict[str, list[Any]] = {}           # name -> [block, acks]
    free_blocks: list[Any] = []

    def put(w: int, msg: Any) -> None:
        while True:
            try:
                inqs[w].put(msg, timeout=0.05)
                return
            except queue.Full:
                drain(False)

    try:
        for tab in _as_tables(source):
            if tab.num_rows == 0:
                continue
            t0 = time.perf_counter()
            events += tab.num_rows
            if len(config.partition_by) == 1 and _broadcastable(tab, key, needed,
                                                                executor == "process"):
                # broadcast: every worker selects its partitions (key mod workers) itself
                if executor == "thread":
                    msg: Any = ("table", tab.select(needed))
                else:
                    msg = _to_shm(tab, needed, shms, free_blocks)
                split_s += time.perf_counter() - t0
                for w in range(workers):
                    put(w, msg)
                drain(False)
                continue
            sorted_tab, counts = _by_worker(tab, config.partition_by, pmap, workers)
            split_s += time.perf_counter() - t0
            pos = 0
            for w in range(workers):
                if counts[w]:
                    put(w, sorted_tab.slice(pos, int(counts[w])))
                pos += int(counts[w])
            drain(False)
        for w in range(workers):
            inqs[w].put(None)
        while len(done) < workers:
            drain(True)
        rel = ks.flush()
        if rel.num_rows:
            out.append(rel)
    finally:
        for blk in [b for b, _ in shms.values()] + free_blocks:
            blk.close()
            blk.unlink()
        for p in procs:
            p.join(timeout=5)
            if isinstance(p, mp.process.BaseProcess) and p.is_alive():
                p.terminate()
    elapsed = time.perf_counter() - t_start
    schema_out = TPStream(config, schema).output_schema
    res = pa.concat_tables(out) if out else schema_out.empty_table()
    stats = {"workers": workers, "executor": executor, "events": events, "elapsed_s": elapsed,
             "startup_s": startup_s,
             "split_s": split_s, "late_results": ks.late,
             "worker_busy_s": [done[w]["busy_s"] for w in sorted(done)],
             "partitions": len(pmap)}
    return res, stats


# ----------------------------------------------------------------------------- unpartitioned
_LOCAL: dict[str, Any] = {}


def _init_deriver(config: TPStreamConfig, schema: pa.Schema) -> None:
    _LOCAL["op"] = TPStream(config, schema)


def _derive_task(tab: pa.Table) -> Any:
    op: TPStream = _LOCAL["op"]
    cols = op._columns(pa.RecordBatch.from_pydict(
        {c: tab.column(c).combine_chunks() for c in tab.column_names}))
    return op.fragments(cols, keep_context=False)


class _ThreadDeriver:
    def __init__(self, config: TPStreamConfig, schema: pa.Schema, n: int) -> None:
        self.ops = [TPStream(config, schema) for _ in range(n)]
        self.free: queue.Queue = queue.Queue()
        for op in self.ops:
            self.free.put(op)

    def __call__(self, tab: pa.Table) -> Any:
        op = self.free.get()
        try:
            cols = op._columns(pa.RecordBatch.from_pydict(
                {c: tab.column(c).combine_chunks() for c in tab.column_names}))
            return op.fragments(cols, keep_context=False)
        finally:
            self.free.put(op)


def run_unpartitioned(config: TPStreamConfig, source: Iterable[Any], schema: pa.Schema, *,
                      workers: int = 2, executor: str = "process", chunk_events: int = 1 << 20,
                      in_flight: int | None = None, state_cap: int | None = 10_000_000
                      ) -> tuple[pa.Table, dict[str, Any]]:
    """Derive in parallel, synchronize and match in order (see module docstring).

    Partitioned queries are accepted for completeness but are derived by the coordinator
    (partition ids belong to it), so they gain nothing: use :func:`run_partitioned`.
    Returns ``(results, stats)``.
    """
    if workers < 1:
        raise OperatorError("workers must be >= 1")
    op = TPStream(config, schema, state_cap=state_cap)
    pool: Executor
    if executor == "process":
        pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"),
                                   initializer=_init_deriver, initargs=(config, schema))
        task: Any = _derive_task
    elif executor == "thread":
        pool = ThreadPoolExecutor(workers)
        task = _ThreadDeriver(config, schema, workers)
    else:
        raise OperatorError(f"unknown executor {executor!r}; use process or thread")
    in_flight = in_flight or 2 * workers
    t0 = time.perf_counter()
    warm = [pool.submit(task, schema.empty_table()) for _ in range(workers)]
    for f in warm:
        f.result()
    startup_s = time.perf_counter() - t0
    t_start = time.perf_counter()
    futures: list[tuple[pa.Table, Future]] = []
    out: list[pa.Table] = []
    sync_s = 0.0
    events = 0

    def consume_one() -> None:
        nonlocal sync_s
        tab, fut = futures.pop(0)
        fr = fut.result()
        t0 = time.perf_counter()
        if config.partition_by or (op.ll and op.aggs):
            cols = op._columns(pa.RecordBatch.from_pydict(
                {c: tab.column(c).combine_chunks() for c in tab.column_names}))
            if config.partition_by:
                # partition ids belong to the coordinator: derive here (no parallel benefit;
                # partitioned queries should use run_partitioned)
                fr = op.fragments(cols)
            else:   # low-latency partial aggregates need the batch's values
                fr.ctx = BatchContext(cols["t"], [cols[a.attr] if a.attr is not None else None
                                                  for a in op.aggs])
        op.counters.events_in += tab.num_rows
        op.consume(fr, int(tab.column("t")[-1].as_py()))
        res = op.results()
        if res.num_rows:
            out.append(res)
        sync_s += time.perf_counter() - t0

    try:
        for tab in step_aligned(source, chunk_events):
            events += tab.num_rows
            futures.append((tab, pool.submit(task, tab)))
            if len(futures) >= in_flight:
                consume_one()
        while futures:
            consume_one()
        t0 = time.perf_counter()
        op._flushed = False
        op.tail = None
        op._flush()
        res = op.results()
        if res.num_rows:
            out.append(res)
        sync_s += time.perf_counter() - t0
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    elapsed = time.perf_counter() - t_start
    res = pa.concat_tables(out) if out else op.output_schema.empty_table()
    return res, {"workers": workers, "executor": executor, "events": events,
                 "elapsed_s": elapsed, "startup_s": startup_s, "sync_match_s": sync_s,
                 **op.stats()}
