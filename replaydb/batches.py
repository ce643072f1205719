"""Arrow input normalization shared by every layer (part of the ground floor).

The store's writer and every online operator accept the same kinds of input: an Arrow record
batch or table, a pandas data frame, or any object with ``to_arrow()`` (polars and friends).
Like :mod:`replaydb.errors`, this module imports nothing else of the project but the ground floor.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from replaydb.errors import OperatorError


def as_batches(data: pa.RecordBatch | pa.Table | Any) -> list[pa.RecordBatch]:
    """Normalize an Arrow table / record batch / pandas frame into a list of record batches.

    Zero-copy for Arrow input; a pandas frame is converted once (O(rows x columns)).
    Raises :class:`~replaydb.errors.OperatorError` for any other type.
    """
    if isinstance(data, pa.RecordBatch):
        return [data]
    if isinstance(data, pa.Table):
        return data.to_batches()
    if hasattr(data, "to_arrow") and not isinstance(data, pa.Table):  # polars and friends
        return as_batches(data.to_arrow())
    try:
        import pandas as pd

        if isinstance(data, pd.DataFrame):
            return pa.Table.from_pandas(data, preserve_index=False).to_batches()
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    raise OperatorError(f"cannot push {type(data).__name__}: expected an Arrow batch or table")
