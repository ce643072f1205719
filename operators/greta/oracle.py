"""Brute-force GRETA oracle: enumerate every trend, check it against the definitions, aggregate.

This is the reference semantics the operator is tested against; it never builds a GRETA graph and
does not use the template's transitions. For every window and every group it enumerates all
sequences of events with strictly increasing timestamps (depth-first, pruned by the equivalence
and edge predicates), checks each against the pattern with a memoized recursive matcher over the
pattern tree (Definition 1 of the paper, including the three negation cases as the paper *states*
them - see :mod:`replaydb.operators.greta`), and aggregates the matches.

Semantics checked here (see the operator's docstring for the rationale):

* a trend lies in one window ``[k*slide, k*slide + within)`` and all its events agree on the
  GROUP-BY attributes and on each equivalence attribute that applies to them;
* local predicates hold for each event of its variable; an edge predicate ``E -> NEXT(F)`` holds
  for every adjacent pair (e, f) of the trend with e of ``E`` and f of ``F``;
* ``SEQ(.., Pi, NOT N, Pj, ..)``: no trend of ``N`` starts after the last event matched by ``Pi``
  and ends before the first event matched by ``Pj``; ``SEQ(NOT N, ..)``: no trend of ``N`` lies in
  ``[window start, first event of the trend)``; ``SEQ(.., NOT N)``: none lies in
  ``(last event of the trend, window end)``. A trend of ``N`` counts only if it agrees with the
  constrained trend on the partition attributes both share; its own nested negations apply to it
  recursively.

Exponential, by design: use it on small inputs only (``max_trend_events`` guards the size).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.operators.base import column_np
from replaydb.operators.expr import Column, compile_predicate
from replaydb.operators.greta.config import GretaConfig, Pattern, PNot, PPlus, PSeq, PType
from replaydb.operators.greta.plan import CompiledPlan, compile_plan


class _RowEnv:
    def __init__(self, cols: dict[str, np.ndarray], prev: int, nxt: int) -> None:
        self.cols, self.prev, self.nxt = cols, prev, nxt

    def column(self, ref: Column) -> Any:
        row = self.nxt if (ref.index is not None and ref.index[0] == "next") else self.prev
        return self.cols[ref.name][row:row + 1]

    def call(self, node: Any, args: list[Any]) -> Any:  # pragma: no cover - rejected by bind
        raise ValueError(node.name)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return bool(a == b)


class GretaOracle:
    """Brute-force evaluation of a GRETA configuration over a (small) table."""

    def __init__(self, cfg: GretaConfig, table: pa.Table, *, max_events: int = 40) -> None:
        self.cfg = cfg
        self.plan: CompiledPlan = compile_plan(cfg, table.schema)
        self.table = table
        n = table.num_rows
        self.n = n
        self.cols = {name: column_np(table, name) for name in table.schema.names}
        self.py = {name: table.column(name).to_pylist() for name in table.schema.names}
        self.t = np.asarray(self.py["t"], dtype=np.int64)
        self.seq = np.asarray(self.py["seq"], dtype=np.int64) if "seq" in self.py \
            else np.arange(n, dtype=np.int64)
        self.types = self.py[cfg.type_column]
        self.max_events = max_events
        alias_of_type: dict[str, tuple[int, str]] = {}
        for g in self.plan.graphs:
            for a, ty in zip(g.states, g.types):
                alias_of_type[ty] = (g.gid, a)
        self.alias_of_type = alias_of_type
        # local predicate per alias, evaluated per event
        self.state: list[str | None] = [None] * n
        for i in range(n):
            ty = self.types[i]
            if ty in alias_of_type:
                gid, a = alias_of_type[ty]
                g = self.plan.graphs[gid]
                pred = g.local[g.states.index(a)]
                if pred is None or bool(compile_predicate(pred)(_RowEnv(self.cols, i, i))[0]):
                    self.state[i] = a
        self.edge = {k: compile_predicate(v) for k, v in self.plan.edge_preds.items()}
        self.graph_of_alias = {a: gid for gid, a in alias_of_type.values()}
        self.neg_by_node: dict[int, int] = {}
        self._exists_memo: dict[tuple, bool] = {}

    # ------------------------------------------------------------------ predicates
    def _attrs_for(self, alias: str) -> list[str]:
        """Equivalence and grouping attributes that apply to events of ``alias``."""
        out = list(self.plan.group_by)
        for attr, who in self.plan.equiv.items():
            if attr not in out and (who is None or alias in who):
                out.append(attr)
        return out

    def _edge_ok(self, i: int, j: int) -> bool:
        f = self.edge.get((self.state[i], self.state[j]))  # type: ignore[arg-type]
        return True if f is None else bool(np.asarray(f(_RowEnv(self.cols, i, j)))[0])

    def _agree(self, seq: list[int], extra: dict[str, Any]) -> bool:
        vals = dict(extra)
        for i in seq:
            for attr in self._attrs_for(self.state[i]):  # type: ignore[arg-type]
                v = self.py[attr][i]
                if attr in vals:
                    if not _same(vals[attr], v):
                        return False
                else:
                    vals[attr] = v
        return True

    # ------------------------------------------------------------------ trends
    def _trends(self, cands: list[int], constraint: dict[str, Any]) -> list[list[int]]:
        """All sequences over ``cands`` (time-sorted) with strictly increasing times that satisfy
        the equivalence constraints and the edge predicates of adjacent events."""
        out: list[list[int]] = []
        cur: list[int] = []

        def dfs(start: int) -> None:
            for k in range(start, len(cands)):
                i = cands[k]
                if cur and self.t[i] <= self.t[cur[-1]]:
                    continue
                if cur and not self._edge_ok(cur[-1], i):
                    continue
                cur.append(i)
                if self._agree(cur, constraint):
                    out.append(list(cur))
                    dfs(k + 1)
                cur.pop()

        dfs(0)
        return out

    def _match(self, node: Pattern, seq: list[int], lo_incl: int, hi_excl: int,
               memo: dict) -> bool:
        """Does ``seq`` match ``node`` (negations checked inside window bounds)?"""
        return self._m(node, seq, 0, len(seq), lo_incl, hi_excl, memo, top=True)

    def _m(self, node: Pattern, seq: list[int], i: int, j: int, ws: int, we: int, memo: dict,
           top: bool = False) -> bool:
        key = (id(node), i, j)
        if key in memo:
            return memo[key]
        r = False
        if isinstance(node, PType):
            r = j == i + 1 and self.state[seq[i]] == node.alias
        elif isinstance(node, PPlus):
            r = self._m(node.inner, seq, i, j, ws, we, memo)
            k = i + 1
            while not r and k < j:
                r = self._m(node.inner, seq, i, k, ws, we, memo) and \
                    self._m(node, seq, k, j, ws, we, memo)
                k += 1
        elif isinstance(node, PSeq):
            r = self._seq(node.items, 0, seq, i, j, ws, we, memo, top)
        memo[key] = r
        return r

    def _seq(self, items: tuple, ii: int, seq: list[int], i: int, j: int, ws: int, we: int,
             memo: dict, top: bool) -> bool:
        if ii == len(items):
            return i == j
        item = items[ii]
        if isinstance(item, PNot):
            if ii != len(items) - 1 and i >= j:
                return False
            if ii == 0:  # case 3: [window start, first event)
                lo, hi = ws, int(self.t[seq[i]])
            elif ii == len(items) - 1:  # case 2: (last event, window end)
                lo, hi = int(self.t[seq[i - 1]]) + 1, we
            else:  # case 1: (end of Pi, start of Pj)
                lo, hi = int(self.t[seq[i - 1]]) + 1, int(self.t[seq[i]])
            if self._exists(item, seq, lo, hi):
                return False
            return self._seq(items, ii + 1, seq, i, j, ws, we, memo, top)
        for k in range(i + 1, j + 1):
            if self._m(item, seq, i, k, ws, we, memo) and \
                    self._seq(items, ii + 1, seq, k, j, ws, we, memo, top):
                return True
        return False

    def _exists(self, neg: PNot, parent_seq: list[int], lo: int, hi: int) -> bool:
        """Is there a trend of ``neg.inner`` with all events in [lo, hi) that agrees with the
        parent trend on the shared partition attributes?"""
        inner = neg.inner
        leaves = _leaves(inner)
        gid = self.graph_of_alias[leaves[0]]
        parent_gid = self.graph_of_alias[self.state[parent_seq[0]]]  # type: ignore[index]
        parent_attrs = self.plan.graphs[parent_gid].part_attrs
        child_attrs = self.plan.graphs[gid].part_attrs
        common = [a for a in parent_attrs if a in child_attrs]
        constraint = {a: self.py[a][parent_seq[0]] for a in common}
        key = (id(neg), lo, hi, tuple((a, repr(v)) for a, v in constraint.items()))
        if key in self._exists_memo:
            return self._exists_memo[key]
        aliases = set(leaves)
        cands = [i for i in range(self.n) if self.state[i] in aliases and lo <= self.t[i] < hi]
        found = False
        for tr in self._trends(cands, constraint):
            if self._m_top(inner, tr):
                found = True
                break
        self._exists_memo[key] = found
        return found

    def _m_top(self, node: Pattern, seq: list[int]) -> bool:
        return self._m(node, seq, 0, len(seq), 0, 0, {})

    # ------------------------------------------------------------------ main
    def windows(self) -> list[int]:
        if self.n == 0:
            return []
        d, s = self.plan.within, self.plan.slide
        lo = min((int(t) - d) // s + 1 for t in self.t)
        hi = max(int(t) // s for t in self.t)
        return list(range(lo, hi + 1))

    def run(self) -> list[dict[str, Any]]:
        """One dict per (window, group) with at least one trend, ordered by window then group."""
        plan = self.plan
        d, s = plan.within, plan.slide
        main_pattern = self.plan.split.pattern
        main_aliases = set(plan.graphs[0].states)
        rows: list[dict[str, Any]] = []
        for w in self.windows():
            ws, we = w * s, w * s + d
            cands = [i for i in range(self.n)
                     if self.state[i] in main_aliases and ws <= self.t[i] < we]
            if len(cands) > self.max_events:
                raise ValueError(f"oracle: {len(cands)} events in a window (max "
                                 f"{self.max_events})")
            groups: dict[tuple, dict[str, Any]] = {}
            for tr in self._trends(cands, {}):
                if not self._match(main_pattern, tr, ws, we, {}):
                    continue
                gkey = tuple(repr(self.py[a][tr[0]]) for a in plan.group_by)
                acc = groups.get(gkey)
                if acc is None:
                    acc = {"_vals": tuple(self.py[a][tr[0]] for a in plan.group_by),
                           "count": 0, "counte": {}, "sum": {}, "min": {}, "max": {},
                           "last_seq": -1}
                    groups[gkey] = acc
                self._aggregate(acc, tr)
            for gkey in sorted(groups, key=lambda k: tuple(str(x) for x in k)):
                acc = groups[gkey]
                row: dict[str, Any] = {"window_start": ws, "window_end": we}
                for a, v in zip(plan.group_by, acc["_vals"]):
                    row[a] = v
                for out in plan.outputs:
                    row[out.name] = self._value(out, acc)
                row["last_seq"] = acc["last_seq"]
                rows.append(row)
        return rows

    def _aggregate(self, acc: dict[str, Any], tr: list[int]) -> None:
        acc["count"] += 1
        acc["last_seq"] = max(acc["last_seq"], int(self.seq[tr[-1]]))
        aliases = {self._alias(str(o.item.var)) for o in self.plan.outputs
                   if o.item.kind != "count_star"}
        for alias in aliases:
            occ = [i for i in tr if self.state[i] == alias]
            acc["counte"][alias] = acc["counte"].get(alias, 0) + len(occ)
        pairs = {(self._alias(str(o.item.var)), o.item.attr, o.item.kind)
                 for o in self.plan.outputs if o.item.kind in ("sum", "avg", "min", "max")}
        for alias, attr, kind in pairs:
            vals = [self.py[attr][i] for i in tr if self.state[i] == alias]
            k = (alias, attr)
            if kind in ("sum", "avg"):
                acc["sum"].setdefault(("tmp", k, kind), 0)
                acc["sum"][("tmp", k, kind)] += sum(vals)
            else:
                fn = min if kind == "min" else max
                cur = acc[kind].get(k)
                v = fn(vals)
                acc[kind][k] = v if cur is None else fn(cur, v)

    def _alias(self, var: str) -> str:
        g = self.plan.graphs[0]
        if var in g.states:
            return var
        return g.states[g.types.index(var)]

    def _value(self, out: Any, acc: dict[str, Any]) -> Any:
        it = out.item
        if it.kind == "count_star":
            return acc["count"]
        alias = self._alias(str(it.var))
        if it.kind == "count":
            return acc["counte"][alias]
        k = (alias, it.attr)
        if it.kind == "sum":
            return acc["sum"][("tmp", k, "sum")]
        if it.kind == "avg":
            s, c = acc["sum"][("tmp", k, "avg")], acc["counte"][alias]
            if isinstance(s, int):
                return float(Fraction(s, c))
            return s / c
        return acc[it.kind][k]


def _leaves(p: Pattern) -> list[str]:
    if isinstance(p, PType):
        return [p.alias]
    if isinstance(p, PPlus | PNot):
        return _leaves(p.inner)
    out: list[str] = []
    for it in p.items:
        out.extend(_leaves(it))
    return out


def oracle_rows(cfg: GretaConfig, table: pa.Table, **kw: Any) -> list[dict[str, Any]]:
    """Convenience: :meth:`GretaOracle.run` on ``table``."""
    return GretaOracle(cfg, table, **kw).run()

