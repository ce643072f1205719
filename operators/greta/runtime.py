"""The Python side of the GRETA runtime: partitions, index universes, records, windows.

The stream is processed in *sub-chunks*: runs of events between two window closes. For every
sub-chunk each graph (negative graphs first, so that their completions are known) is prepared
with vectorized NumPy/Arrow work, then handed to :func:`~replaydb.operators.greta.kernel.run_graph`:

1. occurrences: events whose type is a state of the graph and that satisfy its local predicates
   (the main graph drops events that lie in no window);
2. partitions: the values of the graph's partition attributes are dictionary-encoded and mapped to
   dense partition ids (paper Sec. 6: grouping and equivalence predicates partition the stream);
3. index universes: an index holds, per partition, the sorted distinct keys of its vertices
   (the edge predicate's attribute) with one aggregate row per key; a Fenwick index keeps the
   prefix tree over these rows. When the sub-chunk's new vertices bring keys the universe lacks
   (or after K+1 sub-chunks, when every older entry may have expired), the index is rebuilt from
   its live rows: dead rows dropped, rows moved to their new ranks, trees rebuilt; otherwise it is
   used as is. Every new vertex then has a rank and every probe a prefix bound, computed here with
   ``searchsorted`` once for the whole sub-chunk (through a lookup table over small integer key
   ranges, see :class:`Positions`);
4. live state is compacted: vertices whose windows all closed (all slots zero) and, in negative
   graphs, vertices whose trends all start before the oldest open window are dropped; partitions
   without state are forgotten when they dominate.

Relation to the paper's structures (Sec. 7): instead of one vertex tree per *pane* and type, an
index per (partition, source state, edge-predicate key) holds one aggregate per open window in
K slots (window id mod K); closing a window clears its slot everywhere, which purges the expired
pane's contribution at once, and the rebuild drops vertices none of whose windows is open. A
query is one prefix lookup instead of one range search per pane.

Cost per sub-chunk: O(sub-chunk size) plus O(live state) for the indexes that are rebuilt, plus
the kernel's O(log n) per event and index. Sub-chunks end at window closes, so rebuilds are
amortized over a slide's worth of events.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.errors import DataError, OperatorError
from replaydb.operators.base import column_np
from replaydb.operators.expr import Column, Expr, compile_expr
from replaydb.operators.greta import kernel as kn
from replaydb.operators.greta.plan import FENWICK, NONE, SCAN, CompiledPlan, GraphPlan

GC = namedtuple("GC", [
    "K", "L", "Cb", "Cf", "Cmi", "Cmf", "Wi", "Wf", "is_pos", "start", "end", "d", "s",
    "cb_kind", "cb_state", "cb_attr", "cf_state", "cf_attr", "cmi_state", "cmi_attr", "cmi_max",
    "cmf_state", "cmf_attr", "cmf_max", "in_ptr", "in_list", "out_ptr", "out_list", "tr_ix",
    "tr_neg", "tr_bc_start", "tr_bc_len", "ix_kind", "ix_rec", "bc_code", "bc_arg", "case2",
    "case3", "child_case", "slack", "max_group", "fw_in_pt"])
OCC = namedtuple("OCC", ["t", "seq", "x", "pid", "wa", "wb", "ai", "af", "rank", "bound", "g"])
IXT = namedtuple("IXT", ["off", "sz", "ptI", "ptF", "fwI", "fwF", "appM"])
RCT = namedtuple("RCT", ["I", "F", "t", "rank", "alive", "nxt", "pid", "ix", "occ", "g", "head",
                         "tail"])
NGT = namedtuple("NGT", ["bM", "bL", "blk", "p_bucket", "cc_t", "cc_ls", "cc_slot", "cc_bucket"])
OUTT = namedtuple("OUTT", [
    "finI", "finF", "fin_seq", "p_gid", "qI", "qF", "q_t", "q_seq", "q_pid", "q_alive", "q_nxt",
    "qh", "qt", "qtotI", "qtotF", "co_t", "co_ls", "co_pid"])

I64_MIN = np.iinfo(np.int64).min
I64_MAX = np.iinfo(np.int64).max
_EMPTY_I = np.zeros(0, np.int64)



def _relink(same: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linked lists over ``m`` rows sorted by group, ``same[i]`` telling whether rows ``i`` and
    ``i + 1`` share a group: each row's successor in its group (-1 at the group's last row),
    and the first and last row of every group. O(m)."""
    nxt = np.full(m, -1, np.int64)
    if m == 0:
        e = np.zeros(0, np.int64)
        return nxt, e, e
    nxt[:-1] = np.where(same, np.arange(1, m), -1)
    starts = np.flatnonzero(np.concatenate([[True], ~same]))
    ends = np.flatnonzero(np.concatenate([~same, [True]]))
    return nxt, starts, ends

class _Env:
    """Expression environment over a sub-chunk's rows; qualifiers and NEXT(...) are ignored (the
    plan has already decided which event each side of a predicate refers to)."""

    def __init__(self, ev: EventChunk, rows: np.ndarray) -> None:
        self.ev, self.rows = ev, rows

    def column(self, ref: Column) -> Any:
        return self.ev.np(ref.name)[self.rows]

    def call(self, node: Any, args: list[Any]) -> Any:
        raise OperatorError(f"unknown function {node.name}")


class EventChunk:
    """Columns of a run of events (NumPy views, computed on demand)."""

    def __init__(self, table: pa.Table, type_column: str) -> None:
        self.table = table
        self.n = table.num_rows
        self.t = np.ascontiguousarray(column_np(table, "t"), dtype=np.int64)
        if "seq" in table.schema.names:
            self.seq = np.ascontiguousarray(column_np(table, "seq"), dtype=np.int64)
        else:
            self.seq = np.arange(self.n, dtype=np.int64)
        tc = table.column(type_column)
        if isinstance(tc, pa.ChunkedArray):
            tc = tc.combine_chunks()
        if not (pa.types.is_string(tc.type) or pa.types.is_large_string(tc.type)
                or pa.types.is_dictionary(tc.type)):
            tc = tc.cast(pa.string())
        enc = tc.dictionary_encode() if not pa.types.is_dictionary(tc.type) else tc
        idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        self.type_codes = idx
        self.type_index = {v: i for i, v in enumerate(enc.dictionary.to_pylist())}
        self._np: dict[str, np.ndarray] = {}
        self._compiled: dict[int, Any] = {}
        self._parent: tuple[EventChunk, int, int] | None = None

    def slice(self, start: int, length: int) -> EventChunk:
        """The events ``start .. start+length-1`` as a chunk that shares this chunk's type
        dictionary, compiled expressions and converted columns (views, no copies): a batch is
        converted once and then cut into sub-chunks at window closes. O(columns converted)."""
        out = type(self).__new__(type(self))
        end = start + length
        out.table = self.table.slice(start, length)
        out.n = length
        out.t = self.t[start:end]
        out.seq = self.seq[start:end]
        out.type_codes = self.type_codes[start:end]
        out.type_index = self.type_index
        out._np = {}
        out._compiled = self._compiled
        out._parent = (self, start, end)
        return out

    def np(self, name: str) -> np.ndarray:
        a = self._np.get(name)
        if a is None and self._parent is not None:
            parent, start, end = self._parent
            a = parent.np(name)[start:end]
            self._np[name] = a
        if a is None:
            a = column_np(self.table, name)
            self._np[name] = a
        return a

    def values(self, expr: Expr, rows: np.ndarray) -> np.ndarray:
        """``expr`` (compiled once from its parsed form) evaluated over ``rows``, vectorized."""
        f = self._compiled.get(id(expr))
        if f is None:
            f = compile_expr(expr)
            self._compiled[id(expr)] = f
        v = f(_Env(self, rows))
        arr = np.asarray(v)
        if arr.ndim == 0:
            arr = np.full(len(rows), arr[()], dtype=arr.dtype if arr.dtype != object else object)
        return arr


def _as_bool(v: np.ndarray) -> np.ndarray:
    if v.dtype == bool:
        return v
    if np.issubdtype(v.dtype, np.floating):
        return np.nan_to_num(v, nan=0.0) != 0
    if v.dtype == object:
        return np.array([bool(x) if x is not None else False for x in v], bool)
    return v.astype(bool)


def _null_mask(v: np.ndarray) -> np.ndarray:
    if v.dtype == object:
        return np.array([x is None or (isinstance(x, float) and x != x) for x in v], bool)
    if np.issubdtype(v.dtype, np.floating):
        return np.isnan(v)
    return np.zeros(len(v), bool)


def _py(v: Any) -> Any:
    if isinstance(v, float) and v != v:
        return None
    return v


def _grow(a: np.ndarray, n: int, fill: Any = 0) -> np.ndarray:
    """``a`` with at least ``n`` rows (amortized doubling), new rows set to ``fill``."""
    if a.shape[0] >= n:
        return a
    cap = max(n, 2 * a.shape[0], 16)
    out = np.empty((cap, *a.shape[1:]), dtype=a.dtype)
    out[: a.shape[0]] = a
    out[a.shape[0]:] = fill
    return out


def _grow_cols(a: np.ndarray, n: int, fill: Any) -> np.ndarray:
    if a.shape[1] >= n:
        return a
    cap = max(n, 2 * a.shape[1], 4)
    out = np.full((a.shape[0], cap, *a.shape[2:]), fill, dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


class Keyspace:
    """Dense ids for tuples of attribute values (partitions, groups, negation buckets)."""

    def __init__(self) -> None:
        self.index: dict[tuple, int] = {}
        self.keys: list[tuple] = []

    def __len__(self) -> int:
        return len(self.keys)

    def get(self, key: tuple) -> int:
        i = self.index.get(key)
        if i is None:
            i = len(self.keys)
            self.index[key] = i
            self.keys.append(key)
        return i

    def remap(self, keep: np.ndarray) -> np.ndarray:
        """Keep the ids where ``keep`` is True (renumbered densely); return old -> new (-1)."""
        new = np.full(len(self.keys), -1, np.int64)
        kept = np.flatnonzero(keep)
        new[kept] = np.arange(len(kept))
        self.keys = [self.keys[i] for i in kept]
        self.index = {k: i for i, k in enumerate(self.keys)}
        return new


def encode_keys(ev: EventChunk, rows: np.ndarray, attrs: tuple[str, ...]) -> tuple[np.ndarray,
                                                                                   list[tuple]]:
    """(inverse, unique tuples): the tuple of ``attrs`` values of every row, densely coded.

    Each column is coded on its own - integer columns without nulls in NumPy
    (:func:`_encode_int_keys`), any other through Arrow (:func:`_encode_arrow_keys`), both
    giving the same Python values (a test holds them to it) - and :func:`_join_codes` combines
    the columns. O(n log n) for n rows."""
    if not attrs:
        return np.zeros(len(rows), np.int64), [()]
    cols_np = [ev.np(a) for a in attrs]
    if all(c.dtype.kind in "iu" for c in cols_np):  # a null makes column_np return floats
        return _encode_int_keys([c[rows] for c in cols_np])
    return _encode_arrow_keys(ev, rows, attrs)


def _encode_int_keys(cols: list[np.ndarray]) -> tuple[np.ndarray, list[tuple]]:
    """:func:`encode_keys` of integer columns: each coded by ``np.unique`` (one column needs
    nothing more)."""
    per = [np.unique(c, return_inverse=True) for c in cols]
    if len(per) == 1:  # np.unique's codes are dense and all used: nothing to join
        return per[0][1].reshape(-1).astype(np.int64), [(v,) for v in per[0][0].tolist()]
    return _join_codes([inv.reshape(-1).astype(np.int64) for _, inv in per],
                       [u.tolist() for u, _ in per])


def _encode_arrow_keys(ev: EventChunk, rows: np.ndarray, attrs: tuple[str, ...]
                       ) -> tuple[np.ndarray, list[tuple]]:
    """:func:`encode_keys` of any columns through Arrow's dictionary encoding (nulls are keys,
    NaN reads as None)."""
    codes = []
    dicts = []
    idx = pa.array(rows, type=pa.int64())
    for a in attrs:
        col = ev.table.column(a).take(idx)
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        enc = pc.dictionary_encode(col, null_encoding="encode")
        codes.append(enc.indices.to_numpy(zero_copy_only=False).astype(np.int64))
        dicts.append([_py(v) for v in enc.dictionary.to_pylist()])
    return _join_codes(codes, dicts)


def _join_codes(codes: list[np.ndarray], dicts: list[list[Any]]) -> tuple[np.ndarray,
                                                                          list[tuple]]:
    """(inverse, unique tuples) of rows given per column as codes into the value lists
    ``dicts``: the columns' codes joined in mixed radix (rows of codes where that exceeds 62
    bits), coded by one ``np.unique``; only the tuples that occur are returned."""
    radix = 1.0
    for dct in dicts:
        radix *= len(dct) + 1
    if radix < 2.0**62:
        comb = codes[0].copy()
        for c, dct in zip(codes[1:], dicts[1:]):
            comb = comb * (len(dct) + 1) + c
        _, first, inv = np.unique(comb, return_index=True, return_inverse=True)
    else:
        _, first, inv = np.unique(np.stack(codes, axis=1), axis=0, return_index=True,
                                  return_inverse=True)
    cols = [[dct[c] for c in code[first].tolist()] for code, dct in zip(codes, dicts)]
    return inv.reshape(-1).astype(np.int64), list(zip(*cols))


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


class NegState:
    """Per negation: buckets (values of the attributes shared with the parent) and their state."""

    def __init__(self, K: int) -> None:
        self.buckets = Keyspace()
        self.K = K


class GraphState:
    """Runtime state of one graph (see the module docstring)."""

    COMPACT_MIN_PARTITIONS = 4096
    """Partitions without live state are forgotten once there are this many and they are the
    majority."""

    def __init__(self, plan: CompiledPlan, g: GraphPlan) -> None:
        self.cp = plan
        self.g = g
        self.is_main = g.gid == 0
        self.K = plan.K if self.is_main else 1
        self.L = 2 if self.is_main else 1
        self.Cb, self.Cf, self.Cmi, self.Cmf = len(g.big), len(g.fsum), len(g.mmi), len(g.mmf)
        # without min/max channels a Fenwick tree's point values can be recovered from the tree,
        # so the tree is kept in the point rows themselves (half the memory)
        self.fw_in_pt = self.Cmi == 0 and self.Cmf == 0
        self.nI = len(g.indexes)
        self.nchild = len(g.children)
        self.parts = Keyspace()
        self.p_gid = _EMPTY_I.copy()
        self.p_bucket = np.zeros((0, max(self.nchild, 1)), np.int64)
        self.p_cb = _EMPTY_I.copy()  # bucket of each partition in this graph's own negation
        # index universes
        self.u_pid = [_EMPTY_I.copy() for _ in range(self.nI)]
        self.u_key: list[np.ndarray] = [np.zeros(0, np.int64) for _ in range(self.nI)]
        self.u_gk: list[np.ndarray | None] = [None] * self.nI  # distinct keys (ranks)
        self.u_uc: list[np.ndarray] = [_EMPTY_I] * self.nI  # sorted (partition, key rank)
        self.ix_age = [0] * self.nI  # sub-chunks since the index was last rebuilt
        self.u_dense = [False] * self.nI  # universe is dense (see _universe)
        self.ubase = np.zeros(self.nI + 1, np.int64)
        Wi, Wf = self.widths()
        self.ptI = np.zeros((0, Wi), np.int64)
        self.ptF = np.zeros((0, Wf), np.float64)
        self.fwI = np.zeros((0, Wi), np.int64)
        self.fwF = np.zeros((0, Wf), np.float64)
        self.off = np.zeros((self.nI, 0), np.int64)
        self.sz = np.zeros((self.nI, 0), np.int64)
        self.appM = np.full((self.nI, 0), I64_MIN, np.int64)
        # records
        G = len(g.gcols)
        self.rI = np.zeros((0, Wi), np.int64)
        self.rF = np.zeros((0, Wf), np.float64)
        self.r_t = _EMPTY_I.copy()
        self.r_rank = _EMPTY_I.copy()
        self.r_alive = np.zeros(0, np.bool_)
        self.r_nxt = _EMPTY_I.copy()
        self.r_pid = _EMPTY_I.copy()
        self.r_ix = _EMPTY_I.copy()
        self.r_occ = _EMPTY_I.copy()
        self.r_g = np.zeros((0, G), np.float64)
        self.r_n = 0
        self.r_head = np.full((self.nI, 0), -1, np.int64)
        self.r_tail = np.full((self.nI, 0), -1, np.int64)
        # case-2 queue
        self.qI = np.zeros((0, Wi), np.int64)
        self.qF = np.zeros((0, Wf), np.float64)
        self.q_t = _EMPTY_I.copy()
        self.q_seq = _EMPTY_I.copy()
        self.q_pid = _EMPTY_I.copy()
        self.q_alive = np.zeros(0, np.bool_)
        self.q_nxt = _EMPTY_I.copy()
        self.q_n = 0
        self.qh = _EMPTY_I.copy()
        self.qt = _EMPTY_I.copy()
        self.qtotI = np.zeros((0, Wi), np.int64)
        self.qtotF = np.zeros((0, Wf), np.float64)
        # final aggregates per group (main graph)
        self.groups = Keyspace()
        self.finI = np.zeros((0, Wi), np.int64)
        self.finF = np.zeros((0, Wf), np.float64)
        self.fin_seq = np.zeros((0, self.K), np.int64)
        # negation state of the children of this graph (index c = position in g.children)
        self.negs = [NegState(self.K) for _ in range(self.nchild)]
        self.bM = np.full((max(self.nchild, 1), 0), I64_MIN, np.int64)
        self.bL = np.full((max(self.nchild, 1), 0), I64_MIN, np.int64)
        self.blk = np.zeros((max(self.nchild, 1), 0, self.K), np.uint8)
        # completions produced by the last run (negative graphs)
        self.co_t = _EMPTY_I
        self.co_ls = _EMPTY_I
        self.co_pid = _EMPTY_I
        self.Z = 1.0
        self._static: dict[str, Any] | None = None

    # ------------------------------------------------------------------ layout
    def widths(self) -> tuple[int, int]:
        Wi = self.Cb * self.K * self.L + self.Cmi * self.K
        Wf = self.Cf * self.K + self.Cmf * self.K
        return max(Wi, 1), max(Wf, 1)

    def fresh_rows(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` empty value rows (zero sums, min/max sentinels)."""
        Wi, Wf = self.widths()
        vi = np.zeros((n, Wi), np.int64)
        vf = np.zeros((n, Wf), np.float64)
        nb_ = self.Cb * self.K * self.L
        for c, (_, _, is_max) in enumerate(self.g.mmi):
            vi[:, nb_ + c * self.K: nb_ + (c + 1) * self.K] = I64_MIN if is_max else I64_MAX
        for c, (_, _, is_max) in enumerate(self.g.mmf):
            lo = self.Cf * self.K + c * self.K
            vf[:, lo: lo + self.K] = -np.inf if is_max else np.inf
        return vi, vf

    def static(self) -> dict[str, Any]:
        """Config arrays of the kernel that do not change between calls."""
        if self._static is not None:
            return self._static
        g = self.g
        in_ptr = np.zeros(len(g.states) + 1, np.int64)
        in_list: list[int] = []
        out_ptr = np.zeros(len(g.states) + 1, np.int64)
        out_list: list[int] = []
        for k in range(len(g.states)):
            in_list.extend(g.in_tr[k])
            in_ptr[k + 1] = len(in_list)
            out_list.extend(g.out_ix[k])
            out_ptr[k + 1] = len(out_list)
        codes: list[int] = []
        args: list[float] = []
        bc_start = np.zeros(len(g.transitions), np.int64)
        bc_len = np.zeros(len(g.transitions), np.int64)
        for t in g.transitions:
            if t.program is not None:
                c, a = t.program.arrays()
                bc_start[t.id] = len(codes)
                bc_len[t.id] = len(c)
                codes.extend(c.tolist())
                args.extend(a.tolist())
        child_local = {nid: c for c, nid in enumerate(g.children)}
        kinds = {"count": kn.CH_COUNT, "counte": kn.CH_COUNTE, "sumi": kn.CH_SUMI}
        self._static = dict(
            cb_kind=np.array([kinds[k] for k, _, _ in g.big], np.int64),
            cb_state=np.array([s for _, s, _ in g.big], np.int64),
            cb_attr=np.array([a for _, _, a in g.big], np.int64),
            cf_state=np.array([s for s, _ in g.fsum], np.int64),
            cf_attr=np.array([a for _, a in g.fsum], np.int64),
            cmi_state=np.array([s for s, _, _ in g.mmi], np.int64),
            cmi_attr=np.array([a for _, a, _ in g.mmi], np.int64),
            cmi_max=np.array([m for _, _, m in g.mmi], np.bool_),
            cmf_state=np.array([s for s, _, _ in g.mmf], np.int64),
            cmf_attr=np.array([a for _, a, _ in g.mmf], np.int64),
            cmf_max=np.array([m for _, _, m in g.mmf], np.bool_),
            in_ptr=in_ptr, in_list=np.array(in_list, np.int64),
            out_ptr=out_ptr, out_list=np.array(out_list, np.int64),
            tr_ix=np.array([t.index for t in g.transitions], np.int64),
            tr_neg=np.array([child_local[t.negation] if t.negation is not None else -1
                             for t in g.transitions], np.int64),
            tr_bc_start=bc_start, tr_bc_len=bc_len,
            ix_kind=np.array([ix.kind for ix in g.indexes], np.int64),
            ix_rec=np.array([ix.has_records for ix in g.indexes], np.bool_),
            bc_code=np.array(codes or [0], np.int64), bc_arg=np.array(args or [0.0], np.float64),
            case2=child_local[g.case2] if g.case2 is not None else -1,
            case3=child_local[g.case3] if g.case3 is not None else -1,
            child_case=np.array([self.cp.negations[nid].negation.case for nid in g.children]
                                or [0], np.int64),
        )
        return self._static

    def gc(self, slack: float, max_group: int) -> Any:
        Wi, Wf = self.widths()
        return GC(K=self.K, L=self.L, Cb=self.Cb, Cf=self.Cf, Cmi=self.Cmi, Cmf=self.Cmf,
                  Wi=Wi, Wf=Wf, is_pos=self.is_main, start=self.g.start, end=self.g.end,
                  d=self.cp.within, s=self.cp.slide, slack=float(slack),
                  max_group=max(max_group, 1), fw_in_pt=self.fw_in_pt, **self.static())

    # ------------------------------------------------------------------ widening
    def _widen_I(self, a: np.ndarray, L_new: int) -> np.ndarray:
        return kn.widen_rows(np.ascontiguousarray(a), self.Cb * self.K, self.L, L_new)

    def widen(self, L_new: int) -> None:
        """Grow every exact value to ``L_new`` limbs (sign-extended; values unchanged)."""
        if L_new <= self.L or self.Cb == 0:
            return
        for name in ("ptI", "fwI", "rI", "qI", "qtotI", "finI"):
            setattr(self, name, self._widen_I(getattr(self, name), L_new))
        self.L = L_new

    # ------------------------------------------------------------------ partitions
    def _alive_rows(self, vi: np.ndarray, W0: int) -> np.ndarray:
        if vi.shape[0] == 0:
            return np.zeros(0, bool)
        if self.is_main:
            return np.any(vi[:, : self.K * self.L] != 0, axis=1)
        return vi[:, 0] >= W0

    def ensure_parts(self, P: int) -> None:
        self.p_gid = _grow(self.p_gid, P, 0)
        self.p_bucket = _grow(self.p_bucket, P, 0)
        self.p_cb = _grow(self.p_cb, P, 0)
        self.off = _grow_cols(self.off, P, 0)
        self.sz = _grow_cols(self.sz, P, 0)
        self.appM = _grow_cols(self.appM, P, I64_MIN)
        self.r_head = _grow_cols(self.r_head, P, -1)
        self.r_tail = _grow_cols(self.r_tail, P, -1)
        self.qh = _grow(self.qh, P, -1)
        self.qt = _grow(self.qt, P, -1)
        n0 = self.qtotI.shape[0]
        if self.g.case2 is not None and n0 < len(self.qh):
            cap = len(self.qh)
            vi, vf = self.fresh_rows(cap - n0)
            self.qtotI = np.concatenate([self.qtotI, vi])
            self.qtotF = np.concatenate([self.qtotF, vf])

    def new_partitions(self, first: int, keys: list[tuple], runtime: Runtime) -> None:
        """Record the groups and negation buckets of the partitions ``first, first+1, ...``
        just created for ``keys``."""
        n = len(keys)
        pids = np.arange(first, first + n)
        self.ensure_parts(first + n)
        attrs = self.g.part_attrs
        if self.is_main:
            ng = len(self.cp.group_by)
            get = self.groups.get
            self.p_gid[pids] = [get(k[:ng]) for k in keys]
            runtime.ensure_groups(self)
        for c, nid in enumerate(self.g.children):
            pos = [attrs.index(a) for a in self.cp.negations[nid].common]
            get = self.negs[c].buckets.get
            self.p_bucket[pids, c] = [get(tuple(k[j] for j in pos)) for k in keys]
        self.ensure_buckets()
        if self.g.template.negation is not None:
            nid = self.g.template.negation
            pos = [attrs.index(a) for a in self.cp.negations[nid].common]
            parent = runtime.graphs[self.cp.negations[nid].negation.parent]
            c = parent.g.children.index(nid)
            get = parent.negs[c].buckets.get
            self.p_cb[pids] = [get(tuple(k[j] for j in pos)) for k in keys]
            parent.ensure_buckets()

    def ensure_buckets(self) -> None:
        nb_ = max((len(n.buckets) for n in self.negs), default=0)
        if nb_ > self.bM.shape[1]:
            self.bM = _grow_cols(self.bM, nb_, I64_MIN)
            self.bL = _grow_cols(self.bL, nb_, I64_MIN)
            self.blk = _grow_cols(self.blk, nb_, 0)

    def compact_partitions(self, runtime: Runtime, W0: int) -> bool:
        """Forget partitions without any live state when they are the majority. True when it
        did. Below :attr:`COMPACT_MIN_PARTITIONS` partitions it returns at once, before the
        O(state) scan for live rows."""
        P = len(self.parts)
        if P < self.COMPACT_MIN_PARTITIONS:
            return False
        # a partition is live when some row of it is: tree or point rows alike
        keep_rows = [self._alive_rows(self.ptI[self.ubase[ii]: self.ubase[ii + 1]], W0)
                     if self.g.indexes[ii].kind != SCAN else np.zeros(0, bool)
                     for ii in range(self.nI)]
        alive = np.zeros(P, bool)
        for ii in range(self.nI):
            alive[self.u_pid[ii][keep_rows[ii]]] = True
        if self.r_n:
            live = self.r_alive[: self.r_n] & self._alive_rows(self.rI[: self.r_n], W0)
            alive[self.r_pid[: self.r_n][live]] = True
        if self.q_n:
            alive[self.q_pid[: self.q_n][self.q_alive[: self.q_n]]] = True
        if alive.sum() * 2 > P:
            return False
        remap = self.parts.remap(alive)
        kept = np.flatnonzero(alive)
        self.p_gid = self.p_gid[kept].copy()
        self.p_bucket = self.p_bucket[kept].copy()
        self.p_cb = self.p_cb[kept].copy()
        self.off = self.off[:, kept].copy()
        self.sz = self.sz[:, kept].copy()
        self.appM = self.appM[:, kept].copy()
        self.r_head = self.r_head[:, kept].copy()
        self.r_tail = self.r_tail[:, kept].copy()
        self.qh = self.qh[kept].copy()
        self.qt = self.qt[kept].copy()
        if self.qtotI.shape[0]:
            self.qtotI = self.qtotI[kept].copy()
            self.qtotF = self.qtotF[kept].copy()
        for ii in range(self.nI):
            # universe entries of forgotten partitions (all zero) go; the pool rows of the kept
            # partitions keep their offsets (off/sz columns moved with their partitions)
            self.u_pid[ii] = remap[self.u_pid[ii]]  # -1: dropped at the coming rebuild
        if self.r_n:
            newp = remap[self.r_pid[: self.r_n]]
            self.r_alive[: self.r_n] &= newp >= 0
            self.r_pid[: self.r_n] = np.where(newp >= 0, newp, 0)
        if self.q_n:
            newp = remap[self.q_pid[: self.q_n]]
            self.q_alive[: self.q_n] &= newp >= 0
            self.q_pid[: self.q_n] = np.where(newp >= 0, newp, 0)
        return True

    # ------------------------------------------------------------------ sub-chunk preparation
    def occurrences(self, ev: EventChunk) -> tuple[np.ndarray, np.ndarray]:
        """(event rows, states) of the graph's occurrences in ``ev``, in event order."""
        g = self.g
        rows_l, x_l = [], []
        for k, ty in enumerate(g.types):
            code = ev.type_index.get(ty)
            if code is None:
                continue
            rows = np.flatnonzero(ev.type_codes == code)
            if rows.size and g.local[k] is not None:
                rows = rows[_as_bool(ev.values(g.local[k], rows))]
            rows_l.append(rows)
            x_l.append(np.full(rows.size, k, np.int64))
        if not rows_l:
            return _EMPTY_I, _EMPTY_I
        rows = np.concatenate(rows_l)
        xs = np.concatenate(x_l)
        order = np.argsort(rows, kind="stable")
        return rows[order], xs[order]

    def prepare(self, ev: EventChunk, runtime: Runtime, W0: int) -> OCC | None:
        cp, g = self.cp, self.g
        rows, xs = self.occurrences(ev)
        t = ev.t[rows]
        if self.is_main:
            d, s = cp.within, cp.slide
            wb = np.floor_divide(t, s)
            wa = np.floor_divide(t - d, s) + 1
            keep = wa <= wb
            rows, xs, t, wa, wb = rows[keep], xs[keep], t[keep], wa[keep], wb[keep]
        else:
            wa = np.zeros(len(rows), np.int64)
            wb = wa
        n = len(rows)
        # --- compaction (a partition is live when some row of it is: tree or point rows alike)
        compacted = self.compact_partitions(runtime, W0)
        # --- partitions of the new occurrences
        inv, tuples = encode_keys(ev, rows, g.part_attrs)
        index = self.parts.index
        mapping = np.fromiter((index.get(k, -1) for k in tuples), np.int64, len(tuples))
        fresh = np.flatnonzero(mapping < 0)
        if len(fresh):
            first = len(self.parts)
            new_keys = [tuples[j] for j in fresh]
            for j, key in enumerate(new_keys):
                index[key] = first + j
            self.parts.keys.extend(new_keys)
            mapping[fresh] = np.arange(first, first + len(fresh))
            self.new_partitions(first, new_keys, runtime)
        pid = mapping[inv] if n else _EMPTY_I
        P = len(self.parts)
        self.ensure_parts(P)
        # --- attributes
        ai = np.zeros((n, max(len(g.attr_i), 1)), np.int64)
        af = np.zeros((n, max(len(g.attr_f), 1)), np.float64)
        users_i: dict[int, list[int]] = {}
        for _, s_, a in g.big:
            if a >= 0:
                users_i.setdefault(a, []).append(s_)
        for s_, a, _ in g.mmi:
            if a >= 0:
                users_i.setdefault(a, []).append(s_)
        for j, name in enumerate(g.attr_i):
            v = ev.np(name)[rows]
            used = np.isin(xs, users_i.get(j, []))
            if v.dtype == object or np.issubdtype(v.dtype, np.floating):
                bad = used & _null_mask(v)
                if bad.any():
                    r = int(rows[np.flatnonzero(bad)[0]])
                    raise DataError("null value in an attribute that is aggregated", row=r,
                                    column=name)
                v = np.where(_null_mask(v), 0, v)
            ai[:, j] = v.astype(np.int64)
        users_f: dict[int, list[int]] = {}
        for s_, a in g.fsum:
            users_f.setdefault(a, []).append(s_)
        for s_, a, _ in g.mmf:
            users_f.setdefault(a, []).append(s_)
        for j, name in enumerate(g.attr_f):
            v = ev.np(name)[rows].astype(np.float64)
            bad = np.isin(xs, users_f.get(j, [])) & np.isnan(v)
            if bad.any():
                r = int(rows[np.flatnonzero(bad)[0]])
                raise DataError("null value in an attribute that is aggregated", row=r,
                                column=name)
            af[:, j] = v
        gcols = np.zeros((n, max(len(g.gcols), 1)), np.float64)
        for j, name in enumerate(g.gcols):
            gcols[:, j] = ev.np(name)[rows].astype(np.float64)
        # --- indexes
        max_out = max((len(o) for o in g.out_ix), default=0)
        max_in = max((len(i) for i in g.in_tr), default=0)
        rank = np.full((n, max(max_out, 1)), -1, np.int64)
        bound = np.zeros((n, max(max_in, 1)), np.int64)
        self._rebuild_indexes(ev, rows, xs, pid, compacted, W0, rank, bound)
        self._compact_records(W0)
        self._compact_queue()
        # --- capacities
        n_rec = int(sum(np.count_nonzero(xs == ix.src) for ix in g.indexes if ix.has_records))
        self._ensure_records(self.r_n + n_rec)
        n_end = int(np.count_nonzero(xs == g.end)) if g.case2 is not None else 0
        self._ensure_queue(self.q_n + n_end)
        self.co_t = np.zeros(n if not self.is_main else 0, np.int64)
        self.co_ls = np.zeros_like(self.co_t)
        self.co_pid = np.zeros_like(self.co_t)
        return OCC(t=np.ascontiguousarray(t), seq=np.ascontiguousarray(ev.seq[rows]), x=xs,
                   pid=pid, wa=np.ascontiguousarray(wa), wb=np.ascontiguousarray(wb), ai=ai, af=af,
                   rank=rank, bound=bound, g=gcols)

    def _row_of_asc(self, ii: int, desc: bool) -> np.ndarray:
        """Local row of every universe entry (entries are stored in ascending key order per
        partition; rows of a descending index hold them in reverse order)."""
        n = len(self.u_pid[ii])
        j = np.arange(n, dtype=np.int64)
        if not desc or n == 0:
            return j
        p = self.u_pid[ii]
        dead = p < 0  # entries of partitions forgotten by compaction
        if dead.all():
            return j
        pp = np.where(dead, p[~dead][0], p)
        lo = self.off[ii, pp] - self.ubase[ii]
        return np.where(dead, j, 2 * lo + self.sz[ii, pp] - 1 - j)

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
        sub-chunks alone rebuilt it on every sub-chunk until it was dense (4 rebuilds per run on
        Linear Road segment trends; dense from the start is 7% faster there, the same on the
        cluster and per-vehicle queries). The age rule below keeps memory bounded all the same.
        Later sub-chunks whose vertices fall inside a dense universe need no
        rebuild (no row moves, no Fenwick rebuild), and the age rule does not apply to it while it
        stays within the size bound of its live entries. Its extra rows hold zero (empty) values,
        so results are unchanged; memory stays within a constant factor of the sparse layout.
        Decision: dense layouts only in the main graph, where a dead row is exactly an empty row
        (negative graphs keep times in their rows), and not for aggregate (single-key) indexes:
        there a dense layout is one row per partition, dead ones included, and it saves no
        rebuild that a new partition would not force anyway. O(size of the new universe)."""
        mult = len(gk) + 1
        o_comp = o_pid * mult + pos_of(gk, o_key) if len(o_key) else _EMPTY_I
        n_comp = n_pid * mult + pos_of(gk, n_key) if len(n_key) else _EMPTY_I
        nu = np.unique(n_comp)
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
        do = o_pid * dm + pos_of(dk, o_key) if len(o_key) else _EMPTY_I
        return dk, duc, do, True

    def _rebuild_indexes(self, ev: EventChunk, rows: np.ndarray, xs: np.ndarray, pid: np.ndarray,
                         compacted: bool, W0: int, rank: np.ndarray, bound: np.ndarray) -> None:
        """Give every new source occurrence a rank and every target occurrence a probe bound.

        An index keeps its universe (no copy, no Fenwick rebuild) when all keys of the
        sub-chunk's new vertices are already in it; otherwise, or once every entry present at its
        last rebuild may have expired (K+1 sub-chunks; not for a dense universe still within its
        size bound, see :meth:`_universe`), it is rebuilt from its live entries."""
        g = self.g
        P = len(self.parts)
        nI = self.nI
        pos_of = Positions()
        need = [False] * nI
        new_keys: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = [None] * nI
        for ii, ix in enumerate(g.indexes):
            if ix.kind == SCAN:
                continue
            src_sel = np.flatnonzero(xs == ix.src)
            if ix.kind == NONE:
                n_key = np.zeros(len(src_sel), np.int64)
                valid = np.ones(len(src_sel), bool)
            else:
                n_key = ev.values(ix.key, rows[src_sel])
                valid = ~_null_mask(n_key)
            new_keys[ii] = (src_sel, n_key, valid)
            gk, uc = self.u_gk[ii], self.u_uc[ii]
            nd = compacted or gk is None
            if not nd and self.ix_age[ii] >= self.K + 1:
                nd = not self.u_dense[ii] or not self._dense_ok(len(uc), int(self._alive_rows(
                    self.ptI[self.ubase[ii]: self.ubase[ii + 1]], W0).sum()))
            if not nd and valid.any():
                nk = n_key[valid]
                try:
                    r = pos_of(gk, nk)
                except TypeError as e:
                    raise DataError(f"edge-predicate key values cannot be ordered: {e}") from None
                inside = r < len(gk)
                inside[inside] = gk[r[inside]] == nk[inside]
                if not inside.all():
                    nd = True
                else:
                    nc = pid[src_sel][valid] * (len(gk) + 1) + r
                    pos = pos_of(uc, nc)
                    there = pos < len(uc)
                    there[there] = uc[pos[there]] == nc[there]
                    nd = not there.all()
            need[ii] = nd
        # ---- rebuild the indexes that need it (on the old pools), compute new layouts
        old_off = self.off.copy()
        old_sz = self.sz.copy()
        old_ubase = self.ubase.copy()
        lay: list[dict[str, Any]] = [{} for _ in range(nI)]
        gc0 = self.gc(0.0, 1)
        for ii, ix in enumerate(g.indexes):
            if ix.kind == SCAN:
                lay[ii] = {"size": 0, "keep": False}
                continue
            if not need[ii]:
                lay[ii] = {"size": len(self.u_pid[ii]), "keep": True}
                self.ix_age[ii] += 1
                continue
            if ix.kind == FENWICK and self.fw_in_pt and P:
                kn.fenwicks_to_points(self.ptI, self.ptF, np.ascontiguousarray(self.off[ii, :P]),
                                      np.ascontiguousarray(self.sz[ii, :P]), gc0)
            row_of = self._row_of_asc(ii, ix.desc)
            live = self._alive_rows(self.ptI[old_ubase[ii]: old_ubase[ii + 1]], W0)
            keep_asc = live[row_of] & (self.u_pid[ii] >= 0) if len(row_of) else \
                np.zeros(0, bool)
            o_pid = self.u_pid[ii][keep_asc]
            o_key = self.u_key[ii][keep_asc]
            src_sel, n_key, valid = new_keys[ii]
            nk = n_key[valid]
            all_keys = np.concatenate([np.asarray(o_key), np.asarray(nk)]) \
                if len(o_key) or len(nk) else np.zeros(0, np.int64)
            try:
                gk = np.unique(all_keys)
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
            lay[ii] = {"size": len(uc), "keep": False, "u_pid": u_pid, "u_key": u_key, "gk": gk,
                       "uc": uc, "lo": lo, "sz": szp,
                       "old_rows": row_of[keep_asc],
                       "new_asc": pos_of(uc, o_comp) if len(o_comp) else _EMPTY_I,
                       "o_pid": o_pid}
            self.ix_age[ii] = 0
            self.u_dense[ii] = dense
        # ---- new pools
        sizes = np.array([lay[ii]["size"] for ii in range(nI)], np.int64)
        ubase = np.zeros(nI + 1, np.int64)
        ubase[1:] = np.cumsum(sizes)
        rebuilt = [ii for ii in range(nI) if need[ii]]
        if rebuilt or not np.array_equal(ubase, old_ubase):
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
        else:
            for ii in range(nI):  # partitions created by this sub-chunk get their (empty) range
                if g.indexes[ii].kind != SCAN:
                    self._set_ranges(ii, ubase[ii], P)
        for ii in rebuilt:
            if g.indexes[ii].kind == FENWICK and P:
                offs = np.ascontiguousarray(self.off[ii, :P])
                szs = np.ascontiguousarray(self.sz[ii, :P])
                if self.fw_in_pt:
                    kn.build_all_fenwicks(self.ptI, self.ptF, self.ptI, self.ptF, offs, szs, gc0)
                else:
                    kn.build_all_fenwicks(self.fwI, self.fwF, self.ptI, self.ptF, offs, szs, gc0)
        # ---- universes, record ranks
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
        # ---- ranks of the new source occurrences
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
        # ---- probe bounds of the target occurrences
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
            ok = ~_null_mask(v)
            b = np.zeros(len(tgt), np.int64) if ix.kind == FENWICK else \
                np.full(len(tgt), -1, np.int64)
            if ok.any() and len(gk):
                vv = v[ok]
                pp = pv[ok]
                try:
                    rl = pos_of(gk, vv, "left")
                    rr = pos_of(gk, vv, "right")
                except TypeError as e:
                    raise DataError(f"edge predicate compares values that cannot be ordered: "
                                    f"{e}") from None
                lo = self.off[T.index, pp] - self.ubase[T.index]
                szp = self.sz[T.index, pp]
                cl = pos_of(uc, pp * mult + rl) - lo
                cr = pos_of(uc, pp * mult + rr) - lo
                op = T.op
                if op == "<":
                    bb = cl
                elif op == "<=":
                    bb = cr
                elif op == ">":
                    bb = szp - cr
                elif op == ">=":
                    bb = szp - cl
                else:
                    bb = np.where(cr - cl == 1, cl, -1)
                b[ok] = bb
            bound[tgt, slot] = b

    def _compact_records(self, W0: int) -> None:
        n = self.r_n
        if n == 0:
            return
        live = self.r_alive[:n] & self._alive_rows(self.rI[:n], W0)
        if self.r_ix.size:
            order = np.lexsort((np.arange(n), self.r_pid[:n], self.r_ix[:n]))
            order = order[live[order]]
        else:  # pragma: no cover
            order = np.zeros(0, np.int64)
        m = len(order)
        for name in ("rI", "rF", "r_t", "r_rank", "r_pid", "r_ix", "r_occ", "r_g"):
            a = getattr(self, name)
            a[:m] = a[order]
        self.r_alive[:m] = True
        self.r_alive[m:n] = False
        self.r_n = m
        self.r_head[:] = -1
        self.r_tail[:] = -1
        ix, pp = self.r_ix[:m], self.r_pid[:m]
        nxt, starts, ends = _relink((ix[1:] == ix[:-1]) & (pp[1:] == pp[:-1]), m)
        self.r_head[ix[starts], pp[starts]] = starts
        self.r_tail[ix[ends], pp[ends]] = ends
        self.r_nxt[:m] = nxt

    def _compact_queue(self) -> None:
        n = self.q_n
        if n == 0:
            return
        live = self.q_alive[:n] & np.any(self.qI[:n, : self.K * self.L] != 0, axis=1)
        order = np.lexsort((np.arange(n), self.q_pid[:n]))
        order = order[live[order]]
        m = len(order)
        for name in ("qI", "qF", "q_t", "q_seq", "q_pid"):
            a = getattr(self, name)
            a[:m] = a[order]
        self.q_alive[:m] = True
        self.q_alive[m:n] = False
        self.q_n = m
        self.qh[:] = -1
        self.qt[:] = -1
        pp = self.q_pid[:m]
        nxt, starts, ends = _relink(pp[1:] == pp[:-1], m)
        self.qh[pp[starts]] = starts
        self.qt[pp[ends]] = ends
        self.q_nxt[:m] = nxt

    def _ensure_records(self, n: int) -> None:
        if self.rI.shape[0] >= n:
            return
        cap = max(n, 2 * self.rI.shape[0], 64)
        vi, vf = self.fresh_rows(cap - self.rI.shape[0])
        self.rI = np.concatenate([self.rI, vi])
        self.rF = np.concatenate([self.rF, vf])
        for name, fill in (("r_t", 0), ("r_rank", -1), ("r_nxt", -1), ("r_pid", 0), ("r_ix", 0),
                           ("r_occ", 0), ("r_alive", False), ("r_g", 0.0)):
            setattr(self, name, _grow(getattr(self, name), cap, fill))

    def _ensure_queue(self, n: int) -> None:
        if self.qI.shape[0] >= n:
            return
        cap = max(n, 2 * self.qI.shape[0], 64)
        vi, vf = self.fresh_rows(cap - self.qI.shape[0])
        self.qI = np.concatenate([self.qI, vi])
        self.qF = np.concatenate([self.qF, vf])
        for name, fill in (("q_t", 0), ("q_seq", 0), ("q_pid", 0), ("q_alive", False),
                           ("q_nxt", -1)):
            setattr(self, name, _grow(getattr(self, name), cap, fill))

    def _tighten_z(self) -> None:
        """Z := the smaller of the running bound and :meth:`_init_z`'s bound from the stored
        values (both are valid: every value the kernel computes is a sum of distinct live
        vertex values). Called only when the running bound would make the values wider: the
        recount is O(state), so it is not paid on every sub-chunk."""
        z = self.Z
        self._init_z()
        self.Z = min(z, self.Z)

    def _init_z(self) -> None:
        """Z := a bound on the sum of the magnitudes of every stored exact value (log2)."""
        if self.Cb == 0:
            return
        gc = self.gc(0.0, 1)
        z = 0.0  # log2(1): the bound counts one extra unit
        for vi, n in ((self.ptI, self.ptI.shape[0]), (self.fwI, self.fwI.shape[0]),
                      (self.rI, self.r_n), (self.qI, self.q_n),
                      (self.qtotI, len(self.parts)), (self.finI, len(self.groups))):
            n = min(n, vi.shape[0])
            if n:
                b = float(kn.log2_total(vi, n, gc))
                if b >= 0:
                    hi, lo = max(z, b), min(z, b)
                    z = hi + math.log2(1.0 + 2.0 ** (lo - hi))
        self.Z = z + 1e-6

    # ------------------------------------------------------------------ run
    def run(self, occ: OCC, cc: tuple[np.ndarray, ...], runtime: Runtime) -> None:
        n = len(occ.t)
        if n == 0:
            self._apply_completions_only(cc)
            return
        # slack bits: attribute magnitude, fan-in, channels, group size
        _, counts = np.unique(occ.t, return_counts=True)
        max_group = int(counts.max())
        abits = 0
        if any(k == "sumi" for k, _, _ in self.g.big):
            cols = sorted({a for k, _, a in self.g.big if k == "sumi"})
            m = np.abs(occ.ai[:, cols].astype(np.float64)).max() if n else 0.0
            abits = int(math.ceil(math.log2(m + 2))) + 1
        fan_in = max((len(x) for x in self.g.in_tr), default=0)
        slack = (abits + math.ceil(math.log2(fan_in + 2)) + math.ceil(math.log2(self.Cb + 2))
                 + math.ceil(math.log2(max_group + 1)) + 4)

        def limbs_needed() -> int:
            return int(math.ceil((self.Z + slack + 2) / kn.LIMB))

        if self.Cb and limbs_needed() > self.L:
            # the kernel's running bound only grows (closed windows do not lower it):
            # tighten it from the stored values before widening
            self._tighten_z()
            if limbs_needed() > self.L:
                self.widen(limbs_needed())
        CNT = np.array([self.r_n, self.q_n, 0, 0, 0], np.int64)
        Zarr = np.array([self.Z], np.float64)
        ngt = NGT(bM=self.bM, bL=self.bL, blk=self.blk, p_bucket=self.p_bucket,
                  cc_t=cc[0], cc_ls=cc[1], cc_slot=cc[2], cc_bucket=cc[3])
        while True:
            gc = self.gc(slack, max_group)
            ixt = self._ixt()
            rct = RCT(I=self.rI, F=self.rF, t=self.r_t, rank=self.r_rank, alive=self.r_alive,
                      nxt=self.r_nxt, pid=self.r_pid, ix=self.r_ix, occ=self.r_occ, g=self.r_g,
                      head=self.r_head, tail=self.r_tail)
            outt = OUTT(finI=self.finI, finF=self.finF, fin_seq=self.fin_seq, p_gid=self.p_gid,
                        qI=self.qI, qF=self.qF, q_t=self.q_t, q_seq=self.q_seq, q_pid=self.q_pid,
                        q_alive=self.q_alive, q_nxt=self.q_nxt, qh=self.qh, qt=self.qt,
                        qtotI=self.qtotI, qtotF=self.qtotF, co_t=self.co_t, co_ls=self.co_ls,
                        co_pid=self.co_pid)
            pos = kn.run_graph(gc, occ, ixt, rct, ngt, outt, CNT, Zarr)
            if pos >= n:
                break
            # stopped before a group whose values might not fit: tighten, else widen
            self.r_n, self.q_n = int(CNT[0]), int(CNT[1])
            self.Z = float(Zarr[0])
            self._tighten_z()
            Zarr[0] = self.Z
            if limbs_needed() <= self.L:
                continue
            # exactly the limbs the recounted bound needs: a further stop costs one recount,
            # while a headroom limb would widen every stored value for good
            self.widen(max(limbs_needed(), self.L + 1))
        self.r_n, self.q_n = int(CNT[0]), int(CNT[1])
        co_n = int(CNT[2])
        self.co_t, self.co_ls, self.co_pid = self.co_t[:co_n], self.co_ls[:co_n], \
            self.co_pid[:co_n]
        self.Z = float(Zarr[0])

    def _ixt(self) -> IXT:
        fwI, fwF = (self.ptI, self.ptF) if self.fw_in_pt else (self.fwI, self.fwF)
        return IXT(off=self.off, sz=self.sz, ptI=self.ptI, ptF=self.ptF, fwI=fwI, fwF=fwF,
                   appM=self.appM)

    def _apply_completions_only(self, cc: tuple[np.ndarray, ...]) -> None:
        """No occurrence in this sub-chunk: still fold the children's completions in."""
        self.co_t = self.co_ls = self.co_pid = _EMPTY_I
        if not len(cc[0]):
            return
        occ = OCC(t=np.zeros(0, np.int64), seq=_EMPTY_I, x=_EMPTY_I, pid=_EMPTY_I, wa=_EMPTY_I,
                  wb=_EMPTY_I, ai=np.zeros((0, 1), np.int64), af=np.zeros((0, 1)),
                  rank=np.zeros((0, 1), np.int64), bound=np.zeros((0, 1), np.int64),
                  g=np.zeros((0, 1)))
        ngt = NGT(bM=self.bM, bL=self.bL, blk=self.blk, p_bucket=self.p_bucket,
                  cc_t=cc[0], cc_ls=cc[1], cc_slot=cc[2], cc_bucket=cc[3])
        CNT = np.array([self.r_n, self.q_n, 0, 0, 0], np.int64)
        gc = self.gc(0.0, 1)
        ixt = self._ixt()
        rct = RCT(I=self.rI, F=self.rF, t=self.r_t, rank=self.r_rank, alive=self.r_alive,
                  nxt=self.r_nxt, pid=self.r_pid, ix=self.r_ix, occ=self.r_occ, g=self.r_g,
                  head=self.r_head, tail=self.r_tail)
        outt = OUTT(finI=self.finI, finF=self.finF, fin_seq=self.fin_seq, p_gid=self.p_gid,
                    qI=self.qI, qF=self.qF, q_t=self.q_t, q_seq=self.q_seq, q_pid=self.q_pid,
                    q_alive=self.q_alive, q_nxt=self.q_nxt, qh=self.qh, qt=self.qt,
                    qtotI=self.qtotI, qtotF=self.qtotF, co_t=self.co_t, co_ls=self.co_ls,
                    co_pid=self.co_pid)
        kn.run_graph(gc, occ, ixt, rct, ngt, outt, CNT, np.array([self.Z]))

    # ------------------------------------------------------------------ windows
    def slot_columns(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Columns of slot k: (big int cols, mmi cols, fsum cols, mmf cols)."""
        K, L = self.K, self.L
        big = np.concatenate([np.arange((c * K + k) * L, (c * K + k + 1) * L)
                              for c in range(self.Cb)]) if self.Cb else _EMPTY_I
        nb_ = self.Cb * K * L
        mmi = np.array([nb_ + c * K + k for c in range(self.Cmi)], np.int64)
        fs = np.array([c * K + k for c in range(self.Cf)], np.int64)
        mmf = np.array([self.Cf * K + c * K + k for c in range(self.Cmf)], np.int64)
        return big, mmi, fs, mmf

    def clear_slot(self, k: int) -> None:
        big, mmi, fs, mmf = self.slot_columns(k)
        mmi_fill = np.array([I64_MIN if m else I64_MAX for _, _, m in self.g.mmi], np.int64)
        f_cols = np.concatenate([fs, mmf])
        f_fill = np.concatenate([np.zeros(len(fs)),
                                 np.array([-np.inf if m else np.inf for _, _, m in self.g.mmf],
                                          np.float64)])
        for vi, vf, n in ((self.ptI, self.ptF, self.ptI.shape[0]),
                          (self.fwI, self.fwF, self.fwI.shape[0]),
                          (self.rI, self.rF, self.r_n), (self.qI, self.qF, self.q_n),
                          (self.qtotI, self.qtotF, len(self.parts)),
                          (self.finI, self.finF, len(self.groups))):
            if n:
                kn.clear_columns(vi, vf, n, big, mmi, mmi_fill, f_cols, f_fill)
        if self.fin_seq.shape[0]:
            self.fin_seq[:, k] = -1
        if self.blk.shape[1]:
            self.blk[:, :, k] = 0

    def _check(self) -> None:
        """Verify the structural invariants (for tests; O(state))."""
        g = self.g
        P = len(self.parts)
        assert len(self.parts.index) == P
        for key, pid in self.parts.index.items():
            assert self.parts.keys[pid] == key
        assert self.ptI.shape[0] == self.ubase[-1] == self.ptF.shape[0]
        gc = self.gc(0.0, 1)
        for ii, ix in enumerate(g.indexes):
            if ix.kind == SCAN:
                continue
            u_pid, u_key = self.u_pid[ii], self.u_key[ii]
            assert len(u_pid) == len(u_key) == self.ubase[ii + 1] - self.ubase[ii]
            assert np.all(np.diff(u_pid) >= 0), "universe not grouped by partition"
            for p in range(P):
                off, sz = int(self.off[ii, p]), int(self.sz[ii, p])
                if sz == 0:
                    continue
                lo = off - self.ubase[ii]
                assert np.all(u_pid[lo: lo + sz] == p)
                keys = u_key[lo: lo + sz]
                if len(keys) > 1:
                    assert np.all(keys[1:] > keys[:-1]), "keys not ascending within a partition"
                gk = self.u_gk[ii]
                assert gk is not None and np.all(np.isin(keys, gk))
                if ix.kind == FENWICK and not self.fw_in_pt:
                    fwI, fwF = self.fresh_rows(sz)
                    ptI = self.ptI[off: off + sz].copy()
                    ptF = self.ptF[off: off + sz].copy()
                    kn.build_fenwick(fwI, fwF, ptI, ptF, 0, sz, gc)
                    assert np.array_equal(fwI, self.fwI[off: off + sz]), "Fenwick out of date"
                    assert np.allclose(fwF, self.fwF[off: off + sz], equal_nan=True)
            if self.Cb:  # limbs are normalized
                nbo = self.Cb * self.K * self.L
                assert np.all((self.ptI[:, :nbo] >= 0) & (self.ptI[:, :nbo] <= kn.MASK))
        # record lists: per (index, partition), in time order, reaching exactly the live records
        seen = np.zeros(self.r_n, bool)
        for ii in range(self.nI):
            for p in range(min(P, self.r_head.shape[1])):
                rec, last_t, prev = int(self.r_head[ii, p]), None, -1
                while rec >= 0:
                    assert self.r_ix[rec] == ii and self.r_pid[rec] == p
                    assert last_t is None or self.r_t[rec] >= last_t
                    last_t, prev = self.r_t[rec], rec
                    seen[rec] = True
                    rec = int(self.r_nxt[rec])
                assert prev == self.r_tail[ii, p]
        assert np.all(seen | ~self.r_alive[: self.r_n])
        if g.case2 is not None and self.Cb:
            tot = np.zeros((P, self.K * self.L), np.int64)
            live = np.flatnonzero(self.q_alive[: self.q_n])
            np.add.at(tot, self.q_pid[live], self.qI[live, : self.K * self.L])
            from replaydb.operators.greta.operator import _normalize_limbs
            assert np.array_equal(_normalize_limbs(tot, self.L),
                                  self.qtotI[:P, : self.K * self.L]), "queue totals"

    def state_entries(self) -> int:
        live_rec = int(self.r_alive[: self.r_n].sum()) if self.r_n else 0
        live_q = int(self.q_alive[: self.q_n].sum()) if self.q_n else 0
        return int(self.ubase[-1]) + live_rec + live_q + len(self.parts)

    def state_bytes(self) -> int:
        total = 0
        for name in ("ptI", "ptF", "fwI", "fwF", "rI", "rF", "r_g", "qI", "qF", "qtotI",
                     "qtotF", "finI", "finF", "off", "sz", "appM", "r_head", "r_tail"):
            total += getattr(self, name).nbytes
        return total


class Runtime:
    """All graphs of a query plus window bookkeeping."""

    def __init__(self, plan: CompiledPlan) -> None:
        self.plan = plan
        self.graphs = [GraphState(plan, g) for g in plan.graphs]

    def ensure_groups(self, gs: GraphState) -> None:
        n = len(gs.groups)
        if gs.finI.shape[0] >= n:
            return
        cap = max(n, 2 * gs.finI.shape[0], 16)
        vi, vf = gs.fresh_rows(cap - gs.finI.shape[0])
        gs.finI = np.concatenate([gs.finI, vi])
        gs.finF = np.concatenate([gs.finF, vf])
        gs.fin_seq = np.concatenate([gs.fin_seq, np.full((cap - gs.fin_seq.shape[0], gs.K), -1,
                                                         np.int64)])

    def process(self, ev: EventChunk, W0: int) -> None:
        """Run every graph over one sub-chunk (children before parents)."""
        for gid in range(len(self.graphs) - 1, -1, -1):
            gs = self.graphs[gid]
            occ = gs.prepare(ev, self, W0)
            cc = self._child_completions(gs)
            gs.run(occ, cc, self)

    def _child_completions(self, gs: GraphState) -> tuple[np.ndarray, ...]:
        ts, ls, slots, buckets = [], [], [], []
        for c, nid in enumerate(gs.g.children):
            child = self.graphs[self.plan.negations[nid].negation.child]
            if not len(child.co_t):
                continue
            ts.append(child.co_t)
            ls.append(child.co_ls)
            slots.append(np.full(len(child.co_t), c, np.int64))
            buckets.append(child.p_cb[child.co_pid])
        if not ts:
            return (_EMPTY_I, _EMPTY_I, _EMPTY_I, _EMPTY_I)
        t = np.concatenate(ts)
        order = np.argsort(t, kind="stable")
        return (np.ascontiguousarray(t[order]), np.ascontiguousarray(np.concatenate(ls)[order]),
                np.ascontiguousarray(np.concatenate(slots)[order]),
                np.ascontiguousarray(np.concatenate(buckets)[order]))

    def state_entries(self) -> int:
        return sum(g.state_entries() for g in self.graphs)

    def state_bytes(self) -> int:
        return sum(g.state_bytes() for g in self.graphs)
