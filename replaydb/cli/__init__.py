"""The ``replaydb`` command line.

Every command takes ``--json`` (machine-readable output on stdout). Errors print as one line plus a
hint on stderr and exit non-zero (2 for usage errors); ``--debug`` shows the traceback.
The CLI reference in ``docs/cli.md`` is generated from this parser (``replaydb help-all``) and a
test keeps it current.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from replaydb.errors import ReplayDBError

COMMANDS: dict[str, str] = {
    "stats": "store_cmds", "check": "store_cmds", "index": "store_cmds",
    "compact": "store_cmds", "vacuum": "store_cmds", "ingest": "ingest_cmd",
    "query": "query_cmds", "explain": "query_cmds", "shell": "shell",
    "datasets": "datasets_cmd", "calibrate": "calibrate_cmd",
}
"""Every command and the module of this package that registers it."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: every command's options, or with ``command`` only that command's
    (so running one command imports none of the other commands' modules)."""
    import importlib

    parser = argparse.ArgumentParser(
        prog="replaydb",
        description="An offline event store with an index-assisted query planner.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    names = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in names:
        importlib.import_module(f"replaydb.cli.{name}").register(sub)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options every command has."""
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    return p


def store_argument(p: argparse.ArgumentParser, help_text: str = "the store") -> None:
    """The ``store`` argument (a directory or an object-store URI) and the options of a store
    on an object store: repeatable ``--storage-option KEY=VALUE`` and the local cache's
    bounds."""
    p.add_argument("store", help=f"{help_text}: a directory, or an s3://BUCKET/PREFIX or "
                                 "az://CONTAINER/PREFIX URI")
    p.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an object store's setting, delta-rs's keys (e.g. "
                        "AWS_ENDPOINT_URL=http://127.0.0.1:9000); repeatable; default from "
                        "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, "
                        "AWS_ENDPOINT_URL; AZURE_STORAGE_ACCOUNT_NAME, "
                        "AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN, "
                        "AZURE_STORAGE_ENDPOINT)")
    p.add_argument("--cache-dir", default=None,
                   help="local cache of object-store stores (default $REPLAYDB_CACHE_DIR or "
                        "~/.cache/replaydb)")
    p.add_argument("--cache-size", default=None,
                   help="bound of that cache, e.g. 2GiB (default 4GiB)")


def open_store(args: argparse.Namespace, **kwargs: object) -> object:
    """The store ``args`` names (:func:`store_argument`), opened with ``kwargs``."""
    import replaydb
    from replaydb.store.location import parse_options

    options = parse_options(args.storage_option) if args.storage_option else None
    return replaydb.open(args.store, storage_options=options, cache_dir=args.cache_dir,
                         cache_size=args.cache_size, **kwargs)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_of(argv))
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return int(handler(args) or 0)
    except ReplayDBError as exc:
        if args.debug:
            raise
        from replaydb.cli.output import print_error

        print_error(exc, sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # an unexpected failure: one line, traceback only with --debug
        if args.debug:
            raise
        print(f"error: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("hint: rerun with --debug for the traceback, and please report it", file=sys.stderr)
        return 70


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
