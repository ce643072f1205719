"""Output frames of MATCH_RECOGNIZE matches, empty matches and unmatched rows.

A :class:`~replaydb.operators.pattern.measures.Frame` says, per output row, which match it
belongs to and which of the match's flat rows is *current* (the row RUNNING measures are
evaluated at). Ordinary matches give one output row per match (ONE ROW PER MATCH, current = the
last row) or one per matched row (ALL ROWS PER MATCH). Two kinds of entries have no rows:

* an **empty match** (a pattern that can match zero rows) gives one output row whose current
  row lies before its (empty) range, so every column reference, navigation and CLASSIFIER()
  is NULL, aggregates run over no rows (COUNT 0) and MATCH_NUMBER() is its number; the input
  columns of an ALL ROWS output row come from the row the empty match was found at;
* an **unmatched row** (ALL ROWS PER MATCH WITH UNMATCHED ROWS) gives one output row with that
  row's columns and NULL measures, match id and number.

Complexity: O(output rows), vectorized.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from replaydb.operators.pattern.measures import UNMATCHED, Frame, MatchSet


@dataclass
class Rows:
    """An ALL ROWS PER MATCH frame with, per output row, its input event (``ev``), whether it
    is output (``shown``: not inside an exclusion) and whether it is an unmatched row."""

    frame: Frame
    ev: np.ndarray
    shown: np.ndarray
    unmatched: np.ndarray


def _kinds(ms: MatchSet) -> np.ndarray:
    return ms.kind if len(ms.kind) == ms.n else np.zeros(ms.n, dtype=np.int8)


def all_rows(ms: MatchSet) -> Rows:
    """The ALL ROWS PER MATCH frame of ``ms`` (see the module docstring)."""
    lens = ms.lengths
    virtual = lens == 0
    counts = np.where(virtual, 1, lens)
    mid = np.repeat(np.arange(ms.n, dtype=np.int64), counts)
    out_off = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    within = np.arange(int(out_off[-1]), dtype=np.int64) - np.repeat(out_off[:-1], counts)
    virt_row = virtual[mid]
    cur = ms.off[:-1][mid] + within - virt_row  # a virtual row: just before its empty range
    if len(ms.ev):
        flat = np.clip(cur, 0, len(ms.ev) - 1)
        ev = ms.ev[flat]
        shown = np.where(virt_row, True, ms.shown_rows()[flat])
    else:
        ev = np.zeros(len(mid), dtype=np.int64)
        shown = np.ones(len(mid), dtype=np.bool_)
    if virt_row.any():  # an empty match or unmatched row: the row it was found at
        ev = np.where(virt_row, ms.start[mid], ev)
    unmatched = _kinds(ms)[mid] == UNMATCHED
    return Rows(Frame(ms, mid, cur), ev, shown, unmatched)


def one_row_ends(ms: MatchSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ONE ROW PER MATCH: each match's first and last event and whether it has rows; an empty
    match's events are the row it was found at (its ``t``), its first/last columns NULL."""
    has = ms.lengths > 0
    if not len(ms.ev):
        return ms.start.copy(), ms.start.copy(), has
    first = ms.ev[np.clip(ms.off[:-1], 0, len(ms.ev) - 1)]
    last = ms.ev[np.clip(ms.off[1:] - 1, 0, len(ms.ev) - 1)]
    if not has.all():
        first = np.where(has, first, ms.start)
        last = np.where(has, last, ms.start)
    return first, last, has
