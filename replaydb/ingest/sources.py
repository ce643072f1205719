"""Ingestion sources: which files, in which format, read in which pieces.

A *read task* is one piece of one source file: a whole CSV or JSON-lines file, or a range of
row groups of a Parquet file (so large Parquet files are read in parallel). Tasks are read with
pyarrow inside Spark tasks, so every row keeps its source file and its row number in that file
(1-based, counting data rows only: the CSV header is not a row), which the quarantine table
records.

Formats: ``csv`` (header line required), ``json`` (JSON lines), ``parquet``, ``delta`` (a Delta
table's current data files, read as Parquet), or ``auto`` (from the file extension; a directory
with ``_delta_log`` is a Delta table; ``.gz`` is decompressed).
"""

from __future__ import annotations

import glob
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from replaydb.errors import UsageError
from replaydb.ingest.sourcefiles import (
    SourceOptions,
    expand_remote,
    file_version,
    open_random,
    open_stream,
)
from replaydb.store.location import is_remote

FORMATS = ("auto", "csv", "json", "parquet", "delta")
PARQUET_ROWS_PER_TASK = 2_000_000


@dataclass(frozen=True)
class ReadTask:
    source: int          # index of the source file
    path: str
    fmt: str
    rg_start: int = 0    # Parquet: row groups [rg_start, rg_stop)
    rg_stop: int = -1
    row_offset: int = 0  # row number of the task's first row in its file, minus one

    def as_dict(self) -> dict:
        return asdict(self)


def detect_format(path: str, fmt: str = "auto") -> str:
    if fmt != "auto":
        if fmt not in FORMATS:
            raise UsageError(f"unknown format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
        return fmt
    p = Path(path)
    if p.is_dir() and (p / "_delta_log").is_dir():
        return "delta"
    name = p.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".csv") or name.endswith(".tsv"):
        return "csv"
    if name.endswith(".json") or name.endswith(".jsonl") or name.endswith(".ndjson"):
        return "json"
    if name.endswith(".parquet") or name.endswith(".pq"):
        return "parquet"
    raise UsageError(f"cannot tell the format of {path}", hint="pass --format csv|json|parquet|delta")


def expand_sources(sources: list[str], fmt: str = "auto",
                   so: SourceOptions | None = None) -> list[tuple[str, str]]:
    """Expand globs and directories (local, or on an object store:
    :func:`~replaydb.ingest.sourcefiles.expand_remote`) into ``(path, format)`` pairs, in a
    stable order."""
    out: list[tuple[str, str]] = []
    for s in sources:
        if is_remote(s):
            uris, delta = expand_remote(s, so or SourceOptions.resolve([s]))
            out += [(u, "parquet" if delta else detect_format(u, fmt)) for u in uris]
            continue
        matches = sorted(glob.glob(s)) if any(c in s for c in "*?[") else [s]
        if not matches:
            raise UsageError(f"no file matches {s!r}")
        for m in matches:
            p = Path(m)
            if not p.exists():
                raise UsageError(f"source {m} does not exist")
            is_table = p.is_dir() and (p / "_delta_log").is_dir()
            f = "delta" if is_table and fmt == "auto" else (
                fmt if p.is_dir() else detect_format(m, fmt))
            if f == "delta":
                from deltalake import DeltaTable

                for uri in sorted(DeltaTable(str(p)).file_uris()):
                    out.append((uri.removeprefix("file://"), "parquet"))
            elif p.is_dir():
                for child in sorted(p.rglob("*")):
                    hidden = any(q.startswith((".", "_")) for q in child.relative_to(p).parts)
                    if child.is_file() and not hidden:
                        out.append((str(child), detect_format(str(child), fmt)))
            else:
                out.append((str(p.resolve()), f))
    return out


def plan_tasks(files: list[tuple[str, str]], so: SourceOptions | None = None
               ) -> list[ReadTask]:
    """Split sources into read tasks (Parquet by row-group ranges of ~2M rows)."""
    tasks: list[ReadTask] = []
    for i, (path, fmt) in enumerate(files):
        if fmt == "parquet":
            with open_random(path, so) as f:
                md = pq.ParquetFile(f).metadata
            start, rows, offset = 0, 0, 0
            for rg in range(md.num_row_groups):
                rows += md.row_group(rg).num_rows
                if rows >= PARQUET_ROWS_PER_TASK:
                    tasks.append(ReadTask(i, path, fmt, start, rg + 1, offset))
                    offset += rows
                    start, rows = rg + 1, 0
            if start < md.num_row_groups or md.num_row_groups == 0:
                tasks.append(ReadTask(i, path, fmt, start, md.num_row_groups, offset))
        else:
            tasks.append(ReadTask(i, path, fmt))
    return tasks


def read_task(task: ReadTask, column_types: dict[str, pa.DataType] | None = None,
              so: SourceOptions | None = None) -> pa.Table:
    """Read one task's rows with pyarrow. CSV columns are read with ``column_types`` where given
    and as strings otherwise, so bad values are caught per row by normalization, not by the
    reader."""
    if task.fmt == "parquet":
        with open_random(task.path, so) as f:
            pf = pq.ParquetFile(f)
            stop = pf.metadata.num_row_groups if task.rg_stop < 0 else task.rg_stop
            if stop <= task.rg_start:
                return pf.schema_arrow.empty_table()
            return pf.read_row_groups(list(range(task.rg_start, stop)))
    if task.fmt == "csv":
        delimiter = "\t" if task.path.lower().removesuffix(".gz").endswith(".tsv") else ","
        head = _csv_header(task.path, delimiter, so)
        types = {c: pa.string() for c in head}
        types.update({k: v for k, v in (column_types or {}).items() if k in types})
        with open_stream(task.path, so) as f:
            return pacsv.read_csv(
                f,
                parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=False),
                convert_options=pacsv.ConvertOptions(column_types=types, strings_can_be_null=True,
                                                     null_values=["", "NULL", "null", "NA"]),
            )
    if task.fmt == "json":
        with open_stream(task.path, so) as f:
            return pajson.read_json(f)
    raise UsageError(f"unsupported format {task.fmt}")


def _csv_header(path: str, delimiter: str, so: SourceOptions | None = None) -> list[str]:
    with open_stream(path, so) as f:
        reader = pacsv.open_csv(f, read_options=pacsv.ReadOptions(block_size=1 << 16),
                                parse_options=pacsv.ParseOptions(delimiter=delimiter),
                                convert_options=pacsv.ConvertOptions(
                                    column_types={}, strings_can_be_null=True))
        return reader.schema.names


def source_schema(path: str, fmt: str, so: SourceOptions | None = None) -> pa.Schema:
    """The Arrow schema a source is read with (CSV: every column a string, as :func:`read_task`
    reads it; JSON: as inferred from the lines of its first MiB). Reads at most a footer, a
    header line or one MiB."""
    if fmt == "parquet":
        with open_random(path, so) as f:
            return pq.read_schema(f)
    if fmt == "csv":
        delimiter = "\t" if path.lower().removesuffix(".gz").endswith(".tsv") else ","
        return pa.schema([pa.field(c, pa.string()) for c in _csv_header(path, delimiter, so)])
    if fmt == "json":
        import io

        with open_stream(path, so) as fh:
            head = fh.read(1 << 20)
        if len(head) == 1 << 20 and b"\n" in head:
            head = head[: head.rfind(b"\n") + 1]
        return pajson.read_json(io.BytesIO(head)).schema
    raise UsageError(f"unsupported format {fmt}")


def infer_schema(files: list[tuple[str, str]], so: SourceOptions | None = None) -> pa.Schema:
    """Arrow schema of the first source (CSV types inferred from its first MiB)."""
    path, fmt = files[0]
    if fmt == "parquet":
        with open_random(path, so) as f:
            return pq.ParquetFile(f).schema_arrow
    if fmt == "csv":
        delimiter = "\t" if path.lower().removesuffix(".gz").endswith(".tsv") else ","
        head = _csv_header(path, delimiter, so)
        with open_stream(path, so) as f:
            reader = pacsv.open_csv(
                f, read_options=pacsv.ReadOptions(block_size=1 << 20),
                parse_options=pacsv.ParseOptions(delimiter=delimiter),
                convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in head},
                                                     strings_can_be_null=True,
                                                     null_values=["", "NULL", "null", "NA"]))
            sample = pa.Table.from_batches([reader.read_next_batch()])
        return pa.schema([pa.field(c, infer_string_type(sample.column(c))) for c in head])
    if fmt == "json":
        with open_stream(path, so) as f:
            return pajson.read_json(f, read_options=pajson.ReadOptions(block_size=1 << 20)).schema
    raise UsageError(f"cannot infer a schema from {fmt}")


_INFER = [
    (pa.int64(), r"^\s*[+-]?\d+\s*$"),
    (pa.float64(), r"^\s*[+-]?((\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)\s*$"),
    (pa.bool_(), r"^\s*(true|false)\s*$"),
]
INFER_MAJORITY = 0.95


def infer_string_type(col: pa.ChunkedArray) -> pa.DataType:
    """The type most values of a string column parse as: int64 (all integers) or float64 when
    at least 95% of the non-null values are numbers (the rest become bad rows), else string.
    Deciding by majority keeps one bad value from turning a numeric column into text."""
    import pyarrow.compute as pc

    values = col.drop_null()
    if len(values) == 0:
        return pa.string()
    for typ, regex in _INFER:
        hits = pc.sum(pc.cast(pc.match_substring_regex(values, regex, ignore_case=True),
                              pa.int64())).as_py() or 0
        need = len(values) if typ == pa.int64() else INFER_MAJORITY * len(values)
        if hits >= need:
            return typ
    return pa.string()


def batch_fingerprint(files: list[tuple[str, str]], options: dict,
                      so: SourceOptions | None = None) -> str:
    """A batch id for an ingest: the sources' paths, sizes and modification times plus the
    options that change what is stored. Re-running the same ingest gives the same id."""
    h = hashlib.sha256()
    for path, fmt in files:
        size, mtime = file_version(path, so)
        h.update(f"{path}|{fmt}|{size}|{mtime}\n".encode())
    h.update(json.dumps(options, sort_keys=True, default=str).encode())
    return "ingest-" + h.hexdigest()[:32]
