"""The configuration of a pattern operator (:class:`PatternConfig`): the logical pattern
(:class:`~replaydb.operators.pattern.model.PatternSpec`, built by the MATCH_RECOGNIZE and SASE+
front-ends), the input schema and the stream's time unit.

:class:`~replaydb.operators.pattern.operator.PatternOperator` compiles and runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from replaydb.errors import QueryError
from replaydb.operators.pattern.model import PatternSpec


@dataclass(frozen=True)
class PatternConfig:
    """Frozen configuration: the logical query, the input schema, the stream's time unit."""

    spec: PatternSpec
    schema: pa.Schema
    time_unit: str | None = None

    def __post_init__(self) -> None:
        for c in ("t", "seq"):
            if c not in self.schema.names:
                raise QueryError(f"the input schema has no {c!r} column",
                                 hint="pattern operators read streams with t and seq columns")
