"""Side tables: Delta tables that change together with a stream (secondary indexes, quarantine).

A side table is committed *before* the stream's events commit and pinned by version in the
stream manifest (see :mod:`replaydb.store.manifest`). Implementations register their factories
per ``kind`` (:func:`register`). The store names no module of a higher layer: a kind implemented
above the store (``lsm``, the secondary indexes) is wired in by the layer that composes them,
which names a loader for it with :func:`provide` (``replaydb/__init__.py`` does so for the
indexes); the loader runs on first use of the kind. This module imports only the standard
library and the ground floor, so wiring it costs ``import replaydb`` nothing.

Protocol (duck-typed)::

    side = writer_side(stream_dir, ref)           # latest version, for writing
    new_version = side.apply(events, rewrite_from, batch_id=...)   # None: nothing committed
    side.restore(version)                         # roll back to a pinned version (recovery)
    side.latest_version() -> int
    reader = open_side(stream_dir, ref)           # pinned at ref.version, for reading
    reader.check(snapshot) -> list[str]           # invariants against the stream's data
    garbage(stream_dir) -> list[Path]             # files no committed version references (vacuum)

``events`` is an Arrow table of the new (or rewritten) events with their final ``seq``;
``rewrite_from`` is the first seq whose event was rewritten (late events), or None for a pure
append: entries with ``seq >= rewrite_from`` must be replaced by those in ``events``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replaydb.errors import StoreError

if TYPE_CHECKING:
    from replaydb.store.manifest import SideTableRef

Factory = Callable[[Path, "SideTableRef"], Any]
GarbageFinder = Callable[[Path], list[Path]]

_READERS: dict[str, Factory] = {}
_WRITERS: dict[str, Factory] = {}
_GARBAGE: dict[str, GarbageFinder] = {}


def _load_quarantine() -> None:
    from replaydb.store import quarantine  # noqa: F401  (registers the kind on import)


_LOADERS: dict[str, Callable[[], None]] = {"quarantine": _load_quarantine}


def register(kind: str, reader: Factory, writer: Factory, *,
             garbage: GarbageFinder | None = None) -> None:
    """Register the reader and writer factories of a side-table kind.

    ``garbage(stream_dir)``, if given, lists the files of the kind's tables under the stream's
    folder that no committed version references (``replaydb vacuum`` removes them).
    """
    _READERS[kind] = reader
    _WRITERS[kind] = writer
    if garbage is not None:
        _GARBAGE[kind] = garbage


def provide(kind: str, loader: Callable[[], None]) -> None:
    """Name the loader of a side-table kind implemented above the store: called once, on first
    use of the kind, it must :func:`register` the kind (typically by importing its module)."""
    _LOADERS[kind] = loader


def _ensure(kind: str) -> None:
    if kind not in _READERS:
        loader = _LOADERS.get(kind)
        if loader is None:
            raise StoreError(f"unknown side table kind {kind!r}")
        loader()
        if kind not in _READERS:
            raise StoreError(f"the loader of side table kind {kind!r} did not register it")


def open_side(stream_dir: Path, ref: SideTableRef) -> Any:
    """The side table pinned at ``ref.version`` (read-only use)."""
    _ensure(ref.kind)
    return _READERS[ref.kind](stream_dir, ref)


def writer_side(stream_dir: Path, ref: SideTableRef) -> Any:
    """The side table at its latest version, for writing."""
    _ensure(ref.kind)
    return _WRITERS[ref.kind](stream_dir, ref)


def garbage(stream_dir: Path) -> list[Path]:
    """Files of every known side-table kind under ``stream_dir`` that no committed version
    references (each kind is loaded first); the caller holds the stream's writer lock."""
    for kind in sorted(_LOADERS):
        _ensure(kind)
    return [f for kind in sorted(_GARBAGE) for f in _GARBAGE[kind](stream_dir)]
