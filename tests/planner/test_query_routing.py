"""The query hub routes each language to its operator over stored streams."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.errors import QueryError, UsageError
from replaydb.store.schema import Attribute, StreamSchema


def test_sase_on_an_imprecise_stream_reports_confidences(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    sch = StreamSchema((Attribute("hi", "int64"), Attribute("type", "string"),
                        Attribute("v", "int64")), time_unit="s", time_column="lo",
                       upper_column="hi", type_column="type")
    store.create_stream("ev", sch)
    n = 60
    lo = np.arange(n) * 3
    store.append("ev", pa.table({"lo": lo, "hi": lo + 4,
                                 "type": np.array(["A", "B", "C"])[np.arange(n) % 3],
                                 "v": np.arange(n)}))
    q = ("PATTERN SEQ(A a, B b, C c) WHERE skip_till_any_match(a, b, c) { a.v % 2 = 0 } "
         "WITHIN 10 RETURN a, b, c")
    res = replaydb.query(store, q)
    assert res.plan.ctx.language == "imprecise"
    assert {"signature", "confidence", "t_start", "t_end"} <= set(res.table.column_names)
    conf = res.table.column("confidence").to_numpy()
    assert len(conf) > 0 and np.all((conf > 0) & (conf <= 1))
    # the same query on a precise stream runs the ordinary SASE+ matcher
    store.create_stream("plain", StreamSchema((Attribute("type", "string"),
                                               Attribute("v", "int64")), time_unit="s",
                                              type_column="type"))
    store.append("plain", pa.table({"t": lo, "type": np.array(["A", "B", "C"])[np.arange(n) % 3],
                                    "v": np.arange(n)}))
    q2 = ("FROM plain PATTERN SEQ(A a, B b, C c) WHERE skip_till_any_match(a, b, c) "
          "{ a.v % 2 = 0 } WITHIN 10 RETURN a.v, b.v, c.v")
    res2 = replaydb.query(store, q2)
    assert res2.plan.ctx.language == "sase" and res2.table.num_rows > 0


def test_unknown_language_and_ambiguous_stream(tmp_path):
    store = replaydb.open(tmp_path / "s", create=True)
    store.append("a", pa.table({"t": [1, 2], "x": [1.0, 2.0]}))
    store.append("b", pa.table({"t": [1, 2], "x": [1.0, 2.0]}))
    with pytest.raises(QueryError):
        replaydb.query(store, "DELETE FROM a")
    with pytest.raises(UsageError) as ei:
        replaydb.query(store, "PATTERN SEQ(A a, B b) WITHIN 5 RETURN a")
    assert "--stream" in (ei.value.hint or "")
