"""Output rows of the pattern operator: the result schema, the numbering of completed matches,
the rows built for them (ONE ROW PER MATCH, ALL ROWS PER MATCH, measures), and a SQL select list
applied last.

:class:`MatchOutput` is a part of :class:`~replaydb.operators.pattern.operator.PatternOperator`
(its base class), kept apart because building rows is independent of matching: completed
matches arrive as :class:`~replaydb.operators.pattern.measures.MatchSet` index arrays into the
event buffer (:meth:`MatchOutput._emit_matches`), wait, and are turned into Arrow batches in
groups (:meth:`MatchOutput._build_pending`). The waiting rules are in the operator's module
docstring.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.errors import QueryError, StateCapExceeded
from replaydb.operators.expr import (
    Binary,
    Call,
    Column,
    ColumnsEnv,
    Expr,
    Literal,
    Unary,
    compile_expr,
    to_text,
)
from replaydb.operators.pattern import frames
from replaydb.operators.pattern.buffer import arrow_to_numpy
from replaydb.operators.pattern.measure_eval import Evaluator, infer_type
from replaydb.operators.pattern.measures import UNMATCHED, Frame, MatchSet

EMIT_MATCHES = 4096
"""Waiting matches that trigger building their output rows (see the module docstring)."""
EMIT_SPAN = 1 << 17
"""Buffered events that waiting matches may pin before their output rows are built."""
BUILD_ALONE_EVENTS = 1 << 16
"""Matched events from which a waiting match set gets a batch of its own rather than being
copied into a concatenation with its neighbours (see ``_build_pending``)."""

_NO_EVENT = np.iinfo(np.int64).max

META_ONE = ("t", "match_id", "match_number", "first_t", "first_seq", "last_t", "last_seq")
META_ALL = ("match_id", "match_number")
META_TIMES = ("t", "first_t", "last_t")
"""The columns of :data:`META_ONE` that hold stream times."""
_ALWAYS = ("t", "match_id", "match_number")
"""ONE ROW PER MATCH metadata an empty match has (``t``: the row it was found at)."""

_NO_EVENT = np.iinfo(np.int64).max


class MatchOutput:
    """The output half of the pattern operator (see the module docstring); it reads the
    operator's compiled pattern, buffer, partitions and measures."""

    def _make_schema(self) -> pa.Schema:
        sch = self.rows_schema
        fields: list[pa.Field] = []
        measure_names = {name for name, _ in self._measures}
        meta = META_ALL if self.all_rows else META_ONE
        self._shadowed = {n for n in meta if n in measure_names}
        fields += [pa.field(n, pa.int64()) for n in meta if n not in self._shadowed]
        if self.all_rows:
            fields += list(sch)
        else:
            fields += [pa.field(k, sch.field(k).type) for k in self.cp.partition_by]
        for name, low in self._measures:
            fields.append(pa.field(name, infer_type(low, self._aug_schema)))
        names = [f.name for f in fields]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise QueryError(f"output column name(s) {', '.join(dup)} appear twice",
                             hint="give measures distinct names with AS")
        return pa.schema(fields)

    def _compile_select(self, items: Any) -> tuple[pa.Schema, list[Any]] | None:
        if items is None or (len(items) == 1 and items[0].star):
            return None
        base = self._base_schema
        lookup = {n.lower(): n for n in base.names}
        fields: list[pa.Field] = []
        plan: list[Any] = []
        for it in items:
            if it.star:
                for f in base:
                    fields.append(f)
                    plan.append(("col", f.name))
                continue
            e = _resolve_select(it.expr, lookup)
            if isinstance(e, Column):
                name = it.alias or e.name
                fields.append(pa.field(name, base.field(e.name).type))
                plan.append(("col", e.name))
            else:
                name = it.alias or to_text(it.expr)
                fields.append(pa.field(name, _select_type(e, base)))
                plan.append(("expr", compile_expr(e)))
        return pa.schema(fields), plan

    def apply_select(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return self._apply_select(batch) if self._select else batch

    def _finalize_all_runs(self, ms: MatchSet) -> MatchSet:
        """Remove duplicate labelled matches, order ties, set partitions and numbers."""
        if ms.n == 0:
            return ms
        buf = self._buffer
        ends = ms.ev[ms.off[1:] - 1]
        need_sort = ms.n > 1 and bool(np.any(ends[1:] == ends[:-1]))
        if need_sort or not self.cp.unambiguous:
            keys = []
            evl = ms.ev.tolist()
            varl = ms.var.tolist()
            offl = ms.off.tolist()
            for m in range(ms.n):
                a, b = offl[m], offl[m + 1]
                keys.append((evl[b - 1], tuple(evl[a:b]), tuple(varl[a:b]), m))
            keys.sort()
            order = []
            seen = set()
            for k in keys:
                sig = k[:3]
                if sig in seen:
                    continue
                seen.add(sig)
                order.append(k[3])
            ms = ms.take(np.array(order, dtype=np.int64))
        ms.pid = buf.at("pid", ms.ev[ms.off[:-1]])
        ms.number = self._number(ms.pid)
        return ms

    def _number(self, pid: np.ndarray) -> np.ndarray:
        """MATCH_NUMBER per partition, continuing the counts of earlier batches."""
        nums = self._numbers
        if not self.cp.partition_by:
            start = nums.get(0, 0)
            nums[0] = start + len(pid)
            return np.arange(start + 1, start + len(pid) + 1, dtype=np.int64)
        uniq, inv = np.unique(pid, return_inverse=True)
        order = np.argsort(inv, kind="stable")
        counts = np.bincount(inv, minlength=len(uniq))
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        rank = np.empty(len(pid), dtype=np.int64)
        rank[order] = np.arange(len(pid)) - np.repeat(starts, counts)
        base = np.array([nums.get(int(p), 0) for p in uniq.tolist()], dtype=np.int64)
        for p, c, b in zip(uniq.tolist(), counts.tolist(), base.tolist()):
            nums[int(p)] = b + c
        return base[inv] + rank + 1

    def _emit_matches(self, ms: MatchSet) -> None:
        """Number completed matches and let them wait for :meth:`_build_pending`."""
        if ms.n == 0:
            return
        if not self.cp.sql:
            ms = self._finalize_all_runs(ms)
        if self.state_cap is not None and ms.n > self.state_cap:
            raise StateCapExceeded(self.name, "matches completed by one batch", ms.n,
                                   self.state_cap, "state_cap")
        # unmatched rows get no match id (a NULL)
        is_match = ms.kind != UNMATCHED if len(ms.kind) else np.ones(ms.n, dtype=np.bool_)
        ms.match_id = self._next_match_id + np.cumsum(is_match) - 1
        self._next_match_id += int(is_match.sum())
        self._pending.append(ms)
        self._pending_n += ms.n
        if len(ms.ev):
            self._pending_lo = min(self._pending_lo, int(ms.ev.min()))
        if len(ms.start):  # empty matches and unmatched rows output the row they were found at
            self._pending_lo = min(self._pending_lo, int(ms.start.min()))
        if self._uses_next:
            # NEXT reads the events after a match: build now, with what has been seen, so the
            # rows do not depend on when results are asked for
            self._build_pending()

    def _pending_min(self, keep: int) -> int:
        """``keep`` lowered to the first buffered event a waiting match reads."""
        return min(keep, self._pending_lo) if self._pending else keep

    def _maybe_build(self) -> None:
        if self._pending_n >= EMIT_MATCHES or (
                self._pending and self._buffer.end - self._pending_lo > EMIT_SPAN):
            self._build_pending()

    def _build_pending(self) -> None:
        """Output rows of every waiting match, in order (O(matched rows)).

        Waiting match sets are built in groups (:func:`_build_groups`): small ones together,
        one batch per group, a large one on its own, so its arrays are not copied into a
        concatenation first. Replay by intervals ends each interval with a match set of its
        own, and full replay does not; without this, an interval plan copied every large
        set once more than full replay did."""
        if not self._pending:
            return
        parts, self._pending, self._pending_n = self._pending, [], 0
        self._pending_lo = _NO_EVENT
        for group in _build_groups(parts, BUILD_ALONE_EVENTS):
            self._build_rows(group[0] if len(group) == 1 else _concat_matches(group))

    def _build_rows(self, ms: MatchSet) -> None:
        buf = self._buffer
        arrays: list[pa.Array] = []
        unmatched = None
        if self.all_rows:
            rows = frames.all_rows(ms)
            frame, fm = rows.frame, rows.frame.mid
            unmatched = rows.unmatched if rows.unmatched.any() else None
            meta = {"match_id": ms.match_id[fm], "match_number": ms.number[fm]}
            arrays += [pa.array(meta[n], mask=unmatched) for n in META_ALL
                       if n not in self._shadowed]
            names = self.rows_schema.names
            got = buf.gather(rows.ev, names)
            arrays += [got[n] for n in names]
        else:
            frame = Frame.one_row(ms)
            first, last, has = frames.one_row_ends(ms)
            empty = None if has.all() else ~has
            lt = buf.at("t", last)
            meta = {"t": lt, "match_id": ms.match_id, "match_number": ms.number,
                    "first_t": buf.at("t", first), "first_seq": buf.at("seq", first),
                    "last_t": lt, "last_seq": buf.at("seq", last)}
            arrays += [pa.array(meta[n], mask=empty if n not in _ALWAYS else None)
                       for n in META_ONE if n not in self._shadowed]
            keyvals = self._pmap.key_values(ms.pid)
            for k, vals in zip(self.cp.partition_by, keyvals):
                arrays.append(pa.array(vals, type=self.rows_schema.field(k).type))
        if self._measures:
            ev = Evaluator(frame, buf, self.cp.var_names, self._aug_schema)
            for _, low in self._measures:
                value = ev.evaluate(low)
                if unmatched is not None:  # an unmatched row's measures are NULL
                    value = pc.if_else(pa.array(unmatched), pa.scalar(None, value.type), value)
                arrays.append(value)
        base = self._base_schema
        cast = [a if a.type == f.type else a.cast(f.type, safe=False) for a, f in zip(arrays, base)]
        out = pa.RecordBatch.from_arrays(cast, schema=base)
        if self.all_rows and len(ms.shown):
            out = out.filter(pa.array(rows.shown))  # rows inside {- -} are not output
        if self._select:
            out = self._apply_select(out)
        self._emit(out)

    def _apply_select(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        schema, plan = self._select  # type: ignore[misc]
        arrays = []
        env = None
        for (kind, what), f in zip(plan, schema):
            if kind == "col":
                arrays.append(batch.column(what))
                continue
            if env is None:
                env = ColumnsEnv({n: arrow_to_numpy(batch.column(n)) for n in batch.schema.names})
            r = np.asarray(what(env))
            if r.ndim == 0:
                r = np.full(batch.num_rows, r.item())
            a = pa.array(r.tolist() if r.dtype == object else r, from_pandas=True)
            arrays.append(a.cast(f.type, safe=False) if a.type != f.type else a)
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _build_groups(parts: list[MatchSet], large: int) -> list[list[MatchSet]]:
    """``parts`` cut into consecutive groups, in order: a set of at least ``large`` matched
    events alone, and the sets between two such (or an end) together. Output rows keep their
    order: a group's rows are those of its sets, one after the other. O(len(parts))."""
    groups: list[list[MatchSet]] = []
    small: list[MatchSet] = []
    for ms in parts:
        if len(ms.ev) >= large:
            if small:
                groups.append(small)
                small = []
            groups.append([ms])
        else:
            small.append(ms)
    if small:
        groups.append(small)
    return groups


def _concat_matches(parts: list[MatchSet]) -> MatchSet:
    """One :class:`MatchSet` of several, in order (their events index the same buffer)."""
    offs = [parts[0].off]
    base = int(parts[0].off[-1])
    for ms in parts[1:]:
        offs.append(ms.off[1:] + base)
        base += int(ms.off[-1])

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(ms, name) for ms in parts])

    shown = np.concatenate([ms.shown_rows() for ms in parts]) \
        if any(len(ms.shown) for ms in parts) else np.zeros(0, dtype=np.bool_)
    special = any(len(ms.kind) for ms in parts)
    kind = cat("kind") if special else np.zeros(0, dtype=np.int8)
    start = cat("start") if special else np.zeros(0, dtype=np.int64)
    return MatchSet(cat("ev"), cat("var"), np.concatenate(offs), cat("pid"), cat("number"),
                    cat("match_id"), shown, kind, start)


def _resolve_select(e: Expr, lookup: dict[str, str]) -> Expr:
    """Map select-list column references to output column names (case-insensitively)."""
    if isinstance(e, Column):
        cands = [f"{e.qualifier}.{e.name}" if e.qualifier else e.name, e.name]
        for c in cands:
            if c.lower() in lookup:
                return Column(lookup[c.lower()], pos=e.pos)
        raise QueryError(f"unknown column {to_text(e)!r} in the select list"
                         + (f" (at position {e.pos})" if e.pos is not None else ""),
                         hint=f"output columns are: {', '.join(lookup.values())}")
    if isinstance(e, Literal):
        return e
    if isinstance(e, Unary):
        return Unary(e.op, _resolve_select(e.operand, lookup), pos=e.pos)
    if isinstance(e, Binary):
        return Binary(e.op, _resolve_select(e.left, lookup), _resolve_select(e.right, lookup),
                      pos=e.pos)
    if isinstance(e, Call):
        return Call(e.name, tuple(_resolve_select(a, lookup) for a in e.args), pos=e.pos)
    from dataclasses import fields, replace

    kw = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            kw[f.name] = _resolve_select(v, lookup)
        elif isinstance(v, tuple) and v and isinstance(v[0], Expr):
            kw[f.name] = tuple(_resolve_select(x, lookup) for x in v)
    return replace(e, **kw)


def _select_type(e: Expr, schema: pa.Schema) -> pa.DataType:
    if isinstance(e, Column):
        return schema.field(e.name).type
    if isinstance(e, Binary) and e.op in ("+", "-", "*", "%"):
        lt, rt = _select_type(e.left, schema), _select_type(e.right, schema)
        if pa.types.is_integer(lt) and pa.types.is_integer(rt):
            return pa.int64()
        return pa.float64()
    from replaydb.operators.pattern.measure_eval import infer_type as _it

    return _it(e, schema)
