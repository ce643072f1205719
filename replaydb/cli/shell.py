"""``replaydb shell STORE``: an interactive session over one store, as ``duckdb`` and
``sqlite3`` offer one.

A statement is a query of any language, or ``EXPLAIN [ANALYZE] query``, ended by ``;`` at the
end of a line; it may span lines. Lines starting with ``.`` when no statement is open are
commands (``.help`` lists them). The store is opened once and the process stays warm, so every
query after the first pays neither the start-up nor the loading of compiled code. Errors are
printed (one line, a hint, the query position where known) and the session goes on; Ctrl-C
stops a running query or discards the statement being typed; Ctrl-D or ``.quit`` ends it.

On a terminal, lines are edited with readline and kept in a history file (one entry per
statement, multi-line ones joined), read at the start and written at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from replaydb.cli import open_store, store_argument
from replaydb.cli.output import MAX_ROWS_ON_TERMINAL, print_error, render_table
from replaydb.errors import ReplayDBError, UsageError

PROMPT, CONTINUE = "replaydb> ", "     ...> "
HISTORY_LENGTH = 1000
MODES = ("table", "csv", "json")
EXPLAIN_MODES = ("off", "on", "analyze")
_EXPLAIN = re.compile(r"\s*EXPLAIN(\s+ANALYZE)?\s+", re.IGNORECASE)


@dataclass
class Settings:
    """What the dot commands change: output ``mode``, ``max_rows`` in table mode (0: all),
    ``timer`` (print each statement's time), ``explain`` (off; on: print the plan instead of
    running; analyze: run and print the plan with actuals), and the query options ``plan``,
    ``stream`` and the fixed ones given on the command line (``options``)."""

    mode: str = "table"
    max_rows: int = MAX_ROWS_ON_TERMINAL
    timer: bool = False
    explain: str = "off"
    plan: str = "auto"
    stream: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def query_options(self) -> dict[str, Any]:
        return {**self.options, "plan": self.plan, "stream": self.stream}


class Shell:
    """One session: feed it lines (:meth:`feed`); it runs each complete statement against
    ``store`` and writes results to ``out`` and errors to ``err``."""

    def __init__(self, store: Any, out: TextIO, err: TextIO,
                 settings: Settings | None = None) -> None:
        self.store, self.out, self.err = store, out, err
        self.settings = settings or Settings()
        self.buffer: list[str] = []
        self.done = False

    @property
    def prompt(self) -> str:
        return CONTINUE if self.buffer else PROMPT

    def feed(self, line: str) -> str | None:
        """Take one input line; returns the statement it completed (for the history), if any."""
        if not self.buffer and line.strip().startswith("."):
            self.command(line.strip())
            return line.strip()
        if not self.buffer and not line.strip():
            return None
        self.buffer.append(line.rstrip("\n"))
        if not line.rstrip().endswith(";"):
            return None
        statement = "\n".join(self.buffer)
        self.buffer = []
        self.statement(statement.rstrip().rstrip(";"))
        return statement

    def discard(self) -> None:
        """Drop the statement being typed (Ctrl-C at the prompt)."""
        self.buffer = []

    # ------------------------------------------------------------------ statements
    def statement(self, text: str) -> None:
        if not text.strip():
            return
        m = _EXPLAIN.match(text)
        explain = self.settings.explain
        if m:
            explain, text = ("analyze" if m.group(1) else "on"), text[m.end():]
        self.guarded(lambda: self.explain(text, explain) if explain != "off" else self.run(text))

    def guarded(self, action: Callable[[], None]) -> None:
        """Run ``action``; a replaydb error or Ctrl-C is reported and the session goes on."""
        try:
            action()
        except ReplayDBError as exc:
            self.say_error(exc)
        except KeyboardInterrupt:
            print("interrupted", file=self.err)

    def say_error(self, exc: ReplayDBError) -> None:
        print_error(exc, self.err)

    def run(self, text: str) -> None:
        from replaydb.planner.query import run_query

        t0 = time.perf_counter()
        res = run_query(self.store, text, **self.settings.query_options())
        wall = time.perf_counter() - t0
        max_rows = self.settings.max_rows or None
        self.write(render_table(res.table, self.settings.mode, max_rows,
                                more=".maxrows 0 or .mode csv prints everything"))
        if self.settings.timer:
            self.time_line(wall, res.stats.get("timings", {}))

    def explain(self, text: str, mode: str) -> None:
        from replaydb.cli.explain_text import plan_tree
        from replaydb.planner.query import explain

        t0 = time.perf_counter()
        out = explain(self.store, text, analyze=mode == "analyze",
                      **self.settings.query_options())
        wall = time.perf_counter() - t0
        self.write(plan_tree(out))
        if self.settings.timer:
            self.time_line(wall, out.get("analyze", out).get("timings", {}))

    def time_line(self, wall: float, phases: dict[str, float]) -> None:
        parts = ", ".join(f"{k} {v:.3f} s" for k, v in phases.items()
                          if isinstance(v, int | float))
        self.write(f"time: {wall:.3f} s" + (f" ({parts})" if parts else ""))

    def write(self, text: str) -> None:
        self.out.write(text if text.endswith("\n") else text + "\n")
        self.out.flush()

    # ------------------------------------------------------------------ dot commands
    def command(self, line: str) -> None:
        name, _, arg = line[1:].partition(" ")
        handler = COMMANDS.get(name.lower())
        if handler is None:
            print(f"error: unknown command .{name} (.help lists them)", file=self.err)
            return
        try:
            handler[0](self, arg.strip())
        except UsageError as exc:
            self.say_error(exc)

    def cmd_help(self, arg: str) -> None:
        width = max(len(usage) for _, usage, _ in COMMANDS.values())
        lines = ["Statements: a query, or EXPLAIN [ANALYZE] query, ended by ';' (may span lines).",
                 "Commands:"]
        lines += [f"  {usage:<{width}}  {text}" for _, usage, text in COMMANDS.values()]
        self.write("\n".join(lines))

    def cmd_quit(self, arg: str) -> None:
        self.done = True

    def cmd_streams(self, arg: str) -> None:
        from replaydb.timeunits import describe_range

        stats = self.store.stats(arg or None)
        if not stats:
            self.write("no streams")
        for s in stats:
            span = describe_range(s["t_min"], s["t_max"], s["time_unit"]) if s["events"] \
                else "no time range"
            indexes = ", ".join(s["side_tables"]) or "none"
            self.write(f"{s['stream']}: {s['events']:,} events, {span}; indexes: {indexes}\n  "
                       + ", ".join(f"{k} {v}" for k, v in s["columns"].items()))

    def cmd_mode(self, arg: str) -> None:
        self.settings.mode = _choice(arg, MODES, ".mode")

    def cmd_maxrows(self, arg: str) -> None:
        if not arg.isdigit():
            raise UsageError(f".maxrows takes a number of rows (0: all), not {arg!r}")
        self.settings.max_rows = int(arg)

    def cmd_timer(self, arg: str) -> None:
        self.settings.timer = _choice(arg, ("on", "off"), ".timer") == "on"

    def cmd_explain(self, arg: str) -> None:
        self.settings.explain = _choice(arg, EXPLAIN_MODES, ".explain")

    def cmd_plan(self, arg: str) -> None:
        if not arg:
            raise UsageError(".plan takes a strategy (auto, replay, or the language's own)")
        self.settings.plan = arg

    def cmd_stream(self, arg: str) -> None:
        self.settings.stream = None if arg in ("", "none") else arg

    def cmd_read(self, arg: str) -> None:
        path = Path(arg).expanduser()
        if not path.is_file():
            raise UsageError(f".read: no file {arg!r}")
        feed_all(self, path.read_text(encoding="utf-8").splitlines(keepends=True))
        if self.buffer:
            print(f"error: {arg} ends inside a statement (no closing ';')", file=self.err)
            self.discard()

    def cmd_show(self, arg: str) -> None:
        s = self.settings
        self.write(f"mode {s.mode}, maxrows {s.max_rows}, timer {'on' if s.timer else 'off'}, "
                   f"explain {s.explain}, plan {s.plan}, stream {s.stream or '(from the query)'}")


def _choice(arg: str, choices: tuple[str, ...], command: str) -> str:
    if arg.lower() not in choices:
        raise UsageError(f"{command} takes one of {', '.join(choices)}, not {arg!r}")
    return arg.lower()


COMMANDS: dict[str, tuple[Callable[[Shell, str], None], str, str]] = {
    "help": (Shell.cmd_help, ".help", "this list"),
    "streams": (Shell.cmd_streams, ".streams [STREAM]", "streams, their events, span, indexes "
                                                        "and columns"),
    "mode": (Shell.cmd_mode, ".mode table|csv|json", "how results are printed"),
    "maxrows": (Shell.cmd_maxrows, ".maxrows N", "rows printed in table mode (0: all)"),
    "timer": (Shell.cmd_timer, ".timer on|off", "print each statement's time and its phases"),
    "explain": (Shell.cmd_explain, ".explain off|on|analyze",
                "print the plan of every query (analyze: run it and add the actuals)"),
    "plan": (Shell.cmd_plan, ".plan STRATEGY", "plan strategy (auto, replay, all, greedy, ...)"),
    "stream": (Shell.cmd_stream, ".stream NAME|none", "stream of queries that name none"),
    "read": (Shell.cmd_read, ".read FILE", "run the statements of a file"),
    "show": (Shell.cmd_show, ".show", "the current settings"),
    "quit": (Shell.cmd_quit, ".quit", "end the session (also .exit, Ctrl-D)"),
    "exit": (Shell.cmd_quit, ".exit", "end the session"),
}
"""Dot commands: name -> (handler, usage, description)."""


def feed_all(shell: Shell, lines: Iterable[str]) -> None:
    """Feed ``lines`` (a script, or standard input that is not a terminal) until the end or
    ``.quit``."""
    for line in lines:
        shell.feed(line)
        if shell.done:
            return


def interact(shell: Shell, history: Path | None) -> None:
    """The terminal loop: readline editing, the history file, Ctrl-C and Ctrl-D."""
    readline = _readline(history)
    shell.write("replaydb shell: statements end with ';', .help lists the commands, "
                ".quit or Ctrl-D ends")
    while not shell.done:
        try:
            line = input(shell.prompt)
        except EOFError:
            shell.write("")
            break
        except KeyboardInterrupt:
            shell.write("")
            shell.discard()
            continue
        lines_before = len(shell.buffer)
        statement = shell.feed(line)
        if readline is not None and statement and "\n" in statement:
            _join_history(readline, lines_before + 1, statement)
    if readline is not None and history is not None:
        try:
            readline.write_history_file(str(history))
        except OSError as exc:
            print(f"warning: history not saved to {history}: {exc}", file=shell.err)


def _readline(history: Path | None) -> Any:
    try:
        import readline
    except ImportError:  # pragma: no cover - platforms without readline
        return None
    readline.set_history_length(HISTORY_LENGTH)
    if history is not None and history.is_file():
        try:
            readline.read_history_file(str(history))
        except OSError:
            pass
    return readline


def _join_history(readline: Any, lines: int, statement: str) -> None:
    """Replace the last ``lines`` history entries (one statement typed over several lines)
    with the statement on one line."""
    n = readline.get_current_history_length()
    for pos in range(n - 1, max(n - lines, 0) - 1, -1):
        readline.remove_history_item(pos)
    readline.add_history(" ".join(part.strip() for part in statement.splitlines()))


def register(sub: argparse._SubParsersAction) -> None:
    from replaydb.cli import common
    from replaydb.cli.query_cmds import add_query_options

    p = common(sub.add_parser("shell", help="an interactive session over a store (queries "
                                             "end with ';', .help lists the commands)"))
    store_argument(p)
    add_query_options(p)
    p.add_argument("--mode", default="table", choices=list(MODES),
                   help="output format (--json is --mode json)")
    p.add_argument("--history", default=None, metavar="PATH",
                   help="history file (default: ~/.replaydb_history; '' keeps none)")
    p.set_defaults(handler=cmd_shell)


def cmd_shell(args: argparse.Namespace) -> int:
    from replaydb.cli.query_cmds import fixed_options

    store = open_store(args, read_only=True)
    settings = Settings(mode="json" if args.json else args.mode, plan=args.plan,
                        stream=args.stream, options=fixed_options(args))
    shell = Shell(store, sys.stdout, sys.stderr, settings)
    if sys.stdin.isatty():
        interact(shell, _history_path(args.history))
    else:
        feed_all(shell, sys.stdin)
        if shell.buffer:
            shell.statement("\n".join(shell.buffer).rstrip().rstrip(";"))
    return 0


def _history_path(arg: str | None) -> Path | None:
    if arg == "":
        return None
    return Path(arg).expanduser() if arg else Path(os.path.expanduser("~")) / ".replaydb_history"
