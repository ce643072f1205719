"""Invariant checker of an LSM index version (``replaydb check``, seeded stress tests).

Checked, reading every run file of the pinned version:

* every live file has readable footer metadata that agrees with its name (ids, level, part) and
  with the Delta log (numRecords);
* each file is strictly sorted by (key, seq); its entry count, key min/max, row-group key
  index, key sample, seq/t ranges, first/last seq and seq histogram equal what its entries give;
* runs: disjoint age intervals; parts of a run in ascending (key, seq) order with the same
  tombstone; levels never decrease from newer to older runs; at most one run per level >= 1;
  a level >= 1 run holds at most the level's capacity; with ``policy=True`` also level 0 holds at
  most ``l0_max_runs`` runs (between a flush and its compaction it may hold more);
* live entries (after tombstones) have unique seqs;
* with ``expected`` = (keys, seqs, ts) of the primary data: every entry with an indexable key is
  present exactly once, with the right key and t, and nothing else is.

O(total entries) time and memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replaydb.errors import CorruptionError, ReplayDBError
from replaydb.indexes.entries import Entries, normalize_entries
from replaydb.indexes.kernels import is_sorted_by_key_seq, seq_histogram
from replaydb.indexes.levels import NO_CUTOFF, group_runs
from replaydb.indexes.rankcodes import check_codes
from replaydb.indexes.runfile import (
    RunFileMeta,
    load_run_meta,
    parse_run_file_name,
    read_whole_file,
)
from replaydb.indexes.sketch import sample_positions
from replaydb.indexes.sorting import order_by_seq

if TYPE_CHECKING:
    from replaydb.indexes.lsm import LSMIndex

_MAX_REPORT = 5


def _keys_list(values: Any) -> list[Any]:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.to_pylist()
    if isinstance(values, list):
        return values
    return np.asarray(values).tolist()


def _sorted_strict(ent: Entries) -> bool:
    if len(ent) <= 1:
        return True
    if not ent.is_string:
        return bool(is_sorted_by_key_seq(ent.key, ent.seq))
    a = ent.key.slice(0, len(ent) - 1)
    b = ent.key.slice(1)
    lt = np.asarray(pc.less(a, b))
    eq = np.asarray(pc.equal(a, b))
    return bool(np.all(lt | (eq & (ent.seq[:-1] < ent.seq[1:]))))


def _check_file(idx: LSMIndex, meta: RunFileMeta, ent: Entries) -> list[str]:
    p: list[str] = []
    name = meta.name
    n = len(ent)
    if n != meta.n:
        p.append(f"{name}: holds {n} entries, footer says {meta.n}")
        return p
    if not _sorted_strict(ent):
        p.append(f"{name}: entries not strictly sorted by (key, seq)")
    if n == 0:
        return p
    if meta.key_type != idx.key_type:
        p.append(f"{name}: key type {meta.key_type} in an index of {idx.key_type}")
    keys = ent.key
    starts = np.concatenate([[0], np.cumsum(meta.rg_rows)[:-1]]).astype(np.int64)
    ends = np.cumsum(meta.rg_rows) - 1
    if int(meta.rg_rows.sum()) != n:
        p.append(f"{name}: row groups hold {int(meta.rg_rows.sum())} rows, not {n}")
        return p
    if meta.key_type == "string":

        def at(pos: np.ndarray) -> list[Any]:
            return keys.take(pa.array(pos)).to_pylist()
    else:

        def at(pos: np.ndarray) -> list[Any]:
            return keys[pos].tolist()

    if at(starts) != _keys_list(meta.rg_min) or at(ends) != _keys_list(meta.rg_max):
        p.append(f"{name}: row-group key index does not match the entries (key min/max wrong)")
    if at(sample_positions(n, meta.sample_step)) != _keys_list(meta.samples):
        p.append(f"{name}: key sample does not match the entries")
    seq = ent.seq
    facts = {
        "seq_min": int(seq.min()),
        "seq_max": int(seq.max()),
        "t_min": int(ent.t.min()),
        "t_max": int(ent.t.max()),
        "first_seq": int(seq[0]),
        "last_seq": int(seq[-1]),
    }
    for k, v in facts.items():
        if getattr(meta, k) != v:
            p.append(f"{name}: {k} is {getattr(meta, k)} in the footer, {v} in the entries")
    h = meta.seq_hist
    if h.counts.size:
        again = seq_histogram(seq, h.lo, h.shift, h.counts.size)
        if not np.array_equal(again, h.counts):
            p.append(f"{name}: seq histogram does not match the entries")
    if meta.key_type != "string":
        codes = idx._files.rank_codes(idx.path, meta)
        if codes is not None:
            p += [f"{name}: {msg}" for msg in check_codes(codes, np.asarray(seq))]
    return p


def _last_key_seq(ent: Entries) -> tuple[Any, int]:
    k = ent.key[len(ent) - 1]
    return (k.as_py() if hasattr(k, "as_py") else k), int(ent.seq[-1])


def _first_key_seq(ent: Entries) -> tuple[Any, int]:
    k = ent.key[0]
    return (k.as_py() if hasattr(k, "as_py") else k), int(ent.seq[0])


def check_index(idx: LSMIndex, expected: tuple[Any, Any, Any] | None, *, policy: bool) -> list[str]:
    problems: list[str] = []
    metas: list[RunFileMeta] = []
    contents: dict[str, Entries] = {}
    for lf in idx._live:
        parsed = parse_run_file_name(lf.name)
        if parsed is None:
            problems.append(f"{lf.name}: not a run file name")
            continue
        try:
            meta = load_run_meta(idx.path, lf.name, lf.size)
        except (CorruptionError, OSError) as exc:
            problems.append(f"{lf.name}: {exc}")
            continue
        for k, v in parsed.items():
            if getattr(meta, k) != v:
                problems.append(
                    f"{lf.name}: {k} is {getattr(meta, k)} in the footer, {v} in the name"
                )
        if lf.num_records is not None and lf.num_records != meta.n:
            problems.append(f"{lf.name}: Delta log says {lf.num_records} records, footer {meta.n}")
        try:
            ent = read_whole_file(idx.path, meta)
        except Exception as exc:  # unreadable data pages
            problems.append(f"{lf.name}: cannot read entries: {exc}")
            continue
        contents[meta.name] = ent
        problems += _check_file(idx, meta, ent)
        metas.append(meta)
    runs = group_runs(metas)
    for newer, older in zip(runs, runs[1:]):
        if older.id_hi >= newer.id_lo:
            problems.append(
                f"runs [{older.id_lo},{older.id_hi}] and [{newer.id_lo},{newer.id_hi}] overlap in age"
            )
        if older.level < newer.level:
            problems.append(
                f"run [{older.id_lo},{older.id_hi}] on level {older.level} is older than run "
                f"[{newer.id_lo},{newer.id_hi}] on level {newer.level}"
            )
    by_level: dict[int, int] = {}
    for run in runs:
        by_level[run.level] = by_level.get(run.level, 0) + 1
        if run.level >= 1 and run.n > idx.options.level_capacity(run.level):
            problems.append(
                f"level {run.level} run holds {run.n} entries > capacity {idx.options.level_capacity(run.level)}"
            )
        tombs = {f.tomb for f in run.files}
        if len(tombs) > 1:
            problems.append(
                f"run [{run.id_lo},{run.id_hi}]: parts disagree on the tombstone {tombs}"
            )
        parts = [f.part for f in run.files]
        if len(set(parts)) != len(parts):
            problems.append(f"run [{run.id_lo},{run.id_hi}]: duplicate part numbers {parts}")
        prev = None
        for f in run.files:
            ent = contents.get(f.name)
            if ent is None or not len(ent):
                continue
            if prev is not None and not prev < _first_key_seq(ent):
                problems.append(
                    f"run [{run.id_lo},{run.id_hi}]: part {f.part} overlaps the previous part"
                )
            prev = _last_key_seq(ent)
    for level, count in by_level.items():
        if level >= 1 and count > 1:
            problems.append(f"level {level} holds {count} runs (at most one)")
        if policy and level == 0 and count > idx.options.l0_max_runs:
            problems.append(f"level 0 holds {count} runs > l0_max_runs {idx.options.l0_max_runs}")

    live_parts = []
    for run in runs:
        for f in run.files:
            ent = contents.get(f.name)
            if ent is None:
                continue
            if run.cutoff < NO_CUTOFF:
                ent = ent.filter(ent.seq < run.cutoff)
            live_parts.append(ent)
    live = order_by_seq(Entries.concat(live_parts, idx.key_type))
    if len(live) > 1:
        dup = live.seq[1:] == live.seq[:-1]
        if dup.any():
            seqs = np.unique(live.seq[1:][dup])
            problems.append(
                f"{seqs.size} seqs indexed more than once, e.g. {seqs[:_MAX_REPORT].tolist()}"
            )
    if expected is not None:
        try:
            exp = normalize_entries(idx.key_type, *expected)
        except ReplayDBError as exc:
            return [*problems, f"expected entries invalid: {exc}"]
        problems += _compare(live, order_by_seq(exp), idx.key_type)
    return problems


def _compare(live: Entries, exp: Entries, key_type: str) -> list[str]:
    p: list[str] = []
    if len(exp) > 1 and bool(np.any(exp.seq[1:] == exp.seq[:-1])):
        p.append("expected entries repeat a seq")
    missing = np.setdiff1d(exp.seq, live.seq)
    extra = np.setdiff1d(live.seq, exp.seq)
    if missing.size:
        p.append(
            f"{missing.size} expected entries missing from the index, e.g. seq {missing[:_MAX_REPORT].tolist()}"
        )
    if extra.size:
        p.append(
            f"{extra.size} index entries not in the primary data, e.g. seq {extra[:_MAX_REPORT].tolist()}"
        )
    common, il, ie = np.intersect1d(live.seq, exp.seq, assume_unique=False, return_indices=True)
    if common.size:
        lk = live.take(il)
        ek = exp.take(ie)
        if key_type == "string":
            kbad = ~np.asarray(pc.equal(lk.key, ek.key))
        else:
            kbad = lk.key != ek.key
        tbad = lk.t != ek.t
        if kbad.any():
            p.append(
                f"{int(kbad.sum())} entries have a wrong key, e.g. seq {common[kbad][:_MAX_REPORT].tolist()}"
            )
        if tbad.any():
            p.append(
                f"{int(tbad.sum())} entries have a wrong t, e.g. seq {common[tbad][:_MAX_REPORT].tolist()}"
            )
    return p
