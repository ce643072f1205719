"""``replaydb check``: verify every invariant of a stream.

Checks, in order (each finding is one line naming what is wrong):

1. the latest Delta commit carries a manifest (a foreign commit after it is reported);
2. the TAB+-tree's structure (:meth:`TABTree.check`): leaf order, seq contiguity, inner node
   aggregates equal to their children, level sizes;
3. the manifest agrees with the tree (event count, time range);
4. the Delta table agrees with the tree: the version's data files are exactly the files the leaves
   point to, each file exists with the recorded size, and its leaves are its row groups in order;
5. side tables (indexes, quarantine) open at their pinned versions and pass their own checks
   (with ``deep``, an index is also compared entry by entry with the stream's data);
6. ``deep`` (default): every data file is read; row-group sizes, times (sorted), seqs (contiguous)
   and every leaf entry's aggregates are recomputed from the data and compared.

Complexity: O(tree) without ``deep``; O(stored data) with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from replaydb.errors import ReplayDBError
from replaydb.store import deltaio
from replaydb.store.snapshot import values_of
from replaydb.store.tree import summarize_leaves

if TYPE_CHECKING:
    from replaydb.store.store import Store


def check_stream(store: Store, name: str, *, deep: bool = True) -> list[str]:
    """Problems found in stream ``name`` (an empty list means healthy)."""
    problems: list[str] = []
    events = store.stream_dir(name) / "events"
    try:
        latest = deltaio.latest_version(events)
        _, mv = deltaio.read_manifest(events, latest)
        if mv != latest:
            problems.append(f"Delta versions {mv + 1}..{latest} were committed without a replaydb "
                            "manifest (a foreign writer); replaydb reads version "
                            f"{mv}'s state")
        snap = store.stream(name, latest)
    except ReplayDBError as exc:
        return [f"cannot open: {exc}"]
    tree = snap.tree
    problems += tree.check()
    m = snap.manifest
    if m.n_events != tree.n_events:
        problems.append(f"manifest says {m.n_events} events, tree holds {tree.n_events}")
    tr = tree.t_range
    if tr is not None and (m.t_min, m.t_max) != tr:
        problems.append(f"manifest time range {(m.t_min, m.t_max)} != tree's {tr}")

    # Delta table vs tree
    try:
        delta_files = deltaio.table_files(events, snap.version)
    except Exception as exc:  # deltalake errors: report, do not crash
        return problems + [f"Delta table unreadable at version {snap.version}: {exc}"]
    tree_files = {f.path for f in snap.files.values()}
    for p in sorted(delta_files - tree_files)[:10]:
        problems.append(f"data file {p} is in the Delta table but no leaf points to it")
    for p in sorted(tree_files - delta_files)[:10]:
        problems.append(f"data file {p} is referenced by the tree but not in the Delta table")
    lv = tree.leaves
    fids, rgs, counts = lv.col("file_id"), lv.col("rg"), lv.col("count")
    sizes = snap.store.data_file_sizes(snap.name)
    for f in sorted(snap.files.values(), key=lambda f: f.seq_min):
        size = sizes.get(f.path)
        if size is None:
            problems.append(f"data file {f.path} is missing")
            continue
        if size != f.size:
            problems.append(f"data file {f.path} has {size} bytes, recorded {f.size}")
        sel = np.nonzero(fids == f.id)[0]
        if len(sel) != f.row_groups or not np.array_equal(rgs[sel], np.arange(len(sel))):
            problems.append(f"data file {f.path}: leaves do not map to its row groups in order")
        if int(counts[sel].sum()) != f.rows:
            problems.append(f"data file {f.path}: leaves hold {int(counts[sel].sum())} events, "
                            f"file has {f.rows}")
    unknown = set(np.unique(fids).tolist()) - set(snap.files)
    if unknown:
        problems.append(f"leaves point to unknown file ids {sorted(unknown)[:5]}")

    # side tables
    for ref in m.side:
        try:
            side = snap.side(ref.name)
            problems += [f"{ref.name}: {p}" for p in side.check(snap, deep=deep)]
        except ReplayDBError as exc:
            problems.append(f"{ref.name}: cannot open at version {ref.version}: {exc}")
        except Exception as exc:  # a broken side table must not crash the checker
            problems.append(f"{ref.name}: {type(exc).__name__}: {exc}")

    if deep and not problems:
        problems += _deep(snap)
    return problems


def _deep(snap) -> list[str]:  # noqa: ANN001 - StreamSnapshot
    problems: list[str] = []
    tree = snap.tree
    lv = tree.leaves
    B = snap.schema.leaf_capacity
    specs = snap.specs
    names = [s.name for s in specs]
    expected_seq = 0
    for fid in dict.fromkeys(lv.col("file_id").tolist()):
        sel = np.nonzero(lv.col("file_id") == fid)[0]
        i, j = int(sel[0]), int(sel[-1]) + 1
        try:
            tbl = snap.read_leaves(i, j, names)
        except ReplayDBError as exc:
            problems.append(str(exc))
            continue
        except (OSError, pa.ArrowException) as exc:  # pages Arrow cannot decode
            # (a leaf naming an unknown file raised CorruptionError above)
            problems.append(f"data file {snap.files[fid].path}: unreadable ({exc})")
            continue
        f = snap.files[fid]
        t = tbl.column("t").to_numpy()
        seq = tbl.column("seq").to_numpy()
        if len(t) != f.rows:
            problems.append(f"data file {f.path}: {len(t)} rows, expected {f.rows}")
            continue
        if len(t) > 1 and np.any(t[1:] < t[:-1]):
            problems.append(f"data file {f.path}: events out of time order")
        if len(seq) and not np.array_equal(seq, np.arange(expected_seq, expected_seq + len(seq))):
            problems.append(f"data file {f.path}: seqs are not {expected_seq}..")
        expected_seq += len(seq)
        starts = np.concatenate([[0], np.cumsum(lv.col("count")[i:j])[:-1]]).astype(np.int64)
        if np.any(lv.col("count")[i:j] > B):
            problems.append(f"data file {f.path}: a leaf exceeds capacity {B}")
        vals = {s.name: values_of(tbl.column(s.name), s) for s in specs}
        want = summarize_leaves(t, int(seq[0]) if len(seq) else 0, vals, specs, starts)
        for col, arr in want.items():
            got = lv.col(col)[i:j]
            if col.endswith(".sum") and arr.dtype == np.float64:
                ok = np.isclose(got, arr, rtol=1e-9, atol=1e-12) | (got == arr)
            else:
                ok = got == arr
            if not ok.all():
                k = int(np.nonzero(~ok)[0][0])
                problems.append(f"leaf {i + k}: aggregate {col} = {got[k]!r} but the data says "
                                f"{arr[k]!r}")
                break
    if expected_seq != snap.n_events:
        problems.append(f"data holds {expected_seq} events, manifest says {snap.n_events}")
    return problems
