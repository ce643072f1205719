"""The Apache Flink benchmark peer: query translation (fast) and Flink's matches checked
against a brute-force matcher (slow: Flink needs its own environment and seconds per job).

The brute-force matcher below implements the SQL:2016 meaning of the few pattern shapes used
here (ONE ROW PER MATCH, contiguous rows in (t, seq) order, WITHIN as
``last.t - first.t <= w``), row by row with plain Python loops.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from replaydb.bench.peers.flink_sql import to_flink_sql, translate
from replaydb.errors import ParseError

# --------------------------------------------------------------------------- translation


def _q(body: str, select: str = "*", source: str = "s") -> str:
    return f"SELECT {select} FROM {source} MATCH_RECOGNIZE ({body})"


COLS = ["t", "seq", "A1", "A2", "kind"]


def test_translation_of_the_benchmark_shape():
    q = _q("ORDER BY t MEASURES FIRST(S1.seq) AS first_seq, LAST(S3.seq) AS last_seq "
           "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (S1 S2 T* S3) WITHIN 300 "
           "DEFINE S1 AS S1.A1 BETWEEN 0.1 AND 0.15, S2 AS S2.A2 >= 0.2 AND S2.A2 < 0.3, "
           "S3 AS S3.A1 < 0.5, T AS TRUE")
    tr = translate(q, "events", "t", None, columns=COLS)
    assert tr.sql == (
        "SELECT *\nFROM `events`\nMATCH_RECOGNIZE (\n"
        "  ORDER BY `rowtime`, `seq`\n"
        "  MEASURES FIRST(`S1`.`seq`) AS `first_seq`, LAST(`S3`.`seq`) AS `last_seq`\n"
        "  ONE ROW PER MATCH\n"
        "  AFTER MATCH SKIP TO NEXT ROW\n"
        "  PATTERN (`S1` `S2` `T`*? `S3`)\n"
        "  WITHIN INTERVAL '0.301' SECOND(9, 3)\n"
        "  DEFINE `S1` AS `S1`.`A1` BETWEEN 0.1 AND 0.15, "
        "`S2` AS `S2`.`A2` >= 0.2 AND `S2`.`A2` < 0.3, `S3` AS `S3`.`A1` < 0.5, `T` AS TRUE\n)")
    assert (tr.window, tr.flink_window_ms, tr.relaxed) == (300, 301, ("T",))


def test_within_is_one_unit_wider_because_flink_is_strict():
    for within, unit, w in [("300", None, 300), ("5s", "s", 5), ("2 MINUTES", "ms", 120_000),
                            ("INTERVAL '5' SECOND", "ms", 5000), ("0", None, 0),
                            ("1500 ms", "us", 1_500_000)]:
        tr = translate(_q(f"PATTERN (A B) WITHIN {within} DEFINE A AS A.A1 > 0"), "e", "t",
                       unit)
        assert (tr.window, tr.flink_window_ms) == (w, w + 1)
        assert f"WITHIN INTERVAL '{(w + 1) / 1000:.3f}' SECOND(9, 3)" in tr.sql
    with pytest.raises(ParseError, match="whole number"):
        translate(_q("PATTERN (A B) WITHIN 1 ms DEFINE A AS A.A1 > 0"), "e", "t", "s")
    with pytest.raises(ParseError, match="declared time unit"):
        translate(_q("PATTERN (A B) WITHIN 5 SECONDS DEFINE A AS A.A1 > 0"), "e", "t", None)
    with pytest.raises(ParseError, match="after WITHIN"):
        translate(_q("PATTERN (A B) WITHIN 5 6 DEFINE A AS A.A1 > 0"), "e", "t", None)


def test_greedy_loops_become_reluctant_only_on_always_true_variables():
    sql = to_flink_sql(_q("PATTERN (A T* B X+ C G{0,5} D H{2} E) "
                          "DEFINE A AS A.A1 > 0, B AS B.A1 > 0, X AS X.A1 < 1, C AS TRUE, "
                          "T AS TRUE, H AS TRUE"), "e", columns=COLS)
    # T (TRUE) and G (not defined) loop -> reluctant; X has a condition; H{2} does not loop
    assert "PATTERN (`A` `T`*? `B` `X`+ `C` `G`{0,5}? `D` `H`{2} `E`)" in sql
    sql = to_flink_sql(_q("PATTERN (A T*? B U{1,} C) DEFINE A AS A.A1 > 0"), "e")
    assert "PATTERN (`A` `T`*? `B` `U`{1,}? `C`)" in sql


def test_names_quoting_case_and_operators():
    q = _q('MEASURES first(a.SEQ), last(b."A2") - first(a.a2) AS "Delta x", b.kind k '
           "AFTER MATCH SKIP TO b PATTERN a b "
           "DEFINE a AS a1 != 0.5 AND A.kind == \u2018x\u2019, b AS prev(b.A1) <> b.a1",
           select='"Delta x", k', source="mystream")
    sql = to_flink_sql(q, "events", columns=COLS)
    assert sql.startswith("SELECT `Delta x`, k\nFROM `events`\n")
    assert ("MEASURES FIRST(`A`.`seq`) AS `first(a.SEQ)`, "
            "LAST(`B`.`A2`) - FIRST(`A`.`A2`) AS `Delta x`, `B`.`kind` AS `k`") in sql
    assert "AFTER MATCH SKIP TO LAST `B`" in sql
    assert "PATTERN (`A` `B`)" in sql
    assert ("DEFINE `A` AS `A`.`A1` <> 0.5 AND `A`.`kind` = 'x', "
            "`B` AS PREV(`B`.`A1`) <> `B`.`A1`") in sql
    # a string with a quote is re-escaped; an unknown column is an error naming it
    assert "'it''s'" in to_flink_sql(_q("PATTERN (A) DEFINE A AS A.kind = 'it''s'"), "e",
                                      columns=COLS)
    with pytest.raises(ParseError, match="unknown column 'nope'") as e:
        to_flink_sql(_q("PATTERN (A) DEFINE A AS A.nope > 1"), "e", columns=COLS)
    assert e.value.col == len("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS A.") + 1


def test_expressions_keep_literals_lists_and_nesting():
    sql = to_flink_sql(_q("MEASURES COUNT(*) AS n, AVG(B.A1) AS m PATTERN (A B+) "
                          "DEFINE A AS A.kind IN ('a,b', 'c d') AND (A.A1 > 1 OR NOT "
                          "(A.A2 < -2)), B AS B.A1 > PREV(B.A1) * 2"), "e", columns=COLS)
    assert "MEASURES COUNT(*) AS `n`, AVG(`B`.`A1`) AS `m`\n" in sql
    assert ("DEFINE `A` AS `A`.`kind` IN ('a,b', 'c d') AND (`A`.`A1` > 1 OR NOT "
            "(`A`.`A2` < - 2)), `B` AS `B`.`A1` > PREV(`B`.`A1`) * 2\n") in sql
    # B+ has a condition: it stays greedy
    assert "PATTERN (`A` `B`+)" in sql


def test_order_by_partition_alias_and_missing_define():
    sql = to_flink_sql(_q("PARTITION BY KIND ORDER BY t ASC, seq "
                          "PATTERN (A B)") + " AS m;", "e", columns=COLS)
    assert "PARTITION BY `kind`\n  ORDER BY `rowtime`, `seq`\n" in sql
    assert sql.endswith("DEFINE `A` AS TRUE\n) AS `m`")
    # the standard's default skip is written out: Flink's own is TO NEXT ROW
    assert "ONE ROW PER MATCH\n  AFTER MATCH SKIP PAST LAST ROW\n  PATTERN" in sql
    # the tie-break needs a seq column; a custom rowtime name is used as given
    sql = to_flink_sql(_q("PATTERN (A) DEFINE A AS TRUE"), "e", columns=["t", "x"],
                       rowtime="rowtime_")
    assert "ORDER BY `rowtime_`\n" in sql
    with pytest.raises(ParseError, match="ORDER BY may only name t"):
        to_flink_sql(_q("ORDER BY A1 PATTERN (A) DEFINE A AS TRUE"), "e", columns=COLS)
    with pytest.raises(ParseError, match="DESC"):
        to_flink_sql(_q("ORDER BY t DESC PATTERN (A) DEFINE A AS TRUE"), "e", columns=COLS)


@pytest.mark.parametrize("body, what", [
    ("ALL ROWS PER MATCH PATTERN (A) DEFINE A AS TRUE", "ALL ROWS PER MATCH"),
    ("PATTERN (A | B) DEFINE A AS TRUE", "alternation"),
    ("PATTERN ((A B)+ C) DEFINE A AS TRUE", "quantifier on a group"),
    ("PATTERN (PERMUTE(A, B)) DEFINE A AS TRUE", "PERMUTE"),
    ("PATTERN (A B) SUBSET U = (A, B) DEFINE A AS TRUE", "SUBSET"),
    ("MEASURES MATCH_NUMBER() AS m PATTERN (A) DEFINE A AS TRUE", "MATCH_NUMBER"),
    ("MEASURES CLASSIFIER() AS c PATTERN (A) DEFINE A AS TRUE", "CLASSIFIER"),
])
def test_constructs_flink_lacks_are_rejected_with_their_position(body, what):
    with pytest.raises(ParseError, match="not supported by Flink") as e:
        to_flink_sql(_q(body), "e", columns=COLS)
    assert what.split()[0].lower() in str(e.value).lower()
    assert e.value.hint


@pytest.mark.parametrize("text, message", [
    ("FROM s MATCH_RECOGNIZE (PATTERN (A))", "expected SELECT"),
    (_q("PATTERN (A) DEFINE A AS A.A1 > 5s"), "duration"),
    (_q("PATTERN (A) DEFINE A AS A.A1 ~ 1"), "'~'"),
    (_q("MEASURES A1 AS x PATTERN (A) DEFINE A AS TRUE"), "qualify the column A1"),
    (_q("PATTERN (A) DEFINE A AS TRUE, A AS TRUE"), "defined twice"),
    (_q("PATTERN (A B) DEFINE B AS LAST(A1, 1) < B.A1"), "qualify the column A1.*whole match"),
    (_q("PATTERN (A B) DEFINE B AS B.A1 > (SUM((A1)) + 1)"), "qualify the column A1"),
    (_q("DEFINE A AS TRUE"), "missing PATTERN"),
    (_q("PATTERN (A) DEFINE A AS TRUE") + " extra junk", "unexpected 'junk'"),
    ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS TRUE", "unclosed"),
])
def test_bad_queries_fail_with_a_position(text, message):
    with pytest.raises(ParseError, match=message) as e:
        to_flink_sql(text, "e", columns=COLS)
    assert e.value.line >= 1 and e.value.col >= 1


# --------------------------------------------------------------------------- brute force


def brute_force(t, conds, shape, w, skip="next"):
    """Matches (first seq, last seq) of a contiguous pattern over rows 0..n-1 (seq = row).

    ``shape``: a list of variable names; ``"T*"`` is an always-true reluctant gap (the
    earliest-ending match of each start); ``conds[v]`` a boolean array per variable.
    ``skip``: ``"next"`` (AFTER MATCH SKIP TO NEXT ROW) or ``"past"`` (SKIP PAST LAST ROW).
    """
    n = len(t)
    out = []

    def extend(pos, k, start):
        # earliest-ending completion of shape[k:] from row pos, or None
        if k == len(shape):
            return pos - 1
        sym = shape[k]
        if sym == "T*":
            for p in range(pos, n):
                if t[p] - t[start] > w:
                    return None
                end = extend(p, k + 1, start)
                if end is not None:
                    return end
            return None
        if pos >= n or not conds[sym][pos] or t[pos] - t[start] > w:
            return None
        return extend(pos + 1, k + 1, start)

    i = 0
    while i < n:
        end = extend(i, 0, i)
        if end is not None:
            out.append((i, end))
            if skip == "past":
                i = end + 1
                continue
        i += 1
    return out


def _stream(n=3000, seed=7, t0=1_700_000_000):
    """Irregular times with ties (gaps 0..3 units), A1 uniform, A2 a small integer."""
    rng = np.random.default_rng(seed)
    t = t0 + np.cumsum(rng.integers(0, 4, n)).astype(np.int64)
    return pa.table({"t": t, "seq": np.arange(n, dtype=np.int64), "A1": rng.random(n),
                     "A2": rng.integers(0, 5, n).astype(np.int32)})


def test_brute_force_matcher_on_a_hand_checked_stream():
    t = np.array([0, 1, 2, 3, 4, 10, 11, 12])
    a = np.array([1, 0, 1, 0, 0, 1, 0, 1], dtype=bool)
    b = ~a
    # A B adjacent: rows (0,1), (2,3), (5,6)
    assert brute_force(t, {"A": a, "B": b}, ["A", "B"], 100) == [(0, 1), (2, 3), (5, 6)]
    # A T* A within 2: from 0 the first A at 2 (t diff 2 <= 2); from 2 none within 2 (next A
    # at row 5, t=10); from 5 row 7 (t diff 2)
    assert brute_force(t, {"A": a}, ["A", "T*", "A"], 2) == [(0, 2), (5, 7)]
    assert brute_force(t, {"A": a}, ["A", "T*", "A"], 1) == []
    # skip past last row: A T* B from 0 ends at 1; next start 2 ends at 3; 5 -> 6
    assert brute_force(t, {"A": a, "B": b}, ["A", "T*", "B"], 10, "past") == [
        (0, 1), (2, 3), (5, 6)]


# --------------------------------------------------------------------------- Flink (slow)


@pytest.fixture(scope="module")
def flink_python():
    from replaydb.bench.peers.flink import ensure_env

    return ensure_env()


def _queries():
    """(replaydb query, brute-force shape, conditions builder, window, skip)."""
    head = "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t MEASURES FIRST(S1.seq) AS s, "
    return {
        "three": (head + "LAST(S3.seq) AS e ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
                  "PATTERN (S1 S2 S3) WITHIN 4 SECONDS DEFINE S1 AS S1.A1 BETWEEN 0.0 AND 0.5, "
                  "S2 AS S2.A1 >= 0.25 AND S2.A1 < 0.75, S3 AS S3.A2 IN (1, 2))",
                  ["S1", "S2", "S3"],
                  lambda d: {"S1": (d["A1"] >= 0) & (d["A1"] <= 0.5),
                             "S2": (d["A1"] >= 0.25) & (d["A1"] < 0.75),
                             "S3": np.isin(d["A2"], [1, 2])}, 4, "next"),
        "gap": (head + "LAST(S2.seq) AS e ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
                "PATTERN (S1 T* S2) WITHIN 6 DEFINE S1 AS S1.A1 < 0.1, S2 AS a2 = 4, "
                "T AS TRUE)",
                ["S1", "T*", "S2"],
                lambda d: {"S1": d["A1"] < 0.1, "S2": d["A2"] == 4}, 6, "next"),
        "block_gap": (head + "LAST(S3.seq) AS e AFTER MATCH SKIP TO NEXT ROW "
                      "PATTERN (S1 S2 T*? S3) WITHIN 9 "
                      "DEFINE S1 AS S1.A1 < 0.3, S2 AS S2.A2 <= 1, S3 AS S3.A1 > 0.9)",
                      ["S1", "S2", "T*", "S3"],
                      lambda d: {"S1": d["A1"] < 0.3, "S2": d["A2"] <= 1, "S3": d["A1"] > 0.9},
                      9, "next"),
        "past": (head + "LAST(S2.seq) AS e AFTER MATCH SKIP PAST LAST ROW "
                 "PATTERN (S1 T*? S2) WITHIN 20 DEFINE S1 AS S1.A2 = 0, S2 AS S2.A2 = 0)",
                 ["S1", "T*", "S2"],
                 lambda d: {"S1": d["A2"] == 0, "S2": d["A2"] == 0}, 20, "past"),
    }


@pytest.mark.slow
def test_flink_finds_exactly_the_brute_force_matches(flink_python, tmp_path):
    from replaydb.bench.peers.flink import run_flink

    events = _stream()
    d = {c: events.column(c).to_numpy() for c in ("A1", "A2")}
    t = events.column("t").to_numpy()
    spec = _queries()
    queries = {name: s[0] for name, s in spec.items()}
    queries["rejected"] = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES FIRST(A.seq) AS s "
                           "PATTERN (A) DEFINE A AS NO_SUCH_FUNCTION(A.A1) > 0)")
    res = run_flink(events, queries, time_unit="s", mode="rows", parallelism=2,
                    startup_probe=False, timeout_s=900)
    assert "fatal" not in res
    for name, (_text, shape, conds, w, skip) in spec.items():
        entry = res["queries"][name]
        assert entry["error"] is None, (name, entry["error"])
        rows = entry["rows"]
        got = sorted(zip(rows.column("s").to_pylist(), rows.column("e").to_pylist()))
        want = brute_force(t, conds(d), shape, w, skip)
        assert len(want) > 20, name  # the stream exercises the pattern
        assert got == want, name
        assert entry["matches"] == len(want)
    # the window boundary is hit: some matches span exactly w units
    gap = res["queries"]["gap"]["rows"]
    spans = t[gap.column("e").to_numpy()] - t[gap.column("s").to_numpy()]
    assert spans.max() == 6
    assert "NO_SUCH_FUNCTION" in res["queries"]["rejected"]["error"]
    assert res["queries"]["rejected"]["matches"] is None


@pytest.mark.slow
def test_flink_count_mode_and_start_up_probe(flink_python):
    from replaydb.bench.peers.flink import run_flink

    events = _stream(n=2000, seed=11, t0=0)
    d = {c: events.column(c).to_numpy() for c in ("A1", "A2")}
    t = events.column("t").to_numpy()
    spec = _queries()
    names = ["gap", "three"]
    res = run_flink(events, {n: spec[n][0].replace("4 SECONDS", "4") for n in names},
                    mode="count", parallelism=1, timeout_s=900)
    assert set(res["startup"]) == {"gateway_s", "trivial_cold_s", "trivial_warm_s"}
    for name in names:
        _text, shape, conds, w, skip = spec[name]
        entry = res["queries"][name]
        assert entry["error"] is None, entry["error"]
        assert entry["matches"] == len(brute_force(t, conds(d), shape, w, skip))
        assert entry["wall_s"] > 0


# --------------------------------------------------------------------------- driver (fast)


def test_events_are_checked_before_anything_starts(monkeypatch, tmp_path):
    from replaydb.bench.peers import flink
    from replaydb.errors import DataError, UsageError

    ok = pa.table({"t": np.array([0, 1, 1, 3], dtype=np.int64),
                   "seq": np.arange(4, dtype=np.int64), "x": np.zeros(4)})
    assert flink._check_events(ok, "t", "seq") == 0
    with pytest.raises(DataError, match="row 2.*not ordered by time"):
        flink._check_events(ok.set_column(0, "t", pa.array([0, 5, 4, 6], pa.int64())), "t",
                            "seq")
    with pytest.raises(DataError, match="row 2.*equal times are not ordered by seq"):
        flink._check_events(ok.set_column(1, "seq", pa.array([0, 2, 1, 3], pa.int64())), "t",
                            "seq")
    with pytest.raises(DataError, match="column 'when'"):
        flink._check_events(ok, "when", "seq")
    with pytest.raises(DataError, match="column 'd'.*no Flink CSV mapping"):
        flink._check_events(ok.append_column("d", pa.array([b"x"] * 4)), "t", "seq")
    with pytest.raises(DataError, match="time span"):
        flink._check_events(ok.set_column(0, "t", pa.array([0, 1, 1, flink.MAX_SPAN + 1],
                                                            pa.int64())), "t", "seq")
    assert flink._rowtime_name(["t", "rowtime", "rowtime_"]) == "rowtime__"
    assert flink.flink_type(pa.float64(), "x") == "DOUBLE"
    with pytest.raises(UsageError, match="unknown mode"):
        flink.run_flink(ok, {"q": "x"}, mode="collect")
    with pytest.raises(UsageError, match="batch=2 needs mode='rows'"):
        flink.run_flink(ok, {"q": "x"}, mode="count", batch=2)
    # a missing environment is reported with the make target as the hint (no build here)
    monkeypatch.setenv("REPLAYDB_FLINK_VENV", str(tmp_path / "none"))
    if flink.shutil.which("java") is not None:
        with pytest.raises(flink.FlinkUnavailable) as e:
            flink.ensure_env(build=False)
        assert "make bench-env-flink" in (e.value.hint or "")


def test_the_datasets_query_generator_translates():
    """The side-by-side benchmark feeds the queries of ``replaydb.datasets.queries``."""
    from replaydb.datasets.queries import random_queries

    cols = ["t", "seq", "A1", "A2", "A3", "A4", "A5"]
    for m in (2, 4, 8, 16, 32):
        for text in random_queries(m, 5, seed=m):
            tr = translate(text, "events", "t", None, columns=cols)
            assert tr.flink_window_ms == 301
            assert tr.sql.count(">=") == m and tr.sql.count("<=") == m
            assert set(tr.relaxed) == {f"T{k}" for k in range(1, text.count("AS TRUE") + 1)}
            assert "*?" in tr.sql and " * " not in tr.sql
