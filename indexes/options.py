"""Configuration of an LSM index and the page model its statistics use.

Page model (dissertation 3.5.1: 8 KiB pages): an index entry is the triple (key, seq, t). With a
numeric key it takes 3 x 8 = 24 bytes, so a page holds ``8192 // 24 = 341`` entries. String keys
take ``16 + 4 + mean key length`` bytes (seq and t, a 4-byte length, the bytes). Page counts
(``pages``, the ``pages_read`` cost counter) are logical: ``ceil(entries / entries_per_page)``.
They are what the planner's C_SIO counts; the bytes actually read are counted separately.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

from replaydb.errors import UsageError

PAGE_BYTES = 8192
"""The paper's page size (8 KiB)."""

NUMERIC_ENTRY_BYTES = 24
"""key (8) + seq (8) + t (8)."""

ENTRIES_PER_PAGE = PAGE_BYTES // NUMERIC_ENTRY_BYTES
"""341 entries of a numeric index per 8 KiB page."""

KEY_TYPES = ("int64", "float64", "string")


def entries_per_page(key_type: str, mean_key_bytes: float = 0.0) -> int:
    """Entries per logical 8 KiB page for an index of ``key_type`` (see the module docstring)."""
    if key_type == "string":
        return max(1, int(PAGE_BYTES // (16 + 4 + max(0.0, mean_key_bytes))))
    return ENTRIES_PER_PAGE


@dataclass(frozen=True)
class LSMOptions:
    """Tuning of one LSM index; stored in the Delta table's description at creation.

    Levels (leveling, one run per level, as the paper's "single data file per level"):
    level 0 holds up to ``l0_max_runs`` flushed runs; level i >= 1 holds one run of at most
    ``l1_max_entries * size_ratio ** (i - 1)`` entries. A compaction merges the runs of levels
    s..d into one run at level d (see :mod:`replaydb.indexes.levels`).

    ``row_group_entries``: Parquet row group size of run files; a range query reads whole row
    groups, so this is its read granularity (8192 entries = 24 pages of 8 KiB).
    ``sample_every``: one key of every ``sample_every`` entries goes into the file's sparse key
    sample (its equi-depth histogram); the count estimate errs by at most ``sample_every - 1``
    entries per range boundary per file. ``max_samples_per_file`` caps the sample (the step grows
    for bigger files).
    ``seq_bins``: bins of the per-file equi-width seq histogram (used to estimate the effect of
    seq-range tombstones and ``max_seq`` on counts).
    ``target_file_entries``: a compaction output (or bulk run) bigger than this is split into
    several files (parts of one run) with ascending key ranges; 0 = never split.
    ``auto_compact``: ``flush()`` runs ``compact()`` when the level policy asks for it.
    ``compression``: Parquet codec of run files ("none", "snappy", "zstd", "lz4").
    ``fsync``: fsync run files before they are committed (protects against OS crashes, not needed
    for process crashes).
    ``threads``: threads for sorting and writing runs of at least ``parallel_min_entries``
    entries (0 = the CPUs available, at most 8; default 1 = no threads: on a machine whose cores
    are busy - Spark tasks, other queries - extra threads only add contention). Such runs are
    written as several files (parts) with disjoint (key, seq) ranges.
    ``rank_codes``: write beside each numeric, uncompressed run file its rank codes
    (:mod:`replaydb.indexes.rankcodes`: two bytes per seq the file spans), with which the
    planner tests a few events against a lookup without a pass over its seqs.
    """

    size_ratio: int = 10
    l0_max_runs: int = 4
    l1_max_entries: int = 1 << 21
    row_group_entries: int = 8192
    sample_every: int = ENTRIES_PER_PAGE
    max_samples_per_file: int = 1 << 16
    seq_bins: int = 1024
    target_file_entries: int = 0
    auto_compact: bool = True
    compression: str = "none"
    fsync: bool = False
    threads: int = 1
    parallel_min_entries: int = 1 << 21
    rank_codes: bool = True

    def __post_init__(self) -> None:
        if self.size_ratio < 2:
            raise UsageError(f"LSMOptions.size_ratio must be >= 2, got {self.size_ratio}")
        if self.l0_max_runs < 1:
            raise UsageError(f"LSMOptions.l0_max_runs must be >= 1, got {self.l0_max_runs}")
        if self.l1_max_entries < 1:
            raise UsageError(f"LSMOptions.l1_max_entries must be >= 1, got {self.l1_max_entries}")
        if self.row_group_entries < 1:
            raise UsageError("LSMOptions.row_group_entries must be >= 1")
        if self.sample_every < 1 or self.max_samples_per_file < 2:
            raise UsageError("LSMOptions.sample_every must be >= 1, max_samples_per_file >= 2")
        if self.seq_bins < 1:
            raise UsageError("LSMOptions.seq_bins must be >= 1")
        if self.threads < 0 or self.parallel_min_entries < 1:
            raise UsageError("LSMOptions.threads must be >= 0, parallel_min_entries >= 1")
        if self.target_file_entries < 0:
            raise UsageError("LSMOptions.target_file_entries must be >= 0")
        if self.compression not in ("none", "snappy", "zstd", "lz4", "gzip"):
            raise UsageError(f"LSMOptions.compression: unknown codec {self.compression!r}")

    def level_capacity(self, level: int) -> int:
        """Maximum entries of the run at ``level`` (>= 1)."""
        return self.l1_max_entries * self.size_ratio ** (level - 1)

    def fit_level(self, entries: int) -> int:
        """Smallest level >= 1 whose capacity holds ``entries``."""
        level = 1
        while self.level_capacity(level) < entries:
            level += 1
        return level

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LSMOptions:
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
