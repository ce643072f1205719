"""GRETA's index universes: the sorted (partition, key) entries of every index and their rebuild.

An index holds, per partition, the sorted distinct keys of its vertices (the edge predicate's
attribute) with one aggregate row per key; a Fenwick index keeps the prefix tree over these rows.
When a sub-chunk's new vertices bring keys the universe lacks (or after K+1 sub-chunks, when every
older entry may have expired), the index is rebuilt from its live rows: dead rows dropped, rows
moved to their new ranks, trees rebuilt; otherwise it is used as is. Every new vertex then gets a
rank and every probe a prefix bound, computed with ``searchsorted`` once for the whole sub-chunk
(through a lookup table over small integer key ranges, see :class:`Positions`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from replaydb.errors import DataError
from replaydb.operators.greta import kernel as kn
from replaydb.operators.greta.events import EventChunk, null_mask
from replaydb.operators.greta.plan import FENWICK, NONE, SCAN
from replaydb.operators.greta.state import EMPTY_I, GraphStore


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a`` in ascending order (as ``np.unique`` for values without
    NaN, which index keys never hold; unorderable values raise ``TypeError``), with fewer
    calls for the small arrays of a sub-chunk. O(n log n)."""
    if len(a) < 2:
        return a.copy()
    b = np.sort(a)
    keep = np.empty(len(b), bool)
    keep[0] = True
    np.not_equal(b[1:], b[:-1], out=keep[1:])
    return b[keep]


class Positions:
    """``np.searchsorted(hay, needles, side)`` for sorted integer ``hay``, answered from a lookup
    table over ``hay``'s value range when that range is small next to the number of needles.

    A binary search per needle costs O(log m) cache misses; with a table, building it costs
    O(range) (a search over sorted needles) and each needle one gather. The tables are cached per
    (hay, side) for the object's lifetime (one sub-chunk), so every probe of that sub-chunk
    shares them; ``hay`` must not change meanwhile. A cached table holds its ``hay``, so the
    ``id`` in its key cannot be reused by another array. Any other input falls back to
    ``np.searchsorted`` (same result)."""

    MIN_NEEDLES = 64
    RANGE_PER_NEEDLE = 8

    def __init__(self) -> None:
        self._luts: dict[tuple[int, int, str], tuple[np.ndarray, np.ndarray, int]] = {}

    def __call__(self, hay: np.ndarray, needles: np.ndarray, side: str = "left") -> np.ndarray:
        n, m = len(needles), len(hay)
        if (n < self.MIN_NEEDLES or m == 0 or hay.dtype.kind not in "iu"
                or needles.dtype.kind not in "iu"):
            return np.searchsorted(hay, needles, side).astype(np.int64)
        key = (id(hay), m, side)
        hit = self._luts.get(key)
        if hit is None:
            lo, hi = int(hay[0]), int(hay[-1])
            if hi - lo + 1 > self.RANGE_PER_NEEDLE * n + 1024:
                return np.searchsorted(hay, needles, side).astype(np.int64)
            if hi - lo + 1 == m and bool(np.all(np.diff(hay) == 1)):  # hay is lo..hi itself
                lut = np.arange(m, dtype=np.int64) + (1 if side == "right" else 0)
            else:
                lut = np.searchsorted(hay, np.arange(lo, hi + 1, dtype=np.int64), side)
            hit = (hay, lut.astype(np.int64), lo)
            self._luts[key] = hit
        _, lut, lo = hit
        span = len(lut)
        idx = needles.astype(np.int64) - lo
        out = lut[np.clip(idx, 0, span - 1)]
        out[idx < 0] = 0
        out[idx >= span] = m
        return out

class IndexUniverses(GraphStore):
    """Index universes of one graph: layout, rebuild, ranks and probe bounds."""

    def _row_of_asc(self, ii: int, desc: bool) -> np.ndarray:
        """Local row of every universe entry (entries are stored in ascending key order per
        partition; rows of a descending index hold them in reverse order; entries of partitions
        forgotten by compaction keep their position). O(entries)."""
        n = len(self.u_pid[ii])
        if not desc or n == 0:
            return np.arange(n, dtype=np.int64)
        return kn.rows_of_asc(self.u_pid[ii], self.off[ii], self.sz[ii], int(self.ubase[ii]))

    def _set_ranges(self, ii: int, base: int, P: int) -> None:
        """off/sz of every partition of index ii from its universe (an empty partition gets the
        position where its keys would be, so that probe bounds computed on the universe are
        0)."""
        parts = np.arange(P, dtype=np.int64)
        lo = np.searchsorted(self.u_pid[ii], parts, "left").astype(np.int64)
        hi = np.searchsorted(self.u_pid[ii], parts, "right").astype(np.int64)
        self.off[ii, :P] = base + lo
        self.sz[ii, :P] = hi - lo

    DENSE_FACTOR = 4
    """A dense universe may hold up to this many times the entries of the sparse one ..."""
    DENSE_MIN = 4096
    """... or this many entries, whichever is larger."""

    def _dense_ok(self, dense_size: int, entries: int) -> bool:
        return dense_size <= max(self.DENSE_FACTOR * entries, self.DENSE_MIN)

    def _universe(self, ix: Any, gk: np.ndarray, o_pid: np.ndarray, o_key: np.ndarray,
                  n_pid: np.ndarray, n_key: np.ndarray, P: int, pos_of: Positions
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """The new universe of an index: (distinct keys ``gk``, sorted codes ``pid * (len(gk) +
        1) + key rank``, codes of the kept old entries, dense?).

        Sparse: the live old entries plus the new vertices' (partition, key) pairs. Dense (main
        graph, Fenwick index over integer keys): every partition ``0..P-1``
        times every integer key in the observed range widened by an eighth of its span on both
        sides, when that is at most :attr:`DENSE_FACTOR` times the sparse size (or
        :attr:`DENSE_MIN`), the sparse size counted as at least K times the (partition, key)
        pairs of this sub-chunk's vertices: a stream that has just begun holds about K
        sub-chunks' worth of pairs before its first vertices expire, and judging it by its first
        sub-chunks alone would rebuild it on every sub-chunk until it became dense. The age rule
        below keeps memory bounded all the same.
        Later sub-chunks whose vertices fall inside a dense universe need no
        rebuild (no row moves, no Fenwick rebuild), and the age rule does not apply to it while it
        stays within the size bound of its live entries. Its extra rows hold zero (empty) values,
        so results are unchanged; memory stays within a constant factor of the sparse layout.
        Decision: dense layouts only in the main graph, where a dead row is exactly an empty row
        (negative graphs keep times in their rows), and not for aggregate (single-key) indexes:
        there a dense layout is one row per partition, dead ones included, and it saves no
        rebuild that a new partition would not force anyway. O(size of the new universe)."""
        mult = len(gk) + 1
        o_comp = o_pid * mult + pos_of(gk, o_key) if len(o_key) else EMPTY_I
        n_comp = n_pid * mult + pos_of(gk, n_key) if len(n_key) else EMPTY_I
        nu = sorted_unique(n_comp)
        if len(o_comp):
            pos = np.searchsorted(o_comp, nu)
            there = pos < len(o_comp)
            there[there] = o_comp[pos[there]] == nu[there]
            uc = np.insert(o_comp, pos[~there], nu[~there])
        else:
            uc = nu
        if not (self.is_main and ix.kind == FENWICK and gk.dtype.kind in "iu" and len(gk) and P):
            return gk, uc, o_comp, False
        lo, hi = int(gk[0]), int(gk[-1])
        pad = (hi - lo) // 8
        dk = np.arange(lo - pad, hi + pad + 1, dtype=gk.dtype)
        # a young stream is judged by the pairs it will hold: about K sub-chunks' worth
        if not self._dense_ok(P * len(dk), max(len(uc), self.K * len(nu))):
            return gk, uc, o_comp, False
        dm = len(dk) + 1
        duc = (np.arange(P, dtype=np.int64)[:, None] * dm
               + np.arange(len(dk), dtype=np.int64)[None, :]).reshape(-1)
        do = o_pid * dm + pos_of(dk, o_key) if len(o_key) else EMPTY_I
        return dk, duc, do, True

    def _rebuild_indexes(self, ev: EventChunk, rows: np.ndarray, xs: np.ndarray, pid: np.ndarray,
                         compacted: bool, W0: int, rank: np.ndarray, bound: np.ndarray,
                         gc0: Any) -> None:
        """Give every new source occurrence a rank and every target occurrence a probe bound
        (``gc0``: the kernel configuration, for the Fenwick rebuilds).

        An index keeps its universe (no copy, no Fenwick rebuild) when all keys of the
        sub-chunk's new vertices are already in it; otherwise, or once every entry present at its
        last rebuild may have expired (K+1 sub-chunks; not for a dense universe still within its
        size bound, see :meth:`_universe`), it is rebuilt from its live entries."""
        g = self.g
        P = len(self.parts)
        pos_of = Positions()
        new_keys = [self._new_source_keys(ii, ix, ev, rows, xs) for ii, ix in enumerate(g.indexes)]
        need = [nk is not None and self._needs_rebuild(ii, nk, pid, compacted, W0, pos_of)
                for ii, nk in enumerate(new_keys)]
        # rebuild the indexes that need it (on the old pools), compute new layouts; off/sz are
        # written in place below, ubase is replaced
        rebuilt = [ii for ii in range(self.nI) if need[ii]]
        old_off = self.off.copy() if rebuilt else self.off
        old_sz = self.sz.copy() if rebuilt else self.sz
        old_ubase = self.ubase
        lay: list[dict[str, Any]] = []
        for ii, ix in enumerate(g.indexes):
            if ix.kind == SCAN:
                lay.append({"size": 0, "keep": False})
            elif not need[ii]:
                lay.append({"size": len(self.u_pid[ii]), "keep": True})
                self.ix_age[ii] += 1
            else:
                lay.append(self._rebuilt_layout(ii, ix, new_keys[ii], pid, P, W0, old_ubase, gc0,
                                                pos_of))
        self._move_pools(lay, rebuilt, old_ubase, P)
        self._build_fenwicks(rebuilt, P, gc0)
        self._adopt_universes(rebuilt, lay, old_off, old_sz, old_ubase, pos_of)
        self._source_ranks(new_keys, pid, rank, pos_of)
        self._probe_bounds(ev, rows, xs, pid, bound, pos_of)

    def _new_source_keys(self, ii: int, ix: Any, ev: EventChunk, rows: np.ndarray, xs: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(occurrences of index ``ii``'s source state, their keys, which keys are not null);
        None for a scan index."""
        if ix.kind == SCAN:
            return None
        src_sel = np.flatnonzero(xs == ix.src)
        if ix.kind == NONE:
            n_key = np.zeros(len(src_sel), np.int64)
            valid = np.ones(len(src_sel), bool)
        else:
            n_key = ev.values(ix.key, rows[src_sel])
            valid = ~null_mask(n_key)
        return src_sel, n_key, valid

    def _needs_rebuild(self, ii: int, new_keys: tuple[np.ndarray, np.ndarray, np.ndarray],
                       pid: np.ndarray, compacted: bool, W0: int, pos_of: Positions) -> bool:
        """Whether index ``ii`` must be rebuilt for this sub-chunk: after a partition compaction,
        before its first build, once it has aged past K sub-chunks (a dense universe only when it
        outgrew its size bound), or when a new vertex's (partition, key) is not in it."""
        src_sel, n_key, valid = new_keys
        gk, uc = self.u_gk[ii], self.u_uc[ii]
        if compacted or gk is None:
            return True
        if self.ix_age[ii] >= self.K + 1:
            if not self.u_dense[ii] or not self._dense_ok(len(uc), int(self._alive_rows(
                    self.ptI[self.ubase[ii]: self.ubase[ii + 1]], W0).sum())):
                return True
        if not valid.any():
            return False
        nk = n_key[valid]
        try:
            r = pos_of(gk, nk)
        except TypeError as e:
            raise DataError(f"edge-predicate key values cannot be ordered: {e}") from None
        inside = r < len(gk)
        inside[inside] = gk[r[inside]] == nk[inside]
        if not inside.all():
            return True
        nc = pid[src_sel][valid] * (len(gk) + 1) + r
        pos = pos_of(uc, nc)
        there = pos < len(uc)
        there[there] = uc[pos[there]] == nc[there]
        return not there.all()

    def _rebuilt_layout(self, ii: int, ix: Any, new_keys: tuple[np.ndarray, np.ndarray, np.ndarray],
                        pid: np.ndarray, P: int, W0: int, old_ubase: np.ndarray, gc0: Any,
                        pos_of: Positions) -> dict[str, Any]:
        """The new universe of rebuilt index ``ii`` and where its kept rows move: its live old
        entries plus the new vertices' entries, laid out per partition. Recovers the point
        values of a Fenwick tree kept in its point rows first."""
        if ix.kind == FENWICK and self.fw_in_pt and P and old_ubase[ii + 1] > old_ubase[ii]:
            kn.fenwicks_to_points(self.ptI, self.ptF, np.ascontiguousarray(self.off[ii, :P]),
                                  np.ascontiguousarray(self.sz[ii, :P]), gc0)
        row_of = self._row_of_asc(ii, ix.desc)
        live = self._alive_rows(self.ptI[old_ubase[ii]: old_ubase[ii + 1]], W0)
        keep_asc = live[row_of] & (self.u_pid[ii] >= 0) if len(row_of) else \
            np.zeros(0, bool)
        o_pid = self.u_pid[ii][keep_asc]
        o_key = self.u_key[ii][keep_asc]
        src_sel, n_key, valid = new_keys
        nk = n_key[valid]
        all_keys = np.concatenate([np.asarray(o_key), np.asarray(nk)]) \
            if len(o_key) or len(nk) else np.zeros(0, np.int64)
        try:
            gk = sorted_unique(all_keys)
        except TypeError as e:
            raise DataError(f"edge-predicate key values cannot be ordered: {e}") from None
        gk, uc, o_comp, dense = self._universe(ix, gk, o_pid, o_key, pid[src_sel][valid],
                                               nk, P, pos_of)
        mult = len(gk) + 1
        u_pid = uc // mult
        u_key = gk[uc % mult] if len(uc) else np.zeros(0, gk.dtype)
        parts = np.arange(P, dtype=np.int64)
        lo = np.searchsorted(u_pid, parts, "left").astype(np.int64)
        szp = np.searchsorted(u_pid, parts, "right").astype(np.int64) - lo
        self.ix_age[ii] = 0
        self.u_dense[ii] = dense
        return {"size": len(uc), "keep": False, "u_pid": u_pid, "u_key": u_key, "gk": gk,
                "uc": uc, "lo": lo, "sz": szp,
                "old_rows": row_of[keep_asc],
                "new_asc": pos_of(uc, o_comp) if len(o_comp) else EMPTY_I,
                "o_pid": o_pid}

    def _move_pools(self, lay: list[dict[str, Any]], rebuilt: list[int], old_ubase: np.ndarray,
                    P: int) -> None:
        """New point (and separate Fenwick) pools when an index was rebuilt or a pool size
        changed: kept indexes copied as they are, rebuilt ones' live rows moved to their new
        ranks; then off/sz of every partition. O(total pool size) when anything moves."""
        g = self.g
        nI = self.nI
        sizes = np.array([lay[ii]["size"] for ii in range(nI)], np.int64)
        ubase = np.zeros(nI + 1, np.int64)
        ubase[1:] = np.cumsum(sizes)
        if not rebuilt and np.array_equal(ubase, old_ubase):
            if P != self.ranges_P:  # partitions created by this sub-chunk get their (empty) range
                for ii in range(nI):
                    if g.indexes[ii].kind != SCAN:
                        self._set_ranges(ii, ubase[ii], P)
                self.ranges_P = P
            return
        total = int(ubase[-1])
        ptI, ptF = self.fresh_rows(total)
        sep_fw = not self.fw_in_pt and any(ix.kind == FENWICK for ix in g.indexes)
        fwI, fwF = self.fresh_rows(total if sep_fw else 0)
        for ii, ix in enumerate(g.indexes):
            L_ = lay[ii]
            if L_["keep"]:
                a, b = old_ubase[ii], old_ubase[ii + 1]
                ptI[ubase[ii]: ubase[ii + 1]] = self.ptI[a:b]
                ptF[ubase[ii]: ubase[ii + 1]] = self.ptF[a:b]
                if sep_fw and ix.kind == FENWICK:
                    fwI[ubase[ii]: ubase[ii + 1]] = self.fwI[a:b]
                    fwF[ubase[ii]: ubase[ii + 1]] = self.fwF[a:b]
                self._set_ranges(ii, ubase[ii], P)
            elif ix.kind != SCAN:
                lo, szp, o_pid = L_["lo"], L_["sz"], L_["o_pid"]
                if len(L_["old_rows"]):
                    loc = L_["new_asc"] - lo[o_pid]
                    if ix.desc:
                        loc = szp[o_pid] - 1 - loc
                    src_rows = old_ubase[ii] + L_["old_rows"]
                    ptI[ubase[ii] + lo[o_pid] + loc] = self.ptI[src_rows]
                    ptF[ubase[ii] + lo[o_pid] + loc] = self.ptF[src_rows]
                self.off[ii, :P] = ubase[ii] + lo
                self.sz[ii, :P] = szp
        self.ptI, self.ptF, self.fwI, self.fwF = ptI, ptF, fwI, fwF
        self.ubase = ubase
        self.ranges_P = P

    def _build_fenwicks(self, rebuilt: list[int], P: int, gc0: Any) -> None:
        """Rebuild the Fenwick trees of the rebuilt Fenwick indexes over their moved rows."""
        for ii in rebuilt:
            if self.g.indexes[ii].kind == FENWICK and P and self.ubase[ii + 1] > self.ubase[ii]:
                offs = np.ascontiguousarray(self.off[ii, :P])
                szs = np.ascontiguousarray(self.sz[ii, :P])
                if self.fw_in_pt:
                    kn.build_all_fenwicks(self.ptI, self.ptF, self.ptI, self.ptF, offs, szs, gc0)
                else:
                    kn.build_all_fenwicks(self.fwI, self.fwF, self.ptI, self.ptF, offs, szs, gc0)

    def _adopt_universes(self, rebuilt: list[int], lay: list[dict[str, Any]],
                         old_off: np.ndarray, old_sz: np.ndarray, old_ubase: np.ndarray,
                         pos_of: Positions) -> None:
        """Install the new universes of the rebuilt indexes, re-ranking the live records that
        point into them (a record's rank is its row within its partition)."""
        g = self.g
        for ii in rebuilt:
            L_ = lay[ii]
            ix = g.indexes[ii]
            if ix.has_records and self.r_n:
                sel = np.flatnonzero((self.r_ix[: self.r_n] == ii) & self.r_alive[: self.r_n]
                                     & (self.r_rank[: self.r_n] >= 0))
                if len(sel):
                    rp = self.r_pid[sel]
                    rr = self.r_rank[sel]
                    asc = old_sz[ii, rp] - 1 - rr if ix.desc else rr
                    keys = self.u_key[ii][old_off[ii, rp] - old_ubase[ii] + asc]
                    comp = rp * (len(L_["gk"]) + 1) + pos_of(L_["gk"], keys)
                    loc = pos_of(L_["uc"], comp) - L_["lo"][rp]
                    if ix.desc:
                        loc = L_["sz"][rp] - 1 - loc
                    self.r_rank[sel] = loc
            self.u_pid[ii], self.u_key[ii] = L_["u_pid"], L_["u_key"]
            self.u_gk[ii], self.u_uc[ii] = L_["gk"], L_["uc"]

    def _source_ranks(self, new_keys: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None],
                      pid: np.ndarray, rank: np.ndarray, pos_of: Positions) -> None:
        """``rank[occurrence, slot]``: the row of every new source occurrence's key within its
        partition of each index it feeds (-1 for a null key)."""
        g = self.g
        for ii, ix in enumerate(g.indexes):
            if ix.kind == SCAN or new_keys[ii] is None:
                continue
            src_sel, n_key, valid = new_keys[ii]
            if not len(src_sel):
                continue
            gk, uc = self.u_gk[ii], self.u_uc[ii]
            slot = g.out_ix[ix.src].index(ii)
            r = np.full(len(src_sel), -1, np.int64)
            if valid.any():
                pv = pid[src_sel][valid]
                comp = pv * (len(gk) + 1) + pos_of(gk, n_key[valid])
                lo = self.off[ii, pv] - self.ubase[ii]
                loc = pos_of(uc, comp) - lo
                if ix.desc:
                    loc = self.sz[ii, pv] - 1 - loc
                r[valid] = loc
            rank[src_sel, slot] = r

    def _probe_bounds(self, ev: EventChunk, rows: np.ndarray, xs: np.ndarray, pid: np.ndarray,
                      bound: np.ndarray, pos_of: Positions) -> None:
        """``bound[occurrence, slot]``: for every target occurrence and incoming transition, the
        prefix of its partition's rows that satisfies the edge predicate (an exact row for
        ``=``, -1 when there is none)."""
        g = self.g
        for T in g.transitions:
            ix = g.indexes[T.index]
            tgt = np.flatnonzero(xs == T.dst)
            if not len(tgt) or ix.kind == SCAN:
                continue
            slot = g.in_tr[T.dst].index(T.id)
            if ix.kind == NONE:
                bound[tgt, slot] = 0
                continue
            gk, uc = self.u_gk[T.index], self.u_uc[T.index]
            mult = len(gk) + 1
            pv = pid[tgt]
            v = ev.values(T.probe, rows[tgt])
            ok = ~null_mask(v)
            b = np.zeros(len(tgt), np.int64) if ix.kind == FENWICK else \
                np.full(len(tgt), -1, np.int64)
            if ok.any() and len(gk):
                vv = v[ok]
                pp = pv[ok]
                lo = self.off[T.index, pp] - self.ubase[T.index]
                op = T.op
                # rows below the probe's key (left) or up to it (right), as each operator needs
                cl = self._prefix(gk, uc, vv, pp, mult, lo, "left", pos_of) \
                    if op in ("<", ">=", "=") else None
                cr = self._prefix(gk, uc, vv, pp, mult, lo, "right", pos_of) \
                    if op in ("<=", ">", "=") else None
                if op == "<":
                    bb = cl
                elif op == "<=":
                    bb = cr
                elif op == ">":
                    bb = self.sz[T.index, pp] - cr
                elif op == ">=":
                    bb = self.sz[T.index, pp] - cl
                else:
                    bb = np.where(cr - cl == 1, cl, -1)
                b[ok] = bb
            bound[tgt, slot] = b

    @staticmethod
    def _prefix(gk: np.ndarray, uc: np.ndarray, vv: np.ndarray, pp: np.ndarray, mult: int,
                lo: np.ndarray, side: str, pos_of: Positions) -> np.ndarray:
        """Per probe value ``vv`` in partition ``pp``: how many of the partition's entries have
        a key below it (``side`` "left") or not above it ("right"); ``lo``: the partition's
        first entry. O(probes log entries)."""
        try:
            r = pos_of(gk, vv, side)
        except TypeError as e:
            raise DataError(f"edge predicate compares values that cannot be ordered: "
                            f"{e}") from None
        return pos_of(uc, pp * mult + r) - lo
