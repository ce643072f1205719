"""Extract and run the examples of README.md and docs/*.md (used by tests/e2e/test_docs_examples.py).

Conventions the documents follow (see docs/README.md):

* ```` ```console ```` blocks hold shell sessions: a line starting with ``$ `` is a command (a
  trailing ``\\`` continues it on the next line); the lines after it, up to the next command,
  are its expected output. Only ``replaydb ...`` commands run (in-process, through the CLI's
  ``main``, so one Spark session serves every ingest); others (``make``, ``pip``, ``git``) are
  shown for the reader and skipped.
* Expected output is checked for **shape**: when its first line is a table header (or the first
  line of any output), every word of it must appear in the actual output; a line ``...`` stands
  for anything. Expected output starting with ``error:`` means the command must fail with that
  message's first words.
* ```` ```python ```` blocks run top to bottom in one namespace per document, in the same working
  directory as its console commands (documents are self-contained: each prepares its own data).
* A block preceded by the line ``<!-- no-test -->`` is shown only (e.g. cluster URLs).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass
class Command:
    argv: list[str]
    line: int
    expected: list[str] = field(default_factory=list)

    @property
    def runs(self) -> bool:
        return bool(self.argv) and self.argv[0] == "replaydb"


@dataclass
class Block:
    kind: str  # console | python
    line: int
    text: str
    commands: list[Command] = field(default_factory=list)


def blocks(path: Path) -> list[Block]:
    """The runnable blocks of a markdown file, in order."""
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    skip_next = False
    while i < len(lines):
        m = FENCE.match(lines[i])
        if lines[i].strip() == "<!-- no-test -->":
            skip_next = True
        if not m:
            i += 1
            continue
        kind, start = m.group(1), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[start:j]
        if kind in ("console", "python") and not skip_next:
            b = Block(kind, start + 1, "\n".join(body))
            if kind == "console":
                b.commands = _commands(body, start + 1)
            out.append(b)
        skip_next = False
        i = j + 1
    return out


def _commands(body: list[str], first_line: int) -> list[Command]:
    cmds: list[Command] = []
    k = 0
    while k < len(body):
        line = body[k]
        if line.startswith("$ "):
            text, at = line[2:], first_line + k
            while text.endswith("\\") and k + 1 < len(body):
                k += 1
                text = text[:-1] + " " + body[k].strip()
            cmds.append(Command(shlex.split(text, comments=True), at))
        elif cmds:
            cmds[-1].expected.append(line)
        k += 1
    for c in cmds:
        while c.expected and not c.expected[-1].strip():
            c.expected.pop()
    return cmds


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    from replaydb.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse errors
            rc = int(exc.code or 0)
    return rc, out.getvalue(), err.getvalue()


def check_command(cmd: Command, where: str) -> None:
    rc, out, err = run_cli(cmd.argv[1:])
    shown = " ".join(cmd.argv)
    expected = [e for e in cmd.expected if e.strip()]
    if expected and expected[0].startswith("error:"):
        assert rc != 0, f"{where}: `{shown}` was documented to fail but succeeded"
        want = " ".join(expected[0].split()[:4])
        assert want in " ".join(err.split()), f"{where}: `{shown}` failed with {err!r}"
        return
    assert rc == 0, f"{where}: `{shown}` exited {rc}:\n{err}"
    if not expected or expected[0].strip() == "...":
        return
    words = [w for w in re.split(r"[\s|│]+", expected[0]) if w and w != "..."]
    actual = out + err
    missing = [w for w in words if w not in actual]
    assert not missing, (f"{where}: output of `{shown}` lacks {missing}; got:\n"
                         f"{actual[:2000]}")


def run_document(path: Path, workdir: Path) -> int:
    """Run every example of ``path`` in ``workdir``; returns how many commands/blocks ran."""
    import os

    ran = 0
    ns: dict[str, object] = {"__name__": "__docs__"}
    old = Path.cwd()
    os.chdir(workdir)
    try:
        for b in blocks(path):
            if b.kind == "python":
                code = compile(b.text, f"{path.name}:{b.line}", "exec")
                exec(code, ns)  # noqa: S102 - the documents' own examples, run as tests
                ran += 1
                continue
            for c in b.commands:
                if c.runs:
                    check_command(c, f"{path.name}:{c.line}")
                    ran += 1
    finally:
        os.chdir(old)
    return ran
