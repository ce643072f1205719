"""Driving an operator inside a task, with the tags that restore the local result order.

:func:`drive` is :meth:`replaydb.replay.Replay.results` for a task: it pushes ``(interval index,
events)`` pairs into the operator, calls :meth:`~replaydb.operators.base.Operator.end_interval`
once per interval boundary crossed, flushes at the end, and hands every result table to a
:class:`Collector` with its *order tags* (int64 columns appended to the table):

* ``__k``  - the replay interval the result belongs to;
* ``__ph`` - 0: emitted while events were pushed, 1: emitted at the end of the interval (by
  ``end_interval`` or ``flush``);
* ``__r``, ``__l`` - a global position: (read task, position inside it). For an interval task it
  is (task index, 0): results keep the task's emission order. With :class:`ExactOrder` it is the
  position of the event whose arrival completed the result;
* ``__i`` - emission index inside the task (ties).

Exact order (partition tasks of SASE+-style patterns whose ``match_id`` is visible): under the
all-runs semantics a match is reported while the event that completes it - its last event - is
pushed (negation sits between positive items, and nothing is reported at the end of input), so
the match's ``last_seq`` names its resolving event inside the pushed batch of a single stream
(seq is unique there). MATCH_RECOGNIZE's SQL semantics resolve a match at a later event that the
output does not name, so it never runs this way (see :mod:`.adapters`).

:class:`KeyBook` records each partition key's first appearance in an interval task (the pattern
operator reports what an interval's end resolves in that order; see :mod:`.order`).
"""

from __future__ import annotations

import io
import math
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.replay.spark.keys import key_codes

TAGS = ("__k", "__ph", "__r", "__l", "__i")
EVENT_TAGS = ("__k", "__b", "__r", "__l")
"""Columns the read stage adds to events: interval, local batch, global position."""
RESULT_ROWS = 65_536
RESULT_COMPRESSION = "zstd"
"""Result payloads are compressed (Arrow IPC buffer compression): every byte of a result passes
the JVM twice on its way to the driver (task to executor, executor to driver), while zstd
shrinks typical results (sorted int64 times and seqs, small counts) severalfold for less work
than the transfer it saves (measurements: ``bench/results/spark``)."""


def to_ipc(table: pa.Table, compression: str | None = None) -> bytes:
    """``table`` as an Arrow IPC stream (``compression``: None, ``"lz4"`` or ``"zstd"``;
    readers need no option)."""
    sink = io.BytesIO()
    opts = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=opts) as w:
        w.write_table(table)
    return sink.getvalue()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(io.BytesIO(data)).read_all()


def _norm(v: Any) -> Any:
    return "\x00NaN" if isinstance(v, float) and math.isnan(v) else v


class KeyBook:
    """Partition key tuples seen by a task, each with its first appearance (position in the
    task) and one row holding its values. O(distinct keys per batch) Python work per batch."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.codes: dict[tuple, int] = {}
        self.first: list[int] = []
        self.rows: list[pa.Table] = []

    def add(self, table: pa.Table, offset: int) -> None:
        """Register the keys of ``table``, whose first row is at position ``offset``."""
        if not self.keys or table.num_rows == 0:
            return
        (local,) = key_codes([table], self.keys)
        _, first_idx = np.unique(local, return_index=True)
        sub = table.select(list(self.keys)).take(pa.array(first_idx))
        cols = [sub.column(k).to_pylist() for k in self.keys]
        for j, i in enumerate(first_idx.tolist()):
            tup = tuple(_norm(c[j]) for c in cols)
            if tup not in self.codes:
                self.codes[tup] = len(self.codes)
                self.first.append(offset + i)
                self.rows.append(sub.slice(j, 1))

    def first_table(self, task_index: int) -> pa.Table:
        """One row per key: its columns, then ``__r`` (the task) and ``__l`` (first position)."""
        if not self.rows:
            return pa.table({"__r": pa.array([], pa.int64()), "__l": pa.array([], pa.int64())})
        tbl = pa.concat_tables(self.rows)
        return tbl.append_column("__r", pa.array([task_index] * len(self.rows), pa.int64())
                                 ).append_column("__l", pa.array(self.first, pa.int64()))


def write_result_file(directory: str, task_index: int, table: pa.Table) -> bytes:
    """Write ``table`` as an uncompressed Arrow IPC file (memory-mappable) into ``directory``
    under a name of its own (a retried task attempt never overwrites another's file) and return
    its path, UTF-8 encoded. Written to a temporary name, then renamed: the driver never sees a
    partial file."""
    name = f"{task_index:06d}-{uuid.uuid4().hex}.arrow"
    path = os.path.join(directory, name)
    tmp = path + ".tmp"
    with pa.OSFile(tmp, "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table)
    os.replace(tmp, path)
    return path.encode("utf-8")


def read_result_file(payload: bytes) -> pa.Table:
    """The table of :func:`write_result_file`, memory-mapped (no copy, no decoding)."""
    return pa.ipc.open_file(pa.memory_map(payload.decode("utf-8"), "r")).read_all()


def integer_sort_order(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """Stable row order of ``table`` by its integer ``columns`` (the first is the primary key;
    nulls after every value). O(R log R) per column (one ``np.lexsort``)."""
    keys = []
    for c in columns:
        col = table.column(c)
        if col.null_count:
            keys.append(col.is_null().to_numpy(zero_copy_only=False))
            col = col.fill_null(0)
        keys.append(col.to_numpy().astype(np.int64, copy=False))
    return np.lexsort(keys[::-1])


class Collector:
    """Gathers tagged result tables into payloads of about ``chunk_rows`` rows: compressed IPC
    bytes (kind ``rows``), or, with a ``result_dir`` that the driver shares, the paths of IPC
    files written there (kind ``file``; the results then bypass the JVM entirely). With
    ``sort_columns`` the task's whole output is sorted by them (:func:`integer_sort_order`)
    before it is cut into payloads: a sorted run that the driver only merges (its order tags
    are then dropped: the run's order replaces them)."""

    def __init__(self, chunk_rows: int = RESULT_ROWS, result_dir: str | None = None,
                 task_index: int = 0, sort_columns: Sequence[str] = ()) -> None:
        self.chunk_rows = chunk_rows
        self.result_dir = result_dir
        self.task_index = task_index
        self.sort_columns = tuple(sort_columns)
        self._parts: list[pa.Table] = []
        self._rows = 0
        self.emitted = 0
        self.payloads: list[bytes] = []

    @property
    def kind(self) -> str:
        return "rows" if self.result_dir is None else "file"

    def add(self, table: pa.Table, k: int, phase: int, r: Any, pos: Any) -> None:
        n = table.num_rows
        if n == 0:
            return
        idx = np.arange(self.emitted, self.emitted + n, dtype=np.int64)
        self.emitted += n
        cols = {"__k": np.full(n, k, np.int64), "__ph": np.full(n, phase, np.int64),
                "__r": np.broadcast_to(np.asarray(r, np.int64), (n,)),
                "__l": np.broadcast_to(np.asarray(pos, np.int64), (n,)), "__i": idx}
        for name in TAGS:
            table = table.append_column(name, pa.array(np.ascontiguousarray(cols[name])))
        self._parts.append(table)
        self._rows += n
        if self._rows >= self.chunk_rows and not self.sort_columns:
            self.seal()

    def _encode(self, table: pa.Table) -> None:
        if self.result_dir is None:
            self.payloads.append(to_ipc(table, RESULT_COMPRESSION))
        else:
            self.payloads.append(write_result_file(self.result_dir, self.task_index, table))

    def seal(self) -> None:
        if self._parts:
            self._encode(pa.concat_tables(self._parts))
            self._parts, self._rows = [], 0

    def take(self) -> list[bytes]:
        if self.sort_columns and self._parts:
            table = pa.concat_tables(self._parts).drop_columns(list(TAGS))  # order: the run's
            self._parts, self._rows = [], 0
            table = table.take(pa.array(integer_sort_order(table, self.sort_columns)))
            for a in range(0, table.num_rows, self.chunk_rows):
                self._encode(table.slice(a, self.chunk_rows))
        self.seal()
        out, self.payloads = self.payloads, []
        return out


class ExactOrder:
    """Tags each result with the position of its completing event (see the module docstring):
    the event of the pushed batch whose ``seq`` is the result's ``last_seq``."""

    def __init__(self, seq_column: str = "last_seq") -> None:
        self.seq_column = seq_column

    def positions(self, res: pa.Table, seq: np.ndarray, r: np.ndarray, pos: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
        want = res.column(self.seq_column).to_numpy().astype(np.int64)
        at = np.searchsorted(seq, want)
        at = np.minimum(at, len(seq) - 1)
        if not np.array_equal(seq[at], want):
            raise AssertionError("a match's last event is not in the batch that reported it")
        return r[at], pos[at]


def _strip(batch: pa.RecordBatch | pa.Table) -> pa.Table:
    tbl = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    drop = [c for c in tbl.column_names if c in EVENT_TAGS]
    return tbl.drop_columns(drop) if drop else tbl


def drive(op: Any, source: Iterable[tuple[int, pa.Table]], out: Collector, *,
          task_index: int, exact: ExactOrder | None = None, book: KeyBook | None = None,
          positions: bool = False) -> int:
    """Replay ``source`` (``(interval index, events)`` in order) into ``op``; returns the number
    of events pushed. ``book`` (interval tasks) records each key's first appearance (position in
    the task); ``positions``: the events carry ``__r``/``__l`` (partition tasks)."""
    current: int | None = None
    seen = 0
    for k, tbl in source:
        if tbl.num_rows == 0:
            continue
        if current is None:
            current = k
        elif k != current:
            for _ in range(k - current):
                op.end_interval()
            if op.has_results():
                res = op.results()
                out.add(res, current, 1, *_end_tags(res, exact, task_index))
            current = k
        r = tbl.column("__r").to_numpy() if positions else None
        l_ = tbl.column("__l").to_numpy() if positions else None
        events = _strip(tbl)
        if book is not None:
            book.add(events, seen)
        if exact is None:
            op.push(events)
            if op.has_results():
                out.add(op.results(), k, 0, task_index, 0)
        else:
            op.push(events)
            if op.has_results():
                res = op.results()
                seq = events.column("seq").to_numpy()
                out.add(res, k, 0, *exact.positions(res, seq, r, l_))
        seen += events.num_rows
    op.flush()
    if op.has_results():
        res = op.results()
        out.add(res, 0 if current is None else current, 1, *_end_tags(res, exact, task_index))
    return seen


def _end_tags(res: pa.Table, exact: ExactOrder | None, task_index: int) -> tuple[Any, Any]:
    if exact is not None:  # all-runs patterns report nothing at an interval's end
        raise AssertionError("a pattern under all-runs semantics reported a match at an "
                             "interval's end")
    return task_index, 0


def iter_payload_tables(payloads: Iterable[bytes]) -> Iterator[pa.Table]:
    for p in payloads:
        yield from_ipc(p)
