"""Store benchmark (foundation issue): append, temporal aggregation, time-range reads.

Side by side in one process:

1. **append** N events with 6 float64 attributes in 64K-row batches through ``Store.append``
   (validation, leaf aggregates, tree segments, one Delta commit per batch) vs pyarrow writing the
   same batches to one Parquet file (snappy, like the store). Goal: ratio >= 0.5.
2. **temporal aggregation** (count/min/max/sum/avg of every attribute) over a range covering 10%
   of the events from the TAB+-tree vs scanning that range (the store's own leaf-precise read plus
   NumPy reductions, and a pyarrow dataset scan with a filter over the same files). Goal >= 100x.
3. **time-range read** throughput of the store vs a pyarrow dataset scan of the same files with the
   same time filter, and vs pyarrow reading the range from an ordinarily written Parquet file of
   the same events (one file, snappy, row groups of 2^20 rows, with its statistics). Goal: ratio
   >= 0.5 (against the store's own files).

Usage: ``python -m replaydb.bench.bench_store [--quick | --full]`` (quick: 2M events; full: 10M).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

import replaydb
from replaydb.bench.common import Results, arguments, best_of

ATTRS = [f"a{i}" for i in range(1, 7)]
BATCH = 65_536
PLAIN_ROW_GROUP = 1 << 20
"""Row group size of the ordinarily written Parquet file the range reads are compared with."""


def make_batches(n: int, seed: int = 0) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, n, BATCH):
        m = min(BATCH, n - start)
        cols = {"t": np.arange(start, start + m, dtype=np.int64) * 10}
        for a in ATTRS:
            cols[a] = rng.random(m)
        out.append(pa.table(cols))
    return out


def bench_append(batches: list[pa.Table], root: Path) -> tuple[float, float, replaydb.Store]:
    n = sum(b.num_rows for b in batches)
    path = root / "baseline.parquet"
    t0 = time.perf_counter()
    with pq.ParquetWriter(path, batches[0].schema, compression="snappy") as w:
        for b in batches:
            w.write_table(b)
    base = time.perf_counter() - t0
    store = replaydb.open(root / "store", create=True)
    store.create_stream("s", batches[0].schema, time_unit="ms")
    t0 = time.perf_counter()
    with store.writer("s") as w:
        for b in batches:
            w.append(b)
    ours = time.perf_counter() - t0
    return n / ours, n / base, store


def scan_aggregate(tbl: pa.Table) -> dict:
    out = {"count": tbl.num_rows}
    for a in ATTRS:
        x = tbl.column(a).to_numpy()
        out[a] = (x.min(), x.max(), x.sum(), x.mean())
    return out


def main() -> None:
    args = arguments(__doc__.splitlines()[0]).parse_args()
    n = 10_000_000 if args.full else 2_000_000
    res = Results("store", "Store: append, temporal aggregation, range reads",
                  params={"events": n, "attributes": 6, "batch_rows": BATCH})
    root = Path(tempfile.mkdtemp(prefix="bench-store-"))
    try:
        batches = make_batches(n)
        ours, base, store = bench_append(batches, root)
        ratio = ours / base
        res.table("Append throughput (events/s)", ["system", "events/s", "ratio"],
                  [["replaydb Store.append", ours, ratio], ["pyarrow ParquetWriter", base, 1.0]])
        res.goal("append throughput vs pyarrow Parquet", ">= 0.5", round(ratio, 3), ratio >= 0.5)

        snap = store.stream("s")
        files = [str(snap.events_dir / f.path) for f in snap.files.values()]
        dataset = ds.dataset(files, format="parquet")
        plain_path = root / "plain.parquet"
        pq.write_table(pa.concat_tables(batches), plain_path, row_group_size=PLAIN_ROW_GROUP,
                       compression="snappy")
        plain = ds.dataset(str(plain_path), format="parquet")
        t_total = n * 10
        rng = np.random.default_rng(1)
        rows = []
        speedups, read_ratios, plain_ratios = [], [], []
        for _ in range(5):
            lo = int(rng.integers(0, int(t_total * 0.9)))
            hi = lo + t_total // 10
            t_tree, agg = best_of(lambda lo=lo, hi=hi: snap.aggregate(lo, hi), repeat=5)
            t_scan, scanned = best_of(lambda lo=lo, hi=hi: scan_aggregate(snap.read(lo, hi)),
                                     repeat=3)
            flt = (pc.field("t") >= lo) & (pc.field("t") < hi)
            t_pa, pa_scanned = best_of(lambda flt=flt: scan_aggregate(dataset.to_table(filter=flt)),
                                       repeat=3)
            assert agg["count"] == scanned["count"] == pa_scanned["count"]
            assert np.isclose(agg["a1"]["sum"], scanned["a1"][2])
            speedups.append(min(t_scan, t_pa) / t_tree)
            t_read, tbl = best_of(lambda lo=lo, hi=hi: snap.read(lo, hi), repeat=3)
            t_pa_read, tbl2 = best_of(lambda flt=flt: dataset.to_table(filter=flt), repeat=3)
            t_plain, tbl3 = best_of(lambda flt=flt: plain.to_table(filter=flt), repeat=3)
            assert tbl.num_rows == tbl2.num_rows == tbl3.num_rows
            read_ratios.append(t_pa_read / t_read)
            plain_ratios.append(t_plain / t_read)
            rows.append([lo, hi, t_tree * 1e3, t_scan * 1e3, t_pa * 1e3, speedups[-1],
                         tbl.num_rows / t_read, tbl2.num_rows / t_pa_read, read_ratios[-1],
                         tbl3.num_rows / t_plain, plain_ratios[-1]])
        res.table("Temporal aggregation over 10% of the events, and reading that range",
                  ["t0", "t1", "tree agg (ms)", "store scan+agg (ms)", "pyarrow scan+agg (ms)",
                   "speedup vs best scan", "store read (events/s)",
                   "pyarrow read of the store's files (events/s)", "read ratio",
                   "pyarrow read of a plain Parquet file (events/s)", "read ratio (plain)"],
                  rows)
        med_speed = float(np.median(speedups))
        med_read = float(np.median(read_ratios))
        res.goal("temporal aggregation vs scanning the range", ">= 100x",
                 round(med_speed, 1), med_speed >= 100)
        res.goal("time-range read throughput vs pyarrow scan", ">= 0.5", round(med_read, 3),
                 med_read >= 0.5)
        med_plain = float(np.median(plain_ratios))
        res.headline("temporal aggregation over 10% of the events, and reading that range",
                     f"{n:,} events, 6 float64 attributes",
                     f"pyarrow {pa.__version__} (scans; a plain Parquet file with 1M-row groups)",
                     f"aggregation {med_speed:.0f}x faster than the fastest scan (goal 100x); "
                     f"range read {med_plain:.2f}x pyarrow's speed on the plain file, "
                     f"{med_read:.2f}x on the store's files", med_speed >= 100)
        res.params.update({"plain_row_group": PLAIN_ROW_GROUP, "tree_height": snap.tree.height,
                           "fanout": snap.schema.fanout,
                           "leaf_capacity": snap.schema.leaf_capacity,
                           "data_files": len(snap.files)})

        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
        axes[0].bar(["replaydb\nappend", "pyarrow\nParquet"], [ours / 1e6, base / 1e6],
                    color=["#1f77b4", "#999999"])
        axes[0].set_ylabel("million events/s")
        axes[0].set_title("append")
        axes[1].bar(["TAB+-tree", "store scan", "pyarrow scan"],
                    [np.median([r[2] for r in rows]), np.median([r[3] for r in rows]),
                     np.median([r[4] for r in rows])], color=["#1f77b4", "#aec7e8", "#999999"])
        axes[1].set_yscale("log")
        axes[1].set_ylabel("ms (log)")
        axes[1].set_title("aggregate 10% of the stream")
        axes[2].bar(["replaydb read", "pyarrow scan"],
                    [np.median([r[6] for r in rows]) / 1e6, np.median([r[7] for r in rows]) / 1e6],
                    color=["#1f77b4", "#999999"])
        axes[2].set_ylabel("million events/s")
        axes[2].set_title("time-range read")
        fig.suptitle(f"{n:,} events, 6 float64 attributes")
        fig.tight_layout()
        fig.savefig(res.plot_path("store.png"), dpi=110)
        out = res.write()
        print((out / "results.md").read_text())
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
