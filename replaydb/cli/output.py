"""Printing results: aligned tables on a terminal, CSV/JSON/Parquet for scripts.

Long operations report progress only when standard error is a terminal (:func:`progress`), so
scripts and logs stay quiet.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from replaydb.planner.result import cell_text, instants_as_text

MAX_ROWS_ON_TERMINAL = 50


def to_jsonable(obj: Any) -> Any:
    """Make numpy scalars, Arrow tables and floats JSON-friendly."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, pa.Table):
        return [to_jsonable(r) for r in instants_as_text(obj, iso=True).to_pylist()]
    if hasattr(obj, "item") and callable(obj.item):
        return to_jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    if isinstance(obj, Path):
        return str(obj)
    return obj


def print_error(exc: Any, out: Any = None) -> None:
    """A project error as the CLI prints it: ``error: ...``, then its hint and the query
    snippet that points at the problem, when it has them."""
    out = out or sys.stderr
    print(f"error: {exc}", file=out)
    if getattr(exc, "hint", None):
        print(f"hint: {exc.hint}", file=out)
    snippet = getattr(exc, "snippet", None)
    if snippet:
        print(snippet, file=out)


def print_json(obj: Any, out: Any = None) -> None:
    out = out or sys.stdout
    json.dump(to_jsonable(obj), out, indent=2, sort_keys=False, default=str)
    out.write("\n")


MORE_ROWS_HINT = "use --output or --format csv for everything"


def format_table(tbl: pa.Table, max_rows: int | None = MAX_ROWS_ON_TERMINAL,
                 more: str = MORE_ROWS_HINT) -> str:
    """An aligned text table (numbers right-aligned), truncated to ``max_rows`` rows (``more``
    says how to see the rest)."""
    shown = instants_as_text(tbl.slice(0, max_rows) if max_rows else tbl)
    rows = shown.to_pylist()
    names = tbl.column_names
    cells = [[cell_text(r[n]) for n in names] for r in rows]
    widths = [max([len(n), *[len(c[i]) for c in cells]]) for i, n in enumerate(names)]
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in tbl.schema]
    def fmt(vals: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(vals, widths, numeric)).rstrip()
    lines = [fmt(names), fmt(["-" * w for w in widths])]
    lines += [fmt(c) for c in cells]
    if max_rows and tbl.num_rows > max_rows:
        lines.append(f"... {tbl.num_rows - max_rows:,} more rows ({tbl.num_rows:,} in all; "
                     f"{more})")
    else:
        lines.append(f"({tbl.num_rows:,} row{'s' if tbl.num_rows != 1 else ''})")
    return "\n".join(lines)


def render_table(tbl: pa.Table, fmt: str, max_rows: int | None = MAX_ROWS_ON_TERMINAL,
                 more: str = MORE_ROWS_HINT) -> str:
    """``tbl`` as text in ``fmt``: ``table`` (aligned, at most ``max_rows`` rows, ``more``
    saying how to see the rest; None: all), ``csv`` or ``json`` (every row)."""
    if fmt == "csv":
        buf = io.BytesIO()
        pacsv.write_csv(csv_ready(tbl), buf)
        return buf.getvalue().decode()
    if fmt == "json":
        rows = [json.dumps(to_jsonable(r), default=str)
                for r in instants_as_text(tbl, iso=True).to_pylist()]
        return "[\n" + ",\n".join(rows) + "\n]" if rows else "[]"
    if fmt == "table":
        return format_table(tbl, max_rows, more)
    raise ValueError(f"unknown output format {fmt!r} (table, csv, json)")


def csv_ready(tbl: pa.Table) -> pa.Table:
    """``tbl`` with every nested column (list, struct, map) as a string column of one JSON
    value per cell (CSV has no nested values; nulls stay null). O(cells of nested columns)."""
    for i, f in enumerate(tbl.schema):
        if pa.types.is_nested(f.type):
            cells = [None if v is None else json.dumps(to_jsonable(v), default=str)
                     for v in tbl.column(i).to_pylist()]
            tbl = tbl.set_column(i, pa.field(f.name, pa.string()), pa.array(cells, pa.string()))
    return tbl


def write_table(tbl: pa.Table, fmt: str, output: str | None) -> None:
    """Write a result table in ``fmt`` (table, csv, json, parquet) to ``output`` or stdout."""
    if fmt == "parquet":
        if not output:
            raise ValueError("--format parquet needs --output PATH")
        pq.write_table(tbl, output)
        return
    text = render_table(tbl, fmt, None if output else MAX_ROWS_ON_TERMINAL)
    if output:
        Path(output).write_text(text + ("\n" if not text.endswith("\n") else ""), encoding="utf-8")
    else:
        sys.stdout.write(text + ("\n" if not text.endswith("\n") else ""))


def interactive() -> bool:
    return sys.stderr.isatty()


@contextlib.contextmanager
def progress(description: str, total: int | None = None) -> Iterator[Any]:
    """A progress reporter: a rich progress bar on a terminal, silent otherwise.

    Yields an object with ``advance(n)`` and ``update(description=..., completed=...)``.
    """
    if not interactive():
        yield _Quiet()
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,}"),
                  TimeElapsedColumn(), transient=True) as prog:
        task = prog.add_task(description, total=total)
        yield _Rich(prog, task)


class _Quiet:
    def advance(self, n: int = 1) -> None:
        pass

    def update(self, **kw: Any) -> None:
        pass


class _Rich:
    def __init__(self, prog: Any, task: Any) -> None:
        self.prog, self.task = prog, task

    def advance(self, n: int = 1) -> None:
        self.prog.advance(self.task, n)

    def update(self, **kw: Any) -> None:
        self.prog.update(self.task, **kw)
