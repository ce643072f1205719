"""Time units and durations, shared by every layer.

A stream declares its time unit (``s``, ``ms``, ``us`` or ``ns``); its timestamps are int64 counts
of that unit since the Unix epoch (or since any origin the user chooses for synthetic streams).
Query texts write durations in natural units (``30 MINUTES``, ``INTERVAL '5' SECOND``, ``5s``);
:func:`to_units` converts them into the stream's unit, refusing durations that are not a whole
number of units (a 1 ms window on a stream in seconds is an error, not a silent 0).
"""

from __future__ import annotations

from fractions import Fraction

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
