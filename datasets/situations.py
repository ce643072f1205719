"""``situations``: TPStream's synthetic situation generator (TPStream paper 6.1, dissertation 5.7.1).

Definition: "a configurable number of boolean attributes, each representing a single situation
stream. The generated situations last between 10 and 100 seconds, while the gaps between two
consecutive situations span 10 to 50 seconds (both uniformly distributed). Events are generated
with a frequency of 1Hz, so that for a situation lasting n seconds, the corresponding attribute's
value is true for exactly n consecutive events."

Decisions: durations and gaps are whole seconds drawn uniformly from the inclusive ranges
``{10..100}`` and ``{10..50}``; each attribute is an independent alternating renewal process that
starts with a gap (so streams are out of phase from the first event on); ``t = start + i``
seconds. A situation derived with TPStream's deriver (``DEFINE S AS s1``) from this stream has
exactly the drawn duration, except the first and the last one, which may be cut by the ends of
the stream.

Complexity: O(N * k) for k streams; memory one block (``BLOCK`` seconds).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.datasets import base
from replaydb.datasets.base import ColumnInfo, DatasetInfo, ExampleQuery, OptionInfo, register
from replaydb.errors import UsageError

NAME = "situations"
BLOCK = 1 << 18


def _schema(opts: dict[str, Any]) -> pa.Schema:
    return pa.schema(
        [pa.field("t", pa.int64(), nullable=False)]
        + [pa.field(f"s{j + 1}", pa.bool_(), nullable=False) for j in range(opts["streams"])]
    )


def _check(opts: dict[str, Any]) -> None:
    if opts["streams"] < 1:
        raise UsageError(f"{NAME}: streams must be >= 1, got {opts['streams']}")
    for lo, hi in (("min_duration", "max_duration"), ("min_gap", "max_gap")):
        if not 1 <= opts[lo] <= opts[hi]:
            raise UsageError(f"{NAME}: need 1 <= {lo} <= {hi}, got {opts[lo]} and {opts[hi]}")


def _fill(
    state: tuple[bool, int], m: int, rng: np.random.Generator, opts: dict[str, Any]
) -> tuple[np.ndarray, tuple[bool, int]]:
    """The next ``m`` seconds of one stream and the carried state (current value, seconds left)."""
    value, left = state
    out = np.empty(m, dtype=bool)
    k = min(left, m)
    out[:k] = value
    if k == m:
        return out, (value, left - k)
    need = m - k
    # Enough alternating intervals to cover `need` seconds, drawn in one go.
    pairs = need // (opts["min_duration"] + opts["min_gap"]) + 2
    sit = rng.integers(opts["min_duration"], opts["max_duration"] + 1, pairs)
    gap = rng.integers(opts["min_gap"], opts["max_gap"] + 1, pairs)
    first_value = not value
    lengths = np.empty(2 * pairs, dtype=np.int64)
    if first_value:  # next interval is a situation
        lengths[0::2], lengths[1::2] = sit, gap
    else:
        lengths[0::2], lengths[1::2] = gap, sit
    ends = np.cumsum(lengths)
    last = int(np.searchsorted(ends, need))  # interval containing the block's last second
    values = np.zeros(last + 1, dtype=bool)
    values[0::2] = first_value
    values[1::2] = not first_value
    seg = lengths[: last + 1].copy()
    over = int(ends[last] - need)
    seg[-1] -= over
    out[k:] = np.repeat(values, seg)
    return out, (bool(values[-1]), over)


def _blocks(events: int | None, seed: int, opts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    assert events is not None
    _check(opts)
    streams = opts["streams"]
    schema = _schema(opts)
    init = base.initial_rng(seed, NAME)
    # Every stream starts with a gap of its own random length.
    states = [
        (False, int(g)) for g in init.integers(opts["min_gap"], opts["max_gap"] + 1, streams)
    ]
    for lo, hi, rng in base.seeded_blocks(events, BLOCK, seed, NAME):
        cols: list[np.ndarray] = [np.arange(lo, hi, dtype=np.int64) + opts["start"]]
        for j in range(streams):
            # Always fill a whole block so the carried state never depends on N.
            vals, states[j] = _fill(states[j], BLOCK, rng, opts)
            cols.append(vals[: hi - lo])
        yield base.batch_from_arrays(schema, cols)


INFO = DatasetInfo(
    name=NAME,
    kind="synthetic",
    title="TPStream synthetic situation streams (1 Hz booleans)",
    source="TPStream paper 6.1; dissertation 5.7.1",
    description=(
        "One boolean attribute per situation stream; each is true for runs of 10-100 s "
        "separated by gaps of 10-50 s (uniform), one event per second. Derive the situations "
        "with DEFINE A AS s1, B AS s2, ... and match Allen relations between them."
    ),
    columns=(
        ColumnInfo("t", "int64", "s", "start + i, one event per second"),
        ColumnInfo("s1..sk", "bool", None, "situation stream j is active (k = streams)"),
    ),
    time_column="t",
    time_unit="s",
    default_events=50_000_000,
    event_bytes=None,
    suggested_indexes=(),
    example_queries=(
        ExampleQuery(
            "tpstream",
            "FROM situations DEFINE A AS s1 = TRUE, B AS s2 = TRUE, C AS s3 = TRUE "
            "PATTERN A before B AND B overlaps C WITHIN 100000 seconds "
            "RETURN first(A.t) AS a_start, last(C.t) AS c_last",
            "the paper's disconnected pattern A before B overlaps C",
        ),
        ExampleQuery(
            "tpstream",
            "FROM situations DEFINE A AS s1 = TRUE, B AS s2 = TRUE PATTERN A meets;overlaps B "
            "WITHIN 1000 seconds RETURN count(A.t) AS a_len",
            "two situation streams related by meets or overlaps",
        ),
    ),
    options=(
        OptionInfo("streams", int, 3, "number of situation streams (boolean columns s1..sk)"),
        OptionInfo("min_duration", int, 10, "shortest situation, seconds"),
        OptionInfo("max_duration", int, 100, "longest situation, seconds"),
        OptionInfo("min_gap", int, 10, "shortest gap between situations, seconds"),
        OptionInfo("max_gap", int, 50, "longest gap between situations, seconds"),
        OptionInfo("start", int, 0, "timestamp of the first event, seconds"),
    ),
    block_events=f"{BLOCK} seconds (= events)",
)

DATASET = register(INFO, _schema, _blocks)
