"""Fuzzing every query language's parser: only clear errors with positions, never a crash or hang.

For each language (MATCH_RECOGNIZE, SASE+, TPStream, window SQL, imprecise patterns) the texts
come from two sources:

* a seeded mutator over valid queries of that language: token deletion, duplication, swap,
  replacement by a token of any language (keywords, operators, odd numbers and strings), random
  characters (control characters, NUL, non-ASCII, lone surrogates), truncation, splicing two
  queries, deep nesting;
* hypothesis: arbitrary text, and sequences drawn from the token vocabulary.

Every text must either parse or raise :class:`replaydb.errors.ParseError` whose position lies
inside the text (0 <= pos <= len(text)) with a ``line L, column C`` message and a caret snippet.
Anything else - another exception, a ``RecursionError``, a parse that runs past a time limit - fails
the test and names the text. A text that parses is then bound to a schema: binding may refuse it
only with a :class:`replaydb.errors.ReplayDBError`. ``detect`` must never raise. At the command line
a fuzzed query is answered with exit status 0, 1 or 2 and never a traceback.

The default suite runs a few hundred mutated texts per parser (and 100 hypothesis examples per
strategy); the slow test runs 10,000 mutated texts per parser.
"""
from __future__ import annotations

import contextlib
import importlib
import random
import re
import signal
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import replaydb
from replaydb.cli import main
from replaydb.errors import ParseError, ReplayDBError

# ----------------------------------------------------------------------------- valid seed queries
SEEDS: dict[str, list[str]] = {
    "match_recognize": [
        "SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x > 1)",
        "SELECT * FROM s MATCH_RECOGNIZE (MEASURES COUNT(*) AS n PATTERN (A B+?) DEFINE A AS true)",
        "select * from s match_recognize (measures last(up.x) as p pattern (start up+) "
        "define up as up.X > prev(x))",
        "SELECT first_seq, A.x AS ax, last_t - first_t AS span, mx * 2 FROM s MATCH_RECOGNIZE "
        "(MEASURES A.x, MAX(x) AS mx PATTERN (A B+) DEFINE B AS B.x > PREV(B.x))",
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY t MEASURES FIRST(D.t) AS "
        "first_t, LAST(D.t) AS last_t, COUNT(D.x) AS n ONE ROW PER MATCH AFTER MATCH SKIP PAST "
        "LAST ROW PATTERN (D{5,}) WITHIN 1 HOUR DEFINE D AS D.x >= 60)",
        "SELECT mn, n AS cnt FROM s MATCH_RECOGNIZE (\n PARTITION BY k ORDER BY t, seq\n"
        " MEASURES MATCH_NUMBER() AS mn, COUNT(B.*) n, FINAL LAST(B.x) AS lb\n"
        " ALL ROWS PER MATCH SHOW EMPTY MATCHES\n AFTER MATCH SKIP TO FIRST b\n"
        " PATTERN ((a | c) b{2,}? d{,3} e{2})\n WITHIN INTERVAL '5' SECOND\n"
        " DEFINE a AS x > 0, b AS x > PREV(x, 2)\n) AS m;",
        "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t MEASURES A.t AS a_t ONE ROW PER MATCH "
        "PATTERN (A T1* B) WITHIN 3 HOURS DEFINE A AS A.k = 'ORD' AND A.x BETWEEN 30 AND 59, "
        "B AS B.x IN (1, 2, 3) AND B.y IS NOT NULL, T1 AS TRUE)",
    ],
    "sase": [
        "PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 1 hour",
        "from s pattern SEQ(A a)",
        "PATTERN SEQ(a x, ANY(b, c) y) WHERE strict_contiguity(x, y) { [k] }",
        "PATTERN SEQ(A x, ~(B y), C z) WHERE [k] WITHIN 12 hours",
        "PATTERN SEQ(S a, S+ b[], S c)\n WHERE skip_till_next_match(a, b[], c) {\n"
        " b[1].x > a.x and b[i].x > b[i-1].x and c.x < b[b.len].x and b.len >= 2 }",
        "PATTERN SEQ(A+ a[], B b) WHERE skip_till_next_match(a[], b) { [k] AND a[1].x % 500 = 0 "
        "AND a[i].x > a[i-1].x AND b.y < 150 } WITHIN 500",
        "PATTERN SEQ(A+ a[], B b)\nWHERE skip_till_next_match(a[], b) {\n [k]\n"
        " and a[i].x > avg(a[..i-1].x)\n and b.y < 80% * a[a.len].y }\nWITHIN 1 hour\n"
        "RETURN a[1].x AS p0, avg(a[].x), b.y",
    ],
    "tpstream": [
        "FROM s DEFINE A AS x > 1, B AS y > 2 PATTERN A before B WITHIN 5 ms",
        "FROM s DEFINE A AS x BETWEEN 60 AND 70 AT MOST 9, B AS y > 0 PATTERN A before B WITHIN 100",
        "FROM s DEFINE A AS x > 1, B AS y > 1 PATTERN A met by;overlapped-by;finished_by;equal B "
        "WITHIN 10",
        "FROM s DEFINE A AS x > 70 AND x <= 120 AND y >= -3, B AS (x < 5 OR x BETWEEN 10 AND 20) "
        "AND NOT y > 3, C AS x > 0 PATTERN A before B AND B before C WITHIN 5",
        "FROM s PARTITION BY k\nDEFINE A AS x > 8 AT LEAST 5s,\n B AS y > 70 BETWEEN 4s AND 30s,\n"
        " C AS x < -9 AT LEAST 3s\nPATTERN A meets;overlaps;starts;during B\n"
        " AND B contains;finishes;overlaps;meets C\n AND A before C\nWITHIN 5 minutes\n"
        "RETURN first(B.k) AS id,\n avg(B.y) AS avg_y;",
    ],
    "window_sql": [
        "SELECT COUNT(*) FROM TABLE(HOP_ROWS(TABLE s, 10, 100)) GROUP BY window_start, window_end",
        "select count(*) from table ( tumble(table s, descriptor(t), 5)) "
        "group by window_start, window_end",
        "SELECT window_start, window_end, k, SUM(y) AS s, COUNT(x) AS c FROM "
        "TABLE(HOP_ROWS(TABLE s, 3, 8)) GROUP BY window_start, window_end, k",
        "SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), "
        "INTERVAL '1 hour', ALIGN => FIRST)) GROUP BY window_start, window_end ORDER BY window_start",
        "SELECT window_end, SUM(x) AS total, max(y) m FROM TABLE(HOP(DATA => TABLE s, SIZE => "
        "INTERVAL '10' MINUTES, SLIDE => 5 minutes, TIMECOL => DESCRIPTOR(t), OFFSET => 30s, "
        "EMPTY => 'EMIT')) AS w WHERE w.x > 0 AND k <> 'z' GROUP BY w.window_start, window_end;",
        "SELECT window_start, window_end, k, FIRST_VALUE(x), LAST_VALUE(y), STDDEV(x) FROM "
        "TABLE(HOP(TABLE s, DESCRIPTOR(t), 4, 11)) GROUP BY window_start, window_end, k",
    ],
    "greta": [
        "RETURN k, COUNT(*) PATTERN A S+ WHERE [k] AND S.x > NEXT(S).x GROUP-BY k "
        "WITHIN 10 minutes SLIDE 10 seconds",
        "RETURN k, SUM(M.x) PATTERN SEQ(A S, B M+, C E) WHERE [k] AND M.y < NEXT(M).y "
        "GROUP-BY k WITHIN 1 minute SLIDE 30 seconds",
        "RETURN k, COUNT(*), AVG(P.x) PATTERN SEQ(NOT C N, B P+) WHERE [P.k] AND "
        "P.x > NEXT(P).x GROUP-BY k WITHIN 5 minutes SLIDE 1 minute",
        "FROM s RETURN COUNT(*), MIN(A.y) PATTERN A+ WITHIN 5",
    ],
    "imprecise": [
        "PATTERN SEQ(A a, B b) WITHIN 2 seconds",
        "PATTERN SEQ(A a, B b) WHERE a.x = 1 WITHIN 5 RETURN b, a.k, b.x",
        "pattern seq(A a) where skip_till_any_match(a) {} within 5 units;",
        "PATTERN SEQ(A a, B b, C c) WHERE skip_till_any_match(a, b, c) { [k] AND a.x > 1 } WITHIN 10",
        "PATTERN SEQ(A a, B b, C c) WHERE b.x > 95 AND c.k = a.k AND skip_till_next_match(a, b, c) "
        "WITHIN 15 seconds RETURN a, b.x",
    ],
}
LANGS = sorted(SEEDS)
MODULES = {lang: importlib.import_module(f"replaydb.planner.lang.{lang}") for lang in LANGS}

# Tokens of every language plus troublemakers: odd numbers, unterminated strings and comments,
# operators the grammars do not know.
VOCAB = sorted({
    *"SELECT FROM MATCH_RECOGNIZE PATTERN DEFINE MEASURES AS PARTITION BY ORDER WITHIN ONE ALL "
     "ROWS ROW PER MATCH AFTER SKIP PAST LAST FIRST NEXT TO SHOW EMPTY MATCHES OMIT WITH "
     "UNMATCHED FINAL RUNNING PREV SEQ ANY WHERE RETURN skip_till_any_match "
     "skip_till_next_match strict_contiguity partition_contiguity TABLE TUMBLE HOP TUMBLE_ROWS "
     "HOP_ROWS DESCRIPTOR GROUP window_start window_end INTERVAL SECOND MINUTES HOUR DAY ms s "
     "before meets overlaps starts during finishes equal contains met overlapped-by AT LEAST "
     "MOST BETWEEN AND OR NOT IN IS NULL TRUE FALSE COUNT SUM AVG MIN MAX len i a b c A B C x y "
     "k t seq GROUP-BY SLIDE NOT".split(),
    *"( ) [ ] { } , ; . .. + - * / % = <> != < <= > >= => | ? ~ ^ $ ' \" -- /* */ ` @ # \\".split(),
    "0", "1", "-1", "2.5", "1e309", "-1e309", "99999999999999999999999999", "0x10", "1e", ".",
    "'unterminated", '"unterminated', "'it''s'", '""', "''", "1s", "5 MINUTES", "{,}", "{3,1}",
    "{99999999999}", "b[0]", "b[-1]", "a[..]", "NaN", "inf", "\u00e9", "\u2019", "\x00", "\t",
})
ODD_CHARS = ["\x00", "\x01", "\x7f", "\n", "\r", "\t", "\u00a0", "\u2028", "\u2019", "\u00e9",
             "\ud800", "\U0001f600", "\ufeff", "'", '"', "(", ")", "{", "}", "[", "]", "-", "/",
             "*", ".", "`", "\\"]
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|\s+|[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|.", re.S)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def mutate(text: str, rng: random.Random, corpus: list[str]) -> str:
    """One to four random mutations of ``text`` (seeded by ``rng``; one most often)."""
    for _ in range(rng.choice([1, 1, 1, 2, 3, 4])):
        toks = _tokens(text) or [""]
        op = rng.randrange(10)
        i = rng.randrange(len(toks))
        j = rng.randrange(len(toks))
        if op == 0:  # delete tokens
            del toks[i: i + rng.randint(1, 3)]
        elif op == 1:  # duplicate a run of tokens
            toks[i:i] = toks[i: i + rng.randint(1, 5)]
        elif op == 2:  # swap two tokens
            toks[i], toks[j] = toks[j], toks[i]
        elif op == 3:  # replace by a vocabulary token
            toks[i] = rng.choice(VOCAB)
        elif op == 4:  # insert vocabulary tokens
            toks[i:i] = [" " + rng.choice(VOCAB) + " " for _ in range(rng.randint(1, 3))]
        elif op == 5:  # truncate
            text = text[: rng.randrange(len(text) + 1)]
            continue
        elif op == 6:  # random characters at random places
            chars = list(text)
            for _ in range(rng.randint(1, 4)):
                chars.insert(rng.randrange(len(chars) + 1), rng.choice(
                    ODD_CHARS + [chr(rng.randrange(32, 0x3000))]))
            text = "".join(chars)
            continue
        elif op == 7:  # splice with another query (of any language)
            other = _tokens(rng.choice(corpus))
            k = rng.randrange(len(other) + 1)
            toks = toks[:i] + other[k:] if rng.random() < 0.5 else other[:k] + toks[i:]
        elif op == 8:  # deep nesting around one token
            depth = rng.choice([5, 50, 500, 5000])
            opener, closer = rng.choice([("(", ")"), ("[", "]"), ("{", "}"), ("NOT ", ""),
                                         ("-", ""), ("PREV(", ")")])
            toks[i] = opener * depth + toks[i] + closer * rng.choice([0, depth])
        else:  # random bytes decoded leniently
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 20)))
            toks.insert(i, raw.decode("utf-8", errors="surrogateescape"))
        text = "".join(toks)
    return text


# ----------------------------------------------------------------------------- the checks
SCHEMA = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                    ("k", pa.string()), ("x", pa.float64()), ("y", pa.int64()),
                    ("t_lower", pa.int64()), ("t_upper", pa.int64())])
CASE_LIMIT_S = 20.0  # generous: the machine running the suite may be shared


class Hang(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float, text: str):
    def on_alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s for {text!r}")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def check_text(lang: str, text: str, *, bind: bool = True) -> str:
    """Parse (and bind) ``text``; returns 'parsed', 'bound' or 'error'; fails on anything else."""
    mod = MODULES[lang]
    for m in MODULES.values():  # detect never raises, whatever the text
        assert m.detect(text) in (True, False)
    with time_limit(CASE_LIMIT_S, text):
        try:
            q = mod.parse(text)
        except ParseError as e:
            assert 0 <= e.pos <= len(text), (text, e.pos)
            assert 1 <= e.line <= text.count("\n") + 1 and e.col >= 1, (text, e)
            assert str(e).startswith(f"line {e.line}, column {e.col}: "), str(e)
            assert e.snippet.endswith("^"), e.snippet
            return "error"
        except Exception as e:  # noqa: BLE001 - the point of the test
            raise AssertionError(f"{lang} parser raised {type(e).__name__}: {e} on {text!r}") from e
        if not bind:
            return "parsed"
        try:
            mod.bind(q, SCHEMA, "ms")
        except ReplayDBError:
            return "parsed"
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"{lang} bind raised {type(e).__name__}: {e} on {text!r}") from e
        return "bound"


def run_mutations(lang: str, n: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    corpus = [s for ss in SEEDS.values() for s in ss]
    counts = {"error": 0, "parsed": 0, "bound": 0}
    for _ in range(n):
        text = mutate(rng.choice(SEEDS[lang]), rng, corpus)
        counts[check_text(lang, text)] += 1
    return counts


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("lang", LANGS)
def test_seeds_parse_and_bind(lang):
    """The seeds are valid: mutations start from real queries of the language."""
    for text in SEEDS[lang]:
        assert check_text(lang, text) == "bound", text


@pytest.mark.parametrize("lang", LANGS)
def test_mutated_queries_parse_or_fail_with_a_position(lang):
    counts = run_mutations(lang, 300, seed=LANGS.index(lang))
    # The mutator must exercise both sides: errors and texts that still parse.
    assert counts["error"] > 30 and counts["parsed"] + counts["bound"] >= 5, counts


@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
def test_mutated_queries_10k(lang):
    counts = run_mutations(lang, 10_000, seed=1000 + LANGS.index(lang))
    print(f"fuzz {lang}: 10000 texts, {counts}")
    assert counts["error"] > 1000, counts


_FUZZ = settings(max_examples=100, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("lang", LANGS)
@_FUZZ
@given(text=st.text(max_size=200))
def test_arbitrary_text(lang, text):
    check_text(lang, text)


@pytest.mark.parametrize("lang", LANGS)
@_FUZZ
@given(data=st.data())
def test_token_sequences(lang, data):
    words = data.draw(st.lists(st.sampled_from(VOCAB), max_size=40))
    head = data.draw(st.sampled_from(["", "SELECT ", "PATTERN ", "FROM s ", "PATTERN SEQ("]))
    check_text(lang, head + " ".join(words))


def test_deep_nesting_is_a_parse_error_not_a_recursion_error():
    """Expression nesting far beyond the interpreter's recursion limit."""
    depth = sys.getrecursionlimit() * 2
    texts = {
        "match_recognize": "SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS "
                           + "(" * depth + "x > 1" + ")" * depth + ")",
        "sase": "PATTERN SEQ(A a) WHERE " + "NOT " * depth + "a.x > 1",
        "tpstream": "FROM s DEFINE A AS " + "-" * depth + "x > 1, B AS y > 1 PATTERN A before B "
                    "WITHIN 5",
        "window_sql": "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), 5)) WHERE "
                      + "(" * depth + "x > 1" + ")" * depth + " GROUP BY window_start, window_end",
        "imprecise": "PATTERN SEQ(A a) WHERE " + "(" * depth + "a.x = 1" + ")" * depth
                     + " WITHIN 5",
    }
    for lang, text in texts.items():
        check_text(lang, text)


# ----------------------------------------------------------------------------- the CLI
@pytest.fixture(scope="module")
def fuzz_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "store"
    store = replaydb.open(path, create=True)
    n = 200
    store.append("s", pa.table({
        "t": np.arange(n, dtype=np.int64) * 10, "type": ["A", "B", "C", "a", "b"] * (n // 5),
        "k": ["p", "q"] * (n // 2), "x": np.arange(n, dtype=np.float64) % 13,
        "y": np.arange(n, dtype=np.int64) % 7}), type_column="type")
    return path


def test_fuzzed_queries_at_the_cli(fuzz_store, capsys):
    """Mutated queries through ``replaydb query``: exit 0, 1 or 2, never a traceback; an error is
    one ``error:`` line (with ``line L, column C`` for parse errors) followed by hints/snippet."""
    rng = random.Random(7)
    corpus = [s for ss in SEEDS.values() for s in ss]
    codes = {0: 0, 1: 0, 2: 0}
    for i in range(60):
        lang = LANGS[i % len(LANGS)]
        text = mutate(rng.choice(SEEDS[lang]), rng, corpus)
        if "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            text = text.replace("\x00", " ")
            text = "".join(c if not 0xD800 <= ord(c) <= 0xDFFF else "?" for c in text)
        with time_limit(60, text):
            code = main(["query", str(fuzz_store), text, "--timeout", "30"])
        out, err = capsys.readouterr()
        assert code in codes and "Traceback" not in err, (text, code, err)
        if code:
            assert err.startswith("error: "), (text, err)
        codes[code] += 1
    assert codes[1] > 10, codes
