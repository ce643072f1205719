"""replaydb: an offline event store with an index-assisted query planner.

Quick start::

    import replaydb
    store = replaydb.open("my-store", create=True)
    store.append("sensors", table, time_column="ts", time_unit="ms")
    snap = store.stream("sensors")
    snap.aggregate(t0, t1)              # from the TAB+-tree's inner nodes
    replaydb.query(store, "SELECT ... MATCH_RECOGNIZE (...)").table   # planned, index-assisted

Imports are lazy: ``import replaydb`` is cheap, and the ground floor every layer may use
(:mod:`replaydb.errors`, :mod:`replaydb.timeunits`, :mod:`replaydb.spark`,
:mod:`replaydb.batches`) imports nothing else of the project.

This package is also where the layers are composed: the store names no module of a higher layer,
so the side-table kind of the secondary indexes is wired into it here (:func:`_wire_layers`);
every import of a ``replaydb`` module runs this first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replaydb.store import sides as _sides

__version__ = "0.1.0"

if TYPE_CHECKING:
    from replaydb.store.store import Store


def _load_index_side_tables() -> None:
    """Import the indexes' side-table module; it registers the ``lsm`` kind with the store."""
    import replaydb.indexes.sidetable  # noqa: F401


def _wire_layers() -> None:
    """Provide the store with the loaders of the side-table kinds implemented above it; each
    loader runs on first use of its kind (an append to an indexed stream, a check, a vacuum)."""
    _sides.provide("lsm", _load_index_side_tables)


_wire_layers()


def open(path: Any, *, create: bool = False, read_only: bool = False,  # noqa: A001
         storage_options: dict[str, str] | None = None, cache_dir: str | None = None,
         cache_size: int | str | None = None) -> Store:
    """Open the store at ``path`` (``create=True`` makes a new one if none exists there).

    ``path`` is a local directory, a ``file://`` URI, an ``s3://bucket/prefix`` URI or an Azure
    URI (``az://container/prefix``, ``abfss://container@account.dfs.core.windows.net/prefix``).
    A store on an object store is read in place: ``storage_options`` are delta-rs's keys
    (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AZURE_STORAGE_ACCOUNT_KEY``, ...; the
    standard environment variables otherwise), ``cache_dir`` and ``cache_size`` (bytes, or text such as ``"2GiB"``) bound the
    local cache of its small files (:mod:`replaydb.store.mirror`; docs/storage.md)."""
    from replaydb.store.mirror import CacheOptions, parse_size
    from replaydb.store.store import Store

    cache = None
    if cache_dir is not None or cache_size is not None:
        size = CacheOptions.max_bytes if cache_size is None else parse_size(cache_size)
        cache = CacheOptions(dir=cache_dir, max_bytes=size)
    return Store(path, create=create, read_only=read_only, storage_options=storage_options,
                 cache=cache)


def query(store: Any, text: str, **options: Any) -> Any:
    """Run a query; returns a :class:`~replaydb.planner.result.QueryResult`: ``.table``
    (Arrow), ``.stats``, ``to_arrow()``, ``to_pandas()``, ``to_polars()``, and the Arrow
    PyCapsule stream protocol (``polars.DataFrame(result)``, DuckDB's ``FROM result``).

    ``store`` is a :class:`Store` or a store's path; or, for a query without a store, an
    in-memory table (Arrow, pandas, Polars, any Arrow stream exporter), a Parquet file's path,
    or a dict of those by stream name (:mod:`replaydb.tables`: the events are written to a
    temporary store and replayed; ``time_column``, ``time_unit``, ``type_column``,
    ``upper_column`` and ``pmf_column`` say how). Options: ``plan``, ``stream``, ``version``,
    ``state_cap``, ``timeout``, ``max_memory``, ``device``, ``engine``, ``master``,
    ``time_format`` (``timestamp``: result columns holding stream times are Arrow timestamps
    where the stream declares a time unit, the default; ``raw``: int64 counts of the unit),
    ``time_zone`` (default ``UTC``: the zone of those timestamps and of TIMESTAMP literals
    without a zone of their own), and the
    options of the query's planner and operator (:mod:`replaydb.planner.options`; an unknown
    one is a :class:`~replaydb.errors.UsageError` naming the valid ones).
    """
    from replaydb.planner.query import run_query

    if not hasattr(store, "stream"):
        from replaydb.tables import is_table_source, query_tables

        if is_table_source(store):
            return query_tables(store, text, **options)
        store = open(store, read_only=True)
    return run_query(store, text, **options)


def explain(store: Any, text: str, *, analyze: bool = False, **options: Any) -> dict[str, Any]:
    """The plan of a query as a dict (``analyze=True`` executes it and adds what was read;
    ``plot=PATH`` draws the timeline). The dict also renders in a notebook (the plan's tree and
    the picture) and gives the tree as text with ``.text()``."""
    from replaydb.cli.explain_text import Explanation
    from replaydb.planner.query import explain as _explain

    if not hasattr(store, "stream"):
        store = open(store, read_only=True)
    return Explanation(_explain(store, text, analyze=analyze, **options))


def __getattr__(name: str) -> Any:
    if name == "Store":
        from replaydb.store.store import Store

        return Store
    raise AttributeError(f"module 'replaydb' has no attribute {name!r}")
