"""The column layout of the store's data files: integer columns (``t``, ``seq``, integer and
time attributes) delta-packed and uncompressed, every other column PLAIN (strings
dictionary-encoded) under the store's codec, floats uncompressed unless the codec at least
halves them; files read back exactly, through Arrow and through Spark."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import replaydb
from replaydb.store.deltaio import DEFAULT_COMPRESSION, column_layout, write_parquet


def _events(n: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.integers(0, 5, n)).astype(np.int64)
    x = rng.normal(size=n)
    return pa.table({
        "t": t,
        "x": pa.array([None if i % 7 == 0 else float(v) for i, v in enumerate(x)]),
        "k": pa.array(rng.integers(-50, 50, n), pa.int64()),
        "zeros": pa.array(np.where(rng.random(n) < 0.95, 0.0, rng.normal(size=n))),
        "city": pa.array(rng.choice(["bonn", "köln", "aachen"], n)),
        "flag": pa.array([None if i % 11 == 0 else bool(i % 2) for i in range(n)]),
    })


def _data_files(root: Path) -> list[Path]:
    return sorted((root / "streams" / "s" / "events").glob("*.parquet"))


def test_layout_of_each_column():
    schema = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("x", pa.float64()),
                        ("city", pa.string()), ("k", pa.int32()), ("at", pa.timestamp("ms")),
                        ("day", pa.date32()), ("flag", pa.bool_())])
    encodings, codecs = column_layout(schema, "zstd")
    packed = ("t", "seq", "k", "at", "day")
    assert encodings == {c: "DELTA_BINARY_PACKED" for c in packed}
    assert codecs == {**{c: "none" for c in packed}, "x": "zstd", "city": "zstd", "flag": "zstd"}
    # a time column of another physical type keeps the codec (delta packing is for integers)
    odd = pa.schema([("t", pa.float64()), ("seq", pa.int64())])
    assert column_layout(odd) == ({"seq": "DELTA_BINARY_PACKED"},
                                  {"t": DEFAULT_COMPRESSION, "seq": "none"})


@pytest.mark.parametrize("codec", ["snappy", "zstd"])
def test_floats_stay_compressed_only_where_the_codec_halves_them(codec):
    rng = np.random.default_rng(1)
    n = 5000
    table = pa.table({
        "t": np.arange(n, dtype=np.int64),
        "noise": rng.normal(size=n),
        "zeros": np.where(rng.random(n) < 0.95, 0.0, rng.normal(size=n)),
        "nothing": pa.array([None] * n, pa.float64()),
        "city": pa.array(rng.choice(["bonn", "köln"], n)),
    })
    _, codecs = column_layout(table.schema, codec, table, 512)
    assert codecs == {"t": "none", "noise": "none", "zeros": codec, "nothing": codec,
                      "city": codec}
    # judged per row group, as Parquet compresses each page: values repeating only across
    # groups do not count
    tile = np.tile(rng.normal(size=512), n // 512 + 1)[:n]
    tiled = pa.table({"t": table.column("t"), "tile": tile})
    assert column_layout(tiled.schema, codec, tiled, 512)[1]["tile"] == "none"
    assert column_layout(tiled.schema, codec, tiled, 0)[1]["tile"] == codec
    # without the rows (schema only) or without a codec nothing is judged
    assert column_layout(table.schema, codec)[1]["noise"] == codec
    assert column_layout(table.schema, "none", table, 512)[1]["zeros"] == "none"


def test_written_file_has_the_layout_and_reads_back(tmp_path):
    table = _events(3000).append_column("seq", pa.array(np.arange(3000, dtype=np.int64)))
    path = tmp_path / "f.parquet"
    write_parquet(path, table, 512)
    md = pq.read_metadata(path)
    assert md.num_row_groups == 6 and md.row_group(5).num_rows == 3000 - 5 * 512
    names = table.column_names
    for rg in range(md.num_row_groups):
        for i, name in enumerate(names):
            col = md.row_group(rg).column(i)
            if name in ("t", "seq", "k"):
                assert "DELTA_BINARY_PACKED" in col.encodings and col.compression == "UNCOMPRESSED"
            elif name == "x":  # random floats: snappy saves little
                assert "PLAIN" in col.encodings
                assert col.compression == "UNCOMPRESSED"
            else:
                assert "DELTA_BINARY_PACKED" not in col.encodings
                assert col.compression == DEFAULT_COMPRESSION.upper()
    assert "RLE_DICTIONARY" in md.row_group(0).column(names.index("city")).encodings
    assert pq.read_table(path).equals(table)
    # leaf-sized reads, as replay makes them, see the same rows
    pf = pq.ParquetFile(path, pre_buffer=False)
    got = pf.read_row_groups([1, 2, 4], columns=["t", "seq", "x"], use_threads=False)
    want = pa.concat_tables([table.slice(512 * g, 512) for g in (1, 2, 4)])
    assert got.equals(want.select(["t", "seq", "x"]))


def test_store_data_files_use_the_layout(tmp_path):
    store = replaydb.open(tmp_path / "st", create=True)
    events = _events(5000, seed=3)
    for a in range(0, 5000, 1700):
        store.append("s", events.slice(a, 1700))
    files = _data_files(tmp_path / "st")
    assert files
    for f in files:
        md = pq.read_metadata(f)
        names = md.schema.to_arrow_schema().names
        for i in (names.index("t"), names.index("seq"), names.index("k")):
            col = md.row_group(0).column(i)
            assert "DELTA_BINARY_PACKED" in col.encodings and col.compression == "UNCOMPRESSED"
    got = store.stream("s").read()
    assert got.column("seq").to_pylist() == list(range(5000))
    assert got.select(events.column_names).equals(events.cast(got.select(events.column_names)
                                                               .schema))
    assert store.check("s") == {"s": []}


@pytest.mark.spark
def test_spark_reads_the_store_data_files(spark, tmp_path):
    store = replaydb.open(tmp_path / "st", create=True)
    events = _events(4000, seed=5)
    store.append("s", events)
    files = ["file://" + str(f) for f in _data_files(tmp_path / "st")]
    rows = spark.read.parquet(*files).orderBy("seq").select("t", "seq", "x", "k").collect()
    want = store.stream("s").read().select(["t", "seq", "x", "k"]).to_pylist()
    assert [r.asDict() for r in rows] == want
