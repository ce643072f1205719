"""The query languages the hub knows and the planner of each (the registry of
:mod:`replaydb.planner.query`).

Languages are tried in :data:`LANGUAGES` order: the first whose ``detect`` accepts a query's
text parses it. Each entry loads its module on first use (an import named in the code, so the
layering test sees every edge); the built-in languages are detected by
:mod:`replaydb.planner.lang.detect` without loading any module, so a query loads only its own
language. :func:`register_language` adds a language before the built-in ones - a language of
one's own, with ``detect``, ``parse`` and ``bind`` - and returns the call that removes it
again.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from replaydb.planner.lang import detect as detection

Loader = Callable[[], ModuleType]


def _window_sql() -> ModuleType:
    from replaydb.planner.lang import window_sql

    return window_sql


def _match_recognize() -> ModuleType:
    from replaydb.planner.lang import match_recognize

    return match_recognize


def _tpstream() -> ModuleType:
    from replaydb.planner.lang import tpstream

    return tpstream


def _greta() -> ModuleType:
    from replaydb.planner.lang import greta

    return greta


def _sase() -> ModuleType:
    from replaydb.planner.lang import sase

    return sase


def imprecise() -> ModuleType:
    """SASE+ over streams with uncertainty intervals (chosen by the stream, not the text)."""
    from replaydb.planner.lang import imprecise as mod

    return mod


LANGUAGES: list[tuple[str, Loader]] = [
    ("window_sql", _window_sql),
    ("match_recognize", _match_recognize),
    ("tpstream", _tpstream),
    ("greta", _greta),
    ("sase", _sase),
]
"""Languages in detection order (the first whose ``detect`` accepts the text wins)."""


DETECTORS: dict[Loader, Callable[[str], bool]] = {
    _window_sql: detection.window_sql,
    _match_recognize: detection.match_recognize,
    _tpstream: detection.tpstream,
    _greta: detection.greta,
    _sase: detection.sase,
}
"""The built-in languages' detection, by loader: no module is loaded to ask it."""


def detect(text: str) -> tuple[str, ModuleType] | None:
    """The first language in :data:`LANGUAGES` order that accepts ``text``, with its module
    (loaded), or None. A language without an entry in :data:`DETECTORS` is loaded to ask its
    own ``detect``."""
    for name, load in list(LANGUAGES):
        cheap = DETECTORS.get(load)
        if cheap is not None:
            if cheap(text):
                return name, load()
            continue
        mod = load()
        if mod.detect(text):
            return name, mod
    return None


def register_language(name: str, load: Loader) -> Callable[[], None]:
    """Try ``load()``'s module before the built-in languages; returns the call that removes
    it."""
    entry = (name, load)
    LANGUAGES.insert(0, entry)

    def unregister() -> None:
        if entry in LANGUAGES:
            LANGUAGES.remove(entry)

    return unregister


def _window_planner() -> Callable[[Any], Any]:
    from replaydb.planner.window_path import plan_query

    return plan_query


def _pattern_planner() -> Callable[[Any], Any]:
    from replaydb.planner.pattern.planner import plan

    return plan


def _tpstream_planner() -> Callable[[Any], Any]:
    from replaydb.planner.tpstream_plan import plan

    return plan


def _greta_planner() -> Callable[[Any], Any]:
    from replaydb.planner.greta_plan import plan

    return plan


def _imprecise_planner() -> Callable[[Any], Any]:
    from replaydb.planner.imprecise_plan import plan

    return plan


PLANNERS: dict[str, Callable[[], Callable[[Any], Any]]] = {
    "window_sql": _window_planner,
    "match_recognize": _pattern_planner,
    "sase": _pattern_planner,
    "tpstream": _tpstream_planner,
    "greta": _greta_planner,
    "imprecise": _imprecise_planner,
}
"""language -> the loader of its planner (``plan(ctx) -> Plan``); absent: full replay."""


def planner_for(language: str) -> Callable[[Any], Any] | None:
    """The planner of ``language`` (None: the query hub's full replay)."""
    load = PLANNERS.get(language)
    return None if load is None else load()
