"""The tokenizer's compiled fast path gives exactly the tokens (or the error) of its general
path, on random texts built from the characters where the two could part: non-ASCII letters
and digits after identifiers and numbers, units, exponents, comments, ranges, quotes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.datasets.queries import random_queries
from replaydb.errors import ParseError
from replaydb.planner.lang.lexer import tokenize

PIECES = list("abXZ_09 .-/*'\"\n\t<>=!eE5(),;") + [
    "\u00b2", "\u00e9", "\u00bd", "\u00a0", "\u2019", "--", "/*", "*/", "..", "''", '""', "1.5",
    "3e4", "2E-3", "10min", "->", "<=", "<>", "\f"]


def _tokens(text: str, fast: bool) -> object:
    try:
        return [(t.kind, t.text, t.value, type(t.value), t.pos, t.unit)
                for t in tokenize(text, fast=fast)]
    except ParseError as exc:
        return ("error", str(exc))


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=24))
def test_fast_path_tokenizes_as_the_general_path(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert _tokens(text, True) == _tokens(text, False)


def test_fast_path_on_generated_queries() -> None:
    for m in (2, 8, 32):
        for q in random_queries(m, 3, seed=m, attributes=("A1", "A5"), stream="s"):
            assert _tokens(q, True) == _tokens(q, False)
