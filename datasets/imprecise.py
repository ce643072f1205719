"""``imprecise``: the synthetic stream of the imprecise-timestamps paper (VLDB 2010, section 5.1).

Definition: "a stream of events of a single attribute. The events form a series of increasing
values from 1 to 1000 and once reaching 1000, wrap around to start a new series. Events arrive in
increasing order of time t but each event has an uncertainty interval [t - delta, t + delta]"
(delta, the half uncertainty interval size, 5 by default; window 100 units; queries
``SEQ(E1, .., El) where E1 % v1 = 0, ..``). "Each stream contains 0.1 to 1 million events."

Decisions: event ``i`` (``i = 0..N-1``) has ``t = start + i * step`` (``step`` 1: one event per
time unit), ``value = i mod 1000 + 1``, ``lower = t - delta``, ``upper = t + delta`` (inclusive,
uniform probability over the interval by the paper's default). The stream has no randomness; the
seed is accepted and ignored. ``type`` is ``'E'`` for every event.

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

NAME = "imprecise"
BLOCK = 1 << 18
SERIES = 1000

COLUMNS = (
    ColumnInfo("t", "int64", "units", "start + i * step (the interval's midpoint)"),
    ColumnInfo("type", "string", None, "event type, always 'E'"),
    ColumnInfo("lower", "int64", "units", "t - delta, earliest possible occurrence"),
    ColumnInfo("upper", "int64", "units", "t + delta, latest possible occurrence"),
    ColumnInfo("value", "int64", None, "i mod 1000 + 1"),
)
SCHEMA = base.arrow_schema(COLUMNS)


def _blocks(events: int | None, seed: int, opts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    assert events is not None
    delta, step = opts["delta"], opts["step"]
    if delta < 0 or step < 1:
        raise UsageError(f"{NAME}: need delta >= 0 and step >= 1, got {delta} and {step}")
    types = base.repeated_string("E", BLOCK)
    for _, lo, hi in base.block_spans(events, BLOCK):
        i = np.arange(lo, hi, dtype=np.int64)
        t = opts["start"] + i * step
        yield base.batch_from_arrays(
            SCHEMA, [t, types.slice(0, hi - lo), t - delta, t + delta, i % SERIES + 1]
        )


INFO = DatasetInfo(
    name=NAME,
    kind="synthetic",
    title="Imprecise-timestamp stream (values 1..1000 wrapping, interval [t-delta, t+delta])",
    source="imprecise timestamps paper (VLDB 2010), section 5.1",
    description=(
        "Single-attribute events with increasing values 1..1000 that wrap around; each event "
        "may have occurred anywhere in [t - delta, t + delta]. Queries SEQ(E1, .., El) with "
        "Ej.value % vj = 0 within W (100 by default) control selectivity through vj."
    ),
    columns=COLUMNS,
    time_column="t",
    time_unit="s",
    default_events=1_000_000,
    event_bytes=40,
    suggested_indexes=("value",),
    example_queries=(
        ExampleQuery(
            "sase",
            "PATTERN SEQ(E a, E b, E c) WHERE skip_till_any_match(a, b, c) "
            "{ a.value % 7 = 0 AND b.value % 11 = 0 AND c.value % 13 = 0 } WITHIN 100",
            "the paper's query shape SEQ(E1, E2, E3) with Ej.value % vj = 0, evaluated over the "
            "intervals [lower, upper]",
        ),
    ),
    options=(
        OptionInfo("delta", int, 5, "half uncertainty interval size"),
        OptionInfo("step", int, 1, "time units between consecutive events"),
        OptionInfo("start", int, 0, "timestamp of the first event"),
    ),
    block_events=f"{BLOCK} events",
    notes=("no randomness: the seed is ignored",),
)

DATASET = register(INFO, SCHEMA, _blocks)
