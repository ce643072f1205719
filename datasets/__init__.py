"""replaydb.datasets: reproducible workloads of the papers and real event data from packages.

Generators (deterministic per seed, streamed in bounded memory):

- ``synthetic-normal`` (dissertation 3.5.3) and its random MATCH_RECOGNIZE queries
  (:func:`random_queries`),
- ``window-agg`` (dissertation 3.5.2), ``gpu-bench`` (dissertation 4.4.1),
- ``situations`` (TPStream's synthetic situation streams), ``traffic`` (Linear-Road-shaped
  position reports with accidents),
- ``stock`` (SASE+), ``stock-greta`` and ``cluster`` (GRETA), ``imprecise`` (imprecise timestamps).

Real data: ``flights-3m`` (npm package vega-datasets 3.2.1) and ``opensky`` (PyPI package
traffic 2.13), fetched into a local cache (see :mod:`replaydb.datasets.packages`).

API::

    list_datasets() -> list[DatasetInfo]
    describe(name) -> DatasetInfo
    generate(name, events=None, seed=0, *, batch_size=65536, **opts) -> Iterator[pa.RecordBatch]
    make(name, out_path, events=None, seed=0, *, row_group_size=524288, compression="snappy",
         overwrite=False, **opts) -> MakeResult
    load_flights(cache_dir=None, dedup=False) -> pa.Table
    load_opensky(cache_dir=None) -> pa.Table
    random_queries(m, count, seed=0, *, attributes=..., stream="synthetic", window=300) -> list[str]

Every dataset is a time-ordered stream whose time column and unit ``list_datasets()`` names, ready
for ``replaydb ingest STORE STREAM FILE --time COL --time-unit U``.
"""

from replaydb.datasets import (  # noqa: F401  (imports register the datasets)
    cluster,
    flights,
    gpu_bench,
    imprecise,
    opensky,
    situations,
    stock,
    synthetic_normal,
    traffic,
    window_agg,
)
from replaydb.datasets.api import MakeResult, describe, generate, list_datasets, make, schema
from replaydb.datasets.base import ColumnInfo, DatasetInfo, ExampleQuery, OptionInfo
from replaydb.datasets.flights import load_flights
from replaydb.datasets.opensky import load_opensky
from replaydb.datasets.packages import SourceUnavailable
from replaydb.datasets.queries import PatternQuery, generate_pattern_queries, random_queries

__all__ = [
    "ColumnInfo",
    "DatasetInfo",
    "ExampleQuery",
    "MakeResult",
    "OptionInfo",
    "PatternQuery",
    "SourceUnavailable",
    "describe",
    "generate",
    "generate_pattern_queries",
    "list_datasets",
    "load_flights",
    "load_opensky",
    "make",
    "random_queries",
    "schema",
]
