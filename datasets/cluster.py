"""``cluster``: GRETA's cluster-monitoring generator (GRETA paper, section 10, Table 2).

Definition: "cluster performance measurements for 3 hours. Each event carries a time stamp in
seconds, mapper and job identifiers, CPU, memory, and load measurements" with mapper id and job
id uniform 0-10, CPU and memory uniform 0-1k, load Poisson with lambda = 100 (range 0-10k), 3k
events per second. Query Q2 is ``SEQ(Start S, Measurement M+, End E)`` per ``[job, mapper]``.

Decisions: ids are integers uniform on ``{0..10}`` (inclusive); cpu and memory doubles uniform in
``[0, 1000)``; load ``min(Poisson(100), 10000)``; ``rate`` events per second,
``t = start + i // rate``. Event types follow a job lifecycle per (job, mapper) pair: each pair's
events, in stream order, form jobs ``Start, Measurement x M, End`` back to back, with
``M ~ Geometric`` of mean ``job_length`` (M >= 0), so every pair's type sequence matches
``(Start Measurement* End)* (Start Measurement*)?``. cpu, memory and load are drawn for every
event, also for Start and End.

Complexity: O(N) (a radix sort by pair per block), memory one block.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.datasets import base
from replaydb.datasets.base import ColumnInfo, DatasetInfo, ExampleQuery, OptionInfo, register
from replaydb.errors import UsageError

NAME = "cluster"
BLOCK = 1 << 18
TYPES = ["Start", "Measurement", "End"]
START, MEASURE, END = 0, 1, 2

COLUMNS = (
    ColumnInfo("t", "int64", "s", "start + i // rate"),
    ColumnInfo("type", "string", None, "'Start', 'Measurement' or 'End'"),
    ColumnInfo("job", "int64", None, "job id, uniform 0..ids-1 (0..10)"),
    ColumnInfo("mapper", "int64", None, "mapper id, uniform 0..ids-1 (0..10)"),
    ColumnInfo("cpu", "double", None, "CPU measurement, uniform [0, 1000)"),
    ColumnInfo("memory", "double", None, "memory measurement, uniform [0, 1000)"),
    ColumnInfo("load", "int64", None, "load, Poisson(load_mean) capped at 10000"),
)
SCHEMA = base.arrow_schema(COLUMNS)


def lifecycle_types(
    pair: np.ndarray, left: np.ndarray, rng: np.random.Generator, mean_measurements: float
) -> tuple[np.ndarray, np.ndarray]:
    """Event types for one block and the carried per-pair state.

    ``left[p]`` is the number of events still due in pair p's current job (its End included);
    0 means the pair's next event starts a job. Job lengths ``2 + M`` are drawn for all pairs at
    once (enough for the worst case of 2-event jobs), cut into per-pair runs by a segmented
    cumulative sum. O(n) for up to 65536 pairs (radix sort).
    """
    n = pair.size
    types = np.full(n, MEASURE, dtype=np.int8)
    new_left = left.copy()
    if n == 0:
        return types, new_left
    order = base.stable_order(pair)
    sp = pair[order]
    counts = np.bincount(sp, minlength=left.size)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))  # sorted index of each pair's 1st event
    k = np.arange(n) - first[sp]  # index of the event within its pair in this block
    carry = left[sp]
    in_carry = k < carry
    types_sorted = np.full(n, MEASURE, dtype=np.int8)
    types_sorted[in_carry & (k == carry - 1)] = END

    rest = np.maximum(counts - left, 0)  # events of each pair after its carried job
    pairs = np.flatnonzero(rest > 0)
    if pairs.size:
        n_jobs = rest[pairs] // 2 + 1  # a job has at least 2 events
        q = 1.0 / (mean_measurements + 1.0)
        lengths = 2 + (rng.geometric(q, int(n_jobs.sum())) - 1)
        job_pair = np.repeat(pairs, n_jobs)
        cs = np.cumsum(lengths)
        seg_first = np.concatenate(([0], np.cumsum(n_jobs)[:-1]))
        before = np.where(seg_first > 0, cs[seg_first - 1], 0)
        ends_in_pair = cs - np.repeat(before, n_jobs)  # exclusive end of each job, pair-relative
        starts_in_pair = ends_in_pair - lengths
        offset = first[job_pair] + left[job_pair]  # sorted index where the pair's new jobs begin
        limit = rest[job_pair]
        started = starts_in_pair < limit
        types_sorted[(offset + starts_in_pair)[started]] = START
        ended = ends_in_pair <= limit
        types_sorted[(offset + ends_in_pair - 1)[ended]] = END
        # carry: jobs are contiguous per pair, so the last started one is the last whose start
        # lies inside the block
        started_count = np.add.reduceat(started.astype(np.int64), seg_first)
        last_started = seg_first + started_count - 1
        new_left[pairs] = ends_in_pair[last_started] - rest[pairs]
    consumed = np.minimum(counts, left)
    carried_only = counts > 0
    new_left[carried_only & (rest == 0)] = (left - consumed)[carried_only & (rest == 0)]
    types[order] = types_sorted
    return types, new_left


def _blocks(events: int | None, seed: int, opts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    assert events is not None
    ids, rate, job_len = opts["ids"], opts["rate"], opts["job_length"]
    if ids < 1 or rate < 1:
        raise UsageError(f"{NAME}: ids and rate must be >= 1")
    if job_len < 0:
        raise UsageError(f"{NAME}: job_length must be >= 0, got {job_len}")
    left = np.zeros(ids * ids, dtype=np.int64)
    for lo, hi, rng in base.seeded_blocks(events, BLOCK, seed, NAME):
        m = BLOCK  # always a whole block, so a stream's prefix does not depend on N
        job = rng.integers(0, ids, m)
        mapper = rng.integers(0, ids, m)
        cpu = rng.uniform(0.0, 1000.0, m)
        memory = rng.uniform(0.0, 1000.0, m)
        load = np.minimum(rng.poisson(opts["load_mean"], m), 10_000)
        types, left = lifecycle_types(job * ids + mapper, left, rng, job_len)
        i = np.arange(lo, lo + m, dtype=np.int64)
        t = opts["start"] + i // rate
        batch = base.batch_from_arrays(
            SCHEMA, [t, base.strings_from_codes(TYPES, types), job, mapper, cpu, memory, load]
        )
        yield batch.slice(0, hi - lo)


INFO = DatasetInfo(
    name=NAME,
    kind="synthetic",
    title="GRETA cluster-monitoring stream (job start / measurement / end)",
    source="GRETA tech report 2017, section 10, Table 2 (query Q2)",
    description=(
        "Hadoop-style job lifecycle events per (job, mapper): Start, measurements with cpu, "
        "memory and load, End; ids uniform 0-10, cpu/memory uniform 0-1000, load Poisson(100); "
        "3000 events per second for 3 hours by default."
    ),
    columns=COLUMNS,
    time_column="t",
    time_unit="s",
    key_columns=("job", "mapper"),
    default_events=3 * 3600 * 3000,
    suggested_indexes=("type", "job", "mapper", "load"),
    example_queries=(
        ExampleQuery(
            "greta",
            "RETURN mapper, SUM(M.cpu) PATTERN SEQ(Start S, Measurement M+, End E) "
            "WHERE [job, mapper] AND M.load < NEXT(M).load "
            "GROUP-BY mapper WITHIN 1 minute SLIDE 30 seconds",
            "GRETA Q2: total CPU per mapper over increasing-load trends of a job",
        ),
    ),
    options=(
        OptionInfo("ids", int, 11, "job and mapper ids are uniform on 0..ids-1"),
        OptionInfo("rate", int, 3000, "events per second"),
        OptionInfo("job_length", float, 100.0, "mean number of measurements per job"),
        OptionInfo("load_mean", float, 100.0, "mean of the Poisson load"),
        OptionInfo("start", int, 0, "timestamp of the first event, seconds"),
    ),
    block_events=f"{BLOCK} events",
)

DATASET = register(INFO, SCHEMA, _blocks)
