"""Time units and durations, shared by every layer.

A stream declares its time unit (``s``, ``ms``, ``us`` or ``ns``); its timestamps are int64 counts
of that unit since the Unix epoch (or since any origin the user chooses for synthetic streams).
Query texts write durations in natural units (``30 MINUTES``, ``INTERVAL '5' SECOND``, ``5s``);
:func:`to_units` converts them into the stream's unit, refusing durations that are not a whole
number of units (a 1 ms window on a stream in seconds is an error, not a silent 0).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from replaydb.errors import UsageError

UNITS: dict[str, int] = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
"""Nanoseconds per stream time unit."""

_DURATION_WORDS: dict[str, int] = {}
for _names, _ns in [
    (("ns", "nanosecond", "nanoseconds"), 1),
    (("us", "microsecond", "microseconds"), 1_000),
    (("ms", "millisecond", "milliseconds", "millis"), 1_000_000),
    (("s", "sec", "secs", "second", "seconds"), 1_000_000_000),
    (("m", "min", "mins", "minute", "minutes"), 60_000_000_000),
    (("h", "hr", "hrs", "hour", "hours"), 3_600_000_000_000),
    (("d", "day", "days"), 86_400_000_000_000),
    (("w", "week", "weeks"), 7 * 86_400_000_000_000),
]:
    for _n in _names:
        _DURATION_WORDS[_n] = _ns

ARROW_UNITS = {"s": "s", "ms": "ms", "us": "us", "ns": "ns"}


def check_unit(unit: str) -> str:
    """Return ``unit`` if it is a valid stream time unit, else raise :class:`UsageError`."""
    if unit not in UNITS:
        raise UsageError(f"unknown time unit {unit!r}", hint="use one of s, ms, us, ns")
    return unit


def duration_word_ns(word: str) -> int | None:
    """Nanoseconds in one ``word`` (``'minutes'`` -> 60e9), or None when it is no duration word."""
    return _DURATION_WORDS.get(word.lower())


MAX_DURATION = 2**62
"""The largest duration in stream units: a time plus a duration stays within int64."""


def to_units(amount: int | float | Fraction, word: str, unit: str | None) -> int:
    """Convert ``amount`` of duration ``word`` into whole units of ``unit``.

    With ``unit`` None (a stream without a declared unit, e.g. synthetic ``t = i``), only the bare
    word ``units``/``events``/``ticks`` or no word is allowed and the amount is taken as is.
    A result beyond :data:`MAX_DURATION` either way is a UsageError.
    """
    return _in_range(_to_units(amount, word, unit), amount, word)


def _in_range(value: int, amount: object, word: str) -> int:
    if abs(value) > MAX_DURATION:
        raise UsageError(f"duration {amount} {word} is out of range (at most 2**62 time units)")
    return value


def _to_units(amount: int | float | Fraction, word: str, unit: str | None) -> int:
    w = word.lower()
    if w in ("", "unit", "units", "tick", "ticks", "t"):
        value = Fraction(amount)
        if value.denominator != 1:
            raise UsageError(f"duration {amount} {word} is not a whole number of time units")
        return int(value)
    ns = duration_word_ns(w)
    if ns is None:
        raise UsageError(f"unknown duration unit {word!r}")
    if unit is None:
        raise UsageError(
            f"duration {amount} {word} needs a stream with a declared time unit",
            hint="write the duration in the stream's units, e.g. WITHIN 300",
        )
    total = Fraction(amount) * ns / UNITS[check_unit(unit)]
    if total.denominator != 1:
        raise UsageError(f"duration {amount} {word} is not a whole number of {unit}")
    return int(total)


def format_duration(value: int, unit: str | None) -> str:
    """Human-readable duration of ``value`` stream units (for EXPLAIN and summaries)."""
    if unit is None:
        return f"{value} units"
    ns = value * UNITS[unit]
    for name, size in [("d", 86_400 * 10**9), ("h", 3600 * 10**9), ("min", 60 * 10**9),
                       ("s", 10**9), ("ms", 10**6), ("us", 10**3)]:
        if ns >= size and ns % size == 0:
            return f"{ns // size}{name}"
    return f"{ns}ns"


EPOCH_SECONDS = (31_536_000, 7_258_118_400)
"""Plausible epoch times, in seconds: 1971-01-01 .. 2200-01-01 (people read these as dates)."""
_SPAN_WORDS = (("day", 86_400 * 10**9), ("hour", 3_600 * 10**9), ("minute", 60 * 10**9),
               ("second", 10**9), ("millisecond", 10**6), ("microsecond", 10**3))


def format_instant(value: int, unit: str | None) -> str | None:
    """``value`` (stream units since the epoch) as a UTC date and time a person reads
    (``2001-03-01 08:00``; seconds and fractions only when they are not zero), or None when the
    unit is unknown or the value is no plausible epoch time (before 1971 or after 2199)."""
    import datetime as dt

    if unit not in UNITS:
        return None
    ns = int(value) * UNITS[unit]
    if not EPOCH_SECONDS[0] <= ns // 10**9 <= EPOCH_SECONDS[1]:
        return None
    seconds, frac = divmod(ns, 10**9)
    stamp = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
    text = stamp.strftime("%Y-%m-%d %H:%M" if stamp.second == 0 and frac == 0
                          else "%Y-%m-%d %H:%M:%S")
    if frac:
        text += f".{frac:09d}".rstrip("0")
    return text


def describe_span(value: int, unit: str | None) -> str:
    """An approximate duration a person reads (``181 days``, ``4.5 hours``) of ``value`` stream
    units: the largest unit of at least one, to 3 significant figures. Exact durations (query
    windows, EXPLAIN) use :func:`format_duration`."""
    if unit not in UNITS:
        return f"{value} units"
    ns = int(value) * UNITS[unit]
    for name, size in _SPAN_WORDS:
        if ns >= size:
            amount = ns / size
            text = f"{amount:.0f}" if amount >= 100 or amount.is_integer() else f"{amount:.3g}"
            return f"{text} {name}{'' if text == '1' else 's'}"
    return f"{ns} nanosecond{'' if ns == 1 else 's'}"


def describe_range(t_min: int, t_max: int, unit: str | None) -> str:
    """A stream's time range as a person reads it: ``2001-01-01 00:01 .. 2001-06-30 23:00 UTC
    (181 days)`` when both ends are plausible epoch times, else ``0 .. 3904 s (1.08 hours)``."""
    lo, hi = format_instant(t_min, unit), format_instant(t_max, unit)
    span = describe_span(t_max - t_min, unit)
    if lo is not None and hi is not None:
        return f"{lo} .. {hi} UTC ({span})"
    return f"{t_min} .. {t_max} {unit or 'units'} ({span})"


# --------------------------------------------------------------------------- instants
_INSTANT = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
    r"(?:\s*(Z|[+-]\d{2}(?::?\d{2})?)|\s+([A-Za-z][\w+\-/]*))?")
INSTANT_FORMS = "YYYY-MM-DD[ HH:MM[:SS[.fraction]]][ zone]"
"""What a ``TIMESTAMP '...'`` literal may hold (zone: ``Z``, ``+02:00``, ``UTC``,
``Europe/Berlin``); a ``DATE '...'`` literal holds the date alone."""


def time_zone(name: str) -> Any:
    """The ``tzinfo`` of zone ``name`` (``UTC``, ``Europe/Berlin``, ``+02:00``); UsageError
    for an unknown one."""
    import datetime as dt
    import zoneinfo

    m = re.fullmatch(r"([+-])(\d{2}):?(\d{2})?", name)
    if m:
        minutes = int(m.group(2)) * 60 + int(m.group(3) or 0)
        if minutes >= 24 * 60:
            raise UsageError(f"time zone offset {name!r} is out of range")
        sign = -1 if m.group(1) == "-" else 1
        return dt.timezone(sign * dt.timedelta(minutes=minutes))
    if name.upper() in ("UTC", "Z", "GMT"):
        return dt.timezone.utc
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"unknown time zone {name!r}",
                         hint="use UTC, an offset such as +02:00, or a zone name such as "
                              "Europe/Berlin") from None


def check_time_zone(name: str) -> str:
    """``name`` if it is a time zone results can be shown in (see :func:`time_zone`)."""
    if not isinstance(name, str) or not name:
        raise UsageError(f"time zone must be a zone name, not {name!r}", hint="e.g. UTC")
    time_zone(name)
    return name


def instant_ns(text: str, kind: str = "TIMESTAMP", zone: str = "UTC") -> int:
    """Nanoseconds since the Unix epoch of the instant a ``TIMESTAMP`` (or ``DATE``) literal's
    ``text`` names (:data:`INSTANT_FORMS`); a text without a zone is a wall-clock time in
    ``zone``. ValueError saying what is wrong for anything else."""
    import datetime as dt

    m = _INSTANT.fullmatch(text.strip())
    if m is None:
        want = "YYYY-MM-DD" if kind == "DATE" else INSTANT_FORMS
        raise ValueError(f"bad {kind} literal {text!r}: expected {want}")
    y, mo, d, h, mi, s, frac, offset, name = m.groups()
    if kind == "DATE" and (h is not None or offset or name):
        raise ValueError(f"bad DATE literal {text!r}: a date has no time or zone "
                         f"(write TIMESTAMP '{text.strip()}')")
    try:
        wall = dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0))
    except ValueError as exc:
        raise ValueError(f"bad {kind} literal {text!r}: {exc}") from None
    try:
        tz = time_zone(offset or name or zone)
    except UsageError as exc:
        raise ValueError(f"bad {kind} literal {text!r}: {exc}") from None
    return epoch_ns(wall.replace(tzinfo=tz)) + int((frac or "").ljust(9, "0"))


def epoch_ns(stamp: Any) -> int:
    """Nanoseconds since the Unix epoch of a ``datetime`` (a naive one is read as UTC),
    exactly (a datetime holds microseconds)."""
    import datetime as dt

    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.timezone.utc)
    delta = stamp - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return ((delta.days * 86_400 + delta.seconds) * 10**6 + delta.microseconds) * 1_000


def instant_units(text: str, kind: str, unit: str | None, zone: str = "UTC") -> int:
    """The literal's instant in ``unit`` since the epoch (a stream's stored time). ValueError
    when the stream declares no unit or the instant is finer than its unit."""
    ns = instant_ns(text, kind, zone)
    if unit is None:
        raise ValueError(f"{kind} '{text}' needs a stream with a declared time unit "
                         "(this stream's times are plain numbers)")
    value, rest = divmod(ns, UNITS[check_unit(unit)])
    if rest:
        raise ValueError(f"{kind} '{text}' is finer than the stream's time unit ({unit})")
    if abs(value) >= 2**63:
        raise ValueError(f"{kind} '{text}' is out of range for int64 {unit}")
    return value


def instant_strings(values: Any, iso: bool = False) -> Any:
    """An Arrow timestamp array as strings a person or a JSON reader takes: ``2001-03-01
    08:00:00`` (fractions only where not zero) in the column's zone, the zone's offset appended
    unless it is UTC; ``iso``: ISO-8601 (``2001-03-01T08:00:00Z``). Nulls stay null.
    Vectorized (Arrow compute), O(rows)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tz = values.type.tz
    utc = tz is None or tz.upper() in ("UTC", "Z", "GMT", "+00:00")
    text = pc.strftime(values, format="%Y-%m-%dT%H:%M:%S" if iso else "%Y-%m-%d %H:%M:%S")
    text = pc.replace_substring_regex(text, r"(\.\d*?)0+$", r"\1")
    text = pc.replace_substring_regex(text, r"\.$", "")
    if utc:
        return pc.binary_join_element_wise(text, pa.scalar("Z"), "") if iso else text
    offset = pc.strftime(values, format="%z")
    offset = pc.replace_substring_regex(offset, r"(\d\d)$", r":\1")
    return pc.binary_join_element_wise(text, offset, "" if iso else " ")
