"""Row masks of conditions over one row's columns, with string columns kept in Arrow.

A condition such as ``origin = 'ORD'`` evaluated on a NumPy object array of a batch's strings
costs more than the rest of a replay: turning the column into Python objects, comparing them
and finding their NULLs. :class:`ConditionMask` evaluates each conjunct over one string column
alone once per distinct value of the column (Arrow's dictionary encoding) and gathers the
results by each row's index; the other conjuncts run on NumPy columns as before. Used by the
pattern operator's DEFINE conditions and the window operator's WHERE.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.operators.expr import Column, ColumnsEnv, and_all, compile_predicate, conjuncts


def single_string_column(e: Any, schema: pa.Schema) -> str | None:
    """The column a local condition reads, when it reads one string column of ``schema`` and
    nothing else (navigated columns are not in the schema); else None."""
    if e is None:
        return None
    names = {c.name for c in e.walk() if isinstance(c, Column)}
    if len(names) != 1:
        return None
    (name,) = names
    i = schema.get_field_index(name)
    if i < 0:
        return None
    typ = schema.field(i).type
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return name if pa.types.is_string(typ) or pa.types.is_large_string(typ) else None


class ConditionMask:
    """A condition over one row's columns as per-row booleans of a batch. Its conjuncts over
    one string column alone are evaluated once per distinct value of that column
    (:func:`predicate_by_values`), the rest over the NumPy columns of an environment; the mask
    is their AND (a row passes when every conjunct is TRUE, as when the whole condition is
    TRUE). :attr:`numpy_columns`: the columns the rest reads."""

    def __init__(self, expr: Any, schema: pa.Schema) -> None:
        by_column: dict[str, list[Any]] = {}
        rest: list[Any] = []
        for part in conjuncts(expr):
            col = single_string_column(part, schema)
            if col is None:
                rest.append(part)
            else:
                by_column.setdefault(col, []).append(part)
        self.by_values = [(c, compile_predicate(and_all(ps)))
                          for c, ps in sorted(by_column.items())]
        self.rest = compile_predicate(and_all(rest)) if rest else None
        self.numpy_columns = {c.name for p in rest for c in p.walk()
                              if isinstance(c, Column)}

    def mask(self, batch: pa.RecordBatch, env: Any, encoded: dict[str, pa.Array]
             ) -> np.ndarray:
        """The condition on every row of ``batch`` (``env``: its NumPy columns, those of
        :attr:`numpy_columns` at least; ``encoded``: the batch's dictionary-encoded string
        columns so far, shared by the masks of one batch and filled here)."""
        n = batch.num_rows
        out = np.ones(n, dtype=np.bool_)
        for col, f in self.by_values:
            if col not in encoded:
                encoded[col] = dictionary_of(batch.column(col))
            out &= predicate_by_values(f, col, encoded[col])
        if self.rest is not None:
            r = np.asarray(self.rest(env), dtype=np.bool_)
            out &= r if r.shape == (n,) else np.broadcast_to(r, (n,))
        return out


def dictionary_of(col: pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    """``col`` dictionary-encoded (as it is when it already is). O(rows)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return col if pa.types.is_dictionary(col.type) else pc.dictionary_encode(col)


def predicate_by_values(f: Any, name: str, col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``f``, a compiled predicate over column ``name`` alone (row-local and deterministic, as
    DEFINE's local conditions are), on every row of ``col``: evaluated once per distinct value
    of the column (its dictionary; NULL once when the column has nulls) and gathered by each
    row's dictionary index, so the rows' strings never become Python objects. Equal to
    ``f`` over the whole column. O(rows) vectorized plus O(distinct values) evaluation."""
    enc = dictionary_of(col)
    values = enc.dictionary.to_numpy(zero_copy_only=False).astype(object)
    idx = enc.indices
    if idx.null_count:
        values = np.append(values, None)
        idx = idx.fill_null(len(values) - 1)
    res = np.asarray(f(ColumnsEnv({name: values})), dtype=np.bool_)
    res = np.broadcast_to(res, (len(values),))
    return res[idx.to_numpy(zero_copy_only=False).astype(np.intp, copy=False)]
