"""The random MATCH_RECOGNIZE query generator of dissertation 3.5.3."""

from __future__ import annotations

import re

import numpy as np
import pytest

from replaydb.datasets import generate_pattern_queries, random_queries
from replaydb.datasets.queries import kleene_positions
from replaydb.errors import UsageError
from replaydb.planner.lang.lexer import tokenize

FORM = re.compile(
    r"SELECT \* FROM (\w+) MATCH_RECOGNIZE \(ORDER BY t "
    r"MEASURES FIRST\((S1)\.seq\) AS first_seq, LAST\((S\d+)\.seq\) AS last_seq "
    r"ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
    r"PATTERN \(([^)]*)\) WITHIN (\d+) DEFINE (.*)\)$"
)


def test_deterministic_per_seed_and_distinct_across_seeds():
    a = random_queries(8, 20, seed=3)
    assert a == random_queries(8, 20, seed=3)
    assert a != random_queries(8, 20, seed=4)
    assert len(set(a)) == 20


@pytest.mark.parametrize("m", [1, 2, 4, 8, 16, 32, 100])
def test_text_has_the_fixed_form_and_tokenizes(m):
    for q in generate_pattern_queries(m, 5, seed=m):
        match = FORM.fullmatch(q.text)
        assert match, q.text
        stream, first, last, pattern, window, defines = match.groups()
        assert stream == "synthetic" and first == "S1" and last == f"S{m}" and window == "300"
        elements = pattern.split()
        assert [e for e in elements if not e.endswith("*")] == [f"S{i}" for i in range(1, m + 1)]
        stars = [e for e in elements if e.endswith("*")]
        assert stars == [f"T{k}*" for k in range(1, len(stars) + 1)]
        assert not elements[0].endswith("*") and not elements[-1].endswith("*")
        for s in q.symbols:
            assert f"{s.name} AS {s.name}.{s.attribute} >= " in defines
        for k in range(1, len(stars) + 1):
            assert f"T{k} AS TRUE" in defines
        toks = tokenize(q.text)
        assert toks[-1].kind == "eof"


def test_ranges_cover_up_to_ten_percent_at_random_positions():
    qs = generate_pattern_queries(4, 2000, seed=1)
    widths = np.array([s.high - s.low for q in qs for s in q.symbols])
    lows = np.array([s.low for q in qs for s in q.symbols])
    assert widths.min() >= 0 and widths.max() <= 0.1 + 2e-6
    # width ~ U[0, 0.1] (+ rounding outwards by < 2e-6)
    assert abs(widths.mean() - 0.05) < 5 * 0.0289 / np.sqrt(widths.size)
    assert abs(np.median(widths) - 0.05) < 0.004
    assert lows.min() >= 0 and (lows + widths).max() <= 1.0
    # position uniform over the room left: mean of low ~ (1 - 0.05) / 2
    assert abs(lows.mean() - 0.475) < 0.01
    attrs = [s.attribute for q in qs for s in q.symbols]
    counts = np.array([attrs.count(f"A{j}") for j in range(1, 6)])
    assert np.all(np.abs(counts - len(attrs) / 5) < 5 * np.sqrt(len(attrs) * 0.16))


def test_written_bounds_contain_the_rounded_range():
    for q in generate_pattern_queries(6, 50, seed=9):
        for s in q.symbols:
            text = f"{s.name}.{s.attribute} >= "
            i = q.text.index(text) + len(text)
            low = float(q.text[i:].split()[0])
            j = q.text.index(f"{s.name}.{s.attribute} <= ") + len(f"{s.name}.{s.attribute} <= ")
            high = float(q.text[j:].split(",")[0].split(")")[0])
            assert low == s.low and high == s.high and low <= high


def test_kleene_insertion_follows_the_recursive_split():
    rng = np.random.default_rng(0)
    for m in (1, 2, 5, 16):
        for _ in range(200):
            pos = kleene_positions(m, rng)
            assert list(pos) == sorted(set(pos))
            assert all(1 <= x <= m - 1 for x in pos)
            if m >= 2:
                # recursion ends only when {x+1, .., m-1} is empty, i.e. at x = m - 1
                assert pos and pos[-1] == m - 1
            else:
                assert pos == ()
    # the first split is uniform on {1, .., m-1}
    firsts = np.array([kleene_positions(5, rng)[0] for _ in range(8000)])
    counts = np.bincount(firsts, minlength=5)[1:]
    assert np.all(np.abs(counts - 2000) < 5 * np.sqrt(8000 * 0.25 * 0.75))
    # expected count: E[K(m)] = 1 + mean over x of E[K(m - x)] -> harmonic number H_{m-1}
    m = 16
    counts = [len(kleene_positions(m, rng)) for _ in range(20_000)]
    h = sum(1 / k for k in range(1, m))
    assert abs(np.mean(counts) - h) < 5 * np.std(counts) / np.sqrt(len(counts))


def test_attribute_subset_and_options():
    qs = generate_pattern_queries(3, 10, seed=2, attributes=("A5",), stream="s", window=50)
    assert all(s.attribute == "A5" for q in qs for s in q.symbols)
    assert all(" WITHIN 50 " in q.text and " FROM s " in q.text for q in qs)
    for q in qs:
        blocks = q.basic_blocks()
        assert len(blocks) == len(q.stars_after) + 1
        assert [s for b in blocks for s in b] == ["S1", "S2", "S3"]
        assert [int(b[-1][1:]) for b in blocks[:-1]] == list(q.stars_after)


@pytest.mark.parametrize("kwargs", [
    {"m": 0, "count": 1}, {"m": 2, "count": -1}, {"m": 2, "count": 1, "attributes": ()},
    {"m": 2, "count": 1, "max_fraction": 1.5}, {"m": 2, "count": 1, "window": 0},
])
def test_bad_arguments(kwargs):
    with pytest.raises(UsageError):
        generate_pattern_queries(**kwargs)
