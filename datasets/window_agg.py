"""``window-agg``: the windowed-aggregation streams of the dissertation, section 3.5.2.

Definition: one week at 100 events/s (60,480,000 events), events of 16 bytes (timestamp and one
double) or 80 bytes (timestamp and nine doubles), "random data". Queries: sum, average and count
of one attribute over a one-day window, the slide varied from 10 ms to one day.

Decisions: the timestamps are exact multiples of the inter-arrival time, ``t = start +
floor(i * 1000 / rate)`` milliseconds (``i = 0..N-1``), so 100 events/s gives one event every
10 ms; the values are uniform in ``[0, 1)`` (the text says only "random"). ``attributes`` is 1
(16-byte events) or 9 (80-byte events); other counts are allowed for experiments.

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

NAME = "window-agg"
BLOCK = 1 << 18
WEEK_EVENTS = 7 * 86_400 * 100


def _schema(opts: dict[str, Any]) -> pa.Schema:
    k = opts["attributes"]
    return pa.schema(
        [pa.field("t", pa.int64(), nullable=False)]
        + [pa.field(f"A{j + 1}", pa.float64(), nullable=False) for j in range(k)]
    )


def _blocks(events: int | None, seed: int, opts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    assert events is not None
    k, rate, start = opts["attributes"], opts["rate"], opts["start"]
    if k < 1:
        raise UsageError(f"{NAME}: attributes must be >= 1, got {k}")
    if not 1 <= rate <= 1000:
        raise UsageError(f"{NAME}: rate must be 1..1000 events per second, got {rate}")
    schema = _schema(opts)
    for lo, hi, rng in base.seeded_blocks(events, BLOCK, seed, NAME):
        i = np.arange(lo, hi, dtype=np.int64)
        t = start + (i * 1000) // rate
        vals = rng.random((k, BLOCK))[:, : hi - lo]  # whole block: prefixes do not depend on N
        yield base.batch_from_arrays(schema, [t, *vals])


INFO = DatasetInfo(
    name=NAME,
    kind="synthetic",
    title="Sliding-window aggregation streams (one week at 100 events/s)",
    source="dissertation 3.5.2",
    description=(
        "Timestamped random values at a fixed rate; with attributes=1 an event is 16 bytes "
        "(t + one double), with attributes=9 it is 80 bytes. The paper aggregates A1 over a "
        "one-day window with slides from 10 ms to one day."
    ),
    columns=(
        ColumnInfo("t", "int64", "ms", "start + floor(i * 1000 / rate), i = 0..N-1"),
        ColumnInfo("A1..Ak", "double", None, "uniform [0, 1); k = attributes (1 or 9)"),
    ),
    time_column="t",
    time_unit="ms",
    default_events=WEEK_EVENTS,
    event_bytes=16,
    suggested_indexes=(),
    example_queries=(
        ExampleQuery(
            "sql",
            "SELECT window_start, window_end, SUM(A1), AVG(A1), COUNT(*) "
            "FROM TABLE(HOP(TABLE window_agg, DESCRIPTOR(t), INTERVAL '10' SECOND, "
            "INTERVAL '1' DAY)) GROUP BY window_start, window_end",
            "the paper's query: sum/avg/count of A1 over a 1-day window sliding by 10 s",
        ),
    ),
    options=(
        OptionInfo("attributes", int, 1, "number of double attributes (1: 16-byte, 9: 80-byte events)"),
        OptionInfo("rate", int, 100, "events per second (1..1000)"),
        OptionInfo("start", int, 0, "timestamp of the first event, in ms"),
    ),
    block_events=f"{BLOCK} events",
)

DATASET = register(INFO, _schema, _blocks)
