"""Replay: interval reads, multi-stream merge by (t, stream, seq), interval boundaries."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.operators.base import Operator
from replaydb.replay import Replay
from replaydb.store.schema import Attribute, StreamSchema


@dataclass(frozen=True)
class _Cfg:
    pass


class Recorder(Operator):
    """Echoes every event it receives, tagged with the interval it arrived in."""

    name = "recorder"

    def __init__(self) -> None:
        super().__init__(_Cfg())
        self.interval = 0

    @property
    def output_schema(self) -> pa.Schema:
        return pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("interval", pa.int64())])

    def _push_batch(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        self._emit(pa.record_batch([batch.column("t"), batch.column("seq"),
                                    pa.array(np.full(n, self.interval))], schema=self.output_schema))

    def _flush(self) -> None:
        pass

    def _reset_state(self) -> None:
        self.interval += 1

    def _get_state(self):
        return self.interval

    def _set_state(self, state) -> None:
        self.interval = state


def _store(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    for name, step, offset, extra in [("a", 3, 0, "x"), ("b", 5, 1, "y")]:
        store.create_stream(name, StreamSchema((Attribute(extra, "float64"),), time_unit="ms",
                                               leaf_capacity=16, fanout=4))
        t = np.arange(2000) * step + offset
        store.append(name, pa.table({"t": t, extra: t * 1.0}))
    return store


def test_interval_replay_reads_only_intervals_and_resets_between(tmp_path):
    store = _store(tmp_path)
    snap = store.stream("a")
    rep = Replay([snap], [(300, 330), (0, 10), (900, 903)])
    out = rep.run(Recorder())
    assert out.column("t").to_pylist() == [0, 3, 6, 9, 300, 303, 306, 309, 312, 315, 318, 321,
                                           324, 327, 900]
    # three intervals: the operator was told about the two gaps
    assert sorted(set(out.column("interval").to_pylist())) == [0, 1, 2]
    assert rep.stats.intervals == 3 and rep.stats.events < 3 * 16 + 1
    assert rep.stats.leaves <= 4


def test_two_streams_merge_by_time_then_stream_then_seq(tmp_path):
    store = _store(tmp_path)
    rep = Replay([store.stream("a"), store.stream("b")], type_column="type", batch_rows=100)
    tbl = rep.table()
    assert tbl.num_rows == 4000
    t = tbl.column("t").to_numpy()
    assert np.all(np.diff(t) >= 0)
    types = tbl.column("type").to_pylist()
    # at t = 6 (a: 0,3,6 / b: 1,6) stream a comes first
    six = [types[i] for i in np.nonzero(t == 6)[0]]
    assert six == ["a", "b"]
    assert tbl.schema.names == ["t", "seq", "x", "y", "type"]
    x = tbl.column("x").to_pylist()
    assert all(v is None for v, ty in zip(x, types) if ty == "b")


def test_pull_iterator_yields_incrementally(tmp_path):
    """Results come every RESULTS_BATCHES batches' worth of events, not only at the end."""
    from replaydb.replay.replay import RESULTS_BATCHES

    store = _store(tmp_path)
    rep = Replay([store.stream("a")], batch_rows=64)
    parts = [p.num_rows for p in rep.results(Recorder())]
    assert sum(parts) == 2000
    assert 64 * RESULTS_BATCHES <= parts[0] <= 64 * (RESULTS_BATCHES + 1)
    assert len(parts) >= 2000 // (64 * (RESULTS_BATCHES + 1))


def test_seq_false_does_not_read_seq_of_a_single_stream(tmp_path):
    from tests.helpers import destroy_column

    store = _store(tmp_path)
    snap = store.stream("a")
    with_seq = Replay([snap], [(30, 3000)], batch_rows=100).table()
    assert destroy_column(snap, "seq") > 0
    fresh = replaydb.open(tmp_path / "s").stream("a")
    with pytest.raises(Exception):  # noqa: B017 - the garbage fails wherever Arrow trips on it
        Replay([fresh], [(30, 3000)], batch_rows=100).table()
    fresh = replaydb.open(tmp_path / "s").stream("a")
    rep = Replay([fresh], [(30, 3000)], batch_rows=100, seq=False)
    assert "seq" not in rep.schema.names
    tbl = rep.table()
    assert tbl.schema.names == ["t", "x"] and tbl.schema.equals(rep.schema)
    assert tbl.equals(with_seq.drop_columns("seq"))


def test_seq_false_reads_fewer_bytes_and_keeps_seq_when_asked(tmp_path):
    store = _store(tmp_path)
    snap = store.stream("a")
    a = Replay([snap], columns=["x"])
    a.table()
    b = Replay([snap], columns=["x"], seq=False)
    b.table()
    assert b.stats.events == a.stats.events == 2000
    assert 0 < b.stats.bytes < a.stats.bytes
    # naming seq among the columns wins over seq=False
    assert Replay([snap], columns=["seq", "x"], seq=False).schema.names == ["t", "seq", "x"]
    # every column but seq
    assert Replay([snap], seq=False).table().schema.names == ["t", "x"]


def test_seq_false_merge_of_two_streams_has_the_same_order(tmp_path):
    store = _store(tmp_path)
    snaps = [store.stream("a"), store.stream("b")]
    ref = Replay(snaps, type_column="type", batch_rows=100).table()
    rep = Replay(snaps, type_column="type", batch_rows=100, seq=False)
    tbl = rep.table()
    assert rep.schema.names == ["t", "x", "y", "type"]
    assert tbl.equals(ref.drop_columns("seq"))
