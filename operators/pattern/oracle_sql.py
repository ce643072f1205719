"""Brute-force SQL:2016 MATCH_RECOGNIZE, for tests on small inputs (see
:mod:`replaydb.operators.pattern.oracle`, whose condition interpreter it uses).

Per partition, an attempt at every row in order; its result is the first match a backtracking
matcher finds, trying the alternatives in the standard's preferment order (alternation left to
right, greedy quantifiers more iterations first, reluctant ones fewer, PERMUTE's orders
lexicographically; an iteration that binds no row as :func:`_bt_rep` says), straight from the
definitions and sharing nothing with the automaton: ``^`` holds before a partition's first row
and ``$`` after its last, ``{- -}`` hides the rows its body binds, a union variable stands for
the rows of its variables. Then AFTER MATCH SKIP (the next row after an empty match), empty
matches (SHOW / OMIT) and unmatched rows as Trino defines them. Exponential in the input size.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import permutations

import pyarrow as pa

from replaydb.errors import OperatorError
from replaydb.operators.pattern import model as pm
from replaydb.operators.pattern.oracle import (
    UNMATCHED,
    Conditions,
    Match,
    Rows,
    _conditions,
    _names,
    _partitions,
    eval_condition,
)

Found = Iterator[tuple[int, list[tuple[int, str]], tuple[int, ...]]]
"""(next row, the match so far, its rows inside an exclusion)"""


def _bt(node: pm.PatternNode, rows: Rows, conds: Conditions, names: dict[str, str],
        number: int, pos: int, match: list[tuple[int, str]], t0: int | None,
        window: int | None, hidden: tuple[int, ...] = ()) -> Found:
    """Backtracking matcher yielding (next row, match, excluded rows) in SQL:2016 preferment
    order; ``number`` is the attempt's MATCH_NUMBER(). ``^`` holds before the partition's first
    row (``pos == 0``), ``$`` after its last; PERMUTE tries the orders of its items in
    lexicographic order of their indices; ``{- -}`` matches as its body and hides its rows."""
    if isinstance(node, pm.Var):
        if pos < len(rows.t):
            start_t = rows.t[pos] if t0 is None else t0
            if window is None or rows.t[pos] - start_t <= window:
                if eval_condition(conds[node.name], rows, match, node.name, pos, names,
                                  number, conds.subsets):
                    yield pos + 1, match + [(pos, node.name)], hidden
        return
    if isinstance(node, pm.Anchor):
        if pos == (0 if node.start else len(rows.t)):
            yield pos, match, hidden
        return
    if isinstance(node, pm.Exclude):
        for p2, m2, h2 in _bt(node.body, rows, conds, names, number, pos, match, t0, window,
                              hidden):
            yield p2, m2, h2 + tuple(r for r, _ in m2[len(match):])
        return
    if isinstance(node, pm.Seq):
        yield from _bt_seq(list(node.items), rows, conds, names, number, pos, match, t0, window,
                           hidden)
        return
    if isinstance(node, pm.Permute):
        for order in permutations(node.items):
            yield from _bt_seq(list(order), rows, conds, names, number, pos, match, t0, window,
                               hidden)
        return
    if isinstance(node, pm.Alt):
        for o in node.options:
            yield from _bt(o, rows, conds, names, number, pos, match, t0, window, hidden)
        return
    if isinstance(node, pm.Repeat):
        yield from _bt_rep(node, 0, rows, conds, names, number, pos, match, t0, window, hidden)
        return
    raise TypeError(node)


def _t0(match: list[tuple[int, str]], rows: Rows, t0: int | None) -> int | None:
    return rows.t[match[0][0]] if match else t0


def _bt_seq(items: list[pm.PatternNode], rows: Rows, conds: dict, names: dict, number: int,
            pos: int, match: list[tuple[int, str]], t0: int | None,
            window: int | None, hidden: tuple[int, ...]) -> Found:
    if not items:
        yield pos, match, hidden
        return
    for p2, m2, h2 in _bt(items[0], rows, conds, names, number, pos, match, t0, window, hidden):
        yield from _bt_seq(items[1:], rows, conds, names, number, p2, m2, _t0(m2, rows, t0),
                           window, h2)


def _bt_rep(node: pm.Repeat, count: int, rows: Rows, conds: dict, names: dict, number: int,
            pos: int, match: list[tuple[int, str]], t0: int | None,
            window: int | None, hidden: tuple[int, ...]) -> Found:
    """``node`` after ``count`` iterations: greedy tries one more iteration first, reluctant
    stops first. An iteration that binds no row (the body can match zero rows) counts like any
    other in a bounded quantifier ``{m,M}`` and in the first ``max(m, 1) - 1`` iterations of an
    unbounded one; the ``max(m, 1)``-th iteration of an unbounded quantifier (the first of its
    repeated part) ends the quantifier when it binds no row, and a later one that binds no row
    is no way to match (as Trino's matcher, whose loop never goes round without a row:
    docs/decisions.md)."""
    lo, hi = node.min, node.max
    looped = max(lo, 1)  # the first iteration of an unbounded quantifier's repeated part

    def more() -> Found:
        if hi is not None and count >= hi:
            return
        for p2, m2, h2 in _bt(node.body, rows, conds, names, number, pos, match, t0, window,
                              hidden):
            if p2 == pos and hi is None and count + 1 >= looped:
                if count + 1 == looped:  # the repeated part's first iteration: it ends here
                    yield p2, m2, h2
                continue
            yield from _bt_rep(node, count + 1, rows, conds, names, number, p2, m2,
                               _t0(m2, rows, t0), window, h2)

    stop = count >= lo
    if node.greedy:
        yield from more()
        if stop:
            yield pos, match, hidden
    else:
        if stop:
            yield pos, match, hidden
        yield from more()


def sql_matches(spec: pm.PatternSpec, table: pa.Table) -> list[Match]:
    """SQL:2016 MATCH_RECOGNIZE matches (see module docstring), per partition in order.

    Raises :class:`~replaydb.errors.OperatorError` where the standard raises an exception
    (AFTER MATCH SKIP TO a variable that bound no row / the match's first row).
    """
    assert spec.semantics == pm.Semantics.SQL
    conds = _conditions(spec)
    names = _names(table)
    out: list[Match] = []
    sk = spec.after_match_skip
    for key, rows in _partitions(table, tuple(spec.partition_by)).items():
        n = len(rows.t)
        s = 0
        number = 1  # the partition's next MATCH_NUMBER()
        covered = -1  # the last row of the partition's non-empty matches so far
        while s < n:
            # the attempt's result: its most preferred match, possibly empty
            found, hidden = next(((m, h) for _, m, h in _bt(
                spec.pattern, rows, conds, names, number, s, [], None, spec.window)), (None, ()))
            if found is None:
                if spec.unmatched_rows and s > covered:
                    out.append((key, (rows.index[s],), (UNMATCHED,)))
                s += 1
                continue
            if not found:  # an empty match: numbered, then the next row
                if spec.show_empty or spec.rows_per_match == pm.RowsPerMatch.ONE:
                    out.append((key, (rows.index[s],), (None,)))
                number += 1
                s += 1
                continue
            covered = max(covered, found[-1][0])
            shown = [(r, lab) for r, lab in found if r not in hidden]
            if shown:  # a match whose rows are all excluded outputs no row
                out.append((key, tuple(rows.index[r] for r, _ in shown),
                            tuple(lab for _, lab in shown)))
            number += 1
            if sk.kind == pm.SkipKind.PAST_LAST_ROW:
                s = found[-1][0] + 1
            elif sk.kind == pm.SkipKind.TO_NEXT_ROW:
                s = s + 1
            else:
                targets = spec.subset_members().get(sk.var, (sk.var,))
                rs = [r for r, lab in found if lab in targets]
                if not rs:
                    raise OperatorError(f"AFTER MATCH SKIP TO {sk.var}: no row bound")
                r = rs[0] if sk.kind == pm.SkipKind.TO_FIRST else rs[-1]
                if r == s:
                    raise OperatorError(f"AFTER MATCH SKIP TO {sk.var}: first row of the match")
                s = r
    return out
