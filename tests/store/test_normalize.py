"""Row normalization: time conversion in every common form, casts, per-row bad-row reasons."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from replaydb.errors import SchemaError
from replaydb.store.normalize import convert_time, normalize
from replaydb.store.schema import Attribute, StreamSchema

EPOCH_2024 = 1704067200000  # 2024-01-01T00:00:00Z in ms


@pytest.mark.parametrize("arr,unit,source_unit,fmt,expected", [
    (pa.array([EPOCH_2024, None]), "ms", None, None, [EPOCH_2024, None]),
    (pa.array([1704067200, 1704067201]), "ms", "s", None, [EPOCH_2024, EPOCH_2024 + 1000]),
    (pa.array([1704067200123456789]), "ms", "ns", None, [EPOCH_2024 + 123]),
    (pa.array([1.5]), "ms", "s", None, [1500]),
    (pa.array([dt.datetime(2024, 1, 1, 0, 0, 1)], pa.timestamp("us")), "ms", None, None,
     [EPOCH_2024 + 1000]),
    (pa.array([dt.datetime(2024, 1, 1, 2, 0, 0)], pa.timestamp("s", tz="Europe/Berlin")), "s",
     None, None, [EPOCH_2024 // 1000 + 7200]),
    (pa.array([dt.date(2024, 1, 2)]), "ms", None, None, [EPOCH_2024 + 86_400_000]),
    (pa.array(["2024-01-01T00:00:00.250", "2024-01-01 00:00:01", "2024-01-01T01:00:00+01:00",
               "2024-01-01T00:00:00Z", "2024-01-01", "garbage", None]), "ms", None, None,
     [EPOCH_2024 + 250, EPOCH_2024 + 1000, EPOCH_2024, EPOCH_2024, EPOCH_2024, "bad", None]),
    (pa.array(["01/02/2024 10:00"]), "s", None, "%d/%m/%Y %H:%M", None),
    (pa.array(["1704067200000", "  17 ", "3.5"]), "ms", None, None,
     [EPOCH_2024, 17, 3]),
])
def test_convert_time(arr, unit, source_unit, fmt, expected):
    vals, missing, bad = convert_time(arr, unit, source_unit, fmt)
    got = []
    for v, m, b in zip(vals.tolist(), missing.tolist(), bad.tolist()):
        got.append(None if m else ("bad" if b else v))
    if fmt:  # 1 Feb 2024 10:00 UTC
        expected = [int(dt.datetime(2024, 2, 1, 10, tzinfo=dt.timezone.utc).timestamp())]
    assert got == expected


def test_casts_and_reasons():
    schema = StreamSchema((Attribute("x", "float64"), Attribute("k", "int64"),
                           Attribute("b", "bool"), Attribute("s", "string", nullable=False)),
                          time_column="ts")
    tbl = pa.table({"ts": [1, 2, 3, 4, 5, 6],
                    "x": ["1.5", "abc", "inf", "2", None, "-3e2"],
                    "k": [1.0, 2.0, 3.0, 4.5, 5.0, 6.0],
                    "b": ["true", "FALSE", "1", "0", "maybe", None],
                    "s": ["a", "b", "c", "d", "e", None]})
    n = normalize(tbl, schema)
    bad = {(r["row"], r["column"], r["reason"]) for r in n.bad.to_pylist()}
    assert bad == {(1, "x", "wrong type"), (2, "x", "infinite value"), (3, "k", "wrong type"),
                   (4, "b", "wrong type"), (5, "s", "null value")}
    assert n.good.column("x").to_pylist() == [1.5]
    assert n.good_rows.tolist() == [0]


def test_nan_policies():
    for policy, good, x in [("reject", 1, [1.0]), ("null", 2, [1.0, None]),
                            ("allow", 2, [1.0, "nan"])]:
        schema = StreamSchema((Attribute("x", "float64", nan_policy=policy),), time_column="ts")
        n = normalize(pa.table({"ts": [1, 2], "x": [1.0, float("nan")]}), schema)
        assert n.good.num_rows == good
        got = ["nan" if (v is not None and v != v) else v for v in n.good.column("x").to_pylist()]
        assert got == x


def test_schema_drift_and_duplicates():
    schema = StreamSchema((Attribute("x", "float64"),), time_column="ts")
    with pytest.raises(SchemaError) as ei:
        normalize(pa.table({"ts": [1], "x": [1.0], "new": [2]}), schema)
    assert ei.value.column == "new"
    assert normalize(pa.table({"ts": [1], "x": [1.0], "new": [2]}), schema,
                     extra="ignore").good.num_rows == 1
    missing = normalize(pa.table({"ts": [1]}), schema)
    assert missing.good.column("x").to_pylist() == [None]
    d = normalize(pa.table({"ts": [1, 1, 2, 1], "x": [1.0, 1.0, 1.0, 2.0]}), schema,
                  duplicates="quarantine")
    assert d.bad.column("row").to_pylist() == [1] and d.good.num_rows == 3
    assert np.array_equal(d.good_rows, [0, 2, 3])
