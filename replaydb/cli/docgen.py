"""Generate the CLI reference (``docs/cli.md``) from the argument parser itself.

``python -m replaydb.cli.docgen > docs/cli.md`` rewrites it; a test fails when the file is not
what this module produces, so the reference cannot drift from the CLI.
"""

from __future__ import annotations

import argparse
import sys


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _section(name: str, p: argparse.ArgumentParser, level: int) -> list[str]:
    p.prog = name
    p.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=100,
                                                            max_help_position=32)
    out = [f"{'#' * level} `{name}`", ""]
    if p.description:
        out += [p.description, ""]
    out += ["```", p.format_help().rstrip(), "```", ""]
    for sub_name, sub in _subparsers(p).items():
        out += _section(f"{name} {sub_name}", sub, level + 1)
    return out


def generate() -> str:
    from replaydb.cli import build_parser

    parser = build_parser()
    lines = [
        "# CLI reference",
        "",
        "Generated from the command line itself (`python -m replaydb.cli.docgen > docs/cli.md`);",
        "a test keeps this file current. Every command takes `--json` for machine-readable",
        "output; errors print one line plus a hint, and `--debug` shows the traceback.",
        "",
    ]
    lines += _section("replaydb", parser, 2)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(generate())
