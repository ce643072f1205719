"""Spark-side helpers that depend on no operator: the time-carrier column of partition tasks
and which Arrow types the driver can sort by.

What an operator can do in parallel (partition keys, interval safety, result order, numbering)
is declared by the operator itself (:meth:`~replaydb.operators.base.Operator.traits`,
:class:`~replaydb.operators.traits.Traits`); the engine reads it and guesses nothing.

A key group's batches (the local batches restricted to its keys) end at other times than the
local ones. This does not change any bit of a result: TPStream sums floats event by event and
continues a situation's sum across batches, so partition-parallel results equal local ones byte
for byte after sorting (tested with several tasks).
"""

from __future__ import annotations

import pyarrow as pa

CARRIER = "__c"
"""Column marking time carriers (1) among events (0) in partition tasks."""


def sortable(field_: pa.Field) -> bool:
    """Arrow types ``Table.sort_by`` can order."""
    t = field_.type
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_temporal(t) or pa.types.is_decimal(t))
