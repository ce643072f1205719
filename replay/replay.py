"""Replay: feed stored history into an online operator (dissertation 3.2.2).

A :class:`Replay` reads a list of disjoint, sorted, half-open time intervals (the whole stream by
default) from one or more streams, merges the streams into one virtual stream ordered by
``(t, stream position in the query, seq)``, and pushes Arrow batches into an operator. Between two
intervals it calls the operator's :meth:`~replaydb.operators.base.Operator.end_interval`, so no
result can span a gap the planner excluded (a match never spans two replay intervals; replay must
not invent one). Results come out through a pull iterator (:meth:`Replay.results`: the generic
replay operator - pop the result buffer, else pull events and push them until a result appears or
the input ends) or all at once (:meth:`Replay.run`).

Reading ``seq``: by default every batch carries ``seq``. ``seq=False`` is for operators that take
the order from the row position alone (:attr:`~replaydb.operators.base.Operator.requires_seq`
False) and do not ask for ``seq`` among ``columns``: a single stream is then read without its
``seq`` column at all (it is a stored column like any other, so this saves decoding one int64 per
event); several streams still read ``seq``, because the merge breaks ties by it, and drop it from
the batches they deliver. Either way the batches' schema is :attr:`Replay.schema`, and the events
and their order are the same as with ``seq=True``.

Several streams: every stream contributes the columns the query needs; a column missing from a
stream is null in its rows. With ``type_column`` set, a stream that has no such column gets it
filled with the stream's name, so event types can come from stream names (SASE+ components,
GRETA and TPStream symbols) or from a column - operators cannot tell the difference.

One stream: the distinct leaves of all intervals are read in reads of up to ``batch_rows``
events' worth, as full replay reads the stream (a leaf shared by two intervals is read once, an
interval may span two reads), and cut into per-interval batches. So a plan of thousands of
short intervals pays a few reads, not one per interval, and a plan that keeps most leaves pays
full replay's reads and batches. The operator still sees each interval's events and an
``end_interval`` between intervals, exactly as if they had been read one by one - unless it
overrides :meth:`~replaydb.operators.base.Operator.push_intervals`: it then gets batches of many
intervals with the row offsets where each ends (:meth:`Replay.spans`); inside one read, every
interval is split where one batch per interval would split it. With ``contiguous=True`` (a plan
whose gaps decide no result) the operator gets those batches through ``push`` and no
``end_interval`` at all: the intervals are one stream with the gaps' events left out.

What was read (intervals, leaves, row groups, events, bytes, seconds) is in :attr:`Replay.stats`
for EXPLAIN ANALYZE.

Complexity: O(events read) I/O and O(events log k) merge work for k streams (one vectorized sort
per chunk of about ``batch_rows`` events).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import UsageError
from replaydb.operators.base import Operator
from replaydb.replay.readahead import first_then_ahead
from replaydb.store.interval_list import IntervalList

DEFAULT_BATCH_ROWS = 65_536
RESULTS_EVERY = 256
"""Intervals between asking the operator for results when batches are small."""
RESULTS_BATCHES = 4
"""Batches' worth of events (``batch_rows`` each) between asking the operator for results
(:meth:`Replay.results`)."""
_NO_BREAKS = np.zeros(0, dtype=np.int64)


@dataclass
class ReplayStats:
    """What a replay read and how long it took."""

    intervals: int = 0
    leaves: int = 0
    row_groups: int = 0
    events: int = 0
    bytes: int = 0
    batches: int = 0
    read_seconds: float = 0.0
    operator_seconds: float = 0.0
    per_stream: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("intervals", "leaves", "row_groups", "events",
                                              "bytes", "batches", "read_seconds",
                                              "operator_seconds", "per_stream")}


def normalize_intervals(intervals: Sequence[tuple[int, int]] | np.ndarray | None
                        ) -> Sequence[tuple[int | None, int | None]]:
    """Sort and merge half-open intervals (touching ones are joined, empty ones dropped) into
    an :class:`~replaydb.store.interval_list.IntervalList` (one taken as it is);
    ``None`` -> one unbounded interval ``[(None, None)]``. Vectorized
    (:func:`~replaydb.store.interval_list.merge_halfopen`)."""
    if intervals is None:
        return [(None, None)]
    try:
        return IntervalList.of(intervals)
    except ValueError as e:
        raise UsageError(str(e)) from None


class Replay:
    """Replay ``intervals`` of ``snapshots`` into operators (see the module docstring)."""

    def __init__(
        self,
        snapshots: Sequence[Any],
        intervals: Sequence[tuple[int, int]] | None = None,
        *,
        columns: Sequence[str] | None = None,
        type_column: str | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        aliases: dict[str, str] | None = None,
        seq: bool = True,
        contiguous: bool = False,
    ) -> None:
        if not snapshots:
            raise UsageError("replay needs at least one stream")
        self.snapshots = list(snapshots)
        self.intervals = normalize_intervals(intervals)
        self.aliases = dict(aliases or {})
        self.columns = list(columns) if columns is not None else None
        self.type_column = type_column
        self.seq = seq or (columns is not None and "seq" in columns)
        self.batch_rows = batch_rows
        self.contiguous = contiguous
        """Feed the intervals as one stream: no ``end_interval`` between them (a plan's
        :attr:`~replaydb.replay.plan.IntervalScan.contiguous`)."""
        self.stats = ReplayStats()
        self.events_pushed = 0
        """Events pushed into the operator so far by :meth:`results` (progress reports)."""
        self.schema = self._memo_schema()

    # ------------------------------------------------------------------ schema
    def _stream_columns(self, snap: Any, *, seq: bool | None = None) -> list[str]:
        """The columns read from ``snap`` (``seq`` included per ``seq``, default
        :attr:`seq`)."""
        seq = self.seq if seq is None else seq
        names = snap.arrow_schema.names
        if self.columns is None:
            return names if seq else [c for c in names if c != "seq"]
        wanted = [self.aliases.get(c, c) for c in self.columns]
        head = ["t", "seq"] if seq else ["t"]
        return [*head, *[c for c in dict.fromkeys(wanted) if c in names and c not in ("t", "seq")]]

    def _memo_schema(self) -> pa.Schema:
        """:meth:`_output_schema`, kept on a single pinned stream (its ``replay_schemas``
        dict; a pinned stream's schema never changes) per columns, aliases, type column and
        ``seq``: building it is a fixed cost of every selective query, paid once per pinned
        stream instead of once per call. Several streams build it each time; a schema that
        raises is not kept."""
        memo = getattr(self.snapshots[0], "replay_schemas", None) \
            if len(self.snapshots) == 1 else None
        if memo is None:
            return self._output_schema()
        key = (None if self.columns is None else tuple(self.columns),
               tuple(sorted(self.aliases.items())), self.type_column, self.seq)
        got = memo.get(key)
        if got is None:
            got = self._output_schema()
            if len(memo) >= 64:  # queries of many shapes: start again rather than grow
                memo.clear()
            memo[key] = got
        return got

    def _output_schema(self) -> pa.Schema:
        fields: dict[str, pa.Field] = {}
        for snap in self.snapshots:
            read = set(self._stream_columns(snap))
            for f in snap.arrow_schema:
                if f.name in read and f.name not in fields:
                    fields[f.name] = f.with_nullable(True) if len(self.snapshots) > 1 else f
        for alias, target in self.aliases.items():
            if alias not in fields and target in fields and (
                    self.columns is None or alias in self.columns):
                fields[alias] = fields[target].with_name(alias).with_metadata(
                    {"replaydb.alias_of": target})
        if self.columns is not None:
            missing = [c for c in self.columns if c not in fields and c != self.type_column]
            if missing:
                raise UsageError(f"no replayed stream has column(s) {', '.join(missing)}")
        if self.type_column and self.type_column not in fields:
            fields[self.type_column] = pa.field(self.type_column, pa.string())
        return pa.schema(list(fields.values()))

    def _conform(self, tbl: pa.Table, snap: Any) -> pa.Table:
        """``tbl`` (a read of ``snap``) with the output schema's columns, in its order and
        types. A read whose columns already are the schema's is returned as it is (no casts
        and no new table: a fixed cost of every interval group of a selective plan saved)."""
        if tbl.schema.equals(self.schema):
            return tbl
        names = tbl.column_names
        cols = []
        for f in self.schema:
            if f.name in names:
                col = tbl.column(f.name)
                cols.append(col if col.type == f.type else col.cast(f.type))
            elif f.name in self.aliases and self.aliases[f.name] in names:
                cols.append(tbl.column(self.aliases[f.name]))
            elif f.name == self.type_column:
                cols.append(pa.array(np.full(tbl.num_rows, snap.name, dtype=object), pa.string()))
            else:
                cols.append(pa.nulls(tbl.num_rows, f.type))
        return pa.Table.from_arrays(cols, schema=self.schema)

    # ------------------------------------------------------------------ reading
    def batches(self) -> Iterator[tuple[int, pa.RecordBatch]]:
        """``(interval index, batch)`` in (t, stream, seq) order."""
        before = [s.counters.copy() for s in self.snapshots]
        try:
            if len(self.snapshots) == 1:
                self.stats.intervals += len(self.intervals)
                for k, batch in self._single_grouped(self.snapshots[0]):
                    self.stats.batches += 1
                    yield k, batch
                return
            for k, (a, b) in enumerate(self.intervals):
                self.stats.intervals += 1
                for batch in self._merged(a, b):
                    self.stats.batches += 1
                    yield k, batch
        finally:
            self._count_reads(before)

    def _count_reads(self, before: list[Any]) -> None:
        """Add what every stream read since its counters were ``before`` to the stats."""
        for snap, b0 in zip(self.snapshots, before):
            d = snap.counters - b0
            self.stats.leaves += d.leaves
            self.stats.row_groups += d.row_groups
            self.stats.events += d.events
            self.stats.bytes += d.bytes
            self.stats.per_stream[snap.name] = d.as_dict()

    def _read_groups(self, snap: Any, shape: Any, *, kept_only: bool = False,
                     with_last: bool = False) -> Iterator[Any]:
        """``shape(table, parts)`` for every read of
        :meth:`StreamSnapshot.read_interval_groups` (the intervals' leaves, up to
        ``batch_rows`` events' worth per read; with ``kept_only``, their rows inside the
        intervals only, about ``batch_rows`` of them per read
        (:mod:`~replaydb.store.readpacking`); with ``with_last``, ``shape(table, parts,
        last)``, ``last`` True for the last read); reading and shaping count as read time. The first read is made on the
        caller's thread; when another follows, the next read is made on a worker thread while
        the caller works on this one (:func:`.first_then_ahead`; the snapshot marks its last
        read, so a replay of one read starts no worker)."""
        cols = self._stream_columns(snap)
        max_leaves = max(1, self.batch_rows // max(1, snap.schema.leaf_capacity))
        groups = snap.read_interval_groups(self.intervals, cols, max_leaves=max_leaves,
                                           seq=self.seq, kept_only=kept_only, with_last=True)

        def make(group: tuple[Any, Any, bool]) -> tuple[Any, bool]:
            table, parts, last = group
            return (shape(table, parts, last) if with_last else shape(table, parts)), last

        with contextlib.closing(first_then_ahead(groups, make, lambda got: got[1])) as reads:
            for seconds, (out, _) in reads:
                self.stats.read_seconds += seconds
                yield out

    def _single_grouped(self, snap: Any) -> Iterator[tuple[int, pa.RecordBatch]]:
        """One stream: each read is conformed to the output schema once; each interval's
        batches are slices of it (no copies)."""
        for tbl, parts in self._read_groups(snap, lambda t, p: (self._conform(t, snap), p)):
            for k, off, rows in parts:
                for batch in tbl.slice(off, rows).to_batches(max_chunksize=self.batch_rows):
                    yield k, batch

    def spans(self) -> Iterator[tuple[int, int, pa.RecordBatch, np.ndarray]]:
        """``(first interval, last interval, batch, breaks)`` in (t, stream, seq) order, for
        operators that take many intervals per batch
        (:meth:`~replaydb.operators.base.Operator.push_intervals`): before row ``b`` of every
        ``b`` in ``breaks`` an interval ends (an offset repeats for intervals without events).

        One stream: the events of the intervals of one read (see :meth:`_read_groups`) are
        gathered into batches of up to ``batch_rows`` rows (rows between intervals that a
        shared leaf holds are left out: the reads keep the intervals' rows only). Several
        streams: one interval per batch, as :meth:`batches`."""
        for k, k_last, batch, breaks, _ in self._marked_spans():
            yield k, k_last, batch, breaks

    def _marked_spans(self) -> Iterator[tuple[int, int, pa.RecordBatch, np.ndarray, bool]]:
        """:meth:`spans`, each with whether it is the last batch of the replay: the last one
        of the last read (the snapshot knows its last read before making it; nothing is read
        ahead). Several streams: never marked."""
        if len(self.snapshots) != 1:
            for k, batch in self.batches():
                yield k, k, batch, _NO_BREAKS, False
            return
        snap = self.snapshots[0]
        before = [snap.counters.copy()]
        self.stats.intervals += len(self.intervals)
        try:
            for sub, rows, row_k, last_read in self._read_groups(
                    snap, lambda t, p, last: (*self._gather(t, p, snap), last),
                    kept_only=True, with_last=True):
                cuts = _span_cuts(rows.tolist(), self.batch_rows)
                for c0, c1 in zip(cuts[:-1], cuts[1:]):
                    pos = c0
                    batches = sub.slice(c0, c1 - c0).to_batches()
                    for i, batch in enumerate(batches):
                        kk = row_k[pos: pos + batch.num_rows]
                        pos += batch.num_rows
                        step = np.diff(kk)
                        at = np.flatnonzero(step) + 1
                        self.stats.batches += 1
                        last = last_read and c1 == cuts[-1] and i == len(batches) - 1
                        yield (int(kk[0]), int(kk[-1]), batch, np.repeat(at, step[at - 1]),
                               last)
        finally:
            self._count_reads(before)

    def _gather(self, tbl: pa.Table, parts: list[tuple[int, int, int]], snap: Any
                ) -> tuple[pa.Table, np.ndarray, np.ndarray]:
        """(the rows of ``parts`` of one read - a read with ``kept_only``: they are its rows,
        one part after the other - conformed; rows per part; interval per row)."""
        ks = np.fromiter((p[0] for p in parts), np.int64, len(parts))
        rows = np.fromiter((p[2] for p in parts), np.int64, len(parts))
        return self._conform(tbl, snap), rows, np.repeat(ks, rows)

    def _chunk_bounds(self, a: int | None, b: int | None) -> list[int | None]:
        """Time cut points so that each chunk holds about ``batch_rows`` events in all streams
        (from the leaf level of every stream's tree; no data is read)."""
        starts, counts = [], []
        for snap in self.snapshots:
            i, j = snap.tree.leaf_range_for_time(a, b)
            lv = snap.tree.leaves
            starts.append(lv.col("t_min")[i:j])
            counts.append(lv.col("count")[i:j])
        if not starts or sum(len(s) for s in starts) == 0:
            return [a, b]
        t = np.concatenate(starts)
        c = np.concatenate(counts)
        order = np.argsort(t, kind="stable")
        t, cum = t[order], np.cumsum(c[order])
        cuts = [a]
        for k in np.searchsorted(cum, np.arange(self.batch_rows, cum[-1], self.batch_rows)):
            cut = int(t[min(k + 1, len(t) - 1)])
            if (cuts[-1] is None or cut > cuts[-1]) and (b is None or cut < b):
                cuts.append(cut)
        cuts.append(b)
        return cuts

    def _merged(self, a: int | None, b: int | None) -> Iterator[pa.RecordBatch]:
        cuts = self._chunk_bounds(a, b)
        for c0, c1 in zip(cuts[:-1], cuts[1:]):
            t0 = time.perf_counter()
            tables, seqs, order_keys = [], [], []
            for pos, snap in enumerate(self.snapshots):
                tbl = snap.read(c0, c1, self._stream_columns(snap, seq=True))
                if tbl.num_rows:
                    seqs.append(tbl.column("seq").to_numpy())  # the merge's tie-breaker
                    tables.append(self._conform(tbl, snap))
                    order_keys.append(np.full(tbl.num_rows, pos, dtype=np.int64))
            if not tables:
                continue
            tbl = pa.concat_tables(tables)
            t = tbl.column("t").to_numpy()
            order = np.lexsort((np.concatenate(seqs), np.concatenate(order_keys), t))
            tbl = tbl.take(pa.array(order))
            self.stats.read_seconds += time.perf_counter() - t0
            yield from tbl.to_batches(max_chunksize=self.batch_rows)

    # ------------------------------------------------------------------ driving operators
    @staticmethod
    def _takes_spans(op: Any) -> bool:
        """Whether ``op`` handles many intervals per batch itself (it overrides
        :meth:`~replaydb.operators.base.Operator.push_intervals`); other operators get one
        interval per batch, as they always did."""
        own = getattr(type(op), "push_intervals", None)
        return own is not None and own is not Operator.push_intervals

    def results(self, op: Operator, check: Callable[[], None] | None = None
                ) -> Iterator[pa.Table]:
        """Pull iterator over result tables (the generic replay operator of 3.2.2).

        Results are asked for once ``RESULTS_BATCHES`` batches' worth of events or
        ``RESULTS_EVERY`` intervals have been pushed since the last time, and at the end: an
        operator may build its output rows only when asked (the pattern operator does), and
        building them once for many short intervals, or for several batches, is cheaper than
        once per interval or per batch (each build has a fixed cost of some hundred
        microseconds; an operator that must not hold matches that long builds them itself -
        the pattern operator after 4,096 matches or 128K pinned events). ``check`` (a query's limits) is called
        before every batch is pushed: an operator that emits nothing until the end of its
        input would otherwise run to completion whatever its limits."""
        current = 0
        since = 0
        rows = 0
        ask_rows = max(1, self.batch_rows * RESULTS_BATCHES)
        contiguous = self.contiguous
        source = self._marked_spans() if contiguous or self._takes_spans(op) else (
            (k, k, b, _NO_BREAKS, False) for k, b in self.batches())
        for k, k_last, batch, breaks, last in source:
            if k != current and not contiguous:
                if breaks is _NO_BREAKS:
                    t0 = time.perf_counter()
                    for _ in range(k - current):
                        op.end_interval()
                    self.stats.operator_seconds += time.perf_counter() - t0
                else:  # the intervals ending before the batch are breaks at its row 0
                    breaks = np.concatenate((np.zeros(k - current, np.int64), breaks))
            since += k - current
            current = k
            if check is not None:
                check()
            t0 = time.perf_counter()
            if contiguous:
                if batch.num_rows:
                    op.push(batch)
            elif breaks.size or last:
                op.push_intervals(batch, breaks, final=last)
            else:
                op.push(batch)
            self.stats.operator_seconds += time.perf_counter() - t0
            since += k_last - current
            current = k_last
            rows += batch.num_rows
            self.events_pushed += batch.num_rows
            if (since >= RESULTS_EVERY or rows >= ask_rows) and op.has_results():
                since = 0
                rows = 0
                t0 = time.perf_counter()
                out = op.results()
                self.stats.operator_seconds += time.perf_counter() - t0
                yield out
        t0 = time.perf_counter()
        op.flush()
        out = op.results() if op.has_results() else None
        self.stats.operator_seconds += time.perf_counter() - t0
        if out is not None:
            yield out

    def run(self, op: Operator) -> pa.Table:
        """Replay everything into ``op`` and return all its results as one table."""
        parts = list(self.results(op))
        if not parts:
            return op.output_schema.empty_table()
        return pa.concat_tables(parts)

    def table(self) -> pa.Table:
        """The replayed events themselves, as one table."""
        parts = [pa.Table.from_batches([b]) for _, b in self.batches()]
        return pa.concat_tables(parts) if parts else self.schema.empty_table()


def _span_cuts(rows: list[int], batch_rows: int) -> list[int]:
    """Batch boundaries (row offsets, first 0, last the total) over consecutive intervals of
    ``rows`` events each: whole intervals share a batch up to ``batch_rows`` events; an interval
    that does not fit starts a new batch and is cut every ``batch_rows`` events from its own
    start. So every interval is cut where one batch per interval would cut it. O(intervals)."""
    cuts = [0]
    pos = fill = 0
    for r in rows:
        if fill + r <= batch_rows:
            fill += r
            pos += r
            continue
        if fill:
            cuts.append(pos)
        while r > batch_rows:
            pos += batch_rows
            r -= batch_rows
            cuts.append(pos)
        fill = r
        pos += r
    if pos > cuts[-1]:
        cuts.append(pos)
    return cuts
