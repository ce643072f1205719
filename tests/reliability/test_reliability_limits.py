"""Resource limits of queries: time limit, memory budget, operators' state caps.

The limits are the planner's (``planner.query``: ``timeout``, ``max_memory``) and the operators'
(``state_cap``). To exercise them independently of any one query language, this module is itself
a tiny query language, registered for the test by monkeypatching ``planner.query.LANGUAGES``
(the store, the replay and the CLI are the real ones)::

    PROBE [K lo hi] [SLEEP seconds] [HOLD bytes] [BUFFER]

It counts the events whose ``k`` lies in [lo, hi] and sums their ``x``, emitting one row only at
the end of the input - the worst case for limits checked between results. ``SLEEP`` makes every
batch slow, ``HOLD`` keeps that many bytes alive per batch, ``BUFFER`` keeps every matching event
as operator state (so the state cap applies). The real languages' operators are checked through the
same query path: the imprecise-pattern and the SASE+ skip-till-any-match blow-ups are stopped by
their state caps, a MATCH_RECOGNIZE query by its time limit.

Expected behaviour: the query stops soon after a limit is passed - not at its end - with one
error line and a hint, exit status 1 at the CLI, no traceback.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.cli import main
from replaydb.errors import ParseError, ResourceLimitExceeded, StateCapExceeded
from replaydb.operators import spec
from replaydb.operators.base import DEFAULT_STATE_CAP, Operator
from replaydb.planner import languages
from replaydb.planner import query as Q
from replaydb.store.schema import Attribute, StreamSchema

# --------------------------------------------------------------------------- the PROBE language
PUSHES: list[int] = []
"""Rows of every batch pushed into a probe operator (reset by the tests)."""


@dataclass(frozen=True)
class ProbeQuery:
    lo: int | None = None
    hi: int | None = None
    sleep: float = 0.0
    hold: int = 0
    buffer: bool = False
    sources: tuple[str, ...] = ()


def detect(text: str) -> bool:
    return text.lstrip().upper().startswith("PROBE")


_SIZE = re.compile(r"^(\d+)([KMG]?)$")


def parse(text: str) -> ProbeQuery:
    words = text.split()
    pos = [m.start() for m in re.finditer(r"\S+", text)]
    q: dict = {}
    i = 1
    while i < len(words):
        w = words[i].upper()
        try:
            if w == "K":
                q["lo"], q["hi"] = int(words[i + 1]), int(words[i + 2])
                i += 3
            elif w == "SLEEP":
                q["sleep"] = float(words[i + 1])
                i += 2
            elif w == "HOLD":
                m = _SIZE.match(words[i + 1].upper())
                if not m:
                    raise ValueError
                q["hold"] = int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20,
                                               "G": 2**30}[m.group(2)]
                i += 2
            elif w == "BUFFER":
                q["buffer"] = True
                i += 1
            elif w == "FROM":
                q["sources"] = (words[i + 1],)
                i += 2
            else:
                raise ParseError(f"unexpected {words[i]!r}", text=text, pos=pos[i],
                                 expected=["K", "SLEEP", "HOLD", "BUFFER", "FROM"])
        except (IndexError, ValueError):
            raise ParseError(f"bad argument after {words[i]!r}", text=text,
                             pos=pos[min(i + 1, len(pos) - 1)]) from None
    return ProbeQuery(**q)


@dataclass(frozen=True)
class ProbeConfig:
    query: ProbeQuery


class ProbeOperator(Operator):
    name = "probe"
    family = "probe"
    input_columns = ["k", "x"]

    def __init__(self, config: ProbeConfig, *, state_cap: int | None = DEFAULT_STATE_CAP):
        super().__init__(config, state_cap=state_cap)
        self._reset_state()

    @property
    def output_schema(self) -> pa.Schema:
        return pa.schema([("count", pa.int64()), ("sum_x", pa.float64())])

    def _push_batch(self, batch: pa.RecordBatch) -> None:
        q = self.config.query
        PUSHES.append(batch.num_rows)
        if q.sleep:
            time.sleep(q.sleep)
        if q.hold:
            self._held.append(np.ones(q.hold // 8))
        k = batch.column("k").to_numpy(zero_copy_only=False)
        x = batch.column("x").to_numpy(zero_copy_only=False)
        sel = np.ones(len(k), dtype=bool)
        if q.lo is not None:
            sel = (k >= q.lo) & (k <= q.hi)
        self._count += int(sel.sum())
        self._sum += float(x[sel].sum())
        if q.buffer:
            self._buffered += int(sel.sum())
            self._set_state_size(self._buffered, "buffered events")

    def _flush(self) -> None:
        self._emit(pa.table({"count": [self._count], "sum_x": [self._sum]},
                            schema=self.output_schema))

    def _reset_state(self) -> None:
        self._count, self._sum, self._buffered = 0, 0.0, 0
        self._held: list[np.ndarray] = []

    def _get_state(self):
        return (self._count, self._sum, self._buffered)

    def _set_state(self, state) -> None:
        self._count, self._sum, self._buffered = state


def bind(query: ProbeQuery, schema: pa.Schema, time_unit, state_cap: int | None = None):
    return ProbeOperator(ProbeConfig(query),
                         state_cap=DEFAULT_STATE_CAP if state_cap is None else state_cap)


def register_probe(monkeypatch) -> None:
    """Make PROBE a query language of the query hub, and its operator a family, for one
    test."""
    module = sys.modules[__name__]
    monkeypatch.setitem(sys.modules, __name__, module)
    monkeypatch.setattr(languages, "LANGUAGES", list(languages.LANGUAGES))
    monkeypatch.setattr(spec, "FAMILIES", dict(spec.FAMILIES))
    languages.register_language("probe", lambda: module)
    spec.register_family("probe", ProbeOperator)


# --------------------------------------------------------------------------- fixtures
BATCH_EVENTS = 4096
N_BATCHES = 24


@pytest.fixture(scope="module")
def limits_store(tmp_path_factory):
    """A stream of ``N_BATCHES * BATCH_EVENTS`` events (replayed in ``N_BATCHES`` batches by the
    ``probe`` fixture)."""
    path = tmp_path_factory.mktemp("limits") / "store"
    store = replaydb.open(path, create=True)
    store.create_stream("s", StreamSchema((Attribute("k", "int64"), Attribute("x", "float64")),
                                          leaf_capacity=64, fanout=8))
    n = BATCH_EVENTS * N_BATCHES
    rng = np.random.default_rng(1)
    store.append("s", pa.table({"t": np.arange(n, dtype=np.int64),
                                "k": rng.integers(0, 100, n), "x": rng.normal(size=n)}))
    return path


@pytest.fixture
def probe(monkeypatch):
    register_probe(monkeypatch)
    # one replay batch per BATCH_EVENTS events, so a query sees N_BATCHES pushes
    import replaydb.replay.replay as R

    orig = R.Replay.__init__

    def init(self, *a, **kw):
        kw.setdefault("batch_rows", BATCH_EVENTS)
        orig(self, *a, **kw)

    monkeypatch.setattr(R.Replay, "__init__", init)
    PUSHES.clear()
    yield
    PUSHES.clear()


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_clean_error(code: int, err: str, *needles: str) -> None:
    """One ``error:`` line, one ``hint:`` line, non-zero exit, no traceback."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code != 0
    assert "Traceback" not in err
    assert lines[0].startswith("error: ") and any(ln.startswith("hint: ") for ln in lines), err
    assert len(lines) == 2, err
    for n in needles:
        assert n in lines[0], err


# --------------------------------------------------------------------------- the probe itself
def test_probe_answers_match_the_data(limits_store, probe):
    store = replaydb.open(limits_store, read_only=True)
    res = Q.run_query(store, "PROBE K 10 19")
    data = store.stream("s").read()
    k, x = data.column("k").to_numpy(), data.column("x").to_numpy()
    sel = (k >= 10) & (k <= 19)
    assert res.table.column("count").to_pylist() == [int(sel.sum())]
    assert np.isclose(res.table.column("sum_x")[0].as_py(), x[sel].sum())
    assert len(PUSHES) == N_BATCHES


# --------------------------------------------------------------------------- time limit
def test_timeout_stops_a_query_that_emits_nothing_until_its_end(limits_store, probe):
    """The limit is checked between batches, not only when results appear."""
    store = replaydb.open(limits_store, read_only=True)
    start = time.perf_counter()
    with pytest.raises(ResourceLimitExceeded) as ei:
        Q.run_query(store, "PROBE SLEEP 0.1", timeout=0.35)
    elapsed = time.perf_counter() - start
    assert "time limit of 0.35 s" in str(ei.value) and "--timeout" in ei.value.hint
    assert len(PUSHES) < N_BATCHES // 2, f"ran {len(PUSHES)} of {N_BATCHES} batches"
    assert elapsed < N_BATCHES * 0.1 / 2


def test_timeout_at_the_cli(limits_store, probe, capsys):
    code, out, err = cli(capsys, "query", str(limits_store), "PROBE SLEEP 0.1", "--timeout", "0.3")
    assert_clean_error(code, err, "time limit of 0.3 s")
    assert code == 1 and out == ""
    assert len(PUSHES) < N_BATCHES // 2


def test_generous_limits_do_not_change_the_answer(limits_store, probe, capsys):
    code, out, err = cli(capsys, "query", str(limits_store), "PROBE K 0 49", "--timeout", "600",
                         "--max-memory", "64G", "--state-cap", "100000000", "--json")
    assert code == 0, err
    store = replaydb.open(limits_store, read_only=True)
    k = store.stream("s").read(columns=["k"]).column("k").to_numpy()
    assert f'"count": {int((k < 50).sum())}' in out


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_meaningless_timeouts_are_usage_errors(limits_store, probe, capsys, value):
    code, _, err = cli(capsys, "query", str(limits_store), "PROBE", f"--timeout={value}")
    assert_clean_error(code, err, "timeout")
    assert code == 2 and PUSHES == []


# --------------------------------------------------------------------------- memory budget
def test_memory_budget_stops_a_growing_query(limits_store, probe):
    import psutil

    store = replaydb.open(limits_store, read_only=True)
    rss = psutil.Process().memory_info().rss
    budget = rss + 200 * 2**20  # 200 MiB more than now; the query would hold 24 x 40 MiB
    with pytest.raises(ResourceLimitExceeded) as ei:
        Q.run_query(store, "PROBE HOLD 40M", max_memory=budget)
    assert "memory budget" in str(ei.value) and "--max-memory" in ei.value.hint
    assert len(PUSHES) < N_BATCHES // 2, f"ran {len(PUSHES)} of {N_BATCHES} batches"


def test_memory_budget_at_the_cli(limits_store, probe, capsys):
    import psutil

    budget_mib = psutil.Process().memory_info().rss // 2**20 + 200
    code, out, err = cli(capsys, "query", str(limits_store), "PROBE HOLD 40M",
                         "--max-memory", f"{budget_mib}M")
    assert_clean_error(code, err, "memory budget")
    assert code == 1 and out == ""


@pytest.mark.parametrize("value", ["12Q", "lots", "-5M"])
def test_bad_memory_sizes_are_rejected_by_the_parser(limits_store, probe, capsys, value):
    with pytest.raises(SystemExit) as ei:
        main(["query", str(limits_store), "PROBE", f"--max-memory={value}"])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert "bad size" in err and "Traceback" not in err
    assert PUSHES == []


def test_zero_memory_budget_is_a_usage_error(limits_store, probe, capsys):
    code, _, err = cli(capsys, "query", str(limits_store), "PROBE", "--max-memory", "0")
    assert_clean_error(code, err, "max")
    assert code == 2


# --------------------------------------------------------------------------- state caps
def test_state_cap_names_the_cap(limits_store, probe):
    store = replaydb.open(limits_store, read_only=True)
    with pytest.raises(StateCapExceeded) as ei:
        Q.run_query(store, "PROBE BUFFER", state_cap=5000)
    e = ei.value
    assert e.cap_name == "state_cap" and e.cap == 5000 and e.size > 5000
    assert "state_cap=5,000" in str(e) and "buffered events" in str(e)


def test_state_cap_at_the_cli(limits_store, probe, capsys):
    code, out, err = cli(capsys, "query", str(limits_store), "PROBE BUFFER", "--state-cap", "5000")
    assert_clean_error(code, err, "state cap state_cap=5,000")
    assert code == 1 and out == ""


def test_a_parse_error_at_the_cli_has_a_position(limits_store, probe, capsys):
    code, _, err = cli(capsys, "query", str(limits_store), "PROBE K 1 x")
    assert code != 0 and "Traceback" not in err
    assert err.startswith("error: line 1, column 9: bad argument after 'K'")
    assert "^" in err  # the caret under the position


# --------------------------------------------------------------------------- real languages
@pytest.fixture(scope="module")
def imprecise_store(tmp_path_factory):
    """Events of one type whose uncertainty intervals all overlap: skip-till-any-match runs
    grow combinatorially."""
    path = tmp_path_factory.mktemp("imprecise") / "store"
    store = replaydb.open(path, create=True)
    n = 400
    lo = np.arange(n, dtype=np.int64) // 2
    store.append("imp", pa.table({"t": lo, "type": ["A"] * n, "t_upper": lo + 6,
                                  "v": np.arange(n) % 5}),
                 time_unit=None, upper_column="t_upper", type_column="type")
    return path


IMPRECISE = "PATTERN SEQ(A a, A b, A c) WITHIN 30"


def test_imprecise_skip_till_any_blow_up_is_stopped_by_the_state_cap(imprecise_store):
    store = replaydb.open(imprecise_store, read_only=True)
    with pytest.raises(StateCapExceeded) as ei:
        Q.run_query(store, IMPRECISE, state_cap=40)
    assert ei.value.cap_name == "state_cap" and ei.value.cap == 40
    assert str(ei.value).startswith("imprecise")


def test_imprecise_skip_till_any_blow_up_at_the_cli(imprecise_store, capsys):
    code, out, err = cli(capsys, "query", str(imprecise_store), IMPRECISE, "--state-cap", "40")
    assert_clean_error(code, err, "over the state cap state_cap=40")
    assert code == 1 and out == ""


@pytest.fixture(scope="module")
def typed_store(tmp_path_factory):
    """One a, then many b's, then c's: under skip-till-any-match every subset of the b's
    extends a match."""
    path = tmp_path_factory.mktemp("typed") / "store"
    store = replaydb.open(path, create=True)
    types = ["a"] + ["b"] * 40 + ["c"] * 3 + ["x"] * 20_000
    n = len(types)
    store.append("ev", pa.table({"t": np.arange(n, dtype=np.int64), "type": types,
                                 "v": np.arange(n) % 7}), type_column="type")
    return path


SASE_ANY = "PATTERN SEQ(a x, b+ y[], c z) WHERE skip_till_any_match(x, y, z) WITHIN 100000"
MR = ("SELECT * FROM ev MATCH_RECOGNIZE (MEASURES FIRST(A.t) AS t0 ONE ROW PER MATCH "
      "PATTERN (A B+ C) DEFINE A AS type = 'x', B AS v > 2, C AS v = 0)")


def test_sase_skip_till_any_blow_up_at_the_cli(typed_store, capsys):
    code, out, err = cli(capsys, "query", str(typed_store), SASE_ANY, "--state-cap", "20000")
    assert_clean_error(code, err, "over the state cap state_cap=20,000")
    assert code == 1 and out == ""


def test_match_recognize_time_limit_at_the_cli(typed_store, capsys):
    code, out, err = cli(capsys, "query", str(typed_store), MR, "--timeout", "0.001")
    assert_clean_error(code, err, "time limit of 0.001 s")
    assert code == 1 and out == ""
    code, out, err = cli(capsys, "query", str(typed_store), MR, "--timeout", "600", "--json")
    assert code == 0 and "Traceback" not in err


# --------------------------------------------------------------------------- the join's cap
def test_join_window_state_is_capped():
    """The windowed join retains its windows' events; a window larger than the cap stops it
    with the cap named (the pattern, imprecise, TPStream and window operators' caps are tested
    with those operators and above through the query path)."""
    from replaydb.operators.expr import Binary, Column
    from replaydb.operators.join import JoinConfig, JoinOperator, Window

    schema = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                        ("v", pa.int64())])
    n = 600
    batch = pa.table({"t": np.arange(n, dtype=np.int64), "seq": np.arange(n, dtype=np.int64),
                      "type": ["E1", "E2"] * (n // 2), "v": np.arange(n) % 5}, schema=schema)
    phi = Binary("<=", Column("v", "E1"), Column("v", "E2"))
    cfg = JoinConfig(schema, "E1", "E2", Window("count", 200), Window("count", 200), phi)
    with pytest.raises(StateCapExceeded) as ei:
        JoinOperator(cfg, state_cap=100).process(batch)
    assert ei.value.cap_name == "state_cap" and ei.value.cap == 100
    assert str(ei.value).startswith("join")
    out = JoinOperator(cfg, state_cap=10_000).process(batch)  # the same join under a larger cap
    assert out.num_rows > 0
