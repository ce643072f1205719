"""Key ranges of queries: validation and normalization of bounds, overlap tests.

A bound of None is unbounded. Numeric bounds: NaN is an error; -inf/+inf become unbounded (or an
empty range: lo=+inf, hi=-inf); for an int64 index a fractional bound becomes the inclusive
integer inside the range (``key >= 2.5`` is ``key >= 3``), and bounds beyond int64 are clamped.
String bounds compare in byte order of UTF-8 (Python's str order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from replaydb.errors import UsageError

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class KeyRange:
    """lo <= key <= hi with the inclusiveness flags; ``empty``: matches nothing."""

    lo: Any
    hi: Any
    lo_inclusive: bool
    hi_inclusive: bool
    empty: bool = False

    def overlaps(self, kmin: Any, kmax: Any) -> bool:
        """Whether keys in [kmin, kmax] can fall in the range (False for an empty file)."""
        if kmin is None or self.empty:
            return False
        if self.hi is not None and (kmin > self.hi or (kmin == self.hi and not self.hi_inclusive)):
            return False
        if self.lo is not None and (kmax < self.lo or (kmax == self.lo and not self.lo_inclusive)):
            return False
        return True


def _num_bound(key_type: str, v: Any, inclusive: bool, name: str) -> tuple[Any, bool, bool]:
    """(bound, inclusive, makes the range empty)."""
    if v is None:
        return None, inclusive, False
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise UsageError(f"{name}={v!r}: a {key_type} index takes numeric bounds")
    f = float(v)
    if math.isnan(f):
        raise UsageError(f"{name} is NaN")
    if math.isinf(f):
        if (name == "lo") == (f < 0):
            return None, inclusive, False  # lo=-inf / hi=+inf: unbounded
        return None, inclusive, True  # lo=+inf / hi=-inf: empty
    if key_type == "float64":
        return f, bool(inclusive), False
    if isinstance(v, (float, np.floating)) and not f.is_integer():
        iv = math.ceil(f) if name == "lo" else math.floor(f)
        inclusive = True
    else:
        iv = int(v)
    if iv > _INT64_MAX:
        return None, inclusive, name == "lo"
    if iv < _INT64_MIN:
        return None, inclusive, name == "hi"
    return iv, bool(inclusive), False


def key_range(
    key_type: str, lo: Any, hi: Any, lo_inclusive: bool = True, hi_inclusive: bool = True
) -> KeyRange:
    """Validated, normalized range (see module docstring); UsageError for bad bounds."""
    if key_type == "string":
        for name, v in (("lo", lo), ("hi", hi)):
            if v is not None and not isinstance(v, str):
                raise UsageError(f"{name}={v!r}: a string index takes str bounds")
        empty = False
    else:
        lo, lo_inclusive, e1 = _num_bound(key_type, lo, lo_inclusive, "lo")
        hi, hi_inclusive, e2 = _num_bound(key_type, hi, hi_inclusive, "hi")
        empty = e1 or e2
    if not empty and lo is not None and hi is not None:
        empty = lo > hi or (lo == hi and not (lo_inclusive and hi_inclusive))
    return KeyRange(lo, hi, bool(lo_inclusive), bool(hi_inclusive), empty)


def prefix_successor(prefix: str) -> str | None:
    """Smallest string greater than every string starting with ``prefix`` (None: no bound)."""
    chars = list(prefix)
    while chars:
        c = ord(chars[-1])
        if c < 0x10FFFF:
            c += 1
            if 0xD800 <= c <= 0xDFFF:
                c = 0xE000
            chars[-1] = chr(c)
            return "".join(chars)
        chars.pop()
    return None
