"""Tokenizer shared by every query language (MATCH_RECOGNIZE, SASE+, TPStream, GRETA, window SQL).

Tokens carry their 0-based offset so every parse error can name the position. Keywords are not
reserved here: they are identifiers that parsers compare case-insensitively, so a column may be
called ``type`` or ``start`` where the grammar allows.

Token kinds: ``ident`` (``value`` is the name; double-quoted identifiers keep case and may contain
any character, ``""`` escapes a quote), ``number`` (``value`` is int or float), ``string``
(single-quoted, ``''`` escapes), ``op`` (punctuation and operators), ``eof``.
A number directly followed by letters (``5s``, ``10min``) is lexed as a number token whose ``unit``
holds the letters, for the duration shorthand some languages accept.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from replaydb.errors import ParseError

_OPS = sorted(
    ["<=", ">=", "<>", "!=", "==", "..", "->", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")",
     ",", ".", ";", "[", "]", "{", "}", "|", "?", "^", "$", "!", "~", ":"],
    key=len, reverse=True,
)

MAX_QUERY_CHARS = 1_000_000

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*(?![A-Za-z0-9_\x80-\U0010ffff])"
_NUMBER = r"[0-9]{1,300}(?:\.[0-9]+)?(?![0-9A-Za-z_.eE\x80-\U0010ffff])"
_OP = ("|".join(re.escape(o) for o in _OPS if o not in ("-", "/", "."))
       + r"|-(?!-)|/(?!\*)|\.(?![0-9])")
"""The common tokens (:data:`_FAST`, :data:`_COMMON`): an identifier, a number and an
operator, each with what must not follow it."""

_FAST = re.compile(
    rf"[ \t\r\n]*(?:(?P<ident>{_IDENT})|(?P<number>{_NUMBER})|(?P<op>{_OP}))"
    r"|(?P<space>[ \t\r\n]+)"
)
"""The common tokens in one compiled match, with the ASCII whitespace before them: ASCII
identifiers and plain numbers not followed by anything that would extend them (non-ASCII
letters, units, exponents; integers of up to 300 digits, which ``int`` converts), and operators
that cannot start a comment or a number; whitespace before anything else is one match of its
own. Anything else takes the general path below, which defines the language; this only spares
the common tokens the general path's Python work per character."""

_new_token = tuple.__new__
"""Makes a :class:`Token` from its fields' tuple without the generated ``__new__``'s call (a
third of the fast path's time per token)."""


class Token(NamedTuple):
    """One token. ``kw`` is the upper-cased name of an unquoted identifier (what keywords are
    compared with, computed once here), else None."""

    kind: str
    text: str
    value: object
    pos: int
    unit: str | None = None
    kw: str | None = None

    def is_kw(self, *words: str) -> bool:
        """True if this is an unquoted identifier equal (case-insensitively) to one of ``words``."""
        return self.kw in words

    def is_op(self, *ops: str) -> bool:
        return self.kind == "op" and self.text in ops

    def describe(self) -> str:
        if self.kind == "eof":
            return "end of query"
        return repr(self.text)


_COMMON = re.compile(rf"([ \t\r\n]*)(?:({_IDENT})|({_NUMBER})|({_OP})|$)")
""":data:`_FAST`'s tokens as groups (whitespace, identifier, number, operator), for
:func:`_all_common`."""


def _all_common(text: str) -> list[Token] | None:
    """The tokens of ``text`` (without the end token) when every one is a common one
    (:data:`_FAST`), found by one ``findall`` - the positions follow from the lengths - and
    None when a character is not (a string, a comment, ...: ``findall`` skips it, so the
    lengths fall short of the text). One ``findall`` call replaces a regex match (and its
    Python-level dispatch) per token."""
    toks: list[Token] = []
    append = toks.append
    pos = 0
    for ws, ident, num, op in _COMMON.findall(text):
        pos += len(ws)
        if ident:
            append(_new_token(Token, ("ident", ident, ident, pos, None, ident.upper())))
            pos += len(ident)
        elif op:
            append(_new_token(Token, ("op", op, op, pos, None, None)))
            pos += len(op)
        elif num:
            append(_new_token(Token, ("number", num, float(num) if "." in num else int(num),
                                      pos, None, None)))
            pos += len(num)
    return toks if pos == len(text) else None


def _isdigit(c: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts superscripts such as '²', which ``int``
    cannot convert."""
    return "0" <= c <= "9"


def tokenize(text: str, *, fast: bool = True) -> list[Token]:
    """Split ``text`` into tokens (comments ``-- ...`` to end of line and ``/* ... */`` skipped).
    ``fast=False`` takes the general path for every token (the same tokens; for tests)."""
    if len(text) > MAX_QUERY_CHARS:
        raise ParseError(f"query is longer than {MAX_QUERY_CHARS:,} characters", text=text[:200], pos=0)
    toks: list[Token] = []
    append = toks.append
    i, n = 0, len(text)
    if fast:
        got = _all_common(text)
        if got is not None:
            got.append(Token("eof", "", None, n))
            return got
    match = _FAST.match if fast else None
    while i < n:
        mt = match(text, i) if match is not None else None
        if mt is not None:
            kind = mt.lastgroup
            i = mt.end()
            if kind == "ident":
                word = mt.group(kind)
                append(Token(kind, word, word, mt.start(kind), None, word.upper()))
            elif kind == "op":
                word = mt.group(kind)
                append(Token(kind, word, word, mt.start(kind)))
            elif kind == "number":
                word = mt.group(kind)
                append(Token(kind, word, float(word) if "." in word else int(word),
                             mt.start(kind)))
            continue
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ParseError("unterminated comment", text=text, pos=i)
            i = j + 2
            continue
        if c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            toks.append(Token("ident", word, word, i, None, word.upper()))
            i = j
            continue
        if c == '"':
            j, word = _quoted(text, i, "quoted identifier")
            if not word:
                raise ParseError("empty quoted identifier", text=text, pos=i)
            toks.append(Token("ident", text[i : j + 1], word, i))
            i = j + 1
            continue
        if c == "'":
            j, word = _quoted(text, i, "string literal")
            toks.append(Token("string", text[i : j + 1], word, i))
            i = j + 1
            continue
        if _isdigit(c) or (c == "." and i + 1 < n and _isdigit(text[i + 1])):
            tok = _number(text, i)
            toks.append(tok)
            i += len(tok.text)
            continue
        for op in _OPS:
            if text.startswith(op, i):
                toks.append(Token("op", op, op, i))
                i += len(op)
                break
        else:
            raise ParseError(f"unexpected character {c!r}", text=text, pos=i)
    toks.append(Token("eof", "", None, n))
    return toks


def _quoted(text: str, i: int, what: str) -> tuple[int, str]:
    """The quoted text starting at ``text[i]`` (its quote character; a doubled quote inside
    stands for one): (position of the closing quote, the content). ``what`` names it in the
    error for a missing closing quote. O(length)."""
    q = text[i]
    n = len(text)
    j = i + 1
    buf = []
    while True:
        if j >= n:
            raise ParseError(f"unterminated {what}", text=text, pos=i)
        if text[j] == q:
            if j + 1 < n and text[j + 1] == q:
                buf.append(q)
                j += 2
                continue
            break
        buf.append(text[j])
        j += 1
    return j, "".join(buf)


def _number(text: str, i: int) -> Token:
    """The number token starting at ``text[i]``: digits, an optional fraction and exponent
    (a float then, else an int), and an optional unit of letters right after it (``5s``).
    O(length)."""
    n = len(text)
    j = i
    while j < n and _isdigit(text[j]):
        j += 1
    is_float = False
    if j < n and text[j] == "." and not text.startswith("..", j):
        is_float = True
        j += 1
        while j < n and _isdigit(text[j]):
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and _isdigit(text[k]):
            is_float = True
            j = k
            while j < n and _isdigit(text[j]):
                j += 1
    num_text = text[i:j]
    try:
        value: object = float(num_text) if is_float else int(num_text)
    except ValueError:  # more digits than int() converts
        raise ParseError(f"number too long ({len(num_text)} characters)", text=text,
                         pos=i) from None
    unit = None
    if j < n and (text[j].isalpha() or text[j] == "_"):
        k = j
        while k < n and text[k].isalpha():
            k += 1
        if k < n and (_isdigit(text[k]) or text[k] == "_"):
            raise ParseError(f"malformed number {text[i:k + 1]!r}", text=text, pos=i)
        unit = text[j:k]
        j = k
    return Token("number", text[i:j], value, i, unit)
