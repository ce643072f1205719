"""replaydb's MATCH_RECOGNIZE against Apache Flink SQL's on random queries (differential test).

The queries come from :mod:`tests.bench.flink_random`: random patterns, conditions, measures,
partitions, windows and skip modes from the subset Flink runs with replaydb's (SQL:2016's)
meaning; its docstring lists the rules that keep the generator out of Flink's deviations.

Slow (``pytest -m slow``; Flink runs in its own environment, ``make bench-env-flink``): every
query runs over the same random stream (ties in time, NULLs, three partitions)

* in replaydb's operator, the stream pushed in batches (full replay), ONE ROW PER MATCH;
* in Flink, all queries in one Flink process, a batch of them per job;
* in replaydb's brute-force oracle (:func:`~replaydb.operators.pattern.oracle_sql.sql_matches`,
  matches as rows and variables), against the operator's matches and against the first and
  last ``seq`` of every variable in the operator's ONE ROW PER MATCH rows.

Flink's rows must equal replaydb's, per query as sorted sets of rows (floats within 1e-9
relative), and a query where SQL:2016 raises an exception (AFTER MATCH SKIP to a missing row or
to the match's first row) must fail in all three. A failure names each differing query's seed:
``random_query(seed)`` rebuilds it.

Fast: the generator's queries translate into Flink SQL, parse and bind in replaydb, and the
operator agrees with the oracle on a short stream, so the generator cannot rot without Flink.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pytest

from replaydb.bench.peers.flink_sql import translate
from replaydb.errors import OperatorError
from replaydb.operators.pattern import oracle, oracle_sql
from replaydb.operators.pattern.oracle import Match
from replaydb.planner.lang import match_recognize as mr
from tests.bench.flink_random import RandomQuery, Var, random_events, random_query

EVENTS_SEED = 20_240_611
EVENTS = 1500
SEEDS = range(1000, 1150)
"""The slow test's queries: ``random_query(seed)`` for each seed."""
BATCH = 15
"""Queries per Flink job (a job costs seconds whatever it runs)."""
FAST_SEEDS = range(1000, 1060)
FAST_EVENTS = 150
SQL_EXCEPTION = "SQL:2016 raises an exception"
FLINK_SKIP_ERROR = "Could not skip to"


# --------------------------------------------------------------------------- helpers


def replaydb_rows(text: str, events: pa.Table, batch_rows: int = 256) -> list[dict[str, Any]]:
    """ONE ROW PER MATCH rows of replaydb's operator over ``events`` pushed in batches."""
    op = mr.bind(mr.parse(text), events.schema, None)
    for batch in events.to_batches(max_chunksize=batch_rows):
        op.push(batch)
    op.flush()
    return op.results().to_pylist()


def oracle_matches(query: RandomQuery, events: pa.Table) -> list[Match] | str:
    """The brute-force oracle's matches (sorted), or its error message."""
    spec = mr.parse(query.text).pattern_spec(None)
    try:
        return sorted(oracle_sql.sql_matches(spec, events))
    except OperatorError as exc:
        return str(exc)


def operator_matches(query: RandomQuery, events: pa.Table) -> list[Match] | str:
    """The operator's matches as rows and variables (sorted), or its error message."""
    spec = mr.parse(query.text).pattern_spec(None)
    try:
        return sorted(oracle.run_operator(spec, events, batch_rows=97))
    except OperatorError as exc:
        return str(exc)


def bounds(query: RandomQuery, match: Match, seq: list[int]) -> tuple[Any, ...]:
    """A match's partition key and every variable's first and last ``seq`` (None if unbound),
    as the ``f_v``/``l_v`` measures of the query give them."""
    out: list[Any] = list(match[0])
    for v in query.variables:
        rows = [r for r, lab in zip(match[1], match[2]) if lab == v.name]
        out += [seq[rows[0]], seq[rows[-1]]] if rows else [None, None]
    return tuple(out)


def key_columns(query: RandomQuery) -> list[str]:
    """The output columns that identify a match: partition key, first/last seq per variable."""
    return [c for c in query.columns if not c.startswith("m")]


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, 0 if v is None else v) for v in row)


def same_value(a: Any, b: Any) -> bool:
    """Equal, numbers within 1e-9 (relative) - Flink's BIGINT SUM is replaydb's float SUM."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


def diff_rows(flink: list[dict[str, Any]], ours: list[dict[str, Any]],
              keys: list[str]) -> list[str]:
    """What differs between two sets of output rows (matched by their key columns)."""
    cols = list(flink[0]) if flink else keys

    def ordered(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted((tuple(r[c] for c in keys) + tuple(r[c] for c in cols) for r in rows),
                      key=_sort_key)

    a, b = ordered(flink), ordered(ours)
    if len(a) == len(b) and all(all(same_value(x, y) for x, y in zip(ra, rb))
                                for ra, rb in zip(a, b)):
        return []
    only_flink = [r[len(keys):] for r in a if r not in b][:3]
    only_ours = [r[len(keys):] for r in b if r not in a][:3]
    return [f"{len(a)} Flink rows, {len(b)} replaydb rows; columns {cols}",
            f"only Flink: {only_flink}", f"only replaydb: {only_ours}"]


def raising_queries() -> list[RandomQuery]:
    """Two queries where SQL:2016 raises an exception on the test's streams (AFTER MATCH SKIP
    TO the match's first row; TO a variable that bound no row), so that the slow test always
    checks that the three engines fail alike (the random ones with a risky target may not)."""
    out = []
    for seed, skip, pattern, define in (
            (-1, "TO FIRST A", "A B", "A AS A.x > 5.0049"),
            (-2, "TO LAST B", "A B? C", "B AS B.g = 0, C AS C.g = 1")):
        variables = [Var(v[0], 0 if v.endswith("?") else 1, 1, True, v[1:])
                     for v in pattern.split()]
        measures = [f"{fn}({v.name}.seq) AS {fn[0].lower()}_{v.name.lower()}"
                    for v in variables for fn in ("FIRST", "LAST")]
        cols = [m.split(" AS ")[1] for m in measures]
        text = (f"SELECT * FROM s MATCH_RECOGNIZE (MEASURES {', '.join(measures)} ONE ROW PER "
                f"MATCH AFTER MATCH SKIP {skip} PATTERN ({pattern}) DEFINE {define})")
        out.append(RandomQuery(seed, text, variables, False, cols, {"unsafe_skip"}))
    return out


# --------------------------------------------------------------------------- fast


def test_generated_queries_translate_parse_and_match_the_oracle():
    """Every generated query translates into Flink SQL (no rewrite of always-true loops, so
    the meaning is kept), parses and binds in replaydb, and the operator finds the oracle's
    matches on a short stream (or both raise SQL:2016's exception)."""
    events = random_events(EVENTS_SEED, FAST_EVENTS)
    found = 0
    raised = 0
    for query in [random_query(seed) for seed in FAST_SEEDS] + raising_queries():
        seed = query.seed
        assert seed < 0 or query.text == random_query(seed).text, seed
        tr = translate(query.text, "events", columns=events.column_names)
        assert tr.relaxed == (), (seed, query.text)
        assert "`g` IN" in tr.sql or "`g` =" in tr.sql or not any(
            v.variable_length for v in query.variables), (seed, query.text)
        mr.bind(mr.parse(query.text), events.schema, None)
        want, got = oracle_matches(query, events), operator_matches(query, events)
        if isinstance(want, str) or isinstance(got, str):
            assert isinstance(want, str) and isinstance(got, str), (seed, query.text, want, got)
            assert SQL_EXCEPTION in got, got
            raised += 1
            continue
        assert got == want, (seed, query.text)
        found += len(want)
    assert found > 1000  # the stream exercises the queries
    assert raised >= 2


# --------------------------------------------------------------------------- slow


@pytest.fixture(scope="module")
def flink_python():
    from replaydb.bench.peers.flink import ensure_env

    return ensure_env()


def check_query(query: RandomQuery, entry: dict[str, Any], events: pa.Table) -> list[str]:
    """Compare one query's Flink entry, replaydb rows and oracle matches; the differences."""
    want = oracle_matches(query, events)
    if isinstance(want, str):  # SQL:2016 raises: so must the operator and Flink
        problems = []
        if not isinstance(operator_matches(query, events), str):
            problems.append(f"the oracle raised ({want}), replaydb did not")
        if FLINK_SKIP_ERROR not in (entry["error"] or ""):
            problems.append(f"the oracle raised ({want}), Flink gave {entry['error']!r}")
        return problems
    if entry["error"] is not None:
        return [f"Flink failed: {entry['error'][-500:]}"]
    got = operator_matches(query, events)
    if got != want:
        return [f"replaydb's matches differ from the oracle's: {len(got)} vs {len(want)}"]
    ours = replaydb_rows(query.text, events)
    keys = key_columns(query)
    seq = events.column("seq").to_pylist()
    if sorted((tuple(r[c] for c in keys) for r in ours), key=_sort_key) != sorted(
            (bounds(query, m, seq) for m in want), key=_sort_key):
        return ["replaydb's ONE ROW PER MATCH rows differ from its matches"]
    if entry["rows"].column_names != query.columns:
        return [f"Flink's columns are {entry['rows'].column_names}"]
    return diff_rows(entry["rows"].to_pylist(), ours, keys)


@pytest.mark.slow
def test_replaydb_and_flink_find_the_same_matches_on_random_queries(flink_python):
    """Every random query gives the same ONE ROW PER MATCH rows in replaydb and Flink, and
    replaydb's matches are the brute-force oracle's (module doc)."""
    from replaydb.bench.peers.flink import run_flink

    events = random_events(EVENTS_SEED, EVENTS)
    queries = [random_query(seed) for seed in SEEDS]
    queries.sort(key=lambda q: q.unsafe_skip)  # likely failures last: a failed job is split
    queries += raising_queries()
    res = run_flink(events, {f"q{q.seed}": q.text for q in queries}, mode="rows",
                    parallelism=1, startup_probe=False, batch=BATCH, timeout_s=1800,
                    query_timeout_s=120)
    assert "fatal" not in res, res["fatal"]
    failures, rows, failing = [], 0, 0
    for query in queries:
        entry = res["queries"][f"q{query.seed}"]
        problems = check_query(query, entry, events)
        if problems:
            failures.append(f"seed {query.seed}: {query.text}\n  Flink: {entry['sql']}\n  "
                            + "\n  ".join(problems))
        elif entry["error"] is not None:
            failing += 1
        else:
            rows += entry["rows"].num_rows
    assert not failures, f"{len(failures)} of {len(queries)} queries differ:\n" + "\n".join(
        failures)
    assert rows > 10 * len(queries)  # the stream exercises the queries
    assert 2 <= failing < len(queries) // 10
