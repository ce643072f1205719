"""``synthetic-normal``: the synthetic pattern-matching stream of the dissertation, section 3.5.3.

Definition (dissertation 3.5.3): N events (50M in the paper), ``e_i.t = i`` for ``i = 1..N``, five
double attributes ``A1..A5`` with ``e_i.Aj ~ N(i/N, sigma_j^2)`` and
``sigma = (0, 0.001, 0.01, 0.1, 1)``, all values in the unit interval ``[0, 1)``, 128-byte events.

Decisions where the text is terse:

* Values outside ``[0, 1)``: the text says they "are not considered" and that A5 therefore becomes
  (approximately) uniform. We read "not considered" as *discarded*: an out-of-range draw is
  redrawn from the same ``N(i/N, sigma_j^2)`` until it falls in ``[0, 1)``
  (``out_of_range="reject"``, the default). Each value is then a normal truncated to ``[0, 1)``;
  for sigma = 1 its density varies over ``[0, 1)`` by at most a factor ``exp(-1/2)`` ~ 0.61, i.e.
  "approximately uniform" as the text says. ``out_of_range="wrap"`` instead takes the value
  modulo 1 (a wrapped normal, uniform to within 1e-8 for sigma = 1) for experiments that need A5
  exactly uniform.
* sigma = 0 gives ``A1 = i/N`` exactly; the last event would have ``A1 = 1.0``, outside
  ``[0, 1)``, and cannot be redrawn, so it becomes the largest double below 1.0.
* 128-byte events: ``t`` (8 bytes), the ``seq`` the store assigns (8 bytes), ``A1..A5`` (40) and
  nine padding doubles ``P1..P9`` (72) make exactly 16 eight-byte fields = 128 bytes. The padding
  is uniform random in ``[0, 1)`` (so a compressed file really holds 128 bytes an event and I/O
  measurements see the paper's width); ``pad=False`` drops it (48 bytes an event on file).

Complexity: O(N) time; memory one block (``BLOCK`` events, about 34 MB with padding).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.datasets import base
from replaydb.datasets.base import ColumnInfo, DatasetInfo, ExampleQuery, OptionInfo, register
from replaydb.datasets.queries import random_queries
from replaydb.errors import UsageError

NAME = "synthetic-normal"
BLOCK = 1 << 18
SIGMAS = (0.0, 0.001, 0.01, 0.1, 1.0)
PAD_COLUMNS = 9
BELOW_ONE = float(np.nextafter(1.0, 0.0))
_MAX_REDRAWS = 10_000


def _schema(opts: dict[str, Any]) -> pa.Schema:
    fields = [pa.field("t", pa.int64(), nullable=False)]
    fields += [pa.field(f"A{j + 1}", pa.float64(), nullable=False) for j in range(len(opts["sigmas"]))]
    if opts["pad"]:
        fields += [pa.field(f"P{k + 1}", pa.float64(), nullable=False) for k in range(PAD_COLUMNS)]
    return pa.schema(fields)


def _draw(mean: np.ndarray, sigma: float, mode: str, rng: np.random.Generator) -> np.ndarray:
    """Values ~ N(mean, sigma^2) brought into [0, 1) by rejection or wrapping (see module doc)."""
    if sigma == 0.0:
        x = mean.copy()
        x[x >= 1.0] = BELOW_ONE
        x[x < 0.0] = 0.0
        return x
    x = mean + sigma * rng.standard_normal(mean.size)
    if mode == "wrap":
        x = np.mod(x, 1.0)
        x[x >= 1.0] = 0.0  # -tiny % 1.0 rounds to 1.0
        return x
    idx = np.flatnonzero((x < 0.0) | (x >= 1.0))
    rounds = 0
    while idx.size:
        rounds += 1
        if rounds > _MAX_REDRAWS:  # unreachable for means in (0, 1]: acceptance >= 1/3 per draw
            raise RuntimeError("synthetic-normal: rejection sampling did not converge")
        y = mean[idx] + sigma * rng.standard_normal(idx.size)
        ok = (y >= 0.0) & (y < 1.0)
        x[idx[ok]] = y[ok]
        idx = idx[~ok]
    return x


def _blocks(events: int | None, seed: int, opts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    assert events is not None
    n = events
    sigmas = opts["sigmas"]
    if any(s < 0 or not math.isfinite(s) for s in sigmas):
        raise UsageError(f"{NAME}: sigmas must be finite and >= 0, got {sigmas}")
    mode = opts["out_of_range"]
    schema = _schema(opts)
    for lo, hi, rng in base.seeded_blocks(n, BLOCK, seed, NAME):
        i = np.arange(lo + 1, hi + 1, dtype=np.int64)
        mean = i / n
        cols: list[Any] = [i]
        for s in sigmas:
            cols.append(_draw(mean, float(s), mode, rng))
        if opts["pad"]:
            cols.extend(rng.random((PAD_COLUMNS, hi - lo)))
        batch = base.batch_from_arrays(schema, cols)
        del cols, mean, i  # the batch owns the block now; keep one block alive, not two
        yield batch
        del batch


_COLUMNS = (
    ColumnInfo("t", "int64", "events", "e_i.t = i, i = 1..N (one event per time unit)"),
    *(
        ColumnInfo(f"A{j + 1}", "double", None, f"~ N(i/N, {s}^2) restricted to [0, 1)")
        for j, s in enumerate(SIGMAS)
    ),
    ColumnInfo("P1..P9", "double", None, "padding to the paper's 128-byte event, uniform [0, 1)"),
)

INFO = DatasetInfo(
    name=NAME,
    kind="synthetic",
    title="Synthetic normal stream for index-based pattern matching",
    source="dissertation 3.5.3 (synthetic data, generated pattern queries)",
    description=(
        "Five attributes whose mean rises linearly with the position i/N and whose spread "
        "(sigma 0 .. 1) controls their temporal correlation; with an index on every attribute "
        "it is the workload of the index-selection experiments. Random MATCH_RECOGNIZE queries "
        "for it come from replaydb.datasets.queries.random_queries."
    ),
    columns=_COLUMNS,
    time_column="t",
    time_unit="s",
    default_events=50_000_000,
    event_bytes=128,
    suggested_indexes=("A1", "A2", "A3", "A4", "A5"),
    example_queries=(
        ExampleQuery(
            "match_recognize",
            random_queries(4, 1, seed=0, attributes=("A5",), stream="synthetic")[0],
            "a generated query (m = 4, attribute A5, window 300 time units); "
            "random_queries(m, count, seed) produces the paper's workload",
        ),
    ),
    options=(
        OptionInfo("out_of_range", str, "reject", "how values outside [0, 1) are handled",
                   ("reject", "wrap")),
        OptionInfo("pad", bool, True, "add padding columns P1..P9 to reach 128-byte events"),
        OptionInfo("sigmas", tuple, SIGMAS, "standard deviations of A1..Ak (comma separated)"),
    ),
    block_events=f"{BLOCK} events",
    stream="synthetic",
    notes=(
        "t counts events, so any --time-unit works for the bare-number windows (WITHIN 300) of "
        "the generated queries; 's' is suggested",
        "the mean depends on N, so a prefix of a larger stream is not the smaller stream",
    ),
)

DATASET = register(INFO, _schema, _blocks)
