"""Which language a query's text is written in, from its first keywords.

Each function answers for one built-in language, never raises, and imports nothing but the
lexer: :mod:`replaydb.planner.languages` asks them in order and loads only the module of the
language that accepts the text (a query from the shell then pays for one language's imports).
Each language module's own ``detect`` is the function here.
"""

from __future__ import annotations

import re

_WINDOW = re.compile(
    r"^\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*SELECT\b.*?\bTABLE\s*\(\s*(?:TUMBLE|HOP|TUMBLE_ROWS|"
    r"HOP_ROWS)\s*\(",
    re.IGNORECASE | re.DOTALL,
)


def window_sql(text: str) -> bool:
    """True when ``text`` looks like a SELECT over a windowing table function."""
    try:
        return isinstance(text, str) and _WINDOW.match(text[:20_000]) is not None
    except Exception:  # pragma: no cover - defensive: detect must not raise
        return False


def match_recognize(text: str) -> bool:
    """True for ``SELECT ... MATCH_RECOGNIZE``."""
    try:
        head = text.lstrip().lstrip("(").lstrip()
        return head[:6].upper() == "SELECT" and "MATCH_RECOGNIZE" in text.upper()
    except Exception:  # pragma: no cover - defensive: detect must not raise
        return False


def tpstream(text: str) -> bool:
    """True if the text looks like a TPStream query (FROM ... DEFINE ... PATTERN ...)."""
    try:
        head = text.lstrip().upper()
    except Exception:  # noqa: BLE001 - must not raise
        return False
    if not head.startswith("FROM"):
        return False
    words = set(head.replace(",", " ").replace("(", " ").split())
    return "DEFINE" in words and "PATTERN" in words and "WITHIN" in words \
        and "MATCH_RECOGNIZE" not in words and "SELECT" not in words


def greta(text: str) -> bool:
    """True when ``text`` starts like a GRETA query (``RETURN ...`` or ``FROM s RETURN ...``)."""
    from replaydb.planner.lang.lexer import tokenize

    try:
        toks = tokenize(text)
    except Exception:  # noqa: BLE001 - detect must not raise
        return False
    if not toks:
        return False
    if toks[0].is_kw("RETURN"):
        return True
    return (len(toks) > 2 and toks[0].is_kw("FROM") and toks[1].kind == "ident"
            and toks[2].is_kw("RETURN"))


def sase(text: str) -> bool:
    """True for queries starting with PATTERN (or FROM x PATTERN)."""
    try:
        words = text.split(None, 3)
        if not words:
            return False
        if words[0].upper() == "PATTERN":
            return True
        return len(words) >= 3 and words[0].upper() == "FROM" and words[2].upper() == "PATTERN"
    except Exception:  # pragma: no cover
        return False
