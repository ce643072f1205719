"""Windowed join (dissertation Defs. 2.12 and 2.13).

Two event streams ``E1`` (left) and ``E2`` (right) arrive merged in one input in ``(t, seq)``
order; ``side_column`` (default ``type``, the column the replay layer synthesizes when it merges
streams) names each event's stream. Every arriving event ``e`` is joined with the events of the
*other* stream's active window at ``e.t`` (Def. 2.9: the latest window whose timestamp is
``<= e.t``); each pair satisfying ``phi`` gives a result ``(e1.p, e2.p, e.t)`` (Def. 2.12), for
arrivals on both sides (Def. 2.13; ``phi`` is always evaluated as ``phi(e1, e2)``).

Windows (Defs. 2.7, 2.8), per side, :class:`Window`:

* count ``(size, slide)``: window ``k`` holds that stream's events ``1+(k-1)slide ..
  size+(k-1)slide`` and carries its last event's timestamp;
* time ``(size, slide)``: window ``k`` covers ``[a + (k-1)slide, a + (k-1)slide + size)`` and
  carries ``a + (k-1)slide + size - 1``, anchored at the stream's first timestamp ``a``
  (``align="first"``, the dissertation's definition) or at 0 (``align="epoch"``).

Decision (the dissertation is silent on ties): an event only sees events that arrived before it
(the input's order: ``(t, seq)`` within a stream; when streams are merged, equal timestamps come
in the replay layer's order); "the active window at ``e.t``" is computed from those. Only ``t``
must not decrease. Before a stream's
first window is complete nothing joins with it (e.g. a count window of size 2 needs 2 events).

Output schema: ``t`` (the arriving event's time), ``probe`` (the side name of the arriving
event), ``left_t``, ``left_seq``, ``right_t``, ``right_seq``, then every other input column of the
left event as ``"<left>.<col>"`` and of the right event as ``"<right>.<col>"``. Results come in
arrival order of the probing event, then in stream order of the window's events.

``phi`` uses qualified columns ``<left>.x`` / ``<right>.x`` (or ``L.x`` / ``R.x``). Live use::

    op = JoinOperator(JoinConfig(schema, "E1", "E2", Window("count", 2), Window("count", 2),
                                 Binary("<=", Column("v", "E1"), Column("v", "E2"))))
    op.push(merged_batch); op.results()

Complexity: O(pairs probed) per batch, vectorized in chunks of at most ``chunk_pairs`` candidate
pairs; state O(window contents).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import DataError, QueryError
from replaydb.operators.base import DEFAULT_STATE_CAP, Operator, column_np
from replaydb.operators.expr import Column, ColumnsEnv, Expr, columns, compile_predicate


@dataclass(frozen=True)
class Window:
    """A count or time window (Defs. 2.7/2.8); ``slide`` defaults to 1 (sliding)."""

    kind: str
    size: int
    slide: int = 1
    align: str = "first"

    def __post_init__(self) -> None:
        if self.kind not in ("count", "time"):
            raise QueryError(f"window kind must be count or time, got {self.kind!r}")
        if not 0 < self.slide <= self.size:
            raise QueryError(f"window needs 0 < slide <= size, got size={self.size}, "
                             f"slide={self.slide}")
        if self.align not in ("first", "epoch"):
            raise QueryError("window align must be 'first' or 'epoch'")


@dataclass(frozen=True)
class JoinConfig:
    """Frozen configuration of :class:`JoinOperator` (see module docstring)."""

    schema: pa.Schema
    left: str
    right: str
    left_window: Window
    right_window: Window
    predicate: Expr | None = None
    side_column: str = "type"
    chunk_pairs: int = 1 << 20

    def __post_init__(self) -> None:
        for c in ("t", "seq", self.side_column):
            if c not in self.schema.names:
                raise QueryError(f"join input has no {c!r} column")
        if self.left == self.right:
            raise QueryError("the two sides of a join need different names")
        attrs = set(self.attributes)
        for c in columns(self.predicate):
            if c.qualifier not in (self.left, self.right, "L", "R"):
                raise QueryError(f"join predicate column {c.name!r} must be qualified by "
                                 f"{self.left}, {self.right}, L or R")
            if c.name not in attrs and c.name not in ("t", "seq"):
                raise QueryError(f"unknown column {c.name!r} in the join predicate")

    @property
    def attributes(self) -> list[str]:
        return [n for n in self.schema.names if n not in ("t", "seq", self.side_column)]


class _Side:
    """One stream's retained events (global index = position in that stream)."""

    def __init__(self, cols: list[str]) -> None:
        self.base = 0
        self.count = 0
        self.first_t: int | None = None
        self.t = np.empty(0, dtype=np.int64)
        self.seq = np.empty(0, dtype=np.int64)
        self.batches: list[pa.RecordBatch] = []
        self.cols = cols

    def append(self, rb: pa.RecordBatch, t: np.ndarray, seq: np.ndarray) -> None:
        if self.first_t is None and len(t):
            self.first_t = int(t[0])
        self.t = np.concatenate([self.t, t])
        self.seq = np.concatenate([self.seq, seq])
        self.batches.append(rb)
        self.count += len(t)

    def trim(self, keep_from: int) -> None:
        drop = keep_from - self.base
        if drop <= 0:
            return
        table = pa.Table.from_batches(self.batches, schema=self.batches[0].schema) \
            if self.batches else None
        self.t = self.t[drop:]
        self.seq = self.seq[drop:]
        if table is not None:
            rest = table.slice(drop)
            self.batches = rest.combine_chunks().to_batches() if rest.num_rows else []
        self.base = keep_from


class JoinOperator(Operator):
    """Windowed join of two merged streams (see module docstring)."""

    name = "join"
    family = "join"

    def __init__(self, config: JoinConfig, *, state_cap: int | None = DEFAULT_STATE_CAP) -> None:
        super().__init__(config, state_cap=state_cap)
        self._pred = compile_predicate(config.predicate)
        attrs = config.attributes
        fields = [pa.field("t", pa.int64()), pa.field("probe", pa.string()),
                  pa.field("left_t", pa.int64()), pa.field("left_seq", pa.int64()),
                  pa.field("right_t", pa.int64()), pa.field("right_seq", pa.int64())]
        for side in (config.left, config.right):
            fields += [pa.field(f"{side}.{a}", config.schema.field(a).type) for a in attrs]
        self._schema = pa.schema(fields)
        self._reset_state()

    @property
    def output_schema(self) -> pa.Schema:
        return self._schema

    def _reset_state(self) -> None:
        attrs = self.config.attributes
        self._sides = {"L": _Side(attrs), "R": _Side(attrs)}
        self._last: tuple[int, int] | None = None

    def _get_state(self) -> Any:
        return {"sides": self._sides, "last": self._last}

    def _set_state(self, state: Any) -> None:
        self._sides = state["sides"]
        self._last = state["last"]

    def _flush(self) -> None:
        return None

    # ------------------------------------------------------------------ windows
    def _ranges(self, other: _Side, w: Window, n_before: np.ndarray,
                t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Active window of ``other`` as global index ranges [lo, hi) for each probe."""
        if w.kind == "count":
            ok = n_before >= w.size
            k = np.where(ok, (n_before - w.size) // w.slide, 0)
            lo = k * w.slide
            hi = np.where(ok, lo + w.size, lo)
            return lo, hi
        anchor = 0 if w.align == "epoch" else other.first_t
        if anchor is None:
            z = np.zeros(len(t), dtype=np.int64)
            return z, z
        ok = t >= anchor + w.size - 1
        k = np.where(ok, (t - anchor - w.size + 1) // w.slide, 0)
        start = anchor + k * w.slide
        end = start + w.size
        lo = other.base + np.searchsorted(other.t, start, "left")
        hi = other.base + np.searchsorted(other.t, end, "left")
        hi = np.minimum(hi, n_before)
        hi = np.where(ok, hi, lo)
        return lo, np.maximum(hi, lo)

    # ------------------------------------------------------------------ processing
    def _push_batch(self, batch: pa.RecordBatch) -> None:  # noqa: C901
        cfg = self.config
        t = column_np(batch, "t").astype(np.int64)
        seq = column_np(batch, "seq").astype(np.int64)
        self._check_order(t, seq)
        side_vals = batch.column(cfg.side_column).to_numpy(zero_copy_only=False)
        is_l = side_vals == cfg.left
        is_r = side_vals == cfg.right
        bad = ~(is_l | is_r)
        if bad.any():
            r = int(np.argmax(bad))
            raise DataError(f"event belongs to neither {cfg.left!r} nor {cfg.right!r} "
                            f"({side_vals[r]!r})", row=r, column=cfg.side_column)
        L, R = self._sides["L"], self._sides["R"]
        # how many events of each stream precede each event of the batch
        nL_before = L.count + np.cumsum(is_l) - is_l
        nR_before = R.count + np.cumsum(is_r) - is_r
        attrs = cfg.attributes
        sub = batch.select(attrs)
        for side, mask in (("L", is_l), ("R", is_r)):
            if mask.any():
                self._sides[side].append(sub.filter(pa.array(mask)), t[mask], seq[mask])
        if L.first_t is None and is_l.any():  # pragma: no cover - set in append
            L.first_t = int(t[is_l][0])
        outs: list[pa.RecordBatch] = []
        order_keys: list[np.ndarray] = []
        for probe, mask, other_key, w, n_before in (
                ("L", is_l, "R", cfg.right_window, nR_before),
                ("R", is_r, "L", cfg.left_window, nL_before)):
            idx = np.flatnonzero(mask)
            if not len(idx):
                continue
            other = self._sides[other_key]
            lo, hi = self._ranges(other, w, n_before[idx], t[idx])
            lo = np.maximum(lo, other.base)
            hi = np.maximum(hi, lo)
            b, keys = self._join(batch, idx, probe, other_key, lo, hi, t)
            outs += b
            order_keys += keys
        if outs:
            table = pa.Table.from_batches(outs, schema=self._schema)
            keys = np.concatenate(order_keys)
            order = np.lexsort((keys[:, 1], keys[:, 0]))
            self._emit(table.take(pa.array(order)))
        self._trim()
        size = len(L.t) + len(R.t)
        self._set_state_size(size, "buffered window events")

    def _join(self, batch: pa.RecordBatch, idx: np.ndarray, probe: str, other_key: str,
              lo: np.ndarray, hi: np.ndarray, t: np.ndarray) -> tuple[list, list]:
        cfg = self.config
        other = self._sides[other_key]
        other_tab = pa.Table.from_batches(other.batches, schema=other.batches[0].schema) \
            if other.batches else None
        counts = hi - lo
        outs, keys = [], []
        if other_tab is None or counts.sum() == 0:
            return outs, keys
        probe_rows = batch.select(cfg.attributes)
        start = 0
        while start < len(idx):
            csum = np.cumsum(counts[start:])
            end = start + max(1, int(np.searchsorted(csum, cfg.chunk_pairs, "right")))
            c = counts[start:end]
            total = int(c.sum())
            if total:
                pi = np.repeat(idx[start:end], c)
                first = np.repeat(lo[start:end] - np.concatenate(([0], np.cumsum(c)[:-1])), c)
                oi = first + np.arange(total)            # global index in the other stream
                rel = oi - other.base
                env_cols = self._env(probe, probe_rows, pi, other_tab, rel, batch, other)
                m = np.broadcast_to(np.asarray(self._pred(env_cols), dtype=bool),
                                    (total,))
                pi, rel = pi[m], rel[m]
                if len(pi):
                    outs.append(self._rows(probe, batch, pi, other_tab, rel, other, t))
                    keys.append(np.stack([pi, rel + other.base], axis=1))
            start = end
        return outs, keys

    def _env(self, probe: str, probe_rows: pa.RecordBatch, pi: np.ndarray, other_tab: pa.Table,
             rel: np.ndarray, batch: pa.RecordBatch, other: _Side) -> _QualifiedEnv:
        cfg = self.config
        env: dict[tuple[str, str], np.ndarray] = {}
        names = {c.name for c in columns(cfg.predicate)}
        for n in names:
            if n == "t":
                pv, ov = column_np(batch, "t")[pi], other.t[rel]
            elif n == "seq":
                pv, ov = column_np(batch, "seq")[pi], other.seq[rel]
            else:
                pv = _np(probe_rows.column(n))[pi]
                ov = _np(other_tab.column(n))[rel]
            lv, rv = (pv, ov) if probe == "L" else (ov, pv)
            env[(cfg.left, n)] = lv
            env[(cfg.right, n)] = rv
            env[("L", n)] = lv
            env[("R", n)] = rv
        return _QualifiedEnv(env)

    def _rows(self, probe: str, batch: pa.RecordBatch, pi: np.ndarray, other_tab: pa.Table,
              rel: np.ndarray, other: _Side, t: np.ndarray) -> pa.RecordBatch:
        cfg = self.config
        seq = column_np(batch, "seq").astype(np.int64)
        pcols = batch.select(cfg.attributes).take(pa.array(pi))
        ocols = other_tab.take(pa.array(rel))
        p_t, p_seq = t[pi], seq[pi]
        o_t, o_seq = other.t[rel], other.seq[rel]
        if probe == "L":
            lt, ls, rt, rs, lc, rc = p_t, p_seq, o_t, o_seq, pcols, ocols
        else:
            lt, ls, rt, rs, lc, rc = o_t, o_seq, p_t, p_seq, ocols, pcols
        arrays = [pa.array(p_t), pa.array([cfg.left if probe == "L" else cfg.right] * len(pi)),
                  pa.array(lt), pa.array(ls), pa.array(rt), pa.array(rs)]
        for cols in (lc, rc):
            for a in cfg.attributes:
                col = cols.column(a)
                arrays.append(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema)

    def _trim(self) -> None:
        cfg = self.config
        for key, w in (("L", cfg.left_window), ("R", cfg.right_window)):
            s = self._sides[key]
            if w.kind == "count":
                keep = s.count - w.size - w.slide
            else:
                if self._last is None or s.first_t is None:
                    continue
                horizon = self._last[0] - w.size - w.slide
                keep = s.base + int(np.searchsorted(s.t, horizon, "left"))
            if keep - s.base > max(1024, len(s.t) // 2):
                s.trim(keep)

    def _check_order(self, t: np.ndarray, seq: np.ndarray) -> None:
        """Time must not go backwards (equal ``t``: arrival order, see the module docstring)."""
        if self._last is not None and len(t) and t[0] < self._last[0]:
            raise DataError("input must be in time order", row=0, column="t")
        if len(t) > 1:
            bad = np.diff(t) < 0
            if bad.any():
                raise DataError("input must be in time order", row=int(np.argmax(bad)) + 1,
                                column="t")
        if len(t):
            self._last = (int(t[-1]), int(seq[-1]))


def _np(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return col.to_numpy(zero_copy_only=False)
    if col.null_count and pa.types.is_integer(col.type):
        return col.to_numpy(zero_copy_only=False).astype(np.float64)
    return col.to_numpy(zero_copy_only=False)


class _QualifiedEnv(ColumnsEnv):
    """Environment mapping (qualifier, name) to arrays over candidate pairs."""

    def __init__(self, cols: dict[tuple[str, str], np.ndarray]) -> None:
        super().__init__({})
        self.qcols = cols

    def column(self, ref: Column) -> Any:
        try:
            return self.qcols[(ref.qualifier, ref.name)]
        except KeyError:
            raise QueryError(f"unknown column {ref.qualifier}.{ref.name} in the join "
                             "predicate") from None
