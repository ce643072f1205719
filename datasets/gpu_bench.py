"""``gpu-bench``: the synthetic stream of the dissertation's GPU chapter (section 4.4.1).

Definition: "Every event consists of a timestamp (64-bit unsigned integer value) and a payload of
6-dimensional 32 bit floating point values (uniformly distributed in the unit interval)."

Decisions: the timestamp is ``t = start + i`` (one event per time unit) stored as int64, the
store's time type; its values are non-negative, so they equal the paper's uint64 timestamps. The
payload ``v1..v6`` is float32 uniform in ``[0, 1)``. An event is 32 bytes.

Complexity: O(N); memory one block.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.datasets import base
from replaydb.datasets.base import ColumnInfo, DatasetInfo, ExampleQuery, OptionInfo, register
from replaydb.errors import UsageError

NAME = "gpu-bench"
BLOCK = 1 << 20
PAYLOAD = 6

SCHEMA = pa.schema(
    [pa.field("t", pa.int64(), nullable=False)]
    + [pa.field(f"v{j + 1}", pa.float32(), nullable=False) for j in range(PAYLOAD)]
)


def _blocks(events: int | None, seed: int, opts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    assert events is not None
    if opts["start"] < 0:
        raise UsageError(f"{NAME}: start must be >= 0 (the paper's timestamps are unsigned)")
    for lo, hi, rng in base.seeded_blocks(events, BLOCK, seed, NAME):
        m = BLOCK  # always a whole block, so a stream's prefix does not depend on N
        vals = rng.random((PAYLOAD, m), dtype=np.float32)
        t = np.arange(lo, lo + m, dtype=np.int64) + opts["start"]
        batch = base.batch_from_arrays(SCHEMA, [t, *vals])
        yield batch.slice(0, hi - lo)


INFO = DatasetInfo(
    name=NAME,
    kind="synthetic",
    title="GPU operator benchmark stream (timestamp + 6 float32)",
    source="dissertation 4.4.1",
    description=(
        "The stream of the GPU operator experiments: a timestamp and six float32 values "
        "uniform in [0, 1); filter selectivity is set by a threshold on one value (v1 < 0.001 "
        "selects 1/1000 of the events)."
    ),
    columns=(
        ColumnInfo("t", "int64", "events", "start + i, one event per time unit"),
        ColumnInfo("v1..v6", "float", None, "uniform [0, 1), float32"),
    ),
    time_column="t",
    time_unit="us",
    default_events=10_000_000,
    event_bytes=32,
    suggested_indexes=(),
    example_queries=(
        ExampleQuery(
            "sql",
            "SELECT window_start, window_end, COUNT(*), AVG(v2) "
            "FROM TABLE(TUMBLE(TABLE gpu_bench, DESCRIPTOR(t), 65536)) WHERE v1 < 0.001 "
            "GROUP BY window_start, window_end",
            "the filter of selectivity 1/1000 from the chapter 4 comparison, counted per window",
        ),
        ExampleQuery(
            "match_recognize",
            "SELECT * FROM gpu_bench MATCH_RECOGNIZE (ORDER BY t "
            "MEASURES FIRST(A.t) AS a_t, LAST(C.t) AS c_t "
            "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
            "PATTERN (A B* C) WITHIN 65536 "
            "DEFINE A AS A.v1 < 0.01, B AS B.v2 > PREV(B.v2), C AS C.v3 >= A.v3 + 0.5)",
            "a sequential pattern with a Kleene star over window 2^16 (cf. the running example "
            "A B* C)",
        ),
    ),
    options=(OptionInfo("start", int, 0, "timestamp of the first event"),),
    block_events=f"{BLOCK} events",
)

DATASET = register(INFO, SCHEMA, _blocks)
