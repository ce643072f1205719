"""Mutants of the golden corpus's queries, for the mutation fuzzer (test_reliability_mutants.py).

A mutant is a corpus query with one edit, drawn by a seeded ``random.Random``:

* ``duplicate`` - a clause keyword written twice (``DEFINE DEFINE``);
* ``misspell`` - a clause keyword with a letter added, dropped or changed (``DEFINES``);
* ``drop`` - a clause keyword left out;
* ``swap`` - two clause keywords exchanged;
* ``extreme`` - a number literal replaced by an extreme value (huge, tiny, out of int64 range,
  beyond float range, zero);
* ``nest`` - a number literal wrapped in many parentheses.

``must_fail`` is set for ``duplicate`` and ``misspell``: a query whose clause keyword was
repeated or misspelled must never run. The other kinds may run or fail; either way only with a
replaydb error. Keywords are found as whole words outside string literals.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

CLAUSE_KEYWORDS = {
    "match_recognize": ("PARTITION", "ORDER", "MEASURES", "AFTER", "PATTERN", "WITHIN",
                        "DEFINE"),
    "sase": ("PATTERN", "WHERE", "WITHIN", "RETURN"),
    "greta": ("RETURN", "PATTERN", "WHERE", "WITHIN", "SLIDE"),
    "tpstream": ("FROM", "DEFINE", "PATTERN", "WITHIN", "RETURN"),
    "window_sql": ("SELECT", "FROM", "WHERE", "GROUP", "ORDER", "LIMIT"),
    "imprecise": ("PATTERN", "WHERE", "WITHIN", "RETURN"),
}
"""Per language (the corpus folder's name): the words that open a clause."""

EXTREMES = ("18446744073709551615", "9223372036854775808", "-9223372036854775809", "1e309",
            "1e-320", "0", "99999999999999999999999999999999999999")
NEST_DEPTH = (60, 400)
KINDS = ("duplicate", "misspell", "drop", "swap", "extreme", "nest")

_STRING = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


@dataclass(frozen=True)
class Mutant:
    """One mutated query: its text, the kind of edit and whether it must fail."""

    text: str
    kind: str
    must_fail: bool
    source: str


def _outside_strings(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    quoted = [m.span() for m in _STRING.finditer(text)]
    return [s for s in spans if not any(a <= s[0] < b for a, b in quoted)]


def keyword_spans(text: str, language: str) -> list[tuple[int, int]]:
    """Where the language's clause keywords stand in ``text`` (whole words, any case)."""
    words = "|".join(CLAUSE_KEYWORDS[language])
    spans = [m.span() for m in re.finditer(rf"(?<![\w\"-])(?:{words})(?![\w\"-])", text, re.I)]
    return _outside_strings(text, spans)


def number_spans(text: str) -> list[tuple[int, int]]:
    """Where number literals stand in ``text`` (outside string literals)."""
    return _outside_strings(text, [m.span() for m in _NUMBER.finditer(text)])


def _misspelled(word: str, rng: random.Random) -> str:
    i = rng.randrange(len(word))
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    how = rng.choice(("add", "drop", "change"))
    if how == "add" or len(word) <= 2:
        return word[:i] + rng.choice(letters) + word[i:]
    if how == "drop":
        return word[:i] + word[i + 1:]
    other = rng.choice([c for c in letters if c != word[i].upper()])
    return word[:i] + other + word[i + 1:]


def mutate(text: str, language: str, rng: random.Random, source: str) -> Mutant | None:
    """One mutant of ``text`` (None when the drawn kind has nothing to edit)."""
    kind = rng.choice(KINDS)
    kws = keyword_spans(text, language)
    nums = number_spans(text)
    if kind in ("duplicate", "misspell", "drop") and kws:
        a, b = rng.choice(kws)
        word = text[a:b]
        new = {"duplicate": f"{word} {word}", "misspell": _misspelled(word, rng),
               "drop": ""}[kind]
        return Mutant(text[:a] + new + text[b:], kind, kind != "drop", source)
    if kind == "swap" and len(kws) >= 2:
        (a1, b1), (a2, b2) = sorted(rng.sample(kws, 2))
        w1, w2 = text[a1:b1], text[a2:b2]
        return Mutant(text[:a1] + w2 + text[b1:a2] + w1 + text[b2:], kind, False, source)
    if kind == "extreme" and nums:
        a, b = rng.choice(nums)
        return Mutant(text[:a] + rng.choice(EXTREMES) + text[b:], kind, False, source)
    if kind == "nest" and nums:
        a, b = rng.choice(nums)
        d = rng.choice(NEST_DEPTH)
        return Mutant(text[:a] + "(" * d + text[a:b] + ")" * d + text[b:], kind, False, source)
    return None


def mutants(seeds: list[tuple[str, str]], language: str, count: int, seed: int) -> list[Mutant]:
    """``count`` mutants of the (name, query) ``seeds``, reproducible from ``seed``."""
    rng = random.Random(seed)
    out: list[Mutant] = []
    tries = 0
    while len(out) < count and tries < 20 * count:
        tries += 1
        name, text = rng.choice(seeds)
        m = mutate(text, language, rng, name)
        if m is not None and m.text != text:
            out.append(m)
    return out
