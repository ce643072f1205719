"""Registry, options, re-chunking, determinism and the Parquet writer of replaydb.datasets."""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import replaydb.datasets as ds
from replaydb.datasets.base import rechunk, registry
from replaydb.errors import UsageError

GENERATORS = [i.name for i in ds.list_datasets() if i.kind == "synthetic"]

# Small option sets so every generator spans several of its blocks within a few 100k events.
SMALL = {
    "synthetic-normal": {"pad": False},
    "traffic": {"cars": 500},
    "situations": {"streams": 2},
}
MULTI_BLOCK_EVENTS = 600_000


def table(name: str, events: int, seed: int = 0, batch_size: int = 65536, **opts) -> pa.Table:
    opts = {**SMALL.get(name, {}), **opts}
    batches = list(ds.generate(name, events, seed, batch_size=batch_size, **opts))
    return pa.Table.from_batches(batches, schema=ds.schema(name, **opts))


def ipc_bytes(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t.combine_chunks())
    return sink.getvalue().to_pybytes()


def test_every_paper_workload_is_registered():
    names = set(registry())
    assert {"synthetic-normal", "window-agg", "situations", "traffic", "stock", "stock-greta",
            "cluster", "gpu-bench", "imprecise", "flights-3m", "opensky"} <= names


@pytest.mark.parametrize("info", ds.list_datasets(), ids=lambda i: i.name)
def test_descriptions_are_complete(info):
    assert info.time_unit in ("s", "ms", "us", "ns")
    assert info.time_column == info.columns[0].name
    assert info.example_queries, "every dataset documents at least one example query"
    for q in info.example_queries:
        assert q.language in ("match_recognize", "tpstream", "greta", "sase", "sql") and q.text
        # a query that names its stream names the dataset's suggested stream
        named = re.findall(r"\b(?:FROM|TABLE) (?!TABLE)(\w+)", q.text)
        assert all(n == info.stream for n in named), (named, info.stream)
    json.dumps(info.to_dict(), default=str)  # serialisable for `datasets list --json`
    sch = ds.schema(info.name)
    assert sch.field(info.time_column).type == pa.int64()
    documented = set()
    for c in info.columns:
        documented.add(c.name.split("..")[0].rstrip("0123456789k") if ".." in c.name else c.name)
    for f in sch:
        base = f.name.rstrip("0123456789")
        assert f.name in documented or base in documented, f"{f.name} undocumented"
    for idx in info.suggested_indexes:
        assert idx in sch.names
    for k in info.key_columns:
        assert k in sch.names


@pytest.mark.parametrize("name", GENERATORS)
def test_time_ordered_and_typed(name):
    t = table(name, 50_000, seed=3)
    info = ds.describe(name)
    time = t.column(info.time_column).to_numpy()
    assert t.num_rows == 50_000
    assert np.all(np.diff(time) >= 0)
    if "type" in t.column_names:
        assert t.column("type").null_count == 0
        assert pa.types.is_string(t.schema.field("type").type)


@pytest.mark.parametrize("name", GENERATORS)
def test_same_rows_for_every_batch_size(name):
    a = table(name, MULTI_BLOCK_EVENTS, seed=7, batch_size=65536)
    b = table(name, MULTI_BLOCK_EVENTS, seed=7, batch_size=99_991)
    c = table(name, MULTI_BLOCK_EVENTS, seed=7, batch_size=MULTI_BLOCK_EVENTS * 2)
    assert ipc_bytes(a) == ipc_bytes(b) == ipc_bytes(c)


@pytest.mark.parametrize("name", [g for g in GENERATORS if g != "imprecise"])
def test_seed_changes_the_stream(name):
    a = table(name, 20_000, seed=1)
    b = table(name, 20_000, seed=2)
    assert not a.equals(b)


@pytest.mark.parametrize("name", [g for g in GENERATORS if g != "synthetic-normal"])
def test_prefix_of_a_longer_stream_is_the_shorter_stream(name):
    # synthetic-normal is excluded by definition: its means are i/N.
    long = table(name, MULTI_BLOCK_EVENTS, seed=5)
    short = table(name, 300_001, seed=5)
    assert long.slice(0, 300_001).equals(short)


def test_make_writes_identical_bytes_whatever_the_batch_size(tmp_path):
    digests = set()
    for k, bs in enumerate((1000, 65536, 300_000)):
        out = tmp_path / f"s{k}.parquet"
        res = ds.make("traffic", out, 310_000, seed=11, batch_size=bs, row_group_size=100_000,
                      cars=400)
        assert res.rows == 310_000 and res.row_groups == 4
        digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
    assert len(digests) == 1


def test_make_roundtrip_metadata_and_row_groups(tmp_path):
    out = tmp_path / "sn.parquet"
    res = ds.make("synthetic-normal", out, 250_000, seed=4, row_group_size=100_000)
    pf = pq.ParquetFile(out)
    assert pf.metadata.num_rows == 250_000 and pf.metadata.num_row_groups == 3
    meta = json.loads(pf.schema_arrow.metadata[b"replaydb.dataset"])
    assert meta == {"dataset": "synthetic-normal", "events": 250_000, "seed": 4, "format": 1,
                    "time_column": "t", "time_unit": "s",
                    "options": {"out_of_range": "reject", "pad": True,
                                "sigmas": [0.0, 0.001, 0.01, 0.1, 1.0]}}
    back = pq.read_table(out).replace_schema_metadata(None)
    assert back.equals(table("synthetic-normal", 250_000, seed=4, pad=True))
    assert res.to_dict()["ingest"].endswith(f"{out} --time t --time-unit s")


def test_make_refuses_to_overwrite_and_leaves_no_temp_file(tmp_path):
    out = tmp_path / "x.parquet"
    ds.make("imprecise", out, 10)
    with pytest.raises(UsageError, match="exists"):
        ds.make("imprecise", out, 10)
    ds.make("imprecise", out, 20, overwrite=True)
    assert pq.read_metadata(out).num_rows == 20
    with pytest.raises(UsageError, match="no option"):
        ds.make("imprecise", tmp_path / "y.parquet", 10, cars=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.parquet"]


def test_zero_events_gives_an_empty_valid_file(tmp_path):
    assert list(ds.generate("stock", 0)) == []
    out = tmp_path / "e.parquet"
    ds.make("stock", out, 0)
    t = pq.read_table(out)
    assert t.num_rows == 0 and t.column_names == ds.schema("stock").names


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: ds.generate("nope", 10), "unknown dataset"),
        (lambda: ds.generate("stock", 10, seed=-1), "seed"),
        (lambda: ds.generate("stock", -5), "events"),
        (lambda: ds.generate("stock", 10, batch_size=0), "batch size"),
        (lambda: ds.generate("stock", 10, p_up=1.5), "p_up"),
        (lambda: ds.generate("stock", 10, symbols="x"), "not a valid int"),
        (lambda: ds.generate("synthetic-normal", 10, out_of_range="clip"), "not one of"),
        (lambda: ds.generate("traffic", 10, cars=0), "cars"),
        (lambda: ds.generate("situations", 10, min_gap=60), "min_gap"),
        (lambda: ds.generate("window-agg", 10, rate=0), "rate"),
        (lambda: ds.generate("cluster", 10, colour=1), "has no option 'colour'"),
    ],
)
def test_bad_arguments_fail_at_the_call_with_a_clear_message(call, match):
    with pytest.raises(UsageError, match=match):
        call()


def test_bool_and_tuple_options_parse_from_strings():
    t = table("synthetic-normal", 10, pad="no", sigmas="0,0.5")
    assert t.column_names == ["t", "A1", "A2"]


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40), min_size=0, max_size=12),
    batch=st.integers(1, 50),
    total=st.one_of(st.none(), st.integers(0, 300)),
)
def test_rechunk_matches_slicing_the_concatenation(sizes, batch, total):
    start = 0
    blocks = []
    for n in sizes:
        blocks.append(pa.record_batch({"x": np.arange(start, start + n)}))
        start += n
    expect = np.arange(start if total is None else min(total, start))
    out = list(rechunk(iter(blocks), total, batch))
    got = np.concatenate([b.column(0).to_numpy() for b in out]) if out else np.zeros(0, int)
    assert np.array_equal(got, expect)
    assert all(b.num_rows == batch for b in out[:-1])
    assert not out or 0 < out[-1].num_rows <= batch


def test_rechunk_stops_pulling_blocks_once_enough_rows():
    pulled = []

    def blocks():
        for k in range(1000):
            pulled.append(k)
            yield pa.record_batch({"x": np.arange(10)})

    out = list(rechunk(blocks(), 25, 7))
    assert sum(b.num_rows for b in out) == 25
    assert pulled == [0, 1, 2]
