"""A stream's schema and physical layout parameters.

A stream holds events ``(t, seq, a1..ad)``: ``t`` is an int64 count of the stream's time unit,
``seq`` the int64 absolute position assigned by the store, and the attributes are numeric
(float64, int64, bool) or string columns. The source's time column (any name, any common type) is
converted into ``t`` on the way in; its original name is kept as ``time_column`` for display.

Layout parameters (dissertation 3.2, l.2585-2592; decisions documented here):

* **Leaf capacity B** - events per TAB+-tree leaf. The paper uses 8 KiB pages; replaydb stores a
  leaf as one Parquet row group, and 8 KiB row groups would cost more in Parquet metadata than they
  save in reads, so a leaf page defaults to :data:`LEAF_PAGE_BYTES` = 64 KiB:
  ``B = max(64, LEAF_PAGE_BYTES // event_width)`` (1024 events for 64-byte events).
* **Fan-out D** - children per inner node, from an 8 KiB inner page as in the paper: an entry holds
  the child's time range, first seq and count (32 bytes) plus min, max, sum and non-null count of
  every numeric attribute (32 bytes each): ``D = max(8, 8192 // entry_bytes)``.
* ``event_width`` counts 8 bytes for ``t``, ``seq`` and every numeric attribute, 1 for bool, and
  :data:`STRING_WIDTH` for strings.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pyarrow as pa

from replaydb.errors import SchemaError, UsageError
from replaydb.timeunits import check_unit

LEAF_PAGE_BYTES = 64 * 1024
INNER_PAGE_BYTES = 8 * 1024
STRING_WIDTH = 16
RESERVED = ("t", "seq")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

KINDS = ("float64", "int64", "bool", "string")
_NUMERIC = ("float64", "int64", "bool")


def check_name(name: str, what: str) -> str:
    """Validate a stream or column name: letters, digits, underscore; no path characters."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise UsageError(
            f"invalid {what} name {name!r}",
            hint="use letters, digits and '_', starting with a letter or '_' (at most 128 chars)",
        )
    return name


@dataclass(frozen=True)
class Attribute:
    """One attribute column: ``kind`` is float64, int64, bool or string.

    ``nan_policy`` (numeric only) says what a NaN or +-inf value does on ingest: ``reject`` (error
    or quarantine, the default), ``null`` (stored as null) or ``allow`` (stored as is; node
    aggregates skip NaN).
    """

    name: str
    kind: str
    nullable: bool = True
    nan_policy: str = "reject"

    def __post_init__(self) -> None:
        check_name(self.name, "column")
        if self.name in RESERVED:
            raise UsageError(f"column name {self.name!r} is reserved for the store")
        if self.kind not in KINDS:
            raise UsageError(f"column {self.name!r}: unknown kind {self.kind!r}",
                             hint=f"use one of {', '.join(KINDS)}")
        if self.nan_policy not in ("reject", "null", "allow"):
            raise UsageError(f"column {self.name!r}: nan_policy must be reject, null or allow")

    @property
    def numeric(self) -> bool:
        return self.kind in _NUMERIC

    @property
    def arrow_type(self) -> pa.DataType:
        return {"float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_(),
                "string": pa.string()}[self.kind]

    @property
    def width(self) -> int:
        return {"float64": 8, "int64": 8, "bool": 1, "string": STRING_WIDTH}[self.kind]


def kind_of(dtype: pa.DataType) -> str:
    """Map an Arrow type to an attribute kind (integers -> int64, floats -> float64, ...)."""
    if pa.types.is_floating(dtype) or pa.types.is_decimal(dtype):
        return "float64"
    if pa.types.is_integer(dtype):
        return "int64"
    if pa.types.is_boolean(dtype):
        return "bool"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or \
            pa.types.is_string_view(dtype) or pa.types.is_dictionary(dtype):
        return "string"
    if pa.types.is_timestamp(dtype) or pa.types.is_date(dtype) or pa.types.is_duration(dtype):
        return "int64"
    raise SchemaError(f"unsupported column type {dtype}")


DEFAULT_TIME_UNIT = "ms"
"""The unit of a stream created without one."""


class DefaultUnit:
    """The type of :data:`DEFAULT_UNIT`: no time unit was declared (the stream gets
    :data:`DEFAULT_TIME_UNIT`, and a numeric time column stays numbers)."""

    def __repr__(self) -> str:
        return "DEFAULT_UNIT"


DEFAULT_UNIT = DefaultUnit()


@dataclass(frozen=True)
class StreamSchema:
    """Schema and layout of one stream (see the module docstring).

    ``lateness`` is the out-of-order bound in time units: an event older than the newest stored
    event by more than ``lateness`` is rejected (or quarantined on request).
    ``type_column`` names the string column holding event types (for SASE+, GRETA, TPStream
    symbols), if any. ``lower_column``/``upper_column`` declare an imprecise stream's uncertainty
    interval (the lower bound is normally the time column itself, so events are stored ordered by
    it, which satisfies the arrival assumption of the imprecise-timestamp paper); ``pmf_column``
    optionally holds per-event probability weights over the interval (uniform without one).
    ``time_instants``: the times are instants, counts of ``time_unit`` since the Unix epoch
    (query results show them as timestamps); False for a numeric time column ingested without a
    declared unit, whose numbers stay numbers (durations still count in ``time_unit``).
    """

    attributes: tuple[Attribute, ...]
    time_unit: str | None = "ms"
    time_column: str = "t"
    lateness: int = 0
    leaf_capacity: int = 0
    fanout: int = 0
    type_column: str | None = None
    lower_column: str | None = None
    upper_column: str | None = None
    pmf_column: str | None = None
    time_instants: bool = True
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.time_unit is not None:
            check_unit(self.time_unit)
        if self.lateness < 0:
            raise UsageError("lateness must be >= 0")
        names = [a.name for a in self.attributes]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise UsageError(f"duplicate column names: {sorted(dup)}")
        for col in (self.type_column, self.lower_column, self.upper_column, self.pmf_column):
            if col is not None and col not in names and col != self.time_column:
                raise UsageError(f"column {col!r} is not an attribute of the stream")
        if self.upper_column is not None and self.lower_column is None:
            object.__setattr__(self, "lower_column", self.time_column)
        if self.type_column is not None and self.attr(self.type_column).kind != "string":
            raise UsageError(f"type column {self.type_column!r} must be a string column")
        if self.leaf_capacity == 0 or self.fanout == 0:
            b, d = default_layout(self.attributes)
            object.__setattr__(self, "leaf_capacity", self.leaf_capacity or b)
            object.__setattr__(self, "fanout", self.fanout or d)
        if self.leaf_capacity < 1 or self.fanout < 2:
            raise UsageError("leaf_capacity must be >= 1 and fanout >= 2")

    # ------------------------------------------------------------------ accessors
    @property
    def names(self) -> list[str]:
        return [a.name for a in self.attributes]

    @property
    def numeric(self) -> list[Attribute]:
        """Attributes that carry node aggregates (float64, int64, bool)."""
        return [a for a in self.attributes if a.numeric]

    def attr(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise SchemaError(f"unknown column {name!r}", column=name)

    def has(self, name: str) -> bool:
        return name in RESERVED or any(a.name == name for a in self.attributes)

    @property
    def event_width(self) -> int:
        return 16 + sum(a.width for a in self.attributes)

    @functools.cached_property
    def arrow_schema(self) -> pa.Schema:
        """Schema of the stored events: ``t``, ``seq``, attributes (built once per schema
        object: it is frozen, and replay and planning ask for it several times a query)."""
        fields = [pa.field("t", pa.int64(), nullable=False),
                  pa.field("seq", pa.int64(), nullable=False)]
        fields += [pa.field(a.name, a.arrow_type, nullable=a.nullable) for a in self.attributes]
        return pa.schema(fields)

    # ------------------------------------------------------------------ serialization
    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["attributes"] = [asdict(a) for a in self.attributes]
        d.pop("extra", None)
        d["extra"] = dict(self.extra)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StreamSchema:
        d = dict(d)
        attrs = tuple(Attribute(**a) for a in d.pop("attributes"))
        return cls(attributes=attrs, **d)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    def with_attributes(self, attributes: tuple[Attribute, ...]) -> StreamSchema:
        return replace(self, attributes=attributes)

    @classmethod
    def infer(cls, arrow_schema: pa.Schema, *, time_column: str = "t", unit_declared: bool = True,
              **kwargs: Any) -> StreamSchema:
        """Schema for a source table: every column except the time column (and ``seq``) is an
        attribute with its kind inferred from the Arrow type. The times are instants
        (:attr:`time_instants`) when the unit was declared (``unit_declared``) or the source's
        time column holds dates, timestamps or date strings."""
        if time_column not in arrow_schema.names:
            raise SchemaError(f"time column {time_column!r} not found (columns: "
                              f"{', '.join(arrow_schema.names)})", column=time_column)
        attrs = []
        for f in arrow_schema:
            if f.name in (time_column, "seq") or (f.name == "t" and time_column != "t"):
                if f.name == "t" and time_column != "t":
                    raise SchemaError("a source column named 't' clashes with the stored time "
                                      "column; rename it", column="t")
                continue
            attrs.append(Attribute(check_name(f.name, "column"), kind_of(f.type)))
        source_type = arrow_schema.field(time_column).type
        calendar = not (pa.types.is_integer(source_type) or pa.types.is_floating(source_type)
                        or pa.types.is_decimal(source_type))
        kwargs.setdefault("time_instants", unit_declared or calendar)
        return cls(attributes=tuple(attrs), time_column=time_column, **kwargs)


def default_layout(attributes: tuple[Attribute, ...] | list[Attribute]) -> tuple[int, int]:
    """``(B, D)`` for these attributes (module docstring)."""
    width = 16 + sum(a.width for a in attributes)
    b = max(64, LEAF_PAGE_BYTES // width)
    entry = 32 + 32 * sum(1 for a in attributes if a.numeric)
    d = max(8, INNER_PAGE_BYTES // entry)
    return b, d
