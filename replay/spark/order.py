"""Gathering tagged task results into the query's result table (on the driver).

The final order, per execution mode (the tags are described in :mod:`.drive`):

* **interval-parallel** (and the one-task fallback): tasks hold consecutive intervals, so the
  results in (task, emission) order are the local replay's results in the local order. One
  correction: at the end of an interval the pattern operator reports what the end resolves
  partition by partition in order of the keys' *first appearance since the operator started*,
  which a task (that started later) cannot know; those blocks (phase 1) are re-ordered by the
  keys' global first appearance, gathered from every task's key report.
* **partition-parallel, exact** (pattern queries showing ``match_id``): sorted by
  (interval, phase, global position of the resolving event or of the key's first appearance,
  task, emission) - the order in which the local replay emits them.
* **partition-parallel** (everything else): sorted by the operator's documented order
  (:attr:`~replaydb.operators.traits.Traits.sort_columns`, then every other sortable
  column; only the integer sort columns when they order the results totally,
  :attr:`~replaydb.operators.traits.Traits.sort_complete`, with nulls last) - equal to
  the local result after sorting both the same way. Pattern queries run this way only when
  ``match_id`` is not shown; their ``match_number`` is already final (all matches of a key come
  from one task, numbered in the local order).

Then (interval-parallel and exact runs) the order-dependent pattern columns are renumbered in the
final order (``match_id``: 1, 2, ...
per match; ``match_number`` and measures that are exactly ``MATCH_NUMBER()``: 1, 2, ... per
partition key), the tags are dropped and the SQL select list is applied.

Complexity: O(R log R) for R result rows (one lexsort; over int64 tags or integer columns,
except for the sorted partition order of operators whose sort columns are not complete), O(K)
per key report; applying an order that is already the identity copies nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.operators.traits import PatternNumbering, Traits
from replaydb.replay.spark.adapters import sortable
from replaydb.replay.spark.drive import TAGS, integer_sort_order
from replaydb.replay.spark.keys import key_codes


def _col(t: pa.Table, name: str) -> np.ndarray:
    return t.column(name).to_numpy()


def interval_order(rows: pa.Table, keys_tables: list[pa.Table], tr: Traits) -> np.ndarray:
    """Row order for interval-parallel results (module docstring)."""
    n = rows.num_rows
    task = _task_of(rows)
    k = _col(rows, "__k")
    ph = _col(rows, "__ph")
    i = _col(rows, "__i")
    fr = np.zeros(n, np.int64)
    fl = np.zeros(n, np.int64)
    keys = tr.numbering.keys if tr.numbering is not None else ()
    end = np.flatnonzero(ph == 1)
    keys_tables = [t for t in keys_tables if t.num_rows]
    if keys and len(end) and keys_tables:
        ends = rows.take(pa.array(end)).select(list(keys))
        kt = pa.concat_tables([t.select([*keys, "__r", "__l"]) for t in keys_tables],
                              promote_options="permissive")
        codes_end, codes_k = key_codes([ends, kt.select(list(keys))], keys)
        # global first appearance = lexicographic minimum of (task, position) per key
        n_codes = int(max(codes_end.max(initial=-1), codes_k.max(initial=-1))) + 1
        r_k, l_k = _col(kt, "__r"), _col(kt, "__l")
        o = np.lexsort((l_k, r_k, codes_k))
        firsts = np.full(n_codes, -1, np.int64)
        ck = codes_k[o]
        head = np.ones(len(ck), bool)
        head[1:] = ck[1:] != ck[:-1]
        firsts[ck[head]] = o[head]
        at = firsts[codes_end]
        fr[end] = r_k[at]
        fl[end] = l_k[at]
    return np.lexsort((i, fl, fr, ph, k, task))


def exact_order(rows: pa.Table) -> np.ndarray:
    """Row order for exact partition-parallel results (module docstring)."""
    return np.lexsort((_col(rows, "__i"), _task_of(rows), _col(rows, "__l"),
                       _col(rows, "__r"), _col(rows, "__ph"), _col(rows, "__k")))


def _task_of(rows: pa.Table) -> np.ndarray:
    return _col(rows, "__task") if "__task" in rows.column_names else np.zeros(rows.num_rows,
                                                                              np.int64)


def sorted_order(rows: pa.Table, tr: Traits, runs: bool = False) -> np.ndarray:
    """Row order by the operator's documented columns, then every other sortable column.

    With :attr:`~replaydb.operators.traits.Traits.sort_complete` only the (integer) sort
    columns count; ``runs``: the rows are sorted runs by them, one per task, in task order, so a
    stable sort by the first two (the emitting event: results tied on it come from one task)
    merges them."""
    if tr.sort_complete and rows.num_rows:
        if runs and len(np.unique(_task_of(rows))) == 1:
            return np.arange(rows.num_rows)  # one sorted run
        return integer_sort_order(rows, tr.sort_columns[:2] if runs else tr.sort_columns)
    skip = {"match_id"} if tr.numbering is not None else set()
    names = [c for c in rows.column_names if c not in TAGS and c != "__task" and c not in skip]
    first = [c for c in tr.sort_columns if c in names]
    rest = [c for c in names if c not in first]
    cols = [c for c in first + rest if sortable(rows.schema.field(c))]
    if not cols or rows.num_rows == 0:
        return np.arange(rows.num_rows)
    idx = rows.select(cols).append_column("__pos", pa.array(np.arange(rows.num_rows)))
    srt = idx.sort_by([(c, "ascending") for c in cols] + [("__pos", "ascending")])
    return srt.column("__pos").to_numpy()


def renumber(rows: pa.Table, nb: PatternNumbering) -> pa.Table:
    """Renumber ``match_id`` and MATCH_NUMBER columns in the rows' (final) order.

    A match is identified by (task, its task-local ``match_id``) when that column exists, else by
    (task, key, task-local MATCH_NUMBER); its rows are adjacent in the final order. A row whose
    identifying column is NULL (an unmatched row of WITH UNMATCHED ROWS) is in no match: it
    keeps NULLs and takes no number.
    """
    n = rows.num_rows
    if n == 0 or (nb.id_column is None and not nb.number_columns):
        return rows
    task = _task_of(rows)
    (kc,) = key_codes([rows], nb.keys)
    ident = rows.column(nb.id_column if nb.id_column is not None else nb.number_columns[0])
    valid = ~np.asarray(ident.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    local = pc.fill_null(ident, 0).to_numpy().astype(np.int64)
    start = np.ones(n, bool)
    start[1:] = (local[1:] != local[:-1]) | (task[1:] != task[:-1]) | ~valid[:-1]
    if nb.id_column is None:
        start[1:] |= kc[1:] != kc[:-1]
    start &= valid
    mask = None if valid.all() else ~valid
    out = rows
    if nb.id_column is not None:
        ids = np.cumsum(start).astype(np.int64)
        out = _replace(out, nb.id_column, ids, mask)
    if nb.number_columns:
        order = np.argsort(kc, kind="stable")
        s = start[order].astype(np.int64)
        cum = np.cumsum(s)
        ko = kc[order]
        head = np.ones(n, bool)
        head[1:] = ko[1:] != ko[:-1]
        base = np.maximum.accumulate(np.where(head, cum - s, 0))
        num = np.empty(n, np.int64)
        num[order] = cum - base
        for c in nb.number_columns:
            out = _replace(out, c, num, mask)
    return out


def _replace(t: pa.Table, name: str, values: np.ndarray,
             mask: np.ndarray | None = None) -> pa.Table:
    i = t.schema.get_field_index(name)
    f = t.schema.field(i)
    return t.set_column(i, f, pa.array(values, pa.int64(), mask=mask).cast(f.type))


def finish(rows: pa.Table, order: np.ndarray, tr: Traits, select: Any | None,
           renumbered: bool = True) -> pa.Table:
    """Apply ``order``, renumber (unless the order is not the local one: then the numbers are
    the tasks' own, complete per key), drop tags, apply the select list (``select(table)``)."""
    identity = len(order) == 0 or bool(np.all(order == np.arange(len(order))))
    renumbering = tr.numbering is not None and renumbered
    drop = [c for c in rows.column_names if c in TAGS or c == "__task"]
    if not renumbering:  # the tags are spent: not copied by the take
        rows = rows.drop_columns(drop)
    out = rows if identity else rows.take(pa.array(order, pa.int64()))
    if renumbering:
        out = renumber(out, tr.numbering)
        out = out.drop_columns(drop)
    if select is not None:
        out = select(out)
    return out.combine_chunks() if out.num_rows else out
