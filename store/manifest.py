"""The stream manifest: the one record that makes a stream version consistent.

Every commit replaydb makes to a stream's events Delta table carries, in the commit's
``commitInfo`` (custom metadata key :data:`MANIFEST_KEY`), a JSON manifest naming everything that
belongs to that version: the schema, the event count, the head of the TAB+-tree segment chain and
the pinned Delta version of every side table (secondary indexes, quarantine). The events commit is
the stream's commit point:

1. data files, tree segment and side-table commits are written first;
2. the events commit (with the manifest) makes them visible at once;
3. a crash before step 2 leaves only unreferenced files and side-table versions newer than the
   manifest pins - readers never see them, and the next writer rolls the side tables back.

Readers pin an events version, read its manifest and open every side table at the version it names,
so a query sees one consistent snapshot from start to end, whatever commits meanwhile.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from replaydb.errors import CorruptionError
from replaydb.store.schema import StreamSchema

MANIFEST_KEY = "replaydb"
FORMAT = 1
_INSIDE = re.compile(r"(tree/seg-[0-9a-f]+\.parquet|indexes/[A-Za-z_][A-Za-z0-9_]{0,127}|quarantine)")


@dataclass(frozen=True)
class FileInfo:
    """One events data file: ``path`` relative to the events table root; ``row_groups`` leaves;
    ``gap_min``/``gap_max`` the smallest and largest time difference between consecutive events
    inside the file (None for a file of one event)."""

    id: int
    path: str
    rows: int
    size: int
    seq_min: int
    t_min: int
    t_max: int
    row_groups: int
    gap_min: int | None = None
    gap_max: int | None = None


@dataclass(frozen=True)
class SideTableRef:
    """A side table of the stream pinned at a Delta ``version``.

    ``kind`` selects the implementation (``lsm`` for secondary indexes, ``quarantine``);
    ``path`` is relative to the stream directory; ``options`` are kind-specific.
    """

    name: str
    kind: str
    path: str
    version: int
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Manifest:
    """The state of one stream version. ``gap_min``/``gap_max``: the smallest and largest time
    difference between consecutive events of the whole stream (the planner shortens replay
    intervals with them)."""

    schema: StreamSchema
    n_events: int = 0
    t_min: int | None = None
    t_max: int | None = None
    tree_head: str | None = None
    chain: int = 0
    next_file_id: int = 0
    side: tuple[SideTableRef, ...] = ()
    batch_id: str | None = None
    operation: str = "create"
    gap_min: int | None = None
    gap_max: int | None = None
    format: int = FORMAT

    def side_table(self, name: str) -> SideTableRef | None:
        for s in self.side:
            if s.name == name:
                return s
        return None

    def with_side(self, ref: SideTableRef) -> Manifest:
        others = tuple(s for s in self.side if s.name != ref.name)
        return replace(self, side=tuple(sorted((*others, ref), key=lambda s: s.name)))

    def without_side(self, name: str) -> Manifest:
        return replace(self, side=tuple(s for s in self.side if s.name != name))

    def dumps(self) -> str:
        d = asdict(self)
        d["schema"] = self.schema.to_json()
        d["side"] = [asdict(s) for s in self.side]
        return json.dumps(d, sort_keys=True)

    @classmethod
    def loads(cls, text: str) -> Manifest:
        try:
            d = json.loads(text)
            if d.get("format") != FORMAT:
                raise CorruptionError(f"unsupported manifest format {d.get('format')!r}")
            d["schema"] = StreamSchema.from_json(d["schema"])
            d["side"] = tuple(SideTableRef(**s) for s in d.get("side", ()))
            m = cls(**d)
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptionError(f"unreadable stream manifest: {exc}") from exc
        # paths are relative to the stream directory and must stay inside it (a tampered or
        # foreign log must not make a reader - or a recovering writer - go elsewhere)
        for path in [m.tree_head, *[s.path for s in m.side]]:
            if path is not None and not _INSIDE.fullmatch(path):
                raise CorruptionError(f"stream manifest names a path outside the stream: {path!r}")
        return m
