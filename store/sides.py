"""Side tables: Delta tables that change together with a stream (secondary indexes, quarantine).

A side table is committed *before* the stream's events commit and pinned by version in the
stream manifest (see :mod:`replaydb.store.manifest`). Implementations register a factory per
``kind``; the store imports the implementing module on first use, so the store does not depend
on the index layer at import time.

Protocol (duck-typed)::

    side = writer_side(stream_dir, ref)           # latest version, for writing
    new_version = side.apply(events, rewrite_from, batch_id=...)   # None: nothing committed
    side.restore(version)                         # roll back to a pinned version (recovery)
    side.latest_version() -> int
    reader = open_side(stream_dir, ref)           # pinned at ref.version, for reading
    reader.check(snapshot) -> list[str]           # invariants against the stream's data

``events`` is an Arrow table of the new (or rewritten) events with their final ``seq``;
``rewrite_from`` is the first seq whose event was rewritten (late events), or None for a pure
append: entries with ``seq >= rewrite_from`` must be replaced by those in ``events``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replaydb.errors import StoreError
from replaydb.store.manifest import SideTableRef

_READERS: dict[str, Callable[[Path, SideTableRef], Any]] = {}
_WRITERS: dict[str, Callable[[Path, SideTableRef], Any]] = {}
_MODULES = {"lsm": "replaydb.indexes.sidetable", "quarantine": "replaydb.store.quarantine"}


def register(kind: str, reader: Callable[[Path, SideTableRef], Any],
             writer: Callable[[Path, SideTableRef], Any]) -> None:
    """Register the reader and writer factories of a side-table kind."""
    _READERS[kind] = reader
    _WRITERS[kind] = writer


def _ensure(kind: str) -> None:
    if kind not in _READERS:
        module = _MODULES.get(kind)
        if module is None:
            raise StoreError(f"unknown side table kind {kind!r}")
        importlib.import_module(module)
        if kind not in _READERS:
            raise StoreError(f"module {module} did not register side table kind {kind!r}")


def open_side(stream_dir: Path, ref: SideTableRef) -> Any:
    """The side table pinned at ``ref.version`` (read-only use)."""
    _ensure(ref.kind)
    return _READERS[ref.kind](stream_dir, ref)


def writer_side(stream_dir: Path, ref: SideTableRef) -> Any:
    """The side table at its latest version, for writing."""
    _ensure(ref.kind)
    return _WRITERS[ref.kind](stream_dir, ref)
