"""Cases shared by the tests of stores on object stores (S3 and Azure): the batches written,
writing a remote store and its local twin alike, the comparison of the two, and the race of
two writers. Each takes the kind's ``open`` (a URI and a cache directory to a Store)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.errors import ConcurrentWriterError
from replaydb.indexes.manage import compact, create_index
from replaydb.store.store import Store
from replaydb.store.vacuum import vacuum_stream

QUERY = """SELECT * FROM ev MATCH_RECOGNIZE (ORDER BY t MEASURES A.t AS at, B.v AS bv
  ONE ROW PER MATCH PATTERN (A B) DEFINE A AS k = 5, B AS k < 40)"""

Opener = Callable[..., Store]


def batch(part: int, n: int = 8000) -> pa.Table:
    """Rows ``part * n ..`` of the test stream: times 5 ms apart, ``k`` in 0..99, ``v``."""
    rng = np.random.default_rng(part)
    t = (np.arange(n, dtype=np.int64) + part * n) * 5
    return pa.table({"t": t, "k": rng.integers(0, 100, n), "v": rng.random(n)})


def write_twins(remote: Store, local: Store) -> None:
    """Four appends with an index built after the second, then a full compaction, on both."""
    for part in range(4):
        for store in (remote, local):
            store.append("ev", batch(part), time_unit="ms")
            if part == 1:
                create_index(store, "ev", "k")
    for store in (remote, local):
        compact(store, "ev", full=True)


def same(local: Store, reader: Store, plans: tuple[str, ...] = ("replay", "auto", "optimal"),
         queries: tuple[str, ...] = (QUERY,)) -> None:
    """``reader`` (a fresh reader of the remote store) answers as the local twin with every
    plan, checks clean and counts the same events."""
    for text in queries:
        for plan in plans:
            want = replaydb.query(local, text, plan=plan).table
            assert replaydb.query(reader, text, plan=plan).table.equals(want), (plan, text)
    assert reader.check() == {"ev": []}
    assert reader.stats("ev")[0]["events"] == local.stats("ev")[0]["events"]


def race(open_: Opener, uri: str, tmp_path: Path) -> Store:
    """Two writers on two "machines" (own caches, unrelated local locks) commit one version:
    the loser fails whole and nothing of it is visible; vacuum removes its uploads; a retry
    commits on top of the winner. Returns a reader opened after the race."""
    first = open_(uri, tmp_path / "a", create=True)
    first.append("ev", batch(0), time_unit="ms")
    second = open_(uri, tmp_path / "b")
    with first.writer("ev") as w:  # pins version 1 of the stream
        second.append("ev", batch(1))  # another machine commits version 2 meanwhile
        with pytest.raises(ConcurrentWriterError, match="another writer committed first"):
            w.append(batch(2))
    reader = open_(uri, tmp_path / "r")
    assert reader.stream("ev").read().num_rows == 2 * 8000  # the loser's rows are nowhere
    assert reader.check() == {"ev": []}
    assert vacuum_stream(reader, "ev")["files"] == []  # young uploads are kept
    swept = vacuum_stream(reader, "ev", min_age=0)
    assert any(f.startswith("events/part-") for f in swept["files"])
    assert vacuum_stream(reader, "ev", min_age=0)["files"] == []
    first.append("ev", batch(2))  # a retry commits on top of the winner
    return first


def ingest_sources(tmp_path: Path) -> tuple[Path, Path]:
    """Two sources of an ingest into stream ``ev``: ``events.csv`` (batches 0-2; its data row
    17 is bad, so a task quarantines it) and ``late.parquet`` (500 rows reaching back before
    the first's end, so the second ingest rewrites the stored tail)."""
    import pyarrow.parquet as pq

    rows = pa.concat_tables([batch(p) for p in range(3)])
    src = tmp_path / "events.csv"
    text = rows.to_pandas().to_csv(index=False).splitlines()
    text[17] = "oops,1,0.5"
    src.write_text("\n".join(text) + "\n")
    late = tmp_path / "late.parquet"
    pq.write_table(_late_rows(), late)
    return src, late


def _late_rows() -> pa.Table:
    return batch(9, 500).set_column(0, "t", pa.array(np.arange(500, dtype=np.int64) * 97 + 1))


def ingested_twin(path: Path, index: tuple[str, ...] = ("k",)) -> Store:
    """A local store holding by appends what ingesting :func:`ingest_sources` (with
    ``--index k``) stores; then an index on each other column of ``index``."""
    local = replaydb.open(path, create=True)
    rows = pa.concat_tables([batch(p) for p in range(3)])
    local.create_stream("ev", batch(0).schema, time_unit="ms", lateness=10_000_000)
    local.append("ev", pa.Table.from_pylist([r for i, r in enumerate(rows.to_pylist())
                                             if i != 16], schema=rows.schema))
    create_index(local, "ev", index[0])
    local.append("ev", _late_rows(), lateness=10_000_000)
    for column in index[1:]:
        create_index(local, "ev", column)
    return local
