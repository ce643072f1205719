"""Dataset descriptions, the registry, and the block machinery every generator streams through.

A dataset is a :class:`DatasetInfo` (what a user reads: columns, units, the time column, suggested
``--time-unit`` and indexes, example queries, options) plus two functions: one returning the Arrow
schema for a set of options, one yielding the stream as a sequence of *blocks*.

Determinism. A generator cuts its stream into blocks of a fixed, generator-defined size (part of
the generator's definition, never derived from the caller's batch size) and draws the random
numbers of block ``b`` from a NumPy ``Generator`` seeded with ``(seed, dataset tag, b)``
(:func:`block_rng`). State that crosses block boundaries (a random walk's last price, the phase a
car is in) is carried from block to block in order. The caller's ``batch_size`` only re-slices the
concatenated blocks (:func:`rechunk`), so the same seed and number of events give the same rows,
byte for byte, whatever batch size is asked for.

Bounded memory. Only one block (plus at most one output batch) is alive at a time, so generating
50M events needs the memory of one block, not of the stream.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import UsageError

DEFAULT_BATCH_SIZE = 1 << 16
"""Rows per yielded record batch unless the caller asks otherwise."""


@dataclass(frozen=True)
class ColumnInfo:
    """One column of a dataset: Arrow type name, unit (None when unitless) and meaning."""

    name: str
    type: str
    unit: str | None
    description: str


@dataclass(frozen=True)
class OptionInfo:
    """A generator option: keyword name (``--name-with-dashes`` on the command line)."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class ExampleQuery:
    """A query text that runs against the dataset once ingested (language names the parser)."""

    language: str
    text: str
    description: str


@dataclass(frozen=True)
class DatasetInfo:
    """Everything a user needs to ingest and query a dataset.

    ``time_column`` and ``time_unit`` are what to pass to
    ``replaydb ingest STORE STREAM FILE --time COL --time-unit U``; ``stream`` is the stream name
    the example queries read (``FROM stream``); once ingested, event time is the store's ``t``
    column, which the example queries use. ``key_columns`` are natural
    partitioning keys (PARTITION BY / equivalence attributes). ``default_events`` is the size the
    papers used (None for real data: all rows). ``block_events`` documents the generator's block.
    """

    name: str
    kind: str  # "synthetic" or "real"
    title: str
    source: str
    description: str
    columns: tuple[ColumnInfo, ...]
    time_column: str
    time_unit: str
    key_columns: tuple[str, ...] = ()
    default_events: int | None = None
    event_bytes: int | None = None
    suggested_indexes: tuple[str, ...] = ()
    example_queries: tuple[ExampleQuery, ...] = ()
    options: tuple[OptionInfo, ...] = ()
    block_events: str | None = None
    notes: tuple[str, ...] = field(default=())
    stream: str = ""

    def __post_init__(self) -> None:
        if not self.stream:
            object.__setattr__(self, "stream", self.name.replace("-", "_"))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable description (option types become their names)."""
        d = asdict(self)
        d["options"] = [
            {**asdict(o), "type": o.type.__name__, "flag": o.flag} for o in self.options
        ]
        return d

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


BlocksFn = Callable[[int | None, int, dict[str, Any]], Iterator[pa.RecordBatch]]
SchemaFn = Callable[[dict[str, Any]], pa.Schema]


def arrow_schema(
    columns: Iterable[ColumnInfo], required: Collection[str] | None = None
) -> pa.Schema:
    """The Arrow schema of ``columns``, in order.

    A column's type is its :attr:`ColumnInfo.type` read as an Arrow type alias (``int64``,
    ``double``, ``float``, ``string``, ``bool``, ...). The columns named in ``required`` (all
    columns when None) are non-null, the others nullable.
    """
    fields = []
    for c in columns:
        nullable = required is not None and c.name not in required
        fields.append(pa.field(c.name, pa.type_for_alias(c.type), nullable=nullable))
    return pa.schema(fields)


def _fixed_schema(schema: pa.Schema) -> SchemaFn:
    """The schema function of a dataset whose schema does not depend on its options."""
    return lambda opts: schema


@dataclass(frozen=True)
class Dataset:
    """A registered dataset: its description and how to produce it."""

    info: DatasetInfo
    schema: SchemaFn
    blocks: BlocksFn

    def resolve_options(self, given: dict[str, Any]) -> dict[str, Any]:
        """Defaults overlaid with ``given``; unknown names, wrong types and choices are errors."""
        known = {o.name: o for o in self.info.options}
        unknown = sorted(set(given) - set(known))
        if unknown:
            valid = ", ".join(sorted(known)) or "none"
            raise UsageError(
                f"dataset {self.info.name!r} has no option {', '.join(map(repr, unknown))}",
                hint=f"its options are: {valid}",
            )
        out: dict[str, Any] = {}
        for name, opt in known.items():
            value = given.get(name, opt.default)
            out[name] = _coerce(self.info.name, opt, value)
        return out


def _coerce(dataset: str, opt: OptionInfo, value: Any) -> Any:
    if value is None:
        return None
    try:
        if opt.type is bool:
            if isinstance(value, str):
                low = value.strip().lower()
                if low not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(value)
                value = low in ("1", "true", "yes", "on")
            else:
                value = bool(value)
        elif opt.type is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            value = int(value)
        elif opt.type is float:
            value = float(value)
        elif opt.type is tuple:
            if isinstance(value, str):
                value = tuple(float(x) for x in value.split(",") if x.strip())
            else:
                value = tuple(float(x) for x in value)
        else:
            value = opt.type(value)
    except (TypeError, ValueError):
        raise UsageError(
            f"dataset {dataset!r}: option {opt.name}={value!r} is not a valid {opt.type.__name__}"
        ) from None
    if opt.choices is not None and value not in opt.choices:
        raise UsageError(
            f"dataset {dataset!r}: option {opt.name}={value!r} is not one of "
            f"{', '.join(map(str, opt.choices))}"
        )
    return value


_REGISTRY: dict[str, Dataset] = {}


def register(info: DatasetInfo, schema: pa.Schema | SchemaFn, blocks: BlocksFn) -> Dataset:
    """Add the dataset ``info`` describes to the registry (names are unique) and return it.

    ``schema`` is its Arrow schema, or, when the schema depends on the options, the function from
    resolved options to the schema; ``blocks`` yields the stream as blocks (see the module doc).
    """
    name = info.name
    if name in _REGISTRY:
        raise ValueError(f"dataset {name!r} registered twice")
    if isinstance(schema, pa.Schema):
        schema = _fixed_schema(schema)
    dataset = _REGISTRY[name] = Dataset(info, schema, blocks)
    return dataset


def registry() -> dict[str, Dataset]:
    """The registered datasets by name (importing :mod:`replaydb.datasets` fills it)."""
    return _REGISTRY


def get_dataset(name: str) -> Dataset:
    """The dataset called ``name``, or a :class:`UsageError` listing the known names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(
            f"unknown dataset {name!r}", hint=f"known datasets: {', '.join(sorted(_REGISTRY))}"
        ) from None


# --- deterministic randomness ----------------------------------------------------------------


def dataset_tag(name: str) -> int:
    """A stable 32-bit tag per dataset name, so equal seeds give unrelated streams per dataset."""
    return zlib.crc32(name.encode("utf-8"))


def block_rng(seed: int, tag: int, index: int) -> np.random.Generator:
    """The random generator of block ``index`` (``index`` -1 is reserved for initial state)."""
    if seed < 0:
        raise UsageError(f"seed must be a non-negative integer, got {seed}")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, tag, index + 1])))


def initial_rng(seed: int, name: str) -> np.random.Generator:
    """The random generator of dataset ``name``'s initial state (block index -1)."""
    return block_rng(seed, dataset_tag(name), -1)


def block_spans(events: int, size: int) -> Iterator[tuple[int, int, int]]:
    """``(index, lo, hi)`` of the blocks of ``size`` events that cover events ``0..events-1``.

    Block ``index`` holds events ``lo = index * size`` up to ``hi = min(events, lo + size)``
    (exclusive); only the last block can be short.
    """
    for index in range(-(-events // size)):
        lo = index * size
        yield index, lo, min(events, lo + size)


def seeded_blocks(
    events: int, size: int, seed: int, name: str
) -> Iterator[tuple[int, int, np.random.Generator]]:
    """``(lo, hi, rng)`` of every block of :func:`block_spans`, with the block's random generator.

    ``rng`` is :func:`block_rng` of ``seed``, dataset ``name``'s tag and the block index. A
    generator that draws a whole block of ``size`` events even for a short last block (keeping
    ``hi - lo`` rows) makes a stream's prefix independent of the number of events asked for.
    """
    tag = dataset_tag(name)
    for index, lo, hi in block_spans(events, size):
        yield lo, hi, block_rng(seed, tag, index)


def check_events(events: int | None, *, allow_none: bool) -> None:
    """Validate a requested event count."""
    if events is None:
        if not allow_none:
            raise UsageError("the number of events is required")
        return
    if isinstance(events, bool) or not isinstance(events, (int, np.integer)) or events < 0:
        raise UsageError(f"events must be a non-negative integer, got {events!r}")


# --- re-chunking ---------------------------------------------------------------------------------


def rechunk(
    blocks: Iterator[pa.RecordBatch], total: int | None, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """Re-slice a block stream into batches of exactly ``batch_size`` rows (the last may be short).

    Stops after ``total`` rows (all rows when None) and closes ``blocks`` then, so a generator
    never produces more than one block past what is needed. Memory: at most one block plus one
    batch. Slices inside one block are zero-copy; a batch spanning blocks is copied once.
    """
    if batch_size <= 0:
        raise UsageError(f"batch size must be positive, got {batch_size}")
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    emitted = 0
    try:
        for block in blocks:
            if total is not None:
                room = total - emitted - pending_rows
                if room <= 0:
                    break
                if block.num_rows > room:
                    block = block.slice(0, room)
            if block.num_rows == 0:
                continue
            pending.append(block)
            pending_rows += block.num_rows
            while pending_rows >= batch_size:
                batch, pending = _take(pending, batch_size)
                pending_rows -= batch_size
                emitted += batch_size
                yield batch
            if total is not None and emitted + pending_rows >= total:
                break
        if pending_rows:
            batch, pending = _take(pending, pending_rows)
            yield batch
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()


def _take(pending: list[pa.RecordBatch], n: int) -> tuple[pa.RecordBatch, list[pa.RecordBatch]]:
    first = pending[0]
    if first.num_rows >= n:
        rest = [first.slice(n)] if first.num_rows > n else []
        return first.slice(0, n), rest + pending[1:]
    table = pa.Table.from_batches(pending)
    batch = table.slice(0, n).combine_chunks().to_batches()[0]
    tail = table.slice(n)
    return batch, [b for b in tail.to_batches() if b.num_rows]


def batch_from_arrays(schema: pa.Schema, arrays: list[Any]) -> pa.RecordBatch:
    """A record batch of ``schema`` from NumPy arrays or Arrow arrays (types cast exactly)."""
    cols = []
    for fld, arr in zip(schema, arrays):
        if isinstance(arr, (pa.Array, pa.ChunkedArray)):
            a = arr if arr.type == fld.type else arr.cast(fld.type)
        else:
            a = pa.array(arr, type=fld.type)
        cols.append(a)
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def repeated_string(value: str, n: int) -> pa.Array:
    """A string array of ``n`` copies of ``value``."""
    return strings_from_codes([value], np.zeros(n, dtype=np.int8))


def strings_from_codes(names: list[str], codes: np.ndarray) -> pa.Array:
    """A string array ``names[codes[i]]`` built in Arrow's C++ kernel (no Python loop)."""
    return pa.array(names, type=pa.string()).take(pa.array(codes, type=pa.int32()))


def segment_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Start index of every run of equal values in a sorted array (always includes 0)."""
    if sorted_keys.size == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    return np.concatenate(([0], change)).astype(np.int64)


def stable_order(keys: np.ndarray) -> np.ndarray:
    """Stable sort order of non-negative integer keys.

    Keys that fit 8 or 16 bits are sorted by NumPy's radix sort (O(n)); others by merge sort.
    """
    if keys.size and keys.min() >= 0:
        top = int(keys.max())
        if top < 256:
            return np.argsort(keys.astype(np.uint8), kind="stable")
        if top < 65536:
            return np.argsort(keys.astype(np.uint16), kind="stable")
    return np.argsort(keys, kind="stable")


def grouped_cumsum(values: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running sum of ``values`` per key, in stream order.

    Returns ``(cum, order)``: ``cum[i]`` is the sum of ``values[j]`` over ``j <= i`` with
    ``keys[j] == keys[i]``; ``order`` is the stable sort order by key. O(n) for small-range keys
    (radix sort), O(n log n) otherwise.
    """
    order = stable_order(keys)
    sv = values[order]
    cs = np.cumsum(sv)
    sk = keys[order]
    starts = segment_starts(sk)
    base = np.zeros(starts.size, dtype=cs.dtype)
    base[1:] = cs[starts[1:] - 1]
    lengths = np.diff(np.append(starts, sk.size))
    cs = cs - np.repeat(base, lengths)
    out = np.empty_like(cs)
    out[order] = cs
    return out, order
