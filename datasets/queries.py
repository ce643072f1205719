"""Random pattern queries for ``synthetic-normal`` (dissertation 3.5.3, "Pattern Queries").

A query has ``m`` basic symbols ``S1..Sm``. Each is assigned one attribute (drawn uniformly from
``attributes``) and a range condition on it: the range covers a fraction of the domain drawn
uniformly from ``[0, max_fraction]`` (0-10% in the paper) at a uniformly random position inside
the domain. Kleene-star symbols (always true) are inserted as the text describes: draw ``x``
uniformly from ``{1, .., m-1}``, insert a KS between ``S_x`` and ``S_{x+1}``, then recurse on the
index set ``{x+1, .., m-1}`` until it is empty. Read literally, the recursion ends exactly when
``x = m-1`` is drawn, so there is always a KS between ``S_{m-1}`` and ``S_m``, and the expected
number of KSs is the harmonic number ``H_{m-1}`` (about ``ln m + 0.58``; the text says "log2(m)
on average", which is close for the paper's m <= 32). The window is 300 time units.

Every query is rendered as MATCH_RECOGNIZE text in one fixed form (contiguous matching, the
thesis's default)::

    SELECT * FROM synthetic MATCH_RECOGNIZE (ORDER BY t
      MEASURES FIRST(S1.seq) AS first_seq, LAST(S4.seq) AS last_seq
      ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW
      PATTERN (S1 S2 T1* S3 S4) WITHIN 300
      DEFINE S1 AS S1.A3 >= 0.41 AND S1.A3 <= 0.47, ..., T1 AS TRUE)

Each Kleene-star symbol gets its own variable ``T1, T2, ..`` defined ``AS TRUE``. Range bounds are
rounded to ``digits`` decimals (the lower bound down, the upper bound up, clamped to the domain),
so the written range always contains the drawn one. ``WITHIN 300`` is a bare number: stream time
units. Everything is deterministic per seed (NumPy ``Generator`` seeded with the seed).
Complexity: O(count * m).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from replaydb.errors import UsageError

DEFAULT_ATTRIBUTES = ("A1", "A2", "A3", "A4", "A5")


@dataclass(frozen=True)
class BasicSymbol:
    """A basic symbol: ``low <= attribute <= high`` (after rounding to the written digits)."""

    name: str
    attribute: str
    low: float
    high: float


@dataclass(frozen=True)
class PatternQuery:
    """A generated query: its symbols, where the Kleene stars sit, and its text.

    ``stars_after[k]`` is the 1-based index of the basic symbol a Kleene star follows.
    """

    symbols: tuple[BasicSymbol, ...]
    stars_after: tuple[int, ...]
    window: int
    text: str

    @property
    def pattern(self) -> tuple[str, ...]:
        """Pattern elements in order, e.g. ``('S1', 'S2', 'T1*', 'S3')``."""
        out: list[str] = []
        stars = {pos: k + 1 for k, pos in enumerate(self.stars_after)}
        for i, s in enumerate(self.symbols, start=1):
            out.append(s.name)
            if i in stars:
                out.append(f"T{stars[i]}*")
        return tuple(out)

    def basic_blocks(self) -> list[list[str]]:
        """Maximal runs of basic symbols with no Kleene star between them."""
        blocks: list[list[str]] = [[]]
        for el in self.pattern:
            if el.endswith("*"):
                blocks.append([])
            else:
                blocks[-1].append(el)
        return [b for b in blocks if b]


def kleene_positions(m: int, rng: np.random.Generator) -> tuple[int, ...]:
    """Positions x (KS between S_x and S_x+1) by the recursive split of the text, ascending."""
    out: list[int] = []
    lo = 1
    while lo <= m - 1:
        x = int(rng.integers(lo, m))  # uniform in {lo, .., m-1}
        out.append(x)
        lo = x + 1
    return tuple(out)


def generate_pattern_queries(
    m: int,
    count: int,
    seed: int = 0,
    *,
    attributes: tuple[str, ...] | list[str] = DEFAULT_ATTRIBUTES,
    stream: str = "synthetic",
    window: int = 300,
    max_fraction: float = 0.1,
    domain: tuple[float, float] = (0.0, 1.0),
    digits: int = 6,
    time_column: str = "t",
) -> list[PatternQuery]:
    """``count`` random queries with ``m`` basic symbols each (see the module docstring)."""
    if m < 1:
        raise UsageError(f"a pattern needs at least one basic symbol, got m={m}")
    if count < 0:
        raise UsageError(f"count must be >= 0, got {count}")
    if not attributes:
        raise UsageError("at least one attribute is needed")
    if not 0.0 <= max_fraction <= 1.0:
        raise UsageError(f"max_fraction must lie in [0, 1], got {max_fraction}")
    dlo, dhi = float(domain[0]), float(domain[1])
    if not dhi > dlo:
        raise UsageError(f"empty domain {domain}")
    if window <= 0:
        raise UsageError(f"window must be positive, got {window}")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, m, 0x5EED])))
    width = dhi - dlo
    scale = 10**digits
    out: list[PatternQuery] = []
    for _ in range(count):
        symbols: list[BasicSymbol] = []
        for i in range(1, m + 1):
            attr = attributes[int(rng.integers(0, len(attributes)))]
            frac = float(rng.random()) * max_fraction
            span = frac * width
            low = dlo + float(rng.random()) * (width - span)
            high = low + span
            low_r = max(dlo, math.floor(low * scale) / scale)
            high_r = min(dhi, math.ceil(high * scale) / scale)
            symbols.append(BasicSymbol(f"S{i}", attr, low_r, high_r))
        stars = kleene_positions(m, rng)
        out.append(_render(symbols, stars, window, stream, time_column, digits))
    return out


def _fmt(x: float, digits: int) -> str:
    s = f"{x:.{digits}f}".rstrip("0")
    return s + "0" if s.endswith(".") else s


def _render(
    symbols: list[BasicSymbol], stars: tuple[int, ...], window: int, stream: str,
    time_column: str, digits: int,
) -> PatternQuery:
    partial = PatternQuery(tuple(symbols), stars, window, "")
    defines = [
        f"{s.name} AS {s.name}.{s.attribute} >= {_fmt(s.low, digits)} "
        f"AND {s.name}.{s.attribute} <= {_fmt(s.high, digits)}"
        for s in symbols
    ]
    defines += [f"T{k + 1} AS TRUE" for k in range(len(stars))]
    first, last = symbols[0].name, symbols[-1].name
    text = (
        f"SELECT * FROM {stream} MATCH_RECOGNIZE (ORDER BY {time_column} "
        f"MEASURES FIRST({first}.seq) AS first_seq, LAST({last}.seq) AS last_seq "
        f"ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
        f"PATTERN ({' '.join(partial.pattern)}) WITHIN {window} "
        f"DEFINE {', '.join(defines)})"
    )
    return PatternQuery(tuple(symbols), stars, window, text)


def random_queries(m: int, count: int, seed: int = 0, **options: Any) -> list[str]:
    """Texts of ``count`` random MATCH_RECOGNIZE queries with ``m`` basic symbols each.

    ``options`` are those of :func:`generate_pattern_queries` (``attributes``, ``stream``,
    ``window``, ``max_fraction``, ...). The paper's workload is ``m`` in (2, 4, 8, 16, 32), 100
    queries each; its uniform-data experiments restrict ``attributes`` to ``("A5",)``.
    """
    return [q.text for q in generate_pattern_queries(m, count, seed, **options)]
