"""Queries over in-memory tables and Parquet files, without a store the user manages.

``replaydb.query(table, text)`` takes, in place of a store, an Arrow table, record batch or
record-batch reader, a pandas or Polars DataFrame, any object exporting an Arrow stream (the
PyCapsule protocol, a query result included), the path of a Parquet file, or a dict naming one
such source per stream (``{"flights": table}``; TPStream queries over several streams).

Semantics: the sources are appended, as :meth:`Store.append` would, to the streams of a
temporary store in a temporary directory (no secondary index), the query runs there with the
same planner, executor and operators as on any store (``plan="replay"`` unless the caller gives
another), and the directory is removed before the result is returned. The result's table lives in
memory; its ``plan`` names streams that no longer exist on disk. Events are validated and stored
exactly as an append stores them (bad rows are an error naming the row and column).

The stream a single source becomes is named after the query's FROM clause when it names one
stream, else after the ``stream`` option, else ``events``.

Cost: writing the events once (O(events x columns), sorting by time when they are not sorted)
before the full replay; for repeated queries over the same data, a store pays this once.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.errors import UsageError

DEFAULT_STREAM = "events"


@dataclass(frozen=True)
class TableOptions:
    """How a source's columns become a stream (the options of :meth:`Store.append` that create
    a stream): the time column, its unit (default: the unit of a timestamp column, else ``ms``
    with numeric times left numbers in results),
    the event type column, and the upper bound and probability columns of imprecise
    timestamps."""

    time_column: str = "t"
    time_unit: str | None = None
    type_column: str | None = None
    upper_column: str | None = None
    pmf_column: str | None = None


TABLE_OPTIONS = frozenset(f.name for f in fields(TableOptions))


def is_table_source(obj: Any) -> bool:
    """Whether ``obj`` is a source this module reads (rather than a store or a store path)."""
    if isinstance(obj, dict):
        return bool(obj) and all(isinstance(k, str) and is_table_source(v)
                                 for k, v in obj.items())
    if isinstance(obj, str | Path):
        p = Path(obj)
        return p.is_file() or (p.suffix == ".parquet" and not p.is_dir())
    if isinstance(obj, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        return True
    if type(obj).__module__.partition(".")[0] == "pandas":
        return type(obj).__name__ == "DataFrame"
    return hasattr(obj, "__arrow_c_stream__") or hasattr(obj, "to_arrow")


def query_tables(source: Any, text: str, **options: Any) -> Any:
    """Run ``text`` over ``source`` (see the module docstring); ``options`` are the query's
    (:func:`replaydb.query`) plus the fields of :class:`TableOptions`."""
    from replaydb.planner.query import detect_language, run_query
    from replaydb.store.store import Store

    table_options = TableOptions(**{k: options.pop(k) for k in list(options)
                                    if k in TABLE_OPTIONS})
    language, mod = detect_language(text)
    check_options(language, options, table_options)
    named = list(dict.fromkeys(getattr(mod.parse(text), "sources", ()) or ()))
    tables = named_sources(source, named, options.get("stream"))
    options.setdefault("plan", "replay")
    with tempfile.TemporaryDirectory(prefix="replaydb-tables-") as tmp:
        store = Store(Path(tmp) / "store", create=True)
        for name, data in tables.items():
            store.append(name, data, **append_options(data, table_options))
        return run_query(store, text, **options)


def check_options(language: str, options: dict[str, Any],
                  table_options: TableOptions) -> None:
    """Raise the UsageError an unknown or mistyped query option would raise on a store, before
    any event is written (a SASE+ query over a table with an upper column is imprecise)."""
    from replaydb.planner.options import parse_options
    from replaydb.planner.query import query_options

    if language == "sase" and table_options.upper_column is not None:
        language = "imprecise"
    parse_options(language, query_options(dict(options)).extra or {})


def named_sources(source: Any, named: list[str], stream: str | None) -> dict[str, pa.Table]:
    """The streams to create: ``{name: Arrow table}``. A single source is named after the
    query's one FROM stream (``named``: the streams its FROM clauses name), else ``stream``,
    else :data:`DEFAULT_STREAM`."""
    if isinstance(source, dict):
        return {name: as_table(data, name) for name, data in source.items()}
    if len(named) > 1:
        raise UsageError(f"the query reads {len(named)} streams ({', '.join(named)}) but one "
                         "table was given",
                         hint="pass a dict naming a table per stream: {name: table, ...}")
    name = named[0] if named else (stream or DEFAULT_STREAM)
    return {name: as_table(source, name)}


def as_table(data: Any, name: str) -> pa.Table:
    """``data`` as one Arrow table (a Parquet path is read whole; Arrow input is not copied)."""
    from replaydb.batches import as_batches

    if isinstance(data, str | Path):
        path = Path(data)
        if not path.is_file():
            raise UsageError(f"stream {name!r}: no Parquet file at {path}")
        return pq.read_table(path)
    if isinstance(data, pa.Table):
        return data
    batches = as_batches(data)
    if not batches:
        raise UsageError(f"stream {name!r}: the source has no record batches (no schema)")
    return pa.Table.from_batches(batches)


def append_options(table: pa.Table, options: TableOptions) -> dict[str, Any]:
    """Keyword options of :meth:`Store.append` creating a stream from ``table``."""
    if options.time_column not in table.column_names:
        raise UsageError(f"the table has no time column {options.time_column!r} "
                         f"(columns: {', '.join(table.column_names)})",
                         hint="pass time_column=NAME")
    unit = options.time_unit
    time_type = table.schema.field(options.time_column).type
    if unit is None and pa.types.is_timestamp(time_type):
        unit = time_type.unit
    out: dict[str, Any] = {"time_column": options.time_column}
    if unit is not None:  # else the store's default unit, and numeric times stay numbers
        out["time_unit"] = unit
    for key in ("type_column", "upper_column", "pmf_column"):
        value = getattr(options, key)
        if value is not None:
            out[key] = value
    return out
