"""The MATCH_RECOGNIZE guide's "What is rejected" section names every error the parser and the
binder can raise for a MATCH_RECOGNIZE query.

The raise sites are read from the source of the modules a MATCH_RECOGNIZE query passes through
while it is parsed and bound (a message is the first argument of ``QueryError``, ``ParseError``,
``self.error``, ``self.fail`` or ``_at``); the longest literal piece of each message must appear
in the guide's section. Sites marked ``pragma: no cover`` (internal invariants no query reaches)
are left out.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("planner/lang/match_recognize.py", "planner/lang/parser_base.py",
           "operators/pattern/lowering.py", "operators/pattern/measures.py",
           "operators/pattern/compile.py", "operators/pattern/automaton.py",
           "operators/exprcode/check.py", "operators/exprcode/typed.py")
RAISERS = {"QueryError", "ParseError", "error", "fail", "_at"}
SQL_ONLY_ELSEWHERE = ("negation", "negated", "partition contiguity", "x[..i-1]", "subscripted",
                      "'%' between integers", "exists only in MATCH_RECOGNIZE")
"""Messages of SASE+ constructs (negation, contiguity strategies, subscripts) and of the
integer machines, which no MATCH_RECOGNIZE query can reach."""


def section() -> str:
    text = (ROOT / "docs/match_recognize.md").read_text()
    start = text.index("## What is rejected")
    end = text.index("\n## ", start + 3)
    return text[start:end]


def message_skeletons() -> list[tuple[str, int, str]]:
    out = []
    for rel in MODULES:
        src = (ROOT / rel).read_text()
        lines = src.splitlines()
        for node in ast.walk(ast.parse(src)):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            arg = node.args[0]
            if name not in RAISERS or not isinstance(arg, ast.Constant | ast.JoinedStr):
                continue
            if any("pragma: no cover" in lines[i] for i in range(node.lineno - 1,
                                                                    node.end_lineno or 0)):
                continue
            if isinstance(arg, ast.Constant):
                text = str(arg.value)
            else:
                text = "".join(v.value if isinstance(v, ast.Constant) else "\x00"
                               for v in arg.values)
            out.append((rel, node.lineno, text))
    return out


def fragment(skeleton: str) -> str:
    """The longest literal piece of a message (placeholders split it), trimmed."""
    pieces = [p.strip(" :;,.()'") for p in skeleton.split("\x00")]
    return max(pieces, key=len)


def test_every_rejection_is_in_the_guide() -> None:
    doc = section()
    missing = []
    for rel, line, skel in message_skeletons():
        frag = fragment(skel)
        if len(frag) < 4 or any(s in skel for s in SQL_ONLY_ELSEWHERE):
            continue
        if frag not in doc:
            missing.append(f"{rel}:{line}: {frag!r}")
    assert not missing, "errors missing from docs/match_recognize.md's 'What is rejected':\n" \
        + "\n".join(missing)


def test_the_scan_finds_the_raise_sites() -> None:
    frags = {fragment(s) for _, _, s in message_skeletons()}
    assert "appears twice" not in frags  # a placeholder-built message is split, not matched
    assert any(re.search("reserved word", f) for f in frags)
    assert len(frags) > 40
