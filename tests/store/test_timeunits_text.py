"""Times and durations as people read them (``replaydb stats``, ``ingest``, the shell), and the
exact durations of EXPLAIN."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from replaydb.timeunits import (
    UNITS,
    describe_range,
    describe_span,
    format_duration,
    format_instant,
)


def test_instants_and_ranges() -> None:
    assert format_instant(978_307_260_000, "ms") == "2001-01-01 00:01"
    assert format_instant(978_307_260_123, "ms") == "2001-01-01 00:01:00.123"
    assert format_instant(978_307_261, "s") == "2001-01-01 00:01:01"
    assert format_instant(3_904, "s") is None  # 1970: no plausible epoch time
    assert format_instant(978_307_260_000, None) is None
    assert describe_range(978_307_260_000, 993_945_600_000, "ms") == \
        "2001-01-01 00:01 .. 2001-07-01 00:00 UTC (181 days)"
    assert describe_range(0, 3_904, "s") == "0 .. 3904 s (1.08 hours)"
    assert describe_range(5, 9, None) == "5 .. 9 units (4 units)"


def test_spans_pick_the_largest_whole_unit() -> None:
    assert describe_span(1, "ns") == "1 nanosecond"
    assert describe_span(90, "s") == "1.5 minutes"
    assert describe_span(86_400, "s") == "1 day"
    assert describe_span(250 * 86_400_000, "ms") == "250 days"
    assert format_duration(90, "s") == "90s"  # exact, as EXPLAIN shows windows


@given(st.integers(31_536_000, 7_258_118_400 - 1), st.sampled_from(sorted(UNITS)))
def test_instants_round_trip_through_datetime(seconds: int, unit: str) -> None:
    value = seconds * 10**9 // UNITS[unit]
    text = format_instant(value, unit)
    assert text is not None
    fmt = "%Y-%m-%d %H:%M:%S" if text.count(":") == 2 else "%Y-%m-%d %H:%M"
    parsed = dt.datetime.strptime(text, fmt).replace(tzinfo=dt.timezone.utc)
    assert int(parsed.timestamp()) == seconds
