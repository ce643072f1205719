"""Vectorized MATCH_RECOGNIZE matcher for fixed blocks joined by greedy always-true gaps.

The shape the planner's benchmark queries and many hand-written ones take:
``PATTERN (B1 T1* B2 T2* ... Bk) WITHIN w``, where every block ``Bj`` is a fixed sequence of
single variables whose conditions read only the current row (PREV included) and every gap
``Tj*`` is a greedy star of a variable without a condition (always true). The general SQL
matcher (:mod:`~replaydb.operators.pattern.nfa_sql`) runs such a pattern as one attempt per
starting row with a thread per gap, so in a dense region it creates a node per live attempt
per row. This engine answers the same attempts with one compiled pass per batch
(:func:`_match_batch`).

Why that is exact. An attempt starts at row ``i`` when ``B1`` occurs there (its rows match the
block's conditions one by one). All its rows satisfy ``t - t[i] <= w`` (rows after the
window's end cannot be bound), so they lie in ``[i, E]`` with ``E`` the last row of the window
(or the last row before an interval break, or the end of input). SQL:2016 preferment with
greedy gaps prefers, at the first row where two matches differ, the one that stays in the gap;
so among all matches the most preferred one puts ``B2`` as late as possible such that the rest
still fits, then ``B3`` as late as possible after it, and so on. That is the *latest chain*,
found backwards from ``E``: ``Bk`` at its last occurrence ending by ``E``, ``B(k-1)`` at its last
occurrence ending before that, ... ``B2``; the attempt matches iff ``B2``'s occurrence starts
after ``B1`` ends. Attempts are resolved in row order and their reach (window end, interval
end) never decreases, so neither does any block's latest occurrence: each block's step is a
forward pointer over its occurrences, shared by all attempts of the batch. The match's rows are ``i .. end of Bk`` (gap rows bound to their
gap variable), as the general matcher reports them.

A match is reported with every row it binds, gap rows included, as the general matcher reports
it; unless the operator says its measures never read a gap row (``block_rows_only``: ONE ROW
PER MATCH, no aggregate over all rows or over a gap variable, no reference to a gap variable, no
FIRST/LAST of the match's rows with an offset - see
:func:`~replaydb.operators.pattern.measures.rows_of_vars_unread`). Then a match carries its
blocks' rows only: the first and the last row of the match are among them, and so is every row
of a block variable, so the measures come out the same, while a match across a window of
hundreds of rows costs a few rows instead of hundreds (writing the gap rows is a large share of
the matching when there are thousands of matches).

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
O(n / 8 + rows where a block's first variable holds x block length) for the occurrences (the
first variable's mask is read a word of eight rows at a time), O(a x k + occurrences) for the
chains, O(r) for the rows (O(matches x block rows) with ``block_rows_only``). The passes are
compiled: on the small batches of selective plans, a sequence of NumPy passes would cost more
in fixed costs per call than in work.
State: the rows from the first unresolved attempt on (at most one window of rows).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from replaydb.operators.pattern import nfa_sql
from replaydb.operators.pattern.compile import CompiledPattern
from replaydb.operators.pattern.measures import MatchSet
from replaydb.operators.pattern.model import Repeat, Seq, Var

_I64 = np.int64
_NO_BREAK = np.zeros(0, dtype=np.bool_)


def gap_layout(cp: CompiledPattern) -> tuple[list[list[int]], list[int]] | None:
    """``(blocks, gaps)`` as variable ids when ``cp`` fits :class:`GapSeqEngine`, else None:
    ``blocks[j]`` the variables of block ``j`` in order, ``gaps[j]`` the variable of the gap
    after it (one fewer gap than blocks, at least one gap)."""
    spec = cp.spec
    if not cp.sql or cp.partition_by or cp.window < 0 or len(cp.p_op) or len(cp.ci_kind) \
            or len(cp.cf_kind) or len(cp.neg_var) or spec.unmatched_rows:
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


@njit(cache=True, nogil=True)
def _set_rows(flags: np.ndarray, shift: int) -> np.ndarray:
    """The rows where ``flags`` is set, plus ``shift``, ascending; zero words of eight rows
    skipped at once (flags are sparse). O(rows / 8 + set rows)."""
    n = flags.shape[0]
    whole = n >> 3
    words = flags[:whole << 3].view(np.uint64)
    out = np.empty(16, np.int64)
    k = 0
    for w in range(whole + 1):
        if w < whole and words[w] == 0:
            continue
        for i in range(w << 3, min((w + 1) << 3, n)):
            if flags[i]:
                if k == out.shape[0]:
                    grown = np.empty(2 * k, np.int64)
                    grown[:k] = out
                    out = grown
                out[k] = i + shift
                k += 1
    return out[:k]


@njit(cache=True, nogil=True)
def _last_at_most(T: np.ndarray, lo: int, x: int) -> int:
    """The last row ``i >= lo`` with ``T[i] <= x`` (``T`` ascending, ``T[lo] <= x``), by a
    galloping search from ``lo``: O(log(i - lo))."""
    n = T.shape[0]
    step = 1
    while lo + step < n and T[lo + step] <= x:
        lo += step
        step <<= 1
    hi = min(lo + step, n)  # T[lo] <= x, and T[hi] > x or hi == n
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if T[mid] <= x:
            lo = mid
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _block_at(X: np.ndarray, rsel: np.ndarray, lb: int, r0: int, i: int) -> bool:
    """Whether rows ``i + 1 .. i + lb - 1`` match the block's variables after its first."""
    for q in range(1, lb):
        if not X[rsel[r0 + q], i + q]:
            return False
    return True


@njit(cache=True, nogil=True)
def _occurrences(X: np.ndarray, rsel: np.ndarray, lb: int, r0: int, bpos: np.ndarray,
                 out: np.ndarray, k: int) -> tuple[np.ndarray, int]:
    """Append to ``out`` (from ``k``, grown by doubling) the rows where a block of ``lb``
    rows occurs: row ``i + q`` matches the block's variable ``q`` (``X[rsel[r0 + q]]``) for
    every ``q``, and no break (``bpos``, ascending) lies in ``i + 1 .. i + lb - 1`` (all its
    rows in one interval). Ascending. The first variable's mask is read eight rows (a word)
    at a time, skipping words without a row that holds: a selective first variable costs a
    fraction of a test per row. O(rows / 8 + rows the first variable holds x lb)."""
    L = X.shape[1]
    span = max(L - lb + 1, 0)
    first = X[rsel[r0]]
    whole = span >> 3
    words = first[:whole << 3].view(np.uint64)
    nb = bpos.shape[0]
    p = 0  # the first break after the rows tested
    for w in range(whole + 1):
        if w < whole and words[w] == 0:
            continue
        for i in range(w << 3, min((w + 1) << 3, span)):
            if not first[i] or (lb > 1 and not _block_at(X, rsel, lb, r0, i)):
                continue
            while p < nb and bpos[p] <= i:
                p += 1
            if p < nb and bpos[p] < i + lb:
                continue
            if k == out.shape[0]:
                grown = np.empty(2 * out.shape[0], np.int64)
                grown[:k] = out[:k]
                out = grown
            out[k] = i
            k += 1
    return out, k


@njit(cache=True, nogil=True)
def _match_batch(T: np.ndarray, X: np.ndarray, rsel: np.ndarray, brk: np.ndarray, m: int,
                 blen: np.ndarray, boff: np.ndarray, bvars: np.ndarray, gapv: np.ndarray,
                 window: int, final: bool, skip_next_row: bool, next_allowed: int, G0: int,
                 block_rows_only: bool, matchno: int):  # type: ignore[no-untyped-def]
    """One batch of :class:`GapSeqEngine` (module docstring), compiled: rows ``0 .. L - 1``
    (``m`` carried, then the batch's), times ``T``, ``X[rsel[r]]`` the mask of block row
    ``r``'s variable (block ``j``'s rows from ``boff[j]``), ``brk`` the batch's rows that
    start an interval. Finds every block's occurrences, resolves the attempts (starts of
    block 1) whose window or interval ended - or all, when ``final`` - by their latest
    chain, applies AFTER MATCH SKIP (TO NEXT ROW, else PAST LAST ROW) from
    ``next_allowed`` (event index), and writes the kept matches' rows (blocks only with
    ``block_rows_only``) as event indexes (row + ``G0``), numbered from ``matchno + 1``.

    Returns ``(ev, var, off, number, next allowed, attempts, resolved, first waiting
    start or -1, start of the open interval, status)``; status 1: a resolved attempt
    follows a waiting one (never, by construction; the caller raises). O(rows x block
    rows tested + matched rows)."""
    L = T.shape[0]
    k = blen.shape[0]
    bpos = _set_rows(brk, m)
    nb = bpos.shape[0]
    open_from = bpos[nb - 1] if nb else 0
    occ_off = np.zeros(k + 1, np.int64)
    occ = np.empty(max(16, L >> 4), np.int64)
    n_occ = 0
    for b in range(k):
        occ, n_occ = _occurrences(X, rsel, blen[b], boff[b], bpos, occ, n_occ)
        occ_off[b + 1] = n_occ
    ns = occ_off[1]
    # resolve attempts in row order: window end and interval end by two forward pointers
    reach = np.empty(ns, np.int64)
    nres = 0
    pw = 0
    pb = 0
    for a in range(ns):
        st = occ[a]
        x = T[st] + window
        pw = _last_at_most(T, max(pw, st), x)
        while pb < nb and bpos[pb] <= st:
            pb += 1
        se = bpos[pb] - 1 if pb < nb else L - 1
        if final or pw < se or se < L - 1:
            if nres != a:
                return (np.empty(0, np.int64), np.empty(0, np.int64), np.zeros(1, np.int64),
                        np.empty(0, np.int64), next_allowed, ns, nres, -1, open_from, 1)
            nres += 1
        reach[a] = min(pw, se)
    # the latest chain of every resolved attempt, then AFTER MATCH SKIP in row order. The
    # attempts' reach never decreases (window and interval ends move forward with the start),
    # so neither does any block's latest occurrence: one forward pointer per block
    chain = np.empty((nres, k), np.int64)
    ends = np.empty(nres, np.int64)
    ptr = occ_off[:k] - 1  # per block, the last occurrence at or before its bound so far
    nm = 0
    na = next_allowed
    for a in range(nres):
        st = occ[a]
        R = reach[a]
        ok = True
        e = 0
        for b in range(k - 1, 0, -1):
            bound = R - blen[b] + 1
            p = ptr[b]
            hi = occ_off[b + 1]
            while p + 1 < hi and occ[p + 1] <= bound:
                p += 1
            ptr[b] = p
            if p < occ_off[b]:
                ok = False
                break
            o = occ[p]
            if b == k - 1:
                e = o + blen[b] - 1
            chain[nm, b] = o
            R = o - 1
        if not ok or chain[nm, 1] < st + blen[0] or st + G0 < na:
            continue
        chain[nm, 0] = st
        ends[nm] = e
        na = st + G0 + 1 if skip_next_row else e + G0 + 1
        nm += 1
    chain = chain[:nm]
    ends = ends[:nm]
    if block_rows_only:
        width = bvars.shape[0]
        ev = np.empty(nm * width, np.int64)
        var = np.empty(nm * width, np.int64)
        off = np.empty(nm + 1, np.int64)
        w = 0
        for a in range(nm):
            off[a] = w
            for b in range(k):
                o = chain[a, b] + G0
                for q in range(blen[b]):
                    ev[w] = o + q
                    var[w] = bvars[boff[b] + q]
                    w += 1
        off[nm] = w
    else:
        ev, var, off = _rows(chain, ends, blen, boff, bvars, gapv, G0)
    number = np.arange(matchno + 1, matchno + nm + 1, dtype=np.int64)
    first_wait = occ[nres] if nres < ns else -1
    return ev, var, off, number, na, ns, nres, first_wait, open_from, 0


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
        self.block_vars = sorted(set(self.bvars.tolist()))  # the variables whose masks count
        row_of = {v: r for r, v in enumerate(self.block_vars)}
        self._rsel = np.array([row_of[v] for v in self.bvars.tolist()], dtype=_I64)
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
        X = np.empty((len(self.block_vars), L), dtype=np.bool_)
        for r, v in enumerate(self.block_vars):
            if m:
                X[r, :m] = s["cm"][:, v]
            X[r, m:] = vmask[v]
        (ev, var, off, number, na, n_starts, nres, first_wait, open_from,
         status) = _match_batch(T, X, self._rsel, _NO_BREAK if brk is None else brk, m,
                                self.blen, self.boff, self.bvars, self.gapv,
                                int(self.cp.window), final,
                                self.cp.skip_kind == nfa_sql.SKIP_NEXT_ROW,
                                int(s["next_allowed"]), G0, self.block_rows_only,
                                int(s["matchno"]))
        if status:
            raise AssertionError("GapSeqEngine: resolved attempts must precede waiting ones")
        s["next_allowed"] = int(na)
        parts: list[MatchSet] = []
        nm = len(number)
        if nm:
            s["matchno"] += nm
            parts.append(MatchSet(ev, var, off, np.zeros(nm, dtype=_I64), number))
        # carry the rows of waiting attempts and of starts the batch cannot decide yet
        waiting = int(n_starts) - int(nres)
        frm = L if final else max(L - int(self.blen[0]) + 1, int(open_from), 0)
        if waiting:
            frm = min(frm, int(first_wait))
        self._carry(X, T, G0, frm, waiting)
        return parts

    def _carry(self, X: np.ndarray, T: np.ndarray, G0: int, frm: int, waiting: int) -> None:
        """Keep rows ``frm ..`` of the batch (with the carried ones before it) for the next:
        ``X``, the block variables' masks (:attr:`block_vars` order), the others false."""
        s = self.s
        L = len(T)
        V = self.cp.n_vars
        if frm < L:
            self.grow_check(L - frm, "rows of waiting match attempts")
            rows = np.zeros((L - frm, V), dtype=np.bool_)
            for r, v in enumerate(self.block_vars):
                rows[:, v] = X[r, frm:]
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
