"""Bad input data: every kind has a documented policy, and a rejected batch changes nothing.

Policies (docs/reliability.md has the table; the rules live in ``store/normalize.py``, the
lateness rule in ``store/writer.py`` and ``replaydb/ingest/job.py``):

* per-row problems - a value of the wrong type, a missing (null) or unparsable time, a null in a
  non-nullable column, NaN/inf under ``nan_policy="reject"`` - are a :class:`DataError` naming
  the row and column (Python ``append`` default ``bad="error"``; ``replaydb ingest --strict``),
  or go to the stream's quarantine table with row, column, reason and the raw row
  (``bad="quarantine"``; the default of ``replaydb ingest``);
* ``nan_policy="null"`` stores NaN/inf as null, ``"allow"`` stores them as they are;
* events older than the stream's end minus its lateness bound: :class:`LateEventError` (append
  default, ``ingest --strict``) or quarantined as ``late event`` (``late="quarantine"``, ingest
  default);
* schema drift between batches - a new column: :class:`SchemaError` with a hint unless
  ``extra="ignore"``; a missing nullable column: nulls; a missing non-nullable column or a missing
  time column: :class:`SchemaError`; a retyped column: cast when every value fits (int -> float,
  numeric strings, integral floats -> int), per-row ``wrong type`` when some values do not, a
  :class:`SchemaError` when the type cannot be cast at all (a list into a number).

Every rejected batch is checked to leave the stream exactly as it was (a checksum over its events,
quarantine and pinned side tables, and its Delta version).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import replaydb
from replaydb.cli import main
from replaydb.errors import DataError, LateEventError, SchemaError
from replaydb.store.schema import Attribute, StreamSchema
from tests.crash import stream_digest

SCHEMA = StreamSchema((
    Attribute("x", "float64"),                      # nan_policy reject (the default)
    Attribute("y", "float64", nan_policy="null"),
    Attribute("z", "float64", nan_policy="allow"),
    Attribute("k", "int64"),
    Attribute("flag", "bool"),
    Attribute("name", "string", nullable=False),
), time_column="ts", lateness=10, leaf_capacity=8, fanout=4)


def good_rows(ts) -> dict:
    n = len(ts)
    return {"ts": list(ts), "x": [float(i) for i in range(n)], "y": [0.5] * n, "z": [1.5] * n,
            "k": list(range(n)), "flag": [True] * n, "name": [f"r{i}" for i in range(n)]}


def table(rows: dict, **types: pa.DataType) -> pa.Table:
    return pa.table({c: pa.array(v, types.get(c)) for c, v in rows.items()})


@pytest.fixture
def store(tmp_path):
    s = replaydb.open(tmp_path / "store", create=True)
    s.create_stream("s", SCHEMA)
    s.append("s", table(good_rows(range(100, 140))), batch_id="base")
    return s


class Unchanged:
    """Asserts that the block leaves the stream exactly as it was."""

    def __init__(self, store) -> None:
        self.store = store

    def __enter__(self):
        self.digest = stream_digest(self.store, "s")
        self.version = self.store.stream("s").version
        return self

    def __exit__(self, *exc) -> None:
        fresh = replaydb.open(self.store.path)
        assert fresh.stream("s").version == self.version, "a rejected batch committed"
        assert stream_digest(fresh, "s") == self.digest, "a rejected batch changed the stream"
        assert fresh.check("s") == {"s": []}


def with_row(col: str, value, at: int = 2, ts0: int = 140, n: int = 5, **types) -> pa.Table:
    rows = good_rows(range(ts0, ts0 + n))
    if types.get(col) == pa.string():
        rows[col] = [None if v is None else str(v) for v in rows[col]]
    rows[col][at] = value
    return table(rows, **types)


# (case id, batch, error type, row, column, quarantine reason)
ROW_CASES = [
    ("float column gets text", lambda: with_row("x", "abc", x=pa.string()), DataError, 2, "x",
     "wrong type"),
    ("int column gets a fraction", lambda: with_row("k", 2.5, k=pa.float64()), DataError, 2,
     "k", "wrong type"),
    ("bool column gets text", lambda: with_row("flag", "maybe", flag=pa.string()), DataError, 2,
     "flag", "wrong type"),
    ("NaN under reject", lambda: with_row("x", float("nan")), DataError, 2, "x", "NaN value"),
    ("inf under reject", lambda: with_row("x", float("-inf")), DataError, 2, "x",
     "infinite value"),
    ("missing time", lambda: with_row("ts", None, ts=pa.int64()), DataError, 2, "ts",
     "missing time"),
    ("null in a non-nullable column", lambda: with_row("name", None), DataError, 2, "name",
     "null value"),
    ("time shaped like a date but out of range", lambda: table({
        **good_rows(range(5)), "ts": ["2024-01-01T00:00:01", "2024-01-01 00:00:02",
                                      "2024-13-45T99:00:00", "2024-01-01T00:00:04.5",
                                      "2024-01-01T00:00:05Z"]}),
     DataError, 2, "ts", "unparsable time"),
    ("time that is no date at all", lambda: table({
        **good_rows(range(5)), "ts": ["2024-01-01T00:00:01", "2024-01-01 00:00:02",
                                      "tomorrow", "2024-01-01T00:00:04", "2024-01-01T00:00:05Z"]}),
     DataError, 2, "ts", "unparsable time"),
]


@pytest.mark.parametrize(("case", "make", "error", "row", "column", "reason"), ROW_CASES,
                         ids=[c[0] for c in ROW_CASES])
def test_bad_row_is_an_error_naming_row_and_column(store, case, make, error, row, column,
                                                   reason):
    batch = make()
    with Unchanged(store), pytest.raises(error) as ei:
        store.append("s", batch, batch_id=f"bad-{case}")
    e = ei.value
    assert (e.row, e.column) == (row, column) and e.reason == reason
    assert f"row {row}" in str(e) and repr(column) in str(e)


@pytest.mark.parametrize(("case", "make", "error", "row", "column", "reason"), ROW_CASES,
                         ids=[c[0] for c in ROW_CASES])
def test_bad_row_is_quarantined_with_reason_and_location(store, case, make, error, row, column,
                                                         reason):
    batch = make()
    before = store.stream("s").read()
    r = store.append("s", batch, batch_id=f"q-{case}", bad="quarantine")
    assert (r.events, r.quarantined) == (batch.num_rows - 1, 1)
    q = store.stream("s").side("quarantine").read()
    assert q.num_rows == 1
    rec = q.to_pylist()[0]
    assert (rec["row"], rec["column"], rec["reason"], rec["batch_id"]) == \
        (row, column, reason, f"q-{case}")
    raw = json.loads(rec["raw"])
    assert set(raw) == set(batch.column_names)  # the whole offending row, as it came
    after = store.stream("s").read()
    assert after.num_rows == before.num_rows + batch.num_rows - 1
    # what was stored before is still there, unchanged (a pure append: same seqs)
    assert after.slice(0, before.num_rows).equals(before)
    assert store.check("s") == {"s": []}


def test_nan_policies_null_and_allow(store):
    batch = with_row("y", float("nan"))
    batch = table({**batch.to_pydict(), "z": [1.0, float("inf"), float("nan"), 2.0, 3.0]})
    r = store.append("s", batch)
    assert (r.events, r.quarantined) == (5, 0)
    tail = store.stream("s").read(140, None)
    assert tail.column("y").to_pylist()[2] is None           # null policy: stored as null
    z = tail.column("z").to_numpy()
    assert np.isinf(z[1]) and np.isnan(z[2])                 # allow: stored as they are
    agg = store.stream("s").aggregate(140, None)
    assert agg["y"]["n"] == 4                                # the null is not counted
    assert store.check("s") == {"s": []}


def late_batch() -> pa.Table:
    # the stream ends at 139, lateness 10: 135 is late within the bound, 120 beyond it
    return table(good_rows([140, 135, 120, 141]))


def test_too_late_is_an_error_and_nothing_changes(store):
    with Unchanged(store), pytest.raises(LateEventError) as ei:
        store.append("s", late_batch())
    assert ei.value.row == 2 and ei.value.column == "ts"
    assert "lateness bound 10" in str(ei.value) and "late='quarantine'" in ei.value.hint


def test_too_late_is_quarantined_late_within_bound_is_merged(store):
    before = store.stream("s").read()
    r = store.append("s", late_batch(), late="quarantine", batch_id="late")
    assert (r.events, r.quarantined, r.late) == (3, 1, 1)
    q = store.stream("s").side("quarantine").read().to_pylist()
    assert [(x["row"], x["column"], x["reason"]) for x in q] == [(2, "ts", "late event")]
    data = store.stream("s").read()
    t = data.column("t").to_numpy()
    assert np.all(np.diff(t) >= 0)
    assert (t == 135).sum() == 2 and (t == 120).sum() == 1  # one merged, one quarantined
    # every stored event is still there (the late one shifted the seqs of those after it)
    old = set(zip(before.column("t").to_pylist(), before.column("name").to_pylist()))
    assert old <= set(zip(data.column("t").to_pylist(), data.column("name").to_pylist()))
    assert store.check("s") == {"s": []}


# --------------------------------------------------------------------------- schema drift
def test_new_column_is_an_error_with_a_hint(store):
    batch = table({**good_rows(range(140, 143)), "extra": [1, 2, 3]})
    with Unchanged(store), pytest.raises(SchemaError) as ei:
        store.append("s", batch, bad="quarantine")  # not a row problem: never quarantined
    assert ei.value.column == "extra" and "extra='ignore'" in ei.value.hint
    r = store.append("s", batch, extra="ignore")
    assert r.events == 3 and "extra" not in store.stream("s").arrow_schema.names


def test_missing_nullable_column_becomes_null(store):
    rows = good_rows(range(140, 143))
    del rows["x"]
    store.append("s", table(rows))
    assert store.stream("s").read(140, None).column("x").to_pylist() == [None] * 3
    assert store.check("s") == {"s": []}


@pytest.mark.parametrize("missing", ["name", "ts"])
def test_missing_required_column_is_an_error(store, missing):
    rows = good_rows(range(140, 143))
    del rows[missing]
    with Unchanged(store), pytest.raises(SchemaError) as ei:
        store.append("s", table(rows), bad="quarantine")
    assert ei.value.column == missing


def test_retyped_columns_are_cast_when_every_value_fits(store):
    rows = good_rows(range(140, 144))
    batch = table({**rows, "x": [1, 2, 3, 4], "k": [1.0, 2.0, -3.0, 4.0],
                   "y": ["1.5", " 2 ", "3e1", "-0.25"], "flag": [1, 0, 1, 0],
                   "ts": np.array(rows["ts"], dtype="datetime64[ms]")})
    store.append("s", batch)
    tail = store.stream("s").read(140, None)
    assert tail.column("x").type == pa.float64() and tail.column("x").to_pylist() == [1, 2, 3, 4]
    assert tail.column("k").to_pylist() == [1, 2, -3, 4]
    assert tail.column("y").to_pylist() == [1.5, 2.0, 30.0, -0.25]
    assert tail.column("flag").to_pylist() == [True, False, True, False]
    assert tail.column("t").to_pylist() == rows["ts"]
    assert store.check("s") == {"s": []}


def test_retyped_column_that_cannot_be_cast_is_an_error(store):
    rows = good_rows(range(140, 143))
    batch = table({**rows, "x": [[1.0], [2.0], [3.0]]})
    with Unchanged(store), pytest.raises(SchemaError) as ei:
        store.append("s", batch, bad="quarantine")
    assert ei.value.column == "x" and "cannot store" in str(ei.value)


def test_rejected_batch_id_can_be_retried(store):
    """A batch rejected for bad data does not consume its batch id."""
    with pytest.raises(DataError):
        store.append("s", with_row("x", "abc", x=pa.string()), batch_id="retry")
    r = store.append("s", with_row("x", "1.0", x=pa.string()), batch_id="retry")
    assert not r.skipped and r.events == 5


# --------------------------------------------------------------------------- replaydb ingest
CSV_ROWS = [  # row numbers are 1-based data lines of the file
    ("200", "1.5", "1", "a"),
    ("", "2.5", "2", "b"),            # 2: missing time
    ("202", "abc", "3", "c"),         # 3: wrong type
    ("not-a-time", "4.5", "4", "d"),  # 4: unparsable time
    ("204", "nan", "5", "e"),         # 5: NaN value
    ("205", "inf", "6", "f"),         # 6: infinite value
    ("206", "7.5", "7.5", "g"),       # 7: k is not an integer
    ("207", "8.5", "8", ""),          # 8: null in a non-nullable column
    ("150", "9.5", "9", "i"),         # 9: later than the lateness bound
    ("195", "10.5", "10", "j"),       # late, within the bound: stored
    ("209", "11.5", "11", "k"),
]
CSV_BAD = {(2, "ts", "missing time"), (3, "x", "wrong type"), (4, "ts", "unparsable time"),
           (5, "x", "NaN value"), (6, "x", "infinite value"), (7, "k", "wrong type"),
           (8, "name", "null value"), (9, "ts", "late event")}


@pytest.fixture
def ingest_store(tmp_path):
    s = replaydb.open(tmp_path / "istore", create=True)
    s.create_stream("s", StreamSchema(
        (Attribute("x", "float64"), Attribute("k", "int64"),
         Attribute("name", "string", nullable=False)),
        time_column="ts", lateness=10, leaf_capacity=8, fanout=4))
    n = 50
    s.append("s", pa.table({"ts": np.arange(n, dtype=np.int64) * 4, "x": np.arange(n) * 0.5,
                            "k": np.arange(n), "name": [f"r{i}" for i in range(n)]}))
    return s


def write_csv(path, rows, header=("ts", "x", "k", "name")) -> str:
    with open(path, "w") as fh:
        fh.write(",".join(header) + "\n")
        for r in rows:
            fh.write(",".join(r) + "\n")
    return str(path)


def ingest_cli(capsys, store, *args: str) -> tuple[int, str, str]:
    code = main(["ingest", str(store.path), "s", *args, "--time", "ts", "--master", "local[2]"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.spark
def test_cli_ingest_quarantines_every_bad_row_or_fails_strictly(ingest_store, tmp_path, spark,
                                                                  capsys):
    src = write_csv(tmp_path / "bad.csv", CSV_ROWS)
    with Unchanged(ingest_store):
        code, out, err = ingest_cli(capsys, ingest_store, src, "--strict")
    assert code == 1 and "Traceback" not in err
    assert err.startswith(f"error: source {src}, row 2, column 'ts': missing time"), err
    assert "hint: " in err

    code, out, err = ingest_cli(capsys, ingest_store, src, "--json")
    assert code == 0, err
    res = json.loads(out)
    assert (res["events"], res["quarantined"], res["late"]) == (3, len(CSV_BAD), 1)
    q = ingest_store.stream("s").side("quarantine").read()
    got = set(zip(q.column("row").to_pylist(), q.column("column").to_pylist(),
                  q.column("reason").to_pylist()))
    assert got == CSV_BAD
    assert set(q.column("source").to_pylist()) == {src}
    assert ingest_store.check("s") == {"s": []}


@pytest.mark.spark
def test_cli_ingest_late_rows_are_an_error_with_strict(ingest_store, tmp_path, spark, capsys):
    src = write_csv(tmp_path / "late.csv", [("200", "1", "1", "a"), ("150", "2", "2", "b")])
    with Unchanged(ingest_store):
        code, _, err = ingest_cli(capsys, ingest_store, src, "--strict")
    assert code == 1 and "Traceback" not in err
    assert "row 2, column 'ts'" in err and "lateness bound 10" in err


@pytest.mark.spark
@pytest.mark.parametrize("drift", ["new column", "missing required column", "uncastable type",
                                   "missing time column"])
def test_cli_ingest_schema_drift_is_a_clear_error(ingest_store, tmp_path, spark, capsys, drift):
    t = pa.array([300, 301], pa.int64())
    cols = {"ts": t, "x": pa.array([1.0, 2.0]), "k": pa.array([1, 2]), "name": ["a", "b"]}
    if drift == "new column":
        cols["extra"] = pa.array([1, 2])
    elif drift == "missing required column":
        del cols["name"]
    elif drift == "uncastable type":
        cols["x"] = pa.array([[1.0], [2.0]])
    else:
        cols["when"] = cols.pop("ts")
    src = tmp_path / "drift.parquet"
    pq.write_table(pa.table(cols), src)
    want_col = {"new column": "extra", "missing required column": "name",
                "uncastable type": "x", "missing time column": "ts"}[drift]
    with Unchanged(ingest_store):
        code, out, err = ingest_cli(capsys, ingest_store, str(src))
    lines = err.strip().splitlines()
    assert code == 1 and "Traceback" not in err and "internal error" not in err, err
    assert lines[0].startswith(f"error: source {src}, column '{want_col}'"), err
    assert len(lines) <= 2
    if drift == "new column":
        assert lines[1].startswith("hint: ") and "--extra ignore" in lines[1]


@pytest.mark.spark
def test_cli_ingest_drift_allowed_explicitly(ingest_store, tmp_path, spark, capsys):
    """``--extra ignore`` drops a new column; a missing nullable column becomes null."""
    src = tmp_path / "ok.parquet"
    pq.write_table(pa.table({"ts": pa.array([300, 301], pa.int64()), "k": [1, 2],
                             "name": ["a", "b"], "extra": [5, 6]}), src)
    code, _, err = ingest_cli(capsys, ingest_store, str(src), "--extra", "ignore")
    assert code == 0, err
    tail = ingest_store.stream("s").read(300, None)
    assert tail.column("x").to_pylist() == [None, None]
    assert "extra" not in tail.column_names
    assert ingest_store.check("s") == {"s": []}


def test_bool_column_statistics_are_valid_delta(store):
    """Regression: bool min/max were committed as 0/1, which made the table unreadable."""
    from deltalake import DeltaTable

    dt = DeltaTable(str(store.stream("s").events_dir))
    acts = pa.table(dt.get_add_actions(flatten=True))
    assert acts.column("min.flag").type == pa.bool_()
    assert acts.column("max.flag").to_pylist() == [True]
    assert replaydb.open(store.path).stream("s").read().column("flag").to_pylist() == [True] * 40
