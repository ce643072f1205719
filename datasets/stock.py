"""Stock tickers: SASE's generator (``stock``) and a GRETA-like stock stream (``stock-greta``).

``stock`` (SASE+ paper, section 6): "all events have the same type, stock, that contains three
attributes, symbol, price, volume ... The price of those events has the probability p for
increasing, (1-p)/2 for decreasing, and (1-p)/2 for staying the same. ... The symbol and volume
follow the uniform distribution." (p = 0.7 in most experiments; "we only considered two
symbols"). The value ranges were lost from the text. Decisions: ``symbols`` (default 2) symbols
numbered 1..symbols; volume uniform on ``{1..max_volume}`` (1000); each symbol's price is its own
random walk starting uniform on ``{1..max_price}`` (1000) and moving by exactly +1 / -1 / 0 with
probabilities p, (1-p)/2, (1-p)/2 (option ``p_up``) per event of that symbol, reflected at 1 (a step below 1 leaves
the price at 1, the Lindley recursion ``P = max(1, P + step)``); one event per time unit,
``t = i``. The SASE query template is ``pattern(stock+ a[], stock b) where [symbol] ...``.

``stock-greta`` (GRETA paper, section 10): NYSE transactions of 10 companies, each "carries
volume, price, time stamp in seconds, type (sell or buy), company, sector, and transaction
identifiers". The NYSE data is not available here; decisions: ``companies`` companies, company
``c`` in sector ``c % sectors``; each event picks a company uniformly; each company's price is a
geometric random walk (log-price step N(0, ``volatility``^2) per event of that company, start
uniform in [20, 200)), rounded to cents; volume is 100 x uniform{1..100} shares; side is
'buy'/'sell' with equal probability (the paper's "type (sell or buy)", named ``side`` because
``type`` holds the event type ``Stock``); ``rate`` events per second, ``t = start + i // rate``;
``tid = i``. GRETA's Q1 counts down-trends per sector.

Both: O(N log N) per block (a stable sort by symbol for the per-symbol walks), memory one block.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.datasets import base
from replaydb.datasets.base import ColumnInfo, DatasetInfo, ExampleQuery, OptionInfo, register
from replaydb.errors import UsageError

BLOCK = 1 << 18

# --- SASE stock ------------------------------------------------------------------------------

SASE_NAME = "stock"
SASE_COLUMNS = (
    ColumnInfo("t", "int64", "events", "t = i, one event per time unit"),
    ColumnInfo("type", "string", None, "event type, always 'Stock'"),
    ColumnInfo("symbol", "int64", None, "stock symbol 1..symbols (uniform)"),
    ColumnInfo("price", "int64", None, "per-symbol random walk, +1/-1/0, >= 1"),
    ColumnInfo("volume", "int64", "shares", "uniform 1..max_volume"),
)
SASE_SCHEMA = base.arrow_schema(SASE_COLUMNS)


def floored_walks(
    steps: np.ndarray, keys: np.ndarray, start: np.ndarray, floor: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-key integer random walks ``P = max(floor, P + step)`` evaluated without a loop.

    ``start[k]`` is key k's value before this block. With ``Z = P - floor`` the Lindley recursion
    has the closed form ``Z_n = S_n - min(-Z_0, min_{j<=n} S_j)`` (``S`` the running step sum of
    the key), computed with a stable sort by key, a segmented cumulative sum and a segmented
    running minimum (each segment shifted below the previous ones so one
    ``np.minimum.accumulate`` serves all). Returns the values in stream order and the new starts.
    O(n log n).
    """
    n = steps.size
    new_start = start.copy()
    if n == 0:
        return np.zeros(0, dtype=np.int64), new_start
    cum, order = base.grouped_cumsum(steps.astype(np.int64), keys)
    sk = keys[order]
    sc = cum[order]
    starts = base.segment_starts(sk)
    lengths = np.diff(np.append(starts, n))
    seg = np.repeat(np.arange(starts.size, dtype=np.int64), lengths)
    z0 = (start[sk] - floor).astype(np.int64)
    big = 2 * (n + int(np.abs(z0).max()) + 2)
    shifted = sc - seg * big
    run_min = np.minimum.accumulate(shifted) + seg * big
    z = sc - np.minimum(-z0, run_min)
    out = np.empty(n, dtype=np.int64)
    out[order] = z + floor
    ends = np.append(starts[1:], n) - 1
    new_start[sk[ends]] = z[ends] + floor
    return out, new_start


def _sase_blocks(events: int | None, seed: int, opts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    assert events is not None
    p, k = opts["p_up"], opts["symbols"]
    if not 0.0 <= p <= 1.0:
        raise UsageError(f"{SASE_NAME}: p_up must lie in [0, 1], got {p}")
    if k < 1 or opts["max_price"] < 1 or opts["max_volume"] < 1:
        raise UsageError(f"{SASE_NAME}: symbols, max_price and max_volume must be >= 1")
    price = base.initial_rng(seed, SASE_NAME).integers(1, opts["max_price"] + 1, k + 1)
    stock = base.repeated_string("Stock", BLOCK)
    for lo, hi, rng in base.seeded_blocks(events, BLOCK, seed, SASE_NAME):
        m = BLOCK  # always a whole block, so a stream's prefix does not depend on N
        symbol = rng.integers(1, k + 1, m)
        u = rng.random(m)
        volume = rng.integers(1, opts["max_volume"] + 1, m)
        step = np.where(u < p, 1, np.where(u < p + (1.0 - p) / 2.0, -1, 0)).astype(np.int64)
        prices, price = floored_walks(step, symbol, price, 1)
        t = np.arange(lo, lo + m, dtype=np.int64)
        batch = base.batch_from_arrays(SASE_SCHEMA, [t, stock, symbol, prices, volume])
        yield batch.slice(0, hi - lo)


SASE_INFO = DatasetInfo(
    name=SASE_NAME,
    kind="synthetic",
    title="SASE+ stock ticker stream",
    source="SASE+ paper (SIGMOD 2008), section 6",
    description=(
        "Stock events (symbol, price, volume), one per time unit; each symbol's price rises "
        "with probability p and falls or stays with (1-p)/2 each; symbol and volume uniform. "
        "Workload of Kleene-closure queries over rising prices partitioned by [symbol]."
    ),
    columns=SASE_COLUMNS,
    time_column="t",
    time_unit="s",
    key_columns=("symbol",),
    default_events=1_000_000,
    event_bytes=32,
    suggested_indexes=("symbol", "price", "volume"),
    example_queries=(
        ExampleQuery(
            "sase",
            "PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_next_match(a[], b) "
            "{ [symbol] AND a[1].price % 500 = 0 AND a[i].price > a[i-1].price "
            "AND b.volume < 150 } WITHIN 500",
            "the SASE+ experiment template with predicate p1 (rising prices)",
        ),
        ExampleQuery(
            "match_recognize",
            "SELECT * FROM stock MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY t "
            "MEASURES FIRST(A.price) AS start_price, LAST(A.price) AS top_price, B.volume AS drop_volume "
            "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
            "PATTERN (A{5,} B) WITHIN 500 "
            "DEFINE A AS A.price >= PREV(A.price), B AS B.volume < 150)",
            "a run of at least 5 non-falling prices of one symbol ended by a low-volume event",
        ),
    ),
    options=(
        OptionInfo("p_up", float, 0.7, "probability p that a symbol's price rises on its next event"),
        OptionInfo("symbols", int, 2, "number of symbols"),
        OptionInfo("max_price", int, 1000, "initial prices are uniform on 1..max_price"),
        OptionInfo("max_volume", int, 1000, "volumes are uniform on 1..max_volume"),
    ),
    block_events=f"{BLOCK} events",
)

register(SASE_INFO, SASE_SCHEMA, _sase_blocks)


# --- GRETA stock -----------------------------------------------------------------------------

GRETA_NAME = "stock-greta"
GRETA_COLUMNS = (
    ColumnInfo("t", "int64", "s", "start + i // rate"),
    ColumnInfo("type", "string", None, "event type, always 'Stock'"),
    ColumnInfo("tid", "int64", None, "transaction id = i"),
    ColumnInfo("company", "int64", None, "company 0..companies-1 (uniform)"),
    ColumnInfo("sector", "int64", None, "company % sectors"),
    ColumnInfo("side", "string", None, "'buy' or 'sell' (uniform)"),
    ColumnInfo("price", "double", "USD", "per-company geometric random walk, cents"),
    ColumnInfo("volume", "int64", "shares", "100 x uniform 1..100"),
)
GRETA_SCHEMA = base.arrow_schema(GRETA_COLUMNS)


def _greta_blocks(events: int | None, seed: int, opts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    assert events is not None
    c, sectors, rate, vol = opts["companies"], opts["sectors"], opts["rate"], opts["volatility"]
    if c < 1 or sectors < 1 or rate < 1:
        raise UsageError(f"{GRETA_NAME}: companies, sectors and rate must be >= 1")
    if vol < 0:
        raise UsageError(f"{GRETA_NAME}: volatility must be >= 0, got {vol}")
    log_price = np.log(base.initial_rng(seed, GRETA_NAME).uniform(20.0, 200.0, c))
    stock = base.repeated_string("Stock", BLOCK)
    for lo, hi, rng in base.seeded_blocks(events, BLOCK, seed, GRETA_NAME):
        m = BLOCK  # always a whole block, so a stream's prefix does not depend on N
        company = rng.integers(0, c, m)
        side = rng.integers(0, 2, m).astype(np.int8)
        volume = 100 * rng.integers(1, 101, m)
        steps = vol * rng.standard_normal(m)
        cum, order = base.grouped_cumsum(steps, company)
        lp = log_price[company] + cum
        sk = company[order]
        ends = np.append(base.segment_starts(sk)[1:], m) - 1
        log_price = log_price.copy()
        log_price[sk[ends]] = lp[order][ends]
        i = np.arange(lo, lo + m, dtype=np.int64)
        batch = base.batch_from_arrays(
            GRETA_SCHEMA,
            [
                opts["start"] + i // rate,
                stock,
                i,
                company,
                company % sectors,
                base.strings_from_codes(["buy", "sell"], side),
                np.round(np.exp(lp), 2),
                volume,
            ],
        )
        yield batch.slice(0, hi - lo)


GRETA_INFO = DatasetInfo(
    name=GRETA_NAME,
    kind="synthetic",
    title="GRETA-style stock transactions (companies, sectors)",
    source="GRETA tech report 2017, section 10 (stock data set, query Q1)",
    description=(
        "Buy/sell transactions of companies grouped into sectors, with per-company geometric "
        "random-walk prices; stands in for the NYSE data of GRETA's Q1 (down-trends per sector)."
    ),
    columns=GRETA_COLUMNS,
    time_column="t",
    time_unit="s",
    key_columns=("company", "sector"),
    default_events=2_250_000,
    suggested_indexes=("company", "sector", "price"),
    example_queries=(
        ExampleQuery(
            "greta",
            "RETURN sector, COUNT(*) PATTERN Stock S+ "
            "WHERE [company, sector] AND S.price > NEXT(S).price "
            "GROUP-BY sector WITHIN 10 minutes SLIDE 10 seconds",
            "GRETA Q1: number of down-trends per sector",
        ),
    ),
    options=(
        OptionInfo("companies", int, 10, "number of companies"),
        OptionInfo("sectors", int, 3, "number of sectors (company c is in sector c % sectors)"),
        OptionInfo("rate", int, 100, "events per second"),
        OptionInfo("volatility", float, 0.002, "standard deviation of a log-price step"),
        OptionInfo("start", int, 0, "timestamp of the first event, seconds"),
    ),
    block_events=f"{BLOCK} events",
)

register(GRETA_INFO, GRETA_SCHEMA, _greta_blocks)
