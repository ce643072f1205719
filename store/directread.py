"""Reads of whole row groups of a data file without Arrow's Parquet reader.

An index plan reads a few leaves (row groups) at a time from many files. Arrow's
``read_row_groups`` pays a fixed cost per call and per row group (schema resolution, a reader
per column chunk, building the table) that dwarfs the decoding of a small leaf.
:class:`DirectFile` locates each column chunk from the footer once (the footer Arrow already
parsed), and decodes the chunks of one read in one compiled call
(:func:`.pagecodec.read_columns`) straight from the memory-mapped file (or, for a store on an
object store, from the buffer of the chunks fetched, :mod:`.remotefile`); the Python around it
is a handful of calls per read, as each NumPy or Arrow call has a fixed cost.

It decodes what the store writes (:func:`.deltaio.column_layout`: delta-packed integer
columns, PLAIN values under snappy or none, dictionary-coded strings) and the other common
fixed-width and byte-array layouts (:mod:`.stringcodec`); a column it does not decode
(booleans, fixed-width dictionary pages, data pages v2, other codecs, nested columns) or a
chunk that does not parse makes :meth:`DirectFile.read` answer None, and the caller reads
through Arrow - which also reports a corrupt file properly. The result equals
Arrow's: the same columns in the order asked, the file's field types and nullability, nulls
where the file has them.

Thread-safe: the per-chunk locations are filled under a lock (the offset last, so a reader
never sees a half-filled chunk); decoding allocates its own buffers. Data files are immutable:
the map stays valid when vacuum unlinks a file, but a file truncated in place by someone else
while it is mapped would fault the process (as it would for the memory-mapped index runs).
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.store import pagecodec, stringcodec

_WIDTH = {"INT64": 8, "DOUBLE": 8, "INT32": 4, "FLOAT": 4, "BYTE_ARRAY": 0}
"""Bytes per value of the physical types decoded; 0 for byte arrays (heap slots)."""
_CODECS = {"UNCOMPRESSED": pagecodec.CODEC_NONE, "SNAPPY": pagecodec.CODEC_SNAPPY}
_UNKNOWN = -1
_NO = -2
_EMPTY = np.zeros(0, np.uint8)


class DirectFile:
    """Direct reads of one data file (see the module docstring).

    Per column it keeps whether it can be decoded (physical width and Arrow type agree, flat,
    at most one definition level); per (row group, column) the chunk's offset, size, codec and
    uncompressed size, filled on first use (one lookup in the parsed footer each), so a file
    of which a query reads three leaves costs three lookups, not the whole footer's.
    Invariant (:meth:`check`): a known chunk lies inside the file."""

    def __init__(self, path: str, pf: pq.ParquetFile, buffer: np.ndarray | None = None
                 ) -> None:
        self.path = path
        md = pf.metadata
        self._md = md
        schema = pf.schema_arrow
        self._fields = {f.name: f for f in schema}
        self._metadata = schema.metadata
        self._col: dict[str, int] = {}
        self._width: dict[str, int] = {}
        self._optional: dict[str, bool] = {}
        self._byte_cols: set[int] = set()
        flat = md.num_columns == len(schema)
        for c in range(md.num_columns if flat else 0):
            col = md.schema.column(c)
            name = col.path
            f = self._fields.get(name)
            w = _WIDTH.get(col.physical_type)
            if (f is None or w is None or col.max_repetition_level != 0
                    or col.max_definition_level > 1 or not _fixed(f.type, w)):
                continue
            self._col[name] = c
            self._width[name] = w
            self._optional[name] = col.max_definition_level == 1
            if w == 0:
                self._byte_cols.add(c)
        n_rg = md.num_row_groups
        self._rows = np.full(n_rg, _UNKNOWN, np.int64)
        self._start = np.full((n_rg, md.num_columns), _UNKNOWN, np.int64)
        self._size = np.zeros((n_rg, md.num_columns), np.int64)
        self._usize = np.zeros((n_rg, md.num_columns), np.int64)
        self._codec = np.zeros((n_rg, md.num_columns), np.int64)
        self._plans: dict[tuple[str, ...], tuple | None] = {}
        self._lock = threading.Lock()
        if buffer is not None:  # a file of an object store, its chunks fetched before reads
            self._buf = buffer
            return
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        self._buf = np.frombuffer(mm, np.uint8) if mm is not None else _EMPTY

    def supports(self, columns: Sequence[str]) -> bool:
        """Whether every column of ``columns`` is one this reader decodes."""
        return all(c in self._col for c in columns)

    def _fill(self, groups: np.ndarray, cols: list[int]) -> None:
        """Locate the chunks of ``groups`` x ``cols`` not located yet, from the footer."""
        md = self._md
        with self._lock:
            for g in groups.tolist():
                rg = None
                if self._rows[g] == _UNKNOWN:
                    rg = md.row_group(g)
                    self._rows[g] = rg.num_rows
                for c in cols:
                    if self._start[g, c] != _UNKNOWN:
                        continue
                    if rg is None:
                        rg = md.row_group(g)
                    cm = rg.column(c)
                    codec = _CODECS.get(cm.compression)
                    start = cm.data_page_offset
                    size = cm.total_compressed_size
                    paged = cm.has_dictionary_page
                    if paged and c in self._byte_cols:  # the chunk starts at its dictionary
                        start = cm.dictionary_page_offset
                        paged = start is None or start <= 0 or start > cm.data_page_offset
                    if (codec is None or paged or start < 0 or size < 0
                            or start + size > self._buf.size):
                        self._start[g, c] = _NO
                        continue
                    self._size[g, c] = size
                    self._usize[g, c] = cm.total_uncompressed_size
                    self._codec[g, c] = codec
                    self._start[g, c] = start

    def _plan(self, columns: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                      pa.Schema] | None:
        """Column indices, widths, optional flags and result schema of a column tuple."""
        got = self._plans.get(columns, False)
        if got is False:
            if self.supports(columns):
                fields = [self._fields[c] for c in columns]
                got = (np.array([self._col[c] for c in columns], np.int64),
                       np.array([self._width[c] for c in columns], np.int64),
                       np.array([self._optional[c] for c in columns], np.bool_),
                       pa.schema(fields, metadata=self._metadata))
                got = _interned(columns, got)
            else:
                got = None
            self._plans[columns] = got
        return got

    def read(self, groups: Sequence[int] | np.ndarray, columns: Sequence[str]
             ) -> pa.Table | None:
        """Row groups ``groups`` (in that order) of ``columns`` as one table equal to Arrow's
        ``read_row_groups(groups, columns)``, or None when a column or chunk is not one this
        reader decodes. O(bytes of the chunks read)."""
        plan = self._plan(tuple(columns))
        if plan is None:
            return None
        idx, width, optional, schema = plan
        g = np.asarray(groups, np.int64)
        heap = Heap()
        st, out, valid, nulls, heap.bytes = self._located(g, idx, lambda: pagecodec.read_columns(
            self._buf, g, idx, self._rows, self._start, self._size, self._usize,
            self._codec, width, optional, heap.bytes, heap.used))
        return table_of(width, schema, out, valid, nulls, heap) if st == pagecodec.OK else None

    def read_into(self, groups: np.ndarray, columns: tuple[str, ...], out: np.ndarray,
                  valid: np.ndarray, at: int, heap: Heap
                  ) -> tuple[int, np.ndarray, np.ndarray, pa.Schema] | None:
        """Decode row groups ``groups`` of ``columns`` into ``out[k, at:]`` / ``valid[k, at:]``
        (:func:`.pagecodec.read_columns_into`; ``valid`` is written for optional columns
        only; byte arrays onto ``heap``): ``(rows, column widths, optional flags, schema of
        the columns)`` - the same objects for every file of one layout - or None when this
        reader does not decode them or they do not fit (read through Arrow then). For
        :meth:`ParquetCache.read_files`, which builds one table of several files' row groups.
        O(bytes of the chunks read)."""
        plan = self._plan(columns)
        if plan is None:
            return None
        idx, width, optional, schema = plan
        st, n, heap.bytes = self._located(groups, idx, lambda: pagecodec.read_columns_into(
            self._buf, groups, idx, self._rows, self._start, self._size, self._usize,
            self._codec, width, optional, out, valid, at, heap.bytes, heap.used))
        return (n, width, optional, schema) if st == pagecodec.OK else None

    def read_kept_into(self, groups: np.ndarray, columns: tuple[str, ...], lo: np.ndarray,
                       hi: np.ndarray, state: np.ndarray, out: np.ndarray, valid: np.ndarray,
                       part_k: np.ndarray, part_n: np.ndarray, heap: Heap
                       ) -> tuple[np.ndarray, np.ndarray, pa.Schema] | None:
        """Decode row groups ``groups`` of ``columns`` (the first the time column) keeping
        only the rows inside the time intervals ``[lo, hi)``
        (:func:`.pagecodec.read_kept_into`, which advances ``state`` and fills ``out``,
        ``valid`` and the parts): ``(column widths, optional flags, schema of the columns)``,
        or None when this reader does not decode them (read through Arrow then). For
        :meth:`ParquetCache.read_files_kept`. O(bytes of the chunks + rows kept)."""
        plan = self._plan(columns)
        if plan is None:
            return None
        idx, width, optional, schema = plan
        st, heap.bytes = self._located(groups, idx, lambda: pagecodec.read_kept_into(
            self._buf, groups, idx, self._rows, self._start, self._size, self._usize,
            self._codec, width, optional, lo, hi, state, out, valid, part_k, part_n,
            heap.bytes, heap.used))
        return (width, optional, schema) if st == pagecodec.OK else None

    def chunks(self, groups: np.ndarray, column: str
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, bool] | None:
        """Where ``column``'s chunks of row groups ``groups`` lie (located from the footer
        where not yet): ``(offsets, sizes, codecs, value width, optional)``, an offset -2
        for a chunk this reader does not decode; None when it does not decode the column.
        For reads of single values (:class:`.valueprobe.ColumnProbe`)."""
        plan = self._plan((column,))
        if plan is None:
            return None
        c = int(plan[0][0])
        self._fill(groups, [c])
        return (self._start[groups, c], self._size[groups, c], self._codec[groups, c],
                int(plan[1][0]), bool(plan[2][0]))

    @property
    def buffer(self) -> np.ndarray:
        """The file's bytes (a read-only view of its memory map)."""
        buf = self._buf.view()
        buf.flags.writeable = False
        return buf

    def _located(self, groups: np.ndarray, idx: np.ndarray, decode: Callable[[], Any]) -> Any:
        """``decode()``, called again after locating the chunks of ``groups`` x ``idx`` when it
        answers :data:`.pagecodec.NEED` (its first element)."""
        got = decode()
        if got[0] == pagecodec.NEED:
            self._fill(groups, idx.tolist())
            got = decode()
        return got

    def check(self) -> None:
        """Raise AssertionError unless every located chunk lies inside the file."""
        known = self._start >= 0
        assert (self._start[known] + self._size[known] <= self._buf.size).all()
        assert (self._size[known] >= 0).all()


_PLANS: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray, np.ndarray, pa.Schema]] = {}
_PLANS_LOCK = threading.Lock()
_MAX_PLANS = 4096


def _interned(columns: tuple[str, ...], plan: tuple[np.ndarray, np.ndarray, np.ndarray,
                                                     pa.Schema]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, pa.Schema]:
    """One plan object for every file of the same layout (columns, their positions,
    widths, optional flags and schema), so that a read of many files compares their
    plans by identity. Layouts are few; the table holds one entry each (and starts again
    past :data:`_MAX_PLANS`)."""
    idx, width, optional, schema = plan
    key = (columns, idx.tobytes(), width.tobytes(), optional.tobytes(),
           schema.serialize().to_pybytes())
    with _PLANS_LOCK:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        return _PLANS.setdefault(key, plan)


class Heap:
    """The bytes of one read's byte-array values (:mod:`.stringcodec`): an array that decoders
    append to (and may replace by a larger one) and ``used`` (``[bytes used]``)."""

    __slots__ = ("bytes", "used")

    def __init__(self) -> None:
        self.bytes = _EMPTY_HEAP
        self.used = np.zeros(1, np.int64)


_EMPTY_HEAP = np.zeros(0, np.uint8)


def table_of(width: np.ndarray, schema: pa.Schema, out: np.ndarray, valid: np.ndarray,
             nulls: np.ndarray, heap: Heap) -> pa.Table | None:
    """The Arrow table of decoded slots: column k of ``schema`` from ``out[k]`` (uint64
    slots, the low ``width[k]`` bytes used; for ``width[k]`` 0, the values' slots on
    ``heap``), with ``valid[k]`` as its validity when ``nulls[k]`` > 0. No copy of 8-byte
    values. None when a byte-array column does not fit Arrow's 32-bit offsets. O(columns)
    plus the narrowing copies and the byte arrays' bytes."""
    types = schema.types
    arrays = []
    for k in range(len(types)):
        if width[k] == 0:
            st, offsets, data = stringcodec.gather(heap.bytes, out[k])
            if st != pagecodec.OK:
                return None
            bitmap = (pa.py_buffer(np.packbits(valid[k].view(np.bool_), bitorder="little"))
                      if nulls[k] else None)
            arrays.append(pa.Array.from_buffers(types[k], len(offsets) - 1, [
                bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=int(nulls[k])))
        elif nulls[k]:
            arrays.append(_nullable(types[k], out[k], valid[k], int(nulls[k]), int(width[k])))
        else:
            vals = out[k] if width[k] == 8 else out[k].astype(np.uint32)
            arrays.append(pa.Array.from_buffers(types[k], len(vals),
                                                [None, pa.py_buffer(vals)]))
    return pa.Table.from_arrays(arrays, schema=schema)


def _nullable(t: pa.DataType, out: np.ndarray, valid: np.ndarray, nulls: int,
              width: int) -> pa.Array:
    """Column of type ``t`` from slots ``out`` with validity ``valid`` (``nulls`` of them 0)."""
    values = out if width == 8 else out.astype(np.uint32)
    bitmap = np.packbits(valid.view(np.bool_), bitorder="little")
    return pa.Array.from_buffers(t, len(values), [pa.py_buffer(bitmap),
                                                  pa.py_buffer(values)], null_count=nulls)


def _fixed(t: pa.DataType, width: int) -> bool:
    """Whether Arrow type ``t`` holds the physical values of ``width`` bytes bit for bit."""
    if width == 0:
        return pa.types.is_string(t) or pa.types.is_binary(t)
    if pa.types.is_boolean(t) or pa.types.is_dictionary(t) or pa.types.is_decimal(t):
        return False
    try:
        return t.bit_width == 8 * width
    except ValueError:
        return False
