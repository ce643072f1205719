"""Turn an input table into the stream's stored form, row by row validated (vectorized).

Used by the in-process append path and, per partition, by the Spark ingestion job, so both apply
exactly the same rules. Output: the *good* rows as a table ``t, attributes...`` (no ``seq`` yet) and
the *bad* rows as quarantine records (row number, column, reason, the raw row as JSON).

Policies (documented decisions):

* Time column: integers are counts of ``source_unit`` (default: the stream's unit) since the epoch;
  floats likewise (floored); timestamps and dates of any unit and time zone are converted to UTC
  epoch counts of the stream's unit (floored when the source is finer); strings are parsed with
  ``time_format`` (``strptime`` syntax) or, without one, as ISO 8601. Missing or unparsable time ->
  bad row (``missing time`` / ``unparsable time``).
* Attributes: a value that cannot be cast to the column's kind (``'abc'`` in a float column, ``2.5``
  in an int column) -> bad row ``wrong type``. Null in a non-nullable column -> ``null value``.
* NaN / +-inf in a numeric column: per column ``nan_policy`` - ``reject`` (bad row ``NaN value`` /
  ``infinite value``), ``null`` (stored as null) or ``allow``.
* Columns: a source column the stream does not have -> :class:`SchemaError` (schema drift is an
  explicit decision: add the column to the stream first) unless ``extra="ignore"``; a missing
  nullable column is filled with nulls, a missing non-nullable column is an error.
* Duplicates (rows equal in every stored column): ``keep`` (default), ``drop`` or ``quarantine``
  - within the batch being normalized.

Complexity: O(rows x columns), all in Arrow compute / NumPy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.errors import DataError, SchemaError
from replaydb.store.schema import Attribute, StreamSchema
from replaydb.timeunits import UNITS

QUARANTINE_SCHEMA = pa.schema([
    ("batch_id", pa.string()),
    ("source", pa.string()),
    ("row", pa.int64()),
    ("column", pa.string()),
    ("reason", pa.string()),
    ("raw", pa.string()),
])

_NUM_RE = r"^\s*[+-]?((\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)\s*$"
_INT_RE = r"^\s*[+-]?\d+\s*$"


@dataclass
class Normalized:
    """Result of :func:`normalize`: good rows (``t`` + attributes, input order kept), the input
    row numbers of the good rows, and quarantine records of the bad ones."""

    good: pa.Table
    good_rows: np.ndarray
    bad: pa.Table

    @property
    def n_bad(self) -> int:
        return self.bad.num_rows


class _Bad:
    """Collects (row, column, reason) for rows found bad; the first reason per row wins."""

    def __init__(self, n: int) -> None:
        self.mask = np.zeros(n, dtype=bool)
        self.rows: list[np.ndarray] = []
        self.cols: list[str] = []
        self.reasons: list[str] = []

    def add(self, mask: np.ndarray, column: str, reason: str) -> None:
        new = mask & ~self.mask
        if new.any():
            self.rows.append(np.nonzero(new)[0])
            self.cols.append(column)
            self.reasons.append(reason)
            self.mask |= new

    def first(self) -> tuple[int, str, str] | None:
        best: tuple[int, str, str] | None = None
        for rows, col, reason in zip(self.rows, self.cols, self.reasons):
            r = int(rows[0])
            if best is None or r < best[0]:
                best = (r, col, reason)
        return best


def _chunk(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def convert_time(arr: pa.Array, unit: str | None, source_unit: str | None = None,
                 time_format: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Convert a time column to int64 counts of ``unit``.

    Returns ``(values, missing_mask, unparsable_mask)``; bad entries hold 0 in ``values``.
    """
    n = len(arr)
    missing = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool) \
        if arr.null_count else np.zeros(n, dtype=bool)
    unparsable = np.zeros(n, dtype=bool)
    typ = arr.type
    target_ns = UNITS[unit] if unit else 1
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        if time_format:
            parsed = pc.strptime(arr, format=time_format, unit="ns", error_is_null=True)
        else:
            numeric = pc.fill_null(pc.match_substring_regex(arr, r"^\s*[+-]?\d+(\.\d*)?\s*$"),
                                   False)
            if pc.any(numeric).as_py():
                # epoch counts written as text (CSV): numbers in the source unit
                trimmed = pc.utf8_trim_whitespace(arr)
                null = pa.scalar(None, pa.string())
                ints = pc.fill_null(pc.match_substring_regex(arr, r"^\s*[+-]?\d{1,18}\s*$"),
                                    False)
                vi, _, _ = convert_time(pc.cast(pc.if_else(ints, trimmed, null), pa.int64()),
                                        unit, source_unit)
                floats = pc.and_(numeric, pc.invert(ints))
                vf, _, bad_num = convert_time(pc.cast(pc.if_else(floats, trimmed, null),
                                                      pa.float64()), unit, source_unit)
                v = np.where(np.asarray(ints.to_numpy(zero_copy_only=False), dtype=bool), vi, vf)
                iso = parse_iso(pc.if_else(numeric, pa.scalar(None, pa.string()), arr))
                inull = np.asarray(iso.is_null().to_numpy(zero_copy_only=False), dtype=bool)
                num = np.asarray(numeric.to_numpy(zero_copy_only=False), dtype=bool)
                ns = pc.cast(pc.fill_null(iso, 0), pa.int64()).to_numpy(zero_copy_only=False)
                vals = np.where(num, v, np.floor_divide(ns.astype(np.int64), target_ns))
                unparsable = ((~num & inull) | (num & bad_num)) & ~missing
                return np.where(unparsable, 0, vals), missing, unparsable
            parsed = parse_iso(arr)
        pnull = np.asarray(parsed.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        unparsable = pnull & ~missing
        ns = pc.cast(pc.fill_null(pc.cast(parsed, pa.timestamp("ns")), 0), pa.int64())
        vals = np.floor_divide(np.asarray(ns.to_numpy(zero_copy_only=False), dtype=np.int64),
                               target_ns)
        return vals, missing, unparsable
    if pa.types.is_timestamp(typ) or pa.types.is_date(typ):
        if pa.types.is_date(typ):
            arr = pc.cast(arr, pa.timestamp("s"))
            typ = arr.type
        src_ns = UNITS[typ.unit]
        raw = pc.cast(pc.fill_null(pc.cast(arr, pa.timestamp(typ.unit)), 0), pa.int64())
        v = np.asarray(raw.to_numpy(zero_copy_only=False), dtype=np.int64)
        return _rescale(v, src_ns, target_ns), missing, unparsable
    if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        src_ns = UNITS[source_unit] if source_unit else target_ns
        if pa.types.is_integer(typ):
            v = np.asarray(pc.fill_null(arr, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
            return _rescale(v, src_ns, target_ns), missing, unparsable
        f = np.asarray(pc.cast(pc.fill_null(arr, 0), pa.float64()).to_numpy(zero_copy_only=False))
        bad = ~np.isfinite(f)
        unparsable |= bad & ~missing
        f = np.where(bad, 0.0, f)
        return np.floor(f * (src_ns / target_ns)).astype(np.int64), missing, unparsable
    raise SchemaError(f"time column has unsupported type {typ}")


_ISO = (r"^\s*\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?"
        r"(Z|[+-]\d{2}:?\d{2})?\s*$")
_ZONE = r"(Z|[+-]\d{2}:?\d{2})\s*$"


def parse_iso(arr: pa.Array) -> pa.Array:
    """ISO 8601 strings -> ``timestamp[ns]`` (UTC); times without a zone are taken as UTC;
    anything else -> null."""
    ok = pc.fill_null(pc.match_substring_regex(arr, _ISO), False)
    zoned = pc.and_(ok, pc.fill_null(pc.match_substring_regex(arr, _ZONE), False))
    naive = pc.and_(ok, pc.invert(zoned))
    trimmed = pc.utf8_trim_whitespace(arr)
    null = pa.scalar(None, pa.string())
    out = _cast_or_null(pc.if_else(naive, trimmed, null), pa.timestamp("ns"))
    if pc.any(zoned).as_py():
        z = pc.cast(_cast_or_null(pc.if_else(zoned, trimmed, null), pa.timestamp("ns", tz="UTC")),
                    pa.timestamp("ns"))
        out = pc.if_else(zoned, z, out)
    return out


def _cast_or_null(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    """``pc.cast`` that turns values it cannot convert into nulls instead of failing the whole
    array (strings shaped like ISO times but out of range: month 13, hour 99, 30 February).
    Halves the array around failures: vectorized, plus O(bad values x log n) extra casts."""
    try:
        return pc.cast(arr, typ)
    except (pa.ArrowInvalid, OverflowError):
        if len(arr) <= 1:
            return pa.nulls(len(arr), typ)
        mid = len(arr) // 2
        return pa.concat_arrays([_cast_or_null(arr.slice(0, mid), typ),
                                 _cast_or_null(arr.slice(mid), typ)])


def _rescale(v: np.ndarray, src_ns: int, dst_ns: int) -> np.ndarray:
    if src_ns == dst_ns:
        return v
    if src_ns > dst_ns:
        return v * (src_ns // dst_ns)
    return np.floor_divide(v, dst_ns // src_ns)


def _cast_attribute(arr: pa.Array, attr: Attribute, bad: _Bad) -> pa.Array:
    """Cast ``arr`` to the attribute's type, marking rows whose value does not fit."""
    target = attr.arrow_type
    typ = arr.type
    if typ == target:
        out = arr
    elif pa.types.is_null(typ):
        out = pa.nulls(len(arr), target)
    elif attr.kind == "string":
        out = pc.cast(arr, pa.string()) if not pa.types.is_dictionary(typ) else \
            pc.cast(arr.dictionary_decode() if hasattr(arr, "dictionary_decode") else arr,
                    pa.string())
    elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
        regex = _INT_RE if attr.kind == "int64" else _NUM_RE
        if attr.kind == "bool":
            lowered = pc.utf8_lower(pc.utf8_trim_whitespace(arr))
            ok = pc.or_(pc.is_in(lowered, pa.array(["true", "false", "1", "0"])),
                        pc.is_null(arr))
            okn = np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
            bad.add(~okn, attr.name, "wrong type")
            out = pc.is_in(lowered, pa.array(["true", "1"]))
            out = pc.if_else(pc.is_null(arr), pa.scalar(None, pa.bool_()), out)
        else:
            ok = pc.fill_null(pc.match_substring_regex(arr, regex, ignore_case=True), True)
            okn = np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
            bad.add(~okn, attr.name, "wrong type")
            cleaned = pc.if_else(ok, pc.utf8_trim_whitespace(arr), pa.scalar(None, pa.string()))
            out = pc.cast(cleaned, target)
    elif attr.kind == "int64" and pa.types.is_floating(typ):
        f = np.asarray(pc.fill_null(arr, 0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
        fits = np.isfinite(f) & (np.floor(f) == f) & (np.abs(f) < 2.0**63)
        notnull = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        bad.add(notnull & ~fits, attr.name, "wrong type")
        vals = np.where(fits, f, 0).astype(np.int64)
        out = pa.array(vals, pa.int64(), mask=~notnull)
    elif pa.types.is_timestamp(typ) or pa.types.is_date(typ):
        out = pc.cast(pc.cast(arr, pa.timestamp("us")), pa.int64()) if attr.kind == "int64" \
            else pc.cast(arr, pa.string())
    else:
        try:
            out = pc.cast(arr, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaError(f"cannot store {typ} as {attr.kind}: {exc}", column=attr.name) \
                from None
    if not attr.nullable and out.null_count:
        nulls = np.asarray(out.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        bad.add(nulls, attr.name, "null value")
    if attr.kind == "float64" and len(out):
        f = np.asarray(pc.fill_null(out, 0.0).to_numpy(zero_copy_only=False))
        nan, inf = np.isnan(f), np.isinf(f)
        if nan.any() or inf.any():
            if attr.nan_policy == "reject":
                bad.add(nan, attr.name, "NaN value")
                bad.add(inf, attr.name, "infinite value")
            elif attr.nan_policy == "null":
                mask = np.asarray(out.is_null().to_numpy(zero_copy_only=False), dtype=bool)
                out = pa.array(np.where(nan | inf, 0.0, f), pa.float64(), mask=mask | nan | inf)
    return out


def normalize(
    table: pa.Table,
    schema: StreamSchema,
    *,
    time_column: str | None = None,
    source_unit: str | None = None,
    time_format: str | None = None,
    extra: str = "error",
    duplicates: str = "keep",
    batch_id: str | None = None,
    source: str | None = None,
    row_offset: int = 0,
    row_numbers: np.ndarray | None = None,
) -> Normalized:
    """Validate and convert ``table`` (see the module docstring). ``row_offset`` is added to row
    numbers in quarantine records (or give explicit ``row_numbers``, e.g. a source file's)."""
    if extra not in ("error", "ignore"):
        raise SchemaError("extra must be 'error' or 'ignore'")
    if duplicates not in ("keep", "drop", "quarantine"):
        raise SchemaError("duplicates must be keep, drop or quarantine")
    tcol = time_column or schema.time_column
    names = table.column_names
    if tcol not in names:
        if "t" in names and tcol != "t":
            tcol = "t"
        else:
            raise SchemaError(f"time column {tcol!r} not in the input (columns: {', '.join(names)})",
                              column=tcol)
    known = set(schema.names) | {tcol, "seq"}
    unknown = [c for c in names if c not in known]
    if unknown and extra == "error":
        raise SchemaError(
            f"input has columns the stream does not: {', '.join(unknown)}",
            column=unknown[0],
            hint="add them to the stream first (schema evolution), or pass extra='ignore' "
                 "(replaydb ingest --extra ignore)",
        )
    n = table.num_rows
    bad = _Bad(n)
    t, missing, unparsable = convert_time(_chunk(table.column(tcol)), schema.time_unit,
                                          source_unit, time_format)
    bad.add(missing, tcol, "missing time")
    bad.add(unparsable, tcol, "unparsable time")
    cols: dict[str, pa.Array] = {"t": pa.array(t, pa.int64())}
    for attr in schema.attributes:
        if attr.name not in names:
            if not attr.nullable:
                raise SchemaError(f"input lacks the non-nullable column {attr.name!r}",
                                  column=attr.name)
            cols[attr.name] = pa.nulls(n, attr.arrow_type)
            continue
        cols[attr.name] = _cast_attribute(_chunk(table.column(attr.name)), attr, bad)
    out = pa.table(cols)
    if duplicates != "keep" and n > 1:
        dup = _duplicate_mask(out)
        if duplicates == "quarantine":
            bad.add(dup, "*", "duplicate row")
        else:
            bad.mask |= dup & ~bad.mask
    rows = (np.arange(n, dtype=np.int64) + row_offset) if row_numbers is None \
        else np.asarray(row_numbers, dtype=np.int64)
    good_idx = np.nonzero(~bad.mask)[0]
    good = out.take(pa.array(good_idx)) if len(good_idx) < n else out
    return Normalized(good, rows[good_idx], _quarantine_rows(table, bad, rows, batch_id, source))


def _duplicate_mask(tbl: pa.Table) -> np.ndarray:
    """True for every row equal (in all columns) to an earlier row."""
    keys = tbl.append_column("__i", pa.array(np.arange(tbl.num_rows)))
    g = keys.group_by(tbl.column_names, use_threads=False).aggregate([("__i", "min")])
    firsts = np.asarray(g.column("__i_min").to_numpy(), dtype=np.int64)
    mask = np.ones(tbl.num_rows, dtype=bool)
    mask[firsts] = False
    return mask


def _quarantine_rows(src: pa.Table, bad: _Bad, rows: np.ndarray, batch_id: str | None,
                     source: str | None) -> pa.Table:
    if not bad.rows:
        return QUARANTINE_SCHEMA.empty_table()
    idx_parts, col_parts, reason_parts = [], [], []
    for r, c, reason in zip(bad.rows, bad.cols, bad.reasons):
        idx_parts.append(r)
        col_parts.append(np.full(len(r), c, dtype=object))
        reason_parts.append(np.full(len(r), reason, dtype=object))
    idx = np.concatenate(idx_parts)
    order = np.argsort(idx, kind="stable")
    idx = idx[order]
    raw_rows = src.take(pa.array(idx)).to_pylist()
    raw = [json.dumps(r, default=str, sort_keys=True) for r in raw_rows]
    return pa.table({
        "batch_id": pa.array([batch_id] * len(idx), pa.string()),
        "source": pa.array([source] * len(idx), pa.string()),
        "row": pa.array(rows[idx], pa.int64()),
        "column": pa.array(np.concatenate(col_parts)[order], pa.string()),
        "reason": pa.array(np.concatenate(reason_parts)[order], pa.string()),
        "raw": pa.array(raw, pa.string()),
    }, schema=QUARANTINE_SCHEMA)


def first_error(norm: Normalized) -> DataError | None:
    """The first bad row as a :class:`DataError` (for strict mode), or None."""
    if norm.n_bad == 0:
        return None
    rec = norm.bad.slice(0, 1).to_pylist()[0]
    return DataError(rec["reason"], row=rec["row"], column=rec["column"], source=rec["source"],
                     hint="fix the row, or ingest with quarantine to set bad rows aside")
