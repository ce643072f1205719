"""The rows a MATCH_RECOGNIZE pattern sees: ``FROM (SELECT cols FROM stream WHERE condition)``.

* :func:`rows_schema` - the subquery's columns (``t`` and ``seq``, the stream's order, always
  among them): the columns DEFINE, MEASURES and ALL ROWS PER MATCH see;
* :class:`RowFilter` - the WHERE condition over the stream's columns, applied to every batch
  before matching, so a row failing it is no row of the pattern: it neither matches nor breaks
  contiguity, and PREV/NEXT step over it. The condition sees one row (no navigation, aggregate
  or pattern variable). A replay interval's break on a row that fails it moves to the next row
  that passes.

Complexity: O(rows x condition size) per batch, vectorized.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from replaydb.errors import QueryError
from replaydb.operators import expr as ex
from replaydb.operators.pattern.buffer import arrow_to_numpy
from replaydb.operators.pattern.lowering import (
    LowerContext,
    is_local,
    lower_condition,
    to_batch_expr,
)
from replaydb.operators.pattern.typecheck import check_condition

ORDER_COLUMNS = ("t", "seq")


def rows_schema(schema: pa.Schema, columns: Sequence[str] | None) -> pa.Schema:
    """``schema`` restricted to ``columns`` (None: all), matched case-insensitively when not
    exact, with ``t`` and ``seq`` kept; an unknown column is a QueryError."""
    if columns is None:
        return schema
    ctx = LowerContext([], schema)
    keep = set(ORDER_COLUMNS) | {ctx.resolve_column(c, None) for c in columns}
    return pa.schema([f for f in schema if f.name in keep])


class RowFilter:
    """The subquery's WHERE (see the module docstring) over a stream with ``schema``."""

    def __init__(self, where: ex.Expr, schema: pa.Schema) -> None:
        ctx = LowerContext([], schema, case_insensitive_vars=True)
        low = lower_condition(where, "\x00row", ctx)
        if not is_local(low) or ctx.navs:
            raise QueryError(f"the WHERE of MATCH_RECOGNIZE's subquery may use only the row's "
                             f"own columns: {ex.to_text(where)}")
        check_condition(low, schema, where.pos)
        expr = to_batch_expr(low)
        self.columns = sorted({c.name for c in expr.walk() if isinstance(c, ex.Column)})
        self._predicate = ex.compile_predicate(expr)
        self._carry = False  # a break on a filtered-out row, for the next row that passes

    def reset(self) -> None:
        self._carry = False

    def keep(self, batch: pa.RecordBatch) -> np.ndarray:
        """Per row of ``batch``, whether it passes (NULL: it does not)."""
        env = ex.ColumnsEnv({c: arrow_to_numpy(batch.column(c)) for c in self.columns})
        r = np.asarray(self._predicate(env), dtype=np.bool_)
        return r if r.shape == (batch.num_rows,) else np.broadcast_to(r, (batch.num_rows,))

    def breaks(self, brk: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """The interval breaks of the rows kept: a kept row starts an interval when a break
        fell on it or on a dropped row since the previous kept row (of this batch or, carried,
        of earlier ones)."""
        if not len(brk):
            return np.zeros(0, dtype=np.bool_)
        count = np.cumsum(brk.astype(np.int64))
        idx = np.flatnonzero(keep)
        if not len(idx):
            self._carry = self._carry or bool(count[-1] > 0)
            return np.zeros(0, dtype=np.bool_)
        at = count[idx]
        out = at > np.concatenate(([0], at[:-1]))
        if self._carry:
            out[0] = True
        self._carry = bool(count[-1] > at[-1])
        return out
