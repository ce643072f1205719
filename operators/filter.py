"""Filter operator (dissertation Def. 2.10): keep the events whose payload satisfies a predicate.

``sigma_phi(E)`` is the sub-stream of events ``e`` with ``phi(e.p)`` true; events keep their
timestamp, sequence number and order. The predicate is an :mod:`replaydb.operators.expr` tree
over the stream's columns (``t`` and ``seq`` included), evaluated vectorized per batch; NULL
makes a comparison false (two-valued logic, see :mod:`replaydb.operators.expr`).

Live use::

    from replaydb.operators.expr import Binary, Column, Literal
    op = FilterOperator(FilterConfig(Binary(">", Column("v"), Literal(3))))
    op.push(batch)
    op.results()      # the events with v > 3, same columns as the input

Output schema: the input schema (or ``columns`` when given, in that order). The filter is
stateless: snapshots are empty and ``end_interval`` changes nothing.

Complexity: O(batch x predicate size), entirely in NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import QueryError
from replaydb.operators.base import DEFAULT_STATE_CAP, Operator, column_np
from replaydb.operators.expr import ColumnsEnv, Expr, columns, compile_predicate


@dataclass(frozen=True)
class FilterConfig:
    """``predicate`` over the input columns; ``schema`` (optional) fixes the output schema
    before the first batch; ``columns`` (optional) projects the output."""

    predicate: Expr | None
    schema: pa.Schema | None = None
    columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.schema is not None:
            names = set(self.schema.names)
            for c in columns(self.predicate):
                if c.name not in names:
                    raise QueryError(f"unknown column {c.name!r} in the filter predicate"
                                     + (f" (at position {c.pos})" if c.pos is not None else ""),
                                     hint=f"columns are: {', '.join(self.schema.names)}")
            for c in self.columns or ():
                if c not in names:
                    raise QueryError(f"unknown output column {c!r}")


class FilterOperator(Operator):
    """sigma_phi (see module docstring)."""

    name = "filter"
    family = "filter"
    requires_seq = False

    def __init__(self, config: FilterConfig, *, state_cap: int | None = DEFAULT_STATE_CAP) -> None:
        super().__init__(config, state_cap=state_cap)
        self._pred = compile_predicate(config.predicate)
        self._names = sorted({c.name for c in columns(config.predicate)})
        self._schema: pa.Schema | None = None
        if config.schema is not None:
            self._schema = self._out_schema(config.schema)

    def _out_schema(self, schema: pa.Schema) -> pa.Schema:
        if self.config.columns is None:
            return schema
        return pa.schema([schema.field(c) for c in self.config.columns])

    @property
    def output_schema(self) -> pa.Schema:
        if self._schema is None:
            raise QueryError("filter: the output schema is known after the first batch; "
                             "pass FilterConfig(schema=...) to know it earlier")
        return self._schema

    def results(self) -> pa.Table:
        if self._schema is None and not self._out:
            return pa.table({})
        return super().results()

    def _push_batch(self, batch: pa.RecordBatch) -> None:
        if self._schema is None:
            self._schema = self._out_schema(batch.schema)
        cols: dict[str, np.ndarray] = {}
        for n in self._names:
            if n not in batch.schema.names:
                raise QueryError(f"filter: unknown column {n!r}",
                                 hint=f"columns are: {', '.join(batch.schema.names)}")
            col = batch.column(n)
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                cols[n] = col.to_numpy(zero_copy_only=False)
            else:
                cols[n] = column_np(batch, n)
        r = self._pred(ColumnsEnv(cols))
        mask = np.broadcast_to(np.asarray(r, dtype=bool), (batch.num_rows,))
        out = batch.filter(pa.array(mask))
        if self.config.columns is not None:
            out = out.select(list(self.config.columns))
        self._emit(out)

    def _flush(self) -> None:
        return None

    def _reset_state(self) -> None:
        return None

    def _get_state(self) -> Any:
        return {}

    def _set_state(self, state: Any) -> None:
        return None
