"""A query's result: one Arrow table, the plan that produced it, and what the run recorded.

The table leaves in every form a Python user reaches for: :meth:`QueryResult.to_arrow`,
:meth:`~QueryResult.to_pandas`, :meth:`~QueryResult.to_polars`, and the Arrow PyCapsule stream
protocol (``__arrow_c_stream__``), through which Polars (``polars.DataFrame(result)``), pyarrow
(``pyarrow.table(result)``) and DuckDB (``duckdb.sql("SELECT ... FROM result")``) take the
result without a copy. In a notebook a result renders as an HTML table (``_repr_html_``).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from replaydb.errors import UsageError

HTML_ROWS = 20
"""Rows a notebook shows of a result (the rest are counted below the table)."""


@dataclass
class QueryResult:
    """``table`` (Arrow), ``plan`` (the :class:`~replaydb.planner.query.Plan` that ran) and
    ``stats`` (what the run recorded: rows, reads, timings)."""

    table: pa.Table
    plan: Any
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    def to_arrow(self) -> pa.Table:
        """The result table (no copy)."""
        return self.table

    def to_pandas(self) -> Any:
        """The result as a pandas DataFrame (one conversion, O(rows x columns))."""
        return self.table.to_pandas()

    def to_polars(self) -> Any:
        """The result as a Polars DataFrame (zero-copy where Polars can share Arrow buffers).
        Polars is an optional dependency; without it this raises a UsageError saying so."""
        try:
            import polars
        except ImportError:
            raise UsageError("to_polars() needs the polars package",
                             hint="pip install polars") from None
        return polars.DataFrame(self.table)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The Arrow PyCapsule stream protocol: the result table's batches, exported as an
        ``ArrowArrayStream`` capsule (no copy)."""
        return self.table.__arrow_c_stream__(requested_schema)

    def _repr_html_(self) -> str:
        """An HTML table of the first :data:`HTML_ROWS` rows, with the row count and the plan's
        strategy below it (Jupyter's rich display)."""
        return html_table(self.table, HTML_ROWS, footer=self._footer())

    def _footer(self) -> str:
        rows = self.table.num_rows
        parts = [f"{rows:,} row{'s' if rows != 1 else ''}"]
        strategy = getattr(self.plan, "strategy", None)
        if strategy:
            parts.append(f"plan: {strategy}")
        seconds = self.stats.get("timings", {}).get("execute")
        if seconds is not None:
            parts.append(f"executed in {seconds:.3f} s")
        return "; ".join(parts)


def html_table(tbl: pa.Table, max_rows: int, footer: str = "") -> str:
    """``tbl`` as an HTML table of at most ``max_rows`` rows (cells escaped; NULL for nulls),
    with a one-line ``footer``. O(max_rows x columns)."""
    names = tbl.column_names
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    body = []
    for row in instants_as_text(tbl.slice(0, max_rows)).to_pylist():
        cells = "".join(f"<td>{html.escape(cell_text(row[n]))}</td>" for n in names)
        body.append(f"<tr>{cells}</tr>")
    more = tbl.num_rows - min(tbl.num_rows, max_rows)
    note = f" ({more:,} more not shown)" if more else ""
    return (f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            f"<p>{html.escape(footer + note)}</p>")


def instants_as_text(tbl: pa.Table, iso: bool = False) -> pa.Table:
    """``tbl`` with every timestamp column as strings a person reads (``2001-03-01 08:00:00``,
    in the column's zone, its offset appended unless UTC), or ISO-8601 with ``iso``
    (``2001-03-01T08:00:00Z``: what JSON output writes). O(rows of those columns)."""
    from replaydb.timeunits import instant_strings

    for i, f in enumerate(tbl.schema):
        if pa.types.is_timestamp(f.type):
            tbl = tbl.set_column(i, pa.field(f.name, pa.string()),
                                 instant_strings(tbl.column(i), iso))
    return tbl


def cell_text(value: Any) -> str:
    """One cell as text in a table people read: NULL for null, floats to 6 significant
    digits."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
