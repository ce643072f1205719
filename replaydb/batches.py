"""Arrow input normalization shared by every layer (part of the ground floor).

The store's writer and every online operator accept the same kinds of input: an Arrow record
batch or table, a pandas data frame, any object exporting an Arrow stream (the PyCapsule protocol:
Polars, DuckDB relations, query results) or with ``to_arrow()``.
Like :mod:`replaydb.errors`, this module imports nothing else of the project but the ground floor.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from replaydb.errors import OperatorError


def as_batches(data: pa.RecordBatch | pa.Table | Any) -> list[pa.RecordBatch]:
    """Normalize Arrow input, a pandas frame or an Arrow stream exporter into record batches.

    Zero-copy for Arrow input and for PyCapsule exporters that share their buffers; a pandas
    frame is converted once (O(rows x columns)), without its index.
    Raises :class:`~replaydb.errors.OperatorError` for any other type.
    """
    if isinstance(data, pa.RecordBatch):
        return [data]
    if isinstance(data, pa.Table):
        return data.to_batches()
    if isinstance(data, pa.RecordBatchReader):
        return list(data)
    if type(data).__module__.partition(".")[0] == "pandas":
        import pandas as pd

        if isinstance(data, pd.DataFrame):
            return pa.Table.from_pandas(data, preserve_index=False).to_batches()
    if hasattr(data, "__arrow_c_stream__"):  # the Arrow PyCapsule protocol (Polars, results)
        return pa.table(data).to_batches()
    if hasattr(data, "to_arrow"):  # objects that convert themselves
        return as_batches(data.to_arrow())
    raise OperatorError(f"cannot push {type(data).__name__}: expected an Arrow batch or table")
