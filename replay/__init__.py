"""replaydb.replay: read planned intervals of stored streams into online operators."""

from replaydb.replay.replay import Replay, ReplayStats, normalize_intervals

__all__ = ["Replay", "ReplayStats", "normalize_intervals"]
