"""Vectorized MATCH_RECOGNIZE matcher for fixed blocks joined by greedy always-true gaps.

The shape the planner's benchmark queries and many hand-written ones take:
``PATTERN (B1 T1* B2 T2* ... Bk) WITHIN w``, where every block ``Bj`` is a fixed sequence of
single variables whose conditions read only the current row (PREV included) and every gap
``Tj*`` is a greedy star of a variable without a condition (always true). The general SQL
matcher (:mod:`~replaydb.operators.pattern.nfa_sql`) runs such a pattern as one attempt per
starting row with a thread per gap, so in a dense region it creates a node per live attempt
per row. This engine answers the same attempts with a few vectorized passes per batch.

Why that is exact. An attempt starts at row ``i`` when ``B1`` occurs there (its rows match the
block's conditions one by one). All its rows satisfy ``t - t[i] <= w`` (rows after the
window's end cannot be bound), so they lie in ``[i, E]`` with ``E`` the last row of the window
(or the last row before an interval break, or the end of input). SQL:2016 preferment with
greedy gaps prefers, at the first row where two matches differ, the one that stays in the gap;
so among all matches the most preferred one puts ``B2`` as late as possible such that the rest
still fits, then ``B3`` as late as possible after it, and so on. That is the *latest chain*,
found backwards from ``E``: ``Bk`` at its last occurrence ending by ``E``, ``B(k-1)`` at its last
occurrence ending before that, ... ``B2``; the attempt matches iff ``B2``'s occurrence starts
after ``B1`` ends. Each step is one ``searchsorted`` over the block's occurrences for all
attempts of the batch at once. The match's rows are ``i .. end of Bk`` (gap rows bound to their
gap variable), as the general matcher reports them.

A match is reported with every row it binds, gap rows included, as the general matcher reports
it; unless the operator says its measures never read a gap row (``block_rows_only``: ONE ROW
PER MATCH, no aggregate over all rows or over a gap variable, no reference to a gap variable, no
FIRST/LAST of the match's rows with an offset - see
:func:`~replaydb.operators.pattern.measures.rows_of_vars_unread`). Then a match carries its
blocks' rows only: the first and the last row of the match are among them, and so is every row
of a block variable, so the measures come out the same, while a match across a window of
hundreds of rows costs a few rows instead of hundreds (on the planner benchmark's m = 4
queries with thousands of matches, writing the gap rows was about a third of the matching).

AFTER MATCH SKIP TO NEXT ROW keeps every match; PAST LAST ROW keeps matches in row order whose
first row is after the previous kept match (a compiled loop over the matches only). Attempts
whose window reaches past the batch wait, with the rows from the first of them on, for the next
batch; a break (a new replay interval) or end of input resolves them with the rows there are.
Attempts are resolved in row order, at the row after their window (as the general matcher
resolves them), so results, their order and match numbers are those of the general engine
(property tests hold them to it).

Not eligible (the general engine runs them): partitions, conditions that read other rows of
the match (``S2.x > S1.x``, aggregates, FIRST/LAST), reluctant or bounded gaps, gaps with a
condition, a pattern starting or ending with a gap, no WITHIN, AFTER MATCH SKIP TO a variable.

Complexity per batch of ``n`` rows with ``a`` attempts, ``k`` blocks and ``r`` matched rows:
O(n x block length) for the occurrences, O(a x k x log n) for the chains, O(r) for the rows
(O(matches x block rows) with ``block_rows_only``).
State: the rows from the first unresolved attempt on (at most one window of rows).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from replaydb.operators.pattern import nfa_sql
from replaydb.operators.pattern.compile import CompiledPattern
from replaydb.operators.pattern.engine import sql_select
from replaydb.operators.pattern.measures import MatchSet
from replaydb.operators.pattern.model import Repeat, Seq, Var

_I64 = np.int64


def gap_layout(cp: CompiledPattern) -> tuple[list[list[int]], list[int]] | None:
    """``(blocks, gaps)`` as variable ids when ``cp`` fits :class:`GapSeqEngine`, else None:
    ``blocks[j]`` the variables of block ``j`` in order, ``gaps[j]`` the variable of the gap
    after it (one fewer gap than blocks, at least one gap)."""
    spec = cp.spec
    if not cp.sql or cp.partition_by or cp.window < 0 or len(cp.p_op) or len(cp.ci_kind) \
            or len(cp.cf_kind) or len(cp.neg_var):
        return None
    if cp.skip_kind not in (nfa_sql.SKIP_PAST_LAST, nfa_sql.SKIP_NEXT_ROW):
        return None
    pat = spec.pattern
    items = pat.items if isinstance(pat, Seq) else (pat,)
    blocks: list[list[int]] = [[]]
    gaps: list[int] = []
    for it in items:
        if isinstance(it, Var):
            blocks[-1].append(cp.var_index(it.name))
            continue
        body = it.body if isinstance(it, Repeat) else None
        if isinstance(body, Seq) and len(body.items) == 1:
            body = body.items[0]
        if not (isinstance(it, Repeat) and isinstance(body, Var) and it.min == 0
                and it.max is None and it.greedy):
            return None
        v = cp.var_index(body.name)
        if cp.local_exprs[v] is not None or spec.define(body.name).event_types:
            return None  # a gap with a condition
        if not blocks[-1]:
            return None  # the pattern starts with a gap, or two gaps are adjacent
        gaps.append(v)
        blocks.append([])
    if not gaps or not blocks[-1]:
        return None
    return blocks, gaps


@njit(cache=True)
def _rows(chain: np.ndarray, ends: np.ndarray, blen: np.ndarray, boff: np.ndarray,
          bvars: np.ndarray, gapv: np.ndarray, g0: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows (event indexes and variables) of matches given their block starts ``chain``
    (matches x blocks, batch rows) and last rows ``ends``: blocks bound to their variables,
    the rows between two blocks to the gap's variable."""
    nm, k = chain.shape
    off = np.empty(nm + 1, dtype=np.int64)
    off[0] = 0
    for m in range(nm):
        off[m + 1] = off[m] + ends[m] - chain[m, 0] + 1
    ev = np.empty(off[nm], dtype=np.int64)
    var = np.empty(off[nm], dtype=np.int64)
    for m in range(nm):
        w = off[m]
        for j in range(k):
            o = chain[m, j]
            for q in range(blen[j]):
                ev[w] = g0 + o + q
                var[w] = bvars[boff[j] + q]
                w += 1
            if j + 1 < k:
                for r in range(o + blen[j], chain[m, j + 1]):
                    ev[w] = g0 + r
                    var[w] = gapv[j]
                    w += 1
    return ev, var, off


def _block_rows(chain: np.ndarray, col: np.ndarray, step: np.ndarray, bvars: np.ndarray,
                g0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of matches given their block starts ``chain`` (matches x blocks, batch rows), the
    blocks' rows only: row ``i`` of every match is ``chain[:, col[i]] + step[i]``, bound to
    ``bvars[i]`` (``col``, ``step``: each block row's block and offset in it). O(matches x
    block rows), vectorized."""
    nm = chain.shape[0]
    width = len(bvars)
    ev = (chain[:, col] + (step + g0)).ravel()
    var = np.tile(bvars, nm)
    off = np.arange(0, (nm + 1) * width, width, dtype=_I64)
    return ev, var, off


def _breaks(brk: np.ndarray | None, m: int) -> np.ndarray | None:
    """Rows (of the ``m`` carried ones, then the batch) that start a new interval, ascending,
    or None without breaks. The carried rows lie in the open (last) segment of before, so a
    break is never among them. Where the rows' segments are needed, they come from these few
    positions (:func:`_segment_ends`, :meth:`GapSeqEngine._occurrences`): no per-row segment
    array, whose making cost a third of matching a batch of many short intervals."""
    if brk is None or not len(brk):
        return None
    bpos = np.flatnonzero(brk)
    return bpos + m if bpos.size else None


def _segment_ends(bpos: np.ndarray | None, rows: np.ndarray, L: int) -> np.ndarray:
    """The last row of the segment of each of ``rows`` (of ``L``): the row before the next
    break after it, or ``L - 1``. O(len(rows) log breaks)."""
    if bpos is None:
        return np.full(len(rows), L - 1, dtype=_I64)
    nxt = np.searchsorted(bpos, rows, side="right")
    return np.append(bpos, L)[nxt] - 1


class GapSeqEngine:
    """Engine for ``B1 T1* B2 ... Bk WITHIN w`` under SQL semantics (module docstring).

    State (``self.s``, plain arrays, so a snapshot is a copy): the carried rows (one boolean
    per variable, their ``t``, the event index of the first), the next row an attempt may
    start at after PAST LAST ROW, the match number and the count of waiting attempts."""

    columnar = True  # one boolean array per variable
    takes_breaks = True  # process() takes interval breaks (a new interval at a flagged row)
    takes_final = True  # process(final=True) resolves every attempt (end of input)

    def __init__(self, cp: CompiledPattern, grow_check: Callable[[int, str], None], *,
                 block_rows_only: bool = False) -> None:
        """``block_rows_only``: matches carry their blocks' rows only (module docstring); the
        caller makes sure its measures do not read the gap rows."""
        layout = gap_layout(cp)
        if layout is None:
            raise ValueError("GapSeqEngine: the pattern does not have the blocks-and-gaps shape")
        self.cp = cp
        self.grow_check = grow_check
        blocks, gaps = layout
        self.blocks = [np.asarray(b, dtype=_I64) for b in blocks]
        self.blen = np.array([len(b) for b in blocks], dtype=_I64)
        self.boff = np.concatenate(([0], np.cumsum(self.blen)[:-1])).astype(_I64)
        self.bvars = np.concatenate(self.blocks).astype(_I64)
        self.gapv = np.asarray(gaps, dtype=_I64)
        self.block_rows_only = block_rows_only
        self._row_block = np.repeat(np.arange(len(blocks), dtype=_I64), self.blen)
        self._row_step = np.arange(len(self.bvars), dtype=_I64) - np.repeat(self.boff, self.blen)
        self.block_vars = sorted(set(self.bvars.tolist()))  # the variables whose masks count
        self.reset()

    @staticmethod
    def eligible(cp: CompiledPattern) -> bool:
        return gap_layout(cp) is not None

    def reset(self) -> None:
        V = self.cp.n_vars
        self.s: dict = {"cm": np.zeros((0, V), dtype=np.bool_), "ct": np.zeros(0, _I64),
                        "cg": 0, "next_allowed": 0, "matchno": 0, "waiting": 0,
                        "n_parts": 1}

    def ensure_parts(self, n_parts: int) -> None:
        return None

    @property
    def state_size(self) -> int:
        return int(len(self.s["ct"]))

    @property
    def live_runs(self) -> int:
        return int(self.s["waiting"])

    def process(self, g0: int, pid: np.ndarray, t: np.ndarray, vmask: list[np.ndarray],
                startable: np.ndarray | None, buf: np.ndarray, base: int,
                enumerate_cap: int | None, brk: np.ndarray | None = None, *,
                final: bool = False) -> list[MatchSet]:
        """Match events ``g0 .. g0 + len(t) - 1`` (``brk``: rows that start a new interval);
        ``final``: no rows follow, every attempt is resolved now (what :meth:`finish` after
        the batch would resolve; nothing is carried)."""
        return self._run(g0, t, vmask, brk, final=final)

    def finish(self) -> list[MatchSet]:
        """End of input: every waiting attempt is resolved with the rows there are."""
        if not len(self.s["ct"]):
            return []
        V = self.cp.n_vars
        g0 = int(self.s["cg"]) + len(self.s["ct"])
        return self._run(g0, np.zeros(0, _I64), [np.zeros(0, np.bool_)] * V, None, final=True)

    def _run(self, g0: int, t: np.ndarray, vmask: list[np.ndarray], brk: np.ndarray | None,
             *, final: bool) -> list[MatchSet]:
        s = self.s
        m = len(s["ct"])
        if m and int(s["cg"]) + m != g0:
            raise AssertionError("GapSeqEngine: batches must follow each other without a hole")
        G0 = g0 - m
        T = np.concatenate([s["ct"], np.asarray(t, _I64)]) if m else np.asarray(t, _I64)
        L = len(T)
        cols = {v: (np.concatenate([s["cm"][:, v], vmask[v]]) if m else np.asarray(vmask[v]))
                for v in self.block_vars}
        bpos = _breaks(brk, m)
        open_from = int(bpos[-1]) if bpos is not None else 0
        occ = [self._occurrences(b, cols, bpos, L) for b in self.blocks]
        starts = occ[0]
        win_end = np.searchsorted(T, T[starts] + self.cp.window, side="right").astype(_I64) - 1
        s_end = _segment_ends(bpos, starts, L)
        # an attempt is resolved once a row past its window (in its interval) has arrived, or
        # its interval ended; resolution follows row order, so the resolved ones come first
        done = np.ones(len(starts), np.bool_) if final else (win_end < s_end) | (s_end < L - 1)
        nres = int(np.count_nonzero(done))
        if nres and not bool(done[:nres].all()):
            raise AssertionError("GapSeqEngine: resolved attempts must precede waiting ones")
        chain, ends = self._chains(occ, starts[:nres], np.minimum(win_end, s_end)[:nres])
        chain, ends = self._skip(chain, ends, G0)
        parts: list[MatchSet] = []
        nm = len(chain)
        if nm:
            if self.block_rows_only:
                ev, var, off = _block_rows(chain, self._row_block, self._row_step, self.bvars,
                                           G0)
            else:
                ev, var, off = _rows(chain, ends, self.blen, self.boff, self.bvars, self.gapv,
                                     G0)
            number = np.arange(s["matchno"] + 1, s["matchno"] + nm + 1, dtype=_I64)
            s["matchno"] += nm
            parts.append(MatchSet(ev, var, off, np.zeros(nm, dtype=_I64), number))
        # carry the rows of waiting attempts and of starts the batch cannot decide yet
        waiting = len(starts) - nres
        frm = L if final else max(L - int(self.blen[0]) + 1, open_from, 0)
        if waiting:
            frm = min(frm, int(starts[nres]))
        self._carry(cols, T, G0, frm, waiting)
        return parts

    def _occurrences(self, block: np.ndarray, cols: dict[int, np.ndarray],
                     bpos: np.ndarray | None, L: int) -> np.ndarray:
        """Rows where ``block`` occurs (each of its rows matches its variable, all in one
        interval: no break among its rows after the first), ascending: one shifted AND per
        variable, then the starts a break cuts (``bpos - q`` for ``q`` in ``1 .. len - 1``)
        cleared."""
        lb = len(block)
        span = L - lb + 1
        if span <= 0:
            return np.zeros(0, _I64)
        ok = cols[int(block[0])][:span].copy()
        for q in range(1, lb):
            ok &= cols[int(block[q])][q: span + q]
        if bpos is not None:
            for q in range(1, lb):
                cut = bpos - q
                ok[cut[(cut >= 0) & (cut < span)]] = False
        return np.flatnonzero(ok).astype(_I64)

    def _chains(self, occ: list[np.ndarray], st: np.ndarray, R: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """The latest chain of block occurrences of every attempt (starting at ``st``, rows up
        to ``R``): ``(block starts, last rows)`` of the attempts that match."""
        k = len(self.blocks)
        n = len(st)
        chain = np.empty((n, k), dtype=_I64)
        chain[:, 0] = st
        valid = np.ones(n, dtype=np.bool_)
        ends = R
        for j in range(k - 1, 0, -1):
            oj = occ[j]
            idx = np.searchsorted(oj, R - self.blen[j] + 1, side="right") - 1
            valid &= idx >= 0
            o = oj[np.maximum(idx, 0)] if len(oj) else np.zeros(n, _I64)
            if j == k - 1:
                ends = o + self.blen[j] - 1
            chain[:, j] = o
            R = o - 1
        valid &= chain[:, 1] >= st + self.blen[0]
        return chain[valid], ends[valid]

    def _skip(self, chain: np.ndarray, ends: np.ndarray, G0: int
              ) -> tuple[np.ndarray, np.ndarray]:
        """AFTER MATCH SKIP over the matches (in row order) and the next row it allows."""
        s = self.s
        gst = chain[:, 0] + G0
        keep, na, _ = sql_select(gst, ends + G0, int(s["next_allowed"]), self.cp.skip_kind, 0)
        s["next_allowed"] = int(na)
        return chain[keep], ends[keep]

    def _carry(self, cols: dict[int, np.ndarray], T: np.ndarray, G0: int, frm: int,
               waiting: int) -> None:
        """Keep rows ``frm ..`` of the batch (with the carried ones before it) for the next."""
        s = self.s
        L = len(T)
        V = self.cp.n_vars
        if frm < L:
            self.grow_check(L - frm, "rows of waiting match attempts")
            rows = np.zeros((L - frm, V), dtype=np.bool_)
            for v, c in cols.items():
                rows[:, v] = c[frm:]
            s["cm"] = rows
            s["ct"] = T[frm:].copy()
        else:
            s["cm"] = np.zeros((0, V), dtype=np.bool_)
            s["ct"] = np.zeros(0, _I64)
        s["cg"] = G0 + frm
        s["waiting"] = waiting

    def collect(self) -> None:
        return None

    def min_referenced(self) -> int | None:
        return int(self.s["cg"]) if len(self.s["ct"]) else None

    def _check(self) -> None:
        """Invariant checker: carried rows consistent, time order kept, counters sane."""
        s = self.s
        m = len(s["ct"])
        assert s["cm"].shape == (m, self.cp.n_vars)
        assert np.all(np.diff(s["ct"]) >= 0), "carried rows out of time order"
        assert 0 <= s["waiting"] <= m
        assert s["matchno"] >= 0 and s["next_allowed"] >= 0
