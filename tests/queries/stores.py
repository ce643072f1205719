"""Stores of the golden query corpus: one store per distinct description, built once and shared.

A case names its store with two header lines (see ``tests/queries/README.md``)::

    dataset: stock events=4000 seed=1 p_up=0.6
    store: stock time=t unit=s type=type index=volume,price leaf=64 fanout=4 ingest=append

``dataset:`` is a registered dataset (``replaydb datasets list``), the number of events, the seed
and the generator's options; ``store:`` is the stream name, then how it is ingested: the time
column and unit, the type column, the upper bound of an imprecise stream (``upper``), source
columns dropped before ingesting (``drop``), the secondary indexes, the TAB+-tree layout (``leaf``
events per leaf, ``fanout``) and the ingest path: ``append`` (the Python API,
``Store.append`` then ``create_index``) or ``spark`` (the Spark ingest job over a Parquet file of
the same rows, indexes built by the job, as ``replaydb ingest`` does).

:class:`StoreCache` builds each distinct :class:`StoreSpec` once, under one directory, and hands
out the open store for every later case with the same description.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import replaydb
from replaydb.planner.options import option_value

INGEST_PATHS = ("append", "spark")


def parse_value(text: str) -> Any:
    """A header value: an int, a float, true/false, else the text itself."""
    return option_value(text)


def parse_pairs(words: list[str], where: str) -> dict[str, str]:
    """``key=value`` words as a dict (values still text); anything else is an error."""
    out: dict[str, str] = {}
    for w in words:
        key, eq, value = w.partition("=")
        if not eq or not key:
            raise ValueError(f"{where}: expected key=value, got {w!r}")
        if key in out:
            raise ValueError(f"{where}: {key} given twice")
        out[key] = value
    return out


@dataclass(frozen=True)
class StoreSpec:
    """How to build one store (a dataset prefix ingested into one stream)."""

    dataset: str
    events: int
    seed: int
    stream: str
    options: tuple[tuple[str, Any], ...] = ()
    time: str = "t"
    unit: str = "s"
    type_column: str | None = None
    upper: str | None = None
    drop: tuple[str, ...] = ()
    index: tuple[str, ...] = ()
    leaf: int = 0
    fanout: int = 0
    ingest: str = "append"
    lines: tuple[str, str] = field(default=("", ""), compare=False)
    """The two header lines it was parsed from (written back unchanged)."""

    @classmethod
    def parse(cls, dataset_line: str, store_line: str) -> StoreSpec:
        dw = dataset_line.split()
        sw = store_line.split()
        if not dw or not sw:
            raise ValueError("dataset: and store: need a dataset name and a stream name")
        d = parse_pairs(dw[1:], "dataset")
        s = parse_pairs(sw[1:], "store")
        try:
            events, seed = int(d.pop("events")), int(d.pop("seed", "0"))
        except KeyError:
            raise ValueError("dataset: events=N is required") from None
        known = {"time", "unit", "type", "upper", "drop", "index", "leaf", "fanout", "ingest"}
        unknown = set(s) - known
        if unknown:
            raise ValueError(f"store: unknown keys {sorted(unknown)} (known: {sorted(known)})")
        ingest = s.get("ingest", "append")
        if ingest not in INGEST_PATHS:
            raise ValueError(f"store: ingest must be one of {INGEST_PATHS}, not {ingest!r}")

        def names(key: str) -> tuple[str, ...]:
            return tuple(x for x in s.get(key, "").split(",") if x)

        return cls(dw[0], events, seed, sw[0],
                   tuple(sorted((k, parse_value(v)) for k, v in d.items())),
                   s.get("time", "t"), s.get("unit", "s"), s.get("type"), s.get("upper"),
                   names("drop"), names("index"), int(s.get("leaf", 0)),
                   int(s.get("fanout", 0)), ingest,
                   (dataset_line.strip(), store_line.strip()))

    @property
    def key(self) -> str:
        """A short, stable name of this description (the store's directory)."""
        return (f"{self.dataset}-{self.stream}-"
                + hashlib.sha1(repr(self).encode()).hexdigest()[:10])

    def missing_package(self) -> str | None:
        """Why the store cannot be built here (a real dataset whose package is not in the
        package cache: see ``tests/datasets/test_datasets_real.py``), or None."""
        from replaydb.datasets import packages

        spec = {"flights-3m": packages.VEGA_DATASETS, "opensky": packages.TRAFFIC}.get(
            self.dataset)
        if spec is None or packages.cached_file(spec) is not None:
            return None
        return (f"{spec.filename} is not in the package cache {packages.packages_dir()}; "
                f"run `replaydb datasets make {self.dataset} OUT` once to fetch it")

    def table_options(self) -> dict[str, Any]:
        """How :func:`replaydb.query` takes :meth:`source_table` as an in-memory table: the
        options naming its time column and unit, type column and upper bound."""
        opts: dict[str, Any] = {"time_column": self.time, "time_unit": self.unit}
        if self.type_column:
            opts["type_column"] = self.type_column
        if self.upper:
            opts["upper_column"] = self.upper
        return opts

    def source_table(self) -> pa.Table:
        """The dataset's first ``events`` rows with the ``drop`` columns removed."""
        from replaydb.datasets import generate

        batches = list(generate(self.dataset, self.events, self.seed, **dict(self.options)))
        table = pa.Table.from_batches(batches)
        return table.drop_columns(list(self.drop)) if self.drop else table

    def schema(self, source: pa.Schema) -> Any:
        from replaydb.store.schema import StreamSchema

        return StreamSchema.infer(source, time_column=self.time, time_unit=self.unit,
                                  type_column=self.type_column, upper_column=self.upper,
                                  leaf_capacity=self.leaf, fanout=self.fanout)

    def build(self, path: Path, spark: Callable[[], Any] | None = None) -> Any:
        """Create the store at ``path`` and return it opened read-only (queries of the corpus
        share it); ``spark()`` gives the session for ``ingest=spark``."""
        store = replaydb.open(path, create=True)
        table = self.source_table()
        if self.ingest == "append":
            from replaydb.indexes.manage import create_index

            store.create_stream(self.stream, self.schema(table.schema))
            store.append(self.stream, table, time_column=self.time)
            for col in self.index:
                create_index(store, self.stream, col)
            return replaydb.open(path, read_only=True)
        from replaydb.ingest.job import ingest

        src = path.parent / f"{path.name}.parquet"
        pq.write_table(table, src)  # the raw file a user would ingest
        if spark is None:
            raise RuntimeError(f"store {self.key} is ingested through Spark: no session given")
        ingest(store, self.stream, [str(src)], time_column=self.time, time_unit=self.unit,
               type_column=self.type_column, upper_column=self.upper, index=list(self.index),
               schema=self.schema(table.schema), spark=spark(), quiet=True)
        src.unlink()
        return replaydb.open(path, read_only=True)


class StoreCache:
    """Stores built under ``root``, one per distinct :class:`StoreSpec`, built on first use."""

    def __init__(self, root: Path, spark: Callable[[], Any] | None = None) -> None:
        self.root = Path(root)
        self.spark = spark
        self._stores: dict[StoreSpec, Any] = {}

    def get(self, spec: StoreSpec) -> Any:
        store = self._stores.get(spec)
        if store is None:
            self.root.mkdir(parents=True, exist_ok=True)
            store = spec.build(self.root / spec.key, self.spark)
            self._stores[spec] = store
        return store

    def for_test(self, request: Any, spec: StoreSpec) -> Any:
        """The store of ``spec`` for the pytest ``request``: starts the session's Spark (the
        ``spark`` fixture) when the store is ingested through Spark, and skips the test when
        its real dataset's package is not cached."""
        import pytest

        if spec.ingest == "spark":
            request.getfixturevalue("spark")
        missing = spec.missing_package()
        if missing:
            pytest.skip(missing)
        return self.get(spec)
