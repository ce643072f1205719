"""Columnar buffer of the relevant events an imprecise pattern still needs.

Events arrive as Arrow batches; :func:`ingest` turns a batch into :class:`Ingested` NumPy columns
(validated uncertainty intervals, pmf weights, the per-component match mask of the single-event
conditions) and :class:`EventBuffer` keeps the relevant ones (those matching at least one pattern
component) in arrival order. Every event gets a ``uid``: its arrival number, strictly increasing,
which runs and matches use to refer to it (``seq`` is only reported).

pmf storage: ``woff[i] == -1`` means uniform over ``[lo, hi]``; otherwise the normalized weights of
the instants ``lo..hi`` are ``wflat[woff[i] : woff[i] + hi - lo + 1]``, their running sums are in
``cflat`` and the raw (unnormalized) weights in ``rawflat`` (used for exact rational arithmetic).

Complexity: ingest is O(batch + pmf entries), vectorized; append is O(buffer) (concatenation);
lookups by uid are O(log n) each.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.errors import DataError
from replaydb.operators.base import column_np
from replaydb.operators.imprecise.config import ImpreciseConfig
from replaydb.operators.imprecise.predicates import PredicatePlan


@dataclass
class Ingested:
    """One batch, NumPy columns, only the relevant rows (``comp.any(axis=1)``)."""

    seq: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    comp: np.ndarray  # bool (n, l)
    attrs: dict[str, np.ndarray]
    woff: np.ndarray  # -1 uniform, else offset into wflat
    wflat: np.ndarray
    cflat: np.ndarray
    rawflat: np.ndarray
    lo_raw: np.ndarray  # declared lower bounds of the relevant rows (before trimming)
    lo_all: np.ndarray  # declared lower bounds of ALL rows of the batch (relevant or not)
    hi_all: np.ndarray


def _int_column(batch: pa.RecordBatch, name: str) -> np.ndarray:
    col = batch.column(name)
    if col.null_count:
        arr = col.is_null().to_numpy(zero_copy_only=False)
        row = int(np.flatnonzero(arr)[0])
        raise DataError("uncertainty bound is null", row=row, column=name)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)


def _type_mask(batch: pa.RecordBatch, column: str, type_name: str) -> np.ndarray:
    col = batch.column(column)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return pc.fill_null(pc.equal(col, pa.scalar(type_name, col.type)), False).to_numpy(
        zero_copy_only=False)


def _pmf_from_list(batch: pa.RecordBatch, name: str, lo: np.ndarray, hi: np.ndarray,
                   rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                              np.ndarray]:
    """Weights of the relevant ``rows``: validate, trim zero-weight ends, normalize.

    Returns ``(lo, hi, woff, wflat_raw, rowid)`` with trimmed bounds; ``wflat_raw`` holds the raw
    weights of the trimmed intervals back to back.
    """
    col = batch.column(name)
    if col.null_count:
        bad = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
        raise DataError("pmf is null", row=int(bad[0]), column=name)
    # offsets of a sliced list array index its whole (unsliced) values array
    offsets = np.asarray(col.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    base = int(offsets[0])
    values = col.values.slice(base, int(offsets[-1]) - base)
    if values.null_count:
        raise DataError("pmf weight is null", column=name)
    vals = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
    lens = np.diff(offsets)
    want = hi - lo + 1
    badlen = np.flatnonzero(lens != want)
    if badlen.size:
        r = int(badlen[0])
        raise DataError(f"pmf has {int(lens[r])} weights but the interval [{int(lo[r])}, "
                        f"{int(hi[r])}] has {int(want[r])} instants", row=r, column=name)
    if vals.size and (not np.all(np.isfinite(vals)) or np.any(vals < 0)):
        flat_bad = int(np.flatnonzero(~np.isfinite(vals) | (vals < 0))[0])
        r = int(np.searchsorted(offsets - base, flat_bad, side="right") - 1)
        raise DataError("pmf weights must be finite and non-negative", row=r, column=name)
    lo_r, hi_r = lo[rows], hi[rows]
    starts = offsets[rows] - base
    lens_r = lens[rows]
    n = rows.size
    if n == 0:
        return lo_r, hi_r, np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)
    rowid = np.repeat(np.arange(n), lens_r)
    local = np.arange(int(lens_r.sum())) - np.repeat(np.cumsum(lens_r) - lens_r, lens_r)
    flat = vals[np.repeat(starts, lens_r) + local]
    pos = flat > 0
    big = np.iinfo(np.int64).max
    first = np.full(n, big, np.int64)
    last = np.full(n, -1, np.int64)
    np.minimum.at(first, rowid[pos], local[pos])
    np.maximum.at(last, rowid[pos], local[pos])
    zero_rows = np.flatnonzero(last < 0)
    if zero_rows.size:
        raise DataError("pmf weights sum to zero", row=int(rows[zero_rows[0]]), column=name)
    keep = (local >= first[rowid]) & (local <= last[rowid])
    new_lo = lo_r + first
    new_hi = lo_r + last
    new_lens = last - first + 1
    woff = np.cumsum(new_lens) - new_lens
    return new_lo, new_hi, woff, flat[keep], np.repeat(np.arange(n), new_lens)


def _triangular(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lens = hi - lo + 1
    n = lo.size
    rowid = np.repeat(np.arange(n), lens)
    local = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    w = np.minimum(local + 1, lens[rowid] - local).astype(np.float64)
    return np.cumsum(lens) - lens, w, rowid


def _normalize(raw: np.ndarray, woff: np.ndarray, rowid: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    if raw.size == 0:
        return raw.copy(), raw.copy()
    sums = np.add.reduceat(raw, woff) if woff.size else np.zeros(0)
    w = raw / sums[rowid]
    c = np.cumsum(w)
    start_c = np.where(woff > 0, c[np.maximum(woff - 1, 0)], 0.0)
    c = c - start_c[rowid]
    return w, c


def ingest(batch: pa.RecordBatch, config: ImpreciseConfig, plan: PredicatePlan) -> Ingested:
    """Validate one batch and keep its relevant events (vectorized)."""
    lo = _int_column(batch, config.lower_column)
    hi = _int_column(batch, config.upper_column)
    bad = np.flatnonzero(hi < lo)
    if bad.size:
        r = int(bad[0])
        raise DataError(f"uncertainty interval [{int(lo[r])}, {int(hi[r])}] is empty "
                        f"(upper < lower)", row=r, column=config.upper_column)
    seq = np.asarray(column_np(batch, "seq"), dtype=np.int64)
    n = lo.size
    comp = np.zeros((n, config.length), dtype=bool)
    needed = plan.attribute_names
    cols = {name: column_np(batch, name) for name in needed}
    types: dict[str, np.ndarray] = {}
    relevant = np.zeros(n, dtype=bool)
    for j, c in enumerate(config.components):
        if c.type_name not in types:
            types[c.type_name] = _type_mask(batch, config.type_column, c.type_name)
        m = types[c.type_name].copy()
        if m.any():
            m &= plan.single_mask(j, cols, n)
        comp[:, j] = m
        relevant |= m
    rows = np.flatnonzero(relevant)
    attrs = {k: v[rows] for k, v in cols.items()}
    if config.pmf_column is not None:
        lo_r, hi_r, woff, raw, rowid = _pmf_from_list(batch, config.pmf_column, lo, hi, rows)
    elif config.pmf == "triangular":
        lo_r, hi_r = lo[rows], hi[rows]
        woff, raw, rowid = _triangular(lo_r, hi_r)
    else:
        lo_r, hi_r = lo[rows], hi[rows]
        woff, raw, rowid = np.full(rows.size, -1, np.int64), np.zeros(0), np.zeros(0, np.int64)
    w, c = _normalize(raw, woff, rowid) if raw.size else (raw.copy(), raw.copy())
    return Ingested(seq=seq[rows], lo=lo_r, hi=hi_r, comp=comp[rows], attrs=attrs,
                    woff=np.asarray(woff, np.int64), wflat=w, cflat=c, rawflat=raw,
                    lo_raw=lo[rows], lo_all=lo, hi_all=hi)


class EventBuffer:
    """Relevant events in arrival order (see the module docstring)."""

    def __init__(self, length: int, attr_names: tuple[str, ...]) -> None:
        self.length = length
        self.attr_names = attr_names
        self.uid = np.zeros(0, np.int64)
        self.seq = np.zeros(0, np.int64)
        self.lo = np.zeros(0, np.int64)
        self.hi = np.zeros(0, np.int64)
        self.comp = np.zeros((0, length), bool)
        self.attrs: dict[str, np.ndarray] = {a: np.zeros(0) for a in attr_names}
        self.woff = np.zeros(0, np.int64)
        self.wflat = np.zeros(0)
        self.cflat = np.zeros(0)
        self.rawflat = np.zeros(0)
        self.next_uid = 0
        self.width_max = 0  # max(hi - lo) over every event ever buffered

    def __len__(self) -> int:
        return int(self.uid.size)

    def append(self, ev: Ingested) -> np.ndarray:
        """Append relevant events; returns their uids."""
        k = ev.seq.size
        uids = np.arange(self.next_uid, self.next_uid + k, dtype=np.int64)
        self.next_uid += k
        if k == 0:
            return uids
        base = self.wflat.size
        woff = np.where(ev.woff >= 0, ev.woff + base, -1)
        self.uid = np.concatenate([self.uid, uids])
        self.seq = np.concatenate([self.seq, ev.seq])
        self.lo = np.concatenate([self.lo, ev.lo])
        self.hi = np.concatenate([self.hi, ev.hi])
        self.comp = np.concatenate([self.comp, ev.comp])
        for a in self.attr_names:
            old = self.attrs[a]
            new = ev.attrs[a]
            if old.size == 0:
                self.attrs[a] = new.copy()
            else:
                if old.dtype != new.dtype and not (old.dtype == object or new.dtype == object):
                    dt = np.result_type(old.dtype, new.dtype)
                    old, new = old.astype(dt), new.astype(dt)
                elif old.dtype != new.dtype:
                    old, new = old.astype(object), new.astype(object)
                self.attrs[a] = np.concatenate([old, new])
        self.woff = np.concatenate([self.woff, woff])
        if ev.wflat.size:
            self.wflat = np.concatenate([self.wflat, ev.wflat])
            self.cflat = np.concatenate([self.cflat, ev.cflat])
            self.rawflat = np.concatenate([self.rawflat, ev.rawflat])
        self.width_max = max(self.width_max, int((ev.hi - ev.lo).max()))
        return uids

    def keep(self, mask: np.ndarray) -> None:
        """Drop the events where ``mask`` is False (pmf storage is compacted too)."""
        if mask.all():
            return
        self.uid = self.uid[mask]
        self.seq = self.seq[mask]
        lo, hi = self.lo[mask], self.hi[mask]
        self.comp = self.comp[mask]
        for a in self.attr_names:
            self.attrs[a] = self.attrs[a][mask]
        woff = self.woff[mask]
        has = woff >= 0
        if has.any():
            lens = np.where(has, hi - lo + 1, 0)
            idx = np.repeat(woff, lens) + (np.arange(int(lens.sum()))
                                           - np.repeat(np.cumsum(lens) - lens, lens))
            new_off = np.cumsum(lens) - lens
            self.wflat, self.cflat, self.rawflat = (self.wflat[idx], self.cflat[idx],
                                                    self.rawflat[idx])
            self.woff = np.where(has, new_off, -1)
        else:
            self.woff = woff
            self.wflat = self.cflat = self.rawflat = np.zeros(0)
        self.lo, self.hi = lo, hi

    def positions(self, uids: np.ndarray) -> np.ndarray:
        """Buffer positions of ``uids`` (which must all be buffered)."""
        pos = np.searchsorted(self.uid, uids)
        return pos

    # ------------------------------------------------------------------ pmf access
    def points(self, pos: int) -> tuple[np.ndarray, np.ndarray]:
        """Instants and (float) probabilities of the event at ``pos``."""
        lo, hi = int(self.lo[pos]), int(self.hi[pos])
        ts = np.arange(lo, hi + 1, dtype=np.int64)
        off = int(self.woff[pos])
        if off < 0:
            return ts, np.full(ts.size, 1.0 / ts.size)
        return ts, self.wflat[off: off + ts.size].copy()

    def exact_points(self, pos: int) -> list[tuple[int, Fraction]]:
        """Instants and exact rational probabilities (positive ones only) of the event."""
        lo, hi = int(self.lo[pos]), int(self.hi[pos])
        off = int(self.woff[pos])
        if off < 0:
            p = Fraction(1, hi - lo + 1)
            return [(t, p) for t in range(lo, hi + 1)]
        raw = [Fraction(float(x)) for x in self.rawflat[off: off + hi - lo + 1]]
        total = sum(raw)
        return [(lo + k, w / total) for k, w in enumerate(raw) if w > 0]

    def float_points(self, pos: int) -> list[tuple[int, float]]:
        ts, ps = self.points(pos)
        return [(int(t), float(p)) for t, p in zip(ts, ps) if p > 0]

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict:
        return {k: getattr(self, k) for k in (
            "uid", "seq", "lo", "hi", "comp", "attrs", "woff", "wflat", "cflat", "rawflat",
            "next_uid", "width_max")}

    def set_state(self, state: dict) -> None:
        for k, v in state.items():
            setattr(self, k, v)

    def _check(self) -> None:
        """Invariants: uids strictly increasing, intervals non-empty, pmf slices in range."""
        n = self.uid.size
        assert all(x.shape[0] == n for x in (self.seq, self.lo, self.hi, self.comp, self.woff))
        assert all(v.shape[0] == n for v in self.attrs.values())
        assert np.all(np.diff(self.uid) > 0)
        assert np.all(self.hi >= self.lo)
        assert np.all(self.comp.any(axis=1))
        if n:
            assert self.uid[-1] < self.next_uid
            assert self.width_max >= int((self.hi - self.lo).max())
        has = self.woff >= 0
        if has.any():
            ends = self.woff[has] + (self.hi - self.lo)[has] + 1
            assert int(ends.max()) <= self.wflat.size == self.cflat.size == self.rawflat.size
            for off, lo, hi in zip(self.woff[has], self.lo[has], self.hi[has]):
                w = self.wflat[off: off + hi - lo + 1]
                assert w[0] > 0 and w[-1] > 0 and abs(w.sum() - 1) < 1e-9
